#!/usr/bin/env python3
"""check_deploy.py -- what deploy/ ships, checked offline with the tools
operators use, and against a real gateway:

- deploy/systemd/lockgate.service: `systemd-analyze verify` (with ExecStart
  pointed at the built binary: verify wants an executable there) and
  `systemd-analyze security --offline=yes`, whose exposure must stay "OK"
  (at most 2.0 of 10);
- deploy/prometheus/alerts.yaml: `promtool check rules`, `promtool test rules
  tests/deploy/alerts_test.yaml` (each alert fires on its trouble and stays
  quiet on a healthy twin), and every metric the rules name present in a
  real gateway's /metrics;
- that /metrics, after traffic on many routes, passes `promtool check
  metrics`.

promtool comes from Debian's prometheus package (scripts/promtool.sh).
Prints `deploy: N passed, M failed`."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pyharness import BUILD, ROOT, Count, Servers, http  # noqa: E402

count = Count("deploy")
check = count.check
UNIT = os.path.join(ROOT, "deploy/systemd/lockgate.service")
ALERTS = os.path.join(ROOT, "deploy/prometheus/alerts.yaml")
ALERTS_TEST = os.path.join(ROOT, "tests/deploy/alerts_test.yaml")


def run(*argv, stdin=None):
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def systemd_unit():
    text = open(UNIT).read()
    check("ExecStart=/usr/local/bin/lockgate\n" in text,
          "lockgate.service starts /usr/local/bin/lockgate (make install's PREFIX)")
    with tempfile.TemporaryDirectory() as d:
        unit = os.path.join(d, "lockgate.service")
        with open(unit, "w") as f:
            f.write(text.replace("/usr/local/bin/lockgate", os.path.join(BUILD, "lockgate")))
        rc, out = run("systemd-analyze", "verify", unit)
        check(rc == 0 and not out.strip(), f"systemd-analyze verify lockgate.service: {out}")
        rc, out = run("systemd-analyze", "security", "--offline=yes", unit)
        m = re.search(r"Overall exposure level for lockgate.service: ([0-9.]+) (\w+)", out)
        check(rc == 0 and m and float(m.group(1)) <= 2.0 and m.group(2) == "OK",
              f"systemd-analyze security: exposure {m.group(1) if m else out[-300:]}")


def prometheus(promtool, metrics_text):
    rc, out = run(promtool, "check", "rules", ALERTS)
    check(rc == 0, f"promtool check rules alerts.yaml: {out}")
    rc, out = run(promtool, "test", "rules", ALERTS_TEST)
    check(rc == 0 and "SUCCESS" in out, f"promtool test rules alerts_test.yaml: {out}")
    names = set(re.findall(r"\b(lockgate_[a-z_]+)", open(ALERTS).read()))
    missing = [n for n in sorted(names) if f"# TYPE {n} " not in metrics_text]
    check(names and not missing, f"every metric the alerts use is in /metrics (missing {missing})")
    alerts = re.findall(r"alert: (\w+)", open(ALERTS).read())
    tested = set(re.findall(r"alertname: (\w+)", open(ALERTS_TEST).read()))
    check(alerts and set(alerts) <= tested, f"every alert has a test ({set(alerts) - tested})")
    rc, out = run(promtool, "check", "metrics", stdin=metrics_text)
    check(rc == 0, f"promtool check metrics on a gateway's /metrics: {out}")


def gateway_metrics():
    """/metrics of a real gateway after locks, a wait that timed out, ids,
    a 404, a 400 and a readiness probe."""
    srv = Servers("deploy")
    try:
        rport, _, ok = srv.redis()
        port, _, _, ready = srv.gateway(redis_port=rport)
        check(ok and ready, "redis-server and a gateway started")
        http(port, "POST", "/v1/locks/deploy-a", body="{}")
        http(port, "POST", "/v1/locks/deploy-a", body='{"wait_ms":50}')
        http(port, "POST", "/v1/ids/deploy")
        http(port, "GET", "/v1/locks/deploy-none")
        http(port, "POST", "/v1/locks/deploy-b", body="{not json")
        http(port, "GET", "/readyz")
        return http(port, "GET", "/metrics")[2]
    finally:
        srv.stop()


def main():
    start = time.monotonic()
    systemd_unit()
    r = subprocess.run([os.path.join(ROOT, "scripts/promtool.sh")], capture_output=True, text=True)
    promtool = r.stdout.strip()
    if check(r.returncode == 0 and os.access(promtool, os.X_OK), f"a promtool: {r.stderr}"):
        prometheus(promtool, gateway_metrics())
    print(f"deploy: took {time.monotonic() - start:.1f} s")
    return count.summary()


if __name__ == "__main__":
    sys.exit(main())

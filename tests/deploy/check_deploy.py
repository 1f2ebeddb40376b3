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
  metrics`;
- deploy/kubernetes: rendered with `kubectl kustomize`, every object
  validated against the Kubernetes schemas (tests/deploy/k8s_validate.js,
  npm's kubernetes-models), the promises of the base checked on the
  rendered objects (replicas, non-root, read-only root, probes, preStop
  and grace, Secret files, PodDisruptionBudget, NetworkPolicy), and the
  Deployment's environment run for real: a gateway started with it (the
  address and the Redis host changed to loopback ones) logs in with the
  password file as the ACL user and is ready.

promtool comes from Debian's prometheus package (scripts/promtool.sh).
Prints `deploy: N passed, M failed`."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pyharness import (BUILD, ROOT, Count, Servers, free_port, http, redis_cmd,  # noqa: E402
                       wait_for)

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


# The base and its overlays (deploy/kubernetes-overlays/: a Redis Sentinel
# setup, a managed Redis over TLS), each rendered, validated and held to
# the base's promises.
KUSTOMIZATIONS = ["deploy/kubernetes", "deploy/kubernetes-overlays/sentinel",
                  "deploy/kubernetes-overlays/managed-tls"]


def kubernetes_objects(where):
    """where rendered and validated: the objects, or None."""
    here = os.path.join(ROOT, "tests/deploy")
    if not os.path.isdir(os.path.join(here, "node_modules")):
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=here,
                           capture_output=True, text=True)
        if not check(r.returncode == 0, f"npm install in tests/deploy: {r.stderr[-500:]}"):
            return None
    r = subprocess.run(["kubectl", "kustomize", os.path.join(ROOT, where)],
                       capture_output=True, text=True)
    if not check(r.returncode == 0 and r.stdout, f"kubectl kustomize {where}: {r.stderr}"):
        return None
    v = subprocess.run(["node", os.path.join(here, "k8s_validate.js")], input=r.stdout,
                       capture_output=True, text=True)
    check(v.returncode == 0, f"{where}: every object valid against the Kubernetes schemas: "
                             f"{v.stderr}")
    return json.loads(v.stdout or "[]")


def secret_file(c, pod, path):
    """1 when path lies in a Secret mounted read-only as a directory."""
    secrets = {v["name"] for v in pod.get("volumes", []) if "secret" in v}
    return any(m["name"] in secrets and m.get("readOnly") and "subPath" not in m
               and path.startswith(m["mountPath"] + "/") for m in c.get("volumeMounts", []))


def kubernetes_overlay(where, objs):
    """What each overlay adds, on its rendered objects."""
    by_kind = {o["kind"]: o for o in objs}
    pod = by_kind.get("Deployment", {}).get("spec", {}).get("template", {}).get("spec", {})
    c = (pod.get("containers") or [{}])[0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if where.endswith("sentinel"):
        sentinels = (env.get("LOCKGATE_SENTINELS") or "").split(",")
        check(len(sentinels) >= 3 and all(re.fullmatch(r"[\w.-]+:\d+", x) for x in sentinels)
              and env.get("LOCKGATE_SENTINEL_MASTER") and env.get("LOCKGATE_MIN_REPLICAS_ACK") == "1",
              f"{where}: three sentinels, a master name, a replica's acknowledgement ({env})")
    if where.endswith("managed-tls"):
        files = {k: v for k, v in env.items() if k.startswith("LOCKGATE_REDIS_TLS_")}
        check(env.get("LOCKGATE_REDIS", "").startswith("rediss://")
              and {"LOCKGATE_REDIS_TLS_CA", "LOCKGATE_REDIS_TLS_CERT", "LOCKGATE_REDIS_TLS_KEY"}
              <= set(files) and all(secret_file(c, pod, v) for v in files.values()),
              f"{where}: rediss://, and the CA, client certificate and key from a Secret's "
              f"files mounted read-only as a directory ({files})")
        egress = [p.get("port") for r in by_kind.get("NetworkPolicy", {}).get("spec", {})
                  .get("egress", []) for p in r.get("ports", [])]
        port = re.search(r":(\d+)(/|$)", env.get("LOCKGATE_REDIS", "").split("@")[-1])
        check(port and int(port.group(1)) in egress,
              f"{where}: the NetworkPolicy lets the pods reach the TLS port ({egress})")


def kubernetes(objs, where="deploy/kubernetes"):
    by_kind = {o["kind"]: o for o in objs}
    check({"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} <= set(by_kind),
          f"{where} renders a Deployment, Service, PDB, NetworkPolicy ({sorted(by_kind)})")
    dep = by_kind.get("Deployment", {})
    spec = dep.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    c = (pod.get("containers") or [{}])[0]
    sc, psc = c.get("securityContext", {}), pod.get("securityContext", {})
    check(spec.get("replicas", 0) >= 2, f"{where}: Deployment: replicas >= 2 ({spec.get('replicas')})")
    dockerfile = open(os.path.join(ROOT, "Dockerfile")).read()
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 10001
          and "USER 10001:10001" in dockerfile,
          f"{where}: Deployment: runAsNonRoot as uid 10001, the image's user")
    check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
          and sc.get("capabilities", {}).get("drop") == ["ALL"],
          f"{where}: container: read-only root, no privilege escalation, no capabilities ({sc})")
    probes = (c.get("livenessProbe", {}).get("httpGet", {}).get("path"),
              c.get("readinessProbe", {}).get("httpGet", {}).get("path"))
    check(probes == ("/healthz", "/readyz"), f"{where}: probes: liveness /healthz, readiness /readyz {probes}")
    pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    pre_s = int(pre[1]) if len(pre) == 2 and pre[0] == "sleep" else -1
    grace = pod.get("terminationGracePeriodSeconds", 30)
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    # After preStop, SIGTERM: served with /readyz failing for the shutdown
    # delay, then waiters answered 503 (whatever their wait_ms), in-flight
    # requests finished within 4 s and what Redis owes within 0.5 s more
    # (docs/operations.md, "Stopping").
    delay_s = int(env.get("LOCKGATE_SHUTDOWN_DELAY_MS") or 5000) / 1000
    check(pre_s > 0 and grace >= pre_s + delay_s + 4.5 + 1,
          f"{where}: preStop sleep {pre_s} s, the shutdown delay {delay_s} s, then up to 4.5 s "
          f"of stop, within the grace ({grace} s)")
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
    mounts = [m for m in c.get("volumeMounts", []) if m["name"] in secrets]
    pw = env.get("LOCKGATE_REDIS_PASSWORD_FILE", "")
    check(mounts and all(m.get("readOnly") and "subPath" not in m for m in mounts)
          and any(pw.startswith(m["mountPath"] + "/") for m in mounts),
          f"{where}: the Redis password is a Secret's file, mounted read-only as a directory ({pw})")
    usage = subprocess.run([os.path.join(BUILD, "lockgate"), "--help"], capture_output=True,
                           text=True).stdout
    unknown = [n for n in env if n not in usage]
    check(env and not unknown, f"{where}: every variable the Deployment sets is lockgate's "
                               f"({unknown})")
    for kind in ("Service", "PodDisruptionBudget"):
        sel = by_kind.get(kind, {}).get("spec", {}).get("selector", {})
        sel = sel.get("matchLabels", sel)
        check(sel and all(labels.get(k) == v for k, v in sel.items()),
              f"{where}: {kind} selects the Deployment's pods ({sel})")
    pdb = by_kind.get("PodDisruptionBudget", {}).get("spec", {})
    check(pdb.get("maxUnavailable") == 1 or pdb.get("minAvailable") == 1,
          f"{where}: PodDisruptionBudget keeps a replica serving ({pdb})")
    np_ = by_kind.get("NetworkPolicy", {}).get("spec", {})
    ports = [p.get("port") for rule in np_.get("ingress", []) for p in rule.get("ports", [])]
    check(all(labels.get(k) == v for k, v in np_.get("podSelector", {}).get("matchLabels", {}).items())
          and set(np_.get("policyTypes", [])) == {"Ingress", "Egress"} and ports == [8080],
          f"{where}: NetworkPolicy: the pods, ingress and egress, ingress on 8080 only ({ports})")
    return env


def kubernetes_env_runs(env):
    """The Deployment's environment, with loopback addresses, starts a
    gateway that logs in as the URL's user with the password file."""
    srv = Servers("deploy-k8s")
    try:
        rport, _, ok = srv.redis()
        user = re.match(r"redis://([^:@]+):@", env.get("LOCKGATE_REDIS", ""))
        pwfile = os.path.join(srv.dir, "password")
        with open(pwfile, "w") as f:
            f.write("k8s-Secret-pw\n")
        redis_cmd(rport, "ACL", "SETUSER", user.group(1) if user else "x", "on", ">k8s-Secret-pw",
                  "~*", "&*", "+@all")
        redis_cmd(rport, "ACL", "SETUSER", "default", "off")
        port = free_port()
        e = dict(os.environ, **env)
        e["LOCKGATE_LISTEN"] = f"127.0.0.1:{port}"
        e["LOCKGATE_REDIS"] = re.sub(r"@[^/]+", f"@127.0.0.1:{rport}", env["LOCKGATE_REDIS"])
        e["LOCKGATE_REDIS_PASSWORD_FILE"] = pwfile
        e["LOCKGATE_SHUTDOWN_DELAY_MS"] = "0"  # the stop below need not wait for a balancer
        log = os.path.join(srv.dir, "gw.log")
        with open(log, "w") as f:
            p = subprocess.Popen([os.path.join(BUILD, "lockgate")], env=e, stdout=f, stderr=f)
        srv.procs.append(p)
        ready = wait_for(lambda: http(port, "GET", "/readyz")[0] == 200, 10)
        st = http(port, "POST", "/v1/locks/k8s-env")[0]
        lines = open(log).read().splitlines()
        check(ok and ready and st == 201 and lines and all(x.startswith("{") for x in lines),
              f"the Deployment's environment runs: ready, a lock ({st}), JSON log lines")
    finally:
        srv.stop()


def sentinel_env_runs(env):
    """The Sentinel overlay's environment, its sentinels' addresses made
    one real sentinel on loopback (a master without replicas, so the
    replica acknowledgement is set to 0): the gateway finds the master
    through it, logs in as the URL's user and grants a lock."""
    srv = Servers("deploy-sentinel")
    try:
        rport, _, ok = srv.redis()
        redis_cmd(rport, "ACL", "SETUSER", "lockgate", "on", ">k8s-Secret-pw", "~*", "&*", "+@all")
        sport = free_port()
        conf = os.path.join(srv.dir, "sentinel.conf")
        master = env.get("LOCKGATE_SENTINEL_MASTER", "mymaster")
        with open(conf, "w") as f:
            f.write(f"port {sport}\nbind 127.0.0.1\ndir {srv.dir}\n"
                    f"sentinel monitor {master} 127.0.0.1 {rport} 1\n"
                    f"sentinel auth-user {master} lockgate\n"
                    f"sentinel auth-pass {master} k8s-Secret-pw\n")
        sp = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        srv.procs.append(sp)
        wait_for(lambda: redis_cmd(sport, "PING").startswith("+PONG"), 10)
        pwfile = os.path.join(srv.dir, "password")
        with open(pwfile, "w") as f:
            f.write("k8s-Secret-pw\n")
        port = free_port()
        e = dict(os.environ, **env)
        e.update(LOCKGATE_LISTEN=f"127.0.0.1:{port}", LOCKGATE_SENTINELS=f"127.0.0.1:{sport}",
                 LOCKGATE_REDIS_PASSWORD_FILE=pwfile, LOCKGATE_MIN_REPLICAS_ACK="0",
                 LOCKGATE_SHUTDOWN_DELAY_MS="0")
        log = os.path.join(srv.dir, "gw.log")
        with open(log, "w") as f:
            p = subprocess.Popen([os.path.join(BUILD, "lockgate")], env=e, stdout=f, stderr=f)
        srv.procs.append(p)
        ready = wait_for(lambda: http(port, "GET", "/readyz")[0] == 200, 10)
        st = http(port, "POST", "/v1/locks/k8s-sentinel")[0]
        check(ok and ready and st == 201,
              f"the Sentinel overlay's environment runs with a real sentinel: ready {ready}, "
              f"a lock ({st})")
    finally:
        srv.stop()


def main():
    start = time.monotonic()
    systemd_unit()
    r = subprocess.run([os.path.join(ROOT, "scripts/promtool.sh")], capture_output=True, text=True)
    promtool = r.stdout.strip()
    if check(r.returncode == 0 and os.access(promtool, os.X_OK), f"a promtool: {r.stderr}"):
        prometheus(promtool, gateway_metrics())
    for where in KUSTOMIZATIONS:
        objs = kubernetes_objects(where)
        if objs is None:
            continue
        env = kubernetes(objs, where)
        kubernetes_overlay(where, objs)
        if where == "deploy/kubernetes":
            kubernetes_env_runs(env)
        if where.endswith("sentinel"):
            sentinel_env_runs(env)
    print(f"deploy: took {time.monotonic() - start:.1f} s")
    return count.summary()


if __name__ == "__main__":
    sys.exit(main())

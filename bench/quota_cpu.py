#!/usr/bin/env python3
"""quota_cpu.py -- what a key's holds_at_once costs the gateway and Redis
per acquisition (#30): N acquire + release cycles on N names through one
keep-alive connection, once with a key without limits, once with a key
with "holds_at_once", against the same gateway and redis-server (started
here on free loopback ports).  Prints, for each, the gateway's CPU time
(user + system, /proc/<pid>/stat) and Redis's (INFO cpu: used_cpu_user +
used_cpu_sys) per cycle, and the EVALSHA calls Redis ran per cycle.

  bench/quota_cpu.py [N] [BUILD]        (default 20000, build)
"""
import hashlib, http.client, json, os, socket, subprocess, sys, tempfile, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
BUILD = sys.argv[2] if len(sys.argv) > 2 else "build"
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def gw_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK  # utime, stime


def redis_info(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "all"], capture_output=True,
                         text=True).stdout
    cpu = evals = 0.0
    for line in out.splitlines():
        if line.startswith("used_cpu_user:") or line.startswith("used_cpu_sys:"):
            cpu += float(line.split(":")[1])
        if line.startswith("cmdstat_evalsha:"):
            evals = float(line.split("calls=")[1].split(",")[0])
    return cpu, evals


def run(port, auth, tag):
    c = http.client.HTTPConnection("127.0.0.1", port)
    h = {"Authorization": auth, "Content-Type": "application/json"}
    for i in range(N):
        c.request("POST", "/v1/locks/%s-%d" % (tag, i), body=b'{"ttl_ms":30000}', headers=h)
        r = c.getresponse(); r.read()
        assert r.status == 201, r.status
        t = r.getheader("Lock-Token")
        c.request("DELETE", "/v1/locks/%s-%d" % (tag, i), headers=dict(h, **{"Lock-Token": t}))
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
    c.close()


def main():
    d = tempfile.mkdtemp(prefix="lockgate-quota-cpu-")
    secrets = {"plain": "p" * 43, "quota": "q" * 43}
    keys = [{"id": k, "sha256": hashlib.sha256(s.encode()).hexdigest(),
             "grants": [{"kind": "locks", "prefix": "", "access": "write"}]}
            for k, s in secrets.items()]
    keys[1]["limits"] = {"holds_at_once": 100}
    with open(os.path.join(d, "keys.json"), "w") as f:
        json.dump({"keys": keys}, f)
    rp, gp = free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rp), "--bind", "127.0.0.1", "--save",
                              "", "--dir", d], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    gw = subprocess.Popen([os.path.join(BUILD, "lockgate"), "--listen", "127.0.0.1:%d" % gp,
                           "--redis", "redis://127.0.0.1:%d" % rp, "--log-level", "warn",
                           "--workers", "1", "--auth-file", os.path.join(d, "keys.json")])
    try:
        for _ in range(100):
            try: socket.create_connection(("127.0.0.1", gp)).close(); break
            except OSError: time.sleep(0.1)
        for key in ("plain", "quota") * 2:  # warm-up round, then the measured one
            auth = "Bearer %s.%s" % (key, secrets[key])
            g0, (r0, e0) = gw_cpu(gw.pid), redis_info(rp)
            t0 = time.time()
            run(gp, auth, key)
            g1, (r1, e1) = gw_cpu(gw.pid), redis_info(rp)
            print("%-6s key: %d cycles in %.1f s; gateway CPU %.1f us, Redis CPU %.1f us, "
                  "%.2f EVALSHA per acquire + release"
                  % (key, N, time.time() - t0, (g1 - g0) / N * 1e6, (r1 - r0) / N * 1e6,
                     (e1 - e0) / N))
    finally:
        gw.terminate(); redis.terminate(); gw.wait(); redis.wait()


main()

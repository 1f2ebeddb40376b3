#!/usr/bin/env python3
"""sessions.py -- what sessions and multi-lock cost (issue 22), short.

Starts its own redis-server and gateway on free loopback ports, in a
temporary directory, and measures:

  renew    a session carrying N holds renewed by one PATCH, against N
           separate PATCHes of N ordinary locks: Redis time (INFO
           commandstats, usec in EVALSHA/EVAL) and gateway CPU (utime+stime
           from /proc), summed over the renewals, REPS rounds, median.
  multi    a 4-name multi-lock cycle (POST + DELETE /v1/locks) against 4
           single-lock cycles (4 POST + 4 DELETE), ROUNDS times on one
           keep-alive connection: Redis time and wall time per cycle.

  With --cluster, the renew rows only, against a Redis Cluster of three
  masters (no replicas) started the same way: Redis time is summed over
  the masters, and a session's renewal there is 1 + (slots holding its
  holds) script calls (README, "Sessions").

  bench/sessions.py [-n N] [--reps R] [--rounds K] [--build DIR] [--cluster]

Prints one Markdown table row per measurement.  Standard library only.
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


class Gw:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port)

    def do(self, method, path, body=None, headers=None):
        h = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body)
            h["Content-Type"] = "application/json"
        self.c.request(method, path, body=data, headers=h)
        r = self.c.getresponse()
        raw = r.read()
        return r.status, r.getheader("Lock-Token") or r.getheader("Session"), raw


def evalsha_stat(ports, field):
    """A field (usec, calls) of EVAL/EVALSHA in INFO commandstats, summed over ports."""
    total = 0
    for port in ports if isinstance(ports, list) else [ports]:
        out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "commandstats"],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("cmdstat_evalsha:") or line.startswith("cmdstat_eval:"):
                total += int(line.split(field + "=")[1].split(",")[0])
    return total


def redis_usec(ports):
    return evalsha_stat(ports, "usec")


def redis_calls(ports):
    return evalsha_stat(ports, "calls")


def cluster_port():
    # A cluster node's bus listens on port + 10000: both must be free.
    while True:
        p = free_port()
        if p < 55000:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p + 10000))
                s.close()
                return p
            except OSError:
                s.close()


def cpu_ms(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def reset(ports):
    for port in ports if isinstance(ports, list) else [ports]:
        subprocess.run(["redis-cli", "-p", str(port), "CONFIG", "RESETSTAT"],
                       capture_output=True)


def gateway_up(build, d, gport, procs, *redis_flags):
    """A gateway on gport (log in d) with these Redis flags, listening; it
    goes into procs.  Returns its process and an HTTP client of it."""
    gw = subprocess.Popen([f"{build}/lockgate", "--listen", f"127.0.0.1:{gport}", *redis_flags],
                          stderr=open(os.path.join(d, "gw.log"), "w"))
    procs.append(gw)
    wait_port(gport)
    return gw, Gw(gport)


def stop_all(procs, d):
    """Stops what a bench started (last first) and removes its directory."""
    for p in reversed(procs):
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(d, ignore_errors=True)


def measure(rport, pid, fn):
    reset(rport)
    c0, t0 = cpu_ms(pid), time.perf_counter()
    fn()
    t1, c1 = time.perf_counter(), cpu_ms(pid)
    return redis_usec(rport), c1 - c0, (t1 - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--cluster", action="store_true")
    a = ap.parse_args()
    if a.cluster:
        return cluster_main(a)
    d = tempfile.mkdtemp(prefix="lockgate-sessbench.")
    rport, gport = free_port(), free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL))
        wait_port(rport)
        gw, g = gateway_up(a.build, d, gport, procs, "--redis", f"redis://127.0.0.1:{rport}")

        # ---- renew: one session PATCH vs N lock PATCHes
        st, stok, _ = g.do("POST", "/v1/sessions", {"ttl_ms": 600000})
        for i in range(a.n):
            g.do("POST", f"/v1/locks/s{i}", {}, {"Session": stok})
        toks = []
        for i in range(a.n):
            st, t, _ = g.do("POST", f"/v1/locks/p{i}", {"ttl_ms": 600000})
            toks.append(t)
        sess, plain = [], []
        for _ in range(a.reps):
            sess.append(measure(rport, gw.pid,
                                lambda: g.do("PATCH", f"/v1/sessions/{stok}", {})))
            plain.append(measure(rport, gw.pid, lambda: [
                g.do("PATCH", f"/v1/locks/p{i}", {}, {"Lock-Token": toks[i]})
                for i in range(a.n)]))
        med = lambda rows, k: statistics.median(r[k] for r in rows)
        print(f"| renew {a.n} holds: one session PATCH | {med(sess, 0):.0f} us Redis "
              f"| {med(sess, 1):.1f} ms gateway CPU | {med(sess, 2):.2f} ms wall |")
        print(f"| renew {a.n} holds: {a.n} lock PATCHes | {med(plain, 0):.0f} us Redis "
              f"| {med(plain, 1):.1f} ms gateway CPU | {med(plain, 2):.1f} ms wall |")

        # ---- multi: one 4-name cycle vs 4 single cycles
        names = ["ma", "mb", "mc", "md"]

        def multi():
            for _ in range(a.rounds):
                st, t, _ = g.do("POST", "/v1/locks", {"names": names})
                g.do("DELETE", "/v1/locks", {"names": names}, {"Lock-Token": t})

        def singles():
            for _ in range(a.rounds):
                ts = [g.do("POST", f"/v1/locks/{n}", {})[1] for n in names]
                for n, t in zip(names, ts):
                    g.do("DELETE", f"/v1/locks/{n}", None, {"Lock-Token": t})

        m, s = [], []
        for _ in range(max(1, a.reps // 2)):
            m.append(measure(rport, gw.pid, multi))
            s.append(measure(rport, gw.pid, singles))
        r = a.rounds
        print(f"| 4-name multi-lock cycle | {med(m, 0) / r:.0f} us Redis "
              f"| {med(m, 1) / r * 1000:.0f} us gateway CPU | {med(m, 2) / r * 1000:.0f} us wall |")
        print(f"| 4 single-lock cycles | {med(s, 0) / r:.0f} us Redis "
              f"| {med(s, 1) / r * 1000:.0f} us gateway CPU | {med(s, 2) / r * 1000:.0f} us wall |")
    finally:
        stop_all(procs, d)


def cluster_up(build, d, ports, gport, procs):
    """A Redis Cluster of one master a port in d (no replicas) and a gateway in
    cluster mode on gport, both ready; what it starts goes into procs.
    Returns the gateway's process and an HTTP client of it."""
    for p in ports:
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", d, "--cluster-enabled", "yes",
             "--cluster-config-file", f"nodes-{p}.conf"], stdout=subprocess.DEVNULL))
    for p in ports:
        wait_port(p)
    subprocess.run(["redis-cli", "--cluster", "create"] +
                   [f"127.0.0.1:{p}" for p in ports] + ["--cluster-yes"],
                   capture_output=True, check=True)
    end = time.time() + 20
    while True:
        info = subprocess.run(["redis-cli", "-p", str(ports[0]), "CLUSTER", "INFO"],
                              capture_output=True, text=True).stdout
        if "cluster_state:ok" in info:
            break
        if time.time() > end:
            raise SystemExit("the cluster did not come up")
        time.sleep(0.1)
    gw, g = gateway_up(build, d, gport, procs, "--redis-cluster", f"127.0.0.1:{ports[0]}")
    end = time.time() + 20
    while g.do("GET", "/readyz")[0] != 200:
        if time.time() > end:
            raise SystemExit("the gateway did not get ready")
        time.sleep(0.1)
    return gw, g


def cluster_main(a):
    d = tempfile.mkdtemp(prefix="lockgate-sessbench.")
    ports, gport = [cluster_port() for _ in range(3)], free_port()
    procs = []
    try:
        gw, g = cluster_up(a.build, d, ports, gport, procs)
        st, stok, _ = g.do("POST", "/v1/sessions", {"ttl_ms": 600000})
        for i in range(a.n):
            st, _, raw = g.do("POST", f"/v1/locks/s{i}", {}, {"Session": stok})
            if st != 201:
                raise SystemExit(f"bound acquire: {st} {raw!r}")
        toks = []
        for i in range(a.n):
            st, t, _ = g.do("POST", f"/v1/locks/p{i}", {"ttl_ms": 600000})
            toks.append(t)
        # 20 session PATCHes a round, so gateway CPU shows above its 10 ms ticks.
        k = 20
        sess, plain, calls = [], [], []
        for _ in range(a.reps):
            r = measure(ports, gw.pid,
                        lambda: [g.do("PATCH", f"/v1/sessions/{stok}", {}) for _ in range(k)])
            sess.append((r[0] / k, r[1] / k, r[2] / k))
            calls.append(redis_calls(ports) / k)
            plain.append(measure(ports, gw.pid, lambda: [
                g.do("PATCH", f"/v1/locks/p{i}", {}, {"Lock-Token": toks[i]})
                for i in range(a.n)]))
        med = lambda rows, k: statistics.median(r[k] for r in rows)
        print(f"| cluster: renew {a.n} holds: one session PATCH "
              f"({statistics.median(calls):.0f} script calls) | {med(sess, 0):.0f} us Redis "
              f"| {med(sess, 1):.2f} ms gateway CPU | {med(sess, 2):.2f} ms wall |")
        print(f"| cluster: renew {a.n} holds: {a.n} lock PATCHes | {med(plain, 0):.0f} us Redis "
              f"| {med(plain, 1):.1f} ms gateway CPU | {med(plain, 2):.1f} ms wall |")
    finally:
        stop_all(procs, d)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""check_flags.py -- every flag the help texts name is parsed and acted on.

For lockctl, each option in its long and its short form (where it has
one) is used against a real gateway and its effect is checked (an
acquire in shared mode is shared, -n 3 prints three ids, --verbose
reports renewals, ...).  For lockgate, each flag starts a gateway (or
keygen) and its effect is checked from outside: the port it serves, the
keys in Redis, the start line, the answer to a request the flag changes.
Flags whose effect needs servers the suites named in DELEGATED start
(Sentinel, a Redis Cluster, TLS certificates, API keys) are exercised
there; this suite checks that those suites use them.  The first check is
that the help texts name exactly the flags of the two tables here, so a
new flag without a test fails.

Prints `flags: N passed, M failed`; exits 1 on a failure.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pyharness import BUILD, ROOT, Count, Servers, http, redis_cmd, wait_for  # noqa: E402

count = Count("flags")
check = count.check
LOCKGATE = os.path.join(BUILD, "lockgate")
LOCKCTL = os.path.join(BUILD, "lockctl")

# Flags exercised by a C suite, which must name them.
DELEGATED = {
    "--redis-cluster": "harness.c",  # every suite's LOCKGATE_TEST_CLUSTER run, test_cluster_mode
    "--sentinel": "test_sentinel.c",
    "--sentinel-master": "test_sentinel.c",
    "--auth-file": "test_access.c",
    "--max-connections-per-ip": "test_access.c",
    "--cors-origin": "test_http.c",
    "--header-timeout-ms": "test_slow.c",
    "--body-timeout-ms": "test_slow.c",
    "--tls-cert": "test_tls.c",
    "--tls-key": "test_tls.c",
    "--tls-client-ca": "test_tls.c",
    "--cacert": "test_tls.c",
    "--cert": "test_tls.c",
    "--key": "test_tls.c",
    "--api-key-file": "test_tls.c",
    "--id-jump-s": "test_idloss.c",  # every loss case; test_ids.c sets it by LOCKGATE_ID_JUMP_S
    "--accept-eviction-risk": "test_safety.c",
    "--max-lease-ms": "test_safety.c",
    "--stream-heartbeat-ms": "test_streams.c",  # heartbeats counted, and the silent host
    "--stream-user-timeout-ms": "test_streams.c",  # the silent host cut off
    "--value": "test_elections.c",  # lockctl elect
    "--stream": "test_lockctl.c",  # lockctl run --stream: kill -9, exit status, event: lost, --wait
    "--redis-tls-ca": "test_redis_tls.c",
    "--redis-tls-cert": "test_redis_tls.c",
    "--redis-tls-key": "test_redis_tls.c",
    "--redis-tls-server-name": "test_redis_tls.c",
    "--redis-tls-insecure": "test_redis_tls.c",
    "--sentinel-master-tls": "test_redis_tls.c",
}


def ctl(*args, env_url=None, **kw):
    env = dict(os.environ)
    env.pop("LOCKGATE_URL", None)
    env.pop("LOCKGATE_TOKEN", None)
    if env_url:
        env["LOCKGATE_URL"] = env_url
    env.update(kw.pop("env", {}))
    return subprocess.run([LOCKCTL] + list(args), capture_output=True, text=True, env=env,
                          timeout=kw.pop("timeout", 60), **kw)


def help_flags():
    sys.path.insert(0, os.path.join(ROOT, "tests", "docs"))
    import check_docs
    return check_docs.help_flags("lockgate"), check_docs.help_flags("lockctl")


# ---- lockctl --------------------------------------------------------------

def lockctl_flags(gw, url):
    """Each lockctl option, long and short, acted on.  Returns the flags
    tested."""
    done = set()

    def both(flags, fn):
        for f in flags:
            fn(f)
        done.update(flags)

    def url_flag(f):
        r = ctl(f, url, "id", "flags-url")
        check(r.returncode == 0 and r.stdout.strip().isdigit(), f"lockctl {f} URL reaches it: {r}")
    both(["-u", "--url"], url_flag)

    def verbose(f):
        r = ctl(f, "run", "--ttl", "600", "flags-verbose", "--", "sleep", "0.5", env_url=url)
        check(r.returncode == 0 and "extended lock 'flags-verbose'" in r.stderr,
              f"lockctl {f} reports renewals: {r}")
    both(["-v", "--verbose"], verbose)

    def help_flag(f):
        r = ctl(f)
        check(r.returncode == 0 and r.stdout.startswith("Usage: lockctl"), f"lockctl {f}: {r}")
    both(["-h", "--help"], help_flag)

    r = ctl("--version")
    check(r.returncode == 0 and r.stdout.startswith("lockctl "), f"lockctl --version: {r}")
    done.add("--version")

    def ttl(f):
        r = ctl("acquire", "flags-ttl" + f, f, "5s", env_url=url)
        ans = json.loads(r.stdout or "{}")
        check(r.returncode == 0 and ans.get("ttl_ms") == 5000, f"lockctl acquire {f} 5s: {r}")
        r = ctl("extend", "flags-ttl" + f, f, "7000", "--token", ans.get("token", ""), env_url=url)
        check(r.returncode == 0 and json.loads(r.stdout or "{}").get("ttl_ms") == 7000,
              f"lockctl extend {f} 7000: {r}")
    both(["-t", "--ttl"], ttl)

    def waiting(gauge_min):
        m = re.search(r"^lockgate_waiting_requests (\d+)", http(gw, "GET", "/metrics")[2], re.M)
        return m and int(m.group(1)) >= gauge_min

    def wait(f):
        name = "flags-wait" + f
        holder = json.loads(ctl("acquire", name, env_url=url).stdout or "{}")
        env = dict(os.environ, LOCKGATE_URL=url)
        waiter = subprocess.Popen([LOCKCTL, "acquire", name, f, "30s", "-q"], text=True, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        parked = wait_for(lambda: waiting(1))
        ctl("release", name, "--token", holder.get("token", ""), env_url=url)
        out, err = waiter.communicate(timeout=30)
        check(parked and waiter.returncode == 0,
              f"lockctl acquire {f} 30s waits for a busy lock and gets it on its release: "
              f"parked {parked}, exit {waiter.returncode} {err}")
    both(["-w", "--wait"], wait)

    r1 = ctl("acquire", "flags-shared", "--shared", env_url=url)
    r2 = ctl("acquire", "flags-shared", "--shared", env_url=url)
    check(r1.returncode == 0 and r2.returncode == 0 and
          json.loads(r2.stdout or "{}").get("mode") == "shared",
          f"lockctl --shared: two shared holders: {r1} {r2}")
    done.add("--shared")

    holder = json.loads(ctl("acquire", "flags-fair", env_url=url).stdout or "{}")
    env = dict(os.environ, LOCKGATE_URL=url)
    waiter = subprocess.Popen([LOCKCTL, "acquire", "flags-fair", "--fair", "--wait", "30s", "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    queued = wait_for(lambda: '"fair_waiters":1' in http(gw, "GET", "/v1/locks?prefix=flags-fair")[2])
    ctl("release", "flags-fair", "--token", holder.get("token", ""), env_url=url)
    out, err = waiter.communicate(timeout=30)
    check(queued and waiter.returncode == 0, f"lockctl --fair queues as a fair waiter and gets it: "
          f"queued {queued}, exit {waiter.returncode} {err}")
    done.add("--fair")

    r = ctl("acquire", "flags-owner", "--owner", "ops@host9", env_url=url)
    st = http(gw, "GET", "/v1/locks/flags-owner")
    check(r.returncode == 0 and '"owner":"ops@host9"' in st[2], f"lockctl --owner: {r} {st}")
    done.add("--owner")

    r = ctl("run", "flags-maxhold", "--ttl", "600", "--max-hold", "1s", "--grace", "200", "--",
            "sleep", "10", env_url=url, timeout=30)
    check(r.returncode == 76 and "--max-hold" in r.stderr,
          f"lockctl run --max-hold 1s stops the command (76): {r}")
    done.add("--max-hold")

    r = ctl("acquire", "flags-delay", "--ttl", "300", "--lock-delay", "20s", env_url=url)
    expired = wait_for(lambda: http(gw, "GET", "/v1/locks/flags-delay")[0] == 404)
    r2 = ctl("acquire", "flags-delay", "-q", env_url=url)  # the lock-delay holds it
    check(r.returncode == 0 and expired and r2.returncode == 75,
          f"lockctl --lock-delay 20s: busy after the lease's expiry: {r} {r2}")
    done.add("--lock-delay")

    # --grace: a command that ignores SIGTERM is killed after the grace
    t = time.monotonic()
    r = ctl("run", "flags-grace", "--ttl", "600", "--max-hold", "700", "--grace", "300", "--",
            "sh", "-c", "trap '' TERM; sleep 20", env_url=url, timeout=30)
    check(r.returncode == 76 and time.monotonic() - t < 10,
          f"lockctl run --grace 300 kills a command that ignores SIGTERM: {r}")
    done.add("--grace")

    sfile = os.path.join(gw_dir, "flags.session")
    r = ctl("run", "--session", sfile, "--ttl", "3s", "flags-session", "--", "sh", "-c",
            f"curl -s http://127.0.0.1:{gw}/v1/locks/flags-session", env_url=url)
    check(r.returncode == 0 and '"holders"' in r.stdout and os.path.exists(sfile),
          f"lockctl run --session FILE binds the lock to a session: {r}")
    done.add("--session")

    r = ctl("acquire", "flags-token", "--token", "flags-token-0123456789ab", env_url=url)
    check(r.returncode == 0 and "flags-token-0123456789ab" in r.stdout, f"acquire --token: {r}")
    r = ctl("release", "flags-token", "--token", "flags-token-0123456789ab", env_url=url)
    check(r.returncode == 0 and '"released":true' in r.stdout, f"release --token: {r}")
    done.add("--token")

    ctl("acquire", "flags-force", env_url=url)
    r = ctl("release", "--force", "flags-force", env_url=url)
    check(r.returncode == 0 and '"holders_ended":1' in r.stdout, f"release --force: {r}")
    done.add("--force")

    def count_flag(f):
        r = ctl("id", "flags-ids", f, "3", env_url=url)
        check(r.returncode == 0 and len(r.stdout.split()) == 3, f"lockctl id {f} 3: {r}")
    both(["-n", "--count"], count_flag)

    def quiet(f):
        ctl("acquire", "flags-quiet" + f, env_url=url)
        r = ctl("run", "flags-quiet" + f, f, "--", "true", env_url=url)
        check(r.returncode == 75 and r.stderr == "" and r.stdout == "",
              f"lockctl run {f} on a busy lock says nothing: {r}")
        r = ctl("acquire", "flags-quiet2" + f, f, env_url=url)
        check(r.returncode == 0 and re.fullmatch(r"[A-Za-z0-9_-]{22,128}\n", r.stdout),
              f"lockctl acquire {f} prints only the token: {r}")
    both(["-q", "--quiet"], quiet)
    return done


# ---- lockgate -------------------------------------------------------------

def start_line(log):
    return wait_for(lambda: "lockgate listening" in open(log).read(), 10) and open(log).read()


def lockgate_flags(srv, rport):
    done = set()

    port, _, log, ok = srv.gateway(redis_port=rport)
    check(ok and http(port, "GET", "/healthz")[0] == 200, "--listen: served on that address")
    check(ok and f"Redis 127.0.0.1:{rport}" in start_line(log), "--redis: that Redis")
    done |= {"--listen", "--redis"}

    port, p, log, ok = srv.gateway("--key-prefix", "flagsx:", redis_port=rport)
    http(port, "POST", "/v1/locks/prefixed")
    check(ok and "flagsx:lock:{prefixed}" in redis_cmd(rport, "KEYS", "flagsx:*"),
          "--key-prefix: the lock's key carries it")
    srv.stop(p)
    done.add("--key-prefix")

    for f in ("--workers", "--threads"):
        port, p, log, ok = srv.gateway(f, "3", redis_port=rport)
        check(ok and "3 workers" in start_line(log), f"{f} 3: three workers")
        srv.stop(p)
        done.add(f)

    port, p, log, ok = srv.gateway("--log-level", "warn", redis_port=rport)
    time.sleep(0.3)
    check(ok and "lockgate listening" not in open(log).read(),
          "--log-level warn: no info start line")
    srv.stop(p)
    done.add("--log-level")

    # --log-format json (and its env twin): every line of the log, from the
    # start to the stop, is one JSON object with time, level, message and
    # fields; the text lines' facts (the start line's Redis) are in it.
    env = dict(os.environ, LOCKGATE_LOG_FORMAT="json")
    for how, flags, env_ in (("--log-format json", ("--log-format", "json"), None),
                             ("LOCKGATE_LOG_FORMAT=json", (), env)):
        port, p, log, ok = srv.gateway("--log-level", "debug", *flags, redis_port=rport, env=env_)
        http(port, "POST", "/v1/locks/flags-json")
        http(port, "GET", "/v1/locks/no%2Fname")
        p.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP" in open(log).read(), 5)
        srv.stop(p)
        lines = open(log).read().splitlines()
        bad = []
        for line in lines:
            try:
                o = json.loads(line)
                if not (isinstance(o, dict) and {"time", "level", "message", "fields"} <= set(o)
                        and isinstance(o["fields"], dict) and "component" in o["fields"]):
                    bad.append(line)
            except ValueError:
                bad.append(line)
        start = [json.loads(x) for x in lines if "lockgate listening" in x and x not in bad]
        check(ok and len(lines) >= 4 and not bad and start
              and f"Redis 127.0.0.1:{rport}" in start[0]["message"],
              f"{how}: every one of {len(lines)} lines a JSON object ({bad[:2]})")
    done.add("--log-format")

    big = {"X-Big": "a" * 5000}
    port, p, log, ok = srv.gateway("--connection-memory-kib", "16", redis_port=rport)
    check(ok and http(port, "GET", "/healthz", headers=big)[0] == 200,
          "--connection-memory-kib 16: a 5000-byte header fits (431 by default)")
    srv.stop(p)
    done.add("--connection-memory-kib")

    port, p, log, ok = srv.gateway("--id-epoch", "2020-01-01T00:00:00Z", redis_port=rport)
    st, _, body = http(port, "GET", "/v1/ids/flags", headers={"Accept": "text/plain"})
    secs = (int(body.strip()) >> 32) if st == 200 else 0
    check(ok and abs(secs - (time.time() - 1577836800)) < 120,
          f"--id-epoch 2020-01-01: an id's seconds count from it ({secs})")
    srv.stop(p)
    done.add("--id-epoch")

    port, p, log, ok = srv.gateway("--id-namespaces", "16", redis_port=rport)
    for i in range(20):
        http(port, "POST", f"/v1/ids/flags-ns-{i}")
    m = re.search(r"^lockgate_id_namespaces_evicted_total (\d+)", http(port, "GET", "/metrics")[2],
                  re.M)
    check(ok and m and int(m.group(1)) >= 4, "--id-namespaces 16: 20 namespaces evict 4 or more")
    srv.stop(p)
    done.add("--id-namespaces")

    port, p, log, ok = srv.gateway("--liveness-ttl-ms", "900", redis_port=rport)
    # Its field of the liveness hash (lockgate:gw) holds the end of its
    # liveness, Redis's clock in ms: at most 900 ms ahead of Redis's now.
    gid = re.search(r"liveness: gateway id (\S+),", open(log).read())
    left = []
    if gid:
        end = re.findall(r"\r\n(\d+)\r\n", redis_cmd(rport, "HGET", "lockgate:gw", gid.group(1)))
        now = re.findall(r"\r\n(\d+)\r\n", redis_cmd(rport, "TIME"))
        if end and len(now) == 2:
            left = [int(end[0]) - (int(now[0]) * 1000 + int(now[1]) // 1000)]
    check(ok and left and all(0 < t <= 900 for t in left),
          f"--liveness-ttl-ms 900: the gateway's liveness left in Redis ({left})")
    srv.stop(p)
    done.add("--liveness-ttl-ms")

    # SIGTERM: /readyz fails at once, requests are still served for the
    # delay, then the gateway exits (tests/rolling runs it behind HAProxy).
    port, p, log, ok = srv.gateway("--shutdown-delay-ms", "800", redis_port=rport)
    t = time.monotonic()
    p.send_signal(signal.SIGTERM)
    left = wait_for(lambda: http(port, "GET", "/readyz")[0] == 503, 5)
    ready_code = http(port, "GET", "/readyz")[2]
    served = http(port, "POST", "/v1/locks/flags-leaving")
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
    took = time.monotonic() - t
    check(ok and left and "shutting_down" in ready_code and served[0] == 201
          and served[1].get("Connection", "").lower() == "close" and 0.75 <= took < 6,
          f"--shutdown-delay-ms 800: /readyz 503 ({ready_code[:80]}), a lock still granted "
          f"({served[0]}, Connection: {served[1].get('Connection')}), exit after {took:.2f} s")
    done.add("--shutdown-delay-ms")

    # No replica: an acquire is given back and answered 503 once the WAIT
    # times out, after --replica-ack-timeout-ms.
    port, p, log, ok = srv.gateway("--min-replicas-ack", "1", "--replica-ack-timeout-ms", "1500",
                                   redis_port=rport)
    t = time.monotonic()
    st = http(port, "POST", "/v1/locks/flags-ack")[0]
    took = time.monotonic() - t
    check(ok and st == 503, f"--min-replicas-ack 1 without replicas: 503 ({st})")
    check(took >= 1.4, f"--replica-ack-timeout-ms 1500: the WAIT took {took:.2f} s")
    srv.stop(p)
    done |= {"--min-replicas-ack", "--replica-ack-timeout-ms"}

    # A frozen Redis: a request fails after --redis-timeout-ms, not the
    # default 2000.
    fport, fproc, _ = srv.redis()
    port, p, log, ok = srv.gateway("--redis-timeout-ms", "200", redis_port=fport)
    fproc.send_signal(signal.SIGSTOP)
    t = time.monotonic()
    st = http(port, "POST", "/v1/locks/flags-frozen")[0]
    took = time.monotonic() - t
    fproc.send_signal(signal.SIGCONT)
    check(ok and st == 503 and took < 1.9,
          f"--redis-timeout-ms 200: 503 after {took:.2f} s ({st}) with Redis frozen (default: 2 s)")
    srv.stop(p)
    done.add("--redis-timeout-ms")

    # --max-connections 16 (the least) with one worker: a 17th connection
    # is not served.
    port, p, log, ok = srv.gateway("--max-connections", "16", "--workers", "1", redis_port=rport)
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(16)]
    for s in held:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(4096)
    extra = socket.create_connection(("127.0.0.1", port))
    extra.settimeout(3)
    try:
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = extra.recv(4096)
    except OSError:
        answer = b""
    check(ok and not answer.startswith(b"HTTP/1.1 200"),
          f"--max-connections 16: a 17th connection is not served ({answer[:20]!r})")
    for s in held + [extra]:
        s.close()
    srv.stop(p)
    done.add("--max-connections")

    # A Redis whose default user wants a password, given only in a file.
    aport, aproc, _ = srv.redis()
    redis_cmd(aport, "CONFIG", "SET", "requirepass", "flags-file-pw")
    pwfile = os.path.join(srv.dir, "redis-password")
    with open(pwfile, "w") as f:
        f.write("flags-file-pw\n")
    port, p, log, ok = srv.gateway("--redis-password-file", pwfile, redis_port=aport)
    st = http(port, "POST", "/v1/locks/flags-pwfile")[0]
    check(ok and st == 201 and "flags-file-pw" not in open(log).read(),
          f"--redis-password-file: AUTH with the file's password ({st}), not logged")
    srv.stop(p)
    srv.stop(aproc)
    done.add("--redis-password-file")

    # Quorum: three masters, one killed; the default quorum (2) grants,
    # --quorum 3 cannot.
    masters = [srv.redis() for _ in range(3)]
    urls = ",".join(f"redis://127.0.0.1:{m[0]}" for m in masters)
    port2, p2, _, ok2 = srv.gateway("--redis", urls)
    port3, p3, _, ok3 = srv.gateway("--redis", urls, "--quorum", "3")
    srv.stop(masters[2][1])
    st2 = http(port2, "POST", "/v1/locks/flags-q")[0]
    st3 = http(port3, "POST", "/v1/locks/flags-q3")[0]
    check(ok2 and ok3 and st2 == 201 and st3 == 503,
          f"--quorum 3 of 3 with one master down: 503 ({st3}); a majority: 201 ({st2})")
    srv.stop(p2)
    srv.stop(p3)
    done.add("--quorum")

    r = subprocess.run([LOCKGATE, "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--listen" in r.stdout, "lockgate --help")
    r = subprocess.run([LOCKGATE, "--version"], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.startswith("lockgate"), f"lockgate --version: {r}")
    done |= {"--help", "--version"}

    r = subprocess.run([LOCKGATE, "keygen", "flags-key", "--grant", "locks:a-:write"],
                       capture_output=True, text=True)
    entry = json.loads(r.stdout[r.stdout.find("{"):] or "{}") if r.returncode == 0 else {}
    check(entry.get("grants") == [{"kind": "locks", "prefix": "a-", "access": "write"}],
          f"lockgate keygen --grant: the grant in the entry: {r}")
    done.add("--grant")
    return done


def main():
    global gw_dir
    start = time.monotonic()
    in_gate, in_ctl = help_flags()
    srv = Servers("flags")
    gw_dir = srv.dir
    try:
        rport, _, ok = srv.redis()
        port, _, _, ready = srv.gateway(redis_port=rport)
        if check(ok and ready, "redis-server and a gateway started"):
            tested_ctl = lockctl_flags(port, f"http://127.0.0.1:{port}")
            tested_gate = lockgate_flags(srv, rport)
            for binary, named, tested in (("lockgate", in_gate, tested_gate),
                                          ("lockctl", in_ctl, tested_ctl)):
                for f in sorted(named - tested):
                    suite = DELEGATED.get(f)
                    src = suite and open(os.path.join(ROOT, "tests", "integration", suite)).read()
                    check(src and f in src, f"{binary} {f}: no test here, and "
                          f"{suite or 'no suite in DELEGATED'} does not use it")
                for f in sorted(tested - named):
                    check(False, f"{binary} {f} is tested but no help text names it")
    finally:
        srv.stop()
    print(f"flags: took {time.monotonic() - start:.1f} s", file=sys.stderr)
    return count.summary()


gw_dir = None
if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""check_rolling.py -- a rolling restart loses nothing (#31).

Two gateways behind Debian's HAProxy (the configuration docs/operations.md
recommends: /readyz health checks, `retry-on conn-failure 503`,
`option redispatch`), one Redis, clients taking and releasing a few
contended locks with wait_ms, so that parked waiters are there at every
stop.  The gateways are restarted one after the other, ROUNDS times, each
with SIGTERM and --shutdown-delay-ms: /readyz fails at once, HAProxy takes
the gateway out, its parked waiters are answered 503 with Retry-After
after the delay, and the clients retry as clients.md says (after
Retry-After, through the proxy, so on the other gateway).

At the end every client got an answer to every request (no connection
error, no 502/504), no grant was doubled (each name has at most one holder
at any moment, by the clients' own books, and every release of a held
token is 200, never 409 not_owner), none was lost (every name is free once
the clients stop), and each name's fences only grew.

Prints `rolling: N passed, M failed`.  ROLLING_ROUNDS (default 2) and
ROLLING_CLIENTS (default 8) change the load."""
import http.client as httpc
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pyharness import BUILD, Count, Servers, free_port, http, wait_for  # noqa: E402

count = Count("rolling")
check = count.check
ROUNDS = int(os.environ.get("ROLLING_ROUNDS", "2"))
CLIENTS = int(os.environ.get("ROLLING_CLIENTS", "8"))
# Busy names, held 20 ms, and one held 1.5 s, whose waiters are still
# parked when a gateway's delay ends.
NAMES = ["rolling-a", "rolling-b", "rolling-c", "rolling-slow"]
SLOW = "rolling-slow"
DELAY_MS = 1000  # --shutdown-delay-ms: over HAProxy's check interval x fall, with margin
TTL_MS = 10000   # a lost grant would keep its name held this long: seen at the end


class Books:
    """What the clients saw, under one lock: who holds each name now, its
    last fence, and every anomaly."""

    def __init__(self):
        self.mu = threading.Lock()
        self.holder = {n: None for n in NAMES}
        self.fence = {n: 0 for n in NAMES}
        self.errors = []
        self.grants = 0
        self.retried_503 = 0
        self.statuses = {}

    def error(self, what):
        with self.mu:
            self.errors.append(what)

    def granted(self, name, token, fence):
        with self.mu:
            self.grants += 1
            if self.holder[name] is not None:
                self.errors.append(f"doubled grant: {name} to {token} while {self.holder[name]} "
                                   "holds it")
            if fence <= self.fence[name]:
                self.errors.append(f"fence of {name} went from {self.fence[name]} to {fence}")
            self.holder[name] = token
            self.fence[name] = max(self.fence[name], fence)

    def releasing(self, name, token):
        with self.mu:
            if self.holder[name] == token:
                self.holder[name] = None

    def saw(self, status):
        with self.mu:
            self.statuses[status] = self.statuses.get(status, 0) + 1


def call(conn_box, port, method, path, body=None, headers=None):
    """One request on the client's kept-alive connection to HAProxy:
    (status, headers, json or None); a connection error raises."""
    if conn_box[0] is None:
        conn_box[0] = httpc.HTTPConnection("127.0.0.1", port, timeout=30)
    c = conn_box[0]
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers=dict(headers or {}, **({"Content-Type": "application/json"}
                                                   if body is not None else {})))
        r = c.getresponse()
        text = r.read().decode()
        if r.getheader("Connection", "").lower() == "close":
            c.close()
            conn_box[0] = None
    except Exception:
        c.close()
        conn_box[0] = None
        raise
    try:
        return r.status, r, json.loads(text) if text else None
    except ValueError:
        return r.status, r, None


def client(i, port, books, stop):
    conn = [None]
    k = i
    while not stop.is_set():
        name = SLOW if i < 3 else NAMES[k % (len(NAMES) - 1)]
        k += 1
        # acquire, retrying on 503 after Retry-After, and on 409 (its wait ran out)
        while not stop.is_set():
            try:
                st, r, b = call(conn, port, "POST", f"/v1/locks/{name}",
                                {"ttl_ms": TTL_MS, "wait_ms": 8000 if name == SLOW else 3000})
            except Exception as e:  # noqa: BLE001
                books.error(f"client {i}: connection error on acquire of {name}: {e!r}")
                time.sleep(0.1)
                continue
            books.saw(st)
            if st == 201:
                books.granted(name, b["token"], b["fence"])
                break
            if st == 503:
                with books.mu:
                    books.retried_503 += 1
                if not r.getheader("Retry-After"):
                    books.error(f"client {i}: a 503 without Retry-After: {b}")
                time.sleep(float(r.getheader("Retry-After", "1")))
                continue
            if st == 409 and b and b.get("code") == "lock_busy":
                continue
            books.error(f"client {i}: acquire of {name} answered {st} {b}")
            time.sleep(0.1)
        else:
            return
        time.sleep(1.5 if name == SLOW else 0.02)  # hold it
        token = b["token"]
        books.releasing(name, token)
        while True:
            try:
                st, r, rb = call(conn, port, "DELETE", f"/v1/locks/{name}",
                                 headers={"Lock-Token": token})
            except Exception as e:  # noqa: BLE001
                books.error(f"client {i}: connection error on release of {name}: {e!r}")
                time.sleep(0.1)
                continue
            books.saw(st)
            if st == 503:
                time.sleep(float(r.getheader("Retry-After", "1")))
                continue
            if st != 200:
                books.error(f"client {i}: release of {name} ({token}) answered {st} {rb}")
            break


class Gateway:
    def __init__(self, servers, redis_port, port):
        self.servers, self.redis_port, self.port, self.p = servers, redis_port, port, None
        self.log = os.path.join(servers.dir, f"gateway-{port}.log")

    def start(self):
        env = dict(os.environ, LOCKGATE_SHUTDOWN_DELAY_MS=str(DELAY_MS))
        with open(self.log, "a") as f:
            self.p = subprocess.Popen(
                [os.path.join(BUILD, "lockgate"), "--listen", f"127.0.0.1:{self.port}",
                 "--redis", f"redis://127.0.0.1:{self.redis_port}", "--workers", "2"],
                stdout=f, stderr=f, env=env)
        self.servers.procs.append(self.p)
        return wait_for(lambda: ready(self.port), seconds=10)

    def waiting(self):
        try:
            _, _, text = http(self.port, "GET", "/metrics", timeout=2)
        except Exception:  # noqa: BLE001
            return 0
        for line in text.splitlines():
            if line.startswith("lockgate_waiting_requests "):
                return int(float(line.split()[1]))
        return 0


def ready(port):
    try:
        return http(port, "GET", "/readyz", timeout=2)[0] == 200
    except Exception:  # noqa: BLE001
        return False


def haproxy_state(stats_port):
    """{server name: status} from HAProxy's CSV stats."""
    try:
        _, _, text = http(stats_port, "GET", "/stats;csv", timeout=2)
    except Exception:  # noqa: BLE001
        return {}
    out = {}
    for line in text.splitlines():
        f = line.split(",")
        if len(f) > 17 and f[0] == "lockgate" and f[1] not in ("BACKEND", "FRONTEND"):
            out[f[1]] = f[17]
    return out


HAPROXY = """global
  maxconn 2000
defaults
  mode http
  timeout connect 2s
  timeout client 330s
  timeout server 330s
  timeout http-request 15s
  # Re-send only what never ran: a connection that failed. Never
  # empty-response, response-timeout, junk-response or all-retryable-errors:
  # those re-send a POST or DELETE that may have run (docs/operations.md).
  # (503 would be safe too; it is left to the clients here, so that their
  # retry after Retry-After is what is tested.)
  retries 3
  retry-on conn-failure
  option redispatch 1
frontend in
  bind 127.0.0.1:{front}
  default_backend lockgate
backend lockgate
  option httpchk GET /readyz
  timeout check 2s
  default-server inter 100ms fall 2 rise 1
  server g1 127.0.0.1:{g1} check
  server g2 127.0.0.1:{g2} check
listen stats
  bind 127.0.0.1:{stats}
  stats enable
  stats uri /stats
"""


def main():
    servers = Servers("rolling")
    try:
        redis_port, _, ok = servers.redis()
        check(ok, "redis-server started")
        gws = [Gateway(servers, redis_port, free_port()) for _ in range(2)]
        for g in gws:
            check(g.start(), f"gateway on {g.port} ready")
        front, stats = free_port(), free_port()
        conf = os.path.join(servers.dir, "haproxy.cfg")
        with open(conf, "w") as f:
            f.write(HAPROXY.replace("{front}", str(front)).replace("{stats}", str(stats))
                    .replace("{g1}", str(gws[0].port)).replace("{g2}", str(gws[1].port)))
        with open(os.path.join(servers.dir, "haproxy.out"), "w") as f:
            hp = subprocess.Popen(["haproxy", "-db", "-f", conf], stdout=f, stderr=f)
        servers.procs.append(hp)
        check(wait_for(lambda: haproxy_state(stats) == {"g1": "UP", "g2": "UP"}, seconds=10),
              f"haproxy sees both gateways up: {haproxy_state(stats)}")

        books, stop = Books(), threading.Event()
        threads = [threading.Thread(target=client, args=(i, front, books, stop), daemon=True)
                   for i in range(CLIENTS)]
        for t in threads:
            t.start()
        t0 = time.time()
        stops = 0
        for rnd in range(ROUNDS):
            for gi, g in enumerate(gws):
                # parked waiters on the gateway about to stop
                check(wait_for(lambda: g.waiting() > 0, seconds=10),
                      f"round {rnd}: waiters parked on g{gi + 1} before its stop")
                grants_before = books.grants
                g.p.send_signal(signal.SIGTERM)
                try:
                    rc = g.p.wait(15)
                except subprocess.TimeoutExpired:
                    g.p.kill()
                    rc = -1
                stops += 1
                check(rc == 0, f"round {rnd}: g{gi + 1} exited 0 (got {rc})")
                check(g.start(), f"round {rnd}: g{gi + 1} back and ready")
                check(wait_for(lambda: haproxy_state(stats).get(f"g{gi + 1}") == "UP", seconds=10),
                      f"round {rnd}: haproxy has g{gi + 1} up again")
                check(wait_for(lambda: books.grants > grants_before + 5, seconds=10),
                      f"round {rnd}: grants go on after g{gi + 1}'s restart")
        stop.set()
        for t in threads:
            t.join(20)
        check(not any(t.is_alive() for t in threads), "every client finished its last request")
        took = time.time() - t0
        # No lost grant: every name is free once the clients are done.
        for n in NAMES:
            st = http(front, "GET", f"/v1/locks/{n}")[0]
            check(st == 404, f"{n} is free at the end (GET answered {st}): no grant was lost")
        for e in books.errors[:20]:
            print("   ", e)
        check(not books.errors, f"{len(books.errors)} anomalies (connection errors, doubled or "
                                "lost grants, fences going back, releases not 200)")
        check(books.grants > 50, f"{books.grants} grants")
        check(books.statuses.get(503, 0) > 0, "parked waiters were answered 503 (and retried)")
        # Every stop answered its parked waiters 503 (counted on the gateways' logs).
        shut = sum(open(g.log).read().count("SIGTERM received: /readyz fails") for g in gws)
        check(shut == stops, f"each stop went through the delay ({shut} of {stops})")
        print(f"  {stops} stops in {took:.1f} s; {books.grants} grants; answers "
              f"{dict(sorted(books.statuses.items()))}; {books.retried_503} acquires retried "
              "after 503")
        if books.errors:  # keep the logs for a look
            keep = f"/tmp/lockgate-rolling-failed-{os.getpid()}"
            subprocess.run(["cp", "-r", servers.dir, keep])
            print(f"  logs kept in {keep}")
    finally:
        servers.stop()
    return count.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""waiters.py -- the waiting part of `make bench` (bench/run.sh).

  waiters.py many    PORT GW_PID N     N concurrent waiters on one held lock
  waiters.py handoff PORT ROUNDS        release-to-next-waiter latency

`many`: takes a lock, opens N connections that each POST the same lock
with wait_ms 60000, waits until the gateway reports them all parked
(lockgate_waiting_requests), then reads the gateway's RSS, thread count
and the CPU time it uses over 5 s of waiting (/proc/GW_PID), releases the
lock and times the release's answer and the first waiter's 201, and closes
everything.

`handoff`: ROUNDS times, one holder and one waiter on their own keep-alive
connections: the holder takes the lock, the waiter asks with wait_ms, once
the gateway reports it parked the holder releases; measured from the
DELETE's response (and from the DELETE's sending) to the waiter's 201.

Each prints one line: RESULT key=value ...  Standard library only.
"""
import asyncio
import json
import os
import selectors
import socket
import sys
import time

HOST = "127.0.0.1"


def http_req(method, path, body=None, headers=None):
    h = {"Host": HOST, "Connection": "keep-alive"}
    if headers:
        h.update(headers)
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    h["Content-Length"] = str(len(data))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode() + b"\r\n" + data


class Conn:
    """A blocking keep-alive HTTP/1.1 connection that parses whole answers."""

    def __init__(self, port):
        self.s = socket.create_connection((HOST, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, method, path, body=None, headers=None):
        self.s.sendall(http_req(method, path, body, headers))

    def try_parse(self):
        """Returns (status, headers, body) when a whole answer is buffered."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = self.buf[:end].decode("latin-1").split("\r\n")
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        if len(self.buf) < end + 4 + n:
            return None
        body = self.buf[end + 4:end + 4 + n]
        self.buf = self.buf[end + 4 + n:]
        return int(lines[0].split()[1]), hdrs, body

    def feed(self):
        d = self.s.recv(65536)
        if not d:
            raise ConnectionError("gateway closed the connection")
        self.buf += d

    def recv(self):
        while True:
            r = self.try_parse()
            if r:
                return r
            self.feed()

    def call(self, method, path, body=None, headers=None):
        self.send(method, path, body, headers)
        return self.recv()


def waiting(port):
    """The gateway's lockgate_waiting_requests gauge."""
    c = Conn(port)
    st, _, body = c.call("GET", "/metrics")
    c.s.close()
    for ln in body.decode().splitlines():
        if ln.startswith("lockgate_waiting_requests "):
            return int(float(ln.split()[1]))
    return -1


def wait_parked(port, n, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if waiting(port) >= n:
            return True
        time.sleep(0.002 if n == 1 else 0.1)
    return False


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def proc_stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, clock ticks


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    return -1


# ---- many --------------------------------------------------------------------


async def many(port, gw_pid, n):
    name = f"bench-wait-{os.getpid()}-{int(time.time())}"
    holder = Conn(port)
    st, h, _ = holder.call("POST", f"/v1/locks/{name}", {"ttl_ms": 300000})
    assert st == 201, f"holder got {st}"
    token = h["lock-token"]

    req = http_req("POST", f"/v1/locks/{name}", {"wait_ms": 60000, "ttl_ms": 30000})
    conns = []
    gate = asyncio.Semaphore(500)
    t_open = time.monotonic()
    open_errors = 0

    async def open_one():
        nonlocal open_errors
        async with gate:
            try:
                r, w = await asyncio.open_connection(HOST, port)
            except OSError:
                open_errors += 1
                return
            w.write(req)
            await w.drain()
            conns.append((r, w))

    await asyncio.gather(*(open_one() for _ in range(n)))
    loop = asyncio.get_running_loop()
    parked = await loop.run_in_executor(None, wait_parked, port, len(conns), 60)
    t_parked = time.monotonic() - t_open
    nwait = waiting(port)

    rss = proc_status(gw_pid, "VmRSS")
    threads = proc_status(gw_pid, "Threads")
    c0 = proc_stat(gw_pid)
    await asyncio.sleep(5)
    c1 = proc_stat(gw_pid)
    tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    rss_after = proc_status(gw_pid, "VmRSS")

    first = loop.create_future()

    async def read_one(r):
        try:
            line = await r.readline()
        except (OSError, asyncio.CancelledError):
            return
        if line and not first.done():
            first.set_result((time.monotonic(), line.decode().strip()))

    readers = [asyncio.ensure_future(read_one(r)) for r, _ in conns]
    await asyncio.sleep(0)
    t0 = time.monotonic()
    holder.send("DELETE", f"/v1/locks/{name}", headers={"Lock-Token": token})
    st, _, _ = await loop.run_in_executor(None, holder.recv)
    t1 = time.monotonic()
    try:
        t2, line = await asyncio.wait_for(first, 10)
    except asyncio.TimeoutError:
        t2, line = float("nan"), "none"
    for fut in readers:
        fut.cancel()
    for _, w in conns:
        w.close()
    holder.s.close()
    print(f"RESULT waiters={len(conns)} open_errors={open_errors} parked={int(parked)} "
          f"gateway_waiting={nwait} seconds_to_park={t_parked:.2f} rss_kib={rss} "
          f"rss_after_kib={rss_after} threads={threads} cpu_ms_5s={(c1 - c0) * tick_ms:.0f} "
          f"release_status={st} release_ms={(t1 - t0) * 1000:.3f} "
          f"first_waiter_ms={(t2 - t1) * 1000:.3f} first_waiter_from_send_ms={(t2 - t0) * 1000:.3f} "
          f"first_line={line.replace(' ', '_')}")


# ---- handoff -----------------------------------------------------------------


def handoff(port, rounds):
    name = f"bench-handoff-{os.getpid()}-{int(time.time())}"
    path = f"/v1/locks/{name}"
    holder, waiter = Conn(port), Conn(port)
    sel = selectors.DefaultSelector()
    sel.register(holder.s, selectors.EVENT_READ, holder)
    sel.register(waiter.s, selectors.EVENT_READ, waiter)
    from_resp, from_send, errors = [], [], 0
    for _ in range(rounds):
        st, h, _ = holder.call("POST", path, {"ttl_ms": 30000})
        if st != 201:
            errors += 1
            continue
        htok = h["lock-token"]
        waiter.send("POST", path, {"wait_ms": 5000, "ttl_ms": 30000})
        if not wait_parked(port, 1, 5):
            errors += 1
        t0 = time.perf_counter()
        holder.send("DELETE", path, headers={"Lock-Token": htok})
        got = {}
        while len(got) < 2:
            for key, _ in sel.select(10):
                c = key.data
                c.feed()
                r = c.try_parse()
                if r:
                    got[c] = (time.perf_counter(), r)
            if not got and time.perf_counter() - t0 > 10:
                break
        if len(got) < 2 or got[waiter][1][0] != 201 or got[holder][1][0] != 200:
            errors += 1
            break
        t_del, t_w = got[holder][0], got[waiter][0]
        from_resp.append(max(0.0, t_w - t_del) * 1000)
        from_send.append((t_w - t0) * 1000)
        wtok = got[waiter][1][1]["lock-token"]
        st, _, _ = waiter.call("DELETE", path, headers={"Lock-Token": wtok})
        if st != 200:
            errors += 1
    print(f"RESULT rounds={len(from_resp)} errors={errors} "
          f"p50_ms={pct(from_resp, 50):.3f} p99_ms={pct(from_resp, 99):.3f} "
          f"max_ms={max(from_resp or [float('nan')]):.3f} "
          f"from_send_p50_ms={pct(from_send, 50):.3f} from_send_p99_ms={pct(from_send, 99):.3f}")


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "many":
        asyncio.run(many(port, int(sys.argv[3]), int(sys.argv[4])))
    elif mode == "handoff":
        handoff(port, int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

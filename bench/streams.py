#!/usr/bin/env python3
"""streams.py -- what N holds bound to their connections cost (issue 33).

  BUILD=build bench/streams.py [N] [WINDOW_S] [waiters|cluster]

With a third argument `waiters`, the same N connections are plain waiting
requests instead (POST with wait_ms 120000 on one held lock, counted parked
by lockgate_waiting_requests): what a parked request costs, for comparison.
With `cluster`, the gateway runs against a Redis Cluster of 3 masters (no
replicas) instead of one redis-server, and Redis's figures are the sum
over the three: what the same stream holds cost there, where a renewal
reaches the holds one script call per hash slot they use.

STREAMS_GW_FLAGS adds flags to the gateway's command line (split on
spaces), e.g. STREAMS_GW_FLAGS='--connection-memory-kib 3'.

Starts its own redis-server (no persistence) and gateway (--workers 2, the
default --stream-heartbeat-ms 15000) on free loopback ports in a temporary
directory, opens N connections that each POST /v1/locks/stream-<i> with
Accept: text/event-stream (ttl_ms 30000: the sessions renew every 10 s)
and waits until every one has read `event: granted`.  Then, over a quiet
window of WINDOW_S seconds (default 30) with all N held, it reads:
  - Redis's CPU (used_cpu_sys + used_cpu_user of INFO cpu) and commands
    (total_commands_processed, INFO commandstats) over the window;
  - the gateway's RSS (VmRSS) and its CPU (/proc/PID/stat) over the window.
The same window is measured first with no stream, for comparison.  Then it
closes every connection and times until Redis holds no lock.  Prints
RESULT lines.  Standard library only.
"""
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"
BUILD = os.environ.get("BUILD", "build")


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    p = s.getsockname()[1]
    s.close()
    return p


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True).stdout


def redis_info(port, section):
    out = redis_cli(port, "INFO", section)
    return dict(l.split(":", 1) for l in out.splitlines() if ":" in l and not l.startswith("#"))


def key_slot(tag):
    """Redis Cluster's hash slot of a lock named tag (its key's hash tag):
    CRC16/XMODEM mod 16384."""
    crc = 0
    for b in tag.encode():
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc % 16384


# Every figure below is summed over ports: one redis-server, or each
# master of the cluster.
def redis_cpu(ports):
    total = 0.0
    for port in ports:
        i = redis_info(port, "cpu")
        total += float(i["used_cpu_sys"]) + float(i["used_cpu_user"])
    return total


def redis_commands(ports):
    return sum(int(redis_info(port, "stats")["total_commands_processed"]) for port in ports)


def redis_eval_int(ports, script):
    return sum(int(redis_cli(port, "EVAL", script, "0").strip() or 0) for port in ports)


def proc_cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    m = re.search(r"VmRSS:\s+(\d+) kB", open(f"/proc/{pid}/status").read())
    return int(m.group(1)) / 1024


def commandstats(ports):
    out = {}
    for port in ports:
        for k, v in redis_info(port, "commandstats").items():
            k = k.replace("cmdstat_", "")
            out[k] = out.get(k, 0) + int(re.search(r"calls=(\d+)", v).group(1))
    return out


def window(rports, gpid, seconds):
    s0 = commandstats(rports)
    c0, n0, g0 = redis_cpu(rports), redis_commands(rports), proc_cpu_s(gpid)
    time.sleep(seconds)
    c1, n1, g1 = redis_cpu(rports), redis_commands(rports), proc_cpu_s(gpid)
    s1 = commandstats(rports)
    diff = {k: v - s0.get(k, 0) for k, v in s1.items() if v - s0.get(k, 0) > 0}
    print(f"    commands in the window: {diff}", flush=True)
    # Less the INFO calls this reads with (two per port).
    return (c1 - c0) / seconds * 100, n1 - n0 - 2 * len(rports), (g1 - g0) / seconds * 100


def cluster_port():
    """A free port whose cluster bus port (+10000) is free and valid too."""
    while True:
        p = free_port()
        if p > 55535:
            continue
        try:
            s = socket.socket()
            s.bind((HOST, p + 10000))
            s.close()
            return p
        except OSError:
            pass


def start_redis(d, cluster, procs):
    """One redis-server, or a cluster of three masters; their ports, and the
    gateway's flag for them."""
    ports = [cluster_port() if cluster else free_port() for _ in range(3 if cluster else 1)]
    for port in ports:
        extra = ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"] \
            if cluster else []
        procs.append(subprocess.Popen(["redis-server", "--bind", HOST, "--port", str(port),
                                       "--save", "", "--appendonly", "no", "--dir", d, *extra],
                                      stdout=subprocess.DEVNULL))
    for port in ports:
        while redis_cli(port, "PING").strip() != "PONG":
            if any(p.poll() is not None for p in procs):
                sys.exit(f"redis-server on {port} did not start")
            time.sleep(0.05)
    if not cluster:
        return ports, ["--redis", f"redis://{HOST}:{ports[0]}"]
    subprocess.run(["redis-cli", "--cluster", "create", *[f"{HOST}:{p}" for p in ports],
                    "--cluster-yes"], capture_output=True, check=True)
    while not all("cluster_state:ok" in redis_cli(p, "CLUSTER", "INFO") for p in ports):
        time.sleep(0.1)
    return ports, ["--redis-cluster", ",".join(f"{HOST}:{p}" for p in ports)]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    win = float(sys.argv[2]) if len(sys.argv) > 2 else 30
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    d = tempfile.mkdtemp(prefix="lockgate-bench-streams-")
    gport = free_port()
    procs = []
    try:
        rports, redis_flags = start_redis(d, mode == "cluster", procs)
        log = open(os.path.join(d, "gw.log"), "w")
        g = subprocess.Popen([os.path.join(BUILD, "lockgate"), "--listen", f"{HOST}:{gport}",
                              *redis_flags, "--workers", "2", "--log-level", "warn",
                              *os.environ.get("STREAMS_GW_FLAGS", "").split()], stderr=log)
        procs.append(g)
        while subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                              f"http://{HOST}:{gport}/readyz"], capture_output=True,
                             text=True).stdout != "200":
            time.sleep(0.05)
        time.sleep(1)
        idle_redis, idle_cmds, idle_gw = window(rports, g.pid, win)
        print(f"RESULT phase=no-streams window_s={win:g} redis_cpu_pct={idle_redis:.2f} "
              f"redis_commands={idle_cmds} gateway_cpu_pct={idle_gw:.2f} "
              f"gateway_rss_mib={rss_mib(g.pid):.1f}", flush=True)

        if mode == "waiters":
            held = socket.create_connection((HOST, gport))
            held.sendall(b"POST /v1/locks/w HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            held.recv(4096)
            socks = []
            body = b'{"wait_ms":120000}'
            for i in range(n):
                s = socket.create_connection((HOST, gport))
                s.sendall((f"POST /v1/locks/w HTTP/1.1\r\nHost: x\r\nContent-Length: "
                           f"{len(body)}\r\n\r\n").encode() + body)
                socks.append(s)
            while True:
                m = subprocess.run(["curl", "-s", f"http://{HOST}:{gport}/metrics"],
                                   capture_output=True, text=True).stdout
                w = re.search(r"^lockgate_waiting_requests (\d+)", m, re.M)
                if w and int(w.group(1)) >= n:
                    break
                time.sleep(0.2)
            print(f"RESULT phase=waiters parked={n} gateway_rss_mib={rss_mib(g.pid):.1f}",
                  flush=True)
            return
        sel = selectors.DefaultSelector()
        socks, bufs, granted = [], {}, 0
        t0 = time.monotonic()
        body = b'{"ttl_ms":30000}'
        for i in range(n):
            s = socket.create_connection((HOST, gport))
            s.setblocking(False)
            req = (f"POST /v1/locks/stream-{i} HTTP/1.1\r\nHost: {HOST}\r\n"
                   f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            s.send(req + body)
            socks.append(s)
            bufs[s] = b""
            sel.register(s, selectors.EVENT_READ)
            # Read what came meanwhile, so that no socket's answer piles up.
            for key, _ in sel.select(0):
                c = key.fileobj
                data = c.recv(65536)
                bufs[c] += data
                if b"event: granted" in bufs[c]:
                    granted += 1
                    sel.unregister(c)
                    bufs[c] = b""
        while granted < n and time.monotonic() - t0 < 300:
            for key, _ in sel.select(1):
                c = key.fileobj
                bufs[c] += c.recv(65536)
                if b"event: granted" in bufs[c]:
                    granted += 1
                    sel.unregister(c)
                    bufs[c] = b""
        took = time.monotonic() - t0
        held = redis_eval_int(rports, "return #redis.call('keys', 'lockgate:lock:*')")
        sessions = redis_eval_int(rports, "return #redis.call('keys', 'lockgate:session:*')")
        slots = len({key_slot(f"stream-{i}") for i in range(n)}) if mode == "cluster" else 0
        print(f"RESULT phase=open streams={n} granted={granted} held_in_redis={held} "
              f"sessions={sessions} slots={slots} open_s={took:.1f} "
              f"gateway_rss_mib={rss_mib(g.pid):.1f}", flush=True)
        # Heartbeats pile up unread in the kernel otherwise: nobody reads
        # them here, a few bytes each per 15 s, far from any buffer's end.
        redis_pct, cmds, gw_pct = window(rports, g.pid, win)
        print(f"RESULT phase=held streams={n} window_s={win:g} redis_cpu_pct={redis_pct:.2f} "
              f"redis_commands={cmds} gateway_cpu_pct={gw_pct:.2f} "
              f"gateway_rss_mib={rss_mib(g.pid):.1f}", flush=True)
        t1 = time.monotonic()
        for s in socks:
            s.close()
        while time.monotonic() - t1 < 60:
            left = redis_eval_int(rports, "local n = 0 for _, k in ipairs(redis.call("
                                  "'keys', 'lockgate:lock:*')) do local x = redis.call('hget', "
                                  "k, 'x') if x and #struct.unpack('<s', x) > 0 then n = n + 1 "
                                  "end end return n")
            if left == 0:
                break
            time.sleep(0.1)
        print(f"RESULT phase=closed streams={n} all_released_s={time.monotonic() - t1:.1f} "
              f"left={left}", flush=True)
    finally:
        stop_all(procs, d)


def stop_all(procs, d):
    """Stops what a run started (the last first) and removes its directory."""
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""nonreading.py -- clients that send and never read (#30): N connections
each pipeline 20 x POST /v1/ids/x?count=10000 (about 190 KiB of answer
each) and read nothing.  Starts its own redis-server and gateway on free
loopback ports; prints the gateway's RSS idle, with the clients connected
(settled), and after they have gone.

  bench/nonreading.py [N] [BUILD]        (default 1000, build)
"""
import os, socket, subprocess, sys, tempfile, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
BUILD = sys.argv[2] if len(sys.argv) > 2 else "build"

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"): return int(line.split()[1])

def settle(pid, secs=20):
    """RSS once it has not moved by more than 1 MiB for 2 s."""
    last, still, end = rss_kib(pid), 0, time.time() + secs
    while time.time() < end and still < 4:
        time.sleep(0.5); cur = rss_kib(pid)
        still = still + 1 if abs(cur - last) < 1024 else 0
        last = cur
    return last

def main():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, N + 512)), hard))
    d = tempfile.mkdtemp(prefix="lockgate-nonreading-")
    rp, gp = free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rp), "--bind", "127.0.0.1", "--save", "", "--dir", d],
                             stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    gw = subprocess.Popen([os.path.join(BUILD, "lockgate"), "--listen", "127.0.0.1:%d" % gp,
                           "--redis", "redis://127.0.0.1:%d" % rp, "--log-level", "warn"])
    try:
        for _ in range(100):
            try: socket.create_connection(("127.0.0.1", gp)).close(); break
            except OSError: time.sleep(0.1)
        # warm up: one reading client
        s = socket.create_connection(("127.0.0.1", gp))
        s.sendall(b"POST /v1/ids/x?count=10000 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        while s.recv(65536): pass
        s.close()
        idle = settle(gw.pid)
        req = b"POST /v1/ids/x?count=10000 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" * 20
        socks = []
        for i in range(N):
            c = socket.create_connection(("127.0.0.1", gp))
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.setblocking(False)
            try: c.send(req)
            except BlockingIOError: pass
            socks.append(c)
        loaded = settle(gw.pid)
        import urllib.request
        m = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % gp).read().decode()
        issued = [l for l in m.splitlines() if l.startswith("lockgate_ids_issued_total")][0].split()[1]
        for c in socks: c.close()
        after = settle(gw.pid)
        print("clients %d: RSS idle %d KiB, with them %d KiB (+%.0f KiB each), after they left %d KiB (+%d KiB); "
              "ids issued while they were connected: %s (%.1f requests of 20 a client)"
              % (N, idle, loaded, (loaded - idle) / N, after, after - idle, issued,
                 (int(issued) - 10000) / 10000 / N))
    finally:
        gw.terminate(); redis.terminate(); gw.wait(); redis.wait()

main()

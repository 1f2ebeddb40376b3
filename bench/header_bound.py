#!/usr/bin/env python3
"""header_bound.py -- where a gateway's per-connection buffer stops serving.

  BUILD=build bench/header_bound.py [KIB] [STEP]

Starts its own redis-server and gateway (--connection-memory-kib KIB,
default 4) on free loopback ports, then sends requests with one X-Pad
header of 0, STEP (default 50), 2*STEP ... bytes up to 4,000: a plain
POST /v1/locks/NAME and the same as a stream hold (Accept:
text/event-stream), each on a new connection, and prints each size at which
the status lines change (CLOSED: the connection closed unanswered).
Standard library only.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import streams as S  # noqa: E402  (free_port, redis_cli, stop_all)


def status(port, pad, stream):
    s = socket.create_connection((S.HOST, port))
    s.settimeout(3)
    accept = "Accept: text/event-stream\r\n" if stream else ""
    s.sendall((f"POST /v1/locks/b{pad}{'s' if stream else ''} HTTP/1.1\r\nHost: x\r\n{accept}"
               f"X-Pad: {'a' * pad}\r\nContent-Length: 2\r\n\r\n{{}}").encode())
    try:
        data = s.recv(400)
    except socket.timeout:
        data = b"TIMEOUT"
    s.close()
    return data.split(b"\r\n")[0].decode(errors="replace") or "CLOSED"


def main():
    kib = sys.argv[1] if len(sys.argv) > 1 else "4"
    step = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    d = tempfile.mkdtemp(prefix="lockgate-bench-hdr-")
    rport, gport = S.free_port(), S.free_port()
    procs = []
    try:
        r = subprocess.Popen(["redis-server", "--port", str(rport), "--save", "", "--appendonly",
                              "no", "--dir", d], stdout=subprocess.DEVNULL)
        procs.append(r)
        while S.redis_cli(rport, "PING").strip() != "PONG":
            time.sleep(0.05)
        g = subprocess.Popen([os.path.join(S.BUILD, "lockgate"), "--listen", f"{S.HOST}:{gport}",
                              "--redis", f"redis://{S.HOST}:{rport}", "--log-level", "error",
                              "--connection-memory-kib", kib])
        procs.append(g)
        while True:
            try:
                socket.create_connection((S.HOST, gport)).close()
                break
            except OSError:
                time.sleep(0.05)
        last = None
        for pad in range(0, 4001, step):
            now = (status(gport, pad, False), status(gport, pad, True))
            if now != last:
                print(f"RESULT kib={kib} pad={pad} plain='{now[0]}' stream='{now[1]}'", flush=True)
                last = now
    finally:
        S.stop_all(procs, d)


if __name__ == "__main__":
    main()

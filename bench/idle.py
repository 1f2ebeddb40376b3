#!/usr/bin/env python3
"""idle.py -- N idle keep-alive connections, as an HTTP client pool keeps them
(bench/fleet.sh).

  idle.py PORT N READY_FILE

Opens N connections to 127.0.0.1:PORT, sends one `GET /healthz` on each and
reads its answer, writes "open=<answered> errors=<e>" to READY_FILE, then
keeps them all open and silent.  On SIGUSR1 it sends one more `GET /healthz`
on every connection and prints "RESULT idle=<n> answered=<a>" (the idle
connections are still served), then closes them and exits.  Standard
library only; non-blocking, so that opening 10,000 takes seconds, not one
round trip each in turn.
"""
import selectors
import signal
import socket
import sys
import time

REQ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"


def round_trip(socks, deadline_s):
    """Sends REQ on every socket and reads one whole answer from each.
    Returns the number answered with 200."""
    sel = selectors.DefaultSelector()
    bufs = {}
    for s in socks:
        try:
            s.send(REQ)
            bufs[s] = b""
            sel.register(s, selectors.EVENT_READ)
        except OSError:
            pass
    ok = 0
    end = time.time() + deadline_s
    while bufs and time.time() < end:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                del bufs[s]
                continue
            bufs[s] += data
            b = bufs[s]
            head = b.find(b"\r\n\r\n")
            if head < 0:
                continue
            clen = 0
            for line in b[:head].split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    clen = int(v.strip())
            if len(b) >= head + 4 + clen:
                if b.startswith(b"HTTP/1.1 200"):
                    ok += 1
                sel.unregister(s)
                del bufs[s]
    sel.close()
    return ok


def main():
    port, n, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    socks, errors = [], 0
    for i in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        except OSError:
            errors += 1
            s.close()
            continue
        socks.append(s)
        if len(socks) % 500 == 0:
            time.sleep(0.01)  # let the listen backlog drain
    # Wait until the connects complete (writable), then ask once each.
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_WRITE)
    pending, end = set(socks), time.time() + 30
    while pending and time.time() < end:
        for key, _ in sel.select(timeout=0.5):
            sel.unregister(key.fileobj)
            pending.discard(key.fileobj)
    sel.close()
    answered = round_trip(socks, 60)
    with open(ready + ".tmp", "w") as f:
        f.write(f"open={answered} errors={errors + len(socks) - answered}\n")
    import os

    os.rename(ready + ".tmp", ready)

    got = []
    signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
    while not got:
        signal.pause()
    again = round_trip(socks, 60)
    print(f"RESULT idle={len(socks)} answered={again}", flush=True)
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()

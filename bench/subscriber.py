#!/usr/bin/env python3
"""subscriber.py PORT SECONDS CONNS NAMES -- contended waiting: CONNS keep-alive
connections each loop POST /v1/locks/hot-<k> {"wait_ms":10000} then DELETE,
over NAMES names, for SECONDS.  Prints cycles.  Standard library only."""
import asyncio, json, sys, time

HOST = "127.0.0.1"

async def req(r, w, method, path, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else b""
    h = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n"
    if body is not None:
        h += "Content-Type: application/json\r\n"
    if token:
        h += f"Lock-Token: {token}\r\n"
    w.write(h.encode() + b"\r\n" + data)
    await w.drain()
    status = int((await r.readline()).split()[1])
    hdrs = {}
    while True:
        line = await r.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        hdrs[k.strip().lower()] = v.strip()
    n = int(hdrs.get("content-length", "0"))
    if n:
        await r.readexactly(n)
    return status, hdrs

async def client(port, i, names, end, counts):
    r, w = await asyncio.open_connection(HOST, port)
    path = f"/v1/locks/hot-{i % names}"
    while time.time() < end:
        st, h = await req(r, w, "POST", path, {"ttl_ms": 5000, "wait_ms": 10000})
        if st == 201:
            await req(r, w, "DELETE", path, token=h.get("lock-token"))
            counts[0] += 1
        else:
            counts[1] += 1
    w.close()

async def main():
    port, secs, conns, names = map(int, sys.argv[1:5])
    counts = [0, 0]
    end = time.time() + secs
    await asyncio.gather(*(client(port, i, names, end, counts) for i in range(conns)))
    print(f"RESULT cycles={counts[0]} other={counts[1]}")

asyncio.run(main())

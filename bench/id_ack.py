#!/usr/bin/env python3
"""id_ack.py -- what --min-replicas-ack costs an id block (docs/ids.md).

A master and a replica on loopback; one gateway plain, one with
--min-replicas-ack 1.  Each request names a namespace not used before, so
each is answered from a block leased for it: the request's latency is the
lease's (the script, and with acknowledgement the WAIT after it).  Blocks
are large once busy (up to 1,048,576 ids), so per id the cost is that
latency divided by the block.

    python3 bench/id_ack.py [-n 2000]
"""
import argparse
import http.client
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from pyharness import Servers, redis_cmd, wait_for  # noqa: E402


def leases(port, n, tag):
    c = http.client.HTTPConnection("127.0.0.1", port)
    out = []
    for i in range(n):
        t = time.perf_counter()
        c.request("POST", f"/v1/ids/{tag}-{i}")
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"{tag}: {r.status}")
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000)
    a = ap.parse_args()
    s = Servers("id-ack")
    try:
        master, _, ok = s.redis()
        replica, _, ok2 = s.redis()
        redis_cmd(replica, "REPLICAOF", "127.0.0.1", str(master))
        assert ok and ok2 and wait_for(
            lambda: "master_link_status:up" in redis_cmd(replica, "INFO", "replication"))
        plain, _, _, r1 = s.gateway(redis_port=master)
        acked, _, _, r2 = s.gateway("--min-replicas-ack", "1", redis_port=master)
        assert r1 and r2
        leases(plain, 200, "warm-p")
        leases(acked, 200, "warm-a")
        rows = []
        for name, port in (("plain", plain), ("--min-replicas-ack 1", acked)):
            redis_cmd(master, "CONFIG", "RESETSTAT")
            ms = sorted(leases(port, a.n, name.split()[0].strip("-")))
            stats = redis_cmd(master, "INFO", "commandstats")
            usec = [ln.split("usec_per_call=")[1].split(",")[0] for ln in stats.splitlines()
                    if ln.startswith("cmdstat_evalsha:")]
            rows.append((name, statistics.median(ms), ms[int(len(ms) * 0.99) - 1],
                         usec[0] if usec else "?"))
        print(f"| id lease ({a.n} blocks, master + 1 replica, loopback) | median ms | p99 ms "
              f"| Redis usec per id_lease.lua |")
        print("|---|---|---|---|")
        for name, med, p99, usec in rows:
            print(f"| {name} | {med:.3f} | {p99:.3f} | {usec} |")
        print(f"\nacknowledgement adds {rows[1][1] - rows[0][1]:.3f} ms per block "
              f"(x{rows[1][1] / rows[0][1]:.2f}); per id of a 1,048,576-id block, "
              f"{(rows[1][1] - rows[0][1]) * 1e6 / 1048576:.2f} ns")
    finally:
        s.stop()


if __name__ == "__main__":
    main()

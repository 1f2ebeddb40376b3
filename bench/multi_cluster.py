#!/usr/bin/env python3
"""multi_cluster.py -- what a multi-lock costs in Redis Cluster mode (issue 22).

Starts its own Redis Cluster (three masters, no replicas) and one gateway
(--redis-cluster) on free loopback ports, in a temporary directory, and
measures, ROUNDS cycles on one keep-alive connection each, REPS times
(median):

  one slot     a 4-name multi-lock cycle (POST + DELETE /v1/locks) whose
               names hash to one slot: one script each way
  4 slots      a 4-name cycle whose names sit in 4 slots on the 3 masters:
               4 scripts in a row to take, 4 at once to release
  singles      4 single-lock cycles (4 POST + 4 DELETE) of the 4-slot names

Per cycle: Redis time (INFO commandstats usec in EVALSHA/EVAL, summed over
the masters), gateway CPU (utime+stime from /proc, 10 ms ticks) and wall.

  bench/multi_cluster.py [--reps R] [--rounds K] [--build DIR]

Prints Markdown table rows.  Standard library only.
"""
import argparse
import itertools
import os
import statistics
import tempfile

# The cluster start, ports, CPU and Redis-time measures of bench/sessions.py.
from sessions import cluster_port, cluster_up, measure, stop_all


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def slot(name):
    return crc16(name.encode()) & 16383


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="lockgate-multicl.")
    ports = [cluster_port() for _ in range(3)]
    gport = cluster_port()
    procs = []
    try:
        gw, g = cluster_up(a.build, d, ports, gport, procs)

        # Four names of one slot; four names of four slots over the masters
        # (slots 0-5460, 5461-10922, 10923-16383 after --cluster create).
        target = slot("mc-0")
        one = ["mc-0"] + list(itertools.islice(
            (f"mc-{i}" for i in range(1, 10**6) if slot(f"mc-{i}") == target), 3))
        spread, seen = [], set()
        for lo, hi in [(0, 2700), (2800, 5400), (5600, 10800), (11000, 16383)]:
            n = next(f"ms-{i}" for i in range(100000)
                     if lo <= slot(f"ms-{i}") <= hi and slot(f"ms-{i}") not in seen)
            seen.add(slot(n))
            spread.append(n)

        def multi(names):
            def run():
                for _ in range(a.rounds):
                    st, t, _ = g.do("POST", "/v1/locks", {"names": names})
                    assert st == 201, st
                    st, _, _ = g.do("DELETE", "/v1/locks", {"names": names}, {"Lock-Token": t})
                    assert st == 200, st
            return run

        def singles():
            for _ in range(a.rounds):
                ts = [g.do("POST", f"/v1/locks/{n}", {})[1] for n in spread]
                for n, t in zip(spread, ts):
                    g.do("DELETE", f"/v1/locks/{n}", None, {"Lock-Token": t})

        rows = {"one": [], "spread": [], "singles": []}
        for _ in range(a.reps):
            rows["one"].append(measure(ports, gw.pid, multi(one)))
            rows["spread"].append(measure(ports, gw.pid, multi(spread)))
            rows["singles"].append(measure(ports, gw.pid, singles))
        r = a.rounds
        med = lambda rs, k: statistics.median(x[k] for x in rs)
        label = {"one": "4-name multi-lock cycle, names in one slot",
                 "spread": "4-name multi-lock cycle, 4 slots on 3 masters",
                 "singles": "4 single-lock cycles (the 4-slot names)"}
        for k in ("one", "spread", "singles"):
            rs = rows[k]
            print(f"| {label[k]} | {med(rs, 0) / r:.0f} µs | {med(rs, 1) / r * 1000:.0f} µs "
                  f"| {med(rs, 2) / r * 1000:.0f} µs |")
    finally:
        stop_all(procs, d)


if __name__ == "__main__":
    main()

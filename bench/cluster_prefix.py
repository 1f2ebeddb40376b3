#!/usr/bin/env python3
"""cluster_prefix.py -- what a prefix stream costs in Redis Cluster mode (issue 33).

Starts its own Redis Cluster (three masters, no replicas) and one gateway
(--redis-cluster) on free loopback ports, in a temporary directory, and
makes N grant + release cycles of names spread over the masters (2 N
changes of holder), on one keep-alive connection, twice: with no prefix
streamed, then with one stream over the names' prefix open on the
gateway.  Per change, summed over the nodes:

  evalsha us     Redis time in EVALSHA/EVAL (INFO commandstats usec)
  publish        PUBLISH calls (INFO commandstats, from the scripts)
  bus sent       cluster_stats_messages_publish_sent (CLUSTER INFO): the
                 copies of each PUBLISH sent over the cluster bus
  copies         the gateway's pattern messages: each master delivers
                 its copy (the PUBLISH ran there, or came over the bus)
                 to the gateway's pattern; the gateway passes on one
                 (read from the stream: events seen)

  bench/cluster_prefix.py [-n N] [--build DIR]

Prints Markdown table rows.  Standard library only.
"""
import argparse
import os
import socket
import subprocess
import tempfile
import threading
import time

from sessions import cluster_port, cluster_up, redis_usec, reset, stop_all


def stat(ports, cmd, key):
    """key's number ("key:N", or "key:calls=N,...") in cmd's answer, summed over ports."""
    total = 0
    for p in ports:
        out = subprocess.run(["redis-cli", "-p", str(p)] + cmd, capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            if line.startswith(key + ":"):
                v = line[len(key) + 1:].strip()
                total += int(v.split("calls=")[1].split(",")[0]) if "calls=" in v else int(v)
    return total


def publishes(ports):
    return stat(ports, ["INFO", "commandstats"], "cmdstat_publish")


def bus_sent(ports):
    return stat(ports, ["CLUSTER", "INFO"], "cluster_stats_messages_publish_sent")


def cycles(g, n):
    for i in range(n):
        st, tok, _ = g.do("POST", f"/v1/locks/cp-{i}", {})
        assert st == 201, st
        st, _, _ = g.do("DELETE", f"/v1/locks/cp-{i}", None, {"Lock-Token": tok})
        assert st == 200, st


def row(label, ports, n, fn):
    reset(ports)
    b0 = bus_sent(ports)
    fn()
    ch = 2 * n
    return (label, redis_usec(ports) / ch, publishes(ports) / ch, (bus_sent(ports) - b0) / ch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="lockgate-clprefix.")
    ports = [cluster_port() for _ in range(3)]
    gport = cluster_port()
    procs = []
    try:
        gw, g = cluster_up(a.build, d, ports, gport, procs)
        cycles(g, 50)  # slot markers learnt, scripts loaded
        rows = [row("no prefix streamed", ports, a.n, lambda: cycles(g, a.n))]
        s = socket.create_connection(("127.0.0.1", gport))
        s.sendall(b"GET /v1/locks?prefix=cp- HTTP/1.1\r\nHost: x\r\n"
                  b"Accept: text/event-stream\r\n\r\n")
        seen = {"buf": b""}

        def read():
            while True:
                try:
                    b = s.recv(65536)
                except OSError:
                    return
                if not b:
                    return
                seen["buf"] += b

        t = threading.Thread(target=read, daemon=True)
        t.start()
        end = time.time() + 10
        while b":\n" not in seen["buf"] and time.time() < end:
            time.sleep(0.01)
        rows.append(row("1 stream over the prefix", ports, a.n, lambda: cycles(g, a.n)))
        end = time.time() + 10
        while seen["buf"].count(b"event: state") < 2 * a.n and time.time() < end:
            time.sleep(0.01)
        events = seen["buf"].count(b"event: state")
        s.close()
        print("| case | EVALSHA us / change | PUBLISH / change | bus copies sent / change |")
        print("|---|---:|---:|---:|")
        for r in rows:
            print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.2f} | {r[3]:.2f} |")
        print(f"\nevents streamed: {events} for {2 * a.n} changes "
              f"(3 masters: each change reaches the gateway 3 times, 1 passed on)")
    finally:
        stop_all(procs, d)


if __name__ == "__main__":
    main()

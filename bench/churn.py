#!/usr/bin/env python3
"""churn.py -- keep a gateway evicting id namespaces while other rows run.

    churn.py HOST:PORT RATE PREFIX

POSTs /v1/ids/<PREFIX>-<n> for n = 1, 2, ... (each a namespace never used
before) at about RATE requests a second on one keep-alive connection, until
SIGTERM or SIGINT; then prints "CHURN sent=N non200=M" and exits.  One
request every few milliseconds costs the client a few percent of a core, far
less than driving the same churn from inside the measuring wrk (a Lua
request() on every request), which would slow the measured client instead.
"""
import http.client
import signal
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
rate, prefix = float(sys.argv[2]), sys.argv[3]
stop = False


def on_signal(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
conn = http.client.HTTPConnection(host, int(port), timeout=10)
sent = non200 = 0
start = time.monotonic()
while not stop:
    sent += 1
    try:
        conn.request("POST", f"/v1/ids/{prefix}-{sent}", body=b"")
        r = conn.getresponse()
        r.read()
        non200 += r.status != 200
    except (OSError, http.client.HTTPException):
        non200 += 1
        conn.close()
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
    delay = start + sent / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
print(f"CHURN sent={sent} non200={non200}", flush=True)

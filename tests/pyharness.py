"""pyharness.py -- what the Python suites (tests/docs, tests/flags) share:
free loopback ports, a redis-server and gateways of their own in a
temporary directory, one RESP command, waiting for an event, and the
`name: N passed, M failed` count tests/run.sh reads.  The C suites' twin
is tests/integration/harness.c."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
# Gateways stop at once unless a suite asks for the rolling restart's
# delay (--shutdown-delay-ms, default 5 s; tests/rolling).
os.environ.setdefault("LOCKGATE_SHUTDOWN_DELAY_MS", "0")


class Count:
    """Checks counted; a failure printed at once with what was seen."""

    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL " + what, flush=True)
        return bool(ok)

    def summary(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed", flush=True)
        return 0 if self.failed == 0 else 1


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def redis_cmd(port, *args):
    """One command over RESP; returns the reply's first line (an array's
    elements follow as further lines: enough for KEYS and PTTL)."""
    msg = f"*{len(args)}\r\n" + "".join(f"${len(str(a))}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(msg.encode())
        data = b""
        s.settimeout(0.5)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if data.endswith(b"\r\n"):
                    s.settimeout(0.05)
        except socket.timeout:
            pass
        return data.decode(errors="replace")


def wait_for(cond, seconds=20):
    """Polls cond (exceptions count as not yet) until true or seconds pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if cond():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def http(port, method, path, body=None, headers=None, timeout=30):
    """(status, headers, body text); never raises on an HTTP status."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=body.encode() if isinstance(body, str) else body,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


class Servers:
    """redis-servers and gateways started by this process, in one temporary
    directory; stop() ends exactly those."""

    def __init__(self, prefix):
        self.dir = tempfile.mkdtemp(prefix=f"lockgate-{prefix}.")
        self.procs = []

    def redis(self):
        port = free_port()
        p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", self.dir],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        ok = wait_for(lambda: redis_cmd(port, "PING").startswith("+PONG"))
        return port, p, ok

    def gateway(self, *flags, redis_port=None, ready=True, env=None):
        """Starts build/lockgate with flags (and --listen, and --redis
        unless redis_port is None and a --redis is among flags).  Returns
        (port, process, log path, ok: /readyz 200 when ready asked)."""
        port = free_port()
        argv = [os.path.join(BUILD, "lockgate"), "--listen", f"127.0.0.1:{port}"]
        if redis_port is not None:
            argv += ["--redis", f"redis://127.0.0.1:{redis_port}"]
        argv += list(flags)
        log = os.path.join(self.dir, f"gateway-{port}.log")
        with open(log, "w") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=f, env=env)
        self.procs.append(p)
        ok = True
        if ready:
            ok = wait_for(lambda: p.poll() is None and
                          urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz",
                                                 timeout=2).status == 200)
        return port, p, log, ok

    def stop(self, p=None):
        for q in [p] if p else reversed(self.procs):
            if q.poll() is None:
                q.send_signal(signal.SIGTERM)
                q.send_signal(signal.SIGCONT)  # a frozen one must see the TERM
                try:
                    q.wait(10)
                except subprocess.TimeoutExpired:
                    q.kill()
                    q.wait()
        if p is None:
            shutil.rmtree(self.dir, ignore_errors=True)

#!/usr/bin/env python3
"""bench/redis_cost.py -- Redis time per lock operation, lockgate beside Redisson.

Replays each script on a quiet redis-server of its own, pipelined through
`redis-cli --pipe`, on N fresh names, and reads the time Redis spent inside
EVALSHA from INFO commandstats (usec_per_call).  Phases, on the same names:

  acquire   lockgate's acquire.lua, exclusive, lock free, nobody waiting
  release   lockgate's release.lua by the holder
  cycle     acquire + release
and the same for Redisson's fenced-lock acquire (EXISTS/HEXISTS, INCR of a
fence counter, HINCRBY, PEXPIRE) and its classic unlock (HEXISTS, HINCRBY,
DEL, PUBLISH on every unlock), replayed the same way on as many fresh names.

Each phase runs REPS times, interleaved, and the median is printed, so load
from elsewhere on the machine falls on both alike.

With --callgrind, Redis runs under valgrind's callgrind, which counts the
instructions executed inside EVALSHA (evalShaCommand and all it calls: the
script, its redis.call()s, argument passing): exact and repeatable whatever
else the machine does, where times on a busy machine are not.  Each phase
then gets its own server: acquires alone, then acquires + releases, and a
release is the difference.

--paths prints, by callgrind, what each rarer path costs (long form with
an owner, re-entry, busy, shared, semaphore, extend, release with a waiter
mark), and Redis memory per held lock beside Redisson's RLock layout.

  bench/redis_cost.py [--gen DIR] [--ab DIR] [-n N] [--reps R] [--callgrind] [--markdown]
  bench/redis_cost.py --paths [--gen DIR] [-n N] [--only SUBSTRING]
  bench/redis_cost.py --cluster [...]  the same on a cluster-enabled Redis (one node
             serving every slot), lockgate's cluster forms (the shard channel
             passed; the grant scripts get their slot's marker key and value,
             as the Redis layer sends them once it has learnt the slot, and
             every slot marker is set first): what Redis Cluster itself adds,
             to lockgate and to Redisson
  --cluster-unchecked  with --cluster: the grant calls as before slot markers
             (the call's first key again and an empty value: nothing read)

  --gen DIR  the generated scripts (default build/gen/lua)
  --ab DIR   a second set of generated scripts (an older build) measured in
             the same run: the A/B of one change
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# Redisson's fenced lock acquire (RedissonFencedLock.tryLockInnerAsync) and
# classic unlock (RedissonLock.unlockInnerAsync), as the bench has always
# compared against: KEYS and ARGV as Redisson passes them.
REDISSON_FENCED_ACQUIRE = (
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then local token = redis.call('incr', KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; "
    "return {redis.call('pttl', KEYS[1]), -1};")
REDISSON_UNLOCK = (
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "return nil;")
RSN_ID = "8743c9c0-0795-4907-87fd-6c719a6b4586:1"
TOKEN = "Bq3kZr8TqM2xWv9yLp0AbC"
MARKER = "Mk3kZr8TqM2xWv9yLp0AbC"  # <prefix>marker as a gateway read it (lua/_marker.lua)


CLUSTER = False  # --cluster: a cluster-enabled Redis, the gateway's cluster forms
UNCHECKED = False  # --cluster-unchecked: the cluster grant calls without a slot marker


def crc16(data):
    """CRC16/XMODEM, as Redis Cluster hashes keys (server/cluster.c)."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def slot_tags():
    """Each slot's tag, as cluster_slot_tag makes them: base-36 counting (least
    significant digit first), the first tag that lands in each slot."""
    tags, n, digits = {}, 0, "0123456789abcdefghijklmnopqrstuvwxyz"
    while len(tags) < 16384:
        v, t = n, ""
        while True:
            t += digits[v % 36]
            if v < 36:
                break
            v //= 36
        tags.setdefault(crc16(t.encode()) & 16383, t)
        n += 1
    return tags


TAGS = None


def slot_marker(k):
    """The slot marker key of key k's slot (<prefix>slotmark{tag})."""
    global TAGS
    TAGS = TAGS or slot_tags()
    tag = k[k.index("{") + 1:k.index("}")]
    return "lockgate:slotmark{%s}" % TAGS[crc16(tag.encode()) & 16383]


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Redis:
    """A private redis-server on a free loopback port, stopped by close()."""

    def __init__(self, callgrind=False):
        cluster = CLUSTER
        self.dir = tempfile.mkdtemp(prefix="lockgate-rcost.")
        while True:  # a cluster node's bus listens on port + 10000: keep it below 65536
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
            s.close()
            if not cluster or self.port < 55000:
                break
        self.cg = self.dir + "/callgrind.out" if callgrind else None
        pre = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
               "--toggle-collect=evalShaCommand", "--callgrind-out-file=" + self.cg] \
            if callgrind else []
        self.proc = subprocess.Popen(
            pre + ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--logfile", self.dir + "/redis.log"]
            + (["--cluster-enabled", "yes", "--cluster-config-file", self.dir + "/nodes.conf"]
               if cluster else []))
        for _ in range(600):
            if self.cli("ping").strip() == "PONG":
                break
            time.sleep(0.05)
        else:
            raise SystemExit("redis-server did not start")
        self.cli("set", "lockgate:marker", MARKER)  # outside EVALSHA: not counted
        if cluster:  # a one-node cluster that serves every slot
            self.cli("cluster", "addslotsrange", "0", "16383")
            for _ in range(600):
                if "cluster_state:ok" in self.cli("cluster", "info"):
                    break
                time.sleep(0.05)
            else:
                raise SystemExit("cluster did not come up")
            # every slot's marker, as learnt (outside EVALSHA: not counted)
            global TAGS
            TAGS = TAGS or slot_tags()
            self.pipe(b"".join(resp("SET", "lockgate:slotmark{%s}" % t, MARKER)
                               for t in TAGS.values()))

    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.port), *args],
                           capture_output=True, text=True)
        return r.stdout

    def pipe(self, payload):
        r = subprocess.run(["redis-cli", "-p", str(self.port), "--pipe"], input=payload,
                           capture_output=True)
        if b"errors: 0" not in r.stdout:
            raise SystemExit("redis-cli --pipe: " + r.stdout.decode() + r.stderr.decode())

    def evalsha_us(self):
        for line in self.cli("info", "commandstats").splitlines():
            if line.startswith("cmdstat_evalsha:"):
                for kv in line.split(":", 1)[1].split(","):
                    k, v = kv.split("=")
                    if k == "usec_per_call":
                        return float(v)
        return float("nan")

    def close(self):
        """Stops the server; under callgrind, returns the instructions counted."""
        self.proc.terminate()
        self.proc.wait()
        ir = None
        if self.cg:
            with open(self.cg) as f:
                for line in f:
                    if line.startswith("totals:") or line.startswith("summary:"):
                        ir = int(line.split()[1])
        shutil.rmtree(self.dir, ignore_errors=True)
        return ir


def timed(r, payload):
    """Redis time per EVALSHA while replaying payload."""
    r.cli("config", "resetstat")
    r.pipe(payload)
    return r.evalsha_us()


def acq_keys(k, src):
    """acquire.lua's numkeys and KEYS as the gateway sends them: the hash, its
    queue and deadlines, and, for scripts that declare it (every mode since
    liveness became a declared hash), the liveness hash its queue's head is
    judged by (lockgate:gw, or the slot's lockgate:gw{tag} in cluster mode),
    and for scripts that check the marker (lua/_marker.lua) the marker key
    the Redis layer appends (in cluster mode the slot's marker; with
    --cluster-unchecked the call's first key again)."""
    if "'gw' .. tag" not in src:
        keys = (k, k + ":q", k + ":qd")
    else:
        live = "lockgate:gw{%s}" % k[k.index("{") + 1:-1] if CLUSTER else "lockgate:gw"
        keys = (k, k + ":q", k + ":qd", live)
    if "MARKER_KEY" in src:
        keys += ((k if UNCHECKED else slot_marker(k)) if CLUSTER else "lockgate:marker",)
    return (len(keys),) + keys


def acq_resp(sha, k, src, *args):
    """An acquire.lua call: KEYS as acq_keys, then args, then (scripts that
    check the marker) the value the gateway last read: MARKER, which every
    server here holds (Redis.__init__; in cluster mode every slot's marker);
    empty with --cluster-unchecked, as sent before slot markers."""
    marker = ("" if CLUSTER and UNCHECKED else MARKER,) if "MARKER_KEY" in src else ()
    return resp("EVALSHA", sha, *acq_keys(k, src), *args, *marker)


def lockgate_payloads(r, gen, n, tag):
    src = open(os.path.join(gen, "acquire.lua")).read()
    acq = r.cli("script", "load", src).strip()
    rel = r.cli("script", "load", open(os.path.join(gen, "release.lua")).read()).strip()
    names = ["lockgate:lock:{%s-%d}" % (tag, i) for i in range(n)]
    # As the gateway sends the common case: the short form, token and ttl
    # (scripts from before the fast path take every argument).
    short = "#ARGV == 2" in src or "local short = #ARGV" in src  # has the short form
    rest = () if short else ("", 0, 0, "x", 0, "", 0, 0, "lockgate:released", "m")
    if CLUSTER:  # the cluster's short form carries the shard channel (its slot's tag)
        chan = lambda k: "lockgate:released{%s}" % k[k.index("{") + 1:-1]
        a = b"".join(acq_resp(acq, k, src, TOKEN, 30000, chan(k))
                     for k in names)
        d = b"".join(resp("EVALSHA", rel, 1, k, TOKEN, chan(k), "lock:" + k) for k in names)
        return a, d
    a = b"".join(acq_resp(acq, k, src, TOKEN, 30000, *rest)
                 for k in names)
    d = b"".join(resp("EVALSHA", rel, 1, k, TOKEN, "lockgate:released", "lock:" + k)
                 for k in names)
    return a, d


def redisson_payloads(r, n, tag):
    acq = r.cli("script", "load", REDISSON_FENCED_ACQUIRE).strip()
    rel = r.cli("script", "load", REDISSON_UNLOCK).strip()
    names = ["%s-%d" % (tag, i) for i in range(n)]
    a = b"".join(resp("EVALSHA", acq, 2, k, "redisson_lock_token:{%s}" % k, 30000, RSN_ID)
                 for k in names)
    d = b"".join(resp("EVALSHA", rel, 2, k, "redisson_lock__channel:{%s}" % k, 0, 30000, RSN_ID)
                 for k in names)
    return a, d


def phases_timed(r, payloads, *args):
    a, d = payloads(r, *args)
    return timed(r, a), timed(r, d)


def phases_counted(payloads, *args):
    """Instructions per acquire and per release, under callgrind."""
    n = args[-2]
    counts = []
    for with_release in (False, True):
        r = Redis(callgrind=True)
        a, d = payloads(r, *args)
        r.pipe(a)
        if with_release:
            r.pipe(d)
        counts.append(r.close())
    return counts[0] / n, (counts[1] - counts[0]) / n


def quota(s, k, *args):
    """quota.lua on the ledger beside k (one ledger per name here: one per key in use)."""
    return resp("EVALSHA", s["quota"], 1, k + ":quota", *args)


def quota_ten(s, k):
    return b"".join(quota(s, k, "take", 100, 30000, "", "lock:h%d|%s" % (i, TOKEN))
                    for i in range(10))


def watched(s, k):
    """The marks an event stream sets (watch_log.lua), far in the future."""
    return resp("HSET", k, "v", 99999999999999, "lg", 99999999999999)


def subscribers(r, patterns):
    """A redis-cli per entry of patterns (each a list of patterns it
    PSUBSCRIBEs, as a gateway with prefix streams does), once Redis counts
    them all; they read what is published until they are killed."""
    procs = [subprocess.Popen(["redis-cli", "-p", str(r.port), "psubscribe", *pats],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for pats in patterns]
    want = sum(len(set(p)) for p in patterns)
    for _ in range(600):
        subs = sum(int(x.split("=")[1]) for x in r.cli("client", "list").split()
                   if x.startswith("psub="))
        if subs == want:
            return procs
        time.sleep(0.05)
    raise SystemExit("pattern subscribers did not come up")


def path_costs(gen, n, only=None):
    """(label, instructions per call) of each path, each on a server of its own:
    the setup's instructions are counted alone and taken off."""
    def script(r, name):
        return r.cli("script", "load", open(os.path.join(gen, name + ".lua")).read()).strip()

    src = open(os.path.join(gen, "acquire.lua")).read()

    def acq(sha, k, tok, *rest):
        return acq_resp(sha, k, src, tok, 30000, *rest)

    long_args = lambda kind, limit, owner="": (owner, 0, 0, kind, limit, "", 0, 0, "ch", "m")
    other = "Zz9kZr8TqM2xWv9yLp0AbC"
    cases = [
        # label, setup (sha-dict, key) -> payload, measured (sha-dict, key) -> payload
        ("acquire, long form with an owner", None,
         lambda s, k: acq(s["acquire"], k, TOKEN, *long_args("x", 0, "cron-42"))),
        ("acquire, re-entry", lambda s, k: acq(s["acquire"], k, TOKEN),
         lambda s, k: acq(s["acquire"], k, TOKEN)),
        ("acquire, busy (held by another)", lambda s, k: acq(s["acquire"], k, other),
         lambda s, k: acq(s["acquire"], k, TOKEN)),
        ("acquire, busy, waiting (sets the waiter mark)",
         lambda s, k: acq(s["acquire"], k, other),
         lambda s, k: acq_resp(s["acquire"], k, src, TOKEN, 30000, "",
                           0, 0, "x", 0, "", 5000, 0, "ch", "m")),
        ("acquire, busy, fair waiter (queued)", lambda s, k: acq(s["acquire"], k, other),
         lambda s, k: acq_resp(s["acquire"], k, src, TOKEN, 30000, "",
                           0, 0, "x", 0, "w1", 5000, 1, "ch", "m")),
        ("acquire, shared", None, lambda s, k: acq(s["acquire"], k, TOKEN, *long_args("s", 0))),
        ("acquire, semaphore permit", None,
         lambda s, k: acq(s["acquire"], k, TOKEN, *long_args("p", 5))),
        ("acquire after a release (x's ended record)",
         lambda s, k: acq(s["acquire"], k, other) + resp("EVALSHA", s["release"], 1, k, other,
                                                         "ch", "m"),
         lambda s, k: acq(s["acquire"], k, TOKEN)),
        ("extend", lambda s, k: acq(s["acquire"], k, TOKEN),
         lambda s, k: resp("EVALSHA", s["extend"], 1, k, TOKEN, 30000)),
        ("release of a re-entered hold (count 2 -> 1)",
         lambda s, k: acq(s["acquire"], k, TOKEN) + acq(s["acquire"], k, TOKEN),
         lambda s, k: resp("EVALSHA", s["release"], 1, k, TOKEN, "ch", "m")),
        ("release with a waiter mark (publishes)",
         lambda s, k: acq(s["acquire"], k, TOKEN) + acq_resp(
             s["acquire"], k, src, other, 30000, "", 0, 0, "x", 0, "", 5000, 0, "ch", "m"),
         lambda s, k: resp("EVALSHA", s["release"], 1, k, TOKEN, "ch", "m")),
        ("release of a shared hold",
         lambda s, k: acq(s["acquire"], k, TOKEN, *long_args("s", 0)),
         lambda s, k: resp("EVALSHA", s["release"], 1, k, TOKEN, "ch", "m")),
        # A name an event stream reads (watch_log.lua set v and lg): each
        # change of holder is also appended to its change log (one XADD).
        ("acquire, watched by an event stream (logs the change)", watched,
         lambda s, k: acq(s["acquire"], k, TOKEN)),
        ("release, watched by an event stream (logs the change)",
         lambda s, k: watched(s, k) + acq(s["acquire"], k, TOKEN),
         lambda s, k: resp("EVALSHA", s["release"], 1, k, TOKEN, "ch", "m")),
        # Prefix streams (lua/_holders.lua, "prefix streams"): gateways
        # PSUBSCRIBE <prefix>chg:lock:P*; a change is published on the
        # name's channel while any pattern exists.  The names here are
        # lockgate:lock:{pN}: under the prefix "p", not under "zz".
        ("acquire, fresh name, no pattern anywhere (fast path)", None,
         lambda s, k: acq(s["acquire"], k, TOKEN)),
        ("release, no pattern anywhere (fast path)", lambda s, k: acq(s["acquire"], k, TOKEN),
         lambda s, k: resp("EVALSHA", s["release"], 1, k, TOKEN, "ch", "m")),
        ("acquire under a streamed prefix (publishes to 1 gateway)", None,
         lambda s, k: acq(s["acquire"], k, TOKEN), [["lockgate:chg:lock:p*"]]),
        ("release under a streamed prefix (publishes to 1 gateway)",
         lambda s, k: acq(s["acquire"], k, TOKEN),
         lambda s, k: resp("EVALSHA", s["release"], 1, k, TOKEN, "ch", "m"),
         [["lockgate:chg:lock:p*"]]),
        ("acquire under a streamed prefix (publishes to 10 gateways)", None,
         lambda s, k: acq(s["acquire"], k, TOKEN), [["lockgate:chg:lock:p*"]] * 10),
        ("acquire while 1 other prefix is streamed", None,
         lambda s, k: acq(s["acquire"], k, TOKEN), [["lockgate:chg:lock:zz*"]]),
        ("acquire while 10 other prefixes are streamed", None,
         lambda s, k: acq(s["acquire"], k, TOKEN),
         [["lockgate:chg:lock:zz%d*" % i for i in range(10)]]),
        ("inspect", lambda s, k: acq(s["acquire"], k, TOKEN),
         lambda s, k: resp("EVALSHA", s["inspect"], 1, k)),
        # A key's holds_at_once ledger (quota.lua): 10 holds already in it.
        ("quota: take, a new hold (10 in the ledger, limit 100)", quota_ten,
         lambda s, k: quota(s, k, "take", 100, 30000, "", "lock:new|" + TOKEN)),
        ("quota: take refused (10 of 10)", quota_ten,
         lambda s, k: quota(s, k, "take", 10, 30000, "", "lock:new|" + TOKEN)),
        ("quota: set, the grant's lease", quota_ten,
         lambda s, k: quota(s, k, "set", 30000, "lock:h0|" + TOKEN)),
        ("quota: drop, a release", quota_ten,
         lambda s, k: quota(s, k, "drop", "lock:h0|" + TOKEN)),
    ]
    out = []
    for case in cases:
        label, setup, measured = case[:3]
        pats = case[3] if len(case) > 3 else []
        if only and not any(o in label for o in only.split("|")):
            continue
        counts = []
        for with_measured in (False, True):
            r = Redis(callgrind=True)
            subs = subscribers(r, pats)
            shas = {x: script(r, x) for x in ("acquire", "release", "extend", "inspect", "quota")}
            names = ["lockgate:lock:{p%d}" % i for i in range(n)]
            if setup:
                r.pipe(b"".join(setup(shas, k) for k in names))
            if with_measured:
                r.pipe(b"".join(measured(shas, k) for k in names))
            for p in subs:
                p.kill()
                p.wait()
            counts.append(r.close())
        out.append((label, (counts[1] - counts[0]) / n))
    return out


def memory_per_lock(gen, n):
    """Mean MEMORY USAGE of a held lock's hash: lockgate's and Redisson's RLock."""
    r = Redis()
    try:
        src = open(os.path.join(gen, "acquire.lua")).read()
        acq = r.cli("script", "load", src).strip()
        names = ["lockgate:lock:{m%d}" % i for i in range(n)]
        r.pipe(b"".join(acq_resp(acq, k, src, TOKEN, 600000)
                        for k in names))
        ours = statistics.mean(int(r.cli("memory", "usage", k)) for k in names[:1000])
        r.cli("flushall")
        r.pipe(b"".join(resp("HINCRBY", k, RSN_ID, 1) + resp("PEXPIRE", k, 600000)
                        for k in names))
        rlock = statistics.mean(int(r.cli("memory", "usage", k)) for k in names[:1000])
    finally:
        r.close()
    return ours, rlock


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen", default="build/gen/lua")
    ap.add_argument("--ab", default=None)
    ap.add_argument("-n", type=int, default=50000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--paths", action="store_true")
    ap.add_argument("--only", default=None, help="--paths: only the paths whose label holds one of these ('|' between)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--cluster", action="store_true")
    ap.add_argument("--cluster-unchecked", action="store_true")
    o = ap.parse_args()
    global CLUSTER, UNCHECKED
    CLUSTER = o.cluster
    UNCHECKED = o.cluster_unchecked
    if o.paths:
        print("| path (callgrind, %d names) | Redis instructions inside EVALSHA per call |" % o.n)
        print("|---|---:|")
        for label, ir in path_costs(o.gen, o.n, o.only):
            print("| %s | %.0f |" % (label, ir))
        ours, rlock = memory_per_lock(o.gen, 5000)
        print("| Redis memory per held lock, mean MEMORY USAGE: lockgate · Redisson's RLock"
              " | %.0f · %.0f B |" % (ours, rlock))
        return 0
    sets = [("lockgate", o.gen)] + ([("lockgate (A/B: %s)" % o.ab, o.ab)] if o.ab else [])
    res = {}
    if o.callgrind:
        for label, gen in sets:
            res[label] = [phases_counted(lockgate_payloads, gen, o.n, "c")]
        res["Redisson"] = [phases_counted(redisson_payloads, o.n, "c")]
    else:
        r = Redis()
        try:
            for rep in range(o.reps):
                for label, gen in sets:
                    r.cli("flushall")
                    res.setdefault(label, []).append(
                        phases_timed(r, lockgate_payloads, gen, o.n, "r%d" % rep))
                r.cli("flushall")
                res.setdefault("Redisson", []).append(
                    phases_timed(r, redisson_payloads, o.n, "r%d" % rep))
        finally:
            r.close()
    unit = "instructions" if o.callgrind else "µs"
    rows = []
    for label, runs in res.items():
        acq = statistics.median(x[0] for x in runs)
        rel = statistics.median(x[1] for x in runs)
        rows.append((label, acq, rel, acq + rel))
    rsn = [x for x in rows if x[0] == "Redisson"][0]
    if o.markdown:
        how = "callgrind, %d fresh names" % o.n if o.callgrind else \
            "median of %d × %d fresh names" % (o.reps, o.n)
        print("| Redis %s inside EVALSHA per call (%s) | acquire | release | cycle"
              " | cycle ÷ Redisson's |" % (unit, how))
        print("|---|---|---|---|---|")
        for label, a, d, c in rows:
            print("| %s | %.1f | %.1f | %.1f | %.2f |" % (label, a, d, c, c / rsn[3]))
    else:
        for label, a, d, c in rows:
            print("%-40s acquire %8.2f  release %8.2f  cycle %8.2f %s (%.2f x Redisson)"
                  % (label, a, d, c, unit, c / rsn[3]))


if __name__ == "__main__":
    sys.exit(main())

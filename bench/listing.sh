#!/usr/bin/env bash
# bench/listing.sh -- GET /v1/locks over N held locks (default 100,000),
# page by page: the time of each page (curl) and of each list.lua call inside
# Redis (SLOWLOG, every command logged), and the total.  Not part of
# `make bench` (bench/RESULTS.md, "Listing").
#
#   bench/listing.sh [N] [LIMIT]        e.g. bench/listing.sh 100000 1000
#
# The locks are taken with acquire.lua itself, pipelined into redis-cli
# (the HTTP path would only make the set-up slower).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DIR=$PWD/bench
BENCH_NAME=listing
. bench/lib.sh
N=${1:-100000}
LIMIT=${2:-1000}
read -r RPORT GPORT < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
    --logfile "$TMP/redis.log" --slowlog-max-len 100000 &
PIDS+=("$!")
wait_for redis "$TMP/redis.log" redis-cli -p "$RPORT" ping
"${GW:-build/lockgate}" --listen "127.0.0.1:$GPORT" --redis "redis://127.0.0.1:$RPORT" \
    --log-level warn > "$TMP/gw.log" 2>&1 &
PIDS+=("$!")
wait_for gateway "$TMP/gw.log" curl -sf "http://127.0.0.1:$GPORT/readyz"

say "taking $N locks (ttl 10 min)"
SHA=$(redis-cli -p "$RPORT" SCRIPT LOAD "$(cat build/gen/lua/acquire.lua)")
python3 - "$N" "$SHA" > "$TMP/cmds" <<'PY'
import sys
n, sha = int(sys.argv[1]), sys.argv[2]
out = sys.stdout
for i in range(n):
    k = "lockgate:lock:{bench.%06d}" % i
    # The marker key and value the Redis layer appends ('': nothing checked).
    args = ["EVALSHA", sha, "4", k, k + ":q", k + ":qd", "lockgate:marker",
            "benchtoken%012dxxxxxx" % i, "600000", ""]
    out.write("*%d\r\n" % len(args))
    for a in args:
        out.write("$%d\r\n%s\r\n" % (len(a), a))
PY
redis-cli -p "$RPORT" --pipe < "$TMP/cmds" | tail -n 1 >&2
redis-cli -p "$RPORT" CONFIG SET slowlog-log-slower-than 0 > /dev/null
redis-cli -p "$RPORT" SLOWLOG RESET > /dev/null

say "listing them, limit=$LIMIT"
cursor="" pages=0 worst=0 sum=0
: > "$TMP/names"
: > "$TMP/sizes"
t0=$(date +%s%N)
while :; do
    p0=$(date +%s%N)
    body=$(curl -sf "http://127.0.0.1:$GPORT/v1/locks?limit=$LIMIT&cursor=$cursor")
    p1=$(date +%s%N)
    ms=$(( (p1 - p0) / 1000000 ))
    [ "$ms" -gt "$worst" ] && worst=$ms
    sum=$((sum + ms))
    pages=$((pages + 1))
    cursor=$(python3 -c 'import json,sys
page = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    for e in page["locks"]: f.write(e["name"] + "\n")
with open(sys.argv[2], "a") as f: f.write("%d\n" % len(page["locks"]))
print(page["cursor"])' "$TMP/names" "$TMP/sizes" <<<"$body")
    [ -z "$cursor" ] && break
done
t1=$(date +%s%N)
total_ms=$(( (t1 - t0) / 1000000 ))
# Each list.lua call (EVALSHA with 0 keys) in SLOWLOG: microseconds.
redis-cli -p "$RPORT" SLOWLOG GET 100000 | awk '
    prev == "" { } { lines[NR] = $0 }
    END {
        for (i = 1; i <= NR; i++)
            if (lines[i] == "EVALSHA" && lines[i + 2] == "0") { us[++n] = lines[i - 1] }
        for (i = 1; i <= n; i++) { s += us[i]; if (us[i] > m) m = us[i] }
        printf "list.lua calls: %d, mean %.2f ms, max %.2f ms in Redis\n", n, s / n / 1000, m / 1000
    }' >&2 || true
names=$(wc -l < "$TMP/names")
unique=$(sort -u "$TMP/names" | wc -l)
biggest=$(sort -n "$TMP/sizes" | tail -n 1)
echo "listed $unique different names of $N ($((names - unique)) listed twice; largest page $biggest) in $pages pages (limit $LIMIT): the requests took $sum ms in all (slowest page $worst ms); with this script's own parsing $total_ms ms"

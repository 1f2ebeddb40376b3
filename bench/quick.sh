#!/usr/bin/env bash
# bench/quick.sh -- a quick A/B of one gateway build or flag set: GET /healthz
# against the locks cycle, two interleaved rounds, with the CPU each request
# cost the gateway and Redis.  Not part of `make bench`; for measuring one
# change before and after (run it on both builds, one after the other).
#
#   bench/quick.sh [GATEWAY FLAGS...]      e.g. bench/quick.sh --workers 1
#
# Environment: GW (binary, default build/lockgate), CONNS (50), SECONDS_EACH
# (4), PHASES ("get locks").  Needs wrk and redis-server (make bench installs
# them).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DIR=$PWD/bench
BENCH_NAME=quick
. bench/lib.sh
read -r RPORT GPORT < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
    --logfile "$TMP/redis.log" &
RP=$!
PIDS+=("$RP")
wait_for redis "$TMP/redis.log" redis-cli -p "$RPORT" ping
"${GW:-build/lockgate}" --listen "127.0.0.1:$GPORT" --redis "redis://127.0.0.1:$RPORT" \
    --log-level warn "$@" > "$TMP/gw.log" 2>&1 &
GP=$!
PIDS+=("$GP")
wait_for gateway "$TMP/gw.log" curl -sf "http://127.0.0.1:$GPORT/readyz"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
c=${CONNS:-50}
t=2; [ "$c" -lt 2 ] && t=1
for round in 1 2; do
    for p in ${PHASES:-get locks}; do
        g0=$(ticks "$GP"); r0=$(ticks "$RP")
        wrk -t"$t" -c"$c" -d"${SECONDS_EACH:-4}s" --latency -s "bench/$p.lua" \
            "http://127.0.0.1:$GPORT/healthz" > "$TMP/w.out" 2>&1
        g1=$(ticks "$GP"); r1=$(ticks "$RP")
        line=$(grep '^RESULT ' "$TMP/w.out")
        n=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")
        [ "$n" -gt 0 ] || n=1
        printf '%-6s round %s: %s  gateway %s us/req  redis %s us/req\n' "$p" "$round" \
            "$(sed 's/^RESULT //' <<<"$line")" \
            "$(calc %.1f "($g1 - $g0) * 1e6 / $HZ / $n")" "$(calc %.1f "($r1 - $r0) * 1e6 / $HZ / $n")"
    done
done
redis-cli -p "$RPORT" info commandstats | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/EVALSHA in Redis: \1 us per call/p'

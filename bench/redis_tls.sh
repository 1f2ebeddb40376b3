#!/usr/bin/env bash
# bench/redis_tls.sh -- what TLS to Redis costs the gateway (run by `make
# bench` after bench/tls.sh): one redis-server serving a plain port and a
# TLS port (RSA 2048 certificate from tests/integration/tls_certs.sh,
# TLS 1.3), two gateways of one worker each, one on redis:// and one on
# rediss:// (chain and name verified), and the locks cycle (bench/locks.lua)
# from wrk on keep-alive connections, plain and TLS interleaved.  Per
# request: the gateway's CPU (its utime + stime over the run, from
# /proc/PID/stat, divided by the requests served) and wrk's latency (mean
# and 99th percentile).  Short runs: the machine is shared.
#
# Environment: BUILD (build), RTLS_SECONDS (4), RTLS_ROUNDS (3),
# RTLS_CONNS (16).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DIR=$PWD/bench
BENCH_NAME=redis-tls
. bench/lib.sh
BUILD=${BUILD:-build}
SECS=${RTLS_SECONDS:-4}
ROUNDS=${RTLS_ROUNDS:-3}
CONNS=${RTLS_CONNS:-16}
tests/integration/tls_certs.sh "$TMP" >/dev/null
read -r RPORT TPORT PPORT SPORT < <(python3 -c 'import socket
s=[socket.socket() for _ in range(4)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
redis-server --port "$RPORT" --tls-port "$TPORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$TMP" --logfile "$TMP/redis.log" --tls-cert-file "$TMP/server.pem" \
    --tls-key-file "$TMP/server.key" --tls-ca-cert-file "$TMP/ca.pem" --tls-auth-clients no &
PIDS+=($!)
wait_for redis "$TMP/redis.log" redis-cli -p "$RPORT" ping
"$BUILD/lockgate" --listen "127.0.0.1:$PPORT" --redis "redis://127.0.0.1:$RPORT" --workers 1 \
    --log-level warn >"$TMP/plain.log" 2>&1 &
PLAIN=$!
PIDS+=($PLAIN)
"$BUILD/lockgate" --listen "127.0.0.1:$SPORT" --redis "rediss://127.0.0.1:$TPORT" --workers 1 \
    --redis-tls-ca "$TMP/ca.pem" --log-level warn >"$TMP/tls.log" 2>&1 &
TLS=$!
PIDS+=($TLS)
wait_for plain "$TMP/plain.log" curl -sf "http://127.0.0.1:$PPORT/readyz"
wait_for tls "$TMP/tls.log" curl -sf "http://127.0.0.1:$SPORT/readyz"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, clock ticks
HZ=$(getconf CLK_TCK)
# run PID PORT: one wrk round; prints "requests cpu_us_per_req mean_ms p99_ms"
run() {
    local t0 t1 out=$TMP/wrk.out
    t0=$(ticks "$1")
    wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s bench/locks.lua "http://127.0.0.1:$2/healthz" \
        >"$out" 2>&1
    t1=$(ticks "$1")
    local n mean p99
    n=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$out")
    mean=$(awk '/^ *Latency /{print $2; exit}' "$out")
    p99=$(awk '/^ *99%/{print $2; exit}' "$out")
    printf '%s %s %s %s\n' "$n" "$(calc %.1f "($t1 - $t0) * 1000000 / $HZ / $n")" "$mean" "$p99"
}
plain=() tls=()
for r in $(seq "$ROUNDS"); do
    plain+=("$(run "$PLAIN" "$PPORT")")
    tls+=("$(run "$TLS" "$SPORT")")
    say "round $r: plain ${plain[-1]} | TLS ${tls[-1]} (requests, CPU us/req, mean, p99)"
done
# The round with the least CPU per request of each (the least disturbed).
best() { printf '%s\n' "$@" | sort -k2 -g | head -n1; }
read -r pn pc pm p9 <<<"$(best "${plain[@]}")"
read -r sn sc sm s9 <<<"$(best "${tls[@]}")"
printf '\n| TLS to Redis (bench/redis_tls.sh, 1 worker, %s conns, %s x %ss) | redis:// | rediss:// |\n|---|---|---|\n' \
    "$CONNS" "$ROUNDS" "$SECS"
printf '| requests/s (round with the least CPU per request) | %s | %s |\n' \
    "$(calc %.0f "$pn / $SECS")" "$(calc %.0f "$sn / $SECS")"
printf '| gateway CPU per request | %s us | %s us |\n' "$pc" "$sc"
printf '| latency mean / p99 | %s / %s | %s / %s |\n' "$pm" "$p9" "$sm" "$s9"
printf '| TLS / plain, CPU per request | | %s |\n' "$(calc %.2f "$sc / $pc")"

#!/usr/bin/env bash
# bench/fleet.sh -- `make bench`, the fleet part (issue #15): what idle
# connections cost everyone else, gateway CPU per request against a
# /healthz, one connection, and the sweep up to
# 10,000 connections.  Each target printed PASS or MISS; informs, does not
# gate.
#
# Starts its own redis-server and gateways on free loopback ports in a
# mktemp directory and stops them on exit.  CPU per request is the
# gateway's utime+stime (/proc/PID/stat) over a wrk run divided by the
# requests: steadier than requests/s on a shared machine.
#
# Environment (all optional):
#   BUILD=build           where lockgate was built
#   FLEET_IDLE=10000      idle keep-alive connections (lowered to fit ulimit -n)
#   FLEET_SECONDS=3       length of one wrk run
#   FLEET_ROUNDS=2        interleaved rounds of the side-by-side phases
#   FLEET_SWEEP="1 10 50 200 1000 10000"   connection counts of the sweep
#   FLEET_GW_FLAGS=""     extra flags for the gateway under test
#   FLEET_WAITERS=10000   waiters of the memory row (0: skip)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
DUR=${FLEET_SECONDS:-3}
ROUNDS=${FLEET_ROUNDS:-2}
NIDLE=${FLEET_IDLE:-10000}
SWEEP=${FLEET_SWEEP:-1 10 50 200 1000 10000}
NWAITERS=${FLEET_WAITERS:-10000}
RESULTS=$ROOT/bench/results
export BENCH_DIR=$ROOT/bench
BENCH_NAME=fleet
. "$BENCH_DIR/lib.sh"

command -v wrk >/dev/null || scripts/deps.sh wrk redis-tools
[ -x "$BUILD/lockgate" ] || { say "no $BUILD/lockgate: run make first"; exit 1; }

ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ $((NIDLE + 500)) -gt "$NOFILE" ]; then
    NIDLE=$((NOFILE - 500))
    say "ulimit -n is $NOFILE: $NIDLE idle connections"
fi
if [ "$NOFILE" != unlimited ] && [ $((NWAITERS + 500)) -gt "$NOFILE" ]; then
    NWAITERS=$((NOFILE - 500))
fi

read -r RPORT GPORT BPORT < <(python3 -c 'import socket
s=[socket.socket() for _ in range(3)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')

redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
    --maxclients 30000 --logfile "$TMP/redis.log" &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
RCLI=(redis-cli -p "$RPORT")
wait_for redis "$TMP/redis.log" "${RCLI[@]}" ping

# shellcheck disable=SC2086
"$BUILD/lockgate" --listen "127.0.0.1:$GPORT" --redis "redis://127.0.0.1:$RPORT" \
    --log-level warn ${FLEET_GW_FLAGS:-} > "$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
GW=http://127.0.0.1:$GPORT
wait_for gateway "$TMP/gateway.log" curl -sf "$GW/readyz"
say "redis :$RPORT, gateway :$GPORT (pid $GW_PID, flags '${FLEET_GW_FLAGS:-}'), data in $TMP"

HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A R

# run LABEL CONNS SCRIPT URL [PID]: one wrk run, added to LABEL's totals.
run() {
    local label=$1 c=$2 script=$3 url=$4 pid=${5:-$GW_PID} t=2 g0 r0 g1 r1 line
    [ "$c" -lt 2 ] && t=1
    g0=$(ticks "$pid"); r0=$(ticks "$REDIS_PID")
    wrk -t"$t" -c"$c" -d"${DUR}s" --timeout 10s --latency -s "bench/$script" "$url" \
        > "$TMP/$label.txt" 2>&1 || true
    g1=$(ticks "$pid"); r1=$(ticks "$REDIS_PID")
    line=$(grep '^RESULT ' "$TMP/$label.txt" || echo "RESULT requests=0 seconds=1 rps=0 p50_ms=0 p99_ms=0 errors=1")
    local kv req=0 sec=1 p50=0 p99=0 err=0
    for kv in ${line#RESULT }; do
        case ${kv%%=*} in requests) req=${kv#*=};; seconds) sec=${kv#*=};; p50_ms) p50=${kv#*=};;
                          p99_ms) p99=${kv#*=};; errors) err=${kv#*=};; esac
    done
    R[$label.req]=$(( ${R[$label.req]:-0} + req ))
    R[$label.sec]=$(calc %.3f "${R[$label.sec]:-0} + $sec")
    R[$label.err]=$(( ${R[$label.err]:-0} + err ))
    R[$label.p50s]="${R[$label.p50s]:-} $p50"
    R[$label.p99s]="${R[$label.p99s]:-} $p99"
    R[$label.gw_t]=$(( ${R[$label.gw_t]:-0} + g1 - g0 ))
    R[$label.redis_t]=$(( ${R[$label.redis_t]:-0} + r1 - r0 ))
    say "$(printf '%-14s c=%-5s %8.0f req/s  p50 %7.3f ms  p99 %8.3f ms  errors %s  gw %s us/req' \
        "$label" "$c" "$(calc %.0f "$req / $sec")" "$p50" "$p99" "$err" \
        "$(calc %.1f "($g1 - $g0) * 1e6 / $HZ / ($req > 0 ? $req : 1)")")"
}
finish() {
    local l=$1 n=${R[$1.req]:-0}
    [ "$n" -gt 0 ] || n=1
    R[$l.rps]=$(calc %.0f "$n / ${R[$l.sec]}")
    R[$l.p50]=$(echo "${R[$l.p50s]}" | median)
    R[$l.p99]=$(echo "${R[$l.p99s]}" | median)
    R[$l.gw_us]=$(calc %.1f "${R[$l.gw_t]} * 1e6 / $HZ / $n")
    R[$l.redis_us]=$(calc %.1f "${R[$l.redis_t]} * 1e6 / $HZ / $n")
}

sleep 1
RSS_IDLE=$(status_kib "$GW_PID" VmRSS)
THREADS=$(status_kib "$GW_PID" Threads)

# ---- idle connections: the same phases without and with them, interleaved
IDLE_OPEN=0 IDLE_ANSWERED=0 RSS_WITH_IDLE=0
for round in $(seq "$ROUNDS"); do
    run healthz "50" get.lua "$GW/healthz"
    run locks "50" locks.lua "$GW/"
    rm -f "$TMP/idle.ready"
    python3 bench/idle.py "$GPORT" "$NIDLE" "$TMP/idle.ready" > "$TMP/idle.out" 2>&1 &
    IDLE_PID=$!
    PIDS+=("$IDLE_PID")
    for _ in $(seq 600); do [ -f "$TMP/idle.ready" ] && break; sleep 0.1; done
    say "idle connections: $(cat "$TMP/idle.ready" 2>/dev/null || echo 'not ready')"
    IDLE_OPEN=$(sed -n 's/.*open=\([0-9]*\).*/\1/p' "$TMP/idle.ready" 2>/dev/null || echo 0)
    run healthz_idle "50" get.lua "$GW/healthz"
    run locks_idle "50" locks.lua "$GW/"
    rss=$(status_kib "$GW_PID" VmRSS)
    [ "$rss" -gt "$RSS_WITH_IDLE" ] && RSS_WITH_IDLE=$rss
    kill -USR1 "$IDLE_PID"
    wait "$IDLE_PID" || true
    a=$(sed -n 's/.*answered=\([0-9]*\).*/\1/p' "$TMP/idle.out")
    say "idle connections answered again: ${a:-0} of $IDLE_OPEN"
    IDLE_ANSWERED=${a:-0}
    run locks1 1 locks.lua "$GW/"
    "${RCLI[@]}" flushall >/dev/null
done
for l in healthz locks healthz_idle locks_idle locks1; do finish $l; done

# ---- the sweep
for c in $SWEEP; do
    run "sweep$c" "$c" locks.lua "$GW/"
    finish "sweep$c"
    "${RCLI[@]}" flushall >/dev/null
done
RSS_SWEEP=$(status_kib "$GW_PID" VmRSS)

# ---- 10,000 waiters
WAIT_LINE=""
if [ "$NWAITERS" -gt 0 ]; then
    WAIT_LINE=$(python3 bench/waiters.py many "$GPORT" "$GW_PID" "$NWAITERS" | grep '^RESULT ' || true)
    for kv in ${WAIT_LINE#RESULT }; do R[wait.${kv%%=*}]=${kv#*=}; done
fi

# ---- the table
verdict() { if awk "BEGIN {exit !($1)}"; then echo PASS; else echo MISS; fi; }
ratio() { calc %.2f "($2 > 0) ? $1 / $2 : 0"; }
OUT=$TMP/fleet.md
{
echo "| measure | req/s | p50 ms | p99 ms | errors | CPU µs/req gateway · Redis |"
echo "|---|---:|---:|---:|---:|---|"
row() { echo "| $2 | ${R[$1.rps]} | ${R[$1.p50]} | ${R[$1.p99]} | ${R[$1.err]} | ${R[$1.gw_us]} · ${R[$1.redis_us]} |"; }
row healthz "GET /healthz, 50 conns"
row locks "locks cycle, 50 conns"
row healthz_idle "GET /healthz, 50 conns, $IDLE_OPEN idle open"
row locks_idle "locks cycle, 50 conns, $IDLE_OPEN idle open"
row locks1 "locks cycle, 1 conn"
for c in $SWEEP; do row "sweep$c" "sweep: locks cycle, $c conns"; done
echo
echo "| target | measured | |"
echo "|---|---:|---|"
t_lr=$(ratio "${R[locks_idle.rps]}" "${R[locks.rps]}")
t_lp=$(ratio "${R[locks_idle.p99]}" "${R[locks.p99]}")
t_hr=$(ratio "${R[healthz_idle.rps]}" "${R[healthz.rps]}")
t_hp=$(ratio "${R[healthz_idle.p99]}" "${R[healthz.p99]}")
echo "| $IDLE_OPEN idle: locks req/s ≥ 0.9×, p99 ≤ 1.5× | $t_lr×, $t_lp× | $(verdict "$t_lr >= 0.9 && $t_lp <= 1.5 && $IDLE_OPEN >= $NIDLE") |"
echo "| $IDLE_OPEN idle: /healthz req/s ≥ 0.9×, p99 ≤ 1.5× | $t_hr×, $t_hp× | $(verdict "$t_hr >= 0.9 && $t_hp <= 1.5 && $IDLE_OPEN >= $NIDLE") |"
echo "| $IDLE_OPEN idle: RSS < 64 MiB; all still answered | $(mib "$RSS_WITH_IDLE") MiB; $IDLE_ANSWERED | $(verdict "$RSS_WITH_IDLE < 65536 && $IDLE_ANSWERED == $IDLE_OPEN") |"
t_cpu=$(ratio "${R[locks.gw_us]}" "${R[healthz.gw_us]}")
echo "| gateway CPU per lock request ≤ 1.5 × per /healthz, 50 conns | ${R[locks.gw_us]} ÷ ${R[healthz.gw_us]} µs = $t_cpu× | $(verdict "$t_cpu <= 1.5") |"
echo "| 1 conn: gateway CPU per lock request ≤ 45 µs | ${R[locks1.gw_us]} µs; p50 ${R[locks1.p50]} ms | $(verdict "${R[locks1.gw_us]} <= 45") |"
last=${SWEEP##* }
echo "| sweep to $last conns: no errors | ${R[sweep$last.err]} errors | $(verdict "${R[sweep$last.err]} == 0") |"
if [ -n "$WAIT_LINE" ]; then
    echo "| ${R[wait.waiters]:-?} waiters: RSS < 64 MiB, threads fixed ($THREADS) | $(mib "${R[wait.rss_kib]:-0}") MiB, ${R[wait.threads]:-?} threads | $(verdict "${R[wait.rss_kib]:-999999} < 65536 && ${R[wait.threads]:-0} == $THREADS && ${R[wait.waiters]:-0} >= $NWAITERS") |"
fi
echo "| (for reading) gateway RSS idle · after sweep; threads | $(mib "$RSS_IDLE") · $(mib "$RSS_SWEEP") MiB; $THREADS | |"
} > "$OUT"
mkdir -p "$RESULTS"
{
echo
echo "lockgate fleet bench, $(date -u '+%F %T') UTC, $(nproc) cores (shared with other work), load $(cut -d' ' -f1-3 /proc/loadavg);" \
     "tree $(git describe --always --dirty 2>/dev/null || echo '?'), flags '${FLEET_GW_FLAGS:-}'; $ROUNDS rounds of ${DUR} s, wrk -t2 (-t1 at 1 conn)"
echo
cat "$OUT"
} | tee "$RESULTS/fleet.md"

#!/usr/bin/env bash
# bench/namespaces.sh -- the id-namespace targets (issue #17), alone or as a
# step of bench/run.sh (`make bench`).  Starts its own redis-server and
# gateways on free loopback ports in a mktemp directory, stops them on exit.
#
#   1. BENCH_NS_TOTAL (1,000,000) distinct namespaces through one gateway
#      with the default --id-namespaces: every answer 200, peak RSS < 64 MiB.
#   2. (BENCH_NS_ROWS=1, the default; run.sh measures these rows itself)
#      with eviction active -- a gateway with --id-namespaces
#      BENCH_ID_NAMESPACES (1024) filled with twice that many namespaces,
#      and bench/churn.py asking for BENCH_CHURN_RATE (50) namespaces never
#      seen a second during the ids rows -- GET /healthz, single ids and ids
#      in batches of 1000, in
#      BENCH_ROUNDS (3) interleaved rounds of BENCH_SECONDS (4) s, 50 conns:
#      single ids ≥ 0.8 × /healthz, batched ≥ 5 M ids/s, evictions > 0.
#
# Other settings: BUILD=build, BENCH_NS_GW_THREADS=8 (gateway threads in
# part 1: a new namespace waits for one lease, so more threads keep Redis
# busy), BENCH_NS_CONNS=16, BENCH_THREADS=2 (gateway threads in part 2, as
# run.sh), BENCH_KEEP=1.  Prints PASS/MISS rows of a markdown table on
# stdout, progress on stderr.  Informs, does not gate.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TOTAL=${BENCH_NS_TOTAL:-1000000}
NS_GW_THREADS=${BENCH_NS_GW_THREADS:-8}
NS_CONNS=${BENCH_NS_CONNS:-16}
ROWS=${BENCH_NS_ROWS:-1}
LIMIT=${BENCH_ID_NAMESPACES:-1024}
CHURN_RATE=${BENCH_CHURN_RATE:-50}
DUR=${BENCH_SECONDS:-4}
ROUNDS=${BENCH_ROUNDS:-3}
THREADS=${BENCH_THREADS:-2}
export BENCH_DIR=$PWD/bench

BENCH_NAME=namespaces
. "$BENCH_DIR/lib.sh"

scripts/deps.sh wrk redis-tools
[ -x "$BUILD/lockgate" ] || { say "no $BUILD/lockgate: run make first"; exit 1; }

read -r RPORT GPORT G2PORT < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')

redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
    --logfile "$TMP/redis.log" &
PIDS+=("$!")
wait_for redis "$TMP/redis.log" redis-cli -p "$RPORT" ping

status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
metric() { curl -s "$1/metrics" | awk -v k="$2" '$1 == k {print $2}'; }
verdict() { if awk "BEGIN {exit !($1)}"; then echo PASS; else echo MISS; fi; }
result() { # result FILE KEY: a field of wrk's RESULT line
    awk -v k="$2" '$1 == "RESULT" {for (i = 2; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2)}' "$1"
}
start_gw() { # start_gw PORT LOG FLAGS...: sets GW_PID
    local port=$1 log=$2
    shift 2
    "$BUILD/lockgate" --listen "127.0.0.1:$port" --redis "redis://127.0.0.1:$RPORT" \
        --log-level warn "$@" > "$log" 2>&1 &
    GW_PID=$!
    PIDS+=("$GW_PID")
    wait_for gateway "$log" curl -sf "http://127.0.0.1:$port/readyz"
}

# distinct COUNT PREFIX URL CONNS: COUNT requests, each for a new namespace;
# waits until they are answered, then interrupts wrk (which prints then).
distinct() {
    local count=$1 prefix=$2 url=$3 conns=$4 done_dir=$TMP/done-$2 i
    mkdir -p "$done_dir"
    NS_TOTAL=$count NS_THREADS=2 NS_PREFIX=$prefix NS_DONE_DIR=$done_dir \
        wrk -t2 -c"$conns" -d3600s -s bench/ids_ns.lua "$url" > "$TMP/$prefix.txt" 2>&1 &
    local wrk_pid=$!
    while [ "$(ls "$done_dir" | wc -l)" -lt 2 ] && kill -0 "$wrk_pid" 2>/dev/null; do sleep 1; done
    kill -INT "$wrk_pid" 2>/dev/null || true
    wait "$wrk_pid" || true
}

# ---- 1. a million namespaces ---------------------------------------------------
start_gw "$GPORT" "$TMP/gw.log" --threads "$NS_GW_THREADS"
GW1=$GW_PID
say "part 1: $TOTAL namespaces through :$GPORT ($NS_GW_THREADS threads, default --id-namespaces)"
T0=$(date +%s.%N)
distinct "$TOTAL" ns "http://127.0.0.1:$GPORT/" "$NS_CONNS"
T1=$(date +%s.%N)
ANSWERED=$(sed -n 's/^NS answered=\([0-9]*\).*/\1/p' "$TMP/ns.txt")
NON200=$(sed -n 's/^NS .*non200=\([0-9]*\).*/\1/p' "$TMP/ns.txt")
RSS=$(status_kib "$GW1" VmRSS)
HWM=$(status_kib "$GW1" VmHWM)
LIVE=$(metric "http://127.0.0.1:$GPORT" lockgate_id_namespaces)
EVICTED=$(metric "http://127.0.0.1:$GPORT" lockgate_id_namespaces_evicted_total)
SECS=$(awk -v a="$T0" -v b="$T1" 'BEGIN {printf "%.0f", b - a}')
say "part 1: ${ANSWERED:-0} answered, ${NON200:-?} not 200, ${SECS} s; RSS $(mib "$RSS") MiB," \
    "peak $(mib "$HWM") MiB; live $LIVE, evicted $EVICTED"
kill "$GW1"
echo "| $TOTAL distinct id namespaces through one gateway: every answer 200, peak RSS < 64 MiB | ${ANSWERED:-0} answered, ${NON200:-?} not 200, peak RSS $(mib "$HWM") MiB (now $(mib "$RSS")), $EVICTED evicted, $LIVE live, ${SECS} s | $(verdict "${ANSWERED:-0} >= $TOTAL && ${NON200:-1} == 0 && $HWM < 65536") |"

[ "$ROWS" = 1 ] || exit 0

# ---- 2. the ids rows with eviction active -----------------------------------------
start_gw "$G2PORT" "$TMP/gw2.log" --threads "$THREADS" --id-namespaces "$LIMIT"
GW2=http://127.0.0.1:$G2PORT
redis-cli -p "$RPORT" flushall sync > /dev/null
distinct $((2 * LIMIT)) fill "$GW2/" 4
EV0=$(metric "$GW2" lockgate_id_namespaces_evicted_total)
say "part 2: :$G2PORT --id-namespaces $LIMIT, $(metric "$GW2" lockgate_id_namespaces) live," \
    "$EV0 evicted by the fill; $CHURN_RATE new namespaces a second during the ids rows"
declare -A REQ SEC
EVICTED=0
for round in $(seq "$ROUNDS"); do
    for row in healthz ids1 ids1000; do
        if [ "$row" = ids1 ]; then
            EV_A=$(metric "$GW2" lockgate_id_namespaces_evicted_total)
            python3 bench/churn.py "127.0.0.1:$G2PORT" "$CHURN_RATE" "churn-$round" \
                >> "$TMP/churn.txt" &
            CHURN_PID=$!
            PIDS+=("$CHURN_PID")
        fi
        case $row in
        healthz) wrk -t2 -c50 -d"${DUR}s" -s bench/get.lua "$GW2/healthz" > "$TMP/$row.txt" 2>&1 ;;
        ids1) wrk -t2 -c50 -d"${DUR}s" -s bench/ids.lua "$GW2/" > "$TMP/$row.txt" 2>&1 ;;
        ids1000) IDS_COUNT=1000 wrk -t2 -c50 -d"${DUR}s" -s bench/ids.lua "$GW2/" \
            > "$TMP/$row.txt" 2>&1 ;;
        esac
        REQ[$row]=$(( ${REQ[$row]:-0} + $(result "$TMP/$row.txt" requests) ))
        SEC[$row]=$(awk -v a="${SEC[$row]:-0}" -v b="$(result "$TMP/$row.txt" seconds)" 'BEGIN {print a + b}')
        [ "$(result "$TMP/$row.txt" errors)" = 0 ] || say "$row: errors: $(grep '^RESULT' "$TMP/$row.txt")"
        if [ "$row" = ids1000 ]; then
            kill -TERM "$CHURN_PID"
            wait "$CHURN_PID" || true
            EVICTED=$((EVICTED + $(metric "$GW2" lockgate_id_namespaces_evicted_total) - EV_A))
        fi
    done
done
CHURN_SENT=$(awk '{s += substr($2, 6)} END {print s + 0}' "$TMP/churn.txt")
CHURN_NON200=$(awk '{n += substr($3, 8)} END {print n + 0}' "$TMP/churn.txt")
rps() { awk -v r="${REQ[$1]}" -v s="${SEC[$1]}" 'BEGIN {printf "%.0f", r / s}'; }
HZ_RPS=$(rps healthz)
IDS1=$(rps ids1)
IDS1000=$(( $(rps ids1000) * 1000 ))
RATIO=$(awk -v a="$IDS1" -v b="$HZ_RPS" 'BEGIN {printf "%.2f", a / b}')
say "part 2: healthz $HZ_RPS req/s, ids $IDS1 req/s, ids x1000 $IDS1000 ids/s, $EVICTED evicted" \
    "(churn.py: $CHURN_SENT sent, $CHURN_NON200 not 200)"
echo "| with eviction active (--id-namespaces $LIMIT, full; $CHURN_RATE new namespaces/s during the ids rows: $EVICTED evicted then, $CHURN_NON200 of $CHURN_SENT not 200): single ids ÷ /healthz ≥ 0.8 | $IDS1 ÷ $HZ_RPS req/s = $RATIO | $(verdict "$RATIO >= 0.8 && $EVICTED > 0") |"
echo "| with eviction active, as above: ids in batches of 1000 ≥ 5,000,000/s | $IDS1000 | $(verdict "$IDS1000 >= 5000000 && $EVICTED > 0") |"

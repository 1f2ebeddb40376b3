#!/usr/bin/env bash
# bench/run.sh -- `make bench`: lockgate beside Redis's own ceiling and etcd,
# measured in one run on this machine, printed as one table.
#
# Starts its own redis-server (no persistence), gateway and etcd on free
# loopback ports in a mktemp directory and stops them on exit.  Informs, does
# not gate: nothing here fails on a missed target (it says MISS).
#
# Environment (all optional):
#   BUILD=build            where lockgate was built
#   BENCH_SECONDS=4        length of one round of a main wrk phase
#   BENCH_ROUNDS=3         rounds of the main phases, interleaved
#   BENCH_SWEEP_SECONDS=6  length of each sweep point
#   BENCH_THREADS=2        gateway --threads
#   BENCH_WAITERS=10000    concurrent waiters (lowered if `ulimit -n` is short)
#   BENCH_HANDOFFS=200     sequential release-to-waiter hand-offs
#   BENCH_PROFILE=1        perf record the gateway and Redis during the locks
#                          phase; top symbols go to bench/results/profile-*.txt
#   BENCH_KEEP=1           keep the temporary directory (logs, wrk output)
#   BENCH_ID_NAMESPACES=1024  the gateway's --id-namespaces: it is filled
#                          with twice that many before the main phases, and
#   BENCH_CHURN_RATE=50    bench/churn.py asks for that many new namespaces
#                          a second during them, so the ids rows run with
#                          eviction active
#   BENCH_NS_TOTAL=1000000 namespaces of bench/namespaces.sh's step (0: skip)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
DUR=${BENCH_SECONDS:-4}
ROUNDS=${BENCH_ROUNDS:-3}
SWEEP_DUR=${BENCH_SWEEP_SECONDS:-6}
THREADS=${BENCH_THREADS:-2}
NWAITERS=${BENCH_WAITERS:-10000}
HANDOFFS=${BENCH_HANDOFFS:-200}
RESULTS=$ROOT/bench/results
export BENCH_DIR=$ROOT/bench

BENCH_NAME=bench
. "$BENCH_DIR/lib.sh"

# ---- what it needs ----------------------------------------------------------
scripts/deps.sh wrk etcd-server etcd-client gnuplot-nox redis-tools valgrind
command -v python3 >/dev/null || scripts/deps.sh python3
[ -x "$BUILD/lockgate" ] || { say "no $BUILD/lockgate: run make first"; exit 1; }
[ -f "$BUILD/gen/lua/acquire.lua" ] || { say "no $BUILD/gen/lua/acquire.lua"; exit 1; }
if [ "${BENCH_PROFILE:-0}" = 1 ] && ! command -v perf >/dev/null; then
    scripts/deps.sh linux-perf
fi

# 10,000 waiters need 10,000 descriptors in the gateway and in the client.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ $((NWAITERS + 200)) -gt "$NOFILE" ]; then
    say "ulimit -n is $NOFILE: $((NOFILE - 200)) waiters instead of $NWAITERS"
    NWAITERS=$((NOFILE - 200))
fi


read -r RPORT GPORT EPORT EPEER BPORT < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
EOF
)


# ---- servers --------------------------------------------------------------------
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
    --logfile "$TMP/redis.log" &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
RCLI=(redis-cli -p "$RPORT")
wait_for redis "$TMP/redis.log" "${RCLI[@]}" ping

mkdir -p "$TMP/etcd"
etcd --name default --data-dir "$TMP/etcd" \
    --listen-client-urls "http://127.0.0.1:$EPORT" --advertise-client-urls "http://127.0.0.1:$EPORT" \
    --listen-peer-urls "http://127.0.0.1:$EPEER" --initial-advertise-peer-urls "http://127.0.0.1:$EPEER" \
    --initial-cluster "default=http://127.0.0.1:$EPEER" > "$TMP/etcd.log" 2>&1 &
ETCD_PID=$!
PIDS+=("$ETCD_PID")
ETCD=http://127.0.0.1:$EPORT
wait_for etcd "$TMP/etcd.log" curl -sf "$ETCD/version"
ETCD_VERSION=$(curl -s "$ETCD/version" | sed 's/.*"etcdserver":"\([^"]*\)".*/\1/')
ETCD_LEASE=$(curl -s -X POST "$ETCD/v3/lease/grant" -d '{"TTL":600}' |
             sed -n 's/.*"ID":"\([0-9]*\)".*/\1/p')
probe=$(curl -s -X POST "$ETCD/v3/lock/lock" \
        -d "{\"name\":\"$(printf bench/probe | base64)\",\"lease\":\"$ETCD_LEASE\"}")
probe_key=$(printf '%s' "$probe" | sed -n 's/.*"key":"\([^"]*\)".*/\1/p')
if [ -z "$ETCD_LEASE" ] || [ -z "$probe_key" ]; then
    say "etcd $ETCD_VERSION does not serve the v3 lock API over HTTP (/v3/lock/lock): $probe"
    exit 1
fi
curl -s -X POST "$ETCD/v3/lock/unlock" -d "{\"key\":\"$probe_key\"}" >/dev/null
export ETCD_LEASE

ID_NAMESPACES=${BENCH_ID_NAMESPACES:-1024}
CHURN_RATE=${BENCH_CHURN_RATE:-50}
"$BUILD/lockgate" --listen "127.0.0.1:$GPORT" --redis "redis://127.0.0.1:$RPORT" \
    --threads "$THREADS" --id-namespaces "$ID_NAMESPACES" --log-level warn > "$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
GW=http://127.0.0.1:$GPORT
wait_for gateway "$TMP/gateway.log" curl -sf "$GW/readyz"
say "redis :$RPORT (pid $REDIS_PID), gateway :$GPORT (pid $GW_PID, $THREADS threads)," \
    "etcd $ETCD_VERSION :$EPORT (pid $ETCD_PID), data in $TMP"

# ---- measuring helpers --------------------------------------------------------
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
used_memory() { "${RCLI[@]}" info memory | awk -F: '/^used_memory:/ {print $2 + 0}'; }
flush() { "${RCLI[@]}" flushall sync >/dev/null; }
# Mean MEMORY USAGE (key, value and their entry; exact, unlike used_memory's
# difference, which moves by a few bytes with allocator and dict state) of
# up to 1000 keys matching $1.
mean_usage() {
    "${RCLI[@]}" --scan --pattern "$1" | awk 'NR <= 1000 {print "MEMORY USAGE " $0}' |
        "${RCLI[@]}" | awk '{s += $1; n++} END {printf "%.0f", n ? s / n : 0}'
}
children_cpu() { # the second line of `times`: children's user and sys
    awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
                   print t }' "$1"
}

declare -A R # results: R[label.key]

# run_wrk LABEL CONNS SECONDS SCRIPT URL: one wrk run against the gateway
# (the one in WRK_GW_PID, by default GW_PID) or etcd, added to LABEL's totals (a label may run several rounds);
# finish LABEL then sets R[LABEL.rps|p50|p99|err|req] and the CPU
# microseconds per request of the gateway, Redis, etcd and wrk itself
# (R[LABEL.gw_us] ...).  Rounds: requests/s over all of them; p50 and p99
# the median of the rounds' own.
run_wrk() {
    local label=$1 c=$2 d=$3 script=$4 url=$5 t=2 gw=${WRK_GW_PID:-$GW_PID}
    [ "$c" -lt 2 ] && t=1
    local g0 r0 e0 g1 r1 e1
    g0=$(ticks "$gw"); r0=$(ticks "$REDIS_PID"); e0=$(ticks "$ETCD_PID")
    ( wrk -t"$t" -c"$c" -d"${d}s" --latency -s "bench/$script" "$url" > "$TMP/$label.txt" 2>&1
      times > "$TMP/$label.times" )
    g1=$(ticks "$gw"); r1=$(ticks "$REDIS_PID"); e1=$(ticks "$ETCD_PID")
    cat "$TMP/$label.txt" >> "$TMP/$label.all.txt"
    local line
    line=$(grep '^RESULT ' "$TMP/$label.txt" || true)
    if [ -z "$line" ]; then
        say "wrk $label failed:"; cat "$TMP/$label.txt" >&2
        line="RESULT requests=0 seconds=1 rps=0 p50_ms=0 p99_ms=0 errors=1"
    fi
    local kv k v req=0 sec=1 rps=0 p50=0 p99=0 err=0
    for kv in ${line#RESULT }; do
        k=${kv%%=*}; v=${kv#*=}
        case $k in requests) req=$v;; seconds) sec=$v;; rps) rps=$v;; p50_ms) p50=$v;;
                   p99_ms) p99=$v;; errors) err=$v;; esac
    done
    R[$label.req]=$(( ${R[$label.req]:-0} + req ))
    R[$label.sec]=$(calc %.3f "${R[$label.sec]:-0} + $sec")
    R[$label.err]=$(( ${R[$label.err]:-0} + err ))
    R[$label.p50s]="${R[$label.p50s]:-} $p50"
    R[$label.p99s]="${R[$label.p99s]:-} $p99"
    R[$label.gw_t]=$(( ${R[$label.gw_t]:-0} + g1 - g0 ))
    R[$label.redis_t]=$(( ${R[$label.redis_t]:-0} + r1 - r0 ))
    R[$label.etcd_t]=$(( ${R[$label.etcd_t]:-0} + e1 - e0 ))
    R[$label.client_s]=$(calc %.3f "${R[$label.client_s]:-0} + $(children_cpu "$TMP/$label.times")")
    say "$(printf '%-10s c=%-4s %9.0f req/s  p50 %7.3f ms  p99 %8.3f ms  errors %s' \
        "$label" "$c" "$rps" "$p50" "$p99" "$err")"
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

finish() {
    local label=$1 n
    n=${R[$label.req]}
    [ "$n" -gt 0 ] || n=1
    R[$label.rps]=$(calc %.1f "${R[$label.req]} / ${R[$label.sec]}")
    R[$label.p50]=$(echo "${R[$label.p50s]}" | median)
    R[$label.p99]=$(echo "${R[$label.p99s]}" | median)
    R[$label.gw_us]=$(calc %.1f "${R[$label.gw_t]} * 1e6 / $HZ / $n")
    R[$label.redis_us]=$(calc %.1f "${R[$label.redis_t]} * 1e6 / $HZ / $n")
    R[$label.etcd_us]=$(calc %.1f "${R[$label.etcd_t]} * 1e6 / $HZ / $n")
    R[$label.client_us]=$(calc %.1f "${R[$label.client_s]} * 1e6 / $n")
}

evalsha_us() {
    "${RCLI[@]}" info commandstats | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p'
}

# redis_bench LABEL ARGS...: redis-benchmark, 50 clients, 100,000 calls;
# R[LABEL.rps|p50|p99] and Redis's and the client's CPU per call.
redis_bench() {
    local label=$1 r0 r1
    shift
    "${RCLI[@]}" config resetstat >/dev/null
    r0=$(ticks "$REDIS_PID")
    ( redis-benchmark -p "$RPORT" -c 50 -n 100000 -r 100000000 --csv "$@" > "$TMP/$label.csv" 2>&1
      times > "$TMP/$label.times" )
    r1=$(ticks "$REDIS_PID")
    local row
    row=$(tail -n 1 "$TMP/$label.csv" | tr -d '"')
    R[$label.rps]=$(echo "$row" | awk -F, '{print $2}')
    R[$label.p50]=$(echo "$row" | awk -F, '{print $5}')
    R[$label.p99]=$(echo "$row" | awk -F, '{print $7}')
    R[$label.redis_us]=$(calc %.1f "($r1 - $r0) * 1e6 / $HZ / 100000")
    R[$label.client_us]=$(calc %.1f "$(children_cpu "$TMP/$label.times") * 1e6 / 100000")
    R[$label.eval_us]=$(evalsha_us)
    say "$(printf '%-10s %9.0f calls/s  p50 %s ms  p99 %s ms' "$label" "${R[$label.rps]}" \
        "${R[$label.p50]}" "${R[$label.p99]}")"
}

# ---- the run ----------------------------------------------------------------------
sleep 1
RSS_IDLE=$(status_kib "$GW_PID" VmRSS)
THREADS_IDLE=$(status_kib "$GW_PID" Threads)

# The ids rows run with eviction active: the gateway's namespaces are
# filled to twice --id-namespaces first, and during the ids rows
# bench/churn.py asks for CHURN_RATE new ones a second (each evicts one; a
# few percent of a core, not spent during the /healthz row they are
# compared with).  Its keys are deleted before Redis's memory is measured.
NS_DONE=$TMP/ns-fill
mkdir -p "$NS_DONE"
NS_TOTAL=$((2 * ID_NAMESPACES)) NS_THREADS=2 NS_PREFIX=fill NS_DONE_DIR=$NS_DONE \
    wrk -t2 -c4 -d600s -s bench/ids_ns.lua "$GW/" > "$TMP/ns-fill.txt" 2>&1 &
NS_WRK=$!
while [ "$(ls "$NS_DONE" | wc -l)" -lt 2 ] && kill -0 "$NS_WRK" 2>/dev/null; do sleep 1; done
kill -INT "$NS_WRK" 2>/dev/null || true
wait "$NS_WRK" || true
gw_metric() { curl -s "$GW/metrics" | awk -v k="$1" '$1 == k {print $2}'; }
EVICT0=$(gw_metric lockgate_id_namespaces_evicted_total)

# The main phases run in ROUNDS interleaved rounds (healthz, locks, etcd,
# ids, ids x1000, again...), so that the load other work puts on the
# machine falls on all of them alike: the ratios are what count.
flush
"${RCLI[@]}" config resetstat >/dev/null
mem0=$(used_memory)
for round in $(seq "$ROUNDS"); do
    run_wrk healthz 50 "$DUR" get.lua "$GW/healthz"
    if [ "${BENCH_PROFILE:-0}" = 1 ] && [ "$round" = 1 ]; then
        perf record -F 999 -g -p "$GW_PID" -o "$TMP/perf-gw.data" -- sleep $((DUR - 1)) \
            > /dev/null 2>&1 &
        PERF1=$!
        perf record -F 999 -g -p "$REDIS_PID" -o "$TMP/perf-redis.data" -- sleep $((DUR - 1)) \
            > /dev/null 2>&1 &
        PERF2=$!
    fi
    run_wrk locks 50 "$DUR" locks.lua "$GW/"
    run_wrk locks1 1 "$DUR" locks.lua "$GW/"
    run_wrk etcd 50 "$DUR" etcd.lua "$ETCD/"
    EVICT_A=$(gw_metric lockgate_id_namespaces_evicted_total)
    python3 bench/churn.py "127.0.0.1:$GPORT" "$CHURN_RATE" "churn-$round" >> "$TMP/churn.txt" &
    CHURN_PID=$!
    PIDS+=("$CHURN_PID")
    run_wrk ids1 50 "$DUR" ids.lua "$GW/"
    IDS_COUNT=1000 run_wrk ids1000 50 "$DUR" ids.lua "$GW/"
    kill -TERM "$CHURN_PID"
    wait "$CHURN_PID" || true
    EVICT_IDS=$(( ${EVICT_IDS:-0} + $(gw_metric lockgate_id_namespaces_evicted_total) - EVICT_A ))
done
"${RCLI[@]}" --scan --pattern 'lockgate:id:{churn-*' | xargs -r -n 1000 "${RCLI[@]}" del >/dev/null
for l in healthz locks locks1 etcd ids1 ids1000; do finish $l; done
R[ids1000.ids]=$(calc %.0f "${R[ids1000.rps]} * 1000")
EVAL_US=$(evalsha_us)
LEFT_KEYS=$("${RCLI[@]}" dbsize)
LEFT_BYTES=$(calc %.0f "($(used_memory) - $mem0) / ($LEFT_KEYS > 0 ? $LEFT_KEYS : 1)")
if [ "${BENCH_PROFILE:-0}" = 1 ]; then
    wait "$PERF1" "$PERF2" || true
    mkdir -p "$RESULTS"
    for p in gw redis; do
        perf report -i "$TMP/perf-$p.data" --no-children --sort dso,symbol --stdio 2>/dev/null |
            grep -E '^ +[0-9]' | head -40 > "$RESULTS/profile-$p.txt" || true
    done
    say "profiles: bench/results/profile-gw.txt, profile-redis.txt"
fi
RSS_LOAD=$(status_kib "$GW_PID" VmRSS)

# The Redis ceiling: the gateway's own acquire script, straight from
# redis-benchmark, with the gateway's key layout (KEYS: hash, queue, queue
# deadlines; ARGV in the short form the gateway sends for the common case,
# as lua/acquire.lua's header lists it: token, ttl_ms; then the marker key
# and the value the Redis layer appends, lua/_marker.lua, the marker set
# first so that every grant reads and compares it).  100,000 calls on random
# names with a 10-minute TTL leave ~100,000 locks held: Redis memory per
# held lock is the difference in used_memory divided by them.
ACQ_SHA=$("${RCLI[@]}" script load "$(cat "$BUILD/gen/lua/acquire.lua")")
flush
"${RCLI[@]}" set lockgate:marker Mk3kZr8TqM2xWv9yLp0AbC > /dev/null
mem0=$(used_memory)
redis_bench redis_acq EVALSHA "$ACQ_SHA" 4 \
    'lockgate:lock:{__rand_int__}' \
    'lockgate:lock:{__rand_int__}:q' 'lockgate:lock:{__rand_int__}:qd' lockgate:marker \
    Bq3kZr8TqM2xWv9yLp0AbC 600000 Mk3kZr8TqM2xWv9yLp0AbC
mem1=$(used_memory)
keys=$("${RCLI[@]}" dbsize)
HELD=$((keys - 1)) # the marker is no lock
MEM_PER_LOCK=$(calc %.0f "($mem1 - $mem0) / $HELD")
HASH_BYTES=$(mean_usage 'lockgate:lock:{*}')

# For comparison: Redisson's lock layout (one hash per lock, one field
# "<client uuid>:<thread id>" holding the re-entry count, PEXPIRE) made by
# its own tryLock script, on the same key names.
REDISSON_LUA="if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);"
RSN_SHA=$("${RCLI[@]}" script load "$REDISSON_LUA")
flush
mem0=$(used_memory)
redis_bench redisson EVALSHA "$RSN_SHA" 1 'lockgate:lock:{__rand_int__}' 600000 \
    8743c9c0-0795-4907-87fd-6c719a6b4586:1
mem1=$(used_memory)
RSN_PER_LOCK=$(calc %.0f "($mem1 - $mem0) / $("${RCLI[@]}" dbsize)")
RSN_HASH_BYTES=$(mean_usage 'lockgate:lock:{*}')
flush

# Redisson's fenced lock (RFencedLock), the one with fencing tokens as
# lockgate has: the same hash, plus a counter key per name
# ("redisson_lock_token:{name}", INCR on every acquisition, no expiry).
FENCED_LUA="if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then local token = redis.call('incr', KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; return {redis.call('pttl', KEYS[1]), -1};"
FENCED_SHA=$("${RCLI[@]}" script load "$FENCED_LUA")
mem0=$(used_memory)
redis_bench fenced EVALSHA "$FENCED_SHA" 2 'lockgate:lock:{__rand_int__}' \
    'redisson_lock_token:{__rand_int__}' 600000 8743c9c0-0795-4907-87fd-6c719a6b4586:1
mem1=$(used_memory)
FENCED_LOCKS=$("${RCLI[@]}" --scan --pattern 'lockgate:lock:{*}' | wc -l)
FENCED_PER_LOCK=$(calc %.0f "($mem1 - $mem0) / ($FENCED_LOCKS > 0 ? $FENCED_LOCKS : 1)")
flush

# Redis time per acquire, release and cycle beside Redisson's scripts, each
# replayed on fresh names on a quiet Redis of its own: by time (INFO
# commandstats) and by instructions (callgrind: exact on a busy machine).
say "redis_cost: Redis time and instructions per operation, lockgate and Redisson"
python3 bench/redis_cost.py --gen "$BUILD/gen/lua" -n 20000 --reps 5 --markdown > "$TMP/rcost_time.md"
python3 bench/redis_cost.py --gen "$BUILD/gen/lua" -n 2000 --callgrind --markdown \
    > "$TMP/rcost_ir.md" 2> /dev/null
rcost() { # rcost FILE ROW COLUMN: a cell of redis_cost.py's table
    awk -F' *[|] *' -v row="$2" -v col="$3" '$2 == row {print $(col + 2)}' "$1"
}
RC_T=$(rcost "$TMP/rcost_time.md" lockgate 4)
RC_IR=$(rcost "$TMP/rcost_ir.md" lockgate 4)
RC_T_ACQ=$(rcost "$TMP/rcost_time.md" lockgate 1)
RC_T_REL=$(rcost "$TMP/rcost_time.md" lockgate 2)
RC_IR_ACQ=$(calc %.2f "$(rcost "$TMP/rcost_ir.md" lockgate 1) / $(rcost "$TMP/rcost_ir.md" Redisson 1)")
RC_IR_REL=$(calc %.2f "$(rcost "$TMP/rcost_ir.md" lockgate 2) / $(rcost "$TMP/rcost_ir.md" Redisson 2)")
RC_T_ACQ=$(calc %.2f "$RC_T_ACQ / $(rcost "$TMP/rcost_time.md" Redisson 1)")
RC_T_REL=$(calc %.2f "$RC_T_REL / $(rcost "$TMP/rcost_time.md" Redisson 2)")

# The sweep: the locks cycle at 1 ... 10,000 connections.
mkdir -p "$RESULTS"
SWEEP_DAT=$RESULTS/sweep.dat
echo "# connections requests/s p50_ms p99_ms errors gateway_cpu_us_per_request" > "$SWEEP_DAT"
for c in 1 10 50 200 1000 10000; do
    flush
    run_wrk "sweep$c" "$c" "$SWEEP_DUR" locks.lua "$GW/"
    finish "sweep$c"
    echo "$c ${R[sweep$c.rps]} ${R[sweep$c.p50]} ${R[sweep$c.p99]} ${R[sweep$c.err]} ${R[sweep$c.gw_us]}" >> "$SWEEP_DAT"
done
RSS_SWEEP=$(status_kib "$GW_PID" VmRSS)
THREADS_SWEEP=$(status_kib "$GW_PID" Threads)
gnuplot -e "data='$SWEEP_DAT'; out='$RESULTS/sweep.png'; title='lockgate locks cycle, $(nproc) cores, gateway --threads $THREADS ($(date -u +%F))'" \
    bench/sweep.gp 2> "$TMP/gnuplot.log" || say "gnuplot failed: $(cat "$TMP/gnuplot.log")"

# Waiting: NWAITERS parked on one lock, then release-to-waiter hand-offs.
flush
say "opening $NWAITERS waiting connections"
line=$(python3 bench/waiters.py many "$GPORT" "$GW_PID" "$NWAITERS" | grep '^RESULT ' || true)
for kv in ${line#RESULT }; do R[wait.${kv%%=*}]=${kv#*=}; done
sleep 1
line=$(python3 bench/waiters.py handoff "$GPORT" "$HANDOFFS" | grep '^RESULT ' || true)
for kv in ${line#RESULT }; do R[hand.${kv%%=*}]=${kv#*=}; done
RSS_END=$(status_kib "$GW_PID" VmRSS)

# 1,000,000 distinct namespaces through one gateway: its own servers.
NS_ROWS=""
if [ "${BENCH_NS_TOTAL:-1000000}" != 0 ]; then
    NS_ROWS=$(BENCH_NS_ROWS=0 BUILD=$BUILD bench/namespaces.sh) || say "bench/namespaces.sh failed"
fi

# ---- the table -------------------------------------------------------------------
ratio() { calc %.2f "($2 > 0) ? $1 / $2 : 0"; }
R_LOCKS_HTTP=$(ratio "${R[locks.rps]}" "${R[healthz.rps]}")
R_LOCKS_ETCD=$(ratio "${R[locks.rps]}" "${R[etcd.rps]}")
R_ETCD_CPU=$(ratio "${R[etcd.etcd_us]}" "$(calc %.3f "${R[locks.gw_us]} + ${R[locks.redis_us]}")")
R_CPU_HTTP=$(ratio "${R[locks.gw_us]}" "${R[healthz.gw_us]}")
R_IDS_HTTP=$(ratio "${R[ids1.rps]}" "${R[healthz.rps]}")
R_LOCKS_REDIS=$(ratio "${R[locks.rps]}" "${R[redis_acq.rps]}")
cost() { calc %.1f "${R[$1.gw_us]} + ${R[$1.redis_us]} + ${R[$1.client_us]}"; }
cost_ratio() { calc %.2f "$(cost "$1") / $(cost "$2")"; }
verdict() { if awk "BEGIN {exit !($1)}"; then echo PASS; else echo MISS; fi; }
f0() { calc %.0f "$1"; }

OUT=$TMP/table.md
{
echo "| measure | result | p50 ms | p99 ms | errors | CPU µs/request: gateway · Redis · etcd · client |"
echo "|---|---:|---:|---:|---:|---|"
row() { # row LABEL TEXT VALUE
    local l=$1
    echo "| $2 | $3 | ${R[$l.p50]} | ${R[$l.p99]} | ${R[$l.err]:-} | ${R[$l.gw_us]:--} · ${R[$l.redis_us]:--} · ${R[$l.etcd_us]:--} · ${R[$l.client_us]:--} |"
}
row healthz "HTTP ceiling: GET /healthz, 50 conns" "$(f0 "${R[healthz.rps]}") req/s"
row locks "locks: POST+DELETE random names, 50 conns" "$(f0 "${R[locks.rps]}") req/s ($(f0 "${R[locks.rps]} / 2") cycles/s)"
row locks1 "locks, 1 conn" "$(f0 "${R[locks1.rps]}") req/s"
row etcd "etcd $ETCD_VERSION: lock+unlock (v3 HTTP), 50 conns" "$(f0 "${R[etcd.rps]}") req/s"
echo "| Redis ceiling: redis-benchmark EVALSHA acquire.lua, 50 clients | $(f0 "${R[redis_acq.rps]}") calls/s | ${R[redis_acq.p50]} | ${R[redis_acq.p99]} | | - · ${R[redis_acq.redis_us]} · - · ${R[redis_acq.client_us]} |"
echo "| (reference) Redisson's tryLock script, same way | $(f0 "${R[redisson.rps]}") calls/s | ${R[redisson.p50]} | ${R[redisson.p99]} | | - · ${R[redisson.redis_us]} · - · ${R[redisson.client_us]} |"
echo "| Redis time inside EVALSHA (INFO commandstats): locks run (acquire+release) · acquire alone · Redisson's | ${EVAL_US} · ${R[redis_acq.eval_us]} · ${R[redisson.eval_us]} µs | | | | |"
echo "| Redis process CPU per lock request under load (locks run, /proc) · lock operations/s one Redis core sustains through lockgate | ${R[locks.redis_us]} µs · $(f0 "1000000 / ${R[locks.redis_us]}")/s | | | | |"
row ids1 "ids: POST /v1/ids/bench, 50 conns, eviction active ($CHURN_RATE new namespaces/s)" "$(f0 "${R[ids1.rps]}") req/s"
row ids1000 "ids: count=1000, 50 conns, eviction active (the same)" "$(f0 "${R[ids1000.ids]}") ids/s ($(f0 "${R[ids1000.rps]}") req/s)"
echo "| id namespaces evicted during the ids rows (--id-namespaces $ID_NAMESPACES, filled with $((2 * ID_NAMESPACES)) before: ${EVICT0:-0} evicted by the fill; churn.py: $(awk '{s += substr($2, 6); n += substr($3, 8)} END {printf "%d sent, %d not 200", s, n}' "$TMP/churn.txt" 2>/dev/null)) | ${EVICT_IDS:-0} | | | | |"
echo "| gateway RSS idle / after load / after sweep / at end | $(mib "$RSS_IDLE") / $(mib "$RSS_LOAD") / $(mib "$RSS_SWEEP") / $(mib "$RSS_END") MiB | | | | |"
echo "| gateway threads idle / after sweep | $THREADS_IDLE / $THREADS_SWEEP | | | | |"
echo "| Redis memory per held lock (100,000 held: one hash each): used_memory ÷ locks (mean MEMORY USAGE of 1000) | $MEM_PER_LOCK B ($HASH_BYTES B) | | | | |"
echo "| (reference) Redisson's RLock layout, same names | $RSN_PER_LOCK B ($RSN_HASH_BYTES B) | | | | |"
echo "| (reference) Redisson's fenced lock (RFencedLock: the hash + a token counter key per name), same names | $FENCED_PER_LOCK B | | | | |"
echo "| Redis memory left per released name (its last fence, kept 10 s) | $LEFT_BYTES B × $LEFT_KEYS names right after the locks run | | | | |"
echo "| ${R[wait.waiters]:-?} waiting requests: RSS / threads / CPU over 5 s | $(mib "${R[wait.rss_kib]:-0}") MiB / ${R[wait.threads]:-?} / ${R[wait.cpu_ms_5s]:-?} ms | | | ${R[wait.open_errors]:-?} | parked in ${R[wait.seconds_to_park]:-?} s |"
echo "| release → first of ${R[wait.waiters]:-?} waiters gets 201 | ${R[wait.first_waiter_ms]:-?} ms after the DELETE's 200 (${R[wait.first_waiter_from_send_ms]:-?} ms after sending it) | | | | |"
echo "| hand-off, ${R[hand.rounds]:-?} rounds, one waiter: DELETE's 200 → waiter's 201 | | ${R[hand.p50_ms]:-?} | ${R[hand.p99_ms]:-?} | ${R[hand.errors]:-?} | from sending the DELETE: p50 ${R[hand.from_send_p50_ms]:-?}, p99 ${R[hand.from_send_p99_ms]:-?} ms |"
echo
cat "$TMP/rcost_time.md"
echo
cat "$TMP/rcost_ir.md"
echo
echo "| sweep: connections | req/s | p50 ms | p99 ms | errors | CPU µs/req gateway · Redis · client |"
echo "|---:|---:|---:|---:|---:|---|"
for c in 1 10 50 200 1000 10000; do
    echo "| $c | $(f0 "${R[sweep$c.rps]}") | ${R[sweep$c.p50]} | ${R[sweep$c.p99]} | ${R[sweep$c.err]} | ${R[sweep$c.gw_us]} · ${R[sweep$c.redis_us]} · ${R[sweep$c.client_us]} |"
done
echo
echo "| target | measured | |"
echo "|---|---:|---|"
# The two requests/s ratios of the earlier throughput work (locks ÷ HTTP
# ceiling ≥ 0.6, ÷ etcd ≥ 8) are retired (issue #15): on two shared cores
# they mostly measure wrk's Lua and Redis.  They stay below "for reading";
# per-operation CPU targets replace them (here, and bench/fleet.sh).
echo "| etcd's CPU per lock+unlock cycle ≥ 10 × lockgate's gateway + Redis CPU per cycle, 50 conns | ${R[etcd.etcd_us]} ÷ (${R[locks.gw_us]} + ${R[locks.redis_us]}) µs per request = $R_ETCD_CPU× | $(verdict "$R_ETCD_CPU >= 10") |"
echo "| gateway CPU per lock request ≤ 1.5 × per /healthz, 50 conns | ${R[locks.gw_us]} ÷ ${R[healthz.gw_us]} µs = $R_CPU_HTTP× | $(verdict "$R_CPU_HTTP <= 1.5") |"
echo "| single ids ÷ HTTP ceiling ≥ 0.8, with eviction active | $R_IDS_HTTP | $(verdict "$R_IDS_HTTP >= 0.8 && ${EVICT_IDS:-0} > 0") |"
echo "| ids in batches of 1000 ≥ 5,000,000/s, with eviction active | $(f0 "${R[ids1000.ids]}") | $(verdict "${R[ids1000.ids]} >= 5000000 && ${EVICT_IDS:-0} > 0") |"
[ -z "$NS_ROWS" ] || echo "$NS_ROWS"
echo "| locks p99 at 50 conns < 5 ms | ${R[locks.p99]} | $(verdict "${R[locks.p99]} < 5") |"
echo "| 1000 conns: no errors, p99 < 50 ms | ${R[sweep1000.err]} errors, ${R[sweep1000.p99]} ms | $(verdict "${R[sweep1000.err]} == 0 && ${R[sweep1000.p99]} < 50") |"
echo "| gateway RSS idle < 10 MiB | $(mib "$RSS_IDLE") | $(verdict "$RSS_IDLE < 10240") |"
echo "| gateway RSS after sweep < 64 MiB | $(mib "$RSS_SWEEP") | $(verdict "$RSS_SWEEP < 65536") |"
echo "| ${R[wait.waiters]:-?} waiters: RSS < 64 MiB, threads fixed, CPU ~0 | $(mib "${R[wait.rss_kib]:-0}") MiB, ${R[wait.threads]:-?} threads, ${R[wait.cpu_ms_5s]:-?} ms | $(verdict "${R[wait.rss_kib]:-999999} < 65536 && ${R[wait.threads]:-0} == $THREADS_IDLE && ${R[wait.cpu_ms_5s]:-999} <= 50 && ${R[wait.waiters]:-0} >= $NWAITERS") |"
echo "| hand-off p50 < 2 ms, p99 < 10 ms | ${R[hand.p50_ms]:-?} / ${R[hand.p99_ms]:-?} | $(verdict "${R[hand.p50_ms]:-99} < 2 && ${R[hand.p99_ms]:-99} < 10") |"
echo "| Redis memory per held lock ≤ Redisson's layout: RLock (no fences; mean MEMORY USAGE) · RFencedLock (fences, as lockgate; used_memory) | $HASH_BYTES vs $RSN_HASH_BYTES · $MEM_PER_LOCK vs $FENCED_PER_LOCK B | $(verdict "$HASH_BYTES <= $RSN_HASH_BYTES") · $(verdict "$MEM_PER_LOCK <= $FENCED_PER_LOCK") |"
echo "| Redis per acquire+release cycle ≤ 1.0 × Redisson's: by instructions (callgrind) · by time (commandstats) | $RC_IR · $RC_T | $(verdict "$RC_IR <= 1.0") · $(verdict "$RC_T <= 1.0") |"
echo "| (for reading) Redis per acquire · per release ÷ Redisson's, by instructions · by time | $RC_IR_ACQ · $RC_IR_REL · $RC_T_ACQ · $RC_T_REL | |"
echo "| (for reading) locks ÷ Redis ceiling (acquire alone) | $R_LOCKS_REDIS | |"
echo "| (for reading, retired targets) locks ÷ HTTP ceiling · locks ÷ etcd, by requests/s | $R_LOCKS_HTTP · $R_LOCKS_ETCD | |"
echo "| (for reading) by CPU spent per request (gateway + Redis + client): healthz ÷ locks · healthz ÷ single ids | $(cost_ratio healthz locks) · $(cost_ratio healthz ids1) | |"
} > "$OUT"

{
echo
echo "lockgate bench, $(date -u '+%F %T') UTC, $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)," \
     "load average before/after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tree $(git describe --always --dirty 2>/dev/null || echo '?'), $BUILD/lockgate;" \
     "gateway --threads $THREADS; main phases: $ROUNDS interleaved rounds of $DUR s (req/s over all rounds, p50/p99 the median round's); sweep: $SWEEP_DUR s per point; wrk -t2 (-t1 at 1 conn)"
echo
cat "$OUT"
} | tee "$RESULTS/last.md"
say "table: bench/results/last.md, chart: bench/results/sweep.png"

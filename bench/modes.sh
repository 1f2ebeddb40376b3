#!/usr/bin/env bash
# bench/modes.sh -- what each way of talking to Redis costs: acquire+release
# throughput (bench/locks.lua: POST a random name, DELETE it with the
# returned Lock-Token) through one gateway per mode.
#
#   single         one redis-server
#   sentinel       a master, a replica, three redis-sentinels; the gateway
#                  is given the sentinels (--sentinel x3)
#   sentinel+ack   the same servers, a gateway with --min-replicas-ack 1
#   quorum         five independent redis-servers (--redis x5)
#   cluster        a Redis Cluster of three masters (no replicas), the
#                  gateway given one seed (--redis-cluster)
#
# For every mode it also reports the gateway's CPU per request (utime+stime
# of /proc/PID/stat over the runs); for single and cluster Redis's time per
# EVALSHA (INFO commandstats, summed over the masters for cluster) and how
# the cluster's EVALSHA calls spread over its masters.
#
# Starts everything itself on free loopback ports in a mktemp directory and
# stops it all on exit (trap).  Prints one table on stdout (progress goes to
# stderr).  Informs, does not gate.
#
# Environment (all optional):
#   BUILD=build            where lockgate was built
#   MODES_SECONDS=4        length of one wrk round
#   MODES_ROUNDS=2         rounds per mode, interleaved (single, sentinel,
#                          sentinel+ack, quorum, single, ...) so that load from
#                          other work on the machine falls on all modes alike
#   MODES_CONNECTIONS=50   wrk connections
#   BENCH_THREADS=2        gateway --threads
#   BENCH_KEEP=1           keep the temporary directory (logs, wrk output)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
DUR=${MODES_SECONDS:-4}
ROUNDS=${MODES_ROUNDS:-2}
CONNS=${MODES_CONNECTIONS:-50}
THREADS=${BENCH_THREADS:-2}
export BENCH_DIR=$ROOT/bench

BENCH_NAME=modes
. "$BENCH_DIR/lib.sh"

scripts/deps.sh wrk redis-sentinel redis-tools
command -v python3 >/dev/null || scripts/deps.sh python3
[ -x "$BUILD/lockgate" ] || { say "no $BUILD/lockgate: run make first"; exit 1; }


# 19 free loopback ports: 1 single, 2 master+replica, 3 sentinels, 5 quorum
# masters, 4 gateways, 3 cluster masters (below 55536, with port + 10000
# free: a cluster node's bus listens there), 1 cluster gateway.
read -r -a PORTS < <(python3 - <<'EOF'
import socket
socks, ports = [], []
while len(ports) < 19:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    socks.append(s)
    if len(ports) in (15, 16, 17):
        if p > 55535:
            continue
        b = socket.socket()
        try:
            b.bind(("127.0.0.1", p + 10000))
        except OSError:
            continue
        finally:
            b.close()
    ports.append(p)
print(*ports)
EOF
)
P_SINGLE=${PORTS[0]} P_MASTER=${PORTS[1]} P_REPLICA=${PORTS[2]}
P_SEN=("${PORTS[@]:3:3}") P_Q=("${PORTS[@]:6:5}")
G_SINGLE=${PORTS[11]} G_SEN=${PORTS[12]} G_ACK=${PORTS[13]} G_Q=${PORTS[14]}
P_C=("${PORTS[@]:15:3}") G_C=${PORTS[18]}
declare -A GW_PID


redis() { # redis NAME PORT [FLAGS...]: a redis-server without persistence
    local name=$1 port=$2
    shift 2
    mkdir -p "$TMP/$name"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP/$name" \
        --repl-diskless-sync-delay 0 --logfile "$TMP/$name.log" "$@" &
    PIDS+=($!)
    wait_for "redis $name" "$TMP/$name.log" redis-cli -p "$port" ping
}

gateway() { # gateway NAME PORT FLAGS...
    local name=$1 port=$2
    shift 2
    "$BUILD/lockgate" --listen "127.0.0.1:$port" --threads "$THREADS" --log-level warn "$@" \
        > "$TMP/gw-$name.log" 2>&1 &
    PIDS+=($!)
    GW_PID[$name]=$!
    wait_for "gateway $name" "$TMP/gw-$name.log" curl -sf "http://127.0.0.1:$port/readyz"
}

# ---- servers --------------------------------------------------------------------
redis single "$P_SINGLE"

redis master "$P_MASTER"
redis replica "$P_REPLICA" --replicaof 127.0.0.1 "$P_MASTER"
wait_for "replica sync" "$TMP/replica.log" \
    sh -c "redis-cli -p $P_REPLICA info replication | grep -q master_link_status:up"
for i in 0 1 2; do
    mkdir -p "$TMP/sentinel$i"
    cat > "$TMP/sentinel$i/sentinel.conf" <<EOF
port ${P_SEN[$i]}
bind 127.0.0.1
protected-mode no
daemonize no
dir $TMP/sentinel$i
logfile $TMP/sentinel$i.log
sentinel resolve-hostnames no
sentinel monitor mymaster 127.0.0.1 $P_MASTER 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 3000
EOF
    redis-sentinel "$TMP/sentinel$i/sentinel.conf" &
    PIDS+=($!)
    wait_for "sentinel $i" "$TMP/sentinel$i.log" redis-cli -p "${P_SEN[$i]}" ping
done

QFLAGS=()
for i in 0 1 2 3 4; do
    redis "q$i" "${P_Q[$i]}"
    QFLAGS+=(--redis "redis://127.0.0.1:${P_Q[$i]}")
done

for i in 0 1 2; do
    redis "c$i" "${P_C[$i]}" --cluster-enabled yes --cluster-config-file "$TMP/c$i/nodes.conf"
done
redis-cli --cluster create "127.0.0.1:${P_C[0]}" "127.0.0.1:${P_C[1]}" "127.0.0.1:${P_C[2]}" \
    --cluster-yes > "$TMP/cluster-create.log" 2>&1
wait_for "cluster state ok" "$TMP/cluster-create.log" \
    sh -c "redis-cli -p ${P_C[0]} cluster info | grep -q cluster_state:ok"

SFLAGS=(--sentinel "127.0.0.1:${P_SEN[0]}" --sentinel "127.0.0.1:${P_SEN[1]}"
        --sentinel "127.0.0.1:${P_SEN[2]}" --sentinel-master mymaster)
gateway single "$G_SINGLE" --redis "redis://127.0.0.1:$P_SINGLE"
gateway sentinel "$G_SEN" "${SFLAGS[@]}"
gateway ack "$G_ACK" "${SFLAGS[@]}" --min-replicas-ack 1
gateway quorum "$G_Q" "${QFLAGS[@]}"
gateway cluster "$G_C" --redis-cluster "127.0.0.1:${P_C[0]}"

# Each gateway really is in its mode: the sentinel ones talk to the master
# the sentinels name, and the quorum one to all five.
probe() { curl -sf -X POST "http://127.0.0.1:$1/v1/locks/modes-probe" -D - -o /dev/null |
          tr -d '\r' | awk -F': ' 'tolower($1) == "lock-token" {print $2}'; }
for g in "$G_SINGLE" "$G_SEN" "$G_ACK" "$G_Q" "$G_C"; do
    tok=$(probe "$g")
    [ -n "$tok" ] || { say "gateway on $g does not grant a lock"; exit 1; }
    curl -sf -X DELETE -H "Lock-Token: $tok" "http://127.0.0.1:$g/v1/locks/modes-probe" >/dev/null
done
say "single :$P_SINGLE, sentinel master :$P_MASTER replica :$P_REPLICA sentinels ${P_SEN[*]}," \
    "quorum ${P_Q[*]}; gateways $G_SINGLE $G_SEN $G_ACK $G_Q ($THREADS threads); data in $TMP"

# ---- the runs ------------------------------------------------------------------
declare -A R

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, in ticks

run_wrk() { # run_wrk LABEL PORT
    local label=$1 port=$2 line kv k v req=0 sec=1 rps=0 p50=0 p99=0 err=0 gw c0
    gw=${GW_PID[$label]:-${GW_PID[ack]}}
    c0=$(cpu_ticks "$gw")
    wrk -t2 -c"$CONNS" -d"${DUR}s" --latency -s bench/locks.lua "http://127.0.0.1:$port/" \
        > "$TMP/$label.txt" 2>&1 || true
    cat "$TMP/$label.txt" >> "$TMP/$label.all.txt"
    line=$(grep '^RESULT ' "$TMP/$label.txt" || true)
    if [ -z "$line" ]; then
        say "wrk $label failed:"; cat "$TMP/$label.txt" >&2
        line="RESULT requests=0 seconds=1 rps=0 p50_ms=0 p99_ms=0 errors=1"
    fi
    for kv in ${line#RESULT }; do
        k=${kv%%=*}; v=${kv#*=}
        case $k in requests) req=$v;; seconds) sec=$v;; rps) rps=$v;; p50_ms) p50=$v;;
                   p99_ms) p99=$v;; errors) err=$v;; esac
    done
    R[$label.cpu]=$(( ${R[$label.cpu]:-0} + $(cpu_ticks "$gw") - c0 ))
    R[$label.req]=$(( ${R[$label.req]:-0} + req ))
    R[$label.sec]=$(calc %.3f "${R[$label.sec]:-0} + $sec")
    R[$label.err]=$(( ${R[$label.err]:-0} + err ))
    R[$label.p50]=$(calc %.3f "${R[$label.p50]:-0} + $p50")
    R[$label.p99]=$(calc %.3f "${R[$label.p99]:-0} + $p99")
    say "$(printf '%-13s %8.0f req/s  p50 %7.3f ms  p99 %8.3f ms  errors %s' \
        "$label" "$rps" "$p50" "$p99" "$err")"
}

MODES=(single sentinel sentinel+ack quorum cluster)
declare -A PORT_OF=([single]=$G_SINGLE [sentinel]=$G_SEN [sentinel+ack]=$G_ACK [quorum]=$G_Q
                    [cluster]=$G_C)
evalsha_stats() { # evalsha_stats PORT: "calls usec" of EVALSHA since the reset
    redis-cli -p "$1" info commandstats | tr -d '\r' |
        awk -F'[:=,]' '$1 == "cmdstat_evalsha" {print $3, $5}'
}
for p in "$P_SINGLE" "${P_C[@]}"; do redis-cli -p "$p" config resetstat > /dev/null; done
sleep 1
for round in $(seq "$ROUNDS"); do
    for m in "${MODES[@]}"; do run_wrk "$m" "${PORT_OF[$m]}"; done
done

# ---- the table ---------------------------------------------------------------------
for m in "${MODES[@]}"; do
    R[$m.rps]=$(calc %.1f "${R[$m.req]} / ${R[$m.sec]}")
    R[$m.p50]=$(calc %.3f "${R[$m.p50]} / $ROUNDS")
    R[$m.p99]=$(calc %.3f "${R[$m.p99]} / $ROUNDS")
done
echo
echo "lockgate modes bench, $(date -u '+%F %T') UTC, $(nproc) cores," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); tree $(git describe --always --dirty 2>/dev/null || echo '?')"
echo "bench/locks.lua (POST+DELETE random names), wrk -t2 -c$CONNS, $ROUNDS interleaved rounds of" \
     "${DUR} s per mode (req/s over all rounds, p50/p99 the mean of the rounds'), gateway --threads $THREADS"
echo
echo "| mode | flags | requests/s | p50 ms | p99 ms | errors | ÷ single | gateway CPU µs/request |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
HZ=$(getconf CLK_TCK)
flags_of() {
    case $1 in
        single) echo '`--redis URL`';;
        sentinel) echo '`--sentinel H:P` ×3 (master + 1 replica)';;
        sentinel+ack) echo 'the same + `--min-replicas-ack 1`';;
        quorum) echo '`--redis URL` ×5';;
        cluster) echo '`--redis-cluster H:P` (3 masters)';;
    esac
}
for m in "${MODES[@]}"; do
    printf '| %s | %s | %.0f | %s | %s | %s | %s | %s |\n' "$m" "$(flags_of "$m")" "${R[$m.rps]}" \
        "${R[$m.p50]}" "${R[$m.p99]}" "${R[$m.err]}" \
        "$(calc %.2f "(${R[single.rps]} > 0) ? ${R[$m.rps]} / ${R[single.rps]} : 0")" \
        "$(calc %.1f "(${R[$m.req]} > 0) ? ${R[$m.cpu]} * 1000000 / $HZ / ${R[$m.req]} : 0")"
done

# ---- cluster against single: gateway CPU, Redis time, spread -------------------------
cpu_per() { calc %.2f "(${R[$1.req]} > 0) ? ${R[$1.cpu]} * 1000000 / $HZ / ${R[$1.req]} : 0"; }
read -r s_calls s_usec < <(evalsha_stats "$P_SINGLE")
c_calls=0 c_usec=0 spread=""
for p in "${P_C[@]}"; do
    read -r n u < <(evalsha_stats "$p")
    C_CALLS+=("$n")
    c_calls=$((c_calls + n)) c_usec=$((c_usec + u))
done
for n in "${C_CALLS[@]}"; do
    spread+="$(calc %.1f "($c_calls > 0) ? 100 * $n * 3 / $c_calls : 0") % "
done
echo
echo "Cluster against single (the same runs):"
echo
echo "| | single | cluster (3 masters) | cluster ÷ single |"
echo "|---|---:|---:|---:|"
echo "| gateway CPU µs per request | $(cpu_per single) | $(cpu_per cluster) |" \
     "$(calc %.2f "($(cpu_per single) > 0) ? $(cpu_per cluster) / $(cpu_per single) : 0") |"
su=$(calc %.2f "($s_calls > 0) ? $s_usec / $s_calls : 0")
cu=$(calc %.2f "($c_calls > 0) ? $c_usec / $c_calls : 0")
echo "| Redis µs per EVALSHA (cluster: summed over the masters) | $su | $cu |" \
     "$(calc %.2f "($su > 0) ? $cu / $su : 0") |"
echo
echo "Cluster EVALSHA calls per master, % of an even third: $spread(target: each within 90–110 %)"

#!/usr/bin/env bash
# bench/subscriber.sh -- release notifications: one subscriber per worker
# (main) against one shared subscriber per gateway (worker 0 subscribes and
# posts each release to the other workers): apply
# bench/experiments/shared-subscriber.patch to a copy of the tree, build it
# into BUILD, and run this from that copy.  1 busy gateway + 3 idle ones, 2
# workers each, 40 connections contending for 8 names with wait_ms; CPU per
# cycle (POST that waits + DELETE) of Redis, the busy gateway and the idle
# ones, from /proc, the two modes alternated twice.
set -u
B=${BUILD:-build}; T=$(mktemp -d)
RP=$((20000 + RANDOM % 10000))
redis-server --port $RP --save "" --appendonly no --daemonize no > $T/redis.log 2>&1 &
RPID=$!
sleep 0.5
ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
run_mode() {
    local mode=$1 pids=() ports=()
    for g in 0 1 2 3; do
        local p=$((RP + 100 + g + ${2}))
        LOCKGATE_SUBSCRIBER=$mode $B/lockgate --listen 127.0.0.1:$p --redis redis://127.0.0.1:$RP --workers 2 --log-level warn > $T/gw$g.log 2>&1 &
        pids+=($!); ports+=($p)
    done
    for p in "${ports[@]}"; do for i in $(seq 50); do curl -sf http://127.0.0.1:$p/readyz >/dev/null && break; sleep 0.1; done; done
    local r0=$(ticks $RPID) b0=$(ticks ${pids[0]}) i0=0
    for g in 1 2 3; do i0=$((i0 + $(ticks ${pids[$g]}))); done
    local out=$(python3 bench/subscriber.py ${ports[0]} 6 40 8)
    local r1=$(ticks $RPID) b1=$(ticks ${pids[0]}) i1=0
    for g in 1 2 3; do i1=$((i1 + $(ticks ${pids[$g]}))); done
    local cyc=$(echo "$out" | sed 's/.*cycles=\([0-9]*\).*/\1/')
    local pub=$(redis-cli -p $RP info commandstats | grep -E "cmdstat_evalsha" | tr -d '\r')
    redis-cli -p $RP config resetstat >/dev/null
    awk -v m=$mode -v c=$cyc -v r=$((r1-r0)) -v b=$((b1-b0)) -v i=$((i1-i0)) 'BEGIN{hz=100; printf "%-10s cycles %6d  per cycle µs: redis %6.1f  busy gw %6.1f  3 idle gws %6.1f\n", m, c, r*1e6/hz/c, b*1e6/hz/c, i*1e6/hz/c}'
    echo "   $pub"
    kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
}
for round in 1 2; do run_mode worker $((round*10)); run_mode shared $((round*10+5)); done
kill $RPID; rm -rf $T

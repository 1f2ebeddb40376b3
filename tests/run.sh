#!/usr/bin/env bash
# Runs every test binary that `make test` built: unit tests first, then the
# integration tests (each starts its own redis-server and gateways on free
# loopback ports in temporary directories, and stops them).  Prints each
# suite's closing line, then the total, and exits non-zero on any failure,
# including a test binary that crashed before printing its summary.  The
# suites named in CLUSTER_SUITES then run again against a Redis Cluster,
# those in VALKEY_SUITES against Valkey, and the suites of the event core's
# hard cases with 1 to 4 workers.
set -u
BUILD=${BUILD:-build}
passed=0 failed=0 broken=()

run_suite() {
    local bin=$1 out rc line p f
    out=$(mktemp)
    "$bin" > "$out" 2> >(sed 's/^/    /' >&2)
    rc=$?
    line=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    cat "$out"
    rm -f "$out"
    if [ -z "$line" ]; then
        echo "$(basename "$bin"): no summary (exit $rc)"
        broken+=("$(basename "$bin")")
        return
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*, ([0-9]+) failed$/\1/' <<<"$line")
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && broken+=("$(basename "$bin") (exit $rc)")
}

export BUILD
# Every gateway any suite starts (the C harness sets it too; this covers
# the docs and flags checks) runs its scripts behind lua/keycheck.lua: a
# script touching a key it did not declare fails (server/scripts.h).
export LOCKGATE_TEST_KEYCHECK=${LOCKGATE_TEST_KEYCHECK-1}

# No call circle between the project's files (nm over the objects just
# built: scripts/callcycles.py), in a second.
echo "== callcycles"
run_suite scripts/callcycles.py

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    echo "== $(basename "$t")"
    run_suite "$t"
done

# The documentation (every runnable example against a real gateway, links,
# the Layout, --help against the docs) and every flag of both binaries
# acted on: tests/docs/check_docs.py, tests/flags/check_flags.py.  What
# deploy/ ships (the systemd unit, the Prometheus alerts) and /metrics,
# checked with systemd-analyze and promtool: tests/deploy/check_deploy.py
# (a second; the first run fetches promtool, scripts/promtool.sh).  A
# rolling restart of two gateways behind HAProxy under load, in about 10 s:
# tests/rolling/check_rolling.py.
for s in tests/docs/check_docs.py tests/flags/check_flags.py tests/deploy/check_deploy.py \
    tests/rolling/check_rolling.py; do
    echo "== $(basename "$s" .py)"
    run_suite "$s"
done

# The lock, semaphore, waiting, wake-up, fair, id, session, operator, quota and layout suites once more against a
# Redis Cluster (3 masters, one replica each): the harness starts one when
# LOCKGATE_TEST_CLUSTER is set and points the gateways at it.  CLUSTER_SUITES
# overrides the list ("" skips them).
cluster_start=$SECONDS
for s in ${CLUSTER_SUITES-test_locks test_wait test_wake test_mutex test_ids test_sessions test_ops test_quota test_layout}; do
    t="$BUILD/tests/$s"
    [ -x "$t" ] || continue
    echo "== $s (cluster)"
    LOCKGATE_TEST_CLUSTER=1 run_suite "$t"
done
echo "cluster re-runs: $((SECONDS - cluster_start)) s"

# The lock, waiting, id, session and operator suites once more against
# Valkey 8 (valkey-server from Debian 12's backports, which scripts/deps.sh
# installs): the harness starts valkey-server instead of redis-server when
# LOCKGATE_TEST_SERVER=valkey, and checks that it did.  VALKEY_SUITES
# overrides the list ("" skips them); about 100 s on a 2-core machine.
valkey_start=$SECONDS
for s in ${VALKEY_SUITES-test_locks test_wait test_ids test_sessions test_ops}; do
    t="$BUILD/tests/$s"
    [ -x "$t" ] || continue
    echo "== $s (valkey)"
    LOCKGATE_TEST_SERVER=valkey run_suite "$t"
done
echo "valkey re-runs: $((SECONDS - valkey_start)) s"

# The event core's hard cases again with every worker count from 1 to 4:
# shutdown, Redis loss and frozen Redis (test_faults), failover
# (test_sentinel).  Every gateway a suite starts reads LOCKGATE_WORKERS;
# the run above had the default, the online cores.  TEST_WORKERS="" skips.
for n in ${TEST_WORKERS-1 2 3 4}; do
    [ "$n" = "$(nproc)" ] && continue # the run above
    for s in test_faults test_sentinel; do
        [ -x "$BUILD/tests/$s" ] || continue
        echo "== $s, LOCKGATE_WORKERS=$n"
        LOCKGATE_WORKERS=$n run_suite "$BUILD/tests/$s"
    done
done

[ ${#broken[@]} -gt 0 ] && echo "broken suites: ${broken[*]}"
echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#broken[@]} -eq 0 ]

#!/usr/bin/env bash
# Runs every fuzz harness built in $BUILD/fuzz for $FUZZ_SECONDS each, on a
# working corpus seeded from tests/fuzz/corpus/<name> (new inputs stay in
# $BUILD/fuzz/corpus, findings in $BUILD/fuzz/artifacts).  Prints one line
# per harness and the closing "fuzz: N passed, N failed"; exits non-zero
# when any harness found a crash, a leak or undefined behaviour.
set -u
BUILD=${BUILD:-build/fuzz}
SECS=${FUZZ_SECONDS:-30}
passed=0 failed=0
mkdir -p "$BUILD/fuzz/artifacts"
for bin in "$BUILD"/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    work="$BUILD/fuzz/corpus/$name"
    mkdir -p "$work"
    log="$BUILD/fuzz/$name.log"
    if "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$BUILD/fuzz/artifacts/$name-" "$work" "tests/fuzz/corpus/$name" \
        >"$log" 2>&1; then
        runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
        echo "ok - $name (${SECS}s, ${runs:-?} inputs)"
        passed=$((passed + 1))
    else
        echo "not ok - $name: see $log"
        grep -E 'ERROR|runtime error|SUMMARY' "$log" | head -n 5 | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

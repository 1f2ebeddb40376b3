# bench/lib.sh -- sourced by bench/run.sh and bench/modes.sh: logging, a
# temporary directory whose processes are stopped on exit, and waiting for
# a server to come up.  The caller sets BENCH_NAME first.

START=$(date +%s)
say() { printf '%s [%3ss]: %s\n' "$BENCH_NAME" "$(( $(date +%s) - START ))" "$*" >&2; }
calc() { awk "BEGIN {printf \"$1\", ($2)}"; } # parenthesised: a bare ">" would redirect awk's output to a file

# Gateways stop at once at the end (no rolling-restart delay).
export LOCKGATE_SHUTDOWN_DELAY_MS=${LOCKGATE_SHUTDOWN_DELAY_MS:-0}

TMP=$(mktemp -d "/tmp/lockgate-$BENCH_NAME.XXXXXX")
PIDS=() # every process started: stopped by cleanup
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ "${BENCH_KEEP:-0}" = 1 ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # wait_for WHAT LOG COMMAND...: up to 30 s
    local what=$1 log=$2 i
    shift 2
    for i in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    say "$what did not come up; the end of its log:"
    tail -n 20 "$log" >&2
    return 1
}

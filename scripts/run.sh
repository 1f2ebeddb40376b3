#!/usr/bin/env bash
# `make run`: serve on 127.0.0.1:8080 (or $LOCKGATE_LISTEN) in the
# foreground.  Without LOCKGATE_REDIS, a private redis-server is started
# under ./var/redis on a free loopback port (with AOF, so fences and id
# marks survive restarts) and stopped again when the gateway exits.
set -euo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."

free_port() {
    local p
    for p in $(seq 6390 6490); do
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
    echo "run: no free port in 6390-6490" >&2
    exit 1
}

redis_pid=""
cleanup() {
    [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
    return 0
}
trap cleanup EXIT INT TERM

if [ -z "${LOCKGATE_REDIS:-}" ]; then
    mkdir -p var/redis
    port=$(free_port)
    redis-server --bind 127.0.0.1 --port "$port" --dir "$PWD/var/redis" \
        --appendonly yes --save '' --daemonize no > var/redis/redis.log 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    export LOCKGATE_REDIS="redis://127.0.0.1:$port"
    echo "run: private redis-server on 127.0.0.1:$port (data in var/redis)" >&2
fi
export LOCKGATE_LISTEN=${LOCKGATE_LISTEN:-127.0.0.1:8080}
echo "run: serving on http://$LOCKGATE_LISTEN — try: curl -si -X POST http://$LOCKGATE_LISTEN/v1/locks/demo" >&2
"$BUILD/lockgate" "$@" &
gw=$!
trap 'kill -TERM $gw 2>/dev/null' INT TERM
wait $gw || true
wait $gw 2>/dev/null || true

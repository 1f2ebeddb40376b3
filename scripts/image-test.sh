#!/usr/bin/env bash
# `make image-test`: run the image lockgate:latest (made by `make image`) and
# check it from the host. No Docker engine: the container is run with
# `buildah run` and chroot isolation, which shares the host's network, so the
# server inside listens on a free loopback port of the host and reaches a
# redis-server this script starts on another free loopback port.
#
# Checks: /healthz, /readyz, a lock acquire/extend/release cycle and an id over
# HTTP from the host, and lockctl inside the container; the image's own
# HEALTHCHECK command, run inside the container; the process runs as the
# image's non-root user; the image's User, Env, EXPOSE, HEALTHCHECK and
# ENTRYPOINT are what docs/operations.md and docker-compose.yml say; no compiler or
# headers in the image, every shared library resolved; SIGTERM stops it with
# status 0 after its shutdown delay. Prints the image size, the last build time and the
# time from container start to /readyz 200, then `image-test: N passed, N failed`.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

. scripts/buildah-env.sh
IMAGE="${IMAGE:-lockgate:latest}"
README="${README:-docs/operations.md}"
MAX_MB="${IMAGE_MAX_MB:-150}"          # a compiler alone would break this
# What the Dockerfile promises, and docs/operations.md and the compose file repeat.
WANT_USER="10001:10001"
WANT_USER_NAME="lockgate"
WANT_PORT="8080"
WANT_ENV=("LOCKGATE_LISTEN=0.0.0.0:8080" "LOCKGATE_REDIS=redis://redis:6379")
WANT_ENTRYPOINT="/usr/local/bin/lockgate"

pass=0 fail=0
ok()   { pass=$((pass + 1)); echo "  ok   $*"; }
bad()  { fail=$((fail + 1)); echo "  FAIL $*"; }
check() { local what="$1"; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
info() { echo "  --   $*"; }
cfgq() { jq -e "$@" <<<"$cfg" >/dev/null; }   # cfgq [jq args] FILTER: true on the config
now()  { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

install_missing() {   # install_missing CMD:PACKAGE...
    local need=() spec
    for spec in "$@"; do
        type -P "${spec%%:*}" >/dev/null || need+=("${spec#*:}")
    done
    [ ${#need[@]} -eq 0 ] && return 0
    echo "image-test: installing ${need[*]}" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}
install_missing buildah:buildah curl:curl jq:jq redis-server:redis-server \
                redis-cli:redis-tools ss:iproute2 || exit 1

if ! buildah inspect --type image "$IMAGE" >/dev/null 2>&1; then
    echo "image-test: no image $IMAGE; run 'make image' first" >&2
    exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lockgate-imgtest.XXXXXX")"
redis_pid="" ctr="" run_pid="" srv_pid="" mounted=""
cleanup() {
    [ -n "$srv_pid" ] && kill -TERM "$srv_pid" 2>/dev/null
    if [ -n "$run_pid" ]; then
        for _ in $(seq 50); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$run_pid" 2>/dev/null
        [ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
        wait "$run_pid" 2>/dev/null
    fi
    [ -n "$mounted" ] && buildah umount "$ctr" >/dev/null 2>&1
    [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1
    if [ -n "$redis_pid" ]; then kill -TERM "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port below the kernel's ephemeral range (where a busy machine's outgoing
# connections and their TIME-WAIT remains sit) that no TCP socket uses.
low="$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)"
[ "${low:-0}" -gt 12000 ] || low=32768
free_port() {
    local p
    while :; do
        p=$(( 10000 + (RANDOM * 32768 + RANDOM) % (low - 10000) ))
        [ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return; }
    done
}

# ---- the image's configuration ----------------------------------------------
echo "image-test: $IMAGE"
cfg="$(buildah inspect --type image "$IMAGE" | jq '.Docker.config')"
user="$(jq -r '.User // ""' <<<"$cfg")"
check "User is $WANT_USER (non-root)" [ "$user" = "$WANT_USER" ]
for e in "${WANT_ENV[@]}"; do
    check "Env has $e" cfgq --arg e "$e" 'any(.Env[]; . == $e)'
done
check "EXPOSE $WANT_PORT/tcp" cfgq --arg p "$WANT_PORT/tcp" '.ExposedPorts | has($p)'
hc_kind="$(jq -r '.Healthcheck.Test[0] // ""' <<<"$cfg")"
hc_cmd="$(jq -r '.Healthcheck.Test[1:] | join(" ")' <<<"$cfg")"
check "HEALTHCHECK asks /healthz ($hc_kind)" grep -q '/healthz' <<<"$hc_cmd"
check "ENTRYPOINT is $WANT_ENTRYPOINT" cfgq --arg e "$WANT_ENTRYPOINT" '.Entrypoint == [$e]'

# docs/operations.md's "Run in a container" section states the same facts.
section=""
[ -f "$README" ] && section="$(awk '/^#+ /{ on = tolower($0) ~ /run in a container/ } on' "$README")"
if [ -z "$section" ]; then
    bad "$README has a 'Run in a container' section"
else
    miss=()
    for s in "${WANT_ENV[@]}" "$WANT_PORT" "/healthz" "${WANT_USER%%:*}" "$WANT_USER_NAME" \
             "make image" "make image-test" "docker compose up" "docker build"; do
        grep -qF -- "$s" <<<"$section" || miss+=("$s")
    done
    check "$README's container section names ${#WANT_ENV[@]} env values, port, /healthz, user, commands${miss:+ (missing: ${miss[*]})}" \
        [ ${#miss[@]} -eq 0 ]
fi
# docker-compose.yml: the same port, a health check on both services.
if [ -f docker-compose.yml ]; then
    check "docker-compose.yml publishes $WANT_PORT, health-checks redis and lockgate" \
        bash -c 'grep -q "\"$1:$1\"\|- $1:$1" docker-compose.yml \
              && grep -q "redis-cli.*ping" docker-compose.yml \
              && grep -q "/healthz" docker-compose.yml \
              && grep -q "service_healthy" docker-compose.yml' _ "$WANT_PORT"
else
    bad "docker-compose.yml exists"
fi

# ---- what the image holds ----------------------------------------------------
ctr="$(buildah from --pull=never --name "lockgate-imgtest-$$" "$IMAGE")" || { bad "buildah from $IMAGE"; exit 1; }
mnt="$(buildah mount "$ctr")" && mounted=1
found=()
for f in usr/bin/cc usr/bin/gcc usr/bin/c99 usr/bin/c89 usr/bin/cpp usr/bin/clang usr/bin/tcc \
         usr/bin/ld usr/bin/as usr/bin/make usr/bin/pkg-config usr/include/stdio.h; do
    [ -e "$mnt/$f" ] || [ -L "$mnt/$f" ] && found+=("/$f")
done
compgen -G "$mnt/usr/lib/gcc/*/*/cc1" >/dev/null && found+=("cc1")
compgen -G "$mnt/usr/bin/*gcc*" >/dev/null && found+=("*gcc*")
check "no compiler, linker, make or headers${found:+ (found: ${found[*]})}" [ ${#found[@]} -eq 0 ]
check "no build tree left in the image" [ ! -e "$mnt/src" ]
check "user $WANT_USER_NAME is uid ${WANT_USER%%:*} in /etc/passwd" \
    grep -q "^$WANT_USER_NAME:x:${WANT_USER%%:*}:" "$mnt/etc/passwd"
buildah umount "$ctr" >/dev/null && mounted=""
for b in /usr/local/bin/lockgate /usr/local/bin/lockctl; do
    out="$(buildah run "$ctr" -- ldd "$b" 2>&1)"
    check "$b: every shared library found" \
        bash -c '[ -n "$1" ] && ! grep -q "not found\|not a dynamic\|No such file" <<<"$1"' _ "$out"
done

# ---- run it -------------------------------------------------------------------
# Another program may take a port between our look and our bind: each start is
# tried on up to five ports.
for _ in 1 2 3 4 5; do
    rport="$(free_port)"
    redis-server --bind 127.0.0.1 --port "$rport" --dir "$tmp" --save "" --appendonly no \
        --daemonize no >"$tmp/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do
        [ "$(redis-cli -h 127.0.0.1 -p "$rport" ping 2>/dev/null)" = PONG ] && break 2
        kill -0 "$redis_pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -TERM "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; redis_pid=""
done
if [ -z "$redis_pid" ]; then
    bad "start redis-server on a free loopback port"; tail -n 5 "$tmp/redis.log"
    echo "image-test: $pass passed, $fail failed"; exit 1
fi
ok "redis-server on 127.0.0.1:$rport"

mapfile -t entry < <(jq -r '.Entrypoint[]' <<<"$cfg")
mapfile -t cmd < <(jq -r '(.Cmd // [])[]' <<<"$cfg")
entry_cmd=("${entry[@]}" "${cmd[@]}")
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" 2>/dev/null; }
ready=""
for _ in 1 2 3 4 5; do
    port="$(free_port)"
    base="http://127.0.0.1:$port"
    # A 1 s shutdown delay instead of the default 5 s: the stop below
    # waits for it (docs/operations.md, "Stopping").
    runenv=(--env "LOCKGATE_LISTEN=127.0.0.1:$port" --env "LOCKGATE_REDIS=redis://127.0.0.1:$rport"
            --env "LOCKGATE_SHUTDOWN_DELAY_MS=1000")
    t_start="$(now)"
    # No --user: the process gets the image's User, as under docker run.
    buildah run "${runenv[@]}" "$ctr" -- "${entry[@]}" "${cmd[@]}" >"$tmp/server.log" 2>&1 &
    run_pid=$!
    deadline=$(( $(date +%s) + 10 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        [ "$(code "$base/readyz")" = 200 ] && { ready="$(now)"; break; }
        kill -0 "$run_pid" 2>/dev/null || break
        sleep 0.02
    done
    [ -n "$ready" ] && break
    kill -0 "$run_pid" 2>/dev/null && break            # up, but not ready: a failure
    wait "$run_pid" 2>/dev/null; run_pid=""
    grep -qi 'listen' "$tmp/server.log" || break         # exited for another reason
done
if [ -z "$ready" ]; then
    bad "/readyz 200 within 10 s of container start"
    echo "---- server log"; tail -n 40 "$tmp/server.log"
    echo "image-test: $pass passed, $fail failed"
    exit 1
fi
ok "/readyz 200 after container start"
start_to_ready="$(secs "$t_start" "$ready")"

srv_pid="$(ss -Htlnp "sport = :$port" | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2)"
if [ -n "$srv_pid" ]; then
    uids="$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$srv_pid/status")"
    check "server process runs as uid ${WANT_USER%%:*} (real, effective, saved: $uids)" \
        [ "$uids" = "${WANT_USER%%:*} ${WANT_USER%%:*} ${WANT_USER%%:*} ${WANT_USER%%:*}" ]
    gid="$(awk '/^Gid:/ { print $3 }' "/proc/$srv_pid/status")"
    check "server process runs with gid ${WANT_USER##*:}" [ "$gid" = "${WANT_USER##*:}" ]
    check "server process is chrooted into the image (not the host's binary)" \
        [ "$(readlink "/proc/$srv_pid/root")" != / ]
else
    bad "find the server's process by its port"
fi

# ---- over HTTP, from the host --------------------------------------------------
req() {   # req METHOD PATH [curl args...] -> $status, $body, $headers
    local m="$1" p="$2"; shift 2
    status="$(curl -s -X "$m" -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' --max-time 5 "$@" "$base$p")"
    body="$(cat "$tmp/b" 2>/dev/null)"; headers="$(tr -d '\r' <"$tmp/h" 2>/dev/null)"
}
req GET /healthz
check "GET /healthz -> 200 {\"status\":\"ok\"} (got $status)" \
    bash -c '[ "$1" = 200 ] && jq -e ".status == \"ok\"" <<<"$2" >/dev/null' _ "$status" "$body"
req GET /readyz
check "GET /readyz -> 200 (got $status)" [ "$status" = 200 ]

req POST /v1/locks/imgtest -H 'Content-Type: application/json' -d '{"ttl_ms":5000}'
token="$(awk -F': *' 'tolower($1) == "lock-token" { print $2 }' <<<"$headers")"
check "POST /v1/locks/imgtest -> 201 with a Lock-Token (got $status)" \
    bash -c '[ "$1" = 201 ] && [ -n "$2" ]' _ "$status" "$token"
req PATCH /v1/locks/imgtest -H "Lock-Token: $token" -H 'Content-Type: application/json' -d '{"ttl_ms":8000}'
check "PATCH (extend) with the token -> 200 (got $status)" [ "$status" = 200 ]
req GET /v1/locks/imgtest
check "GET (inspect) -> 200 and no token shown (got $status)" \
    bash -c '[ "$1" = 200 ] && ! grep -qF -- "$3" <<<"$2"' _ "$status" "$body" "${token:-none}"
req DELETE /v1/locks/imgtest -H "Lock-Token: $token"
check "DELETE (release) with the token -> 200 released (got $status)" \
    bash -c '[ "$1" = 200 ] && jq -e ".released == true" <<<"$2" >/dev/null' _ "$status" "$body"
req GET /v1/locks/imgtest
check "GET after release -> 404 (got $status)" [ "$status" = 404 ]
req POST /v1/ids/imgtest
check "POST /v1/ids/imgtest -> 200 with ids (got $status)" \
    bash -c '[ "$1" = 200 ] && jq -e ".ids | length == 1" <<<"$2" >/dev/null' _ "$status" "$body"

# ---- lockctl, the image's CLI, inside the container against the server ----------
out="$(buildah run "$ctr" -- lockctl --url "$base" id imgtest 2>&1)"
check "lockctl id inside the container prints an id" grep -qE '^[0-9]+$' <<<"$out"
buildah run "$ctr" -- lockctl --url "$base" run imgtest-run -- /bin/true >/dev/null 2>&1
rc=$?
check "lockctl run (command under a lock) inside the container (exit $rc)" [ "$rc" = 0 ]

# ---- the image's own HEALTHCHECK, run inside the container ----------------------
if [ "$hc_kind" = CMD-SHELL ]; then hc=(/bin/sh -c "$hc_cmd")
else mapfile -t hc < <(jq -r '.Healthcheck.Test[1:][]' <<<"$cfg"); fi
buildah run "${runenv[@]}" "$ctr" -- "${hc[@]}" >"$tmp/hc.log" 2>&1
rc=$?
check "HEALTHCHECK command succeeds inside the container (exit $rc)" [ "$rc" = 0 ]
buildah run --env "LOCKGATE_LISTEN=127.0.0.1:$(free_port)" "$ctr" -- "${hc[@]}" >/dev/null 2>&1
check "HEALTHCHECK command fails when nothing listens" [ $? -ne 0 ]

# ---- stop: SIGTERM (the image's STOPSIGNAL), exit status 0 within 1 + 5 s -------
# (the shutdown delay set above, then the stop itself)
if [ -n "$srv_pid" ]; then
    kill -TERM "$srv_pid"
    t_stop="$(now)"
    for _ in $(seq 120); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$run_pid" 2>/dev/null; then
        bad "SIGTERM stops the container within 1 + 5 s"
    else
        wait "$run_pid"; rc=$?
        check "SIGTERM stops the container with status 0 in $(secs "$t_stop" "$(now)") s (status $rc)" [ "$rc" = 0 ]
    fi
    run_pid="" srv_pid=""
fi
if [ $fail -ne 0 ]; then echo "---- server log"; tail -n 40 "$tmp/server.log"; fi

# ---- once more with TLS and API keys on (docker-compose.secure.yml's way) ----------
# The key is made by the image's own `lockgate keygen`; certificates by
# tests/integration/tls_certs.sh; both mounted read-only under /run/secrets.
mkdir -p "$tmp/secrets"
tests/integration/tls_certs.sh "$tmp/secrets" >/dev/null 2>&1
kg="$(buildah run "$ctr" -- lockgate keygen imgtest --grant locks::write --grant ops::read 2>&1)"
secret="$(grep -o 'Bearer imgtest\.[A-Za-z0-9_-]*' <<<"$kg" | head -n1 | cut -d. -f2)"
entry="$(sed -n '/^{/,$p' <<<"$kg")"
check "lockgate keygen in the image prints a secret and an entry" \
    bash -c '[ ${#1} -eq 43 ] && jq -e ".id == \"imgtest\"" <<<"$2" >/dev/null' _ "$secret" "$entry"
jq -n --argjson e "$entry" '{keys: [$e]}' >"$tmp/secrets/keys.json" 2>/dev/null
chmod 755 "$tmp/secrets"; chmod 644 "$tmp/secrets"/*
tport="$(free_port)"
tbase="https://127.0.0.1:$tport"
tenv=(--env "LOCKGATE_LISTEN=127.0.0.1:$tport" --env "LOCKGATE_REDIS=redis://127.0.0.1:$rport"
      --env LOCKGATE_AUTH_FILE=/run/secrets/keys.json --env LOCKGATE_TLS_CERT=/run/secrets/server.pem
      --env LOCKGATE_TLS_KEY=/run/secrets/server.key)
buildah run --volume "$tmp/secrets:/run/secrets:ro" "${tenv[@]}" "$ctr" -- "${entry_cmd[@]}" \
    >"$tmp/tls-server.log" 2>&1 &
tls_pid=$!
tcode() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$tmp/secrets/ca.pem" "$@" 2>/dev/null; }
tready=""
for _ in $(seq 250); do
    [ "$(tcode "$tbase/healthz")" = 200 ] && { tready=1; break; }
    kill -0 "$tls_pid" 2>/dev/null || break
    sleep 0.04
done
check "with TLS and auth: GET /healthz over https -> 200" [ -n "$tready" ]
check "with TLS and auth: POST a lock without a key -> 401" \
    [ "$(tcode -X POST "$tbase/v1/locks/imgtls")" = 401 ]
check "with TLS and auth: POST a lock with the key -> 201" \
    [ "$(tcode -X POST -H "Authorization: Bearer imgtest.$secret" "$tbase/v1/locks/imgtls")" = 201 ]
check "with TLS and auth: mint an id with a locks-only key -> 403" \
    [ "$(tcode -X POST -H "Authorization: Bearer imgtest.$secret" "$tbase/v1/ids/imgtls")" = 403 ]
check "with TLS and auth: plain http to the port gets no HTTP status" \
    [ "$(code "http://127.0.0.1:$tport/healthz")" = 000 ]
out="$(buildah run --volume "$tmp/secrets:/run/secrets:ro" --env "LOCKGATE_API_KEY=imgtest.$secret" "$ctr" -- \
       lockctl --url "$tbase" --cacert /run/secrets/ca.pem status imgtls 2>&1)"
check "with TLS and auth: lockctl status inside the container shows key_id" grep -q '"key_id"' <<<"$out"
buildah run --volume "$tmp/secrets:/run/secrets:ro" "${tenv[@]}" "$ctr" -- "${hc[@]}" >/dev/null 2>&1
check "with TLS and auth: the HEALTHCHECK command succeeds over https (exit $?)" [ $? -eq 0 ]
check "with TLS and auth: the secret is in no log line" bash -c '! grep -qF -- "$1" "$2"' _ "$secret" "$tmp/tls-server.log"
tsrv="$(ss -Htlnp "sport = :$tport" | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2)"
[ -n "$tsrv" ] && kill -TERM "$tsrv"
for _ in $(seq 100); do kill -0 "$tls_pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$tls_pid" 2>/dev/null && kill -KILL "$tls_pid" 2>/dev/null
wait "$tls_pid" 2>/dev/null
if [ $fail -ne 0 ]; then echo "---- TLS server log"; tail -n 20 "$tmp/tls-server.log"; fi

# ---- numbers ---------------------------------------------------------------------
size="$(buildah images --format '{{.Size}}' "$IMAGE" | head -n1)"
# buildah prints sizes as "90.4 MB": to whole MB for the budget.
mb="$(awk '{ v = $1; u = toupper($2); f = (u == "GB") ? 1000 : (u == "KB" || u == "B") ? 0.001 : 1
             printf "%d", v * f }' <<<"$size")"
check "image size $size <= $MAX_MB MB" [ "${mb:-99999}" -le "$MAX_MB" ]
mkdir -p "$tmp/oci"
if buildah push --quiet "$IMAGE" "oci:$tmp/oci:img" >/dev/null 2>&1; then
    info "compressed (what a pull transfers): $(du -sh "$tmp/oci/blobs" | cut -f1)"
fi
base_size="$(buildah images --format '{{.Size}}' docker.io/library/debian:bookworm-slim 2>/dev/null | head -n1)"
info "image size: $size (base debian:bookworm-slim ${base_size:-?})"
[ -f var/image/build-seconds ] && info "last build (make image): $(cat var/image/build-seconds) s"
# The server's first log line is stamped: the part buildah run itself takes.
first="$(head -n1 "$tmp/server.log" | awk '{ print $1 }')"
first="$(date -d "$first" +%s.%N 2>/dev/null)"
split=""
[ -n "$first" ] && split=" (buildah run setup $(secs "$t_start" "$first") s, then the server $(secs "$first" "$ready") s)"
info "container start -> /readyz 200: $start_to_ready s$split"

echo "image-test: $pass passed, $fail failed"
[ $fail -eq 0 ]

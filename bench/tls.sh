#!/usr/bin/env bash
# bench/tls.sh -- what TLS costs (run by `make bench` after the main table):
# the locks cycle (bench/locks.lua) on keep-alive connections, over plain
# HTTP and over HTTPS against two gateways on one Redis, interleaved, as a
# ratio; then new TLS handshakes per second (`openssl s_time -new`, each
# connection a full handshake and one GET /healthz) against plain TCP
# connections per second for the same GET.  Short runs: the machine is
# shared.  Certificates: RSA 2048, made by tests/integration/tls_certs.sh.
#
# Environment: BUILD (build), TLS_SECONDS (4), TLS_ROUNDS (2), TLS_CONNS (50).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DIR=$PWD/bench
BENCH_NAME=tls
. bench/lib.sh
BUILD=${BUILD:-build}
SECS=${TLS_SECONDS:-4}
ROUNDS=${TLS_ROUNDS:-2}
CONNS=${TLS_CONNS:-50}
tests/integration/tls_certs.sh "$TMP" >/dev/null
read -r RPORT PPORT SPORT < <(python3 -c 'import socket
s=[socket.socket() for _ in range(3)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
    --logfile "$TMP/redis.log" &
PIDS+=($!)
wait_for redis "$TMP/redis.log" redis-cli -p "$RPORT" ping
"$BUILD/lockgate" --listen "127.0.0.1:$PPORT" --redis "redis://127.0.0.1:$RPORT" \
    --log-level warn >"$TMP/plain.log" 2>&1 &
PIDS+=($!)
"$BUILD/lockgate" --listen "127.0.0.1:$SPORT" --redis "redis://127.0.0.1:$RPORT" \
    --log-level warn --tls-cert "$TMP/server.pem" --tls-key "$TMP/server.key" >"$TMP/tls.log" 2>&1 &
PIDS+=($!)
wait_for plain "$TMP/plain.log" curl -sf "http://127.0.0.1:$PPORT/readyz"
wait_for tls "$TMP/tls.log" curl -sf --cacert "$TMP/ca.pem" "https://127.0.0.1:$SPORT/readyz"

rps() { sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$1"; }
plain=() tls=()
for r in $(seq "$ROUNDS"); do
    wrk -t2 -c"$CONNS" -d"${SECS}s" -s bench/locks.lua "http://127.0.0.1:$PPORT/healthz" \
        >"$TMP/p.out" 2>&1
    plain+=("$(rps "$TMP/p.out")")
    wrk -t2 -c"$CONNS" -d"${SECS}s" -s bench/locks.lua "https://127.0.0.1:$SPORT/healthz" \
        >"$TMP/s.out" 2>&1
    tls+=("$(rps "$TMP/s.out")")
    say "round $r: locks cycle plain ${plain[-1]} req/s, TLS ${tls[-1]} req/s"
done
best() { printf '%s\n' "$@" | sort -g | tail -n1; }
bp=$(best "${plain[@]}") bs=$(best "${tls[@]}")

# New connections: each a full TLS handshake (no session resumption) and one GET.
hs=$(openssl s_time -connect "127.0.0.1:$SPORT" -new -time "$SECS" -www /healthz \
        -CAfile "$TMP/ca.pem" 2>/dev/null |
     sed -n 's/.* \([0-9.]*\) connections\/user sec.*/\1/p' | head -n1)
hs_real=$(openssl s_time -connect "127.0.0.1:$SPORT" -new -time "$SECS" -www /healthz \
        -CAfile "$TMP/ca.pem" 2>/dev/null |
     sed -n 's/^\([0-9]*\) connections in \([0-9]*\) real seconds.*/\1 \2/p' | head -n1)
n=${hs_real% *} t=${hs_real#* }
printf '\n| TLS (bench/tls.sh, %s conns, best of %s x %ss) | value |\n|---|---|\n' "$CONNS" "$ROUNDS" "$SECS"
printf '| locks cycle, keep-alive, plain HTTP | %s req/s |\n' "$bp"
printf '| locks cycle, keep-alive, HTTPS (TLS 1.3) | %s req/s |\n' "$bs"
printf '| HTTPS / plain | %s |\n' "$(calc %.2f "$bs / $bp")"
printf '| new TLS handshakes + GET /healthz, one client | %s /s (wall clock: %s in %s s) |\n' \
    "$(calc %.0f "${n:-0} / ${t:-1}")" "${n:-?}" "${t:-?}"
printf '| same, per second of client CPU (openssl s_time) | %s |\n' "${hs:-?}"

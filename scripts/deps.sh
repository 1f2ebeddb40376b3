#!/usr/bin/env bash
# Install, from Debian's packages, whatever the build, `make run` and
# `make test` need and the machine lacks. Does nothing when all is there,
# so it is cheap to run before every build. Extra packages may be named:
#   scripts/deps.sh wrk etcd-server
set -euo pipefail

need=()
have_lib() { pkg-config --exists "$1" 2>/dev/null; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }

have_cmd cc         || need+=(gcc)
have_cmd make       || need+=(make)
have_cmd pkg-config || need+=(pkg-config)
have_cmd xxd        || need+=(xxd)
have_lib libmicrohttpd || need+=(libmicrohttpd-dev)
have_lib hiredis       || need+=(libhiredis-dev)
have_lib libcjson      || need+=(libcjson-dev)
have_lib gnutls        || need+=(libgnutls28-dev)
have_lib libcurl       || need+=(libcurl4-openssl-dev)
have_cmd redis-server  || need+=(redis-server)
have_cmd redis-cli     || need+=(redis-tools)
have_cmd faketime      || need+=(faketime)
have_cmd redis-sentinel || need+=(redis-sentinel)
have_cmd openssl     || need+=(openssl)
have_cmd nginx       || need+=(nginx-light) # tests/integration/test_proxy.c
have_cmd haproxy     || need+=(haproxy)
have_cmd python3     || need+=(python3)    # tests/docs, tests/flags, scripts/callcycles.py
have_cmd nm          || need+=(binutils)   # scripts/callcycles.py
have_cmd curl        || need+=(curl)       # the docs' examples
have_cmd systemd-analyze || need+=(systemd) # tests/deploy: the unit verified
have_cmd kubectl     || need+=(kubernetes-client) # tests/deploy: kubectl kustomize
have_cmd node        || need+=(nodejs)     # tests/deploy: the Kubernetes schemas
have_cmd npm         || need+=(npm)
for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done

# Valkey 8, which the suites also run against (tests/run.sh, VALKEY_SUITES),
# comes from Debian 12's backports: the source is added when missing.
backports=()
have_cmd valkey-server || backports+=(valkey-server)

[ ${#need[@]} -eq 0 ] && [ ${#backports[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if [ ${#backports[@]} -gt 0 ] && ! grep -rqs "bookworm-backports" /etc/apt/sources.list \
        /etc/apt/sources.list.d/; then
    echo "deps: adding Debian's bookworm-backports (for ${backports[*]})" >&2
    echo "deb http://deb.debian.org/debian bookworm-backports main" |
        $sudo tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
fi
echo "deps: installing ${need[*]} ${backports[*]}" >&2
$sudo apt-get update -qq
[ ${#need[@]} -eq 0 ] ||
    $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
[ ${#backports[@]} -eq 0 ] ||
    $sudo apt-get install -y -qq --no-install-recommends -t bookworm-backports \
        "${backports[@]}" >/dev/null
# nginx and haproxy (the proxy tests) start system services on install when
# invoke-rc.d lets them; the tests run their own instances on free loopback
# ports with their own configuration, so the system ones are stopped again.
for svc in nginx haproxy; do
    case " ${need[*]} " in *" $svc"[\ -]*) $sudo service "$svc" stop >/dev/null 2>&1 || true ;; esac
done
# Debian starts a system redis on 6379 when it installs the package; we never
# use it (tests start their own on free ports), so leave it as it is.

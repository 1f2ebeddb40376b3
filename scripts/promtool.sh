#!/usr/bin/env bash
# Prints the path of a promtool, fetching it when there is none: Debian's
# `prometheus` package ships it, but installing that package also installs
# (and on a systemd machine starts) a Prometheus server on port 9090.  So
# the package is downloaded with apt-get and only usr/bin/promtool taken
# out of it, into $BUILD/tools (a static binary; about 20 MB to fetch, once).
#   scripts/promtool.sh            -> /path/to/promtool
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if command -v promtool >/dev/null 2>&1; then
    command -v promtool
    exit 0
fi
tool="$PWD/$BUILD/tools/promtool"
if [ ! -x "$tool" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
        echo "promtool: fetching Debian's prometheus package" >&2
        $sudo apt-get update -qq
        (cd "$tmp" && apt-get download prometheus >/dev/null)
    fi
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
    mkdir -p "$(dirname "$tool")"
    install -m 755 "$tmp/x/usr/bin/promtool" "$tool"
fi
echo "$tool"

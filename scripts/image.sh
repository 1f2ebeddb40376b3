#!/usr/bin/env bash
# `make image`: build the project's Dockerfile, unchanged, into the local image
# lockgate:latest with buildah -- no Docker engine, no daemon, no registry.
# The base images are made first when missing (scripts/base-image.sh).
#
#   IMAGE=lockgate:dev scripts/image.sh     another name
#   NO_CACHE=1 scripts/image.sh             ignore cached layers
#
# The build's wall time is written to var/image/build-seconds for image-test.
set -euo pipefail
cd "$(dirname "$0")/.."

export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"
IMAGE="${IMAGE:-lockgate:latest}"

scripts/base-image.sh

cache=(--layers)
[ -n "${NO_CACHE:-}" ] && cache=(--layers --no-cache)

echo "image: building $IMAGE from Dockerfile" >&2
t0=$(date +%s.%N)
# --format docker: the OCI image format has no HEALTHCHECK; Docker's keeps it.
# --pull=never: the bases are local (a registry is not reachable here).
mkdir -p var/image
if ! buildah bud --format docker --pull=never "${cache[@]}" \
        --isolation "$BUILDAH_ISOLATION" -f Dockerfile -t "$IMAGE" . >var/image/build.log 2>&1; then
    tail -n 60 var/image/build.log >&2
    echo "image: build failed (whole log: var/image/build.log)" >&2
    exit 1
fi
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "$secs" >var/image/build-seconds
size=$(buildah images --format '{{.Size}}' "$IMAGE" | head -n1)
echo "image: $IMAGE built in ${secs}s, size $size" >&2

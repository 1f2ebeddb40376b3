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

. scripts/buildah-env.sh
IMAGE="${IMAGE:-lockgate:latest}"
DOCKERFILE="${DOCKERFILE:-Dockerfile}"

scripts/base-image.sh

cache=(--layers)
[ -n "${NO_CACHE:-}" ] && cache=(--layers --no-cache)

echo "image: building $IMAGE from $DOCKERFILE" >&2
t0=$(date +%s.%N)
# --format docker: the OCI image format has no HEALTHCHECK; Docker's keeps it.
# --pull=never: the bases are local (a registry is not reachable here).
mkdir -p var/image
if ! buildah bud --format docker --pull=never "${cache[@]}" \
        --isolation "$BUILDAH_ISOLATION" -f "$DOCKERFILE" -t "$IMAGE" . >var/image/build.log 2>&1; then
    tail -n 60 var/image/build.log >&2
    echo "image: build failed (whole log: var/image/build.log)" >&2
    exit 1
fi
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "$secs" >var/image/build-seconds

# A build after a source change leaves the previous build's layers behind
# (with vfs, each one a whole copy of its root). Remove those that earlier
# builds of $IMAGE made and this one no longer uses; named images and other
# builds' layers are never touched.
list="var/image/layers-$(tr -c 'A-Za-z0-9._-' '_' <<<"$IMAGE")"
grep -oE '^--> (Using cache )?[0-9a-f]{11,64}$' var/image/build.log \
    | awk '{ id = substr($NF, 1, 11) } !seen[id]++ { print id }' >"$list.new"
if [ -f "$list" ]; then
    unnamed="$(buildah images -a --noheading --format '{{.ID}} {{.Name}}' | awk '$2 == "<none>" { print substr($1, 1, 11) }')"
    # Children before parents: the list is in build order, so walk it backwards.
    for id in $(tac "$list"); do
        grep -qx "$id" "$list.new" && continue
        grep -qx "$id" <<<"$unnamed" || continue
        buildah rmi "$id" >/dev/null 2>&1 || true
    done
fi
mv "$list.new" "$list"
size=$(buildah images --format '{{.Size}}' "$IMAGE" | head -n1)
echo "image: $IMAGE built in ${secs}s, size $size" >&2

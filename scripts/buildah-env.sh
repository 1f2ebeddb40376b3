# Sourced by the image scripts: how buildah is run here.
#
# buildah's storage driver: vfs works everywhere (also inside an unprivileged
# container, where overlay may not), unless the store already uses another
# driver, which buildah refuses to switch. STORAGE_DRIVER=... chooses.
if [ -z "${STORAGE_DRIVER:-}" ]; then
    STORAGE_DRIVER=vfs
    store=/var/lib/containers/storage
    [ "$(id -u)" -ne 0 ] && store="${XDG_DATA_HOME:-$HOME/.local/share}/containers/storage"
    for d in overlay btrfs zfs; do
        [ -d "$store/$d-images" ] && { STORAGE_DRIVER=$d; break; }
    done
fi
export STORAGE_DRIVER
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"
buildah() { command buildah --storage-driver "$STORAGE_DRIVER" "$@"; }

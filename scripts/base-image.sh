#!/usr/bin/env bash
# Make the base images the Dockerfile starts FROM, debian:bookworm and
# debian:bookworm-slim, in buildah's local storage, for machines that cannot
# pull them from a registry. Both are built from a debootstrap'ed minbase
# bookworm root; -slim additionally drops docs, man pages and locales and
# tells dpkg not to install them again, as the official slim image does.
#
# The Debian mirror is read at run time from this machine's apt configuration
# (the first "deb" source for bookworm); no host name is written here. The
# images get this machine's bookworm apt sources, so `apt-get install` inside
# a Dockerfile build reaches the same mirror.
#
# The debootstrap'ed root is cached as a tarball under var/base/ (git-ignored);
# when both images already exist nothing is done at all.
#
#   scripts/base-image.sh            make the images that are missing
#   scripts/base-image.sh --force    remake both (and the cached root)
#   DEBIAN_MIRROR=http://.../debian scripts/base-image.sh   use that mirror
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/buildah-env.sh
SUITE=bookworm
FULL="docker.io/library/debian:$SUITE"
SLIM="docker.io/library/debian:$SUITE-slim"
CACHE="var/base"
TARBALL="$CACHE/debian-$SUITE-minbase-$(dpkg --print-architecture 2>/dev/null || uname -m).tar"
force=0
[ "${1:-}" = "--force" ] && force=1

log() { echo "base-image: $*" >&2; }

install_missing() {
    local need=() c
    for c in "$@"; do type -P "$c" >/dev/null || need+=("$c"); done
    [ ${#need[@]} -eq 0 ] && return 0
    log "installing ${need[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

install_missing buildah
if [ $force -eq 0 ] && have_image "$FULL" && have_image "$SLIM"; then
    exit 0
fi
install_missing debootstrap

# All "deb" sources of this machine for $SUITE and its -updates/-security
# suites, one "URI SUITE COMPONENTS..." line each, from both the one-line
# format (sources.list, *.list) and deb822 (*.sources). Disabled entries
# (Enabled: no) and files apt itself ignores (other suffixes) are skipped.
apt_sources() {
    local files=() f
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -eq 0 ] && return 0
    awk -v suite="$SUITE" '
        function want(s) { return s == suite || index(s, suite "-") == 1 }
        function flush(   i, j, nu, ns, u, s) {
            if (types ~ /(^| )deb( |$)/ && enabled != "no") {
                nu = split(uris, u, " "); ns = split(suites, s, " ")
                for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                    if (want(s[j])) print u[i], s[j], comps
            }
            types = uris = suites = comps = ""; enabled = ""
        }
        FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
        /^[ \t]*#/ { next }
        deb822 {
            if ($0 ~ /^[ \t]*$/) { flush(); next }
            key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^[ \t]+/, "")
            if (key == "types") types = $0
            else if (key == "uris") uris = $0
            else if (key == "suites") suites = $0
            else if (key == "components") comps = $0
            else if (key == "enabled") enabled = tolower($0)
            next
        }
        $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
            if (want($(i + 1))) {
                line = $i " " $(i + 1); for (j = i + 2; j <= NF; j++) line = line " " $j
                print line
            }
        }
        END { flush() }
    ' "${files[@]}"
}

sources="$(apt_sources)"
mirror="${DEBIAN_MIRROR:-$(awk -v s="$SUITE" '$2 == s { print $1; exit }' <<<"$sources")}"
if [ -z "$mirror" ]; then
    log "no 'deb' source for $SUITE in /etc/apt/sources.list{,.d/}; set DEBIAN_MIRROR"
    exit 1
fi
# Without any host source for $SUITE (DEBIAN_MIRROR given), the image uses the mirror.
[ -n "$sources" ] || sources="$mirror $SUITE main"
mirror="${mirror%/}"

work="$(mktemp -d "${TMPDIR:-/tmp}/lockgate-base.XXXXXX")"
ctr=""
cleanup() {
    [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

if [ $force -eq 1 ] || [ ! -s "$TARBALL" ]; then
    log "debootstrap --variant=minbase $SUITE from $mirror (about a minute)"
    t0=$(date +%s)
    root="$work/root"
    debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
        tail -n 30 "$work/debootstrap.log" >&2
        tail -n 30 "$root/debootstrap/debootstrap.log" >&2 2>/dev/null || true
        exit 1
    }
    # The machine's bookworm sources replace debootstrap's one-line file.
    rm -f "$root/etc/apt/sources.list"
    awk '{ printf "Types: deb\nURIs: %s\nSuites: %s\nComponents:", $1, $2
           for (i = 3; i <= NF; i++) printf " %s", $i
           if (NF < 3) printf " main"
           printf "\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n" }' \
        <<<"$sources" >"$root/etc/apt/sources.list.d/debian.sources"
    # A proxy the machine's apt needs is needed inside the build as well.
    if grep -rhsiE '^[[:space:]]*Acquire::[a-z]+::Proxy' /etc/apt/apt.conf /etc/apt/apt.conf.d/ \
            >"$work/proxy"; then
        cp "$work/proxy" "$root/etc/apt/apt.conf.d/01proxy"
    fi
    # As in Debian's official images: no apt caches kept in image layers.
    cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
           "$root"/var/log/*.log "$root"/var/log/apt/* "$root/debootstrap"
    rm -f "$root/etc/hostname" "$root/etc/resolv.conf"
    : >"$root/etc/machine-id" 2>/dev/null || true
    mkdir -p "$CACHE"
    tar --numeric-owner --xattrs -C "$root" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
    rm -rf "$root"
    log "root cached in $TARBALL ($(du -h "$TARBALL" | cut -f1), $(( $(date +%s) - t0 ))s)"
else
    log "using cached root $TARBALL"
fi

buildah rmi "$FULL" "$SLIM" >/dev/null 2>&1 || true

# Each image is one layer made from the cached root: for -slim the docs, man
# pages and locales are removed before the commit, so they take no space.
make_image() {   # make_image NAME slim|full
    ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$TARBALL" / >/dev/null
    if [ "$2" = slim ]; then
        local mnt
        mnt="$(buildah mount "$ctr")"
        cat >"$mnt/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# As in Debian's official -slim images: keep only what programs need.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
        find "$mnt/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
        find "$mnt/usr/share/doc" -mindepth 1 -type d -empty -delete
        rm -rf "$mnt"/usr/share/man/* "$mnt"/usr/share/groff/* "$mnt"/usr/share/info/* \
               "$mnt"/usr/share/lintian/* "$mnt"/usr/share/linda/*
        find "$mnt/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
        buildah umount "$ctr" >/dev/null
    fi
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd bash --label "org.opencontainers.image.description=Debian $SUITE minbase ($2), made locally by scripts/base-image.sh" \
        "$ctr"
    buildah commit --quiet --format docker --rm "$ctr" "$1" >/dev/null
    ctr=""
    log "made $1 ($(buildah images --format '{{.Size}}' "$1" | head -n1))"
}
make_image "$FULL" full
make_image "$SLIM" slim

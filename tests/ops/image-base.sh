#!/usr/bin/env bash
# Where no image registry is reachable: imports debian:bookworm and debian:bookworm-slim
# (the Dockerfile's bases) from a debootstrap --variant=minbase root, made from the Debian
# mirror apt uses here (MIRROR=... to choose). Root, a few minutes.
#   bash tests/ops/image-base.sh [ROOT_DIR]    (default: a temporary directory, removed)
# Both tags are the same minimal root, without apt's downloaded packages and lists; neither
# has the docker-clean apt hook of Debian's own images, so the Dockerfile cleans apt's cache
# itself.
set -euo pipefail
DOCKER=${DOCKER:-docker}
mirror=${MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\/*\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
  head -n1)}
mirror=${mirror:-http://deb.debian.org/debian}
if [ $# -ge 1 ]; then
  root=$1
  keep=1
else
  root=$(mktemp -d "${TMPDIR:-/tmp}/fs-image-base.XXXXXX")
  keep=""
fi
if [ ! -x "$root/usr/bin/apt-get" ]; then
  echo "image-base: debootstrap bookworm into $root from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
    tail -n 20 "$root.debootstrap.log" >&2
    exit 1
  }
fi
# Never archive a root with a file system mounted in it (debootstrap mounts /proc and /sys
# while it works).
if awk -v r="$(readlink -f "$root")/" 'index($2 "/", r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
  echo "image-base: something is mounted under $root; not archiving it" >&2
  exit 1
fi
# Without debootstrap's downloaded packages and apt lists (80 MB), as Debian's own images.
tar -C "$root" --exclude='./var/cache/apt/archives/*.deb' --exclude='./var/lib/apt/lists/*' -c . |
  $DOCKER import - debian:bookworm-slim >/dev/null
$DOCKER tag debian:bookworm-slim debian:bookworm
echo "image-base: imported debian:bookworm-slim and debian:bookworm" \
  "($($DOCKER image inspect -f '{{.Size}}' debian:bookworm-slim) bytes)"
if [ -z "$keep" ]; then rm -rf "$root" "$root.debootstrap.log"; fi

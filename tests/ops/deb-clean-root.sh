#!/usr/bin/env bash
# Both Debian packages installed into a clean root, as a network team would install them:
# a fresh `debootstrap --variant=minbase bookworm` root (this machine's release, with
# bookworm-updates and bookworm-security as this machine has them, since the packages'
# Depends come from the library versions the build linked), `apt-get install` of the two
# .deb files there, then, in the root (chroot):
# - the collector's user exists and owns the configuration's group;
# - each unit's ExecStartPre (its binary with --check-config on its packaged
#   configuration) passes, the collector's as the fabricscope user, the agent's with the
#   host-events token copied to /etc/fabricscope/host-events.token first;
# - `--help` of each binary runs (every library it needs is installed);
# - then remove and purge (tests/ops/deb-life-cycle.sh): services stopped on remove; no
#   enable link, state directory, configuration or user left after purge.
# Not a ctest test: it needs a Debian mirror, root, and a few minutes (debootstrap and
# the dependencies' download). Run by hand: bash tests/ops/deb-clean-root.sh [BUILD_DIR].
# FS_DEB_MIRROR picks the mirror (default: the first URIs of this machine's
# /etc/apt/sources.list.d/debian.sources).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(readlink -f "${1:-$SRC/build}")
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || fail "needs debootstrap (apt-get install debootstrap)"
[ -f "$BUILD/CPackConfig.cmake" ] || fail "no CPackConfig.cmake in $BUILD (configure and build first)"
MIRROR=${FS_DEB_MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
T=$(mktemp -d "${TMPDIR:-/tmp}/fs-deb-root.XXXXXX")
R=$T/root
cleanup() {
  local rc=$?
  mountpoint -q "$R/proc" && umount "$R/proc"
  if [ $rc -ne 0 ] || [ -n "${FS_KEEP_TMP:-}" ]; then
    echo "scratch dir kept: $T" >&2
  else
    rm -rf "$T"
  fi
}
trap cleanup EXIT

start=$(date +%s)
(cd "$T" && cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$T/pkg") >"$T/cpack.log" 2>&1 ||
  fail "cpack: $(tail -n 5 "$T/cpack.log")"
debootstrap --variant=minbase bookworm "$R" "$MIRROR" >"$T/debootstrap.log" 2>&1 ||
  fail "debootstrap: $(tail -n 5 "$T/debootstrap.log")"
ok "debootstrap --variant=minbase bookworm: $(( $(date +%s) - start )) s"
cat >"$R/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main
SOURCES
cp /etc/resolv.conf "$R/etc/resolv.conf"
mount -t proc proc "$R/proc"
mkdir -p "$R/tmp/pkg"
cp "$T"/pkg/*.deb "$R/tmp/pkg/"
before=$(chroot "$R" dpkg-query -W -f '${Package}\n' | wc -l)
t0=$(date +%s)
chroot "$R" apt-get update >"$T/apt-update.log" 2>&1 || fail "apt-get update: $(tail -n 5 "$T/apt-update.log")"
DEBIAN_FRONTEND=noninteractive chroot "$R" sh -c 'apt-get install -y --no-install-recommends /tmp/pkg/*.deb' \
  >"$T/apt-install.log" 2>&1 || fail "apt-get install: $(tail -n 10 "$T/apt-install.log")"
after=$(chroot "$R" dpkg-query -W -f '${Package}\n' | wc -l)
for p in fabricscope fabricscope-host-agent; do
  chroot "$R" dpkg-query -W -f '${Status}\n' "$p" | grep -qx 'install ok installed' || fail "$p not installed"
done
ok "apt-get install of both packages: $((after - before)) packages installed in $(( $(date +%s) - t0 )) s"

chroot "$R" getent passwd fabricscope >/dev/null || fail "no fabricscope user"
grp=$(chroot "$R" stat -c %G /etc/fabricscope/fabricscope.yaml)
[ "$grp" = fabricscope ] || fail "/etc/fabricscope/fabricscope.yaml's group is $grp"
ok "the fabricscope user exists; the collector's configuration is group fabricscope"

# The agent's token, copied there as the README's install steps say (its --check-config
# refuses the configuration without it, as start-up would); removed again before the purge.
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$R/etc/fabricscope/host-events.token"
chmod 0600 "$R/etc/fabricscope/host-events.token"
# Each unit's ExecStartPre, as written in the installed unit.
for unit in fabricscope fabricscope-host-agent; do
  f=$R/lib/systemd/system/$unit.service
  [ -f "$f" ] || fail "no $unit.service installed"
  pre=$(sed -n 's/^ExecStartPre=//p' "$f")
  [ -n "$pre" ] || fail "$unit.service has no ExecStartPre"
  user=$(sed -n 's/^User=//p' "$f")
  # The unit's command line has no quoting (systemd would split it on spaces too).
  # shellcheck disable=SC2086
  out=$(chroot --userspec="${user:-root}:${user:-root}" "$R" $pre 2>&1) ||
    fail "$unit: $pre as ${user:-root}: $out"
  ok "$unit.service ExecStartPre as ${user:-root}: $pre: $out"
done
rm -f "$R/etc/fabricscope/host-events.token"
chroot "$R" fabricscope --help >/dev/null || fail "fabricscope --help"
chroot "$R" fabricscope-host-agent --help >/dev/null || fail "fabricscope-host-agent --help"
ok "both binaries run in the clean root ($(( $(date +%s) - start )) s so far)"

# Then remove and purge (the maintainer scripts).
bash "$SRC/tests/ops/deb-life-cycle.sh" "$R"
ok "the clean root checks: $(( $(date +%s) - start )) s in all"

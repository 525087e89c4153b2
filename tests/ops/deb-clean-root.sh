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
# FS_DEB_MIRROR picks the mirror, FS_DEB_ROOT_CACHE a directory to keep the debootstrap
# root in (tests/ops/deb-root-lib.sh, shared with tests/ops/deb-systemd-boot.sh).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(readlink -f "${1:-$SRC/build}")
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot)"
# shellcheck source=tests/ops/deb-root-lib.sh
source "$SRC/tests/ops/deb-root-lib.sh"
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
deb_root_packages "$BUILD" "$T/pkg"
deb_root_bootstrap "$R" "$T"
deb_root_install "$R" "$T/pkg" "$T"

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

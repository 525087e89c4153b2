#!/usr/bin/env bash
# The packages' life cycle after installation, in a root where both are installed
# (tests/ops/deb-clean-root.sh calls it; or by hand: bash tests/ops/deb-life-cycle.sh ROOT,
# as root). systemd cannot run there (no systemd as PID 1), so the root is made to look
# like a systemd host to the maintainer scripts: /run/systemd/system exists and a
# `systemctl` stand-in in /usr/local/bin records its calls and answers is-enabled from
# the enable links. Then:
# - both services enabled as an administrator would (the links `systemctl enable` makes,
#   from their [Install] WantedBy=multi-user.target), the agent given a spool;
# - apt-get remove: each service stopped (prerm: systemctl stop through
#   deb-systemd-invoke); the enable links, the user and the spool stay;
# - apt-get purge: no enable link left in /etc/systemd/system, no /var/lib/fabricscope*,
#   no fabricscope user or group, no /etc/fabricscope.
set -euo pipefail
R=$(readlink -f "$1")
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (chroot)"
for p in fabricscope fabricscope-host-agent; do
  chroot "$R" dpkg-query -W -f '${Status}\n' "$p" | grep -qx 'install ok installed' ||
    fail "$p is not installed in $R"
done
mkdir -p "$R/run/systemd/system" "$R/usr/local/bin"
# The stand-in comes first, in apt's maintainer scripts too (DPkg::Path has no /usr/local).
CPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LOG=/tmp/systemctl-calls.log
cat >"$R/usr/local/bin/systemctl" <<SH
#!/bin/sh
# Stand-in for systemctl (tests/ops/deb-life-cycle.sh): records each call.
echo "\$*" >>$LOG
case "\$*" in
  *--version*) echo "systemd 252 (252.39-1~deb12u1)" ;;
  *is-enabled*)
    for u in "\$@"; do :; done
    if ls /etc/systemd/system/*.wants/"\$u" >/dev/null 2>&1; then echo enabled; else echo disabled; exit 1; fi ;;
  *list-units*) ;;
esac
exit 0
SH
chmod 0755 "$R/usr/local/bin/systemctl"
rm -f "$R$LOG"
WANTS=$R/etc/systemd/system/multi-user.target.wants
mkdir -p "$WANTS"
for u in fabricscope fabricscope-host-agent; do
  ln -sf "/lib/systemd/system/$u.service" "$WANTS/$u.service"
done
mkdir -p "$R/var/lib/fabricscope-host-agent/spool"
echo '{}' >"$R/var/lib/fabricscope-host-agent/spool/0001.json"
ok "both services enabled, the agent has a spool"

DEBIAN_FRONTEND=noninteractive chroot "$R" env PATH="$CPATH" apt-get -o DPkg::Path="$CPATH" remove -y fabricscope fabricscope-host-agent \
  >/tmp/apt-remove.log 2>&1 || fail "apt-get remove: $(tail -n 10 /tmp/apt-remove.log)"
for u in fabricscope fabricscope-host-agent; do
  grep -qx "stop $u.service" "$R$LOG" || fail "remove did not stop $u.service; systemctl calls: $(cat "$R$LOG" 2>/dev/null)"
done
[ -L "$WANTS/fabricscope.service" ] || fail "remove dropped the administrator's enable link"
chroot "$R" getent passwd fabricscope >/dev/null || fail "remove deleted the user"
[ -f "$R/var/lib/fabricscope-host-agent/spool/0001.json" ] || fail "remove deleted the agent's spool"
ok "apt-get remove: both services stopped ($(grep -c '^stop ' "$R$LOG") systemctl stop); links, user and spool kept"

DEBIAN_FRONTEND=noninteractive chroot "$R" env PATH="$CPATH" apt-get -o DPkg::Path="$CPATH" purge -y fabricscope fabricscope-host-agent \
  >/tmp/apt-purge.log 2>&1 || fail "apt-get purge: $(tail -n 10 /tmp/apt-purge.log)"
left=$(find "$R/etc/systemd/system" -name 'fabricscope*' 2>/dev/null)
[ -z "$left" ] || fail "purge left: $left"
for d in /var/lib/fabricscope /var/lib/fabricscope-host-agent /etc/fabricscope; do
  [ ! -e "$R$d" ] || fail "purge left $d: $(ls -A "$R$d")"
done
chroot "$R" getent passwd fabricscope >/dev/null && fail "purge left the fabricscope user"
chroot "$R" getent group fabricscope >/dev/null && fail "purge left the fabricscope group"
ok "apt-get purge: no enable link, state directory, configuration, user or group left"
rm -f "$R/usr/local/bin/systemctl" "$R$LOG"
rmdir "$R/run/systemd/system" 2>/dev/null || true

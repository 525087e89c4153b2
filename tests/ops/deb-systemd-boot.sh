#!/usr/bin/env bash
# Both Debian packages' life cycle under a real systemd: a fresh `debootstrap
# --variant=minbase --include=systemd,systemd-sysv,dbus bookworm` root, both .deb files
# installed there with apt-get (tests/ops/deb-root-lib.sh, as tests/ops/deb-clean-root.sh
# does), both services configured and enabled as an administrator would (`systemctl
# enable`, offline in the root), then the root booted with `systemd-nspawn -b` (systemd
# is PID 1 in the container) and, talking to that systemd:
# - the boot reaches `running` (`systemctl is-system-running --wait`), both units enabled
#   and active, neither restarted, and the collector polls a live target: a private
#   snmpd on this machine's loopback (tests/sim/start-snmp-sim.sh --mode host; the
#   container shares this machine's network), `fabricscope_target_up` 1 in /metrics;
# - `systemctl reload fabricscope` with a good changed file (a second target): exit 0,
#   the same main PID, active, the new target in /metrics; with a bad one (a timeout
#   that is not a duration): the reload fails, the same main PID, active, the old
#   targets still polled, and the unit's journal names the bad key path;
# - `systemctl stop` of each service timed while the collector polls its target (goal:
#   2 s at most; the collector's episode log written to its StateDirectory then),
#   then started again;
# - `systemd-analyze security` of both units, against the running systemd;
# - `apt-get remove`: both services stopped (inactive, no process left);
# - `apt-get purge`: no unit or enable link, no /var/lib/fabricscope*, no
#   /etc/fabricscope, no fabricscope user or group;
# - the container powered off (SIGTERM to systemd-nspawn: an orderly shutdown).
# machined cannot run on a host whose PID 1 is not systemd (`--register=no --keep-unit`,
# so no `systemctl -M`/`machinectl`): the container is reached with `nsenter` into the
# namespaces of its PID 1 instead. The container runs in a cgroup of its own
# (fs-boot-PID in each hierarchy nspawn uses), removed at the end.
# Not a ctest test: it needs root, a Debian mirror, systemd-container and snmpd, and a
# few minutes. Run by hand: bash tests/ops/deb-systemd-boot.sh [BUILD_DIR] (make
# package-check-systemd). FS_DEB_MIRROR and FS_DEB_ROOT_CACHE as in deb-root-lib.sh;
# FS_KEEP_TMP=1 keeps the scratch directory.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(readlink -f "${1:-$SRC/build}")
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, systemd-nspawn)"
command -v systemd-nspawn >/dev/null || fail "needs systemd-nspawn (apt-get install systemd-container)"
command -v snmpd >/dev/null || fail "needs snmpd for the live target (apt-get install snmpd)"
command -v curl >/dev/null || fail "needs curl"
# shellcheck source=tests/ops/deb-root-lib.sh
source "$SRC/tests/ops/deb-root-lib.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/fs-deb-boot.XXXXXX")
R=$T/root
M=fs-boot-$$
NSPAWN_PID=""
CGS=()
cleanup() {
  local rc=$? cg
  if [ -n "$NSPAWN_PID" ] && kill -0 "$NSPAWN_PID" 2>/dev/null; then
    kill -TERM "$NSPAWN_PID" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NSPAWN_PID" 2>/dev/null || true
    wait "$NSPAWN_PID" 2>/dev/null || true
  fi
  [ -d "$T/snmp" ] && bash "$SRC/tests/sim/start-snmp-sim.sh" --stop "$T/snmp" >/dev/null 2>&1
  mountpoint -q "$R/proc" && umount "$R/proc"
  # nspawn makes payload/ and supervisor/ in it, the container's systemd more below.
  for cg in "${CGS[@]}"; do find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true; done
  if [ $rc -ne 0 ] || [ -n "${FS_KEEP_TMP:-}" ]; then
    # The root is left for a look; nothing is mounted in it (nspawn's mounts die with it).
    echo "scratch dir kept: $T" >&2
  else
    rm -rf "$T"
  fi
}
trap cleanup EXIT

# A TCP or UDP port on this machine nobody listens on (the container shares its network).
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((16000 + RANDOM % 16000))
    ss -Hltun "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  fail "no free port"
}
# until SECS WHAT CMD...: polls CMD until it succeeds; fails with WHAT at the deadline.
until_ok() {
  local secs=$1 what=$2 end
  shift 2
  end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt "$end" ] || fail "not within ${secs}s: $what"
    sleep 0.1
  done
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

start=$(date +%s)
deb_root_packages "$BUILD" "$T/pkg"
deb_root_bootstrap "$R" "$T" systemd,systemd-sysv,dbus
deb_root_install "$R" "$T/pkg" "$T"

# ---- configured as an administrator would, before the boot.
HTTP=$(free_port)
AGENT_HTTP=$(free_port)
SNMP=$(free_port)
bash "$SRC/tests/sim/start-snmp-sim.sh" --dir "$T/snmp" --port "$SNMP" --mode host >"$T/snmp-start.log" 2>&1 ||
  fail "snmpd did not start: $(tail -n 5 "$T/snmp-start.log")"
E=$R/etc/fabricscope
# shellcheck disable=SC1091
COMM=$(. "$T/snmp/env.sh" && echo "$SNMP_COMMUNITY_FILE")
install -m 0640 -g "$(chroot "$R" getent group fabricscope | cut -d: -f3)" "$COMM" "$E/snmp-community"
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$E/host-events.token"
chmod 0600 "$E/host-events.token"
# The collector's copy of the agents' token, readable by its user.
install -m 0640 -g "$(stat -c %g "$E/snmp-community")" "$E/host-events.token" "$E/host-events-collector.token"
# collector_yaml FILE TARGET...: the packaged file's settings plus these SNMP targets
# (the machine's snmpd, each under another name), a timeout of TIMEOUT (default 500ms).
collector_yaml() {
  local f=$1 n
  shift
  {
    echo "listen: 127.0.0.1:$HTTP"
    echo "storage: { memory_limit: 256MiB, retention: 1h }"
    echo "state_dir: /var/lib/fabricscope"
    echo "host_events: { bearer_token_file: /etc/fabricscope/host-events-collector.token }"
    echo "targets:"
    for n in "$@"; do
      echo "  - name: $n"
      echo "    address: 127.0.0.1"
      echo "    snmp: { port: $SNMP, version: 2c, community_file: /etc/fabricscope/snmp-community,"
      echo "            interval: 1s, timeout: ${TIMEOUT:-500ms}, retries: 1 }"
    done
  } >"$f.new"
  chgrp --reference="$E/snmp-community" "$f.new"
  chmod 0640 "$f.new"
  mv "$f.new" "$f" # atomically, as the README asks
}
collector_yaml "$E/fabricscope.yaml" host1
sed -i -e "s|^  url: .*|  url: http://127.0.0.1:$HTTP|" -e "s|^  listen: 127.0.0.1:9465|  listen: 127.0.0.1:$AGENT_HTTP|" \
  "$E/host-agent.yaml"
grep -q "127.0.0.1:$AGENT_HTTP" "$E/host-agent.yaml" || fail "host-agent.yaml has no metrics.listen to move"
chroot "$R" systemctl enable fabricscope.service fabricscope-host-agent.service >"$T/enable.log" 2>&1 ||
  fail "systemctl enable: $(cat "$T/enable.log")"
umount "$R/proc" # nspawn mounts its own
ok "configured (collector on 127.0.0.1:$HTTP polling the snmpd on udp 127.0.0.1:$SNMP, agent posting to it) and enabled"

# ---- boot, in a cgroup of its own in each hierarchy nspawn places itself in.
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
  if [ -f "$h/cgroup.procs" ] && [ ! -e "$h/init.scope" ] && mkdir "$h/$M" 2>/dev/null; then
    CGS+=("$h/$M")
  fi
done
t0=$(now_ms)
(
  for cg in "${CGS[@]}"; do echo "$BASHPID" >"$cg/cgroup.procs"; done
  exec systemd-nspawn --quiet --register=no --keep-unit --boot --directory="$R" --machine="$M" \
    --console=pipe </dev/null
) >"$T/nspawn.log" 2>&1 &
NSPAWN_PID=$!
LEADER=""
leader() {
  LEADER=$(ps -o pid= --ppid "$NSPAWN_PID" | tr -d ' ' | head -n 1)
  [ -n "$LEADER" ] && [ "$(cat "/proc/$LEADER/comm" 2>/dev/null)" = systemd ]
}
until_ok 60 "systemd as the container's PID 1 ($(tail -n 3 "$T/nspawn.log"))" leader
# in_ct CMD...: runs CMD in the container (its PID 1's namespaces), with a clean environment.
in_ct() {
  nsenter --target "$LEADER" --all env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SYSTEMD_PAGER=cat SYSTEMD_COLORS=0 LANG=C.UTF-8 "$@"
}
until_ok 60 "the container's systemd listening on /run/systemd/private" in_ct test -S /run/systemd/private
state=$(in_ct timeout 180 systemctl is-system-running --wait) ||
  fail "boot ended $state: $(in_ct systemctl --failed --no-legend 2>&1)"
[ "$(in_ct cat /proc/1/comm)" = systemd ] || fail "the container's PID 1 is not systemd"
ok "booted: systemd $(in_ct systemctl --version | head -n 1 | cut -d' ' -f2) as PID 1 (host pid $LEADER), state $state after $(( $(now_ms) - t0 )) ms"

prop() { in_ct systemctl show -P "$2" "$1.service"; }
for u in fabricscope fabricscope-host-agent; do
  [ "$(in_ct systemctl is-enabled "$u.service")" = enabled ] || fail "$u.service not enabled"
  [ "$(prop "$u" ActiveState)" = active ] || fail "$u.service: $(prop "$u" ActiveState) ($(in_ct journalctl -b -u "$u.service" --no-pager | tail -n 5))"
  [ "$(prop "$u" NRestarts)" = 0 ] || fail "$u.service restarted $(prop "$u" NRestarts) times: $(in_ct journalctl -b -u "$u.service" --no-pager | tail -n 5)"
done
ok "both units enabled and active after the boot, not restarted"

# (read whole first: grep -q ending early would fail curl's write, and the pipe with it)
up() {
  local m
  m=$(curl -fsS "http://127.0.0.1:$HTTP/metrics") && grep -qE "^fabricscope_target_up\\{target=\"$1\"[^}]*\\} 1\$" <<<"$m"
}
until_ok 30 "host1 polled (fabricscope_target_up 1)" up host1
ok "the collector under systemd polls the live target host1 (snmpd on this machine)"
agent_up() {
  local m
  m=$(curl -fsS "http://127.0.0.1:$AGENT_HTTP/metrics") && grep -q '^fabricscope_host_agent_spool_events ' <<<"$m"
}
until_ok 30 "the agent's /metrics on 127.0.0.1:$AGENT_HTTP" agent_up
ok "the agent under systemd serves its /metrics (127.0.0.1:$AGENT_HTTP)"

# ---- reload: a good changed file, then a bad one.
pid=$(prop fabricscope MainPID)
collector_yaml "$E/fabricscope.yaml" host1 host2
out=$(in_ct systemctl reload fabricscope 2>&1) || fail "reload of a good file failed: $out"
[ "$(prop fabricscope MainPID)" = "$pid" ] || fail "the main PID changed on reload"
[ "$(prop fabricscope ActiveState)" = active ] || fail "not active after the reload"
until_ok 30 "host2 polled after the reload" up host2
ok "systemctl reload with a good changed file: exit 0, main PID $pid kept, active, the new target host2 polled"

TIMEOUT=fast collector_yaml "$E/fabricscope.yaml" host1 host3
since=$(in_ct date '+%F %T')
if out=$(in_ct systemctl reload fabricscope 2>&1); then fail "reload of a bad file succeeded: $out"; fi
[ "$(prop fabricscope MainPID)" = "$pid" ] || fail "the main PID changed on a refused reload"
[ "$(prop fabricscope ActiveState)" = active ] || fail "not active after a refused reload"
journal=$(in_ct journalctl -u fabricscope.service --since "$since" --no-pager)
grep -qF 'targets[host1].snmp.timeout' <<<"$journal" || fail "the journal does not name the bad key: $journal"
up host2 || fail "the old configuration (host2) is no longer polled"
ok "systemctl reload with a bad file: refused ($(head -n 1 <<<"$out")), main PID kept, active, old targets polled; journal: $(grep -F 'targets[host1].snmp.timeout' <<<"$journal" | head -n 1 | sed 's/^.*fabricscope[^:]*: //')"
collector_yaml "$E/fabricscope.yaml" host1 host2
in_ct systemctl reload fabricscope >/dev/null 2>&1 || fail "reload back to the good file failed"

# ---- stop times (the collector polling two targets), each service started again.
for u in fabricscope fabricscope-host-agent; do
  t=$(now_ms)
  in_ct systemctl stop "$u.service" || fail "systemctl stop $u failed"
  ms=$(( $(now_ms) - t ))
  [ "$(prop "$u" ActiveState)" != active ] || fail "$u still active after stop"
  [ "$(prop "$u" Result)" = success ] || fail "$u stopped with result $(prop "$u" Result)"
  ok "systemctl stop $u.service: $ms ms (goal: 2000 ms at most), result success"
  [ "$ms" -le 2000 ] || fail "stopping $u took $ms ms"
  if [ "$u" = fabricscope ]; then
    # The episode log written at shutdown into the unit's StateDirectory (state_dir).
    st=$(in_ct stat -c '%U %a' /var/lib/fabricscope/episode-log 2>&1) ||
      fail "no episode log in /var/lib/fabricscope after stop: $st"
    [ "$st" = "fabricscope 600" ] || fail "episode-log is $st, not fabricscope 600"
    ok "the episode log written at stop: /var/lib/fabricscope/episode-log, $st"
  fi
  in_ct systemctl start "$u.service" || fail "systemctl start $u failed"
done
until_ok 30 "host1 polled after the restart" up host1

# ---- systemd-analyze security, against the running systemd.
for u in fabricscope fabricscope-host-agent; do
  sec=$(in_ct systemd-analyze security "$u.service" 2>&1 | tail -n 1)
  ok "systemd-analyze security $u.service: ${sec#→ }"
done

# ---- apt-get remove stops both; purge leaves nothing.
# A process named NAME in the container (comm: its first 15 characters).
# (a process may end between the glob and its read: cat's status says nothing)
running() {
  local c
  c=$(in_ct sh -c 'cat /proc/[0-9]*/comm 2>/dev/null; true') && grep -qxF "${1:0:15}" <<<"$c"
}
running fabricscope || fail "no fabricscope process before the remove"
running fabricscope-host-agent || fail "no fabricscope-host-agent process before the remove"
out=$(in_ct env DEBIAN_FRONTEND=noninteractive apt-get remove -y fabricscope fabricscope-host-agent 2>&1) ||
  fail "apt-get remove: $(tail -n 10 <<<"$out")"
for u in fabricscope fabricscope-host-agent; do
  s=$(prop "$u" ActiveState)
  [ "$s" = inactive ] || fail "$u.service $s after apt-get remove"
done
running fabricscope && fail "a fabricscope process is left after apt-get remove"
running fabricscope-host-agent && fail "a fabricscope-host-agent process is left after apt-get remove"
in_ct getent passwd fabricscope >/dev/null || fail "remove deleted the user"
ok "apt-get remove: both services inactive, no process left; the user kept"

# The administrator's own files first (dpkg keeps a directory holding files no package owns).
in_ct rm -f /etc/fabricscope/snmp-community /etc/fabricscope/host-events.token /etc/fabricscope/host-events-collector.token
out=$(in_ct env DEBIAN_FRONTEND=noninteractive apt-get purge -y fabricscope fabricscope-host-agent 2>&1) ||
  fail "apt-get purge: $(tail -n 10 <<<"$out")"
left=$(in_ct find /etc/systemd/system /lib/systemd/system -name 'fabricscope*')
[ -z "$left" ] || fail "purge left: $left"
for d in /var/lib/fabricscope /var/lib/fabricscope-host-agent /etc/fabricscope; do
  in_ct test ! -e "$d" || fail "purge left $d"
done
in_ct getent passwd fabricscope >/dev/null && fail "purge left the fabricscope user"
in_ct getent group fabricscope >/dev/null && fail "purge left the fabricscope group"
[ -z "$(in_ct systemctl list-unit-files --no-legend 'fabricscope*')" ] || fail "systemd still lists fabricscope unit files"
ok "apt-get purge: no unit file or link, state directory, configuration, user or group left"

# ---- poweroff.
t=$(now_ms)
kill -TERM "$NSPAWN_PID"
until_ok 60 "the container powered off" sh -c "! kill -0 $NSPAWN_PID"
wait "$NSPAWN_PID" || fail "systemd-nspawn exited $?: $(tail -n 5 "$T/nspawn.log")"
NSPAWN_PID=""
ok "container powered off in $(( $(now_ms) - t )) ms; $(( $(date +%s) - start )) s in all"

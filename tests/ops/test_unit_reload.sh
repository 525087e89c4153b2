#!/usr/bin/env bash
# `systemctl reload` as the units run it, without systemd (PID 1 here is not systemd):
# each unit's ExecReload= lines, with the built binaries and a test file in place of the
# installed ones, run one after the other as systemd does (the first that fails ends the
# reload and fails it), with MAINPID set to a running daemon.
# - They need nothing outside an essential root (no /bin/kill: procps).
# - A good file: exit 0 and the daemon applies it (the endpoint moves to the new port).
# - A bad file: non-zero, the problem printed, the daemon not asked (no SIGHUP logged)
#   and still serving the old configuration.
# - The daemon's own refusal (--reload of a bad file, without --check-config first)
#   fails --reload, and its log gives the problem without an escaped newline (\x0a).
# - The host agent's unit: a bad file fails the reload, a good one passes.
source "$(dirname "$0")/../integration/lib.sh"
FS_SOURCE_DIR=$(readlink -f "$FS_SOURCE_DIR")
FABRICSCOPE=$(readlink -f "$FS_BUILD_DIR/fabricscope")
AGENT=$(readlink -f "$FS_BUILD_DIR/fabricscope-host-agent")
[ -x "$FABRICSCOPE" ] && [ -x "$AGENT" ] || fail "build fabricscope and fabricscope-host-agent first"

# run_reload UNIT SED-SCRIPT PID: the unit's ExecReload lines, rewritten, run in order.
run_reload() {
  local unit=$1 subst=$2 pid=$3 line
  while IFS= read -r line; do
    (export MAINPID=$pid; eval "$line") || return $?
  done < <(sed -n 's/^ExecReload=//p' "$unit" | sed "$subst")
}
# Each ExecReload runs our binary or /bin/sh (essential), nothing else (not procps' kill).
for unit in fabricscope fabricscope-host-agent; do
  for cmd in $(sed -n 's/^ExecReload=\([^ ]*\).*/\1/p' "$FS_SOURCE_DIR/docker/$unit.service"); do
    case $cmd in /usr/bin/fabricscope*|/bin/sh) ;; *) fail "$unit.service: ExecReload runs $cmd";; esac
  done
done

# ---- the collector ----
UNIT=$FS_SOURCE_DIR/docker/fabricscope.service
CFG=$T/fabricscope.yaml
P1=$(free_tcp_port)
P2=$(free_tcp_port)
printf 'listen: 127.0.0.1:%s\ntargets: []\n' "$P1" >"$CFG"
start_fabricscope "$CFG"
wait_http "http://127.0.0.1:$P1/metrics"
# Quoted: the lines are eval'ed, and a checkout's path may hold spaces.
SUBST="s|/usr/bin/fabricscope|'$FABRICSCOPE'|g; s|/etc/fabricscope/fabricscope.yaml|'$CFG'|g"

printf 'listen: 127.0.0.1:%s\ntargets: []\n' "$P2" >"$CFG"
n=$(log_count 'reloaded ')
run_reload "$UNIT" "$SUBST" "$FS_PID" >"$T/reload.out" 2>&1 || fail "reload of a good file failed: $(cat "$T/reload.out")"
wait_for 20 "the good file applied" _log_count_above 'reloaded ' "$n"
wait_http "http://127.0.0.1:$P2/metrics"
ok "fabricscope.service: reload of a good file exits 0 and the daemon applies it"

printf 'listen: 127.0.0.1:%s\ntargets: 5\n' "$P1" >"$CFG"
hups=$(log_count 'SIGHUP')
if run_reload "$UNIT" "$SUBST" "$FS_PID" >"$T/reload.out" 2>&1; then
  fail "reload of a bad file exited 0: $(cat "$T/reload.out")"
fi
grep -q "$CFG:2:" "$T/reload.out" || fail "the refused reload does not say why: $(cat "$T/reload.out")"
[ "$(log_count 'SIGHUP')" = "$hups" ] || fail "the daemon was sent a file --check-config refused"
curl -fsS -o /dev/null "http://127.0.0.1:$P2/metrics" || fail "the daemon no longer serves its configuration"
ok "fabricscope.service: reload of a bad file fails ($(head -1 "$T/reload.out")), the daemon keeps running"

# The daemon's own verdict: a bad file it is asked to read (--reload alone, as when the
# file changes between the two ExecReload lines) fails the request, and its log gives the
# problem on one line.
set +e
"$FABRICSCOPE" --reload "$FS_PID" >"$T/reload2.out" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "--reload of a file the daemon refuses exits $rc, want 1: $(cat "$T/reload2.out")"
grep -q 'refused the reload' "$T/reload2.out" || fail "--reload does not say it was refused: $(cat "$T/reload2.out")"
wait_for 20 "the refusal logged" grep -q 'reload refused' "$T/fabricscope.log"
refusal=$(grep -F 'refused (' "$T/fabricscope.log" | tail -1)
[ -n "$refusal" ] || fail "the refusal does not give the problem: $(tail -5 "$T/fabricscope.log")"
case $refusal in *'\x0a'*) fail "the refusal prints an escaped newline: $refusal";; esac
curl -fsS -o /dev/null "http://127.0.0.1:$P2/metrics" || fail "the daemon no longer serves its configuration"
ok "--reload of a file the daemon refuses exits 1; its log: $refusal"
# ---- the host agent ----
AUNIT=$FS_SOURCE_DIR/docker/fabricscope-host-agent.service
ACFG=$T/host-agent.yaml
AP=$(free_tcp_port)
mkdir -p "$T/state"
printf 'collector:\n  url: http://127.0.0.1:%s\nstate_dir: %s\n' "$AP" "$T/state" >"$ACFG"
"$AGENT" -c "$ACFG" >"$T/agent.log" 2>&1 &
APID=$!
track "$APID"
wait_for 20 "the agent runs" grep -q 'host-agent for' "$T/agent.log"
ASUBST="s|/usr/bin/fabricscope-host-agent|'$AGENT'|g; s|/etc/fabricscope/host-agent.yaml|'$ACFG'|g"
run_reload "$AUNIT" "$ASUBST" "$APID" >"$T/areload.out" 2>&1 || fail "agent reload of a good file failed: $(cat "$T/areload.out")"
wait_for 20 "the agent reloaded" grep -q 'configuration reloaded' "$T/agent.log"
ok "fabricscope-host-agent.service: reload of a good file exits 0 and the agent applies it"
printf 'collector:\n  url: 5\n' >"$ACFG"
if run_reload "$AUNIT" "$ASUBST" "$APID" >"$T/areload.out" 2>&1; then
  fail "agent reload of a bad file exited 0: $(cat "$T/areload.out")"
fi
kill -0 "$APID" || fail "the agent died"
ok "fabricscope-host-agent.service: reload of a bad file fails ($(head -1 "$T/areload.out"))"

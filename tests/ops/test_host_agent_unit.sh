#!/usr/bin/env bash
# The host agent's service files, checked offline (no systemd as PID 1 here):
# - docker/fabricscope-host-agent.service: systemd-analyze verify says nothing, the
#   hardening asked for is there (CAP_PERFMON the only capability, perf_event_open the
#   one syscall added to @system-service), and systemd-analyze security rates its
#   exposure at most 3.0 of 10 (it runs as root for tracefs, hence above the collector's);
# - docker/fabricscope-host-agent.yaml, the example it names, is a valid agent file once
#   its token is installed (here: its token_file pointed at a scratch token), and without
#   it --check-config (the unit's ExecStartPre) fails with exit 2 naming
#   collector.token_file, as start-up would.
source "$(dirname "$0")/../integration/lib.sh"
FS_SOURCE_DIR=$(readlink -f "$FS_SOURCE_DIR")
D=$FS_SOURCE_DIR/docker
AGENT=$FS_BUILD_DIR/fabricscope-host-agent
[ -x "$AGENT" ] || fail "build fabricscope-host-agent first"
AGENT=$(readlink -f "$AGENT") # systemd wants an absolute path
UNIT=$D/fabricscope-host-agent.service
for want in '^CapabilityBoundingSet=CAP_PERFMON$' '^AmbientCapabilities=$' '^NoNewPrivileges=yes$' \
  '^ExecReload=/bin/sh -c '\''kill -HUP "\$MAINPID"'\''$' '^ProtectSystem=strict$' '^StateDirectory=fabricscope-host-agent$' \
  '^SystemCallFilter=@system-service perf_event_open$' \
  '^ExecStartPre=/usr/bin/fabricscope-host-agent -c /etc/fabricscope/host-agent.yaml --check-config$'; do
  grep -qE "$want" "$UNIT" || fail "fabricscope-host-agent.service lacks $want"
done
mkdir -p "$T/unit"
ln -s "$AGENT" "$T/unit/fabricscope-host-agent"
sed "s|/usr/bin/fabricscope-host-agent|$T/unit/fabricscope-host-agent|g" "$UNIT" >"$T/unit/fabricscope-host-agent.service"
out=$(cd "$T/unit" && systemd-analyze verify fabricscope-host-agent.service 2>&1) ||
  fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify complained: $out"
sec=$(cd "$T/unit" && systemd-analyze security --offline=true fabricscope-host-agent.service 2>&1) ||
  fail "systemd-analyze security: $sec"
score=$(sed -n 's/.*Overall exposure level for fabricscope-host-agent.service: \([0-9.]*\).*/\1/p' <<<"$sec")
[ -n "$score" ] || fail "no exposure score: $sec"
awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "exposure $score > 3.0"
ok "fabricscope-host-agent.service: verify clean, hardening present, exposure $score"
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/host-events.token"
sed "s|/etc/fabricscope/host-events.token|$T/host-events.token|; s|^state_dir: .*|state_dir: $T/state|" "$D/fabricscope-host-agent.yaml" \
  >"$T/host-agent.yaml"
grep -q "token_file: $T/host-events.token" "$T/host-agent.yaml" ||
  fail "the example's token_file is not /etc/fabricscope/host-events.token"
"$AGENT" -c "$T/host-agent.yaml" --check-config >"$T/check.log" 2>&1 ||
  fail "docker/fabricscope-host-agent.yaml (its token installed) refused: $(cat "$T/check.log")"
ok "docker/fabricscope-host-agent.yaml is a valid agent configuration (its token installed)"
# The example as installed before its token: the token file absent (a scratch path, so
# that this host's own /etc/fabricscope plays no part).
sed "s|/etc/fabricscope/host-events.token|$T/absent.token|; s|^state_dir: .*|state_dir: $T/state|" "$D/fabricscope-host-agent.yaml" \
  >"$T/notoken.yaml"
set +e
"$AGENT" -c "$T/notoken.yaml" --check-config >"$T/notoken.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "the example without its token file: --check-config exit $rc, want 2"
grep -q "collector.token_file: token file $T/absent.token: No such file" "$T/notoken.log" ||
  fail "--check-config did not name collector.token_file: $(cat "$T/notoken.log")"
ok "the example without its token file: --check-config exits 2 ($(cat "$T/notoken.log"))"

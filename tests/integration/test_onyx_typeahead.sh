#!/usr/bin/env bash
# The ONYX CLI driver against CLIs that mishandle type-ahead (issue 18): the driver sends
# a cycle's commands together (pipelining) and splits the output at the prompts. Three
# simulated CLIs (tests/sim/onyx/onyx_sim.py, onyx_typeahead, behind a REAL OpenSSH sshd)
# break that, each polled by fabricscope next to a healthy one:
#   - interleave: the echo of the next typed-ahead command lands inside the previous
#     command's output, cutting a counter in two;
#   - drop: type-ahead past 256 bytes is lost while a command runs: later commands are
#     never answered, the shell sits at its prompt;
#   - pager: the CLI pages anyway and its pager takes a typed-ahead command as its keys.
# Each must be detected: pipelining off for that target with the reason in
# /api/v1/targets, the session kept (one login), the target up with every port counter
# exactly the scenario's; the healthy target keeps pipelining with exact counters.
# Counters stand still (frozen_at_s), so values are compared exactly.
# Then `fabricscope probe` against a far switch (100 ms a round trip): one command at a
# time, the poll cannot fit its interval and probe says so; pipelined, it fits.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
onyx_sim_prereqs

BOOT=$($PY -c 'import time; print(time.time() - 300)')
MODES="healthy interleave drop pager"
declare -A SSH_PORT PWFILE KNOWN
for m in $MODES; do
  $PY - "$T/scen-$m.json" "$BOOT" "$m" <<'EOF'
import json, sys
path, boot, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
d = {"ports": 8, "boot_epoch_s": boot, "counter_base": 2**53 + 1, "frozen_at_s": 95,
     "congestion": {"port": 7, "tc": 3, "period_s": 30, "duration_s": 2, "phase_s": 10}}
if mode != "healthy":
    d["onyx_typeahead"] = mode
json.dump(d, open(path, "w"))
EOF
  start_onyx_sim "sim-$m" --scenario "$T/scen-$m.json"
  SSH_PORT[$m]=$ONYX_SSH_PORT PWFILE[$m]=$ONYX_PASSWORD_FILE KNOWN[$m]=$ONYX_KNOWN_HOSTS
done

# The scenario's values (frozen; the same for every simulator): metric line -> value.
$PY - "$T/scen-healthy.json" "$FS_SOURCE_DIR" >"$T/want.txt" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2] + "/tests/sim")
from scenario import Scenario
sc = Scenario(sys.argv[1])
t = sc.since_boot()
for p in range(1, sc.ports + 1):
    e = "Eth1/%d" % p
    print('fabric_port_bytes_total{target="%%s",interface="%s",direction="rx",source="cli"} %d' % (e, sc.port_octets(p, t)))
    print('fabric_port_ecn_marked_packets_total{target="%%s",interface="%s",source="cli"} %d' % (e, sc.port_ecn_marked(p, t)))
    print('fabric_queue_tx_packets_total{target="%%s",interface="%s",tc="3",source="cli"} %d' % (e, sc.tc_tx_pkts(p, 3, t)))
    print('fabric_pfc_pause_frames_total{target="%%s",interface="%s",direction="rx",priority="3",source="cli"} %d' % (e, sc.pfc_rx_pause_frames(p, 3, t)))
EOF
[ "$(wc -l <"$T/want.txt")" = 32 ] || fail "scenario values: $(cat "$T/want.txt")"

# shellcheck disable=SC2086
cli_targets_up $MODES

# Every target up with every port counter exact (each of the 32 series present, none
# garbled) in the same scrape.
all_exact() {
  curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" || return 1
  local m line
  for m in $MODES; do
    grep -q "^fabricscope_target_up{target=\"$m\",source=\"cli\"} 1\$" "$T/m.txt" || return 1
    while read -r line; do
      # shellcheck disable=SC2059
      grep -qxF "$(printf "$line" "$m")" "$T/m.txt" || return 1
    done <"$T/want.txt"
  done
}
wait_for 60 "every target up with exact port counters" all_exact
# Then three more cycles of each target: still exact, nothing garbled later either.
polls() { awk -v t="$1" 'index($0, "fabricscope_poll_duration_seconds_count{target=\"" t "\"") == 1 {print $2}' "$T/m.txt"; }
declare -A P0
for m in $MODES; do P0[$m]=$(polls "$m"); done
three_more() {
  curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" || return 1
  local m
  for m in $MODES; do [ "$(polls "$m")" -ge $((P0[$m] + 3)) ] || return 1; done
}
wait_for 30 "three more cycles of each target" three_more
all_exact || fail "counters not exact after further cycles: $(grep -E 'target_up|Eth1/1"' "$T/m.txt")"
ok "every target up; all 32 port counter series exact on each (interleave, drop, pager, healthy)"

curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" >"$T/targets.json" || fail "/api/v1/targets"
$PY - "$T/targets.json" <<'EOF' || fail "/api/v1/targets: $(cat "$T/targets.json")"
import json, sys
names = {o["target"]: o for o in json.load(open(sys.argv[1]))["data"]}
assert set(names) == {"healthy", "interleave", "drop", "pager"}, names.keys()
want = {"interleave": "type-ahead echoed inside an output: `show ",
        "drop": "type-ahead dropped: `show ",
        "pager": "pager: the CLI pages despite `no cli session paging enable`"}
for n, d in names.items():
    assert d["cli_session"] == "up", (n, d)
    assert d["state"] == "up", (n, d)
    assert d["cli_sessions_opened"] == 1, (n, d["cli_sessions_opened"])
    assert d["poll_errors"]["protocol"] == 0, (n, d["poll_errors"])
    if n == "healthy":
        assert d["cli_pipelining"] is True and d["cli_pipelining_off"] == "", d
        continue
    assert d["cli_pipelining"] is False, (n, d)
    assert d["cli_pipelining_off"].startswith(want[n]), (n, d["cli_pipelining_off"])
    assert d["cli_text_fallbacks"] == [] and d["cli_layout_mismatches"] == [], (n, d)
    assert d["cli_dropped_commands"] == [], (n, d)
EOF
for m in interleave drop pager; do
  [ "$(grep -c "target $m: the CLI mishandles type-ahead" "$T/fabricscope.log")" = 1 ] ||
    fail "$m: the fallback was not logged exactly once"
done
grep -q "target healthy: the CLI mishandles" "$T/fabricscope.log" && fail "the healthy target fell back"
grep -Eq "target (interleave|drop|pager): .*(closed|reconnect)" "$T/fabricscope.log" &&
  fail "a session was dropped: $(grep -E 'closed|reconnect' "$T/fabricscope.log")"
ok "/api/v1/targets: pipelining off with the reason on each mishandling CLI, one session each; the healthy target pipelines"

# ---------------------------------------------------------------- out of time first
# A poll's budget (400 ms) runs out before the dropping CLI has sat quiet for long enough
# (0.5 s): the batch is abandoned with answers owed that will never come. The loss must
# still be found (not a shell "still answering" until the session is dropped).
"$FS_BUILD_DIR/tests/fs-onyx-poll" --port "${SSH_PORT[drop]}" --user "$ONYX_SSH_USER" \
  --password-file "${PWFILE[drop]}" --known-hosts "${KNOWN[drop]}" --interval-ms 1000 \
  --deadline-ms 400 --polls 6 --grep 'port_bytes_total.*Eth1/8",direction="rx"' \
  >"$T/budget.out" 2>"$T/budget.log" || true
grep -q '^poll 1 result=timeout' "$T/budget.out" || fail "budget: poll 1 not out of time: $(grep -m1 '^poll 1 result' "$T/budget.out")"
# (a login slower than the budget may cost a cycle or two more on a loaded machine)
grep -q '^poll 6 result=ok' "$T/budget.out" ||
  fail "budget: poll 6 $(grep '^poll 6 result' "$T/budget.out" | cut -c1-80): $(grep -v level=info "$T/budget.log")"
want8=$(sed -n 's/^fabric_port_bytes_total{target="%s",interface="Eth1\/8",direction="rx",source="cli"} //p' "$T/want.txt")
grep -q "^poll 6 fabric_port_bytes_total{.*Eth1/8\",direction=\"rx\",source=\"cli\"} $want8\$" "$T/budget.out" ||
  fail "budget: poll 6 port bytes of Eth1/8 not $want8: $(grep '^poll 6 fabric_port' "$T/budget.out")"
grep -q '"cli_pipelining":false,"cli_pipelining_off":"type-ahead dropped: `show ' "$T/budget.out" ||
  fail "budget: no fallback reported: $(grep -m1 -o '"cli_pipelining.*' "$T/budget.out" | cut -c1-200)"
grep -q '"cli_sessions_opened":2' "$T/budget.out" && fail "budget: the session was dropped"
ok "a poll out of time before the loss is seen: found in the answers still owed, the session kept, exact after"

# ---------------------------------------------------------------- polls that cannot fit
# A far switch (onyx_delay_ms: every exchange costs 100 ms): pipelined, a poll is two
# round trips and fits a 2 s interval; one command at a time (the dropping CLI), its 27
# commands need 2.7 s. `fabricscope probe` says so (log and the target's detail).
kill "$FS_PID"
wait "$FS_PID" 2>/dev/null || true
for m in healthy drop; do
  $PY - "$T/scen-$m.json" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
d["onyx_delay_ms"] = 100
json.dump(d, open(sys.argv[1] + ".tmp", "w"))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF
done
for m in healthy drop; do
  "$FABRICSCOPE" probe -c "$T/fs.yaml" "$m" >"$T/probe-$m.out" 2>"$T/probe-$m.err" || true
done
grep -q '^# drop/cli: .*"cli_pipelining":false,.*"cli_poll_too_slow":"27 commands one at a time take at least [0-9][0-9.]* s at the [0-9][0-9]* ms round trip measured, more than the interval (2\.0 s)"' "$T/probe-drop.out" ||
  fail "probe: the dropping CLI's poll not said too slow: $(grep '^# drop' "$T/probe-drop.out")"
grep -q 'target drop: its polls cannot fit their interval: 27 commands one at a time' "$T/probe-drop.err" ||
  fail "probe: no warning logged: $(cat "$T/probe-drop.err")"
grep -q '^# healthy/cli: .*"cli_pipelining":true,.*"cli_poll_too_slow":""' "$T/probe-healthy.out" ||
  fail "probe: the pipelining CLI said too slow: $(grep '^# healthy' "$T/probe-healthy.out")"
grep -q 'cannot fit' "$T/probe-healthy.err" && fail "probe: the pipelining CLI warned: $(cat "$T/probe-healthy.err")"
grep -Eq '^fabric_port_bytes_total\{target="healthy",interface="Eth1/8",direction="rx",source="cli"\} ' "$T/probe-healthy.out" ||
  fail "probe: the healthy target's poll did not complete"
ok "probe: a poll one command at a time that cannot fit its interval at the measured round trip is said so (log, detail); a pipelined one is not"

#!/usr/bin/env bash
# The ONYX CLI driver over SSH against the ONYX simulator behind a REAL OpenSSH sshd
# (tests/sim/onyx/start-onyx-sim.sh: own config, port, generated host key, test user with
# password, keyboard-interactive and a key; ForceCommand runs the simulator). Polls
# through build/tests/fs-onyx-poll (driver entry points + store + exposition, no daemon):
#   values equal the scenario's (exact past 2^53, during-congestion counters, telemetry
#   flows), password / keyboard-interactive only / publickey only logins, a wrong password
#   is an auth error with backoff (one connection for several cycles), a changed host key
#   is refused with both fingerprints logged (also under accept-new, which records a new
#   host), a hung command times out and the next cycle recovers, a connection dropped
#   mid-output loses that cycle only, a malformed JSON answer is replaced by the text
#   form in the same cycle, a reboot is a reset (counted as reboot, exposed counters stay monotonic).
source "$(dirname "$0")/lib.sh"

POLL=$FS_BUILD_DIR/tests/fs-onyx-poll
[ -x "$POLL" ] || fail "build fs-onyx-poll first"
onyx_sim_prereqs

# start_sim NAME [start-onyx-sim args...]: sim in $T/NAME; sources its env.sh.
start_sim() {
  local name=$1
  shift
  start_onyx_sim "$name" --scenario "$SCEN" "$@"
}

# A scenario whose congestion surges have run 3 times (6 s of surge) before "now" (set
# again when the simulator is up); counters start at 2^53 + 1 to catch any double.
BASE=9007199254740993
SCEN=$T/scenario.json
write_scenario() { # write_scenario BOOT_EPOCH [FAULTS_JSON [LACKS_JSON [FROZEN_AT_S]]]
  local faults=${2:-} lacks=${3:-} frozen=${4:-null}
  [ -n "$faults" ] || faults='{}'
  [ -n "$lacks" ] || lacks='[]'
  $PY - "$SCEN" "$1" "$faults" "$lacks" "$frozen" <<'EOF'
import json, sys
path, boot, faults = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
d = {"ports": 64, "boot_epoch_s": boot, "counter_base": 2**53 + 1, "clock_offset_ms": 2500,
     "congestion": {"port": 49, "tc": 3, "period_s": 30, "duration_s": 2, "phase_s": 10},
     "onyx_faults": faults, "onyx_lacks": json.loads(sys.argv[4]),
     "frozen_at_s": json.loads(sys.argv[5])}
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(d, f)
import os
os.replace(tmp, path)
EOF
}
BOOT=$($PY -c 'import time; print(time.time() - 82)')
write_scenario "$BOOT"
start_sim main
MAIN_PORT=$ONYX_SSH_PORT
MAIN_FP=$ONYX_HOSTKEY_FP
MAIN_RT=$ONYX_RUNTIME_DIR

# Poll 1 also logs in and sets up the CLI session: on a loaded machine that alone can
# outlast a poll's deadline ("no answer in time while setting up the CLI session"), so
# every run gives poll 1 a generous minute more for it (--login-ms) rather than assume a
# quick login. No case here needs poll 1 to run out of time.
LOGIN=(--login-ms 60000)
poll() { # poll OUT [args...]: runs fs-onyx-poll on the main sim with the password
  local out=$1
  shift
  "$POLL" --port "$MAIN_PORT" --user "$ONYX_SSH_USER" --known-hosts "$T/main/known_hosts" \
    --interval-ms 2000 "${LOGIN[@]}" "$@" >"$out" 2>"${out%.out}.log"
}
val() { # val FILE POLL REGEX -> value of the first matching metric line of that poll
  awk -v p="$2" -v re="$3" '$1=="poll" && $2==p && $3 ~ re {print $4; exit}' "$1"
}
result() { awk -v p="$2" '$1=="poll" && $2==p {sub("result=","",$3); print $3; exit}' "$1"; }

# ---------------------------------------------------------------- values
# The scenario's clock set again now that the simulator is up (starting it takes seconds
# on a loaded machine): 3 surges (6 s of surge) before now, the next one 25 s away, a
# margin the login and poll 1 need not beat by much.
BOOT=$($PY -c 'import time; print(time.time() - 75)')
write_scenario "$BOOT"
t_before=$($PY -c 'import time; print(time.time())')
# A 3 s interval: the first poll logs in as well, and with a 1 s one a sanitizer build on a
# loaded machine leaves commands to the next poll (the deadline guard), so poll 1 lacks them.
poll "$T/values.out" --password-file "$T/main/password" --polls 2 --interval-ms 3000 \
  --flow-rule nccl:udp:4791:3 --transcript "$T/transcript.txt" \
  --grep 'Eth1/(1|2|49)"|fabric_device|flow_rule|resets?_total|poll_errors|clock_offset' ||
  { tail -3 "$T/values.out" >&2; fail "polls of the healthy simulator failed"; }
t_after=$($PY -c 'import time; print(time.time())')
O=$T/values.out
[ "$(result "$O" 1)" = ok ] && [ "$(result "$O" 2)" = ok ] || fail "results: $(grep ^poll "$O" | grep result)"
# congestion counters: exactly 6 s of surge at the scenario's rates, on top of 2^53 + 1
exp() { $PY -c "print($BASE + $1)"; }
v=$(val "$O" 1 '^fabric_port_ecn_marked_packets_total.*Eth1/49"')
[ "$v" = "$(exp 1200000)" ] || fail "ECN marked Eth1/49: $v, want $(exp 1200000)"
v=$(val "$O" 1 '^fabric_port_ecn_marked_packets_total.*Eth1/1"')
[ "$v" = "$BASE" ] || fail "ECN marked Eth1/1: $v, want $BASE"
v=$(val "$O" 1 '^fabric_queue_wred_dropped_packets_total.*Eth1/49",tc="3"')
[ "$v" = "$(exp 6000)" ] || fail "WRED Eth1/49 tc 3: $v"
v=$(val "$O" 1 '^fabric_pfc_pause_frames_total.*Eth1/49",direction="rx",priority="3"')
[ "$v" = "$(exp 3000)" ] || fail "PFC rx frames prio 3: $v"
v=$(val "$O" 1 '^fabric_flow_rule_ecn_marked_packets_total.*rule="nccl"')
[ "$v" = "$(exp 1200000)" ] || fail "flow rule ECN: $v"
v=$(val "$O" 1 '^fabric_queue_depth_bytes.*Eth1/49",tc="3"')
[ "$v" = 0 ] || fail "queue depth outside the surge: $v"
ok "congestion counters (ECN per port, WRED, PFC, flow rule) exact past 2^53"
# rate counters: between the scenario's value at the start and at the end of the run
for p in 1 2 49; do
  v=$(val "$O" 1 "^fabric_port_bytes_total.*Eth1/$p\",direction=\"rx\"")
  $PY - "$SCEN" "$p" "$v" "$t_before" "$t_after" "$FS_SOURCE_DIR" <<'EOF' || fail "Eth1/$p rx bytes $v outside the scenario's range"
import sys
sys.path.insert(0, sys.argv[6] + "/tests/sim")
from scenario import Scenario
sc = Scenario(sys.argv[1])
p, v, t0, t1 = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
lo, hi = sc.port_octets(p, sc.since_boot(t0)), sc.port_octets(p, sc.since_boot(t1))
sys.exit(0 if lo <= v <= hi else 1)
EOF
done
grep -q 'fabric_device_info{target="onyx0",model="x86onie",os="Onyx",version="3.8.2306",source="cli"} 1' "$O" ||
  fail "device info"
grep -q '"cli_ecn_profile":"tc 3 ECN absolute min 500 KB max 1550 KB"' "$O" || fail "ECN profile detail"
grep -q '"cli_sessions_opened":1' "$O" || fail "the shell was not reused across polls"
grep -q '<<< no cli session paging enable' "$T/transcript.txt" || fail "paging not disabled"
ok "port counters within the scenario's bounds, device info, one persistent shell, transcript"
# `show clock` prints whole seconds: the offset is known to within its second (or better)
v=$(val "$O" 2 '^fabricscope_target_clock_offset_seconds')
$PY -c "import sys; sys.exit(0 if abs(float('$v') - 2.5) <= 1.0 else 1)" ||
  fail "clock offset $v, scenario 2.5 s"
ok "clock offset from show clock ($v s, scenario 2.5 s)"

# ---------------------------------------------------------------- auth methods
start_sim kbd --auth-methods keyboard-interactive
"$POLL" "${LOGIN[@]}" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --password-file "$T/kbd/password" \
  --known-hosts "$T/kbd/known_hosts" --polls 1 >"$T/kbd.out" 2>"$T/kbd.log" ||
  fail "keyboard-interactive-only login failed: $(tail -2 "$T/kbd.log")"
grep -q "Accepted keyboard-interactive/pam for $ONYX_SSH_USER" "$T/kbd/sshd.log" || fail "not kbd-int"
ok "keyboard-interactive only"
start_sim pk --auth-methods publickey
"$POLL" "${LOGIN[@]}" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --key-file "$T/pk/client_key" \
  --known-hosts "$T/pk/known_hosts" --polls 1 >"$T/pk.out" 2>"$T/pk.log" ||
  fail "publickey-only login failed: $(tail -2 "$T/pk.log")"
grep -q "Accepted publickey for $ONYX_SSH_USER" "$T/pk/sshd.log" || fail "not publickey"
ok "publickey only"
# The key files are read on a worker through the core's reader: a key without its ".pub"
# beside it still logs in (libssh2 derives the public half); a FIFO is refused at once,
# naming the key, where libssh2's own fopen would have waited on it forever.
install -m 0600 "$T/pk/client_key" "$T/lonely_key"
"$POLL" "${LOGIN[@]}" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --key-file "$T/lonely_key" \
  --known-hosts "$T/pk/known_hosts" --polls 1 >"$T/pk2.out" 2>"$T/pk2.log" ||
  fail "publickey without a .pub file: $(tail -2 "$T/pk2.log")"
mkfifo "$T/fifo_key"
t0=$(date +%s%N)
"$POLL" "${LOGIN[@]}" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --key-file "$T/fifo_key" \
  --known-hosts "$T/pk/known_hosts" --polls 1 --deadline-ms 20000 --timeout-ms 20000 \
  >"$T/pk3.out" 2>"$T/pk3.log" && fail "a FIFO as the key file logged in"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$(result "$T/pk3.out" 1)" = auth ] || fail "FIFO key: poll 1 $(result "$T/pk3.out" 1)"
grep -q 'cli.key_file: .*fifo_key is not a regular file' "$T/pk3.log" ||
  fail "FIFO key: the refusal does not name the key and file: $(grep -i key "$T/pk3.log" | head -2)"
[ "$ms" -lt 10000 ] || fail "FIFO key: refused after $ms ms"
ok "publickey from memory: no .pub needed; a FIFO key file refused in $ms ms, naming the key"

# ---------------------------------------------------------------- wrong password
printf 'not-the-password\n' >"$T/wrong.pw"
conns0=$(grep -c "Connection from 127.0.0.1" "$T/main/sshd.log" || true)
# sshd/PAM delay each failed attempt by seconds: one deadline covers the first cycle, the
# next three run back to back inside the 1 s backoff.
poll "$T/wrong.out" --password-file "$T/wrong.pw" --polls 4 --deadline-ms 15000 --timeout-ms 15000 \
  --back-to-back || true
for k in 1 2 3 4; do [ "$(result "$T/wrong.out" $k)" = auth ] || fail "wrong password poll $k: $(result "$T/wrong.out" $k)"; done
conns=$(( $(grep -c "Connection from 127.0.0.1" "$T/main/sshd.log") - conns0 ))
[ "$conns" = 1 ] || fail "wrong password: $conns connections in 4 cycles (want 1: backoff)"
grep -q "backoff" "$T/wrong.log" || grep -q "next connect in" "$T/wrong.log" || fail "no backoff logged"
ok "wrong password: auth error, one connection for 4 cycles (backoff)"

# ---------------------------------------------------------------- a forced command that fails
# The account logs in, but its forced command cannot start (its program unreadable by the
# account, as when it points into a private directory): the error names the missing
# prompt and shows what the command printed, then the next cycle after the fix works.
SIMPY=$MAIN_RT/sim/onyx/onyx_sim.py
chmod 0600 "$SIMPY"
poll "$T/noshell.out" --password-file "$T/main/password" --polls 1 || true
chmod 0644 "$SIMPY"
[ "$(result "$T/noshell.out" 1)" = protocol ] || fail "broken forced command: poll 1 $(result "$T/noshell.out" 1)"
grep -q "closed the session before showing a prompt: check that the account's shell or forced command works (it printed: .*Permission denied" \
  "$T/noshell.log" || fail "the broken forced command was not named: $(grep -i session "$T/noshell.log" | head -3)"
poll "$T/fixed.out" --password-file "$T/main/password" --polls 1 || fail "after the forced command was fixed: $(result "$T/fixed.out" 1)"
ok "a forced command that cannot start: named with what it printed; works once fixed"

# ---------------------------------------------------------------- hung command, recovery
sync_poll() { # sync_poll NAME FAULTS_JSON [args]: poll 1 with the fault, poll 2 without
  local name=$1 faults=$2
  shift 2
  write_scenario "$BOOT" "$faults"
  rm -f "$T/$name.go"
  poll "$T/$name.out" --password-file "$T/main/password" --polls 2 --wait-file "$T/$name.go" "$@" &
  local pid=$!
  track "$pid"
  wait_for 120 "$name: poll 1 ends" grep -q '^poll 1 ' "$T/$name.out"
  write_scenario "$BOOT"
  touch "$T/$name.go"
  wait "$pid" || true
}
sync_poll hang '{"hang": "show interfaces ethernet counters pfc prio 3"}' --timeout-ms 1500 --deadline-ms 3000
[ "$(result "$T/hang.out" 1)" = timeout ] || fail "hung command: poll 1 $(result "$T/hang.out" 1)"
[ "$(result "$T/hang.out" 2)" = ok ] || fail "after the hang: poll 2 $(result "$T/hang.out" 2)"
grep -q 'no answer to `show interfaces ethernet counters pfc prio 3`' "$T/hang.log" || fail "timeout reason"
ok "hung command times out; the next cycle recovers"

# A slow but healthy CLI: one command answers after 4 s, past the cycle's 3 s budget but
# well within the 10 s timeout. The cycle ends as a timeout, the session is kept (its late
# answers drained), and a later cycle on the same session is good: one login in all.
# Poll 1 (healthy) logs in with all the time it needs; the CLI is slow for poll 2 only, so
# the budget that runs out is a cycle's on a ready session, never the login's.
accepted0=$(grep -c "Accepted " "$T/main/sshd.log" || true)
rm -f "$T/slow.go"
poll "$T/slow.out" --password-file "$T/main/password" --polls 4 --wait-file "$T/slow.go" \
  --deadline-ms 3000 --timeout-ms 10000 &
SP=$!
track "$SP"
wait_for 120 "slow: poll 1 ends" grep -q '^poll 1 ' "$T/slow.out"
write_scenario "$BOOT" '{"slow": "show interfaces ethernet counters tc 4"}'
$PY - "$SCEN" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
d["onyx_slow_s"] = 4
open(sys.argv[1] + ".tmp", "w").write(json.dumps(d))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF
touch "$T/slow.go"
wait_for 60 "slow: poll 2 ends" grep -q '^poll 2 ' "$T/slow.out"
write_scenario "$BOOT"
touch "$T/slow.go"
wait_for 60 "slow: poll 3 ends" grep -q '^poll 3 ' "$T/slow.out"
touch "$T/slow.go"
wait "$SP" || true
[ "$(result "$T/slow.out" 1)" = ok ] || fail "slow CLI: poll 1 (healthy) $(result "$T/slow.out" 1)"
[ "$(result "$T/slow.out" 2)" = timeout ] || fail "slow CLI: poll 2 $(result "$T/slow.out" 2)"
[ "$(result "$T/slow.out" 4)" = ok ] ||
  fail "slow CLI: poll 4 $(result "$T/slow.out" 4) (poll 3 $(result "$T/slow.out" 3))"
logins=$(($(grep -c "Accepted " "$T/main/sshd.log") - accepted0))
[ "$logins" = 1 ] || fail "slow CLI: $logins logins for 4 polls (want 1: the session is kept)"
grep -q 'no answer to `show interfaces ethernet counters tc 4` in time (the session is kept)' \
  "$T/slow.log" || fail "slow CLI: the timeout does not say the session is kept"
ok "a slow CLI: the late poll is a timeout, the session is kept (1 login for 4 polls)"

sync_poll drop '{"drop": "show interfaces ethernet counters tc 5"}'
[ "$(result "$T/drop.out" 1)" = protocol ] || fail "dropped connection: poll 1 $(result "$T/drop.out" 1)"
[ "$(result "$T/drop.out" 2)" = ok ] || fail "after the drop: poll 2 $(result "$T/drop.out" 2)"
ok "connection dropped mid-output loses that cycle only"

# A garbled line breaks port 7's congestion-control JSON: that command's text form is read
# in the same cycle instead (and from then on, reported), so no port's ECN count is lost.
sync_poll malformed '{"malformed": "show interfaces ethernet 1/7"}' --grep 'ecn_marked_packets_total.*Eth1/(7|8)"'
[ "$(result "$T/malformed.out" 1)" = ok ] || fail "malformed: poll 1 $(result "$T/malformed.out" 1)"
[ -n "$(val "$T/malformed.out" 1 'Eth1/7"')" ] && [ -n "$(val "$T/malformed.out" 1 'Eth1/8"')" ] ||
  fail "malformed: ECN samples lost: $(grep '^poll 1 ' "$T/malformed.out")"
grep -q '"cli_text_fallbacks":\[{"command":"show interfaces ethernet <port> congestion-control","reason":"invalid JSON' \
  "$T/malformed.out" || fail "malformed: the fallback was not reported"
[ "$(result "$T/malformed.out" 2)" = ok ] || fail "after malformed: poll 2 $(result "$T/malformed.out" 2)"
ok "a malformed JSON answer: its text form is read in the same cycle, the fallback reported"

sync_poll flood '{"flood": "show interfaces ethernet counters tc 2"}' --max-output-bytes 2000000
[ "$(result "$T/flood.out" 1)" = protocol ] || fail "runaway output: poll 1 $(result "$T/flood.out" 1)"
grep -q 'runaway output' "$T/flood.log" || fail "runaway output not named"
[ "$(result "$T/flood.out" 2)" = ok ] || fail "after the runaway output: poll 2 $(result "$T/flood.out" 2)"
ok "a runaway output is bounded (protocol error), the next cycle recovers"

# One large but finite answer (10 MB of blank lines after `show clock`, within max_output)
# is read, and the session's receive buffer shrinks back after it: the poll tool's
# resident memory after the next poll is within 6 MiB of before (without the shrink it
# keeps the 16 MiB buffer: +15 MB measured). ASan's quarantine would keep freed memory
# resident: off here.
rm -f "$T/bloat.go"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0" \
  poll "$T/bloat.out" --password-file "$T/main/password" --polls 3 --wait-file "$T/bloat.go" \
  --interval-ms 8000 &
BP=$!
track "$BP"
for k in 1 2; do
  wait_for 120 "bloat: poll $k ends" grep -q "^poll $k " "$T/bloat.out"
  if [ "$k" = 1 ]; then write_scenario "$BOOT" '{"bloat": "show clock"}'; else write_scenario "$BOOT"; fi
  touch "$T/bloat.go"
done
wait "$BP" || fail "bloat polls failed: $(grep result "$T/bloat.out")"
rss() { awk -v p="$1" '$1=="poll" && $2==p {for (i = 3; i <= NF; i++) if ($i ~ /^rss_kib=/) {sub("rss_kib=", "", $i); print $i}}' "$T/bloat.out"; }
[ "$(result "$T/bloat.out" 2)" = ok ] || fail "the large answer: poll 2 $(result "$T/bloat.out" 2)"
r1=$(rss 1) r2=$(rss 2) r3=$(rss 3)
echo "fs-onyx-poll VmRSS: $r1 KiB, $r2 KiB after the 10 MB answer, $r3 KiB after the next poll"
[ $((r3 - r1)) -lt 6144 ] || fail "the receive buffer kept the large answer: +$((r3 - r1)) KiB"
ok "a 10 MB answer is read and its buffer given back (+$((r3 - r1)) KiB after it)"

# ---------------------------------------------------------------- pager
# A CLI that keeps paging after `no cli session paging enable`: the driver pages through.
$PY -c '
import json, os, sys
d = json.load(open(sys.argv[1])); d["onyx_paging_sticky"] = True
json.dump(d, open(sys.argv[1] + ".tmp", "w")); os.replace(sys.argv[1] + ".tmp", sys.argv[1])
' "$SCEN"
# The first cycle finds out (the pager takes a pipelined command as its key): the session
# and the cycle are kept, the batch goes on one command at a time, and so from then on,
# the pager answered.
tp0=$($PY -c 'import time; print(time.time())')
poll "$T/pager.out" --password-file "$T/main/password" --polls 3 --back-to-back \
  --transcript "$T/pager.transcript" --grep 'ecn_marked_packets_total.*Eth1/49"' || true
grep -q 'lines 1-24 ' "$T/pager.transcript" || fail "the simulator did not page"
for k in 1 2 3; do
  [ "$(result "$T/pager.out" $k)" = ok ] || fail "pager: poll $k $(result "$T/pager.out" $k)"
done
tp1=$($PY -c 'import time; print(time.time())')
v=$(val "$T/pager.out" 3 'Eth1/49"')
$PY - "$SCEN" "$v" "$tp0" "$tp1" "$FS_SOURCE_DIR" <<'EOF' || fail "ECN through the pager: $v"
import sys
sys.path.insert(0, sys.argv[5] + "/tests/sim")
from scenario import Scenario
sc = Scenario(sys.argv[1])
v, t0, t1 = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
sys.exit(0 if sc.port_ecn_marked(49, sc.since_boot(t0)) <= v <= sc.port_ecn_marked(49, sc.since_boot(t1)) else 1)
EOF
grep -q '"cli_pipelining":false,"cli_pipelining_off":"pager: the CLI pages despite' "$T/pager.out" ||
  fail "pipelining not reported off with the reason: $(grep -m1 DETAIL "$T/pager.out")"
grep -q '"cli_sessions_opened":1,' "$T/pager.out" && ! grep -q '"cli_sessions_opened":2,' "$T/pager.out" ||
  fail "pager: the session was not kept"
write_scenario "$BOOT"
ok "a CLI that keeps paging: the session and the cycle kept, one command at a time through the pager"

# ---------------------------------------------------------------- reboot
rm -f "$T/reboot.go"
poll "$T/reboot.out" --password-file "$T/main/password" --polls 2 --wait-file "$T/reboot.go" \
  --grep 'resets?_total|port_bytes_total.*Eth1/2",direction="rx"' &
RP=$!
track "$RP"
wait_for 120 "reboot: poll 1 ends" grep -q '^poll 1 ' "$T/reboot.out"
write_scenario "$($PY -c 'import time; print(time.time() - 1)')"
touch "$T/reboot.go"
wait "$RP" || fail "reboot polls failed: $(grep ^poll "$T/reboot.out" | grep result)"
grep -Eq '^poll 2 fabricscope_counters_reset_total\{.*kind="reboot".*\} [1-9]' "$T/reboot.out" ||
  fail "reboot not counted: $(grep resets "$T/reboot.out")"
b1=$(val "$T/reboot.out" 1 'port_bytes_total.*Eth1/2"')
b2=$(val "$T/reboot.out" 2 'port_bytes_total.*Eth1/2"')
$PY -c "import sys; sys.exit(0 if int('$b2') >= int('$b1') else 1)" || fail "exposed counter went down: $b1 -> $b2"
ok "reboot is a reset (kind=reboot), exposed counters stay monotonic"

# ---------------------------------------------------------------- capabilities
# A model without `show telemetry flows`: dropped once (detail, one log line), and the
# per-rule drops come from What-Just-Happened records matched against the rule. The
# switch's counters stand still (frozen_at_s, after 3 surges) so that the WRED counter and
# the WJH records of one poll describe one instant, however far apart the two commands
# are answered on a slow machine.
write_scenario "$BOOT" '{}' '["show telemetry flows"]' 95
poll "$T/lacks.out" --password-file "$T/main/password" --polls 3 --back-to-back \
  --flow-rule nccl:udp:4791:3 --grep 'flow_rule_dropped|wred_dropped.*Eth1/49",tc="3"' ||
  fail "polls of a model without telemetry flows failed: $(grep result "$T/lacks.out")"
write_scenario "$BOOT"
grep -q '"cli_dropped_commands":\["show telemetry flows"\]' "$T/lacks.out" || fail "dropped command not reported"
[ "$(grep -c 'not supported' "$T/lacks.log")" = 1 ] || fail "the missing command was not reported exactly once"
w=$(val "$T/lacks.out" 3 'wred_dropped.*Eth1/49",tc="3"')
f=$(val "$T/lacks.out" 3 'flow_rule_dropped_packets_total.*rule="nccl",reason="WRED"')
[ -n "$f" ] || fail "no WJH-based flow rule drops: $(grep flow_rule "$T/lacks.out")"
# 3 surges of 2 s at 1000 drops/s before t = 95 s: both say 6000
[ "$f" = 6000 ] && [ "$w" = $((BASE + 6000)) ] || fail "WJH drops $f vs WRED counter $w (both 6000 above the base)"
ok "a missing command is dropped and reported once; flow-rule drops from WJH records"

# ---------------------------------------------------------------- WJH as a window
# A WJH table that aggregates only the last 5 s: its count rises during a surge and falls
# to 0 as the drops leave the window. Each drop must be counted once: the rule's total is
# the drops between the first poll's window start and the last poll, exactly (summing the
# table as a counter counts every shrink as a clear and more than doubles it). The switch
# stands still at each step (frozen_at_s), the test moves it between polls.
wjh_at() { # wjh_at T: the scenario frozen at T s after boot, WJH window 5 s
  write_scenario "$BOOT" '{}' '["show telemetry flows"]' "$1"
  $PY - "$SCEN" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
d["onyx_wjh_window_s"] = 5
open(sys.argv[1] + ".tmp", "w").write(json.dumps(d))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF
}
STEPS=(39 40.5 41.5 42.5 44 46 48 50 69 70.5 71.5 73 75 78)
wjh_at "${STEPS[0]}"
rm -f "$T/wjh.go"
poll "$T/wjh.out" --password-file "$T/main/password" --polls 14 --wait-file "$T/wjh.go" \
  --flow-rule nccl:udp:4791:3 --grep 'flow_rule_dropped|counters_reset' &
WP=$!
track "$WP"
k=1
for s in "${STEPS[@]:1}"; do
  wait_for 120 "WJH poll $k ends" grep -q "^poll $k result" "$T/wjh.out"
  wjh_at "$s"
  touch "$T/wjh.go"
  k=$((k + 1))
done
wait "$WP" || fail "WJH window polls failed: $(grep result "$T/wjh.out")"
write_scenario "$BOOT"
f1=$(val "$T/wjh.out" 1 'flow_rule_dropped_packets_total.*rule="nccl",reason="WRED"')
f14=$(val "$T/wjh.out" 14 'flow_rule_dropped_packets_total.*rule="nccl",reason="WRED"')
f8=$(val "$T/wjh.out" 8 'flow_rule_dropped_packets_total.*rule="nccl",reason="WRED"')
# the window at 39 s holds nothing (the last surge ended at 12 s); two surges of 2 s at
# 1000 drops/s follow (40-42 s, 70-72 s); at 50 s the first one has left the window
[ "${f1:-0}" = 0 ] && [ "$f8" = 2000 ] && [ "$f14" = 4000 ] ||
  fail "WJH window drops: $f1 / $f8 / $f14 at 39 / 50 / 78 s, want 0 / 2000 / 4000"
if grep -Eq '^poll .*counters_reset_total.*kind="cleared"} [1-9]' "$T/wjh.out"; then
  fail "a shrinking WJH window was counted as a clear"
fi
ok "a rolling WJH window: each drop counted once (0 / 2000 / 4000 after 0 / 1 / 2 surges)"

# ---------------------------------------------------------------- host keys
# accept-new records an unknown host, then a changed key is refused anyway. (How
# known_hosts is parsed and written, and keys of another type: test_onyx_known_hosts.sh.)
rm -f "$T/new_known_hosts"
"$POLL" "${LOGIN[@]}" --port "$MAIN_PORT" --user "$ONYX_SSH_USER" --password-file "$T/main/password" \
  --known-hosts "$T/new_known_hosts" --accept-new --polls 1 >"$T/acceptnew.out" 2>"$T/acceptnew.log" ||
  fail "accept-new first contact failed"
grep -q "^\[127.0.0.1\]:$MAIN_PORT " "$T/new_known_hosts" || fail "accept-new did not record the key"
poll "$T/strict-unknown.out" --password-file "$T/main/password" --polls 1 --known-hosts /dev/null || true
[ "$(result "$T/strict-unknown.out" 1)" = auth ] || fail "strict policy accepted an unknown key"
old_fp=$MAIN_FP
accepted0=$(grep -c "Accepted " "$T/main/sshd.log" || true)
"$START" --rotate-hostkey "$T/main"
source "$T/main/env.sh"
track "$SSHD_PID"
[ "$old_fp" != "$ONYX_HOSTKEY_FP" ] || fail "host key did not change"
for mode in strict accept-new; do
  extra=()
  kh=$T/main/known_hosts
  if [ $mode = accept-new ]; then extra=(--accept-new); kh=$T/new_known_hosts; fi
  "$POLL" "${LOGIN[@]}" --port "$MAIN_PORT" --user "$ONYX_SSH_USER" --password-file "$T/main/password" \
    --known-hosts "$kh" "${extra[@]}" --polls 1 >"$T/changed-$mode.out" 2>"$T/changed-$mode.log" || true
  [ "$(result "$T/changed-$mode.out" 1)" = auth ] || fail "changed host key ($mode): $(result "$T/changed-$mode.out" 1)"
  grep -q "HOST KEY CHANGED.*$old_fp.*$ONYX_HOSTKEY_FP" "$T/changed-$mode.log" ||
    fail "changed host key ($mode) not logged with both fingerprints: $(cat "$T/changed-$mode.log")"
done
[ "$(grep -c "Accepted " "$T/main/sshd.log" || true)" = "$accepted0" ] ||
  fail "a login happened against the changed host key"
ok "changed host key refused (strict and accept-new), both fingerprints logged, no login"

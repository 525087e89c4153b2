#!/usr/bin/env bash
# `fabricscope host-agent` against the real collector on loopback: the agent tails an
# NCCL Inspector log directory that nccl_inspector_gen.py appends to, and
#   - records written before it starts and while it runs reach the collector, each once;
#   - restarted mid-log (while the generator writes, and while a line is half written),
#     it posts nothing twice and skips nothing: the collector holds exactly the records
#     written and counted no duplicate;
#   - with the collector stopped, it spools (its spool_events metric counts them), and
#     once the collector is back (empty: its host events live in memory) the spooled
#     records arrive, each once, and the spool is empty again;
#   - its own /metrics shows the measured clock offset;
#   - a configured command (a script printing perf script lines on this host's monotonic
#     clock, complaining on stderr and exiting 3) runs every interval: its samples reach
#     the collector, each run's once, its exit status and stderr are logged once; a
#     command that outlives command.timeout is killed and reported once; with
#     at_capture, `--once` runs it with the window in its environment and posts its
#     samples even though perf failed;
#   - SIGHUP: a bad file is refused whole, naming the key, and the agent goes on with the
#     running configuration; a good one is taken (its new /metrics address serves, the
#     old one is closed) and the log is followed on from where it was, nothing twice;
#   - the example configuration of the README's "Host agent" section is valid (its token
#     installed).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$PY" ] || fail "needs /usr/bin/python3"
GEN=("$PY" "$FS_SOURCE_DIR/tests/integration/nccl_inspector_gen.py")
HTTP=$(free_tcp_port)
AGENT_METRICS=$(free_tcp_port)
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/token"
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/token }
YML
mkdir -p "$T/nccl"
cat >"$T/agent.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token }
host: gpu-node-3
state_dir: $T/state
clock: { interval: 1s }
nccl_inspector: { dir: $T/nccl, scan_interval: 200ms }
metrics: { listen: 127.0.0.1:$AGENT_METRICS }
YML
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" --check-config >/dev/null || fail "agent config refused"
# Its token file and state_dir are a host's: moved to scratch paths, the token installed.
awk '/^## Host agent/ {f = 1} f && /^```yaml/ {g = 1; next} g && /^```$/ {exit} g {print}' \
  "$FS_SOURCE_DIR/README.md" |
  sed "s|/etc/fabricscope/host-events.token|$T/token|; s|^state_dir: [^ ]*|state_dir: $T/readme-state|" \
    >"$T/readme-agent.yaml"
[ -s "$T/readme-agent.yaml" ] || fail "no yaml block in the README's Host agent section"
"$FABRICSCOPE" host-agent -c "$T/readme-agent.yaml" --check-config >"$T/readme-check.log" 2>&1 ||
  fail "the README's example agent configuration is refused: $(cat "$T/readme-check.log")"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20

start_agent() {
  "$FABRICSCOPE" host-agent -c "$T/agent.yaml" >>"$T/agent.log" 2>&1 &
  AGENT_PID=$!
  track "$AGENT_PID"
}
stop_agent() { kill -TERM "$AGENT_PID"; wait_exit "$AGENT_PID" 20; }
metric() { # metric PORT NAME: the value of an unlabelled sample
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}
held() { metric "$HTTP" fabricscope_host_events; }
held_is() { [ "$(held)" = "$1" ]; }
held_above() { local h; h=$(held); [ -n "$h" ] && [ "$h" -gt "$1" ]; }
spooled_is() { [ "$(metric "$AGENT_METRICS" fabricscope_host_agent_spool_events)" = "$1" ]; }
no_duplicates() {
  local d; d=$(metric "$HTTP" fabricscope_host_events_duplicates_total)
  [ "$d" = 0 ] || fail "the collector dropped $d duplicates: something was posted twice"
}

# 1. Records written before the agent starts, in two files.
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid1.log" --first 0 --count 60
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid2.log" --first 0 --count 40
start_agent
wait_for 30 "the 100 records written before the start are held" held_is 100
wait_http "http://127.0.0.1:$AGENT_METRICS/metrics" 10
off=$(metric "$AGENT_METRICS" fabricscope_host_agent_clock_offset_seconds)
unc=$(metric "$AGENT_METRICS" fabricscope_host_agent_clock_uncertainty_seconds)
awk -v o="$off" -v u="$unc" 'BEGIN { exit !(o > -0.01 && o < 0.01 && u > 0 && u < 0.01) }' ||
  fail "agent's offset $off ± $unc s: want a measured offset near 0 on one host"
ok "100 records posted at start; clock offset ${off}s ± ${unc}s"

# 2. Restart while the generator writes (200 records at 100/s).
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid1.log" --first 60 --count 200 --rate 100 &
gen=$!
wait_for 30 "some live records are held" held_above 100
kill -0 "$gen" 2>/dev/null || fail "the generator ended before the restart: not mid-log"
stop_agent
start_agent
wait "$gen"
wait_for 30 "all 300 records are held" held_is 300
no_duplicates
ok "restart mid-log: 300 held, no duplicates"

# 3. Restart while a line is half written: it is read once, when whole.
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid2.log" --first 40 --count 5 --torn
wait_for 30 "the 4 whole lines are held" held_is 304
stop_agent
start_agent
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid2.log" --count 0 --complete-torn
wait_for 30 "the completed line is held" held_is 305
no_duplicates
[ "$(metric "$HTTP" fabricscope_host_events_ingested_total)" = 305 ] || fail "ingested != 305"
ok "restart with a torn line: 305 held, each once"

# 4. Collector outage: spooled, then posted once each.
kill -TERM "$FS_PID"
wait_exit "$FS_PID" 20
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid1.log" --first 260 --count 150
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid2.log" --first 45 --count 50
wait_for 30 "the agent spooled 200 records" spooled_is 200
ls "$T/state/spool/"*.json >/dev/null || fail "no spool files"
grep -q 'collector unreachable, spooling' "$T/agent.log" || fail "the outage was not logged"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
wait_for 40 "the 200 spooled records reach the restarted collector" held_is 200
wait_for 10 "the spool is empty" spooled_is 0
no_duplicates
if ls "$T/state/spool/"*.json >/dev/null 2>&1; then fail "spool files left"; fi
"${GEN[@]}" --file "$T/nccl/gpu-node-3-pid1.log" --first 410 --count 10
wait_for 30 "records after the outage are held" held_is 210
no_duplicates
[ "$(metric "$AGENT_METRICS" fabricscope_host_agent_spool_dropped_events_total)" = 0 ] ||
  fail "the agent dropped spooled events"
ok "collector outage: 200 spooled, posted once each after its return, then live again"
stop_agent
if grep -q 'Sanitizer' "$T/agent.log"; then fail "sanitizer report in the agent's log"; fi

# 5. A configured command whose output is perf script lines.
cat >"$T/perf-lines.py" <<'PYEOF'
import os, sys, time
runs = sys.argv[1]
m = time.monotonic()
for k in range(5):
    print("          nccl-proxy  4242 [003]  %.9f: tcp:tcp_retransmit_skb: family=AF_INET "
          "sport=%d dport=50123 saddr=10.0.0.3 daddr=10.0.0.7 state=TCP_ESTABLISHED"
          % (m - 0.001 * k, 41000 + k))
sys.stdout.flush()
n = int(open(runs).read()) if os.path.exists(runs) else 0
with open(runs, "w") as f:
    f.write(str(n + 1))
if "FS_WINDOW_END_NS" in os.environ:
    with open(runs + ".window", "w") as f:
        f.write("%s %s" % (os.environ["FS_WINDOW_START_NS"], os.environ["FS_WINDOW_END_NS"]))
print("warning: run %d saw an unknown path" % n, file=sys.stderr)
sys.exit(3)
PYEOF
CMD_METRICS=$(free_tcp_port)
cat >"$T/agent-cmd.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token }
host: gpu-node-4
state_dir: $T/state-cmd
clock: { interval: 1s }
command: { argv: [$PY, $T/perf-lines.py, $T/runs], interval: 300ms, timeout: 5s }
metrics: { listen: 127.0.0.1:$CMD_METRICS }
YML
"$FABRICSCOPE" host-agent -c "$T/agent-cmd.yaml" >"$T/agent-cmd.log" 2>&1 &
CMD_PID=$!
track "$CMD_PID"
wait_http "http://127.0.0.1:$CMD_METRICS/metrics" 10
cmd_events_above() { local v; v=$(metric "$CMD_METRICS" fabricscope_host_agent_command_events_total); [ -n "$v" ] && [ "$v" -ge "$1" ]; }
wait_for 30 "4 runs of the command placed their events" cmd_events_above 20
kill -TERM "$CMD_PID"
wait_exit "$CMD_PID" 20
runs=$(cat "$T/runs")
got=$(( $(held) - 210 ))
# A run stopped with the agent between its printing and its count is imported too.
[ $((got % 5)) = 0 ] && [ $((got / 5)) -ge "$runs" ] && [ $((got / 5)) -le $((runs + 1)) ] ||
  fail "the collector holds $got events of the command for $runs runs of 5"
no_duplicates
n=$(grep -c 'exited with status 3' "$T/agent-cmd.log" || true)
[ "$n" = 1 ] || fail "exit status 3 logged $n times, not once: $(cat "$T/agent-cmd.log")"
grep -q 'exited with status 3: stderr: warning: run 0 saw an unknown path' "$T/agent-cmd.log" ||
  fail "the first run's stderr is not in the report: $(cat "$T/agent-cmd.log")"
ok "command every 300ms: $runs runs, $got events held, each once; exit 3 and its stderr logged once"

# 6. A command that outlives its timeout: killed, reported once, the agent goes on.
cat >"$T/agent-slow.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token }
host: gpu-node-5
state_dir: $T/state-slow
command: { argv: [sleep, "30"], interval: 200ms, timeout: 300ms }
metrics: { listen: 127.0.0.1:$CMD_METRICS }
YML
"$FABRICSCOPE" host-agent -c "$T/agent-slow.yaml" >"$T/agent-slow.log" 2>&1 &
SLOW_PID=$!
track "$SLOW_PID"
wait_http "http://127.0.0.1:$CMD_METRICS/metrics" 10
failures_above() { local v; v=$(metric "$CMD_METRICS" fabricscope_host_agent_command_failures_total); [ -n "$v" ] && [ "$v" -ge "$1" ]; }
wait_for 20 "3 runs killed for the timeout" failures_above 3
kill -TERM "$SLOW_PID"
wait_exit "$SLOW_PID" 20
n=$(grep -c 'killed after command.timeout' "$T/agent-slow.log" || true)
[ "$n" = 1 ] || fail "the timeout logged $n times, not once: $(cat "$T/agent-slow.log")"
ok "a command beyond command.timeout is killed each run and reported once"
if grep -q 'Sanitizer' "$T/agent-cmd.log" "$T/agent-slow.log"; then fail "sanitizer report in an agent's log"; fi

# 7. command.at_capture with --once: perf fails (a stand-in that exits 1), the command
# still runs with the window in its environment and its samples are posted.
cat >"$T/agent-once.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token }
host: gpu-node-6
state_dir: $T/state-once
capture: { length: 1s, perf: /bin/false }
command: { argv: [$PY, $T/perf-lines.py, $T/once-runs], at_capture: true }
YML
before=$(held)
rc=0
"$FABRICSCOPE" host-agent -c "$T/agent-once.yaml" --once >"$T/once.out" 2>"$T/once.log" || rc=$?
[ "$rc" = 1 ] || fail "--once with a failing perf exited $rc, not 1: $(cat "$T/once.out" "$T/once.log")"
grep -q 'perf record into .* failed' "$T/once.log" || fail "perf's failure not reported: $(cat "$T/once.log")"
[ "$(cat "$T/once-runs")" = 1 ] || fail "the command did not run once at the capture"
read -r ws we <"$T/once-runs.window" || true  # no newline at its end
[ $((we - ws)) = 1000000000 ] || fail "the command's window is $ws..$we, not capture.length"
[ "$(held)" = $((before + 5)) ] || fail "held $(held), want $((before + 5)): the command's samples"
ok "--once with at_capture: perf's failure reported, the command ran in the 1 s window, 5 samples posted"
if grep -q 'Sanitizer' "$T/once.log"; then fail "sanitizer report in --once's log"; fi

# 8. SIGHUP reloads the file.
mkdir -p "$T/nccl-hup"
P1=$(free_tcp_port)
write_hup() { # write_hup METRICS_PORT [EXTRA LINE]
  cat >"$T/agent-hup.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token }
host: gpu-node-7
state_dir: $T/state-hup
nccl_inspector: { dir: $T/nccl-hup, scan_interval: 200ms }
metrics: { listen: 127.0.0.1:$1 }
${2:-}
YML
}
write_hup "$P1" "clock: { interval: 1s }"
"${GEN[@]}" --file "$T/nccl-hup/gpu-node-7-pid1.log" --first 0 --count 10
"$FABRICSCOPE" host-agent -c "$T/agent-hup.yaml" >"$T/agent-hup.log" 2>&1 &
HUP_PID=$!
track "$HUP_PID"
wait_http "http://127.0.0.1:$P1/metrics" 10
held_delta_is() { [ "$(( $(held) - base ))" = "$1" ]; }
# The 10 records may still be on their way: wait for the log to be read up to its end.
agent_posted() { [ "$(metric "$P1" fabricscope_host_agent_events_posted_total)" = "$1" ]; }
wait_for 20 "the 10 records written before the start are posted" agent_posted 10
base=$(held)
write_hup "$P1" "clock: { rounds: 0 }"
kill -HUP "$HUP_PID"
refused() { grep -q 'clock.rounds' "$T/agent-hup.log"; }
wait_for 10 "the bad file is refused, naming clock.rounds" refused
grep -q "reload of $T/agent-hup.yaml refused; the running configuration stays" "$T/agent-hup.log" ||
  fail "no refusal line: $(cat "$T/agent-hup.log")"
kill -0 "$HUP_PID" || fail "the agent died on a bad reload"
"${GEN[@]}" --file "$T/nccl-hup/gpu-node-7-pid1.log" --first 10 --count 10
wait_for 20 "records written after the refused reload are posted" held_delta_is 10
ok "SIGHUP with a bad file: refused naming clock.rounds, the agent goes on with the old one"
P2=$(free_tcp_port)
write_hup "$P2" "clock: { interval: 1s, rounds: 4 }"
kill -HUP "$HUP_PID"
reloaded() { grep -q "configuration reloaded from $T/agent-hup.yaml" "$T/agent-hup.log"; }
wait_for 10 "the good file is taken" reloaded
wait_http "http://127.0.0.1:$P2/metrics" 10
if curl -fsS "http://127.0.0.1:$P1/metrics" >/dev/null 2>&1; then fail "the old /metrics address still serves"; fi
"${GEN[@]}" --file "$T/nccl-hup/gpu-node-7-pid1.log" --first 20 --count 10
wait_for 20 "records written after the reload are posted" held_delta_is 20
no_duplicates
kill -TERM "$HUP_PID"
wait_exit "$HUP_PID" 20
[ "$(held)" = $((base + 20)) ] || fail "held $(held), want $((base + 20))"
ok "SIGHUP with a good file: /metrics moved to the new address, the log followed on, each record once"
if grep -q 'Sanitizer' "$T/agent-hup.log"; then fail "sanitizer report in the agent's log"; fi

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
#   - the example configuration of the README's "Host agent" section is valid.
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
awk '/^## Host agent/ {f = 1} f && /^```yaml/ {g = 1; next} g && /^```$/ {exit} g {print}' \
  "$FS_SOURCE_DIR/README.md" >"$T/readme-agent.yaml"
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

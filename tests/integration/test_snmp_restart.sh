#!/usr/bin/env bash
# A real snmpd (serving this machine's own interfaces) restarted under a running
# fabricscope: sysUpTime starts again while the interface counters and hrSystemUptime go
# on. That is an agent restart, not a reboot: fabricscope_agent_restarts_total counts it,
# no reboot is counted, and the exported `lo` byte counter grows by what the kernel
# counted in between, not by its whole value again.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
PORT=$(free_udp_port)
HTTP=$(free_tcp_port)
export SNMP_PERSISTENT_DIR=$T/snmp/persist MIBS=""
start_host_snmpd() {
  bash "$FS_SOURCE_DIR/tests/sim/start-snmp-sim.sh" --dir "$T/snmp" --port "$PORT" --mode host \
    >"$T/start.log" 2>&1 || { cat "$T/start.log" >&2; fail "snmpd did not start"; }
  source "$T/snmp/env.sh"
  track "$SNMPD_PID"
}
start_host_snmpd
C=$(cat "$SNMP_COMMUNITY_FILE")
get() { snmpget -v2c -c "$C" -On -Oqvt -t 1 -r 1 "udp:127.0.0.1:$PORT" "$@"; }
LO=$(snmpbulkwalk -v2c -c "$C" -On -Oq "udp:127.0.0.1:$PORT" 1.3.6.1.2.1.31.1.1.1.1 |
  awk '$2 == "lo" || $2 == "\"lo\"" {n = split($1, a, "."); print a[n]; exit}')
[ -n "$LO" ] || fail "snmpd lists no lo interface"
get 1.3.6.1.2.1.25.1.1.0 | grep -q '^[0-9]' || fail "snmpd serves no hrSystemUptime here"

cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: host
    address: 127.0.0.1
    snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 500ms, retries: 1 }
EOF
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
KEY='fabric_port_bytes_total{target="host",interface="lo",direction="rx",source="snmp"}'
M() { curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt"; }
metric() { awk -v k="$1" 'index($0, k) == 1 {print $2; exit}' "$T/m.txt"; }
polls() { M; metric 'fabricscope_poll_duration_seconds_count{target="host",source="snmp"}'; }
# wait_until SECONDS CMD...: polls CMD every 0.2 s until it succeeds
wait_until() {
  local secs=$1; shift
  for _ in $(seq $((secs * 5))); do "$@" && return 0; sleep 0.2; done
  return 1
}
polled_more_than() { [ "$(polls)" -gt "$1" ] 2>/dev/null; }

wait_until 30 polled_more_than 2 || fail "no polls of snmpd"
# The kernel's count first, then a poll that began after it (polls of a target run one
# after another: the second to complete from here began after the first completed), so
# that what fabricscope adds below is bounded by what the kernel counted from raw_before
# on, however busy loopback is with other traffic.
raw_before=$(get 1.3.6.1.2.1.31.1.1.1.6."$LO")
n=$(polls)
wait_until 10 polled_more_than "$((n + 1))" || fail "no polls of snmpd after the kernel's count"
M
before=$(metric "$KEY")
[ -n "$before" ] || fail "no lo byte counter exported"
up_before=$(get 1.3.6.1.2.1.1.3.0)
ok "lo rx bytes exported: $before (snmpd says $raw_before)"

# Restart snmpd on the same port with the same configuration.
kill "$SNMPD_PID"
wait_until 10 eval '! kill -0 "$SNMPD_PID" 2>/dev/null' || fail "snmpd did not stop"
start_host_snmpd
up_after=$(get 1.3.6.1.2.1.1.3.0)
[ "$up_after" -lt "$up_before" ] 2>/dev/null || fail "sysUpTime did not restart ($up_before -> $up_after)"

restarts() { M; r=$(metric 'fabricscope_agent_restarts_total{target="host",source="snmp"}'); [ "${r:-0}" -ge 1 ]; }
wait_until 30 restarts || fail "agent restart not counted: $(grep agent_restarts "$T/m.txt")"
n=$(polls)
wait_until 10 polled_more_than "$((n + 1))" || fail "polling stopped after the restart"
M
after=$(metric "$KEY")
raw_after=$(get 1.3.6.1.2.1.31.1.1.1.6."$LO")
reboots=$(metric 'fabricscope_counters_reset_total{target="host",source="snmp",kind="reboot"}')
[ "${reboots:-0}" = 0 ] || fail "the agent restart was counted as $reboots reboots"
# What fabricscope added is at most what the kernel counted over a span enclosing its own
# two polls (raw_before was served before the poll of `before`, raw_after after the poll
# of `after`; allow 1 MB of slack), and nowhere near the whole value.
awk -v b="$before" -v a="$after" -v rb="$raw_before" -v ra="$raw_after" \
  'BEGIN {exit !(a >= b && a - b <= ra - rb + 1e6)}' ||
  fail "lo rx bytes went $before -> $after while snmpd counted $raw_before -> $raw_after"
ok "snmpd restart: counted as an agent restart, no reboot; lo rx bytes $before -> $after (snmpd: +$((raw_after - raw_before)))"

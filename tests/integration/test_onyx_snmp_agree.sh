#!/usr/bin/env bash
# One simulated switch, two ways in: the SNMP simulator (onyx-snmp-sim --scenario, behind a
# real snmpd) and the ONYX CLI simulator (behind a real sshd) read the same scenario file,
# and the SNMP driver and the CLI driver report the same numbers for the families both
# have: WRED drops and PFC rx pause frames of the congested port/TC (exact, past 2^53),
# and port octets (within the scenario's values at the start and end of the polls).
# Which source the daemon exports per family (precedence) is tested where the daemon
# wires both drivers.
source "$(dirname "$0")/lib.sh"

POLL=$FS_BUILD_DIR/tests/fs-onyx-poll
HARNESS=$FS_BUILD_DIR/sim/snmp-harness
[ -x "$POLL" ] && [ -x "$HARNESS" ] || fail "build fs-onyx-poll and snmp-harness first"
onyx_sim_prereqs
SCEN=$T/scenario.json
# three surges done (6 s), the next 18 s away; counters from 2^53 + 1
$PY - "$SCEN" <<'EOF'
import json, sys, time
json.dump({"ports": 64, "boot_epoch_s": time.time() - 82, "counter_base": 2**53 + 1,
           "congestion": {"port": 49, "tc": 3, "period_s": 30, "duration_s": 2, "phase_s": 10}},
          open(sys.argv[1], "w"))
EOF
chmod 0644 "$SCEN"
start_snmp_sim --scenario "$SCEN"
start_onyx_sim cli --scenario "$SCEN"

t0=$($PY -c 'import time; print(time.time())')
"$HARNESS" --port "$PORT" --community-file "$SNMP_COMMUNITY_FILE" --polls 1 --interval-ms 3000 \
  --grep 'Eth1/(2|49)"' >"$T/snmp.out" 2>"$T/snmp.log" || fail "SNMP poll failed"
"$POLL" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --password-file "$ONYX_PASSWORD_FILE" \
  --known-hosts "$ONYX_KNOWN_HOSTS" --polls 1 --interval-ms 3000 \
  --grep 'Eth1/(2|49)"' >"$T/cli.out" 2>"$T/cli.log" || fail "CLI poll failed"
t1=$($PY -c 'import time; print(time.time())')

val() { # val FILE REGEX: the value of the first matching metric line
  awk -v re="$2" '$1=="poll" && $3 ~ re {print $4; exit}' "$1"
}
for m in 'fabric_queue_wred_dropped_packets_total.*Eth1/49",tc="3"' \
         'fabric_pfc_pause_frames_total.*Eth1/49",direction="rx",priority="3"'; do
  s=$(val "$T/snmp.out" "$m")
  c=$(val "$T/cli.out" "$m")
  [ -n "$s" ] && [ "$s" = "$c" ] || fail "$m: snmp=$s cli=$c"
done
want=$($PY -c 'print(2**53 + 1 + 6000)')
[ "$(val "$T/cli.out" 'fabric_queue_wred_dropped_packets_total.*Eth1/49",tc="3"')" = "$want" ] ||
  fail "WRED is not the scenario's $want"
ok "WRED drops and PFC rx pause frames agree exactly (SNMP = CLI = scenario)"

for src in snmp cli; do
  v=$(val "$T/$src.out" 'fabric_port_bytes_total.*Eth1/2",direction="rx"')
  $PY - "$SCEN" "$v" "$t0" "$t1" "$FS_SOURCE_DIR" <<'EOF' || fail "$src Eth1/2 rx bytes $v outside the scenario's range"
import sys
sys.path.insert(0, sys.argv[5] + "/tests/sim")
from scenario import Scenario
sc = Scenario(sys.argv[1])
v, t0, t1 = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
sys.exit(0 if sc.port_octets(2, sc.since_boot(t0)) <= v <= sc.port_octets(2, sc.since_boot(t1)) else 1)
EOF
done
ok "port octets of both sources within the scenario's values"

#!/usr/bin/env bash
# fabricscope itself polling one simulated switch two ways at once: over SNMP (the
# simulator behind a real snmpd, tests/sim/start-snmp-sim.sh --scenario) and over the CLI
# (the ONYX simulator behind a real sshd), both reading the same scenario file. Through
# the daemon's /metrics:
#   - the CLI's per-TC WRED drops, PFC per priority, per-TC queue counters, port ECN
#     marks and flow-rule series appear with source="cli";
#   - source precedence (default: cli over snmp): every family exports exactly one
#     source, cli for the families both drivers produce, snmp for the ones only SNMP has;
#   - after a reload with expose_all_sources: true, both sources are exported for those
#     families with equal values (exact where the scenario holds a counter still, within
#     the poll-time skew for traffic counters);
#   - a reload is per driver: a change of the SNMP block keeps the CLI session, a change
#     of the flow rules (which only the CLI driver reads) keeps SNMP polling.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
onyx_sim_prereqs
SCEN=$T/scenario.json
# One surge (2 s on Eth1/5 tc 3) long done, the next 900 s away: congestion counters
# stay put while the test runs; every counter starts at 2^53 + 1.
$PY - "$SCEN" <<'EOF'
import json, sys, time
json.dump({"ports": 8, "boot_epoch_s": time.time() - 82, "counter_base": 2**53 + 1,
           "congestion": {"port": 5, "tc": 3, "period_s": 1000, "duration_s": 2, "phase_s": 10}},
          open(sys.argv[1], "w"))
EOF
chmod 0644 "$SCEN"
start_snmp_sim --scenario "$SCEN"
start_onyx_sim cli --scenario "$SCEN"
HTTP=$(free_tcp_port)

write_cfg() { # write_cfg EXPOSE_ALL [SNMP_INTERVAL [RULE_PORT [nocli]]]
  local cli="cli: { port: $ONYX_SSH_PORT, username: $ONYX_SSH_USER, password_file: $ONYX_PASSWORD_FILE,
           known_hosts: $ONYX_KNOWN_HOSTS, interval: 1s }"
  [ "${4:-}" = nocli ] && cli=""
  cat >"$T/fs.yaml.tmp" <<EOF
listen: 127.0.0.1:$HTTP
flow_rules:
  - { name: nccl, protocol: udp, dst_port: ${3:-4791}, tc: 3 }
targets:
  - name: sw1
    address: 127.0.0.1
    expose_all_sources: $1
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: ${2:-1s},
            timeout: 500ms }
    $cli
EOF
  mv "$T/fs.yaml.tmp" "$T/fs.yaml"
}
write_cfg false
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
M() { curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$1"; }
# both targets up and the CLI's families present: the first cycles have run, and under
# load the deadline guard may have left per-TC commands for the next cycle
both_up() {
  M "$T/m.txt" &&
    grep -q '^fabricscope_target_up{target="sw1",source="cli"} 1' "$T/m.txt" &&
    grep -q '^fabricscope_target_up{target="sw1",source="snmp"} 1' "$T/m.txt" &&
    grep -q '^fabric_flow_rule_packets_total{.*source="cli"}' "$T/m.txt" &&
    grep -q '^fabric_queue_wred_dropped_packets_total{target="sw1",interface="Eth1/5",tc="3",source="cli"}' "$T/m.txt" &&
    grep -q '^fabric_pfc_pause_frames_total{target="sw1",interface="Eth1/5",direction="rx",priority="3",source="cli"}' "$T/m.txt" &&
    grep -q '^fabric_port_tx_wait_seconds_total{.*source="snmp"}' "$T/m.txt"
}
wait_for 30 "both sources up with data" both_up

# family -> sources, of the fabric_* series in a scrape
families() { grep '^fabric_' "$1" | sed -E 's/^([a-z_]+)\{.*source="([a-z]+)".*/\1 \2/' | sort -u; }
families "$T/m.txt" >"$T/fam.txt"

# ---- per-TC and flow-rule series from the CLI
for f in 'fabric_queue_wred_dropped_packets_total\{target="sw1",interface="Eth1/5",tc="3",source="cli"\} ' \
         'fabric_pfc_pause_frames_total\{target="sw1",interface="Eth1/5",direction="rx",priority="3",source="cli"\} ' \
         'fabric_queue_tx_packets_total\{target="sw1",interface="Eth1/5",tc="3",source="cli"\} ' \
         'fabric_port_ecn_marked_packets_total\{target="sw1",interface="Eth1/5",source="cli"\} ' \
         'fabric_flow_rule_ecn_marked_packets_total\{.*rule="nccl".*source="cli"\} ' \
         'fabric_flow_rule_dropped_packets_total\{.*rule="nccl".*source="cli"\} '; do
  grep -qE "^$f" "$T/m.txt" || fail "no series matching $f"
done
want=$($PY -c 'print(2**53 + 1 + 2000)') # 2 s of surge at 1000 WRED drops/s
got=$(grep -E '^fabric_queue_wred_dropped_packets_total\{target="sw1",interface="Eth1/5",tc="3",source="cli"\} ' "$T/m.txt" | awk '{print $2}')
[ "$got" = "$want" ] || fail "CLI WRED drops $got, scenario $want"
ok "per-TC WRED, PFC, queue, port ECN and flow-rule series come from the CLI (exact past 2^53)"

# ---- precedence: one source per family; cli where both have it
[ -z "$(awk '{print $1}' "$T/fam.txt" | uniq -d)" ] ||
  fail "families exported by two sources: $(awk '{print $1}' "$T/fam.txt" | uniq -d | tr '\n' ' ')"
for f in fabric_port_bytes_total fabric_port_packets_total fabric_pfc_pause_frames_total \
         fabric_queue_wred_dropped_packets_total fabric_queue_no_buffer_dropped_packets_total \
         fabric_port_oper_up fabric_device_info; do
  [ "$(awk -v f="$f" '$1==f {print $2}' "$T/fam.txt")" = cli ] || fail "$f: $(grep "^$f " "$T/fam.txt")"
done
for f in fabric_port_tx_wait_seconds_total fabric_queue_depth_cells fabric_port_info; do
  [ "$(awk -v f="$f" '$1==f {print $2}' "$T/fam.txt")" = snmp ] || fail "$f (SNMP only) is not exported"
done
ok "precedence: one source per family, cli over snmp where both report it"

# ---- expose_all_sources: both, with equal values
write_cfg true
hup
both_sources() {
  M "$T/all.txt" &&
    grep -q '^fabric_port_bytes_total{target="sw1",interface="Eth1/2",direction="rx",source="snmp"}' "$T/all.txt" &&
    grep -q '^fabric_port_bytes_total{target="sw1",interface="Eth1/2",direction="rx",source="cli"}' "$T/all.txt"
}
wait_for 20 "both sources exported" both_sources
val() { grep -E "^$1\{target=\"sw1\",$2,source=\"$3\"\} " "$T/all.txt" | awk '{print $2}'; }
for m in 'fabric_queue_wred_dropped_packets_total interface="Eth1/5",tc="3"' \
         'fabric_pfc_pause_frames_total interface="Eth1/5",direction="rx",priority="3"' \
         'fabric_port_oper_up interface="Eth1/5"'; do
  read -r name labels <<<"$m"
  s=$(val "$name" "$labels" snmp)
  c=$(val "$name" "$labels" cli)
  [ -n "$s" ] && [ "$s" = "$c" ] || fail "$name{$labels}: snmp=$s cli=$c"
done
# traffic grows between the two drivers' polls: equal within two poll intervals of growth
# (Eth1/2 grows at 10e9/8 * 3/4 bytes/s in the scenario)
s=$(val fabric_port_bytes_total 'interface="Eth1/2",direction="rx"' snmp)
c=$(val fabric_port_bytes_total 'interface="Eth1/2",direction="rx"' cli)
# Under a sanitizer build the polls themselves take longer (TSan: 5-15x): 10 s of growth.
SKEW_S=2
ldd "$FABRICSCOPE" | grep -qE 'lib(t|a)san' && SKEW_S=10
$PY -c 'import sys; s, c, k = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); sys.exit(0 if abs(s - c) <= k * 10e9 / 8 * 3 / 4 else 1)' "$s" "$c" "$SKEW_S" ||
  fail "Eth1/2 rx bytes: snmp=$s cli=$c, more apart than $SKEW_S s of traffic"
ok "expose_all_sources: both sources exported, equal values (traffic within the poll-time skew)"

# ---- a reload is per driver
last_reload() { grep 'reloaded ' "$T/fabricscope.log" | tail -n 1; }
sessions() { log_count 'target sw1: CLI session ready'; }
# expose_all_sources is the target's own setting: both drivers restarted for it. Their
# old series may still be exported; the CLI's new session is what says it is back.
wait_for 20 "the CLI session after the expose_all_sources reload" _log_count_above 'target sw1: CLI session ready' 1
# ...and its first good cycle: a reload restarts an instance that is still failing.
wait_for 20 "both sources up after the expose_all_sources reload" both_up
n_sessions=$(sessions)
write_cfg true 2s
hup
grep -q '1 instances kept, 0 restarted (refused or failing), 1 removed, 1 added' <<<"$(last_reload)" ||
  fail "SNMP block changed: $(last_reload)"
wait_for 20 "both sources up after the SNMP change" both_up
[ "$(sessions)" = "$n_sessions" ] || fail "the CLI session was opened again for an SNMP change"
write_cfg true 2s 4792
hup
grep -q '1 instances kept, 0 restarted (refused or failing), 1 removed, 1 added' <<<"$(last_reload)" ||
  fail "flow rules changed: $(last_reload)"
wait_for 20 "a new CLI session for the new flow rules" _log_count_above 'target sw1: CLI session ready' "$n_sessions"
wait_for 20 "both sources up after the flow-rule change" both_up
ok "reload per driver: an SNMP change keeps the CLI session ($n_sessions opened), a flow-rule change restarts the CLI only"

# ---- removal and reload of the CLI target while a poll is in flight
# `show version` answers after 3 s (the simulator's slow fault): every 1 s cycle ends with
# that command still owed, so a poll is in flight whenever the reload comes. Under TSan
# and ASan (make test-tsan, test-asan) this runs the driver's removal against its I/O
# thread mid-poll; a race or a use after free stops the daemon there.
set_slow() { # set_slow on|off
  $PY - "$SCEN" "$1" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
d["onyx_faults"] = {"slow": "show version"} if sys.argv[2] == "on" else {}
d["onyx_slow_s"] = 3
open(sys.argv[1] + ".tmp", "w").write(json.dumps(d))
os.chmod(sys.argv[1] + ".tmp", 0o644)
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF
}
in_flight() { log_count 'target sw1: (no answer to `show version` in time|the shell was still answering)'; }
set_slow on
n=$(in_flight)
wait_for 30 "a CLI poll in flight (show version owed)" _log_count_above 'target sw1: (no answer to `show version` in time|the shell was still answering)' "$n"
write_cfg true 2s 4791
hup
grep -q '1 instances kept, 0 restarted (refused or failing), 1 removed, 1 added' <<<"$(last_reload)" ||
  fail "flow rules changed mid-poll: $(last_reload)"
n=$(in_flight)
wait_for 30 "the new CLI instance's poll in flight" _log_count_above 'target sw1: (no answer to `show version` in time|the shell was still answering)' "$n"
write_cfg true 2s 4791 nocli
hup
grep -q ', 1 removed, 0 added' <<<"$(last_reload)" || fail "CLI block removed mid-poll: $(last_reload)"
kill -0 "$FS_PID" || fail "fabricscope died removing a CLI target mid-poll"
cli_gone() {
  curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" >"$T/targets.json" &&
    ! $PY -c 'import json, sys; sys.exit(0 if any(t["source"] == "cli" for t in json.load(open(sys.argv[1]))["data"]) else 1)' "$T/targets.json"
}
wait_for 20 "the CLI instance gone from /api/v1/targets" cli_gone
set_slow off
n_sessions=$(sessions)
write_cfg true 2s 4791
hup
wait_for 30 "a new CLI session after the CLI block came back" _log_count_above 'target sw1: CLI session ready' "$n_sessions"
wait_for 30 "both sources up again" both_up
ok "a reload (flow rules changed) and a removal of the CLI target while its poll was in flight; the target back up after"

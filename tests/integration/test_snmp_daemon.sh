#!/usr/bin/env bash
# fabricscope itself (scheduler + SNMP driver) polling the simulated switch behind a real
# snmpd: /metrics (filters, static labels, scaled pause seconds), /api/v1/targets (the
# detected QoS index base), /api/v1/raw, a congestion event and a reboot seen through
# the daemon, and a wrong SNMPv3 password: auth errors counted, backoff, no retry storm.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
start_snmp_sim --cong-port 49 --cong-tc 3
HTTP=$(free_tcp_port)
export SNMP_PERSISTENT_DIR=$T/snmp/persist MIBS=""
echo "definitely-wrong-password" >"$T/wrong.auth"
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: tor1
    address: 127.0.0.1
    labels: { pod: p1, role: tor }
    interfaces: { include: "^Eth1/", exclude: "^Eth1/6[34]\$" }
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: 1s,
            timeout: 500ms, retries: 1, max_repetitions: 50 }
  - name: tor1-v3
    address: 127.0.0.1
    snmp:
      port: $PORT
      version: 3
      user: $SNMP_V3_USER
      auth: { protocol: sha256, password_file: $SNMP_V3_AUTH_FILE }
      priv: { protocol: aes128, password_file: $SNMP_V3_PRIV_FILE }
      interval: 1s
      timeout: 500ms
  - name: tor1-badpw
    address: 127.0.0.1
    snmp:
      port: $PORT
      version: 3
      user: $SNMP_V3_USER2
      auth: { protocol: sha256, password_file: $T/wrong.auth }
      priv: { protocol: aes128, password_file: $SNMP_V3_PRIV_FILE }
      interval: 1s
      timeout: 500ms
      retries: 2
EOF
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
C=$(cat "$SNMP_COMMUNITY_FILE")
wd() { snmpget -v2c -c "$C" -Oqv "udp:127.0.0.1:$PORT" 1.3.6.1.6.3.15.1.1.5.0; }
w0=$(wd)
fs_started=$(date +%s)
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
M() { curl -fsS "http://127.0.0.1:$HTTP/metrics"; }
metric() { M >"$T/m.txt"; awk -v k="$1" 'index($0, k) == 1 {print $2; exit}' "$T/m.txt"; }

# Samples show as their PDUs arrive; the cycle's end (target_up) comes after the last. A
# loaded machine may cut a cycle at its deadline (partial): the QoS tables then come in
# the next one, walked first.
for _ in $(seq 100); do
  M >"$T/m1.txt"
  grep -q '^fabric_port_bytes_total{target="tor1-v3",interface="Eth1/49",direction="rx",source="snmp"}' "$T/m1.txt" &&
    grep -q '^fabric_port_bytes_total{target="tor1",pod="p1",role="tor",interface="Eth1/49",direction="rx",source="snmp"}' "$T/m1.txt" &&
    grep -q '^fabric_pfc_pause_seconds_total{target="tor1",.*interface="Eth1/1",direction="rx",priority="3"' "$T/m1.txt" &&
    grep -q '^fabricscope_target_up{target="tor1",pod="p1",role="tor",source="snmp"} 1' "$T/m1.txt" &&
    break
  sleep 0.1
done
grep -q '^fabric_port_bytes_total{target="tor1",pod="p1",role="tor",interface="Eth1/49",direction="rx",source="snmp"}' "$T/m1.txt" ||
  fail "no port bytes for tor1"
! grep -q 'target="tor1",.*interface="Eth1/64"' "$T/m1.txt" || fail "exclude filter not applied"
grep -q 'target="tor1-v3",interface="Eth1/64"' "$T/m1.txt" || fail "no data over SNMPv3"
grep -q '^fabric_device_info{target="tor1",pod="p1",role="tor",model="SN2700",os="onyx",version="3.10.4706",source="snmp"} 1' "$T/m1.txt" ||
  fail "device info"
grep -Eq '^fabric_pfc_pause_seconds_total\{target="tor1",.*interface="Eth1/1",direction="rx",priority="3",source="snmp"\} [0-9]+\.[0-9]+' "$T/m1.txt" ||
  fail "PFC pause seconds not converted from milliseconds"
grep -q '^fabricscope_target_up{target="tor1",pod="p1",role="tor",source="snmp"} 1' "$T/m1.txt" || fail "tor1 not up"
ok "/metrics: v2c and v3 targets, labels, filters, device info, ms -> s"

curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" >"$T/targets.json"
grep -q '"qos_index_base":1' "$T/targets.json" || fail "qos_index_base not in /api/v1/targets"
curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" \
  --data-urlencode 'match[]=fabric_device_uptime_seconds{target="tor1"}' >"$T/raw.json"
grep -q '"values"' "$T/raw.json" || fail "no raw samples: $(head -c 300 "$T/raw.json")"
ok "/api/v1/targets shows the detected QoS index base; /api/v1/raw has samples"

# wait_until SECONDS CMD...: runs CMD every 0.1 s until it succeeds; false at the deadline
wait_until() {
  local secs=$1
  shift
  for _ in $(seq $((secs * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
DEPTH='fabric_queue_depth_cells{target="tor1",pod="p1",role="tor",interface="Eth1/49",tc="3",source="snmp"}'
congested() { d=$(metric "$DEPTH"); awk -v d="$d" 'BEGIN {exit !(d > 0)}'; }
kill -USR2 "$SIM_PID"
wait_until 20 congested || fail "congestion not visible (depth $(metric "$DEPTH"))"
ok "congestion visible: Eth1/49 TC 3 queue depth $d cells"

before=$(metric 'fabric_port_bytes_total{target="tor1",pod="p1",role="tor",interface="Eth1/1",direction="rx",source="snmp"}')
REBOOTS='fabricscope_counters_reset_total{target="tor1",pod="p1",role="tor",source="snmp",kind="reboot"}'
rebooted() { r=$(metric "$REBOOTS"); [ "${r:-0}" -ge 1 ]; }
kill -USR1 "$SIM_PID"
wait_until 20 rebooted || fail "reboot not counted"
after=$(metric 'fabric_port_bytes_total{target="tor1",pod="p1",role="tor",interface="Eth1/1",direction="rx",source="snmp"}')
awk -v a="$before" -v b="$after" 'BEGIN {exit !(b >= a)}' || fail "counter went down across the reboot ($before -> $after)"
ok "reboot counted, counter monotonic ($before -> $after)"

# The wrong-password target: over 10 s of 1 s intervals, auth errors are counted, the
# scheduler backs off (fewer attempts than intervals) and each attempt cost the agent one
# failed authentication, no more. (The 10 s are the window measured, not a wait for
# something to happen.)
AUTHERR='fabricscope_poll_errors_total{target="tor1-badpw",source="snmp",kind="auth"}'
window_done() { a=$(metric "$AUTHERR"); [ "${a:-0}" -ge 2 ] && [ $(($(date +%s) - fs_started)) -ge 10 ]; }
wait_until 30 window_done || fail "auth errors not counted: $(metric "$AUTHERR")"
a=$(metric "$AUTHERR")
up=$(metric 'fabricscope_target_up{target="tor1-badpw",source="snmp"}')
w1=$(wd)
[ "${a:-0}" -ge 1 ] || fail "auth errors not counted"
[ "$up" = 0 ] || fail "bad-password target reported up"
[ "$a" -lt 10 ] || fail "$a attempts in ~10 s at a 1 s interval: no backoff"
[ $((w1 - w0)) -le $((a + 1)) ] || fail "agent saw $((w1 - w0)) failed authentications for $a attempts"
ok "wrong password: $a auth errors, backoff, $((w1 - w0)) failed authentications at the agent"
! grep -qF "$(cat "$SNMP_V3_AUTH_FILE")" "$T/fabricscope.log" || fail "secret in the log"
! grep -qF "definitely-wrong-password" "$T/fabricscope.log" || fail "secret in the log"
ok "no secret in the log"

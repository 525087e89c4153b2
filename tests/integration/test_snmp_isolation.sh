#!/usr/bin/env bash
# One bad switch never delays another: next to a healthy target, one whose agent never
# answers (a wrong v2c community is silently dropped, exactly like a dead host) and one
# whose port is closed. The healthy one keeps its cadence with no overrun and no gap;
# the others are counted as timeouts/protocol errors without a retry storm; and when the
# silent one is fixed by a reload it recovers.
source "$(dirname "$0")/lib.sh"

start_snmp_sim
DEAD=$(free_udp_port)
HTTP=$(free_tcp_port)
echo "not-the-community" >"$T/wrong.community"

write_cfg() { # community file of the "silent" target
  cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
targets:
  - name: good
    address: 127.0.0.1
    snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 700ms, retries: 0 }
  - name: silent
    address: 127.0.0.1
    snmp: { port: $PORT, community_file: $1, interval: 500ms, timeout: 300ms, retries: 1 }
  - name: closed
    address: 127.0.0.1
    snmp: { port: $DEAD, community_file: $SNMP_COMMUNITY_FILE, interval: 500ms, timeout: 300ms, retries: 1 }
YML
}
write_cfg "$T/wrong.community"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"

M() { curl -fsS "http://127.0.0.1:$HTTP/metrics"; }
val() { M >"$T/m.txt"; awk -v k="$1" 'index($0, k) == 1 {print $2; exit}' "$T/m.txt"; }
# The first poll walks the ifIndex map too; give it time (sanitizer builds are slow).
for _ in $(seq 100); do
  [ "$(val 'fabricscope_target_up{target="good",source="snmp"}')" = 1 ] && break
  sleep 0.1
done
good_to0=$(val 'fabricscope_poll_errors_total{target="good",source="snmp",kind="timeout"}')
# A 6 s window (measured, not a wait for an event): it ends once 6 s have passed and the
# bad targets' failures have been counted.
w0=$(date +%s)
window_done() {
  [ $(($(date +%s) - w0)) -ge 6 ] &&
    [ "$(val 'fabricscope_poll_errors_total{target="silent",source="snmp",kind="timeout"}')" -ge 1 ] 2>/dev/null &&
    [ "$(M | awk '/^fabricscope_poll_errors_total\{target="closed"/ {s += $2} END {print s + 0}')" -ge 1 ]
}
for _ in $(seq 300); do window_done && break; sleep 0.1; done
w1=$(date +%s)

[ "$(val 'fabricscope_target_up{target="good",source="snmp"}')" = 1 ] || fail "good target not up"
[ "$(val 'fabricscope_target_up{target="silent",source="snmp"}')" = 0 ] || fail "silent target up?"
[ "$(val 'fabricscope_target_up{target="closed",source="snmp"}')" = 0 ] || fail "closed target up?"
[ "$(val 'fabricscope_poll_errors_total{target="good",source="snmp",kind="overrun"}')" = 0 ] || fail "good target overran"
[ "$(val 'fabricscope_poll_errors_total{target="good",source="snmp",kind="timeout"}')" = "$good_to0" ] ||
  fail "good target timed out while the others failed"
to=$(val 'fabricscope_poll_errors_total{target="silent",source="snmp",kind="timeout"}')
[ "${to:-0}" -ge 1 ] || fail "silent target's timeouts not counted"
# No retry storm: at a 500 ms interval the silent one gets at most one cycle per interval
# (the scheduler may back off further; whether it does is its policy, not tested here).
n_silent=$(M | awk '/^fabricscope_poll_duration_seconds_count\{target="silent"/ {print $2}')
[ "$n_silent" -le $(((w1 - w0) * 2 + 3)) ] || fail "silent target polled $n_silent times in $((w1 - w0)) s at a 500 ms interval"
closed_err=$(M | awk '/^fabricscope_poll_errors_total\{target="closed"/ {s += $2} END {print s + 0}')
[ "$closed_err" -ge 1 ] || fail "closed target's errors not counted"
ok "bad targets counted, no retry storm (silent: $to timeouts in $n_silent cycles; closed: $closed_err errors)"

# The good target's ring has every 1 s sample: no gap longer than 1.5 intervals.
now=$(date +%s)
curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" \
  --data-urlencode 'match[]=fabric_device_uptime_seconds{target="good"}' \
  --data-urlencode "start=$((now - 5))" --data-urlencode "end=$((now + 1))" >"$T/raw.json"
gap=$(jq '[.data.result[0].values | . as $v | range(1; length) | ($v[.][0] - $v[. - 1][0])] | max' "$T/raw.json")
n=$(jq '.data.result[0].values | length' "$T/raw.json")
[ "$n" -ge 4 ] || fail "good target has only $n samples in 5 s"
awk -v g="$gap" 'BEGIN { exit !(g < 1.5) }' || fail "good target's largest gap is ${gap}s"
ok "healthy target unaffected: $n samples in 5 s, largest gap ${gap}s"

# Fix the silent one: it recovers after a reload.
write_cfg "$SNMP_COMMUNITY_FILE"
kill -HUP "$FS_PID"
for _ in $(seq 100); do
  [ "$(val 'fabricscope_target_up{target="silent",source="snmp"}')" = 1 ] && break
  sleep 0.2
done
[ "$(val 'fabricscope_target_up{target="silent",source="snmp"}')" = 1 ] || fail "silent target did not recover"
ok "fixed target recovered"

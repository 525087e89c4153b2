#!/usr/bin/env bash
# The SNMP driver against the simulated 64-port ONYX switch behind a real snmpd (own
# config, port, AgentX socket, state dir): values and labels, the ifIndex map, QoS index
# base detection, a 32-bit counter wrap, a congestion event and a simulated reboot.
# Polls through build/sim/snmp-harness (driver + store + exposition, no daemon).
source "$(dirname "$0")/lib.sh"

HARNESS=$FS_BUILD_DIR/sim/snmp-harness
[ -x "$HARNESS" ] || fail "build snmp-harness first"
# Eth1/64 has only 32-bit counters at 0.8 Gb/s (on a 1 Gb/s port: a wrap must be plausible for
# the line rate, else it is a clear) starting 8 s short of 2^32: it wraps ~8 s in.
start_snmp_sim --wrap-port 64 --wrap-rate-bps 8e8 --cong-port 49 --cong-tc 3
cp "$T/snmp/snmpd.log" "$T/snmpd.log" 2>/dev/null || true

# A poll may take longer than its 1 s slot on a loaded machine (a first walk took 950 ms
# under ASan with a CPU hog): the deadline is 3 s (a late round starts the next at once),
# so what is checked is what each poll read, never how fast the machine is.
"$HARNESS" --port "$PORT" --community-file "$SNMP_COMMUNITY_FILE" --polls 16 --interval-ms 1000 \
  --deadline-ms 3000 --timeout-ms 800 --retries 1 --max-rep 50 \
  --grep 'Eth1/(1|49|64)"|fabric_device|counters_reset_total|port_info|poll_errors' \
  >"$T/harness.out" 2>"$T/harness.log" &
HP=$!
track "$HP"
# wait_poll N: until the harness has finished its poll N (it logs each one)
wait_poll() {
  for _ in $(seq 600); do
    grep -q "^poll $1: " "$T/harness.log" 2>/dev/null && return 0
    kill -0 "$HP" 2>/dev/null || fail "harness ended before poll $1"
    sleep 0.05
  done
  fail "harness did not reach poll $1 within 30 s"
}
wait_poll 5
kill -USR2 "$SIM_PID"   # congestion on Eth1/49 TC 3, seen from poll 6 on
wait_poll 10
kill -USR1 "$SIM_PID"   # reboot, seen from poll 11 on
wait "$HP" || { tail -5 "$T/harness.out" >&2; fail "harness reported failed polls"; }
OUT=$T/harness.out
cp "$T/snmp/sim.log" "$T/sim.log"

val() { # val POLL REGEX -> value of the first matching line of that poll
  awk -v p="$1" -v re="$2" '$1=="poll" && $2==p && $3 ~ re {print $4; exit}' "$OUT"
}
series() { # series REGEX -> values over all polls, one per line
  awk -v re="$1" '$1=="poll" && $3 ~ re {print $4}' "$OUT"
}
monotonic() { awk 'NR>1 && $1+0 < prev+0 {bad=1} {prev=$1} END {exit bad}'; }

# --- values and labels ---
n=$(awk '$2==16 && $3 ~ /^fabric_port_info/' "$OUT" | wc -l)
[ "$n" -ge 3 ] || fail "fabric_port_info missing"
grep -q 'fabric_device_info{target="sim0",model="SN2700",os="onyx",version="3.10.4706",source="snmp"} 1' "$OUT" ||
  fail "device info not parsed"
grep -q 'fabric_port_info{target="sim0",interface="Eth1/49",alias="uplink spine49",ifindex="149",source="snmp"} 1' "$OUT" ||
  fail "port info (alias, ifindex from the ifIndex map) wrong"
grep -q '"qos_index_base":1' "$OUT" || fail "QoS index base 1 not detected"
grep -q '"queue_depth_unit":"cells"' "$OUT" || fail "queue depth unit not reported"
ok "values, labels, ifIndex map, device info, QoS base detection"

# Rate: Eth1/1 runs at 10G * 2/4 = 5 Gb/s rx (simulator); two polls 5 s apart.
a=$(val 2 'fabric_port_bytes_total.*Eth1/1".*rx'); b=$(val 7 'fabric_port_bytes_total.*Eth1/1".*rx')
rate=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.0f", (b - a) * 8 / 5}')
awk -v r="$rate" 'BEGIN {exit !(r > 4.0e9 && r < 6.0e9)}' || fail "Eth1/1 rx rate $rate b/s, expected ~5e9"
ok "counter rate ($rate b/s)"

# --- 32-bit wrap on Eth1/64 (no HC columns: the driver falls back to ifInOctets) ---
series 'fabric_port_bytes_total.*Eth1/64".*rx' >"$T/wrap.txt"
[ "$(wc -l <"$T/wrap.txt")" -ge 8 ] || fail "no 32-bit samples for Eth1/64"
head -n 9 "$T/wrap.txt" | monotonic || fail "Eth1/64 rx bytes went down across the wrap: $(tr '\n' ' ' <"$T/wrap.txt")"
w=$(awk '$1=="poll" && $2==9 && $3 ~ /counters_reset_total.*kind="wrap"/ {print $4}' "$OUT")
[ "${w:-0}" -ge 1 ] || fail "wrap not counted (resets{kind=wrap}=$w)"
big=$(head -n 9 "$T/wrap.txt" | tail -n 1)
awk -v v="$big" 'BEGIN {exit !(v > 4294967296)}' || fail "unwrapped value $big not above 2^32"
ok "32-bit wrap unwrapped and counted"

# --- congestion: queue depth rises on Eth1/49 TC 3, WRED discards climb ---
d6=$(val 6 'fabric_queue_depth_cells.*Eth1/49".*tc="3"'); d9=$(val 9 'fabric_queue_depth_cells.*Eth1/49".*tc="3"')
d2=$(val 2 'fabric_queue_depth_cells.*Eth1/49".*tc="3"')
[ "${d2:-x}" = 0 ] || fail "queue depth before the congestion is $d2"
awk -v a="$d6" -v b="$d9" 'BEGIN {exit !(a > 0 && b > a)}' || fail "queue depth did not rise ($d6 -> $d9)"
w6=$(val 6 'wred_dropped.*Eth1/49".*tc="3"'); w9=$(val 9 'wred_dropped.*Eth1/49".*tc="3"')
awk -v a="$w6" -v b="$w9" 'BEGIN {exit !(b > a)}' || fail "WRED discards did not rise ($w6 -> $w9)"
ok "congestion visible (depth $d6 -> $d9 cells, WRED $w6 -> $w9)"

# --- reboot: sysUpTime restarts, counted as a reboot, counters stay monotonic ---
r=$(awk '$1=="poll" && $2==16 && $3 ~ /counters_reset_total.*kind="reboot"/ {print $4}' "$OUT")
[ "${r:-0}" -ge 1 ] || fail "reboot not counted"
series 'fabric_port_bytes_total.*Eth1/1".*rx' | monotonic || fail "Eth1/1 rx bytes not monotonic across the reboot"
series 'fabric_port_bytes_total.*Eth1/49".*tx' | monotonic || fail "Eth1/49 tx bytes not monotonic across the reboot"
series 'wred_dropped.*Eth1/49".*tc="3"' | monotonic || fail "WRED counter not monotonic across the reboot"
u15=$(val 15 fabric_device_uptime); u10=$(val 10 fabric_device_uptime)
awk -v a="$u10" -v b="$u15" 'BEGIN {exit !(b < a)}' || fail "uptime did not restart ($u10 -> $u15)"
ok "reboot detected and absorbed"

#!/usr/bin/env bash
# fabricscope against hostile SNMP agents (tests/sim/hostile_snmp_agent.c), one agent per
# misbehaviour, all polled by one daemon: cycles that reach their deadline in a slow
# table keep what arrived; a poll longer than its interval still reads every table, the
# walk cut last going first next time; duplicate interface names get series of their
# own; a renamed port (same ifIndex, ifTableLastChange unmoved) never lends its counters
# to the old name; HC columns that come and go, a cleared 32-bit counter, an agent
# restart and a device reboot leave every exposed counter monotonic with no phantom
# increase, each counted under its own kind; wrong request ids, non-increasing OIDs and
# an endless table neither hang nor fail the target for good; a host name that does not
# resolve delays nobody; and the daemon stays healthy throughout.
source "$(dirname "$0")/lib.sh"

AGENT=$FS_BUILD_DIR/sim/hostile-snmp-agent
[ -x "$AGENT" ] || fail "build hostile-snmp-agent first"
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
export MIBS=""
umask 077
head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/community"
C=$(cat "$T/community")
HTTP=$(free_tcp_port)

# name -> agent options
declare -A OPTS=(
  [dup]="--dup-names --base 5000000000"
  [rename]="--rename-every 3"
  [flap]="--hc-flap 2 --base 5000000000"
  [clear]="--clear-every 3"
  [restart]="--restart-every 3 --base 5000000000"
  [nohr]="--restart-every 3 --no-hr --base 5000000000"
  [reboot]="--reboot-every 4"
  [reqid]="--bad-reqid 3"
  [nonincr]="--nonincr"
  [endless]="--endless"
  [slow]="--slow-vendor-ms 3000"
  [tight]="--pfc --delay-ms 300"
)
declare -A TIMEOUT=([slow]=700ms [tight]=600ms)
declare -A APORT
{
  echo "listen: 127.0.0.1:$HTTP"
  echo "targets:"
  for n in "${!OPTS[@]}"; do
    APORT[$n]=$(free_udp_port)
    # shellcheck disable=SC2086
    "$AGENT" --port "${APORT[$n]}" --community-file "$T/community" ${OPTS[$n]} >"$T/agent-$n.log" 2>&1 &
    track $!
    echo "  - name: $n"
    echo "    address: 127.0.0.1"
    echo "    snmp: { port: ${APORT[$n]}, community_file: $T/community, interval: 1s, timeout: ${TIMEOUT[$n]:-300ms}, retries: 2 }"
  done
  echo "  - name: nodns"
  echo "    address: does-not-resolve.invalid"
  echo "    snmp: { port: 161, community_file: $T/community, interval: 1s, timeout: 300ms, retries: 0 }"
} >"$T/fs.yaml"

aget() { snmpget -v2c -c "$C" -On -Oqv -t 0.5 -r 2 "udp:127.0.0.1:${APORT[$1]}" "$2"; }
for n in "${!OPTS[@]}"; do
  for _ in $(seq 50); do aget "$n" 1.3.6.1.2.1.1.3.0 >/dev/null 2>&1 && break; sleep 0.1; done
  aget "$n" 1.3.6.1.2.1.1.3.0 >/dev/null || fail "agent $n does not answer"
done
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20

M() { curl -fsS --max-time 5 "http://127.0.0.1:$HTTP/metrics"; }
# metric FILE KEY -> the value of the sample whose name and labels start with KEY
metric() { awk -v k="$2" 'index($0, k) == 1 {print $2; exit}' "$1"; }
bytes() { echo "fabric_port_bytes_total{target=\"$1\",interface=\"$2\",direction=\"$3\",source=\"snmp\"}"; }
packets() { echo "fabric_port_packets_total{target=\"$1\",interface=\"$2\",direction=\"$3\",source=\"snmp\"}"; }
resets() { echo "fabricscope_counters_reset_total{target=\"$1\",source=\"snmp\",kind=\"$2\"}"; }
detail() { # detail TARGET KEY -> the driver's detail value for TARGET
  curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" |
    jq -r --arg t "$1" --arg k "$2" '[.. | objects | select(.name? == $t or .target? == $t)] | map(.. | objects | select(has($k)) | .[$k]) | first // empty'
}

# Scrape every 0.3 s, keeping "elapsed-seconds value" series of the counters watched,
# until every misbehaviour has happened at least twice (or 40 s).
declare -A WATCH=(
  [dup_a]=$(bytes dup Eth1/1 rx) [dup_b]=$(bytes dup 'Eth1/1#105' rx)
  [ren_2]=$(bytes rename Eth1/2 rx) [ren_9]=$(bytes rename Eth1/9 rx)
  [flap_b]=$(bytes flap Eth1/1 rx) [flap_p]=$(packets flap Eth1/1 rx)
  [clear_b]=$(bytes clear Eth1/1 rx)
  [restart_b]=$(bytes restart Eth1/1 rx) [nohr_b]=$(bytes nohr Eth1/1 rx)
  [reboot_b]=$(bytes reboot Eth1/2 rx)
)
start=$(date +%s.%N)
unhealthy=0
for _ in $(seq 130); do
  M >"$T/m.txt" || fail "/metrics did not answer"
  curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$HTTP/healthz" || unhealthy=$((unhealthy + 1))
  now=$(date +%s.%N)
  el=$(awk -v a="$start" -v b="$now" 'BEGIN {printf "%.2f", b - a}')
  for w in "${!WATCH[@]}"; do
    v=$(metric "$T/m.txt" "${WATCH[$w]}")
    [ -n "$v" ] && echo "$el $v" >>"$T/w-$w.txt"
  done
  r=$(metric "$T/m.txt" "$(resets reboot reboot)")
  c=$(metric "$T/m.txt" "$(resets clear cleared)")
  if [ "${r:-0}" -ge 2 ] && [ "${c:-0}" -ge 2 ] && [ "$(awk '$2 >= 1e12' "$T/w-ren_9.txt" 2>/dev/null | wc -l)" -ge 2 ] &&
    awk -v e="$el" 'BEGIN {exit !(e > 9)}' && [ "$(detail rename renamed_interfaces)" -ge 2 ] &&
    [ "$(detail restart agent_restarts)" -ge 2 ]; then
    break
  fi
  sleep 0.3
done
cp "$T/m.txt" "$T/metrics-final.txt"
[ "$unhealthy" = 0 ] || fail "/healthz failed $unhealthy times under the hostile agents"
kill -0 "$FS_PID" || fail "fabricscope died"
ok "daemon healthy throughout ($(wc -l <"$T/w-dup_a.txt") scrapes)"

monotonic() { [ -s "$1" ] && awk 'NR > 1 && $2 + 0 < prev + 0 {bad = 1} {prev = $2} END {exit bad}' "$1"; }
# no_phantom FILE RATE: the exposed increase over the window is no more than RATE per
# second of it (plus two intervals of slack): nothing counted that the agent did not count.
no_phantom() {
  awk -v r="$2" 'NR == 1 {t0 = $1; v0 = $2} {t = $1; v = $2}
    END {inc = v - v0; lim = r * (t - t0 + 2.5); if (inc > lim || inc < 0) {print inc, lim; exit 1}}' "$1"
}

# --- duplicate names: own series, own values ---
for w in dup_a dup_b; do monotonic "$T/w-$w.txt" || fail "$w not monotonic: $(tr '\n' ' ' <"$T/w-$w.txt")"; done
M >"$T/m2.txt"
grep -q "$(bytes dup 'Eth1/5#8' rx)" "$T/m2.txt" || fail "the second Eth1/5 has no series of its own"
n=$(grep -c '^fabric_port_bytes_total{target="dup",.*direction="rx"' "$T/m2.txt")
[ "$n" = 6 ] || fail "6 ports with 3 name clashes should give 6 rx series, got $n"
b1=$(aget dup 1.3.6.1.2.1.31.1.1.1.6.1); b105=$(aget dup 1.3.6.1.2.1.31.1.1.1.6.105)
M >"$T/m3.txt"
a1=$(aget dup 1.3.6.1.2.1.31.1.1.1.6.1); a105=$(aget dup 1.3.6.1.2.1.31.1.1.1.6.105)
v1=$(metric "$T/m3.txt" "$(bytes dup Eth1/1 rx)"); v105=$(metric "$T/m3.txt" "$(bytes dup 'Eth1/1#105' rx)")
# Polled up to one interval before the scrape: the agent's reading 1.5 s before bounds it.
awk -v lo="$b1" -v v="$v1" -v hi="$a1" 'BEGIN {exit !(v <= hi && v >= lo - 1.5 * 1e6)}' ||
  fail "Eth1/1 (ifIndex 1) exports $v1, the agent counts [$b1, $a1]"
awk -v lo="$b105" -v v="$v105" -v hi="$a105" 'BEGIN {exit !(v <= hi && v >= lo - 1.5 * 2e6)}' ||
  fail "Eth1/1#105 exports $v105, the agent counts [$b105, $a105]"
[ "$(detail dup duplicate_names)" = 3 ] || fail "duplicate names not in /api/v1/targets: $(detail dup duplicate_names)"
[ "$(grep -c 'target dup: .*share a name' "$T/fabricscope.log")" = 1 ] || fail "duplicate names not logged exactly once"
ok "duplicate names: 6 series for 6 ports, each with its own port's count; reported once"

# --- renamed port: Eth1/2 never shows Eth1/9's 10^12 ---
monotonic "$T/w-ren_2.txt" || fail "Eth1/2 not monotonic: $(tr '\n' ' ' <"$T/w-ren_2.txt")"
awk '$2 >= 1e11 {exit 1}' "$T/w-ren_2.txt" || fail "Eth1/2 took the renamed port's counter: $(tr '\n' ' ' <"$T/w-ren_2.txt")"
awk '$2 < 1e12 {exit 1}' "$T/w-ren_9.txt" || fail "Eth1/9 took Eth1/2's counter: $(tr '\n' ' ' <"$T/w-ren_9.txt")"
[ "$(detail rename renamed_interfaces)" -ge 2 ] || fail "renames not reported: $(detail rename renamed_interfaces)"
ok "renamed port: each name keeps its own counter ($(detail rename renamed_interfaces) renames)"

# --- HC columns that come and go (bytes and the packet sum change width) ---
for w in flap_b flap_p; do monotonic "$T/w-$w.txt" || fail "$w not monotonic: $(tr '\n' ' ' <"$T/w-$w.txt")"; done
no_phantom "$T/w-flap_b.txt" 1.2e6 || fail "flap bytes grew by more than counted: $(no_phantom "$T/w-flap_b.txt" 1.2e6)"
no_phantom "$T/w-flap_p.txt" 1.7e3 || fail "flap packets grew by more than counted: $(no_phantom "$T/w-flap_p.txt" 1.7e3)"
ok "HC columns coming and going: no phantom bytes or packets"

# --- a cleared 32-bit counter on a 1 Gb/s port is a clear, not a wrap ---
monotonic "$T/w-clear_b.txt" || fail "cleared counter not monotonic"
no_phantom "$T/w-clear_b.txt" 1.2e6 || fail "a clear was read as a wrap: $(no_phantom "$T/w-clear_b.txt" 1.2e6)"
w=$(metric "$T/metrics-final.txt" "$(resets clear wrap)")
[ "${w:-0}" = 0 ] || fail "clears counted as $w wraps"
c=$(metric "$T/metrics-final.txt" "$(resets clear cleared)")
[ "${c:-0}" -ge 2 ] || fail "clears not counted ($c)"
ok "cleared 32-bit counter: $c clears, no wrap, no phantom"

# --- agent restarts (device uptime goes on) are not reboots ---
for w in restart_b nohr_b reboot_b; do monotonic "$T/w-$w.txt" || fail "$w not monotonic: $(tr '\n' ' ' <"$T/w-$w.txt")"; done
no_phantom "$T/w-restart_b.txt" 1.2e6 || fail "agent restart made the counter jump: $(no_phantom "$T/w-restart_b.txt" 1.2e6)"
no_phantom "$T/w-nohr_b.txt" 1.2e6 || fail "agent restart without hrSystemUptime made the counter jump: $(no_phantom "$T/w-nohr_b.txt" 1.2e6)"
ar=$(metric "$T/metrics-final.txt" "fabricscope_agent_restarts_total{target=\"restart\",source=\"snmp\"}")
[ "${ar:-0}" -ge 2 ] || fail "agent restarts not counted (${ar:-missing})"
[ "$(detail restart agent_restarts)" -ge 2 ] || fail "agent restarts not in /api/v1/targets"
r=$(metric "$T/metrics-final.txt" "$(resets restart reboot)")
[ "${r:-0}" = 0 ] || fail "agent restarts counted as $r reboots"
ok "agent restarts: $ar counted, no reboot, no jump (also without hrSystemUptime)"

# --- device reboots: counted, counters monotonic ---
r=$(metric "$T/metrics-final.txt" "$(resets reboot reboot)")
[ "${r:-0}" -ge 2 ] || fail "reboots not counted ($r)"
ar=$(metric "$T/metrics-final.txt" "fabricscope_agent_restarts_total{target=\"reboot\",source=\"snmp\"}")
[ "${ar:-0}" = 0 ] || fail "reboots counted as $ar agent restarts"
ok "device reboots: $r counted, counters monotonic"

# --- protocol abuse: the targets keep delivering ---
up() { metric "$T/metrics-final.txt" "fabricscope_target_up{target=\"$1\",source=\"snmp\"}"; }
grep -q "^$(bytes reqid Eth1/1 rx)" "$T/metrics-final.txt" || fail "no data through wrong request ids"
grep -q "^$(bytes nonincr Eth1/2 tx)" "$T/metrics-final.txt" || fail "no data next to a non-increasing column"
grep -q "^$(bytes endless Eth1/1 rx)" "$T/metrics-final.txt" || fail "no data from the endless-table agent"
[ "$(detail endless interface_limit_reached)" = true ] || fail "endless table: interface limit not reported"
[ "$(detail endless truncated_cycles)" -ge 2 ] || fail "endless table: truncations not counted"
p=$(metric "$T/metrics-final.txt" 'fabricscope_poll_errors_total{target="endless",source="snmp",kind="partial"}')
[ "${p:-0}" -ge 2 ] || fail "endless table: partial cycles not counted (${p:-missing})"
ok "wrong request ids, non-increasing OIDs, endless table: data keeps coming ($p partial cycles)"

# --- a slow vendor table: cycles cut at the deadline commit what arrived ---
p=$(metric "$T/metrics-final.txt" 'fabricscope_poll_errors_total{target="slow",source="snmp",kind="partial"}')
[ "${p:-0}" -ge 2 ] || fail "slow table: no partial cycles counted (${p:-missing})"
grep -q "^$(bytes slow Eth1/1 rx)" "$T/metrics-final.txt" || fail "slow table: no data kept from cut cycles"
now=$(date +%s)
curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" \
  --data-urlencode 'match[]=fabric_device_uptime_seconds{target="slow"}' \
  --data-urlencode "start=$((now - 8))" --data-urlencode "end=$((now + 1))" >"$T/raw-slow.json"
n=$(jq '.data.result[0].values | length' "$T/raw-slow.json")
[ "$n" -ge 4 ] || fail "slow table: only $n samples in 8 s"
ok "slow table: $p cycles cut at the deadline, their data kept ($n uptime samples in 8 s)"

# --- a poll longer than its interval: the walk cut last goes first next time ---
# Every answer of "tight" comes 300 ms late: the scalars, the interface data and the PFC
# table (3 requests, 900 ms) never fit the 800 ms budget of a 1 s interval. Walked in a
# fixed order, the PFC table would never be read.
pfc_tight='fabric_pfc_pause_seconds_total{target="tight",interface="Eth1/2",direction="rx",priority="3",source="snmp"}'
grep -q "^$(bytes tight Eth1/1 rx)" "$T/metrics-final.txt" || fail "tight: no interface data"
grep -q "^$pfc_tight" "$T/metrics-final.txt" || fail "tight: the PFC table was never walked"
v=$(metric "$T/metrics-final.txt" "$pfc_tight")
awk -v v="$v" 'BEGIN {exit !(v > 0)}' || fail "tight: PFC pause seconds of Eth1/2 is $v"
qf=$(detail tight qos_first_cycles)
[ "${qf:-0}" -ge 1 ] || fail "tight: no cycle walked QoS first (${qf:-missing})"
p=$(metric "$T/metrics-final.txt" 'fabricscope_poll_errors_total{target="tight",source="snmp",kind="partial"}')
ok "poll longer than its interval: interface data and PFC both kept ($qf of the cycles walked QoS first, $p partial)"

# --- a name that does not resolve delays nobody ---
e=$(M | awk '/^fabricscope_poll_errors_total\{target="nodns"/ {s += $2} END {print s + 0}')
[ "$e" -ge 1 ] || fail "unresolvable target's errors not counted"
nlog=$(grep -c 'cannot resolve does-not-resolve.invalid' "$T/fabricscope.log" || true)
[ "$nlog" -ge 1 ] || fail "resolution failure not logged"
# re-resolved with a doubling backoff (1, 2, 4 s ...), logged once per attempt, not per cycle
[ "$nlog" -lt "$e" ] || [ "$e" -le 4 ] || fail "resolution failure logged $nlog times for $e cycles"
[ "$nlog" -le 6 ] || fail "resolution retried $nlog times in ~10 s: no backoff"
now=$(date +%s)
curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" \
  --data-urlencode 'match[]=fabric_device_uptime_seconds{target="dup"}' \
  --data-urlencode "start=$((now - 8))" --data-urlencode "end=$((now + 1))" >"$T/raw.json"
gap=$(jq '[.data.result[0].values | . as $v | range(1; length) | ($v[.][0] - $v[. - 1][0])] | max' "$T/raw.json")
awk -v g="$gap" 'BEGIN {exit !(g < 1.6)}' || fail "a healthy target's largest gap is ${gap}s"
ok "unresolvable name: $e errors, $nlog resolution attempts, the others keep their 1 s cadence (largest gap ${gap}s)"

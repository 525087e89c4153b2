#!/usr/bin/env bash
# The sFlow driver against a real agent: Host sFlow's hsflowd 2.1.25 (tests/peers/,
# built here into the build tree once and cached in <build>/peers/hsflowd).
# Two network namespaces joined by a veth pair (agent side veth-hsf1, 10.77.0.1; peer side
# veth-hsf2, 10.77.0.2), made here and removed on exit. In the agent namespace hsflowd
# samples veth-hsf1 (libpcap, 1 in $RATE, kernel sampling) and polls its counters every
# $POLL s; it sends to a relay (sflow_relay.py) that passes datagrams on to fabricscope,
# all on that namespace's loopback. The peer namespace sends the traffic (Python UDP
# senders with known packet counts). A scraper reads /metrics, /api/v1/targets and the
# kernel's counters of veth-hsf1 every 250 ms for the whole test.
# Checked and printed:
#  1. Counters. hsflowd counts from its own start (its first reading is its zero; it
#     reads the same kernel counters), so the kernel's absolute counts are not what it
#     sends. Exact, at two quiet points (no traffic, static neighbours, no IPv6): the
#     kernel's counters read, then two counter polls newer than that awaited, then the
#     exported rx/tx packets and bytes of veth-hsf1 read, and the kernel's read again
#     (unchanged, else the point is taken again). Over the burst (between the points)
#     the exported counters grow exactly as the kernel's. Across the restarts (from before
#     the first start to the first point) they miss only the frames no instance saw
#     (between an instance's last poll and its successor's first reading), trickle
#     frames of 142 bytes: the bytes missed are exactly 142 x the packets missed (the
#     driver once dropped the packets of a restarted agent's first sample).
#  2. The burst rule's estimate (samples x rate) within 4 sigma of the binomial around
#     the N_BURST packets sent (each sampled with p = 1/RATE by the kernel's filter).
#  3. The port named veth-hsf1 by the agent's record 1005 (no other source names it), no
#     ifIndex<N> series.
#  4. Restarts (SIGKILL, then a new hsflowd) while the trickle runs: the first instance
#     once its first counter sample arrived, the next 3 s after its start, the one after
#     that 13 s after its start: three agent_restart resets; no scraped port counter ever
#     going down or above the kernel's count read after it (so no jump beyond the
#     traffic); the target up from its first datagram to the end. During the burst the
#     relay duplicates every 5th and swaps every 7th datagram: no further restart, every
#     duplicate dropped and counted (sflow_duplicates; a swapped datagram that arrives
#     after the commit that declared it lost is dropped as a duplicate too).
# The relay keeps every datagram in $T/datagrams (tests/fs-sflow-dump decodes them).
# A restart 5 minutes after the start is left out of ctest (too long for the time
# budget); test_sflow_agg covers it on synthetic datagrams.
# Needs root (network namespaces), libpcap-dev, clang and make (scripts/install-deps.sh).
source "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
for c in ip make clang curl jq; do
  command -v "$c" >/dev/null || fail "needs $c (scripts/install-deps.sh)"
done
[ -f /usr/include/pcap/pcap.h ] || fail "needs libpcap-dev (scripts/install-deps.sh)"

RATE=20 POLL=2
N_BURST=20000

# ---- hsflowd: extracted and built in the build tree, never in the source tree.
PEERS=$FS_SOURCE_DIR/tests/peers
HSF=$FS_BUILD_DIR/peers/hsflowd
if [ ! -x "$HSF/hsflowd" ] || [ ! -f "$HSF/mod_pcap.so" ]; then
  (cd "$PEERS" && sha256sum -c --quiet host-sflow-6799353.tar.gz.sha256) ||
    fail "tests/peers/host-sflow-6799353.tar.gz does not match its sha256"
  mkdir -p "$FS_BUILD_DIR/peers"
  work=$(mktemp -d "$FS_BUILD_DIR/peers/build.XXXXXX")
  tar -xzf "$PEERS/host-sflow-6799353.tar.gz" -C "$work"
  t_b=$SECONDS
  make -C "$work/host-sflow-6799353" FEATURES=PCAP >"$work/make.log" 2>&1 ||
    fail "hsflowd build failed: $(tail -n 20 "$work/make.log")"
  mkdir -p "$work/out"
  cp "$work/host-sflow-6799353/src/Linux/hsflowd" "$work"/host-sflow-6799353/src/Linux/mod_*.so "$work/out/"
  # Another run may have finished first: either copy is the same build.
  mv -T "$work/out" "$HSF" 2>/dev/null || true
  rm -rf "$work"
  echo "# hsflowd built in $((SECONDS - t_b)) s into $HSF"
fi
[ -x "$HSF/hsflowd" ] || fail "no hsflowd in $HSF"
"$HSF/hsflowd" -v | grep -q '2\.1\.25' || fail "unexpected hsflowd: $("$HSF/hsflowd" -v)"

# ---- the namespaces and the veth pair
SUF=$$-$RANDOM
NA=fshsf-a-$SUF NB=fshsf-b-$SUF
IFA=veth-hsf1 IFB=veth-hsf2
ns_cleanup() {
  local ns
  touch "$T/stop" 2>/dev/null || true
  for ns in "$NA" "$NB"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
  done
  for ns in "$NA" "$NB"; do
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  return 0
}
trap 'rc=$?; ns_cleanup; set +e; (exit $rc); cleanup' EXIT
trap 'exit 130' INT TERM

ip netns add "$NA" || fail "ip netns add $NA"
ip netns add "$NB" || fail "ip netns add $NB"
ip link add "$IFA" netns "$NA" type veth peer name "$IFB" netns "$NB" || fail "veth pair"
for x in "$NA $IFA 10.77.0.1" "$NB $IFB 10.77.0.2"; do
  set -- $x
  # No IPv6: no router solicitations or MLD reports on the veth while we count.
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip netns exec "$1" ip link set lo up
  ip netns exec "$1" ip addr add "$3/30" dev "$2"
  ip netns exec "$1" ip link set "$2" up
done
inA() { ip netns exec "$NA" "$@"; }
inB() { ip netns exec "$NB" "$@"; }
# Static neighbours: no ARP on the veth while counters are compared.
MACA=$(inA cat "/sys/class/net/$IFA/address") MACB=$(inB cat "/sys/class/net/$IFB/address")
inA ip neigh replace 10.77.0.2 lladdr "$MACB" dev "$IFA" nud permanent
inB ip neigh replace 10.77.0.1 lladdr "$MACA" dev "$IFB" nud permanent

# ---- fabricscope, the relay and a UDP sink (no ICMP unreachables back) in namespace A
HTTP=9464 FS_UDP=6343 RELAY=6344 # the namespace's own loopback: nothing else listens there
cat >"$T/fs.yaml" <<YAML
listen: 127.0.0.1:$HTTP
flow_rules:
  - { name: burst, protocol: udp, dst_port: 5001 }
  - { name: trickle, protocol: udp, dst_port: 5002 }
targets:
  - name: host1
    address: 10.77.0.1
    sflow: { listen: 127.0.0.1, port: $FS_UDP, interval: 1s, counter_interval: ${POLL}s,
             sources: [127.0.0.1] }
YAML
"$FABRICSCOPE" --check-config "$T/fs.yaml" >"$T/check.out" 2>&1 || fail "config refused: $(cat "$T/check.out")"
# Background processes are started with ip netns exec itself, not through inA: it execs
# the program, so $! is the program (a function would put a subshell in between).
ip netns exec "$NA" "$FABRICSCOPE" -c "$T/fs.yaml" >"$T/fabricscope.log" 2>&1 &
FS_PID=$!
track "$FS_PID"
URL=http://127.0.0.1:$HTTP
wait_for 20 "fabricscope answers" inA curl -fsS -o /dev/null "$URL/healthz"
wait_for 20 "the sFlow socket is bound" grep -q "listening on 127.0.0.1:$FS_UDP" "$T/fabricscope.log"

mkdir "$T/datagrams" # what hsflowd sent, for fs-sflow-dump when a check fails
ip netns exec "$NA" "$PY" "$FS_SOURCE_DIR/tests/integration/sflow_relay.py" --listen "127.0.0.1:$RELAY" \
  --to "127.0.0.1:$FS_UDP" --chaos-file "$T/chaos" --stats "$T/relay.json" --save "$T/datagrams" >"$T/relay.log" 2>&1 &
track $!
wait_for 20 "the relay is up" test -s "$T/relay.json"
ip netns exec "$NA" "$PY" -c '
import select, socket, sys
ss = []
for p in (5001, 5002):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.77.0.1", p)); ss.append(s)
while True:
    for s in select.select(ss, [], [])[0]:
        s.recv(65535)
' >"$T/sink.log" 2>&1 &
track $!

# ---- the scraper: /metrics, the target's state and the kernel's counters, every 250 ms
ip netns exec "$NA" "$PY" - "$URL" "$IFA" "$T/scrape.jsonl" "$T/stop" <<'PY' >"$T/scraper.log" 2>&1 &
import json, os, sys, time, urllib.request
url, ifname, out, stop = sys.argv[1:]
def kern():
    return {k: int(open(f"/sys/class/net/{ifname}/statistics/{k}").read())
            for k in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")}
with open(out, "a") as f:
    while not os.path.exists(stop):
        try:
            m = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
            tg = json.load(urllib.request.urlopen(url + "/api/v1/targets", timeout=5))
        except Exception as e:
            print("scrape failed:", e, flush=True)
            time.sleep(0.25)
            continue
        k = kern()  # read after the scrape: what the exported values can at most be
        s = {}
        for line in m.splitlines():
            if line.startswith("#"):
                continue
            if ('source="sflow"' in line and
                    (line.startswith("fabric_port_") or line.startswith("fabric_flow_rule_packets_total")
                     or line.startswith("fabricscope_target_up") or line.startswith("fabricscope_sflow_"))):
                name, _, v = line.rpartition(" ")
                s[name] = float(v)
        st = [t for t in tg["data"] if t["target"] == "host1" and t["source"] == "sflow"]
        f.write(json.dumps({"t": time.time(), "m": s, "k": k, "state": st[0]["state"] if st else None,
                            "dg": st[0].get("sflow_datagrams") if st else None}) + "\n")
        f.flush()
        time.sleep(0.25)
PY
track $!

# ---- hsflowd in namespace A
cat >"$T/hsflowd.conf" <<EOF
sflow {
  agentIP = 10.77.0.1
  polling = $POLL
  collector { ip = 127.0.0.1 udpport = $RELAY }
  pcap { dev = $IFA sampling = $RATE }
}
EOF
HSF_PID=
start_hsflowd() { # -P: stay root (pcap); -o/-p: its .auto and pid files in $T, not /etc, /var
  ip netns exec "$NA" "$HSF/hsflowd" -d -P -f "$T/hsflowd.conf" -l "$HSF" -p "$T/hsflowd.pid" -o "$T/hsflowd.auto" \
    >>"$T/hsflowd.log" 2>&1 &
  HSF_PID=$!
  HSF_START=$(_us)
  track "$HSF_PID"
}
stop_hsflowd() {
  kill -KILL "$HSF_PID"
  wait "$HSF_PID" 2>/dev/null || true
}
# Wall-clock microseconds, in bash itself (a Python start takes up to a second on a
# loaded machine); sleep_until_age US: the scenario's own timing (restarts at fixed
# ages of the running instance), not a wait for a state.
_us() { local t=$EPOCHREALTIME; echo "${t/./}"; }
sleep_until_age() {
  local d=$((HSF_START + $1 - $(_us)))
  [ "$d" -le 0 ] || sleep "$((d / 1000000)).$(printf '%06d' $((d % 1000000)))"
}
age() { local d=$(($(_us) - HSF_START)); echo "$((d / 1000000)).$(printf '%02d' $((d % 1000000 / 10000)))"; }

MJ() { inA curl -fsS "$URL/metrics" >"$T/m.txt" && inA curl -fsS "$URL/api/v1/targets" >"$T/targets.json"; }
value() { awk -v k="$1" 'index($0, k " ") == 1 {print $2; exit}' "$T/m.txt"; }
tgt() { jq -r --arg k "$1" '.data[] | select(.target == "host1" and .source == "sflow") | .[$k]' "$T/targets.json"; }
S='source="sflow"'
RESTARTS="fabricscope_sflow_sequence_resets_total{target=\"host1\",kind=\"agent_restart\",$S}"
restarts_are() { MJ && [ "$(value "$RESTARTS")" = "$1" ]; }

k() { inA cat "/sys/class/net/$IFA/statistics/$1"; }
kern4() { echo "$(k rx_packets) $(k rx_bytes) $(k tx_packets) $(k tx_bytes)"; }
PORT="interface=\"$IFA\""
exported4() {
  local d
  for d in rx tx; do
    printf '%s %s ' "$(value "fabric_port_packets_total{target=\"host1\",$PORT,direction=\"$d\",$S}")" \
      "$(value "fabric_port_bytes_total{target=\"host1\",$PORT,direction=\"$d\",$S}")"
  done | sed 's/ $//'
}
_counters_above() { MJ && [ "$(tgt sflow_counter_samples)" -ge "$1" ]; }
# quiet_point NAME: with no traffic on the veth, the kernel's counters (KERN) and, after
# two counter polls newer than that read, the exported ones (EXP); again when the
# kernel's moved meanwhile. hsflowd polls lo, veth-hsf1 and the host (2:1) every POLL s:
# six more counter samples are two polls of each, the second entirely after the read.
quiet_point() {
  local c0 k2
  for _ in 1 2 3; do
    KERN=$(kern4)
    MJ
    c0=$(tgt sflow_counter_samples)
    wait_for 20 "two counter polls after the kernel's counters were read" _counters_above $((c0 + 6))
    MJ
    EXP=$(exported4)
    k2=$(kern4)
    echo "# $1: $IFA kernel rx/tx packets bytes: $KERN; exported: $EXP"
    [ "$k2" = "$KERN" ] && return 0
    echo "# the kernel's counters moved during the check ($k2): again"
  done
  fail "the kernel's counters of $IFA never stood still"
}
K0=$(kern4)
echo "# $IFA before hsflowd: kernel rx/tx packets bytes $K0"

# The first instance runs with the veth quiet until its first counter sample of it
# arrived: the port's first sample only sets the driver's packets base, and counts
# nothing here. Then the trickle (200 packets/s of 142-byte frames to port 5002) moves
# the port's counters while the agent is restarted: once at once, then the next
# instance is killed 3 s after its start, and the one after that 13 s after its start.
start_hsflowd
S0=$HSF_START # microseconds
_has_port() { MJ && grep -q "fabric_port_packets_total{target=\"host1\",$PORT," "$T/m.txt"; }
wait_for 20 "the first counter sample of $IFA" _has_port
ip netns exec "$NB" "$PY" - "$T/trickle-stop" <<'PY' >"$T/trickle.log" 2>&1 &
import os, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n = 0
while not os.path.exists(sys.argv[1]):
    s.sendto(b"t" * 100, ("10.77.0.1", 5002))
    n += 1
    time.sleep(0.005)
print(n)
PY
TRICKLE_PID=$!
track "$TRICKLE_PID"
stop_hsflowd
start_hsflowd
# Not awaited before the kill (its datagrams come a second or more after its start,
# its flow samples first); two restarts counted say it sent before it was killed.
sleep_until_age 3000000
A1=$(age)
stop_hsflowd
start_hsflowd
wait_for 20 "the restart 3 s after the start is counted" restarts_are 2
ok "hsflowd restarted, then killed $A1 s after its start and started again: each counted as a restart"
sleep_until_age 13000000
A2=$(age)
stop_hsflowd
start_hsflowd
wait_for 20 "the restart 13 s after the previous start is counted" restarts_are 3
ok "hsflowd killed $A2 s after its start and started again: counted as a restart (3 restarts in all)"
# Its first counter sample of the veth, with trickle packets in it (what it counted since
# its start), then the trickle stops.
c0=$(tgt sflow_counter_samples)
wait_for 20 "the third instance's first counter poll" _counters_above $((c0 + 3))
touch "$T/trickle-stop"
wait "$TRICKLE_PID" || fail "the trickle sender failed"
echo "# trickle: $(cat "$T/trickle.log") packets"

# ---- 1. counters: across the restarts, and exact over the burst
quiet_point "after the restarts"
read -r K0rp K0rb K0tp K0tb <<<"$K0"
read -r KArp KArb KAtp KAtb <<<"$KERN"
read -r EArp EArb EAtp EAtb <<<"$EXP"
# hsflowd counts from its own start (its first reading is its zero), so what crossed the
# veth between an instance's last poll and its successor's start is in no sample: only
# trickle frames (142 bytes each; nothing else crosses: no IPv6, static neighbours).
# Packets and octets must have lost exactly the same frames.
LP=$((KArp - K0rp - EArp)) LB=$((KArb - K0rb - EArb))
echo "# not seen by any hsflowd instance: $LP packets, $LB bytes (142 x $LP = $((142 * LP)))"
[ "$LB" = $((142 * LP)) ] || fail "packets and bytes lost different frames across the restarts"
NT=$(cat "$T/trickle.log")
[ "$LP" -ge 0 ] && [ "$LP" -le "$NT" ] || fail "$LP packets unseen, but only $NT trickle packets were sent"
[ "$((KAtp - K0tp - EAtp)) $((KAtb - K0tb - EAtb))" = "0 0" ] || fail "tx counters of $IFA differ"

MJ
DUP0=$(tgt sflow_duplicates) LOST0=$(tgt sflow_lost_datagrams)
touch "$T/chaos"
inB "$PY" - "$N_BURST" <<'PY' >"$T/burst.log" 2>&1 || fail "the burst sender failed"
import socket, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(n):
    s.sendto(b"b" * 200, ("10.77.0.1", 5001))
    if i % 50 == 49:
        time.sleep(0.002)  # about 20k packets/s: far below what the sampler keeps up with
print(n)
PY
quiet_point "after the burst"
read -r KBrp KBrb KBtp KBtb <<<"$KERN"
read -r EBrp EBrb EBtp EBtb <<<"$EXP"
echo "# burst: kernel +$((KBrp - KArp)) rx packets +$((KBrb - KArb)) rx bytes; exported +$((EBrp - EArp)) +$((EBrb - EArb))"
[ "$((EBrp - EArp)) $((EBrb - EArb)) $((EBtp - EAtp)) $((EBtb - EAtb))" = \
  "$((KBrp - KArp)) $((KBrb - KArb)) $((KBtp - KAtp)) $((KBtb - KAtb))" ] ||
  fail "exported counters of $IFA grew unlike the kernel's over the burst"
ok "1. counters of $IFA: over the burst exactly the kernel's (rx/tx packets and bytes); across restarts only the frames no instance saw, alike in packets and bytes"
MJ

# ---- 2. the burst's estimate
EST=$(value "fabric_flow_rule_packets_total{target=\"host1\",rule=\"burst\",$PORT,$S}")
[ -n "$EST" ] || fail "no burst estimate on $IFA: $(grep burst "$T/m.txt")"
$PY - "$EST" "$N_BURST" "$RATE" <<'PY' || fail "the burst estimate is outside 4 sigma"
import math, sys
est, n, r = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
samples = est / r
sd = math.sqrt(n * (1 / r) * (1 - 1 / r))  # binomial: each packet sampled with p = 1/r
z = (samples - n / r) / sd
print(f"# burst: {n} packets sent, {samples:.0f} samples x {r} = {est:.0f} estimated "
      f"({100 * (est - n) / n:+.2f}%), z = {z:+.2f} (bound |z| <= 4, sigma {sd * r:.0f} packets)")
sys.exit(0 if abs(z) <= 4 else 1)
PY
ok "2. burst estimate within 4 sigma of the true count"

# ---- 3. the port's name from record 1005
grep -q "fabric_port_packets_total{target=\"host1\",$PORT," "$T/m.txt" || fail "no port named $IFA"
! grep -q 'interface="ifIndex' "$T/m.txt" || fail "an ifIndex<N> series: $(grep 'interface="ifIndex' "$T/m.txt" | head -3)"
ok "3. the port is named $IFA (hsflowd's record 1005), no ifIndex<N> series"

# ---- 4. restarts, duplicates, reordering, monotone counters, never down
# Chaos off; then every datagram the relay had sent (duplicates included) has reached
# the driver once it accepted or dropped as many: its counts then are final.
rm -f "$T/chaos"
wait_for 5 "the relay holds nothing back" jq -e '.forwarded == .received + .duplicated' "$T/relay.json"
cp "$T/relay.json" "$T/relay-final.json"
_driver_has() { MJ && [ $(($(tgt sflow_datagrams) + $(tgt sflow_duplicates))) -ge "$1" ]; }
wait_for 20 "the driver took every relayed datagram" _driver_has "$(jq .forwarded "$T/relay-final.json")"
RS=$(value "$RESTARTS")
DUP1=$(tgt sflow_duplicates) LOST1=$(tgt sflow_lost_datagrams)
touch "$T/stop"
echo "# relay: $(cat "$T/relay-final.json"); driver: duplicates $DUP0 -> $DUP1, lost datagrams $LOST0 -> $LOST1, agent restarts $RS"
[ "$RS" = 3 ] || fail "agent restarts $RS after the relay's duplicates and swaps, not 3"
$PY - "$T/relay-final.json" "$DUP0" "$DUP1" "$LOST0" "$LOST1" <<'PY' || fail "duplicates"
import json, sys
r = json.load(open(sys.argv[1]))
dup0, dup1, lost0, lost1 = map(int, sys.argv[2:])
assert r["duplicated"] >= 5 and r["swapped"] >= 3, f"too little chaos: {r}"
# Each relayed copy is a duplicate; a swapped datagram that came late after a commit was
# declared lost there and is then dropped as a duplicate too.
assert dup1 - dup0 == r["duplicated"] + (lost1 - lost0), (dup1 - dup0, r, lost1 - lost0)
assert lost1 - lost0 <= r["swapped"] + r["held_alone"], (lost1 - lost0, r)
PY
ok "4a. duplicated and swapped datagrams of the real agent: no restart, duplicates dropped and counted"

$PY - "$T/scrape.jsonl" "$IFA" "$S0" <<'PY' || fail "the scraped series"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ifa, s1 = sys.argv[2], float(sys.argv[3]) / 1e6  # the first start, in microseconds
keys = {}
for d in ("rx", "tx"):
    keys[f'fabric_port_packets_total{{target="host1",interface="{ifa}",direction="{d}",source="sflow"}}'] = f"{d}_packets"
    keys[f'fabric_port_bytes_total{{target="host1",interface="{ifa}",direction="{d}",source="sflow"}}'] = f"{d}_bytes"
prev, steps, n, first_up = {}, {}, 0, None
for r in rows:
    for m, kk in keys.items():
        v = r["m"].get(m)
        if v is None:
            continue
        n += 1
        assert v <= r["k"][kk], f"{m} = {v} above the kernel's {r['k'][kk]} read after it"
        if m in prev:
            assert v >= prev[m], f"{m} went down: {prev[m]} -> {v}"
            steps[m] = max(steps.get(m, 0), v - prev[m])
        prev[m] = v
    if r["state"] == "up" and first_up is None:
        first_up = r["t"]
    if first_up is not None:
        assert r["state"] == "up", f"the target is {r['state']} at {r['t'] - s1:.1f} s"
for m, kk in keys.items():
    assert m in prev, f"{m} never scraped"
rules = [k for k in rows[-1]["m"] if k.startswith("fabric_flow_rule_packets_total")]
for m in rules:
    vals = [r["m"][m] for r in rows if m in r["m"]]
    assert all(b >= a for a, b in zip(vals, vals[1:])), f"{m} went down"
print(f"# scraped {len(rows)} times over {rows[-1]['t'] - rows[0]['t']:.0f} s ({n} port counter samples): "
      "monotone, never above the kernel's; largest steps " +
      ", ".join(f"{keys[m]} {steps.get(m, 0):.0f}" for m in keys) +
      f"; target up from {first_up - s1:.1f} s after the first start to the end")
PY
ok "4b. port counters monotone and never above the kernel's, target up throughout"

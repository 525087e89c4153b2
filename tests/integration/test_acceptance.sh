#!/usr/bin/env bash
# Acceptance test of issue 9: the source story, time-compressed, through the real binary,
# the real drivers and the real simulators.
#
# Two simulated TORs of 64 ports (tor1, tor2), each polled over SNMP (onyx-snmp-sim
# behind a real snmpd), the ONYX CLI (onyx_sim.py behind a real sshd) and gNMI
# (gnmi_sim.py over gRPC with TLS); the three simulators of a TOR share one scenario file
# (tests/sim/scenario.py), a busy fabric: most ports at their own ECN-mark and queue
# level with noise, some with random incast bursts. On tor1, every 30 s for 2 s, Eth1/49
# tc 3 has an ECN surge and a full egress queue; tor1's clock runs 250 ms ahead (clock_offset_ms). The host
# side (acceptance_gen.py) runs 40 ms behind the collector and posts AllReduce ranges
# every 100 ms that stretch during the surges, plus random slowdowns at other times;
# during each surge it turns on an nftables drop rule for a real TCP stream in a network
# namespace, a real `perf record -k mono -e tcp:tcp_retransmit_skb -a` records the
# retransmits and `fabricscope import-perf` posts them.
#
# Checked before the run: each simulator applies its clock offset (sim_clock_check.py:
# ONYX `show clock` by second-edge detection, gNMI timestamps against arrival; the SNMP
# simulator serves no hrSystemDate.0).
# Checked afterwards: /api/v1/correlate ranks tor1 Eth1/49 first for >= 90% of the
# surge-time slow events and for <= 10% of the random ones; per (target, source) clock
# offsets in /api/v1/targets (each estimate honest; ONYX CLI and gNMI within 20 ms of
# 250 ms (tor1) and 0 (tor2), gNMI within 5 ms; the SNMP simulator serves no
# hrSystemDate, so its offset must be unknown, not invented);
# the host offset -40 ms +- 5 ms; every retransmit the drops caused inside its surge
# window on the collector's axis (a stray one far from every drop window, which a loaded
# machine makes now and then, is reported and allowed for 5%); /api/v1/incidents: period 30 s +- 1 s and the next surge
# predicted within 1 s; the Perfetto export of a surge window is valid trace-event JSON
# in which the ECN counter of tor1 Eth1/49 rises inside a stretched AllReduce slice.
# Prints BENCH correlate_time_to_culprit_s (from the last surge's end until /correlate
# for that window and /incidents both name tor1 Eth1/49; goal <= 10 s, held except in a
# sanitizer build).
# Needs root (sshd, network namespaces, nftables, perf). Cleans up everything it made.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf live there, not in pyenv
# The checks after the run do not stop at the first failure: each failing one says
# "not ok - CHECK: WHY" and the test fails at the end, listing them.
FAILED=()
not_ok() {
  local why=""
  [ -s "$T/check.err" ] && why=": $(grep -v '^Traceback\|^  ' "$T/check.err" | tail -n 1 | tr '\n' ' ')"
  echo "not ok - $1$why" >&2
  FAILED+=("$1$why")
  return 0
}
PERIOD=30 DURATION=2 COUNT=6 LEAD=30
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$FS_BUILD_DIR/sim/onyx-snmp-sim" ] || fail "build onyx-snmp-sim first"
[ "$(id -u)" = 0 ] || fail "needs root (sshd, network namespaces, nftables, perf)"
for c in perf nft ip openssl; do command -v "$c" >/dev/null || fail "needs $c"; done
$PY -c 'import grpc, google.protobuf' || fail "python3-grpcio / python3-protobuf missing"
chmod 0711 "$T" # the ONYX simulator runs as the test user and reads the scenario files

# ---- the namespace, its nftables table and perf are ours: removed on every exit
NS=fsacc-$$-$RANDOM
NFT_TABLE=fsacc
PERF_PID=""
acceptance_cleanup() {
  if [ -n "$PERF_PID" ]; then kill -INT "$PERF_PID" 2>/dev/null || true; fi
  if ip netns list | grep -qw "$NS"; then
    ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns exec "$NS" nft delete table inet "$NFT_TABLE" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
  fi
  return 0
}
# lib.sh's cleanup (every tracked process, the scratch dir) runs after ours, with the
# test's exit status.
trap 'rc=$?; acceptance_cleanup; set +e; (exit $rc); cleanup' EXIT
trap 'exit 130' INT TERM

# ---- the scenarios: surges on tor1 only, first one LEAD s from now
NOW=$(date +%s)
BOOT=$((NOW - 100)) PHASE=$((100 + LEAD))
# Both TORs are busy fabrics (scenario.py "busy"; on tor1 the culprit port is busy and
# bursty itself): most ports carry ECN marks and queue
# at their own level with noise, and a share of them have random incast bursts (3 s every
# ~5 min each), so a suspect must stand out against a busy fabric. Like a real ONYX
# switch they have no `show telemetry flows`: per-rule drops come from the WJH table (a
# 10 s window), whose rows are also timestamped switch events.
cat >"$T/tor1.json" <<EOF
{"ports": 64, "boot_epoch_s": $BOOT, "clock_offset_ms": 250, "onyx_wjh_window_s": 10, "onyx_lacks": ["show telemetry flows"],
 "busy": {"seed": 12},
 "congestion": {"port": 49, "tc": 3, "period_s": $PERIOD, "duration_s": $DURATION, "phase_s": $PHASE}}
EOF
# tor2: the same kind of switch without incidents (its first surge would be 30 years away)
cat >"$T/tor2.json" <<EOF
{"ports": 64, "boot_epoch_s": $BOOT, "clock_offset_ms": 0, "onyx_wjh_window_s": 10, "onyx_lacks": ["show telemetry flows"],
 "busy": {"seed": 11},
 "congestion": {"port": 49, "tc": 3, "period_s": $PERIOD, "duration_s": $DURATION, "phase_s": 1e9}}
EOF
chmod 0644 "$T/tor1.json" "$T/tor2.json"

# ---- the simulators, three per TOR (lib.sh start_tor)
export SNMP_PERSISTENT_DIR=$T/snmp-persist MIBS=""
mkdir -p "$SNMP_PERSISTENT_DIR"
make_gnmi_certs
for tor in tor1 tor2; do start_tor "$tor" "$T/$tor.json"; done
cd "$T"
ok "simulators: 2 TORs x (SNMP, ONYX CLI, gNMI), one scenario file per TOR"

# Each simulator applies its scenario's clock offset (checked without fabricscope, so a
# wrong offset in /api/v1/targets later is the collector's): ONYX `show clock` by
# second-edge detection over one session, gNMI notification timestamps against their
# arrival. The SNMP simulator serves no hrSystemDate (the SNMP source has no clock).
CLOCKCHK=$FS_SOURCE_DIR/tests/integration/sim_clock_check.py
[ -x "$FS_BUILD_DIR/tests/fs-gnmi-stream" ] || fail "build fs-gnmi-stream first"
for tor in tor1 tor2; do
  want=$([ $tor = tor1 ] && echo 250 || echo 0)
  # shellcheck disable=SC1090
  source "${CLI_ENV[$tor]}"
  $PY "$CLOCKCHK" onyx --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --key "$ONYX_KEY_FILE" \
    --known-hosts "$ONYX_KNOWN_HOSTS" --expect-ms "$want" >"$T/clk-onyx-$tor.out" 2>&1 ||
    fail "$tor's ONYX simulator does not apply clock_offset_ms $want: $(cat "$T/clk-onyx-$tor.out")"
  $PY "$CLOCKCHK" gnmi --stream "$FS_BUILD_DIR/tests/fs-gnmi-stream" --expect-ms "$want" -- \
    --port "${GNMI_PORT[$tor]}" --ca "$T/ca.pem" --server-name gnmi-sim.test --username monitor \
    --password-file "$T/gnmi-pw.txt" --mode stream --duration-ms 2000 \
    --path '/qos/interfaces/interface[interface-id=Eth1/49]/output/queues,sample,100' >"$T/clk-gnmi-$tor.out" 2>&1 ||
    fail "$tor's gNMI simulator does not apply clock_offset_ms $want: $(cat "$T/clk-gnmi-$tor.out")"
  snmpget -v2c -c "$(head -n1 "${COMM[$tor]}")" -On -t 1 -r 1 "udp:127.0.0.1:${SNMP_PORT[$tor]}" \
    1.3.6.1.2.1.25.1.2.0 >"$T/clk-snmp-$tor.out" 2>&1 || true
  grep -q 'No Such Object\|No Such Instance' "$T/clk-snmp-$tor.out" ||
    fail "$tor's SNMP simulator answers hrSystemDate.0 (update this test: its offset can then be checked): $(cat "$T/clk-snmp-$tor.out")"
  echo "# $tor ($want ms): $(cat "$T/clk-onyx-$tor.out"); $(cat "$T/clk-gnmi-$tor.out"); SNMP hrSystemDate.0: not served"
done
ok "the simulators apply clock_offset_ms (ONYX show clock, gNMI timestamps); the SNMP simulator serves no hrSystemDate"

# ---- the collector
SANITIZE=$(sed -n 's/^SANITIZE:[A-Z]*=//p' "$FS_BUILD_DIR/CMakeCache.txt" 2>/dev/null || true)
# A sanitizer build reads its gNMI streams late when the machine is busy (best delivery of
# a whole minute 7-9 ms late, seen under ASan): the assumption the gNMI clock's bound rests
# on is configured to match, as a user on a loaded collector would, and checked as stated.
GNMI_DELAY_MS=5
[ -z "$SANITIZE" ] || GNMI_DELAY_MS=25
export TOR_GNMI_MAX_DELIVERY_DELAY=${GNMI_DELAY_MS}ms
HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; echo "$TOKEN" >"$T/he.token")
{
  cat <<EOF
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/he.token, memory_limit: 64MiB, retention: 1h }
flow_rules:
  - { name: nccl-sockets, protocol: tcp, dst_ports: 50000-50999 }
targets:
EOF
  for tor in tor1 tor2; do tor_target_yaml "$tor"; done
} >"$T/fs.yaml"
"$FABRICSCOPE" --check-config "$T/fs.yaml" >"$T/check.out" 2>&1 || fail "config refused: $(cat "$T/check.out")"
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
all_up() {
  tors_up "$URL" tor1 tor2 &&
    grep -q '^fabric_queue_ecn_marked_packets_total{target="tor1",interface="Eth1/49",tc="3",source="gnmi"}' "$T/m.txt"
}
wait_for 60 "tor1 and tor2 up over snmp, cli and gnmi" all_up
ok "fabricscope polls tor1 and tor2 over SNMP, the ONYX CLI and gNMI"

# ---- the TCP stream in a network namespace, with an (empty) nftables chain to drop in.
# The drop is on the input hook: a packet dropped at output is a local send error that
# TCP holds and resends without a retransmit event (the stream stalled, no
# tcp_retransmit_skb, on this machine); one dropped at input is lost on the wire.
DPORT=$((50000 + RANDOM % 1000))
ip netns add "$NS" || fail "ip netns add $NS"
ip netns exec "$NS" ip link set lo up mtu 1500
# A small minimum RTO: a segment lost near the end of the drop window is retransmitted
# within milliseconds, not after a 200 ms+ backoff that could leave the surge.
ip netns exec "$NS" ip route replace local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1 rto_min 20ms
ip netns exec "$NS" ip route replace local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1 rto_min 20ms
ip netns exec "$NS" nft -f - <<EOF || fail "nftables table in $NS"
table inet $NFT_TABLE {
  chain in { type filter hook input priority 0; policy accept; }
}
EOF
cat >"$T/stream.py" <<'EOF'
# A rate-limited bulk TCP stream on loopback (about 6 MB/s): receiver and sender.
import socket, sys, threading, time
port = int(sys.argv[1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(1)
def sink():
    c, _ = srv.accept()
    while c.recv(1 << 16):
        pass
threading.Thread(target=sink, daemon=True).start()
s = socket.create_connection(("127.0.0.1", port))
buf = b"x" * 16384
print("streaming", flush=True)
while True:
    s.sendall(buf)
    time.sleep(0.0025)
EOF
ip netns exec "$NS" $PY "$T/stream.py" "$DPORT" >"$T/stream.log" 2>&1 &
track $!
wait_for 10 "the TCP stream runs" grep -q streaming "$T/stream.log"

PERF_T0=$(date +%s.%N)
perf record -k mono -e tcp:tcp_retransmit_skb -a -q -o "$T/perf.data" >"$T/perf.log" 2>&1 &
PERF_PID=$!
track "$PERF_PID"
wait_for 15 "perf records" test -s "$T/perf.data"
ok "TCP stream to port $DPORT in netns $NS; perf record -k mono -e tcp:tcp_retransmit_skb -a running"

# ---- the story: COUNT surges, host events, drops
# The first surge the generator plays is the first that starts at least 8 s from now
# (a baseline before it).
FIRST_K=$($PY -c 'import math,sys,time; b,p,P=map(float,sys.argv[1:4]); print(max(0, math.ceil((time.time() + 8 - b - p) / P)))' "$BOOT" "$PHASE" "$PERIOD")
echo "# first surge played: #$FIRST_K, at $((BOOT + PHASE + FIRST_K * PERIOD)) ($((BOOT + PHASE + FIRST_K * PERIOD - $(date +%s))) s from now)"
$PY "$FS_SOURCE_DIR/tests/integration/acceptance_gen.py" --url "$URL" --token-file "$T/he.token" \
  --boot "$BOOT" --phase "$PHASE" --period "$PERIOD" --duration "$DURATION" --count "$COUNT" \
  --first-k "$FIRST_K" --host-offset-ms -40 --netns "$NS" --nft-table "$NFT_TABLE" --dport "$DPORT" \
  --out "$T/gen.json" >"$T/gen.log" 2>&1 || fail "generator: $(cat "$T/gen.log")"
# surge K [0|1]: start (0) or end (1) of played surge K (-1: the last) in unix seconds.
surge() { $PY -c 'import json,sys; print("%.6f" % json.load(open(sys.argv[1]))["surges"][int(sys.argv[2])][int(sys.argv[3])])' "$T/gen.json" "$1" "$2"; }
LAST_START=$(surge -1 0)
LAST_END=$(surge -1 1)

# ---- time to the culprit: from the last surge's end until /correlate (that window) and
# /incidents (the episode of this surge) both name tor1 Eth1/49. A sanitizer build
# answers several times slower on a loaded machine (31 s seen): it gets 90 s.
culprit_found() {
  curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "window=$LAST_START,$LAST_END" >"$T/cw.json" &&
    curl -fsS "$URL/api/v1/incidents" >"$T/inc-last.json" &&
    $PY - "$T/cw.json" "$T/inc-last.json" "$LAST_START" "$LAST_END" <<'PYEOF'
import json, sys
cw = json.load(open(sys.argv[1]))["data"]
inc = json.load(open(sys.argv[2]))["data"]
s, e = float(sys.argv[3]), float(sys.argv[4])
def culprit(r):
    return r["target"] == "tor1" and r["interface"] == "Eth1/49"
ok_c = any(ev["suspects"] and culprit(ev["suspects"][0]) for ev in cw["events"])
# The episode of this surge (the scenario goes on surging: a later one may be newer).
ep = [x for x in inc["episodes"] if s - 2 <= float(x["start"]) <= e + 2]
ok_i = any(x["series"] and culprit(x["series"][0]) for x in ep)
sys.exit(0 if ok_c and ok_i else 1)
PYEOF
}
: >"$T/check.err"
FOUND=""
TTC_MAX=30
[ -z "$SANITIZE" ] || TTC_MAX=90
until [ "$($PY -c 'import sys,time; print(int(time.time() - float(sys.argv[1])))' "$LAST_END")" -ge "$TTC_MAX" ]; do
  if culprit_found 2>"$T/check.err"; then FOUND=1; break; fi
  sleep 0.1
done
TTC=$($PY -c 'import sys,time; print("%.2f" % (time.time() - float(sys.argv[1])))' "$LAST_END")
if [ -z "$FOUND" ]; then
  not_ok "time to culprit: /correlate and /incidents did not both name tor1 Eth1/49 within $TTC_MAX s of the last surge's end"
else
  echo "BENCH correlate_time_to_culprit_s $TTC s"
  # The 10 s goal is a figure of the product as shipped: under a sanitizer build (several
  # times slower queries) the time is printed but not held to it.
  if [ -n "$SANITIZE" ]; then
    ok "/correlate and /incidents name tor1 Eth1/49 ${TTC}s after the last surge ended (SANITIZE=$SANITIZE build: the 10 s goal is not held)"
  else
    $PY -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 10 else 1)' "$TTC" &&
      ok "/correlate and /incidents name tor1 Eth1/49 ${TTC}s after the last surge ended" ||
      not_ok "time to culprit ${TTC}s, goal <= 10 s"
  fi
fi

# ---- stop perf now (it has seen every surge) and import its retransmits
kill -INT "$PERF_PID"
wait_exit "$PERF_PID" 30
PERF_T1=$(date +%s.%N)
PERF_PID=""
perf script --header -i "$T/perf.data" >"$T/perf.txt" 2>"$T/perf-script.log" || fail "perf script: $(cat "$T/perf-script.log")"
grep -q '^# reference time:' "$T/perf.txt" || fail "perf script --header has no reference time line"
FABRICSCOPE_TOKEN=$TOKEN "$FABRICSCOPE" import-perf --url "$URL" --host gpu-node-3 <"$T/perf.txt" \
  >"$T/import.log" 2>&1 || fail "import-perf: $(cat "$T/import.log")"
N_PERF=$(grep -c "tcp:tcp_retransmit_skb:.* dport=$DPORT " "$T/perf.txt" || true)
[ "$N_PERF" -ge "$COUNT" ] || fail "perf recorded $N_PERF retransmits of the stream to port $DPORT, fewer than the $COUNT surges"
ok "perf recorded $N_PERF retransmits of the stream; import-perf posted them ($(tail -n1 "$T/import.log"))"

# ---- every slow event of the run, explained
T0=$($PY -c 'import json,sys; print("%.6f" % (json.load(open(sys.argv[1]))["start"] - 1))' "$T/gen.json")
curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "start=$T0" --data-urlencode "kind=nccl" \
  --data-urlencode "slow=2x" --data-urlencode "limit=1000" >"$T/corr.json" || fail "correlate"
FS_GNMI_DELAY_MS=$GNMI_DELAY_MS $PY - "$T/gen.json" "$T/corr.json" 2>"$T/check.err" <<'PYEOF' && ok "/correlate: tor1 Eth1/49 first for >= 90% of the surge-time slow events, not for the random ones; host offset -40 ms +- 5 ms" || not_ok "correlate (answer in $T/corr.json)"
import json, sys
gen = json.load(open(sys.argv[1]))
d = json.load(open(sys.argv[2]))["data"]
events = d["events"]
def find(s):
    m = [e for e in events if abs(e["start_ns"] - s["start_ns"]) <= 5_000_000]
    return m[0] if m else None
surge = [s for s in gen["slow"] if s["why"] == "surge"]
rand = [s for s in gen["slow"] if s["why"] == "random"]
assert len(surge) >= 100, "too few surge-time slow events generated: %d" % len(surge)
assert len(rand) >= 20, "too few random slow events generated: %d" % len(rand)
missing = [s for s in gen["slow"] if find(s) is None]
assert not missing, "%d slow events not listed (or misplaced by > 5 ms), e.g. %s" % (len(missing), missing[:2])
def blamed(e):
    return bool(e["suspects"]) and e["suspects"][0]["target"] == "tor1" and e["suspects"][0]["interface"] == "Eth1/49"
hits = sum(blamed(find(s)) for s in surge)
wrong = sum(blamed(find(s)) for s in rand)
tor2 = sum(bool(find(s)["suspects"]) and find(s)["suspects"][0]["target"] == "tor2" for s in surge)
print("# surge-time slow events: %d, tor1 Eth1/49 first for %d (%.1f%%), tor2 first for %d; "
      "random slow events: %d, tor1 Eth1/49 blamed for %d"
      % (len(surge), hits, 100.0 * hits / len(surge), tor2, len(rand), wrong))
def who(e):
    if not e["suspects"]:
        return "nobody"
    t = e["suspects"][0]
    return "%s %s %s z=%s" % (t.get("target"), t.get("interface"), t.get("metric"), t.get("z"))
for k, (a, b) in enumerate(gen["surges"]):
    miss = [who(find(s)) for s in surge if a <= s["start_ns"] / 1e9 < b and not blamed(find(s))]
    if miss:
        print("# surge %d: %d slow events not blamed on tor1 Eth1/49; first suspects: %s"
              % (k, len(miss), sorted(set(miss))[:4]))
assert hits >= 0.9 * len(surge), "tor1 Eth1/49 first for only %d of %d surge-time slow events" % (hits, len(surge))
assert wrong <= 0.1 * len(rand), "tor1 Eth1/49 blamed for %d of %d random slow events" % (wrong, len(rand))
offs = [e["host_offset_ns"] for e in events]
bad = [o for o in offs if abs(o + 40_000_000) > 5_000_000]
print("# host offset on the events: %.3f .. %.3f ms (generator's clock: -40 ms)"
      % (min(offs) / 1e6, max(offs) / 1e6))
assert not bad, "host offsets off -40 ms by more than 5 ms: %s" % bad[:5]
top = d["summary"][0]
print("# summary: %s" % top["text"])
assert top["target"] == "tor1" and top["interface"] == "Eth1/49", "summary: %s" % top
# WJH drops are timestamped device events (tor1's clock is 250 ms ahead; its offset
# places them): each overlaps a surge of the scenario (which surges before and after the
# ones the generator played, on the same grid), ending after the surge began and
# starting before it ended (+ a poll).
wjh = {}
for e in events:
    for o in e["other_host_events"]:
        if o["kind"] == "wjh.drop":
            wjh[(o["start"], o["end"])] = o
P = gen["surges"][1][0] - gen["surges"][0][0]
a0, b0 = gen["surges"][0]
def over_surge(o):
    # within the stated uncertainty of the clock offset that placed it: the first
    # tables may come before the 1 s `show clock` has narrowed the offset
    u = o["host_offset_uncertainty_ns"] / 1e9
    s, e = float(o["start"]), float(o["end"])
    k = round((e - a0) / P)
    return any(e + u >= a0 + j * P and s - u <= b0 + j * P + 1.5 for j in (k - 1, k))
bad = [o for o in wjh.values()
       if o["host"] != "tor1" or o["attrs"].get("interface") != "Eth1/49" or not over_surge(o)]
hit = {k for k, (a, b) in enumerate(gen["surges"])
       if any(float(o["end"]) >= a and float(o["start"]) <= b + 1.5 for o in wjh.values())}
print("# WJH drop events in the answer: %d, over %d of %d played surges; misplaced %d"
      % (len(wjh), len(hit), len(gen["surges"]), len(bad)))
for o in bad:
    print("# misplaced: %s .. %s, placed with offset %.6f s +- %.6f s"
          % (o["start"], o["end"], o["host_offset_ns"] / 1e9, o["host_offset_uncertainty_ns"] / 1e9))
assert wjh and not bad, "WJH events misplaced: %s" % bad[:3]
assert len(hit) >= len(gen["surges"]) - 1, "WJH events over only %d of %d surges" % (len(hit), len(gen["surges"]))
# The answer states the clocks its times rest on, the culprit's switch among them.
clk = {(c["target"], c["source"]): c for c in d["clocks"]}
print("# clocks in the answer: %s" % sorted("%s/%s" % k for k in clk))
g = clk.get(("tor1", "gnmi"))
import os
stated = "delivery delay assumed at most %.3f ms" % float(os.environ["FS_GNMI_DELAY_MS"])
assert g and stated in g["basis"], "tor1/gnmi clock: %s" % g
PYEOF

# ---- clock offsets per (target, source)
curl -fsS "$URL/api/v1/targets" >"$T/targets.json" || fail "/api/v1/targets"
curl -fsS "$URL/metrics" >"$T/m.txt"
FS_GNMI_DELAY_MS=$GNMI_DELAY_MS FS_SANITIZE=$SANITIZE $PY - "$T/targets.json" "$T/m.txt" 2>"$T/check.err" <<'PYEOF' && ok "clock offsets: every estimate holds the true offset within its stated uncertainty; ONYX CLI and gNMI of tor1 (250 ms) and tor2 (0) within 20 ms, gNMI within 5 ms; SNMP: no hrSystemDate in the simulator, offset unknown" || not_ok "clock offsets per (target, source) in /api/v1/targets"
import json, re, sys
doc = json.load(open(sys.argv[1]))
metrics = open(sys.argv[2]).read()
def walk(o):
    if isinstance(o, dict):
        yield o
        for v in o.values():
            yield from walk(v)
    elif isinstance(o, list):
        for v in o:
            yield from walk(v)
inst = {}
for o in walk(doc):
    if "clock_offset_seconds" in o and "source" in o:
        inst[(o.get("target") or o.get("name"), o["source"])] = o
# Every estimate must be honest (the true offset inside its stated uncertainty) and
# within 20 ms: the ONYX CLI's too (whole seconds, narrowed by second-edge probes between
# polls), since an ONYX switch has no other clock. gNMI (ns timestamps, minimum-delay
# filtering) must be within 5 ms.
true_off = {"tor1": 0.250, "tor2": 0.0}
# A sanitizer build slows the simulators and the collector several-fold: the delays the
# gNMI bound must absorb grow with it, so there only honesty and the 20 ms are held.
import os
tight = {} if os.environ.get("FS_SANITIZE") else {"gnmi": 0.005}
if not tight:
    print("# sanitizer build (%s): the 5 ms gNMI goal is not held" % os.environ["FS_SANITIZE"])
errs = []
for (tgt, src), o in sorted(inst.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
    off, unc = o["clock_offset_seconds"], o["clock_uncertainty_seconds"]
    print("# clock %s/%s: offset %s s, uncertainty %s s" % (tgt, src, off, unc))
for tgt, val in true_off.items():
    for src in ("gnmi", "cli"):
        o = inst.get((tgt, src))
        if o is None or o["clock_offset_seconds"] is None:
            errs.append("no clock offset for %s/%s in /api/v1/targets" % (tgt, src))
            continue
        off, unc = o["clock_offset_seconds"], o["clock_uncertainty_seconds"]
        if unc is None or abs(off - val) > unc + 1e-3:
            errs.append("%s/%s: the true offset %.3f is outside %s +- %s" % (tgt, src, val, off, unc))
        if abs(off - val) > tight.get(src, 0.020):
            errs.append("%s/%s offset %s, want %.3f +- %.3f" % (tgt, src, off, val, tight.get(src, 0.020)))
# What each measured clock's bounds rest on is stated: gNMI's on its assumed delivery
# delay (a configured value), the CLI's on the round trips of its probes.
for tgt in true_off:
    basis = {src: (inst.get((tgt, src)) or {}).get("clock_basis") or "" for src in ("gnmi", "cli")}
    stated = "delivery delay assumed at most %.3f ms (gnmi.clock_max_delivery_delay)" % float(os.environ["FS_GNMI_DELAY_MS"])
    if stated not in basis["gnmi"]:
        errs.append("%s/gnmi clock_basis does not state the assumed delay: %r" % (tgt, basis["gnmi"]))
    if "round trip" not in basis["cli"]:
        errs.append("%s/cli clock_basis: %r" % (tgt, basis["cli"]))
# The SNMP simulator serves no hrSystemDate: the offset must be unknown, not invented.
for tgt in ("tor1", "tor2"):
    o = inst.get((tgt, "snmp"))
    if o is None:
        errs.append("no instance %s/snmp" % tgt)
    elif o["clock_offset_seconds"] is not None:
        errs.append("%s/snmp has an offset (%s) although the simulator serves no hrSystemDate"
                    % (tgt, o["clock_offset_seconds"]))
# The metric says what /api/v1/targets says (it may be a little newer), and, where the
# 5 ms goal is held, holds it too.
m = re.search(r'^fabricscope_target_clock_offset_seconds\{target="tor1",source="gnmi"\} (\S+)', metrics, re.M)
o = inst.get(("tor1", "gnmi"))
if not m:
    errs.append("no metric fabricscope_target_clock_offset_seconds{tor1,gnmi}")
elif o is not None and o["clock_offset_seconds"] is not None and \
        abs(float(m.group(1)) - o["clock_offset_seconds"]) > (o["clock_uncertainty_seconds"] or 0) + 1e-3:
    errs.append("metric fabricscope_target_clock_offset_seconds{tor1,gnmi} %s disagrees with /api/v1/targets %s"
                % (m.group(1), o["clock_offset_seconds"]))
elif "gnmi" in tight and abs(float(m.group(1)) - 0.250) > tight["gnmi"]:
    errs.append("metric fabricscope_target_clock_offset_seconds{tor1,gnmi}: %s" % m.group(1))
assert not errs, "; ".join(errs)
PYEOF

# ---- the retransmits on the collector's axis: all inside the surge windows
# The whole recording, so that every retransmit perf saw is in the export (a stray one
# before the first surge or after the last included).
RUN_S=$($PY -c 'import sys; print("%.6f" % (float(sys.argv[1]) - 1))' "$PERF_T0")
RUN_E=$($PY -c 'import sys; print("%.6f" % (float(sys.argv[1]) + 1))' "$PERF_T1")
curl -fsS --get "$URL/api/v1/export/trace" --data-urlencode "start=$RUN_S" --data-urlencode "end=$RUN_E" \
  --data-urlencode 'match[]={target="tor1",interface="Eth1/49"}' >"$T/trace-run.json" || fail "export/trace of the run"
$PY - "$T/trace-run.json" "$T/gen.json" "$DPORT" "$N_PERF" 2>"$T/check.err" <<'PYEOF' && ok "every retransmit the drops caused ($N_PERF recorded, stray ones counted above) falls inside its surge window on the collector's axis" || not_ok "retransmits on the collector's axis"
import json, sys
t = json.load(open(sys.argv[1]))
gen = json.load(open(sys.argv[2]))
dport, n_perf = sys.argv[3], int(sys.argv[4])
origin = t["otherData"]["epoch_origin_ns"] / 1e9
rt = [e for e in t["traceEvents"] if e.get("ph") == "i" and "retransmit" in e["name"]
      and str((e.get("args") or {}).get("dport")) == dport]
assert len(rt) == n_perf, "%d retransmits of port %s in the export, perf recorded %d" % (len(rt), dport, n_perf)
at = [origin + float(e["ts"]) / 1e6 for e in rt]
surges, drops = gen["surges"], gen["drops"]
per = [sum(s <= x <= e for x in at) for s, e in surges]
outside = [x for x in at if not any(s <= x <= e for s, e in surges)]
# The stream's minimum RTO is 20 ms, so a segment the drops took is resent within
# 20 + 40 + 80 ms even if its first two resends are lost too: a retransmit from a drop
# window's start to 300 ms after its end (the loaded machine's scheduling included) was
# caused by the drops, and must be inside that surge. Any other is the loaded machine's
# own (a late ACK meets the 20 ms RTO: 1-3 a run in Release, 13 of 490 seen under ASan):
# reported, and allowed for 5% of them. A misplaced axis could not hide behind that: the
# drops cause ~500, and off by more than 300 ms they would all count as strays. (A 1 s
# margin once counted such a stray one, 0.49 s after a surge, as caused.)
caused = [x for x in outside if any(a <= x <= b + 0.3 for a, b in drops)]
stray = [x for x in outside if x not in caused]
print("# retransmits per surge: %s; outside every surge: %d caused by the drops, "
      "%d not caused by them" % (per, len(caused), len(stray)))
for x in outside:
    print("#   outside: %.3f s from the nearest surge edge"
          % min(min(abs(x - s), abs(x - e)) for s, e in surges))
assert not caused, "%d of %d retransmits caused by the drops lie outside the surge windows" % (len(caused), len(at))
assert len(stray) <= 0.05 * len(at), "%d of %d retransmits outside every drop window" % (len(stray), len(at))
assert all(per), "a surge without retransmits: %s" % per
PYEOF

# ---- incidents: the period and the next surge
curl -fsS "$URL/api/v1/incidents" >"$T/inc.json" || fail "incidents"
$PY - "$T/inc.json" "$BOOT" "$PHASE" "$PERIOD" 2>"$T/check.err" <<'PYEOF' && ok "/incidents: recurring on tor1 Eth1/49, period 30 s +- 1 s, next surge predicted within 1 s" || not_ok "incidents (answer in $T/inc.json)"
import json, math, sys
d = json.load(open(sys.argv[1]))["data"]
boot, phase, period = map(float, sys.argv[2:5])
rec = [g for g in d["recurring"] if any(s["target"] == "tor1" and s["interface"] == "Eth1/49" for s in g["series"])]
assert rec, "no recurring group on tor1 Eth1/49: %s" % d["recurring"]
g = rec[0]
# tor2 has no incident, but its busy background is modulated by two sinusoids (7.3 s and
# 61 s, scenario.py busy_marks) and a run sometimes finds short trains there (3-5
# occurrences, seen in 1 of 2 ASan runs): whatever tor2 shows must rank below the
# culprit's group and be weaker than it (fewer occurrences, lower confidence).
assert d["recurring"][0] is g or any(s["target"] == "tor1" and s["interface"] == "Eth1/49"
                                     for s in d["recurring"][0]["series"]), \
    "the culprit's group is not ranked first: %s" % d["recurring"][0]["text"]
for o in d["recurring"]:
    if any(s["target"] == "tor2" for s in o["series"]):
        print("# on tor2 (background): %s, %d occurrences, confidence %.6f"
              % (o["text"], o["occurrences"], o["confidence"]))
        assert o["occurrences"] < g["occurrences"] and o["confidence"] < g["confidence"], \
            "a tor2 group as strong as the culprit's: %s vs %s" % (o, g)
print("# recurring: %s (period %.3f s, spread %.3f s, %d occurrences)"
      % (g["text"], g["period_s"], g["spread_s"], g["occurrences"]))
assert abs(g["period_s"] - period) <= 1.0, "period %s, want %s +- 1" % (g["period_s"], period)
# The scenario's surges go on: the next one is the first scenario surge after the last seen.
last = float(g["last"])
k = math.floor((last - boot - phase) / period + 0.5) + 1
nxt = boot + phase + k * period
print("# next expected %.3f, the scenario's next surge %.3f (error %.3f s)"
      % (float(g["next_expected"]), nxt, float(g["next_expected"]) - nxt))
assert abs(float(g["next_expected"]) - nxt) <= 1.0, "next expected %s, scenario %s" % (g["next_expected"], nxt)
PYEOF

# ---- the Perfetto export of one surge window
S=$(surge -2 0)
E=$(surge -2 1)
curl -fsS --get "$URL/api/v1/export/trace" --data-urlencode "start=$($PY -c "print($S - 3)")" \
  --data-urlencode "end=$($PY -c "print($E + 3)")" \
  --data-urlencode 'match[]={target="tor1",interface="Eth1/49"}' >"$T/trace.json" || fail "export/trace"
$PY - "$T/trace.json" "$S" "$E" 2>"$T/check.err" <<'PYEOF' && ok "/api/v1/export/trace of a surge: valid trace-event JSON, the ECN counter of tor1 Eth1/49 rises inside an AllReduce slice" || not_ok "Perfetto export of a surge window (in $T/trace.json)"
import json, sys
t = json.load(open(sys.argv[1]))
s, e = float(sys.argv[2]), float(sys.argv[3])
evs = t["traceEvents"]
origin = t["otherData"]["epoch_origin_ns"] / 1e9
# Trace-event JSON: every event has a phase, a pid and (but metadata) a numeric ts.
for x in evs:
    assert isinstance(x.get("ph"), str) and isinstance(x.get("pid"), int), x
    if x["ph"] != "M":
        assert isinstance(x.get("ts"), (int, float)), x
    if x["ph"] == "X":
        assert isinstance(x.get("dur"), (int, float)) and x["dur"] > 0, x
procs = {x["pid"]: x["args"]["name"] for x in evs if x["ph"] == "M" and x["name"] == "process_name"}
ab = lambda us: origin + us / 1e6
slices = [x for x in evs if x["ph"] == "X" and x["name"] == "AllReduce"
          and s <= ab(x["ts"]) < e and x["dur"] >= 50_000]
assert slices, "no stretched AllReduce slice inside the surge"
tracks = {}
for x in evs:
    if x["ph"] == "C" and procs.get(x["pid"]) == "switch tor1" and "ecn" in x["name"] and "Eth1/49" in x["name"]:
        tracks.setdefault(x["name"], []).append((ab(x["ts"]), x["args"]["value"]))
assert tracks, "no ECN counter track of tor1 Eth1/49: %s" % sorted({x["name"] for x in evs if x["ph"] == "C"})
# A rate stamped ts covers (previous ts, ts]: the counter rose inside a slice when such an
# interval overlaps it with a rate well above the track's level before the surge (three
# times its highest: the port is busy on its own, with noise of +-30%).
found = []
for name, pts in tracks.items():
    pts.sort()
    before = [v for ts, v in pts if ts < s - 0.5]
    base = max(before) if before else 0.0
    for (t0, _), (t1, v) in zip(pts, pts[1:]):
        if v <= max(1000.0, 3 * base):
            continue
        for x in slices:
            a, b = ab(x["ts"]), ab(x["ts"] + x["dur"])
            if t0 < b and a < t1:
                found.append((name, t0, t1, v, a, b))
assert found, "the ECN counter does not rise inside any AllReduce slice of the surge: %s" % tracks
name, t0, t1, v, a, b = found[0]
print("# %s: %.0f/s over [%.3f, %.3f] s of the surge, AllReduce slice [%.3f, %.3f] s; %d (track, slice) pairs"
      % (name, v, t0 - s, t1 - s, a - s, b - s, len(found)))
PYEOF

[ ${#FAILED[@]} -eq 0 ] || fail "${#FAILED[@]} check(s) failed: $(printf '[%s] ' "${FAILED[@]}")"

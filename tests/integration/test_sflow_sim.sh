#!/usr/bin/env bash
# The sFlow agent simulator (tests/sim/sflow/sim_agent.py) tells the truth of the shared
# scenario model: it runs over real UDP for about 10 s of scenario time around a culprit's
# surge, to two collectors at once (IPv4 and IPv6 loopback, tests/integration/sflow_sink.py),
# with some datagram sequence numbers skipped (--drop-seq); the datagrams one collector
# received are decoded by our decoder (fs-sflow-dump, drivers/sflow/decode.c) and by tshark,
# and tests/integration/sflow_sim_check.py checks them against tests/sim/scenario.py:
# counter octets/packets at each datagram's uptime, one sample per `rate` packets with
# consistent sequence numbers and pools, queue depth at each sampled packet's time, the CE
# share on the culprit rising in its surge as the model's mark share does, per-rule
# estimates, one drop notification per model WRED drop, sequence gaps exactly the skipped
# datagrams, and tshark agreeing. Waits on ready files and datagram counts, never on sleeps.
# Needs tshark (scripts/install-deps.sh): fails, never skips, without it.
source "$(dirname "$0")/lib.sh"

DUMP=$FS_BUILD_DIR/tests/fs-sflow-dump
[ -x "$DUMP" ] || fail "build fs-sflow-dump first"
command -v tshark >/dev/null || fail "tshark is not installed (scripts/install-deps.sh installs it)"
PY=${PYTHON:-python3}
AGENT=$FS_SOURCE_DIR/tests/sim/sflow/sim_agent.py
SINK=$FS_SOURCE_DIR/tests/integration/sflow_sink.py
DROP_SEQ=3,10-12,40

# Two collectors: IPv4 and IPv6 loopback, each writing every datagram it receives.
P4=$(free_udp_port)
$PY "$SINK" --bind 127.0.0.1 --port "$P4" --dir "$T/rx4" --ready-file "$T/rx4.ready" >"$T/sink4.log" 2>&1 &
track $!
P6=$(free_udp_port)
$PY "$SINK" --bind ::1 --port "$P6" --dir "$T/rx6" --ready-file "$T/rx6.ready" >"$T/sink6.log" 2>&1 &
track $!
wait_for 20 "the IPv4 collector is bound" test -s "$T/rx4.ready"
wait_for 20 "the IPv6 collector is bound" test -s "$T/rx6.ready"

# 8 ports at 1 Gb/s (so the default sampling rate is the lowered 1 in 1,000), every port
# busy with its own ECN and queue level, a surge on Eth1/5 tc 3 from 10 s to 12 s after
# boot (and every 60 s after), counters near 2^53 to check 64-bit exactness. The switch
# booted 4 s ago and the agent runs 10 s, so the whole surge and time on both sides of
# it are in the run even when the agent starts seconds late on a loaded machine.
$PY - "$T/scenario.json" <<'PY'
import json, sys, time
json.dump({"ports": 8, "rate_bps": 1e9, "packet_bytes": 1000, "counter_base": 2**53 + 1,
           "boot_epoch_s": time.time() - 4.0,
           "busy": {"seed": 2, "share": 1.0, "max_ecn_pps": 3000, "bursty_share": 0},
           "congestion": {"port": 5, "tc": 3, "period_s": 60, "duration_s": 2, "phase_s": 10,
                          "ecn_pps": 15000, "wred_pps": 40, "pfc_pps": 10,
                          "queue_bytes": 3000000}}, open(sys.argv[1], "w"))
PY
$PY "$AGENT" --scenario "$T/scenario.json" --collector "127.0.0.1:$P4" --collector "[::1]:$P6" \
  --agent 10.0.0.17 --sub-agent 3 --counter-interval 1 --duration 10 --seed 7 \
  --drop-seq "$DROP_SEQ" --ready-file "$T/agent.ready" --truth "$T/truth.jsonl" >"$T/agent.log" 2>&1 &
AGENT_PID=$!
track $AGENT_PID
wait_for 20 "the agent opened its sockets" test -s "$T/agent.ready"
[ "$(cut -d' ' -f2 "$T/agent.ready")" = 1000 ] || fail "default sampling rate $(cut -d' ' -f2 "$T/agent.ready"), expected 1000 for this slow scenario"
wait_exit $AGENT_PID 30
wait $AGENT_PID || fail "the agent failed: $(tail -3 "$T/agent.log")"
ok "agent ran: $(tail -1 "$T/agent.log")"

# Datagrams the agent sent (not skipped), then wait until both collectors have them all.
SENT=$($PY -c 'import json, sys; print(sum(1 for l in open(sys.argv[1]) for d in [json.loads(l)] if d["kind"] == "datagram" and d["sent"]))' "$T/truth.jsonl")
[ "$SENT" -gt 100 ] || fail "only $SENT datagrams sent"
_count_is() { [ "$(find "$1" -name 'dgram_*.bin' | wc -l)" -ge "$2" ]; }
wait_for 20 "$SENT datagrams at the IPv4 collector" _count_is "$T/rx4" "$SENT"
wait_for 20 "$SENT datagrams at the IPv6 collector" _count_is "$T/rx6" "$SENT"
[ "$(find "$T/rx4" -name 'dgram_*.bin' | wc -l)" = "$SENT" ] || fail "more datagrams than sent at the IPv4 collector"
cmp -s <(cat "$T"/rx4/dgram_*.bin) <(cat "$T"/rx6/dgram_*.bin) || fail "the two collectors received different datagrams"
ok "$SENT datagrams, the same at both collectors"

"$DUMP" "$T"/rx4/dgram_*.bin >"$T/decoded.jsonl" || fail "decode errors: $(grep error "$T/decoded.jsonl" | head -3)"

# The same datagrams as a capture for tshark (UDP to 6343, as sflow_gen.py writes them).
$PY - "$T/rx4" "$T/rx.pcap" "$FS_SOURCE_DIR/tests/sim/sflow" <<'PY'
import glob, os, sys
sys.path.insert(0, sys.argv[3])
import sflow_gen
files = sorted(glob.glob(os.path.join(sys.argv[1], "dgram_*.bin")))
frames = [sflow_gen.udp_frame(open(f, "rb").read(), i % 20000) for i, f in enumerate(files)]
sflow_gen.write_pcap(sys.argv[2], [(f, len(f)) for f in frames])
PY
FIELDS=$($PY -c 'import sys; sys.path.insert(0, sys.argv[1]); import sflow_sim_check as c; print(" ".join("-e " + f for f in c.TSHARK_FIELDS))' "$FS_SOURCE_DIR/tests/integration")
# shellcheck disable=SC2086
tshark -r "$T/rx.pcap" -d udp.port==6343,sflow -T fields -E occurrence=a -E aggregator=, $FIELDS \
  >"$T/tshark.tsv" 2>"$T/tshark.log" || fail "tshark could not read the capture"
tshark -r "$T/rx.pcap" -d udp.port==6343,sflow -Y _ws.malformed -T fields -e frame.number \
  >"$T/malformed.txt" 2>>"$T/tshark.log" || fail "tshark could not filter the capture"
tshark --version | head -1

# Determinism: the same scenario window offline (--pcap, simulated time) in 1 ms ticks.
read -r START_MS END_MS < <($PY -c 'import json, sys
d = [json.loads(l) for l in open(sys.argv[1])]
print(*[x["uptime_ms"] for x in d if x["kind"] in ("start", "end")])' "$T/truth.jsonl")
$PY "$AGENT" --scenario "$T/scenario.json" --pcap "$T/offline.pcap" --agent 10.0.0.17 \
  --start "$(echo "$START_MS" | awk '{printf "%.3f", $1 / 1000}')" \
  --duration "$(echo "$START_MS $END_MS" | awk '{printf "%.3f", ($2 - $1) / 1000}')" \
  --tick-ms 1 --counter-interval 1 --seed 7 --truth "$T/offline.jsonl" 2>>"$T/agent.log" ||
  fail "the offline run failed"

$PY "$FS_SOURCE_DIR/tests/integration/sflow_sim_check.py" --scenario "$T/scenario.json" \
  --truth "$T/truth.jsonl" --decoded "$T/decoded.jsonl" --tshark "$T/tshark.tsv" \
  --malformed "$T/malformed.txt" --drop-seq "$DROP_SEQ" --offline-truth "$T/offline.jsonl" || fail "the simulator's datagrams disagree with the model (see above)"
ok "the sFlow agent simulator's datagrams agree with the scenario model"

#!/usr/bin/env bash
# pmacct's sfacctd (Debian's pmacct) as a side-by-side reference for per-port volume
# estimates: the sFlow agent simulator sends the same datagrams, over real UDP, to
# fabricscope and to sfacctd (sfacctd_renormalize, aggregating by output interface,
# protocol and destination port; print plugin appending JSON every second). The two
# estimate differently: fabricscope counts samples x sampling rate; sfacctd weighs each
# sample by its source's sample pool growth since the previous sample (pool delta /
# sequence delta; the sampling rate for a source's first sample), as its output shows.
# Per port, for UDP 4791 (the NCCL RoCEv2 rule): fabricscope's estimated packets equal
# the agent's truth of samples x rate exactly, sfacctd's equal the pool-weighted sum
# computed from the same truth exactly (so both decoders read the same samples,
# sequence numbers and pools), and the two estimates agree within sampling noise (5
# standard deviations: sqrt(samples) x rate); bytes likewise (every frame is 1,000
# bytes: each tool's bytes are its packets x 1,000). Waits on counts, never on sleeps.
# Needs sfacctd (scripts/install-deps.sh installs pmacct): fails, never skips.
source "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
AGENT=$FS_SOURCE_DIR/tests/sim/sflow/sim_agent.py
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
SFACCTD=$(command -v sfacctd || echo /usr/sbin/sfacctd)
[ -x "$SFACCTD" ] || fail "sfacctd is not installed (Debian package pmacct; scripts/install-deps.sh)"
cd "$T"

# 8 ports at 1 Gb/s (1 in 1,000), a surge on Eth1/5, as test_sflow_sim.sh.
$PY - "$T/scenario.json" <<'PY'
import json, sys, time
json.dump({"ports": 8, "rate_bps": 1e9, "packet_bytes": 1000, "boot_epoch_s": time.time() - 4.0,
           "busy": {"seed": 2, "share": 1.0, "max_ecn_pps": 3000, "bursty_share": 0},
           "congestion": {"port": 5, "tc": 3, "period_s": 60, "duration_s": 2, "phase_s": 6,
                          "ecn_pps": 15000, "wred_pps": 40, "pfc_pps": 10,
                          "queue_bytes": 3000000}}, open(sys.argv[1], "w"))
PY

PM=$(free_udp_port)
cat >sfacctd.conf <<EOF
daemonize: false
sfacctd_ip: 127.0.0.1
sfacctd_port: $PM
sfacctd_renormalize: true
plugins: print
aggregate: out_iface, proto, dst_port
print_output: json
print_output_file: $T/pmacct.json
print_output_file_append: true
print_refresh_time: 1
logfile: $T/sfacctd.log
EOF
"$SFACCTD" -f "$T/sfacctd.conf" >"$T/sfacctd.out" 2>&1 &
track $!
wait_for 20 "sfacctd is bound" sh -c "ss -Hlun 'sport = :$PM' | grep -q ."

HTTP=$(free_tcp_port)
UDP=$(free_udp_port)
cat >fs.yaml <<EOF
listen: 127.0.0.1:$HTTP
flow_rules:
  - { name: nccl-roce, protocol: udp, dst_port: 4791 }
targets:
  - name: sw1
    address: 10.0.0.17
    # the simulated agent 10.0.0.17 sends from 127.0.0.1, as through a relay
    sflow: { listen: 127.0.0.1, port: $UDP, interval: 500ms, counter_interval: 1s,
             sources: [127.0.0.1] }
EOF
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
wait_for 20 "the sFlow socket is bound" grep -q "listening on 127.0.0.1:$UDP" fabricscope.log

$PY "$AGENT" --scenario "$T/scenario.json" --collector "127.0.0.1:$UDP" --collector "127.0.0.1:$PM" \
  --agent 10.0.0.17 --counter-interval 1 --duration 8 --seed 5 --truth "$T/truth.jsonl" \
  >"$T/agent.log" 2>&1 || fail "the agent failed: $(tail -3 "$T/agent.log")"
ok "agent ran: $(tail -1 "$T/agent.log")"

# The truth: per output ifIndex, the RoCEv2 samples, their samples x rate, and their
# pool-weighted sum (each sample weighs pool delta / sequence delta since the previous
# sample of its source, any traffic; the first one its sampling rate).
$PY - "$T/truth.jsonl" >"$T/truth.txt" <<'PY'
import json, sys
n_dg, prev, ns, pk, pool = 0, {}, {}, {}, {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["kind"] != "datagram" or not d["sent"]:
        continue
    n_dg += 1
    for s in d["samples"]:
        if s["kind"] != "flow":
            continue
        i, p = s["if_index"], prev.get(s["if_index"])
        prev[i] = (s["sample_pool"], s["sequence"])
        if s["proto"] == 17 and s["dst_port"] == 4791:
            w = s["sampling_rate"] if p is None else (s["sample_pool"] - p[0]) // (s["sequence"] - p[1])
            ns[i] = ns.get(i, 0) + 1
            pk[i] = pk.get(i, 0) + s["sampling_rate"]
            pool[i] = pool.get(i, 0) + w
print(n_dg)
for i in sorted(pk):
    print(i, pool[i], ns[i], pk[i])
PY
SENT=$(head -1 "$T/truth.txt")
fs_has_all() {
  curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" &&
    grep -q "^fabricscope_sflow_datagrams_total{target=\"sw1\",source=\"sflow\"} $SENT$" "$T/m.txt"
}
wait_for 20 "fabricscope received the $SENT datagrams" fs_has_all
# sfacctd appends one JSON object per aggregate and refresh: sum them.
cat >pm_sum.py <<'PY'
import json, sys
pk, by = {}, {}
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    lines = []
for line in lines:
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    if str(d.get("ip_proto")).lower() in ("udp", "17") and int(d.get("port_dst", -1)) == 4791:
        i = int(d["iface_out"])
        pk[i] = pk.get(i, 0) + int(d["packets"])
        by[i] = by.get(i, 0) + int(d["bytes"])
for i in sorted(pk):
    print(i, pk[i], by[i])
PY
pm_matches_truth() {
  $PY pm_sum.py "$T/pmacct.json" >"$T/pm.txt" &&
    [ "$(cut -d' ' -f1,2 "$T/pm.txt")" = "$(tail -n +2 "$T/truth.txt" | cut -d' ' -f1,2)" ]
}
wait_for 20 "sfacctd's per-port RoCEv2 packets equal the pool-weighted truth" pm_matches_truth
$PY - "$T/m.txt" "$T/truth.txt" "$T/pm.txt" <<'PY' || fail "per-port estimates disagree (see above)"
import math, re, sys
ours = {}
for line in open(sys.argv[1]):
    g = re.match(r'^fabric_flow_rule_(packets|bytes)_total\{target="sw1",rule="nccl-roce",interface="ifIndex(\d+)",source="sflow"\} (\d+)$', line)
    if g:
        ours.setdefault(int(g.group(2)), {})[g.group(1)] = int(g.group(3))
truth = {int(r[0]): tuple(map(int, r[1:])) for r in (l.split() for l in open(sys.argv[2]).read().splitlines()[1:])}
pm = {int(a): (int(b), int(c)) for a, b, c in (l.split() for l in open(sys.argv[3]))}
assert set(ours) == set(truth) == set(pm), (sorted(ours), sorted(truth), sorted(pm))
worst = 0.0
for i in sorted(truth):
    pool, n, tp = truth[i]
    op, ob = ours[i]["packets"], ours[i]["bytes"]
    pp, pb = pm[i]
    rate = tp // n
    tol = 5 * math.sqrt(n) * rate
    print("# ifIndex%d: %d samples; packets fabricscope %d (samples x rate), sfacctd %d (pool-weighted),"
          " %+.2f%%; bytes %d, %d" % (i, n, op, pp, 100.0 * (pp - op) / op, ob, pb))
    assert op == tp and ob == 1000 * op, (i, tp, op, ob)
    assert pp == pool and pb == 1000 * pp, (i, pool, pp, pb)
    assert abs(pp - op) <= tol, (i, op, pp, tol)
    worst = max(worst, abs(pp - op) / op)
print("# largest difference between the two estimates: %.2f%%" % (100 * worst))
PY
ok "per-port RoCEv2 estimates: fabricscope = samples x rate, sfacctd = pool-weighted, both exact against the truth and within sampling noise of each other"

#!/usr/bin/env bash
# Cumulus nvidia-wjh over gNMI: the gNMI simulator (tests/sim/gnmi/gnmi_sim.py, scenario
# key "wjh") serves per port the buffer-group WJH aggregate of the scenario's WRED drops
# (/interfaces/interface[name]/wjh/aggregate/buffer/reasons/reason[id][severity]/drop, a
# JSON string in the layout map.h assumes) in tumbling 3 s sample windows: every window
# the aggregate starts over from 0. fabricscope subscribes over real gRPC with TLS.
# Checked: fabric_port_wjh_dropped_packets_total{interface,group,reason} of the culprit
# port never decreases in the ring (a window that starts over is never a clear), ends
# well above the largest single window's count (each window is added, not replaced),
# and stays within what the model allows: at most the drops from the window the first
# sample saw to now, at least the drops since the series appeared less what the window
# semantics cannot see (the drops between a window's last sample and its end: one
# sample interval plus scheduling slack per window boundary). Ports without drops: 0.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf live there, not in pyenv
SIMPY=$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
$PY -c 'import grpc, google.protobuf' || fail "python3-grpcio / python3-protobuf missing"

cd "$T"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
# shellcheck disable=SC2086
openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=fs-test-ca 2>/dev/null
# shellcheck disable=SC2086
openssl req $ec -keyout srv.key -out srv.csr -subj /CN=gnmi-sim 2>/dev/null
printf 'subjectAltName=DNS:gnmi-sim.test,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
  -extfile san.ext 2>/dev/null
printf 's3cret-gnmi-pw\n' >pw.txt
boot=$(($(date +%s) - 100))
# WRED drops on Eth1/2 tc 3 at 1000/s for 2 s every 4 s; WJH windows of 3 s.
cat >scenario.json <<JSON
{"ports": 4, "boot_epoch_s": $boot, "wjh": {"window_s": 3},
 "congestion": {"port": 2, "tc": 3, "period_s": 4, "duration_s": 2, "phase_s": 0,
                "wred_pps": 1000}}
JSON
INTERVAL_S=0.3

SIM_PORT=$(free_tcp_port)
$PY "$SIMPY" --gen-dir "$T/gen" --scenario "$T/scenario.json" --port "$SIM_PORT" \
  --port-file "$T/sim.port" --tls-cert srv.pem --tls-key srv.key --username monitor \
  --password-file pw.txt >"$T/sim.log" 2>&1 &
track $!
wait_for 20 "the gNMI simulator listens" test -s "$T/sim.port"

HTTP=$(free_tcp_port)
cat >fs.yaml <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: cl1
    address: 127.0.0.1
    gnmi:
      port: $SIM_PORT
      tls: { ca_file: $T/ca.pem, server_name: gnmi-sim.test }
      username: monitor
      password_file: $T/pw.txt
      encoding: proto
      subscriptions:
        - { path: "/interfaces/interface[name=*]/wjh", mode: sample, interval: 300ms }
EOF
"$FABRICSCOPE" --check-config fs.yaml >check.out 2>&1 || fail "config refused: $(cat check.out)"
T_START=$(date +%s.%N)
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
S='source="gnmi"'
K='fabric_port_wjh_dropped_packets_total{target="cl1",interface="Eth1/2",group="buffer",reason="WRED",'"$S"'}'
has_series() { curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" && grep -qF "$K " "$T/m.txt"; }
wait_for 30 "the WJH series of Eth1/2" has_series
T_SEEN=$(date +%s.%N)
# Four window boundaries later (12 s of 3 s windows).
_past() { $PY -c 'import sys, time; sys.exit(0 if time.time() > float(sys.argv[1]) else 1)' "$1"; }
wait_for 30 "four WJH windows" _past "$($PY -c "print($T_SEEN + 12.5)")"
curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" || fail "/metrics"
T_NOW=$(date +%s.%N)
curl -fsS -G "http://127.0.0.1:$HTTP/api/v1/raw" --data-urlencode "match[]=fabric_port_wjh_dropped_packets_total" \
  --data-urlencode "start=$($PY -c "print($T_START - 5)")" >"$T/raw.json" || fail "/api/v1/raw"
$PY - "$T/m.txt" "$T/raw.json" "$T/scenario.json" "$FS_SOURCE_DIR/tests/sim" "$T_START" "$T_SEEN" \
  "$T_NOW" "$INTERVAL_S" <<'PY' || fail "WJH aggregate as a window (in $T/m.txt, $T/raw.json)"
import json, math, re, sys
sys.path.insert(0, sys.argv[4])
import scenario
sc = scenario.Scenario(sys.argv[3])
t_start, t_seen, t_now = (sc.since_boot(float(x)) for x in sys.argv[5:8])
interval = float(sys.argv[8])
m = {}
for line in open(sys.argv[1]):
    g = re.match(r'^fabric_port_wjh_dropped_packets_total\{target="cl1",interface="([^"]+)",group="buffer",reason="WRED",source="gnmi"\} (\S+)$', line)
    if g:
        m[g.group(1)] = int(g.group(2))
assert set(m) == {"Eth1/1", "Eth1/2", "Eth1/3", "Eth1/4"}, m
assert all(v == 0 for p, v in m.items() if p != "Eth1/2"), m
v = m["Eth1/2"]
D = lambda t: sc.tc_wred_dropped(2, 3, t)  # noqa: E731
W = float(sc.wjh["window_s"])
w0 = math.floor(t_start / W) * W        # the earliest window a first sample can see
upper = D(t_now) - D(w0)
boundaries = math.floor(t_now / W) - math.floor(t_seen / W)
lower = D(t_now - 1.0) - D(t_seen) - boundaries * (interval + 0.5) * sc.cong["wred_pps"]
best_window = max(sc.wjh_count(2, w0 + k * W + W - 1e-6) for k in range(int((t_now - w0) / W) + 1))
print("# Eth1/2: %d WJH drops; model bounds [%.0f, %d] over %d window boundaries; one window holds at most %d"
      % (v, lower, upper, boundaries, best_window))
assert lower <= v <= upper, (lower, v, upper)
assert v > 2 * best_window, (v, best_window)
r = [x for x in json.load(open(sys.argv[2]))["data"]["result"] if x["metric"]["interface"] == "Eth1/2"]
assert len(r) == 1, r
vals = [int(y) for _, y in r[0]["values"]]
assert len(vals) > 20 and all(b >= a for a, b in zip(vals, vals[1:])), vals
PY
ok "nvidia-wjh aggregates counted as windows: Eth1/2 monotonic, within the model's bounds, no other port"

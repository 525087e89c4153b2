#!/usr/bin/env bash
# A flapping gNMI target is visible (issue 32): the simulator (real gRPC) sends target
# `flap` a SubscribeResponse over its max_message (4 MiB) three times; each ends the
# stream with RESOURCE_EXHAUSTED, then the target reconnects and resyncs. Between drops
# it streams, yet /api/v1/targets must say "flapping" with the error kept and its time,
# and fabricscope_target_reconnects_total must count each reconnect.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf live there, not in pyenv
SIMPY=$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
$PY -c 'import grpc, google.protobuf' || fail "python3-grpcio / python3-protobuf missing"

cd "$T"
boot=$(($(date +%s) - 100))
printf '{"ports": 4, "clock_offset_ms": 0, "boot_epoch_s": %s}\n' "$boot" >scenario.json
PORT=$(free_tcp_port)
$PY "$SIMPY" --gen-dir "$T/gen" --scenario "$T/scenario.json" --port "$PORT" \
  --port-file "$T/sim.port" --control "$T/sim.ctl" >>"$T/sim.log" 2>&1 &
track $!
wait_for 20 "the gNMI simulator listens" test -s "$T/sim.port"

HTTP=$(free_tcp_port)
cat >fs.yaml <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: flap
    address: 127.0.0.1
    gnmi:
      port: $PORT
      insecure: true
      encoding: proto
      backoff_min: 200ms
      backoff_max: 1s
      stall_timeout: 10s # the simulator takes a while to build the message: not a stall
      subscriptions:
        - { path: "/interfaces/interface[name=*]/state/counters", mode: sample, interval: 200ms }
EOF
start_fabricscope fs.yaml
# inst KEY: the KEY member of flap's gNMI instance in /api/v1/targets
inst() { curl -sf "http://127.0.0.1:$HTTP/api/v1/targets" | $PY -c '
import json, sys
for o in json.load(sys.stdin)["data"]:
    if o.get("target") == "flap" and o.get("source") == "gnmi":
        v = o.get(sys.argv[1])
        print(json.dumps(v) if isinstance(v, (dict, list)) or v is None else v)
        break' "$1"; }
reconnects_metric() {
  curl -sf "http://127.0.0.1:$HTTP/metrics" |
    awk '/^fabricscope_target_reconnects_total\{target="flap",source="gnmi"/ {print $2}'
}
_streaming() { [ "$(inst gnmi_state)" = streaming ] && [ "$(inst state)" != down ]; }
_up() { [ "$(inst state)" = up ]; }
wait_for 30 "flap streams and is up (synced)" _up
[ "$(inst flapping)" = False ] || fail "a healthy stream reads flapping"

for n in 1 2 3; do
  echo "huge 5000000" >"$T/sim.ctl"
  _sent() { [ "$(grep -c 'sent-huge' "$T/sim.log")" -ge "$n" ]; }
  wait_for 30 "the simulator sent over-size message $n" _sent
  _back() { [ "$(inst reconnects)" -ge "$n" ] 2>/dev/null; }
  wait_for 30 "reconnect $n is counted" _back
  wait_for 30 "flap streams again after message $n" _streaming
  m=$(reconnects_metric)
  [ "${m:-0}" -ge "$n" ] || fail "fabricscope_target_reconnects_total is '$m' after $n reconnects"
  echo "after message $n: state=$(inst state) reconnects=$(inst reconnects) metric=$m"
done
[ "$(inst state)" = flapping ] || fail "3 drops in a minute, yet state is $(inst state)"
[ "$(inst flapping)" = True ] || fail "flapping is $(inst flapping)"
err=$(inst last_error)
case "$err" in
*"larger than max"*) ;;
*) fail "last_error of a flapping target is '$err'" ;;
esac
when=$(inst last_error_time)
[ -n "$when" ] && [ "$when" != null ] || fail "last_error_time is '$when'"
curl -sf "http://127.0.0.1:$HTTP/metrics" >metrics.txt || fail "/metrics failed"
grep -q '^fabricscope_target_up{target="flap",source="gnmi"} 1$' metrics.txt ||
  fail "fabricscope_target_up of a flapping but streaming target is not 1"
ok "3 over-size messages: state flapping, reconnects $(inst reconnects) (metric $(reconnects_metric)), last_error '$err' at $when"
kill "$FS_PID"
wait_exit "$FS_PID" 20

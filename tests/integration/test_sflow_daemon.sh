#!/usr/bin/env bash
# fabricscope itself with the registered sFlow driver, fed real sFlow v5 datagrams over
# UDP on loopback (IPv4 and IPv6 senders, one dual-stack socket shared by two targets) by
# tests/integration/sflow_send.py (built with tests/sim/sflow/sflow_gen.py's primitives).
# Checked on /metrics, exactly: per-rule per-port estimated packets = samples x sampling
# rate, bytes = that x frame length, the CE share (a CE-only rule and the CE counter), tc
# from DSCP, drops by reason name; the configured port name and the ifIndex<N> fallback;
# queue depth max and p90 and transit delay max of the interval (in the ring); lost
# datagrams when sequence numbers are skipped, and a truncated datagram counted as a
# decode error with its successor still decoded; an unknown agent and a non-sFlow
# datagram (from 127.0.0.2, nobody's source) counted on the socket with no series of
# their own; the IPv6 agent's target;
# the sflow source up in /api/v1/targets; promtool check metrics clean; SIGTERM ends it
# cleanly.
source "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
SEND=("$PY" "$FS_SOURCE_DIR/tests/integration/sflow_send.py") # an array: the path may hold spaces
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
command -v promtool >/dev/null || fail "promtool is not installed"
cd "$T"

HTTP=$(free_tcp_port)
UDP=$(free_udp_port)
cat >fs.yaml <<YAML
listen: 127.0.0.1:$HTTP
flow_rules:
  - { name: roce, protocol: udp, dst_port: 4791 }
  - { name: roce-ce, protocol: udp, dst_port: 4791, ecn: ce }
  - { name: roce-tc3, protocol: udp, dst_port: 4791, tc: 3 }
  - { name: sockets, protocol: tcp, dst_ports: 50000-50999 }
targets:
  - name: tor1
    address: 127.0.0.1
    sflow: { port: $UDP, interval: 200ms, interface_names: { 101: Eth1/1 } }
  - name: tor6
    address: "::1"
    sflow: { port: $UDP, interval: 200ms }
YAML
"$FABRICSCOPE" --check-config fs.yaml >check.out 2>&1 || fail "config refused: $(cat check.out)"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
wait_for 20 "the sFlow socket is bound" grep -q "listening on \[::\]:$UDP" fabricscope.log

M() { curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt"; }
value() { awk -v k="$1" 'index($0, k " ") == 1 {print $2; exit}' "$T/m.txt"; }
is() { M && [ "$(value "$1")" = "$2" ]; }
expect() { # expect SERIES VALUE WHAT
  if ! wait_for_quiet 20 is "$1" "$2"; then
    M
    fail "$3: $1 is $(value "$1"), not $2"
  fi
}
wait_for_quiet() {
  local until=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $until ] || return 1
    sleep 0.1
  done
}

# Datagrams 1, 2 and 6 of agent 127.0.0.1 (3-5 never sent), 7 cut short, 8 whole.
# Datagram 1: 10 egress-sampled CE RoCEv2 samples on ifIndex 101 at 1 in 1000 with queue
# depth and transit delay, 30 non-CE ones, 5 TCP NCCL-socket samples ingress-sampled on
# ifIndex 7 at 1 in 4096, 2 drop notifications (no_buffer_space) and one (acl), counters.
cat >d.json <<'JSON'
[{"agent": "127.0.0.1", "seq": 1, "uptime": 1000, "samples": [
   {"kind": "flow", "n": 10, "rate": 1000, "traffic": "roce", "ce": true, "source": 101,
    "in": 3, "out": 101, "seq": 1, "payload": 4000,
    "depth": [100, 900, 300, 400, 500, 600, 700, 800, 200, 1000],
    "delay": [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000]},
   {"kind": "flow", "n": 30, "rate": 1000, "traffic": "roce", "source": 101, "in": 3,
    "out": 101, "seq": 11, "payload": 4000},
   {"kind": "flow", "n": 5, "rate": 4096, "traffic": "tcp", "sport": 40000, "dport": 50500,
    "source": 7, "in": 7, "out": 9, "seq": 1, "payload": 1400},
   {"kind": "discard", "n": 2, "reason": 259, "traffic": "roce", "ce": true, "in": 3,
    "out": 101, "seq": 1, "payload": 4000},
   {"kind": "discard", "n": 1, "reason": 258, "traffic": "roce", "in": 3, "out": 101,
    "seq": 3, "payload": 4000},
   {"kind": "counters", "ifindex": 101, "in_octets": 123456789, "in_ucast": 1000}]},
 {"agent": "127.0.0.1", "seq": 2, "uptime": 1100, "samples": [
   {"kind": "flow", "n": 1, "rate": 1000, "traffic": "roce", "source": 101, "in": 3,
    "out": 101, "seq": 41, "payload": 4000}]},
 {"agent": "192.0.2.99", "seq": 1, "uptime": 5, "samples": [
   {"kind": "flow", "n": 1, "rate": 1000, "traffic": "roce", "source": 77, "in": 77,
    "out": 78, "seq": 1}]},
 {"garbage": "not an sFlow datagram", "from": "127.0.0.2"},
 {"agent": "127.0.0.1", "seq": 6, "uptime": 1600, "samples": [
   {"kind": "flow", "n": 1, "rate": 1000, "traffic": "roce", "source": 101, "in": 3,
    "out": 101, "seq": 42, "payload": 4000}]},
 {"agent": "127.0.0.1", "seq": 7, "uptime": 1700, "truncate": 60, "samples": [
   {"kind": "flow", "n": 1, "rate": 1000, "traffic": "roce", "source": 101, "in": 3,
    "out": 101, "seq": 43, "payload": 4000}]},
 {"agent": "127.0.0.1", "seq": 8, "uptime": 1800, "samples": [
   {"kind": "flow", "n": 1, "rate": 1000, "traffic": "roce", "source": 101, "in": 3,
    "out": 101, "seq": 44, "payload": 4000}]}]
JSON
"${SEND[@]}" --to "127.0.0.1:$UDP" <d.json >frames.txt || fail "sending the datagrams"
FL=$(head -1 frames.txt | $PY -c 'import json,sys; print(json.loads(sys.stdin.readline())["frame_length"])')

S='source="sflow"'
E='rule="roce",interface="Eth1/1"'
# 10 + 30 + 1 + 1 + 1 RoCE samples at 1 in 1000 (datagram 7 was dropped whole)
expect "fabric_flow_rule_packets_total{target=\"tor1\",$E,$S}" 43000 "estimated packets"
expect "fabric_flow_rule_bytes_total{target=\"tor1\",$E,$S}" $((43000 * FL)) "estimated bytes"
expect "fabric_flow_rule_ecn_marked_packets_total{target=\"tor1\",$E,$S}" 10000 "CE-marked"
expect "fabric_flow_rule_packets_total{target=\"tor1\",rule=\"roce-ce\",interface=\"Eth1/1\",$S}" \
  10000 "the CE-only rule"
# DSCP 26 >> 3 = tc 3
expect "fabric_flow_rule_packets_total{target=\"tor1\",rule=\"roce-tc3\",interface=\"Eth1/1\",$S}" \
  43000 "tc from DSCP"
expect "fabric_flow_rule_packets_total{target=\"tor1\",rule=\"sockets\",interface=\"ifIndex7\",$S}" \
  20480 "TCP socket rule on an unnamed port"
expect "fabric_flow_rule_dropped_packets_total{target=\"tor1\",$E,reason=\"no_buffer_space\",$S}" \
  2 "drops by reason"
expect "fabric_flow_rule_dropped_packets_total{target=\"tor1\",$E,reason=\"acl\",$S}" 1 "acl drops"
expect "fabric_flow_rule_dropped_packets_total{target=\"tor1\",rule=\"roce-ce\",interface=\"Eth1/1\",reason=\"no_buffer_space\",$S}" \
  2 "CE drops"
expect "fabric_port_bytes_total{target=\"tor1\",interface=\"Eth1/1\",direction=\"rx\",$S}" \
  123456789 "counter sample"
expect "fabricscope_sflow_lost_datagrams_total{target=\"tor1\",$S}" 4 \
  "lost datagrams (3, 4, 5 skipped; 7 dropped)"
expect "fabricscope_sflow_decode_errors_total{target=\"tor1\",reason=\"truncated\",$S}" 1 \
  "the truncated datagram"
expect "fabricscope_sflow_datagrams_total{target=\"tor1\",$S}" 4 "datagrams accepted"
expect "fabricscope_sflow_socket_dropped_datagrams_total{target=\"tor1\",listen=\"[::]:$UDP\",kind=\"unknown_agent\",$S}" \
  1 "the unknown agent"
expect "fabricscope_sflow_socket_dropped_datagrams_total{target=\"tor1\",listen=\"[::]:$UDP\",kind=\"undecodable\",$S}" \
  1 "the non-sFlow datagram"
ok "estimated packets, bytes, CE, tc, drops by reason, counters, losses and drops exact"
M
! grep -q 'ifIndex77\|ifIndex78\|192\.0\.2\.99' m.txt || fail "a series of the unknown agent"
ok "the unknown agent created no series"

# The interval maxima and quantiles of datagram 1 were committed in its interval; the
# ring keeps them (later intervals without records add no sample).
RAW="http://127.0.0.1:$HTTP/api/v1/raw"
q() { curl -fsS -G "$RAW" --data-urlencode "match[]=$1" --data-urlencode "start=$(($(date +%s) - 120))"; }
q 'fabric_flow_rule_queue_depth_max_bytes{target="tor1",rule="roce"}' >depth.json
q 'fabric_flow_rule_queue_depth_p90_bytes{target="tor1",rule="roce"}' >p90.json
q 'fabric_flow_rule_transit_delay_max_seconds{target="tor1",rule="roce"}' >delay.json
$PY - depth.json p90.json delay.json <<'PY' || fail "queue depth/transit delay: $(cat depth.json p90.json delay.json)"
import json, sys
def vals(f):
    r = json.load(open(f))["data"]["result"]
    assert len(r) == 1, r
    return [float(v) for _, v in r[0]["values"]]
assert vals(sys.argv[1]) == [1000.0], vals(sys.argv[1])
assert vals(sys.argv[2]) == [900.0], vals(sys.argv[2])
assert abs(vals(sys.argv[3])[0] - 10e-6) < 1e-12, vals(sys.argv[3])
PY
ok "queue depth max 1000, p90 900, transit delay max 10 us (one interval, in the ring)"

# IPv6 sender and agent ::1 on the same dual-stack socket: the other target.
cat >d6.json <<'JSON'
[{"agent": "::1", "seq": 1, "uptime": 10, "samples": [
   {"kind": "flow", "n": 4, "rate": 500, "traffic": "roce", "ipv": 6, "source": 12,
    "in": 12, "out": 13, "seq": 1}]}]
JSON
"${SEND[@]}" --to "[::1]:$UDP" <d6.json >/dev/null || fail "sending over IPv6"
expect "fabric_flow_rule_packets_total{target=\"tor6\",rule=\"roce\",interface=\"ifIndex12\",$S}" \
  2000 "the IPv6 agent's target"
ok "IPv6 sender and agent reach their target"

curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" >targets.json
$PY - targets.json <<'PY' || fail "sflow source in /api/v1/targets: $(head -c 800 targets.json)"
import json, sys
d = {(t["target"], t["source"]): t for t in json.load(open(sys.argv[1]))["data"]}
t = d[("tor1", "sflow")]
assert t["state"] == "up", t
assert t["sflow_agent"] == "127.0.0.1" and t["sflow_datagrams"] == 4, t
assert t["sflow_lost_datagrams"] == 4, t
assert d[("tor6", "sflow")]["state"] == "up"
PY
ok "/api/v1/targets: sflow up with its counts"

M
pt=$(promtool check metrics <m.txt 2>&1) || fail "promtool check metrics: $pt"
[ -z "$pt" ] || fail "promtool check metrics warned: $pt"
ok "promtool check metrics: clean"

kill -TERM "$FS_PID"
wait_exit "$FS_PID" 20
rc=0
wait "$FS_PID" 2>/dev/null || rc=$?
[ "$rc" = 0 ] || fail "exit code $rc after SIGTERM"
ok "SIGTERM: clean exit"

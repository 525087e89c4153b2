#!/usr/bin/env bash
# Spoofed sFlow datagrams beside an honest agent (issue 32). The honest agent sends from
# 127.0.0.1 with agent address 127.0.0.1; a spoofer on 127.0.0.2 (Linux routes all of
# 127/8 to loopback, so a socket bound to it sends from it) writes the same agent address
# into its datagrams and tries the four attacks the agent address alone let through:
#   - uptime 0 (taken as an agent restart: sequences and counters start over);
#   - datagram sequence numbers just ahead of the honest ones (which would then be
#     dropped as duplicates);
#   - 256 made-up ifIndexes (the target's port table full, real ports over_limit);
#   - a huge sampling rate (flow estimates inflated a million times).
# Checked on /metrics, exactly: the honest series are what the honest datagrams alone
# give (flow-rule packets, port packets and bytes, datagrams, no loss, no restart, no
# duplicate, no rate change, no made-up port); every spoofed datagram is counted in
# fabricscope_sflow_datagrams_rejected_total{reason="source"} and the spoofer is logged
# once (once a minute per source). A relay listed in `sources` is accepted for its
# target, the agent's own address is then refused for it. A version-4 datagram from a
# target's source is that target's decode error (reason version); one from an address
# no target accepts is the socket's undecodable.
source "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
SEND=("$PY" "$FS_SOURCE_DIR/tests/integration/sflow_send.py")
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
cd "$T"

HTTP=$(free_tcp_port)
UDP=$(free_udp_port)
cat >fs.yaml <<YAML
listen: 127.0.0.1:$HTTP
flow_rules:
  - { name: roce, protocol: udp, dst_port: 4791 }
targets:
  - name: tor1
    address: 127.0.0.1
    sflow: { listen: 127.0.0.1, port: $UDP, interval: 200ms, interface_names: { 101: Eth1/1 } }
  - name: relayed
    address: 10.1.1.1
    sflow: { listen: 127.0.0.1, port: $UDP, interval: 200ms, sources: [127.0.0.3] }
YAML
"$FABRICSCOPE" --check-config fs.yaml >check.out 2>&1 || fail "config refused: $(cat check.out)"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
wait_for 20 "the sFlow socket is bound" grep -q "listening on 127.0.0.1:$UDP" fabricscope.log

M() { curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt"; }
value() { awk -v k="$1" 'index($0, k " ") == 1 {print $2; exit}' "$T/m.txt"; }
is() { M && [ "$(value "$1")" = "$2" ]; }
wait_for_quiet() {
  local until=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $until ] || return 1
    sleep 0.1
  done
}
expect() { # expect SERIES VALUE WHAT
  if ! wait_for_quiet 20 is "$1" "$2"; then
    M
    fail "$3: $1 is $(value "$1"), not $2"
  fi
}

# Honest datagrams 1-6 (uptime 10 s on), each 10 RoCE samples at 1 in 1000 on ifIndex
# 101 and a counter sample (1000 more unicast packets, 1 MB more octets each); the
# spoofer's 10 datagrams go between honest 2 and 3, and after 6.
$PY - "$UDP" >d.json <<'PY'
import json, sys
honest, spoof = [], []
def h(k):
    return {"agent": "127.0.0.1", "from": "127.0.0.1", "seq": k, "uptime": 10000 + 1000 * k,
            "samples": [
                {"kind": "flow", "n": 10, "rate": 1000, "traffic": "roce", "source": 101,
                 "in": 3, "out": 101, "seq": 10 * k - 9, "payload": 1000},
                {"kind": "counters", "ifindex": 101, "seq": k, "in_ucast": 1000 * k,
                 "in_octets": 1000000 * k}]}
def s(seq, uptime, samples):
    return {"agent": "127.0.0.1", "from": "127.0.0.2", "seq": seq, "uptime": uptime,
            "samples": samples}
restart = [s(1, 0, [{"kind": "counters", "ifindex": 101, "seq": 1, "in_ucast": 5,
                     "in_octets": 5}]) for _ in range(2)]
ahead = [s(q, 12500, [{"kind": "flow", "n": 1, "rate": 1000, "traffic": "roce",
                       "source": 101, "in": 3, "out": 101, "seq": 21 + q}])
         for q in range(3, 9)]
ports = [s(100, 13000, [{"kind": "counters", "ifindex": 2000 + i, "seq": 1,
                          "in_ucast": 1} for i in range(256)])]
rate = [s(101, 13000, [{"kind": "flow", "n": 1, "rate": 1000000000, "traffic": "roce",
                         "source": 101, "in": 3, "out": 101, "seq": 100}])]
items = [h(1), h(2)] + restart + ahead + [h(3), h(4)] + ports + [h(5), h(6)] + rate
json.dump(items, sys.stdout)
PY
"${SEND[@]}" --to "127.0.0.1:$UDP" <d.json >/dev/null || fail "sending the datagrams"

S='source="sflow"'
T1='target="tor1"'
expect "fabricscope_sflow_datagrams_rejected_total{$T1,listen=\"127.0.0.1:$UDP\",reason=\"source\",$S}" \
  10 "every spoofed datagram counted"
expect "fabricscope_sflow_datagrams_total{$T1,$S}" 6 "the honest datagrams, all of them"
expect "fabric_flow_rule_packets_total{$T1,rule=\"roce\",interface=\"Eth1/1\",$S}" 60000 \
  "60 honest samples at 1 in 1000 (no inflated rate, no spoofed sample)"
expect "fabric_port_packets_total{$T1,interface=\"Eth1/1\",direction=\"rx\",$S}" 5000 \
  "port packets: 5 honest increases of 1000 (no restart, no jump)"
expect "fabric_port_bytes_total{$T1,interface=\"Eth1/1\",direction=\"rx\",$S}" 6000000 \
  "port bytes: the honest counter"
expect "fabricscope_sflow_sequence_resets_total{$T1,kind=\"agent_restart\",$S}" 0 "no restart"
expect "fabricscope_sflow_lost_datagrams_total{$T1,$S}" 0 "no loss"
expect "fabricscope_sflow_lost_samples_total{$T1,kind=\"over_limit\",$S}" 0 "no port over the limit"
expect "fabricscope_sflow_sampling_rate_changes_total{$T1,$S}" 0 "no rate change"
M
! grep -q 'ifIndex2[0-9][0-9][0-9]' m.txt || fail "a series of a made-up ifIndex"
curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" >targets.json
$PY - targets.json <<'PY' || fail "duplicates in /api/v1/targets: $(head -c 800 targets.json)"
import json, sys
d = {(t["target"], t["source"]): t for t in json.load(open(sys.argv[1]))["data"]}
t = d[("tor1", "sflow")]
assert t["sflow_duplicates"] == 0 and t["sflow_datagrams"] == 6, t
PY
n=$(grep -c "from 127.0.0.2, which is not among the target's sources" fabricscope.log || true)
[ "$n" = 1 ] || fail "the spoofer logged $n times, not once: $(grep sflow fabricscope.log | tail -5)"
ok "4 attacks from 127.0.0.2: the honest series exact, 10 spoofed datagrams counted, logged once"

# The relay 127.0.0.3 is tor "relayed"'s only source: its datagrams count, the agent's
# own address does not. A version-4 datagram from tor1's address is tor1's decode error;
# one from 127.0.0.9 (nobody's source) is the socket's.
cat >r.json <<'JSON'
[{"agent": "10.1.1.1", "from": "127.0.0.3", "seq": 1, "uptime": 5000, "samples": [
   {"kind": "flow", "n": 2, "rate": 100, "traffic": "roce", "source": 7, "in": 7,
    "out": 8, "seq": 1}]},
 {"agent": "10.1.1.1", "from": "127.0.0.1", "seq": 2, "uptime": 6000, "samples": [
   {"kind": "flow", "n": 2, "rate": 100, "traffic": "roce", "source": 7, "in": 7,
    "out": 8, "seq": 3}]},
 {"agent": "127.0.0.1", "from": "127.0.0.1", "version": 4, "seq": 7, "uptime": 17000},
 {"agent": "127.0.0.1", "from": "127.0.0.9", "version": 4, "seq": 7, "uptime": 17000}]
JSON
"${SEND[@]}" --to "127.0.0.1:$UDP" <r.json >/dev/null || fail "sending the relayed datagrams"
expect "fabric_flow_rule_packets_total{target=\"relayed\",rule=\"roce\",interface=\"ifIndex7\",$S}" \
  200 "the relay's datagram"
expect "fabricscope_sflow_datagrams_rejected_total{$T1,listen=\"127.0.0.1:$UDP\",reason=\"source\",$S}" \
  11 "the agent's own address, not among the relayed target's sources"
expect "fabricscope_sflow_decode_errors_total{$T1,reason=\"version\",$S}" 1 \
  "a version-4 datagram from the target's address"
expect "fabricscope_sflow_socket_dropped_datagrams_total{$T1,listen=\"127.0.0.1:$UDP\",kind=\"undecodable\",$S}" \
  1 "a version-4 datagram from nobody's source"
expect "fabricscope_sflow_datagrams_total{target=\"relayed\",$S}" 1 "the relayed target's datagrams"
ok "a relay in sources counts, the agent's own address then does not; version 4 attributed by source"

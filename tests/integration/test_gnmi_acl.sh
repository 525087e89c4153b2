#!/usr/bin/env bash
# gNMI ACL entry counters mapped to flow rules by the entries' descriptions (no acl_rules):
# the gNMI simulator (tests/sim/gnmi/gnmi_sim.py) serves the scenario's acl_entries under
# /acl/acl-sets (openconfig-acl: description in config and state, matched-packets and
# matched-octets in state); fabricscope subscribes to the entries' state over real gRPC
# with TLS, once with PROTO and once with JSON_IETF encoding (two targets). Checked on
# /metrics: fabric_flow_rule_{packets,bytes}_total{rule,source="gnmi"} for the entries
# whose description is acl_description_prefix + a rule's name, equal to the model
# (tests/sim/scenario.py acl_matched_*) at a time within the run (the counters pass 2^53:
# checked exactly), the two rules' counts in the ratio of their traffic classes' shares
# (both entries come in one notification, computed at one instant); no series for the
# entry whose description names no rule nor for the one without the prefix; an entry
# mapped by acl_rules keeps that mapping. Then a reload without the prefix moves the
# unprefixed entry onto its rule.
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
BASE=9007199254740993
boot=$(($(date +%s) - 100))
cat >scenario.json <<JSON
{"ports": 8, "counter_base": $BASE, "boot_epoch_s": $boot,
 "tc_share": [0.4, 0, 0, 0.6, 0, 0, 0, 0],
 "acl_entries": [
   {"set": "FLOWS", "seq": 10, "description": "fabricscope:nccl-roce", "tc": 3},
   {"set": "FLOWS", "seq": 20, "description": "fabricscope:nccl-sockets", "tc": 0},
   {"set": "FLOWS", "seq": 30, "description": "fabricscope:not-a-rule", "tc": 0},
   {"set": "FLOWS", "seq": 40, "description": "storage", "tc": 0},
   {"set": "OTHER", "seq": 5, "description": "fabricscope:nccl-sockets", "tc": 3}]}
JSON

SIM_PORT=$(free_tcp_port)
$PY "$SIMPY" --gen-dir "$T/gen" --scenario "$T/scenario.json" --port "$SIM_PORT" \
  --port-file "$T/sim.port" --tls-cert srv.pem --tls-key srv.key --username monitor \
  --password-file pw.txt >"$T/sim.log" 2>&1 &
track $!
wait_for 20 "the gNMI simulator listens" test -s "$T/sim.port"

HTTP=$(free_tcp_port)
write_config() { # write_config PREFIX
  cat >fs.yaml <<EOF
listen: 127.0.0.1:$HTTP
flow_rules:
  - { name: nccl-roce, protocol: udp, dst_port: 4791 }
  - { name: nccl-sockets, protocol: tcp, dst_ports: 50000-50999 }
  - { name: storage, protocol: tcp, dst_port: 2049 }
  - { name: explicit, protocol: tcp, dst_port: 22 }
targets:
EOF
  for enc in proto json_ietf; do
    cat >>fs.yaml <<EOF
  - name: sw-$enc
    address: 127.0.0.1
    gnmi:
      port: $SIM_PORT
      tls: { ca_file: $T/ca.pem, server_name: gnmi-sim.test }
      username: monitor
      password_file: $T/pw.txt
      encoding: $enc
      acl_description_prefix: "$1"
      acl_rules:
        - { rule: explicit, acl: OTHER, sequence_id: 5 }
      subscriptions:
        - { path: "/acl/acl-sets/acl-set[name=*][type=*]/acl-entries/acl-entry[sequence-id=*]", mode: sample, interval: 300ms }
EOF
  done
}
write_config "fabricscope:"
"$FABRICSCOPE" --check-config fs.yaml >check.out 2>&1 || fail "config refused: $(cat check.out)"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20

S='source="gnmi"'
have_all() {
  curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" || return 1
  local enc r
  for enc in proto json_ietf; do
    for r in nccl-roce nccl-sockets explicit; do
      grep -q "^fabric_flow_rule_packets_total{target=\"sw-$enc\",rule=\"$r\",$S}" "$T/m.txt" || return 1
    done
  done
}
wait_for 30 "per-rule ACL counters of both targets" have_all
NOW=$(date +%s.%N)
$PY - "$T/m.txt" "$T/scenario.json" "$FS_SOURCE_DIR/tests/sim" "$NOW" <<'PY' || fail "ACL counters by description (in $T/m.txt)"
import re, sys
sys.path.insert(0, sys.argv[3])
import scenario
sc = scenario.Scenario(sys.argv[2])
now = float(sys.argv[4])
m = {}
for line in open(sys.argv[1]):
    g = re.match(r'^(fabric_flow_rule_\w+)\{target="([^"]+)",rule="([^"]+)",source="gnmi"\} (\S+)$', line)
    if g:
        m[(g.group(1), g.group(2), g.group(3))] = int(g.group(4))
rules = {r for _, _, r in m}
assert rules == {"nccl-roce", "nccl-sockets", "explicit"}, "rules with series: %s" % rules
ent = {(e["set"], e["seq"]): e for e in sc.acl_entries}
want = {"nccl-roce": ent[("FLOWS", 10)], "nccl-sockets": ent[("FLOWS", 20)],
        "explicit": ent[("OTHER", 5)]}
t1 = sc.since_boot(now)
t0 = t1 - 30
for tgt in ("sw-proto", "sw-json_ietf"):
    for rule, e in want.items():
        for metric, fn in (("fabric_flow_rule_packets_total", sc.acl_matched_pkts),
                           ("fabric_flow_rule_bytes_total", sc.acl_matched_octets)):
            v = m[(metric, tgt, rule)]
            # the model is monotonic in t: find a time in the run giving exactly v
            lo, hi = t0, t1
            assert fn(e, lo) <= v <= fn(e, hi), (tgt, rule, metric, v, fn(e, lo), fn(e, hi))
            for _ in range(80):
                mid = (lo + hi) / 2
                if fn(e, mid) < v:
                    lo = mid
                else:
                    hi = mid
            assert fn(e, hi) == v, "%s %s %s = %d is no value of the model (nearest %d)" % (
                tgt, rule, metric, v, fn(e, hi))
    roce = m[("fabric_flow_rule_packets_total", tgt, "nccl-roce")] - sc.counter_base
    sock = m[("fabric_flow_rule_packets_total", tgt, "nccl-sockets")] - sc.counter_base
    print("# %s: nccl-roce %d, nccl-sockets %d packets (ratio %.4f)" % (tgt, roce, sock, sock / roce))
    assert abs(sock / roce - 0.4 / 0.6) < 1e-3, (roce, sock)
PY
ok "ACL entries named by description: nccl-roce, nccl-sockets exact (PROTO and JSON_IETF); explicit acl_rules kept; no series for other descriptions"

# Without the prefix, entry 40 ("storage") names the storage rule.
write_config ""
hup
has_storage() {
  curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" &&
    grep -q "^fabric_flow_rule_packets_total{target=\"sw-proto\",rule=\"storage\",$S}" "$T/m.txt" &&
    grep -q "^fabric_flow_rule_packets_total{target=\"sw-json_ietf\",rule=\"storage\",$S}" "$T/m.txt"
}
wait_for 30 "the storage rule's series after the reload" has_storage
ok "after a reload without the prefix, the entry described \"storage\" feeds rule storage"

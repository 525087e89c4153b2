#!/usr/bin/env bash
# The shipped alert rules in a real Prometheus: fabricscope streams from the gNMI
# simulator, whose recurring congestion event (tests/sim/scenario.py: port Eth1/49,
# 200000 ECN-marked packets/s for 2 s every 30 s) must fire FabricEcnSurge for tor1
# Eth1/49 -- and for no other port. (The SNMP simulator shares the scenario but its
# MIBs carry no ECN counter, so the ECN series come over gNMI.)
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf

SIM_PORT=$(free_tcp_port)
$PY "$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py" --gen-dir "$T/gen" --port "$SIM_PORT" \
  --port-file "$T/sim.port" >"$T/sim.log" 2>&1 &
track $!
wait_for 20 "the gNMI simulator listens" test -s "$T/sim.port"
HTTP=$(free_tcp_port)
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
targets:
  - name: tor1
    address: 127.0.0.1
    gnmi:
      port: $SIM_PORT
      insecure: true
      subscriptions:
        - { path: "/interfaces/interface[name=*]/state/counters", mode: sample, interval: 1s }
YML
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"
has_ecn() { curl -fsS "http://127.0.0.1:$HTTP/metrics" | grep -q '^fabric_port_ecn_marked_packets_total{target="tor1",interface="Eth1/49"'; }
wait_for 30 "ECN counters from the simulator in /metrics" has_ecn

PROM_PORT=$(free_tcp_port)
mkdir -p "$T/prom-data"
cat >"$T/prometheus.yml" <<YML
global: { scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s }
rule_files: [ "$FS_SOURCE_DIR/config/alerts.yml" ]
scrape_configs:
  - job_name: fabricscope
    static_configs: [ { targets: [ "127.0.0.1:$HTTP" ] } ]
YML
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$T/prometheus.log" 2>&1 &
track $!
wait_http "http://127.0.0.1:$PROM_PORT/-/ready" 60
curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/rules" | jq -e '[.data.groups[].rules[]] | length == 7' >/dev/null ||
  fail "Prometheus did not load the 7 rules of config/alerts.yml"
ok "Prometheus loaded config/alerts.yml"

alerts() { curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/alerts"; }
ecn_firing() {
  alerts | jq -e '[.data.alerts[] | select(.labels.alertname == "FabricEcnSurge" and .state == "firing")] | length > 0' >/dev/null
}
wait_for 150 "FabricEcnSurge firing" ecn_firing
alerts | jq -c '[.data.alerts[] | select(.labels.alertname == "FabricEcnSurge") | {state, target: .labels.target, interface: .labels.interface, value}]' >"$T/ecn.json"
jq -e 'all(.[]; .target == "tor1" and .interface == "Eth1/49")' "$T/ecn.json" >/dev/null ||
  fail "FabricEcnSurge fired for another port: $(cat "$T/ecn.json")"
ok "FabricEcnSurge fired in a real Prometheus for the simulator's congestion: $(cat "$T/ecn.json")"
# The collector's own alerts stay quiet against a healthy simulator.
quiet=$(alerts | jq -r '[.data.alerts[] | select(.labels.alertname | test("^Fabricscope")) | .labels.alertname] | join(",")')
[ -z "$quiet" ] || fail "collector alerts active against a healthy setup: $quiet"
ok "no collector alert against the healthy setup"

#!/usr/bin/env bash
# The Grafana dashboard (docker/grafana/fabricscope.json) and its provisioning files,
# tested as far as can be without Grafana (not packaged in Debian):
#   - the JSON parses and is a well-formed dashboard (unique panel ids, grid positions,
#     every panel has queries on the ${datasource} variable, only defined variables);
#   - the provisioning YAML parses and points the provider at the path the compose file
#     mounts the dashboard at;
#   - every metric a query names is in the catalogue (schemas/metrics.json);
#   - every panel's PromQL is run against a real Prometheus scraping a real fabricscope
#     that polls the SNMP simulator (through a real snmpd), streams from the gNMI
#     simulator and (as root, where the tree has it) polls the ONYX CLI simulator behind a
#     real sshd for flow-rule counters, and must return data. Queries on metrics nothing
#     here can produce are listed as NOT CHECKED with the reason (and pass as checked if
#     they do return data).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's python3 (yaml, grpcio, protobuf), not a pyenv one
DASH=$FS_SOURCE_DIR/docker/grafana/fabricscope.json
PROV=$FS_SOURCE_DIR/docker/grafana/provisioning
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
$PY -c 'import yaml, grpc, google.protobuf' || fail "python3-yaml / python3-grpcio / python3-protobuf missing"

# ---- static checks; writes the queries to run, one per line: panel<TAB>ref<TAB>expr ----
cat >"$T/check_static.py" <<'PY'
import json, re, sys, yaml

dash_path, prov_dir, catalogue_path, out_path = sys.argv[1:5]
problems = []
dash = json.load(open(dash_path))
for key in ("uid", "title", "panels", "templating", "schemaVersion"):
    if key not in dash:
        problems.append("dashboard has no %r" % key)
variables = {v["name"] for v in dash["templating"]["list"]}
if not {"datasource", "target"} <= variables:
    problems.append("variables datasource and target missing: %s" % sorted(variables))
builtin = {"__rate_interval", "__interval", "__range"}
cat = json.load(open(catalogue_path))["metrics"]
known = set()
for m in cat:
    known.add(m["name"])
    if m["type"] == "histogram":
        known.update(m["name"] + s for s in ("_bucket", "_sum", "_count"))

ids, queries = set(), []
for p in dash["panels"]:
    if p.get("id") in ids:
        problems.append("panel id %s repeats" % p.get("id"))
    ids.add(p.get("id"))
    g = p.get("gridPos", {})
    if not all(isinstance(g.get(k), int) for k in "xywh") or g["x"] + g["w"] > 24:
        problems.append("panel %r: bad gridPos %r" % (p.get("title"), g))
    if p["type"] == "row":
        continue
    if p.get("datasource", {}).get("uid") != "${datasource}":
        problems.append("panel %r does not use the ${datasource} variable" % p["title"])
    if not p.get("targets"):
        problems.append("panel %r has no query" % p["title"])
    for t in p.get("targets", []):
        expr = t.get("expr", "")
        if not expr.strip():
            problems.append("panel %r query %s is empty" % (p["title"], t.get("refId")))
        for v in re.findall(r"\$\{?(\w+)", expr):
            if v not in variables and v not in builtin:
                problems.append("panel %r uses undefined variable $%s" % (p["title"], v))
        for name in sorted(set(re.findall(r"\b(fabric(?:scope)?_[A-Za-z0-9_]+)", expr))):
            if name not in known:
                problems.append("panel %r names %s, which is not in the catalogue" % (p["title"], name))
        queries.append((p["title"], t.get("refId", "?"), p["type"], expr))

# Provisioning: a Prometheus datasource, and a provider loading the dashboard's folder.
ds = yaml.safe_load(open(prov_dir + "/datasources/fabricscope.yaml"))
if not any(d.get("type") == "prometheus" and d.get("url", "").startswith("http")
           for d in ds.get("datasources", [])):
    problems.append("datasource provisioning has no Prometheus datasource with a URL")
dp = yaml.safe_load(open(prov_dir + "/dashboards/fabricscope.yaml"))
paths = [p.get("options", {}).get("path") for p in dp.get("providers", []) if p.get("type") == "file"]
if not paths or not all(paths):
    problems.append("dashboard provisioning has no file provider with a path")

if problems:
    print("\n".join(problems))
    sys.exit(1)
with open(out_path, "w") as f:
    for q in queries:
        f.write("\t".join(q) + "\n")
print("%d panels, %d queries, provisioning ok" % (len(ids), len(queries)))
PY
out=$($PY "$T/check_static.py" "$DASH" "$PROV" "$FS_SOURCE_DIR/schemas/metrics.json" "$T/queries.tsv") ||
  fail "dashboard static checks: $out"
ok "dashboard JSON and provisioning: $out; every metric is in the catalogue"

# ---- the demo: SNMP simulator + gNMI simulator -> fabricscope -> Prometheus ----
start_snmp_sim --cong-port 5 --cong-tc 3

cd "$T"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=fs-test-ca 2>/dev/null
openssl req $ec -keyout srv.key -out srv.csr -subj /CN=gnmi-sim 2>/dev/null
printf 'subjectAltName=DNS:gnmi-sim.test,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
  -extfile san.ext 2>/dev/null
printf 'dash-pw\n' >pw.txt
# A leaf whose clock runs 250 ms ahead, congested every 4 s on Eth1/2 tc 3 (ECN, PFC).
cat >scenario.json <<JSON
{"ports": 8, "clock_offset_ms": 250, "boot_epoch_s": $(($(date +%s) - 100)),
 "congestion": {"port": 2, "tc": 3, "period_s": 4, "duration_s": 2, "phase_s": 0}}
JSON
GNMI_PORT=$(free_tcp_port)
$PY "$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py" --gen-dir "$T/gen" --scenario scenario.json \
  --port "$GNMI_PORT" --port-file "$T/gnmi.port" --tls-cert srv.pem --tls-key srv.key \
  --username monitor --password-file pw.txt >"$T/gnmi_sim.log" 2>&1 &
track $!
wait_for 30 "the gNMI simulator listens" test -s "$T/gnmi.port"

# Flow rules come from the ONYX CLI driver: its simulator behind a private sshd (root).
ONYX_START=$FS_SOURCE_DIR/tests/sim/onyx/start-onyx-sim.sh
CLI=0 CLI_WHY=""
if [ ! -e "$ONYX_START" ]; then
  CLI_WHY="this tree has no ONYX CLI simulator (tests/sim/onyx)"
elif [ "$(id -u)" != 0 ]; then
  CLI_WHY="the ONYX CLI simulator needs root (its private sshd, a test user), and this test runs as $(id -un)"
else
  CLI=1
  chmod 0711 "$T"
  cat >cli-scenario.json <<JSON
{"ports": 8, "boot_epoch_s": $(($(date +%s) - 100)),
 "congestion": {"port": 3, "tc": 3, "period_s": 6, "duration_s": 2, "phase_s": 0}}
JSON
  chmod 0644 cli-scenario.json
  start_onyx_sim cli --scenario "$T/cli-scenario.json"
fi

HTTP=$(free_tcp_port)
{
  echo "listen: 127.0.0.1:$HTTP"
  [ "$CLI" = 1 ] && printf 'flow_rules:\n  - { name: nccl, protocol: udp, dst_port: 4791, tc: 3 }\n'
  echo "targets:"
  [ "$CLI" = 1 ] && cat <<YML
  - name: sw2
    address: 127.0.0.1
    cli: { port: $ONYX_SSH_PORT, username: $ONYX_SSH_USER, password_file: $ONYX_PASSWORD_FILE,
           known_hosts: $ONYX_KNOWN_HOSTS, interval: 1s }
YML
  cat <<YML
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 700ms }
  - name: leaf1
    address: 127.0.0.1
    gnmi:
      port: $GNMI_PORT
      tls: { ca_file: $T/ca.pem, server_name: gnmi-sim.test }
      username: monitor
      password_file: $T/pw.txt
      encoding: proto
      subscriptions:
        - { path: "/qos/interfaces/interface[interface-id=*]/output/queues", mode: sample, interval: 500ms }
        - { path: "/interfaces/interface[name=*]/state/counters", mode: sample, interval: 500ms }
        - { path: "/qos/interfaces/interface[interface-id=*]", mode: sample, interval: 1s }
YML
} >fs.yaml
"$FABRICSCOPE" --check-config fs.yaml >check.out 2>&1 || fail "config refused: $(cat check.out)"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"
start_prometheus "$HTTP"

RATE_INTERVAL=20s # what Grafana's $__rate_interval would be: 4 x the 1 s scrape, plus slack
expand() { sed -e 's/\$target\b/.*/g; s/\${target}/.*/g' -e "s/\\\$__rate_interval/$RATE_INTERVAL/g"; }
have() { [ "$(prom_query "$1" | jq '.data.result | length')" -gt 0 ]; }
wait_for 60 "Prometheus has all $((2 + CLI)) targets up" \
  have "count(fabricscope_target_up == 1) == $((2 + CLI))"
[ "$CLI" = 0 ] || wait_for 60 "Prometheus has flow-rule counters from the CLI" \
  have 'fabric_flow_rule_packets_total{target="sw2"}'
wait_for 60 "Prometheus has a 20 s rate of ECN marks" \
  have "count(rate(fabric_port_ecn_marked_packets_total[$RATE_INTERVAL])) > 0"

# Incidents: five 2-s surges 8 s apart on the SNMP switch make a recurring incident;
# asking for the incidents refreshes the incident metrics at once (the daemon does so
# every 30 s).
for _ in 1 2 3 4 5; do # the stimulus, as a switch would congest; not a wait
  kill -USR2 "$SIM_PID"
  sleep 2
  kill -USR2 "$SIM_PID"
  sleep 6
done
curl -fsS "http://127.0.0.1:$HTTP/api/v1/incidents" >"$T/incidents.json" ||
  fail "/api/v1/incidents after the surges"
wait_for 60 "Prometheus has the next-incident metric" \
  have 'fabricscope_incident_next_expected_timestamp_seconds'

# ---- every panel's query against Prometheus ----
# Metrics no simulator here can produce, with the reason (their panels are NOT CHECKED
# when the query returns nothing).
unfed_reason() {
  case "$1" in
    *fabric_flow_rule_*)
      [ "$CLI" = 0 ] &&
        echo "flow-rule counters come only from the ONYX CLI driver, and $CLI_WHY; the SNMP and gNMI simulators and fs-testd have no flow rules" ;;
  esac
}
checked=0 not_checked=0
while IFS=$'\t' read -r title ref type expr; do
  q=$(expand <<<"$expr")
  res=$(curl -sS --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$q")
  [ "$(jq -r .status <<<"$res")" = success ] || fail "panel '$title' $ref: Prometheus refused $q: $(jq -r .error <<<"$res")"
  n=$(jq '.data.result | length' <<<"$res")
  if [ "$n" -eq 0 ]; then
    why=$(unfed_reason "$expr")
    [ -n "$why" ] || fail "panel '$title' $ref returned no data: $q"
    echo "NOT CHECKED: panel '$title' $ref: $why"
    not_checked=$((not_checked + 1))
    continue
  fi
  if [ "$type" = heatmap ]; then
    # One row per port: every series names a target and an interface, and there are several.
    jq -e '.data.result | length >= 2 and all(.metric.target and .metric.interface)' <<<"$res" >/dev/null ||
      fail "heatmap '$title' is not one series per port: $(jq -c '[.data.result[].metric]' <<<"$res" | head -c 300)"
  fi
  checked=$((checked + 1))
  echo "  checked: panel '$title' $ref -> $n series"
done <"$T/queries.tsv"
[ "$checked" -gt 0 ] || fail "no query checked"
ok "$checked panel queries returned data from a real Prometheus; $not_checked could not be checked (the NOT CHECKED lines say why)"

#!/usr/bin/env bash
# external_labels travel with remote_write: fabricscope polls the SNMP simulator and
# writes to a real Prometheus (--web.enable-remote-write-receiver, scraping nothing);
# every series Prometheus receives carries replica="a" and cluster="fab1", as /metrics
# does, so a Mimir HA tracker or Thanos deduplication can tell the replicas apart.
source "$(dirname "$0")/lib.sh"

start_snmp_sim
PROM_PORT=$(free_tcp_port)
mkdir -p "$T/prom-data"
printf 'global: { scrape_interval: 1m }\n' >"$T/prometheus.yml"
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --web.enable-remote-write-receiver \
  --log.level=warn >"$T/prometheus.log" 2>&1 &
track $!
wait_http "http://127.0.0.1:$PROM_PORT/-/ready" 60

HTTP=$(free_tcp_port)
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
external_labels: { replica: a, cluster: fab1 }
remote_write:
  - url: http://127.0.0.1:$PROM_PORT/api/v1/write
    queue: { batch_send_deadline: 1s }
targets:
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 700ms }
YML
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"
n() { prom_query "$1" | jq -r '.data.result[0].value[1] // 0'; }
received() { [ "$(n 'count(fabric_port_bytes_total{target="tor1"})')" -gt 0 ]; }
wait_for 60 "samples written to Prometheus" received
# One query, one instant: two counts taken apart see different numbers of series while
# samples keep arriving. label!="x" also matches a series without the label.
all=$(n 'count({target="tor1"})')
unlabelled=$(n 'count({target="tor1",replica!="a"} or {target="tor1",cluster!="fab1"})')
[ "$all" -gt 0 ] && [ "$unlabelled" = 0 ] || fail "$unlabelled of $all received series lack the external labels"
ok "remote_write: all $all received series carry replica=\"a\",cluster=\"fab1\""
curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt"
bad=$(grep -v '^#' "$T/m.txt" | grep -vc 'cluster="fab1",replica="a"' || true)
[ "$bad" = 0 ] || fail "$bad /metrics samples without the external labels"
ok "/metrics: every sample carries them too"

#!/usr/bin/env bash
# OpenMetrics on the wire: fabricscope polling the SNMP simulator answers a scraper
# that asks for application/openmetrics-text with OpenMetrics (a strict parser takes
# it whole), and plain requests with text 0.0.4 (promtool-clean). A real Prometheus,
# which prefers OpenMetrics, scrapes it: the target is healthy, the samples arrive, and
# its metadata names counter families the OpenMetrics way (without _total), which only
# an OpenMetrics scrape produces.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
ACCEPT='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'

start_snmp_sim
HTTP=$(free_tcp_port)
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
external_labels: { replica: a }
targets:
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 700ms }
YML
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"
up() { curl -fsS "http://127.0.0.1:$HTTP/metrics" | grep -q '^fabricscope_target_up{target="tor1",source="snmp",replica="a"} 1'; }
wait_for 30 "tor1 up" up

curl -fsS -H "Accept: $ACCEPT" -D "$T/om.h" "http://127.0.0.1:$HTTP/metrics" >"$T/om.txt"
grep -qi '^content-type: application/openmetrics-text; version=1.0.0; charset=utf-8' "$T/om.h" ||
  fail "content type: $(grep -i content-type "$T/om.h")"
[ "$(tail -n 1 "$T/om.txt")" = "# EOF" ] || fail "OpenMetrics output does not end with # EOF"
grep -q '^# TYPE fabric_port_bytes counter$' "$T/om.txt" || fail "counter family named with _total"
grep -q '^fabricscope_ring_evicted_samples_created{reason="memory",replica="a"} ' "$T/om.txt" ||
  fail "no _created for the ring's counters"
out=$("$PY" - "$T/om.txt" <<'PY' 2>&1
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
fams = list(text_string_to_metric_families(open(sys.argv[1]).read()))
types = {f.type for f in fams}
assert {"counter", "gauge", "histogram"} <= types, types
n = sum(len(f.samples) for f in fams)
print(f"{len(fams)} families, {n} samples")
PY
) || fail "strict OpenMetrics parser: $out"
ok "OpenMetrics when asked: content type, # EOF, _created, strict parser takes it ($out)"

curl -fsS -D "$T/text.h" "http://127.0.0.1:$HTTP/metrics" >"$T/text.txt"
grep -qi '^content-type: text/plain; version=0.0.4' "$T/text.h" || fail "plain request not text 0.0.4"
grep -q '# EOF' "$T/text.txt" && fail "# EOF in the text format"
out=$(promtool check metrics <"$T/text.txt" 2>&1) || fail "promtool: $out"
[ -z "$out" ] || fail "promtool warned: $out"
ok "text 0.0.4 otherwise, promtool clean"

start_prometheus "$HTTP"
healthy() {
  curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/targets" |
    jq -e '.data.activeTargets[0] | .health == "up" and .lastError == ""' >/dev/null
}
wait_for 60 "Prometheus scrapes fabricscope successfully" healthy
has_bytes() {
  [ "$(prom_query 'count(fabric_port_bytes_total{target="tor1",replica="a"})' | jq -r '.data.result[0].value[1] // 0')" -gt 0 ]
}
wait_for 30 "port byte counters in Prometheus" has_bytes
meta=$(curl -fsS --get "http://127.0.0.1:$PROM_PORT/api/v1/targets/metadata" \
  --data-urlencode 'match_target={job="fabricscope"}' --data-urlencode 'metric=fabric_port_bytes')
jq -e '.data | length == 1 and .[0].type == "counter"' <<<"$meta" >/dev/null ||
  fail "Prometheus has no OpenMetrics-named family fabric_port_bytes: $meta"
ok "Prometheus scraped in OpenMetrics mode (family fabric_port_bytes, counter), samples stored"

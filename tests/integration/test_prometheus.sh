#!/usr/bin/env bash
# A real Prometheus scrapes the collector's /metrics (fed by the test-only driver through
# the real store, scheduler, ring and HTTP endpoint); what Prometheus stored must match
# what our ring holds, and `promtool check metrics` must be clean on the live output.
source "$(dirname "$0")/lib.sh"

# Port 0: the collector binds a free port itself and prints it ("port N").
"$FS_BUILD_DIR/tests/fs-testd" --port 0 --targets 3 --ports 8 --interval-ms 500 --step 1000 \
  >"$T/testd.out" 2>"$T/testd.log" &
track $!
wait_for 20 "fs-testd listening" grep -q '^port [0-9]' "$T/testd.out"
PORT=$(awk '/^port /{print $2; exit}' "$T/testd.out")
wait_http "http://127.0.0.1:$PORT/healthz"
ok "collector up on $PORT"

# promtool on the live exposition: no errors and no warnings (it prints nothing when clean).
sleep 1.2
curl -fsS "http://127.0.0.1:$PORT/metrics" >"$T/metrics.txt"
out=$(promtool check metrics <"$T/metrics.txt" 2>&1) || fail "promtool check metrics: $out"
[ -z "$out" ] || fail "promtool check metrics warned: $out"
grep -q '^# TYPE fabric_port_bytes_total counter$' "$T/metrics.txt" || fail "no TYPE line for port bytes"
ok "promtool check metrics clean ($(grep -vc '^#' "$T/metrics.txt") samples)"

# gzip: same content when the client accepts it.
curl -fsS -H 'Accept-Encoding: gzip' -D "$T/gz.headers" "http://127.0.0.1:$PORT/metrics" -o "$T/metrics.gz"
grep -qi '^content-encoding: gzip' "$T/gz.headers" || fail "no gzip encoding"
gunzip -c "$T/metrics.gz" | grep -q '^fabric_port_bytes_total{' || fail "gzip body lacks series"
ok "gzip exposition"

start_prometheus "$PORT"
ok "prometheus up on $PROM_PORT"

# Wait until Prometheus has scraped all 3 x 8 byte counters.
n=0
for _ in $(seq 100); do
  n=$(prom_query 'count(fabric_port_bytes_total)' | jq -r '.data.result[0].value[1] // 0')
  [ "$n" = 24 ] && break
  sleep 0.3
done
[ "$n" = 24 ] || fail "prometheus sees $n port byte series, want 24"
ok "prometheus scraped 24 port byte series"

up=$(prom_query 'sum(fabricscope_target_up{source="testsrc"})' | jq -r '.data.result[0].value[1]')
[ "$up" = 3 ] || fail "fabricscope_target_up sum is $up, want 3"
scrape_up=$(prom_query 'up{job="fabricscope"}' | jq -r '.data.result[0].value[1]')
[ "$scrape_up" = 1 ] || fail "scrape not healthy"
ok "targets up as seen by prometheus"

# Every value Prometheus stored for a series must be a sample our ring holds.
sel='fabric_port_bytes_total{target="sim-tor2",interface="Eth1/3",direction="rx"}'
for _ in $(seq 100); do
  c=$(prom_query "count_over_time(${sel}[30s])" | jq -r '.data.result[0].value[1] // 0')
  [ "$c" -ge 4 ] && break
  sleep 0.3
done
prom_vals=$(curl -fsS --get "http://127.0.0.1:$PROM_PORT/api/v1/query" \
  --data-urlencode "query=${sel}[30s]" | jq -r '.data.result[0].values[][1]' | sort -u)
[ -n "$prom_vals" ] || fail "prometheus has no samples for $sel"
now=$(date +%s)
curl -fsS --get "http://127.0.0.1:$PORT/api/v1/raw" --data-urlencode "match[]=$sel" \
  --data-urlencode "start=$((now - 120))" --data-urlencode "end=$((now + 5))" >"$T/raw.json"
[ "$(jq -r .status "$T/raw.json")" = success ] || fail "raw query: $(cat "$T/raw.json")"
[ "$(jq '.data.result | length' "$T/raw.json")" = 1 ] || fail "raw query matched $(jq '.data.result | length' "$T/raw.json") series"
ring_vals=$(jq -r '.data.result[0].values[][1]' "$T/raw.json" | sort -u)
for v in $prom_vals; do
  grep -qx "$v" <<<"$ring_vals" || fail "prometheus value $v is not in our ring"
  # The test driver's counter is step * port * cycles: exact integers, multiples of 3000.
  [ $((v % 3000)) = 0 ] || fail "value $v is not what the source produced"
done
nvals=$(wc -w <<<"$prom_vals")
[ "$nvals" -ge 3 ] || fail "only $nvals distinct values scraped"
ok "$nvals prometheus values found in the ring"

# The ring holds the full resolution (every 500 ms cycle), more than Prometheus' 1 s scrapes.
nring=$(jq '.data.result[0].values | length' "$T/raw.json")
[ "$nring" -ge 4 ] || fail "ring holds only $nring samples"
ok "ring holds $nring samples at 500 ms"

# Prometheus scrapes every 1 s and the targets are polled every 500 ms: half the polls
# never reach its TSDB, and the collector says so once Prometheus' scrapes are steady
# (four of them), naming the scraper and the share lost.
scrape_warned() { grep -q "/metrics is scraped every 1.0 s by 127.0.0.1 (Prometheus/" "$T/testd.log"; }
wait_for 20 "the slow-scrape warning" scrape_warned
line=$(grep "/metrics is scraped every" "$T/testd.log" | grep -v "(curl/" | head -n 1)
case "$line" in
*"3 of 3 targets are polled more often (every 0.5 s at the shortest)"*"never stores about 50% of those polls"*) ;;
*) fail "slow-scrape warning: $line" ;;
esac
[ "$(grep -c "/metrics is scraped every" "$T/testd.log")" = 1 ] || fail "warned more than once: $(grep "/metrics is scraped" "$T/testd.log")"
ok "the collector warned that Prometheus' 1 s scrape stores half of the 500 ms polls: ${line#*msg=}"

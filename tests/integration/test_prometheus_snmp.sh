#!/usr/bin/env bash
# The whole product against real peers: the fabricscope binary polls the simulated switch
# through a real snmpd, a real Prometheus scrapes fabricscope, and what Prometheus stored
# is checked through its query API against the switch and against our own ring.
source "$(dirname "$0")/lib.sh"

start_snmp_sim
HTTP=$(free_tcp_port)
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
targets:
  - name: tor1
    address: 127.0.0.1
    labels: { pod: p1, role: tor }
    snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 700ms }
YML
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$HTTP/metrics" | grep -q '^fabricscope_target_up{target="tor1",pod="p1",role="tor",source="snmp"} 1' && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/metrics.txt"
out=$(promtool check metrics <"$T/metrics.txt" 2>&1) || fail "promtool check metrics: $out"
[ -z "$out" ] || fail "promtool check metrics warned: $out"
ok "promtool check metrics clean on fabricscope's live output ($(grep -vc '^#' "$T/metrics.txt") samples)"

start_prometheus "$HTTP"
sel='fabric_port_bytes_total{target="tor1",interface="Eth1/1",direction="rx"}'
for _ in $(seq 150); do
  c=$(prom_query "count_over_time(${sel}[60s])" | jq -r '.data.result[0].value[1] // 0')
  [ "$c" -ge 4 ] && break
  sleep 0.2
done
[ "$c" -ge 4 ] || fail "prometheus has $c samples of $sel"
n=$(prom_query 'count(fabric_port_bytes_total{target="tor1"})' | jq -r '.data.result[0].value[1]')
[ "$n" = 128 ] || fail "prometheus sees $n port byte series, want 128 (64 ports x rx/tx)"
model=$(prom_query 'fabric_device_info{target="tor1"}' | jq -r '.data.result[0].metric.model')
[ "$model" = SN2700 ] || fail "device model $model"
ok "prometheus stored 128 port byte series and the device identity"

# The simulator's Eth1/1 receives at 5 Gb/s: so do the samples Prometheus stored. The
# rate is taken between the first and the last value Prometheus scraped, each at the time
# the poll took it (its timestamp in our ring): Prometheus' own scrape times are when it
# asked, which on a loaded machine can be a poll interval away from when the value was
# read, so they would measure the machine rather than the counter.
for _ in $(seq 150); do
  c=$(prom_query "count_over_time(${sel}[60s])" | jq -r '.data.result[0].value[1] // 0')
  [ "$c" -ge 8 ] && break
  sleep 0.2
done
read -r v_first v_last < <(curl -fsS --get "http://127.0.0.1:$PROM_PORT/api/v1/query" \
  --data-urlencode "query=${sel}[60s]" | jq -r '.data.result[0].values | "\(.[0][1]) \(.[-1][1])"')
now=$(date +%s)
curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" --data-urlencode "match[]=$sel" \
  --data-urlencode "start=$((now - 120))" --data-urlencode "end=$((now + 5))" |
  jq -r '.data.result[0].values[] | "\(.[0]) \(.[1])"' >"$T/ring-ts.txt"
rate=$(awk -v a="$v_first" -v b="$v_last" '$2 == a { ta = $1 } $2 == b { tb = $1 }
  END { if (ta == "" || tb == "" || tb <= ta) print "none"; else print (b - a) * 8 / (tb - ta) }' \
  "$T/ring-ts.txt")
awk -v r="$rate" 'BEGIN { exit !(r > 4.5e9 && r < 5.5e9) }' ||
  fail "rx rate $rate bit/s between the scraped values $v_first and $v_last, want ~5e9"
ok "scraped counter grows at $rate bit/s (the simulator's 5 Gb/s) at the polls' times"

# Every value Prometheus scraped is a sample our ring holds.
vals=$(curl -fsS --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=${sel}[60s]" |
  jq -r '.data.result[0].values[][1]' | sort -u)
now=$(date +%s)
curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" --data-urlencode "match[]=$sel" \
  --data-urlencode "start=$((now - 120))" --data-urlencode "end=$((now + 5))" |
  jq -r '.data.result[0].values[][1]' | sort -u >"$T/ring.txt"
for v in $vals; do grep -qx "$v" "$T/ring.txt" || fail "prometheus value $v is not in the ring"; done
ok "$(wc -w <<<"$vals") scraped values all found in the ring"

# Scraped every 1 s, polled every 1 s: every poll is stored. The collector notes the
# steady scraper and does not warn.
scrape_noted() { grep -q "/metrics is scraped every 1.0 s by 127.0.0.1 (Prometheus/" "$T/fabricscope.log"; }
wait_for 20 "the scraper noted" scrape_noted
! grep "/metrics is scraped" "$T/fabricscope.log" | grep -q "level=warn" ||
  fail "warned of a scrape as fast as the poll: $(grep "/metrics is scraped" "$T/fabricscope.log")"
ok "a 1 s scrape of 1 s polls is noted, not warned of: $(grep -o 'msg=.*' "$T/fabricscope.log" | grep "/metrics is scraped.*Prometheus/" | head -n 1)"

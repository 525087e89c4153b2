#!/usr/bin/env bash
# The first /api/v1/correlate over 24 h of 10,000 series read from VictoriaMetrics
# versus from Prometheus (analysis.history), on the same history: bench_history.sh's
# world (history_gen.py: 100 switches x 50 ports, ECN-mark counter and queue depth of tc 3
# each, at a 60 s scrape interval, a culprit surging every 30 min, random incast bursts),
# backfilled by promtool into a Prometheus and imported into a VictoriaMetrics
# (/api/v1/import/prometheus), each read by its own fabricscope with no targets. The
# request names three of the culprit's surges as slow windows. Prints
#   BENCH history_vm_correlate_24h_cold_ms    (first request to the fabricscope on VictoriaMetrics)
#   BENCH history_prom_correlate_24h_cold_ms  (first request to the one on Prometheus)
#   BENCH history_vm_correlate_24h_found      (1 when the VictoriaMetrics answer names the culprit first)
#   BENCH history_prom_correlate_24h_found    (the same for Prometheus)
# Both TSDBs are queried cold (nothing asked of them before but the readiness checks).
# FS_BENCH_QUICK=1: 20 switches (2,000 series).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FS_BUILD_DIR:-$root/build}
for tool in promtool prometheus victoria-metrics jq curl; do
  command -v $tool >/dev/null || { echo "bench_history_vm: $tool not found" >&2; exit 1; }
done
[ -x "$build/fabricscope" ] || { echo "bench_history_vm: $build/fabricscope not built" >&2; exit 1; }
switches=100
[ "${FS_BENCH_QUICK:-0}" = 1 ] && switches=20
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${FS_BENCH_KEEP:-}" ] && { echo "kept $work" >&2; return; }
  rm -rf "$work"
}
trap cleanup EXIT
port() { # a free loopback TCP port
  local p
  for _ in $(seq 200); do
    p=$((16000 + RANDOM % 16000))
    ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  return 1
}
wait_ok() { # URL: answers within 120 s
  for _ in $(seq 1200); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench_history_vm: $1 did not answer" >&2
  exit 1
}
end=$(($(date +%s) - 120))
python3 "$root/tests/integration/history_gen.py" "$work/fabric.om" "$end" 24 11 \
  --switches $switches --ports 50 --step 60 >"$work/surges.txt"
promtool tsdb create-blocks-from openmetrics -q "$work/fabric.om" "$work/prom" >/dev/null
printf 'global: { scrape_interval: 1m }\n' >"$work/prometheus.yml"
pp=$(port)
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom" \
  --web.listen-address="127.0.0.1:$pp" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)
vp=$(port)
victoria-metrics -httpListenAddr="127.0.0.1:$vp" -storageDataPath="$work/vm" \
  -search.latencyOffset=2s -loggerLevel=WARN >"$work/vm.log" 2>&1 &
pids+=($!)
wait_ok "http://127.0.0.1:$vp/health"
# The same samples in the Prometheus text format (timestamps in milliseconds).
# Streamed (-T -, chunked): the day's 14 M lines would not fit in curl's memory.
awk '/^#/ { next } { $3 = $3 "000"; print }' "$work/fabric.om" |
  curl -fsS -X POST -T - "http://127.0.0.1:$vp/api/v1/import/prometheus"
rm -f "$work/fabric.om"
want=$((switches * 50))
for _ in $(seq 1200); do # imported rows are searchable after VictoriaMetrics' next flush
  n=$(curl -fsS --get "http://127.0.0.1:$vp/api/v1/query" --data-urlencode nocache=1 \
    --data-urlencode 'query=count(fabric_queue_depth_bytes)' --data-urlencode "time=$end" |
    jq -r '.data.result[0].value[1] // 0')
  [ "$n" = "$want" ] && break
  sleep 0.1
done
[ "$n" = "$want" ] || { echo "bench_history_vm: victoria-metrics holds $n of $want series" >&2; exit 1; }
wait_ok "http://127.0.0.1:$pp/-/ready"
args=()
while read -r s; do
  s=${s%.*}
  args+=(--data-urlencode "window=$s,$((s + 20))")
done < <(sed -n '10p;20p;30p' "$work/surges.txt")
declare -A ms found
for tsdb in vm prom; do
  tp=$vp
  [ $tsdb = prom ] && tp=$pp
  hp=$(port)
  cat >"$work/fs-$tsdb.yaml" <<EOF
listen: 127.0.0.1:$hp
analysis:
  history: { url: "http://127.0.0.1:$tp", remote_timeout: 60s, prefetch: false }
targets: []
EOF
  "$build/fabricscope" -c "$work/fs-$tsdb.yaml" >"$work/fabricscope-$tsdb.log" 2>&1 &
  pids+=($!)
  wait_ok "http://127.0.0.1:$hp/healthz"
  t0=$(date +%s%N)
  curl -fsS --get "http://127.0.0.1:$hp/api/v1/correlate" --data-urlencode "start=$((end - 86400))" \
    --data-urlencode "end=$((end + 60))" "${args[@]}" >"$work/correlate-$tsdb.json"
  t1=$(date +%s%N)
  ms[$tsdb]=$(((t1 - t0) / 1000000))
  jq -e '.data.history.error == null' "$work/correlate-$tsdb.json" >/dev/null ||
    { echo "bench_history_vm: $tsdb: $(jq -c .data.history "$work/correlate-$tsdb.json")" >&2; exit 1; }
  found[$tsdb]=$(jq '[.data.summary[0] | select(.target == "far-leaf1" and .interface == "Eth1/7")] | length' \
    "$work/correlate-$tsdb.json")
  echo "# $tsdb: series $(jq .data.history.series "$work/correlate-$tsdb.json"), points $(jq .data.history.points "$work/correlate-$tsdb.json"), step $(jq .data.history.step_s "$work/correlate-$tsdb.json") s" >&2
done
echo "BENCH history_vm_correlate_24h_cold_ms ${ms[vm]} ms"
echo "BENCH history_prom_correlate_24h_cold_ms ${ms[prom]} ms"
echo "BENCH history_vm_correlate_24h_found ${found[vm]} bool"
echo "BENCH history_prom_correlate_24h_found ${found[prom]} bool"

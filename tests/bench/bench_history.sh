#!/usr/bin/env bash
# /api/v1/incidents over 24 h of 10,000 series read from a real Prometheus
# (analysis.history): history_gen.py writes 100 switches x 50 ports (ECN-mark counter and
# queue depth of tc 3 each) at a 60 s scrape interval, with a culprit surging every 30 min
# and random incast bursts; promtool backfills it; a fabricscope with no targets of its own
# answers /incidents for the whole day. Prints
#   BENCH history_incidents_24h_cold_ms (the first request, end to end: the series count,
#                                    the range queries, parsing, the analysis)
#   BENCH history_incidents_24h_ms  (median of the 3 after it: each reads the history
#                                    only from 5 minutes before the previous read's end)
#   BENCH history_incidents_24h_found (1 when the culprit's 30-minute recurrence is reported)
#   BENCH history_incidents_24h_step_s (the step the points budget allowed)
# FS_BENCH_QUICK=1: 20 switches (2,000 series).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FS_BUILD_DIR:-$root/build}
for tool in promtool prometheus jq curl; do
  command -v $tool >/dev/null || { echo "bench_history: $tool not found" >&2; exit 1; }
done
[ -x "$build/fabricscope" ] || { echo "bench_history: $build/fabricscope not built" >&2; exit 1; }
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
end=$(($(date +%s) - 120))
python3 "$root/tests/integration/history_gen.py" "$work/fabric.om" "$end" 24 11 \
  --switches $switches --ports 50 --step 60 >"$work/surges.txt"
promtool tsdb create-blocks-from openmetrics -q "$work/fabric.om" "$work/data" >/dev/null
rm -f "$work/fabric.om"
printf 'global: { scrape_interval: 1m }\n' >"$work/prometheus.yml"
pp=$(port)
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$pp" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)
hp=$(port)
cat >"$work/fs.yaml" <<EOF
listen: 127.0.0.1:$hp
analysis:
  history: { url: "http://127.0.0.1:$pp", remote_timeout: 60s, prefetch: false }
targets: []
EOF
"$build/fabricscope" -c "$work/fs.yaml" >"$work/fabricscope.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  curl -fsS -o /dev/null "http://127.0.0.1:$pp/-/ready" 2>/dev/null &&
    curl -fsS -o /dev/null "http://127.0.0.1:$hp/healthz" 2>/dev/null && break
  sleep 0.1
done
url="http://127.0.0.1:$hp/api/v1/incidents?start=$((end - 86400))&end=$((end + 60))"
ms=()
for i in 1 2 3 4; do
  t0=$(date +%s%N)
  curl -fsS "$url" >"$work/incidents.json"
  t1=$(date +%s%N)
  ms+=($(((t1 - t0) / 1000000)))
done
median=$(printf '%s\n' "${ms[@]:1}" | sort -n | sed -n 2p)
jq -e '.data.history.error == null' "$work/incidents.json" >/dev/null ||
  { echo "bench_history: $(jq -c .data.history "$work/incidents.json")" >&2; exit 1; }
found=$(jq '[.data.recurring[] | select(any(.series[]; .target == "far-leaf1" and .interface == "Eth1/7"))
             | select(.period_s > 1782 and .period_s < 1818)] | length' "$work/incidents.json")
echo "# series $(jq .data.history.series "$work/incidents.json"), points $(jq .data.history.points "$work/incidents.json"), runs ${ms[*]} ms" >&2
echo "BENCH history_incidents_24h_cold_ms ${ms[0]} ms"
echo "BENCH history_incidents_24h_ms $median ms"
echo "BENCH history_incidents_24h_found $((found > 0 ? 1 : 0)) bool"
echo "BENCH history_incidents_24h_step_s $(jq .data.history.step_s "$work/incidents.json") s"

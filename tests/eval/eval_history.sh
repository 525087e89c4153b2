#!/usr/bin/env bash
# make eval, end to end: the history_across_shards family. Each run is a fabric this
# fabricscope never polled (another shard's switches), held only by a real Prometheus:
# history_gen.py writes hours of it (SWITCHES switches x 32 ports, busy and idle ports
# with noise, random incast bursts, a busy culprit surging 20 s every PERIOD s +-2%,
# PERIOD random in 10-40 min, about eight periods), promtool backfills it, and the real
# binary answers /api/v1/correlate (the culprit's surges as slow windows, plus three
# windows without a switch-side cause) and /api/v1/incidents from analysis.history.
# Scored as the virtual-time families of eval_diagnosis: culprit first and in the top 3
# of /correlate's summary, unrelated windows whose top suspect is the culprit, period
# error and next-surge error (fractions of the period), and the /incidents time.
#   tests/eval/eval_history.sh [RUNS] [SEED_BASE]    (default 5 runs, base 9100)
# Needs prometheus, promtool, jq, python3 and a built fabricscope (FS_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FS_BUILD_DIR:-$root/build}
runs=${1:-5}
base=${2:-9100}
for tool in promtool prometheus jq curl python3; do
  command -v $tool >/dev/null || { echo "eval_history: $tool not found" >&2; exit 1; }
done
[ -x "$build/fabricscope" ] || { echo "eval_history: $build/fabricscope not built" >&2; exit 1; }
work=$(mktemp -d)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
port() {
  local p
  for _ in $(seq 200); do
    p=$((16000 + RANDOM % 16000))
    ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  return 1
}
wait_url() {
  for _ in $(seq 600); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "eval_history: $1 did not answer" >&2
  return 1
}

n=0 first=0 top3=0 blamed=0 unrelated=0 recurring=0 period_ok=0 next_ok=0
perr_sum=0 nerr_sum=0 ms_sum=0
printf '%-6s %8s %6s %6s %8s %10s %10s %8s\n' seed period_s first top3 blamed period_err next_err inc_ms
for ((i = 0; i < runs; i++)); do
  seed=$((base + i))
  d=$work/$seed
  mkdir -p "$d/data"
  period=$(python3 -c "import random; print(int(random.Random('period-$seed').uniform(600, 2400)))")
  hours=$(python3 -c "print(max(3.0, min(6.0, $period * 8.5 / 3600)))")
  end=$(($(date +%s) - 120))
  python3 "$root/tests/integration/history_gen.py" "$d/fabric.om" "$end" "$hours" "$seed" \
    --period "$period" --switches 4 --ports 32 --next "$d/next.txt" >"$d/surges.txt"
  promtool tsdb create-blocks-from openmetrics -q "$d/fabric.om" "$d/data" >/dev/null
  printf 'global: { scrape_interval: 1m }\n' >"$d/prometheus.yml"
  pp=$(port)
  prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/data" \
    --web.listen-address="127.0.0.1:$pp" --log.level=warn >"$d/prometheus.log" 2>&1 &
  pids+=($!)
  hp=$(port)
  printf 'listen: 127.0.0.1:%s\nanalysis:\n  history: { url: "http://127.0.0.1:%s", prefetch: false }\ntargets: []\n' \
    "$hp" "$pp" >"$d/fs.yaml"
  "$build/fabricscope" -c "$d/fs.yaml" >"$d/fabricscope.log" 2>&1 &
  pids+=($!)
  wait_url "http://127.0.0.1:$pp/-/ready"
  wait_url "http://127.0.0.1:$hp/healthz"
  start=$((end - ${hours%.*} * 3600 - 1800))
  # The surges as slow windows (as an NCCL stall's host ranges would be), and three
  # windows at least 5 min from any surge.
  args=()
  while read -r s; do
    s=${s%.*}
    args+=(--data-urlencode "window=$((s + 1)),$((s + 19))")
  done <"$d/surges.txt"
  python3 - "$d/surges.txt" "$seed" "$end" "$hours" >"$d/unrelated.txt" <<'PY'
import random, sys
surges = [float(x) for x in open(sys.argv[1])]
rng = random.Random(int(sys.argv[2]) * 7 + 1)
end, hours = float(sys.argv[3]), float(sys.argv[4])
out = []
while len(out) < 3:
    t = rng.uniform(end - hours * 3600 + 900, end - 60)
    if all(abs(t - s) > 300 for s in surges):
        out.append(int(t))
for t in out:
    print(t)
PY
  while read -r u; do args+=(--data-urlencode "window=$u,$((u + 18))"); done <"$d/unrelated.txt"
  curl -fsS --get "http://127.0.0.1:$hp/api/v1/correlate" --data-urlencode "start=$start" \
    --data-urlencode "end=$((end + 60))" --data-urlencode "limit=1000" "${args[@]}" >"$d/correlate.json"
  t0=$(date +%s%N)
  curl -fsS "http://127.0.0.1:$hp/api/v1/incidents?start=$start&end=$((end + 60))" >"$d/incidents.json"
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  stop_all
  jq -e '.data.history.error == null' "$d/correlate.json" "$d/incidents.json" >/dev/null ||
    { echo "eval_history: seed $seed: history error $(jq -c .data.history "$d/incidents.json")" >&2; exit 1; }
  cul='(.target == "far-leaf1" and .interface == "Eth1/7")'
  f=$(jq "[.data.summary[0] | select($cul)] | length" "$d/correlate.json")
  t3=$(jq "[.data.summary[:3][] | select($cul)] | length" "$d/correlate.json")
  nsurge=$(wc -l <"$d/surges.txt")
  bl=$(jq --argjson n "$nsurge" "[.data.events[\$n:][] | select(.suspects[0] | $cul)] | length" "$d/correlate.json")
  mean=$(awk 'NR == 1 {f = $1} {l = $1; n = NR} END {printf "%.3f", (l - f) / (n - 1)}' "$d/surges.txt")
  read -r perr nerr < <(jq -r --argjson p "$mean" --argjson nx "$(cat "$d/next.txt")" \
    "[.data.recurring[] | select(any(.series[]; $cul))][0] // {} |
     if .period_s then \"\((.period_s - \$p) / \$p | fabs) \((.next_expected - \$nx) / \$p | fabs)\" else \"nan nan\" end" \
    "$d/incidents.json")
  printf '%-6s %8s %6s %6s %8s %10s %10s %8s\n' "$seed" "$period" "$f" "$((t3 > 0 ? 1 : 0))" "$bl/3" \
    "$(awk -v e="$perr" 'BEGIN {printf (e == "nan" ? "nan" : "%.4f"), e}')" \
    "$(awk -v e="$nerr" 'BEGIN {printf (e == "nan" ? "nan" : "%.4f"), e}')" "$ms"
  n=$((n + 1)) first=$((first + f)) top3=$((top3 + (t3 > 0 ? 1 : 0))) blamed=$((blamed + bl)) unrelated=$((unrelated + 3))
  ms_sum=$((ms_sum + ms))
  if [ "$perr" != nan ]; then
    recurring=$((recurring + 1))
    period_ok=$((period_ok + $(awk -v e="$perr" 'BEGIN {print (e <= 0.01)}')))
    next_ok=$((next_ok + $(awk -v e="$nerr" 'BEGIN {print (e <= 0.02)}')))
    perr_sum=$(awk -v a="$perr_sum" -v e="$perr" 'BEGIN {print a + e}')
    nerr_sum=$(awk -v a="$nerr_sum" -v e="$nerr" 'BEGIN {print a + e}')
  fi
  rm -rf "$d"
done
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b ? 100 * a / b : 0}'; }
echo "EVAL history_across_shards_runs $n runs"
echo "EVAL history_across_shards_culprit_first $(pct $first $n) %"
echo "EVAL history_across_shards_culprit_top3 $(pct $top3 $n) %"
echo "EVAL history_across_shards_unrelated_blamed $(pct $blamed $unrelated) %"
echo "EVAL history_across_shards_recurring $(pct $recurring $n) %"
echo "EVAL history_across_shards_period_within_1pct $(pct $period_ok $n) %"
echo "EVAL history_across_shards_next_within_2pct $(pct $next_ok $n) %"
echo "EVAL history_across_shards_period_err_mean $(awk -v a="$perr_sum" -v n="$recurring" 'BEGIN {printf "%.2f", n ? 100 * a / n : 0}') %"
echo "EVAL history_across_shards_next_err_mean $(awk -v a="$nerr_sum" -v n="$recurring" 'BEGIN {printf "%.2f", n ? 100 * a / n : 0}') %"
echo "EVAL history_across_shards_incidents_ms $((n ? ms_sum / n : 0)) ms"

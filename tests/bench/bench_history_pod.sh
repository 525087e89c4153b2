#!/usr/bin/env bash
# /api/v1/incidents and /api/v1/correlate over a leaf-spine pod's history as a real
# Prometheus holds it after scraping fabricscope (analysis.history): world_om
# (tests/eval/world_om.c) writes a world of tests/eval/world.c as scraped from /metrics,
# promtool backfills it, the hosts' events are posted, and a fabricscope with no targets
# of its own answers for the whole range (the request end to end: the series count, the
# range queries, the raw re-reading of the series that departed, parsing, the analysis;
# /correlate over the slow host events, limit=100000). Median of 3 each. Two workloads:
#   history_pod_8h_*      the `pod` family (8 leaves x 64 ports, 4 spines: 2,304 series
#                         of ECN marks, queue watermark, PFC tx and rx) polled every 10 s,
#                         scraped every 15 s, 8 hours (seed 9602: a 33-minute period)
#   history_pod10k_24h_*  the `pod_10k` family (36 leaves, 8 spines: 10,368 series) polled
#                         every 10 s, scraped every 60 s (as bench_history.sh), 24 hours,
#                         a 30-minute period
# Prints, per workload W:
#   BENCH W_incidents_cold_ms  (the first request: it reads the whole range)
#   BENCH W_incidents_ms, W_correlate_ms   (median of the 3 after it: each reads the
#                                           history from 5 minutes before the previous
#                                           read's end, the rest coming from that read)
#   BENCH W_found      (1 when /incidents reports the origin recurring, period within 1%)
#   BENCH W_origin_first (% of the stall windows whose first suspect is the origin)
#   BENCH W_step_s     (the step the points budget allowed for the first reading)
# Those with analysis.history.prefetch off; then a fabricscope with it on (the default):
#   BENCH W_prefetch_ms  (its first read of the horizon, from the first refresh's end)
#   BENCH W_prefetch_cycle_prom_cpu_ms (Prometheus's CPU for one read of what came since
#                                       after it, one every 2 minutes)
#   BENCH W_incidents_first_ms, W_correlate_first_ms (the first requests after that read)
#   BENCH W_incidents_now_ms (then the same range up to now: it reads the minutes since)
#   BENCH W_origin_first_prefetched (the score of those answers)
# FS_BENCH_QUICK=1: the 8-hour pod only. HISTORY_POD_WORKLOADS="8h 24h" picks workloads;
# FS_BENCH_KEEP=1 keeps the work directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FS_BUILD_DIR:-$root/build}
score=$root/tests/eval/score_pod_history.py
for tool in promtool prometheus jq curl python3 ss; do
  command -v "$tool" >/dev/null || { echo "bench_history_pod: $tool not found" >&2; exit 1; }
done
for exe in fabricscope eval/world_om; do
  [ -x "$build/$exe" ] || { echo "bench_history_pod: $build/$exe not built" >&2; exit 1; }
done
workloads=${HISTORY_POD_WORKLOADS:-8h 24h}
[ "${FS_BENCH_QUICK:-0}" = 1 ] && workloads=8h
work=$(mktemp -d)
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  if [ -n "${FS_BENCH_KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
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
wait_url() {
  for _ in $(seq 600); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench_history_pod: $1 did not answer" >&2
  return 1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + system, clock ticks
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
token_file=$work/host-events.token
printf 'bench-%s%s' "$RANDOM" "$RANDOM" >"$token_file"
chmod 600 "$token_file"
token=$(cat "$token_file")

post_events() { # PORT DIR: the world's host events, posted
  local f
  for f in "$2"/posts/*.json; do
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
      --data-binary "@$f" "http://127.0.0.1:$1/api/v1/host-events"
  done
}
metric() { # PORT NAME: a sample's value from /metrics ("" when absent)
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2; exit}'
}
ms_of() { awk -v s="$1" 'BEGIN {printf "%d", s * 1000}'; }
score_pct() { # SCORE-JSON: % of the stall windows whose first suspect is the origin
  jq 'if .stall_windows > 0 then 100 * .origin_first / .stall_windows else 0 end | . * 10 | round / 10' "$1"
}

# prefetched NAME DIR PROM_PID QS QE HZ: a fabricscope with the prefetch on (the
# default) on the same history: how long its first read of the horizon takes after the
# first refresh, what one read of the minutes since costs Prometheus, and the first
# requests then. Synchronised on /metrics (the refresh's time, the kept range's end).
prefetched() {
  local name=$1 d=$2 prom_pid=$3 qs=$4 qe=$5 hz=$6 hp fs_pid t_ref= t_end= t_next= s
  local e='fabricscope_analysis_history_cached_timestamp_seconds{edge="end"}'
  hp=$(port)
  sed -e "s/^listen: .*/listen: 127.0.0.1:$hp/" -e 's/, prefetch: false//' "$d/fs.yaml" \
    >"$d/fs-prefetch.yaml"
  "$build/fabricscope" -c "$d/fs-prefetch.yaml" >"$d/fabricscope-prefetch.log" 2>&1 &
  fs_pid=$!
  pids+=("$fs_pid")
  wait_url "http://127.0.0.1:$hp/healthz"
  post_events "$hp" "$d"
  for _ in $(seq 3000); do # the first refresh comes 30 s after start, the read after it
    [ -n "$t_ref" ] || t_ref=$(metric "$hp" fabricscope_analysis_last_refresh_timestamp_seconds)
    t_end=$(metric "$hp" "$e")
    [ -n "$t_ref" ] && [ -n "$t_end" ] &&
      awk -v a="$t_end" -v b="$t_ref" 'BEGIN {exit !(a >= b)}' && break
    sleep 0.1
  done
  [ -n "$t_end" ] || { echo "bench_history_pod: $name: the prefetch kept nothing" >&2; return 1; }
  local pre_ms p0 f0 cycle_prom cycle_fs first cfirst
  pre_ms=$(awk -v a="$(date +%s.%N)" -v b="$t_ref" 'BEGIN {printf "%d", (a - b) * 1000}')
  # One read of what came since: from this end to the next one (2 minutes on).
  p0=$(cpu_ticks "$prom_pid") f0=$(cpu_ticks "$fs_pid")
  for _ in $(seq 2400); do
    t_next=$(metric "$hp" "$e")
    [ "$t_next" != "$t_end" ] && break
    sleep 0.1
  done
  cycle_prom=$((($(cpu_ticks "$prom_pid") - p0) * 1000 / hz))
  cycle_fs=$((($(cpu_ticks "$fs_pid") - f0) * 1000 / hz))
  s=$(curl -fsS --get -o "$d/incidents-prefetched.json" -w '%{time_total}' \
    "http://127.0.0.1:$hp/api/v1/incidents" --data-urlencode "start=$qs" --data-urlencode "end=$qe")
  first=$(ms_of "$s")
  s=$(curl -fsS --get -o "$d/correlate-prefetched.json" -w '%{time_total}' \
    "http://127.0.0.1:$hp/api/v1/correlate" --data-urlencode "start=$qs" --data-urlencode "end=$qe" \
    --data-urlencode "limit=100000")
  cfirst=$(ms_of "$s")
  # The same range reaching the present: it reads the minutes since the kept end.
  local now_ms
  s=$(curl -fsS --get -o "$d/incidents-now.json" -w '%{time_total}' \
    "http://127.0.0.1:$hp/api/v1/incidents" --data-urlencode "start=$qs" \
    --data-urlencode "end=$(date +%s)")
  now_ms=$(ms_of "$s")
  jq -e '.data.history.error == null and .data.history.cached_until != null' \
    "$d/incidents-prefetched.json" >/dev/null || {
    echo "bench_history_pod: $name: the first request read it all: $(jq -c .data.history "$d/incidents-prefetched.json")" >&2
    return 1
  }
  python3 "$score" --truth "$d/truth.json" --correlate "$d/correlate-prefetched.json" \
    --incidents "$d/incidents-prefetched.json" --query-time "$(date +%s)" --range-end "$qe" \
    >"$d/score-prefetched.json"
  echo "# $name, prefetch: the horizon read ${pre_ms} ms after the first refresh; a read of what came since: Prometheus ${cycle_prom} ms of CPU (fabricscope ${cycle_fs} ms over the interval, its refreshes included); first incidents ${first} ms, correlate ${cfirst} ms, incidents up to now ${now_ms} ms (history $(jq -c '.data.history | {cached_until, points}' "$d/incidents-now.json")); history $(jq -c '.data.history | {cached_until, step_s, refined, points}' "$d/incidents-prefetched.json"); $(jq -c '{stall_windows, origin_first, recurring, period_err, next_err, false_groups}' "$d/score-prefetched.json")" >&2
  echo "BENCH ${name}_prefetch_ms $pre_ms ms"
  echo "BENCH ${name}_prefetch_cycle_prom_cpu_ms $cycle_prom ms"
  echo "BENCH ${name}_incidents_first_ms $first ms"
  echo "BENCH ${name}_correlate_first_ms $cfirst ms"
  echo "BENCH ${name}_incidents_now_ms $now_ms ms"
  echo "BENCH ${name}_origin_first_prefetched $(score_pct "$d/score-prefetched.json") %"
}

# bench NAME FAMILY SEED HOURS SCRAPE_S [PERIOD_S]
bench() {
  local name=$1 family=$2 seed=$3 hours=$4 scrape=$5 period=${6:-}
  local d=$work/$name end qs qe pp hp s
  mkdir -p "$d"
  end=$(($(date +%s) - 120))
  end=$((end - end % 60))
  local period_arg=()
  [ -n "$period" ] && period_arg=(--period "$period")
  local g0=$SECONDS
  "$build/eval/world_om" --family "$family" --seed "$seed" --stamp scrape --scrape "$scrape" \
    --poll 10 --hours "$hours" "${period_arg[@]}" --end "$end" --out "$d" 2>"$d/world_om.log" ||
    { cat "$d/world_om.log" >&2; return 1; }
  local om_mb
  om_mb=$(($(stat -c %s "$d/fabric.om") >> 20))
  promtool tsdb create-blocks-from openmetrics -q "$d/fabric.om" "$d/data" >/dev/null
  rm -f "$d/fabric.om"
  echo "# $name: $(sed 's/^world_om: //' "$d/world_om.log"); ${om_mb} MiB of OpenMetrics, generated and backfilled in $((SECONDS - g0)) s" >&2
  printf 'global: { scrape_interval: 1m }\n' >"$d/prometheus.yml"
  pp=$(port)
  prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/data" \
    --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$pp" --log.level=warn \
    >"$d/prometheus.log" 2>&1 &
  pids+=($!)
  hp=$(port)
  cat >"$d/fs.yaml" <<EOF
listen: 127.0.0.1:$hp
host_events: { bearer_token_file: '$token_file', memory_limit: 1GiB, retention: 48h }
analysis:
  history: { url: "http://127.0.0.1:$pp", remote_timeout: 60s, prefetch: false }
targets: []
EOF
  "$build/fabricscope" -c "$d/fs.yaml" >"$d/fabricscope.log" 2>&1 &
  pids+=($!)
  local prom_pid=${pids[0]} fs_pid=${pids[1]}
  wait_url "http://127.0.0.1:$pp/-/ready"
  wait_url "http://127.0.0.1:$hp/healthz"
  post_events "$hp" "$d"
  qe=$((end + 60))
  qs=$((qe - hours * 3600))
  local inc=() cor=() fs_cpu prom_cpu cold
  fs_cpu=$(cpu_ticks "$fs_pid") prom_cpu=$(cpu_ticks "$prom_pid")
  s=$(curl -fsS --get -o "$d/incidents.json" -w '%{time_total}' \
    "http://127.0.0.1:$hp/api/v1/incidents" --data-urlencode "start=$qs" --data-urlencode "end=$qe")
  cold=$(awk -v s="$s" 'BEGIN {printf "%d", s * 1000}')
  for _ in 1 2 3; do
    s=$(curl -fsS --get -o "$d/incidents.json" -w '%{time_total}' \
      "http://127.0.0.1:$hp/api/v1/incidents" --data-urlencode "start=$qs" --data-urlencode "end=$qe")
    inc+=("$(awk -v s="$s" 'BEGIN {printf "%d", s * 1000}')")
    s=$(curl -fsS --get -o "$d/correlate.json" -w '%{time_total}' \
      "http://127.0.0.1:$hp/api/v1/correlate" --data-urlencode "start=$qs" --data-urlencode "end=$qe" \
      --data-urlencode "limit=100000")
    cor+=("$(awk -v s="$s" 'BEGIN {printf "%d", s * 1000}')")
  done
  local qt hz
  qt=$(date +%s) hz=$(getconf CLK_TCK)
  fs_cpu=$(awk -v a="$fs_cpu" -v b="$(cpu_ticks "$fs_pid")" -v hz="$hz" 'BEGIN {printf "%.1f", (b - a) / hz}')
  prom_cpu=$(awk -v a="$prom_cpu" -v b="$(cpu_ticks "$prom_pid")" -v hz="$hz" 'BEGIN {printf "%.1f", (b - a) / hz}')
  kill "$fs_pid"
  wait "$fs_pid" 2>/dev/null || true
  jq -e '.data.history.error == null' "$d/incidents.json" "$d/correlate.json" >/dev/null ||
    { echo "bench_history_pod: $name: $(jq -c .data.history "$d/incidents.json")" >&2; return 1; }
  python3 "$score" --truth "$d/truth.json" --correlate "$d/correlate.json" \
    --incidents "$d/incidents.json" --query-time "$qt" --range-end "$qe" >"$d/score.json"
  echo "# $name: history $(jq -c '.data.history | {series, step_s, refined, points}' "$d/incidents.json"), slow events $(jq '.data.events | length' "$d/correlate.json"), incidents ${cold} ms cold then ${inc[*]} ms, correlate ${cor[*]} ms (CPU for the 7: fabricscope ${fs_cpu} s, Prometheus ${prom_cpu} s, load $(cut -d' ' -f1 /proc/loadavg)); $(jq -c '{stall_windows, origin_first, recurring, group_first, period_err, next_err, false_groups}' "$d/score.json")" >&2
  echo "BENCH ${name}_incidents_cold_ms $cold ms"
  echo "BENCH ${name}_incidents_ms $(median3 "${inc[@]}") ms"
  echo "BENCH ${name}_correlate_ms $(median3 "${cor[@]}") ms"
  echo "BENCH ${name}_found $(jq '(.recurring and .period_err <= 0.01) | if . then 1 else 0 end' "$d/score.json") bool"
  echo "BENCH ${name}_origin_first $(score_pct "$d/score.json") %"
  echo "BENCH ${name}_step_s $(jq .data.history.step_s "$d/incidents.json") s"
  prefetched "$name" "$d" "$prom_pid" "$qs" "$qe" "$hz"
  stop_all
  [ -n "${FS_BENCH_KEEP:-}" ] || rm -rf "$d"
}

for wl in $workloads; do
  case $wl in
    8h) bench history_pod_8h pod 9602 8 15 ;;
    24h) bench history_pod10k_24h pod_10k 9601 24 60 1800 ;;
    *) echo "bench_history_pod: no workload $wl (8h, 24h)" >&2; exit 1 ;;
  esac
done

#!/usr/bin/env bash
# make eval, end to end: the pod_history family. A leaf-spine pod of world.c (the `pod`
# family of eval_fabric: 8 leaves x 64 ports, 4 spines, ECN, queue watermark, PFC tx and
# rx, 2,304 series; PFC spread, bursts, a backup every 15 min, strays of the culprit),
# polled every 10 s, as a real Prometheus holds it, in two stampings of the same world:
#   scrape  Prometheus scraped fabricscope's /metrics every 15 s: each sample is the
#           latest poll's value, stamped at the scrape time (up to a poll later than the
#           device was read; a third of the polls, each followed by another before the
#           next scrape, are never stored); job and instance added;
#   poll    fabricscope remote-wrote it: every poll at the poll's own timestamp.
# Per run and stamping: world_om writes the OpenMetrics, the host events and the truth;
# promtool backfills a TSDB; a real Prometheus serves it; the real fabricscope (no
# targets, analysis.history on that Prometheus, host_events with a bearer token) gets the
# host events posted, then answers /api/v1/correlate (slow host events, limit=100000,
# the run's range) and /api/v1/incidents (the run's range). Scored as eval_fabric scores
# (score_pod_history.py): per stall window, the origin first and above every victim;
# unrelated windows blamed on the origin; per run, the origin's recurring group found,
# first, its period within 1%, its next stall within 2% of the period; false recurring
# groups; the time of both requests.
#   tests/eval/eval_pod_history.sh [RUNS] [SEED_BASE]    (default 8 runs, base 9500)
# A run of the pod costs 30-90 s here (both stampings; the backfill and the two
# requests grow with the period: eight periods of 10-40 minutes).
# Environment: EVAL_POD_HISTORY_FAMILY (pod; any family of world_families.h, e.g. the
# small pfc_propagation for quick runs: about 10 s a run), EVAL_POD_HISTORY_POLL (10 s;
# 0 keeps the family's own poll interval), EVAL_POD_HISTORY_SCRAPE (15 s),
# EVAL_POD_HISTORY_STAMPS ("scrape poll"), EVAL_POD_HISTORY_POLL_STAMPS (yes: the scrape
# stores fabricscope_target_last_sample_timestamp_seconds beside the values, as fabricscope
# exports it; no: as an older fabricscope, without it), EVAL_POD_HISTORY_HOURS (the family's own
# duration: eight periods), EVAL_VERBOSE=1 (each stall window and recurring group, and
# where the origin's departures fell against the stalls), EVAL_KEEP=1 (keep the work
# directory), EVAL_POD_HISTORY_RESULTS=FILE (each run's scores, one JSON line a run and
# stamping, to compare two builds seed by seed). Needs prometheus, promtool, jq, curl, python3, a built fabricscope and
# eval/world_om (FS_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FS_BUILD_DIR:-$root/build}
runs=${1:-8}
base=${2:-9500}
family=${EVAL_POD_HISTORY_FAMILY:-pod}
poll=${EVAL_POD_HISTORY_POLL:-10}
scrape=${EVAL_POD_HISTORY_SCRAPE:-15}
stamps=${EVAL_POD_HISTORY_STAMPS:-scrape poll}
poll_stamps=${EVAL_POD_HISTORY_POLL_STAMPS:-yes}
hours=${EVAL_POD_HISTORY_HOURS:-}
score=$root/tests/eval/score_pod_history.py
for tool in promtool prometheus jq curl python3 ss; do
  command -v "$tool" >/dev/null || { echo "eval_pod_history: $tool not found" >&2; exit 1; }
done
for exe in fabricscope eval/world_om; do
  [ -x "$build/$exe" ] || { echo "eval_pod_history: $build/$exe not built" >&2; exit 1; }
done
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
  if [ -n "${EVAL_KEEP:-}" ]; then echo "eval_pod_history: kept $work" >&2; else rm -rf "$work"; fi
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
  echo "eval_pod_history: $1 did not answer" >&2
  return 1
}
token_file=$work/host-events.token
printf 'eval-%s%s' "$RANDOM" "$RANDOM" >"$token_file"
chmod 600 "$token_file"
token=$(cat "$token_file")
hours_arg=()
[ -n "$hours" ] && hours_arg=(--hours "$hours")

results=$work/results.jsonl
: >"$results"
t_start=$(date +%s)
python3 "$score" --header
for ((i = 0; i < runs; i++)); do
  seed=$((base + i))
  end=$(($(date +%s) - 120))
  end=$((end - end % 60))
  for stamp in $stamps; do
    d=$work/$seed-$stamp
    mkdir -p "$d"
    t_run=$(date +%s)
    "$build/eval/world_om" --family "$family" --seed "$seed" --stamp "$stamp" --scrape "$scrape" \
      --poll "$poll" --poll-stamps "$poll_stamps" --end "$end" "${hours_arg[@]}" --out "$d" 2>"$d/world_om.log" ||
      { cat "$d/world_om.log" >&2; exit 1; }
    promtool tsdb create-blocks-from openmetrics -q "$d/fabric.om" "$d/data" >/dev/null
    [ -n "${EVAL_KEEP:-}" ] || rm -f "$d/fabric.om"
    printf 'global: { scrape_interval: 1m }\n' >"$d/prometheus.yml"
    pp=$(port)
    prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/data" \
      --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$pp" --log.level=warn \
      >"$d/prometheus.log" 2>&1 &
    pids+=($!)
    hp=$(port)
    cat >"$d/fs.yaml" <<EOF
listen: 127.0.0.1:$hp
host_events: { bearer_token_file: '$token_file', memory_limit: 512MiB, retention: 48h }
analysis:
  history: { url: "http://127.0.0.1:$pp", remote_timeout: 60s, prefetch: false }
targets: []
EOF
    "$build/fabricscope" -c "$d/fs.yaml" >"$d/fabricscope.log" 2>&1 &
    pids+=($!)
    wait_url "http://127.0.0.1:$pp/-/ready"
    wait_url "http://127.0.0.1:$hp/healthz"
    for f in "$d"/posts/*.json; do
      curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        --data-binary "@$f" "http://127.0.0.1:$hp/api/v1/host-events" >>"$d/posts.log" ||
        { echo "eval_pod_history: seed $seed: post $f refused" >&2; exit 1; }
      echo >>"$d/posts.log"
    done
    t0=$(jq -r '.t0 | floor' "$d/truth.json")
    qs=$((t0 - 60)) qe=$((end + 60))
    cms=$(curl -fsS --get -o "$d/correlate.json" -w '%{time_total}' \
      "http://127.0.0.1:$hp/api/v1/correlate" --data-urlencode "start=$qs" \
      --data-urlencode "end=$qe" --data-urlencode "limit=100000")
    qt=$(date +%s.%N)
    ims=$(curl -fsS --get -o "$d/incidents.json" -w '%{time_total}' \
      "http://127.0.0.1:$hp/api/v1/incidents" --data-urlencode "start=$qs" \
      --data-urlencode "end=$qe")
    stop_all
    python3 "$score" --truth "$d/truth.json" --correlate "$d/correlate.json" \
      --incidents "$d/incidents.json" --query-time "$qt" --range-end "$qe" \
      --correlate-s "$cms" --incidents-s "$ims" --wall-s "$(($(date +%s) - t_run))" \
      >>"$results"
    python3 "$score" --row "$results"
    [ -n "${EVAL_KEEP:-}" ] || rm -rf "$d"
  done
done
python3 "$score" --summary "$results" --prefix "pod_history_"
if [ -n "${EVAL_POD_HISTORY_RESULTS:-}" ]; then cp "$results" "$EVAL_POD_HISTORY_RESULTS"; fi
echo "EVAL pod_history_wall_time $(($(date +%s) - t_start)) s"

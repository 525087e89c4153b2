#!/usr/bin/env bash
# The analysis API under abuse (issue 32), watched by a real Prometheus: four clients
# loop a week of /api/v1/incidents, a day of /api/v1/correlate and 6 hours of
# /api/v1/export/trace for LOAD_S seconds (over two analysis refresh periods) while
# Prometheus scrapes fabricscope every second. Afterwards Prometheus' own series say
# whether it was served: every scrape of the window answered (up 1, one sample a
# second) in under 1 s (scrape_duration_seconds); the 30 s analysis refresh never
# skipped (fabricscope_analysis_last_refresh_timestamp_seconds is stamped when a refresh
# ends, 30 s after the previous one plus its own run, which may first wait for a
# request's analysis: each gap, up to the window's end, must stay under 60 s, where a
# skipped refresh would put it; a Debug build shows 34-36 s, ASan 46 s); and the daemon's peak RSS (VmHWM) stayed within
# storage.memory_limit + host_events.memory_limit + the answer budget
# (fabricscope_http_inflight_limit_bytes) + analysis.episode_memory_limit + the 32 MiB
# answer cache + a fixed allowance for code, threads and allocator slack.
# Prints BENCH api_scrape_load_{p50,p99,max}_s and api_scrape_load_rss_peak_mib.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
LOAD_S=65
FIXED_MIB=96 # code, libraries, thread stacks, allocator slack (a Debug build peaked at 118-155 MiB in all)
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$PY" ] || fail "needs /usr/bin/python3"
command -v prometheus >/dev/null || fail "needs prometheus (scripts/install-deps.sh)"
# Sanitizer builds: shadow memory and ASan's quarantine are RSS the daemon does not hold
# as data; a small quarantine and a larger allowance keep the bound about fabricscope.
case "$(ldd "$FABRICSCOPE")" in
  *libasan*) export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16"; FIXED_MIB=512 ;;
  *libtsan*) FIXED_MIB=1024 ;;
esac
start_api_load "storage: { memory_limit: 64MiB, retention: 1h }
analysis: { episode_memory_limit: 16MiB }"

# The window starts after a first refresh, so that every gap in it is between two.
refreshed() { curl -fsS "$URL/metrics" | grep -q '^fabricscope_analysis_last_refresh_timestamp_seconds [1-9]'; }
wait_for 60 "a first analysis refresh" refreshed

start_prometheus "$HTTP"
scraped() { prom_query 'up{job="fabricscope"}' | grep -q '"value":\[[0-9.]*,"1"\]'; }
wait_for 30 "Prometheus scrapes fabricscope" scraped

WEEK="$URL/api/v1/incidents?start=$(($(date +%s) - 7 * 86400 + 600))"
DAY="$URL/api/v1/correlate?start=$(($(date +%s) - 86400 + 600))&slow=p1&limit=1000"
TRACE="$URL/api/v1/export/trace?start=$(($(date +%s) - 6 * 3600 + 600))"
for u in "$WEEK" "$DAY" "$TRACE"; do
  t=$(curl -sS -o "$T/one.json" -w '%{http_code} %{time_total} %{size_download}' "$u")
  [ "${t%% *}" = 200 ] || fail "$u: $t $(head -c 300 "$T/one.json")"
  echo "alone: ${t#* } (s, bytes) ${u#$URL}"
done

# Four clients, each looping all three, for LOAD_S seconds (bounded: they stop by
# themselves, and cleanup ends them anyway).
START=$(date +%s)
STOP=$((START + LOAD_S))
CLIENTS=()
for i in 1 2 3 4; do
  (while [ "$(date +%s)" -lt "$STOP" ]; do
    for u in "$WEEK" "$DAY" "$TRACE"; do
      curl -sS -o /dev/null -w '%{http_code}\n' --max-time 60 "$u" >>"$T/codes.$i" || true
    done
  done) &
  track $!
  CLIENTS+=($!)
done
busy() { # the query workers are taken: a queued job is waiting
  [ "$(curl -sS -o /dev/null -w '%{time_total}' "$URL/api/v1/incidents?start=$(($(date +%s) - 60))" |
    awk '{print ($1 > 0.1)}')" = 1 ]
}
wait_for 30 "the analysis clients keep the query workers busy" busy
load_over() { [ "$(date +%s)" -ge "$STOP" ]; }
wait_for $((LOAD_S + 10)) "the load window ends" load_over
END=$(date +%s)
for p in "${CLIENTS[@]}"; do wait_exit "$p" 200; done # each ends its round (curl --max-time 60)
cat "$T"/codes.* | sort | uniq -c | sed 's/^/answers under load: /'
# 200, or 413 for a trace that outgrew the 64 MiB answer limit as the two targets' polled
# samples accumulate; nothing else (no 5xx, no failed transfer).
BAD=$(cat "$T"/codes.* | { grep -cvE '^(200|413)$' || true; })
[ "$BAD" = 0 ] || fail "$BAD answers under load were neither 200 nor 413"
grep -q '^200$' "$T"/codes.* || fail "no analysis answer under load was a 200"
# Prometheus has ingested a scrape made after the window's end.
scraped_after() {
  prom_query 'timestamp(up{job="fabricscope"})' | "$PY" -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
sys.exit(0 if r and float(r[0]["value"][1]) >= float(sys.argv[1]) else 1)' "$END"
}
wait_for 20 "Prometheus scraped after the load window" scraped_after

# What Prometheus saw over the window [START+2, END] (whole seconds).
W=$((END - START - 2))
at=$END
for q in "scrape_duration_seconds{job=\"fabricscope\"}[${W}s]" "up{job=\"fabricscope\"}[${W}s]" \
  "fabricscope_analysis_last_refresh_timestamp_seconds{job=\"fabricscope\"}[${W}s]"; do
  curl -fsS --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$q" \
    --data-urlencode "time=$at"
  echo
done >"$T/prom.json"
read -r N P50 P99 MAX DOWN GAPMAX REFRESHES < <("$PY" - "$T/prom.json" "$W" <<'PYEOF'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
w = int(sys.argv[2])
def values(doc):
    r = doc["data"]["result"]
    assert len(r) == 1, r
    return [(float(t), float(v)) for t, v in r[0]["values"]]
dur = sorted(v for _, v in values(docs[0]))
up = values(docs[1])
ref = values(docs[2])
def pct(p):
    return dur[min(len(dur) - 1, int(len(dur) * p + 0.5) - 1 if len(dur) * p >= 1 else 0)]
down = sum(1 for _, v in up if v != 1)
# The refresh stamps seen, in order, and the longest time between two distinct ones
# (or from the last to the window's end).
# The first sample of the window shows the refresh before it (the window starts after a
# first refresh), the last how long ago the latest ended.
stamps = sorted(set(v for _, v in ref if v > 0))
assert stamps and stamps[0] <= ref[0][0], (stamps[:1], ref[:1])
gaps = [b - a for a, b in zip(stamps, stamps[1:])] + [ref[-1][0] - stamps[-1]]
print(len(up), "%.4f" % pct(0.5), "%.4f" % pct(0.99), "%.4f" % dur[-1], down,
      "%.1f" % max(gaps), len(stamps) - 1)
PYEOF
)
[ -n "$N" ] || fail "could not read Prometheus' series: $(head -c 600 "$T/prom.json")"
echo "BENCH api_scrape_load_p50_s $P50 s"
echo "BENCH api_scrape_load_p99_s $P99 s"
echo "BENCH api_scrape_load_max_s $MAX s"
[ "$N" -ge $((W - 3)) ] || fail "Prometheus has $N scrapes of a ${W}s window: scrapes were missed"
[ "$DOWN" = 0 ] || fail "$DOWN of $N scrapes failed (up 0) under analysis load"
awk -v m="$MAX" 'BEGIN {exit !(m < 1)}' || fail "a scrape took ${MAX}s under analysis load"
ok "$N scrapes by Prometheus over ${W}s of analysis load: p50 ${P50}s p99 ${P99}s max ${MAX}s, none failed"
awk -v g="$GAPMAX" 'BEGIN {exit !(g < 60)}' ||
  fail "analysis refresh skipped: $REFRESHES refreshes in ${W}s, longest gap ${GAPMAX}s"
ok "the analysis refresh ran $REFRESHES times in ${W}s under load, never more than ${GAPMAX}s apart"

# Peak RSS against the configured memory.
HWM_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$FS_PID/status")
LIMIT=$(curl -fsS "$URL/metrics" | awk '/^fabricscope_http_inflight_limit_bytes / {print $2}')
[ -n "$LIMIT" ] || fail "no fabricscope_http_inflight_limit_bytes"
BOUND_MIB=$((64 + 64 + LIMIT / 1048576 + 16 + 32 + FIXED_MIB))
echo "BENCH api_scrape_load_rss_peak_mib $((HWM_KB / 1024)) MiB"
[ $((HWM_KB / 1024)) -le "$BOUND_MIB" ] ||
  fail "peak RSS $((HWM_KB / 1024)) MiB over the bound ${BOUND_MIB} MiB (storage 64 + host events 64 + answers $((LIMIT / 1048576)) + episodes 16 + cache 32 + fixed $FIXED_MIB)"
ok "peak RSS $((HWM_KB / 1024)) MiB within ${BOUND_MIB} MiB (storage 64 + host events 64 + answers $((LIMIT / 1048576)) + episodes 16 + cache 32 + fixed $FIXED_MIB)"

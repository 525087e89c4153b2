#!/usr/bin/env bash
# The analysis API under abuse (issue 32): fabricscope polls the simulated switch (as
# two targets) and holds 20,000 host events; four clients loop a week of
# /api/v1/incidents, a day of /api/v1/correlate and 6 hours of /api/v1/export/trace
# (tens of MB, most of a second alone) while the test scrapes /metrics every 0.3 s. No scrape may take a second: /metrics has a
# worker of its own that analysis never holds (before it shared the two query workers
# with them, first come first served).
# Prints BENCH api_lanes_metrics_{p50,p99,max}_s.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$PY" ] || fail "needs /usr/bin/python3"
start_api_load

# The slow requests. The trace grows with the data polled: wait until it takes 0.3 s
# alone (the premise of the test), then time each once.
WEEK="$URL/api/v1/incidents?start=$(($(date +%s) - 7 * 86400 + 600))"
DAY="$URL/api/v1/correlate?start=$(($(date +%s) - 86400 + 600))&slow=p1&limit=1000"
TRACE="$URL/api/v1/export/trace?start=$(($(date +%s) - 6 * 3600 + 600))"
trace_slow() {
  [ "$(curl -fsS -o /dev/null -w '%{time_total}' "$TRACE" | awk '{print ($1 >= 0.3)}')" = 1 ]
}
wait_for 120 "6 hours of /api/v1/export/trace take 0.3 s alone" trace_slow
for u in "$WEEK" "$DAY" "$TRACE"; do
  t=$(curl -sS -o "$T/one.json" -w '%{http_code} %{time_total}' "$u")
  [ "${t%% *}" = 200 ] || fail "$u: $t $(head -c 300 "$T/one.json")"
  echo "alone: ${t#* }s ${u#$URL}"
done

# Four clients, each looping all three.
for i in 1 2 3 4; do
  (while :; do for u in "$WEEK" "$DAY" "$TRACE"; do curl -sS -o /dev/null "$u" || true; done; done) &
  track $!
done
busy() { # the query workers are taken: a queued job is waiting
  [ "$(curl -sS -o /dev/null -w '%{time_total}' "$URL/api/v1/incidents?start=$(($(date +%s) - 60))" |
    awk '{print ($1 > 0.1)}')" = 1 ]
}
wait_for 30 "the analysis clients keep the query workers busy" busy

: >"$T/scrapes"
for _ in $(seq 80); do
  curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' "$URL/metrics" >>"$T/scrapes"
  sleep 0.3 # the scrape interval, not a wait for some state
done
grep -qv '^200 ' "$T/scrapes" && fail "a scrape failed: $(grep -v '^200 ' "$T/scrapes" | head -3)"
read -r P50 P99 MAX OVER < <(awk '{print $2}' "$T/scrapes" | sort -n | awk '
  {v[NR] = $1; if ($1 > 1) over++}
  END {printf "%.3f %.3f %.3f %d\n", v[int(NR * 0.5 + 0.5)], v[int(NR * 0.99 + 0.5)], v[NR], over}')
echo "BENCH api_lanes_metrics_p50_s $P50 s"
echo "BENCH api_lanes_metrics_p99_s $P99 s"
echo "BENCH api_lanes_metrics_max_s $MAX s"
[ "$OVER" = 0 ] || fail "$OVER of 80 scrapes took over 1 s under analysis load (p50 $P50 p99 $P99 max $MAX)"
ok "80 scrapes under analysis load: p50 ${P50}s p99 ${P99}s max ${MAX}s, none over 1 s"

# Still under that load: a range over the limit is refused on arrival, not after its
# turn in the query queue; and a week of /incidents from "now minus 7 days" computed
# here in whole seconds, with no end, is run (it is a moment over 7 days by the time it
# arrives).
for _ in 1 2 3 4 5; do
  t=$(curl -sS -o "$T/r.json" -w '%{http_code} %{time_total}' \
    "$URL/api/v1/correlate?start=$(($(date +%s) - 7 * 86400))")
  [ "${t%% *}" = 400 ] && grep -q 'longer than 86400 s' "$T/r.json" ||
    fail "a week of /correlate: $t $(cat "$T/r.json")"
  awk -v s="${t#* }" 'BEGIN {exit !(s < 0.3)}' ||
    fail "a week of /correlate refused after ${t#* }s under load, not on arrival"
done
t=$(curl -sS -o "$T/r.json" -w '%{http_code} %{time_total}' \
  "$URL/api/v1/incidents?start=$(($(date +%s) - 7 * 86400))")
[ "${t%% *}" = 200 ] || fail "/incidents from now minus 7 days: $t $(head -c 300 "$T/r.json")"
ok "under load: over-long ranges refused on arrival (< 0.3 s); now minus 7 days of /incidents runs"

#!/usr/bin/env bash
# analysis.history on a history that a real Prometheus scraped from fabricscope's /metrics:
# each scrape stores, beside the values, fabricscope_target_last_sample_timestamp_seconds
# (the time of the poll the values come from). The same world (world_om: a leaf-spine
# fabric polled every 10 s, scraped every 15 s, slow AllReduces posted by its hosts) is
# backfilled twice, with and without that gauge, each into its own real Prometheus, and a
# fabricscope with no targets answers /api/v1/correlate from it:
#  - with the gauge, every series read again as raw samples is placed by its poll times
#    ("restamped" = "refined") and every suspect's peak lies exactly on a poll of its
#    switch or halfway between two of its stored polls (a counter's rate over the
#    interval between them, a watermark over the interval before its poll);
#  - without it (an older fabricscope), nothing is restamped and the peaks lie on the
#    scrape grid shifted by half a poll, mostly not on the polls.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
WOM=$FS_BUILD_DIR/eval/world_om
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$WOM" ] || fail "build eval/world_om first"
command -v promtool >/dev/null || fail "needs promtool (Debian package prometheus)"
command -v prometheus >/dev/null || fail "needs prometheus"

TOKEN_FILE=$T/token
printf 'poll-times-%s' "$RANDOM" >"$TOKEN_FILE"
chmod 600 "$TOKEN_FILE"
TOKEN=$(cat "$TOKEN_FILE")
END=$(($(date +%s) - 120))
END=$((END - END % 60))

wait_http() { # URL: answers within 60 s
  for _ in $(seq 600); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$1 did not answer within 60 s"
}

for mode in yes no; do
  d=$T/$mode
  mkdir -p "$d"
  "$WOM" --family pfc_propagation --seed 4100 --stamp scrape --scrape 15 --poll 10 \
    --poll-stamps "$mode" --end "$END" --out "$d" 2>"$d/world_om.log" ||
    fail "world_om: $(cat "$d/world_om.log")"
  promtool tsdb create-blocks-from openmetrics -q "$d/fabric.om" "$d/data" >"$d/promtool.log" 2>&1 ||
    fail "promtool: $(tail -n 5 "$d/promtool.log")"
  printf 'global: { scrape_interval: 1m }\n' >"$d/prometheus.yml"
  PP=$(free_tcp_port)
  prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/data" \
    --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$PP" --log.level=warn \
    >"$d/prometheus.log" 2>&1 &
  track $!
  HP=$(free_tcp_port)
  cat >"$d/fs.yaml" <<EOF
listen: 127.0.0.1:$HP
host_events: { bearer_token_file: '$TOKEN_FILE' }
analysis:
  history: { url: "http://127.0.0.1:$PP", remote_timeout: 60s }
targets: []
EOF
  "$FABRICSCOPE" -c "$d/fs.yaml" >"$d/fabricscope.log" 2>&1 &
  track $!
  wait_http "http://127.0.0.1:$PP/-/ready"
  wait_http "http://127.0.0.1:$HP/healthz"
  for f in "$d"/posts/*.json; do
    curl -fsS -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
      --data-binary "@$f" "http://127.0.0.1:$HP/api/v1/host-events" || fail "post $f refused"
  done
  t0=$(jq -r '.t0 | floor' "$d/truth.json")
  curl -fsS --get -o "$d/correlate.json" "http://127.0.0.1:$HP/api/v1/correlate" \
    --data-urlencode "start=$((t0 - 60))" --data-urlencode "end=$((END + 60))" \
    --data-urlencode "limit=100000" || fail "$mode: /api/v1/correlate failed"
done

# Both worlds are the same; the poll times are the gauge's values in the first.
"$PY" - "$T/yes/fabric.om" "$T/yes/correlate.json" "$T/no/correlate.json" <<'EOF' || exit 1
import bisect, json, re, sys
polls = {}
for line in open(sys.argv[1]):
    if line.startswith("fabricscope_target_last_sample_timestamp_seconds{"):
        target = re.search(r'target="([^"]*)"', line).group(1)
        polls.setdefault(target, set()).add(float(line.split("} ")[1].split()[0]))
polls = {t: sorted(v) for t, v in polls.items()}

# Where a sample placed by its polls may peak: at a poll (an instantaneous value), or in
# the middle of the interval between two stored polls (a rate, a watermark's interval).
marks = {t: sorted(set(p) | {(a + b) / 2 for a, b in zip(p, p[1:])}) for t, p in polls.items()}

def on_poll(target, t):
    p = marks.get(target, [])
    i = bisect.bisect_left(p, t - 0.002)
    return i < len(p) and abs(p[i] - t) <= 0.002

def check(path):
    a = json.load(open(path))["data"]
    h = a["history"]
    peaks = on = 0
    for ev in a["events"]:
        for s in ev.get("suspects", []):
            if s.get("peak_time") is None:
                continue
            peaks += 1
            on += on_poll(s["target"], s["peak_time"])
    return h, peaks, on

h, peaks, on = check(sys.argv[2])
print("with poll times: history %s; %d of %d suspects' peaks on a poll" % (json.dumps(h), on, peaks))
if h.get("error"):
    sys.exit("FAIL: the history failed: %s" % h["error"])
if not (h["refined"] > 0 and h["restamped"] == h["refined"]):
    sys.exit("FAIL: with poll times stored, %d of %d refined series restamped" % (h["restamped"], h["refined"]))
if peaks < 20 or on != peaks:
    sys.exit("FAIL: with poll times, %d of %d peaks on a poll (all expected, at least 20)" % (on, peaks))
h, peaks, on = check(sys.argv[3])
print("without: history %s; %d of %d suspects' peaks on a poll" % (json.dumps(h), on, peaks))
if h["restamped"] != 0 or h["refined"] == 0:
    sys.exit("FAIL: without poll times, restamped %d of %d" % (h["restamped"], h["refined"]))
if peaks < 20 or on * 5 > peaks:
    sys.exit("FAIL: without poll times, %d of %d peaks on a poll (the scrape grid expected)" % (on, peaks))
EOF
ok "scraped history placed by its stored poll times (and by the scrape without them)"

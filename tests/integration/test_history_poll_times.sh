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
#    scrape grid shifted by half a poll, mostly not on the polls;
#  - the polls the scrape never stored are counted (a third at 15 s over 10 s polls) and
#    the answer warns of them; scraped every 10 s (as often as the poll: the `even` run),
#    none are, and no warning.
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

for mode in yes no even; do
  d=$T/$mode
  mkdir -p "$d"
  scrape=15 stamps=$mode
  [ "$mode" = even ] && scrape=10 stamps=yes
  "$WOM" --family pfc_propagation --seed 4100 --stamp scrape --scrape "$scrape" --poll 10 \
    --poll-stamps "$stamps" --end "$END" --out "$d" 2>"$d/world_om.log" ||
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
  history: { url: "http://127.0.0.1:$PP", remote_timeout: 60s, prefetch: false }
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
"$PY" - "$T/yes/fabric.om" "$T/yes/correlate.json" "$T/no/correlate.json" "$T/even/correlate.json" <<'EOF' || exit 1
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
# A 15 s scrape of 10 s polls stores two polls of three.
share = h["polls_unstored"] / float(h["polls_stored"] + h["polls_unstored"] or 1)
print("with poll times: %d polls stored, %d never (%.1f%%); warning: %s" % (h["polls_stored"], h["polls_unstored"], 100 * share, h.get("warning")))
if h["polls_stored"] < 100 or not 0.28 <= share <= 0.39:
    sys.exit("FAIL: a 15 s scrape of 10 s polls: %d stored, %d unstored (a third expected)" % (h["polls_stored"], h["polls_unstored"]))
if "never stored" not in h.get("warning", ""):
    sys.exit("FAIL: no warning of the unstored polls: %s" % json.dumps(h))
he, _, _ = check(sys.argv[4])
print("scraped every 10 s: %d polls stored, %d never; warning: %s" % (he["polls_stored"], he["polls_unstored"], he.get("warning")))
if he["polls_stored"] < 100 or he["polls_unstored"] * 100 > he["polls_stored"] or "warning" in he:
    sys.exit("FAIL: a 10 s scrape of 10 s polls: %s" % json.dumps(he))
h, peaks, on = check(sys.argv[3])
print("without: history %s; %d of %d suspects' peaks on a poll" % (json.dumps(h), on, peaks))
if h["restamped"] != 0 or h["refined"] == 0:
    sys.exit("FAIL: without poll times, restamped %d of %d" % (h["restamped"], h["refined"]))
if h["polls_stored"] != 0 or "warning" in h:
    sys.exit("FAIL: without poll times, polls counted: %s" % json.dumps(h))
if peaks < 20 or on * 5 > peaks:
    sys.exit("FAIL: without poll times, %d of %d peaks on a poll (the scrape grid expected)" % (on, peaks))
EOF
ok "scraped history placed by its stored poll times (and by the scrape without them); unstored polls counted and warned of"

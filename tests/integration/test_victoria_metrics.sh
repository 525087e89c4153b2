#!/usr/bin/env bash
# A fleet on VictoriaMetrics (single-node, Debian's victoria-metrics) as the history, the
# way test_history.sh does it on Prometheus:
#  A. VictoriaMetrics holds 4 hours of a busy fabric this instance never polled (the same
#     history_gen.py world, ingested through /api/v1/import/prometheus as a scrape would
#     have stored it, far-leaf1 under two jobs). /api/v1/incidents finds the culprit's
#     30-minute recurrence with its period, ignores the random bursts, reads the series
#     stored twice once; /api/v1/correlate names the culprit for three of its surges.
#  B. Two instances split four switches by shard and remote-write into VictoriaMetrics
#     (external_labels replica=r0/r1). VictoriaMetrics holds exactly the ring's samples
#     (timestamps to the millisecond, values as float64) of the other shard's byte
#     counters, every series carries its replica label, VictoriaMetrics' scraper (which
#     also scrapes instance 1) stores the last-sample gauge of its switches, and a range query sees data a few seconds old (-search.latencyOffset
#     set: its default of 30 s hides the last 30 s of every range query). Instance 0,
#     reading the history, reports the recurrence on every switch, its own and the
#     other shard's.
#  C. An HA pair (two instances, the same two switches, replica=a/b) into a
#     VictoriaMetrics that drops the replica label (-relabelConfig) and deduplicates
#     (-dedup.minScrapeInterval=1s): each series once, at most one sample a second.
# VictoriaMetrics runs with -search.latencyOffset=2s, as the README's recipe says.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
command -v victoria-metrics >/dev/null || fail "needs victoria-metrics (Debian package victoria-metrics)"

# start_vm DIR [ARGS...]: VictoriaMetrics on a free port with DIR's data; sets VP (its
# port) and VM_PID. Retries on a port taken between the check and the bind.
start_vm() {
  local dir=$1 pid; shift
  mkdir -p "$dir/data"
  for _ in 1 2 3 4 5; do
    VP=$(free_tcp_port)
    victoria-metrics -httpListenAddr="127.0.0.1:$VP" -storageDataPath="$dir/data" \
      -search.latencyOffset=2s -loggerLevel=WARN "$@" >"$dir/vm.log" 2>&1 &
    pid=$!
    track $pid
    for _ in $(seq 600); do
      [ "$(curl -fsS "http://127.0.0.1:$VP/health" 2>/dev/null)" = OK ] && { VM_PID=$pid; return 0; }
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && fail "victoria-metrics on $VP not ready within 60s"
    grep -q 'address already in use' "$dir/vm.log" ||
      fail "victoria-metrics exited: $(tail -n 3 "$dir/vm.log")"
  done
  fail "victoria-metrics found no free port in 5 tries"
}
# vm_query PORT QUERY TIME: the instant answer's first value (empty when none).
# nocache=1: an instant query near now is otherwise moved back by -search.latencyOffset.
vm_query() {
  curl -fsS --get "http://127.0.0.1:$1/api/v1/query" --data-urlencode "query=$2" \
    --data-urlencode "time=$3" --data-urlencode nocache=1 | jq -r '.data.result[0].value[1] // empty'
}

# ---------------------------------------------------------------- A: imported history
A=$T/a
mkdir -p "$A"
END=$(($(date +%s) - 120))
"$PY" "$FS_SOURCE_DIR/tests/integration/history_gen.py" "$A/fabric.om" "$END" 4 7 --twice \
  >"$A/surges.txt" || fail "history_gen.py failed"
[ "$(wc -l <"$A/surges.txt")" -ge 6 ] || fail "the generator made $(wc -l <"$A/surges.txt") surges"
start_vm "$A"
PA=$VP
# OpenMetrics (seconds) to the Prometheus text format (milliseconds) that
# /api/v1/import/prometheus takes; names, labels and values as they are.
awk '/^#/ { next } { $3 = $3 "000"; print }' "$A/fabric.om" >"$A/fabric.prom"
nsamples=$(wc -l <"$A/fabric.prom")
curl -fsS --data-binary @"$A/fabric.prom" "http://127.0.0.1:$PA/api/v1/import/prometheus" ||
  fail "import refused"
# Imported rows become searchable after VictoriaMetrics' next flush (about a second).
all_imported() { [ "$(vm_query "$PA" 'count(fabric_queue_depth_bytes)' "$END")" = 64 ]; }
wait_for 60 "the 64 queue-depth series searchable" all_imported
ok "victoria-metrics imported $nsamples samples over 4 h"

HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
cat >"$T/fs-a.yaml" <<EOF
listen: 127.0.0.1:$HTTP
analysis:
  history: { url: "http://127.0.0.1:$PA", prefetch: false }
targets: []
EOF
"$FABRICSCOPE" --check-config "$T/fs-a.yaml" >/dev/null || fail "config A refused"
start_fabricscope "$T/fs-a.yaml"
wait_http "$URL/healthz" 20
START=$((END - 4 * 3600))
curl -fsS "$URL/api/v1/incidents?start=$START&end=$((END + 60))" >"$A/incidents.json" ||
  fail "incidents: $(cat "$A/incidents.json")"
jq -e '.data.history.error == null' "$A/incidents.json" >/dev/null ||
  fail "history error: $(jq -c .data.history "$A/incidents.json")"
jq -e '.data.history.series == 128 and .data.history.duplicates == 32' "$A/incidents.json" >/dev/null ||
  fail "want 128 series read and far-leaf1's 32 second copies ignored: $(jq -c .data.history "$A/incidents.json")"
P=$(awk 'NR == 1 {f = $1} {l = $1; n = NR} END {printf "%.3f", (l - f) / (n - 1)}' "$A/surges.txt")
jq -e --argjson p "$P" '[.data.recurring[] | select(any(.series[]; .target == "far-leaf1" and .interface == "Eth1/7"))]
       | length == 1 and ((.[0].period_s - $p) | fabs) < 0.01 * $p' "$A/incidents.json" >/dev/null ||
  fail "the culprit's recurrence: $(jq -c '[.data.recurring[] | {series: [.series[] | .target + " " + .interface], period_s, occurrences}]' "$A/incidents.json")"
others=$(jq '[.data.recurring[] | select(all(.series[]; .interface != "Eth1/7"))] | length' "$A/incidents.json")
[ "$others" = 0 ] || fail "random bursts called periodic: $(jq -c '[.data.recurring[] | {series: [.series[] | .target + " " + .interface], period_s}]' "$A/incidents.json")"
ok "incidents over 4 h of history in victoria-metrics: far-leaf1 Eth1/7 every $(jq '.data.recurring[0].period_s | floor' "$A/incidents.json") s (generated: $P s; step $(jq .data.history.step_s "$A/incidents.json") s, $(jq .data.history.points "$A/incidents.json") points, $(jq .data.history.refined "$A/incidents.json") series read again raw)"

args=()
while read -r s; do
  s=${s%.*}
  args+=(--data-urlencode "window=$s,$((s + 20))")
done < <(sed -n '2p;4p;6p' "$A/surges.txt")
curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "start=$START" \
  --data-urlencode "end=$((END + 60))" "${args[@]}" >"$A/correlate.json" ||
  fail "correlate: $(cat "$A/correlate.json")"
jq -e '.data.summary[0].target == "far-leaf1" and .data.summary[0].interface == "Eth1/7" and .data.summary[0].departs == 3' \
  "$A/correlate.json" >/dev/null ||
  fail "correlate does not name the culprit first: $(jq -c '[.data.summary[:3][] | {target, interface, metric, departs, evidence}]' "$A/correlate.json")"
ok "correlate names far-leaf1 Eth1/7 for 3 of 3 surges from victoria-metrics"
kill "$FS_PID"
wait_exit "$FS_PID" 20
kill "$VM_PID"
wait_exit "$VM_PID" 30

# ---------------------------------------------------------------- B: shards + remote_write
B=$T/b
mkdir -p "$B"
cat >"$T/scenario.json" <<EOF
{"ports": 8, "congestion": {"port": 5, "tc": 3, "period_s": 10, "duration_s": 3, "phase_s": 3}}
EOF
start_snmp_sim --scenario "$T/scenario.json"
H0=$(free_tcp_port)
H1=$(free_tcp_port)
# VictoriaMetrics' own scraper (-promscrape.config, Prometheus' format) also scrapes
# instance 1: its series stored twice, and its last-sample gauge stored with each scrape.
cat >"$B/scrape.yml" <<EOF
global: { scrape_interval: 1s, scrape_timeout: 1s }
scrape_configs:
  - job_name: fabricscope-1
    static_configs: [ { targets: ['127.0.0.1:$H1'] } ]
EOF
start_vm "$B" -promscrape.config="$B/scrape.yml"
PB=$VP
# A second one with VictoriaMetrics' default -search.latencyOffset (30 s), fed the same.
start_vm "$B/default" -search.latencyOffset=30s
PD=$VP
config_b() { # INDEX HTTP-PORT
  cat <<EOF
listen: 127.0.0.1:$2
shard: { index: $1, count: 2 }
external_labels: { replica: r$1 }
remote_write:
  - url: http://127.0.0.1:$PB/api/v1/write
    name: vm
    queue: { batch_send_deadline: 200ms }
  - url: http://127.0.0.1:$PD/api/v1/write
    name: vm-default
    queue: { batch_send_deadline: 200ms }
analysis:
  horizon: 10m
  history: { url: "http://127.0.0.1:$PB", step: 1s, max_points: 50000000 }
targets:
EOF
  for j in 1 2 3 4; do
    echo "  - { name: leaf$j, address: 127.0.0.1, snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 800ms } }"
  done
}
config_b 0 "$H0" >"$B/fs0.yaml"
config_b 1 "$H1" >"$B/fs1.yaml"
for i in 0 1; do
  "$FABRICSCOPE" --check-config "$B/fs$i.yaml" >/dev/null || fail "config B$i refused"
  "$FABRICSCOPE" -c "$B/fs$i.yaml" >"$T/fabricscope-b$i.log" 2>&1 &
  track $!
done
wait_http "http://127.0.0.1:$H0/healthz" 20
wait_http "http://127.0.0.1:$H1/healthz" 20
polled() { curl -fsS "http://127.0.0.1:$1/api/v1/targets" | jq -r '[.data[] | select(.polled) | .target] | unique | join(" ")'; }
mine=$(polled "$H0")
theirs=$(polled "$H1")
[ -n "$mine" ] && [ -n "$theirs" ] || fail "want both shards to poll a switch: 0 polls '$mine', 1 polls '$theirs'"

# The value of instance 1's sender's self metric (0 when absent).
rw_metric() { # metric
  curl -fsS "http://127.0.0.1:$H1/metrics" |
    awk -v m="fabricscope_remote_write_$1" '$1 ~ "^"m"\\{" && index($1, "remote_name=\"vm\"") { print $2; f=1 } END { if (!f) print 0 }'
}
sent_past() { "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$(rw_metric highest_sent_timestamp_seconds)" "$1"; }
# Everything instance 1 polled up to CUT is in VictoriaMetrics once a sample a second newer
# was accepted (the ring is walked in time order) and VictoriaMetrics flushed it.
FROM=$(($(date +%s) + 1))
CUT=$((FROM + 10))
wait_for 60 "instance 1 sent past the cut" sent_past "$((CUT + 1))"
[ "$(rw_metric samples_dropped_total)" = 0 ] && [ "$(rw_metric samples_failed_total)" = 0 ] ||
  fail "instance 1's sender dropped $(rw_metric samples_dropped_total), failed $(rw_metric samples_failed_total)"
T1=${theirs%% *}
compare() { # prints the samples compared
  local sel="fabric_port_bytes_total{target=\"$T1\"}"
  curl -fsS --get "http://127.0.0.1:$H1/api/v1/raw" --data-urlencode "match[]=$sel" \
    --data-urlencode "start=$FROM" --data-urlencode "end=$CUT.000999" >"$B/ring.json" || return 1
  # The remote-written copies (the scraped ones carry job and instance).
  curl -fsS --get "http://127.0.0.1:$PB/api/v1/export" --data-urlencode "match[]=${sel%\}},job=\"\"}" \
    --data-urlencode "start=$FROM" --data-urlencode "end=$CUT" >"$B/vm.jsonl" || return 1
  "$PY" - "$B/ring.json" "$B/vm.jsonl" <<'PY'
import json, sys
from decimal import Decimal
ring = json.load(open(sys.argv[1]), parse_float=Decimal)
vm = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ident = lambda m: tuple(sorted((k, v) for k, v in m.items() if k not in ("replica", "__name__")))
r = {ident(s["metric"]): [(int(Decimal(str(t)) * 1000), float(int(v))) for t, v in s["values"]]
     for s in ring["data"]["result"]}
v = {}
for s in vm:
    if s["metric"].get("replica") != "r1":
        sys.exit("a series without replica=r1: %s" % s["metric"])
    v.setdefault(ident(s["metric"]), []).extend(zip(s["timestamps"], map(float, s["values"])))
if not r or set(r) != set(v):
    sys.exit("series differ: ring %d, victoria-metrics %d" % (len(r), len(v)))
n = 0
for k, want in r.items():
    got = sorted(v[k])
    if got != want:
        sys.exit("%s: %d ring samples, %d in victoria-metrics; missing %s extra %s" % (
            dict(k).get("interface"), len(want), len(got),
            [w for w in want if w not in got][:3], [g for g in got if g not in want][:3]))
    n += len(want)
print(n, len(r))
PY
}
# Accepted rows become searchable at VictoriaMetrics' next flush (about a second): the
# comparison is repeated until it holds or 30 s have passed.
until=$((SECONDS + 30))
until compare >"$B/compared" 2>"$B/compare.err"; do
  [ $SECONDS -lt $until ] || fail "victoria-metrics does not hold the ring's samples: $(cat "$B/compare.err")"
  sleep 0.5
done
read -r n nser <"$B/compared"
[ "$n" -ge 50 ] || fail "only $n samples compared"
ok "victoria-metrics holds all $n samples of $T1's $nser byte counters in the ring of instance 1 ($FROM..$CUT), to the millisecond"

now=$(date +%s)
unlabelled=$(vm_query "$PB" 'count({__name__=~"fabric_.+|fabricscope_.+", replica!~"r0|r1"})' "$now")
all=$(vm_query "$PB" 'count({__name__=~"fabric_.+|fabricscope_.+"})' "$now")
[ -n "$all" ] && [ "$all" -gt 0 ] && [ -z "$unlabelled" ] ||
  fail "${unlabelled:-0} of ${all:-0} series lack replica r0/r1"
last=$(curl -fsS --get "http://127.0.0.1:$PB/api/v1/export" \
  --data-urlencode 'match[]=fabricscope_target_last_sample_timestamp_seconds{job="fabricscope-1"}' \
  --data-urlencode "start=$((now - 60))" | jq -sr '[.[].metric | .target + "@" + .replica] | unique | join(" ")')
for t in $theirs; do grep -q "$t@r1" <<<"$last" || fail "no last-sample gauge of $t scraped from instance 1: $last"; done
ok "all $all series carry their replica label; the last-sample gauge scraped from instance 1: $last"

# A range query reaching to now sees the poll of a few seconds ago; with the default
# -search.latencyOffset (30 s) its last 30 s repeat the value of 30 s ago.
newest_poll_age() { # VM-PORT: age of the newest remote-written poll a range query ending now shows
  local t v
  t=$(date +%s)
  v=$(curl -fsS --get "http://127.0.0.1:$1/api/v1/query_range" \
    --data-urlencode 'query=max(timestamp(fabric_port_bytes_total{job=""}))' \
    --data-urlencode "start=$((t - 60))" --data-urlencode "end=$t" --data-urlencode step=1 |
    jq -r '.data.result[0].values[-1][1] // 0')
  "$PY" -c 'import sys; print(int(float(sys.argv[2]) - float(sys.argv[1])))' "$v" "$t"
}
fresh() { [ "$(newest_poll_age "$PB")" -lt 20 ]; }
wait_for 30 "a range query ending now sees a poll less than 20 s old" fresh
age=$(newest_poll_age "$PB")
# (none at all until its first samples are 30 s old)
shows_any() { [ "$(newest_poll_age "$PD")" -lt 100000 ]; }
wait_for 60 "the default one shows a poll" shows_any
age_default=$(newest_poll_age "$PD")
[ "$age_default" -ge 28 ] || fail "with the default latency offset the newest poll shown is $age_default s old, want 30"
ok "a range query ending now shows a poll $age s old (-search.latencyOffset=2s), $age_default s old with the default of 30 s"

recurring_targets() {
  curl -fsS "http://127.0.0.1:$H0/api/v1/incidents?start=$(($(date +%s) - 600))" >"$B/inc.json" || return 1
  jq -r '[.data.recurring[] | select(.period_s > 9.5 and .period_s < 10.5) | .series[] | select(.interface == "Eth1/5") | .target] | unique | join(" ")' "$B/inc.json"
}
all_recurring() { [ "$(recurring_targets)" = "leaf1 leaf2 leaf3 leaf4" ]; }
wait_for 180 "instance 0 reports the 10 s recurrence on all four switches" all_recurring ||
  fail "recurring on: $(recurring_targets); history $(jq -c .data.history "$B/inc.json")"
jq -e '.data.history.error == null and .data.history.duplicates > 0' "$B/inc.json" >/dev/null ||
  fail "want the scraped copies of instance 1's series ignored: $(jq -c .data.history "$B/inc.json")"
ok "instance 0 (polling $mine) reports the recurrence on leaf1..leaf4, shard 1's ($theirs) from victoria-metrics (history $(jq -c '.data.history | {series, duplicates, refined, restamped}' "$B/inc.json"))"

# ---------------------------------------------------------------- C: an HA pair, deduplicated
# Two instances polling the same two switches (external_labels replica=a/b) remote-write
# into one VictoriaMetrics that drops the replica label on the way in (-relabelConfig)
# and keeps one sample per second of each series (-dedup.minScrapeInterval=1s): it holds
# each series once, not twice, with at most one sample a second.
C=$T/c
mkdir -p "$C"
printf -- '- action: labeldrop\n  regex: replica\n' >"$C/relabel.yml"
start_vm "$C" -relabelConfig="$C/relabel.yml" -dedup.minScrapeInterval=1s
PC=$VP
for r in a b; do
  p=$(free_tcp_port)
  eval "HC_$r=$p"
  cat >"$C/fs-$r.yaml" <<YAML
listen: 127.0.0.1:$p
external_labels: { replica: $r }
remote_write:
  - { url: "http://127.0.0.1:$PC/api/v1/write", queue: { batch_send_deadline: 200ms } }
targets:
  - { name: ha1, address: 127.0.0.1, snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 800ms } }
  - { name: ha2, address: 127.0.0.1, snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 800ms } }
YAML
  "$FABRICSCOPE" -c "$C/fs-$r.yaml" >"$T/fabricscope-c$r.log" 2>&1 &
  track $!
  wait_http "http://127.0.0.1:$p/healthz" 20
done
# The series one instance holds of the two switches' port byte counters.
ring_series() {
  curl -fsS "http://127.0.0.1:$HC_a/metrics" | grep -cE '^fabric_port_bytes_total\{.*target="ha[12]"'
}
vm_series() { vm_query "$PC" 'count(fabric_port_bytes_total{target=~"ha[12]"})' "$(date +%s)"; }
both_in() { [ -n "$(vm_series)" ] && [ "$(vm_series)" -ge "$(ring_series)" ]; }
wait_for 60 "victoria-metrics holds the HA pair's port byte counters" both_in
sleep_until=$(($(date +%s) + 12))
while [ "$(date +%s)" -lt "$sleep_until" ]; do sleep 1; done # 12 s of both instances' polls
nring=$(ring_series)
nvm=$(vm_series)
[ "$nvm" = "$nring" ] || fail "victoria-metrics holds $nvm series for the $nring each instance has (doubled?)"
with_replica=$(vm_query "$PC" 'count({target=~"ha[12]", replica!=""})' "$(date +%s)")
[ -z "$with_replica" ] || [ "$with_replica" = 0 ] || fail "$with_replica series still carry a replica label"
# Both instances wrote (each one's remote_write sent samples), yet one sample a second.
for r in a b; do
  port=$(eval echo "\$HC_$r")
  sent=$(curl -fsS "http://127.0.0.1:$port/metrics" |
    awk '/^fabricscope_remote_write_samples_sent_total\{/ {s += $2} END {print s + 0}')
  [ "$sent" -gt 0 ] || fail "instance $r sent nothing"
done
end=$(($(date +%s) - 3))
curl -fsS --get "http://127.0.0.1:$PC/api/v1/export" \
  --data-urlencode 'match[]=fabric_port_bytes_total{target="ha1",interface="Eth1/1",direction="rx"}' \
  --data-urlencode "start=$((end - 10))" --data-urlencode "end=$end" >"$C/export.json"
"$PY" - "$C/export.json" <<'PYEOF' || fail "the deduplicated series: $(head -c 600 "$C/export.json")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if len(lines) != 1:
    sys.exit("want one series, got %d" % len(lines))
ts = lines[0]["timestamps"]
per_second = {}
for t in ts:
    per_second[t // 1000] = per_second.get(t // 1000, 0) + 1
if not ts or max(per_second.values()) > 1 or len(ts) > 11:
    sys.exit("%d samples in 10 s, at most %d in one second" % (len(ts), max(per_second.values() or [0])))
print("ok - one series, %d samples in 10 s, at most one a second" % len(ts))
PYEOF
ok "an HA pair (replica a and b) into victoria-metrics with -relabelConfig (labeldrop replica) and -dedup.minScrapeInterval=1s: $nvm series for the $nring each instance holds, none with a replica label"

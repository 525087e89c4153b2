#!/usr/bin/env bash
# analysis.history against a real Prometheus, two ways:
#  A. Prometheus holds 4 hours of a busy fabric this instance never polled, loaded with
#     `promtool tsdb create-blocks-from openmetrics` (history_gen.py), served over TLS
#     with basic auth. /api/v1/incidents finds the culprit's 30-minute recurrence with
#     its period, ignores the random incast bursts, reads the series stored twice (two
#     scrape jobs) once; /api/v1/correlate names the culprit for three of its surges; a
#     wrong password is answered from local data with the history's error stated. Read
#     per request, and read ahead by the prefetch (the first request then reads minutes).
#  B. Two instances split four switches by shard; each remote-writes into Prometheus,
#     which also scrapes instance 1 (the same series stored twice). Instance 0, reading
#     the history, reports the recurrence on every switch, its own and the other shard's.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
command -v promtool >/dev/null || fail "needs promtool (Debian package prometheus)"

# start_prom DIR [ARGS...]: Prometheus on a free port with DIR's data and config; sets
# PP (its port). Retries on a port taken between the check and the bind.
start_prom() {
  local dir=$1 pid; shift
  for _ in 1 2 3 4 5; do
    PP=$(free_tcp_port)
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
      --web.listen-address="127.0.0.1:$PP" --log.level=warn "$@" >"$dir/prometheus.log" 2>&1 &
    pid=$!
    track $pid
    for _ in $(seq 600); do
      grep -q 'address already in use' "$dir/prometheus.log" && break
      kill -0 "$pid" 2>/dev/null || break
      ss -Hltn "sport = :$PP" | grep -q . && return 0
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && ! grep -q 'address already in use' "$dir/prometheus.log" &&
      fail "prometheus on $PP not listening within 60s"
    grep -q 'address already in use' "$dir/prometheus.log" ||
      fail "prometheus exited: $(tail -n 3 "$dir/prometheus.log")"
    kill "$pid" 2>/dev/null || true
  done
  fail "prometheus found no free port in 5 tries"
}

# ---------------------------------------------------------------- A: backfilled history
A=$T/a
mkdir -p "$A/data"
END=$(($(date +%s) - 120))
"$PY" "$FS_SOURCE_DIR/tests/integration/history_gen.py" "$A/fabric.om" "$END" 4 7 --twice \
  >"$A/surges.txt" || fail "history_gen.py failed"
[ "$(wc -l <"$A/surges.txt")" -ge 6 ] || fail "the generator made $(wc -l <"$A/surges.txt") surges"
promtool tsdb create-blocks-from openmetrics "$A/fabric.om" "$A/data" >"$A/promtool.log" 2>&1 ||
  fail "promtool: $(tail -n 5 "$A/promtool.log")"
ok "promtool backfilled $(grep -c '^fabric_' "$A/fabric.om") samples over 4 h"

# TLS with a private CA, and basic auth (bcrypt, as Prometheus' web config wants it).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$A/key.pem" -out "$A/cert.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 ||
  fail "openssl could not make a certificate"
HASH=$("$PY" -W ignore -c "import crypt; print(crypt.crypt('s3cret', crypt.mksalt(crypt.METHOD_BLOWFISH)))")
cat >"$A/web.yml" <<EOF
tls_server_config: { cert_file: $A/cert.pem, key_file: $A/key.pem }
basic_auth_users: { fsuser: '$HASH' }
EOF
printf 'global: { scrape_interval: 1m }\n' >"$A/prometheus.yml"
start_prom "$A" --web.config.file="$A/web.yml"
PA=$PP
curl_a() { curl -fsS --cacert "$A/cert.pem" -u fsuser:s3cret "$@"; }
wait_for 60 "prometheus A ready over TLS" curl_a -o /dev/null "https://127.0.0.1:$PA/-/ready"
n=$(curl_a --get "https://127.0.0.1:$PA/api/v1/query" --data-urlencode 'query=count(fabric_queue_depth_bytes)' \
  --data-urlencode "time=$END" | jq -r '.data.result[0].value[1]')
[ "$n" = 64 ] || fail "prometheus A holds $n queue-depth series, want 64"

printf 's3cret\n' >"$A/password"
printf 'wrong\n' >"$A/wrong"
HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
write_a() { # PASSWORD-FILE [REMOTE-TIMEOUT]
  cat >"$T/fs-a.yaml" <<EOF
listen: 127.0.0.1:$HTTP
analysis:
  history:
    url: https://127.0.0.1:$PA/
    remote_timeout: ${2:-30s}
    basic_auth: { username: fsuser, password_file: $1 }
    tls: { ca_file: $A/cert.pem }
    headers: { X-Scope-OrgID: fabric-test }
    prefetch: false
targets: []
EOF
}
write_a "$A/password"
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
# The culprit recurs every ~1800 s with +-2% jitter: its period is the generated surges'
# mean spacing, to within 1%; nothing else recurs.
P=$(awk 'NR == 1 {f = $1} {l = $1; n = NR} END {printf "%.3f", (l - f) / (n - 1)}' "$A/surges.txt")
jq -e --argjson p "$P" '[.data.recurring[] | select(any(.series[]; .target == "far-leaf1" and .interface == "Eth1/7"))]
       | length == 1 and ((.[0].period_s - $p) | fabs) < 0.01 * $p' "$A/incidents.json" >/dev/null ||
  fail "the culprit's recurrence: $(jq -c '[.data.recurring[] | {series: [.series[] | .target + " " + .interface], period_s, occurrences}]' "$A/incidents.json")"
others=$(jq '[.data.recurring[] | select(all(.series[]; .interface != "Eth1/7"))] | length' "$A/incidents.json")
[ "$others" = 0 ] || fail "random bursts called periodic: $(jq -c '[.data.recurring[] | {series: [.series[] | .target + " " + .interface], period_s}]' "$A/incidents.json")"
ok "incidents over 4 h of history: far-leaf1 Eth1/7 every $(jq '.data.recurring[0].period_s | floor' "$A/incidents.json") s (generated: $P s; step $(jq .data.history.step_s "$A/incidents.json") s, $(jq .data.history.points "$A/incidents.json") points)"

# /correlate for three of the surges (explicit windows, each 20 s from its start).
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
ok "correlate names far-leaf1 Eth1/7 for 3 of 3 surges from history"

# The same range again (another limit, so that the answer is computed, not the one kept
# for this request): the history is read only from 5 minutes before the previous read's
# end (the rest comes from that read), and the answer is the same.
curl -fsS "$URL/api/v1/incidents?start=$START&end=$((END + 60))&limit=99999" >"$A/incidents-again.json" ||
  fail "incidents again: $(cat "$A/incidents-again.json")"
jq -e '.data.history.cached_until != null and .data.history.error == null' "$A/incidents-again.json" >/dev/null ||
  fail "want the second read to start at the cached end: $(jq -c .data.history "$A/incidents-again.json")"
jq -e --slurpfile a "$A/incidents.json" '[.data.recurring[] | {period_s, occurrences, next_expected}] ==
       [$a[0].data.recurring[] | {period_s, occurrences, next_expected}]' "$A/incidents-again.json" >/dev/null ||
  fail "a cached read answers otherwise: $(jq -c '[.data.recurring[] | {period_s, occurrences}]' "$A/incidents-again.json")"
ok "the same range again reads the history from $(jq .data.history.cached_until "$A/incidents-again.json") only, same answer ($(jq .data.history.points "$A/incidents-again.json") points instead of $(jq .data.history.points "$A/incidents.json"))"
# The very same request within 30 s: the answer kept for it (a range in the past), byte
# for byte, the history not read again.
curl -fsS "$URL/api/v1/incidents?start=$START&end=$((END + 60))&limit=99999" >"$A/incidents-kept.json" ||
  fail "incidents kept: $(cat "$A/incidents-kept.json")"
cmp -s "$A/incidents-again.json" "$A/incidents-kept.json" ||
  fail "the same request again was computed again: $(jq -c .data.history "$A/incidents-kept.json")"
ok "the same request again got the kept answer"
# A reload that changes nothing of the history keeps what it read: the same range again
# reads only the minutes after it.
hup
curl -fsS "$URL/api/v1/incidents?start=$START&end=$((END + 60))&limit=9999" >"$A/incidents-reloaded.json" ||
  fail "incidents after a reload: $(cat "$A/incidents-reloaded.json")"
jq -e '.data.history.cached_until != null' "$A/incidents-reloaded.json" >/dev/null ||
  fail "a reload with the same history dropped what was read: $(jq -c .data.history "$A/incidents-reloaded.json")"
ok "a reload with the same history kept what it read ($(jq .data.history.points "$A/incidents-reloaded.json") points read after it)"
# A range in the past (its first three hours), read whole here (a reload that changes the
# history's settings drops what was kept, from which the range would come: see A2);
# compared with A2's answer below.
PAST_END=$((END - 3600))
write_a "$A/password" 31s
hup
curl -fsS "$URL/api/v1/incidents?start=$START&end=$PAST_END" >"$A/incidents-past.json" ||
  fail "incidents over the past range: $(cat "$A/incidents-past.json")"
jq -e '.data.history.error == null and .data.history.points > 0' "$A/incidents-past.json" >/dev/null ||
  fail "the past range was not read: $(jq -c .data.history "$A/incidents-past.json")"

# A2. The same history with analysis.history.prefetch on (the default): after the first
# refresh (30 s after start) the refresher reads the horizon ahead of requests, and the
# first request reads only its last minutes, with the answer of the whole read above.
HTTP2=$(free_tcp_port)
sed -e "s/^listen: .*/listen: 127.0.0.1:$HTTP2/" -e '/prefetch: false/d' "$T/fs-a.yaml" >"$T/fs-a2.yaml"
"$FABRICSCOPE" -c "$T/fs-a2.yaml" >"$T/fabricscope-a2.log" 2>&1 &
A2_PID=$!
track "$A2_PID"
wait_http "http://127.0.0.1:$HTTP2/healthz" 20
kept_edge() { # EDGE: fabricscope_analysis_history_cached_timestamp_seconds{edge=EDGE}
  curl -fsS "http://127.0.0.1:$HTTP2/metrics" |
    awk -v n="fabricscope_analysis_history_cached_timestamp_seconds{edge=\"$1\"}" '$1 == n {printf "%d", $2}'
}
# What is kept reaches the first refresh's time: the horizon is read.
caught_up() {
  local r e
  r=$(curl -fsS "http://127.0.0.1:$HTTP2/metrics" |
    awk '$1 == "fabricscope_analysis_last_refresh_timestamp_seconds" {printf "%d", $2}')
  e=$(kept_edge end)
  [ -n "$r" ] && [ -n "$e" ] && [ "$e" -ge "$r" ]
}
wait_for 150 "the prefetch reads the horizon" caught_up
kfrom=$(kept_edge start) kto=$(kept_edge end)
[ $((kto - kfrom)) -ge $((24 * 3600)) ] || fail "the prefetch kept $kfrom..$kto, not the 24 h horizon"
curl -fsS "http://127.0.0.1:$HTTP2/api/v1/incidents?start=$START&end=$((END + 60))" >"$A/incidents-prefetched.json" ||
  fail "incidents after the prefetch: $(cat "$A/incidents-prefetched.json")"
jq -e --argjson k "$kto" '.data.history.error == null and .data.history.cached_until != null and
       .data.history.cached_until >= $k - 300 - 1' "$A/incidents-prefetched.json" >/dev/null ||
  fail "the first request read more than the minutes since the prefetch: $(jq -c .data.history "$A/incidents-prefetched.json")"
jq -e --slurpfile a "$A/incidents.json" '[.data.recurring[] | {period_s, occurrences, next_expected}] ==
       [$a[0].data.recurring[] | {period_s, occurrences, next_expected}]' "$A/incidents-prefetched.json" >/dev/null ||
  fail "the prefetched history answers otherwise: $(jq -c '[.data.recurring[] | {period_s, occurrences}]' "$A/incidents-prefetched.json") vs $(jq -c '[.data.recurring[] | {period_s, occurrences}]' "$A/incidents.json")"
ok "with the prefetch the first request read from $(jq .data.history.cached_until "$A/incidents-prefetched.json") only ($(jq .data.history.points "$A/incidents-prefetched.json") points; kept $(((kto - kfrom) / 3600)) h), same recurrence as the whole read"
# A range that ends before the part a read would take again: nothing read at all, the
# answer the whole read of it gave.
curl -fsS "http://127.0.0.1:$HTTP2/api/v1/incidents?start=$START&end=$PAST_END" >"$A/incidents-past-kept.json" ||
  fail "incidents over the past range after the prefetch: $(cat "$A/incidents-past-kept.json")"
jq -e --argjson e "$PAST_END" '.data.history.error == null and .data.history.points == 0 and
       .data.history.cached_until == $e' "$A/incidents-past-kept.json" >/dev/null ||
  fail "the past range was read again: $(jq -c .data.history "$A/incidents-past-kept.json")"
jq -e --slurpfile a "$A/incidents-past.json" '[.data.recurring[] | {period_s, occurrences, next_expected}] ==
       [$a[0].data.recurring[] | {period_s, occurrences, next_expected}] and (.data.recurring | length) > 0' \
  "$A/incidents-past-kept.json" >/dev/null ||
  fail "the kept departures answer the past range otherwise: $(jq -c '[.data.recurring[] | {period_s, occurrences}]' "$A/incidents-past-kept.json") vs $(jq -c '[.data.recurring[] | {period_s, occurrences}]' "$A/incidents-past.json")"
ok "a past range inside what is kept read nothing ($(jq -c '[.data.recurring[] | .occurrences]' "$A/incidents-past-kept.json") occurrences, as read whole)"
kill "$A2_PID"
wait_exit "$A2_PID" 20

# A wrong password: still an answer (from local data), with the history's error.
write_a "$A/wrong"
hup
curl -fsS "$URL/api/v1/incidents?start=$START&end=$((END + 60))" >"$A/incidents2.json" ||
  fail "incidents with a wrong password: $(cat "$A/incidents2.json")"
jq -e '.data.history.error | test("HTTP 401")' "$A/incidents2.json" >/dev/null ||
  fail "a refused history is not stated: $(jq -c .data.history "$A/incidents2.json")"
ok "a refused history login is stated: $(jq -r .data.history.error "$A/incidents2.json")"
kill "$FS_PID"
wait_exit "$FS_PID" 20

# ---------------------------------------------------------------- B: shards + remote_write
B=$T/b
mkdir -p "$B/data"
cat >"$T/scenario.json" <<EOF
{"ports": 8, "congestion": {"port": 5, "tc": 3, "period_s": 10, "duration_s": 3, "phase_s": 3}}
EOF
start_snmp_sim --scenario "$T/scenario.json"
H0=$(free_tcp_port)
H1=$(free_tcp_port)
cat >"$B/prometheus.yml" <<EOF
global: { scrape_interval: 1s, scrape_timeout: 1s }
scrape_configs:
  - job_name: fabricscope-1
    static_configs: [ { targets: ['127.0.0.1:$H1'] } ]
EOF
start_prom "$B" --web.enable-remote-write-receiver
PB=$PP
wait_for 60 "prometheus B ready" curl -fsS -o /dev/null "http://127.0.0.1:$PB/-/ready"
config_b() { # INDEX HTTP-PORT
  cat <<EOF
listen: 127.0.0.1:$2
shard: { index: $1, count: 2 }
external_labels: { replica: r$1 }
remote_write:
  - url: http://127.0.0.1:$PB/api/v1/write
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
declare -a BPID
start_b() { # INDEX
  "$FABRICSCOPE" -c "$B/fs$1.yaml" >>"$T/fabricscope-b$1.log" 2>&1 &
  BPID[$1]=$!
  track "${BPID[$1]}"
}
for i in 0 1; do
  "$FABRICSCOPE" --check-config "$B/fs$i.yaml" >/dev/null || fail "config B$i refused"
  start_b "$i"
done
wait_http "http://127.0.0.1:$H0/healthz" 20
wait_http "http://127.0.0.1:$H1/healthz" 20
mine=$(curl -fsS "http://127.0.0.1:$H0/api/v1/targets" | jq -r '[.data[] | select(.polled) | .target] | unique | join(" ")')
theirs=$(curl -fsS "http://127.0.0.1:$H1/api/v1/targets" | jq -r '[.data[] | select(.polled) | .target] | unique | join(" ")')
[ -n "$mine" ] && [ -n "$theirs" ] || fail "want both shards to poll a switch: 0 polls '$mine', 1 polls '$theirs'"

# Recurring on leaf1..leaf4, seen from instance 0: its own from its ring, the others from
# Prometheus (remote-written by instance 1, and scraped from it too).
recurring_targets() {
  curl -fsS "http://127.0.0.1:$H0/api/v1/incidents?start=$(($(date +%s) - 600))" >"$B/inc.json" || return 1
  jq -r '[.data.recurring[] | select(.period_s > 9.5 and .period_s < 10.5) | .series[] | select(.interface == "Eth1/5") | .target] | unique | join(" ")' "$B/inc.json"
}
all_recurring() { [ "$(recurring_targets)" = "leaf1 leaf2 leaf3 leaf4" ]; }
wait_for 180 "instance 0 reports the 10 s recurrence on all four switches" all_recurring ||
  fail "recurring on: $(recurring_targets); history $(jq -c .data.history "$B/inc.json")"
jq -e '.data.history.error == null and .data.history.duplicates > 0' "$B/inc.json" >/dev/null ||
  fail "want the scraped copies of instance 1's series ignored: $(jq -c .data.history "$B/inc.json")"
ok "instance 0 (polling $mine) reports the recurrence on leaf1..leaf4 with shard 1's ($theirs) from history ($(jq .data.history.duplicates "$B/inc.json") scraped copies ignored)"

# A restart of instance 1: its episode log starts empty, and is backfilled from the
# history (its own targets, before its new data began) at its first refresh.
kill "${BPID[1]}"
wait_exit "${BPID[1]}" 20
start_b 1
wait_http "http://127.0.0.1:$H1/healthz" 20
_backfilled() { grep -qE 'history backfill: [1-9][0-9]* departure runs' "$T/fabricscope-b1.log"; }
wait_for 60 "instance 1 backfills its episode log from the history" _backfilled
grep -q 'history backfill failed' "$T/fabricscope-b1.log" && fail "backfill: $(grep 'history backfill' "$T/fabricscope-b1.log")"
_incident_metrics() { curl -fsS "http://127.0.0.1:$H1/metrics" | grep -q '^fabricscope_incident_period_seconds{'; }
wait_for 60 "instance 1 exports incident metrics after its restart" _incident_metrics
ok "after a restart, instance 1 $(grep -oE 'history backfill: [0-9]+ departure runs of [0-9]+ series' "$T/fabricscope-b1.log" | tail -1)"

#!/usr/bin/env bash
# remote_write against real receivers. fs-testd (the store, scheduler and ring fed by the
# test-only driver, with counters past 2^53) sends to three receivers at once:
#  - a real Prometheus (--web.enable-remote-write-receiver): every ring sample comes back
#    through its query API, timestamps to the millisecond and values equal to the ring's
#    converted to float64 (the wire format's own rounding above 2^53), also across a
#    30 s outage of Prometheus (within the queue's horizon: nothing lost);
#  - a stub answering 400: never retried, the samples counted as failed;
#    its metadata requests too (counted, never repeated: a 10m send_interval);
#  - a second Prometheus, down for the first seconds, behind a queue of 30 samples: the
#    outage outlasts the horizon, the oldest samples are dropped and counted, and what
#    arrives is, per series, the ring's newest samples without a gap.
# Metric metadata (metadata-only requests): the real Prometheus answers them with success,
# the tiny receiver gets them once it is up (transport errors counted before).
# Then the fabricscope daemon itself: remote_write keys checked by --check-config, and a
# reload that changes a receiver restarts its sender.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# A Prometheus accepting remote writes, scraping nothing, on the port in the variable
# named $1, or when that is empty on a free one (another is tried if it was taken between
# the check and the bind: other test runs share the machine); sets it and ${1}_PID.
start_receiver() {
  local var=$1 dir=$T/$1 port=${!1:-} fixed=yes pid
  [ -n "$port" ] || { port=$(free_tcp_port); fixed=no; }
  mkdir -p "$dir/data"
  printf 'global: { scrape_interval: 1m }\n' >"$dir/prometheus.yml"
  for _ in 1 2 3 4 5; do
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
      --web.listen-address="127.0.0.1:$port" --web.enable-remote-write-receiver \
      --log.level=warn >"$T/$var.log" 2>&1 &
    pid=$!
    track $pid
    for _ in $(seq 600); do
      if curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null; then
        printf -v "$var" '%s' "$port"
        printf -v "${var}_PID" '%s' "$pid"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && fail "$var on $port not ready within 60s"
    [ $fixed = no ] && grep -q 'address already in use' "$T/$var.log" ||
      fail "$var exited: $(tail -n 3 "$T/$var.log")"
    port=$(free_tcp_port)
  done
  fail "$var found no free port in 5 tries"
}
# Same, again on the same port and data directory (after a stop).
restart_receiver() {
  local var=$1 port=${!1} dir=$T/$1
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" --web.enable-remote-write-receiver \
    --log.level=warn >>"$T/$var.log" 2>&1 &
  track $!
  printf -v "${var}_PID" '%s' "$!"
  wait_http "http://127.0.0.1:$port/-/ready" 60
}

PROM=
start_receiver PROM
PROM2=$(free_tcp_port) # its receiver starts later: down at first

# The 400 stub: answers every POST with 400 and logs the SHA-256 of each body (a retried
# request would repeat one).
# It binds a free port itself and writes it to stub.port.
"$PY" - "$T/stub.port" "$T/stub.bodies" >"$T/stub.log" 2>&1 <<'PY' &
import hashlib, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port_file, log = sys.argv[1], sys.argv[2]
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(log, "a") as f:
            f.write("%s %s %s\n" % (hashlib.sha256(body).hexdigest(),
                                    self.headers.get("Content-Encoding"),
                                    self.headers.get("X-Scope-OrgID")))
        self.send_response(400)
        self.end_headers()
        self.wfile.write(b"out of bounds")
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *a):
        pass
srv = HTTPServer(("127.0.0.1", 0), H)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
import os
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
PY
track $!
wait_for 20 "400 stub listening" test -s "$T/stub.port"
STUB=$(cat "$T/stub.port")
wait_http "http://127.0.0.1:$STUB/"

cat >"$T/fs.yaml" <<YML
remote_write:
  - url: http://127.0.0.1:$PROM/api/v1/write
    name: prom
    queue: { batch_send_deadline: 1s, min_backoff: 50ms, max_backoff: 1s }
  - url: http://127.0.0.1:$STUB/api/v1/write
    name: stub400
    headers: { X-Scope-OrgID: tenant-a }
    queue: { batch_send_deadline: 1s }
    metadata: { send_interval: 10m }
  - url: http://127.0.0.1:$PROM2/api/v1/write
    name: tiny
    queue: { capacity: 30, max_samples_per_send: 10, batch_send_deadline: 200ms, min_backoff: 30ms, max_backoff: 300ms }
YML
# step 2^50+3: counters pass 2^53 within a few cycles, and odd multiples are not doubles.
# Port 0: fs-testd binds a free port itself and prints it ("port N").
"$FS_BUILD_DIR/tests/fs-testd" --port 0 --targets 2 --ports 4 --interval-ms 200 \
  --step 1125899906842627 --config "$T/fs.yaml" >"$T/testd.out" 2>"$T/testd.log" &
track $!
wait_for 20 "fs-testd listening" grep -q '^port [0-9]' "$T/testd.out"
PORT=$(awk '/^port /{print $2; exit}' "$T/testd.out")
wait_http "http://127.0.0.1:$PORT/healthz"
ok "fs-testd up on $PORT with 3 receivers"

# The value of a self metric of one receiver (0 when absent).
rw_metric() { # metric remote_name
  curl -fsS "http://127.0.0.1:$PORT/metrics" |
    awk -v m="fabricscope_remote_write_$1" -v r="remote_name=\"$2\"" \
      '$1 ~ "^"m"\\{" && index($1, r) { print $2; f=1 } END { if (!f) print 0 }'
}
metric_above() { # metric remote_name value
  "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' \
    "$(rw_metric "$1" "$2")" "$3"
}
metric_is() { [ "$(rw_metric "$1" "$2")" = "$3" ]; }

wait_for 20 "first samples accepted by prometheus" metric_above samples_sent_total prom 100
curl -fsS "http://127.0.0.1:$PORT/metrics" >"$T/metrics.txt"
out=$(promtool check metrics <"$T/metrics.txt" 2>&1) || fail "promtool check metrics: $out"
[ -z "$out" ] || fail "promtool check metrics warned: $out"
[ "$(grep -c '^fabricscope_remote_write_samples_sent_total{' "$T/metrics.txt")" = 3 ] ||
  fail "not one sent counter per receiver"
retried0=$(rw_metric samples_retried_total prom)
[ "$retried0" = 0 ] || fail "retries before any outage: $retried0"
ok "prometheus accepts samples ($(rw_metric samples_sent_total prom) so far); self metrics pass promtool"
# The metadata of a family leaves before its first samples: by now it was answered.
metric_above metadata_sent_total prom 0 || fail "no metadata accepted by prometheus"
metric_is metadata_failed_total prom 0 || fail "prometheus refused metadata: $(rw_metric metadata_failed_total prom)"
ok "prometheus accepts metadata ($(rw_metric metadata_sent_total prom) entries)"

# ---- the 400 stub: rejected, counted, never retried ----
wait_for 20 "rejections counted" metric_above samples_failed_total stub400 50
metric_is samples_retried_total stub400 0 || fail "a 400 was retried"
metric_above metadata_failed_total stub400 0 || fail "stub400: the refused metadata was not counted"
metric_is metadata_sent_total stub400 0 || fail "stub400: metadata counted as sent"
nreq=$(wc -l <"$T/stub.bodies")
ndistinct=$(cut -d' ' -f1 "$T/stub.bodies" | sort -u | wc -l)
[ "$nreq" = "$ndistinct" ] || fail "the stub got the same body twice ($nreq requests, $ndistinct distinct)"
grep -qv ' snappy tenant-a$' "$T/stub.bodies" && fail "a request lacked snappy encoding or X-Scope-OrgID"
ok "400: $(rw_metric samples_failed_total stub400) samples and $(rw_metric metadata_failed_total stub400) metadata entries failed, $nreq requests, none repeated, none retried"

# ---- the queue of 30 samples behind a receiver that is down: the oldest are dropped ----
wait_for 20 "drops past the tiny queue's horizon" metric_above samples_dropped_total tiny 100
metric_above samples_retried_total tiny 0 || fail "tiny: the refused connections were not retried"
start_receiver PROM2
wait_for 30 "tiny receiver catching up" metric_above samples_sent_total tiny 100
metric_above metadata_failed_total tiny 0 || fail "tiny: metadata to a receiver that was down not counted as failed"
wait_for 10 "tiny: metadata accepted once its receiver is up" metric_above metadata_sent_total tiny 0
dropped_tiny=$(rw_metric samples_dropped_total tiny)
ok "tiny queue: $dropped_tiny samples dropped during the outage, then sending again"

# ---- a 30 s outage of prometheus (the issue's figure), within the queue's horizon ----
OUTAGE=30
horizon_ok() {
  "$PY" -c 'import sys; h=float(sys.argv[1]); o=float(sys.argv[2]); sys.exit(0 if o < h < 1e9 else 1)' \
    "$(rw_metric queue_horizon_seconds prom)" "$OUTAGE"
}
wait_for 10 "a measured queue horizon above the outage's $OUTAGE s" horizon_ok
horizon=$(rw_metric queue_horizon_seconds prom)
kill "$PROM_PID"
wait_exit "$PROM_PID" 30
down_at=$SECONDS
wait_for 20 "retries while prometheus is down" metric_above samples_retried_total prom 0
wait_for 20 "queue growing during the outage" metric_above samples_pending prom 200
while [ $((SECONDS - down_at)) -lt $OUTAGE ]; do sleep 0.5; done # the outage itself, not a wait for a condition
pending=$(rw_metric samples_pending prom)
restart_receiver PROM
ok "prometheus was down $((SECONDS - down_at)) s; $pending samples queued (horizon ${horizon} s)"

# Everything up to CUT must arrive: once a sample a second newer than CUT was accepted,
# every sample up to CUT was committed to the ring, walked and sent before it.
CUT=$(($(date +%s) + 1))
wait_for 30 "highest sent timestamp past the cut" metric_above highest_sent_timestamp_seconds prom "$((CUT + 1))"
metric_is samples_dropped_total prom 0 || fail "prometheus' queue dropped samples within its horizon"
metric_is samples_failed_total prom 0 || fail "prometheus rejected samples"

# Ring (raw, exact) versus what each Prometheus returns, for every port byte counter of
# sim-tor1; checked in Python: Decimal timestamps, float64 values.
# With FROM (seconds), the receiver's samples are checked against every ring sample after
# FROM only (the first one and its being a later ring sample, over the whole window).
compare() { # receiver-port first-must-be-ring-first(yes|no) cut [from]
  local rport=$1 whole=$2 cut=$3 from=${4:-0} now sel='fabric_port_bytes_total{target="sim-tor1"}'
  now=$(date +%s)
  # remote_write sends milliseconds, the ring's microseconds floored: a sample at
  # cut + 0.0004 s reaches Prometheus at cut and is inside its window, so the ring's
  # window ends at the last microsecond of that millisecond.
  curl -fsS --get "http://127.0.0.1:$PORT/api/v1/raw" --data-urlencode "match[]=$sel" \
    --data-urlencode "start=$((now - 600))" --data-urlencode "end=$cut.000999" >"$T/ring.json"
  curl -fsS --get "http://127.0.0.1:$rport/api/v1/query" --data-urlencode "query=$sel[10m]" \
    --data-urlencode "time=$cut" >"$T/prom.json"
  "$PY" - "$T/ring.json" "$T/prom.json" "$whole" "$from" <<'PY'
import json, sys
from decimal import Decimal
ring = json.load(open(sys.argv[1]), parse_float=Decimal)
prom = json.load(open(sys.argv[2]), parse_float=Decimal)
whole = sys.argv[3] == "yes"
from_ms = int(sys.argv[4]) * 1000
key = lambda m: tuple(sorted((k, v) for k, v in m.items()))
ms = lambda t: int(Decimal(t) * 1000)
r = {key(s["metric"]): s["values"] for s in ring["data"]["result"]}
p = {key(s["metric"]): s["values"] for s in prom["data"]["result"]}
if len(r) != 4 or set(r) != set(p):
    sys.exit("series differ: ring %d, prometheus %d" % (len(r), len(p)))
n = inexact = 0
for k, rv in r.items():
    # The ring's exact uint64, as Prometheus must hold it: converted to float64 (round to
    # nearest, ties to even: Python's int -> float, as Go's float64(uint64)).
    want = [(ms(t) if isinstance(t, Decimal) else ms(str(t)), float(int(v))) for t, v in rv]
    got = [(ms(t), float(v)) for t, v in p[k]]
    if not whole:  # the oldest were dropped: what arrived is the ring's newest, gapless
        if not got or got[0] not in want or got[0] == want[0]:
            sys.exit("%s: first sample received %s is not a later ring sample" % (k, got[:1]))
        want = want[want.index(got[0]):]
    if from_ms:
        stray = [g for g in got if g not in want][:3]
        if stray:
            sys.exit("%s: received samples that are no ring sample: %s" % (k, stray))
        want = [w for w in want if w[0] > from_ms]
        got = [g for g in got if g[0] > from_ms]
    if got != want:
        missing = [w for w in want if w not in got][:3]
        extra = [g for g in got if g not in want][:3]
        sys.exit("%s: %d ring samples, %d in prometheus; missing %s extra %s"
                 % (dict(k)["interface"] + "/" + dict(k)["direction"], len(want), len(got), missing, extra))
    n += len(want)
    inexact += sum(1 for _, v in rv if int(v) > 2**53 and float(int(v)) != int(v))
if inexact == 0:
    sys.exit("no ring value above 2^53 that float64 cannot hold: the rounding was not exercised")
print(n, inexact)
PY
}
read -r n inexact < <(compare "$PROM" yes "$CUT") || fail "prometheus does not match the ring"
[ "$n" -ge 200 ] || fail "only $n samples compared"
ok "prometheus holds all $n ring samples of sim-tor1's byte counters, outage included ($inexact values past 2^53 rounded by float64 exactly as expected)"

# A queue of 30 samples also drops when its sender is starved of CPU (a loaded machine):
# such drops are counted and leave gaps. So the gapless check covers a stretch the drop
# counter says nothing was dropped in, waited for (each try a fresh stretch): d0 is read
# before FROM, so every sample stamped after FROM was queued after d0, and once one a
# second newer than CUT2 was sent, every one up to CUT2 was sent or dropped; none dropped
# (d1 = d0) means all of them arrived.
tiny_stretch() {
  local d0 d1
  d0=$(rw_metric samples_dropped_total tiny)
  FROM=$(($(date +%s) + 1))
  CUT2=$((FROM + 3))
  wait_for 60 "tiny: highest sent timestamp past the cut" metric_above highest_sent_timestamp_seconds tiny "$((CUT2 + 1))"
  d1=$(rw_metric samples_dropped_total tiny)
  [ "$d0" = "$d1" ] || { echo "tiny: $((d1 - d0)) samples dropped in $FROM..$CUT2 (a starved sender): another stretch" >&2; return 1; }
}
tries=0
until tiny_stretch; do
  tries=$((tries + 1))
  [ $tries -lt 20 ] || fail "tiny: no stretch without drops in 20 tries"
done
read -r n2 _ < <(compare "$PROM2" no "$CUT2" "$FROM") || fail "the tiny receiver's data is not the ring's newest"
ok "tiny receiver: the oldest samples dropped, what it received are later ring samples, the $n2 of a stretch without drops ($FROM..$CUT2) all of them"

# ---- the daemon: configuration and reload ----
check_refused() { # file pattern...
  local f=$1 msg rc; shift
  set +e
  msg=$("$FABRICSCOPE" --check-config "$f" 2>&1); rc=$?
  set -e
  [ $rc = 2 ] || fail "$f: exit $rc"
  for want in "$@"; do
    grep -Eq "$want" <<<"$msg" || fail "--check-config message lacks '$want': $msg"
  done
}
printf 'remote_write:\n  - url: ftp://x\n' >"$T/bad1.yaml"
check_refused "$T/bad1.yaml" 'remote_write.*url.*is not an http'
cat >"$T/bad2.yaml" <<YML
remote_write:
  - url: http://127.0.0.1:1/w
    headers: { Authorization: nope }
    bearer_token_file: /nonexistent
    basic_auth: { username: u, password_file: /nonexistent }
    queue: { min_backoff: 10s, max_backoff: 1s, capacity: 10, max_samples_per_send: 20 }
    metadata: { send_interval: 500ms }
YML
check_refused "$T/bad2.yaml" 'Authorization is set by the sender' 'exclude each other' \
  'min_backoff is above max_backoff' 'max_samples_per_send \(20\) is above capacity' \
  'metadata\.send_interval: 500ms is below the minimum of 1s'
ok "--check-config refuses a bad remote_write block with every problem"

write_cfg() { # url; the listener binds a free port itself (port 0) and logs it
  printf 'listen: 127.0.0.1:0\nremote_write:\n  - url: %s\n    name: r1\n' "$1" >"$T/run.yaml"
}
write_cfg "http://127.0.0.1:$PROM/api/v1/write"
"$FABRICSCOPE" --check-config "$T/run.yaml" >/dev/null || fail "good remote_write config refused"
start_fabricscope "$T/run.yaml"
wait_for 20 "daemon listening" grep -q 'listening on 127.0.0.1:[0-9]' "$T/fabricscope.log"
HTTP=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$T/fabricscope.log" | head -n1 | cut -d: -f2)
wait_http "http://127.0.0.1:$HTTP/healthz"
has_url() { curl -fsS "http://127.0.0.1:$HTTP/metrics" | grep -q "^fabricscope_remote_write_samples_pending{remote_name=\"r1\",url=\"$1\"}"; }
wait_for 10 "daemon's sender listed" has_url "http://127.0.0.1:$PROM/api/v1/write"
write_cfg "http://127.0.0.1:$PROM2/api/v1/write"
hup
wait_for 10 "sender of the new url" has_url "http://127.0.0.1:$PROM2/api/v1/write"
has_url "http://127.0.0.1:$PROM/api/v1/write" && fail "the old receiver's sender still runs"
grep -q 'r1: sending to http://127.0.0.1:'"$PROM2" "$T/fabricscope.log" || fail "no start logged"
ok "daemon: a reload that changes the receiver restarts its sender"

#!/usr/bin/env bash
# The host agent against a stand-in collector whose /api/v1/time answers at once but
# whose POST /api/v1/host-events is slow (what $T/post_delay says, in seconds):
#   - collector.timeout: 2s and posts that never answer: NCCL Inspector records written
#     are spooled within 5 s (each request gives up after 2 s, not the old fixed 10 s);
#   - posts answered after 0.5 s each and 40 batches in the spool (an outage's): while the
#     spool drains (20 s of posting) the clock is still measured every turn: the agent's
#     clock_age_seconds stays below 8 s (one turn posts for about collector.timeout; the
#     whole spool, 20 s, before);
#     the spool empties, every batch (40 and the 5 records of part 1) posted once.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$PY" ] || fail "needs /usr/bin/python3"
HTTP=$(free_tcp_port)
AGENT_METRICS=$(free_tcp_port)
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/token"
echo 3600 >"$T/post_delay"
cat >"$T/collector.py" <<'PYEOF'
# A stand-in collector: GET /api/v1/time at once; POST /api/v1/host-events answered after
# the delay in the file argv[2] (each POST logged to argv[3] when answered).
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, delay_file, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def send(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
    def do_GET(self):
        if self.path == "/api/v1/time":
            t = time.time_ns()
            return self.send(200, json.dumps({"receive_ns": t, "send_ns": t}).encode())
        self.send(404, b"{}")
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        time.sleep(float(open(delay_file).read()))
        with open(log, "a") as f:
            f.write("POST %s\n" % self.path)
        self.send(200, b'{"status":"success","data":{"stored":1,"duplicates":0}}')
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PYEOF
$PY "$T/collector.py" "$HTTP" "$T/post_delay" "$T/posts.txt" >"$T/collector.log" 2>&1 &
track $!
wait_for 20 "the stand-in collector answers" curl -fsS -o /dev/null "http://127.0.0.1:$HTTP/api/v1/time"
metric() { curl -fsS "http://127.0.0.1:$AGENT_METRICS/metrics" | awk -v n="fabricscope_host_agent_$1" '$1 == n {print $2}'; }

mkdir -p "$T/nccl" "$T/state"
chmod 700 "$T/state"
cat >"$T/agent.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token, timeout: 2s }
host: gpu-slow
state_dir: $T/state
clock: { interval: 1s, rounds: 2 }
nccl_inspector: { dir: $T/nccl, scan_interval: 200ms }
lldp: { enabled: false }
metrics: { listen: 127.0.0.1:$AGENT_METRICS }
YML
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" --check-config >"$T/check.log" 2>&1 ||
  fail "collector.timeout refused: $(cat "$T/check.log")"

# ---- 1. posts that never answer: given up after collector.timeout, spooled
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" >>"$T/agent.log" 2>&1 &
AGENT_PID=$!
track "$AGENT_PID"
wait_http "http://127.0.0.1:$AGENT_METRICS/metrics" 20
wait_for 20 "the clock offset is measured" grep -q "clock offset" "$T/agent.log"
"$PY" "$FS_SOURCE_DIR/tests/integration/nccl_inspector_gen.py" --file "$T/nccl/job.log" --first 0 --count 5
start=$(date +%s.%N)
spooled() { [ "$(metric spool_events)" = 5 ]; }
wait_for 30 "the 5 records are spooled" spooled
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
awk -v t="$took" 'BEGIN { exit !(t < 5) }' ||
  fail "records spooled after ${took}s: a post that never answers held the agent longer than collector.timeout (2s)"
ok "a post that never answered gave up after collector.timeout: records spooled in ${took}s"
kill -TERM "$AGENT_PID"
wait_exit "$AGENT_PID" 30

# ---- 2. a slow collector and a full spool: the clock keeps its turn
for i in $(seq 0 39); do printf '{}' >"$T/state/spool/$(printf '%020d' $((100 + i)))-1.json"; done
echo 0.5 >"$T/post_delay"
: >"$T/posts.txt"
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" >>"$T/agent.log" 2>&1 &
AGENT_PID=$!
track "$AGENT_PID"
wait_http "http://127.0.0.1:$AGENT_METRICS/metrics" 20
max_age=0
deadline=$((SECONDS + 120))
while [ "$(metric spool_events)" != 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "the spool did not drain in 120 s"
  age=$(metric clock_age_seconds)
  [ -n "$age" ] && max_age=$(awk -v a="$age" -v m="$max_age" 'BEGIN { print (a > m ? a : m) }')
  sleep 0.3
done
posts=$(grep -c "host-events" "$T/posts.txt")
[ "$posts" = 41 ] || fail "$posts batches posted: want the 41 spooled (45 events), each once"
awk -v m="$max_age" 'BEGIN { exit !(m < 8) }' ||
  fail "the clock went ${max_age}s unmeasured while the spool drained: posting starved it"
ok "41 spooled batches posted at 0.5 s each, the clock measured throughout (oldest ${max_age}s)"

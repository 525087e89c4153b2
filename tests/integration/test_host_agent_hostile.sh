#!/usr/bin/env bash
# The host agent against a collector that answers what it should not (a stand-in
# collector on loopback that, like one with http.bearer_token_file, refuses every request
# but /api/v1/time without the bearer token):
#   - its GET requests carry the configured token (every /api/v1/incidents poll is 200);
#   - an /api/v1/incidents answer of 4 MiB of `[[],[],...]` is refused unread, logged
#     each time, and the agent's peak RSS stays small (it was parsed whole by json-c);
#   - next_expected 30 years ahead, or NaN, arms nothing (the reason is logged, once);
#   - a window armed 30 s ahead moves when the prediction moves to 3 s ahead (the agent
#     polls while armed), and is disarmed when the prediction goes;
#   - with a wrong token, the 401 that stops captures is logged once, not every poll.
# perf is a stand-in that fails (no capture is imported; the hook records each window).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$PY" ] || fail "needs /usr/bin/python3"
HTTP=$(free_tcp_port)
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/token"
echo none >"$T/mode"
cat >"$T/collector.py" <<'PYEOF'
# A stand-in collector: /api/v1/time, /api/v1/incidents (what $T/mode says), and
# POST /api/v1/host-events; every request but /api/v1/time needs the bearer token.
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, token, mode_file, log = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3], sys.argv[4]
def answer_for(mode):
    now = time.time()
    if mode == "huge":  # 4 MiB of empty arrays
        return b"[" + b"[]," * (4 * 1024 * 1024 // 3) + b"[]]"
    groups = []
    if mode == "far":
        groups = [{"text": "far", "series": [], "next_expected": now + 30 * 365.25 * 86400}]
    elif mode == "nan":
        groups = [{"text": "nan", "series": [], "next_expected": float("nan")}]
    elif mode.startswith("at "):  # at EPOCH_SECONDS
        groups = [{"text": mode, "series": [], "next_expected": float(mode[3:])}]
    return json.dumps({"status": "success", "data": {"recurring": groups}}).encode()
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
    def note(self, code):
        with open(log, "a") as f:
            f.write("%s %s %d\n" % (self.command, self.path, code))
    def authorized(self):
        return self.headers.get("Authorization") == "Bearer " + token
    def do_GET(self):
        if self.path == "/api/v1/time":
            t = time.time_ns()
            self.note(200)
            return self.send(200, json.dumps({"receive_ns": t, "send_ns": t}).encode())
        if not self.authorized():
            self.note(401)
            return self.send(401, b'{"status":"error","error":"missing or wrong bearer token"}')
        if self.path == "/api/v1/incidents":
            self.note(200)
            return self.send(200, answer_for(open(mode_file).read().strip()))
        self.note(404)
        self.send(404, b"{}")
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        code = 200 if self.authorized() else 401
        self.note(code)
        self.send(code, b'{"status":"success","data":{"stored":0,"duplicates":0}}')
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PYEOF
$PY "$T/collector.py" "$HTTP" "$T/token" "$T/mode" "$T/requests.txt" >"$T/collector.log" 2>&1 &
track $!
wait_for 20 "the stand-in collector answers" curl -fsS -o /dev/null "http://127.0.0.1:$HTTP/api/v1/time"

printf '#!/bin/sh\nexit 1\n' >"$T/perf"
chmod +x "$T/perf"
agent_yaml() { # TOKEN_FILE STATE_DIR
  cat <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $1 }
host: gpu-node-9
state_dir: $2
clock: { interval: 1s, rounds: 2 }
lldp: { enabled: false }
capture:
  poll: 1s
  lead: 1s
  length: 1s
  min_interval: 1s
  perf: $T/perf
  hook: echo "\$FS_WINDOW_PHASE \$FS_WINDOW_START_NS" >>$T/hook.txt
YML
}
agent_yaml "$T/token" "$T/state" >"$T/agent.yaml"
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" --check-config >/dev/null || fail "agent config refused"
mode() { echo "$1" >"$T/mode.tmp" && mv "$T/mode.tmp" "$T/mode"; }
polls() { grep -c "^GET /api/v1/incidents 200" "$T/requests.txt" || true; }
polls_above() { [ "$(polls)" -gt "$1" ]; }
logged() { grep -c -- "$1" "$T/agent.log" || true; }
logged_at_least() { [ "$(logged "$1")" -ge "$2" ]; }

# ---- the token on GET requests
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" >"$T/agent.log" 2>&1 &
AGENT_PID=$!
track "$AGENT_PID"
wait_for 20 "three polls of /api/v1/incidents answered 200 (the token sent)" polls_above 2
if grep -q "^GET /api/v1/incidents 401" "$T/requests.txt"; then
  fail "a poll went without the token: $(grep -c '401' "$T/requests.txt") refused"
fi
ok "every GET /api/v1/incidents carried the bearer token ($(polls) polls, none refused)"

# ---- a 4 MiB answer: refused unread, every time, in bounded memory
mode huge
wait_for 20 "three oversized answers refused and logged" logged_at_least "larger than 1024 KiB refused unread" 3
hwm_kb=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$AGENT_PID/status")
[ "$hwm_kb" -lt 65536 ] || fail "the agent's peak RSS is ${hwm_kb} KiB after oversized answers"
ok "4 MiB answers refused unread ($(logged 'larger than 1024 KiB') logged), agent peak RSS $((hwm_kb / 1024)) MiB"

# ---- times that are no window
mode far
wait_for 20 "next_expected 30 years ahead refused" logged_at_least "s ahead refused (at most 86400 s)" 1
mode nan
wait_for 20 "next_expected NaN refused" logged_at_least "next_expected NaN refused" 1
n=$(polls)
wait_for 20 "three more polls" polls_above $((n + 2))
[ "$(logged 'capture armed')" = 0 ] || fail "a window was armed: $(grep 'capture armed' "$T/agent.log")"
[ "$(logged 'next_expected NaN refused')" = 1 ] || fail "the same refusal logged $(logged 'next_expected NaN refused') times"
ok "next_expected 30 years ahead and NaN arm nothing, each logged once"

# ---- polled while armed: the window follows the prediction
mode "at $(($(date +%s) + 30))"
wait_for 20 "a window armed about 30 s ahead" logged_at_least "capture armed: 2[0-9]" 1
mode "at $(($(date +%s) + 3))"
wait_for 10 "the window moved to 3 s ahead" logged_at_least "capture re-armed" 1
wait_for 10 "the moved window opened" test -s "$T/hook.txt"
ok "a window armed 30 s ahead moved to the new prediction 3 s ahead and opened"
mode "at $(($(date +%s) + 40))"
wait_for 20 "a window armed about 40 s ahead" logged_at_least "capture armed: 3[0-9]" 1
mode none
wait_for 10 "the window disarmed when the prediction went" logged_at_least "capture disarmed" 1
kill -TERM "$AGENT_PID"
wait_exit "$AGENT_PID" 20
if grep -q 'Sanitizer\|runtime error' "$T/agent.log"; then fail "sanitizer report in the agent's log"; fi
ok "a withdrawn prediction disarms the window"

# ---- a wrong token: the 401 that stops captures is logged once
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/wrong.token"
agent_yaml "$T/wrong.token" "$T/state2" >"$T/wrong.yaml"
: >"$T/requests.txt"
"$FABRICSCOPE" host-agent -c "$T/wrong.yaml" >"$T/wrong.log" 2>&1 &
WRONG_PID=$!
track "$WRONG_PID"
refused_polls() { grep -c "^GET /api/v1/incidents 401" "$T/requests.txt" || true; }
refused_above() { [ "$(refused_polls)" -gt "$1" ]; }
wait_for 20 "four polls refused with 401" refused_above 3
kill -TERM "$WRONG_PID"
wait_exit "$WRONG_PID" 20
c=$(grep -c "captures cannot be planned: GET /api/v1/incidents: HTTP 401" "$T/wrong.log" || true)
[ "$c" = 1 ] || fail "the 401 logged $c times over $(refused_polls) polls: $(cat "$T/wrong.log")"
ok "a wrong token: $(refused_polls) polls refused, logged once with the fix"

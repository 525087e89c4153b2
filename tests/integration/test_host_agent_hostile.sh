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
#   - with a wrong token, the 401 that stops captures is logged once, not every poll;
#   - a token from FABRICSCOPE_TOKEN is used and not inherited by the command; a token
#     file over 511 bytes is refused at start (it was cut); a token sent over http:// to
#     another host is warned about, once;
#   - a state_dir others can write is refused at start, naming the fix;
#   - what start-up refuses (a missing token file, a state_dir others can write)
#     --check-config refuses too, naming the key, and both exit 2 with it (the unit's
#     RestartPreventExitStatus; its ExecStartPre fails on it);
#   - a missing nccl_inspector.dir is reported once, then once more when it appears.
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

# ---- FABRICSCOPE_TOKEN: used, then out of the environment the command inherits
agent_yaml "$T/token" "$T/state3" | sed "s|, token_file: [^ ]* }| }|" >"$T/env.yaml"
printf 'command: { argv: [/bin/sh, -c, "env >%s/cmd.env.tmp; mv %s/cmd.env.tmp %s/cmd.env"], interval: 1s }\n' \
  "$T" "$T" "$T" >>"$T/env.yaml"
: >"$T/requests.txt"
FABRICSCOPE_TOKEN=$(cat "$T/token") "$FABRICSCOPE" host-agent -c "$T/env.yaml" >"$T/env.log" 2>&1 &
ENV_PID=$!
track "$ENV_PID"
wait_for 20 "the command ran" test -s "$T/cmd.env"
wait_for 20 "a poll answered 200 with the token from the environment" polls_above 0
kill -TERM "$ENV_PID"
wait_exit "$ENV_PID" 20
if grep -q FABRICSCOPE_TOKEN "$T/cmd.env"; then fail "the command inherited FABRICSCOPE_TOKEN"; fi
ok "the token from FABRICSCOPE_TOKEN is used ($(polls) polls answered) and not in the command's environment"

# ---- a token file over 511 bytes: refused, not cut
head -c 600 /dev/zero | tr '\0' a >"$T/long.token"
agent_yaml "$T/long.token" "$T/state4" >"$T/long.yaml"
set +e
timeout 20 "$FABRICSCOPE" host-agent -c "$T/long.yaml" >"$T/long.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "an overlong token file: exit $rc, want 2: $(cat "$T/long.log")"
grep -q "the token is longer than 511 bytes" "$T/long.log" || fail "not said why: $(cat "$T/long.log")"
ok "a token file of 600 bytes is refused at start: $(tail -n1 "$T/long.log")"

# ---- the token over http:// to a host that is not this one: warned once
agent_yaml "$T/token" "$T/state5" | sed "s|url: http://127.0.0.1:$HTTP|url: http://192.0.2.1:9|" >"$T/far.yaml"
"$FABRICSCOPE" host-agent -c "$T/far.yaml" >"$T/far.log" 2>&1 &
FAR_PID=$!
track "$FAR_PID"
wait_for 20 "the clear-text token warned about" grep -q "bearer token is sent over http:// to 192.0.2.1" "$T/far.log"
kill -TERM "$FAR_PID"
wait_exit "$FAR_PID" 30
[ "$(grep -c 'sent over http://' "$T/far.log")" = 1 ] || fail "warned $(grep -c 'sent over http://' "$T/far.log") times"
[ "$(grep -c 'sent over http://' "$T/agent.log")" = 0 ] || fail "warned for a loopback collector"
ok "a token over http:// to 192.0.2.1 is warned about once (not for 127.0.0.1)"

# ---- a state_dir others can write: refused at start
mkdir -m 0777 "$T/shared"
agent_yaml "$T/token" "$T/shared" >"$T/shared.yaml"
set +e
timeout 20 "$FABRICSCOPE" host-agent -c "$T/shared.yaml" >"$T/shared.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "a world-writable state_dir: exit $rc, want 2: $(cat "$T/shared.log")"
grep -q "writable by its group or by others (mode 0777).*fix: chmod go-w" "$T/shared.log" ||
  fail "not said why: $(cat "$T/shared.log")"
set +e
"$FABRICSCOPE" host-agent -c "$T/shared.yaml" --check-config >"$T/shared-check.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "--check-config of a world-writable state_dir: exit $rc, want 2: $(cat "$T/shared-check.log")"
grep -q "start-up would refuse it on this host: state_dir: .*mode 0777" "$T/shared-check.log" ||
  fail "--check-config did not name state_dir: $(cat "$T/shared-check.log")"
ok "a world-writable state_dir is refused at start: $(tail -n1 "$T/shared.log")"

# ---- a missing token file: --check-config and start-up both refuse it with exit 2
agent_yaml "$T/missing.token" "$T/state6" >"$T/missing.yaml"
set +e
"$FABRICSCOPE" host-agent -c "$T/missing.yaml" --check-config >"$T/check.out" 2>"$T/check.err"
rc=$?
set -e
[ $rc = 2 ] || fail "--check-config of a missing token file: exit $rc, want 2: $(cat "$T/check.out" "$T/check.err")"
grep -q "start-up would refuse it on this host: collector.token_file: token file $T/missing.token: No such file" "$T/check.err" ||
  fail "--check-config did not name the missing token file's key: $(cat "$T/check.out" "$T/check.err")"
set +e
timeout 20 "$FABRICSCOPE" host-agent -c "$T/missing.yaml" >"$T/missing.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "a missing token file: exit $rc, want 2: $(cat "$T/missing.log")"
ok "a missing token file: --check-config exits 2 ($(cat "$T/check.err")), start-up exits 2"

# ---- a missing nccl_inspector.dir: said once, and once more when it appears
agent_yaml "$T/token" "$T/state7" >"$T/nccl.yaml"
printf 'nccl_inspector: { dir: %s/nccl, scan_interval: 100ms }\n' "$T" >>"$T/nccl.yaml"
"$FABRICSCOPE" host-agent -c "$T/nccl.yaml" >"$T/nccl.log" 2>&1 &
NCCL_PID=$!
track "$NCCL_PID"
wait_for 20 "the missing directory reported" grep -q "nccl_inspector: $T/nccl: No such file" "$T/nccl.log"
# 20 scans later (100 ms each), still one line.
n=$(polls)
wait_for 20 "two more polls (2 s, 20 scans)" polls_above $((n + 1))
[ "$(grep -c "nccl_inspector: $T/nccl" "$T/nccl.log")" = 1 ] ||
  fail "the missing directory reported $(grep -c "nccl_inspector: $T/nccl" "$T/nccl.log") times"
mkdir "$T/nccl"
wait_for 20 "the directory's appearance reported" grep -q "nccl_inspector: $T/nccl is read again" "$T/nccl.log"
kill -TERM "$NCCL_PID"
wait_exit "$NCCL_PID" 20
ok "a missing nccl_inspector.dir reported once over 20+ scans, and when it appeared"

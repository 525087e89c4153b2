#!/usr/bin/env bash
# The fabricscope binary itself: --check-config; an HTTP listener that cannot bind at
# start (polling goes on, a reload retries it) or after a change (the previous one stays,
# the next reload retries); SIGHUP reloads (a bad file is refused and the running
# configuration stays, a changed listen rebinds, a bearer token rewritten in the same
# file takes effect); SIGTERM while a poll waits on a silent agent exits at once.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

"$FABRICSCOPE" --version | grep -q '^fabricscope ' || fail "--version"
"$FABRICSCOPE" --help | grep -q 'check-config' || fail "--help"
set +e
"$FABRICSCOPE" bogus-subcommand >/dev/null 2>&1; rc=$?
set -e
[ $rc = 2 ] || fail "unknown subcommand exit $rc"

PORT=$(free_tcp_port)
cat >"$T/good.yaml" <<YML
listen: 127.0.0.1:$PORT
storage: { memory_limit: 64MiB, retention: 1h }
flow_rules:
  - { name: nccl-roce, protocol: udp, dst_port: 4791 }
YML
printf 'listen: 127.0.0.1:%s\nstorage: { memory_limit: lots }\nbogus_key: 1\n' "$PORT" >"$T/bad.yaml"

"$FABRICSCOPE" --check-config "$T/good.yaml" >/dev/null || fail "good config refused"
set +e
msg=$("$FABRICSCOPE" --check-config "$T/bad.yaml" 2>&1); rc=$?
set -e
[ $rc = 2 ] || fail "bad config: exit $rc"
grep -q 'storage.memory_limit' <<<"$msg" || fail "bad config message lacks the key path: $msg"
grep -q 'bogus_key' <<<"$msg" || fail "bad config message lacks the second problem: $msg"
ok "--check-config: 0 for good, 2 with every problem for bad"

# A process holding a TCP port on 127.0.0.1 until killed; sets HOLDER.
listening() { ss -Hltn "sport = :$1" | grep -q .; }
hold_port() {
  "$PY" -c 'import socket, signal, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); signal.pause()' "$1" &
  HOLDER=$!
  track "$HOLDER"
  wait_for 10 "port $1 held" listening "$1"
}
release_port() { kill "$HOLDER"; wait "$HOLDER" 2>/dev/null || true; wait_for 10 "port $1 free" _not_listening "$1"; }
_not_listening() { ! listening "$1"; }
healthz() { curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$1/healthz" 2>/dev/null; }

# The port is taken at start: fabricscope keeps running without an endpoint; once the
# port is free, a reload with the same file starts it.
hold_port "$PORT"
cp "$T/good.yaml" "$T/run.yaml"
start_fabricscope "$T/run.yaml"
wait_for 10 "bind failure logged" grep -q 'cannot listen' "$T/fabricscope.log"
kill -0 "$FS_PID" || fail "fabricscope exited when its port was taken"
release_port "$PORT"
hup
wait_for 10 "endpoint started by the reload" healthz "$PORT"
ok "port taken at start: kept running, endpoint started by the next reload"

curl -fsS "http://127.0.0.1:$PORT/metrics" >"$T/m1.txt"
grep -q '^fabricscope_build_info{version="' "$T/m1.txt" || fail "no build info"
out=$(promtool check metrics <"$T/m1.txt" 2>&1) || fail "promtool: $out"
[ -z "$out" ] || fail "promtool warned: $out"
ok "serving, promtool clean"

# A bad file on SIGHUP: refused, still serving on the same port.
cp "$T/bad.yaml" "$T/run.yaml"
hup
grep -q 'reload refused' "$T/fabricscope.log" || fail "bad reload not logged"
kill -0 "$FS_PID" || fail "daemon died on a bad reload"
healthz "$PORT" || fail "not serving after a bad reload"
ok "bad reload refused, still serving"

# A good file with a new listen port: rebinds.
PORT2=$(free_tcp_port)
sed "s/:$PORT/:$PORT2/" "$T/good.yaml" >"$T/run.yaml"
hup
wait_for 10 "serving on the new port" healthz "$PORT2"
if healthz "$PORT"; then fail "old port still open"; fi
ok "reload rebinds listen $PORT -> $PORT2"

# The new port is taken: the previous endpoint stays; once free, the next reload moves.
PORT3=$(free_tcp_port)
hold_port "$PORT3"
sed "s/:$PORT/:$PORT3/" "$T/good.yaml" >"$T/run.yaml"
hup
grep -q 'kept the previous endpoint' "$T/fabricscope.log" || fail "failed rebind not logged"
healthz "$PORT2" || fail "previous endpoint not kept when the new port was taken"
release_port "$PORT3"
hup
wait_for 10 "serving on $PORT3 after the retry" healthz "$PORT3"
if healthz "$PORT2"; then fail "port $PORT2 still open after moving"; fi
ok "new port taken: kept $PORT2; next reload moved to $PORT3"

# A bearer token rotated in the same file takes effect on SIGHUP.
printf 'first-token-0123\n' >"$T/http.token"
{ sed "s/:$PORT/:$PORT3/" "$T/good.yaml"; printf 'http: { bearer_token_file: %s }\n' "$T/http.token"; } >"$T/run.yaml"
hup
code() { curl -s -o /dev/null -w '%{http_code}' -m 2 ${1:+-H "Authorization: Bearer $1"} "http://127.0.0.1:$PORT3/metrics"; }
is_code() { [ "$(code "$2")" = "$1" ]; }
wait_for 10 "first token accepted" is_code 200 first-token-0123
[ "$(code)" = 401 ] || fail "no token: $(code), want 401"
printf 'second-token-456\n' >"$T/http.token"
hup
wait_for 10 "rotated token accepted" is_code 200 second-token-456
[ "$(code first-token-0123)" = 401 ] || fail "old token still accepted after rotation"
ok "token rewritten in the same file: new one accepted, old one refused after SIGHUP"
# What the README says the token covers: every path but /healthz, /api/v1/time and the
# web view's files (and the host-event post, which has a token of its own).
path_code() { curl -s -o /dev/null -w '%{http_code}' -m 2 "http://127.0.0.1:$PORT3$1"; }
for p in /healthz /api/v1/time / /web/fabricscope.js /web/fabricscope.css; do
  [ "$(path_code "$p")" = 200 ] || fail "$p without the token: $(path_code "$p"), want 200"
done
for p in /metrics /api/v1/targets /api/v1/raw /api/v1/topology /api/v1/incidents /api/v1/correlate; do
  [ "$(path_code "$p")" = 401 ] || fail "$p without the token: $(path_code "$p"), want 401"
done
ok "without the token: /healthz, /api/v1/time and the web view's files answer, the data paths 401"

# SIGTERM while a cycle waits on an agent that never answers (8 s timeout): exits at once.
SILENT=$(free_udp_port)
"$PY" -u -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", int(sys.argv[1])))
while True:
    s.recvfrom(65535); print("request", flush=True)' "$SILENT" >"$T/silent.log" 2>&1 &
track $!
printf 'public\n' >"$T/community"
{ sed "s/:$PORT/:$PORT3/" "$T/good.yaml"
  printf 'targets:\n  - name: silent\n    address: 127.0.0.1\n'
  printf '    snmp: { port: %s, community_file: %s, interval: 10s, timeout: 8s, retries: 0 }\n' \
    "$SILENT" "$T/community"; } >"$T/run.yaml"
hup
wait_for 15 "a poll of the silent agent in flight" grep -q request "$T/silent.log"
t0=$SECONDS
kill -TERM "$FS_PID"
wait_exit "$FS_PID" 3
wait "$FS_PID" && rc=0 || rc=$?
[ $rc = 0 ] || fail "exit code $rc after SIGTERM"
ok "SIGTERM with a poll in flight: clean exit in $((SECONDS - t0))s"

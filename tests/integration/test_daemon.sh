#!/usr/bin/env bash
# The fabricscope binary itself: --check-config, serving, SIGHUP reloads (a bad file is
# refused and the running configuration stays; a changed listen rebinds), SIGTERM.
source "$(dirname "$0")/lib.sh"

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

cp "$T/good.yaml" "$T/run.yaml"
start_fabricscope "$T/run.yaml"
wait_http "http://127.0.0.1:$PORT/healthz"
curl -fsS "http://127.0.0.1:$PORT/metrics" >"$T/m1.txt"
grep -q '^fabricscope_build_info{version="' "$T/m1.txt" || fail "no build info"
out=$(promtool check metrics <"$T/m1.txt" 2>&1) || fail "promtool: $out"
[ -z "$out" ] || fail "promtool warned: $out"
ok "serving, promtool clean"

# A bad file on SIGHUP: refused, still serving on the same port.
cp "$T/bad.yaml" "$T/run.yaml"
kill -HUP "$FS_PID"
for _ in $(seq 50); do grep -q 'reload refused' "$T/fabricscope.log" && break; sleep 0.1; done
grep -q 'reload refused' "$T/fabricscope.log" || fail "bad reload not logged"
kill -0 "$FS_PID" || fail "daemon died on a bad reload"
curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null || fail "not serving after a bad reload"
ok "bad reload refused, still serving"

# A good file with a new listen port: rebinds.
PORT2=$(free_tcp_port)
sed "s/:$PORT/:$PORT2/" "$T/good.yaml" >"$T/run.yaml"
kill -HUP "$FS_PID"
wait_http "http://127.0.0.1:$PORT2/healthz" 10
if curl -fsS -m 2 "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; then fail "old port still open"; fi
ok "reload rebinds listen $PORT -> $PORT2"

kill -TERM "$FS_PID"
for _ in $(seq 50); do kill -0 "$FS_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$FS_PID" 2>/dev/null; then fail "did not stop on SIGTERM"; fi
wait "$FS_PID" && rc=0 || rc=$?
[ $rc = 0 ] || fail "exit code $rc after SIGTERM"
ok "SIGTERM: clean exit"

#!/usr/bin/env bash
# SIGHUP with real targets: an unchanged target keeps its ring history and counter state
# across a reload, a new target starts, a changed one starts over, a removed one goes,
# a bad file changes nothing, a missing secret file is reported and picked up once it
# exists; and (with fs-refusing-daemon, the daemon whose SNMP driver refuses listed
# targets) a target its driver refused is shown down and retried on the next reload.
source "$(dirname "$0")/lib.sh"

start_snmp_sim
HTTP=$(free_tcp_port)

target() { # name interval
  printf '  - name: %s\n    address: 127.0.0.1\n    interfaces: { include: "^Eth1/[12]$" }\n' "$1"
  printf '    snmp: { port: %s, community_file: %s, interval: %s, timeout: 300ms }\n' \
    "$PORT" "$SNMP_COMMUNITY_FILE" "$2"
}
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms; target tor2 500ms; } >"$T/fs.yaml"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"

raw() { # target -> JSON of Eth1/1 rx bytes over the last 10 minutes
  local now; now=$(date +%s)
  curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" \
    --data-urlencode "match[]=fabric_port_bytes_total{target=\"$1\",interface=\"Eth1/1\",direction=\"rx\"}" \
    --data-urlencode "start=$((now - 600))" --data-urlencode "end=$((now + 5))"
}
first_ts() { raw "$1" | jq -r '.data.result[0].values[0][0] // empty'; }
count() { raw "$1" | jq -r '.data.result[0].values | length // 0'; }
last_val() { raw "$1" | jq -r '.data.result[0].values[-1][1] // empty'; }

has_samples() { [ "$(count "$1")" -ge "$2" ]; }
targets_json() { curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets"; }
n_targets() { [ "$(targets_json | jq '.data | length')" = "$1" ]; }
state_of() { targets_json | jq -r --arg t "$1" '.data[] | select(.target == $t) | .state'; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
error_of() { targets_json | jq -r --arg t "$1" '.data[] | select(.target == $t) | .last_error'; }
has_error() { [ -n "$(error_of "$1")" ]; }

wait_for 20 "tor1 history" has_samples tor1 4
wait_for 20 "tor2 history" has_samples tor2 4
t1=$(first_ts tor1); t2=$(first_ts tor2); v1=$(last_val tor1)
ok "history before reload: tor1 from $t1, tor2 from $t2"

# tor1 unchanged, tor2 changed (interval), tor3 new.
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms; target tor2 1s; target tor3 500ms; } >"$T/fs.yaml"
hup
# (tor1 is kept, or restarted in place if a poll of it happened to be failing: a slow
# sanitizer build can miss a 300 ms timeout; either way its history stays.)
last_reload() { grep 'reloaded ' "$T/fabricscope.log" | tail -n 1; }
grep -qE '(1 instances kept, 0|0 instances kept, 1) restarted \(refused or failing\), 1 removed, 2 added' <<<"$(last_reload)" ||
  fail "reload summary: $(last_reload)"
wait_for 20 "tor3 polled" has_samples tor3 2
wait_for 20 "tor2 polled again" has_samples tor2 2
[ "$(first_ts tor1)" = "$t1" ] || fail "tor1 lost its history: first sample $(first_ts tor1), was $t1"
v1b=$(last_val tor1)
[ "$v1b" -ge "$v1" ] || fail "tor1 counter went back: $v1 -> $v1b"
[ "$(count tor3)" -ge 2 ] || fail "new target tor3 not polled"
t2b=$(first_ts tor2)
# A changed target is restarted with its new settings; its series (same labels) keep
# their history, as Prometheus keeps a relabelled-alike target's data.
[ "$t2b" = "$t2" ] || fail "changed tor2 lost its history (first sample $t2b, was $t2)"
ok "reload: unchanged tor1 kept history from $t1 and counter state; tor2 restarted with its history; tor3 added"

# A bad file: refused, nothing changes.
printf 'listen: 127.0.0.1:%s\ntargets: [ { name: x } ]\n' "$HTTP" >"$T/fs.yaml"
hup
grep -q 'reload refused' "$T/fabricscope.log" || fail "bad file not refused"
n_targets 3 || fail "targets after a refused reload: $(targets_json | jq '.data | length'), want 3"
ok "bad reload refused; 3 targets still running"

# tor3 removed.
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms; target tor2 1s; } >"$T/fs.yaml"
hup
n_targets 2 || fail "tor3 not removed"
curl -fsS "http://127.0.0.1:$HTTP/metrics" | grep -q 'target="tor3"' && fail "tor3 still exported"
[ "$(first_ts tor1)" = "$t1" ] || fail "tor1 lost its history on the second reload"
ok "removed target gone; tor1 history intact"

# A target whose secret file is missing is shown down with the reason (and no secret);
# once the file exists, the reload restarts the failing target (its driver reads the
# file again, its backoff starts over) and it comes up.
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms
  printf '  - name: tor4\n    address: 127.0.0.1\n    snmp: { port: %s, community_file: %s, interval: 500ms }\n' \
    "$PORT" "$T/later.community"; } >"$T/fs.yaml"
hup
wait_for 20 "tor4 reports an error" has_error tor4
err=$(error_of tor4)
grep -q "later.community" <<<"$err" || fail "missing secret file not reported: '$err'"
grep -q "$(cat "$SNMP_COMMUNITY_FILE")" <<<"$err" && fail "error shows a secret"
cp "$SNMP_COMMUNITY_FILE" "$T/later.community"
hup
grep -qE '(1 instances kept, 1|0 instances kept, 2) restarted' <<<"$(last_reload)" || fail "failing tor4 not restarted: $(last_reload)"
wait_for 20 "tor4 up once its secret file exists" is_state tor4 up
[ "$(first_ts tor1)" = "$t1" ] || fail "tor1 lost its history"
ok "missing secret file reported ($err); the reload restarted the failing target, up once the file exists"

# A target its driver refused (target_add failed) is shown down with the driver's
# reason, and the next reload retries it even though its configuration is unchanged.
# The real SNMP driver refuses nothing it has a block for, so this runs the daemon's
# code with a driver table whose SNMP driver refuses the targets listed in a file.
REFUSING=$FS_BUILD_DIR/tests/fs-refusing-daemon
[ -x "$REFUSING" ] || fail "build fs-refusing-daemon first"
kill -TERM "$FS_PID"
wait_exit "$FS_PID" 10
mv "$T/fabricscope.log" "$T/fabricscope-1.log"
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms; target tor5 500ms; } >"$T/fs.yaml"
echo tor5 >"$T/refuse"
FS_REFUSE_TARGETS=$T/refuse FS_HANG_ON_REMOVE=$T/hang start_fabricscope "$T/fs.yaml" "$REFUSING"
wait_http "http://127.0.0.1:$HTTP/healthz"
wait_for 20 "tor5 shown down" is_state tor5 down
grep -q 'refused by the test' <<<"$(error_of tor5)" || fail "tor5's error is not the refusal: '$(error_of tor5)'"
wait_for 20 "tor1 up beside the refused target" is_state tor1 up
: >"$T/refuse"
hup
grep -qE '(1 instances kept, 1|0 instances kept, 2) restarted \(refused or failing\), 0 removed, 0 added' <<<"$(last_reload)" ||
  fail "refused tor5 not retried: $(last_reload)"
wait_for 20 "tor5 up after the retry" is_state tor5 up
ok "target refused by its driver shown down, retried by the next reload with the same file"

# A driver stuck at shutdown (its target_remove never returns) cannot hold SIGTERM
# hostage: a second signal ends the process at once, saying where it was stuck.
echo tor1 >"$T/hang"
kill -TERM "$FS_PID"
wait_for 10 "shutdown reached the targets" grep -q 'shutdown: removing' "$T/fabricscope.log"
kill -0 "$FS_PID" || fail "exited although its driver is stuck"
kill -TERM "$FS_PID"
wait_exit "$FS_PID" 5
wait "$FS_PID" && rc=0 || rc=$?
[ $rc = 1 ] || fail "exit code $rc after a stuck shutdown, want 1"
grep -q 'shutdown ended by a second signal while removing targets' "$T/fabricscope.log" ||
  fail "stuck shutdown not explained: $(tail -n 3 "$T/fabricscope.log")"
ok "stuck driver at shutdown: a second SIGTERM ends it (exit 1, logged)"

#!/usr/bin/env bash
# Hostile SSH peers cannot take the collector: a real sshd whose forced command (the ONYX
# simulator with a hostile fault, tests/sim/onyx/onyx_sim.py) misbehaves, polled by
# fabricscope next to a healthy switch (another simulator). One case at a time, a target
# "bad-CASE" is added by a reload, polled until it has failed several polls, then removed
# by a reload (while its hostile session is in flight):
#   drip         `show clock` answered one byte a second
#   pages        `show version` pages forever (pager prompts without end)
#   longline     `show clock` prints one line of 1 GiB
#   noise        `show clock` prints binary noise without end
#   fake_prompt  `show version`'s answer carries fake prompts and commands
#   reset        `show interfaces ethernet` half printed, then the connection is killed
#   no_shell     login accepted, then no shell ever (no banner, no prompt)
# For each:
#   - the collector's RSS (VmRSS, sampled every 50 ms) stays within BOUND_KIB of what it
#     was before the case (the stated per-target bound: 2 x max_output (4 MiB here) for
#     the receive buffer while it grows, + 8 MiB for libssh2's and the allocator's share);
#   - /api/v1/targets counts bad-CASE as failing (>= 2 consecutive failures) with an
#     error that names what happened (the case's pattern; a login slower than the 1 s
#     interval fails the first polls with another error first);
#   - the removal is applied at once (the target gone within 5 s of the SIGHUP).
# Throughout, the healthy target ("good", 1 s interval) keeps its cadence: every poll it
# makes succeeds and no two are more than 2 s (interval + 1 s) apart.
# Prints "RSS case=... before_kib=... max_kib=... growth_kib=..." per case.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
onyx_sim_prereqs
MAX_OUTPUT_MIB=4
BOUND_KIB=$(((2 * MAX_OUTPUT_MIB + 8) * 1024))
# ASan's quarantine keeps freed memory resident: without it, RSS shows what is held. Its
# shadow memory and redzones still add to what is held: the bound is doubled there.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
if ldd "$FABRICSCOPE" | grep -q libasan; then
  BOUND_KIB=$((BOUND_KIB * 2))
  echo "ASan build: RSS bound doubled to $BOUND_KIB KiB (shadow memory, redzones)"
fi

echo '{"ports": 8, "onyx_faults": {}}' >"$T/good.json"
echo '{"ports": 8, "onyx_faults": {}}' >"$T/bad.json"
chmod 0644 "$T/good.json" "$T/bad.json"
start_onyx_sim good --scenario "$T/good.json"
GOOD_PORT=$ONYX_SSH_PORT GOOD_KH=$ONYX_KNOWN_HOSTS GOOD_PW=$ONYX_PASSWORD_FILE GOOD_USER=$ONYX_SSH_USER
start_onyx_sim bad --scenario "$T/bad.json"
BAD_PORT=$ONYX_SSH_PORT BAD_KH=$ONYX_KNOWN_HOSTS BAD_PW=$ONYX_PASSWORD_FILE BAD_USER=$ONYX_SSH_USER
cat "$GOOD_KH" "$BAD_KH" >"$T/known_hosts"

HTTP=$(free_tcp_port)
write_cfg() { # write_cfg [BAD_TARGET_NAME]
  cat >"$T/fs.yaml.tmp" <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: good
    address: 127.0.0.1
    cli: { port: $GOOD_PORT, username: $GOOD_USER, password_file: $GOOD_PW,
           known_hosts: $T/known_hosts, interval: 1s }
EOF
  if [ -n "${1:-}" ]; then
    cat >>"$T/fs.yaml.tmp" <<EOF
  - name: $1
    address: 127.0.0.1
    cli: { port: $BAD_PORT, username: $BAD_USER, password_file: $BAD_PW,
           known_hosts: $T/known_hosts, interval: 1s, timeout: 4s, max_output: ${MAX_OUTPUT_MIB}MiB }
EOF
  fi
  mv "$T/fs.yaml.tmp" "$T/fs.yaml"
}
write_cfg bad-check
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
write_cfg
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20

# good's polls (time, consecutive failures, error), one line each as /api/v1/targets shows
# them; the collector's RSS every 50 ms.
cat >"$T/watch.py" <<'EOF'
import json, os, sys, time, urllib.request
url, out, rss_out, pid, stop = sys.argv[1:6]
seen = None
nxt = 0
with open(out, "w") as f, open(rss_out, "w") as r:
    while not os.path.exists(stop):
        now = time.time()
        try:
            for line in open("/proc/%s/status" % pid):
                if line.startswith("VmRSS:"):
                    r.write("%.3f %s\n" % (now, line.split()[1]))
                    r.flush()
        except OSError:
            pass
        if now >= nxt:
            nxt = now + 0.2
            try:
                rows = json.load(urllib.request.urlopen(url, timeout=2))["data"]
            except Exception:
                rows = []
            for t in rows:
                if t.get("target") == "good" and t.get("last_poll_unix") and t["last_poll_unix"] != seen:
                    seen = t["last_poll_unix"]
                    f.write("poll %.6f %d %s\n" % (seen, t.get("consecutive_failures", -1),
                                                  json.dumps(t.get("last_error", ""))))
                    f.flush()
        time.sleep(0.05)
EOF
$PY "$T/watch.py" "http://127.0.0.1:$HTTP/api/v1/targets" "$T/polls.txt" "$T/rss.txt" "$FS_PID" "$T/watch.stop" &
WATCH=$!
track "$WATCH"

api() { curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets"; }
# field TARGET KEY: a member of the target's row ("" when it is not listed)
field() { api | $PY -c '
import json, sys
for t in json.load(sys.stdin)["data"]:
    if t.get("target") == sys.argv[1]:
        v = t.get(sys.argv[2])
        print(v if v is not None else "")' "$1" "$2"; }
good_up() { [ "$(field good state)" = up ]; }
wait_for 30 "good is up" good_up
failing() { [ "$(field "$1" consecutive_failures)" -ge 2 ] 2>/dev/null; }
# failing_with TARGET REGEX: >= 2 consecutive failures, the last error matching REGEX
failing_with() { failing "$1" && field "$1" last_error >"$T/err.txt" && grep -qE "$2" "$T/err.txt"; }
listed() { [ -n "$(field "$1" target)" ]; }
rss_now() { awk '/^VmRSS:/ {print $2}' "/proc/$FS_PID/status"; }
rss_max_since() { awk -v t="$1" '$1 >= t && $2 > m {m = $2} END {print m + 0}' "$T/rss.txt"; }

# case NAME SCENARIO_JSON ERROR_REGEX
run_case() {
  local name=$1 scen=$2 want=$3 tg="bad-$1"
  echo "$scen" >"$T/bad.json.tmp" && mv "$T/bad.json.tmp" "$T/bad.json"
  local before t0
  before=$(rss_now)
  t0=$(date +%s.%N)
  write_cfg "$tg"
  hup
  wait_for 60 "$tg counted failing with an error matching /$want/" failing_with "$tg" "$want"
  local err
  err=$(cat "$T/err.txt")
  write_cfg
  local h0 h1
  h0=$(date +%s.%N)
  hup
  wait_for 5 "$tg removed" eval "! listed $tg"
  h1=$(date +%s.%N)
  local mx
  mx=$(rss_max_since "$t0")
  echo "RSS case=$name before_kib=$before max_kib=$mx growth_kib=$((mx - before)) bound_kib=$BOUND_KIB removal_s=$($PY -c "print('%.2f' % ($h1 - $h0))") error=\"$err\""
  [ $((mx - before)) -le "$BOUND_KIB" ] || fail "$name: RSS grew by $((mx - before)) KiB, beyond $BOUND_KIB KiB"
  ok "$name: failing with \"$err\"; RSS +$((mx - before)) KiB; removed at once"
}

run_case drip '{"ports": 8, "onyx_faults": {"drip": "show clock"}}' 'no answer to `show clock` in time|still answering the previous cycle'
run_case pages '{"ports": 8, "onyx_faults": {"pages": "show version"}}' 'runaway output'
run_case longline '{"ports": 8, "onyx_faults": {"longline": "show clock"}}' 'runaway output'
run_case noise '{"ports": 8, "onyx_faults": {"noise": "show clock"}}' 'runaway output'
run_case fake_prompt '{"ports": 8, "onyx_faults": {"fake_prompt": "show version"}}' '^`show [^`]+`: '
run_case reset '{"ports": 8, "onyx_faults": {"reset": "show interfaces ethernet"}}' 'closed the session|read from the shell failed'
run_case no_shell '{"ports": 8, "onyx_no_shell": true}' 'in time while setting up the CLI session|before showing a prompt'

touch "$T/watch.stop"
wait_exit "$WATCH" 10
$PY - "$T/polls.txt" <<'EOF' || fail "good lost its cadence: $(cat "$T/polls.txt")"
import sys
polls = [l.split() for l in open(sys.argv[1]) if l.startswith("poll ")]
ok = [i for i, p in enumerate(polls) if p[2] == "0"]
tail = polls[ok[0]:]
bad = [p for p in tail if p[2] != "0"]
if bad:
    sys.exit("good failed: %s" % " ".join(bad[0]))
gaps = [float(b[1]) - float(a[1]) for a, b in zip(tail, tail[1:])]
print("good: %d polls over %.0f s, largest gap %.2f s" % (len(tail), float(tail[-1][1]) - float(tail[0][1]), max(gaps)))
if max(gaps) > 2.0:
    sys.exit("a gap of %.2f s between good's polls (interval 1 s)" % max(gaps))
EOF
ok "good kept its 1 s cadence through every hostile case (every poll good, no gap beyond 2 s)"

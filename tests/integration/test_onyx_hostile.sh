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
#   fake_prompt  the answers of `show interfaces ethernet` (and of its `counters` forms)
#                carry lines that look like the CLI's prompt, with `show clock` / `show
#                version` and a made-up clock reading after them: each such command fails
#                naming the forged prompt, pipelining is off for the target with that
#                reason (one login, no text-form fallback or layout mismatch taken from a
#                forged output), and no series of the target gets a value from another
#                command's output (every port, queue and PFC series it shows is the frozen
#                scenario's; its clock offset is not the made-up reading's 1970). Then the
#                same in `show version` only (the poll partial, the target up): every
#                other series (all 152 port series) keeps coming, each the scenario's.
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
  [ -z "${CASE_CHECK:-}" ] || $CASE_CHECK "$tg" || fail "$name: $($CASE_CHECK "$tg" 2>&1)"
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
# No series of the target from another command's output: each one it exports is the
# frozen scenario's, and its clock is not the forged `show clock` reading (1970).
only_own_values() { # only_own_values TARGET [ALL]: ALL: each of the 152 port series shown (bytes rx and tx, tx packets per TC, rx PFC per priority, ECN)
  curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/fake-m.txt" || return 1
  # a few polls have to have gone by with the forged prompts in (the cycles fail)
  $PY - "$T/fake-m.txt" "$T/bad.json" "$FS_SOURCE_DIR" "$1" "${2:-}" <<'PYEOF'
import re, sys
sys.path.insert(0, sys.argv[3] + "/tests/sim")
from scenario import Scenario
sc = Scenario(sys.argv[2])
t = sc.since_boot()
tg = sys.argv[4]
bad, n = [], 0
for line in open(sys.argv[1]):
    if 'target="%s"' % tg not in line or line.startswith("#"):
        continue
    name, labels, value = re.match(r'([a-z_]+)\{(.*)\} (\S+)$', line.strip()).groups()
    ls = dict(re.findall(r'([a-z_]+)="([^"]*)"', labels))
    v = float(value)
    if name == "fabricscope_target_clock_offset_seconds" and abs(v) > 5:
        bad.append("clock offset %s s: a forged `show clock` reading was taken" % value)
    p = int(ls["interface"].split("/")[1]) if ls.get("interface", "").startswith("Eth1/") else None
    want = None
    if name == "fabric_port_bytes_total" and p:
        want = sc.port_octets(p, t)
    elif name == "fabric_queue_tx_packets_total" and p:
        want = sc.tc_tx_pkts(p, int(ls["tc"]), t)
    elif name == "fabric_pfc_pause_frames_total" and p and ls.get("direction") == "rx":
        want = sc.pfc_rx_pause_frames(p, int(ls["priority"]), t)
    elif name == "fabric_port_ecn_marked_packets_total" and p:
        want = sc.port_ecn_marked(p, t)
    if want is not None:
        n += 1
        if int(value) != want:
            bad.append("%s{%s} %s, the scenario's %d" % (name, labels, value, want))
if sys.argv[5] and n != 16 + 64 + 64 + 8:
    bad.append("%d of the 152 port series shown" % n)
if bad:
    sys.exit("; ".join(bad[:5]))
print("%d series checked" % n)
PYEOF
}
# forged_detail TARGET CMD: pipelining off naming the forged prompt in CMD's output, one
# session, no fallback or mismatch taken from a forged output.
forged_detail() {
  api | $PY -c '
import json, sys
tg, cmd = sys.argv[1], sys.argv[2]
d = [o for o in json.load(sys.stdin)["data"] if o["target"] == tg][0]
want = "a forged prompt inside the output of `%s" % cmd
bad = []
if d.get("cli_pipelining") is not False or not d.get("cli_pipelining_off", "").startswith(want):
    bad.append("pipelining %s, off: %r" % (d.get("cli_pipelining"), d.get("cli_pipelining_off")))
if d.get("cli_sessions_opened") != 1:
    bad.append("%s sessions" % d.get("cli_sessions_opened"))
for k in ("cli_text_fallbacks", "cli_layout_mismatches", "cli_dropped_commands"):
    if d.get(k) != []:
        bad.append("%s %s" % (k, d.get(k)))
if bad:
    sys.exit("; ".join(bad))
print("pipelining off: %s" % d["cli_pipelining_off"])' "$1" "$2"
}
fake_checks() { only_own_values "$1" && forged_detail "$1" 'show interfaces ethernet'; }
FAKE_BOOT=$($PY -c 'import time; print(time.time() - 300)')
CASE_CHECK=fake_checks run_case fake_prompt "{\"ports\": 8, \"boot_epoch_s\": $FAKE_BOOT, \"frozen_at_s\": 95, \"counter_base\": 1099511627777, \"onyx_faults\": {\"fake_prompt\": \"show interfaces ethernet\"}}" '^`show interfaces ethernet[^`]*`: a forged prompt inside its output \(`switch-sim \[standalone: master\] # show clock`'

# Forged prompts in one command's answer only (`show version`): that command fails naming
# the forged prompt (the poll is partial), and every other series of the target keeps
# coming, each the scenario's: the outputs after it are not shifted onto other commands.
# With the CLI's echo, then with a shell that echoes type-ahead on arrival (a pty with
# kernel echo: no echo after a prompt to check).
fake_in_version() { # fake_in_version NAME EXTRA_SCENARIO_MEMBERS
  local tg=bad-$1
  echo "{\"ports\": 8, \"boot_epoch_s\": $FAKE_BOOT, \"frozen_at_s\": 95, \"counter_base\": 1099511627777, $2 \"onyx_faults\": {\"fake_prompt\": \"show version\"}}" >"$T/bad.json.tmp" &&
    mv "$T/bad.json.tmp" "$T/bad.json"
  write_cfg "$tg"
  hup
  own_and_complete() {
    field "$tg" last_error >"$T/err.txt" &&
      grep -qE '^`show version`: a forged prompt inside its output \(`switch-sim \[standalone: master\] # show clock`' "$T/err.txt" &&
      [ "$(field "$tg" state)" = up ] &&
      only_own_values "$tg" all >/dev/null 2>&1
  }
  wait_for 60 "$tg: up, \`show version\` failing on its forged prompt, all 152 port series the scenario's" own_and_complete
  forged_detail "$tg" 'show version' >"$T/detail.txt" || fail "$1: $(forged_detail "$tg" 'show version' 2>&1)"
  ok "$1: up, \"$(cat "$T/err.txt")\"; $(only_own_values "$tg" all); $(cat "$T/detail.txt")"
  write_cfg
  hup
  wait_for 5 "$tg removed" eval "! listed $tg"
}
fake_in_version fake_version ''
fake_in_version fake_version_kernel_echo '"onyx_echo": "typeahead",'

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

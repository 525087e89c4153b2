#!/usr/bin/env bash
# The ONYX CLI driver against shells and layouts it was not written for (issue 18), with
# the ONYX simulator behind a REAL OpenSSH sshd, polled through build/tests/fs-onyx-poll:
#   - a shell that echoes type-ahead at once (a pty with kernel echo: the whole batch is
#     echoed before the first output, each later output starts on the prompt's line):
#     every counter is read, exactly;
#   - `| json-print` failing while the text form works (`% Unrecognized command`, or a
#     JSON layout the parser does not know, with the type-ahead shell, as in the issue):
#     the text form is used in the same cycle and from then on, the fallback is reported
#     once (log) with its reason (the target's detail, as /api/v1/targets shows it);
#   - an optional command failing (`%` error) makes the cycle partial: the target stays up
#     and the other commands' series keep flowing.
# Counters stand still (frozen_at_s), so every value is compared exactly with the scenario.
source "$(dirname "$0")/lib.sh"

POLL=$FS_BUILD_DIR/tests/fs-onyx-poll
[ -x "$POLL" ] || fail "build fs-onyx-poll first"
onyx_sim_prereqs

SCEN=$T/scenario.json
BOOT=$($PY -c 'import time; print(time.time() - 300)')
write_scenario() { # write_scenario EXTRA_JSON: the base scenario with EXTRA's keys on top
  $PY - "$SCEN" "$BOOT" "$1" <<'EOF'
import json, os, sys
path, boot, extra = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
d = {"ports": 8, "boot_epoch_s": boot, "counter_base": 2**53 + 1, "frozen_at_s": 95,
     "congestion": {"port": 7, "tc": 3, "period_s": 30, "duration_s": 2, "phase_s": 10}}
d.update(extra)
with open(path + ".tmp", "w") as f:
    json.dump(d, f)
os.replace(path + ".tmp", path)
EOF
}
write_scenario '{}'
start_onyx_sim shells --scenario "$SCEN"

# The scenario's values (frozen): name -> exact value.
declare -A WANT
while read -r k v; do WANT[$k]=$v; done < <($PY - "$SCEN" "$FS_SOURCE_DIR" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2] + "/tests/sim")
from scenario import Scenario
sc = Scenario(sys.argv[1])
t = sc.since_boot()
print("bytes1", sc.port_octets(1, t))
print("bytes8", sc.port_octets(8, t))
print("ecn7", sc.port_ecn_marked(7, t))
print("ecn1", sc.port_ecn_marked(1, t))
print("wred7", sc.tc_wred_dropped(7, 3, t))
print("pfc7", sc.pfc_rx_pause_frames(7, 3, t))
print("tcpk1", sc.tc_tx_pkts(1, 3, t))
EOF
)
[ "${WANT[ecn7]}" != "${WANT[ecn1]}" ] || fail "scenario: no congestion before frozen_at_s"
GREP='fabricscope_target_up|port_bytes_total.*Eth1/(1|8)",direction="rx"|ecn_marked_packets_total.*Eth1/(1|7)"|wred_dropped.*Eth1/7",tc="3"|pfc_pause_frames_total.*Eth1/7",direction="rx",priority="3"|queue_tx_packets_total.*Eth1/1",tc="3"'

# poll NAME [args...]: fs-onyx-poll against the simulator, 2 polls unless told. Poll 1 also
# logs in and sets up the CLI session, which on a loaded machine can outlast a poll's
# deadline: it gets a minute more for it (--login-ms), so every poll runs on a ready
# session instead of assuming a quick login.
poll() {
  local name=$1
  shift
  "$POLL" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --password-file "$T/shells/password" \
    --known-hosts "$T/shells/known_hosts" --interval-ms 1500 --polls 2 --grep "$GREP" \
    --login-ms 60000 --transcript "$T/$name.transcript" "$@" >"$T/$name.out" 2>"$T/$name.log" || true
}
val() { # val FILE POLL REGEX -> value of the first matching metric line of that poll
  awk -v p="$2" -v re="$3" '$1=="poll" && $2==p && $3 ~ re {print $4; exit}' "$1"
}
result() { awk -v p="$2" '$1=="poll" && $2==p {sub("result=","",$3); print $3; exit}' "$1"; }
check_values() { # check_values NAME POLL: every counter of GREP equals the scenario's
  local o=$T/$1.out k v
  for k in 'bytes1:port_bytes_total.*Eth1/1",direction="rx"' \
    'bytes8:port_bytes_total.*Eth1/8",direction="rx"' \
    'ecn7:ecn_marked_packets_total.*Eth1/7"' 'ecn1:ecn_marked_packets_total.*Eth1/1"' \
    'wred7:wred_dropped.*Eth1/7",tc="3"' \
    'pfc7:pfc_pause_frames_total.*Eth1/7",direction="rx",priority="3"' \
    'tcpk1:queue_tx_packets_total.*Eth1/1",tc="3"'; do
    v=$(val "$o" "$2" "${k#*:}")
    [ "$v" = "${WANT[${k%%:*}]}" ] || fail "$1 poll $2: ${k%%:*} = '$v', want ${WANT[${k%%:*}]}"
  done
}
results_ok() { # results_ok NAME WANT...: poll k's result is the k-th WANT
  local k=1 w
  for w in "${@:2}"; do
    [ "$(result "$T/$1.out" $k)" = "$w" ] ||
      fail "$1: poll $k result $(result "$T/$1.out" $k), want $w: $(grep -m3 'target onyx0' "$T/$1.log")"
    k=$((k + 1))
  done
}

# ---------------------------------------------------------------- type-ahead echo
write_scenario '{"onyx_echo": "typeahead"}'
poll typeahead
# The simulator did what it is for: a JSON document starts on the prompt's line.
grep -q '^switch-sim \[standalone: master\] # \[$' "$T/typeahead.transcript" ||
  fail "the simulator did not print an output on the prompt's line"
results_ok typeahead ok ok
[ "$(val "$T/typeahead.out" 2 '^fabricscope_target_up')" = 1 ] || fail "type-ahead: the target is down"
check_values typeahead 1
check_values typeahead 2
grep -q '"cli_interfaces_form":"json","cli_text_fallbacks":\[\]' "$T/typeahead.out" ||
  fail "type-ahead: a fallback was reported: $(grep -m1 DETAIL "$T/typeahead.out")"
ok "type-ahead echo (outputs on the prompt's line): every counter exact, JSON form kept"

# ---------------------------------------------------------------- json-print unrecognized
write_scenario '{"onyx_json_fails": {"show interfaces ethernet": "unrecognized"}}'
poll jsonunrec --polls 3
results_ok jsonunrec ok ok ok
check_values jsonunrec 1
check_values jsonunrec 3
R='% Unrecognized command \"json-print\".'
grep -qF "\"cli_interfaces_form\":\"text\",\"cli_text_fallbacks\":[{\"command\":\"show interfaces ethernet\",\"reason\":\"$R\"},{\"command\":\"show interfaces ethernet <port> congestion-control\",\"reason\":\"$R\"}]" \
  "$T/jsonunrec.out" || fail "fallbacks not reported with the reason: $(grep -m1 DETAIL "$T/jsonunrec.out")"
[ "$(grep -c 'using the text form of `show interfaces ethernet`' "$T/jsonunrec.log")" = 1 ] &&
  [ "$(grep -c 'using the text form of `show interfaces ethernet <port> congestion-control`' "$T/jsonunrec.log")" = 1 ] ||
  fail "each fallback not logged exactly once: $(grep -c 'using the text form' "$T/jsonunrec.log") lines"
# From the second cycle on the text forms are sent directly.
grep -q '^<<< show interfaces ethernet$' "$T/jsonunrec.transcript" || fail "text form never sent"
[ "$(grep -c '^<<< show interfaces ethernet | json-print$' "$T/jsonunrec.transcript")" = 1 ] ||
  fail "the JSON form was tried again after it failed"
ok "json-print unrecognized: text form in the same cycle and after, reported once with the reason"

# ---------------------------------------------------------------- unknown JSON layout + type-ahead
write_scenario '{"onyx_echo": "typeahead", "onyx_json_fails": {"show interfaces ethernet": "layout"}}'
poll jsonlayout
results_ok jsonlayout ok ok
check_values jsonlayout 1
check_values jsonlayout 2
grep -qF '"cli_text_fallbacks":[{"command":"show interfaces ethernet","reason":"show interfaces ethernet: no Eth port in the JSON"},{"command":"show interfaces ethernet <port> congestion-control","reason":"congestion-control: JSON is not a list"}]' \
  "$T/jsonlayout.out" || fail "layout fallbacks: $(grep -m1 DETAIL "$T/jsonlayout.out")"
grep -q '"cli_ecn_profile":"tc 3 ECN absolute min 500 KB max 1550 KB"' "$T/jsonlayout.out" ||
  fail "ECN profile not read from the text form"
ok "an unknown JSON layout behind a type-ahead shell: text forms, every counter exact"

# ---------------------------------------------------------------- optional command fails
write_scenario '{"onyx_echo": "typeahead", "onyx_faults": {"error": "show interfaces ethernet counters pfc prio 3"}}'
poll optional
results_ok optional partial partial
grep -q 'pfc_pause_frames_total.*priority="3"' "$T/optional.out" && fail "a failed command's series appeared"
v=$(val "$T/optional.out" 2 'port_bytes_total.*Eth1/1",direction="rx"')
[ "$v" = "${WANT[bytes1]}" ] || fail "optional: port bytes $v, want ${WANT[bytes1]}"
v=$(val "$T/optional.out" 2 'ecn_marked_packets_total.*Eth1/7"')
[ "$v" = "${WANT[ecn7]}" ] || fail "optional: ECN $v, want ${WANT[ecn7]}"
grep -q '"cli_session":"up"' "$T/optional.out" || fail "optional: session not up"
[ "$(val "$T/optional.out" 2 '^fabricscope_target_up')" = 1 ] || fail "optional: the target is down"
grep -q 'pfc prio 3`: % Internal error' "$T/optional.log" || fail "the failed command was not named"
ok "an optional command failing: cycle partial, target up, the other series flow"

# ---------------------------------------------------------------- the daemon: /api/v1/targets
# The issue's switch (a type-ahead shell and an unknown JSON layout) polled by fabricscope
# itself: the target is up with its port counters, and /api/v1/targets names each
# fallback with its reason. Its per-TC counters print a layout no parser knows (an
# assumed layout): said once, with the first lines printed, the target up.
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
write_scenario '{"onyx_echo": "typeahead", "onyx_json_fails": {"show interfaces ethernet": "layout"}, "onyx_faults": {"layout": "show interfaces ethernet counters tc 3"}}'
HTTP=$(free_tcp_port)
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: sw1
    address: 127.0.0.1
    cli: { port: $ONYX_SSH_PORT, username: $ONYX_SSH_USER, password_file: $ONYX_PASSWORD_FILE,
           known_hosts: $ONYX_KNOWN_HOSTS, interval: 1s }
EOF
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
up_with_ports() {
  curl -fsS "http://127.0.0.1:$HTTP/metrics" >"$T/m.txt" &&
    grep -q '^fabricscope_target_up{target="sw1",source="cli"} 1' "$T/m.txt" &&
    grep -q "^fabric_port_ecn_marked_packets_total{target=\"sw1\",interface=\"Eth1/7\",source=\"cli\"} ${WANT[ecn7]}\$" "$T/m.txt" &&
    grep -q "^fabric_port_bytes_total{target=\"sw1\",interface=\"Eth1/1\",direction=\"rx\",source=\"cli\"} ${WANT[bytes1]}\$" "$T/m.txt"
}
wait_for 30 "sw1 up with its port counters" up_with_ports
curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" >"$T/targets.json" || fail "/api/v1/targets"
$PY - "$T/targets.json" <<'EOF' || fail "/api/v1/targets: $(cat "$T/targets.json")"
import json, sys
def walk(o):
    if isinstance(o, dict):
        yield o
        for v in o.values():
            yield from walk(v)
    elif isinstance(o, list):
        for v in o:
            yield from walk(v)
cli = [o for o in walk(json.load(open(sys.argv[1]))) if "cli_text_fallbacks" in o]
assert len(cli) == 1, cli
fb = {f["command"]: f["reason"] for f in cli[0]["cli_text_fallbacks"]}
assert fb == {"show interfaces ethernet": "show interfaces ethernet: no Eth port in the JSON",
              "show interfaces ethernet <port> congestion-control":
                  "congestion-control: JSON is not a list"}, fb
assert cli[0]["cli_interfaces_form"] == "text", cli[0]
assert cli[0]["cli_session"] == "up", cli[0]
lm = cli[0]["cli_layout_mismatches"]
assert len(lm) == 1 and lm[0]["command"] == "show interfaces ethernet counters tc 3", lm
assert lm[0]["printed"].startswith("Port       Traffic-Class  Tx-Pkts      Tx-Bytes | ----"), lm
assert lm[0]["error"], lm
EOF
[ "$(grep -c 'printed a layout this driver does not know' "$T/fabricscope.log")" = 1 ] ||
  fail "the layout mismatch was not logged exactly once: $(grep -c 'printed a layout' "$T/fabricscope.log")"
[ "$(grep -c 'using the text form of `show interfaces ethernet`' "$T/fabricscope.log")" = 1 ] ||
  fail "the interfaces fallback was not logged exactly once"
ok "fabricscope: the issue's switch is up with exact port counters; /api/v1/targets names each fallback and why, and the per-TC layout it does not know with its first lines (logged once)"

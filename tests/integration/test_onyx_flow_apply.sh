#!/usr/bin/env bash
# Flow rules on the ONYX simulator behind a real sshd: the plan read from the running
# config touches nothing; apply installs the one flow-rule ACL (entries in first-match
# order, a catch-all permit) bound to the selected ports, a port bound to the operator's
# ACL left alone; re-applying (a new session) changes nothing; a foreign ACL is left alone
# and a stale project ACL removed; a failing configuration command is rolled back; on a
# switch without `show telemetry flows` the rules' packets and CE marks come from the ACL's
# entry counters (layout assumed). The simulator keeps its configuration in a state file
# across sessions, as a switch keeps its running config.
source "$(dirname "$0")/lib.sh"

POLL=$FS_BUILD_DIR/tests/fs-onyx-poll
[ -x "$POLL" ] || fail "build fs-onyx-poll first"
onyx_sim_prereqs
SCEN=$T/scenario.json
echo '{"ports": 8, "onyx_faults": {}}' >"$SCEN"
start_onyx_sim sim --scenario "$SCEN"

run() { # run NAME [args...]
  local name=$1
  shift
  "$POLL" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --password-file "$ONYX_PASSWORD_FILE" \
    --known-hosts "$ONYX_KNOWN_HOSTS" --interval-ms 3000 --flow-rule nccl:udp:4791:3 \
    --flow-rule-ports 'Eth1/[1-4]' \
    --transcript "$T/$name.transcript" "$@" >"$T/$name.out" 2>"$T/$name.log"
}
acls() { $PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["acls"], sort_keys=True))' "$ONYX_STATE"; }
bindings() { $PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])).get("bindings", {}), sort_keys=True))' "$ONYX_STATE"; }
set_state() { # writes the simulated switch's configuration as its owner would
  printf '%s' "$1" >"$ONYX_STATE.tmp" && chown "$ONYX_SSH_USER" "$ONYX_STATE.tmp" && mv "$ONYX_STATE.tmp" "$ONYX_STATE"
}

# A switch with a foreign ACL bound to port 1/2 and a stale ACL of ours.
set_state '{"acls": {"other": {"10": "permit ip any any"}, "fabricscope-old": {"10": "permit tcp any any"}}, "bindings": {"1/2": "other"}}'

# --- plan: reads, touches nothing
before=$(acls)
run plan --plan --polls 1 || fail "plan poll failed: $(tail -3 "$T/plan.log")"
sed -n '/^PLAN$/,/^END PLAN$/p' "$T/plan.out" >"$T/plan.txt"
cat >"$T/plan.want" <<'EOF'
PLAN
# flow rule nccl: an ACL cannot match tc 3: its ACL count covers every traffic class
# port Eth1/2 is bound to ACL other: left alone (no flow rule counts there)
configure terminal
ipv4 access-list fabricscope-flows
seq-number 60000 permit ip any any
seq-number 10 permit udp any any dst-port-range 4791 4791
exit
interface ethernet 1/1 ipv4 port access-group fabricscope-flows
interface ethernet 1/3 ipv4 port access-group fabricscope-flows
interface ethernet 1/4 ipv4 port access-group fabricscope-flows
no ipv4 access-list fabricscope-old
exit
END PLAN
EOF
diff -u "$T/plan.want" "$T/plan.txt" || fail "plan differs"
[ "$(acls)" = "$before" ] || fail "plan changed the switch"
grep -q '<<< configure terminal' "$T/plan.transcript" && fail "plan sent configuration commands"
ok "plan from the running config, nothing touched"

# --- apply
run apply --apply-flow-rules --polls 2 || fail "apply polls failed: $(tail -3 "$T/apply.log")"
want='{"fabricscope-flows": {"10": "permit udp any any dst-port-range 4791 4791", "60000": "permit ip any any"}, "other": {"10": "permit ip any any"}}'
[ "$(acls)" = "$want" ] || fail "after apply: $(acls)"
wantb='{"1/1": "fabricscope-flows", "1/2": "other", "1/3": "fabricscope-flows", "1/4": "fabricscope-flows"}'
[ "$(bindings)" = "$wantb" ] || fail "bindings after apply: $(bindings)"
grep -q '"cli_flow_rules":"in place"' "$T/apply.out" || fail "apply not reported in place"
[ "$(grep -c '<<< show running-config' "$T/apply.transcript")" = 1 ] || fail "running config read more than once in one session"
ok "apply: one ACL with a catch-all, bound to the selected ports but the operator's, foreign ACL kept, stale one removed"

# --- re-apply in a new session: reads, changes nothing
run reapply --apply-flow-rules --polls 1 || fail "re-apply failed"
grep -q '<<< show running-config' "$T/reapply.transcript" || fail "re-apply did not read the running config"
grep -q '<<< configure terminal' "$T/reapply.transcript" && fail "re-apply sent configuration commands"
[ "$(acls)" = "$want" ] || fail "re-apply changed the switch: $(acls)"
run plan2 --plan --polls 1 || fail "second plan failed"
[ "$(sed -n '/^PLAN$/,/^END PLAN$/p' "$T/plan2.out" | grep -vc '^# ')" = 2 ] || fail "plan after apply is not empty"
ok "re-apply and plan after apply change nothing"

# --- a failing command is rolled back
set_state '{"acls": {}}'
$PY - "$SCEN" <<'EOF'
import json, sys
json.dump({"ports": 8, "onyx_faults": {"reject": "seq-number 10 permit udp"}}, open(sys.argv[1] + ".tmp", "w"))
import os
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF
run reject --apply-flow-rules --polls 1 && fail "a rejected configuration passed"
grep -q 'result=protocol' "$T/reject.out" || fail "rejected configuration: $(grep result "$T/reject.out")"
grep -q '<<< no ipv4 access-list fabricscope-flows' "$T/reject.transcript" || fail "no rollback sent"
[ "$(acls)" = '{}' ] || fail "rollback left: $(acls)"
[ "$(bindings)" = '{}' ] || fail "rollback left bindings: $(bindings)"
ok "a failing configuration command is rolled back"

# --- per-rule counts from the ACL's entry counters (a switch without telemetry flows)
# The switch stands still at 95 s after boot (3 surges of the congested port 1/3 behind
# it); nccl-ce is nccl's CE-marked part and comes first in the ACL, so nccl's count is
# both entries' and its CE marks are nccl-ce's.
set_state '{"acls": {}}'
$PY - "$SCEN" <<'EOF'
import json, os, sys, time
d = {"ports": 8, "onyx_faults": {}, "onyx_lacks": ["show telemetry flows"],
     "boot_epoch_s": time.time() - 200, "frozen_at_s": 95,
     "congestion": {"port": 3, "tc": 3, "period_s": 30, "duration_s": 2, "phase_s": 10}}
json.dump(d, open(sys.argv[1] + ".tmp", "w"))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF
run counts --apply-flow-rules --polls 3 --flow-rule nccl-ce:udp:4791 --grep 'flow_rule' ||
  fail "polls with ACL counters failed: $(grep result "$T/counts.out")"
want=$($PY - "$SCEN" "$FS_SOURCE_DIR" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[2] + "/tests/sim")
from scenario import Scenario
sc = Scenario(sys.argv[1])
t, base = 95.0, sc.counter_base
pk = sum(sc.tc_tx_pkts(p, 3, t) - base for p in (1, 2, 3, 4))
by = sum(sc.tc_tx_octets(p, 3, t) - base for p in (1, 2, 3, 4))
ce = min(pk, sc.tc_ecn_marked(3, 3, t) - base)
print(pk, by, ce)
EOF
)
read -r wpk wby wce <<<"$want"
[ "$wce" -gt 0 ] || fail "the scenario has no CE marks to count"
v() { awk -v re="$1" '$1=="poll" && $2==3 && $3 ~ re {print $4; exit}' "$T/counts.out"; }
got="$(v 'flow_rule_packets_total.*rule="nccl"') $(v 'flow_rule_bytes_total.*rule="nccl"') $(v 'flow_rule_ecn_marked_packets_total.*rule="nccl"') $(v 'flow_rule_packets_total.*rule="nccl-ce"')"
[ "$got" = "$wpk $wby $wce $wce" ] || fail "ACL-based rule counts: got $got, want $wpk $wby $wce $wce"
grep -q '"cli_acl_counters":"read (layout assumed, unverified against a real switch)"' "$T/counts.out" ||
  fail "the ACL counters are not flagged as assumed: $(grep -o '"cli_acl_counters":"[^"]*"' "$T/counts.out")"
ok "per-rule packets, bytes and CE marks from the ACL's entry counters ($wpk packets, $wce CE)"

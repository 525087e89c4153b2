#!/usr/bin/env bash
# Flow rules on the ONYX simulator behind a real sshd: the plan read from the running
# config touches nothing; apply installs one prefix-named ACL per rule; re-applying (a new
# session) changes nothing; a foreign ACL is left alone and a stale project ACL removed; a
# failing configuration command is rolled back. The simulator keeps its configuration in
# a state file across sessions, as a switch keeps its running config.
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
    --transcript "$T/$name.transcript" "$@" >"$T/$name.out" 2>"$T/$name.log"
}
acls() { $PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["acls"], sort_keys=True))' "$ONYX_STATE"; }
set_state() { # writes the simulated switch's configuration as its owner would
  printf '%s' "$1" >"$ONYX_STATE.tmp" && chown "$ONYX_SSH_USER" "$ONYX_STATE.tmp" && mv "$ONYX_STATE.tmp" "$ONYX_STATE"
}

# A switch with a foreign ACL and a stale ACL of ours.
set_state '{"acls": {"other": {"10": "permit ip any any"}, "fabricscope-old": {"10": "permit tcp any any"}}}'

# --- plan: reads, touches nothing
before=$(acls)
run plan --plan --polls 1 || fail "plan poll failed: $(tail -3 "$T/plan.log")"
sed -n '/^PLAN$/,/^END PLAN$/p' "$T/plan.out" >"$T/plan.txt"
cat >"$T/plan.want" <<'EOF'
PLAN
configure terminal
ipv4 access-list fabricscope-nccl
seq-number 10 permit udp any any dst-port-range 4791 4791
exit
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
want='{"fabricscope-nccl": {"10": "permit udp any any dst-port-range 4791 4791"}, "other": {"10": "permit ip any any"}}'
[ "$(acls)" = "$want" ] || fail "after apply: $(acls)"
grep -q '"cli_flow_rules":"in place"' "$T/apply.out" || fail "apply not reported in place"
[ "$(grep -c '<<< show running-config' "$T/apply.transcript")" = 1 ] || fail "running config read more than once in one session"
ok "apply: one prefix-named ACL, foreign ACL kept, stale project ACL removed"

# --- re-apply in a new session: reads, changes nothing
run reapply --apply-flow-rules --polls 1 || fail "re-apply failed"
grep -q '<<< show running-config' "$T/reapply.transcript" || fail "re-apply did not read the running config"
grep -q '<<< configure terminal' "$T/reapply.transcript" && fail "re-apply sent configuration commands"
[ "$(acls)" = "$want" ] || fail "re-apply changed the switch: $(acls)"
run plan2 --plan --polls 1 || fail "second plan failed"
[ "$(sed -n '/^PLAN$/,/^END PLAN$/p' "$T/plan2.out" | wc -l)" = 2 ] || fail "plan after apply is not empty"
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
grep -q '<<< no ipv4 access-list fabricscope-nccl' "$T/reject.transcript" || fail "no rollback sent"
[ "$(acls)" = '{}' ] || fail "rollback left: $(acls)"
ok "a failing configuration command is rolled back"

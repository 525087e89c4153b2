#!/usr/bin/env bash
# `fabricscope probe --transcript` and `fabricscope plan-flow-rules` through the real
# binary against the ONYX simulator behind a real sshd (tests/sim/onyx/start-onyx-sim.sh):
#   probe prints the target's CLI series (source="cli") and, with --transcript, the raw
#   exchange (commands sent, the switch's answers, the password never shown);
#   plan-flow-rules reads the running config and prints the exact commands, changing
#   nothing on the switch, names the one target asked for, prints nothing to send once
#   the ACLs are in place, and says it could not read the running config (and prints the
#   offline plan) when the switch does not answer.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
onyx_sim_prereqs
SCEN=$T/scenario.json
echo '{"ports": 8, "onyx_faults": {}}' >"$SCEN"
start_onyx_sim sim --scenario "$SCEN"
acls() { $PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["acls"], sort_keys=True))' "$ONYX_STATE"; }
printf '%s' '{"acls": {"other": {"10": "permit ip any any"}}}' >"$ONYX_STATE.tmp"
chown "$ONYX_SSH_USER" "$ONYX_STATE.tmp" && mv "$ONYX_STATE.tmp" "$ONYX_STATE"
DEAD_PORT=$(free_tcp_port)

write_cfg() { # write_cfg FILE APPLY
  cat >"$1" <<EOF
flow_rules:
  - { name: nccl-roce, protocol: udp, dst_port: 4791, tc: 3 }
targets:
  - name: sw1
    address: 127.0.0.1
    cli:
      port: $ONYX_SSH_PORT
      username: $ONYX_SSH_USER
      password_file: $ONYX_PASSWORD_FILE
      known_hosts: $ONYX_KNOWN_HOSTS
      interval: 2s
      apply_flow_rules: $2
      flow_rule_ports: "Eth1/(1|2)"
  - name: gone
    address: 127.0.0.1
    cli:
      port: $DEAD_PORT
      username: $ONYX_SSH_USER
      password_file: $ONYX_PASSWORD_FILE
      known_hosts: $ONYX_KNOWN_HOSTS
      interval: 1s
      timeout: 500ms
EOF
}
write_cfg "$T/plan.yaml" false
write_cfg "$T/apply.yaml" true

# ---- probe --transcript
"$FABRICSCOPE" probe -c "$T/plan.yaml" sw1 --transcript >"$T/probe.out" 2>"$T/probe.log" ||
  fail "probe failed: $(tail -3 "$T/probe.log")"
grep -q '^fabric_queue_tx_packets_total{.*source="cli"' "$T/probe.out" ||
  fail "probe: no per-TC series from the CLI"
grep -q '^# ---- transcript of sw1/cli ----$' "$T/probe.out" || fail "probe: no transcript header"
sed -n '/^# ---- transcript of sw1\/cli ----$/,/^# ---- end of transcript of sw1\/cli ----$/p' \
  "$T/probe.out" >"$T/transcript.txt"
for c in 'show clock' 'show version' 'show interfaces ethernet counters tc 3' 'show telemetry flows'; do
  grep -q "^<<< $c" "$T/transcript.txt" || fail "transcript lacks the command \"$c\""
done
grep -q 'standalone: master' "$T/transcript.txt" || fail "transcript lacks the switch's prompt"
grep -qF "$(cat "$ONYX_PASSWORD_FILE")" "$T/transcript.txt" && fail "the transcript shows the password"
grep -q '^# sw1/cli: up, ' "$T/probe.out" || fail "probe state line: $(grep '^# sw1/' "$T/probe.out")"
"$FABRICSCOPE" probe -c "$T/plan.yaml" sw1 >"$T/probe2.out" 2>&1 || fail "probe without transcript failed"
grep -q 'transcript of' "$T/probe2.out" && fail "a transcript without --transcript"
ok "probe prints the CLI series and, with --transcript, the raw exchange (password masked)"

# ---- plan-flow-rules TARGET: reads the running config, touches nothing
before=$(acls)
"$FABRICSCOPE" plan-flow-rules -c "$T/apply.yaml" sw1 >"$T/plan.out" 2>"$T/plan.log" ||
  fail "plan-flow-rules failed: $(cat "$T/plan.log")"
cat >"$T/plan.want" <<'EOF'
# sw1: against its running configuration
# flow rule nccl-roce: an ACL cannot match tc 3: its ACL count covers every traffic class
configure terminal
ipv4 access-list fabricscope-flows
seq-number 60000 permit ip any any
seq-number 10 permit udp any any dst-port-range 4791 4791
exit
interface ethernet 1/1 ipv4 port access-group fabricscope-flows
interface ethernet 1/2 ipv4 port access-group fabricscope-flows
exit
EOF
diff -u "$T/plan.want" "$T/plan.out" || fail "plan differs"
[ "$(acls)" = "$before" ] || fail "plan-flow-rules changed the switch (apply_flow_rules: true is ignored there)"
ok "plan-flow-rules TARGET: the exact commands, nothing sent to the switch"

# ---- the daemon applies; the plan is then empty
start_fabricscope "$T/apply.yaml"
applied() { [ "$(acls)" != "$before" ]; }
wait_for 30 "the daemon installs the ACL" applied
kill "$FS_PID"
wait_exit "$FS_PID" 20
"$FABRICSCOPE" plan-flow-rules -c "$T/plan.yaml" sw1 >"$T/plan2.out" 2>"$T/plan2.log" ||
  fail "second plan failed: $(cat "$T/plan2.log")"
grep -qx '# sw1: its running configuration already holds the flow rules: nothing to send' \
  "$T/plan2.out" || fail "plan after apply: $(cat "$T/plan2.out")"
ok "after apply_flow_rules the plan has nothing to send"

# ---- every target: a switch that does not answer gets the offline plan
rc=0
"$FABRICSCOPE" plan-flow-rules -c "$T/plan.yaml" >"$T/plan3.out" 2>"$T/plan3.log" || rc=$?
[ "$rc" = 1 ] || fail "plan with an unreachable switch: exit $rc, want 1"
grep -q '^# sw1: its running configuration already holds' "$T/plan3.out" || fail "sw1 missing"
grep -qx "# gone: could not read the running configuration; the plan if none of the project's ACLs exist yet:" \
  "$T/plan3.out" || fail "no could-not-read line: $(cat "$T/plan3.out")"
sed -n '/^# gone:/,$p' "$T/plan3.out" | grep -qx 'ipv4 access-list fabricscope-flows' ||
  fail "no offline plan for gone"
grep -q '^gone/cli: ' "$T/plan3.log" || fail "the reason is not shown: $(cat "$T/plan3.log")"
ok "an unreachable switch: could not read, offline plan, exit 1, reason on stderr"

rc=0
"$FABRICSCOPE" plan-flow-rules -c "$T/plan.yaml" nosuch >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "unknown target: exit $rc"
ok "an unknown target is refused (exit 2)"

#!/usr/bin/env bash
# SNMPv3 USM against a private snmpd whose own config creates the user (SHA-256 + AES-128):
# authPriv polls succeed; with a wrong password every cycle ends as an auth error, counted
# in fabricscope_poll_errors_total{kind="auth"}, and each cycle costs the agent exactly one
# failed authentication (usmStatsWrongDigests): no retries, no storm.
source "$(dirname "$0")/lib.sh"

HARNESS=$FS_BUILD_DIR/sim/snmp-harness
[ -x "$HARNESS" ] || fail "build snmp-harness first"
start_snmp_sim
export SNMP_PERSISTENT_DIR=$T/snmp/persist MIBS=""
C=$(cat "$SNMP_COMMUNITY_FILE")

"$HARNESS" --port "$PORT" --v3-user "$SNMP_V3_USER" --auth-file "$SNMP_V3_AUTH_FILE" \
  --priv-file "$SNMP_V3_PRIV_FILE" --polls 3 --interval-ms 1000 --deadline-ms 5000 \
  --grep 'port_info.*Eth1/64"' \
  >"$T/good.out" 2>"$T/good.log" || fail "authPriv polls failed: $(tail -2 "$T/good.out")"
grep -q '^poll 3 fabric_port_info.*Eth1/64' "$T/good.out" || fail "no data over authPriv"
grep -q 'ok=3 timeout=0 auth=0' "$T/good.out" || fail "$(grep SUMMARY "$T/good.out")"
ok "SNMPv3 authPriv (SHA-256, AES-128) polls"

# The credentials never show in the output or the log.
for f in "$SNMP_V3_AUTH_FILE" "$SNMP_V3_PRIV_FILE" "$SNMP_COMMUNITY_FILE"; do
  ! grep -qF "$(cat "$f")" "$T/good.out" "$T/good.log" || fail "a secret was printed"
done
ok "no secret in output or log"

wd() { snmpget -v2c -c "$C" -Oqv "udp:127.0.0.1:$PORT" 1.3.6.1.6.3.15.1.1.5.0; }
echo "not-the-password-at-all" >"$T/wrong"
w0=$(wd)
"$HARNESS" --port "$PORT" --v3-user "$SNMP_V3_USER" --auth-file "$T/wrong" \
  --priv-file "$SNMP_V3_PRIV_FILE" --polls 5 --interval-ms 500 --retries 3 --timeout-ms 400 \
  --grep 'poll_errors_total.*kind="auth"' >"$T/bad.out" 2>"$T/bad.log" && fail "wrong password accepted"
w1=$(wd)
grep -q '^poll 5 fabricscope_poll_errors_total.*kind="auth"} 5' "$T/bad.out" ||
  fail "auth errors not counted: $(grep -E 'auth|SUMMARY' "$T/bad.out" | tail -3)"
[ $((w1 - w0)) -eq 5 ] || fail "agent saw $((w1 - w0)) failed authentications for 5 cycles (retry storm?)"
ok "wrong password: 5 cycles, 5 auth errors counted, 5 failed authentications at the agent"

# Weak crypto is refused unless allowed.
"$HARNESS" --port "$PORT" --v3-user "$SNMP_V3_USER" --auth-file "$SNMP_V3_AUTH_FILE" --auth-proto md5 \
  --polls 1 >"$T/weak.out" 2>"$T/weak.log" && fail "MD5 accepted without allow_weak_crypto"
grep -q 'auth=1' "$T/weak.out" || fail "weak crypto refusal not reported as auth: $(cat "$T/weak.out")"
ok "MD5 refused without allow_weak_crypto"

#!/usr/bin/env bash
# The gNMI driver against the gNMI target simulator (tests/sim/gnmi/gnmi_sim.py, Debian's
# python3-grpcio) over real gRPC on loopback, through build/tests/fs-gnmi-stream (driver +
# real store, no daemon, a tap that prints every sample; test_gnmi_daemon.sh runs the same
# driver inside fabricscope).
# Checked: values equal the scenario exactly (uint64 past 2^53, PROTO and JSON_IETF),
# TLS with a server-name override, a wrong CA refused, wrong credentials an auth error
# retried with backoff, Capabilities choosing the encoding, POLL, ONCE, ON_CHANGE with
# heartbeats, a malformed value rejected without losing the stream, a stream reset, a
# stalled stream detected and reconnected, and a server restart resumed with the gap left
# empty. A target that clamps a 100 ms sample interval to 2 s keeps its one stream (the
# stall bound follows the delivered cadence) and a real stall of it is still detected.
# Mutual TLS: a target that requires a client certificate streams to a client with one
# signed by its CA, and refuses one without a certificate or with a stranger's.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf live there, not in pyenv
SIMPY=$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py
CHECK=$FS_SOURCE_DIR/tests/sim/gnmi/check_samples.py
STREAM=$FS_BUILD_DIR/tests/fs-gnmi-stream
[ -x "$STREAM" ] || fail "build fs-gnmi-stream first"
$PY -c 'import grpc, google.protobuf' || fail "python3-grpcio / python3-protobuf missing"

# --- certificates: a CA, a server certificate for 127.0.0.1 and gnmi-sim.test, a stranger CA
cd "$T"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=fs-test-ca 2>/dev/null
openssl req -x509 $ec -keyout ca2.key -out ca2.pem -days 2 -subj /CN=fs-stranger-ca 2>/dev/null
openssl req $ec -keyout srv.key -out srv.csr -subj /CN=gnmi-sim 2>/dev/null
printf 'subjectAltName=DNS:gnmi-sim.test,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
  -extfile san.ext 2>/dev/null
# client certificates: one signed by the CA, one by the stranger CA
openssl req $ec -keyout cli.key -out cli.csr -subj /CN=fabricscope-client 2>/dev/null
openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2 2>/dev/null
openssl req $ec -keyout cli2.key -out cli2.csr -subj /CN=stranger-client 2>/dev/null
openssl x509 -req -in cli2.csr -CA ca2.pem -CAkey ca2.key -CAcreateserial -out cli2.pem -days 2 2>/dev/null
printf 'admin\n' >user.txt
printf 's3cret-pw\n' >pw.txt
printf 'wrong-pw\n' >badpw.txt
# Counters start past 2^53; the device clock runs 2.5 s ahead; a surge on Eth1/2 tc 3.
boot=$(($(date +%s) - 100))
cat >scenario.json <<JSON
{"ports": 4, "counter_base": 9007199254740993, "clock_offset_ms": 2500, "boot_epoch_s": $boot,
 "congestion": {"port": 2, "tc": 3, "period_s": 4, "duration_s": 2, "phase_s": 0}}
JSON

# start_sim NAME PORT ARGS... : starts a simulator, waits until it listens.
start_sim() {
  local name=$1 port=$2
  shift 2
  rm -f "$T/$name.port"
  $PY "$SIMPY" --gen-dir "$T/gen" --scenario "$T/scenario.json" --port "$port" \
    --port-file "$T/$name.port" "$@" >>"$T/$name.log" 2>&1 &
  eval "${name}_PID=$!"
  track "$!"
  for _ in $(seq 100); do [ -s "$T/$name.port" ] && return 0; sleep 0.1; done
  fail "simulator $name did not start"
}

# wait_line FILE REGEX SECS : waits until a line of FILE matches.
wait_line() {
  for _ in $(seq $(($3 * 20))); do grep -Eq "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  fail "no line /$2/ in $(basename "$1") within $3 s"
}

stat_of() { awk -v k="$2" '$1=="stats" {for (i=2;i<=NF;i++) {split($i,a,"="); if (a[1]==k) print a[2]}}' "$1"; }

TLS_PORT=$(free_tcp_port)
start_sim tls "$TLS_PORT" --tls-cert srv.pem --tls-key srv.key --username admin \
  --password-file pw.txt --control "$T/tls.ctl"
PLAIN_PORT=$(free_tcp_port)
start_sim plain "$PLAIN_PORT" --encodings JSON_IETF,JSON

TLS=(--port "$TLS_PORT" --ca ca.pem --username admin --password-file pw.txt)
QUEUES="/qos/interfaces/interface[interface-id=Eth1/2]/output/queues,sample,200"
PFC="/qos/interfaces/interface[interface-id=Eth1/2]/switch-priority,sample,200"
IFS_="/interfaces/interface[name=*]/state,sample,300"

# --- STREAM, PROTO, TLS, credentials: exact values
"$STREAM" "${TLS[@]}" --encoding proto --path "$QUEUES" --path "$PFC" --path "$IFS_" \
  --duration-ms 1500 >a.out 2>a.log || fail "stream tool failed (PROTO)"
$PY "$CHECK" scenario.json a.out --need-big --min-rounds 4 --min-samples 200 >a.check ||
  { cat a.check >&2; fail "PROTO values differ from the scenario"; }
[ "$(stat_of a.out downs)" = 0 ] && [ "$(stat_of a.out syncs)" = 1 ] ||
  fail "PROTO stream not clean: $(grep ^stats a.out)"
[ "$(stat_of a.out encoding)" = PROTO ] || fail "encoding $(stat_of a.out encoding)"
grep -q '^store fabric_queue_ecn_marked_packets_total interface=Eth1/2,tc=3 ' a.out ||
  fail "queue ECN series missing from the store"
ok "STREAM PROTO over TLS: $(tail -1 a.check)"

# --- JSON_IETF, server name checked against the certificate's DNS name
"$STREAM" "${TLS[@]}" --server-name gnmi-sim.test --encoding json_ietf --path "$QUEUES" \
  --path "$IFS_" --duration-ms 1200 >b.out 2>b.log || fail "stream tool failed (JSON_IETF)"
$PY "$CHECK" scenario.json b.out --need-big --min-rounds 3 --min-samples 100 >b.check ||
  { cat b.check >&2; fail "JSON_IETF values differ from the scenario"; }
[ "$(stat_of b.out encoding)" = JSON_IETF ] || fail "encoding $(stat_of b.out encoding)"
ok "STREAM JSON_IETF with server-name override: $(tail -1 b.check)"

# --- a CA that did not sign the server certificate: refused, retried, no data
"$STREAM" --port "$TLS_PORT" --ca ca2.pem --username admin --password-file pw.txt \
  --path "$QUEUES" --backoff-ms 200,400 --exit-after-downs 2 --duration-ms 15000 >c.out 2>c.log
[ "$(stat_of c.out downs)" -ge 2 ] || fail "wrong CA: no failed attempts: $(grep ^stats c.out)"
[ "$(stat_of c.out syncs)" = 0 ] && ! grep -q '^sample' c.out || fail "wrong CA: data arrived"
grep -Eq 'event .* down 1 UNAVAILABLE.*(certificate verify failed|[Hh]andshake)' c.out || fail "wrong CA: $(grep 'event.*down' c.out | head -1)"
ok "wrong CA refused ($(grep -m1 'event [0-9]* down ' c.out | cut -d' ' -f5-))"

# --- wrong password: UNAUTHENTICATED, retried after the backoff
"$STREAM" --port "$TLS_PORT" --ca ca.pem --username admin --password-file badpw.txt \
  --path "$QUEUES" --backoff-ms 500,2000 --exit-after-downs 2 --duration-ms 15000 >d.out 2>d.log
grep -q 'event .* down 1 UNAUTHENTICATED' d.out || fail "wrong password: $(grep 'down' d.out | head -1)"
grep -q auth-failed tls.log || fail "the simulator saw no failed login"
t1=$(awk '$3=="down" && $4==1 {print $2}' d.out)
t2=$(awk '$3=="down" && $4==2 {print $2}' d.out)
[ -n "$t2" ] && [ $((t2 - t1)) -ge 350 ] || fail "no backoff between auth failures (${t1}ms, ${t2}ms)"
! grep -q 'wrong-pw' d.out d.log || fail "the password appeared in the output"
ok "wrong credentials: auth error, retried after $((t2 - t1)) ms"

# --- Capabilities chooses the encoding (this target offers JSON_IETF and JSON only)
"$STREAM" --port "$PLAIN_PORT" --insecure --path "$QUEUES" --duration-ms 800 >e.out 2>e.log
[ "$(stat_of e.out encoding)" = JSON_IETF ] || fail "auto encoding chose $(stat_of e.out encoding)"
$PY "$CHECK" scenario.json e.out --need-big >e.check || { cat e.check >&2; fail "auto: values"; }
ok "encoding chosen from Capabilities (JSON_IETF)"

# --- POLL: a Poll per interval on one stream, each answered with a snapshot and a sync
"$STREAM" --port "$PLAIN_PORT" --insecure --mode poll --interval-ms 300 --path "$QUEUES" \
  --exit-after-syncs 4 --duration-ms 10000 >f.out 2>f.log
[ "$(stat_of f.out syncs)" -ge 4 ] && [ "$(stat_of f.out attempts)" = 1 ] ||
  fail "POLL: $(grep ^stats f.out)"
[ "$(grep -c '^poll' plain.log)" -ge 3 ] || fail "POLL: the target saw $(grep -c '^poll' plain.log) polls"
$PY "$CHECK" scenario.json f.out --min-rounds 4 >f.check || { cat f.check >&2; fail "POLL: values"; }
ok "POLL: $(stat_of f.out syncs) snapshots on one stream"

# --- ONCE: a snapshot, the target ends the stream, reopened after the interval
"$STREAM" --port "$PLAIN_PORT" --insecure --mode once --interval-ms 300 --path "$QUEUES" \
  --exit-after-syncs 3 --duration-ms 10000 >g.out 2>g.log
[ "$(stat_of g.out syncs)" -ge 3 ] && [ "$(stat_of g.out downs)" = 0 ] || fail "ONCE: $(grep ^stats g.out)"
grep -q 'conn done' g.out || fail "ONCE: the stream never ended normally"
[ "$(grep -c 'stream-end once' plain.log)" -ge 3 ] || fail "ONCE: target ended $(grep -c 'stream-end once' plain.log) streams"
ok "ONCE: $(stat_of g.out syncs) snapshots, each on its own stream"

# --- ON_CHANGE with heartbeats: quiet values still arrive every heartbeat; no stall
"$STREAM" --port "$PLAIN_PORT" --insecure \
  --path "/qos/interfaces/interface[interface-id=Eth1/1]/output/queues/queue[name=0]/state/ecn-marked-pkts,on_change,0,400" \
  --duration-ms 2100 >h.out 2>h.log
[ "$(stat_of h.out downs)" = 0 ] || fail "ON_CHANGE: stream went down: $(grep down h.out | head -1)"
n=$(grep -c '^sample' h.out)
[ "$n" -ge 4 ] && [ "$n" -le 8 ] || fail "ON_CHANGE + 400 ms heartbeat: $n samples in 2.1 s"
$PY "$CHECK" scenario.json h.out --min-rounds 4 >h.check || { cat h.check >&2; fail "ON_CHANGE: values"; }
ok "ON_CHANGE with heartbeats ($n samples of an unchanging counter in 2.1 s)"

# --- faults on one long stream: malformed values, reset, stall, server restart
"$STREAM" "${TLS[@]}" --path "$QUEUES" --stall-ms 800 --backoff-ms 200,1000 \
  --exit-after-syncs 4 --duration-ms 40000 >i.out 2>i.log &
SP=$!
track $SP
wait_line i.out 'sync 1$' 10
echo "malformed 2" >"$T/tls.ctl"
wait_line tls.log 'control malformed' 5
sleep 0.6 # two 200 ms sample rounds go by with bad values
echo reset >"$T/tls.ctl"
wait_line i.out 'down 1 UNAVAILABLE' 10
wait_line i.out 'sync 2$' 10
echo "stall 3" >"$T/tls.ctl"
wait_line i.out 'down 2 stalled' 10
wait_line i.out 'sync 3$' 10
kill "$tls_PID"
wait "$tls_PID" 2>/dev/null || true
wait_line i.out 'down 3 ' 10
sleep 1 # the target stays away for a while: the gap
start_sim tls "$TLS_PORT" --tls-cert srv.pem --tls-key srv.key --username admin \
  --password-file pw.txt --control "$T/tls.ctl"
wait "$SP" || fail "stream tool failed during faults"
[ "$(stat_of i.out syncs)" -ge 4 ] || fail "no resync after the restart: $(grep ^stats i.out)"
[ "$(stat_of i.out rejected)" -gt 0 ] || fail "malformed values were not rejected"
$PY "$CHECK" scenario.json i.out --need-big --min-rounds 5 >i.check ||
  { cat i.check >&2; fail "values after faults differ from the scenario"; }
# The gap: no sample between the last one before the kill and the first after the restart.
gap_ms=$(awk '$1=="sample" {print $2}' i.out | sort -un |
  awk 'NR>1 {d=($1-p)/1e6; if (d>m) m=d} {p=$1} END {printf "%d", m}')
[ "$gap_ms" -ge 1000 ] || fail "no gap across the restart (largest step ${gap_ms} ms)"
ok "faults: malformed rejected ($(stat_of i.out rejected)), reset, stall detected, restart resumed; gap ${gap_ms} ms"

# --- a target that clamps the 100 ms sample interval to 2 s (as devices with a minimum
# do): the derived stall bound (3 x 100 ms, at least 1 s) follows the delivered 2 s
# cadence instead of reconnecting in a loop; a real stall is still detected, after about
# 3 x 2 s.
CLAMP_PORT=$(free_tcp_port)
start_sim clamp "$CLAMP_PORT" --clamp-interval 2 --control "$T/clamp.ctl"
"$STREAM" --port "$CLAMP_PORT" --insecure --encoding proto \
  --path "/interfaces/interface[name=Eth1/1]/state/counters,sample,100" \
  --backoff-ms 200,1000 --exit-after-downs 1 --duration-ms 40000 >j.out 2>j.log &
SP=$!
track $SP
wait_line j.out 'sync 1$' 10
wait_line clamp.log 'clamp 0.100 -> 2.000' 5
# rounds: distinct device timestamps of the samples
_rounds() { [ "$(awk '$1=="sample" {print $2}' j.out | sort -u | wc -l)" -ge "$1" ]; }
for _ in $(seq 200); do _rounds 5 && break; sleep 0.1; done
_rounds 5 || fail "clamped: fewer than 5 rounds in 20 s: $(grep -c '^sample' j.out) samples"
! grep -q 'down' j.out || fail "clamped target reconnected: $(grep down j.out | head -1)"
t_stall=$(date +%s%N)
echo "stall 30" >"$T/clamp.ctl"
wait_line j.out 'down 1 stalled' 15
t_down=$(date +%s%N)
wait "$SP" || fail "stream tool failed (clamp)"
took=$(((t_down - t_stall) / 1000000))
[ "$took" -ge 4000 ] && [ "$took" -le 10000 ] || fail "stall detected after $took ms (want ~6 s)"
grep -q 'delivered_gap_seconds":[12]\.' j.out || fail "delivered gap not shown: $(grep describe j.out)"
ok "clamped to 2 s: one stream over 5 rounds, a stall found after $took ms ($(grep -o '"stall_after_seconds":[0-9.]*' j.out))"

# --- mutual TLS: the target requires a client certificate signed by ca.pem
MTLS_PORT=$(free_tcp_port)
start_sim mtls "$MTLS_PORT" --tls-cert srv.pem --tls-key srv.key --client-ca ca.pem
"$STREAM" --port "$MTLS_PORT" --ca ca.pem --cert cli.pem --key cli.key --path "$QUEUES" \
  --exit-after-syncs 1 --duration-ms 10000 >k.out 2>k.log || fail "stream tool failed (mTLS)"
[ "$(stat_of k.out syncs)" = 1 ] && [ "$(stat_of k.out downs)" = 0 ] || fail "mTLS: $(grep ^stats k.out)"
grep -q '^sample' k.out || fail "mTLS: no data"
ok "mTLS with a client certificate signed by the target's CA: synced"
for who in none stranger; do
  if [ $who = none ]; then args=(); else args=(--cert cli2.pem --key cli2.key); fi
  "$STREAM" --port "$MTLS_PORT" --ca ca.pem "${args[@]}" --path "$QUEUES" \
    --backoff-ms 200,400 --exit-after-downs 2 --duration-ms 15000 >l.out 2>l.log
  [ "$(stat_of l.out downs)" -ge 2 ] && [ "$(stat_of l.out syncs)" = 0 ] ||
    fail "mTLS ($who): not refused: $(grep ^stats l.out)"
  ! grep -q '^sample' l.out || fail "mTLS ($who): data arrived"
  reason=$(grep -m1 'event [0-9]* down ' l.out | cut -d' ' -f5-)
  if [ $who = none ]; then want='may require a client certificate'; else want='may not accept this client certificate'; fi
  echo "$reason" | grep -q "UNAVAILABLE.*$want" || fail "mTLS ($who): unclear refusal: $reason"
  ok "mTLS without a valid client certificate ($who) refused: $reason"
done

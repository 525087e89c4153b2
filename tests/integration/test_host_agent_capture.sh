#!/usr/bin/env bash
# The host agent's predicted capture with real perf: the collector polls the simulated
# switch (onyx-snmp-sim behind snmpd) whose Eth1/49 tc 3 surges every 8 s for 2 s; during
# each surge an nftables rule drops 30% of a real TCP stream's packets in a network
# namespace. The agent (capture: targets [tor1], lead 2 s, length 4 s) polls
# /api/v1/incidents, arms a window around the next predicted surge and runs
# `perf record -k mono -a` in it (its hook logs each window), imports `perf script
# --header` and posts the retransmits with its measured offset. Checked: a window opened
# before a surge began and closed after it ended; /api/v1/correlate for that surge lists
# the stream's retransmits inside it on the collector's axis, matched to the flow rule;
# the raw file was deleted (keep_raw false). The collector wants a bearer token on its API
# (http.bearer_token_file): the agent's polls carry it. Then `host-agent --once` run as an
# unprivileged user: perf refuses, one clear error naming the fix, exit 1; as root with
# CAP_PERFMON its only capability (the systemd unit's setting), --once captures. Last,
# the collector is stopped while a window is armed: the capture's events are spooled and
# reach the restarted collector once each.
# The agent's wall clock runs 40 ms behind the collector's: it runs under libfaketime
# (FAKETIME=-0.04, CLOCK_MONOTONIC left alone), which its perf children inherit, so perf's
# `# reference time` is on the same shifted clock (a time namespace cannot do this: it
# does not shift CLOCK_REALTIME). The agent must measure -40 ms and place the
# retransmits on the collector's axis with it: uncorrected they would land 40 ms early.
# Needs root (network namespaces, nftables, perf -a) and libfaketime.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces, nftables, perf)"
for c in perf nft ip setpriv; do command -v "$c" >/dev/null || fail "needs $c"; done
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
[ -f "$FAKETIME_LIB" ] || fail "needs libfaketime (scripts/install-deps.sh)"

NS=fsagt-$$-$RANDOM
NFT_TABLE=fsagt
agent_capture_cleanup() {
  if ip netns list | grep -qw "$NS"; then
    ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns exec "$NS" nft delete table inet "$NFT_TABLE" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
  fi
  return 0
}
trap 'rc=$?; agent_capture_cleanup; set +e; (exit $rc); cleanup' EXIT
trap 'exit 130' INT TERM

start_snmp_sim --cong-port 49 --cong-tc 3
export SNMP_PERSISTENT_DIR=$T/snmp/persist MIBS=""
HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/token"
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/token }
http: { bearer_token_file: $T/token }
flow_rules:
  - { name: nccl-sockets, protocol: tcp, dst_ports: 50000-50999 }
targets:
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: 1s,
            timeout: 500ms, retries: 1, max_repetitions: 50 }
YML
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
AUTH="Authorization: Bearer $(cat "$T/token")"

# ---- the TCP stream in a network namespace; drops on the input hook (see test_acceptance)
DPORT=$((50000 + RANDOM % 1000))
ip netns add "$NS" || fail "ip netns add $NS"
ip netns exec "$NS" ip link set lo up mtu 1500
ip netns exec "$NS" ip route replace local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1 rto_min 20ms
ip netns exec "$NS" ip route replace local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1 rto_min 20ms
printf 'table inet %s {\n  chain in { type filter hook input priority 0; policy accept; }\n}\n' "$NFT_TABLE" |
  ip netns exec "$NS" nft -f - || fail "nftables table in $NS"
cat >"$T/stream.py" <<'PYEOF'
# A rate-limited bulk TCP stream on loopback: receiver and sender.
import socket, sys, threading, time
port = int(sys.argv[1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(1)
def sink():
    c, _ = srv.accept()
    while c.recv(1 << 16):
        pass
threading.Thread(target=sink, daemon=True).start()
s = socket.create_connection(("127.0.0.1", port))
buf = b"x" * 16384
print("streaming", flush=True)
while True:
    s.sendall(buf)
    time.sleep(0.0025)
PYEOF
ip netns exec "$NS" $PY "$T/stream.py" "$DPORT" >"$T/stream.log" 2>&1 &
track $!
wait_for 10 "the TCP stream runs" grep -q streaming "$T/stream.log"

# ---- the surges: switch congestion (SIGUSR2 toggles the simulator) and packet loss together;
# the toggle times are written as they happen ("on T" / "off T", seconds since the epoch).
cat >"$T/surges.py" <<'PYEOF'
import os, signal, subprocess, sys, time
sim, ns, table, dport, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
period, dur, count = 8.0, 2.0, 12
t0 = time.time() + 2
def nft(*w):
    subprocess.run(["ip", "netns", "exec", ns, "nft"] + list(w), check=True)
with open(out, "a", buffering=1) as f:
    for k in range(count):
        time.sleep(max(0, t0 + k * period - time.time()))
        on = time.time()  # before the rule exists: no drop, so no retransmit, before it
        nft("add", "rule", "inet", table, "in", "tcp", "dport", dport, "numgen", "random", "mod", "10", "<", "3", "drop")
        os.kill(sim, signal.SIGUSR2)
        f.write("on %.6f\n" % on)
        time.sleep(max(0, t0 + k * period + dur - time.time()))
        nft("flush", "chain", "inet", table, "in")
        os.kill(sim, signal.SIGUSR2)
        f.write("off %.6f\n" % time.time())  # after the rule is gone
PYEOF
$PY "$T/surges.py" "$SIM_PID" "$NS" "$NFT_TABLE" "$DPORT" "$T/surges.txt" >"$T/surges.log" 2>&1 &
SURGES_PID=$!
track "$SURGES_PID"

# ---- the agent
AM=$(free_tcp_port)
cat >"$T/agent.yaml" <<YML
collector: { url: $URL, token_file: $T/token }
host: gpu-node-3
state_dir: $T/state
clock: { interval: 1s }
capture:
  targets: [tor1]
  poll: 1s
  lead: 2s
  length: 4s
  min_interval: 1s
  max_length: 10s
  events: [tcp:tcp_retransmit_skb, skb:kfree_skb]
  hook: echo "\$FS_WINDOW_PHASE \$FS_WINDOW_START_NS \$FS_WINDOW_END_NS" >>$T/hook.txt
metrics: { listen: 127.0.0.1:$AM }
YML
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" --check-config >/dev/null || fail "agent config refused"
# ASan wants to come first among the loaded libraries; libfaketime must (LD_PRELOAD).
FAKETIME=-0.04 FAKETIME_DONT_FAKE_MONOTONIC=1 LD_PRELOAD=$FAKETIME_LIB \
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
  "$FABRICSCOPE" host-agent -c "$T/agent.yaml" >"$T/agent.log" 2>&1 &
AGENT_PID=$!
track "$AGENT_PID"
captures() { curl -fsS "http://127.0.0.1:$AM/metrics" | awk '$1 == "fabricscope_host_agent_captures_total" {print $2}'; }
captured() { local n; n=$(captures); [ -n "$n" ] && [ "$n" -ge 1 ]; }
wait_for 100 "the agent captured a predicted surge" captured
grep -q 'capture armed' "$T/agent.log" || fail "no window was armed"
off=$(curl -fsS "http://127.0.0.1:$AM/metrics" | awk '$1 == "fabricscope_host_agent_clock_offset_seconds" {print $2}')
awk -v o="$off" 'BEGIN { exit !(o > -0.045 && o < -0.035) }' || fail "the agent measured ${off}s, want -0.040 ± 0.005"
ok "the agent armed a window from /api/v1/incidents and imported a capture: $(grep 'events placed' "$T/agent.log" | head -n1 | sed 's/.*msg=//')"

# ---- a window that opened before a surge began and closed after it ended, and its
# retransmits inside that surge on the collector's axis.
$PY - "$T/hook.txt" "$T/surges.txt" "$off" >"$T/covered.txt" <<'PYEOF' || fail "no captured window covers a surge: $(cat "$T/hook.txt") / $(cat "$T/surges.txt")"
import sys
# The hook's window is on the agent's clock: collector time = host time - offset.
off = float(sys.argv[3])
wins = [(int(l.split()[1]) / 1e9 - off, int(l.split()[2]) / 1e9 - off)
        for l in open(sys.argv[1]) if l.startswith("start ")]
ev = [l.split() for l in open(sys.argv[2])]
surges = [(float(ev[i][1]), float(ev[i + 1][1])) for i in range(0, len(ev) - 1, 2)]
for s, e in surges:
    for ws, we in wins:
        if ws < s and we > e:
            print("%.6f %.6f %.6f %.6f" % (s, e, ws, we))
            sys.exit(0)
sys.exit(1)
PYEOF
read -r S E WS WE <"$T/covered.txt"
ok "window [$WS, $WE] opened $(awk -v a="$S" -v b="$WS" 'BEGIN{printf "%.2f", a-b}') s before the surge [$S, $E] and closed after it"
check_correlate() {
  curl -fsS -H "$AUTH" --get "$URL/api/v1/correlate" --data-urlencode "window=$S,$E" >"$T/cw.json" || return 1
  $PY - "$T/cw.json" "$S" "$E" "$DPORT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
s, e, dport = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rt = [o for o in d["events"][0]["other_host_events"]
      if o["kind"] == "perf.tcp_retransmit_skb" and str(o["attrs"].get("dport")) == dport]
assert rt, "no retransmit of port %s in the surge window" % dport
# None just before the drops began: placed without the -40 ms offset, the retransmits of
# the first drops (an RTO, rto_min 20 ms, after them) would land up to 40 ms before the
# surge. They trail the drops by an RTO at most a few times over. A retransmit far from
# the surge is the stream's own (a tail-loss probe or a spurious timeout while a loaded
# machine delays ACKs: one came 446 ms before a surge in a busy run) and says nothing
# about the placement; there may be a few, not as many as the surge's.
near = [o for o in rt if s - 0.1 <= o["start"] <= e + 0.5]
stray = [round(o["start"] - s, 3) for o in rt if not s - 0.1 <= o["start"] <= e + 0.5]
bad = [o["start"] for o in near if o["start"] < s - 0.002]
assert near, "no retransmit near the surge [%s, %s]; others at %s s from it" % (s, e, stray[:5])
assert not bad, "retransmits before the surge [%s, %s]: %s" % (s, e, bad[:5])
assert len(stray) < len(near), "more retransmits away from the surge than in it: %s" % stray[:5]
assert all("nccl-sockets" in o.get("flow_rules", []) for o in rt), "not matched to the flow rule"
print(len(near))
PYEOF
}
wait_for 20 "/correlate lists the surge's retransmits" check_correlate
ok "/api/v1/correlate: $(check_correlate) retransmits of the stream inside the surge window, matched to nccl-sockets (agent clock offset ${off}s)"

# ---- perf refused: one clear error, exit 1 (an unprivileged user; perf_event_paranoid > -1)
if [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -gt -1 ]; then
  mkdir -p "$T/nobody"
  chmod 0711 "$T"
  chmod 0777 "$T/nobody"
  chmod 0644 "$T/token"
  sed "s|state_dir: .*|state_dir: $T/nobody/state|; /metrics:/d; /hook:/d" "$T/agent.yaml" >"$T/nobody/agent.yaml"
  chmod 0644 "$T/nobody/agent.yaml"
  set +e
  setpriv --reuid=65534 --regid=65534 --clear-groups "$FABRICSCOPE" host-agent -c "$T/nobody/agent.yaml" --once \
    >"$T/once.out" 2>"$T/once.log"
  rc=$?
  set -e
  [ $rc = 1 ] || fail "--once refused by perf exits $rc, want 1"
  [ "$(grep -c 'perf record into .* failed: fix:' "$T/once.log")" = 1 ] ||
    fail "want one error naming the fix: $(cat "$T/once.log")"
  ok "perf refused for an unprivileged user: one error with the fix, exit 1"
fi
# ---- root with CAP_PERFMON alone (as docker/fabricscope-host-agent.service runs it): works
sed "s|state_dir: .*|state_dir: $T/perfmon|; /metrics:/d; /hook:/d; s|length: 4s|length: 1s|" "$T/agent.yaml" \
  >"$T/perfmon.yaml"
setpriv --bounding-set -all,+perfmon --no-new-privs "$FABRICSCOPE" host-agent -c "$T/perfmon.yaml" --once \
  >"$T/perfmon.out" 2>"$T/perfmon.log" || fail "--once as root with CAP_PERFMON only: $(cat "$T/perfmon.log")"
grep -q '^fabricscope host-agent: captured' "$T/perfmon.out" || fail "--once printed: $(cat "$T/perfmon.out")"
ok "root with CAP_PERFMON as its only capability captures: $(cat "$T/perfmon.out")"
# ---- collector outage during a capture: the events are spooled and arrive once each
agent_metric() { curl -fsS "http://127.0.0.1:$AM/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
armed() { grep -c 'capture armed' "$T/agent.log" || true; }
armed_above() { [ "$(armed)" -gt "$1" ]; }
spooled() { local n; n=$(agent_metric fabricscope_host_agent_spool_events); [ -n "$n" ] && [ "$n" -gt 0 ]; }
spool_empty() { [ "$(agent_metric fabricscope_host_agent_spool_events)" = 0 ]; }
wait_for 60 "the next window is armed" armed_above "$(armed)"
kill -TERM "$FS_PID"
wait_exit "$FS_PID" 20
wait_for 60 "the window's events are spooled" spooled
N_SPOOLED=$(agent_metric fabricscope_host_agent_spool_events)
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
# Each spooled event is received once: stored, or (identical to another event of the
# same capture: same fields, same ns) counted as a duplicate; posted twice, the sum
# would double.
received() {
  curl -fsS -H "$AUTH" "$URL/metrics" | awk '$1 == "fabricscope_host_events_ingested_total" {i = $2}
    $1 == "fabricscope_host_events_duplicates_total" {d = $2} END {print i + d}'
}
received_is() { [ "$(received)" = "$1" ]; }
wait_for 40 "the $N_SPOOLED spooled events reach the restarted collector" received_is "$N_SPOOLED"
wait_for 10 "the spool is empty" spool_empty
[ "$(received)" = "$N_SPOOLED" ] || fail "received $(received) events, want $N_SPOOLED"
dups=$(curl -fsS -H "$AUTH" "$URL/metrics" | awk '$1 == "fabricscope_host_events_duplicates_total" {print $2}')
ok "collector stopped during a capture: its $N_SPOOLED events were spooled and arrived once each ($dups identical to another)"
kill -TERM "$AGENT_PID"
wait_exit "$AGENT_PID" 30
if grep -q 'Sanitizer' "$T/agent.log"; then fail "sanitizer report in the agent's log"; fi
# Stopped in the middle of a window, the agent imports what perf wrote so far: no error.
if grep -q 'level=error' "$T/agent.log"; then fail "errors in the agent's log: $(grep 'level=error' "$T/agent.log")"; fi
if ls "$T/state/"capture-* >/dev/null 2>&1; then fail "raw files kept: $(ls "$T/state")"; fi
ok "raw captures deleted after import (keep_raw: false)"

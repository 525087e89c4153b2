#!/usr/bin/env bash
# A hostile gNMI target's values cannot take the collector (issue 18; the oversized
# message is test_gnmi_hostile.sh). The simulator (real gRPC) sends target `bad`, in turn:
# a JSON value nested 100,000 deep, a 3 MB JSON value, values of the wrong types,
# notifications stamped 95 years ahead and behind, a million distinct unknown paths, and
# ten seconds of updates at unknown paths as fast as it can. For each, the bad values
# are counted by reason in /api/v1/targets (and logged once), `bad` keeps streaming
# (none of these ends its stream) and keeps its clock estimate; meanwhile target `calm`
# on another simulator keeps its 200 ms cadence, and the collector's resident memory
# stays within the stated per-target bound (the resolution cache: 4 MiB of entries plus
# its table; a JSON value: at most 1 MiB, parsed into about 32 MiB at most, freed at once).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf live there, not in pyenv
SIMPY=$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
$PY -c 'import grpc, google.protobuf' || fail "python3-grpcio / python3-protobuf missing"

cd "$T"
boot=$(($(date +%s) - 100))
printf '{"ports": 4, "clock_offset_ms": 0, "boot_epoch_s": %s}\n' "$boot" >scenario.json
start_gnmi() { # start_gnmi NAME: a plaintext simulator; sets PORT_<NAME>
  local port
  port=$(free_tcp_port)
  $PY "$SIMPY" --gen-dir "$T/gen-$1" --scenario "$T/scenario.json" --port "$port" \
    --port-file "$T/$1.port" --control "$T/$1.ctl" >>"$T/$1.log" 2>&1 &
  track $!
  wait_for 20 "the gNMI simulator $1 listens" test -s "$T/$1.port"
  printf -v "PORT_$1" '%s' "$port"
}
start_gnmi bad
start_gnmi calm

HTTP=$(free_tcp_port)
cat >fs.yaml <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: bad
    address: 127.0.0.1
    gnmi:
      port: $PORT_bad
      insecure: true
      encoding: proto
      stall_timeout: 30s # the simulator takes a while to build a million paths: not a stall
      subscriptions:
        - { path: "/interfaces/interface[name=*]/state/counters", mode: sample, interval: 200ms }
  - name: calm
    address: 127.0.0.1
    gnmi:
      port: $PORT_calm
      insecure: true
      encoding: proto
      subscriptions:
        - { path: "/interfaces/interface[name=*]/state/counters", mode: sample, interval: 200ms }
EOF
# ASan's quarantine keeps freed memory resident: without it, RSS shows what is held
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
start_fabricscope fs.yaml
targets() { curl -sf "http://127.0.0.1:$HTTP/api/v1/targets"; }
# inst TARGET KEY[.SUBKEY]: that member of the target's gNMI instance in /api/v1/targets
inst() { targets | $PY -c '
import json, sys
def walk(o):
    if isinstance(o, dict):
        yield o
        for v in o.values():
            yield from walk(v)
    elif isinstance(o, list):
        for v in o:
            yield from walk(v)
name, key = sys.argv[1:]
for o in walk(json.load(sys.stdin)):
    if o.get("target") == name and o.get("source") == "gnmi":
        v = o
        for k in key.split("."):
            v = v.get(k) if isinstance(v, dict) else None
        print(json.dumps(v) if isinstance(v, (dict, list)) else v)
        break' "$@"; }
_streaming() { for n in "$@"; do [ "$(inst "$n" gnmi_state)" = streaming ] || return 1; done; }
wait_for 30 "both targets stream" _streaming bad calm
_clock() { [ "$(inst bad clock_offset_seconds)" != None ]; }
wait_for 30 "bad's clock estimate is known" _clock
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$FS_PID/status"; }
# at_least TARGET KEY N: the member is a number >= N
at_least() { local v; v=$(inst "$1" "$2"); [ -n "$v" ] && [ "$v" != None ] && [ "$v" -ge "$3" ]; }
rss0=$(rss)
t_fault=$($PY -c 'import time; print(time.time())')
trace="start $rss0"

# 1. JSON nested 100,000 deep: json-c stops at 32 levels
echo "deepjson 100000" >"$T/bad.ctl"
wait_for 30 "the simulator sent the deep JSON" grep -q 'sent-deepjson' "$T/bad.log"
wait_for 10 "the deep JSON is counted" at_least bad rejected_by.json_too_deep 1
grep -q 'bad: values rejected (json_too_deep)' "$T/fabricscope.log" || fail "json_too_deep not logged"
trace="$trace deep $(rss)"
ok "JSON nested 100,000 deep: rejected as json_too_deep"

# 2. A 3 MB JSON value (under the 4 MiB message limit, over the 1 MiB JSON bound)
echo "bigjson 3000000" >"$T/bad.ctl"
wait_for 30 "the simulator sent the big JSON" grep -q 'sent-bigjson' "$T/bad.log"
wait_for 10 "the big JSON is counted" at_least bad rejected_by.json_too_large 1
trace="$trace bigjson $(rss)"
ok "a 3 MB JSON value: rejected as json_too_large, not parsed"

# 3. Values of the wrong types (string, negative, fraction, boolean, bytes for counters)
echo "malformed 3" >"$T/bad.ctl"
wait_for 10 "wrong types are counted" at_least bad rejected_by.wrong_type 10
ok "wrong value types: $(inst bad rejected_by.wrong_type) rejected as wrong_type"

# 4. Timestamps 95 years ahead and behind: not clock readings; the estimate stays
echo "skew 3000000000 3" >"$T/bad.ctl"
wait_for 10 "the simulator sent skewed stamps" grep -q 'sent-skew 3' "$T/bad.log"
echo "skew -3000000000 3" >"$T/bad.ctl"
wait_for 10 "the simulator sent stamps from the past" grep -q 'sent-skew -3' "$T/bad.log"
wait_for 10 "bad timestamps are counted" at_least bad bad_timestamps 6
grep -q 'bad: a notification timestamp more than a day' "$T/fabricscope.log" || fail "bad stamps not logged"
# The estimate must stay put while the seconds with the bad stamps close (each second is
# closed by the next notification): watched for 3 s.
t_watch=$(($(date +%s%N) + 3000000000))
while [ "$(date +%s%N)" -lt "$t_watch" ]; do
  off=$(inst bad clock_offset_seconds)
  $PY -c "import sys; sys.exit(0 if abs(float('$off')) < 1 else 1)" ||
    fail "bad's clock estimate followed the bad stamps: offset $off s"
done
ok "timestamps 95 years off: $(inst bad bad_timestamps) counted, clock estimate kept (offset $off s)"

# 5. A million distinct unknown paths (long names): counted unmapped, the cache bounded
u0=$(inst bad unmapped)
echo "paths 1000000" >"$T/bad.ctl"
wait_for 240 "the simulator sent a million paths" grep -q 'sent-paths' "$T/bad.log"
wait_for 30 "a million unknown paths are counted" at_least bad unmapped $((u0 + 1000000))
cbytes=$(inst bad cache_bytes)
[ "$cbytes" -le 4194304 ] || fail "the resolution cache holds $cbytes bytes"
at_least bad cache_overflow 1 || fail "no cache overflow counted"
trace="$trace paths $(rss)"
ok "a million distinct paths: $(inst bad cache_entries) cached in $cbytes bytes, $(inst bad cache_overflow) beyond the bound"

# 6. Ten seconds of updates at unknown paths at line rate
u1=$(inst bad unmapped)
echo "flood 10" >"$T/bad.ctl"
wait_for 120 "the simulator flooded" grep -q 'sent-flood' "$T/bad.log"
wait_for 10 "the flood is counted" at_least bad unmapped $((u1 + 1000))
nflood=$(grep -o 'sent-flood [0-9]*' "$T/bad.log" | awk '{print $2}')
trace="$trace flood $(rss)"
ok "flood: $nflood notifications of 1000 unknown paths in 10 s, $(($(inst bad unmapped) - u1)) counted unmapped"

# bad streamed throughout: none of this ended its stream
[ "$(inst bad downs)" = 0 ] || fail "bad's stream went down: $(inst bad last_error)"
_streaming bad calm || fail "a target is not streaming"
ok "bad kept its stream: $(inst bad rejected_by)"

# calm kept its cadence: its raw samples across the faults have no gap over 1 s
t_end=$($PY -c 'import time; print(time.time())')
curl -sfG "http://127.0.0.1:$HTTP/api/v1/raw" --data-urlencode 'match[]=fabric_port_bytes_total{target="calm"}' \
  --data-urlencode "start=$t_fault" --data-urlencode "end=$t_end" >calm.json || fail "raw query failed"
$PY - calm.json "$t_fault" "$t_end" <<'EOF' || fail "calm lost its cadence: $(head -c 300 calm.json)"
import json, sys
d = json.load(open(sys.argv[1]))
ts = sorted({float(p[0]) for r in d["data"]["result"] for p in r["values"]})
assert len(ts) >= 20, "too few samples: %d" % len(ts)
gap = max(b - a for a, b in zip(ts, ts[1:]))
print("calm: %d sample times over %.0f s, largest gap %.2f s" % (len(ts), ts[-1] - ts[0], gap))
sys.exit(0 if gap <= 1.0 else 1)
EOF
ok "the other target kept its 200 ms cadence"

# Memory: the bound per hostile target is the cache (4 MiB + 1 MiB table) plus one JSON
# value's parse (at most ~32 MiB, transient) on the shared thread; allow the allocator
# its slack on top.
rssn=$(rss)
echo "VmRSS (KiB) through the faults: $trace end $rssn"
[ $((rssn - rss0)) -lt 65536 ] || fail "memory grew by $((rssn - rss0)) KiB"
ok "resident memory through all the faults: +$((rssn - rss0)) KiB"
kill "$FS_PID"
wait_exit "$FS_PID" 20

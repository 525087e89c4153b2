#!/usr/bin/env bash
# The gNMI load generator (build/sim/gnmi-load, tests/sim/gnmi/gnmi_load.c) that the fleet
# bench drives 1,000 targets with, checked through the real driver: fs-gnmi-stream
# (driver + real store, no daemon) over gRPC on loopback, the bench's two paths (all
# interface counters and output queues of 64 ports), SAMPLE every 200 ms (group shape:
# 500 ms), PROTO.
# Checked, for each of 3 targets (one port each) and both message shapes:
# - every one of the 3,392 leaves arrives, with the value that target's port must carry
#   ((target + 1) * 1000000 + leaf index: a wrong target, a lost or wrong leaf fails),
#   the same in every round, in at least 3 rounds;
# - device timestamps (the 10-byte varint patched into each pre-encoded message) are
#   wall-clock nanoseconds, strictly advancing round after round, about the interval apart;
# - sample shape: a round is one Notification per subscription (320 + 3,072 updates);
#   group shape: one per interface (5) or per queue (6), with a prefix;
# - one fs-gnmi-stream with all 3 targets (--ports): all sync, none goes down;
# - the generator survives its clients' cancels and exits 0 on SIGTERM, having counted
#   every stream (under ASan: no leak report).
source "$(dirname "$0")/lib.sh"

LOAD=$FS_BUILD_DIR/sim/gnmi-load
STREAM=$FS_BUILD_DIR/tests/fs-gnmi-stream
[ -x "$LOAD" ] || fail "build gnmi-load first"
[ -x "$STREAM" ] || fail "build fs-gnmi-stream first"
cd "$T"

# paths SAMPLE_MS: the bench's two subscriptions at that interval, in PATHS
paths() {
  PATHS=(--path "/interfaces/interface[name=*]/state/counters,sample,$1"
    --path "/qos/interfaces/interface[interface-id=*]/output/queues,sample,$1")
}

# check OUT TARGET SHAPE: the samples fs-gnmi-stream printed for one target.
check() {
  /usr/bin/python3 - "$@" <<'EOF'
import sys, time, statistics
out, k, shape, ms = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
groups = {}  # device ts -> values, in arrival order
for line in open(out):
    f = line.split()
    if f and f[0] == "sample":
        groups.setdefault(int(f[1]), []).append(int(float(f[4])))
# leaf L = (port - 1) * 54 + j; j 5 (oper-status) is not under the two paths
expect = {(k + 1) * 1000000 + p * 54 + j for p in range(64) for j in range(54) if j != 5}
seen = {}
for vs in groups.values():
    for v in vs:
        seen[v] = seen.get(v, 0) + 1
bad = set(seen) - expect
if bad:
    sys.exit("target %d: %d unexpected values, e.g. %s" % (k, len(bad), sorted(bad)[:3]))
missing = expect - set(seen)
if missing:
    sys.exit("target %d: %d leaves never arrived, e.g. %s" % (k, len(missing), sorted(missing)[:3]))
rounds = min(seen.values())
if rounds < 3:
    sys.exit("target %d: some leaf arrived only %d times" % (k, rounds))
ts = list(groups)
if ts != sorted(ts) or len(set(ts)) != len(ts):
    sys.exit("target %d: device timestamps do not advance: %s" % (k, ts[:6]))
now = time.time_ns()
if not now - 120e9 < ts[-1] <= now:
    sys.exit("target %d: device timestamp %d is not the wall clock (%d)" % (k, ts[-1], now))
sizes = sorted({len(v) for v in groups.values()})
want = {"sample": [320, 3072], "group": [5, 6]}[shape]
# the run may end inside a message's samples: only the last group may be short
if sorted({len(v) for v in list(groups.values())[:-1]}) != want:
    sys.exit("target %d: %s notifications of %s updates, expected %s" % (k, shape, sizes, want))
# one counters notification a round: the gaps between them are the sample interval
starts = [t for t, v in groups.items() if v[0] % 1000000 == 0]  # Eth1/1 in-octets: once a round
gap = statistics.median(b - a for a, b in zip(starts, starts[1:])) / 1e6
if not ms / 2 <= gap <= ms * 5:
    sys.exit("target %d: rounds %.0f ms apart, asked %d" % (k, gap, ms))
print("target %d: all %d leaves, right values, %d rounds, %d notifications, rounds %.0f ms apart"
      % (k, len(expect), rounds, len(groups), gap))
EOF
}

for shape in sample group; do
  # group: 576 messages a round a target, which a sanitizer build on a busy machine
  # takes longer to decode: rounds 500 ms apart
  ms=200
  [ "$shape" = group ] && ms=500
  paths "$ms"
  "$LOAD" --targets 3 --threads 2 --messages "$shape" --port-file "$T/ports.$shape" \
    2>"$T/load-$shape.log" &
  pid=$!
  track "$pid"
  wait_for 20 "gnmi-load ($shape) listens" test -s "$T/ports.$shape"
  IFS=, read -r -a ports <"$T/ports.$shape"
  [ "${#ports[@]}" = 3 ] || fail "3 ports expected: $(cat "$T/ports.$shape")"

  # each target on its own: fs-gnmi-stream prints the samples of its (first) target
  spids=()
  for k in 0 1 2; do
    "$STREAM" --port "${ports[$k]}" --insecure --encoding proto "${PATHS[@]}" \
      --exit-after-sync-ms 3000 --duration-ms 120000 >"$T/t$k.$shape.out" 2>"$T/t$k-$shape.log" &
    spids+=($!)
  done
  for k in 0 1 2; do wait "${spids[$k]}" || fail "fs-gnmi-stream on target $k exit $?"; done
  for k in 0 1 2; do
    grep -q '^event .* sync 1' "$T/t$k.$shape.out" || fail "target $k ($shape) never synced"
    ! grep -q '^event .* down' "$T/t$k.$shape.out" ||
      fail "target $k ($shape) went down: $(grep -m1 down "$T/t$k.$shape.out")"
    res=$(check "$T/t$k.$shape.out" "$k" "$shape" "$ms" 2>&1) || fail "$shape: $res"
    ok "$shape: $res"
  done

  # all three in one collector process (the bench's way)
  "$STREAM" --ports "$(cat "$T/ports.$shape")" --targets 3 --insecure --encoding proto \
    --no-samples "${PATHS[@]}" --exit-when-all-synced --steady-ms 1000 --duration-ms 60000 \
    >"$T/fleet.$shape.out" 2>"$T/fleet-$shape.log" || fail "fs-gnmi-stream --targets 3 exit $?"
  grep -q '^rss_kib .* synced=3$' "$T/fleet.$shape.out" ||
    fail "not all 3 synced: $(grep ^rss_kib "$T/fleet.$shape.out")"
  grep -q '^fleet .* downs=0 ' "$T/fleet.$shape.out" || fail "a stream went down: $(grep ^fleet "$T/fleet.$shape.out")"
  min=$(awk '$1 == "fleet" { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == "min_target") print a[2] } }' "$T/fleet.$shape.out")
  [ "${min:-0}" -ge 3392 ] || fail "a target received less than a round in 1 s: $(grep ^fleet "$T/fleet.$shape.out")"
  ok "$shape: 3 targets in one fs-gnmi-stream synced, none down, fewest $min updates in 1 s"

  kill -TERM "$pid"
  wait "$pid" || fail "gnmi-load ($shape) exit $? on SIGTERM: $(tail -3 "$T/load-$shape.log")"
  grep -q '^stats streams=12 ' "$T/load-$shape.log" ||
    fail "gnmi-load ($shape) did not count 12 streams (3 targets x Capabilities + Subscribe, twice): $(grep ^stats "$T/load-$shape.log")"
  ! grep -qE 'Sanitizer' "$T/load-$shape.log" || fail "sanitizer report: $(grep -m3 Sanitizer "$T/load-$shape.log")"
  ok "$shape: gnmi-load saw every client cancel and exited 0: $(grep ^stats "$T/load-$shape.log")"
done

#!/usr/bin/env bash
# gNMI over real gRPC on loopback against the simulator (tests/sim/gnmi), through
# BUILD/tests/fs-gnmi-stream (driver + real store, no daemon).
#
#   gnmi_visible_latency_us   one target, SAMPLE every 100 ms: median time from the target's
#                             send timestamp (device clock = real clock here) to the
#                             notification's commit into the store, where /metrics reads it.
#                             It includes the simulator's own encoding and send, so it
#                             bounds the wanted "arrival on the socket -> /metrics" from above;
#                             gnmi_visible_latency_internal_us is arrival on the gRPC thread
#                             -> committed (decode, map, store).
#   gnmi_rss_kib_per_target   GNMI_BENCH_TARGETS (default 1000) concurrent streams, each its
#                             own channel and TCP connection, SAMPLE every 1 s: (RSS once all
#                             are synced - RSS before adding them) / targets.
# FS_BENCH_QUICK=1 (scripts/run-benches.sh --quick): 3 s of latency samples and 100 targets
# (about 20 s instead of 2 min); the per-target RSS is then a little higher (fixed costs
# shared by fewer targets).
set -euo pipefail
FS_SOURCE_DIR=${FS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
FS_BUILD_DIR=${FS_BUILD_DIR:-$FS_SOURCE_DIR/build}
STREAM=$FS_BUILD_DIR/tests/fs-gnmi-stream
if [ "${FS_BENCH_QUICK:-0}" = 1 ]; then
  N=${GNMI_BENCH_TARGETS:-100} LAT_MS=3000
else
  N=${GNMI_BENCH_TARGETS:-1000} LAT_MS=10000
fi
[ -x "$STREAM" ] || { echo "bench_gnmi_live: build fs-gnmi-stream first" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/fs-bench-gnmi.XXXXXX")
SIM_PID=""
cleanup() {
  [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
echo '{"ports": 4, "counter_base": 9007199254740993, "clock_offset_ms": 0}' >"$T/scenario.json"
/usr/bin/python3 "$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py" --gen-dir "$T/gen" \
  --scenario "$T/scenario.json" --port-file "$T/port" --max-workers $((N + 16)) 2>"$T/sim.log" &
SIM_PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { echo "bench_gnmi_live: simulator did not start" >&2; exit 1; }
PORT=$(cat "$T/port")
LEAF="/qos/interfaces/interface[interface-id=Eth1/1]/output/queues/queue[name=3]/state"

"$STREAM" --port "$PORT" --insecure --latency --no-samples --path "$LEAF,sample,100" \
  --duration-ms "$LAT_MS" >"$T/lat.out" 2>"$T/lat.log"
awk '$1=="latency" {for (i=2;i<=NF;i++) {split($i,a,"="); v[a[1]]=a[2]}
  printf "BENCH gnmi_visible_latency_us %d us\nBENCH gnmi_visible_latency_internal_us %d us\n",
  v["e2e_p50_us"], v["internal_p50_us"]}' "$T/lat.out"

ulimit -n $((N * 4 + 256)) 2>/dev/null || true
"$STREAM" --port "$PORT" --insecure --no-samples --targets "$N" --exit-when-all-synced \
  --path "$LEAF,sample,1000" --duration-ms 600000 >"$T/rss.out" 2>"$T/rss.log"
awk '$1=="rss_kib" {for (i=2;i<=NF;i++) {split($i,a,"="); v[a[1]]=a[2]}
  if (v["synced"] != v["targets"]) {print "bench_gnmi_live: only " v["synced"] " of " v["targets"] " synced" > "/dev/stderr"; exit 1}
  printf "BENCH gnmi_rss_kib_per_target %.0f KiB\n", (v["after"] - v["before"]) / v["targets"]}' "$T/rss.out"

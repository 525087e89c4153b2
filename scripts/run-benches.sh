#!/usr/bin/env bash
# Runs every benchmark: the binaries built into BUILD/bench/ (bench_ring, bench_scrape,
# bench_analysis, ...) and the scripts in tests/bench/*.sh (bench_correlate.sh runs the
# correlation acceptance test for correlate_time_to_culprit_s). Each prints lines
# `BENCH <name> <value> <unit>`.
#   scripts/run-benches.sh [BUILD] [--quick]
# --quick sets FS_BENCH_QUICK=1: benchmarks that honour it run a smaller workload
# (bench_gnmi_live.sh: 100 streams instead of 1,000; bench_onyx_fleet.sh: 100 ONYX
# targets instead of 500; bench_history.sh: 2,000 series instead of 10,000;
# bench_history_pod.sh: the 8-hour pod only, not the 24-hour 10,368-series one;
# bench_history_vm.sh: 2,000 series instead of 10,000).
set -uo pipefail
BUILD=build
export FS_BENCH_QUICK=${FS_BENCH_QUICK:-0}
for a in "$@"; do
  case $a in
    --quick) FS_BENCH_QUICK=1 ;;
    *) BUILD=$a ;;
  esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
export FS_SOURCE_DIR=$top FS_BUILD_DIR=$top/$BUILD
status=0
# The benchmarks the issues ask for must be there: a missing one is a failure, not a
# silently shorter report (bench_analysis_ring: correlate_ms, incidents_ms; bench_analysis:
# host_events_ingest_per_s, import_nsys_mb_per_s).
for want in bench_ring bench_scrape bench_analysis bench_analysis_ring; do
  [ -x "$top/$BUILD/bench/$want" ] || { echo "run-benches: $BUILD/bench/$want is not built" >&2; status=1; }
done
for b in "$top/$BUILD"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "# $(basename "$b")" >&2
  "$b" || status=1
done
for s in "$top"/tests/bench/*.sh; do
  [ -f "$s" ] || continue
  echo "# $(basename "$s")" >&2
  bash "$s" || status=1
done
exit $status

#!/usr/bin/env bash
# Runs every benchmark: the binaries built into BUILD/bench/ and the scripts in
# tests/bench/*.sh. Each prints lines `BENCH <name> <value> <unit>`.
#   scripts/run-benches.sh [BUILD] [--quick]
# --quick sets FS_BENCH_QUICK=1: benchmarks that honour it run a smaller workload
# (bench_gnmi_live.sh: 100 streams instead of 1,000).
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

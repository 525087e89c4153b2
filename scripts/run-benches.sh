#!/usr/bin/env bash
# Runs every benchmark: the binaries built into BUILD/bench/ and the scripts in
# tests/bench/*.sh. Each prints lines `BENCH <name> <value> <unit>`.
set -uo pipefail
BUILD=${1:-build}
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

#!/usr/bin/env bash
# Prometheus's own storage on the ring benchmark's data: bench_ring --openmetrics writes
# TOR 0 of the "Ring workload" (tests/bench/README.md) for its first 1,200 s as
# OpenMetrics text with timestamps, and prints the ring's bytes/sample on exactly those
# samples (ring_bytes_per_sample_all_prom_subset); promtool turns the same file into a
# TSDB block, whose files' total size / meta.json numSamples is
# prometheus_tsdb_bytes_per_sample_all.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${FS_BUILD_DIR:-$root/build}/bench/bench_ring
if ! command -v promtool >/dev/null; then
    echo "bench_prom_tsdb: promtool not found (Debian package prometheus)" >&2
    exit 1
fi
if [ ! -x "$bin" ]; then
    echo "bench_prom_tsdb: $bin not built" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" --openmetrics "$work/data.om"
promtool tsdb create-blocks-from openmetrics -q "$work/data.om" "$work/tsdb" >/dev/null
bytes=0
samples=0
for meta in "$work"/tsdb/*/meta.json; do
    dir=$(dirname "$meta")
    b=$(find "$dir" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    s=$(sed -n 's/.*"numSamples": *\([0-9]*\).*/\1/p' "$meta")
    bytes=$((bytes + b))
    samples=$((samples + s))
done
if [ "$samples" -eq 0 ]; then
    echo "bench_prom_tsdb: promtool produced no samples" >&2
    exit 1
fi
awk -v b="$bytes" -v s="$samples" \
    'BEGIN { printf "BENCH prometheus_tsdb_bytes_per_sample_all %.3f bytes\n", b / s }'
echo "BENCH prometheus_tsdb_samples $samples samples"

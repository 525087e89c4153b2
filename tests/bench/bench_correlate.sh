#!/usr/bin/env bash
# BENCH correlate_time_to_culprit_s: from the end of a congestion surge on the simulated
# switch until /api/v1/correlate (given that window) and /api/v1/incidents both name
# tor1 Eth1/49, measured by the integration test tests/integration/test_correlate.sh
# (which also checks the answers); its BENCH line is passed through.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$(bash "$top/tests/integration/test_correlate.sh" 2>&1) || {
  echo "$out" >&2
  exit 1
}
grep '^BENCH ' <<<"$out"

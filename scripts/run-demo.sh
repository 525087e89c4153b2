#!/usr/bin/env bash
# `make run`: starts the simulated switches on loopback, then fabricscope on
# config/demo.yaml (http://127.0.0.1:9464/). Ctrl-C stops everything it started.
set -euo pipefail
BUILD=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
run=$top/run/demo
mkdir -p "$run"
pids=()
stop_all() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -x tests/sim/stop-snmp-sim.sh ] && tests/sim/stop-snmp-sim.sh "$run/snmp" 2>/dev/null || true
}
trap stop_all INT TERM EXIT

# The simulated Spectrum switch behind a real snmpd on 127.0.0.1:16100 (not port 161).
if [ -x tests/sim/start-snmp-sim.sh ]; then
  printf 'fabricscope-demo\n' >"$run/community"
  chmod 600 "$run/community"
  tests/sim/start-snmp-sim.sh --build "$BUILD" --dir "$run/snmp" --port 16100 \
    --community-file "$run/community"
fi

echo "fabricscope: http://127.0.0.1:9464/  (Ctrl-C stops)"
"$BUILD/fabricscope" -c config/demo.yaml &
pids+=($!)
wait "${pids[@]}"

#!/usr/bin/env bash
# `make run`: starts the simulated switch on loopback (a real snmpd on 127.0.0.1:16100
# with the simulated Spectrum TOR attached as an AgentX subagent), then fabricscope on
# config/demo.yaml, serving http://127.0.0.1:9464/. Ctrl-C stops everything it started.
set -euo pipefail
BUILD=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
run=run/demo
mkdir -p "$run"
fs_pid=""
stop_all() {
  trap - INT TERM EXIT
  if [ -n "$fs_pid" ]; then kill "$fs_pid" 2>/dev/null || true; wait "$fs_pid" 2>/dev/null || true; fi
  bash tests/sim/start-snmp-sim.sh --stop "$run" >/dev/null 2>&1 || true
  echo "demo stopped"
}
trap 'stop_all; exit 0' INT TERM   # Ctrl-C is how the demo is meant to end
trap stop_all EXIT                 # fabricscope ending on its own keeps its exit code

# Writes run/demo/community, which config/demo.yaml names.
FS_BUILD_DIR=$top/$BUILD bash tests/sim/start-snmp-sim.sh --dir "$run" --port 16100 >/dev/null

echo "fabricscope demo: http://127.0.0.1:9464/ (Ctrl-C stops; logs follow)"
"$BUILD/fabricscope" -c config/demo.yaml &
fs_pid=$!
wait "$fs_pid"

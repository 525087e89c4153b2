#!/usr/bin/env bash
# `make run`: starts the simulated switches on loopback (a real snmpd on 127.0.0.1:16100
# with the simulated Spectrum TOR attached as an AgentX subagent; the gNMI simulator over
# plaintext gRPC on a free port it binds itself), writes run/demo/demo.yaml (config/demo.yaml
# with that port), then runs fabricscope on it, serving http://127.0.0.1:9464/. Ctrl-C
# stops everything it started.
set -euo pipefail
BUILD=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
run=run/demo
mkdir -p "$run"
fs_pid=""
gnmi_pid=""
stop_all() {
  trap - INT TERM EXIT
  if [ -n "$fs_pid" ]; then kill "$fs_pid" 2>/dev/null || true; wait "$fs_pid" 2>/dev/null || true; fi
  if [ -n "$gnmi_pid" ]; then kill "$gnmi_pid" 2>/dev/null || true; wait "$gnmi_pid" 2>/dev/null || true; fi
  bash tests/sim/start-snmp-sim.sh --stop "$run" >/dev/null 2>&1 || true
  echo "demo stopped"
}
trap 'stop_all; exit 0' INT TERM   # Ctrl-C is how the demo is meant to end
trap stop_all EXIT                 # fabricscope ending on its own keeps its exit code

# Writes run/demo/community, which config/demo.yaml names.
FS_BUILD_DIR=$top/$BUILD bash tests/sim/start-snmp-sim.sh --dir "$run" --port 16100 >/dev/null

# The gNMI simulator (Debian's python3-grpcio, hence /usr/bin/python3) binds a free port
# (--port 0) and writes it to run/demo/gnmi.port. Plaintext: the demo stays on loopback.
# A congestion surge every 10 s on Eth1/49 tc 3 shows in the 100 ms queue depth and ECN.
cat >"$run/gnmi-scenario.json" <<'JSON'
{"congestion": {"port": 49, "tc": 3, "period_s": 10, "duration_s": 2, "phase_s": 0}}
JSON
rm -f "$run/gnmi.port"
/usr/bin/python3 tests/sim/gnmi/gnmi_sim.py --gen-dir "$run/gnmi-gen" --port 0 \
  --port-file "$run/gnmi.port" --scenario "$run/gnmi-scenario.json" >"$run/gnmi-sim.log" 2>&1 &
gnmi_pid=$!
for _ in $(seq 200); do
  [ -s "$run/gnmi.port" ] && break
  kill -0 "$gnmi_pid" 2>/dev/null || { cat "$run/gnmi-sim.log" >&2; echo "gNMI simulator did not start" >&2; exit 1; }
  sleep 0.1
done
[ -s "$run/gnmi.port" ] || { echo "gNMI simulator did not listen within 20 s" >&2; exit 1; }
gnmi_port=$(cat "$run/gnmi.port")
# The one line marked "gnmi-sim port" in config/demo.yaml gets the simulator's port.
sed -E "s/^( *)port: [0-9]+ (# gnmi-sim port.*)$/\1port: $gnmi_port \2/" config/demo.yaml >"$run/demo.yaml"
[ "$(grep -c "port: $gnmi_port # gnmi-sim port" "$run/demo.yaml")" = 1 ] ||
  { echo "config/demo.yaml lost its line marked '# gnmi-sim port'" >&2; exit 1; }
"$BUILD/fabricscope" --check-config "$run/demo.yaml" >/dev/null

echo "fabricscope demo: http://127.0.0.1:9464/ (Ctrl-C stops; logs follow)"
echo "  SNMP switch sim-tor1 on udp 127.0.0.1:16100, gNMI switch sim-leaf1 on 127.0.0.1:$gnmi_port (plaintext, demo only)"
"$BUILD/fabricscope" -c "$run/demo.yaml" &
fs_pid=$!
wait "$fs_pid"

#!/usr/bin/env bash
# `make run`: starts simulated switches on loopback and fabricscope on them, serving
# http://127.0.0.1:9464/. Ctrl-C stops everything it started.
#   - sim-tor1, one simulated Spectrum TOR reachable two ways (both simulators read one
#     scenario file, so their numbers agree):
#     SNMP: a real snmpd on 127.0.0.1:16100 with the simulator as an AgentX subagent
#     (tests/sim/start-snmp-sim.sh);
#     CLI: a real OpenSSH sshd on 127.0.0.1:16022 (or a free port) whose ForceCommand is
#     the ONYX CLI simulator (tests/sim/onyx/start-onyx-sim.sh; needs root for sshd and
#     its test user; without root the demo polls sim-tor1 over SNMP only and says so);
#   - sim-leaf1: the gNMI simulator over plaintext gRPC on a free port it binds itself.
# fabricscope runs on run/demo/demo.yaml: config/demo.yaml with those ports filled in.
set -euo pipefail
BUILD=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
run=run/demo
mkdir -p "$run"
fs_pid=""
gnmi_pid=""
cli_started=""
sim=""
sflow_pid=""
stop_all() {
  trap - INT TERM EXIT
  if [ -n "$fs_pid" ]; then kill "$fs_pid" 2>/dev/null || true; wait "$fs_pid" 2>/dev/null || true; fi
  if [ -n "$gnmi_pid" ]; then kill "$gnmi_pid" 2>/dev/null || true; wait "$gnmi_pid" 2>/dev/null || true; fi
  if [ -n "$sflow_pid" ]; then kill "$sflow_pid" 2>/dev/null || true; wait "$sflow_pid" 2>/dev/null || true; fi
  bash tests/sim/start-snmp-sim.sh --stop "$run" >/dev/null 2>&1 || true
  if [ -n "$cli_started" ]; then bash tests/sim/onyx/start-onyx-sim.sh --stop "$sim/cli" >/dev/null 2>&1 || true; fi
  if [ -n "$sim" ]; then rm -rf "$sim"; fi
  echo "demo stopped"
}
trap 'stop_all; exit 0' INT TERM   # Ctrl-C is how the demo is meant to end
trap stop_all EXIT                 # fabricscope ending on its own keeps its exit code

# One scenario for both simulators (the same boot time, hence the same counters). It and
# the CLI simulator live in a directory the simulator's user can reach (it runs as its
# own user under sshd, and the checkout may be private).
sim=$(mktemp -d "${TMPDIR:-/tmp}/fabricscope-demo.XXXXXX")
chmod 0755 "$sim"
/usr/bin/python3 -c 'import json, sys, time; json.dump({"boot_epoch_s": time.time(), "flow_rules": [{"name": "nccl-roce", "protocol": "udp", "dst_lo": 4791, "dst_hi": 4791, "tc": 3}, {"name": "nccl-sockets", "protocol": "tcp", "dst_lo": 50000, "dst_hi": 50999, "tc": 0}]}, open(sys.argv[1], "w"))' "$sim/scenario.json"
chmod 0644 "$sim/scenario.json"

# Writes run/demo/community, which config/demo.yaml names.
FS_BUILD_DIR=$top/$BUILD bash tests/sim/start-snmp-sim.sh --dir "$run" --port 16100 \
  -- --scenario "$sim/scenario.json" >/dev/null

# sim-tor1 also exports sFlow (tests/sim/sflow/sim_agent.py) from the same scenario to
# udp 127.0.0.1:16343: NCCL RoCEv2 and socket flows with CE marks, queue depth, drops.
rm -f "$run/sflow.ready"
/usr/bin/python3 tests/sim/sflow/sim_agent.py --scenario "$sim/scenario.json" \
  --collector 127.0.0.1:16343 --agent 127.0.0.1 --counter-interval 20 --sampling-rate 20000 \
  --ready-file "$run/sflow.ready" >"$run/sflow-sim.log" 2>&1 &
sflow_pid=$!
for _ in $(seq 200); do
  [ -s "$run/sflow.ready" ] && break
  kill -0 "$sflow_pid" 2>/dev/null || { cat "$run/sflow-sim.log" >&2; echo "sFlow simulator did not start" >&2; exit 1; }
  sleep 0.1
done

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

cli_port=16022
if [ "$(id -u)" != 0 ]; then
  echo "run-demo: not root: no sshd for the CLI simulator; sim-tor1 is polled over SNMP only" >&2
  /usr/bin/python3 - "$run/demo.yaml" <<'PY'
import sys
# the demo config without its cli: block (the lines indented under it)
out, skip = [], False
for line in open(sys.argv[1]):
    if line.strip() == "cli:":
        skip = True
        continue
    if skip and line.startswith("      "):
        continue
    skip = False
    out.append(line)
open(sys.argv[1], "w").write("".join(out))
PY
else
  if ss -Hltn "sport = :$cli_port" | grep -q .; then
    cli_port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    sed -i "s/^      port: 16022\$/      port: $cli_port/" "$run/demo.yaml"
  fi
  bash tests/sim/onyx/start-onyx-sim.sh --dir "$sim/cli" --port "$cli_port" \
    --scenario "$sim/scenario.json" >/dev/null
  cli_started=1
  # run/demo/cli/{password,known_hosts}, which the demo config names
  mkdir -p "$run/cli"
  cp "$sim/cli/password" "$sim/cli/known_hosts" "$run/cli/"
  chmod 0600 "$run/cli/password"
  echo "ONYX CLI simulator: ssh -p $cli_port fsonyx@127.0.0.1 (password in $run/cli/password)"
fi
"$BUILD/fabricscope" --check-config "$run/demo.yaml" >/dev/null

echo "fabricscope demo: http://127.0.0.1:9464/ (Ctrl-C stops; logs follow)"
echo "  sim-tor1: SNMP on udp 127.0.0.1:16100${cli_started:+, ONYX CLI on ssh 127.0.0.1:$cli_port}"
echo "  sim-tor1: sFlow from a simulated agent to udp 127.0.0.1:16343"
echo "  sim-leaf1: gNMI on 127.0.0.1:$gnmi_port (plaintext, demo only)"
"$BUILD/fabricscope" -c "$run/demo.yaml" &
fs_pid=$!
wait "$fs_pid"

#!/usr/bin/env bash
# Starts a private, real snmpd (Debian's `snmpd`) on loopback with its own config, port,
# AgentX socket, persistent directory, pid file and log, and (in sim mode) the simulated
# ONYX switch attached to it as an AgentX subagent. Never touches the system's snmpd.
#
#   start-snmp-sim.sh --dir DIR [--port N] [--mode sim|host] [--bin BUILD_SIM_BINARY]
#                     [--community-file F] [-- SIM ARGS...]
#   start-snmp-sim.sh --stop DIR
#
# --mode sim  (default) the subagent serves the system group, IF-MIB and MELLANOX-QOS-MIB
# --mode host snmpd serves the machine's own interfaces (no subagent)
# Default port 16100. Writes DIR/env.sh with SNMP_PORT, SNMP_COMMUNITY_FILE, SNMP_V3_USER,
# SNMP_V3_AUTH_FILE, SNMP_V3_PRIV_FILE (and SNMP_V3_USER2, SNMP_V3_AUTH2_FILE: a second
# user with the same priv password), SNMPD_PID, SIM_PID, for the caller to source.
# The v3 user (SHA-256 + AES-128) is created in this snmpd's own config (createUser).
set -euo pipefail

DIR="" PORT=16100 MODE=sim BIN="" COMMFILE="" STOP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --mode) MODE=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --community-file) COMMFILE=$2; shift 2 ;;
    --stop) STOP=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "start-snmp-sim.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

stop_dir() {
  local d=$1 f pid
  for f in "$d/sim.pid" "$d/snmpd.pid"; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
}

if [ -n "$STOP" ]; then
  stop_dir "$STOP"
  exit 0
fi
[ -n "$DIR" ] || { echo "start-snmp-sim.sh: --dir is required" >&2; exit 2; }
SNMPD=$(command -v snmpd || echo /usr/sbin/snmpd)
[ -x "$SNMPD" ] || { echo "start-snmp-sim.sh: snmpd not installed (apt-get install snmpd)" >&2; exit 2; }
mkdir -p "$DIR/persist"
DIR=$(cd "$DIR" && pwd)
chmod 700 "$DIR"
stop_dir "$DIR"

rand() { od -An -N12 -tx1 /dev/urandom | tr -d ' \n'; }
if [ -z "$COMMFILE" ]; then
  COMMFILE=$DIR/community
  [ -s "$COMMFILE" ] || { umask 077; rand > "$COMMFILE"; }
fi
COMMUNITY=$(head -n1 "$COMMFILE")
V3USER=fsmon
[ -s "$DIR/v3auth" ] || (umask 077; rand > "$DIR/v3auth")
[ -s "$DIR/v3priv" ] || (umask 077; rand > "$DIR/v3priv")
# A second user for tests that need two credential sets on one agent: net-snmp's USM
# table (manager side) is keyed by (engineID, user), so one user has one key per agent.
[ -s "$DIR/v3auth2" ] || (umask 077; rand > "$DIR/v3auth2")
# createUser lines are turned into keys in the persistent dir at the first start; a
# fresh persistent dir makes the files above the truth every time.
rm -rf "$DIR/persist" && mkdir -p "$DIR/persist"

umask 077
cat > "$DIR/snmpd.conf" <<EOF
[snmp] persistentDir $DIR/persist
agentaddress udp:127.0.0.1:$PORT
master agentx
agentXSocket $DIR/agentx.sock
agentXPerms 0600 0700
agentXTimeout 5
agentXRetries 1
rocommunity $COMMUNITY 127.0.0.1
createUser $V3USER SHA-256 "$(cat "$DIR/v3auth")" AES "$(cat "$DIR/v3priv")"
rouser $V3USER priv
createUser ${V3USER}2 SHA-256 "$(cat "$DIR/v3auth2")" AES "$(cat "$DIR/v3priv")"
rouser ${V3USER}2 priv
EOF
[ "$MODE" = sim ] || printf 'sysLocation fabricscope test rig\nsysContact nobody\n' >> "$DIR/snmpd.conf"

# In sim mode the subagent owns the system group and IF-MIB: snmpd's own modules for
# them are left out, so the host's interfaces never mix with the simulated ones.
EXCL=()
if [ "$MODE" = sim ]; then
  EXCL=(-I "-system_mib,ifTable,ifXTable,interfaces,ip,tcp,udp,icmp,ipAddressTable,inetNetToMediaTable,ipSystemStatsTable,ipv6InterfaceTable,hrSystem,hr_system,hrStorage,hrDevice,hrSWRun,hrSWInstalled,hrFSTable,hrProcessorTable,hrNetworkTable,hrDiskStorageTable,hrPartitionTable,diskio,lmSensors,ucd_snmp,vmstat,memory,loadave,proc,disk_hw,disk,pass,pass_persist,extend,dlmod,ipCidrRouteTable,inetCidrRouteTable,ipForward,at,tcpTable,udpTable,tcpListenerTable,udpEndpointTable,ip6,etherlike,rmon,notification_log")
fi
if ! SNMP_PERSISTENT_DIR=$DIR/persist MIBS="" "$SNMPD" -C -c "$DIR/snmpd.conf" \
  -p "$DIR/snmpd.pid" -Lf "$DIR/snmpd.log" "${EXCL[@]}"; then
  echo "start-snmp-sim.sh: snmpd failed to start:" >&2
  cat "$DIR/snmpd.log" >&2
  exit 1
fi

for _ in $(seq 100); do [ -s "$DIR/snmpd.pid" ] && break; sleep 0.05; done
[ -s "$DIR/snmpd.pid" ] || { echo "start-snmp-sim.sh: snmpd did not start, see $DIR/snmpd.log" >&2; cat "$DIR/snmpd.log" >&2; exit 1; }

SIM_PID=""
if [ "$MODE" = sim ]; then
  if [ -z "$BIN" ]; then
    BIN=${FS_BUILD_DIR:-$(dirname "$0")/../../build}/sim/onyx-snmp-sim
  fi
  [ -x "$BIN" ] || { echo "start-snmp-sim.sh: no simulator at $BIN (build target onyx-snmp-sim)" >&2; stop_dir "$DIR"; exit 1; }
  for _ in $(seq 100); do [ -S "$DIR/agentx.sock" ] && break; sleep 0.05; done
  SNMP_PERSISTENT_DIR=$DIR/persist MIBS="" setsid "$BIN" -x "$DIR/agentx.sock" --pidfile "$DIR/sim.pid" "$@" \
    >"$DIR/sim.log" 2>&1 < /dev/null &
  SIM_PID=$!
  echo "$SIM_PID" > "$DIR/sim.pid"
fi

# Ready when the agent answers (in sim mode: with the simulated switch's sysObjectID).
ok=""
for _ in $(seq 100); do
  out=$(MIBS="" snmpget -v2c -c "$COMMUNITY" -On -Oe -t 0.3 -r 0 "udp:127.0.0.1:$PORT" 1.3.6.1.2.1.1.2.0 2>/dev/null || true)
  if [ "$MODE" = sim ]; then
    case "$out" in *33049*) ok=1 ;; esac
  else
    [ -n "$out" ] && ok=1
  fi
  [ -n "$ok" ] && break
  sleep 0.1
done
if [ -z "$ok" ]; then
  echo "start-snmp-sim.sh: the agent did not answer on 127.0.0.1:$PORT" >&2
  tail -20 "$DIR/snmpd.log" >&2 || true
  [ -f "$DIR/sim.log" ] && tail -20 "$DIR/sim.log" >&2
  stop_dir "$DIR"
  exit 1
fi

cat > "$DIR/env.sh" <<EOF
SNMP_PORT=$PORT
SNMP_DIR=$DIR
SNMP_COMMUNITY_FILE=$COMMFILE
SNMP_V3_USER=$V3USER
SNMP_V3_AUTH_FILE=$DIR/v3auth
SNMP_V3_PRIV_FILE=$DIR/v3priv
SNMP_V3_USER2=${V3USER}2
SNMP_V3_AUTH2_FILE=$DIR/v3auth2
SNMPD_PID=$(cat "$DIR/snmpd.pid")
SIM_PID=$SIM_PID
EOF
echo "snmpd on udp:127.0.0.1:$PORT (mode $MODE), state in $DIR"

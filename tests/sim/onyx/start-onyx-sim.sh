#!/usr/bin/env bash
# Starts a private, real OpenSSH sshd on loopback whose ForceCommand is the ONYX CLI
# simulator (onyx_sim.py), with its own sshd_config, generated host key, pid file and log.
# Never touches the system's sshd or its config. Needs root (sshd's privilege separation,
# the test user); creates the test user with useradd if it is missing.
#
#   start-onyx-sim.sh --dir DIR [--port N] [--scenario FILE] [--user NAME]
#                     [--auth-methods LIST] [--hostkey-type ed25519|rsa|ecdsa]
#                     [--replay BIN TABLE]
#   start-onyx-sim.sh --rotate-hostkey DIR   new host key, sshd restarted on the same port
#   start-onyx-sim.sh --stop DIR             stops sshd, removes the run's files under /run
#
# --auth-methods is sshd's AuthenticationMethods (default "any": password,
# keyboard-interactive and publickey all accepted). Default port: a free one.
# --replay BIN TABLE: the forced command is BIN TABLE instead of the simulator: the
# canned-answer CLI (BUILD/sim/onyx-replay, tests/sim/onyx/onyx_replay.c) with a table
# recorded by onyx_record.py; both are copied into the run's directory. The scenario is
# then not read by the sessions (it was, when the table was recorded).
#
# The simulator runs as the test user, who may not be able to enter the checkout (a clone
# in root's home, or in any mode-0700 directory). So everything that user, or sshd on its
# behalf, reads (the simulator's code, sshd_config, host key, authorized_keys, the
# switch's saved state) is laid out per run in a fresh root-owned directory under /run
# (mode 0755, files 0644, the state directory the user's own), named in DIR/runtime-dir
# and removed by --stop. Before sshd starts, the forced command is run once as the test
# user and must greet like a switch: a simulator that cannot start fails here, in its own
# words. The scenario stays where the caller keeps it (tests rewrite it while sessions
# run), so the test user must be able to read it there; if it cannot, the directory in the
# way is named. DIR itself holds only what the caller uses (it may be private).
#
# Writes DIR/env.sh for the caller to source:
#   ONYX_SSH_PORT ONYX_SSH_USER ONYX_PASSWORD_FILE ONYX_KEY_FILE ONYX_KNOWN_HOSTS
#   ONYX_SCENARIO SSHD_PID ONYX_HOSTKEY_FP ONYX_STATE (the switch's ACLs, JSON)
#   ONYX_RUNTIME_DIR
# ONYX_KNOWN_HOSTS lists the host key as "[127.0.0.1]:PORT <type> <key>".
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR="" PORT="" SCENARIO="" USERNAME=fsonyx AUTH=any KEYTYPE=ed25519 STOP="" ROTATE=""
REPLAY_BIN="" REPLAY_TABLE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --scenario) SCENARIO=$2; shift 2 ;;
    --user) USERNAME=$2; shift 2 ;;
    --auth-methods) AUTH=$2; shift 2 ;;
    --hostkey-type) KEYTYPE=$2; shift 2 ;;
    --stop) STOP=$2; shift 2 ;;
    --rotate-hostkey) ROTATE=$2; shift 2 ;;
    --replay) REPLAY_BIN=$2; REPLAY_TABLE=$3; shift 3 ;;
    *) echo "start-onyx-sim.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

stop_sshd() {
  local d=$1 pid
  [ -s "$d/sshd.pid" ] || return 0
  pid=$(cat "$d/sshd.pid")
  if kill -0 "$pid" 2>/dev/null; then
    # Its sessions first: they are its children and outlive it (a fleet bench that
    # failed left 391 of them polled by nobody, at a load average of 200).
    pkill -TERM -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$d/sshd.pid"
}

# Stops the sshd and removes the run's directory.
stop_dir() {
  local d=$1 rt
  stop_sshd "$d"
  if [ -s "$d/runtime-dir" ]; then
    rt=$(cat "$d/runtime-dir")
    case "$rt" in /run/fabricscope-onyx-sim.* | /tmp/fabricscope-onyx-sim.*) rm -rf "$rt" ;; esac
    rm -f "$d/runtime-dir"
  fi
}

# Prints why USER cannot read PATH (the first directory on the way it cannot enter, or the
# file itself), or nothing when it can.
unreadable_because() {
  local user=$1 path=$2 d="" part
  local -a parts
  IFS=/ read -r -a parts <<<"${path#/}"
  for part in "${parts[@]}"; do
    d="$d/$part"
    if [ "$d" = "$path" ]; then
      su -s /bin/sh -c 'test -r "$1"' "$user" sh "$d" ||
        echo "$d ($(stat -c '%A %U' "$d")) is not readable by $user"
      return 0
    fi
    su -s /bin/sh -c 'test -x "$1"' "$user" sh "$d" ||
      { echo "$d ($(stat -c '%A %U' "$d")) cannot be entered by $user"; return 0; }
  done
}

start_sshd() {
  local d=$1 port=$2 rt
  rt=$(cat "$d/runtime-dir")
  mkdir -p /run/sshd
  chmod 0755 /run/sshd
  /usr/sbin/sshd -t -f "$rt/sshd_config" || { echo "start-onyx-sim.sh: bad sshd_config" >&2; exit 1; }
  /usr/sbin/sshd -f "$rt/sshd_config" -E "$d/sshd.log"
  # Ready when the pid file exists and the port accepts connections (deadline 10 s).
  for _ in $(seq 100); do
    if [ -s "$d/sshd.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "start-onyx-sim.sh: sshd did not start; log:" >&2
  cat "$d/sshd.log" >&2 || true
  exit 1
}

write_known_hosts() {
  local d=$1 port=$2
  printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$(cat "$d/runtime-dir")/hostkey.pub")" \
    >"$d/known_hosts"
}

if [ -n "$STOP" ]; then
  stop_dir "$STOP"
  exit 0
fi

if [ -n "$ROTATE" ]; then
  d=$ROTATE
  # shellcheck disable=SC1091
  . "$d/env.sh"
  rt=$(cat "$d/runtime-dir")
  stop_sshd "$d"
  rm -f "$rt/hostkey" "$rt/hostkey.pub"
  ssh-keygen -q -t "$(cat "$rt/hostkey.type")" -N '' -f "$rt/hostkey"
  start_sshd "$d" "$ONYX_SSH_PORT"
  fp=$(ssh-keygen -l -E sha256 -f "$rt/hostkey.pub" | awk '{print $2}')
  sed -i "s|^SSHD_PID=.*|SSHD_PID=$(cat "$d/sshd.pid")|; s|^ONYX_HOSTKEY_FP=.*|ONYX_HOSTKEY_FP=$fp|" "$d/env.sh"
  exit 0
fi

[ -n "$DIR" ] || { echo "start-onyx-sim.sh: --dir is required" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "start-onyx-sim.sh: needs root (sshd, useradd)" >&2; exit 1; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if [ -z "$PORT" ]; then
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
if [ -z "$SCENARIO" ]; then
  SCENARIO=$DIR/scenario.json
  [ -f "$SCENARIO" ] || echo '{}' >"$SCENARIO"
fi
SCENARIO=$(cd "$(dirname "$SCENARIO")" && pwd)/$(basename "$SCENARIO")
chmod 0644 "$SCENARIO"

# The test user: a password, and a key pair generated here.
if ! id "$USERNAME" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /tmp --shell /bin/sh "$USERNAME"
fi
why=$(unreadable_because "$USERNAME" "$SCENARIO")
if [ -n "$why" ]; then
  echo "start-onyx-sim.sh: the simulator's user cannot read its scenario: $why" >&2
  exit 1
fi
PASSWORD=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The user is shared by concurrent tests: keep the password of the first one alive.
PWFILE=/run/fabricscope-onyx-sim.$USERNAME.pw
if [ -s "$PWFILE" ]; then
  PASSWORD=$(cat "$PWFILE")
else
  (umask 077; printf '%s' "$PASSWORD" >"$PWFILE")
fi
echo "$USERNAME:$PASSWORD" | chpasswd
(umask 077; printf '%s\n' "$PASSWORD" >"$DIR/password")

stop_dir "$DIR"
# This run's directory: /run is root's and world-searchable on every Debian system.
base=/run
{ [ -d "$base" ] && [ -w "$base" ]; } || base=/tmp
RT=$(mktemp -d "$base/fabricscope-onyx-sim.XXXXXX")
chmod 0755 "$RT"
echo "$RT" >"$DIR/runtime-dir"
mkdir -m 0755 "$RT/sim" "$RT/sim/onyx"
install -m 0644 "$HERE/../scenario.py" "$RT/sim/scenario.py"
install -m 0644 "$HERE/onyx_sim.py" "$RT/sim/onyx/onyx_sim.py"
# The simulated switch's configuration (ACLs) outlives sessions: the user's to write.
mkdir -m 0700 "$RT/state"
chown "$USERNAME" "$RT/state"

rm -f "$DIR/client_key" "$DIR/client_key.pub"
ssh-keygen -q -t ed25519 -N '' -f "$DIR/client_key"
ssh-keygen -q -t "$KEYTYPE" -N '' -f "$RT/hostkey"
echo "$KEYTYPE" >"$RT/hostkey.type"
install -m 0644 "$DIR/client_key.pub" "$RT/authorized_keys"
write_known_hosts "$DIR" "$PORT"

# -B: the user cannot (and need not) write bytecode caches beside the code.
# sshd hands ForceCommand to the user's shell: the scenario's path is quoted for it.
q=\'
FORCE="/usr/bin/python3 -B $RT/sim/onyx/onyx_sim.py $q${SCENARIO//$q/$q\\$q$q}$q $RT/state/config.json"
if [ -n "$REPLAY_BIN" ]; then
  install -m 0755 "$REPLAY_BIN" "$RT/onyx-replay"
  install -m 0644 "$REPLAY_TABLE" "$RT/replay-table"
  FORCE="$RT/onyx-replay $RT/replay-table"
fi
cat >"$RT/sshd_config" <<EOF
# Private sshd for the ONYX simulator (tests only).
Port $PORT
ListenAddress 127.0.0.1
HostKey $RT/hostkey
PidFile "$DIR/sshd.pid"
AuthorizedKeysFile $RT/authorized_keys
StrictModes no
UsePAM yes
PasswordAuthentication yes
KbdInteractiveAuthentication yes
PubkeyAuthentication yes
AuthenticationMethods $AUTH
PermitRootLogin no
AllowUsers $USERNAME
MaxStartups 1000:30:2000
MaxSessions 10
LoginGraceTime 30
PrintMotd no
PrintLastLog no
Banner none
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitTTY yes
LogLevel VERBOSE
ForceCommand $FORCE
EOF

# The forced command, run once as the test user, must greet like a switch; otherwise every
# session would close before a prompt, and the cause belongs here, not in a poll's error.
for f in "$RT/sim/onyx/onyx_sim.py" "$RT/sim/scenario.py" "$RT/authorized_keys"; do
  why=$(unreadable_because "$USERNAME" "$f")
  [ -z "$why" ] || { echo "start-onyx-sim.sh: $why" >&2; stop_dir "$DIR"; exit 1; }
done
greeting=$(cd / && printf 'exit\n' | timeout 20 su -s /bin/sh -c "$FORCE" "$USERNAME" 2>&1) || true
case "$greeting" in
  *"Mellanox Switch"*) ;;
  *)
    echo "start-onyx-sim.sh: the simulator does not start as $USERNAME: ${greeting:-it printed nothing}" >&2
    stop_dir "$DIR"
    exit 1
    ;;
esac

start_sshd "$DIR" "$PORT"
FP=$(ssh-keygen -l -E sha256 -f "$RT/hostkey.pub" | awk '{print $2}')
cat >"$DIR/env.sh" <<EOF
ONYX_SSH_PORT=$PORT
ONYX_SSH_USER=$USERNAME
ONYX_PASSWORD_FILE=$DIR/password
ONYX_KEY_FILE=$DIR/client_key
ONYX_KNOWN_HOSTS=$DIR/known_hosts
ONYX_SCENARIO=$SCENARIO
SSHD_PID=$(cat "$DIR/sshd.pid")
ONYX_HOSTKEY_FP=$FP
ONYX_STATE=$RT/state/config.json
ONYX_RUNTIME_DIR=$RT
EOF

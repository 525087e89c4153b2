#!/usr/bin/env bash
# Starts a private, real OpenSSH sshd on loopback whose ForceCommand is the ONYX CLI
# simulator (onyx_sim.py), with its own sshd_config, generated host key, pid file and log.
# Never touches the system's sshd or its config. Needs root (sshd's privilege separation,
# the test user); creates the test user with useradd if it is missing.
#
#   start-onyx-sim.sh --dir DIR [--port N] [--scenario FILE] [--user NAME]
#                     [--auth-methods LIST] [--hostkey-type ed25519|rsa|ecdsa]
#   start-onyx-sim.sh --rotate-hostkey DIR   new host key, sshd restarted on the same port
#   start-onyx-sim.sh --stop DIR
#
# --auth-methods is sshd's AuthenticationMethods (default "any": password,
# keyboard-interactive and publickey all accepted). Default port: a free one.
# Writes DIR/env.sh for the caller to source:
#   ONYX_SSH_PORT ONYX_SSH_USER ONYX_PASSWORD_FILE ONYX_KEY_FILE ONYX_KNOWN_HOSTS
#   ONYX_SCENARIO SSHD_PID ONYX_HOSTKEY_FP ONYX_STATE (the switch's ACLs, JSON)
# ONYX_KNOWN_HOSTS lists the host key as "[127.0.0.1]:PORT <type> <key>".
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR="" PORT="" SCENARIO="" USERNAME=fsonyx AUTH=any KEYTYPE=ed25519 STOP="" ROTATE=""
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
    *) echo "start-onyx-sim.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

stop_dir() {
  local d=$1 pid
  [ -s "$d/sshd.pid" ] || return 0
  pid=$(cat "$d/sshd.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$d/sshd.pid"
}

start_sshd() {
  local d=$1 port=$2
  mkdir -p /run/sshd
  chmod 0755 /run/sshd
  /usr/sbin/sshd -t -f "$d/sshd_config" || { echo "start-onyx-sim.sh: bad sshd_config" >&2; exit 1; }
  /usr/sbin/sshd -f "$d/sshd_config" -E "$d/sshd.log"
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
  printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$d/hostkey.pub")" > "$d/known_hosts"
}

if [ -n "$STOP" ]; then
  stop_dir "$STOP"
  exit 0
fi

if [ -n "$ROTATE" ]; then
  d=$ROTATE
  # shellcheck disable=SC1091
  . "$d/env.sh"
  stop_dir "$d"
  rm -f "$d/hostkey" "$d/hostkey.pub"
  ssh-keygen -q -t "$(cat "$d/hostkey.type")" -N '' -f "$d/hostkey"
  start_sshd "$d" "$ONYX_SSH_PORT"
  fp=$(ssh-keygen -l -E sha256 -f "$d/hostkey.pub" | awk '{print $2}')
  sed -i "s|^SSHD_PID=.*|SSHD_PID=$(cat "$d/sshd.pid")|; s|^ONYX_HOSTKEY_FP=.*|ONYX_HOSTKEY_FP=$fp|" "$d/env.sh"
  exit 0
fi

[ -n "$DIR" ] || { echo "start-onyx-sim.sh: --dir is required" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "start-onyx-sim.sh: needs root (sshd, useradd)" >&2; exit 1; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
chmod 0755 "$DIR"
if [ -z "$PORT" ]; then
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
if [ -z "$SCENARIO" ]; then
  SCENARIO=$DIR/scenario.json
  [ -f "$SCENARIO" ] || echo '{}' > "$SCENARIO"
fi
SCENARIO=$(cd "$(dirname "$SCENARIO")" && pwd)/$(basename "$SCENARIO")
chmod 0644 "$SCENARIO"

# The test user: a password, and a key pair generated here.
if ! id "$USERNAME" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /tmp --shell /bin/sh "$USERNAME"
fi
# The simulator runs as that user: it must be able to read the scenario (tests rewrite it).
su -s /bin/sh -c "test -r '$SCENARIO'" "$USERNAME" ||
  { echo "start-onyx-sim.sh: $USERNAME cannot read $SCENARIO (directory permissions)" >&2; exit 1; }
PASSWORD=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The user is shared by concurrent tests: keep the password of the first one alive.
PWFILE=/run/fabricscope-onyx-sim.$USERNAME.pw
if [ -s "$PWFILE" ]; then
  PASSWORD=$(cat "$PWFILE")
else
  (umask 077; printf '%s' "$PASSWORD" > "$PWFILE")
fi
echo "$USERNAME:$PASSWORD" | chpasswd
(umask 077; printf '%s\n' "$PASSWORD" > "$DIR/password")

# The simulated switch's configuration (ACLs) outlives sessions: kept in a directory the
# user may write.
mkdir -p "$DIR/state"
chown "$USERNAME" "$DIR/state"
rm -f "$DIR/state/config.json"

rm -f "$DIR/client_key" "$DIR/client_key.pub" "$DIR/hostkey" "$DIR/hostkey.pub"
ssh-keygen -q -t ed25519 -N '' -f "$DIR/client_key"
ssh-keygen -q -t "$KEYTYPE" -N '' -f "$DIR/hostkey"
echo "$KEYTYPE" > "$DIR/hostkey.type"
cp "$DIR/client_key.pub" "$DIR/authorized_keys"
chmod 0644 "$DIR/authorized_keys"
write_known_hosts "$DIR" "$PORT"

cat > "$DIR/sshd_config" <<EOF
# Private sshd for the ONYX simulator (tests only).
Port $PORT
ListenAddress 127.0.0.1
HostKey $DIR/hostkey
PidFile $DIR/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
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
ForceCommand /usr/bin/python3 $HERE/onyx_sim.py $SCENARIO $DIR/state/config.json
EOF

stop_dir "$DIR"
start_sshd "$DIR" "$PORT"
FP=$(ssh-keygen -l -E sha256 -f "$DIR/hostkey.pub" | awk '{print $2}')
cat > "$DIR/env.sh" <<EOF
ONYX_SSH_PORT=$PORT
ONYX_SSH_USER=$USERNAME
ONYX_PASSWORD_FILE=$DIR/password
ONYX_KEY_FILE=$DIR/client_key
ONYX_KNOWN_HOSTS=$DIR/known_hosts
ONYX_SCENARIO=$SCENARIO
SSHD_PID=$(cat "$DIR/sshd.pid")
ONYX_HOSTKEY_FP=$FP
ONYX_STATE=$DIR/state/config.json
EOF

# Shared helpers for integration tests (sourced). Each test gets its own scratch dir,
# starts its peers on free loopback ports, and everything it started is stopped on exit.
# The scratch dir (logs included) is removed after a pass unless FS_KEEP_TMP is set.
set -euo pipefail

FS_SOURCE_DIR=${FS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FS_BUILD_DIR=${FS_BUILD_DIR:-$FS_SOURCE_DIR/build}
FABRICSCOPE=$FS_BUILD_DIR/fabricscope
T=$(mktemp -d "${TMPDIR:-/tmp}/fs-it.XXXXXX")
_pids=()
_onyx_sims=()

cleanup() {
  local rc=$?
  for p in "${_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  for d in "${_onyx_sims[@]}"; do
    bash "$FS_SOURCE_DIR/tests/sim/onyx/start-onyx-sim.sh" --stop "$d" >/dev/null 2>&1 || true
  done
  _release_ports
  if [ $rc -ne 0 ]; then
    echo "--- test failed (rc=$rc); logs in $T:" >&2
    for f in "$T"/*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -n 40 "$f" >&2; }; done
  elif [ -n "${FS_KEEP_TMP:-}" ]; then
    echo "scratch dir kept (FS_KEEP_TMP): $T" >&2
  else
    rm -rf "$T"
  fi
}
trap cleanup EXIT

# Remembers a background process to stop at exit.
track() { _pids+=("$1"); }

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }

# Ports handed out by free_tcp_port/free_udp_port are claimed until the test exits: some
# tests run two at a time (tests/CMakeLists.txt), and a port checked free but not yet bound
# by one must not be handed to the other. A claim is a symlink named after the port that
# points at the claiming test's PID (atomic to create); a claim whose test is gone is
# stale and taken over.
_port_claims=${TMPDIR:-/tmp}/fs-it-ports
_claim_port() {
  local f=$_port_claims/$1 owner
  mkdir -p "$_port_claims"
  ln -s "$$" "$f" 2>/dev/null && return 0
  owner=$(readlink "$f" 2>/dev/null) || return 1
  [ "$owner" != "$$" ] && ! kill -0 "$owner" 2>/dev/null || return 1
  rm -f "$f" && ln -s "$$" "$f" 2>/dev/null
}
_release_ports() {
  local f
  for f in "$_port_claims"/*; do
    [ -L "$f" ] && [ "$(readlink "$f")" = "$$" ] && rm -f "$f"
  done
  return 0
}

# A TCP port on 127.0.0.1 nobody listens on (random, checked with ss), below the kernel's
# ephemeral range (32768-60999 here), so no outgoing connection can take it between the
# check and the bind; claimed for this test (above).
free_tcp_port() {
  local p
  for _ in $(seq 200); do
    p=$((16000 + RANDOM % 16000))
    if ! ss -Hltn "sport = :$p" | grep -q . && _claim_port "$p"; then echo "$p"; return 0; fi
  done
  return 1
}

free_udp_port() {
  local p
  for _ in $(seq 200); do
    p=$((16000 + RANDOM % 16000))
    if ! ss -Hlun "sport = :$p" | grep -q . && _claim_port "$p"; then echo "$p"; return 0; fi
  done
  return 1
}

# Polls until a shell condition holds: wait_for SECS "what it waits for" CMD [ARG...].
# Fails the test with that description at the deadline. No fixed sleeps stand in for it.
wait_for() {
  local secs=$1 what=$2; shift 2
  local until=$((SECONDS + secs))
  while :; do
    "$@" >/dev/null 2>&1 && return 0
    [ $SECONDS -lt $until ] || fail "not within ${secs}s: $what"
    sleep 0.1
  done
}

# Lines of fabricscope.log matching an extended regex.
log_count() { grep -cE "$1" "$T/fabricscope.log" || true; }

# Sends SIGHUP and waits until the daemon logged the end of that reload (applied or
# refused): the next step sees its effects, not the previous configuration's.
hup() {
  local n; n=$(log_count 'reloaded |reload refused')
  kill -HUP "$FS_PID"
  wait_for 20 "reload #$((n + 1)) logged" _log_count_above 'reloaded |reload refused' "$n"
}
_log_count_above() { [ "$(log_count "$1")" -gt "$2" ]; }

# Waits until a process has exited (up to SECS); fails if it is still running.
wait_exit() {
  local pid=$1 secs=$2
  wait_for "$secs" "process $pid exits" _not_running "$pid"
}
_not_running() { ! kill -0 "$1" 2>/dev/null; }

# Waits until URL answers 200 (up to $2 seconds, default 20).
wait_http() {
  local url=$1 secs=${2:-20}
  for _ in $(seq $((secs * 10))); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$url did not answer within ${secs}s"
}

# Starts a TSDB that accepts connections and never answers (hung_tsdb.py): a line in LOG
# per connection, every connection closed and the server gone once the file RELEASE
# exists. Sets HUNG_PORT once it listens.
start_hung_tsdb() {
  HUNG_PORT=$(free_tcp_port)
  /usr/bin/python3 "$FS_SOURCE_DIR/tests/integration/hung_tsdb.py" "$HUNG_PORT" "$1" "$2" &
  track $!
  wait_for 60 "the hung TSDB listens on $HUNG_PORT" _listening "$HUNG_PORT"
}
_listening() { ss -Hltn "sport = :$1" | grep -q .; }

# Under a ThreadSanitizer build of BINARY only: Debian's gRPC, Abseil, c-ares and OpenSSL
# are not instrumented, so TSan cannot see their locking and flags the memory calls they
# make through its interceptors. Those calls are ignored (called_from_lib, one line per
# library the binary loads: a pattern matching two libraries is an error); accesses made
# by our own code, on whatever thread, stay checked.
tsan_ignore_uninstrumented_libs() {
  local bin=$1 supp=$T/tsan-uninstrumented.supp
  # Not `ldd | grep -q`: grep quitting at the first match can kill ldd with SIGPIPE,
  # and pipefail then took a TSan binary for an uninstrumented one (no suppressions).
  case "$(ldd "$bin")" in *libtsan*) ;; *) return 0 ;; esac
  # libstdc++: gRPC's C++ core allocates and fills (std::string) what it then hands to
  # another thread through its own, uninstrumented locks, e.g. a call's status details
  # built on one stream thread and read on the call's own; our code is C and calls none
  # of it.
  ldd "$bin" | awk '{print $1}' |
    grep -E '^lib(grpc|gpr|upb|address_sorting|re2|cares|absl_|ssl|crypto|stdc\+\+)' |
    sed 's/^/called_from_lib:/' >"$supp"
  export TSAN_OPTIONS="${TSAN_OPTIONS:-} suppressions=$supp"
}

# Starts fabricscope (or BINARY, a test build of its daemon) on CONFIG, logging to
# $T/fabricscope.log; sets FS_PID.
start_fabricscope() {
  "${2:-$FABRICSCOPE}" -c "$1" >"$T/fabricscope.log" 2>&1 &
  FS_PID=$!
  track "$FS_PID"
}

# Starts a Prometheus server scraping 127.0.0.1:$1/metrics every second, on a free port
# with its own config and data dir; sets PROM_PORT.
start_prometheus() {
  local target_port=$1
  PROM_PORT=$(free_tcp_port)
  mkdir -p "$T/prom-data"
  cat >"$T/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: fabricscope
    static_configs:
      - targets: ['127.0.0.1:$target_port']
YML
  # A free port can be taken by another process between the check and Prometheus'
  # bind (other test runs share the machine): then it exits at once, and another port
  # is tried.
  local pid
  for _ in 1 2 3 4 5; do
    prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom-data" \
      --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$T/prometheus.log" 2>&1 &
    pid=$!
    track $pid
    for _ in $(seq 600); do
      curl -fsS -o /dev/null "http://127.0.0.1:$PROM_PORT/-/ready" 2>/dev/null && return 0
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && fail "prometheus on $PROM_PORT not ready within 60s"
    grep -q 'address already in use' "$T/prometheus.log" || fail "prometheus exited: $(tail -n 3 "$T/prometheus.log")"
    PROM_PORT=$(free_tcp_port)
  done
  fail "prometheus found no free port in 5 tries"
}

# Runs an instant PromQL query against our Prometheus; prints the JSON.
prom_query() {
  curl -fsS --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"
}

# What a test of the ONYX CLI simulator behind a private sshd needs: root (sshd, a test
# user) and $T searchable by that user (the simulator re-reads its scenario there; its code
# and sshd's files are laid out under /run by the starter). Sets START (the simulator's
# starter) and PY.
onyx_sim_prereqs() {
  START=$FS_SOURCE_DIR/tests/sim/onyx/start-onyx-sim.sh
  [ "$(id -u)" = 0 ] || fail "needs root (sshd, test user)"
  PY=/usr/bin/python3
  chmod 0711 "$T"
}

# start_onyx_sim NAME [start-onyx-sim.sh args...]: the ONYX CLI simulator behind a private
# sshd in $T/NAME; sources its env.sh, stops it and removes its files at exit. A simulator
# that cannot start fails the test with the starter's reason.
start_onyx_sim() {
  local name=$1
  shift
  _onyx_sims+=("$T/$name")
  bash "$FS_SOURCE_DIR/tests/sim/onyx/start-onyx-sim.sh" --dir "$T/$name" "$@" \
    >"$T/start-$name.log" 2>&1 || fail "the ONYX simulator $name did not start: $(cat "$T/start-$name.log")"
  # shellcheck disable=SC1091
  source "$T/$name/env.sh"
  track "$SSHD_PID"
}

# cli_targets_up NAME...: writes $T/fs.yaml (listen on a free port, set in HTTP) with one
# CLI target per NAME, reached at SSH_PORT[NAME] with PWFILE[NAME] and KNOWN[NAME], polled
# every 2 s; starts fabricscope on it and waits for its HTTP server.
cli_targets_up() {
  HTTP=$(free_tcp_port)
  {
    echo "listen: 127.0.0.1:$HTTP"
    echo "targets:"
    for m in "$@"; do
      cat <<EOF
  - name: $m
    address: 127.0.0.1
    cli: { port: ${SSH_PORT[$m]}, username: $ONYX_SSH_USER, password_file: ${PWFILE[$m]},
           known_hosts: ${KNOWN[$m]}, interval: 2s }
EOF
    done
  } >"$T/fs.yaml"
  start_fabricscope "$T/fs.yaml"
  wait_http "http://127.0.0.1:$HTTP/healthz" 20
}

# Starts a private snmpd serving this machine's own interfaces and clock (no simulator)
# on a free UDP port. Sets PORT and everything in its env.sh (SNMP_COMMUNITY_FILE,
# SNMPD_PID, ...), and SNMP_PERSISTENT_DIR/MIBS for the net-snmp tools; stops at exit.
start_snmp_host() {
  PORT=$(free_udp_port)
  bash "$FS_SOURCE_DIR/tests/sim/start-snmp-sim.sh" --dir "$T/snmp" --port "$PORT" --mode host \
    >"$T/start.log" 2>&1 || { cat "$T/start.log" >&2; fail "snmpd did not start"; }
  source "$T/snmp/env.sh"
  track "$SNMPD_PID"
  export SNMP_PERSISTENT_DIR=$T/snmp/persist MIBS=""
}

# Starts the simulated switch (tests/sim) behind a private snmpd on a free UDP port;
# extra arguments go to the simulator. Sets SIM, PORT and everything in its env.sh
# (SNMP_COMMUNITY_FILE, SNMP_V3_*, SIM_PID, SNMPD_PID); both processes stop at exit.
start_snmp_sim() {
  SIM=$FS_BUILD_DIR/sim/onyx-snmp-sim
  [ -x "$SIM" ] || fail "build onyx-snmp-sim first"
  PORT=$(free_udp_port)
  bash "$FS_SOURCE_DIR/tests/sim/start-snmp-sim.sh" --dir "$T/snmp" --port "$PORT" --bin "$SIM" \
    -- "$@" >"$T/start.log" 2>&1 || { cat "$T/start.log" >&2; fail "simulator did not start"; }
  source "$T/snmp/env.sh"
  track "$SIM_PID"
  track "$SNMPD_PID"
}

# ---- a simulated ONYX TOR polled over SNMP, the ONYX CLI and gNMI (one scenario file,
# tests/sim/scenario.py), as test_acceptance.sh and tests/eval/eval_drivers.sh use it.

# The gNMI simulators' TLS material in $T: a CA (ca.pem), a server certificate for
# gnmi-sim.test and 127.0.0.1 (srv.pem, srv.key), and the password file gnmi-pw.txt.
make_gnmi_certs() {
  local ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  (
    cd "$T"
    # shellcheck disable=SC2086
    openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=fs-acc-ca 2>/dev/null
    # shellcheck disable=SC2086
    openssl req $ec -keyout srv.key -out srv.csr -subj /CN=gnmi-sim 2>/dev/null
    printf 'subjectAltName=DNS:gnmi-sim.test,IP:127.0.0.1\n' >san.ext
    openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
      -extfile san.ext 2>/dev/null
    umask 077
    printf 's3cret-gnmi-pw\n' >gnmi-pw.txt
  ) || fail "gNMI test certificates"
}

# Where each TOR's simulators listen, by TOR name (start_tor fills them).
declare -A SNMP_PORT COMM CLI_ENV GNMI_PORT

# start_tor NAME SCENARIO: the three simulators of one TOR on SCENARIO (readable by the
# ONYX simulator's user): onyx-snmp-sim behind a private snmpd, onyx_sim.py behind a
# private sshd (start_onyx_sim, in $T/cli-NAME) and gnmi_sim.py over TLS (make_gnmi_certs
# first). Needs root (onyx_sim_prereqs) and SNMP_PERSISTENT_DIR exported. Fills
# SNMP_PORT, COMM, CLI_ENV and GNMI_PORT for NAME; everything stops at exit.
start_tor() {
  local tor=$1 scen=$2 p
  p=$(free_udp_port)
  bash "$FS_SOURCE_DIR/tests/sim/start-snmp-sim.sh" --dir "$T/snmp-$tor" --port "$p" \
    --bin "$FS_BUILD_DIR/sim/onyx-snmp-sim" -- --scenario "$scen" >"$T/start-snmp-$tor.log" 2>&1 ||
    fail "SNMP simulator for $tor: $(cat "$T/start-snmp-$tor.log")"
  # shellcheck disable=SC1090
  source "$T/snmp-$tor/env.sh"
  track "$SIM_PID"
  track "$SNMPD_PID"
  SNMP_PORT[$tor]=$p
  COMM[$tor]=$SNMP_COMMUNITY_FILE

  start_onyx_sim "cli-$tor" --scenario "$scen"
  CLI_ENV[$tor]=$T/cli-$tor/env.sh

  /usr/bin/python3 "$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py" --gen-dir "$T/gen-$tor" --scenario "$scen" \
    --port 0 --port-file "$T/gnmi-$tor.port" --tls-cert "$T/srv.pem" --tls-key "$T/srv.key" \
    --username monitor --password-file "$T/gnmi-pw.txt" >"$T/gnmi-$tor.log" 2>&1 &
  track $!
  wait_for 30 "the gNMI simulator of $tor listens" test -s "$T/gnmi-$tor.port"
  GNMI_PORT[$tor]=$(cat "$T/gnmi-$tor.port")
}

# tor_target_yaml NAME: the TOR's entry under `targets:` (SNMP, ONYX CLI and gNMI at 1 s;
# gNMI queues at 500 ms). TOR_GNMI_MAX_DELIVERY_DELAY, when set, is the gNMI clock's
# assumed delivery delay (gnmi.clock_max_delivery_delay; default 5ms).
tor_target_yaml() {
  local tor=$1
  # shellcheck disable=SC1090
  source "${CLI_ENV[$tor]}"
  local delay=""
  [ -z "${TOR_GNMI_MAX_DELIVERY_DELAY:-}" ] ||
    delay="
      clock_max_delivery_delay: $TOR_GNMI_MAX_DELIVERY_DELAY"
  cat <<EOT
  - name: $tor
    address: 127.0.0.1
    snmp: { port: ${SNMP_PORT[$tor]}, version: 2c, community_file: ${COMM[$tor]}, interval: 1s,
            timeout: 800ms, retries: 1, max_repetitions: 50 }
    cli: { port: $ONYX_SSH_PORT, username: $ONYX_SSH_USER, password_file: $ONYX_PASSWORD_FILE,
           known_hosts: $ONYX_KNOWN_HOSTS, interval: 1s }
    gnmi:
      port: ${GNMI_PORT[$tor]}
      tls: { ca_file: $T/ca.pem, server_name: gnmi-sim.test }
      username: monitor
      password_file: $T/gnmi-pw.txt
      encoding: proto${delay}
      subscriptions:
        - { path: "/qos/interfaces/interface[interface-id=*]/output/queues", mode: sample, interval: 500ms }
        - { path: "/interfaces/interface[name=*]/state/counters", mode: sample, interval: 1s }
EOT
}

# tors_up URL NAME...: true when every named TOR is up over snmp, cli and gnmi in URL's
# /metrics (saved in $T/m.txt for further checks).
tors_up() {
  local url=$1 tor src
  shift
  curl -fsS "$url/metrics" >"$T/m.txt" || return 1
  for tor in "$@"; do
    for src in snmp cli gnmi; do
      grep -q "^fabricscope_target_up{target=\"$tor\",source=\"$src\"} 1" "$T/m.txt" || return 1
    done
  done
}

# The analysis API under load (test_api_lanes.sh, test_api_scrape_load.sh): the simulated
# switch polled as two targets (tor1, tor2) every second by a fabricscope started on
# $T/fs.yaml (EXTRA: more top-level YAML), tor1 polled, 20,000 host events of the last
# day posted. Sets HTTP, URL, TOKEN (and what start_snmp_sim and start_fabricscope set).
start_api_load() {
  start_snmp_sim --cong-port 49 --cong-tc 3
  HTTP=$(free_tcp_port)
  URL=http://127.0.0.1:$HTTP
  export SNMP_PERSISTENT_DIR=$T/snmp/persist MIBS=""
  TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  (umask 077; echo "$TOKEN" >"$T/he.token")
  cat >"$T/fs.yaml" <<YAML
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/he.token, memory_limit: 64MiB, retention: 2d }
${1:-}
targets:
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: 1s,
            timeout: 500ms, retries: 1, max_repetitions: 50 }
  - name: tor2
    address: 127.0.0.1
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: 1s,
            timeout: 500ms, retries: 1, max_repetitions: 50 }
YAML
  start_fabricscope "$T/fs.yaml"
  wait_http "$URL/healthz" 20
  polled() { curl -fsS "$URL/metrics" | grep -q '^fabricscope_target_up{.*tor1.*} 1'; }
  wait_for 30 "tor1 polled" polled

  # 20,000 events of one kind over the last day, for /correlate to consider.
  "$PY" - "$T/events.json" <<'PYEOF'
import json, random, sys, time
rnd = random.Random(32)
now = time.time_ns()
ev = []
for i in range(20000):
    s = now - rnd.randrange(60, 86000) * 10**9
    ev.append({"host": "h%d" % (i % 16), "kind": "nccl.kernel", "name": "AllReduce",
               "start": s, "end": s + rnd.randrange(1, 50) * 10**6})
json.dump({"host_offset_ns": 0, "host_offset_uncertainty_ns": 1000, "events": ev},
          open(sys.argv[1], "w"))
PYEOF
  code=$(curl -sS -o "$T/post.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' --data-binary @"$T/events.json" "$URL/api/v1/host-events")
  [ "$code" = 200 ] || fail "posting the events: $code $(cat "$T/post.out")"
}

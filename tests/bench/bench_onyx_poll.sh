#!/usr/bin/env bash
# ONYX CLI poll benchmark: the driver (build/tests/fs-onyx-poll: driver + store + one
# /metrics render per poll, no HTTP) polls the simulated 64-port switch (onyx_sim.py)
# behind a real sshd on loopback (tests/sim/onyx/start-onyx-sim.sh), one persistent shell.
# A full poll is 19 commands in one batch (clock, version, interfaces json, tc 0-7,
# pfc 0-7) and 64 congestion-control commands in two more (32 per batch).
#
# Prints (polls 2..N; poll 1 includes the SSH login):
#   BENCH onyx_poll_ms_64port           wall time of a full poll (includes the simulator's
#                                       own time to print ~380 KB of output: Python)
#   BENCH onyx_poll_cpu_ms_64port       collector process CPU (user+system) per poll
# How many sessions one core carries is measured with real sessions, not derived from
# these: bench_onyx_fleet.sh (onyx_sessions_per_core).
# Needs root (sshd, test user).
set -euo pipefail
FS_SOURCE_DIR=${FS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
FS_BUILD_DIR=${FS_BUILD_DIR:-$FS_SOURCE_DIR/build}
POLL=$FS_BUILD_DIR/tests/fs-onyx-poll
POLLS=${ONYX_BENCH_POLLS:-21}
[ -x "$POLL" ] || { echo "bench_onyx_poll: build fs-onyx-poll first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench_onyx_poll: needs root (sshd)" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/fs-bench-onyx.XXXXXX")
chmod 0711 "$T"
cleanup() {
  bash "$FS_SOURCE_DIR/tests/sim/onyx/start-onyx-sim.sh" --stop "$T/sim" || true
  rm -rf "$T"
}
trap cleanup EXIT
echo '{"ports": 64}' >"$T/scenario.json"
bash "$FS_SOURCE_DIR/tests/sim/onyx/start-onyx-sim.sh" --dir "$T/sim" --scenario "$T/scenario.json" >/dev/null
# shellcheck disable=SC1091
source "$T/sim/env.sh"
"$POLL" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --password-file "$ONYX_PASSWORD_FILE" \
  --known-hosts "$ONYX_KNOWN_HOSTS" --polls "$POLLS" --interval-ms 1000 --back-to-back \
  >"$T/out" 2>"$T/log" || { tail -n 3 "$T/out" "$T/log" >&2; exit 1; }
s=$(grep '^SUMMARY' "$T/out")
wall=$(sed -n 's/.*wall_ms_avg=\([0-9.]*\).*/\1/p' <<<"$s")
cpu=$(sed -n 's/.*cpu_ms_per_poll=\([0-9.]*\).*/\1/p' <<<"$s")
echo "BENCH onyx_poll_ms_64port $wall ms"
echo "BENCH onyx_poll_cpu_ms_64port $cpu ms"

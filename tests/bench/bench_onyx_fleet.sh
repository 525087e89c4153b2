#!/usr/bin/env bash
# A fleet of ONYX CLI targets polled by one fabricscope (issue 18): the daemon itself
# (BUILD/fabricscope, a generated YAML config, the scheduler spreading the targets over
# the interval), N targets with `cli: { interval: 10s }`, all sessions on the ONYX
# driver's one I/O thread, each a real SSH session (publickey login, a pty, one
# persistent shell) to ONE private sshd on loopback (tests/sim/onyx/start-onyx-sim.sh
# --replay). The sessions' forced command is onyx-replay (tests/sim/onyx/onyx_replay.c), a
# canned-answer CLI in C: a Python simulator per session would not fit 500 on 2 cores.
#
# Its answers are recorded from onyx_sim.py at start: the simulator (behind its own sshd)
# is polled twice by fs-onyx-poll --transcript; the commands the driver sent (83 a poll
# for a 64-port switch: clock, version, interfaces json, counters tc 0-7 and pfc prio
# 0-7, congestion-control json of the 64 ports) are answered by onyx_sim.Sim at successive
# device times 10 s apart (onyx_record.py), so counters move from poll to poll; `show
# clock` is answered from the real clock. Before the fleet starts, one fs-onyx-poll target
# against the replay must produce exactly the series it produced against the simulator.
#
# The daemon starts with no targets (RSS before); reloads (SIGHUP) add them
# ONYX_FLEET_STEP (50) at a time, the next step once all are up or after two intervals
# (why: below), the sshd and its sessions niced by 10. Once an
# interval passed in which no poll failed, a steady window of ONYX_FLEET_WINDOW_S
# (default 60 s) is measured:
#   onyx_fleet_targets           N (every target must poll ok in every interval of the
#                                window: no error, timeout, partial or overrun counted in
#                                /api/v1/targets' poll_errors, and floor(window/10 s) - 1 or
#                                more new polls seen for each target)
#   onyx_fleet_polls_ok_per_interval  good polls seen / (N x window / 10 s) (about 1.0)
#   onyx_io_thread_cpu_per_s     CPU seconds per wall second of the ONYX I/O thread over
#                                the window (/proc/PID/task/TID/schedstat). The thread is
#                                the one blocked in epoll_wait on an epoll instance
#                                holding at least N fds (/proc/PID/task/TID/syscall and
#                                fdinfo): only the driver's I/O thread watches every session
#   onyx_sessions_per_core       N / onyx_io_thread_cpu_per_s: how many sessions polled
#                                every 10 s one core carries, measured at N real sessions
#   onyx_rss_kib_per_target      (RSS at the window's end - RSS before the reload) / N: the
#                                driver's sessions and buffers plus the store's series
#                                (5,442 a target) with the samples held by then (10-40
#                                polls, the ramp included)
#   onyx_fleet_poll_ms_p99       p99 of the poll durations in the window
#                                (last_poll_duration_seconds of /api/v1/targets, read
#                                every 2 s; each new last_poll is one poll)
# If a poll of the window was not good the figures go to stderr and the bench fails.
# Comment lines give the whole process's CPU, the peer side's (sshd + replay) CPU and the
# RSS growth during the window. Needs root (sshd, the test user).
# ONYX_FLEET_TARGETS (default 500; FS_BENCH_QUICK=1: 100), ONYX_FLEET_WINDOW_S (60).
set -euo pipefail
FS_SOURCE_DIR=${FS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
FS_BUILD_DIR=${FS_BUILD_DIR:-$FS_SOURCE_DIR/build}
FS=$FS_BUILD_DIR/fabricscope
POLL=$FS_BUILD_DIR/tests/fs-onyx-poll
REPLAY=$FS_BUILD_DIR/sim/onyx-replay
SIMDIR=$FS_SOURCE_DIR/tests/sim/onyx
if [ "${FS_BENCH_QUICK:-0}" = 1 ]; then
  N=${ONYX_FLEET_TARGETS:-100}
else
  N=${ONYX_FLEET_TARGETS:-500}
fi
WINDOW=${ONYX_FLEET_WINDOW_S:-60}
STEP=${ONYX_FLEET_STEP:-50}
INTERVAL=10
for b in "$FS" "$POLL" "$REPLAY"; do
  [ -x "$b" ] || { echo "bench_onyx_fleet: build $(basename "$b") first" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "bench_onyx_fleet: needs root (sshd)" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/fs-bench-onyx-fleet.XXXXXX")
chmod 0711 "$T"
FS_PID=""
cleanup() {
  if [ -n "$FS_PID" ]; then
    kill "$FS_PID" 2>/dev/null || true
    wait "$FS_PID" 2>/dev/null || true
  fi
  bash "$SIMDIR/start-onyx-sim.sh" --stop "$T/sim" || true
  bash "$SIMDIR/start-onyx-sim.sh" --stop "$T/replay" || true
  rm -rf "$T"
}
trap cleanup EXIT
t_start=$(date +%s)
# ---- the answers: recorded from the Python simulator
python3 -c 'import json, sys, time
json.dump({"ports": 64, "boot_epoch_s": time.time() - 86400}, open(sys.argv[1], "w"))' "$T/scenario.json"
chmod 0644 "$T/scenario.json"
bash "$SIMDIR/start-onyx-sim.sh" --dir "$T/sim" --scenario "$T/scenario.json" >/dev/null
poll_one() { # poll_one ENV OUT [ARGS]: one target, 2 polls back to back (the first one,
  # login included, has 9 s: a loaded machine)
  local env=$1 out=$2
  shift 2
  # shellcheck disable=SC1090
  (source "$env" && "$POLL" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --key-file "$ONYX_KEY_FILE" \
    --known-hosts "$ONYX_KNOWN_HOSTS" --polls 2 --interval-ms 10000 --back-to-back --print-metrics "$@") \
    >"$out" 2>"$out.log" || { echo "bench_onyx_fleet: fs-onyx-poll failed:" >&2; tail -n 3 "$out" "$out.log" >&2; exit 1; }
}
poll_one "$T/sim/env.sh" "$T/sim.out" --transcript "$T/transcript"
bash "$SIMDIR/start-onyx-sim.sh" --stop "$T/sim"
# snapshots for every poll of the run, so that counters move in the window: the ramp (two
# intervals a step at most), the wait for a quiet interval, the window, and room
python3 -B "$SIMDIR/onyx_record.py" --scenario "$T/scenario.json" --commands "$T/transcript" \
  --out "$T/table" --snapshots $(((N + STEP - 1) / STEP * 2 + WINDOW / INTERVAL + 30)) \
  --step-s "$INTERVAL" >"$T/record.log"
bash "$SIMDIR/start-onyx-sim.sh" --dir "$T/replay" --replay "$REPLAY" "$T/table" >/dev/null
# shellcheck disable=SC1091
source "$T/replay/env.sh"
# The peer side (sshd and the sessions it forks) runs niced: it stands in for 500 switches'
# own CPUs, and on this machine's 2 cores it must not starve the collector it serves
# (under other load, a starved I/O thread misses logins, which then retry: a storm).
renice -n 10 -p "$SSHD_PID" >/dev/null
poll_one "$T/replay/env.sh" "$T/replay.out"
series() { grep '^fabric_' "$1" | sed 's/ .*//' | sort; }
if ! cmp -s <(series "$T/sim.out") <(series "$T/replay.out"); then
  echo "bench_onyx_fleet: the replay's series differ from the simulator's:" >&2
  diff <(series "$T/sim.out") <(series "$T/replay.out") | head -5 >&2
  exit 1
fi
NSERIES=$(series "$T/replay.out" | wc -l)

# ---- the daemon: no targets, then N
ulimit -n $((N * 4 + 1024))
HTTP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cfg() { # cfg NTARGETS
  {
    echo "listen: 127.0.0.1:$HTTP"
    echo "storage: { memory_limit: $((N * 16 + 256))MiB }"
    echo "targets:"
    [ "$1" -gt 0 ] || echo "  []"
    for i in $(seq 1 "$1"); do
      echo "  - name: onyx$i"
      echo "    address: 127.0.0.1"
      echo "    cli: { port: $ONYX_SSH_PORT, username: $ONYX_SSH_USER, key_file: $ONYX_KEY_FILE,"
      echo "           known_hosts: $ONYX_KNOWN_HOSTS, interval: ${INTERVAL}s, timeout: 60s }"
    done
  } >"$T/fs.yaml.tmp"
  mv "$T/fs.yaml.tmp" "$T/fs.yaml"
}
cfg 0
"$FS" --check-config "$T/fs.yaml" >/dev/null || { echo "bench_onyx_fleet: config refused" >&2; exit 1; }
"$FS" -c "$T/fs.yaml" >"$T/fabricscope.log" 2>&1 &
FS_PID=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$HTTP/healthz" 2>/dev/null && break; sleep 0.1; done
curl -fsS -o /dev/null "http://127.0.0.1:$HTTP/healthz" || { echo "bench_onyx_fleet: the daemon did not start" >&2; tail -5 "$T/fabricscope.log" >&2; exit 1; }
rss_before=$(awk '/^VmRSS:/ {print $2}' "/proc/$FS_PID/status")
up_count() { # targets with a good last poll
  curl -fsS --max-time 30 "http://127.0.0.1:$HTTP/api/v1/targets" | python3 -c 'import json, sys
d = json.load(sys.stdin)["data"]
print(sum(1 for t in d if t.get("source") == "cli" and t.get("state") == "up"))'
}
# The targets are added STEP at a time (a reload each), the next step once all are up or
# two intervals have passed: every login is served by the one sshd on this machine's
# cores, and hundreds at once (with other load) time out and retry in a storm; a real
# fleet spreads them over as many switches. A target's first poll also creates its
# 5,442 series in the store, on the I/O thread, which delays the other sessions' polls
# a little (on a loaded machine some time out; the sessions are kept). The session
# timeout is 60 s (default 10 s) so that a login slowed by the ramp goes on rather than
# starting over; polls take milliseconds, so it plays no part in the window. Then every
# target must be up within 5 minutes.
t_ramp=$(date +%s)
k=0
while [ "$k" -lt "$N" ]; do
  k=$((k + STEP > N ? N : k + STEP))
  cfg "$k"
  "$FS" --check-config "$T/fs.yaml" >/dev/null || { echo "bench_onyx_fleet: config refused" >&2; exit 1; }
  kill -HUP "$FS_PID"
  deadline=$(($(date +%s) + 2 * INTERVAL))
  [ "$k" -lt "$N" ] || deadline=$(($(date +%s) + 300))
  until [ "$(up_count)" = "$k" ]; do
    if [ "$(date +%s)" -gt "$deadline" ]; then
      [ "$k" -lt "$N" ] && break
      echo "bench_onyx_fleet: $(up_count) of $N targets up after 300 s:" >&2
      grep 'level=warn' "$T/fabricscope.log" | tail -3 >&2
      exit 1
    fi
    sleep 1
  done
done
t_ramp=$(($(date +%s) - t_ramp))

# ---- the measurement (all in one Python process: the targets' API, /proc)
python3 - "$FS_PID" "$HTTP" "$N" "$WINDOW" "$INTERVAL" "$SSHD_PID" "$rss_before" <<'EOF' >"$T/result" || { cat "$T/result" >&2; tail -5 "$T/fabricscope.log" >&2; exit 1; }
import json, os, sys, time, urllib.request
pid, http, n, window, interval, sshd, rss_before = (int(x) for x in sys.argv[1:8])
url = "http://127.0.0.1:%d/api/v1/targets" % http


def targets():
    with urllib.request.urlopen(url, timeout=30) as r:
        d = json.load(r)
    return {t["target"]: t for t in d["data"] if t.get("source") == "cli"}


def fail(msg):
    print(msg)
    sys.exit(1)


def task_ns(tid):
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        return int(f.read().split()[0])


def proc_cpu_s(p):
    with open("/proc/%d/stat" % p) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib():
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])


def descendants(root):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except OSError:
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def peer_cpu_s():
    s = 0.0
    for p in descendants(sshd):
        try:
            s += proc_cpu_s(p)
        except OSError:
            pass
    return s


def io_thread():
    """The thread blocked in epoll_wait on an epoll instance watching >= n fds."""
    for _ in range(200):
        for tid in map(int, os.listdir("/proc/%d/task" % pid)):
            try:
                with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
                    w = f.read().split()
            except OSError:
                continue
            if len(w) < 2 or w[0] not in ("232", "281", "441"):  # epoll_wait, _pwait, _pwait2
                continue
            try:
                with open("/proc/%d/fdinfo/%d" % (pid, int(w[1], 16))) as f:
                    fds = sum(1 for ln in f if ln.startswith("tfd:"))
            except (OSError, ValueError):
                continue
            if fds >= n:
                return tid, fds
        time.sleep(0.05)
    return None, 0


def errors_sum(ts):
    return sum(sum(t["poll_errors"].values()) for t in ts.values())


# the window starts after an interval in which no poll failed (the ramp's last step may
# still be settling)
ts = targets()
if len(ts) != n:
    fail("bench_onyx_fleet: %d cli targets listed, not %d" % (len(ts), n))
deadline = time.time() + 12 * interval
while True:
    e0 = errors_sum(ts)
    time.sleep(interval)
    ts = targets()
    if errors_sum(ts) == e0 and all(t["state"] == "up" for t in ts.values()):
        break
    if time.time() > deadline:
        fail("bench_onyx_fleet: polls still failing %d s after all targets were up"
             % (12 * interval))
tid, fds = io_thread()
if tid is None:
    fail("bench_onyx_fleet: no thread waits on an epoll instance of %d fds" % n)

ts0 = targets()
w0, io0, cpu0, peer0, rss0 = time.time(), task_ns(tid), proc_cpu_s(pid), peer_cpu_s(), rss_kib()
seen = {k: t.get("last_poll_unix") for k, t in ts0.items()}
polls = {k: 0 for k in ts0}
durations = []
end = w0 + window
while True:
    time.sleep(max(0.0, min(2.0, end - time.time())))
    ts = targets()
    for k, t in ts.items():
        lp = t.get("last_poll_unix")
        if k in seen and lp != seen[k]:
            seen[k] = lp
            polls[k] += 1
            durations.append(t["last_poll_duration_seconds"])
    if time.time() >= end:
        break
w1, io1, cpu1, peer1, rss1 = time.time(), task_ns(tid), proc_cpu_s(pid), peer_cpu_s(), rss_kib()
wall = w1 - w0
errors = {}
for k, t in ts.items():
    for kind, v in t["poll_errors"].items():
        d = v - ts0[k]["poll_errors"][kind]
        if d:
            errors[kind] = errors.get(kind, 0) + d
reconnects = sum(t.get("cli_sessions_opened", 0) - ts0[k].get("cli_sessions_opened", 0)
                 for k, t in ts.items())
opened = sum(t.get("cli_sessions_opened", 0) for t in ts.values())
least = window // interval - 1
short = sorted(k for k, c in polls.items() if c < least)
io_per_s = (io1 - io0) / 1e9 / wall
durations.sort()
p99 = durations[min(len(durations) - 1, int(0.99 * len(durations)))] * 1000 if durations else 0
print("BENCH onyx_fleet_targets %d targets" % n)
print("BENCH onyx_fleet_polls_ok_per_interval %.3f polls" % (sum(polls.values()) / (n * wall / interval)))
print("BENCH onyx_io_thread_cpu_per_s %.3f s/s" % io_per_s)
print("BENCH onyx_sessions_per_core %.0f sessions" % (n / io_per_s if io_per_s > 0 else 0))
print("BENCH onyx_rss_kib_per_target %.0f KiB" % ((rss1 - rss_before) / n))
print("BENCH onyx_fleet_poll_ms_p99 %.1f ms" % p99)
print("# window %.1f s; %d polls seen; poll ms p50 %.1f max %.1f; I/O thread %d (epoll of %d fds)"
      % (wall, sum(polls.values()), durations[len(durations) // 2] * 1000 if durations else 0,
         durations[-1] * 1000 if durations else 0, tid, fds))
print("# process CPU %.3f s/s (all threads); peer side (sshd + onyx-replay) %.3f s/s"
      % ((cpu1 - cpu0) / wall, (peer1 - peer0) / wall))
print("# SSH sessions opened: %d for %d targets, %d of them during the window"
      % (opened, n, reconnects))
print("# RSS %d KiB before the targets, %d at the window's start, %d at its end"
      % (rss_before, rss0, rss1))
if errors or short or reconnects:
    fail("bench_onyx_fleet: not every poll was good: errors %s; %d targets with fewer than %d "
         "polls in the window (%s); %d sessions opened in it"
         % (errors, len(short), least, ", ".join(short[:5]), reconnects))
EOF
t_end=$(date +%s)
cat "$T/result"
echo "# $N targets x $NSERIES series; $(sed 's/ -> .*//' "$T/record.log"); targets added $STEP at a time in $t_ramp s; bench wall time $((t_end - t_start)) s"

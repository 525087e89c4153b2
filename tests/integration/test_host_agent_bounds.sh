#!/usr/bin/env bash
# The host agent's bounds on a capture (`host-agent --once` against the real collector on
# loopback):
#   - perf record (real perf, raw_syscalls:sys_enter with -a while dd makes millions of
#     syscalls) stops at what capture.raw_quota_bytes leaves: the kept raw file is within
#     the quota, --once exits 0 and its samples reach the collector;
#   - the import of a large `perf script` output (a stand-in perf, capture.perf, whose
#     `script` prints 400,000 samples, ~70 MB) is streamed: the agent's peak RSS
#     (ru_maxrss of the finished child, what VmHWM showed at its exit) stays within 32 MiB
#     of its peak for a 20,000-sample import, and every sample reaches the collector.
# Needs root (perf -a on tracepoints).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$PY" ] || fail "needs /usr/bin/python3"
[ "$(id -u)" = 0 ] || fail "needs root (perf record -a of tracepoints)"
command -v perf >/dev/null || fail "needs perf (scripts/install-deps.sh)"
HTTP=$(free_tcp_port)
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/token"
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/token }
YML
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
held() { curl -fsS "http://127.0.0.1:$HTTP/metrics" | awk '$1 == "fabricscope_host_events_ingested_total" {print $2}'; }

# ---- 1. a capture larger than the quota is bounded by it
QUOTA=$((4 << 20))
cat >"$T/agent-quota.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token }
host: gpu-quota
state_dir: $T/state-quota
lldp: { enabled: false }
capture: { events: [raw_syscalls:sys_enter], length: 20s, max_length: 30s,
           raw_quota_bytes: $QUOTA, keep_raw: true }
YML
# Syscalls, many: one-byte reads and writes (stopped at exit by lib.sh's cleanup).
dd if=/dev/zero of=/dev/null bs=1 2>/dev/null &
track $!
start=$(date +%s)
timeout 120 "$FABRICSCOPE" host-agent -c "$T/agent-quota.yaml" --once >"$T/once-quota.log" 2>&1 ||
  fail "--once with a quota failed: $(tail -n 5 "$T/once-quota.log")"
took=$(($(date +%s) - start))
raw=$(find "$T/state-quota" -maxdepth 1 -name 'capture-*.data' | head -n 1)
[ -n "$raw" ] || fail "no raw capture kept (keep_raw: true)"
size=$(stat -c %s "$raw")
[ "$size" -le "$QUOTA" ] || fail "raw capture $size bytes: beyond capture.raw_quota_bytes $QUOTA"
grep -q "size limit reached" "$raw.log" || fail "perf did not stop at its limit: $(cat "$raw.log")"
n=$(held)
[ -n "$n" ] && [ "$n" -gt 1000 ] || fail "the bounded capture's samples did not arrive ($n held)"
ok "a capture beyond capture.raw_quota_bytes stopped at $size of $QUOTA bytes after ${took}s ($n samples held)"

# ---- 2. a large perf script output is imported in bounded memory
cat >"$T/fakeperf" <<'SH'
#!/bin/sh
# perf record: an empty raw file; perf script: $FAKE_SAMPLES samples on the monotonic
# clock with perf script --header's reference line.
case "$1" in
record)
  while [ $# -gt 0 ]; do
    if [ "$1" = -o ]; then : >"$2"; fi
    shift
  done
  exit 0 ;;
script)
  exec awk -v n="$FAKE_SAMPLES" -v tod="$(date +%s)" 'BEGIN {
    printf "# ========\n# captured on    : fake\n"
    printf "# reference time: today = %d.000000 (TOD) = 1000.000000000 (monotonic)\n# ========\n#\n", tod
    for (i = 0; i < n; i++)
      printf "         iperf3 %7d [%03d] %d.%09d: tcp:tcp_retransmit_skb: skbaddr=0xffff8a1c0e2f4d00 skaddr=0xffff8a1c01b3c000 state=TCP_ESTABLISHED sport=%d dport=50001 saddr=127.0.0.1 daddr=127.0.0.1\n", 4000 + i % 1000, i % 64, 1000 + int(i / 1000000), i % 1000000 * 1000 + 1, 40000 + i % 20000
  }' ;;
esac
SH
chmod 755 "$T/fakeperf"
cat >"$T/rss.py" <<'PYEOF'
# Runs argv, prints its exit code and its peak RSS in KiB (ru_maxrss of the waited child).
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=sys.stderr).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PYEOF
import_rss() { # import_rss SAMPLES: "rc KiB" of an agent --once importing that many
  cat >"$T/agent-$1.yaml" <<YML
collector: { url: http://127.0.0.1:$HTTP, token_file: $T/token }
host: gpu-rss-$1
state_dir: $T/state-$1
lldp: { enabled: false }
capture: { perf: $T/fakeperf, length: 1s }
YML
  # ASan keeps freed memory in a quarantine (256 MiB by default): kept small, or the
  # measure is the quarantine's.
  FAKE_SAMPLES=$1 ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}quarantine_size_mb=4" \
    "$PY" "$T/rss.py" "$FABRICSCOPE" host-agent -c "$T/agent-$1.yaml" --once >"$T/rss-$1.out" \
    2>"$T/once-$1.log"
  cat "$T/rss-$1.out"
}
before=$(held)
read -r rc small < <(import_rss 20000)
[ "$rc" = 0 ] || fail "--once of 20,000 samples: exit $rc: $(tail -n 5 "$T/once-20000.log")"
read -r rc large < <(import_rss 400000)
[ "$rc" = 0 ] || fail "--once of 400,000 samples: exit $rc: $(tail -n 5 "$T/once-400000.log")"
after=$(held)
[ $((after - before)) = 420000 ] || fail "held $before, then $after: want 420000 more"
[ "$large" -le $((small + 32768)) ] ||
  fail "peak RSS of a 400,000-sample import ${large} KiB, of 20,000 ${small} KiB: not bounded"
ok "peak RSS of a 400,000-sample (~70 MB) import ${large} KiB, of a 20,000-sample one ${small} KiB"

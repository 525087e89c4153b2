#!/usr/bin/env bash
# `fabricscope import-perf` streams: a perf script capture far larger than its batch is
# posted as it is read, so the importer's memory stays bounded by the batch, not the file.
#   - 600,000 retransmit samples (about 140 MB of text) from a capture that just ended:
#     all posted and stored, the importer's peak RSS under 64 MiB (reading the input whole
#     and holding every event, as before, takes about 0.9 GB: 1.3 KB an event held);
#   - the same file again: nothing stored twice (every event already held);
#   - the same samples placed two hours ago, with the offset to be measured now: refused
#     as an old capture once the events held reach the hold bound (200,000), nothing
#     posted, the peak RSS still bounded (under 320 MiB).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x /usr/bin/time ] || fail "needs /usr/bin/time (package time)"
# A sanitizer build: ASan's quarantine keeps freed memory (256 MB by default) and its
# shadow and redzones add to every allocation, so the bounds are 3 times wider there
# (with an 8 MB quarantine); a TSan build is not run with this test.
SANITIZE=$(sed -n 's/^SANITIZE:[A-Z]*=//p' "$FS_BUILD_DIR/CMakeCache.txt" 2>/dev/null || true)
X=1
if [ -n "$SANITIZE" ]; then
  X=3
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
  echo "# SANITIZE=$SANITIZE build: RSS bounds x$X"
fi
HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; echo "$TOKEN" >"$T/he.token")
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/he.token, memory_limit: 1GiB, retention: 4h }
targets: []
EOF
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused: $("$FABRICSCOPE" --check-config "$T/fs.yaml" 2>&1)"
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
held() { curl -fsS "$URL/metrics" | awk '$1 == "fabricscope_host_events" {print $2}'; }

N=600000
# perf.txt: N samples over the last 60 s (reference: now); old.txt: the same 2 h earlier.
gen() { # $1: seconds before now that the capture ends
  "$PY" - "$1" "$N" <<'PYEOF'
import sys, time
ago, n = float(sys.argv[1]), int(sys.argv[2])
end = time.time() - ago
mono = 5000.0
out = sys.stdout
out.write("# ========\n# clockid: monotonic (1)\n")
out.write("# reference time: x = %.6f (TOD) = %.9f (monotonic)\n# ========\n#\n" % (end, mono))
for k in range(n):
    t = mono - 60.0 + 60.0 * k / n
    out.write("          nccl-proxy  4242 [003]  %.6f: tcp:tcp_retransmit_skb: family=AF_INET "
              "sport=%d dport=50123 saddr=10.0.%d.3 daddr=10.0.0.7 saddrv6=::ffff:10.0.0.3 "
              "daddrv6=::ffff:10.0.0.7 state=TCP_ESTABLISHED\n" % (t, 1024 + k % 60000, k % 250))
PYEOF
}
gen 1 >"$T/perf.txt"
gen 7200 >"$T/old.txt"
bytes=$(stat -c %s "$T/perf.txt")

imp() { # $1: input; the rest: extra options. Peak RSS (KiB) to $T/rss, output to $T/imp.log
  FABRICSCOPE_TOKEN=$TOKEN /usr/bin/time -f '%M' -o "$T/rss" "$FABRICSCOPE" import-perf --url "$URL" \
    --host gpu-node-3 "${@:2}" <"$1" >"$T/imp.log" 2>&1
}
imp "$T/perf.txt" || fail "import-perf: $(cat "$T/imp.log")"
rss=$(tail -n 1 "$T/rss")
grep -q "posted $N events, $N stored, 0 already held" "$T/imp.log" || fail "import summary: $(cat "$T/imp.log")"
[ "$(held)" = "$N" ] || fail "the collector holds $(held) events, want $N"
[ "$rss" -lt $((X * 64 * 1024)) ] || fail "import-perf peaked at $rss KiB for a $bytes-byte input"
ok "import-perf streamed $N samples ($((bytes / 1048576)) MiB of text): all stored, peak RSS $((rss / 1024)) MiB"

imp "$T/perf.txt" || fail "import-perf again: $(cat "$T/imp.log")"
grep -q "posted $N events, 0 stored, $N already held" "$T/imp.log" || fail "second import: $(cat "$T/imp.log")"
[ "$(held)" = "$N" ] || fail "the collector holds $(held) events after the second import"
ok "the same capture again: 0 stored, $N already held (peak RSS $(($(tail -n 1 "$T/rss") / 1024)) MiB)"

if imp "$T/old.txt"; then fail "a two-hour-old capture was posted with an offset measured now: $(cat "$T/imp.log")"; fi
grep -q "the capture ended 1[12][0-9] min ago (its first events" "$T/imp.log" || fail "refusal: $(cat "$T/imp.log")"
[ "$(held)" = "$N" ] || fail "the refused import stored events: $(held)"
rss=$(tail -n 1 "$T/rss")
[ "$rss" -lt $((X * 320 * 1024)) ] || fail "the refused import peaked at $rss KiB (holding at most 200,000 events)"
ok "a two-hour-old capture with no recorded offset: refused once 200,000 events were held, nothing posted, peak RSS $((rss / 1024)) MiB"

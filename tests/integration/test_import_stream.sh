#!/usr/bin/env bash
# The importers stream: an input far larger than their batch is posted as it is read, so
# an importer's memory stays bounded by the batch, not the input.
# import-perf:
#   - 600,000 retransmit samples (about 140 MB of text) from a capture that just ended:
#     all posted and stored, the importer's peak RSS under 64 MiB (reading the input whole
#     and holding every event, as before, takes about 0.9 GB: 1.3 KB an event held);
#   - the same file again: nothing stored twice (every event already held);
#   - the same samples placed two hours ago, with the offset to be measured now: refused
#     as an old capture once the events held reach the hold bound (200,000), nothing
#     posted, the peak RSS still bounded (under 320 MiB).
# import-nsys (a 77 MB export of nsys_gen.py: 1,000,000 kernels and 200,000 NVTX ranges,
# 600,000 of them NCCL; 500,000 distinct strings, a message size for every NCCL range):
#   - all 600,000 posted and stored once, peak RSS under 64 MiB (the code before streaming
#     read the export into one batch: 430 MiB on this file);
#   - again: 0 stored, all already held;
#   - an export two hours old (250,000 NCCL kernels), offset to be measured now: refused
#     at the hold bound, nothing posted; with --host-offset it is posted whole.
# import-nccl-inspector (4 logs of 100,000 records, 188 MB; the code before streaming,
# reading them into one batch, took 529 MiB):
#   - a line that is not JSON in the middle of the last log: the import stops there,
#     naming file and line and how many events it had posted (340,000, the batches
#     before it), and the collector holds exactly those;
#   - the line removed, the import again: the other 60,000 stored, the 340,000 already
#     held: every record arrives once; peak RSS under 64 MiB.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x /usr/bin/time ] || fail "needs /usr/bin/time (package time)"
# A sanitizer build: ASan's quarantine keeps freed memory (256 MB by default) and its
# shadow and redzones add to every allocation, so the bounds are 3 times wider there
# (with an 8 MB quarantine); a TSan build is not run with this test.
SANITIZE=$(sed -n 's/^SANITIZE:[A-Z]*=//p' "$FS_BUILD_DIR/CMakeCache.txt" 2>/dev/null || true)
# The inputs are smaller there too (each import still 10 or more batches of 20,000 events,
# more than the hold bound of 200,000 where a refusal needs it): a sanitizer build ingests
# about 6 times slower, and what this test checks does not depend on the size past that.
X=1
N=600000                       # perf samples (current and old capture)
NSYS_K=1000000 NSYS_V=200000   # nsys kernels and NVTX ranges: 600,000 NCCL events
INSP=100000                    # Inspector records a log (4 logs), the bad line mid-log 3
if [ -n "$SANITIZE" ]; then
  X=3 N=250000 NSYS_K=400000 NSYS_V=100000 INSP=50000
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
  echo "# SANITIZE=$SANITIZE build: RSS bounds x$X, inputs smaller"
fi
NS_WANT=$(((NSYS_K + 1) / 2 + (NSYS_V + 1) / 2))
BAD=$((INSP / 2 + 1))                       # the bad line's number in the last log
BEFORE=$(((3 * INSP + BAD - 1) / 20000 * 20000)) # the whole batches read before it
HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; echo "$TOKEN" >"$T/he.token")
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/he.token, memory_limit: 2GiB, retention: 4h }
targets: []
EOF
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused: $("$FABRICSCOPE" --check-config "$T/fs.yaml" 2>&1)"
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
held() { curl -fsS "$URL/metrics" | awk '$1 == "fabricscope_host_events" {print $2}'; }

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

# import-nsys: the same rules through the same stream, rows stepped from SQLite.
"$PY" "$FS_SOURCE_DIR/tests/integration/nsys_gen.py" --out "$T/nsys.sqlite" --kernels "$NSYS_K" \
  --nvtx "$NSYS_V" >"$T/nsys.n"
"$PY" "$FS_SOURCE_DIR/tests/integration/nsys_gen.py" --out "$T/nsys-old.sqlite" --kernels 500000 \
  --nvtx 0 --end-ago 7200 >"$T/nsys-old.n"
NS=$(cat "$T/nsys.n") NO=$(cat "$T/nsys-old.n")
[ "$NS" = "$NS_WANT" ] && [ "$NO" = 250000 ] || fail "nsys_gen.py: $NS and $NO NCCL events, want $NS_WANT and 250000"
nbytes=$(stat -c %s "$T/nsys.sqlite")
run() { # an importer command line; peak RSS (KiB) to $T/rss, output to $T/imp.log
  FABRICSCOPE_TOKEN=$TOKEN /usr/bin/time -f '%M' -o "$T/rss" "$FABRICSCOPE" "$@" --url "$URL" \
    >"$T/imp.log" 2>&1
}
before=$(held)
run import-nsys "$T/nsys.sqlite" || fail "import-nsys: $(cat "$T/imp.log")"
rss=$(tail -n 1 "$T/rss")
grep -q "posted $NS events, $NS stored, 0 already held" "$T/imp.log" || fail "import-nsys summary: $(cat "$T/imp.log")"
[ "$(held)" = $((before + NS)) ] || fail "the collector holds $(held) events, want $((before + NS))"
[ "$rss" -lt $((X * 64 * 1024)) ] || fail "import-nsys peaked at $rss KiB for a $nbytes-byte export"
ok "import-nsys streamed $NS events ($((nbytes / 1048576)) MiB export): all stored once, peak RSS $((rss / 1024)) MiB"

run import-nsys "$T/nsys.sqlite" || fail "import-nsys again: $(cat "$T/imp.log")"
grep -q "posted $NS events, 0 stored, $NS already held" "$T/imp.log" || fail "second import-nsys: $(cat "$T/imp.log")"
[ "$(held)" = $((before + NS)) ] || fail "the collector holds $(held) events after the second import-nsys"
ok "the same export again: 0 stored, $NS already held (peak RSS $(($(tail -n 1 "$T/rss") / 1024)) MiB)"

if run import-nsys "$T/nsys-old.sqlite"; then fail "a two-hour-old export was posted with an offset measured now: $(cat "$T/imp.log")"; fi
grep -q "the capture ended 1[12][0-9] min ago (its first events" "$T/imp.log" || fail "import-nsys refusal: $(cat "$T/imp.log")"
[ "$(held)" = $((before + NS)) ] || fail "the refused import-nsys stored events: $(held)"
rss=$(tail -n 1 "$T/rss")
[ "$rss" -lt $((X * 320 * 1024)) ] || fail "the refused import-nsys peaked at $rss KiB (holding at most 200,000 events)"
ok "a two-hour-old export with no recorded offset: refused at the hold bound, nothing posted, peak RSS $((rss / 1024)) MiB"

run import-nsys "$T/nsys-old.sqlite" --host-offset 0:1000000 || fail "import-nsys --host-offset: $(cat "$T/imp.log")"
grep -q "posted $NO events, $NO stored, 0 already held; host clock +0.000 ms from the collector's (± 1.000 ms, given)" "$T/imp.log" ||
  fail "import-nsys --host-offset summary: $(cat "$T/imp.log")"
[ "$(held)" = $((before + NS + NO)) ] || fail "the collector holds $(held) events, want $((before + NS + NO))"
rss=$(tail -n 1 "$T/rss")
[ "$rss" -lt $((X * 64 * 1024)) ] || fail "import-nsys --host-offset peaked at $rss KiB"
ok "the old export with --host-offset: all $NO posted at once, peak RSS $((rss / 1024)) MiB"

# import-nccl-inspector: 4 logs of $INSP records, the last with a line that is not JSON
# after its ($BAD - 1)th record.
mkdir "$T/insp"
for h in 0 1 2 3; do
  "$PY" "$FS_SOURCE_DIR/tests/integration/nccl_inspector_gen.py" --file "$T/insp/gpu-node-$h-pid42.log" \
    --count "$INSP" --step-us $((200000000 / INSP)) --host "gpu-node-$h"
done
sed -i "${BAD}i"' {"coll_perf": {"coll": "AllReduce", truncated' "$T/insp/gpu-node-3-pid42.log"
ibytes=$(du -sb "$T/insp" | cut -f1)
before=$(held)
if run import-nccl-inspector "$T/insp"; then fail "a log with a bad line was imported: $(cat "$T/imp.log")"; fi
grep -q "gpu-node-3-pid42.log:$BAD: not JSON: .* ($BEFORE events posted before it; an import run again stores none of them twice)" "$T/imp.log" ||
  fail "the bad line's report: $(cat "$T/imp.log")"
[ "$(held)" = $((before + BEFORE)) ] || fail "the collector holds $(held) events, want the $BEFORE posted before the bad line"
rss=$(tail -n 1 "$T/rss")
[ "$rss" -lt $((X * 64 * 1024)) ] || fail "import-nccl-inspector peaked at $rss KiB"
ok "a bad line at gpu-node-3-pid42.log:$BAD: named, with the $BEFORE events posted before it (held: exactly those), peak RSS $((rss / 1024)) MiB"

sed -i "${BAD}d" "$T/insp/gpu-node-3-pid42.log"
run import-nccl-inspector "$T/insp" || fail "import-nccl-inspector: $(cat "$T/imp.log")"
grep -q "posted $((4 * INSP)) events, $((4 * INSP - BEFORE)) stored, $BEFORE already held" "$T/imp.log" || fail "import-nccl-inspector summary: $(cat "$T/imp.log")"
[ "$(held)" = $((before + 4 * INSP)) ] || fail "the collector holds $(held) events, want $((before + 4 * INSP))"
rss=$(tail -n 1 "$T/rss")
[ "$rss" -lt $((X * 64 * 1024)) ] || fail "import-nccl-inspector peaked at $rss KiB for $ibytes bytes of logs"
ok "import-nccl-inspector streamed $((4 * INSP)) records ($((ibytes / 1048576)) MiB of logs): each stored once, peak RSS $((rss / 1024)) MiB"

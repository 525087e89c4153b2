#!/usr/bin/env bash
# The gNMI driver's stream threads (issue 18: a fleet's decoding follows the cores),
# through build/tests/fs-gnmi-stream (driver + real store, no daemon) against the gNMI
# simulator in --bench-replay mode, over real gRPC on loopback.
# Checked: with FS_GNMI_THREADS=2, six targets are dealt to both threads (0,1,0,1,0,1 in
# their stream_thread), the threads are named fs-gnmi-0 and fs-gnmi-1; removing three
# targets (on both threads) while all six stream at 10 messages a second returns, and the
# other three keep streaming without a down; everything shuts down with exit code 0
# (under ASan/TSan: no report). Without FS_GNMI_THREADS the driver runs one thread an
# online CPU (at most 8); a bad FS_GNMI_THREADS is refused at init, saying why.
# Runs under TSan too (make test-tsan): the uninstrumented gRPC stack's own calls ignored.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf live there, not in pyenv
SIMPY=$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py
STREAM=$FS_BUILD_DIR/tests/fs-gnmi-stream
[ -x "$STREAM" ] || fail "build fs-gnmi-stream first"
$PY -c 'import grpc, google.protobuf' || fail "python3-grpcio / python3-protobuf missing"
tsan_ignore_uninstrumented_libs "$STREAM"

cd "$T"
echo '{"ports": 16, "clock_offset_ms": 0}' >scenario.json
$PY "$SIMPY" --gen-dir "$T/gen" --scenario scenario.json --port-file "$T/sim.port" \
  --bench-replay --max-workers 32 >>sim.log 2>&1 &
track "$!"
wait_for 20 "the gNMI simulator listens" test -s "$T/sim.port"
PORT=$(cat sim.port)

# run_stream OUT ARGS...: fs-gnmi-stream on the simulator, 16 ports' counters and queues
# every 100 ms; exits once all targets synced (and what ARGS ask after that).
run_stream() {
  local out=$1
  shift
  "$STREAM" --port "$PORT" --insecure --encoding proto --no-samples --stall-ms 60000 \
    --path "/interfaces/interface[name=*]/state/counters,sample,100" \
    --path "/qos/interfaces/interface[interface-id=*]/output/queues,sample,100" \
    --exit-when-all-synced --duration-ms 120000 "$@" >"$out" 2>"$out.err"
}
field() { awk -v l="$2" -v k="$3" '$1 == l { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) print a[2] } }' "$1"; }

# --- two threads, six targets, three removed while all stream
FS_GNMI_THREADS=2 run_stream two.out --targets 6 --remove-after-sync 3 --steady-ms 3000 ||
  fail "fs-gnmi-stream exit $?: $(tail -5 two.out.err)"
[ "$(field two.out threads n)" = 2 ] || fail "not 2 threads: $(grep ^threads two.out)"
[ "$(field two.out threads names)" = "fs-gnmi-0,fs-gnmi-1" ] ||
  fail "stream threads not named fs-gnmi-N: $(grep ^threads two.out)"
[ "$(field two.out threads of_targets)" = "0,1,0,1,0,1" ] ||
  fail "targets not dealt to both threads: $(grep ^threads two.out)"
ok "FS_GNMI_THREADS=2: threads fs-gnmi-0, fs-gnmi-1; six targets on threads $(field two.out threads of_targets)"

[ "$(field two.out removed k)" = 3 ] || fail "three removals expected: $(grep ^removed two.out)"
[ "$(field two.out rss_kib synced)" = 6 ] || fail "not all synced: $(grep ^rss_kib two.out)"
[ "$(field two.out fleet downs)" = 0 ] || fail "a stream went down: $(grep ^fleet two.out)"
min=$(field two.out fleet min_target)
[ "${min:-0}" -gt 0 ] || fail "a remaining target received nothing after the removals: $(grep ^fleet two.out)"
! grep -qE 'ThreadSanitizer|AddressSanitizer|LeakSanitizer' two.out.err ||
  fail "sanitizer report: $(grep -m3 -E 'Sanitizer' two.out.err)"
ok "three targets removed under load in $(field two.out removed ms) ms; the other three streamed on (fewest $min updates in 3 s), clean exit"

# --- the automatic count: one thread an online CPU, at most 8
want=$(nproc)
[ "$want" -gt 8 ] && want=8
(unset FS_GNMI_THREADS; run_stream auto.out --targets 2) || fail "fs-gnmi-stream exit $?: $(tail -5 auto.out.err)"
[ "$(field auto.out threads n)" = "$want" ] || fail "automatic count is not $want: $(grep ^threads auto.out)"
names=$(field auto.out threads names)
[ "$(echo "$names" | tr ',' '\n' | grep -c '^fs-gnmi-')" = "$want" ] || fail "$want named threads expected: $names"
ok "no FS_GNMI_THREADS: $want stream thread(s) ($(nproc) online CPUs)"

# --- a bad value is refused at init
FS_GNMI_THREADS=0 run_stream bad.out --targets 1 && fail "FS_GNMI_THREADS=0 accepted"
grep -q 'FS_GNMI_THREADS=0: not a number of threads from 1 to 64' bad.out.err ||
  fail "FS_GNMI_THREADS=0 refused without the reason: $(cat bad.out.err)"
ok "FS_GNMI_THREADS=0 refused at init with the reason"

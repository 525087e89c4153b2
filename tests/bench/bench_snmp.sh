#!/usr/bin/env bash
# SNMP polling benchmark, side by side with Debian's prometheus-snmp-exporter (0.21):
# both poll the same simulated 64-port switch (tests/sim, behind a private snmpd) with the
# same OIDs, max-repetitions (50), timeout (2 s) and retries (1).
#
# CPU = process user+system time over 100 polls. Ours: the driver thread plus one
# /metrics render per poll, in one process (build/sim/snmp-harness; no HTTP). The
# exporter: its whole process over 100 scrapes (HTTP serving included; curl is not).
# The simulator and snmpd are pinned to CPU 1, the pollers to CPU 0 (taskset).
#
# Prints:
#   BENCH snmp_poll_cpu_ms_64port, snmp_exporter_poll_cpu_ms_64port, snmp_poll_cpu_us_per_varbind,
#   snmp_poll_ms_64port, snmp_exporter_poll_ms_64port, snmp_targets_per_core,
#   snmp_targets_no_overrun (with the simulator's limit), snmp_sim_varbinds_per_s.
set -euo pipefail
FS_SOURCE_DIR=${FS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
FS_BUILD_DIR=${FS_BUILD_DIR:-$FS_SOURCE_DIR/build}
SIM=$FS_BUILD_DIR/sim/onyx-snmp-sim
HARNESS=$FS_BUILD_DIR/sim/snmp-harness
EXPORTER=$(command -v prometheus-snmp-exporter || true)
POLLS=${SNMP_BENCH_POLLS:-100}
[ -x "$SIM" ] && [ -x "$HARNESS" ] || { echo "bench_snmp: build onyx-snmp-sim and snmp-harness first" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/fs-bench-snmp.XXXXXX")
EXP_PID=""
cleanup() {
  [ -n "$EXP_PID" ] && kill "$EXP_PID" 2>/dev/null || true
  bash "$FS_SOURCE_DIR/tests/sim/start-snmp-sim.sh" --stop "$T/snmp" || true
  rm -rf "$T"
}
trap cleanup EXIT
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 40000))
    if ! ss -Hlun "sport = :$p" | grep -q . && ! ss -Hltn "sport = :$p" | grep -q .; then echo "$p"; return; fi
  done
  return 1
}
NCPU=$(nproc)
PIN_POLLER=(); PIN_SIM=()
if [ "$NCPU" -ge 2 ] && command -v taskset >/dev/null; then PIN_POLLER=(taskset -c 0); PIN_SIM=(taskset -c 1); fi

PORT=$(free_port)
"${PIN_SIM[@]}" bash "$FS_SOURCE_DIR/tests/sim/start-snmp-sim.sh" --dir "$T/snmp" --port "$PORT" --bin "$SIM" >/dev/null
source "$T/snmp/env.sh"
if [ ${#PIN_SIM[@]} -gt 0 ]; then taskset -pc 1 "$SNMPD_PID" >/dev/null; taskset -pc 1 "$SIM_PID" >/dev/null; fi
COMMUNITY=$(cat "$SNMP_COMMUNITY_FILE")
proc_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000 / hz}' "/proc/$1/stat"; }

# ---- ours ----
SIM_CPU0=$(( $(proc_cpu_ms "$SNMPD_PID" | cut -d. -f1) + $(proc_cpu_ms "$SIM_PID" | cut -d. -f1) ))
"${PIN_POLLER[@]}" "$HARNESS" --port "$PORT" --community-file "$SNMP_COMMUNITY_FILE" --polls 1 --quiet >/dev/null # warm the agent
out=$("${PIN_POLLER[@]}" "$HARNESS" --port "$PORT" --community-file "$SNMP_COMMUNITY_FILE" --polls "$POLLS" \
  --interval-ms 1 --deadline-ms 5000 --timeout-ms 2000 --retries 1 --max-rep 50 --render-each --quiet)
SIM_CPU1=$(( $(proc_cpu_ms "$SNMPD_PID" | cut -d. -f1) + $(proc_cpu_ms "$SIM_PID" | cut -d. -f1) ))
sum=$(echo "$out" | grep '^SUMMARY')
get() { echo "$sum" | tr ' ' '\n' | awk -F= -v k="$1" '$1==k {print $2}'; }
[ "$(get ok)" = "$POLLS" ] || { echo "bench_snmp: our polls failed: $sum" >&2; exit 1; }
cpu=$(get cpu_ms); wall=$(get wall_ms_avg); vb=$(get varbinds)
awk -v c="$cpu" -v n="$POLLS" 'BEGIN {printf "BENCH snmp_poll_cpu_ms_64port %.3f ms\n", c / n}'
awk -v c="$cpu" -v v="$vb" 'BEGIN {printf "BENCH snmp_poll_cpu_us_per_varbind %.3f us\n", c * 1000 / v}'
echo "BENCH snmp_poll_ms_64port $wall ms"
awk -v c="$cpu" -v n="$POLLS" 'BEGIN {printf "BENCH snmp_targets_per_core %.0f targets\n", 10000 / (c / n)}'
vbpp=$((vb / POLLS))
awk -v w="$wall" -v v="$vbpp" 'BEGIN {printf "BENCH snmp_sim_varbinds_per_s %.0f varbinds/s (one poller, %d varbinds per poll)\n", v * 1000 / w, v}'
awk -v c=$((SIM_CPU1 - SIM_CPU0)) -v n="$POLLS" 'BEGIN {printf "BENCH snmp_sim_cpu_ms_per_poll %.2f ms (snmpd + subagent)\n", c / n}'

# ---- the exporter: the same OIDs as a 0.21 module with auth inside ----
if [ -n "$EXPORTER" ]; then
  EPORT=$(free_port)
  {
    echo "onyx:"
    echo "  version: 2"
    echo "  auth: { community: \"$COMMUNITY\" }"
    echo "  max_repetitions: 50"
    echo "  retries: 1"
    echo "  timeout: 2s"
    echo "  get: [1.3.6.1.2.1.1.1.0, 1.3.6.1.2.1.1.2.0, 1.3.6.1.2.1.1.3.0, 1.3.6.1.2.1.31.1.5.0]"
    echo "  walk:"
    for o in 31.1.1.1.1 31.1.1.1.18 31.1.1.1.6 31.1.1.1.7 31.1.1.1.8 31.1.1.1.9 31.1.1.1.10 \
             31.1.1.1.11 31.1.1.1.12 31.1.1.1.13 2.2.1.13 2.2.1.14 2.2.1.19 2.2.1.20 2.2.1.8 \
             2.2.1.7 2.2.1.9 31.1.1.1.15 31.1.1.1.19; do echo "  - 1.3.6.1.2.1.$o"; done
    for o in 4.1.6 4.1.8 4.1.9 2.1.3 2.1.4 2.1.5 2.1.6 5.1.5; do echo "  - 1.3.6.1.4.1.33049.15.1.$o"; done
    echo "  metrics:"
    echo "  - {name: sysUpTime, oid: 1.3.6.1.2.1.1.3, type: gauge}"
    echo "  - {name: sysDescr, oid: 1.3.6.1.2.1.1.1, type: DisplayString}"
    echo "  - {name: sysObjectID, oid: 1.3.6.1.2.1.1.2, type: OctetString}"
    echo "  - {name: ifTableLastChange, oid: 1.3.6.1.2.1.31.1.5, type: gauge}"
    n=0
    for spec in "ifAlias 31.1.1.1.18 DisplayString" "ifHCInOctets 31.1.1.1.6 counter" \
      "ifHCInUcastPkts 31.1.1.1.7 counter" "ifHCInMulticastPkts 31.1.1.1.8 counter" \
      "ifHCInBroadcastPkts 31.1.1.1.9 counter" "ifHCOutOctets 31.1.1.1.10 counter" \
      "ifHCOutUcastPkts 31.1.1.1.11 counter" "ifHCOutMulticastPkts 31.1.1.1.12 counter" \
      "ifHCOutBroadcastPkts 31.1.1.1.13 counter" "ifInDiscards 2.2.1.13 counter" \
      "ifInErrors 2.2.1.14 counter" "ifOutDiscards 2.2.1.19 counter" "ifOutErrors 2.2.1.20 counter" \
      "ifOperStatus 2.2.1.8 gauge" "ifAdminStatus 2.2.1.7 gauge" "ifLastChange 2.2.1.9 gauge" \
      "ifHighSpeed 31.1.1.1.15 gauge" "ifCounterDiscontinuityTime 31.1.1.1.19 gauge"; do
      set -- $spec
      echo "  - name: $1"
      echo "    oid: 1.3.6.1.2.1.$2"
      echo "    type: $3"
      echo "    indexes: [{labelname: ifIndex, type: gauge}]"
      echo "    lookups: [{labels: [ifIndex], labelname: ifName, oid: 1.3.6.1.2.1.31.1.1.1.1, type: DisplayString}]"
    done
    for spec in "mlnxQosTcUcQueueDepth 4.1.6 gauge tc" "mlnxQosTcUcNoBufDiscard 4.1.8 counter tc" \
      "mlnxQosTcWredDiscard 4.1.9 counter tc" "mlnxQosPfcRxPause 2.1.3 counter prio" \
      "mlnxQosPfcRxPauseMs 2.1.4 counter prio" "mlnxQosPfcTxPause 2.1.5 counter prio" \
      "mlnxQosPfcTxPauseMs 2.1.6 counter prio"; do
      set -- $spec
      echo "  - name: $1"
      echo "    oid: 1.3.6.1.4.1.33049.15.1.$2"
      echo "    type: $3"
      echo "    indexes: [{labelname: ifIndex, type: gauge}, {labelname: $4, type: gauge}]"
      echo "    lookups: [{labels: [ifIndex], labelname: ifName, oid: 1.3.6.1.2.1.31.1.1.1.1, type: DisplayString}]"
    done
    echo "  - name: mlnxQosPortTxWaitUs"
    echo "    oid: 1.3.6.1.4.1.33049.15.1.5.1.5"
    echo "    type: counter"
    echo "    indexes: [{labelname: ifIndex, type: gauge}]"
    echo "    lookups: [{labels: [ifIndex], labelname: ifName, oid: 1.3.6.1.2.1.31.1.1.1.1, type: DisplayString}]"
  } >"$T/snmp.yml"
  "${PIN_POLLER[@]}" "$EXPORTER" --config.file="$T/snmp.yml" --web.listen-address="127.0.0.1:$EPORT" \
    --log.level=warn >"$T/exporter.log" 2>&1 &
  EXP_PID=$!
  URL="http://127.0.0.1:$EPORT/snmp?target=127.0.0.1:$PORT&module=onyx"
  for _ in $(seq 100); do curl -fsS -o /dev/null "$URL" 2>/dev/null && break; sleep 0.1; done
  curl -fsS "$URL" >"$T/exp.txt" || { echo "bench_snmp: exporter scrape failed" >&2; cat "$T/exporter.log" >&2; exit 1; }
  grep -q '^ifHCInOctets{ifIndex="164",ifName="Eth1/64"}' "$T/exp.txt" || { echo "bench_snmp: exporter output lacks data" >&2; exit 1; }
  c0=$(proc_cpu_ms "$EXP_PID")
  t0=$(date +%s%N)
  for _ in $(seq "$POLLS"); do curl -fsS -o /dev/null "$URL"; done
  t1=$(date +%s%N)
  c1=$(proc_cpu_ms "$EXP_PID")
  awk -v a="$c0" -v b="$c1" -v n="$POLLS" 'BEGIN {printf "BENCH snmp_exporter_poll_cpu_ms_64port %.3f ms\n", (b - a) / n}'
  awk -v a="$t0" -v b="$t1" -v n="$POLLS" 'BEGIN {printf "BENCH snmp_exporter_poll_ms_64port %.2f ms\n", (b - a) / 1e6 / n}'
  kill "$EXP_PID"; wait "$EXP_PID" 2>/dev/null || true; EXP_PID=""
else
  echo "bench_snmp: prometheus-snmp-exporter not installed; exporter figures skipped" >&2
fi

# ---- targets polled every 10 s without an overrun, one pinned core ----
# Each trial is one round of N targets (all on the simulated switch) with the cycle
# deadline of a 10 s interval (9 s); success = every cycle ended OK by its deadline.
trial() {
  local n=$1 s
  s=$("${PIN_POLLER[@]}" "$HARNESS" --port "$PORT" --community-file "$SNMP_COMMUNITY_FILE" --targets "$n" \
      --polls 1 --interval-ms 10000 --timeout-ms 2000 --retries 1 --max-rep 50 --quiet | grep '^SUMMARY' || true)
  echo "$s" | grep -q " ok=$n timeout=0 auth=0 protocol=0 parse=0 overruns=0 " && echo "$s" >"$T/trial.$n"
}
good=0 n=16 bad=0
while [ "$n" -le 4096 ]; do
  if trial "$n"; then good=$n; n=$((n * 2)); else bad=$n; break; fi
done
if [ "$bad" -gt 0 ]; then
  while [ $((bad - good)) -gt $((good / 8 + 1)) ]; do
    mid=$(((good + bad) / 2))
    if trial "$mid"; then good=$mid; else bad=$mid; fi
  done
fi
limit="the simulated switch (one snmpd + AgentX subagent on one core) saturates"
echo "BENCH snmp_targets_no_overrun $good targets ($limit above $good 64-port polls per 10 s)"

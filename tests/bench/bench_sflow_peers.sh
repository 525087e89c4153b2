#!/usr/bin/env bash
# sFlow collectors side by side: the same stream of sFlow v5 datagrams, replayed at full
# speed over UDP loopback, into
#   (a) fabricscope (one target with sflow for the stream's agent, one catch-all flow rule),
#   (b) pmacct's sfacctd (print plugin, aggregate src_host,dst_host),
#   (c) nfdump's sfcapd (writes nfcapd files),
# one after the other, each pinned to CPU 1 (taskset), the sender to CPU 0. All three get
# the same socket receive buffer (4 MiB, the usual rmem_max).
#
# The stream: SFLOW_PEERS_DGRAMS datagrams (default 150,000; 30,000 with
# FS_BENCH_QUICK=1) of agent 10.0.0.1, 7 flow samples each (1 in 10,000; a 1,400-byte
# datagram's worth, as bench_sflow): 80% RoCEv2 (UDP 4791), 20% NCCL TCP, over 64 ports,
# half of them egress-sampled with queue, transit delay and queue depth records; built
# with tests/sim/sflow/sflow_gen.py's encoder.
#
# CPU: utime + stime (+ cutime + cstime) from /proc/PID/stat of the collector (all its
# threads; for sfacctd its core process, its plugin process and the writers the plugin
# forks per purge, summed) from before the replay to when the
# socket's receive queue is empty and its counts stopped moving. Samples counted:
# fabricscope: fabricscope_sflow_datagrams_total x 7, checked against its catch-all rule's
# fabric_flow_rule_packets_total / 10,000; sfacctd: the packets of its print output (1 per
# sample without renormalisation); sfcapd: the flows of `nfdump -I` (1 per sample). The
# kernel's drops for each socket (/proc/net/udp) are printed too: a collector that cannot
# keep up loses datagrams there, and is charged only for what it counted.
#
# Prints BENCH sflow_cpu_s_per_million_samples (fabricscope), sflow_sfacctd_cpu_s_per_million_samples,
# sflow_sfcapd_cpu_s_per_million_samples, sflow_cpu_ratio_to_sfacctd, sflow_cpu_ratio_to_sfcapd
# (fabricscope's CPU per sample over the peer's; goal <= 0.2 x sfacctd; measured
# 0.12-0.20 x, median 0.18 x, on a loaded shared 2-core VM: tests/bench/README.md), and a
# `# ... received` line per collector. A missing peer is a failure (scripts/install-deps.sh
# installs pmacct and nfdump-sflow), never a skip.
set -euo pipefail
FS_SOURCE_DIR=${FS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
FS_BUILD_DIR=${FS_BUILD_DIR:-$FS_SOURCE_DIR/build}
FABRICSCOPE=$FS_BUILD_DIR/fabricscope
PY=${PYTHON:-python3}
SFACCTD=$(command -v sfacctd || echo /usr/sbin/sfacctd)
SFCAPD=$(command -v sfcapd || echo /usr/bin/sfcapd)
NFDUMP=$(command -v nfdump || echo /usr/bin/nfdump)
PER=7
RATE=10000
if [ "${FS_BENCH_QUICK:-0}" = 1 ]; then DGRAMS=${SFLOW_PEERS_DGRAMS:-30000}; else DGRAMS=${SFLOW_PEERS_DGRAMS:-150000}; fi
die() { echo "bench_sflow_peers: $*" >&2; exit 1; }
[ -x "$FABRICSCOPE" ] || die "build fabricscope first ($FABRICSCOPE)"
[ -x "$SFACCTD" ] || die "sfacctd is not installed (Debian package pmacct; scripts/install-deps.sh)"
[ -x "$SFCAPD" ] && [ -x "$NFDUMP" ] || die "sfcapd/nfdump are not installed (Debian package nfdump-sflow; scripts/install-deps.sh)"
command -v taskset >/dev/null || die "taskset is missing (util-linux)"
command -v curl >/dev/null || die "curl is missing"
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs (sender on 0, collector on 1)"

T=$(mktemp -d "${TMPDIR:-/tmp}/fs-bench-sflow.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
CLK=$(getconf CLK_TCK)

free_port() { # $1: tcp or udp
  $PY - "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if sys.argv[1] == "tcp" else socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
PY
}

# Polls "$@" until it succeeds, for up to $1 seconds.
wait_for() {
  local secs=$1 what=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null; do
    [ $SECONDS -lt $end ] || die "timed out after ${secs}s waiting for: $what"
    sleep 0.1
  done
}

# CPU ticks "user system" of processes and their descendants, each with its reaped
# children's (cutime, cstime: sfacctd's print plugin forks a writer per purge).
cpu_ticks() {
  local u=0 st=0 p kids a b
  for p in "$@"; do
    if [ -r "/proc/$p/stat" ]; then
      # fields 14 and 15, counted after the ")" that ends the command name
      read -r a b < <(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $14, $13 + $15}')
      u=$((u + a)) st=$((st + b))
    fi
    kids=$(cat /proc/"$p"/task/*/children 2>/dev/null | tr -s ' \n' ' ' || true)
    if [ -n "${kids// /}" ]; then
      read -r a b < <(cpu_ticks $kids)
      u=$((u + a)) st=$((st + b))
    fi
  done
  echo "$u $st"
}
# "total_s user_s sys_s" between two cpu_ticks readings.
cpu_s() {
  awk -v a="$1" -v b="$2" -v k="$CLK" 'BEGIN { split(a, x, " "); split(b, y, " ");
    u = (y[1] - x[1]) / k; s = (y[2] - x[2]) / k; printf "%.3f %.3f %.3f\n", u + s, u, s }'
}

# The UDP socket bound to 127.0.0.1:$1: "rx_queue drops" (from /proc/net/udp).
udp_sock() {
  local q d
  read -r q d < <(awk -v p="$(printf '0100007F:%04X' "$1")" '$2 == p { split($5, q, ":"); print q[2], $13 }' /proc/net/udp) || return 0
  echo "$((16#$q)) $d"
}
# $1 port, $2 pid: the collector is still running and has bound its socket.
bound() {
  kill -0 "$2" 2>/dev/null || die "the collector exited: $(tail -3 "$3" 2>/dev/null)"
  [ -n "$(udp_sock "$1")" ]
}
# Stops a collector (and its children): SIGTERM, then SIGKILL after 10 s (sfacctd's core
# process may keep waiting for its plugin).
stop() {
  local p=$1 kids i
  kids=$(cat /proc/"$p"/task/*/children 2>/dev/null || true)
  kill "$p" 2>/dev/null || true
  for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then kill -9 "$p" $kids 2>/dev/null || true; fi
  wait "$p" 2>/dev/null || true
}
rxq_empty() { [ "$(udp_sock "$1" | cut -d' ' -f1)" = 0 ]; }

# Waits until the socket's queue is empty and $2 gives the same value 2 s apart (more than
# sfacctd's print refresh)
# (the collector has taken everything it will take).
settle() {
  local port=$1 fn=$2 a b end=$((SECONDS + 120))
  wait_for 120 "the socket 127.0.0.1:$port drained" rxq_empty "$port"
  a=$($fn)
  while :; do
    sleep 2
    b=$($fn)
    [ "$a" = "$b" ] && rxq_empty "$port" && break
    [ $SECONDS -lt $end ] || die "$fn kept moving ($a, $b)"
    a=$b
  done
}

# ---- the stream ----
$PY - "$FS_SOURCE_DIR/tests/sim/sflow" "$T/stream.bin" "$DGRAMS" "$PER" "$RATE" <<'PY'
import random, struct, sys
sys.path.insert(0, sys.argv[1])
import sflow_gen as g
out, n_dgrams, per, rate = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(20261206)
PORTS = 64
# 1,024 sample templates; sequence and pool patched per use (offsets in the sample).
templates = []
for i in range(1024):
    port = 1 + rng.randrange(PORTS)
    roce = rng.randrange(10) < 8
    egress = rng.randrange(2) == 0
    pkt = g.nccl_packet(rng, "roce" if roce else "tcp", 4, False, rng.randrange(10) < 3)
    rec, _ = g.raw_header_record(pkt)
    recs = [rec]
    if egress:
        recs += g.transit_records(rng, {})
    in_if = port if not egress else 1 + rng.randrange(PORTS)
    out_if = port if egress else 1 + rng.randrange(PORTS)
    s = g.encode_flow_sample(0, 0, port, rate, 0, 0, in_if, out_if, recs)
    templates.append((port, bytearray(s)))
seq = [0] * (PORTS + 1)
with open(out, "wb") as f:
    k = 0
    for d in range(n_dgrams):
        samples = []
        for _ in range(per):
            port, s = templates[k % 1024]
            k += 1
            seq[port] += 1
            struct.pack_into(">I", s, 8, seq[port])                     # sequence
            struct.pack_into(">I", s, 20, (seq[port] * rate) & 0xFFFFFFFF)  # sample pool
            samples.append(bytes(s))
        dg = g.encode_datagram("10.0.0.1", 0, d + 1, 1000 + d // 100, samples)
        f.write(struct.pack(">H", len(dg)) + dg)
PY
cat >"$T/replay.py" <<'PY'
import socket, struct, sys
data = open(sys.argv[1], "rb").read()
dgs, i = [], 0
while i < len(data):
    (n,) = struct.unpack_from(">H", data, i)
    dgs.append(data[i + 2:i + 2 + n])
    i += 2 + n
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", int(sys.argv[2])))
for d in dgs:
    s.send(d)
print(len(dgs))
PY
SENT_SAMPLES=$((DGRAMS * PER))
replay() { taskset -c 0 "$PY" "$T/replay.py" "$T/stream.bin" "$1" >"$T/replay.out" || die "the replay failed"; }

# ---- (a) fabricscope ----
HTTP=$(free_port tcp)
UDP=$(free_port udp)
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
flow_rules:
  - { name: all, dst_ports: 1-65535 }
targets:
  - name: sw1
    address: 10.0.0.1
    sflow: { listen: 127.0.0.1, port: $UDP, interval: 1s, sources: [127.0.0.1] }
EOF
taskset -c 1 "$FABRICSCOPE" -c "$T/fs.yaml" >"$T/fs.log" 2>&1 &
FS_PID=$!
PIDS+=("$FS_PID")
wait_for 30 "fabricscope's sFlow socket" bound "$UDP" "$FS_PID" "$T/fs.log"
fs_metric() { # sum of the values of the lines starting with $1
  curl -fsS "http://127.0.0.1:$HTTP/metrics" | awk -v m="$1" 'index($0, m) == 1 { s += $NF } END { printf "%.0f\n", s }'
}
fs_dgrams() { fs_metric 'fabricscope_sflow_datagrams_total{target="sw1"'; }
wait_for 30 "fabricscope's /metrics" fs_dgrams
c0=$(cpu_ticks "$FS_PID")
replay "$UDP"
settle "$UDP" fs_dgrams
c1=$(cpu_ticks "$FS_PID")
FS_DG=$(fs_dgrams)
FS_RULE=$(fs_metric 'fabric_flow_rule_packets_total{target="sw1",rule="all"')
FS_SAMPLES=$((FS_DG * PER))
[ "$FS_SAMPLES" -gt 0 ] || die "fabricscope counted nothing (log: $(tail -3 "$T/fs.log"))"
[ $((FS_RULE / RATE)) = "$FS_SAMPLES" ] || die "fabricscope: $FS_DG datagrams but its rule counted $FS_RULE packets (not x $PER x $RATE)"
FS_DROPS=$(udp_sock "$UDP" | cut -d' ' -f2)
read -r FS_CPU FS_U FS_S < <(cpu_s "$c0" "$c1")
stop "$FS_PID"

# ---- (b) sfacctd ----
PM=$(free_port udp)
cat >"$T/sfacctd.conf" <<EOF
daemonize: false
sfacctd_ip: 127.0.0.1
sfacctd_port: $PM
sfacctd_pipe_size: 4194304
plugin_pipe_size: 67108864
plugin_buffer_size: 65536
plugins: print
aggregate: src_host, dst_host
print_output: csv
print_output_file: $T/pmacct.csv
print_output_file_append: true
print_refresh_time: 1
logfile: $T/sfacctd.log
EOF
taskset -c 1 "$SFACCTD" -f "$T/sfacctd.conf" >"$T/sfacctd.out" 2>&1 &
PM_PID=$!
PIDS+=("$PM_PID")
wait_for 30 "sfacctd's socket" bound "$PM" "$PM_PID" "$T/sfacctd.out"
pm_samples() { # the packets column summed over every refresh's lines
  [ -f "$T/pmacct.csv" ] || { echo 0; return; }
  awk -F, 'NR == 1 || $1 == "SRC_IP" { for (i = 1; i <= NF; i++) if ($i == "PACKETS") c = i; next }
           c { s += $c } END { printf "%.0f\n", s }' "$T/pmacct.csv"
}
# From its first purge on, its plugin runs as it will (its start-up is not charged).
pm_purged() { grep -q "Purging cache - END" "$T/sfacctd.log" 2>/dev/null; }
wait_for 30 "sfacctd's first purge" pm_purged
c0=$(cpu_ticks "$PM_PID")
replay "$PM"
settle "$PM" pm_samples
c1=$(cpu_ticks "$PM_PID")
PM_SAMPLES=$(pm_samples)
[ "$PM_SAMPLES" -gt 0 ] || die "sfacctd counted nothing (log: $(tail -3 "$T/sfacctd.log" 2>/dev/null))"
PM_DROPS=$(udp_sock "$PM" | cut -d' ' -f2)
read -r PM_CPU PM_U PM_S < <(cpu_s "$c0" "$c1")
stop "$PM_PID"

# ---- (c) sfcapd ----
NF=$(free_port udp)
mkdir -p "$T/nf"
taskset -c 1 "$SFCAPD" -b 127.0.0.1 -p "$NF" -w "$T/nf" -B 4194304 -t 3600 >"$T/sfcapd.out" 2>&1 &
NF_PID=$!
PIDS+=("$NF_PID")
wait_for 30 "sfcapd's socket" bound "$NF" "$NF_PID" "$T/sfcapd.out"
nf_rx() { udp_sock "$NF" | cut -d' ' -f1; }
c0=$(cpu_ticks "$NF_PID")
replay "$NF"
settle "$NF" nf_rx
c1=$(cpu_ticks "$NF_PID")
NF_DROPS=$(udp_sock "$NF" | cut -d' ' -f2)
read -r NF_CPU NF_U NF_S < <(cpu_s "$c0" "$c1")
stop "$NF_PID" # it writes its file out on SIGTERM
NF_SAMPLES=$("$NFDUMP" -R "$T/nf" -I 2>/dev/null | awk '/^Flows:/ { s += $2 } END { printf "%.0f\n", s }')
[ "$NF_SAMPLES" -gt 0 ] || die "sfcapd counted nothing (nfdump -I: $("$NFDUMP" -R "$T/nf" -I 2>&1 | head -5))"

# ---- report ----
echo "# sent $DGRAMS datagrams, $SENT_SAMPLES flow samples, to each collector"
echo "# fabricscope received $FS_DG datagrams ($FS_SAMPLES samples; $FS_DROPS dropped by the kernel at its socket), cpu ${FS_CPU} s (user $FS_U, system $FS_S)"
echo "# sfacctd received $((PM_SAMPLES / PER)) datagrams ($PM_SAMPLES samples; $PM_DROPS dropped by the kernel at its socket), cpu ${PM_CPU} s (user $PM_U, system $PM_S)"
echo "# sfcapd received $((NF_SAMPLES / PER)) datagrams ($NF_SAMPLES samples; $NF_DROPS dropped by the kernel at its socket), cpu ${NF_CPU} s (user $NF_U, system $NF_S)"
awk -v fc="$FS_CPU" -v fs="$FS_SAMPLES" -v pc="$PM_CPU" -v ps="$PM_SAMPLES" -v nc="$NF_CPU" -v ns="$NF_SAMPLES" 'BEGIN {
  f = fc / fs * 1e6; p = pc / ps * 1e6; n = nc / ns * 1e6
  printf "BENCH sflow_cpu_s_per_million_samples %.3f s\n", f
  printf "BENCH sflow_sfacctd_cpu_s_per_million_samples %.3f s\n", p
  printf "BENCH sflow_sfcapd_cpu_s_per_million_samples %.3f s\n", n
  printf "BENCH sflow_cpu_ratio_to_sfacctd %.3f x\n", f / p
  printf "BENCH sflow_cpu_ratio_to_sfcapd %.3f x\n", f / n
}'

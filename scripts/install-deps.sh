#!/usr/bin/env bash
# Installs the Debian packages fabricscope needs to build, test and run its demo
# (--build-only: to build it and its packages).
# Only what is missing is installed, with --no-install-recommends. Idempotent.
set -euo pipefail

# --build-only: what building the binaries and the Debian packages needs (`make package`),
# without the test tools (simulators, Prometheus, Chromium, tshark, ...).
# --list: print the packages instead of installing them.
BUILD_ONLY=0
LIST=0
for a in "$@"; do
  case $a in
    --build-only) BUILD_ONLY=1 ;;
    --list) LIST=1 ;;
    *) echo "usage: $0 [--build-only] [--list]" >&2; exit 2 ;;
  esac
done

BUILD_PACKAGES=(
  gcc make cmake pkg-config
  libyang2-dev libyaml-dev libmicrohttpd-dev libjson-c-dev zlib1g-dev
  libsnmp-dev
  libssh2-1-dev libssl-dev  # ONYX CLI driver (libssh2, libcrypto)
  libsqlite3-dev libcurl4-openssl-dev  # importers: Nsight Systems SQLite exports, posting to the collector
  libyajl-dev  # streaming JSON parser of POST /api/v1/host-events bodies
  libsnappy-dev  # remote_write (with libcurl4-openssl-dev, protobuf-c-compiler, libprotobuf-c-dev)
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev  # gNMI driver (gRPC C core, protobuf-c)
  dpkg-dev file  # cpack -G DEB: dpkg-shlibdeps finds the Depends, file tells it the ELF files
)
TEST_PACKAGES=(
  clang libclang-rt-14-dev  # fuzzers (libFuzzer) and the sanitizer builds
  libyang2-tools
  openssh-server python3  # the ONYX CLI simulator behind a real sshd
  python3-prometheus-client python3-yaml  # ops: strict OpenMetrics parser; YAML checks of alerts and compose
  libcmocka-dev prometheus snmpd snmp prometheus-snmp-exporter curl jq procps util-linux iproute2
  ca-certificates
  # the gNMI simulator (Debian python3 grpcio/protobuf, openssl)
  libprotobuf-dev protobuf-compiler python3-grpcio python3-protobuf openssl
  systemd nftables linux-perf  # packaging test (systemd-analyze verify); acceptance test (packet loss, perf record)
  chromium  # web view test: the page rendered in headless Chromium (tests/integration/test_web_view.sh)
  tshark  # sFlow decoder test: Wireshark's dissector as an independent decoder (tests/integration/test_sflow_tshark.sh)
  pmacct  # sFlow estimate test: sfacctd's per-port volumes beside ours (tests/integration/test_sflow_pmacct.sh); CPU beside sfacctd (tests/bench/bench_sflow_peers.sh)
  nfdump-sflow  # sFlow CPU benchmark: nfdump's sfcapd beside ours (tests/bench/bench_sflow_peers.sh, make bench)
  lintian man-db  # Debian packages test (tests/ops/test_deb.sh; built by cpack; man-db: lintian reads the man pages)
  debootstrap  # the packages installed into a clean root (tests/ops/deb-clean-root.sh, make package-check-root)
  libfaketime  # host agent capture test: the agent's (and its perf's) wall clock set 40 ms behind
  victoria-metrics  # a fleet on VictoriaMetrics: remote_write into it, analysis.history from it (tests/integration/test_victoria_metrics.sh)
  libpcap-dev  # real sFlow agent test: hsflowd built from tests/peers/ with FEATURES=PCAP (tests/integration/test_sflow_hsflowd.sh)
  lldpd  # topology test: LLDP between network namespaces, LLDP-MIB through snmpd (lldpd -x, tests/integration/test_topology_lldpd.sh)
)
PACKAGES=("${BUILD_PACKAGES[@]}")
[ $BUILD_ONLY = 1 ] || PACKAGES+=("${TEST_PACKAGES[@]}")
if [ $LIST = 1 ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Package lists may be absent on a fresh machine; refresh them when a package is unknown.
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

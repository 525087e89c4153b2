#!/usr/bin/env bash
# The sFlow v5 decoder (drivers/sflow/decode.c) against an independent decoder, tshark
# (Wireshark's sFlow dissector), on datagrams built by tests/sim/sflow/sflow_gen.py:
# NCCL RoCEv2 (UDP 4791, CE and non-CE) and TCP socket traffic, VLAN-tagged and untagged,
# IPv4 and IPv6 agents, counter samples, drop notifications, transit/queue records,
# unknown samples and records. Every decoded datagram must equal the generator's truth,
# and every field tshark also decodes must equal tshark's value; what tshark 4.0 cannot
# decode (sflow_drops.txt samples, sflow_transit.txt records, anything after a record it
# cannot skip) is listed as checked against the truth only (tests/integration/sflow_compare.py);
# the packet fields of every sampled header are also checked against tshark's dissection of
# that header alone, which covers drop notifications.
# Needs tshark (scripts/install-deps.sh): fails, never skips, without it.
source "$(dirname "$0")/lib.sh"

DUMP=$FS_BUILD_DIR/tests/fs-sflow-dump
[ -x "$DUMP" ] || fail "build fs-sflow-dump first"
command -v tshark >/dev/null || fail "tshark is not installed (scripts/install-deps.sh installs it)"
PY=${PYTHON:-python3}

$PY "$FS_SOURCE_DIR/tests/sim/sflow/sflow_gen.py" --count 40 --pcap "$T/sflow.pcap" \
  --raw-dir "$T/raw" --truth "$T/truth.jsonl" --headers-pcap "$T/headers.pcap"
"$DUMP" "$T"/raw/dgram_*.bin > "$T/decoded.jsonl" || fail "the decoder refused a generated datagram: $(grep error "$T/decoded.jsonl" | head -3)"
ok "decoded $(wc -l < "$T/decoded.jsonl") datagrams"

# Root is warned about, not refused; the warning goes to stderr, kept in a log.
tshark -r "$T/sflow.pcap" -d udp.port==6343,sflow -T pdml > "$T/tshark.pdml" 2> "$T/tshark.log" ||
  fail "tshark could not read the capture"
tshark -r "$T/headers.pcap" -T pdml > "$T/headers.pdml" 2>> "$T/tshark.log" ||
  fail "tshark could not read the sampled headers"
tshark --version | head -1
$PY "$FS_SOURCE_DIR/tests/integration/sflow_compare.py" "$T/truth.jsonl" "$T/decoded.jsonl" \
  "$T/tshark.pdml" "$T/headers.pdml" || fail "decoder, tshark and truth disagree (see above)"
ok "decoder agrees with tshark and with the generator's truth"

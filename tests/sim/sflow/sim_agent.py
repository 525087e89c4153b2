#!/usr/bin/env python3
"""sim_agent: a simulated switch's sFlow v5 agent (test code, never shipped; stdlib only).

Emits, over real UDP, the sFlow a Spectrum switch configured for egress sampling, counter
polling and drop monitoring would send, computed from the shared scenario model
(tests/sim/scenario.py): the same switch the SNMP, ONYX CLI and gNMI simulators serve for
the same scenario file, so every number here can be predicted from the model.

What the datagrams carry (ports Eth1/1..Eth1/N, ifIndex 100+N as in onyx_snmp_sim.c):
  flow samples     egress-sampled packets of each port, 1 in --sampling-rate of the port's
                   packets (the model's port_ucast_pkts). Each sample carries the first 128
                   bytes of the packet (raw header record), then the egress queue (1036),
                   transit delay (1039) and queue depth (1040) records of sflow_transit.txt.
                   The packet's traffic class follows the scenario's tc_share; traffic on
                   the incident's tc is NCCL RoCEv2 (UDP 4791 with a BTH, DSCP 8*tc+2),
                   other traffic is NCCL socket TCP (ports 50000-50999) or, for a share
                   OTHER_SHARE of it, traffic no NCCL rule matches (NFS, HTTPS, SSH, DNS).
                   A RoCEv2 packet is CE-marked with probability (the model's ECN-mark rate
                   on the port at the packet's time) / (the port's packet rate on that tc),
                   so the CE share of the samples is the model's mark share and rises
                   during the culprit's surge. Queue depth is the model's
                   queue_depth_bytes(port, tc, t); transit delay is SWITCH_LATENCY_NS plus
                   that depth drained at LINK_SPEED_BPS. Every frame is packet_bytes long
                   (frame_length, FCS included), so samples x rate x length estimates the
                   model's octets.
  counter samples  generic interface and Ethernet counters of every port every
                   --counter-interval s (ports spread over the interval, as agents do),
                   read at the datagram's uptime: octets and unicast packets are the
                   model's port_octets / port_ucast_pkts (rx = tx, as in the model);
                   counters the model does not have (multicast, broadcast, discards,
                   errors, Ethernet errors) are counter_base, as the CLI simulator prints.
  discard samples  sflow_drops.txt notifications for the model's drops: WRED drops
                   (tc_wred_dropped) with reason red (260), no-buffer drops
                   (tc_no_buffer_dropped) with reason no_buffer_space (259), at most
                   --drop-limit per second of uptime; the sample's drops field counts the
                   notifications the limit suppressed on that port.

Time: everything is a function of the scenario's seconds since boot (its boot_epoch_s and
frozen_at_s); the datagram's uptime is that time in ms. sFlow carries no wall clock, so
the scenario's clock_offset_ms shows nowhere but in --pcap timestamps (device time).

Determinism: which packets are sampled, and each sample's traffic, ECN and flow, are
hashes of (--seed, port, sample number) with the model's splitmix64; sample number b of a
port is the packet drawn at random inside that port's b-th block of rate packets since
boot (one sample per block: exactly 1 in rate, random position), and its time is the
model's time of that packet. So the samples describing a stretch of scenario time are the
same whatever the process's start and tick times (test_sflow_sim compares a live run with
an offline one in other ticks). --truth writes JSON lines: {"kind": "start", uptime_ms,
sampling_rate}, then per datagram (sent or skipped by --drop-seq) its header and every
sample with what a checker needs to recompute it from the model: port, ifIndex, sample
time t, packet number, traffic kind, tc, proto, ports, DSCP, ECN, the CE probability used,
sampling rate, frame length, queue depth, delay (tests/integration/sflow_sim_check.py
does), and {"kind": "end", uptime_ms, datagrams}.

Sampling rate: default DEFAULT_RATE (1 in 10,000, as switches are commonly set), lowered
for a scenario too slow for it to the largest power of ten that gives the culprit port at
least MIN_CULPRIT_SAMPLES_PER_S samples per second, so that a 2 s surge holds about 100
samples. The default scenario (64 ports, 10 Gb/s) keeps 1 in 10,000: about 5,000 samples
per second in all, 62 per second on Eth1/49, about a fifth of a core in Python.

Sequence numbers: datagrams count from 1 at process start (per agent, as a restarted
agent does); a port's flow sample sequence is its sample number since boot + 1 and the
sample pool its packets since boot (both mod 2^32), its counter sample sequence the
number of its counter polls since boot + 1, and its discard samples count from 1 at
process start.

Usage (see --help):
  sim_agent.py --scenario S.json --collector 127.0.0.1:6343 [--collector [::1]:6343]
               [--agent 10.0.0.1] [--duration 10] [--ready-file F] [--truth F]
  sim_agent.py --scenario S.json --pcap out.pcap --start 5 --duration 30   (offline: no
               sockets, no waiting; the ticks run in simulated time)
"""
import argparse
import functools
import ipaddress
import json
import math
import os
import signal
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)                    # sflow_gen.py
sys.path.insert(0, os.path.dirname(HERE))   # tests/sim: scenario.py
import sflow_gen as gen  # noqa: E402
from scenario import M64, Scenario, splitmix64, unit  # noqa: E402

IFINDEX_BASE = 100            # Eth1/N is ifIndex 100+N (tests/sim/onyx_snmp_sim.c)
LINK_SPEED_BPS = 100e9        # ifHighSpeed 100000 (SNMP simulator), "100 Gbps" (CLI)
SWITCH_LATENCY_NS = 500       # port-to-port latency of an empty queue (assumed)
HEADER_BYTES = 128            # sampled header length (host-sflow's default)
MAX_DATAGRAM = 1400           # UDP payload bound: one datagram fits a 1500-byte MTU
DEFAULT_RATE = 10000          # 1 in 10,000, a common switch setting
MIN_CULPRIT_SAMPLES_PER_S = 50
DEFAULT_COUNTER_INTERVAL = 20.0
DEFAULT_DROP_LIMIT = 1000     # notifications per second per agent
DEFAULT_TICK_MS = 100         # how often samples are gathered and datagrams sent
OTHER_SHARE = 0.25            # of the non-incident tc traffic: matches no NCCL rule
FLOWS_PER_PORT = 16           # distinct 5-tuples per port and traffic kind
REASON_RED = 260              # sflow_drop.h: red
REASON_NO_BUFFER = 259        # sflow_drop.h: no_buffer_space (tail drop)
ROCE_OPCODES = [0x06, 0x07, 0x07, 0x07, 0x08, 0x0A]  # RC RDMA WRITE first/middle/last/only
OTHER_SERVICES = [(6, 2049), (6, 443), (6, 22), (17, 53)]  # NFS, HTTPS, SSH, DNS


def mix(*vals):
    """A 64-bit hash of integers, chained through the model's splitmix64."""
    h = 0
    for v in vals:
        h = splitmix64((h ^ (v & M64)) & M64)
    return h


def port_Bps(sc, p):
    """Port p's tx (= rx) bytes per second in the model (scenario.port_octets)."""
    return sc.rate_bps / 8 * ((p % 4) + 1) / 4


def raw_pkts(sc, p, t):
    """Port p's packets since boot at t, without counter_base: the sample pool."""
    return sc.port_ucast_pkts(p, t) - sc.counter_base


def packet_time(sc, p, k):
    """Seconds since boot at which port p sends its k-th packet (k from 1)."""
    return k * sc.packet_bytes / port_Bps(sc, p)


def auto_sampling_rate(sc):
    """DEFAULT_RATE, or for a scenario whose culprit port is too slow for it, the largest
    power of ten that still gives that port MIN_CULPRIT_SAMPLES_PER_S samples per second
    (a 2 s surge then holds about 100 samples, of which tc_share on the incident's tc)."""
    p = sc.cong["port"] if 1 <= sc.cong["port"] <= sc.ports else sc.ports
    pps = port_Bps(sc, p) / sc.packet_bytes
    n = DEFAULT_RATE
    while n > 1 and pps / n < MIN_CULPRIT_SAMPLES_PER_S:
        n //= 10
    return n


def tc_of(sc, u):
    """The traffic class drawn with uniform u from the scenario's tc_share."""
    total = sum(sc.tc_share)
    if total <= 0:
        return 0
    acc = 0.0
    for tc, s in enumerate(sc.tc_share):
        acc += s / total
        if u < acc:
            return tc
    return max(tc for tc, s in enumerate(sc.tc_share) if s > 0)


def ce_probability(sc, p, tc, t):
    """Chance that a packet of port p on tc at t is CE-marked: the model's mark rate over
    the port's packet rate on that tc (marks are all on the incident's tc), at most 1."""
    if tc != sc.cong["tc"] or not 0 <= tc < 8 or sc.tc_share[tc] <= 0:
        return 0.0
    pps = port_Bps(sc, p) / sc.packet_bytes * sc.tc_share[tc] / sum(sc.tc_share)
    return min(1.0, sc.port_ecn_rate(p, t) / pps) if pps > 0 else 0.0


def other_port(sc, p, h):
    """The ingress port of a packet leaving port p (any other port), from hash h."""
    if sc.ports < 2:
        return p
    q = 1 + h % (sc.ports - 1)
    return q + 1 if q >= p else q


def packet_of(sc, p, q, tc, kind, flow, ecn, psn):
    """The frame (sflow_gen.build_packet's description) of a packet of traffic kind
    ('roce', 'tcp' or 'other') from the host behind port q to the host behind port p."""
    h = mix(p, q, tc, flow, 0x5EED)
    l4 = {"roce": 8 + 12, "tcp": 20, "other": 20}[kind]
    d = {"dst_mac": bytes([0x02, 0, 0, 0, (p >> 8) & 0xFF, p & 0xFF]),
         "src_mac": bytes([0x7C, 0xFE, 0x90, 0, 0, 0x01]),  # the switch's routed port
         "ipv": 4, "src": "10.0.%d.%d" % (q % 256, 1 + flow % 250),
         "dst": "10.0.%d.%d" % (p % 256, 1 + (flow * 7) % 250), "ttl": 63, "ecn": ecn}
    if kind == "roce":
        d.update(proto=17, sport=49152 + h % 16384, dport=gen.ROCE_PORT, dscp=8 * tc + 2,
                 bth_opcode=ROCE_OPCODES[(h >> 16) % len(ROCE_OPCODES)],
                 bth_qp=(h >> 24) & 0xFFFFFF, bth_psn=psn & 0xFFFFFF)
    elif kind == "tcp":
        d.update(proto=6, sport=50000 + h % 1000, dport=50000 + (h >> 20) % 1000, dscp=8 * tc)
    else:
        proto, port = OTHER_SERVICES[h % len(OTHER_SERVICES)]
        l4 = 20 if proto == 6 else 8
        d.update(proto=proto, sport=32768 + (h >> 8) % 28232, dport=port, dscp=8 * tc)
    d["payload_len"] = max(0, sc.packet_bytes - 4 - 14 - 20 - l4)
    return d


def header_record(pkt):
    """The raw packet header record (first HEADER_BYTES of the frame, 4 FCS bytes stripped,
    as sflow_gen.raw_header_record writes it, without its truth) and the frame length."""
    frame = gen.build_packet(pkt)
    body = gen.u32(1) + gen.u32(len(frame) + 4) + gen.u32(4) + gen.opaque(frame[:HEADER_BYTES])
    return gen.tagged(0, 1, body), len(frame) + 4


class Agent:
    """The agent's state between ticks. tick(T_ms) returns the datagrams for the scenario
    time (T_prev, T_ms]: a pure function of the scenario, the options and the tick times."""

    def __init__(self, sc, agent, sub_agent=0, rate=None, counter_interval=20.0, seed=1,
                 drop_seq=(), drop_limit=DEFAULT_DROP_LIMIT):
        self.sc = sc
        self.agent = agent
        self.sub_agent = sub_agent
        self.rate = rate or auto_sampling_rate(sc)
        self.interval = counter_interval
        self.seed = seed
        self.drop_seq = set(drop_seq)
        self.drop_limit = drop_limit
        self.ports = range(1, sc.ports + 1)
        self.t_ms = None
        self.dgram_seq = 0
        self.pkts = {}
        self.polls = {}
        self.wred = {}
        self.nobuf = {}
        self.discard_seq = {p: 0 for p in self.ports}
        self.suppressed = {p: 0 for p in self.ports}
        self.limit_bin = (None, 0)
        hdr_len = 28 if ipaddress.ip_address(agent).version == 4 else 40
        self.room = MAX_DATAGRAM - hdr_len
        # busy_port is a pure hash of the port: cache it (it is called per sample)
        sc.busy_port = functools.lru_cache(maxsize=None)(sc.busy_port)

    def poll_index(self, p, t):
        """Number of port p's counter polls due by t since boot (polls at phase + m*interval,
        phases spread over the interval)."""
        phase = self.interval * (p - 1) / len(self.ports)
        return math.floor((t - phase) / self.interval)

    def start(self, t_ms):
        """The first tick: takes the state at t_ms and emits nothing."""
        sc, t = self.sc, t_ms / 1000.0
        self.t_ms = t_ms
        for p in self.ports:
            self.pkts[p] = raw_pkts(sc, p, t)
            self.polls[p] = self.poll_index(p, t)
            self.wred[p] = [sc.tc_wred_dropped(p, tc, t) for tc in range(8)]
            self.nobuf[p] = [sc.tc_no_buffer_dropped(p, tc, t) for tc in range(8)]

    # ---- samples ----
    def flow_samples(self, t):
        """Flow samples of the packets sent since the last tick, in time order."""
        sc, n, out = self.sc, self.rate, []
        for p in self.ports:
            k0, k1 = self.pkts[p], raw_pkts(sc, p, t)
            self.pkts[p] = k1
            for b in range(k0 // n, (k1 - 1) // n + 1) if k1 > k0 else ():
                hb = mix(self.seed, p, b)
                k = b * n + 1 + int(unit(hb) * n)
                if k0 < k <= k1:
                    out.append(self.flow_sample(p, b, k, hb))
        out.sort(key=lambda s: s[1]["t"])
        return out

    def flow_sample(self, p, b, k, hb):
        sc = self.sc
        t = packet_time(sc, p, k)
        tc = tc_of(sc, unit(splitmix64(hb ^ 1)))
        if tc == sc.cong["tc"]:
            kind = "roce"
        else:
            kind = "other" if unit(splitmix64(hb ^ 2)) < OTHER_SHARE else "tcp"
        ce_p = ce_probability(sc, p, tc, t)
        ce = unit(splitmix64(hb ^ 3)) < ce_p
        ecn = 3 if ce else (2 if kind != "other" else 0)
        hf = splitmix64(hb ^ 4)
        q = other_port(sc, p, hf)
        pkt = packet_of(sc, p, q, tc, kind, (hf >> 32) % FLOWS_PER_PORT, ecn, k)
        rec, frame_len = header_record(pkt)
        depth = sc.queue_depth_bytes(p, tc, t)
        delay = SWITCH_LATENCY_NS + int(depth * 8e9 / LINK_SPEED_BPS)
        records = [rec, gen.tagged(0, 1036, gen.u32(tc)), gen.tagged(0, 1039, gen.u32(delay)),
                   gen.tagged(0, 1040, gen.u32(depth))]
        ifi = IFINDEX_BASE + p
        body = gen.encode_flow_sample((b + 1) & 0xFFFFFFFF, 0, ifi, self.rate, k & 0xFFFFFFFF, 0,
                                      IFINDEX_BASE + q, ifi, records)
        truth = {"kind": "flow", "port": p, "if_index": ifi, "input": IFINDEX_BASE + q,
                 "sequence": (b + 1) & 0xFFFFFFFF, "sample_pool": k & 0xFFFFFFFF,
                 "packet": k, "t": t, "sampling_rate": self.rate, "frame_length": frame_len,
                 "traffic": kind, "tc": tc, "proto": pkt["proto"], "src_port": pkt["sport"],
                 "dst_port": pkt["dport"], "dscp": pkt["dscp"], "ecn": ecn, "ce_probability": ce_p,
                 "egress_queue": tc, "queue_depth_bytes": depth, "transit_delay_ns": delay}
        return body, truth

    def discard_samples(self, t):
        """One notification per model drop since the last tick, within --drop-limit per
        second of uptime; the rest are counted in the port's drops field."""
        sc, out = self.sc, []
        sec = int(t)
        if self.limit_bin[0] != sec:
            self.limit_bin = (sec, 0)
        for p in self.ports:
            for tc in range(8):
                for table, fn, reason in ((self.wred, sc.tc_wred_dropped, REASON_RED),
                                          (self.nobuf, sc.tc_no_buffer_dropped, REASON_NO_BUFFER)):
                    v = fn(p, tc, t)
                    first, table[p][tc] = table[p][tc], v
                    for j in range(first + 1, v + 1):  # the model's drop number j
                        if self.limit_bin[1] >= self.drop_limit:
                            self.suppressed[p] += v + 1 - j
                            break
                        self.limit_bin = (sec, self.limit_bin[1] + 1)
                        out.append(self.discard_sample(p, tc, j - sc.counter_base, reason))
        return out

    def discard_sample(self, p, tc, j, reason):
        sc = self.sc
        h = mix(self.seed, p, tc, j, 0xD409)
        q = other_port(sc, p, h)
        kind = "roce" if tc == sc.cong["tc"] else "tcp"
        pkt = packet_of(sc, p, q, tc, kind, (h >> 32) % FLOWS_PER_PORT, 2, j)
        rec, frame_len = header_record(pkt)
        self.discard_seq[p] += 1
        seq = self.discard_seq[p] & 0xFFFFFFFF
        ifi = IFINDEX_BASE + p
        drops = self.suppressed[p] & 0xFFFFFFFF
        body = gen.encode_discard_sample(seq, ifi, drops, IFINDEX_BASE + q, ifi, reason, [rec])
        truth = {"kind": "discard", "port": p, "if_index": ifi, "input": IFINDEX_BASE + q,
                 "sequence": seq, "tc": tc, "drop": j, "reason": reason, "drops": drops,
                 "traffic": kind, "proto": pkt["proto"], "dst_port": pkt["dport"],
                 "ecn": pkt["ecn"], "frame_length": frame_len}
        return body, truth

    def counter_samples(self, t):
        """Counter samples of the ports whose poll fell due, read at t."""
        sc, out = self.sc, []
        base32 = sc.counter_base & 0xFFFFFFFF
        for p in self.ports:
            m = self.poll_index(p, t)
            if m <= self.polls[p]:
                continue
            self.polls[p] = m
            octets = sc.port_octets(p, t) & M64
            pkts = sc.port_ucast_pkts(p, t) & 0xFFFFFFFF
            g = {n: base32 for n, _ in gen.GENERIC_FIELDS}
            g.update(if_index=IFINDEX_BASE + p, if_type=6, if_speed=int(LINK_SPEED_BPS),
                     if_direction=1, if_status=3, in_octets=octets, in_ucast=pkts,
                     out_octets=octets, out_ucast=pkts, promiscuous=0)
            e = {n: base32 for n in gen.ETHERNET_FIELDS}
            seq = (m + 1) & 0xFFFFFFFF
            body = gen.encode_counter_sample(seq, IFINDEX_BASE + p, gen.counter_records(g, e))
            out.append((body, {"kind": "counters", "port": p, "if_index": IFINDEX_BASE + p,
                               "sequence": seq, "t": t, "generic": g, "ethernet": e}))
        return out

    # ---- datagrams ----
    def tick(self, t_ms):
        """Samples of (previous tick, t_ms] packed into datagrams: [(bytes, header truth,
        [sample truth...], sent)]. Flow, discard and counter samples go in datagrams of
        their own kind (so that tshark 4.0, which cannot skip the transit records, still
        dissects whole the datagrams of counters)."""
        if self.t_ms is None:
            self.start(t_ms)
            return []
        if t_ms <= self.t_ms:
            return []
        self.t_ms = t_ms
        t = t_ms / 1000.0
        out = []
        for group in (self.flow_samples(t), self.discard_samples(t), self.counter_samples(t)):
            batch, size = [], 0
            for body, truth in group:
                if batch and size + len(body) > self.room:
                    out.append(self.datagram(t_ms, batch))
                    batch, size = [], 0
                batch.append((body, truth))
                size += len(body)
            if batch:
                out.append(self.datagram(t_ms, batch))
        return out

    def datagram(self, t_ms, batch):
        self.dgram_seq += 1
        seq = self.dgram_seq & 0xFFFFFFFF
        uptime = t_ms & 0xFFFFFFFF
        body = gen.encode_datagram(self.agent, self.sub_agent, seq, uptime, [b for b, _ in batch])
        head = {"agent": str(ipaddress.ip_address(self.agent)), "sub_agent": self.sub_agent,
                "datagram_sequence": seq, "uptime_ms": uptime, "n_samples": len(batch),
                "sent": seq not in self.drop_seq}
        samples = [dict(tr, index=i) for i, (_, tr) in enumerate(batch)]
        return body, head, samples, head["sent"]


# ---------------- outputs ----------------


def parse_hostport(s):
    """HOST:PORT with an IPv4 literal or [IPv6]:PORT (or a bare IPv6 literal:PORT)."""
    if s.startswith("["):
        host, _, port = s[1:].partition("]:")
    else:
        host, _, port = s.rpartition(":")
    a = ipaddress.ip_address(host)
    return (socket.AF_INET if a.version == 4 else socket.AF_INET6), str(a), int(port)


def parse_list(s):
    """'3,5,9-11' -> {3, 5, 9, 10, 11}."""
    out = set()
    for part in filter(None, (s or "").split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


class Pcap:
    """Datagrams as UDP frames to port 6343 with the device clock's timestamps."""

    def __init__(self, path):
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        self.n = 0

    def write(self, payload, ts):
        frame = gen.udp_frame(payload, self.n % 20000)
        self.n += 1
        sec = int(ts)
        self.f.write(struct.pack("<IIII", sec, int((ts - sec) * 1e6), len(frame), len(frame)))
        self.f.write(frame)

    def close(self):
        self.f.close()


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="sFlow v5 agent simulator on the shared scenario "
                                 "model (tests/sim/scenario.py)")
    ap.add_argument("--scenario", help="scenario JSON (tests/sim/scenario.py); default: "
                    "its defaults, booted now")
    ap.add_argument("--collector", action="append", default=[],
                    help="HOST:PORT or [IPv6]:PORT to send to (repeatable)")
    ap.add_argument("--agent", default="127.0.0.1", help="agent address in the datagrams")
    ap.add_argument("--sub-agent", type=int, default=0)
    ap.add_argument("--sampling-rate", type=int, default=0,
                    help="1 in N packets (default %d, or lower for a slow scenario: the largest "
                    "power of ten giving the culprit port %d samples/s)"
                    % (DEFAULT_RATE, MIN_CULPRIT_SAMPLES_PER_S))
    ap.add_argument("--counter-interval", type=float, default=DEFAULT_COUNTER_INTERVAL,
                    help="seconds between counter samples of a port (default 20)")
    ap.add_argument("--drop-limit", type=int, default=DEFAULT_DROP_LIMIT,
                    help="drop notifications per second at most (default %d)" % DEFAULT_DROP_LIMIT)
    ap.add_argument("--duration", type=float, help="seconds to run (default: until SIGTERM)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tick-ms", type=int, default=DEFAULT_TICK_MS,
                    help="gather samples and send datagrams every this many ms (default 100)")
    ap.add_argument("--ready-file", help="written once the sockets are open")
    ap.add_argument("--drop-seq", help="datagram sequence numbers not to send, e.g. 3,7-9")
    ap.add_argument("--truth", help="JSON lines: every datagram and sample emitted")
    ap.add_argument("--pcap", help="write datagrams to this pcap instead of sending "
                    "(offline: simulated time, no waiting)")
    ap.add_argument("--start", type=float,
                    help="with --pcap: seconds since boot of the first tick (default 0)")
    a = ap.parse_args()
    if not a.collector and not a.pcap:
        ap.error("give --collector (or --pcap)")
    if a.pcap and (a.duration is None or a.collector):
        ap.error("--pcap needs --duration and sends nothing (no --collector)")
    sc = Scenario(a.scenario)
    agent = Agent(sc, a.agent, a.sub_agent, a.sampling_rate or None, a.counter_interval, a.seed,
                  parse_list(a.drop_seq), a.drop_limit)
    dests = [parse_hostport(c) for c in a.collector]
    socks = {}
    for fam, _, _ in dests:
        if fam not in socks:
            socks[fam] = socket.socket(fam, socket.SOCK_DGRAM)
    pcap = Pcap(a.pcap) if a.pcap else None
    truth = open(a.truth, "w") if a.truth else None
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    if a.ready_file:
        write_atomic(a.ready_file, "%d %d\n" % (os.getpid(), agent.rate))
    print("sim_agent: agent %s sub-agent %d, 1 in %d, counters every %gs, %d ports -> %s"
          % (a.agent, a.sub_agent, agent.rate, a.counter_interval, sc.ports,
             a.pcap or ", ".join(a.collector)), file=sys.stderr, flush=True)

    reported = set()

    def emit(t_ms, first=False):
        for body, head, samples, sent in agent.tick(t_ms):
            if sent:
                if pcap:
                    pcap.write(body, sc.boot_epoch_s + t_ms / 1000.0 + sc.clock_offset_ms / 1000.0)
                for fam, host, port in dests:
                    try:
                        socks[fam].sendto(body, (host, port))
                    except OSError as e:  # no collector yet: a real agent keeps going
                        if (host, port, e.errno) not in reported:  # once, not per datagram
                            reported.add((host, port, e.errno))
                            print("sim_agent: send to %s:%d: %s" % (host, port, e),
                                  file=sys.stderr, flush=True)
            if truth:
                truth.write(json.dumps(dict(head, kind="datagram", samples=samples),
                                       sort_keys=True) + "\n")
        if truth and first:
            truth.write(json.dumps({"kind": "start", "uptime_ms": t_ms,
                                    "sampling_rate": agent.rate}) + "\n")

    n_ticks = None
    if pcap:
        t0 = int(round((a.start or 0.0) * 1000))
        n_ticks = int(a.duration * 1000 // a.tick_ms)
        emit(t0, first=True)
        for i in range(1, n_ticks + 1):
            emit(t0 + i * a.tick_ms)
        last = t0 + n_ticks * a.tick_ms
    else:
        began = time.monotonic()
        last = int(sc.since_boot() * 1000)
        emit(last, first=True)
        nxt = began
        while not stop:
            nxt += a.tick_ms / 1000.0
            if a.duration is not None and nxt > began + a.duration:
                break
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing of the agent itself, not a synchronisation
            if stop:
                break
            last = int(sc.since_boot() * 1000)
            emit(last)
    if truth:
        truth.write(json.dumps({"kind": "end", "uptime_ms": last,
                                "datagrams": agent.dgram_seq}) + "\n")
        truth.close()
    if pcap:
        pcap.close()
    print("sim_agent: %d datagrams" % agent.dgram_seq, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()

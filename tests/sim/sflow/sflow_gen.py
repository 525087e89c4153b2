#!/usr/bin/env python3
"""sFlow v5 datagram generator for the decoder tests (standard library only).

Builds datagrams with everything drivers/sflow/decode.c decodes: flow samples (compact and
expanded) whose raw packet headers carry NCCL traffic (RoCEv2 to UDP 4791 with CE and
non-CE ECN bits, TCP NCCL socket traffic on ports 50000-51000, VLAN-tagged and untagged,
IPv4 and IPv6), the egress-queue / transit-delay / queue-depth records of sflow_transit.txt,
counter samples (generic interface and Ethernet counters), dropped-packet notifications of
sflow_drops.txt with reason codes, and unknown samples and records that a decoder must skip.

Writes:
  --pcap FILE     the datagrams as UDP packets to port 6343 (Ethernet/IPv4), for tshark;
  --raw-dir DIR   each datagram's UDP payload as DIR/dgram_NNN.bin;
  --truth FILE    one JSON object per datagram: what a correct decoder must report, in the
                  shape tests/integration/sflow_dump.c prints;
  --headers-pcap FILE  every sampled header alone as a (cut) Ethernet frame, so that tshark
                  can check the packet fields even where it cannot parse the sample.
--count N adds N-5 seeded random datagrams after the five fixed ones (default 12 in all).
"""
import argparse
import ipaddress
import json
import os
import random
import struct

SFLOW_PORT = 6343
ROCE_PORT = 4791
UNKNOWN_ENTERPRISE = 4242  # a vendor structure no decoder here knows


def u32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack(">Q", v)


def opaque(b):
    return u32(len(b)) + b + b"\0" * (-len(b) % 4)


def tagged(enterprise, fmt, body):
    """A sample or record: data_format (enterprise << 12 | format), length, body."""
    return u32(enterprise << 12 | fmt) + u32(len(body)) + body


def mac_str(b):
    return ":".join("%02x" % x for x in b)


# ---------------- sampled packets ----------------


def ipv4_checksum(hdr):
    s = sum(struct.unpack(">10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def build_packet(p):
    """Returns the full Ethernet frame for packet description p (a dict)."""
    l4 = b""
    if p["proto"] == 17:
        payload = b""
        if p["dport"] == ROCE_PORT:
            # BTH: opcode, SE/M/pad/tver, P_Key, FECN/BECN+resv, dest QP, AckReq+resv, PSN
            payload = (bytes([p["bth_opcode"], 0x40]) + struct.pack(">H", 0xFFFF) + b"\0" +
                       p["bth_qp"].to_bytes(3, "big") + b"\x80" + p["bth_psn"].to_bytes(3, "big"))
        payload += bytes(p["payload_len"])
        l4 = struct.pack(">HHHH", p["sport"], p["dport"], 8 + len(payload), 0) + payload
    elif p["proto"] == 6:
        l4 = struct.pack(">HHIIBBHHH", p["sport"], p["dport"], 1000, 2000, 5 << 4, 0x18, 512, 0,
                         0) + bytes(p["payload_len"])
    tos = p["dscp"] << 2 | p["ecn"]
    if p["ipv"] == 4:
        hdr = struct.pack(">BBHHHBBH4s4s", 0x45, tos, 20 + len(l4), 0x1234, 0x4000, p["ttl"],
                          p["proto"], 0, ipaddress.IPv4Address(p["src"]).packed,
                          ipaddress.IPv4Address(p["dst"]).packed)
        hdr = hdr[:10] + struct.pack(">H", ipv4_checksum(hdr)) + hdr[12:]
        l3, etype = hdr + l4, 0x0800
    else:
        first = 6 << 28 | tos << 20 | 0x12345
        l3 = (struct.pack(">IHBB", first, len(l4), p["proto"], p["ttl"]) +
              ipaddress.IPv6Address(p["src"]).packed + ipaddress.IPv6Address(p["dst"]).packed +
              l4)
        etype = 0x86DD
    eth = p["dst_mac"] + p["src_mac"]
    if p.get("vlan") is not None:
        eth += struct.pack(">HH", 0x8100, p["pcp"] << 13 | p["vlan"])
    return eth + struct.pack(">H", etype) + l3


def packet_truth(p, header_len):
    """What the decoder must read from the first header_len bytes of p's frame."""
    t = {"dst_mac": mac_str(p["dst_mac"]), "src_mac": mac_str(p["src_mac"])}
    off = 14
    if p.get("vlan") is not None:
        t["vlan"] = p["vlan"]
        t["pcp"] = p["pcp"]
        off += 4
    t["ethertype"] = 0x0800 if p["ipv"] == 4 else 0x86DD
    iplen = 20 if p["ipv"] == 4 else 40
    truncated = False
    if header_len >= off + iplen:
        t.update(ip_version=p["ipv"], src_ip=str(ipaddress.ip_address(p["src"])),
                 dst_ip=str(ipaddress.ip_address(p["dst"])), dscp=p["dscp"], ecn=p["ecn"],
                 ip_protocol=p["proto"], ttl=p["ttl"])
        off += iplen
        if header_len >= off + 4:
            t.update(src_port=p["sport"], dst_port=p["dport"])
            if p["proto"] == 17 and p["dport"] == ROCE_PORT:
                if header_len >= off + 8 + 12:
                    t.update(bth_opcode=p["bth_opcode"], bth_dest_qp=p["bth_qp"],
                             bth_psn=p["bth_psn"])
                else:
                    truncated = True
        else:
            truncated = True
    else:
        truncated = True
    t["truncated"] = truncated
    return t


def raw_header_record(p, max_header=128, header_len=None):
    frame = build_packet(p)
    n = min(len(frame), max_header) if header_len is None else header_len
    header = frame[:n]
    body = u32(1) + u32(len(frame) + 4) + u32(4) + opaque(header)
    # Keys starting with "_" are for --headers-pcap and are not written to the truth.
    truth = {"protocol": 1, "frame_length": len(frame) + 4, "stripped": 4, "header_length": n,
             "pkt": packet_truth(p, n), "_header": header, "_frame_len": len(frame)}
    return tagged(0, 1, body), truth


def rand_mac(rng):
    return bytes([0x02] + [rng.randrange(256) for _ in range(5)])


def nccl_packet(rng, kind, ipv, vlan, ce):
    """kind: 'roce' (UDP 4791) or 'tcp' (NCCL socket transport, ports 50000-51000)."""
    if ipv == 4:
        src = "192.168.%d.%d" % (rng.randrange(1, 255), rng.randrange(1, 255))
        dst = "192.168.%d.%d" % (rng.randrange(1, 255), rng.randrange(1, 255))
    else:
        src = "fd00:%x::%x" % (rng.randrange(1, 0xFFFF), rng.randrange(1, 0xFFFF))
        dst = "fd00:%x::%x" % (rng.randrange(1, 0xFFFF), rng.randrange(1, 0xFFFF))
    p = {"dst_mac": rand_mac(rng), "src_mac": rand_mac(rng), "ipv": ipv, "src": src, "dst": dst,
         "ttl": rng.choice([64, 63, 255]), "payload_len": rng.randrange(0, 1000)}
    if vlan:
        p["vlan"] = rng.randrange(1, 4095)
        p["pcp"] = rng.randrange(8)
    if kind == "roce":
        # RoCEv2 data in DSCP 26 (ECN-capable, CE when marked), CNPs in DSCP 48
        opcode = rng.choice([0x04, 0x06, 0x0A, 0x11, 0x81])
        p.update(proto=17, sport=rng.randrange(49152, 65536), dport=ROCE_PORT,
                 dscp=48 if opcode == 0x81 else 26, ecn=3 if ce else rng.choice([1, 2]),
                 bth_opcode=opcode, bth_qp=rng.randrange(1 << 24), bth_psn=rng.randrange(1 << 24))
    else:
        p.update(proto=6, sport=rng.randrange(50000, 51001), dport=rng.randrange(50000, 51001),
                 dscp=0, ecn=3 if ce else 0)
    return p


# ---------------- records and samples ----------------


def transit_records(rng, truth):
    """egress queue (1036), transit delay (1039), queue depth (1040): one u32 each."""
    q, delay, depth = rng.randrange(8), rng.randrange(1, 5_000_000), rng.randrange(0, 1 << 24)
    truth.update(egress_queue=q, transit_delay_ns=delay, queue_depth_bytes=depth)
    return [tagged(0, 1036, u32(q)), tagged(0, 1039, u32(delay)), tagged(0, 1040, u32(depth))]


def unknown_record(rng):
    return tagged(UNKNOWN_ENTERPRISE, 7, bytes(rng.randrange(256) for _ in range(12)))


def flow_sample(rng, seq, expanded, packet, transit=False, unknown=False, header_len=None,
                transit_first=False):
    """transit_first: the transit/queue records before the header record, as host-sflow
    sends them (tshark 4.0 cannot follow that order: it does not skip records it lacks)."""
    src_type, src_index = 0, rng.randrange(1, 64) if not expanded else rng.randrange(1 << 24, 1 << 30)
    in_if, out_if = rng.randrange(1, 64), rng.randrange(1, 64)
    if expanded:
        in_if, out_if = rng.randrange(1 << 24, 1 << 30), rng.randrange(1 << 24, 1 << 30)
    rate, pool, drops = rng.choice([400, 1000, 4096]), rng.randrange(1 << 31), rng.randrange(10)
    truth = {"kind": "flow", "format": 3 if expanded else 1, "sequence": seq,
             "source_type": src_type, "source_index": src_index, "sampling_rate": rate,
             "sample_pool": pool, "drops": drops, "input_format": 0, "input": in_if,
             "output_format": 0, "output": out_if}
    rec, raw = raw_header_record(packet, header_len=header_len)
    records = [rec]
    truth["raw"] = raw
    if unknown:
        records.append(unknown_record(rng))
    if transit:
        extra = transit_records(rng, truth)
        records = extra + records if transit_first else records + extra
    truth["n_records"] = len(records)
    truth["unknown_records"] = 1 if unknown else 0
    return encode_flow_sample(seq, src_type, src_index, rate, pool, drops, in_if, out_if,
                              records, expanded), truth


def encode_flow_sample(seq, src_type, src_index, rate, pool, drops, in_if, out_if, records,
                       expanded=False):
    """A flow sample (format 1) or expanded flow sample (format 3) around encoded records;
    shared with the agent simulator (sim_agent.py) so both write the same bytes."""
    if expanded:
        body = (u32(seq) + u32(src_type) + u32(src_index) + u32(rate) + u32(pool) + u32(drops) +
                u32(0) + u32(in_if) + u32(0) + u32(out_if))
    else:
        body = (u32(seq) + u32(src_type << 24 | src_index) + u32(rate) + u32(pool) + u32(drops) +
                u32(in_if) + u32(out_if))
    body += u32(len(records)) + b"".join(records)
    return tagged(0, 3 if expanded else 1, body)


GENERIC_FIELDS = [("if_index", 4), ("if_type", 4), ("if_speed", 8), ("if_direction", 4),
                  ("if_status", 4), ("in_octets", 8), ("in_ucast", 4), ("in_multicast", 4),
                  ("in_broadcast", 4), ("in_discards", 4), ("in_errors", 4),
                  ("in_unknown_protos", 4), ("out_octets", 8), ("out_ucast", 4),
                  ("out_multicast", 4), ("out_broadcast", 4), ("out_discards", 4),
                  ("out_errors", 4), ("promiscuous", 4)]
ETHERNET_FIELDS = ["alignment_errors", "fcs_errors", "single_collision_frames",
                   "multiple_collision_frames", "sqe_test_errors", "deferred_transmissions",
                   "late_collisions", "excessive_collisions", "internal_mac_transmit_errors",
                   "carrier_sense_errors", "frame_too_longs", "internal_mac_receive_errors",
                   "symbol_errors"]


def counter_sample(rng, seq, expanded, unknown=False):
    src_index = rng.randrange(1, 64) if not expanded else rng.randrange(1 << 24, 1 << 30)
    g = {}
    for name, size in GENERIC_FIELDS:
        if name == "if_index":
            v = src_index
        elif name == "if_type":
            v = 6
        elif name == "if_speed":
            v = rng.choice([100, 200, 400]) * 10**9
        elif name == "if_direction":
            v = 1
        elif name == "if_status":
            v = 3
        elif size == 8:
            v = rng.randrange(2**53, 2**64)  # beyond a double's exact range on purpose
        else:
            v = rng.randrange(2**32)
        g[name] = v
    e = {name: rng.randrange(2**32) for name in ETHERNET_FIELDS}
    records = counter_records(g, e)
    if unknown:
        records.append(unknown_record(rng))
    truth = {"kind": "counters", "format": 4 if expanded else 2, "sequence": seq,
             "source_type": 0, "source_index": src_index, "n_records": len(records),
             "unknown_records": 1 if unknown else 0, "generic": g, "ethernet": e}
    return encode_counter_sample(seq, src_index, records, expanded), truth


def counter_records(g, e):
    """The generic interface (1) and Ethernet (2) counter records from dicts keyed by the
    names of GENERIC_FIELDS and ETHERNET_FIELDS."""
    body_g = b"".join(u64(g[n]) if size == 8 else u32(g[n]) for n, size in GENERIC_FIELDS)
    body_e = b"".join(u32(e[n]) for n in ETHERNET_FIELDS)
    return [tagged(0, 1, body_g), tagged(0, 2, body_e)]


def encode_counter_sample(seq, src_index, records, expanded=False):
    """A counter sample (format 2) or expanded counter sample (format 4), source type 0."""
    src = u32(0) + u32(src_index) if expanded else u32(src_index)
    body = u32(seq) + src + u32(len(records)) + b"".join(records)
    return tagged(0, 4 if expanded else 2, body)


# drop_reason codes of sflow_drops.txt used here (names as host-sflow's sflow_drop.h has
# them): 0 net_unreachable, 257 ttl_exceeded, 258 acl, 259 no_buffer_space, 262 pkt_too_big.
DROP_REASONS = [0, 257, 258, 259, 262]


def discard_sample(rng, seq, packet, reason, unknown=False):
    src_index, in_if, out_if = rng.randrange(1, 64), rng.randrange(1, 64), rng.randrange(0, 64)
    drops = rng.randrange(100)
    rec, raw = raw_header_record(packet)
    records = [rec]
    if unknown:
        records.append(unknown_record(rng))
    truth = {"kind": "discard", "format": 5, "sequence": seq, "source_type": 0,
             "source_index": src_index, "drops": drops, "input": in_if, "output": out_if,
             "reason": reason, "n_records": len(records), "unknown_records": 1 if unknown else 0,
             "raw": raw}
    return encode_discard_sample(seq, src_index, drops, in_if, out_if, reason, records), truth


def encode_discard_sample(seq, src_index, drops, in_if, out_if, reason, records):
    """A discarded-packet sample of sflow_drops.txt (format 5), source type 0."""
    body = (u32(seq) + u32(0) + u32(src_index) + u32(drops) + u32(in_if) + u32(out_if) +
            u32(reason) + u32(len(records)) + b"".join(records))
    return tagged(0, 5, body)


def unknown_sample(rng):
    return tagged(UNKNOWN_ENTERPRISE, 3, bytes(rng.randrange(256) for _ in range(20)))


def datagram(index, agent, seq, uptime, samples):
    """samples: list of (bytes, truth or None for an unknown sample)."""
    a = ipaddress.ip_address(agent)
    body = encode_datagram(agent, 0, seq, uptime, [s for s, _ in samples])
    truth = {"datagram": index, "version": 5, "agent": str(a), "sub_agent": 0, "sequence": seq,
             "uptime_ms": uptime, "n_samples": len(samples),
             "samples": [dict(t, index=i) for i, (_, t) in enumerate(samples) if t is not None],
             "unknown_samples": sum(1 for _, t in samples if t is None),
             "unknown_records": sum(t["unknown_records"] for _, t in samples if t is not None),
             "trailing_bytes": 0}
    return body, truth


def encode_datagram(agent, sub_agent, seq, uptime, samples):
    """An sFlow v5 datagram: header (agent address IPv4 or IPv6, sub-agent, sequence,
    uptime in ms) and the encoded samples."""
    a = ipaddress.ip_address(agent)
    return (u32(5) + u32(1 if a.version == 4 else 2) + a.packed + u32(sub_agent) + u32(seq) +
            u32(uptime) + u32(len(samples)) + b"".join(samples))


def build_all(count, seed):
    rng = random.Random(seed)
    out = []
    # The fixed datagrams put what tshark 4.0 cannot follow (records 1036/1039/1040, a
    # sample of an unknown enterprise) last, so that it can cross-check the rest.
    # 0: IPv4 agent, compact flow samples: RoCEv2 CE untagged, TCP NCCL socket traffic
    # tagged with an unknown record, a cut header, RoCEv2 non-CE tagged with transit records.
    s = [flow_sample(rng, 1, False, nccl_packet(rng, "roce", 4, False, True)),
         flow_sample(rng, 3, False, nccl_packet(rng, "tcp", 4, True, False), unknown=True),
         flow_sample(rng, 4, False, nccl_packet(rng, "roce", 4, False, True), header_len=48),
         flow_sample(rng, 2, False, nccl_packet(rng, "roce", 4, True, False), transit=True)]
    out.append(datagram(0, "10.0.0.1", 1, 1000, s))
    # 1: IPv6 agent, expanded flow samples over IPv6.
    s = [flow_sample(rng, 6, True, nccl_packet(rng, "tcp", 6, True, True)),
         flow_sample(rng, 7, True, nccl_packet(rng, "roce", 6, True, False), unknown=True),
         flow_sample(rng, 5, True, nccl_packet(rng, "roce", 6, False, True), transit=True)]
    out.append(datagram(1, "2001:db8::17", 2, 2000, s))
    # 2: counters, compact and expanded, one with an unknown record.
    s = [counter_sample(rng, 1, False), counter_sample(rng, 2, True, unknown=True)]
    out.append(datagram(2, "10.0.0.1", 3, 3000, s))
    # 3: drop notifications with reasons, then a sample of an unknown enterprise.
    s = [discard_sample(rng, 1, nccl_packet(rng, "roce", 4, True, True), 259),
         discard_sample(rng, 2, nccl_packet(rng, "tcp", 6, False, False), 258, unknown=True),
         (unknown_sample(rng), None)]
    out.append(datagram(3, "10.0.0.2", 4, 4000, s))
    # 4: host-sflow's record order (transit and queue records first), then an unknown
    # sample between two flow samples.
    s = [flow_sample(rng, 8, False, nccl_packet(rng, "roce", 4, True, True), transit=True,
                     transit_first=True),
         (unknown_sample(rng), None),
         flow_sample(rng, 9, False, nccl_packet(rng, "roce", 6, False, False))]
    out.append(datagram(4, "10.0.0.3", 5, 5000, s))
    for i in range(5, count):
        s = []
        for _ in range(rng.randrange(1, 6)):
            pick = rng.randrange(10)
            pkt = nccl_packet(rng, rng.choice(["roce", "tcp"]), rng.choice([4, 6]),
                              rng.random() < 0.5, rng.random() < 0.3)
            seq = rng.randrange(1, 1 << 31)
            if pick < 5:
                s.append(flow_sample(rng, seq, rng.random() < 0.3, pkt,
                                     transit=rng.random() < 0.5, unknown=rng.random() < 0.2,
                                     transit_first=rng.random() < 0.5))
            elif pick < 7:
                s.append(counter_sample(rng, seq, rng.random() < 0.3, unknown=rng.random() < 0.2))
            elif pick < 9:
                s.append(discard_sample(rng, seq, pkt, rng.choice(DROP_REASONS),
                                        unknown=rng.random() < 0.2))
            else:
                s.append((unknown_sample(rng), None))
        agent = rng.choice(["10.0.%d.%d" % (rng.randrange(256), rng.randrange(1, 255)),
                            "2001:db8::%x" % rng.randrange(1, 0xFFFF)])
        out.append(datagram(i, agent, i + 1, rng.randrange(1 << 32), s))
    return out


# ---------------- pcap ----------------


def udp_frame(payload, index):
    src, dst = ipaddress.IPv4Address("10.0.0.1").packed, ipaddress.IPv4Address("10.0.0.100").packed
    udp = struct.pack(">HHHH", 40000 + index, SFLOW_PORT, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), index, 0x4000, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack(">H", ipv4_checksum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000064" "020000000001") + struct.pack(">H", 0x0800)
    return eth + ip + udp


def write_pcap(path, frames):
    """frames: (captured bytes, original length) pairs, Ethernet link type."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, (frame, orig_len) in enumerate(frames):
            f.write(struct.pack("<IIII", 1764800000 + i, 0, len(frame), orig_len) + frame)


def public(t):
    """t without the generator's own keys (those starting with "_")."""
    if isinstance(t, dict):
        return {k: public(v) for k, v in t.items() if not k.startswith("_")}
    if isinstance(t, list):
        return [public(v) for v in t]
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pcap")
    ap.add_argument("--raw-dir")
    ap.add_argument("--truth")
    ap.add_argument("--headers-pcap", help="one frame per sampled header (in truth order: "
                    "datagram, then sample), captured length = the header's")
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--seed", type=int, default=17)
    a = ap.parse_args()
    dgrams = build_all(max(a.count, 5), a.seed)
    for body, _ in dgrams:
        assert len(body) <= 1400, "datagram larger than one Ethernet frame"
    if a.pcap:
        frames = [udp_frame(b, i) for i, (b, _) in enumerate(dgrams)]
        write_pcap(a.pcap, [(f, len(f)) for f in frames])
    if a.headers_pcap:
        write_pcap(a.headers_pcap, [(s["raw"]["_header"], s["raw"]["_frame_len"])
                                    for _, t in dgrams for s in t["samples"] if "raw" in s])
    if a.raw_dir:
        os.makedirs(a.raw_dir, exist_ok=True)
        for i, (body, _) in enumerate(dgrams):
            with open(os.path.join(a.raw_dir, "dgram_%03d.bin" % i), "wb") as f:
                f.write(body)
    if a.truth:
        with open(a.truth, "w") as f:
            for _, t in dgrams:
                f.write(json.dumps(public(t), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

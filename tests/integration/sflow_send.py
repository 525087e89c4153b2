#!/usr/bin/env python3
"""Sends sFlow v5 datagrams described in JSON over real UDP (for test_sflow_daemon.sh).

Reads a JSON list from stdin; each item is one datagram:
  {"agent": "127.0.0.1", "sub_agent": 0, "seq": 1, "uptime": 1000,
   "samples": [GROUP, ...], "truncate": N (optional: send only the first N bytes)}
or {"garbage": "text"} (sent as is). Any item may add "from": "127.0.0.2" (send from
that local address: a spoofer beside the honest agent) and "version": 4 (the header's
version word). A GROUP is N samples alike:
  {"kind": "flow", "n": 10, "rate": 1000, "traffic": "roce"|"tcp", "ce": true,
   "ipv": 4, "payload": 1000, "source": 101, "in": 1, "out": 101, "seq": 1,
   "depth": [..n values..], "delay": [..n values, ns..]}
  {"kind": "discard", "n": 2, "reason": 259, "traffic": "roce", "in": 1, "out": 101, "seq": 1}
  {"kind": "counters", "ifindex": 101, "seq": 1, "in_octets": .., "out_octets": ..,
   "in_ucast": .., "out_ucast": .., "speed": 400000000000, "status": 3}
Sample sequence numbers of a group run from its "seq". Prints one JSON line per flow or
discard group: {"frame_length": L} (the sampled frame's length as the datagram carries
it), so the test can compute the expected estimated bytes.
Datagrams are built with tests/sim/sflow/sflow_gen.py's primitives (the generator the
decoder is checked against tshark with).
"""
import argparse
import ipaddress
import json
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "sim", "sflow"))
import sflow_gen as g  # noqa: E402


def packet(grp):
    ipv = grp.get("ipv", 4)
    src, dst = ("192.168.1.10", "192.168.2.20") if ipv == 4 else ("fd00:1::10", "fd00:2::20")
    p = {"dst_mac": bytes.fromhex("020000000002"), "src_mac": bytes.fromhex("020000000001"),
         "ipv": ipv, "src": src, "dst": dst, "ttl": 64, "payload_len": grp.get("payload", 1000)}
    if grp.get("traffic", "roce") == "roce":
        p.update(proto=17, sport=49152, dport=g.ROCE_PORT, dscp=grp.get("dscp", 26),
                 ecn=3 if grp.get("ce") else 2, bth_opcode=0x0A, bth_qp=0x1234, bth_psn=7)
    else:
        p.update(proto=6, sport=grp.get("sport", 50001), dport=grp.get("dport", 50002),
                 dscp=grp.get("dscp", 0), ecn=3 if grp.get("ce") else 0)
    return p


def flow_samples(grp, out):
    rec, truth = g.raw_header_record(packet(grp))
    out.append({"frame_length": truth["frame_length"]})
    res = []
    for i in range(grp["n"]):
        records = [rec]
        if "depth" in grp:
            records.append(g.tagged(0, 1040, g.u32(grp["depth"][i])))
        if "delay" in grp:
            records.append(g.tagged(0, 1039, g.u32(grp["delay"][i])))
        if "queue" in grp:
            records.append(g.tagged(0, 1036, g.u32(grp["queue"])))
        body = (g.u32(grp.get("seq", 1) + i) + g.u32(grp["source"]) + g.u32(grp["rate"]) +
                g.u32(grp.get("pool", 0)) + g.u32(grp.get("drops", 0)) + g.u32(grp["in"]) +
                g.u32(grp["out"]) + g.u32(len(records)) + b"".join(records))
        res.append(g.tagged(0, 1, body))
    return res


def discard_samples(grp, out):
    rec, truth = g.raw_header_record(packet(grp))
    out.append({"frame_length": truth["frame_length"]})
    res = []
    for i in range(grp["n"]):
        body = (g.u32(grp.get("seq", 1) + i) + g.u32(0) + g.u32(grp.get("source", grp["in"])) +
                g.u32(grp.get("drops", 0)) + g.u32(grp["in"]) + g.u32(grp["out"]) +
                g.u32(grp["reason"]) + g.u32(1) + rec)
        res.append(g.tagged(0, 5, body))
    return res


def counter_sample(grp):
    v = {"if_index": grp["ifindex"], "if_type": 6, "if_speed": grp.get("speed", 400 * 10**9),
         "if_direction": 1, "if_status": grp.get("status", 3)}
    body = b""
    for name, size in g.GENERIC_FIELDS:
        x = v.get(name, grp.get(name, 0))
        body += g.u64(x) if size == 8 else g.u32(x)
    rec = g.tagged(0, 1, body)
    return g.tagged(0, 2, g.u32(grp.get("seq", 1)) + g.u32(grp["ifindex"]) + g.u32(1) + rec)


def build(item, out):
    if "garbage" in item:
        return item["garbage"].encode()
    samples = []
    for grp in item.get("samples", []):
        if grp["kind"] == "flow":
            samples += flow_samples(grp, out)
        elif grp["kind"] == "discard":
            samples += discard_samples(grp, out)
        else:
            samples.append(counter_sample(grp))
    a = ipaddress.ip_address(item["agent"])
    body = (g.u32(item.get("version", 5)) + g.u32(1 if a.version == 4 else 2) + a.packed +
            g.u32(item.get("sub_agent", 0)) + g.u32(item["seq"]) + g.u32(item.get("uptime", 1000)) +
            g.u32(len(samples)) + b"".join(samples))
    if "truncate" in item:
        body = body[:item["truncate"]]
    return body


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--to", required=True, help="HOST:PORT or [V6]:PORT")
    a = ap.parse_args()
    host, port = a.to.rsplit(":", 1)
    host = host.strip("[]")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks = {}
    out = []
    for item in json.load(sys.stdin):
        src = item.get("from", "")
        if src not in socks:
            socks[src] = socket.socket(fam, socket.SOCK_DGRAM)
            if src:
                socks[src].bind((src, 0))
        socks[src].sendto(build(item, out), (host, int(port)))
    for o in out:
        print(json.dumps(o))


if __name__ == "__main__":
    main()

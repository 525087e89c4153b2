#!/usr/bin/env python3
"""Compares the sFlow decoder's output with tshark's and with the generator's truth.

  sflow_compare.py TRUTH.jsonl DECODED.jsonl TSHARK.pdml HEADERS.pdml

TRUTH is what tests/sim/sflow/sflow_gen.py built, DECODED what fs-sflow-dump printed for
the same datagrams, TSHARK the PDML of `tshark -T pdml -d udp.port==6343,sflow` on the
generator's pcap, HEADERS the PDML of tshark on its --headers-pcap (every sampled header
alone, in truth order). Three checks:
  1. every decoded datagram equals its truth, field for field;
  2. every decoded field that tshark also decodes in the datagram equals tshark's value.
     Fields tshark cannot give (no dissector for them in this version, or its parse of the
     rest of a datagram is no longer trustworthy, see RELIABILITY) are counted as checked
     against the truth only, with the reason, and printed;
  3. the packet fields decoded from every sampled header (drop notifications and samples
     tshark could not reach included) equal tshark's dissection of that header alone.
Exits 1 on any mismatch, or when a field that tshark should cross-check never was.
"""
import json
import sys
import xml.etree.ElementTree as ET

# RELIABILITY. tshark 4.0's sFlow dissector has no code for the flow records of
# sflow_transit.txt (1036, 1039, 1040) and does not skip an enterprise-0 record it does not
# know by its length: it parses the following bytes as other records. After such a record
# nothing more of that datagram is compared with tshark. A sample of a non-zero enterprise
# stops its parse of the datagram too. Sample format 5 (sflow_drops.txt) it skips by length
# without decoding it, so the samples after one are still compared.
NO_DISCARD = "tshark 4.0 has no dissector for sample format 5 (sflow_drops.txt)"
NO_TRANSIT = "tshark 4.0 has no dissector for flow records 1036/1039/1040 (sflow_transit.txt)"
AFTER_UNKNOWN = ("tshark 4.0 does not skip an enterprise-0 record it lacks, or stops after a "
                 "sample of another enterprise: the rest of the datagram is not its")
NO_VALUE = "tshark gave no value (e.g. it did not dissect the sampled header that far)"
NOT_SHOWN = "tshark shows no such field"

failures = []
checked = {}  # field -> count compared with tshark
checked_alone = {}  # packet field -> count compared with tshark on the header alone
truth_only = {}  # field -> {reason: count}


def count_truth(field, reason):
    truth_only.setdefault(field, {}).setdefault(reason, 0)
    truth_only[field][reason] += 1


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, prefix + k + "."))
        elif not isinstance(v, list):
            out[prefix + k] = v
    return out


def diff(a, b, path, errs):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                errs.append("%s/%s: only in %s" % (path, k, "truth" if k in a else "decoder"))
            else:
                diff(a[k], b[k], path + "/" + k, errs)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            errs.append("%s: %d items in truth, %d decoded" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s/%d" % (path, i), errs)
    elif a != b:
        errs.append("%s: truth %r, decoded %r" % (path, a, b))


# ---------------- tshark's PDML ----------------


def fields_of(elem):
    """All descendant fields by name -> list of show values, in document order."""
    out = {}
    for f in elem.iter("field"):
        n = f.get("name")
        if n:
            out.setdefault(n, []).append(f.get("show"))
    return out


def first(fs, *names):
    for n in names:
        if n in fs:
            return fs[n][0]
    return None


def num(v):
    return None if v is None else int(v, 0)


def children_labelled(elem):
    """Child fields that are subtrees without a name (samples, records)."""
    return [c for c in elem if c.tag == "field" and not c.get("name")]


def own_fields(elem):
    return {c.get("name"): c.get("show") for c in elem if c.tag == "field" and c.get("name")}


def tshark_sample(elem):
    """What tshark says about one sample: its fields, records and whether its parse holds."""
    own = own_fields(elem)
    records = children_labelled(elem)
    reliable_until = len(records)
    for i, r in enumerate(records):
        rf = own_fields(r)
        if r.get("show", "").startswith("Unknown sample format") and rf.get("sflow.enterprise") == "0":
            reliable_until = i  # an enterprise-0 record tshark lacks: the rest is garbage
            break
    return {"own": own, "records": records, "reliable_records": reliable_until,
            "label": elem.get("show", ""), "fields": fields_of(elem), "elem": elem}


def tshark_datagrams(path):
    out = []
    for pkt in ET.parse(path).getroot().findall("packet"):
        sflow = [p for p in pkt.findall("proto") if p.get("name") == "sflow"]
        if not sflow:
            out.append(None)
            continue
        s = sflow[0]
        samples = [tshark_sample(e) for e in children_labelled(s)]
        # PDML puts the InfiniBand (RoCEv2 BTH) layer of a sampled header at the packet's
        # top level, not under the sample: give it to the sample whose header bytes hold it.
        for ib in (p for p in pkt.findall("proto") if p.get("name") == "infiniband"):
            at = int(ib.get("pos", "-1"))
            for smp in samples:
                hdr = [f for f in smp["elem"].iter("field") if f.get("name") == "sflow_245.header"]
                if hdr and int(hdr[0].get("pos")) <= at < int(hdr[0].get("pos")) + int(hdr[0].get("size")):
                    for name, vals in fields_of(ib).items():
                        smp["fields"].setdefault(name, []).extend(vals)
        out.append({"own": own_fields(s), "samples": samples})
    return out


# ---------------- field maps ----------------

GENERIC = {"if_index": "sflow_245.ifindex", "if_type": "sflow_245.iftype",
           "if_speed": "sflow_245.ifspeed", "if_direction": "sflow_245.ifdirection",
           "in_octets": "sflow_245.ifinoct", "in_ucast": "sflow_245.ifinpkt",
           "in_multicast": "sflow_245.ifinmcast", "in_broadcast": "sflow_245.ifinbcast",
           "in_discards": "sflow_245.ifindisc", "in_errors": "sflow_245.ifinerr",
           "in_unknown_protos": "sflow_245.ifinunk", "out_octets": "sflow_245.ifoutoct",
           "out_ucast": "sflow_245.ifoutpkt", "out_multicast": "sflow_245.ifoutmcast",
           "out_broadcast": "sflow_245.ifoutbcast", "out_discards": "sflow_245.ifoutdisc",
           "out_errors": "sflow_245.ifouterr", "promiscuous": "sflow_245.ifpromisc"}
ETHERNET = {"alignment_errors": "AlignmentErrors", "fcs_errors": "FCSErrors",
            "single_collision_frames": "SingleCollisionFrames",
            "multiple_collision_frames": "MultipleCollisionFrames",
            "sqe_test_errors": "SQETestErrors", "deferred_transmissions": "DeferredTransmissions",
            "late_collisions": "LateCollisions", "excessive_collisions": "ExcessiveCollisions",
            "internal_mac_transmit_errors": "InternalMacTransmitErrors",
            "carrier_sense_errors": "CarrierSenseErrors", "frame_too_longs": "FrameTooLongs",
            "internal_mac_receive_errors": "InternalMacReceiveErrors",
            "symbol_errors": "SymbolErrors"}


def tshark_value(field, sample, ts):
    """tshark's value for a flattened decoder field of `sample`, or None if it has none."""
    fs = ts["fields"]
    own = ts["own"]
    expanded = sample["format"] in (3, 4)
    kind = sample["kind"]
    if field == "format":
        return num(own.get("sflow_245.sampletype"))
    if kind == "flow":
        if field == "sequence":
            return num(own.get("sflow.flow_sample.sequence_number"))
        if field == "source_type":
            return num(own.get("sflow.flow_sample.source_id_type" if expanded else
                               "sflow.flow_sample.source_id_class"))
        if field == "source_index":
            return num(own.get("sflow.flow_sample.source_id_index" if expanded else
                               "sflow.flow_sample.index"))
        simple = {"sampling_rate": "sflow.flow_sample.sampling_rate",
                  "sample_pool": "sflow.flow_sample.sample_pool",
                  "drops": "sflow.flow_sample.dropped_packets",
                  "n_records": "sflow.flow_sample.flow_record"}
        if field in simple:
            return num(own.get(simple[field]))
        if expanded:
            m = {"input_format": "sflow.flow_sample.input_interface_format",
                 "input": "sflow.flow_sample.input_interface_value",
                 "output_format": "sflow.flow_sample.output_interface.format",
                 "output": "sflow.flow_sample.output_interface_value"}
            if field in m:
                return num(first(fs, m[field]))
        else:
            raw_in = num(own.get("sflow.flow_sample.input_interface"))
            if field == "input_format":
                return None if raw_in is None else raw_in >> 30
            if field == "input":
                return None if raw_in is None else raw_in & 0x3FFFFFFF
            if field == "output_format":
                return num(first(fs, "sflow.flow_sample.output_interface_format"))
            if field == "output":
                return num(first(fs, "sflow.flow_sample.output_interface_value"))
    if kind == "counters":
        if field == "sequence":
            return num(own.get("sflow.counters_sample.sequence_number"))
        if field == "source_type":
            return num(own.get("sflow.counters_sample.source_id_type"))
        if field == "source_index":
            return num(own.get("sflow.counters_sample.source_id_index"))
        if field == "n_records":
            return num(own.get("sflow.counters_sample.counters_records"))
        if field.startswith("generic."):
            name = field.split(".", 1)[1]
            if name == "if_status":
                adm, oper = num(first(fs, "sflow_245.ifadmin_status")), num(first(fs, "sflow_245.ifoper_status"))
                return None if adm is None or oper is None else adm | oper << 1
            return num(first(fs, GENERIC[name]))
        if field.startswith("ethernet."):
            return num(first(fs, "sflow_245.dot3Stats" + ETHERNET[field.split(".", 1)[1]]))
    if field == "unknown_records":
        recs = ts["records"][:ts["reliable_records"]]
        return sum(1 for r in recs if r.get("show", "").startswith("Unknown"))
    if field.startswith("raw."):
        name = field[4:]
        m = {"protocol": "sflow_245.header_protocol", "frame_length": "sflow_245.header.frame_length",
             "stripped": "sflow_245.header.payload_stripped",
             "header_length": "sflow_245.header.sampled_header_length"}
        if name in m:
            return num(first(fs, m[name]))
        name = name[4:]  # pkt.
        v6 = sample["raw"]["pkt"].get("ip_version") == 6
        tagged = "vlan" in sample["raw"]["pkt"]
        if name == "dst_mac":
            return first(fs, "eth.dst")
        if name == "src_mac":
            return first(fs, "eth.src")
        if name == "ethertype":
            return num(first(fs, "vlan.etype" if tagged else "eth.type"))
        if name == "vlan":
            return num(first(fs, "vlan.id"))
        if name == "pcp":
            return num(first(fs, "vlan.priority"))
        ip = {"ip_version": ("ip.version", "ipv6.version"), "src_ip": ("ip.src", "ipv6.src"),
              "dst_ip": ("ip.dst", "ipv6.dst"), "dscp": ("ip.dsfield.dscp", "ipv6.tclass.dscp"),
              "ecn": ("ip.dsfield.ecn", "ipv6.tclass.ecn"), "ip_protocol": ("ip.proto", "ipv6.nxt"),
              "ttl": ("ip.ttl", "ipv6.hlim")}
        if name in ip:
            v = first(fs, ip[name][1 if v6 else 0])
            return v if name in ("src_ip", "dst_ip") else num(v)
        if name in ("src_port", "dst_port"):
            proto = "udp" if sample["raw"]["pkt"].get("ip_protocol") == 17 else "tcp"
            return num(first(fs, "%s.%s" % (proto, name.replace("_", ""))))
        bth = {"bth_opcode": "infiniband.bth.opcode", "bth_dest_qp": "infiniband.bth.destqp",
               "bth_psn": "infiniband.bth.psn"}
        if name in bth:
            return num(first(fs, bth[name]))
    return None


# Fields tshark cannot have, whatever the datagram (reason given).
def never_in_tshark(field, sample):
    if sample["kind"] == "discard" and field != "format":
        return NO_DISCARD
    if field in ("egress_queue", "transit_delay_ns", "queue_depth_bytes"):
        return NO_TRANSIT
    if field in ("index", "kind", "raw.pkt.truncated"):
        return NOT_SHOWN
    return None


# A field whose record comes after the first record tshark could not follow: is it in the
# raw header record (position known) or elsewhere?
def raw_header_position(ts):
    for i, r in enumerate(ts["records"]):
        if r.get("show", "") == "Raw packet header":
            return i
    return None


def compare_sample(dg, sample, ts, reliable):
    for field, value in sorted(flatten(sample).items()):
        key = "%s.%s" % (sample["kind"], field)
        why = never_in_tshark(field, sample)
        if why:
            count_truth(key, why)
            continue
        if not reliable:
            count_truth(key, AFTER_UNKNOWN)
            continue
        partial = ts["reliable_records"] < len(ts["records"])
        if partial:
            pos = raw_header_position(ts)
            in_raw = field.startswith("raw.")
            if field in ("unknown_records",) or (in_raw and (pos is None or pos >= ts["reliable_records"])):
                count_truth(key, AFTER_UNKNOWN)
                continue
        got = tshark_value(field, sample, ts)
        if got is None:
            count_truth(key, NO_VALUE)
            continue
        checked[key] = checked.get(key, 0) + 1
        if got != value:
            failures.append("datagram %d sample %d %s: decoder %r, tshark %r" %
                            (dg, sample["index"], field, value, got))


def compare_headers_alone(decoded, path):
    """Check 3: the sampled headers as frames of their own, in decoded (= truth) order."""
    packets = ET.parse(path).getroot().findall("packet")
    samples = [(d["datagram"], s) for d in decoded for s in d["samples"] if "raw" in s]
    if len(packets) != len(samples):
        failures.append("headers pcap: tshark read %d frames for %d sampled headers" %
                        (len(packets), len(samples)))
    for pkt, (dg, smp) in zip(packets, samples):
        ts = {"fields": fields_of(pkt), "own": {}}
        for field, value in sorted(flatten(smp["raw"]["pkt"]).items()):
            if field == "truncated":
                continue
            key = "%s.raw.pkt.%s" % (smp["kind"], field)
            got = tshark_value("raw.pkt." + field, smp, ts)
            if got is None:
                count_truth(key + " (header alone)", NO_VALUE)
                continue
            checked_alone[key] = checked_alone.get(key, 0) + 1
            if got != value:
                failures.append("datagram %d sample %d header alone %s: decoder %r, tshark %r" %
                                (dg, smp["index"], field, value, got))


def main():
    truth = [json.loads(l) for l in open(sys.argv[1])]
    decoded = [json.loads(l) for l in open(sys.argv[2])]
    tshark = tshark_datagrams(sys.argv[3])
    compare_headers_alone(decoded, sys.argv[4])
    errs = []
    diff(truth, decoded, "", errs)
    for e in errs:
        failures.append("decoder vs truth: " + e)
    if len(tshark) != len(decoded):
        failures.append("tshark read %d datagrams, the decoder %d" % (len(tshark), len(decoded)))
    for dg, (d, t) in enumerate(zip(decoded, tshark)):
        if t is None:
            failures.append("datagram %d: tshark did not dissect it as sFlow" % dg)
            continue
        hdr = {"version": num(t["own"].get("sflow_245.version")),
               "agent": t["own"].get("sflow_245.agent", t["own"].get("sflow_245.agent.v6")),
               "sub_agent": num(t["own"].get("sflow_245.sub_agent_id")),
               "sequence": num(t["own"].get("sflow_245.sequence_number")),
               "uptime_ms": num(t["own"].get("sflow_245.sysuptime")),
               "n_samples": num(t["own"].get("sflow_245.numsamples"))}
        for k, v in hdr.items():
            checked["datagram." + k] = checked.get("datagram." + k, 0) + 1
            if v != d[k]:
                failures.append("datagram %d %s: decoder %r, tshark %r" % (dg, k, d[k], v))
        for k in ("unknown_samples", "unknown_records", "trailing_bytes"):
            count_truth("datagram." + k, "a count over the datagram; tshark gives none")
        # Walk the datagram's positions; tshark's parse holds until the first sample of
        # another enterprise or the first enterprise-0 record it lacks.
        reliable = True
        by_index = {s["index"]: s for s in d["samples"]}
        for pos in range(d["n_samples"]):
            ts = t["samples"][pos] if pos < len(t["samples"]) else None
            if ts is None:
                reliable = False
            s = by_index.get(pos)
            if s is None:  # a sample the decoder skipped as unknown
                if ts is not None and not ts["label"].startswith("Unknown"):
                    failures.append("datagram %d sample %d: skipped by the decoder, tshark "
                                    "decoded %r" % (dg, pos, ts["label"]))
                reliable = False if ts is None or "enterprise" in ts["label"] else reliable
                continue
            compare_sample(dg, s, ts, reliable)
            if ts is not None and ts["reliable_records"] < len(ts["records"]):
                reliable = False
    # What tshark must have cross-checked at least once in this corpus.
    must = ["flow.sequence", "flow.sampling_rate", "flow.sample_pool", "flow.input",
            "flow.output", "flow.raw.frame_length", "flow.raw.header_length",
            "flow.raw.pkt.src_ip", "flow.raw.pkt.dst_ip", "flow.raw.pkt.dscp", "flow.raw.pkt.ecn",
            "flow.raw.pkt.vlan", "flow.raw.pkt.pcp", "flow.raw.pkt.ttl", "flow.raw.pkt.ip_protocol",
            "flow.raw.pkt.src_port", "flow.raw.pkt.dst_port", "flow.raw.pkt.bth_opcode",
            "flow.raw.pkt.bth_dest_qp", "flow.raw.pkt.bth_psn", "counters.generic.in_octets",
            "counters.generic.if_status", "counters.ethernet.symbol_errors", "discard.format",
            "datagram.agent"]
    for m in must:
        if not checked.get(m):
            failures.append("%s was never cross-checked by tshark" % m)
    for m in ("discard.raw.pkt.src_ip", "discard.raw.pkt.ecn", "discard.raw.pkt.vlan",
              "discard.raw.pkt.dst_port", "discard.raw.pkt.bth_dest_qp", "flow.raw.pkt.bth_psn"):
        if not checked_alone.get(m):
            failures.append("%s was never cross-checked by tshark on the header alone" % m)
    print("Fields compared with tshark in the datagram (count):")
    for k in sorted(checked):
        print("  %-40s %d" % (k, checked[k]))
    print("Packet fields compared with tshark on the sampled header alone (count):")
    for k in sorted(checked_alone):
        print("  %-40s %d" % (k, checked_alone[k]))
    print("Fields compared with the generator's truth only (count [why]):")
    tags = {}
    for k in sorted(truth_only):
        for why, n in sorted(truth_only[k].items()):
            tag = tags.setdefault(why, chr(ord("a") + len(tags)))
            print("  %-40s %d [%s]" % (k, n, tag))
    for why, tag in tags.items():
        print("  [%s] %s" % (tag, why))
    for f in failures:
        print("MISMATCH: " + f)
    total = sum(checked.values()) + sum(checked_alone.values())
    print("sflow cross-check: %d values against tshark in the datagram, %d on the sampled "
          "headers alone, %d against truth only, %d datagrams equal to truth" %
          (sum(checked.values()), sum(checked_alone.values()),
           sum(sum(v.values()) for v in truth_only.values()), len(truth) if not errs else 0))
    print("%d passed, %d failed" % (total, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks that the sFlow agent simulator (tests/sim/sflow/sim_agent.py) tells the truth.

  sflow_sim_check.py --scenario S.json --truth TRUTH.jsonl --decoded DECODED.jsonl
                     --tshark FIELDS.tsv --malformed FRAMES.txt [--drop-seq LIST]

TRUTH is what the agent says it emitted (--truth), DECODED what fs-sflow-dump (our decoder,
drivers/sflow/decode.c) made of the datagrams a collector received, in arrival order,
FIELDS tshark's -T fields dissection of the same datagrams (columns: see TSHARK_FIELDS)
and FRAMES the frame numbers tshark found malformed. Checks, each against the scenario
model (tests/sim/scenario.py) rather than against the agent's own arithmetic:
  1. datagrams: sequence numbers 1..N without a gap but the --drop-seq ones, which never
     arrived; agent, sub-agent, uptime and sample counts as the truth says;
  2. every decoded sample equals the agent's truth for it;
  3. counter samples: octets and unicast packets are the model's port_octets /
     port_ucast_pkts at the datagram's uptime, ifIndex 100+N, sequences consecutive;
  4. flow samples: per port one sample per `rate` packets (count, sequence and sample pool
     consistent with the model's packets over the run); queue depth the model's
     queue_depth_bytes at the sampled packet's time, egress queue = DSCP >> 3, transit
     delay at least the depth drained at 100 Gb/s; frame length = packet_bytes;
  5. ECN: on the culprit port, the CE share of its incident-tc samples is higher during the
     surge than outside it, and both match the model's mark share (ECN-mark rate over
     packet rate) within 4 binomial standard deviations; likewise over all ports;
  6. per-rule estimates (samples x rate) of NCCL RoCEv2 and NCCL socket traffic within
     4 standard deviations of the model's packets of that traffic over the run;
  7. drop notifications: one per model WRED drop of the run, reason red (260), on the
     culprit port's incident tc, with a RoCEv2 header;
  8. tshark (an independent decoder) agrees on every datagram header, every flow sample's
     sequence number and pool and every counter sample's octets and packets, and finds
     nothing malformed but in datagrams of flow samples (tshark 4.0 has no dissector for
     the sflow_transit.txt records 1036/1039/1040 and does not skip them by length).
Prints one "ok - ..." line per check; exits 1 with every failure listed.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SIM = os.path.join(HERE, "..", "sim")
sys.path.insert(0, SIM)
sys.path.insert(0, os.path.join(SIM, "sflow"))
from scenario import Scenario  # noqa: E402
import sim_agent  # noqa: E402  (only its traffic-mix constant OTHER_SHARE)

TSHARK_FIELDS = ["frame.number", "sflow_245.agent", "sflow_245.sub_agent_id",
                 "sflow_245.sequence_number", "sflow_245.sysuptime", "sflow_245.numsamples",
                 "sflow.flow_sample.sequence_number", "sflow.flow_sample.sample_pool",
                 "sflow_245.ifindex", "sflow_245.ifinoct", "sflow_245.ifinpkt",
                 "sflow_245.ifoutoct"]
LINK_SPEED_BPS = 100e9
failures = []


def fail(msg):
    failures.append(msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def port_Bps(sc, p):
    return sc.rate_bps / 8 * ((p % 4) + 1) / 4


def binomial_ok(observed, probs, what, sigmas=4.0):
    """observed successes vs the sum of independent success probabilities."""
    mean = sum(probs)
    sd = math.sqrt(sum(q * (1 - q) for q in probs))
    ok = abs(observed - mean) <= sigmas * sd + 1
    check(ok, "%s: %d observed, %.1f expected (sd %.1f)" % (what, observed, mean, sd))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--truth", required=True)
    ap.add_argument("--decoded", required=True)
    ap.add_argument("--tshark", required=True)
    ap.add_argument("--malformed", required=True)
    ap.add_argument("--drop-seq", default="")
    ap.add_argument("--offline-truth", help="the truth of an offline (--pcap) run of the same "
                    "scenario, seed and window in other ticks: its flow samples and drop "
                    "notifications must be the same")
    a = ap.parse_args()
    sc = Scenario(a.scenario)
    drop_seq = sim_agent.parse_list(a.drop_seq)

    truth = [json.loads(line) for line in open(a.truth)]
    start = next(d for d in truth if d["kind"] == "start")
    end = next(d for d in truth if d["kind"] == "end")
    rate = start["sampling_rate"]
    t0, t1 = start["uptime_ms"] / 1000.0, end["uptime_ms"] / 1000.0
    tdg = [d for d in truth if d["kind"] == "datagram"]
    decoded = [json.loads(line) for line in open(a.decoded)]

    # 1. datagram sequence numbers and headers
    seqs = [d["datagram_sequence"] for d in tdg]
    check(seqs == list(range(1, len(tdg) + 1)), "the agent's datagram sequence has gaps")
    sent = [d for d in tdg if d["sent"]]
    check(len(sent) == len(tdg) - len(drop_seq & set(seqs)),
          "--drop-seq %s: %d of %d sent" % (a.drop_seq, len(sent), len(tdg)))
    errors = [d for d in decoded if "error" in d]
    check(not errors, "decode errors: %s" % errors[:3])
    got = [d["sequence"] for d in decoded if "error" not in d]
    check(got == [d["datagram_sequence"] for d in sent],
          "received sequence numbers differ from those sent (%d received, %d sent)"
          % (len(got), len(sent)))
    check(not (set(got) & drop_seq), "a --drop-seq datagram arrived")
    gaps = sorted(set(range(1, max(got) + 1)) - set(got)) if got else []
    check(set(gaps) == drop_seq & set(range(1, max(got, default=0) + 1)),
          "gaps in the received sequence %s are not the dropped %s" % (gaps, sorted(drop_seq)))
    for d, t in zip(decoded, sent):
        for k_dec, k_tr in (("agent", "agent"), ("sub_agent", "sub_agent"),
                            ("uptime_ms", "uptime_ms"), ("n_samples", "n_samples")):
            check(d.get(k_dec) == t[k_tr], "datagram %d: %s %r, truth %r"
                  % (t["datagram_sequence"], k_dec, d.get(k_dec), t[k_tr]))
        check(d.get("unknown_samples") == 0 and d.get("unknown_records") == 0 and
              d.get("trailing_bytes") == 0, "datagram %d: unknown or trailing parts"
              % t["datagram_sequence"])
    if not failures:
        print("ok - %d datagrams, sequence 1..%d, %s never sent and absent"
              % (len(got), len(tdg), sorted(drop_seq & set(seqs))))

    # 2. decoded samples equal the truth
    n_before = len(failures)
    pairs = []  # (uptime_ms, decoded sample, truth sample)
    for d, t in zip(decoded, sent):
        for ds, ts in zip(d.get("samples", []), t["samples"]):
            pairs.append((t["uptime_ms"], ds, ts))
            w = "datagram %d sample %d" % (t["datagram_sequence"], ts["index"])
            check(ds["kind"] == ts["kind"], "%s: kind %s, truth %s" % (w, ds["kind"], ts["kind"]))
            check(ds["sequence"] == ts["sequence"] and ds["source_index"] == ts["if_index"],
                  "%s: sequence/source differ" % w)
            if ts["kind"] == "counters":
                check(ds.get("generic") == ts["generic"] and ds.get("ethernet") == ts["ethernet"],
                      "%s: counters differ from the truth" % w)
                continue
            pkt = ds["raw"]["pkt"]
            fields = [("input", ds["input"], ts["input"]),
                      ("frame_length", ds["raw"]["frame_length"], ts["frame_length"]),
                      ("ecn", pkt.get("ecn"), ts["ecn"]),
                      ("ip_protocol", pkt.get("ip_protocol"), ts["proto"]),
                      ("dst_port", pkt.get("dst_port"), ts["dst_port"])]
            if ts["kind"] == "flow":
                fields += [("sampling_rate", ds["sampling_rate"], ts["sampling_rate"]),
                           ("sample_pool", ds["sample_pool"], ts["sample_pool"]),
                           ("output", ds["output"], ts["if_index"]),
                           ("egress_queue", ds.get("egress_queue"), ts["egress_queue"]),
                           ("queue_depth_bytes", ds.get("queue_depth_bytes"), ts["queue_depth_bytes"]),
                           ("transit_delay_ns", ds.get("transit_delay_ns"), ts["transit_delay_ns"]),
                           ("dscp", pkt.get("dscp"), ts["dscp"])]
            else:
                fields += [("reason", ds["reason"], ts["reason"]), ("drops", ds["drops"], ts["drops"]),
                           ("output", ds["output"], ts["if_index"])]
            for name, x, y in fields:
                check(x == y, "%s: %s decoded %r, truth %r" % (w, name, x, y))
    if len(failures) == n_before:
        print("ok - %d decoded samples equal the agent's truth" % len(pairs))

    # 3. counter samples against the model
    n_before = len(failures)
    base32 = sc.counter_base & 0xFFFFFFFF
    last_seq = {}
    for s in (s for d in tdg for s in d["samples"] if s["kind"] == "counters"):
        p = s["port"]
        if p in last_seq:
            check(s["sequence"] == last_seq[p] + 1, "counters of Eth1/%d: sequence %d after %d"
                  % (p, s["sequence"], last_seq[p]))
        last_seq[p] = s["sequence"]
    check(len(last_seq) == sc.ports, "counter samples of %d of %d ports" % (len(last_seq), sc.ports))
    n_counters = 0
    for up, ds, _ in pairs:
        if ds["kind"] != "counters":
            continue
        n_counters += 1
        g, t = ds["generic"], up / 1000.0
        p = g["if_index"] - 100
        check(1 <= p <= sc.ports and ds["source_index"] == g["if_index"], "counter ifIndex %d" % g["if_index"])
        w = "counters of Eth1/%d at %.3f s" % (p, t)
        check(g["in_octets"] == g["out_octets"] == sc.port_octets(p, t) & (2**64 - 1),
              "%s: octets %d, model %d" % (w, g["in_octets"], sc.port_octets(p, t)))
        check(g["in_ucast"] == g["out_ucast"] == sc.port_ucast_pkts(p, t) & 0xFFFFFFFF,
              "%s: unicast packets %d, model %d" % (w, g["in_ucast"], sc.port_ucast_pkts(p, t)))
        for k in ("in_discards", "out_discards", "in_errors", "out_errors"):
            check(g[k] == base32, "%s: %s %d, model %d" % (w, k, g[k], base32))
        check(g["if_speed"] == int(LINK_SPEED_BPS) and g["if_status"] == 3, "%s: speed/status" % w)
    if len(failures) == n_before:
        print("ok - %d counter samples carry the model's port octets and packets at their uptime"
              % n_counters)

    # 4. flow samples: sampling, pool, sequence, queue depth
    n_before = len(failures)
    flows_truth = [s for d in tdg for s in d["samples"] if s["kind"] == "flow"]
    flows = [(up, ds) for up, ds, _ in pairs if ds["kind"] == "flow"]
    by_port = {}
    for s in flows_truth:
        by_port.setdefault(s["port"], []).append(s)
    for p in range(1, sc.ports + 1):
        ss = by_port.get(p, [])
        k0 = sc.port_ucast_pkts(p, t0) - sc.counter_base
        k1 = sc.port_ucast_pkts(p, t1) - sc.counter_base
        blocks = (k1 - 1) // rate - k0 // rate + 1 if k1 > k0 else 0
        check(blocks - 2 <= len(ss) <= blocks, "Eth1/%d: %d flow samples for %d packets at 1 in %d"
              % (p, len(ss), k1 - k0, rate))
        for x, y in zip(ss, ss[1:]):
            check(y["sequence"] == x["sequence"] + 1, "Eth1/%d: sample sequence %d after %d"
                  % (p, y["sequence"], x["sequence"]))
            check(1 <= y["sample_pool"] - x["sample_pool"] <= 2 * rate - 1,
                  "Eth1/%d: pool %d after %d" % (p, y["sample_pool"], x["sample_pool"]))
        for s in ss:
            check(k0 < s["sample_pool"] <= k1, "Eth1/%d: pool %d outside the run's packets"
                  % (p, s["sample_pool"]))
    for up, ds in flows:
        p = ds["source_index"] - 100
        t = ds["sample_pool"] * sc.packet_bytes / port_Bps(sc, p)  # the sampled packet's time
        w = "flow sample %d of Eth1/%d" % (ds["sequence"], p)
        check(t <= up / 1000.0 + 1e-9, "%s: packet time %.3f after the datagram's uptime" % (w, t))
        q = ds["egress_queue"]
        check(q == ds["raw"]["pkt"]["dscp"] >> 3, "%s: egress queue %d, DSCP %d" % (w, q, ds["raw"]["pkt"]["dscp"]))
        depth = sc.queue_depth_bytes(p, q, t)
        check(ds["queue_depth_bytes"] == depth, "%s: queue depth %d, model %d"
              % (w, ds["queue_depth_bytes"], depth))
        check(ds["transit_delay_ns"] >= depth * 8e9 / LINK_SPEED_BPS, "%s: transit delay %d ns < "
              "depth at line rate" % (w, ds["transit_delay_ns"]))
        check(ds["raw"]["frame_length"] == sc.packet_bytes, "%s: frame length %d"
              % (w, ds["raw"]["frame_length"]))
        check(ds["output"] == ds["source_index"] and ds["input"] != ds["output"],
              "%s: input/output" % w)
    deep = sum(1 for _, ds in flows if ds["queue_depth_bytes"] > 0)
    check(deep > 0, "no flow sample saw a queue")
    if len(failures) == n_before:
        print("ok - %d flow samples (1 in %d): per-port counts, sequences and pools follow the "
              "model's packets; queue depth = model at the packet's time (%d non-zero)"
              % (len(flows), rate, deep))

    # 5. ECN: CE share follows the model's mark share, higher in the surge
    n_before = len(failures)
    cp, ctc = sc.cong["port"], sc.cong["tc"]
    share_tc = sc.tc_share[ctc] / sum(sc.tc_share)

    def mark_prob(p, t):
        pps = port_Bps(sc, p) / sc.packet_bytes * share_tc
        return min(1.0, sc.port_ecn_rate(p, t) / pps)

    groups = {True: ([], 0), False: ([], 0)}
    all_probs, all_ce = [], 0
    for _, ds in flows:
        if ds["egress_queue"] != ctc:
            check(ds["raw"]["pkt"]["ecn"] != 3, "CE outside the incident's tc")
            continue
        p = ds["source_index"] - 100
        t = ds["sample_pool"] * sc.packet_bytes / port_Bps(sc, p)
        ce = ds["raw"]["pkt"]["ecn"] == 3
        all_probs.append(mark_prob(p, t))
        all_ce += ce
        if p == cp:
            probs, n = groups[sc.in_surge(t)]
            probs.append(mark_prob(p, t))
            groups[sc.in_surge(t)] = (probs, n + ce)
    (pin, nin), (pout, nout) = groups[True], groups[False]
    if check(len(pin) >= 20 and len(pout) >= 20, "culprit samples: %d in the surge, %d outside"
             % (len(pin), len(pout))):
        binomial_ok(nin, pin, "CE on Eth1/%d during the surge" % cp)
        binomial_ok(nout, pout, "CE on Eth1/%d outside the surge" % cp)
        check(nin / len(pin) > nout / len(pout) + 0.15, "CE share on Eth1/%d: %.2f in the surge, "
              "%.2f outside" % (cp, nin / len(pin), nout / len(pout)))
    binomial_ok(all_ce, all_probs, "CE over all ports")
    if len(failures) == n_before:
        print("ok - CE share on Eth1/%d: %d/%d = %.2f during the surge, %d/%d = %.2f outside "
              "(model %.2f / %.2f); all ports %d CE, model %.1f"
              % (cp, nin, len(pin), nin / len(pin), nout, len(pout), nout / len(pout),
                 sum(pin) / len(pin), sum(pout) / len(pout), all_ce, sum(all_probs)))

    # 6. per-rule estimates vs the model's traffic of each kind over the run
    n_before = len(failures)
    rules = [("nccl-roce", lambda s: s["raw"]["pkt"].get("ip_protocol") == 17 and
              s["raw"]["pkt"].get("dst_port") == 4791, {ctc: 1.0}),
             ("nccl-sockets", lambda s: s["raw"]["pkt"].get("ip_protocol") == 6 and
              50000 <= s["raw"]["pkt"].get("dst_port", 0) <= 50999,
              {tc: 1 - sim_agent.OTHER_SHARE for tc in range(8) if tc != ctc})]
    for name, match, tcs in rules:
        est = sum(rate for _, ds in flows if match(ds))
        n_samples = est // rate
        model = sum((sc.tc_tx_pkts(p, tc, t1) - sc.tc_tx_pkts(p, tc, t0)) * f
                    for p in range(1, sc.ports + 1) for tc, f in tcs.items())
        # samples of a kind among all samples: binomial around model / rate, plus one
        # sample per port for the ends of the run
        n_total = len(flows_truth)
        q = min(1.0, model / rate / max(1, n_total))
        sd = math.sqrt(n_total * q * (1 - q))
        check(abs(n_samples - model / rate) <= 4 * sd + sc.ports + 1,
              "rule %s: estimate %d packets, model %.0f (sd %.0f samples)" % (name, est, model, sd))
        print("    rule %s: %d samples x %d = %d packets, model %.0f" % (name, n_samples, rate, est, model))
    if len(failures) == n_before:
        print("ok - per-rule estimates (samples x rate) within 4 sd of the model's traffic")

    # 7. drop notifications
    n_before = len(failures)
    disc = [ds for _, ds, _ in pairs if ds["kind"] == "discard"]
    disc_truth = [s for d in tdg for s in d["samples"] if s["kind"] == "discard"]
    model_drops = sum(sc.tc_wred_dropped(p, tc, t1) - sc.tc_wred_dropped(p, tc, t0)
                      for p in range(1, sc.ports + 1) for tc in range(8))
    check(len(disc_truth) + max([s["drops"] for s in disc_truth] or [0]) == model_drops,
          "%d drop notifications (+ suppressed) for %d model WRED drops"
          % (len(disc_truth), model_drops))
    for ds in disc:
        pkt = ds["raw"]["pkt"]
        check(ds["reason"] == 260 and ds["source_index"] == 100 + cp and
              pkt.get("dst_port") == 4791 and pkt.get("dscp", 0) >> 3 == ctc,
              "drop notification %d: reason %d on ifIndex %d, dst port %s"
              % (ds["sequence"], ds["reason"], ds["source_index"], pkt.get("dst_port")))
    check(model_drops > 0, "the run saw no WRED drops in the model (no surge?)")
    if len(failures) == n_before:
        print("ok - %d drop notifications (reason red, Eth1/%d, RoCEv2) = the model's %d WRED drops"
              % (len(disc_truth), cp, model_drops))

    # 8. tshark
    n_before = len(failures)
    rows = [line.rstrip("\n").split("\t") for line in open(a.tshark) if line.strip()]
    malformed = {int(x) for x in open(a.malformed).read().split()}
    check(len(rows) == len(decoded), "tshark saw %d frames, the decoder %d" % (len(rows), len(decoded)))
    n_flow_bad = 0
    for row, d, t in zip(rows, decoded, sent):
        f = dict(zip(TSHARK_FIELDS, row + [""] * (len(TSHARK_FIELDS) - len(row))))
        w = "frame %s (datagram %d)" % (f["frame.number"], d["sequence"])
        check(f["sflow_245.agent"] == d["agent"] and int(f["sflow_245.sub_agent_id"]) == d["sub_agent"]
              and int(f["sflow_245.sequence_number"]) == d["sequence"]
              and int(f["sflow_245.sysuptime"]) == d["uptime_ms"]
              and int(f["sflow_245.numsamples"]) == d["n_samples"], "%s: header differs in tshark" % w)
        kind = t["samples"][0]["kind"]
        if kind == "flow":
            fs = [x for x in d["samples"] if x["kind"] == "flow"]
            check(f["sflow.flow_sample.sequence_number"] == ",".join(str(x["sequence"]) for x in fs)
                  and f["sflow.flow_sample.sample_pool"] == ",".join(str(x["sample_pool"]) for x in fs),
                  "%s: flow sample sequences/pools differ in tshark" % w)
            n_flow_bad += int(f["frame.number"]) in malformed
        else:
            check(int(f["frame.number"]) not in malformed, "%s: tshark finds a %s datagram malformed"
                  % (w, kind))
        if kind == "counters":
            gs = [x["generic"] for x in d["samples"]]
            for col, key in (("sflow_245.ifindex", "if_index"), ("sflow_245.ifinoct", "in_octets"),
                             ("sflow_245.ifinpkt", "in_ucast"), ("sflow_245.ifoutoct", "out_octets")):
                check(f[col] == ",".join(str(g[key]) for g in gs), "%s: %s differs in tshark: %s"
                      % (w, col, f[col]))
    if len(failures) == n_before:
        print("ok - tshark agrees on %d datagram headers, flow sample sequences/pools and counters; "
              "malformed only in %d datagrams of flow samples (transit records it cannot skip)"
              % (len(rows), n_flow_bad))

    # 9. determinism: the same samples from an offline run over the same window
    if a.offline_truth:
        n_before = len(failures)
        off = [json.loads(line) for line in open(a.offline_truth)]

        def keyed(lines):
            out = {}
            for d in lines:
                for s in d.get("samples", []) if d["kind"] == "datagram" else []:
                    if s["kind"] == "flow":
                        out[("flow", s["port"], s["sequence"])] = {
                            k: v for k, v in s.items() if k != "index"}
                    elif s["kind"] == "discard":  # its sequence and drops count per run
                        out[("discard", s["port"], s["tc"], s["drop"])] = {
                            k: v for k, v in s.items() if k not in ("index", "sequence", "drops")}
            return out
        live, offline = keyed(truth), keyed(off)
        check(set(live) == set(offline), "offline run: %d samples only live, %d only offline"
              % (len(set(live) - set(offline)), len(set(offline) - set(live))))
        diff = [k for k in set(live) & set(offline) if live[k] != offline[k]]
        check(not diff, "offline run: %d samples differ, e.g. %s" % (len(diff), diff[:2]))
        if len(failures) == n_before:
            print("ok - an offline run over the same window in other ticks emits the same %d flow "
                  "samples and drop notifications" % len(live))

    for f in failures[:40]:
        print("FAIL:", f)
    if len(failures) > 40:
        print("... and %d more failures" % (len(failures) - 40))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

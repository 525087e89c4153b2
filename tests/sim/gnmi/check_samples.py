#!/usr/bin/python3
"""Checks fs-gnmi-stream output against the scenario, exactly (test code).

Every `sample <device_ts_ns> <metric> <labels> <value>` line must equal the scenario's
value at the time the timestamp states (gnmi_sim.sample_time), integers compared as
integers (so uint64 counters past 2^53 are checked bit for bit). Every `store` line
must equal the last sample of its series (the store got what the driver decoded).

  check_samples.py SCENARIO OUTPUT [--min-samples N] [--min-rounds N] [--need-big]
Exit 0 when all holds; prints what failed otherwise.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import scenario as scn  # noqa: E402

sys.path.insert(0, HERE)
from gnmi_sim import sample_time  # noqa: E402


def port_of(ifname):
    return int(ifname.rsplit("/", 1)[1])


def expected(sc, metric, lab, t):
    p = port_of(lab["interface"]) if "interface" in lab else None
    tc = int(lab["tc"]) if "tc" in lab else None
    pr = int(lab["priority"]) if "priority" in lab else None
    table = {
        "fabric_port_bytes_total": lambda: sc.port_octets(p, t),
        "fabric_port_packets_total": lambda: sc.port_ucast_pkts(p, t),
        "fabric_port_ecn_marked_packets_total": lambda: sc.port_ecn_marked(p, t),
        "fabric_port_oper_up": lambda: 1,
        "fabric_queue_tx_packets_total": lambda: sc.tc_tx_pkts(p, tc, t),
        "fabric_queue_tx_bytes_total": lambda: sc.tc_tx_octets(p, tc, t),
        "fabric_queue_ecn_marked_packets_total": lambda: sc.tc_ecn_marked(p, tc, t),
        "fabric_queue_wred_dropped_packets_total": lambda: sc.tc_wred_dropped(p, tc, t),
        "fabric_queue_no_buffer_dropped_packets_total": lambda: sc.tc_no_buffer_dropped(p, tc, t),
        "fabric_queue_depth_bytes": lambda: sc.queue_depth_bytes(p, tc, t),
        "fabric_pfc_pause_frames_total": lambda: sc.pfc_rx_pause_frames(p, pr, t),
        "fabric_pfc_pause_seconds_total": lambda: sc.pfc_rx_pause_us(p, pr, t),
    }
    return table[metric]()


def parse_value(s):
    try:
        return int(s)
    except ValueError:
        f = float(s)
        return int(f) if f == int(f) else f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("output")
    ap.add_argument("--min-samples", type=int, default=1)
    ap.add_argument("--min-rounds", type=int, default=1, help="distinct device timestamps")
    ap.add_argument("--need-big", action="store_true", help="some value must exceed 2^53")
    a = ap.parse_args()
    sc = scn.Scenario(a.scenario)
    bad, n, big, stamps, last = [], 0, 0, set(), {}
    with open(a.output) as f:
        lines = f.read().splitlines()
    for line in lines:
        w = line.split(" ")
        if w[0] != "sample":
            continue
        ts, metric, labels, value = int(w[1]), w[2], w[3], parse_value(w[4])
        lab = dict(kv.split("=", 1) for kv in labels.split(",") if kv)
        want = expected(sc, metric, lab, sample_time(sc, ts))
        n += 1
        stamps.add(ts)
        if value > 2 ** 53:
            big += 1
        if value != want:
            bad.append("%s{%s} at %d: got %r, scenario says %r" % (metric, labels, ts, value, want))
        last[(metric, labels)] = value
    for line in lines:
        w = line.split(" ")
        if w[0] != "store":
            continue
        key = (w[1], w[2])
        if key in last and parse_value(w[3]) != last[key]:
            bad.append("store %s{%s} = %s, last sample %r" % (w[1], w[2], w[3], last[key]))
    if n < a.min_samples:
        bad.append("only %d samples (want >= %d)" % (n, a.min_samples))
    if len(stamps) < a.min_rounds:
        bad.append("only %d notification times (want >= %d)" % (len(stamps), a.min_rounds))
    if a.need_big and big == 0:
        bad.append("no value above 2^53")
    for b in bad[:20]:
        print("MISMATCH", b)
    print("checked %d samples, %d timestamps, %d above 2^53, %d problems" % (
        n, len(stamps), big, len(bad)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

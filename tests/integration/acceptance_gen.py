#!/usr/bin/python3
"""Host side of test_acceptance.sh (test code, never shipped).

Plays one GPU host of the source story, time-compressed. The switch side needs no
signal: the simulators read the scenario, whose congestion surges recur at
boot + phase + k * period for duration seconds (tests/sim/scenario.py). This script knows
the same numbers and, for the --count surges it is given:
  - reports an AllReduce range every 100 ms that stretches while a surge is on (80 ms
    instead of 20 ms), plus random slowdowns (70 ms) on a quarter of the ticks 2.5 s or
    more away from any surge; its clock runs --host-offset-ms off the collector's (same
    machine: an artificial offset); before every post (once a second) it measures that
    offset NTP-style against GET /api/v1/time (8 rounds, the minimum-delay round kept)
    and posts the events on its own clock with the measurement;
  - turns packet loss on for a TCP stream in network namespace --netns during each surge
    (an nftables rule `tcp dport P numgen random mod 10 < 1 drop` in table inet
    --nft-table, chain in: the receiving side), from --drop-after s after the surge starts until
    --drop-before s before it ends, so the retransmits it causes fall inside the surge.

Writes --out (JSON): the surge windows (collector axis), every slow event on the true
(collector) axis, the drop windows as really toggled, and the offsets it measured.
"""
import argparse
import http.client
import json
import random
import subprocess
import sys
import time
import urllib.parse

TICK_S = 0.1
NORMAL_MS, SURGE_MS, RANDOM_SLOW_MS = 20, 80, 70


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--boot", type=float, required=True, help="scenario boot_epoch_s")
    ap.add_argument("--phase", type=float, required=True)
    ap.add_argument("--period", type=float, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--first-k", type=int, required=True, help="index of the first surge played")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--host-offset-ms", type=float, default=-40.0)
    ap.add_argument("--host", default="gpu-node-3")
    ap.add_argument("--netns", required=True)
    ap.add_argument("--nft-table", required=True)
    ap.add_argument("--dport", type=int, required=True)
    ap.add_argument("--drop-after", type=float, default=0.2)
    ap.add_argument("--drop-before", type=float, default=0.7)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    token = open(a.token_file).read().strip()
    u = urllib.parse.urlparse(a.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    offset_ns = int(a.host_offset_ms * 1e6)

    def host_ns():
        return time.time_ns() + offset_ns

    def measure():
        best = None
        for _ in range(8):
            t1 = host_ns()
            conn.request("GET", "/api/v1/time")
            r = conn.getresponse()
            body = r.read()
            t4 = host_ns()
            if r.status != 200:
                sys.exit("GET /api/v1/time: HTTP %d %s" % (r.status, body[:200]))
            d = json.loads(body)
            t2, t3 = d["receive_ns"], d["send_ns"]
            delay = (t4 - t1) - (t3 - t2)
            off = ((t1 - t2) + (t4 - t3)) // 2  # host minus collector
            if best is None or delay < best[1]:
                best = (off, delay)
        return best[0], best[1] // 2 + 1000

    def post(events, off, unc):
        body = json.dumps({"host_offset_ns": off, "host_offset_uncertainty_ns": unc,
                           "events": events})
        conn.request("POST", "/api/v1/host-events", body,
                     {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read()
        if r.status != 200:
            sys.exit("POST /api/v1/host-events: HTTP %d %s" % (r.status, text[:300]))

    def nft(*words):
        subprocess.run(["ip", "netns", "exec", a.netns, "nft"] + list(words), check=True)

    rng = random.Random(7)
    t0 = time.time()
    surges = [(a.boot + a.phase + k * a.period, a.boot + a.phase + k * a.period + a.duration)
              for k in range(a.first_k, a.first_k + a.count)]
    drops_want = [(s + a.drop_after, e - a.drop_before) for s, e in surges]
    end = surges[-1][1] + 0.5
    dropping = False
    drops = []  # real times the drop rule was switched on/off
    pending, slow, measured = [], [], []
    last_post = time.time()
    tick = t0
    while True:
        now = time.time()
        want = any(s <= now < e for s, e in drops_want)
        if want != dropping:
            if want:
                drops.append([time.time()])
                nft("add", "rule", "inet", a.nft_table, "in", "tcp", "dport", str(a.dport),
                    "numgen", "random", "mod", "10", "<", "1", "drop")
            else:
                nft("flush", "chain", "inet", a.nft_table, "in")
                drops[-1].append(time.time())
            dropping = want
        if now >= end:
            break
        while tick <= now:
            # Events start on the tick; in a surge they stretch, and a few far from any
            # surge are slow for other reasons.
            real_start = tick
            surge_evt = any(s <= real_start < e for s, e in surges)
            far = all(abs(real_start - s) > 2.5 and abs(real_start - e) > 2.5 for s, e in surges)
            if surge_evt:
                dur_ms, why = SURGE_MS, "surge"
            elif far and rng.random() < 0.25:
                dur_ms, why = RANDOM_SLOW_MS, "random"
            else:
                dur_ms, why = NORMAL_MS + rng.uniform(-2, 2), None
            start_ns = int(real_start * 1e9)
            dur_ns = int(dur_ms * 1e6)
            pending.append({"host": a.host, "kind": "nccl.kernel", "name": "AllReduce",
                            "start": start_ns + offset_ns, "end": start_ns + dur_ns + offset_ns,
                            "attrs": {"bytes": 268435456, "rank": 3}})
            if why:
                slow.append({"start_ns": start_ns, "end_ns": start_ns + dur_ns, "why": why})
            tick += TICK_S
        if now - last_post >= 1.0 and pending:
            off, unc = measure()
            measured.append([off, unc])
            post(pending, off, unc)
            pending = []
            last_post = now
        time.sleep(0.01)
    if dropping:
        nft("flush", "chain", "inet", a.nft_table, "in")
        drops[-1].append(time.time())
    if pending:
        off, unc = measure()
        measured.append([off, unc])
        post(pending, off, unc)
    with open(a.out, "w") as f:
        json.dump({"start": t0, "surges": surges, "drops": drops, "slow": slow, "measured_offsets": measured,
                   "true_offset_ns": offset_ns, "done": time.time()}, f)


if __name__ == "__main__":
    main()

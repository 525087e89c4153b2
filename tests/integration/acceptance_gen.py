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
  - with --netns: turns packet loss on for a TCP stream in that network namespace during each surge
    (an nftables rule `tcp dport P numgen random mod 10 < 1 drop` in table inet
    --nft-table, chain in: the receiving side), from --drop-after s after the surge starts until
    --drop-before s before it ends, so the retransmits it causes fall inside the surge.

Without --netns (tests/eval/eval_drivers.sh) it only plays the host; --seed varies which
ticks are randomly slow.

Writes --out (JSON): the surge windows (collector axis), every slow event on the true
(collector) axis, the drop windows as really toggled, and the offsets it measured.
"""
import argparse
import json
import subprocess
import time

from gpu_host import GpuHost


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
    ap.add_argument("--netns", help="drop packets in this namespace during the surges")
    ap.add_argument("--nft-table")
    ap.add_argument("--dport", type=int)
    ap.add_argument("--seed", type=int, default=7, help="the random slowdowns' seed")
    ap.add_argument("--drop-after", type=float, default=0.2)
    ap.add_argument("--drop-before", type=float, default=0.7)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.netns and (not a.nft_table or a.dport is None):
        ap.error("--netns needs --nft-table and --dport")

    def nft(*words):
        subprocess.run(["ip", "netns", "exec", a.netns, "nft"] + list(words), check=True)

    t0 = time.time()
    surges = [(a.boot + a.phase + k * a.period, a.boot + a.phase + k * a.period + a.duration)
              for k in range(a.first_k, a.first_k + a.count)]
    drops_want = [(s + a.drop_after, e - a.drop_before) for s, e in surges]
    end = surges[-1][1] + 0.5
    host = GpuHost(a.url, a.token_file, a.host_offset_ms, a.host, surges, t0, a.seed)
    dropping = False
    drops = []  # real times the drop rule was switched on/off
    while True:
        now = time.time()
        want = bool(a.netns) and any(s <= now < e for s, e in drops_want)
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
        host.tick(now)
        host.post_due(now)
        time.sleep(0.01)
    if dropping:
        nft("flush", "chain", "inet", a.nft_table, "in")
        drops[-1].append(time.time())
    host.finish()
    with open(a.out, "w") as f:
        json.dump({"start": t0, "surges": surges, "drops": drops, "slow": host.slow,
                   "measured_offsets": host.measured, "true_offset_ns": host.offset_ns, "done": time.time()}, f)


if __name__ == "__main__":
    main()

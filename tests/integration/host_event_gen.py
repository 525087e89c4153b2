#!/usr/bin/python3
"""Host-event generator for test_correlate.sh (test code, never shipped).

Plays one GPU host of the source story, time-compressed: it drives the simulated
switch's congestion (SIGUSR2 to onyx-snmp-sim toggles it on Eth1/49 tc 3) every
--period seconds for --surge seconds, and meanwhile reports an AllReduce range every
100 ms that stretches while a surge is on (80 ms instead of 20 ms), plus random
slowdowns (70 ms) on a quarter of the ticks 2.5 s or more away from any surge. Its
clock runs --host-offset-ms off the collector's (same machine: an artificial offset); before every post it measures that
offset NTP-style against GET /api/v1/time (8 rounds on one connection, the
minimum-delay round kept) and posts the events on its own clock with the measurement.

Writes --out (JSON): the surge windows and every slow event on the true (collector)
axis, and the offsets it measured, so the test can check what the collector answers.
"""
import argparse
import json
import os
import signal
import time

from gpu_host import GpuHost


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--sim-pid", type=int, required=True)
    ap.add_argument("--period", type=float, default=8.0)
    ap.add_argument("--surge", type=float, default=2.0)
    ap.add_argument("--first", type=float, default=4.0)
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--host-offset-ms", type=float, default=-40.0)
    ap.add_argument("--host", default="gpu-node-3")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    t0 = time.time()
    surges = [(t0 + a.first + k * a.period, t0 + a.first + k * a.period + a.surge)
              for k in range(a.count)]
    end = surges[-1][1] + 0.3
    host = GpuHost(a.url, a.token_file, a.host_offset_ms, a.host, surges, t0)
    in_surge = False
    toggles = []  # real times the congestion was switched on/off
    while True:
        now = time.time()
        want = any(s <= now < e for s, e in surges)
        if want != in_surge:
            os.kill(a.sim_pid, signal.SIGUSR2)
            toggles.append(time.time())
            in_surge = want
        if now >= end:
            break
        host.tick(now)
        host.post_due(now)
        time.sleep(0.01)
    if in_surge:
        os.kill(a.sim_pid, signal.SIGUSR2)
    host.finish()
    # The congestion really began and ended at the toggles (pairs).
    windows = [[toggles[i], toggles[i + 1]] for i in range(0, len(toggles) - 1, 2)]
    with open(a.out, "w") as f:
        json.dump({"surges": windows, "slow": host.slow, "measured_offsets": host.measured,
                   "true_offset_ns": host.offset_ns, "done": time.time()}, f)


if __name__ == "__main__":
    main()

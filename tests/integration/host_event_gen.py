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
import http.client
import json
import os
import random
import signal
import sys
import time
import urllib.parse

TICK_S = 0.1
NORMAL_MS, SURGE_MS, RANDOM_SLOW_MS = 20, 80, 70


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

    rng = random.Random(7)
    t0 = time.time()
    surges = [(t0 + a.first + k * a.period, t0 + a.first + k * a.period + a.surge)
              for k in range(a.count)]
    end = surges[-1][1] + 0.3
    in_surge = False
    toggles = []  # real times the congestion was switched on/off
    pending, slow, measured = [], [], []
    last_post = time.time()
    tick = t0
    while True:
        now = time.time()
        want = any(s <= now < e for s, e in surges)
        if want != in_surge:
            os.kill(a.sim_pid, signal.SIGUSR2)
            toggles.append(time.time())
            in_surge = want
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
    if in_surge:
        os.kill(a.sim_pid, signal.SIGUSR2)
    if pending:
        off, unc = measure()
        measured.append([off, unc])
        post(pending, off, unc)
    # The congestion really began and ended at the toggles (pairs).
    windows = [[toggles[i], toggles[i + 1]] for i in range(0, len(toggles) - 1, 2)]
    with open(a.out, "w") as f:
        json.dump({"surges": windows, "slow": slow, "measured_offsets": measured,
                   "true_offset_ns": offset_ns, "done": time.time()}, f)


if __name__ == "__main__":
    main()

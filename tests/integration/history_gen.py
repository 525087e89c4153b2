#!/usr/bin/env python3
"""Hours of a busy fabric as OpenMetrics text, for `promtool tsdb create-blocks-from
openmetrics` (test and benchmark code, never shipped).

SWITCHES switches that no test instance polls (far-leaf1, far-leaf2, ...), PORTS ports
each, every port with its own ECN-mark rate (idle to busy) and noise and its own queue
depth (tc 3); random incast bursts on random ports; and one culprit, far-leaf1 Eth1/7,
itself busy, whose ECN marks and queue surge for 20 s every PERIOD s with +-2% jitter.
With --twice, far-leaf1's counters are written a second time under another job and
instance, as two Prometheus scrape jobs would store them.

usage: history_gen.py OUT END_EPOCH_S HOURS SEED [--period S] [--switches N] [--ports N]
                      [--step S] [--twice] [--next FILE]
Prints the culprit's surge start times (epoch s), one a line, on stdout.
"""
import argparse
import random

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("end", type=int)
ap.add_argument("hours", type=float)
ap.add_argument("seed", type=int)
ap.add_argument("--period", type=float, default=1800.0)
ap.add_argument("--switches", type=int, default=2)
ap.add_argument("--ports", type=int, default=32)
ap.add_argument("--step", type=int, default=15)
ap.add_argument("--twice", action="store_true")
ap.add_argument("--next", help="write the first surge scheduled after the end here (epoch s)")
a = ap.parse_args()
STEP, SURGE = a.step, 20
rng = random.Random(a.seed)
end_s = a.end
start_s = end_s - int(a.hours * 3600)
times = list(range(start_s - start_s % STEP + STEP, end_s, STEP))
targets = ["far-leaf%d" % (i + 1) for i in range(a.switches)]

surges = []
t = start_s + 600 + rng.uniform(0, 60)
while t < end_s - 60:
    surges.append(t)
    t += a.period * (1 + rng.uniform(-0.02, 0.02))
if a.next:
    with open(a.next, "w") as f:
        f.write("%.3f\n" % t)
n_bursts = max(12, a.switches * a.ports // 50)
bursts = {}
for _ in range(n_bursts):
    key = (rng.choice(targets), rng.randint(1, a.ports))
    if key == ("far-leaf1", 7):
        continue
    bursts.setdefault(key, []).append((rng.uniform(start_s + 900, end_s), rng.uniform(10, 40)))
# Per time index: is the culprit surging (a surge covers part of the step before it).
surging = [any(s <= at < s + SURGE + STEP for s in surges) for at in times]


def series(target, port):
    culprit = target == "far-leaf1" and port == 7
    base = 20000 if culprit else rng.choice([0, 0, 50, 500, 5000, 20000, 60000])
    mine = bursts.get((target, port), [])
    rates, depth = [], []
    for k, at in enumerate(times):
        r = base * (0.8 + 0.4 * rng.random())
        q = int(r * (1.5 + 1.5 * rng.random()))
        if culprit and surging[k]:
            r, q = 400000, 8000000
        for s, d in mine:
            if s <= at < s + d + STEP:
                r += 300000
                q += 4000000
        rates.append(r)
        depth.append(q)
    return rates, depth


with open(a.out, "w") as f:
    gauges = []
    f.write("# TYPE fabric_queue_ecn_marked_packets counter\n")
    for target in targets:
        for port in range(1, a.ports + 1):
            rates, depth = series(target, port)
            gauges.append((target, port, depth))
            jobs = ["fabricscope-a", "fabricscope-b"] if a.twice and target == "far-leaf1" else [
                "fabricscope-a"]
            for job in jobs:
                lab = ('job="%s",instance="%s:9464",target="%s",source="snmp",interface="Eth1/%d",'
                       'tc="3"' % (job, job, target, port))
                total = 1000.0 * port
                lines = []
                for at, r in zip(times, rates):
                    total += r * STEP
                    lines.append("fabric_queue_ecn_marked_packets_total{%s} %d %d\n"
                                 % (lab, total, at))
                f.writelines(lines)
    f.write("# TYPE fabric_queue_depth_bytes gauge\n")
    for target, port, depth in gauges:
        lab = ('job="fabricscope-a",instance="fabricscope-a:9464",target="%s",source="snmp",'
               'interface="Eth1/%d",tc="3"' % (target, port))
        f.writelines("fabric_queue_depth_bytes{%s} %d %d\n" % (lab, v, at)
                     for at, v in zip(times, depth))
    f.write("# EOF\n")
for s in surges:
    print("%.3f" % s)

"""The simulated GPU host shared by the host-event generators (test code, never shipped).

A host whose clock runs `offset_ms` off the collector's (same machine: an artificial
offset) reports an AllReduce range every TICK_S that stretches while a surge is on
(SURGE_MS instead of NORMAL_MS), plus random slowdowns (RANDOM_SLOW_MS) on a quarter of
the ticks 2.5 s or more away from any surge. Before every post it measures its offset
NTP-style against GET /api/v1/time (8 rounds on one connection, the minimum-delay round
kept) and posts the events on its own clock with that measurement, as the importers do.

Callers run their own loop (they also drive the switch side) and call `tick(now)`;
`post_due(now)` posts once a second, `finish()` posts the rest. What the test checks
against is kept on the true (collector) axis: `slow` (start_ns, end_ns, why) and
`measured` (offset, uncertainty) pairs.
"""
import http.client
import json
import random
import sys
import time
import urllib.parse

TICK_S = 0.1
NORMAL_MS, SURGE_MS, RANDOM_SLOW_MS = 20, 80, 70


class GpuHost:
    def __init__(self, url, token_file, offset_ms, host, surges, t0, seed=7):
        self.token = open(token_file).read().strip()
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        self.offset_ns = int(offset_ms * 1e6)
        self.host = host
        self.surges = surges  # [(start, end)] in seconds on the true axis
        self.rng = random.Random(seed)  # which ticks are randomly slow
        self.next_tick = t0
        self.last_post = time.time()
        self.pending, self.slow, self.measured = [], [], []

    def host_ns(self):
        return time.time_ns() + self.offset_ns

    def measure(self):
        best = None
        for _ in range(8):
            t1 = self.host_ns()
            self.conn.request("GET", "/api/v1/time")
            r = self.conn.getresponse()
            body = r.read()
            t4 = self.host_ns()
            if r.status != 200:
                sys.exit("GET /api/v1/time: HTTP %d %s" % (r.status, body[:200]))
            d = json.loads(body)
            t2, t3 = d["receive_ns"], d["send_ns"]
            delay = (t4 - t1) - (t3 - t2)
            off = ((t1 - t2) + (t4 - t3)) // 2  # host minus collector
            if best is None or delay < best[1]:
                best = (off, delay)
        return best[0], best[1] // 2 + 1000

    def post(self):
        off, unc = self.measure()
        self.measured.append([off, unc])
        body = json.dumps({"host_offset_ns": off, "host_offset_uncertainty_ns": unc,
                           "events": self.pending})
        self.conn.request("POST", "/api/v1/host-events", body,
                          {"Authorization": "Bearer " + self.token,
                           "Content-Type": "application/json"})
        r = self.conn.getresponse()
        text = r.read()
        if r.status != 200:
            sys.exit("POST /api/v1/host-events: HTTP %d %s" % (r.status, text[:300]))
        self.pending = []

    def tick(self, now):
        """Makes the events of every tick up to now."""
        while self.next_tick <= now:
            # Events start on the tick; in a surge they stretch, and a few far from any
            # surge are slow for other reasons.
            start = self.next_tick
            in_surge = any(s <= start < e for s, e in self.surges)
            far = all(abs(start - s) > 2.5 and abs(start - e) > 2.5 for s, e in self.surges)
            if in_surge:
                dur_ms, why = SURGE_MS, "surge"
            elif far and self.rng.random() < 0.25:
                dur_ms, why = RANDOM_SLOW_MS, "random"
            else:
                dur_ms, why = NORMAL_MS + self.rng.uniform(-2, 2), None
            start_ns = int(start * 1e9)
            dur_ns = int(dur_ms * 1e6)
            self.pending.append({"host": self.host, "kind": "nccl.kernel", "name": "AllReduce",
                                 "start": start_ns + self.offset_ns,
                                 "end": start_ns + dur_ns + self.offset_ns,
                                 "attrs": {"bytes": 268435456, "rank": 3}})
            if why:
                self.slow.append({"start_ns": start_ns, "end_ns": start_ns + dur_ns, "why": why})
            self.next_tick += TICK_S

    def post_due(self, now):
        if now - self.last_post >= 1.0 and self.pending:
            self.post()
            self.last_post = now

    def finish(self):
        if self.pending:
            self.post()

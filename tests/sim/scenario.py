"""The simulated switch's scenario, shared by every simulator (test code, never shipped).

One scenario file (JSON) describes one simulated switch. The SNMP, ONYX CLI and gNMI
simulators all compute their counters from it as functions of the time since the
simulated boot, so one switch polled by several drivers gives the same numbers, and a
test can predict every value exactly.

Keys (all optional):
  ports            number of ports, named Eth1/1 .. Eth1/N (default 64)
  rate_bps         port p's rx and tx octets grow at rate_bps/8 * ((p % 4) + 1) / 4 per s
                   (default 10e9)
  packet_bytes     unicast packets = octets // packet_bytes (default 1000)
  counter_base     added to every 64-bit counter, e.g. 2**53 + 1 to test exactness (default 0)
  boot_epoch_s     realtime seconds of the simulated boot; simulators that should agree
                   are given the same value (default: the simulator's start)
  clock_offset_ms  device clock minus real time (default 0)
  frozen_at_s      seconds since boot at which every counter, gauge and uptime stands still
                   (the clock goes on): a test that compares two commands of one poll reads
                   them at one instant, however slowly the machine answers (default: none)
  tc_share         share of a port's tx octets/packets per traffic class 0..7
                   (default 0.4 on tc 0, 0.6 on tc 3)
  busy             a busy fabric around the incident (default: none, every other port flat):
                   {seed: 1, share: 0.6, max_ecn_pps: 50000, bursty_share: 0.3,
                   bursts_per_hour: 12, burst_s: 3, burst_ecn_pps: 150000,
                   queue_bytes_per_pps: 40, burst_queue_bytes: 4000000}. Each port (the
                   culprit too) is busy with probability share, at its own ECN-mark level
                   (up to max_ecn_pps on tc), with noise (two sinusoids of 7.3 s and 61 s
                   at seeded phases: integrable, so counters stay exact functions of t);
                   a bursty_share of the ports has one incast burst (burst_s at
                   burst_ecn_pps, burst_queue_bytes of queue) at a seeded place in each
                   slot of 3600/bursts_per_hour s. Queue depth follows the ECN rate
                   (queue_bytes_per_pps per mark/s). Port and queue (tc) ECN counters and
                   the tc's queue depth carry it; the SNMP simulator mirrors the queue
                   depth (tests/sim/onyx_snmp_sim.c, same formulas).
  congestion       the recurring incident: {port: 49, tc: 3, period_s: 30, duration_s: 2,
                   phase_s: 10, ecn_pps: 200000, wred_pps: 1000, pfc_pps: 500,
                   queue_bytes: 12000000}. A surge is active while
                   (t - phase_s) mod period_s < duration_s (t: seconds since boot, t >= phase_s).
                   During it, on that port: ECN-marked packets grow at ecn_pps (port and tc),
                   WRED drops at wred_pps (tc), rx PFC pause frames at pfc_pps (priority = tc,
                   each pausing 100 us), and the tc's egress queue holds queue_bytes (else 0).
  acl_entries      ACL entries of the switch's flow ACL (default none), as the gNMI simulator
                   serves them under /acl/acl-sets: [{set: "FLOWS", seq: 10,
                   description: "fabricscope:nccl-roce", tc: 3}, ...]. An entry matches
                   the traffic of its tc on every port: matched-packets (-octets) is the
                   sum over the ports of tc_tx_pkts (tc_tx_octets) without counter_base,
                   plus counter_base once (acl_matched_pkts / acl_matched_octets).
  wjh              What-Just-Happened aggregates, as the gNMI simulator serves them on
                   Cumulus' nvidia-wjh paths (default none): {window_s: 4}. The WRED drops
                   of every port's incident tc (tc_wred_dropped without counter_base)
                   are aggregated in tumbling sample windows of window_s seconds from
                   boot: at t the aggregate holds the drops since the start of t's window
                   (wjh_window / wjh_count).
"""
import json
import math
import time

DEFAULT_CONGESTION = {
    "port": 49, "tc": 3, "period_s": 30.0, "duration_s": 2.0, "phase_s": 10.0,
    "ecn_pps": 200000.0, "wred_pps": 1000.0, "pfc_pps": 500.0, "queue_bytes": 12000000,
}
PAUSE_US_PER_FRAME = 100
DEFAULT_BUSY = {
    "seed": 1, "share": 0.6, "max_ecn_pps": 50000.0, "bursty_share": 0.3,
    "bursts_per_hour": 12.0, "burst_s": 3.0, "burst_ecn_pps": 150000.0,
    "queue_bytes_per_pps": 40.0, "burst_queue_bytes": 4000000.0,
}
M64 = (1 << 64) - 1


def splitmix64(x):
    """The same 64-bit mix as tests/support/rng.h and the SNMP simulator."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def unit(h):
    """A 64-bit hash as a uniform double in [0, 1)."""
    return (h >> 11) * (1.0 / 9007199254740992.0)


class Scenario:
    def __init__(self, path=None, **overrides):
        d = {}
        if path:
            with open(path) as f:
                d = json.load(f)
        d.update(overrides)
        self.ports = int(d.get("ports", 64))
        self.rate_bps = float(d.get("rate_bps", 10e9))
        self.packet_bytes = int(d.get("packet_bytes", 1000))
        self.counter_base = int(d.get("counter_base", 0))
        self.boot_epoch_s = float(d.get("boot_epoch_s", time.time()))
        self.clock_offset_ms = float(d.get("clock_offset_ms", 0))
        frozen = d.get("frozen_at_s")
        self.frozen_at_s = None if frozen is None else float(frozen)
        share = d.get("tc_share", [0.4, 0, 0, 0.6, 0, 0, 0, 0])
        self.tc_share = [float(x) for x in share] + [0.0] * (8 - len(share))
        c = dict(DEFAULT_CONGESTION)
        c.update(d.get("congestion", {}))
        self.cong = c
        self.acl_entries = [dict(e) for e in d.get("acl_entries", [])]
        self.wjh = dict(d["wjh"]) if d.get("wjh") is not None else None
        # LLDP (the topology): the switch's own identity {chassis_id, system_name} and its
        # neighbours [{port, id, chassis_id, port_id, port_id_type, port_descr, sys_name}]
        # (port: the local port as this simulator names it; id: the gNMI neighbor key).
        self.lldp_local = dict(d.get("lldp_local") or {})
        self.lldp_neighbors = [dict(e) for e in d.get("lldp_neighbors", [])]
        self.busy = None
        if d.get("busy") is not None:
            b = dict(DEFAULT_BUSY)
            b.update(d["busy"])
            self.busy = b

    # ---- the busy fabric (see "busy" above) ----
    def busy_port(self, p):
        """(level pps, phase1, phase2, bursty) of port p; level 0 for an idle port."""
        b = self.busy
        h = splitmix64((int(b["seed"]) * 1000003 + p) & M64)
        h2 = splitmix64(h)
        h3 = splitmix64(h2)
        h4 = splitmix64(h3)
        level = b["max_ecn_pps"] * unit(h2) if unit(h) < b["share"] else 0.0
        return level, 2 * math.pi * unit(h3), 2 * math.pi * unit(h4), unit(splitmix64(h4)) < b["bursty_share"]

    def busy_burst_start(self, p, k):
        b = self.busy
        slot = 3600.0 / b["bursts_per_hour"]
        u = unit(splitmix64((int(b["seed"]) * 7919 + p * 104729 + k * 1299709) & M64))
        return (k + u * 0.9) * slot

    def busy_burst_seconds(self, p, t):
        """Seconds of port p's bursts from boot to t."""
        b = self.busy
        slot = 3600.0 / b["bursts_per_hour"]
        total = 0.0
        k = 0
        while k * slot <= t:
            s0 = self.busy_burst_start(p, k)
            if t > s0:
                total += min(t - s0, b["burst_s"])
            k += 1
        return total

    def busy_in_burst(self, p, t):
        b = self.busy
        slot = 3600.0 / b["bursts_per_hour"]
        k = int(math.floor(t / slot))
        s0 = self.busy_burst_start(p, k)
        return s0 <= t < s0 + b["burst_s"]

    def busy_marks(self, p, t):
        """ECN marks of port p's busy background from boot to t (on the incident's tc)."""
        if self.busy is None or t <= 0:
            return 0
        level, f1, f2, bursty = self.busy_port(p)
        w1, w2 = 2 * math.pi / 7.3, 2 * math.pi / 61.0
        x = level * (t + 0.2 / w1 * (math.cos(f1) - math.cos(w1 * t + f1))
                     + 0.1 / w2 * (math.cos(f2) - math.cos(w2 * t + f2)))
        if bursty:
            x += self.busy["burst_ecn_pps"] * self.busy_burst_seconds(p, t)
        return int(x)

    def busy_ecn_rate(self, p, t):
        """ECN marks per second of port p's busy background at t: the derivative of
        busy_marks (the sFlow agent simulator marks sampled packets CE at this rate)."""
        if self.busy is None or t <= 0:
            return 0.0
        level, f1, f2, bursty = self.busy_port(p)
        w1, w2 = 2 * math.pi / 7.3, 2 * math.pi / 61.0
        rate = level * (1 + 0.2 * math.sin(w1 * t + f1) + 0.1 * math.sin(w2 * t + f2))
        if bursty and self.busy_in_burst(p, t):
            rate += self.busy["burst_ecn_pps"]
        return rate

    def busy_queue(self, p, t):
        """Queue bytes of port p's busy background at t (on the incident's tc)."""
        if self.busy is None:
            return 0
        level, f1, f2, bursty = self.busy_port(p)
        w1, w2 = 2 * math.pi / 7.3, 2 * math.pi / 61.0
        rate = level * (1 + 0.2 * math.sin(w1 * t + f1) + 0.1 * math.sin(w2 * t + f2))
        q = rate * self.busy["queue_bytes_per_pps"]
        if bursty and self.busy_in_burst(p, t):
            q += self.busy["burst_queue_bytes"]
        return int(q)

    # ---- time ----
    def since_boot(self, now=None):
        t = max(0.0, (time.time() if now is None else now) - self.boot_epoch_s)
        return t if self.frozen_at_s is None else min(t, self.frozen_at_s)

    def device_time(self, now=None):
        """The device's clock (realtime seconds) at real time now."""
        return (time.time() if now is None else now) + self.clock_offset_ms / 1000.0

    def port_name(self, p):
        return "Eth1/%d" % p

    # ---- congestion ----
    def surge_seconds(self, t):
        """Seconds of surge elapsed from boot to t (the integral of the surge indicator)."""
        c = self.cong
        x = t - c["phase_s"]
        if x <= 0:
            return 0.0
        full = math.floor(x / c["period_s"])
        rem = x - full * c["period_s"]
        return full * c["duration_s"] + min(rem, c["duration_s"])

    def in_surge(self, t):
        c = self.cong
        x = t - c["phase_s"]
        return x >= 0 and (x % c["period_s"]) < c["duration_s"]

    def next_surge_start(self, t):
        c = self.cong
        x = t - c["phase_s"]
        if x < 0:
            return c["phase_s"]
        return c["phase_s"] + (math.floor(x / c["period_s"]) + 1) * c["period_s"]

    # ---- counters (t: seconds since boot) ----
    def port_octets(self, p, t):
        return int(self.rate_bps / 8 * ((p % 4) + 1) / 4 * t) + self.counter_base

    def port_ucast_pkts(self, p, t):
        return int(self.rate_bps / 8 * ((p % 4) + 1) / 4 * t) // self.packet_bytes + self.counter_base

    def port_ecn_marked(self, p, t):
        surge = int(self.cong["ecn_pps"] * self.surge_seconds(t)) if p == self.cong["port"] else 0
        return surge + self.busy_marks(p, t) + self.counter_base

    def port_ecn_rate(self, p, t):
        """ECN marks per second on port p at t (all on the incident's tc): the derivative
        of port_ecn_marked, whose integral the counters carry."""
        surge = self.cong["ecn_pps"] if p == self.cong["port"] and self.in_surge(t) else 0.0
        return surge + self.busy_ecn_rate(p, t)

    def tc_tx_octets(self, p, tc, t):
        return int((self.port_octets(p, t) - self.counter_base) * self.tc_share[tc]) + self.counter_base

    def tc_tx_pkts(self, p, tc, t):
        return int((self.port_ucast_pkts(p, t) - self.counter_base) * self.tc_share[tc]) + self.counter_base

    def tc_ecn_marked(self, p, tc, t):
        if tc != self.cong["tc"]:
            return self.counter_base
        return self.port_ecn_marked(p, t)

    def tc_wred_dropped(self, p, tc, t):
        if p != self.cong["port"] or tc != self.cong["tc"]:
            return self.counter_base
        return int(self.cong["wred_pps"] * self.surge_seconds(t)) + self.counter_base

    def tc_no_buffer_dropped(self, p, tc, t):
        return self.counter_base

    def queue_depth_bytes(self, p, tc, t):
        if tc != self.cong["tc"]:
            return 0
        q = self.busy_queue(p, t)
        if p == self.cong["port"] and self.in_surge(t):
            q += int(self.cong["queue_bytes"])
        return q

    def pfc_rx_pause_frames(self, p, prio, t):
        if p != self.cong["port"] or prio != self.cong["tc"]:
            return self.counter_base
        return int(self.cong["pfc_pps"] * self.surge_seconds(t)) + self.counter_base

    def acl_matched_pkts(self, entry, t):
        tc = int(entry["tc"])
        return sum(self.tc_tx_pkts(p, tc, t) - self.counter_base
                   for p in range(1, self.ports + 1)) + self.counter_base

    def acl_matched_octets(self, entry, t):
        tc = int(entry["tc"])
        return sum(self.tc_tx_octets(p, tc, t) - self.counter_base
                   for p in range(1, self.ports + 1)) + self.counter_base

    def wjh_window(self, t):
        """(start, end) in seconds since boot of the WJH sample window at t."""
        w = float(self.wjh["window_s"])
        return math.floor(t / w) * w, t

    def wjh_count(self, p, t):
        """WRED drops of port p on the incident's tc in the WJH window at t."""
        s, _ = self.wjh_window(t)
        tc = self.cong["tc"]
        return self.tc_wred_dropped(p, tc, t) - self.tc_wred_dropped(p, tc, s)

    def pfc_rx_pause_us(self, p, prio, t):
        return (self.pfc_rx_pause_frames(p, prio, t) - self.counter_base) * PAUSE_US_PER_FRAME + self.counter_base

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
  congestion       the recurring incident: {port: 49, tc: 3, period_s: 30, duration_s: 2,
                   phase_s: 10, ecn_pps: 200000, wred_pps: 1000, pfc_pps: 500,
                   queue_bytes: 12000000}. A surge is active while
                   (t - phase_s) mod period_s < duration_s (t: seconds since boot, t >= phase_s).
                   During it, on that port: ECN-marked packets grow at ecn_pps (port and tc),
                   WRED drops at wred_pps (tc), rx PFC pause frames at pfc_pps (priority = tc,
                   each pausing 100 us), and the tc's egress queue holds queue_bytes (else 0).
"""
import json
import math
import time

DEFAULT_CONGESTION = {
    "port": 49, "tc": 3, "period_s": 30.0, "duration_s": 2.0, "phase_s": 10.0,
    "ecn_pps": 200000.0, "wred_pps": 1000.0, "pfc_pps": 500.0, "queue_bytes": 12000000,
}
PAUSE_US_PER_FRAME = 100


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
        if p != self.cong["port"]:
            return self.counter_base
        return int(self.cong["ecn_pps"] * self.surge_seconds(t)) + self.counter_base

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
        if p == self.cong["port"] and tc == self.cong["tc"] and self.in_surge(t):
            return int(self.cong["queue_bytes"])
        return 0

    def pfc_rx_pause_frames(self, p, prio, t):
        if p != self.cong["port"] or prio != self.cong["tc"]:
            return self.counter_base
        return int(self.cong["pfc_pps"] * self.surge_seconds(t)) + self.counter_base

    def pfc_rx_pause_us(self, p, prio, t):
        return (self.pfc_rx_pause_frames(p, prio, t) - self.counter_base) * PAUSE_US_PER_FRAME + self.counter_base

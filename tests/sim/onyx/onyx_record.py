#!/usr/bin/python3
"""onyx_record: records onyx_sim.py's answers into a table for onyx-replay (test code).

  onyx_record.py --scenario FILE --commands FILE --out TABLE [--snapshots K] [--step-s S]

--commands: one CLI command a line, or a driver transcript (fs-onyx-poll --transcript:
the lines it sent start with `<<< `; only those are taken). Session commands the replay
answers itself (enable, paging, exit, configure terminal) and `show clock` (answered from
the real clock) are left out. Each remaining command is answered by onyx_sim.Sim in
enable mode, paging off, the "cli" echo, exactly as a session would print it (CRLF line
ends), at K successive device times S seconds apart (default 12 snapshots, 10 s): the
simulator's own code with time.time() replaced, so the counters of snapshot k are the
scenario's at its k-th poll. The table's layout is described in onyx_replay.c.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onyx_sim  # noqa: E402

SESSION = ("enable", "en", "ena", "disable", "exit", "configure terminal",
           "no cli session paging enable", "cli session paging enable", "show clock")


def commands(path):
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    sent = [ln[4:] for ln in lines if ln.startswith("<<< ")]
    out = []
    for c in sent if sent else lines:
        c = " ".join(c.split())
        if c and c != "********" and c not in SESSION and not c.startswith("terminal ") \
                and c not in out:
            out.append(c)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--commands", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--snapshots", type=int, default=12)
    ap.add_argument("--step-s", type=float, default=10.0)
    a = ap.parse_args()
    cmds = commands(a.commands)
    if not cmds:
        sys.exit("onyx_record: no commands in %s" % a.commands)
    real_time = time.time
    t0 = real_time()
    now = [t0]
    time.time = lambda: now[0]  # the simulator reads the device's time through this
    sim = onyx_sim.Sim(a.scenario)
    sim.mode = "enable"
    sim.paging = False
    buf = []
    sim.write = lambda s: buf.append(s.replace("\r\n", "\n").replace("\n", "\r\n").encode())
    with open(a.out + ".tmp", "wb") as f:
        f.write(b"onyx-replay-table 1 %d\n" % a.snapshots)
        for k in range(a.snapshots):
            now[0] = t0 + k * a.step_s
            for c in cmds:
                buf.clear()
                sim.dispatch(c)
                out = b"".join(buf)
                cb = c.encode()
                f.write(b"%d %d %d\n" % (k, len(cb), len(out)))
                f.write(cb)
                f.write(out)
    os.replace(a.out + ".tmp", a.out)
    time.time = real_time
    print("onyx_record: %d commands x %d snapshots -> %s (%d bytes)"
          % (len(cmds), a.snapshots, a.out, os.path.getsize(a.out)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Checks that a simulator applies its scenario's clock_offset_ms (test code, never shipped).

Independent of fabricscope's clock filter, so that a wrong offset in /api/v1/targets can
be told apart from a simulator that does not apply the offset.

  sim_clock_check.py onyx --port P --user U --key F --known-hosts F --expect-ms X
      One SSH session to the ONYX simulator; `show clock` (whole seconds) every 20 ms for
      2.5 s. Reply i was produced between the send of command i (lo) and its arrival
      (hi), so the offset lies in [device - hi, device + 1 s - lo]; the intersection over
      all replies (second-edge detection) must hold X and be narrower than 100 ms.
  sim_clock_check.py gnmi --stream BIN --expect-ms X -- STREAM ARGS...
      Runs fs-gnmi-stream; each `sample <device_ts_ns> ...` line arrives after the
      notification was stamped, so device_ts - arrival <= offset; the largest (the
      least-delayed notification) must lie in [X - 50 ms, X + 2 ms].
Prints the measured bound; exits 1 with the reason when the check fails.
"""
import calendar
import re
import subprocess
import sys
import threading
import time


def onyx(a):
    cmd = ["ssh", "-T", "-i", a["--key"], "-p", a["--port"], "-o", "BatchMode=yes",
           "-o", "UserKnownHostsFile=" + a["--known-hosts"], "-o", "StrictHostKeyChecking=yes",
           "-o", "LogLevel=ERROR", "%s@127.0.0.1" % a["--user"]]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, bufsize=1)
    sent = []

    def writer():
        time.sleep(0.5)  # the session's banner and prompt first
        end = time.time() + 2.5
        while time.time() < end:
            sent.append(time.time())
            p.stdin.write("show clock\n")
            p.stdin.flush()
            time.sleep(0.02)
        p.stdin.write("exit\n")
        p.stdin.close()

    th = threading.Thread(target=writer)
    th.start()
    replies = []  # (arrival, HH:MM:SS)
    tm = None
    for line in p.stdout:
        m = re.search(r"Time:\s+(\d\d:\d\d:\d\d)", line)
        if m:
            tm = (time.time(), m.group(1))
        m = re.search(r"Date:\s+(\d{4}/\d\d/\d\d)", line)
        if m and tm:
            dev = calendar.timegm(time.strptime(m.group(1) + " " + tm[1], "%Y/%m/%d %H:%M:%S"))
            replies.append((tm[0], dev))
            tm = None
    th.join()
    p.wait()
    if len(replies) < 20 or len(replies) > len(sent):
        sys.exit("onyx: %d clock replies to %d commands (%s)" % (len(replies), len(sent), p.stderr.read()[:300]))
    lo, hi = -1e9, 1e9
    for i, (arr, dev) in enumerate(replies):
        lo = max(lo, dev - arr)
        hi = min(hi, dev + 1 - sent[i])
    x = float(a["--expect-ms"]) / 1000
    print("onyx show clock: offset in [%.1f, %.1f] ms from %d replies" % (lo * 1e3, hi * 1e3, len(replies)))
    if not lo <= x <= hi or hi - lo > 0.1:
        sys.exit("onyx show clock: offset bound [%.1f, %.1f] ms does not pin %g ms" % (lo * 1e3, hi * 1e3, x * 1e3))


def gnmi(a, rest):
    p = subprocess.Popen([a["--stream"]] + rest, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         bufsize=1)
    best, n = -1e9, 0
    for line in p.stdout:
        now = time.time_ns()
        if line.startswith("sample "):
            best = max(best, (int(line.split()[1]) - now) / 1e9)
            n += 1
    p.wait()
    x = float(a["--expect-ms"]) / 1000
    if n == 0:
        sys.exit("gnmi: no samples (%s)" % p.stderr.read()[:300])
    print("gnmi timestamps: device minus arrival at most %.1f ms over %d samples" % (best * 1e3, n))
    if not x - 0.05 <= best <= x + 0.002:
        sys.exit("gnmi: device timestamps run %.1f ms ahead of arrival, want %g ms (-50, +2)" % (best * 1e3, x * 1e3))


def main():
    argv = sys.argv[1:]
    rest = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    mode = argv[0]
    a = dict(zip(argv[1::2], argv[2::2]))
    if mode == "onyx":
        onyx(a)
    else:
        gnmi(a, rest)


if __name__ == "__main__":
    main()

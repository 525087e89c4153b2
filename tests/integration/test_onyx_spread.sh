#!/usr/bin/env bash
# ONYX CLI targets whose whole command set cannot be answered within a poll (issue 18):
# the driver spreads the per-TC and per-port commands over K polls (one slice a poll, in
# rotation) instead of letting them time out. Three simulated switches
# (tests/sim/onyx/onyx_sim.py behind a REAL OpenSSH sshd), 2 s interval (1.6 s budget):
#   - slow: 8 ports, 100 ms a round trip (onyx_delay_ms) and a CLI that drops type-ahead
#     (so one command at a time): its 27 commands need about 2.7 s;
#   - far: 64 ports, 700 ms a round trip, pipelined: its 83 commands take three batches
#     (about 2.1 s);
#   - fast: 8 ports, no delay: it must stay at K = 1.
# Once spreading is in force, over a window of 12 polls each: no poll error of any kind
# (no command timed out), one SSH session each, K shown in /api/v1/targets
# (cli_poll_spread >= 2 with its reason on slow and far, 1 on fast); in every /metrics
# scrape (every 0.5 s) every per-port counter series of every target is present (the
# staleness bound follows K); and in /api/v1/raw every series (port bytes, per-TC tx
# packets, per-priority PFC pause frames, per-port ECN marks) of every port has a sample
# at least every K+1 intervals, each value the scenario's at the time the sample is
# stamped with (between the scenario's value 1 s before and at the stamp: the time it
# was read), and the moving counters advance.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
onyx_sim_prereqs

BOOT=$($PY -c 'import time; print(time.time() - 300)')
NAMES="slow far fast"
declare -A SSH_PORT PWFILE KNOWN
for m in $NAMES; do
  $PY - "$T/scen-$m.json" "$BOOT" "$m" <<'EOF'
import json, sys
path, boot, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
d = {"ports": 64 if mode == "far" else 8, "boot_epoch_s": boot, "counter_base": 2**40 + 1}
if mode == "slow":
    d["onyx_typeahead"] = "drop"
    d["onyx_delay_ms"] = 100
if mode == "far":
    d["onyx_delay_ms"] = 700
json.dump(d, open(path, "w"))
EOF
  start_onyx_sim "sim-$m" --scenario "$T/scen-$m.json"
  SSH_PORT[$m]=$ONYX_SSH_PORT PWFILE[$m]=$ONYX_PASSWORD_FILE KNOWN[$m]=$ONYX_KNOWN_HOSTS
done

# shellcheck disable=SC2086
cli_targets_up $NAMES

api() { curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" >"$T/targets.json"; }
# field TARGET KEY
field() { $PY -c '
import json, sys
for t in json.load(open(sys.argv[1]))["data"]:
    if t.get("target") == sys.argv[2]:
        v = t.get(sys.argv[3])
        print(json.dumps(v) if isinstance(v, (dict, list)) else v)' "$T/targets.json" "$1" "$2"; }
spreading() {
  api || return 1
  [ "$(field slow cli_poll_spread)" -ge 2 ] 2>/dev/null && [ "$(field far cli_poll_spread)" -ge 2 ] 2>/dev/null &&
    [ "$(field fast cli_poll_spread)" = 1 ] && [ "$(field slow state)" = up ] &&
    [ "$(field far state)" = up ] && [ "$(field fast state)" = up ]
}
wait_for 90 "slow and far spreading (cli_poll_spread >= 2), fast at 1, all up" spreading
# The window: 12 polls of each target (24 s at 2 s), watched by the checker below.
cat >"$T/check.py" <<'EOF'
import json, sys, time, urllib.parse, urllib.request
sys.path.insert(0, sys.argv[3] + "/tests/sim")
from scenario import Scenario

base, tdir, _, polls_wanted = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
NAMES = ("slow", "far", "fast")
INTERVAL = 2.0
sc = {n: Scenario("%s/scen-%s.json" % (tdir, n)) for n in NAMES}

def get(path):
    return urllib.request.urlopen(base + path, timeout=5).read().decode()

def targets():
    return {t["target"]: t for t in json.loads(get("/api/v1/targets"))["data"]}

def polls(text):
    """Each target's poll count (fabricscope_poll_duration_seconds_count) in a scrape."""
    out = {}
    for l in text.splitlines():
        if l.startswith("fabricscope_poll_duration_seconds_count{"):
            for n in NAMES:
                if 'target="%s"' % n in l:
                    out[n] = int(float(l.split()[-1]))
    return out

# The series checked, per target: (metric, labels, scenario function of (port, t), moves)
def series(n):
    s = sc[n]
    out = []
    for p in range(1, s.ports + 1):
        e = "Eth1/%d" % p
        out.append(("fabric_port_bytes_total", {"interface": e, "direction": "rx"},
                    lambda t, p=p, s=s: s.port_octets(p, t), True))
        out.append(("fabric_port_ecn_marked_packets_total", {"interface": e},
                    lambda t, p=p, s=s: s.port_ecn_marked(p, t), False))
        for tc in range(8):
            out.append(("fabric_queue_tx_packets_total", {"interface": e, "tc": str(tc)},
                        lambda t, p=p, tc=tc, s=s: s.tc_tx_pkts(p, tc, t), s.tc_share[tc] > 0))
            out.append(("fabric_pfc_pause_frames_total",
                        {"interface": e, "direction": "rx", "priority": str(tc)},
                        lambda t, p=p, tc=tc, s=s: s.pfc_rx_pause_frames(p, tc, t), False))
    return out

def line(n, metric, labels):
    ls = dict(labels)
    ls["target"] = n
    ls["source"] = "cli"
    return metric + "{" + ",".join('%s="%s"' % kv for kv in sorted(ls.items())) + "}"

def key_of(metric_line):
    name, rest = metric_line.split("{", 1)
    labels = {}
    for kv in rest.rstrip("}").split('",'):
        k, v = kv.split('="', 1)
        labels[k] = v.rstrip('"')
    return name + "{" + ",".join('%s="%s"' % kv for kv in sorted(labels.items())) + "}"

def present_now(text):
    present = set()
    for l in text.splitlines():
        if l.startswith("fabric_") and "{" in l:
            present.add(key_of(l.split(" ")[0]))
    return present

want = {n: series(n) for n in NAMES}
# First every series once (a full rotation of the spread commands), then the window.
deadline = time.time() + 60
while True:
    present = present_now(get("/metrics"))
    lacking = [line(n, m, ls) for n in NAMES for m, ls, _, _ in want[n] if line(n, m, ls) not in present]
    if not lacking:
        break
    if time.time() > deadline:
        sys.exit("%d series never in /metrics, e.g. %s" % (len(lacking), lacking[:3]))
    time.sleep(0.5)
t0 = time.time()
start = targets()
p0 = polls(get("/metrics"))
k_seen = {n: {start[n]["cli_poll_spread"]} for n in NAMES}
scrapes = 0
missing = []
while True:
    now_t = targets()
    text = get("/metrics")
    p1 = polls(text)
    for n in NAMES:
        k_seen[n].add(now_t[n]["cli_poll_spread"])
    if all(p1[n] >= p0[n] + polls_wanted for n in NAMES):
        break
    if time.time() - t0 > polls_wanted * INTERVAL * 3:
        sys.exit("the window did not complete: polls %s -> %s" % (p0, p1))
    present = present_now(text)
    scrapes += 1
    for n in NAMES:
        for m, ls, _, _ in want[n]:
            if line(n, m, ls) not in present:
                missing.append("%s at %.1f s" % (line(n, m, ls), time.time() - t0))
    time.sleep(0.5)
t1 = time.time()
end = targets()
errs = []
if missing:
    errs.append("%d series missing from /metrics scrapes, e.g. %s" % (len(missing), missing[:3]))
for n in NAMES:
    a, b = start[n], end[n]
    if a["poll_errors"] != b["poll_errors"]:
        errs.append("%s: poll errors during the window: %s -> %s (last error %r)" % (
            n, a["poll_errors"], b["poll_errors"], b.get("last_error")))
    if b["cli_sessions_opened"] != 1:
        errs.append("%s: %s sessions opened" % (n, b["cli_sessions_opened"]))
    if b["state"] != "up":
        errs.append("%s: %s" % (n, b["state"]))
    if n == "fast":
        if k_seen[n] != {1}:
            errs.append("fast: spread %s" % k_seen[n])
        if b["cli_poll_spread_why"] != "":
            errs.append("fast: spread why %r" % b["cli_poll_spread_why"])
    else:
        if min(k_seen[n]) < 2:
            errs.append("%s: spread %s" % (n, k_seen[n]))
        if "per-TC and per-port commands are read over" not in b["cli_poll_spread_why"]:
            errs.append("%s: spread why %r" % (n, b["cli_poll_spread_why"]))
    print("%s: cli_poll_spread %s (%s), deferred %d, %d polls in %.1f s; too slow: %r" % (
        n, sorted(k_seen[n]), b["cli_poll_spread_why"], b["cli_poll_deferred"],
        p1[n] - p0[n], t1 - t0, b["cli_poll_too_slow"]))

# /api/v1/raw: every series refreshed at least every K+1 intervals, values the scenario's.
for n in NAMES:
    kmax = max(k_seen[n])
    bound = (kmax + 1) * INTERVAL
    q = urllib.parse.urlencode({"match[]": '{target="%s",source="cli",interface=~"Eth.*"}' % n,
                                "start": "%.3f" % t0, "end": "%.3f" % t1})
    res = json.loads(get("/api/v1/raw?" + q))["data"]["result"]
    got = {}
    for r in res:
        m = dict(r["metric"])
        name = m.pop("__name__")
        got[line(n, name, {k: v for k, v in m.items() if k not in ("target", "source")})] = r["values"]
    worst_gap = 0.0
    checked = 0
    for m, ls, f, moves in want[n]:
        key = line(n, m, ls)
        vals = got.get(key)
        if not vals:
            errs.append("%s: no raw samples in the window" % key)
            continue
        ts = [t0] + [float(v[0]) for v in vals] + [t1]
        gap = max(b - a for a, b in zip(ts, ts[1:]))
        worst_gap = max(worst_gap, gap)
        if gap > bound:
            errs.append("%s: %.1f s without a sample (K %d: bound %.1f s)" % (key, gap, kmax, bound))
        for stamp, v in vals:
            stamp, v = float(stamp), int(v)
            lo = f(sc[n].since_boot(stamp - 1.0))
            hi = f(sc[n].since_boot(stamp + 0.05))
            checked += 1
            if not lo <= v <= hi:
                errs.append("%s: %d at %.3f, the scenario's between %d and %d" % (key, v, stamp, lo, hi))
                break
        if moves and len(vals) >= 2 and not int(vals[-1][1]) > int(vals[0][1]):
            errs.append("%s: did not advance (%s)" % (key, vals))
    print("%s: %d series, %d samples checked against the scenario, largest gap %.1f s (bound %.1f s)"
          % (n, len(want[n]), checked, worst_gap, bound))
print("%d /metrics scrapes, every series in each" % scrapes if not missing else "")
if errs:
    sys.exit("\n".join(errs[:20]))
EOF
$PY "$T/check.py" "http://127.0.0.1:$HTTP" "$T" "$FS_SOURCE_DIR" 12 >"$T/check.out" 2>&1 ||
  fail "window: $(cat "$T/check.out")"
cat "$T/check.out"
grep -Eq "target (slow|far): .*(closed|reconnect)" "$T/fabricscope.log" &&
  fail "a session was dropped: $(grep -E 'closed|reconnect' "$T/fabricscope.log")"
for m in slow far; do
  grep -q "target $m: spreading its commands over [0-9]* polls: the [0-9]* per-TC and per-port commands" "$T/fabricscope.log" ||
    fail "$m: spreading not logged"
done
grep -q "target fast: spreading" "$T/fabricscope.log" && fail "fast spread its commands"
ok "slow (one at a time) and far (pipelined) spread their commands: no poll error, one session, every series of every port refreshed within K+1 intervals with the scenario's values; fast stays at K = 1"

# ---------------------------------------------------------------- the switch gets fast
# Without its delay, slow's whole set fits again: spreading goes back to 1.
$PY - "$T/scen-slow.json" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
d["onyx_delay_ms"] = 0
json.dump(d, open(sys.argv[1] + ".tmp", "w"))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
EOF
back_to_one() { api && [ "$(field slow cli_poll_spread)" = 1 ] && [ "$(field slow cli_poll_spread_why)" = "" ]; }
wait_for 60 "slow back at cli_poll_spread 1" back_to_one
grep -q "target slow: all its commands fit a poll again" "$T/fabricscope.log" || fail "the return to 1 was not logged"
ok "slow fast again: back to one poll for all its commands"

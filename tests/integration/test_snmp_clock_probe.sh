#!/usr/bin/env bash
# The SNMP clock offset from HOST-RESOURCES-MIB hrSystemDate (whole seconds) through the
# real fabricscope binary, against a private real snmpd serving this machine's own clock,
# polled every 1 s. The true offset is 0 up to one kernel tick: snmpd reads time(), which
# on Linux is the coarse realtime clock (CLOCK_REALTIME_COARSE), behind CLOCK_REALTIME by
# about its resolution (a tick, 4 ms at HZ=250), more when a tick comes late on a loaded
# machine; the checker measures that lag all along, and the truth lies in [-lag, 0].
# Polls alone come at a fixed phase to the agent's second edge and leave the offset
# about a second wide; the driver's second-edge probes
# (extra GETs of hrSystemDate.0 between polls) must bring the target's clock uncertainty
# (/api/v1/targets, polled every 100 ms) to <= 20 ms within 30 s of its first reading, with:
#   - every estimate seen on the way honest: offset +- uncertainty meets [-tick, 0];
#   - the final offset within 20 ms of [-tick, 0];
#   - probes counted in the target's detail (snmp_clock_probes > 0) and probing then
#     stopping (snmp_clock_probing "converged", deadline 45 s);
#   - no poll failure and no overrun after the first reading (a probe never holds up a
#     cycle).
# Prints the time to <= 20 ms and the final figures as `# ...` lines.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
PY=/usr/bin/python3
start_snmp_host
C=$(cat "$SNMP_COMMUNITY_FILE")
# The agent must serve hrSystemDate in whole seconds (the case probes exist for): a
# DateAndTime whose deci-seconds octet (the 8th) is 0.
date_hex=$(snmpget -v2c -c "$C" -On -Oqvx -t 1 -r 1 "udp:127.0.0.1:$PORT" 1.3.6.1.2.1.25.1.2.0) ||
  fail "snmpget hrSystemDate failed"
deci=$(echo "$date_hex" | tr -s ' \n' ' ' | awk '{print $8}')
[ "$deci" = "00" ] || fail "hrSystemDate is not whole seconds here ($date_hex): nothing to probe"

HTTP=$(free_tcp_port)
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: host
    address: 127.0.0.1
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: 1s,
            timeout: 500ms, retries: 1 }
EOF
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz" 20

$PY - "http://127.0.0.1:$HTTP/api/v1/targets" <<'EOF' || fail "SNMP clock offset (see above)"
import json, sys, threading, time, urllib.request
url = sys.argv[1]
GOAL, CONVERGE_MAX, DEADLINE = 0.020, 30.0, 45.0
# The agent's clock (time(), the coarse clock) lags ours by about a tick, and by more
# when the timer tick that advances it comes late (a loaded machine, a vCPU the
# hypervisor held: 8.4 ms seen here with a 4 ms tick). The lag is measured all along.
CLOCK_REALTIME_COARSE = 5  # Linux; not named in Python's time module
TICK = time.clock_getres(CLOCK_REALTIME_COARSE)
assert 0 < TICK <= 0.010, TICK
lag = {"max": TICK, "run": True}
def watch_lag():
    while lag["run"]:
        d = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(CLOCK_REALTIME_COARSE)
        if d > lag["max"]:
            lag["max"] = d
        time.sleep(0.0002)
threading.Thread(target=watch_lag, daemon=True).start()
HI = 0.0
def lo():  # the truth interval is [-largest lag seen, 0]
    return -lag["max"]
def dist(off):  # how far off lies from the truth interval [lo(), HI]
    return max(lo() - off, off - HI, 0.0)
EPS = 1e-6  # /api/v1/targets rounds to whole microseconds
t_start = time.monotonic()
first_known = converged = stopped = None
last, errs, seen, widest = None, [], 0, 0.0

def snmp_row():
    """The target's SNMP row of /api/v1/targets once it has a clock estimate, else None."""
    rows = json.load(urllib.request.urlopen(url, timeout=5))["data"]
    return next((o for o in rows if o["target"] == "host" and o["source"] == "snmp"
                 and o["clock_offset_seconds"] is not None), None)

while time.monotonic() - t_start < DEADLINE and stopped is None:
    try:
        o = snmp_row()
    except OSError as e:
        errs.append("GET %s: %s" % (url, e))
        break
    now = time.monotonic()
    if o is not None:
        off, unc = o["clock_offset_seconds"], o["clock_uncertainty_seconds"]
        if first_known is None:
            first_known = now
            errors_before = dict(o["poll_errors"])  # a start under load is not the probes'
        seen += 1
        widest = max(widest, unc)
        last = o
        if dist(off) > unc + EPS:
            errs.append("dishonest estimate %.6f +- %.6f s (truth in [%.4f, 0]), after %s probes"
                        % (off, unc, lo(), o.get("snmp_clock_probes")))
        if unc <= GOAL and converged is None:
            converged = now
        if converged is not None and o.get("snmp_clock_probing") == "converged":
            stopped = now
    if errs:
        break
    if first_known is not None and converged is None and now - first_known > CONVERGE_MAX:
        break
    time.sleep(0.1)  # the polling period; every condition above is re-read, none assumed
if last is None:
    errs.append("no SNMP clock estimate within %.0f s" % DEADLINE)
else:
    o = last
    off, unc = o["clock_offset_seconds"], o["clock_uncertainty_seconds"]
    print("# host: truth in [%.4f, 0] s (coarse clock tick %.3f s, largest lag seen)" % (lo(), TICK))
    print("# host: final offset %+.6f s +- %.6f s, %s probes, probing \"%s\", %d estimates "
          "checked (widest +- %.3f s)" % (off, unc, o.get("snmp_clock_probes"),
                                          o.get("snmp_clock_probing"), seen, widest))
    if converged is None:
        errs.append("uncertainty still %.6f s %.0f s after the first reading (probing \"%s\")"
                    % (unc, CONVERGE_MAX, o.get("snmp_clock_probing")))
    else:
        print("# host: uncertainty <= 20 ms %.1f s after the first reading" % (converged - first_known))
        if converged - first_known > CONVERGE_MAX:
            errs.append("converged only %.1f s after the first reading (goal %.0f s)"
                        % (converged - first_known, CONVERGE_MAX))
        if stopped is None:
            errs.append("probing did not stop (\"%s\") within %.0f s" % (o.get("snmp_clock_probing"), DEADLINE))
    if dist(off) > GOAL:
        errs.append("offset %.6f s, truth in [%.4f, 0]: beyond 20 ms" % (off, lo()))
    if not o.get("snmp_clock_probes"):
        errs.append("no clock probe counted (snmp_clock_probes %s)" % o.get("snmp_clock_probes"))
    since = {k: v - errors_before.get(k, 0) for k, v in o["poll_errors"].items()}
    bad = {k: v for k, v in since.items() if v}
    if bad or o["consecutive_failures"] or o["state"] != "up":
        errs.append("polls failed or overran while probing: state %s, errors %s" % (o["state"], bad))
for e in errs:
    print("FAIL: " + e, file=sys.stderr)
sys.exit(1 if errs else 0)
EOF
ok "SNMP hrSystemDate (whole seconds, polled every 1 s): within 20 ms of the truth ([-lag, 0]) within 30 s by second-edge probes, honest all along; probing then stops; polls unharmed"

#!/usr/bin/env bash
# make eval, end to end through the drivers: the drivers_end_to_end family. Each run is a
# randomized fabric of two simulated TORs of 32 ports, each polled by the real binary over
# SNMP (onyx-snmp-sim behind snmpd), the ONYX CLI (onyx_sim.py behind sshd) and gNMI
# (gnmi_sim.py over TLS), the three simulators of a TOR sharing one scenario
# (tests/sim/scenario.py): both TORs busy fabrics (own seeds: busy and idle ports with
# noise, random incast bursts), one culprit port (random TOR and port, busy or not as its
# seed makes it) surging 2 s every PERIOD s (random in 10-15 s, random phase), each
# TOR's clock off by a random +-400 ms. The host side (acceptance_gen.py without the
# network namespace) runs a random +-150 ms off the collector and posts AllReduce ranges
# every 100 ms, stretched during the SURGES surges and slow at random elsewhere. A real
# Prometheus scrapes the collector every second.
# Scored per run: from /api/v1/correlate over the run (kind=nccl, slow=2x), the culprit
# first and in the top 3 of the summary, the share of surge-time slow events whose first
# suspect is the culprit, and the random (unrelated: 2.5 s or more from every scenario
# surge, the unplayed ones before the first played included) slow events blamed on it,
# also counted without those during an incast burst of the culprit port's own (then it
# really is congested); from
# /api/v1/incidents at the end, the recurrence found, period error and next-surge error
# (fractions of the period); time to the answer: from the end of the third surge the
# collector saw until /api/v1/incidents names the culprit recurring (polled every 0.5 s),
# and until Prometheus holds fabricscope_incident_next_expected_timestamp_seconds for it
# (the alerting path; the metrics are refreshed every 30 s and by each /incidents request,
# so here they follow the polling within a scrape), whose period and next time are scored
# too.
#   tests/eval/eval_drivers.sh [RUNS] [SEED_BASE]    (default 5 runs, base 9300)
# Needs root (sshd, a test user), prometheus, jq, curl, openssl, python3 with grpcio and
# protobuf, and a built fabricscope and onyx-snmp-sim (FS_BUILD_DIR, as lib.sh finds it).
set -euo pipefail
SURGES=6

if [ "${1:-}" != --run ]; then
  # ---- the driver: one child per seed (lib.sh's cleanup stops each run's processes), a
  # table row per run, EVAL lines over all runs.
  here=$(cd "$(dirname "$0")" && pwd)
  runs=${1:-5}
  base=${2:-9300}
  for tool in prometheus jq curl python3 openssl sshd snmpd; do
    command -v $tool >/dev/null || { echo "eval_drivers: $tool not found" >&2; exit 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "eval_drivers: needs root (sshd, a test user)" >&2; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  t0=$SECONDS
  printf '%-6s %-14s %6s %5s %6s %5s %7s %8s %8s %5s %9s %9s %7s %7s %9s %9s\n' seed culprit period busy \
    first top3 surge_1st blamed in_burst rec period_err next_err answer_s alert_s prom_p_err prom_n_err
  for ((i = 0; i < runs; i++)); do
    seed=$((base + i))
    if ! bash "$here/eval_drivers.sh" --run "$seed" "$work/$seed.json" >"$work/$seed.log" 2>&1; then
      echo "eval_drivers: run $seed failed:" >&2
      tail -n 60 "$work/$seed.log" >&2
      exit 1
    fi
    /usr/bin/python3 - "$work/$seed.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = lambda x, fmt: "nan" if x is None else fmt % x
print("%-6s %-14s %6.1f %5s %6d %5d %6.0f%% %8s %8d %5d %9s %9s %7s %7s %9s %9s" % (
    r["seed"], r["culprit"], r["period"], "yes" if r["busy"] else "no", r["first"], r["top3"],
    100.0 * r["surge_first"] / max(1, r["surge_events"]), "%d/%d" % (r["blamed"], r["random_events"]),
    r["blamed_in_own_burst"], r["recurring"], f(r["period_err"], "%.4f"), f(r["next_err"], "%.4f"), f(r["answer_s"], "%.1f"),
    f(r["alert_s"], "%.1f"), f(r["prom_period_err"], "%.4f"), f(r["prom_next_err"], "%.4f")))
PY
  done
  /usr/bin/python3 - "$work" "$((SECONDS - t0))" <<'PY'
import glob, json, sys
rs = [json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/*.json"))]
n = len(rs)
pct = lambda a, b: 100.0 * a / b if b else 0.0
mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
rec = [r for r in rs if r["recurring"]]
prom = [r for r in rs if r["prom_period_err"] is not None]
out = [
    ("runs", n, "runs"),
    ("culprit_first", pct(sum(r["first"] for r in rs), n), "%"),
    ("culprit_top3", pct(sum(r["top3"] for r in rs), n), "%"),
    ("surge_events_culprit_first", pct(sum(r["surge_first"] for r in rs), sum(r["surge_events"] for r in rs)), "%"),
    ("unrelated_blamed", pct(sum(r["blamed"] for r in rs), sum(r["random_events"] for r in rs)), "%"),
    ("unrelated_blamed_outside_own_bursts", pct(sum(r["blamed"] - r["blamed_in_own_burst"] for r in rs),
                                                sum(r["random_events"] - r["random_in_own_burst"] for r in rs)), "%"),
    ("recurring", pct(len(rec), n), "%"),
    ("period_within_1pct", pct(sum(r["period_err"] <= 0.01 for r in rec), n), "%"),
    ("next_within_2pct", pct(sum(r["next_err"] <= 0.02 for r in rec), n), "%"),
    ("period_err_mean", 100 * mean([r["period_err"] for r in rec]), "%"),
    ("next_err_mean", 100 * mean([r["next_err"] for r in rec]), "%"),
    ("next_err_mean_s", mean([r["next_err"] * r["period"] for r in rec]), "s"),
    ("answer_after_3rd_surge_mean", mean([r["answer_s"] for r in rs if r["answer_s"] is not None]), "s"),
    ("prometheus_alert_after_3rd_surge_mean", mean([r["alert_s"] for r in rs if r["alert_s"] is not None]), "s"),
    ("prometheus_period_within_1pct", pct(sum(r["prom_period_err"] <= 0.01 for r in prom), n), "%"),
    ("prometheus_next_within_2pct", pct(sum(r["prom_next_err"] <= 0.02 for r in prom), n), "%"),
    ("correlate_ms", mean([r["correlate_ms"] for r in rs]), "ms"),
    ("incidents_ms", mean([r["incidents_ms"] for r in rs]), "ms"),
    ("wall", float(sys.argv[2]), "s"),
]
for name, v, unit in out:
    print("EVAL drivers_end_to_end_%s %s %s" % (name, "%.0f" % v if unit in ("runs", "ms") or name == "wall" else "%.2f" % v, unit))
PY
  exit 0
fi

# ---- one run: eval_drivers.sh --run SEED RESULT.json
SEED=$2
RESULT=$3
source "$(dirname "$0")/../integration/lib.sh"
PY=/usr/bin/python3 # Debian's python3-grpcio/python3-protobuf live there, not in pyenv
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
onyx_sim_prereqs
export SNMP_PERSISTENT_DIR=$T/snmp-persist MIBS=""
mkdir -p "$SNMP_PERSISTENT_DIR"

# The fabric of this seed: scenario files (first surge about 45 s from now, at a random
# phase of its period: the simulators and the collector start meanwhile), the culprit,
# the host's offset and its random slowdowns' seed.
NOW=$(date +%s)
$PY - "$SEED" "$NOW" "$T" >"$T/run.env" <<'PY'
import json, random, sys
seed, now, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random("drivers-%d" % seed)
boot = now - 100
period = round(rng.uniform(10, 15), 1)
culprit_tor = rng.choice(["tor1", "tor2"])
port = rng.randint(1, 32)
phase = 100 + 45 + round(rng.uniform(0, period), 2)
for tor in ("tor1", "tor2"):
    sc = {"ports": 32, "boot_epoch_s": boot, "clock_offset_ms": round(rng.uniform(-400, 400)),
          "busy": {"seed": rng.randint(1, 1 << 30)},
          "congestion": {"port": port, "tc": 3, "period_s": period, "duration_s": 2.0,
                         "phase_s": phase if tor == culprit_tor else 1e9}}
    with open("%s/%s.json" % (d, tor), "w") as f:
        json.dump(sc, f)
print("BOOT=%d PHASE=%s PERIOD=%s CTOR=%s CPORT=Eth1/%d HOST_OFF=%d GEN_SEED=%d"
      % (boot, phase, period, culprit_tor, port, round(rng.uniform(-150, 150)), rng.randint(1, 1 << 30)))
PY
# shellcheck disable=SC1091
source "$T/run.env"
chmod 0644 "$T/tor1.json" "$T/tor2.json"
BUSY=$(cd "$FS_SOURCE_DIR/tests/sim" && $PY -c 'import sys; from scenario import Scenario; s = Scenario(sys.argv[1]); print(int(s.busy_port(int(sys.argv[2]))[0] > 0))' "$T/$CTOR.json" "${CPORT#Eth1/}")
echo "# seed $SEED: culprit $CTOR $CPORT (busy $BUSY), period $PERIOD s, host offset $HOST_OFF ms; $(jq -c '{clock_offset_ms}' "$T/tor1.json") $(jq -c '{clock_offset_ms}' "$T/tor2.json")"

make_gnmi_certs
for tor in tor1 tor2; do start_tor "$tor" "$T/$tor.json"; done
ok "simulators: 2 TORs x (SNMP, ONYX CLI, gNMI)"

HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
(umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/he.token")
{
  cat <<EOF
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/he.token, memory_limit: 64MiB, retention: 1h }
targets:
EOF
  for tor in tor1 tor2; do tor_target_yaml "$tor"; done
} >"$T/fs.yaml"
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
wait_for 60 "tor1 and tor2 up over snmp, cli and gnmi" tors_up "$URL" tor1 tor2
T_UP=$(date +%s.%N)
start_prometheus "$HTTP"
ok "fabricscope polls both TORs over SNMP, the ONYX CLI and gNMI; Prometheus scrapes it"

# surge_at K: start of the scenario's surge K (unix seconds); the first K after T_UP.
surge_at() { $PY -c 'import sys; b, p, P, k = map(float, sys.argv[1:]); print("%.3f" % (b + p + k * P))' "$BOOT" "$PHASE" "$PERIOD" "$1"; }
K_UP=$($PY -c 'import math, sys; b, p, P, t = map(float, sys.argv[1:]); print(max(0, math.ceil((t - b - p) / P)))' "$BOOT" "$PHASE" "$PERIOD" "$T_UP")
FIRST_K=$($PY -c 'import math,sys,time; b,p,P=map(float,sys.argv[1:4]); print(max(0, math.ceil((time.time() + 8 - b - p) / P)))' "$BOOT" "$PHASE" "$PERIOD")
THIRD_END=$($PY -c 'import sys; print("%.3f" % (float(sys.argv[1]) + 2.0))' "$(surge_at $((K_UP + 2)))")
$PY "$FS_SOURCE_DIR/tests/integration/acceptance_gen.py" --url "$URL" --token-file "$T/he.token" \
  --boot "$BOOT" --phase "$PHASE" --period "$PERIOD" --duration 2 --count "$SURGES" \
  --first-k "$FIRST_K" --host-offset-ms "$HOST_OFF" --seed "$GEN_SEED" --host gpu-node-1 \
  --out "$T/gen.json" >"$T/gen.log" 2>&1 &
GEN=$!
track "$GEN"

# Time to the answer: /incidents polled from the third surge's end (the first moment three
# occurrences exist) until it names the culprit in a recurring group.
recurring_named() {
  curl -fsS "$URL/api/v1/incidents" >"$T/inc-poll.json" &&
    jq -e --arg t "$CTOR" --arg i "$CPORT" \
      '[.data.recurring[] | select(any(.series[]; .target == $t and .interface == $i))] | length > 0' \
      "$T/inc-poll.json" >/dev/null
}
ANSWER="" GEN_END=""
while :; do
  running=1
  kill -0 "$GEN" 2>/dev/null || running=0
  if [ -z "$ANSWER" ] && $PY -c 'import sys, time; sys.exit(0 if time.time() >= float(sys.argv[1]) else 1)' "$THIRD_END" &&
    recurring_named; then
    ANSWER=$($PY -c 'import sys, time; print("%.2f" % (time.time() - float(sys.argv[1])))' "$THIRD_END")
  fi
  # Without an answer, the polling goes on for up to 60 s after the host side ended.
  if [ $running = 0 ]; then
    [ -z "$ANSWER" ] || break
    [ -n "$GEN_END" ] || GEN_END=$SECONDS
    [ $((SECONDS - GEN_END)) -lt 60 ] || break
  fi
  sleep 0.5
done
wait "$GEN" || fail "host generator: $(cat "$T/gen.log")"
ok "host side done ($SURGES surges); answer ${ANSWER:-none} s after the third surge"

# The answers at the end, timed.
T0=$($PY -c 'import json,sys; print("%.6f" % (json.load(open(sys.argv[1]))["start"] - 1))' "$T/gen.json")
t1=$(date +%s%N)
curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "start=$T0" --data-urlencode "kind=nccl" \
  --data-urlencode "slow=2x" --data-urlencode "limit=1000" >"$T/corr.json" || fail "correlate"
t2=$(date +%s%N)
curl -fsS "$URL/api/v1/incidents" >"$T/inc.json" || fail "incidents"
t3=$(date +%s%N)

# The alerting path through Prometheus: the incident metrics are refreshed every 30 s (and
# by each /incidents request); waited for up to 40 s after the run.
prom_has_next() {
  prom_query "fabricscope_incident_next_expected_timestamp_seconds{target=\"$CTOR\",interface=\"$CPORT\"}" >"$T/prom-next.json" &&
    jq -e '.data.result | length > 0' "$T/prom-next.json" >/dev/null
}
for _ in $(seq 400); do prom_has_next && break; sleep 0.1; done
prom_query "fabricscope_incident_period_seconds{target=\"$CTOR\",interface=\"$CPORT\"}" >"$T/prom-period.json"
curl -fsS --get "http://127.0.0.1:$PROM_PORT/api/v1/query_range" \
  --data-urlencode "query=min(fabricscope_incident_next_expected_timestamp_seconds{target=\"$CTOR\",interface=\"$CPORT\"})" \
  --data-urlencode "start=${T_UP%.*}" --data-urlencode "end=$(date +%s)" --data-urlencode "step=1" >"$T/prom-range.json"

$PY - "$T" "$SEED" "$CTOR" "$CPORT" "$BUSY" "$BOOT" "$PHASE" "$PERIOD" "$THIRD_END" "${ANSWER:-}" \
  "$(((t2 - t1) / 1000000))" "$(((t3 - t2) / 1000000))" "$FS_SOURCE_DIR" "$T/$CTOR.json" >"$RESULT" <<'PY'
import json, math, sys
d = sys.argv[1]
seed, ctor, cport, busy = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1"
boot, phase, period, third_end = map(float, sys.argv[6:10])
answer = float(sys.argv[10]) if sys.argv[10] else None
gen = json.load(open(d + "/gen.json"))
corr = json.load(open(d + "/corr.json"))["data"]
inc = json.load(open(d + "/inc.json"))["data"]
cul = lambda r: r.get("target") == ctor and r.get("interface") == cport
events = corr["events"]
def find(s):
    m = [e for e in events if abs(e["start_ns"] - s["start_ns"]) <= 5_000_000]
    return m[0] if m else None
def blamed(s):
    e = find(s)
    return bool(e and e["suspects"]) and cul(e["suspects"][0])
summ = corr["summary"]
surge_at = lambda k: boot + phase + k * period
def grid_err(t):
    """Distance of t from the nearest scenario surge start, as a fraction of the period."""
    k = round((t - boot - phase) / period)
    return abs(t - surge_at(k)) / period
# The culprit port's own busy background (scenario.py): a bursty port has random incast
# bursts of its own; a random slow event during one of them finds the port really
# congested, so those are counted apart.
sys.path.insert(0, sys.argv[13] + "/tests/sim")
from scenario import Scenario
scen = Scenario(sys.argv[14])
pnum = int(cport.split("/")[1])
def own_burst(s):
    a, b = s["start_ns"] / 1e9 - boot, s["end_ns"] / 1e9 - boot
    return any(scen.busy_in_burst(pnum, a + x * (b - a + 2.0) - 1.0) for x in (0, 0.25, 0.5, 0.75, 1))
def edge_dist(s):
    """Seconds from the nearest edge of any scenario surge, the played ones and the
    unplayed ones before them (the switch surges on its schedule all along)."""
    t = s["start_ns"] / 1e9
    k = round((t - boot - phase) / period)
    return min(min(abs(t - surge_at(j)), abs(t - surge_at(j) - 2.0)) for j in (k - 1, k, k + 1))
# The host side keeps its random slowdowns 2.5 s from the surges it plays; one that falls
# within 2.5 s of an unplayed surge before them (the generator starts up to a period before
# its first) is not unrelated to the culprit: left out.
rand_all = [s for s in gen["slow"] if s["why"] == "random"]
rand = [s for s in rand_all if edge_dist(s) >= 2.5]
surge = [s for s in gen["slow"] if s["why"] == "surge"]
rec = [g for g in inc["recurring"] if any(cul(s) for s in g["series"])]
period_err = next_err = None
if rec:
    g = rec[0]
    period_err = abs(g["period_s"] - period) / period
    # The next surge after the last occurrence the group saw.
    k = math.floor((float(g["last"]) - boot - phase) / period + 0.5) + 1
    next_err = abs(float(g["next_expected"]) - surge_at(k)) / period
def prom_val(name):
    r = json.load(open(d + "/" + name))["data"]["result"]
    return [float(x["value"][1]) for x in r]
pp, pn = prom_val("prom-period.json"), prom_val("prom-next.json")
prom_period_err = min(abs(p - period) / period for p in pp) if pp else None
prom_next_err = min(grid_err(t) for t in pn) if pn else None
rng = json.load(open(d + "/prom-range.json"))["data"]["result"]
alert_s = None
if rng and rng[0]["values"]:
    alert_s = float(rng[0]["values"][0][0]) - third_end
out = {
    "seed": seed, "culprit": "%s:%s" % (ctor, cport), "period": period, "busy": busy,
    "first": int(bool(summ) and cul(summ[0])), "top3": int(any(cul(s) for s in summ[:3])),
    "surge_events": len(surge), "surge_first": sum(blamed(s) for s in surge),
    "random_events": len(rand), "blamed": sum(blamed(s) for s in rand),
    "random_in_own_burst": sum(own_burst(s) for s in rand),
    "blamed_in_own_burst": sum(blamed(s) and own_burst(s) for s in rand),
    "blamed_edge_dist_s": sorted(round(edge_dist(s), 2) for s in rand if blamed(s) and not own_burst(s)),
    "random_near_unplayed": len(rand_all) - len(rand),
    "missing_events": sum(find(s) is None for s in gen["slow"]),
    "recurring": int(bool(rec)), "recurring_rank": inc["recurring"].index(rec[0]) if rec else None,
    "period_err": period_err, "next_err": next_err, "answer_s": answer, "alert_s": alert_s,
    "prom_period_err": prom_period_err, "prom_next_err": prom_next_err,
    "correlate_ms": int(sys.argv[11]), "incidents_ms": int(sys.argv[12]),
    "summary_top": summ[0]["text"] if summ else None,
    "recurring_text": rec[0]["text"] if rec else None,
}
json.dump(out, sys.stdout)
PY
ok "scored: $(cat "$RESULT")"

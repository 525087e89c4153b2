#!/usr/bin/env bash
# The analysis through the real binary: fabricscope polls the simulated switch (real
# snmpd + onyx-snmp-sim) over SNMP while a host-event generator (host_event_gen.py) makes
# Eth1/49 tc 3 congest every 8 s for 2 s and posts AllReduce ranges that stretch during
# the surges, from a clock 40 ms behind the collector's (measured with /api/v1/time).
# Then: /api/v1/correlate ranks tor1 Eth1/49 first for the surge-time slow events and
# not for the random ones, the events sit on the collector's axis within 5 ms,
# /api/v1/incidents finds the period and, given the slow AllReduces, puts that group
# first with the slow events in its occurrences, /api/v1/export/trace is valid trace JSON,
# `fabricscope import-perf` posts perf retransmits that land in a surge window matched
# to a flow rule, and bad posts (no token configured, wrong token, oversized,
# malformed, half-valid) each get their error and store nothing; `fabricscope correlate`
# prints the table naming the culprit.
# Prints BENCH correlate_time_to_culprit_s (from the last surge's end until both
# /correlate for that window and /incidents name tor1 Eth1/49).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$PY" ] || fail "needs /usr/bin/python3"
start_snmp_sim --cong-port 49 --cong-tc 3
HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
export SNMP_PERSISTENT_DIR=$T/snmp/persist MIBS=""
write_config() { # $1: extra top-level YAML
  cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
$1
flow_rules:
  - { name: nccl-sockets, protocol: tcp, dst_ports: 50000-50999 }
targets:
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: 1s,
            timeout: 500ms, retries: 1, max_repetitions: 50 }
EOF
}
write_config ""
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20

# post FILE [TOKEN]: prints the HTTP status, the body goes to $T/post.out.
post() {
  local auth=()
  [ -n "${2:-}" ] && auth=(-H "Authorization: Bearer $2")
  curl -sS -o "$T/post.out" -w '%{http_code}' -X POST "${auth[@]}" \
    -H 'Content-Type: application/json' --data-binary @"$1" "$URL/api/v1/host-events"
}
held() { curl -fsS "$URL/metrics" | awk '$1 == "fabricscope_host_events" {print $2}'; }
NOW_NS=$(date +%s%N)
cat >"$T/good.json" <<EOF
{"host_offset_ns": 0, "host_offset_uncertainty_ns": 1000,
 "events": [{"host": "h1", "kind": "nccl.kernel", "name": "AllReduce", "start": $NOW_NS, "end": $((NOW_NS + 1000000))}]}
EOF

# No token configured: 403, saying so.
[ "$(post "$T/good.json" anything)" = 403 ] || fail "post without a configured token: $(cat "$T/post.out")"
grep -q 'no bearer token is configured' "$T/post.out" || fail "403 does not say why: $(cat "$T/post.out")"
# The token comes in with a reload.
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; echo "$TOKEN" >"$T/he.token")
write_config "host_events: { bearer_token_file: $T/he.token, memory_limit: 16MiB, retention: 1h }
clock: { max_offset: 1ms }"
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config with host_events refused"
hup
# Wrong and missing token: 401 with WWW-Authenticate.
[ "$(post "$T/good.json" wrong-token)" = 401 ] || fail "wrong token: $(cat "$T/post.out")"
curl -sS -D "$T/h401" -o /dev/null -X POST --data-binary @"$T/good.json" "$URL/api/v1/host-events"
grep -qi '^HTTP/1.1 401' "$T/h401" && grep -qi '^WWW-Authenticate: Bearer' "$T/h401" ||
  fail "missing token: $(cat "$T/h401")"
# Oversized (refused from its Content-Length, before the body is read): 413.
head -c $((32 * 1024 * 1024 + 1)) /dev/zero >"$T/big.json"
[ "$(post "$T/big.json" "$TOKEN")" = 413 ] || fail "oversized post: $(cat "$T/post.out")"
# Malformed JSON: 400.
printf '{"host_offset_ns": 0, "events": [' >"$T/bad.json"
[ "$(post "$T/bad.json" "$TOKEN")" = 400 ] || fail "malformed post: $(cat "$T/post.out")"
# Half-valid: the second item is bad; the error names it, and the first is not stored.
cat >"$T/half.json" <<EOF
{"host_offset_ns": 0, "host_offset_uncertainty_ns": 1000,
 "events": [{"host": "h1", "kind": "nccl.kernel", "name": "AllReduce", "start": $NOW_NS, "end": $((NOW_NS + 1000))},
            {"host": "h1", "kind": "nccl.kernel", "name": "AllReduce", "start": $NOW_NS, "end": $((NOW_NS - 1))}]}
EOF
[ "$(post "$T/half.json" "$TOKEN")" = 400 ] || fail "half-valid post: $(cat "$T/post.out")"
grep -q 'events\[1\]' "$T/post.out" || fail "the bad item is not named: $(cat "$T/post.out")"
# Wrong method: 405 with Allow.
curl -sS -D "$T/h405" -o /dev/null "$URL/api/v1/host-events"
grep -qi '^HTTP/1.1 405' "$T/h405" && grep -qi '^Allow: POST' "$T/h405" || fail "GET host-events: $(cat "$T/h405")"
[ "$(held)" = 0 ] || fail "a refused post stored events: $(held)"
ok "bad posts: 403 (no token configured), 401, 413, 400 (malformed; half-valid names events[1]), 405; nothing stored"

# A per-host token beside the shared one: it posts for its host only (403 naming the
# item for another, nothing stored), and the memory its events hold is exported by name.
HTOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; echo "$HTOKEN" >"$T/h1.token")
write_config "host_events: { bearer_token_file: $T/he.token, memory_limit: 16MiB, retention: 1h,
  tokens: [ { name: gpu-h1, token_file: $T/h1.token, hosts: 'h1', memory_limit: 1MiB } ] }
clock: { max_offset: 1ms }"
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config with host_events.tokens refused"
hup
sed 's/"host": "h1"/"host": "h2"/' "$T/good.json" >"$T/h2.json"
[ "$(post "$T/h2.json" "$HTOKEN")" = 403 ] || fail "another host with gpu-h1's token: $(cat "$T/post.out")"
grep -q 'events\[0\].host: \\"h2\\" is not a host the token \\"gpu-h1\\" may post for' "$T/post.out" ||
  fail "403 does not name the item: $(cat "$T/post.out")"
[ "$(held)" = 0 ] || fail "a refused post stored events: $(held)"
[ "$(post "$T/good.json" "$HTOKEN")" = 200 ] || fail "gpu-h1's own host: $(cat "$T/post.out")"
curl -fsS "$URL/metrics" | grep -qE '^fabricscope_host_events_poster_events\{poster="gpu-h1"\} 1$' ||
  fail "no fabricscope_host_events_poster_events for gpu-h1: $(curl -fsS "$URL/metrics" | grep poster)"
ok "a per-host token: 403 for another host (named, nothing stored), 200 for its own, exported by name"

# The surges and the host events.
"$PY" "$FS_SOURCE_DIR/tests/integration/host_event_gen.py" --url "$URL" --token-file "$T/he.token" \
  --sim-pid "$SIM_PID" --period 8 --surge 2 --first 4 --count 8 --host-offset-ms -40 \
  --out "$T/gen.json" >"$T/gen.log" 2>&1 || fail "generator: $(cat "$T/gen.log")"
# surge K [0|1]: start (0) or end (1) of surge K (-1: the last) in unix seconds.
surge() { "$PY" -c 'import json,sys; print("%.6f" % json.load(open(sys.argv[1]))["surges"][int(sys.argv[2])][int(sys.argv[3])])' "$T/gen.json" "$1" "$2"; }
LAST_START=$(surge -1 0)
LAST_END=$(surge -1 1)

# Time to the culprit: from the last surge's end until /correlate (that window) and
# /incidents both name tor1 Eth1/49.
names_culprit() { # $1: JSON file, $2: python expression over d (the data) that yields series refs
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
refs = eval(sys.argv[2])
sys.exit(0 if any(r["target"] == "tor1" and r["interface"] == "Eth1/49" for r in refs) else 1)
PYEOF
}
culprit_found() {
  curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "window=$LAST_START,$LAST_END" >"$T/cw.json" &&
    names_culprit "$T/cw.json" '[e["suspects"][0] for e in d["events"] if e["suspects"]]' &&
    curl -fsS "$URL/api/v1/incidents" >"$T/inc.json" &&
    names_culprit "$T/inc.json" '[s for e in d["episodes"][-1:] for s in e["series"][:1]]'
}
wait_for 20 "/correlate and /incidents name tor1 Eth1/49 after the last surge" culprit_found
TTC=$("$PY" -c 'import sys,time; print("%.2f" % (time.time() - float(sys.argv[1])))' "$LAST_END")
echo "BENCH correlate_time_to_culprit_s $TTC s"
ok "both name tor1 Eth1/49 ${TTC}s after the last surge ended"

# Every slow event of the run, explained.
T0=$(surge 0 0 | awk '{printf "%.6f", $1 - 5}')
curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "start=$T0" --data-urlencode "kind=nccl" \
  --data-urlencode "slow=2x" --data-urlencode "limit=1000" >"$T/corr.json" || fail "correlate"
"$PY" - "$T/gen.json" "$T/corr.json" <<'PYEOF' || fail "correlate answer: $(head -c 1500 "$T/corr.json")"
import json, sys
gen = json.load(open(sys.argv[1]))
d = json.load(open(sys.argv[2]))["data"]
events = d["events"]
# Each slow event the generator made is listed, on the collector's axis within 5 ms.
def find(s):
    m = [e for e in events if abs(e["start_ns"] - s["start_ns"]) <= 5_000_000]
    return m[0] if m else None
surge = [s for s in gen["slow"] if s["why"] == "surge"]
rand = [s for s in gen["slow"] if s["why"] == "random"]
assert len(surge) >= 40, "too few surge events generated: %d" % len(surge)
missing = [s for s in gen["slow"] if find(s) is None]
assert not missing, "%d slow events not listed (or misplaced by > 5 ms), e.g. %s" % (len(missing), missing[:2])
def blamed(e):
    return bool(e["suspects"]) and e["suspects"][0]["target"] == "tor1" and e["suspects"][0]["interface"] == "Eth1/49"
hits = sum(blamed(find(s)) for s in surge)
assert hits >= 0.9 * len(surge), "tor1 Eth1/49 first for only %d of %d surge-time slow events" % (hits, len(surge))
wrong = sum(blamed(find(s)) for s in rand)
assert wrong <= 0.1 * max(1, len(rand)), "tor1 Eth1/49 blamed for %d of %d random slow events" % (wrong, len(rand))
# The host offset the generator measured and posted: -40 ms within 5 ms.
offs = [e["host_offset_ns"] for e in events]
assert all(abs(o + 40_000_000) <= 5_000_000 for o in offs), "host offsets %s" % offs[:5]
top = d["summary"][0]
assert top["target"] == "tor1" and top["interface"] == "Eth1/49", "summary: %s" % top
print("surge-time slow events: %d, Eth1/49 first for %d; random slow events: %d, blamed %d; summary: %s"
      % (len(surge), hits, len(rand), wrong, top["text"]))
PYEOF
ok "/correlate ranks tor1 Eth1/49 first for the surge-time slow events, not the random ones; host offset -40 ms +- 5 ms"

# The slow rank's path: with the link from its host (the generator's gpu-node-3) to
# tor1 Eth1/49 stated in the configuration, each slow window has one slow rank and one
# port on its path, and its suspects say whether they are on it.
write_config "host_events: { bearer_token_file: $T/he.token, memory_limit: 16MiB, retention: 1h }
clock: { max_offset: 1ms }
topology:
  links:
    - {a: {node: tor1, port: Eth1/49}, b: {node: gpu-node-3.example.net, port: eth0}}"
hup
curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "start=$T0" --data-urlencode "kind=nccl" \
  --data-urlencode "slow=2x" --data-urlencode "limit=1000" >"$T/corr_path.json" || fail "correlate"
"$PY" - "$T/corr_path.json" <<'PYEOF' || fail "correlate with the path: $(head -c 1500 "$T/corr_path.json")"
import json, sys
events = json.load(open(sys.argv[1]))["data"]["events"]
assert events and all(e["slow_ranks"] == 1 and e["path_ports"] == 1 for e in events), \
    [(e["slow_ranks"], e["path_ports"]) for e in events[:5]]
on = off = 0
for e in events:
    for s in e["suspects"]:
        want = s["target"] == "tor1" and s["interface"] == "Eth1/49"
        assert s["on_path"] == want, "on_path %s for %s %s" % (s["on_path"], s["target"], s["interface"])
        on += want
        off += not want
assert on > 0, "no suspect on the path"
print("windows %d, suspects on the path %d, off it %d" % (len(events), on, off))
PYEOF
ok "with the slow rank's link known, suspects on its path are marked so (tor1 Eth1/49), others not"

# The same answer as a table, for a terminal (`fabricscope correlate`).
"$FABRICSCOPE" correlate --url "$URL" --start "$T0" --slow 2x >"$T/table.txt" 2>&1 ||
  fail "fabricscope correlate: $(cat "$T/table.txt")"
grep -q 'tor1 Eth1/49' "$T/table.txt" || fail "the table does not name tor1 Eth1/49: $(head -20 "$T/table.txt")"
ok "fabricscope correlate prints the table naming tor1 Eth1/49"

# Incidents: the period (8 s, within 1 s) and the next surge.
curl -fsS "$URL/api/v1/incidents" >"$T/inc.json" || fail "incidents"
"$PY" - "$T/gen.json" "$T/inc.json" <<'PYEOF' || fail "incidents answer: $(head -c 1500 "$T/inc.json")"
import json, sys
gen = json.load(open(sys.argv[1]))
d = json.load(open(sys.argv[2]))["data"]
rec = [g for g in d["recurring"] if any(s["target"] == "tor1" and s["interface"] == "Eth1/49" for s in g["series"])]
assert rec, "no recurring group on tor1 Eth1/49: %s" % d["recurring"]
g = rec[0]
assert abs(g["period_s"] - 8.0) <= 1.0, "period %s" % g["period_s"]
# The generator stopped the surges, but had it gone on the next would start one period
# after the last one began.
nxt = gen["surges"][-1][0] + 8.0
assert abs(g["next_expected"] - nxt) <= 1.5, "next expected %s, the pattern says %s" % (g["next_expected"], nxt)
print("recurring: %s" % g["text"])
PYEOF
ok "/incidents: a recurring incident on tor1 Eth1/49, period 8 s within 1 s, next one predicted"

# Host evidence: with the imported AllReduces (slow at 2x their median), the culprit's
# group comes first and says that slow ones fell in its occurrences.
curl -fsS --get "$URL/api/v1/incidents" --data-urlencode "slow=2x" >"$T/inc-host.json" || fail "incidents slow=2x"
"$PY" - "$T/inc-host.json" <<'PYEOF' || fail "incidents host evidence: $(head -c 1500 "$T/inc-host.json")"
import json, sys
d = json.load(open(sys.argv[1]))["data"]
h = d["host_events"]
assert h["kind"] == "nccl" and h["slow"] == "2x" and h["slow_events"] > 0, h
g = d["recurring"][0]
s = g["series"][0]
assert s["target"] == "tor1" and s["interface"] == "Eth1/49", "first group: %s" % g["text"]
hs = g["host_slow"]
assert hs["occurrences"] >= 0.5 * g["occurrences"] and hs["events"] > 0, g
print("%s (%d slow events in all)" % (g["text"], h["slow_events"]))
PYEOF
ok "/incidents with host events: tor1 Eth1/49's group first, with slow AllReduces in its occurrences"

# Perf retransmits of a TCP stream under a flow rule, inside the third surge.
S3=$(surge 2 0)
E3=$(surge 2 1)
"$PY" - "$S3" >"$T/perf.txt" <<'PYEOF'
import sys, time
s3 = float(sys.argv[1])
mono = 5000.0  # the recording's monotonic reference, matched to s3 by the header
print("# ========")
print("# clockid: monotonic (1)")
print("# reference time: %s = %.6f (TOD) = %.9f (monotonic)"
      % (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s3)), s3, mono))
print("# ========")
print("#")
for k, dt in enumerate((0.5, 1.0, 1.5)):
    print("          nccl-proxy  4242 [003]  %.6f: tcp:tcp_retransmit_skb: family=AF_INET "
          "sport=%d dport=50123 saddr=10.0.0.3 daddr=10.0.0.7 saddrv6=::ffff:10.0.0.3 "
          "daddrv6=::ffff:10.0.0.7 state=TCP_ESTABLISHED" % (mono + dt, 40100 + k))
PYEOF
FABRICSCOPE_TOKEN=$TOKEN "$FABRICSCOPE" import-perf --url "$URL" --host gpu-node-3 <"$T/perf.txt" \
  >"$T/import.log" 2>&1 || fail "import-perf: $(cat "$T/import.log")"
curl -fsS --get "$URL/api/v1/correlate" --data-urlencode "window=$S3,$E3" >"$T/cw3.json" || fail "correlate window"
"$PY" - "$T/cw3.json" "$S3" "$E3" <<'PYEOF' || fail "retransmits: $(head -c 2000 "$T/cw3.json")"
import json, sys
d = json.load(open(sys.argv[1]))["data"]
s3, e3 = float(sys.argv[2]), float(sys.argv[3])
ev = d["events"][0]
assert ev["suspects"] and ev["suspects"][0]["interface"] == "Eth1/49", ev["suspects"][:1]
rt = [o for o in ev["other_host_events"] if o["kind"] == "perf.tcp_retransmit_skb"]
assert len(rt) == 3, "retransmits in the window: %s" % ev["other_host_events"]
for o in rt:
    assert s3 <= o["start"] <= e3, "retransmit at %s outside the surge [%s, %s]" % (o["start"], s3, e3)
    assert "nccl-sockets" in o.get("flow_rules", []), "not matched to the flow rule: %s" % o
PYEOF
ok "import-perf: the retransmits land inside the surge window, matched to flow rule nccl-sockets"

# Perfetto export of the third surge: valid trace-event JSON with counters and slices.
curl -fsS --get "$URL/api/v1/export/trace" --data-urlencode "start=$(echo "$S3" | awk '{printf "%.6f", $1 - 2}')" \
  --data-urlencode "end=$(echo "$E3" | awk '{printf "%.6f", $1 + 2}')" >"$T/trace.json" || fail "export/trace"
"$PY" - "$T/trace.json" <<'PYEOF' || fail "trace: $(head -c 1500 "$T/trace.json")"
import json, sys
t = json.load(open(sys.argv[1]))
evs = t["traceEvents"]
assert any(e["ph"] == "X" and e["name"] == "AllReduce" for e in evs), "no AllReduce slices"
assert any(e["ph"] == "C" for e in evs), "no counter tracks"
assert any(e["ph"] == "i" and "retransmit" in e["name"] for e in evs), "no retransmit instants"
PYEOF
ok "/api/v1/export/trace of a surge: valid JSON with AllReduce slices, counters and retransmits"

# The self metrics.
curl -fsS "$URL/metrics" >"$T/m.txt"
grep -Eq '^fabricscope_host_events [1-9]' "$T/m.txt" || fail "fabricscope_host_events"
# Two bad bodies, and the post for another host with gpu-h1's token.
grep -Eq '^fabricscope_host_events_rejected_posts_total 3$' "$T/m.txt" ||
  fail "rejected posts: $(grep rejected "$T/m.txt")"
grep -q '^fabricscope_http_requests_total{handler="host_events",code="413"} 1' "$T/m.txt" || fail "413 not counted"
grep -q '^fabricscope_incident_next_expected_timestamp_seconds{target="tor1",interface="Eth1/49"' "$T/m.txt" ||
  fail "no next-incident metric: $(grep incident "$T/m.txt")"
ok "/metrics: host-event and next-incident metrics"

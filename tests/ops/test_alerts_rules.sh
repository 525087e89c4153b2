#!/usr/bin/env bash
# config/alerts.yml: valid for Prometheus (promtool check rules), each rule unit-tested
# (promtool test rules tests/alerts/alerts.test.yml, which shows every alert firing and
# staying silent), every alert of the file tested there, and every metric it names in
# the catalogue (schemas/metrics.json).
source "$(dirname "$0")/../integration/lib.sh"
RULES=$FS_SOURCE_DIR/config/alerts.yml
TESTS=$FS_SOURCE_DIR/tests/alerts/alerts.test.yml

out=$(promtool check rules "$RULES" 2>&1) || fail "promtool check rules: $out"
ok "promtool check rules: $(grep -o '[0-9]* rules found' <<<"$out")"

out=$(cd "$(dirname "$TESTS")" && promtool test rules "$(basename "$TESTS")" 2>&1) ||
  fail "promtool test rules: $out"
ok "promtool test rules: every case passes"

# Each alert of the file has a case in which it fires (a non-empty exp_alerts).
/usr/bin/python3 - "$RULES" "$TESTS" "$FS_SOURCE_DIR/schemas/metrics.json" <<'PY' || fail "alerts vs tests/catalogue"
import json, re, sys
import yaml
rules = yaml.safe_load(open(sys.argv[1]))
tests = yaml.safe_load(open(sys.argv[2]))
catalogue = {m["name"] for m in json.load(open(sys.argv[3]))["metrics"]}
alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
fired = {a["alertname"] for t in tests["tests"] for a in t.get("alert_rule_test", []) if a.get("exp_alerts")}
problems = []
for r in alerts:
    if r["alert"] not in fired:
        problems.append(f"{r['alert']}: no test case in which it fires")
    for name in set(re.findall(r"\b(fabric(?:scope)?_[a-z0-9_]+)\b", r["expr"])):
        if name in catalogue:
            continue
        problems.append(f"{r['alert']}: {name} is not a catalogue metric")
want = {"FabricEcnSurge", "FabricNcclFlowDrops", "FabricPfcStorm", "FabricscopeTargetDown",
        "FabricscopeClockOffsetLarge", "FabricIncidentDue", "FabricscopeRemoteWriteBehind"}
missing = want - {r["alert"] for r in alerts}
if missing:
    problems.append(f"alerts missing: {sorted(missing)}")
for p in problems:
    print("problem:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
ok "every alert has a firing test; every metric is a catalogue metric"

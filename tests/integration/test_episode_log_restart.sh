#!/usr/bin/env bash
# The episode log outlives a restart (state_dir): fabricscope polls the simulated switch
# (real snmpd + onyx-snmp-sim) over SNMP while the test makes Eth1/49 tc 3 congest 4
# times (2 s every 5 s); /api/v1/incidents lists the surges. The daemon is stopped
# (SIGTERM: the log is written at shutdown) and started again on the same state_dir:
# before any new surge, and before its first refresh, /api/v1/incidents lists the same
# surges with the same starts, ends and kinds. A snapshot with one damaged
# byte is refused at start (named in the log, moved to episode-log.bad), and the daemon
# starts empty and serves. A state_dir that is a file is logged and the daemon runs.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
start_snmp_sim --cong-port 49 --cong-tc 3
HTTP=$(free_tcp_port)
URL=http://127.0.0.1:$HTTP
STATE=$T/state
write_config() { # $1: state_dir
  cat >"$T/fs.yaml" <<YAML
listen: 127.0.0.1:$HTTP
state_dir: $1
targets:
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, version: 2c, community_file: $SNMP_COMMUNITY_FILE, interval: 1s,
            timeout: 500ms, retries: 1, max_repetitions: 50 }
YAML
}
write_config "$STATE"
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config with state_dir refused"
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
[ -d "$STATE" ] && [ "$(stat -c %a "$STATE")" = 700 ] || fail "state_dir not created 0700"
grep -q "episode log: none in $STATE/episode-log yet" "$T/fabricscope.log" ||
  fail "no word on the empty state: $(cat "$T/fabricscope.log")"

# The surges (the stimulus: 2 s on, 3 s off, after 4 s of quiet baseline).
sleep 4
for _ in 1 2 3 4; do
  kill -USR2 "$SIM_PID"; sleep 2; kill -USR2 "$SIM_PID"; sleep 3
done

# eth49 FILE: the Eth1/49 episodes of an /api/v1/incidents answer, one per line: start,
# end, kinds.
eth49() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
for e in d["episodes"]:
    if any(s["target"] == "tor1" and s["interface"] == "Eth1/49" for s in e["series"]):
        print("%.6f %.6f %s" % (e["start"], e["end"], "+".join(e["kinds"])))
PYEOF
}
T_START=$(($(date +%s) - 60))
incidents() { curl -fsS "$URL/api/v1/incidents?start=$T_START&limit=1000" >"$1"; }
four_surges() { incidents "$T/before.json" && [ "$(eth49 "$T/before.json" | wc -l)" -ge 4 ]; }
wait_for 30 "/api/v1/incidents lists the 4 surges of Eth1/49" four_surges
eth49 "$T/before.json" >"$T/before.starts"
ok "before the restart: $(wc -l <"$T/before.starts") Eth1/49 episodes: $(cut -d' ' -f1 "$T/before.starts" | tr '\n' ' ')"

kill -TERM "$FS_PID"
wait_exit "$FS_PID" 20
[ -f "$STATE/episode-log" ] || fail "no episode-log written at shutdown"
[ "$(stat -c %a "$STATE/episode-log")" = 600 ] || fail "episode-log is not 0600"
ok "written at shutdown: $(stat -c %s "$STATE/episode-log") bytes"

# Started again on the same state: the episodes are there at once (no surge since, no
# refresh yet: the refresher waits 30 s before its first one).
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
grep -qE "episode log: [0-9]+ episodes of [0-9]+ series read from $STATE/episode-log" \
  "$T/fabricscope.log" || fail "restore not logged: $(cat "$T/fabricscope.log")"
incidents "$T/after.json" || fail "incidents after the restart"
eth49 "$T/after.json" >"$T/after.starts"
cmp -s "$T/before.starts" "$T/after.starts" ||
  fail "episodes changed in the restart: before $(cat "$T/before.starts"), after $(cat "$T/after.starts")"
ok "after the restart, before any refresh or surge: the same $(wc -l <"$T/after.starts") episodes (start, end, kinds)"
curl -fsS "$URL/metrics" | grep -qx 'fabricscope_episode_log_save_errors_total 0' ||
  fail "fabricscope_episode_log_save_errors_total 0 missing"
kill -TERM "$FS_PID"
wait_exit "$FS_PID" 20

# One damaged byte: refused, kept aside, the daemon starts empty and serves.
"$PY" - "$STATE/episode-log" <<'PYEOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x01
open(p, "wb").write(bytes(b))
PYEOF
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
grep -q "episode log $STATE/episode-log not read: checksum mismatch" "$T/fabricscope.log" ||
  fail "damaged file not named: $(cat "$T/fabricscope.log")"
[ -f "$STATE/episode-log.bad" ] && [ ! -e "$STATE/episode-log" ] || fail "damaged file not moved aside"
incidents "$T/damaged.json" || fail "incidents with a damaged log"
[ "$(eth49 "$T/damaged.json" | wc -l)" = 0 ] || fail "episodes from a damaged file"
ok "a damaged snapshot: refused with its reason, moved to episode-log.bad, started empty"
kill -TERM "$FS_PID"
wait_exit "$FS_PID" 20

# state_dir is a file: logged, the collector runs (and counts the failed write).
: >"$T/not-a-dir"
write_config "$T/not-a-dir"
start_fabricscope "$T/fs.yaml"
wait_http "$URL/healthz" 20
grep -q "episode log $T/not-a-dir/episode-log not read" "$T/fabricscope.log" ||
  fail "unusable state_dir not logged: $(cat "$T/fabricscope.log")"
ok "a state_dir that is a file: logged, the collector serves"

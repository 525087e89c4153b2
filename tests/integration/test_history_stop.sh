#!/usr/bin/env bash
# A stop is not held by a hung analysis.history. Two fabricscope instances, each with its
# own history: a TSDB that accepts connections and never answers (hung_tsdb.py), with
# remote_timeout 60 s. In P the prefetch (after the first refresh) is inside a read of it;
# in R a request is, and the prefetch waits for the request's read. At SIGTERM every
# history read is cancelled: each daemon exits 0 within a few seconds (before: it waited
# for remote_timeout, and the 15 s shutdown limit ended it with exit 1 before the episode
# log was written), R's request is answered from local data with the history's error
# stated, and the episode log is written to state_dir.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"

start_instance() { # NAME: a hung TSDB and a fabricscope reading it; sets NAME_FP, NAME_PID
  local n=$1 fp
  start_hung_tsdb "$T/$n.hung" "$T/$n.release"
  fp=$(free_tcp_port)
  cat >"$T/$n.yaml" <<EOF
listen: 127.0.0.1:$fp
state_dir: $T/$n.state
analysis:
  request_timeout: 90s
  history: { url: "http://127.0.0.1:$HUNG_PORT", remote_timeout: 60s }
targets: []
EOF
  "$FABRICSCOPE" -c "$T/$n.yaml" >"$T/$n.log" 2>&1 &
  track $!
  printf -v "${n}_PID" %s $!
  printf -v "${n}_FP" %s "$fp"
  wait_http "http://127.0.0.1:$fp/healthz" 60
}
conns() { [ -f "$T/$1.hung" ] && wc -l <"$T/$1.hung" || echo 0; }
read_begun() { [ "$(conns "$1")" -ge 1 ]; }
refreshed() { # the last refresh's time on instance $1 (port), empty before the first
  curl -fsS --max-time 10 "http://127.0.0.1:$1/metrics" |
    awk '$1 == "fabricscope_analysis_last_refresh_timestamp_seconds" {printf "%d", $2}'
}
has_refreshed() { [ -n "$(refreshed "$1")" ]; }
stop_instance() { # NAME: SIGTERM, then exit 0 within 5 s and the episode log written
  local n=$1 pid t0 rc=0 ts
  pid=${n}_PID
  pid=${!pid}
  t0=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  ts=$(echo "$(date +%s.%N) - $t0" | bc)
  [ "$rc" = 0 ] || fail "$n: exit $rc after SIGTERM (want 0): $(grep 'shutdown ended' "$T/$n.log" | cut -c1-300)"
  echo "$ts < 5" | bc | grep -q 1 ||
    fail "$n: the stop took ${ts} s with a hung history (want under 5 s; remote_timeout is 60 s)"
  [ -f "$T/$n.state/episode-log" ] || fail "$n: no episode log written at the stop"
  STOP_S=$ts
}

# Both start now: their first refresh comes 30 s later.
start_instance P
start_instance R
now=$(date +%s)

# R: a request reads the hung history (and holds it: R's prefetch will wait for it).
curl -sS -o "$T/r.json" -w '%{http_code}' --max-time 120 \
  "http://127.0.0.1:$R_FP/api/v1/incidents?start=$((now - 3600))&end=$now" >"$T/r.code" 2>&1 &
A=$!
wait_for 60 "R: the request reaches the history" read_begun R

# P: the prefetch's read, after the first refresh ended (its timestamp is there).
wait_for 45 "P: a read of the history after the first refresh" read_begun P
has_refreshed "$P_FP" || fail "P: no refresh ended: the read in progress is not the prefetch's"
ok "P: the prefetch is inside a read of the hung history"
stop_instance P
ok "P: SIGTERM during the prefetch's read: exit 0 in ${STOP_S} s, the episode log written"

# R: its first refresh ended too (so its prefetch is waiting for the request's read).
wait_for 15 "R: its first refresh ends" has_refreshed "$R_FP"
[ -s "$T/r.code" ] && fail "R: the request ended before the stop (the history was not hanging)"
stop_instance R
ok "R: SIGTERM during a request's read (the prefetch behind it): exit 0 in ${STOP_S} s, the episode log written"
wait "$A" || true
[ "$(cat "$T/r.code")" = 200 ] || fail "R: the request got status $(cat "$T/r.code") at the stop (want 200 from local data)"
jq -e '.data.history.error | test("read cancelled")' "$T/r.json" >/dev/null ||
  fail "R: the answer does not state the cancelled read: $(head -c 400 "$T/r.json")"
ok "R: the request was answered from local data, the history's error stated: $(jq -c .data.history.error "$T/r.json")"

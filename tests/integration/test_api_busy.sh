#!/usr/bin/env bash
# One analysis runs at a time. A request that cannot start within analysis.request_timeout
# because another holds the engine (here /api/v1/incidents reading an analysis.history
# that accepts connections and never answers) is answered 503 with a JSON reason and
# Retry-After, in about request_timeout, instead of waiting for the other (up to the
# history's remote_timeout, 40 s); /metrics answers meanwhile, and the 30 s refresh of the
# incident metrics goes on (a request reads the history without holding the engine that
# the refresh needs: fabricscope_analysis_last_refresh_timestamp_seconds advances); once
# the history fails, requests are answered again (from local data, the error stated).
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"

# The hung TSDB: a line in hung.log per connection, so the test knows when the first
# request is inside its history read; gone once "$T/release" exists.
start_hung_tsdb "$T/hung.log" "$T/release"
HP=$HUNG_PORT

start_fabricscope() { # writes the config with listen port FP and starts the daemon
  FP=$(free_tcp_port)
  cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$FP
analysis:
  request_timeout: 2s
  history: { url: "http://127.0.0.1:$HP", remote_timeout: 40s }
targets: []
EOF
  "$FABRICSCOPE" -c "$T/fs.yaml" >"$T/fabricscope.log" 2>&1 &
  track $!
  for _ in $(seq 600); do curl -fsS -o /dev/null "http://127.0.0.1:$FP/healthz" 2>/dev/null && return 0; sleep 0.1; done
  fail "fabricscope did not answer /healthz: $(tail -n 5 "$T/fabricscope.log")"
}
start_fabricscope
now=$(date +%s)

# A: incidents over the last hour; it reads the history and hangs there.
curl -sS -o "$T/a.json" -w '%{http_code}' --max-time 120 \
  "http://127.0.0.1:$FP/api/v1/incidents?start=$((now - 3600))&end=$now" >"$T/a.code" 2>&1 &
A=$!
for _ in $(seq 600); do [ -s "$T/hung.log" ] && break; sleep 0.1; done
[ -s "$T/hung.log" ] || fail "request A never reached the history"

# B: a correlation while A holds the engine: 503 in about 2 s, not after A's 40 s.
t0=$(date +%s.%N)
code=$(curl -sS -D "$T/b.headers" -o "$T/b.json" -w '%{http_code}' --max-time 60 \
  "http://127.0.0.1:$FP/api/v1/correlate?start=$((now - 600))&end=$now")
tb=$(echo "$(date +%s.%N) - $t0" | bc)
echo "B answered $code in ${tb} s: $(cat "$T/b.json")"
[ "$code" = 503 ] || fail "B: status $code, want 503 while A holds the engine"
jq -e '.status == "error" and (.error | test("^busy: waited analysis.request_timeout .*try again later$"))' "$T/b.json" >/dev/null ||
  fail "B: the 503 does not say why: $(cat "$T/b.json")"
grep -qi '^retry-after:' "$T/b.headers" || fail "B: no Retry-After"
echo "$tb < 10" | bc | grep -q 1 || fail "B took ${tb} s (want about request_timeout, 2 s)"
echo "$tb >= 1.5" | bc | grep -q 1 || fail "B took ${tb} s: it did not wait request_timeout"
ok "a request behind a hung analysis got 503 with its reason in ${tb} s"

# /metrics answers meanwhile.
t0=$(date +%s.%N)
curl -fsS -o /dev/null --max-time 10 "http://127.0.0.1:$FP/metrics" || fail "/metrics failed while A hangs"
tm=$(echo "$(date +%s.%N) - $t0" | bc)
echo "$tm < 1" | bc | grep -q 1 || fail "/metrics took ${tm} s while A hangs"
ok "/metrics answered in ${tm} s meanwhile"

# The refresh goes on while A waits for the history: a refresh ends after A began.
refreshed() {
  curl -fsS --max-time 10 "http://127.0.0.1:$FP/metrics" |
    awk '$1 == "fabricscope_analysis_last_refresh_timestamp_seconds" {printf "%d", $2}'
}
ok_refresh=
for _ in $(seq 450); do # a refresh every 30 s: 45 s at the most
  r=$(refreshed)
  if [ -n "$r" ] && [ "$r" -gt "$now" ]; then ok_refresh=$r; break; fi
  sleep 0.1
done
[ -s "$T/a.code" ] && fail "A ended before the check (the history was not hanging)"
[ -n "$ok_refresh" ] || fail "no refresh ended in 45 s while A read the hung history"
ok "a refresh ended $((ok_refresh - now)) s after A began, while A still waited on the history"

# The history fails (connections closed): A is answered, then a new request is too.
touch "$T/release"
wait "$A" || true
[ "$(cat "$T/a.code")" = 200 ] || fail "A: status $(cat "$T/a.code") after the history failed"
jq -e '.data.history.error != null' "$T/a.json" >/dev/null ||
  fail "A: the history's failure is not stated: $(head -c 400 "$T/a.json")"
code=$(curl -sS -o "$T/c.json" -w '%{http_code}' --max-time 60 \
  "http://127.0.0.1:$FP/api/v1/correlate?start=$((now - 600))&end=$now")
[ "$code" = 200 ] || fail "C: status $code after A ended: $(cat "$T/c.json")"
ok "A answered from local data once the history failed; the next request too"

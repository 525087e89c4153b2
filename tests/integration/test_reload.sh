#!/usr/bin/env bash
# SIGHUP with real targets: an unchanged target keeps its ring history and counter state
# across a reload, a new target starts, a changed one starts over, a removed one goes,
# and a bad file changes nothing.
source "$(dirname "$0")/lib.sh"

start_snmp_sim
HTTP=$(free_tcp_port)

target() { # name interval
  printf '  - name: %s\n    address: 127.0.0.1\n    interfaces: { include: "^Eth1/[12]$" }\n' "$1"
  printf '    snmp: { port: %s, community_file: %s, interval: %s, timeout: 300ms }\n' \
    "$PORT" "$SNMP_COMMUNITY_FILE" "$2"
}
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms; target tor2 500ms; } >"$T/fs.yaml"
start_fabricscope "$T/fs.yaml"
wait_http "http://127.0.0.1:$HTTP/healthz"

raw() { # target -> JSON of Eth1/1 rx bytes over the last 10 minutes
  local now; now=$(date +%s)
  curl -fsS --get "http://127.0.0.1:$HTTP/api/v1/raw" \
    --data-urlencode "match[]=fabric_port_bytes_total{target=\"$1\",interface=\"Eth1/1\",direction=\"rx\"}" \
    --data-urlencode "start=$((now - 600))" --data-urlencode "end=$((now + 5))"
}
first_ts() { raw "$1" | jq -r '.data.result[0].values[0][0] // empty'; }
count() { raw "$1" | jq -r '.data.result[0].values | length // 0'; }
last_val() { raw "$1" | jq -r '.data.result[0].values[-1][1] // empty'; }

for _ in $(seq 100); do [ "$(count tor1)" -ge 4 ] && [ "$(count tor2)" -ge 4 ] && break; sleep 0.2; done
[ "$(count tor1)" -ge 4 ] || fail "tor1 has no history"
t1=$(first_ts tor1); t2=$(first_ts tor2); v1=$(last_val tor1)
ok "history before reload: tor1 from $t1, tor2 from $t2"

# tor1 unchanged, tor2 changed (interval), tor3 new.
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms; target tor2 1s; target tor3 500ms; } >"$T/fs.yaml"
kill -HUP "$FS_PID"
for _ in $(seq 100); do grep -q 'reloaded' "$T/fabricscope.log" && break; sleep 0.1; done
grep -q 'reloaded .*1 instances kept, 1 removed' "$T/fabricscope.log" || fail "reload summary: $(grep reload "$T/fabricscope.log")"
for _ in $(seq 100); do [ "$(count tor3)" -ge 2 ] && [ "$(count tor2)" -ge 2 ] && break; sleep 0.2; done
[ "$(first_ts tor1)" = "$t1" ] || fail "tor1 lost its history: first sample $(first_ts tor1), was $t1"
v1b=$(last_val tor1)
[ "$v1b" -ge "$v1" ] || fail "tor1 counter went back: $v1 -> $v1b"
[ "$(count tor3)" -ge 2 ] || fail "new target tor3 not polled"
t2b=$(first_ts tor2)
awk -v a="$t2b" -v b="$t2" 'BEGIN { exit !(a > b) }' || fail "changed tor2 kept history ($t2b vs $t2)"
ok "reload: unchanged tor1 kept history from $t1 and counter state; tor2 restarted; tor3 added"

# A bad file: refused, nothing changes.
printf 'listen: 127.0.0.1:%s\ntargets: [ { name: x } ]\n' "$HTTP" >"$T/fs.yaml"
kill -HUP "$FS_PID"
for _ in $(seq 50); do grep -q 'reload refused' "$T/fabricscope.log" && break; sleep 0.1; done
grep -q 'reload refused' "$T/fabricscope.log" || fail "bad file not refused"
n=$(curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" | jq '.data | length')
[ "$n" = 3 ] || fail "targets after a refused reload: $n, want 3"
ok "bad reload refused; 3 targets still running"

# tor3 removed.
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms; target tor2 1s; } >"$T/fs.yaml"
kill -HUP "$FS_PID"
for _ in $(seq 50); do [ "$(curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" | jq '.data | length')" = 2 ] && break; sleep 0.1; done
[ "$(curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" | jq '.data | length')" = 2 ] || fail "tor3 not removed"
curl -fsS "http://127.0.0.1:$HTTP/metrics" | grep -q 'target="tor3"' && fail "tor3 still exported"
[ "$(first_ts tor1)" = "$t1" ] || fail "tor1 lost its history on the second reload"
ok "removed target gone; tor1 history intact"

# A target whose secret file is missing is shown down with the reason; once the file
# exists, a reload with the same configuration retries it.
{ echo "listen: 127.0.0.1:$HTTP"; echo "targets:"; target tor1 500ms
  printf '  - name: tor4\n    address: 127.0.0.1\n    snmp: { port: %s, community_file: %s, interval: 500ms }\n' \
    "$PORT" "$T/later.community"; } >"$T/fs.yaml"
kill -HUP "$FS_PID"
for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" | jq -e '.data[] | select(.target == "tor4")' >/dev/null && break; sleep 0.1; done
err=$(curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" | jq -r '.data[] | select(.target == "tor4") | .last_error')
grep -q "later.community" <<<"$err" || fail "missing secret file not reported: '$err'"
grep -q "$(cat "$SNMP_COMMUNITY_FILE")" <<<"$err" && fail "error shows a secret"
cp "$SNMP_COMMUNITY_FILE" "$T/later.community"
kill -HUP "$FS_PID"
for _ in $(seq 100); do
  s=$(curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets" | jq -r '.data[] | select(.target == "tor4") | .state')
  [ "$s" = up ] && break; sleep 0.1
done
[ "$s" = up ] || fail "tor4 not retried after its secret appeared (state $s)"
[ "$(first_ts tor1)" = "$t1" ] || fail "tor1 lost its history"
ok "refused target ($err) retried on reload once fixed"

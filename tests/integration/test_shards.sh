#!/usr/bin/env bash
# Many collectors: three fabricscope instances share one target list of 30 switches
# (all answered by the SNMP simulator behind a real snmpd) and split it by shard. Every
# target is polled by exactly one instance; /api/v1/targets of each lists all 30 with
# the same owner; external_labels mark every sample of /metrics. Then a fourth
# instance joins (--shard 3/4 on the command line, overriding the file) and the three
# reload with count 4: only the targets shard 3 now owns move, and no target moves
# between the old shards.
source "$(dirname "$0")/lib.sh"

N=30
start_snmp_sim
targets_yaml() {
  echo "targets:"
  local j
  for j in $(seq -w 1 $N); do
    echo "  - { name: leaf$j, address: 127.0.0.1, snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 2s, timeout: 1500ms } }"
  done
}
# config INDEX COUNT HTTP-PORT [no-shard]: one instance's file.
config() {
  echo "listen: 127.0.0.1:$3"
  echo "storage: { memory_limit: 32MiB }"
  [ "${4:-}" = no-shard ] && echo "shard: { index: 0, count: 3 }" || echo "shard: { index: $1, count: $2 }"
  echo "external_labels: { replica: a, shard: \"$1\" }"
  targets_yaml
}

declare -a HP PIDS
_reloaded() { [ "$(grep -cE 'reloaded ' "$T/fabricscope$1.log" || true)" -gt "$2" ]; }
start_instance() { # INDEX [ARGS...]
  local i=$1; shift
  "$FABRICSCOPE" -c "$T/fs$i.yaml" "$@" >"$T/fabricscope$i.log" 2>&1 &
  PIDS[$i]=$!
  track "${PIDS[$i]}"
  wait_http "http://127.0.0.1:${HP[$i]}/healthz"
}
for i in 0 1 2; do
  HP[$i]=$(free_tcp_port)
  config "$i" 3 "${HP[$i]}" >"$T/fs$i.yaml"
  "$FABRICSCOPE" --check-config "$T/fs$i.yaml" >/dev/null || fail "config $i refused"
  start_instance "$i"
done

targets_json() { curl -fsS "http://127.0.0.1:${HP[$1]}/api/v1/targets"; }
# Targets instance I polls, one a line, sorted.
polled() { targets_json "$1" | jq -r '.data[] | select(.polled) | .target' | sort -u; }
# True once every target instance I polls has finished a poll and is up.
all_up() {
  targets_json "$1" | jq -e '[.data[] | select(.polled)] | length > 0 and all(.state == "up")' >/dev/null
}
for i in 0 1 2; do wait_for 60 "instance $i: its targets up" all_up "$i"; done

# Every configured target listed by every instance, with one owner they agree on.
for i in 0 1 2; do
  targets_json "$i" | jq -r '.data[] | "\(.target) \(.shard)"' | sort -u >"$T/owners$i.txt"
  [ "$(wc -l <"$T/owners$i.txt")" = $N ] || fail "instance $i lists $(wc -l <"$T/owners$i.txt") targets, want $N"
  targets_json "$i" | jq -e --argjson i "$i" 'all(.data[]; (.shard == $i) == .polled)' >/dev/null ||
    fail "instance $i: polled is not 'owned by shard $i'"
done
cmp -s "$T/owners0.txt" "$T/owners1.txt" && cmp -s "$T/owners0.txt" "$T/owners2.txt" ||
  fail "instances disagree on the owners"

# Exactly once: the polled sets are disjoint and cover the 30.
for i in 0 1 2; do polled "$i" >"$T/polled$i.txt"; done
cat "$T"/polled[012].txt | sort >"$T/all.txt"
[ "$(wc -l <"$T/all.txt")" = $N ] || fail "$(wc -l <"$T/all.txt") polls for $N targets"
[ "$(sort -u "$T/all.txt" | wc -l)" = $N ] || fail "a target is polled by two instances"
ok "30 targets, 3 instances: each polled exactly once ($(wc -l <"$T/polled0.txt")/$(wc -l <"$T/polled1.txt")/$(wc -l <"$T/polled2.txt"))"

# What each instance exports is its own targets only, every sample carries the
# external labels, and the exposition is valid.
for i in 0 1 2; do
  curl -fsS "http://127.0.0.1:${HP[$i]}/metrics" >"$T/m$i.txt"
  grep -oE '^fabricscope_target_up\{target="[^"]+"' "$T/m$i.txt" | sed 's/.*target="//; s/"$//' |
    sort -u >"$T/up$i.txt"
  cmp -s "$T/up$i.txt" "$T/polled$i.txt" || fail "instance $i exports targets it does not poll"
  bad=$(grep -v '^#' "$T/m$i.txt" | grep -vc "replica=\"a\",shard=\"$i\"}" || true)
  [ "$bad" = 0 ] || fail "instance $i: $bad samples without the external labels"
  out=$(promtool check metrics <"$T/m$i.txt" 2>&1) || fail "promtool: $out"
  [ -z "$out" ] || fail "promtool warned: $out"
done
ok "each /metrics has its own targets only, external labels on every sample, promtool clean"

# Resharding 3 -> 4: the fourth instance gets its shard from the command line (its file
# says 0/3, which --shard overrides); the others reload with count 4.
HP[3]=$(free_tcp_port)
config 3 4 "${HP[3]}" no-shard >"$T/fs3.yaml"
start_instance 3 --shard 3/4
for i in 0 1 2; do
  config "$i" 4 "${HP[$i]}" >"$T/fs$i.yaml"
  n=$(grep -cE 'reloaded |reload refused' "$T/fabricscope$i.log" || true)
  kill -HUP "${PIDS[$i]}"
  wait_for 20 "instance $i reloaded" _reloaded "$i" "$n"
done

wait_for 60 "instance 3: its targets up" all_up 3
for i in 0 1 2 3; do polled "$i" >"$T/new$i.txt"; done
cat "$T"/new[0123].txt | sort >"$T/all4.txt"
[ "$(wc -l <"$T/all4.txt")" = $N ] && [ "$(sort -u "$T/all4.txt" | wc -l)" = $N ] ||
  fail "after resharding: $(wc -l <"$T/all4.txt") polls of $(sort -u "$T/all4.txt" | wc -l) targets"
for i in 0 1 2; do
  extra=$(comm -13 "$T/polled$i.txt" "$T/new$i.txt")
  [ -z "$extra" ] || fail "shard $i took over $extra from another old shard"
done
moved=$(wc -l <"$T/new3.txt")
[ "$moved" -ge 3 ] && [ "$moved" -le 13 ] || fail "$moved of $N targets moved to shard 3 (expected about 7.5)"
targets_json 3 | jq -e 'all(.data[]; (.shard == 3) == .polled)' >/dev/null || fail "instance 3 owners"
ok "resharding 3 -> 4 moved only the $moved targets shard 3 now owns (each polled exactly once)"

#!/usr/bin/env bash
# Host links and static links against real peers: two network namespaces, a "switch"
# (sw1) and a GPU "host" (gpu-host-01), joined by a veth pair (sw1 swp1 <-> host eth0).
# Debian's lldpd runs in each (own control socket, 1 s transmit interval; no snmpd: the
# collector learns this link from the host, not from the switch). In the host namespace
# run the real host agent (fabricscope host-agent, lldp.interval 1s, lldpctl on the host
# lldpd's socket) and the collector it posts to, on that namespace's loopback.
# Checked: /api/v1/topology shows gpu-host-01 eth0 <-> sw1 swp1 with source "host"
# reported by gpu-host-01 (polled with a deadline; the time it took is printed); the
# configuration's topology.links entry and its links_file's link show with source
# "config" and hold 0; a bad neighbour post is a 400 with a JSON reason; a reload with a
# broken links file is refused naming the key and the file's problem, the links stay; a
# reload with a changed file replaces the file's links; the veth deleted, the host's
# lldpd drops the neighbour and the agent's next post (an empty table) takes the link
# away (time printed).
# Needs root (network namespaces) and lldpd (scripts/install-deps.sh).
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
for c in ip lldpd lldpcli lldpctl jq curl; do
  command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || fail "needs $c (scripts/install-deps.sh)"
done
LLDPD=$(command -v lldpd || echo /usr/sbin/lldpd)
LLDPCTL=$(command -v lldpctl || echo /usr/sbin/lldpctl)

SUF=$$-$RANDOM
SW=fstopoh-sw-$SUF H=fstopoh-h-$SUF
topo_cleanup() {
  local ns
  for ns in "$SW" "$H"; do
    if ip netns list | grep -qw "$ns"; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    fi
  done
  for ns in "$SW" "$H"; do
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  return 0
}
trap 'rc=$?; topo_cleanup; set +e; (exit $rc); cleanup' EXIT
trap 'exit 130' INT TERM

for ns in "$SW" "$H"; do
  ip netns add "$ns" || fail "ip netns add $ns"
  ip netns exec "$ns" ip link set lo up
done
ip link add swp1 netns "$SW" type veth peer name eth0 netns "$H" || fail "veth swp1"
ip netns exec "$SW" ip link set swp1 up
ip netns exec "$H" ip link set eth0 up

# lldpd's unprivileged half (user _lldpd) runs lldpcli on the control socket at start:
# the sockets live in a directory it can reach (the scratch dir itself only traversable).
chmod 0711 "$T"
mkdir -m 0755 "$T/lldp"
start_lldpd() { # NAMESPACE NAME
  local ns=$1 name=$2
  ip netns exec "$ns" "$LLDPD" -d -u "$T/lldp/$name.sock" -p "$T/lldp/$name.pid" \
    >"$T/lldpd-$name.log" 2>&1 &
  track $!
  wait_for 20 "lldpd $name's control socket" test -S "$T/lldp/$name.sock"
  lldpcli -u "$T/lldp/$name.sock" configure system hostname "$name" >/dev/null
  lldpcli -u "$T/lldp/$name.sock" configure lldp tx-interval 1 >/dev/null
}
start_lldpd "$SW" sw1
start_lldpd "$H" gpu-host-01

# ---- the collector, in the host namespace (its own loopback: nothing else listens there)
HTTP=9464
URL=http://127.0.0.1:$HTTP
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/token"
cat >"$T/links.json" <<'EOF'
{"links": {"leaf02-spine01": {"node1": "leaf02", "port1": "Eth1/3",
                              "node2": "spine01", "port2": "Eth1/49"}},
 "nodes": {"leaf02": {"agent": "10.0.0.2"}}}
EOF
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
host_events: { bearer_token_file: $T/token }
topology:
  links:
    - {a: {node: leaf01, port: Eth1/1}, b: {node: gpu-host-01, port: mlx5_0}}
  links_file: $T/links.json
EOF
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
ip netns exec "$H" "$FABRICSCOPE" -c "$T/fs.yaml" >"$T/fabricscope.log" 2>&1 &
FS_PID=$!
track "$FS_PID"
h_curl() { ip netns exec "$H" curl -sS "$@"; }
wait_for 20 "fabricscope answers" h_curl -f -o /dev/null "$URL/healthz"

topo() { h_curl -f "$URL/api/v1/topology" >"$T/topo.json"; }
# has_link NODE PORT NODE PORT [SOURCE]: the link, in either order (with that source).
has_link() {
  topo || return 1
  jq -e --arg n1 "$1" --arg p1 "$2" --arg n2 "$3" --arg p2 "$4" --arg s "${5:-}" '
    [.data.links[] | select(([.a, .b] | map({node, port})) as $e
       | $e | index({node: $n1, port: $p1}) != null and index({node: $n2, port: $p2}) != null)
     | select($s == "" or ([.sources[].source] | index($s) != null))]
    | length == 1' "$T/topo.json" >/dev/null
}
no_link() { topo && ! has_link "$@"; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- static links: there from the start, source "config", never aging (hold 0)
has_link leaf01 Eth1/1 gpu-host-01 mlx5_0 config || fail "topology.links entry: $(cat "$T/topo.json")"
has_link leaf02 Eth1/3 spine01 Eth1/49 config || fail "links_file link: $(cat "$T/topo.json")"
jq -e '[.data.links[] | select(.sources[0].source == "config")] | length == 2 and
       all(.sources[0].reported_by == "config" and .sources[0].hold_s == 0)' "$T/topo.json" \
  >/dev/null || fail "config link fields: $(cat "$T/topo.json")"
jq -e '[.data.nodes[].name] | index("config") == null' "$T/topo.json" >/dev/null ||
  fail "the configuration shows as a node"
ok "topology.links and links_file links show with source config, hold 0"

# ---- the host agent in the host namespace, reading the host's lldpd
cat >"$T/agent.yaml" <<EOF
collector: { url: $URL, token_file: $T/token }
host: gpu-host-01
state_dir: $T/state
clock: { interval: 1s }
lldp: { interval: 1s, lldpctl: $LLDPCTL, socket: $T/lldp/gpu-host-01.sock }
EOF
"$FABRICSCOPE" host-agent -c "$T/agent.yaml" --check-config >/dev/null || fail "agent config refused"
t_start=$(date +%s.%N)
ip netns exec "$H" "$FABRICSCOPE" host-agent -c "$T/agent.yaml" >"$T/agent.log" 2>&1 &
track $!
wait_for 60 "the host's link in /api/v1/topology" has_link gpu-host-01 eth0 sw1 swp1 host
echo "host link appeared after $(since "$t_start") s (agent started; lldpd tx-interval 1 s, lldp.interval 1 s)"
jq -e '[.data.links[] | select(.a.node == "gpu-host-01" and .a.port == "eth0")][0]
       | .b.node == "sw1" and .b.port == "swp1" and .a.kind == "remote"
         and .sources[0].source == "host" and .sources[0].reported_by == "gpu-host-01"
         and .sources[0].hold_s == 30' "$T/topo.json" >/dev/null ||
  { cat "$T/topo.json" >&2; fail "host link fields"; }
ok "the host agent's LLDP neighbour shows: gpu-host-01 eth0 <-> sw1 swp1, source host"

# ---- a bad neighbour post: 400 with a JSON reason, nothing recorded
post() { h_curl -o "$T/post.json" -w '%{http_code}' -H "Authorization: Bearer $(cat "$T/token")" \
  -H 'Content-Type: application/json' --data-binary "$1" "$URL/api/v1/host-events"; }
code=$(post '{"neighbors":{"host":"evil","interval_s":30,"list":[{"nic":"eth0","sys_name":"sw1"}]}}')
[ "$code" = 400 ] && jq -e '.status == "error" and (.error | test("neighbors.list\\[0\\].port"))' \
  "$T/post.json" >/dev/null || fail "bad neighbours: HTTP $code $(cat "$T/post.json")"
topo && jq -e '[.data.nodes[].name] | index("evil") == null' "$T/topo.json" >/dev/null ||
  fail "a refused post left a node"
ok "a bad neighbour list is a 400 with a JSON reason"

# ---- reloads: a broken links file is refused whole; a changed one replaces its links
echo '{"links": {"l1": {"node1": "leaf03", "port1": "Eth1/1", "node2": "spine02"}}}' >"$T/links.json"
hup
grep -q 'reload refused' "$T/fabricscope.log" || fail "the broken links file was not refused"
grep -q "topology.links_file: $T/links.json: links.l1.port2: missing" "$T/fabricscope.log" ||
  fail "the refusal does not name the key and the problem: $(grep -A3 'reload refused' "$T/fabricscope.log")"
has_link leaf02 Eth1/3 spine01 Eth1/49 config || fail "the running links went with the refused reload"
echo '{"links": {"l1": {"node1": "leaf03", "port1": "Eth1/1", "node2": "spine02", "port2": "Eth1/50"}}}' \
  >"$T/links.json"
hup
has_link leaf03 Eth1/1 spine02 Eth1/50 config || fail "the new file's link is missing"
no_link leaf02 Eth1/3 spine01 Eth1/49 || fail "the old file's link stayed"
has_link leaf01 Eth1/1 gpu-host-01 mlx5_0 config || fail "topology.links entry went"
ok "reload: a broken links file refused (key path and problem logged), a changed one replaces it"

# ---- the cable pulled: the host's lldpd forgets the neighbour, the agent posts an
# empty table, the link goes at once (not after its 30 s hold)
t0=$(date +%s.%N)
ip netns exec "$SW" ip link del swp1
wait_for 30 "the host's link gone" no_link gpu-host-01 eth0 sw1 swp1
echo "host link gone after $(since "$t0") s (veth deleted; its hold would be 30 s)"
has_link leaf01 Eth1/1 gpu-host-01 mlx5_0 config || fail "the config link went with it"
ok "a pulled cable's host link leaves the topology at the agent's next post"

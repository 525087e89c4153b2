#!/usr/bin/env bash
# Topology from LLDP against real peers: three network namespaces, a "switch" (sw1) and
# two "hosts", joined by veth pairs (sw1 swp1 <-> host1 eth0, sw1 swp2 <-> host2 eth0).
# Debian's lldpd runs in each (its own control socket, 1 s transmit interval); in the
# switch namespace a real snmpd is the AgentX master and lldpd -x serves LLDP-MIB
# through it. fabricscope runs in the switch namespace too (snmpd listens on that
# namespace's loopback) and polls sw1 over SNMP every second with lldp_interval 1s.
# Checked: /api/v1/topology shows both host links with the local ports named as the
# counters name them (swp1, swp2: the `interface` label of sw1's series) and the hosts'
# system names; a bad parameter is a 400 with a JSON reason; a node filter. Then host2's
# veth is deleted and host1's lldpd stopped: each link leaves the topology (lldpd drops
# the neighbour, the next complete table read drops the link). The times are printed:
# links appeared after X s, link gone after Y s.
# Needs root (network namespaces) and lldpd (scripts/install-deps.sh).
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
for c in ip lldpd lldpcli snmpd jq curl; do
  command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || fail "needs $c (scripts/install-deps.sh)"
done
LLDPD=$(command -v lldpd || echo /usr/sbin/lldpd)
SNMPD=$(command -v snmpd || echo /usr/sbin/snmpd)

SUF=$$-$RANDOM
SW=fstopo-sw-$SUF H1=fstopo-h1-$SUF H2=fstopo-h2-$SUF
topo_cleanup() {
  local ns
  for ns in "$SW" "$H1" "$H2"; do
    if ip netns list | grep -qw "$ns"; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    fi
  done
  for ns in "$SW" "$H1" "$H2"; do
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  return 0
}
trap 'rc=$?; topo_cleanup; set +e; (exit $rc); cleanup' EXIT
trap 'exit 130' INT TERM

for ns in "$SW" "$H1" "$H2"; do
  ip netns add "$ns" || fail "ip netns add $ns"
  ip netns exec "$ns" ip link set lo up
done
ip link add swp1 netns "$SW" type veth peer name eth0 netns "$H1" || fail "veth swp1"
ip link add swp2 netns "$SW" type veth peer name eth0 netns "$H2" || fail "veth swp2"
ip netns exec "$SW" ip link set swp1 up
ip netns exec "$SW" ip link set swp2 up
ip netns exec "$H1" ip link set eth0 up
ip netns exec "$H2" ip link set eth0 up

# ---- snmpd in the switch namespace: AgentX master on a socket in the scratch dir.
# lldpd's sub-agent connects as root; the scratch dir stays private (0700).
mkdir -p "$T/snmp/persist"
COMMUNITY=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; echo "$COMMUNITY" >"$T/community")
SNMP_PORT=16100 HTTP=9464 # the switch namespace's own loopback: nothing else listens there
cat >"$T/snmp/snmpd.conf" <<EOF
[snmp] persistentDir $T/snmp/persist
agentaddress udp:127.0.0.1:$SNMP_PORT
master agentx
agentXSocket $T/snmp/agentx.sock
agentXPerms 0600 0700
agentXTimeout 5
agentXRetries 1
rocommunity $COMMUNITY 127.0.0.1
EOF
ip netns exec "$SW" env SNMP_PERSISTENT_DIR="$T/snmp/persist" MIBS="" "$SNMPD" -f -C \
  -c "$T/snmp/snmpd.conf" -Lf "$T/snmpd.log" >/dev/null 2>&1 &
track $!
wait_for 20 "snmpd's AgentX socket" test -S "$T/snmp/agentx.sock"

# ---- lldpd in each namespace: own control socket and pid file; the switch's one is
# an AgentX sub-agent of that snmpd.
# lldpd's unprivileged half (user _lldpd) runs lldpcli on the control socket at start:
# the sockets live in a directory it can reach (the scratch dir itself only traversable).
chmod 0711 "$T"
mkdir -m 0755 "$T/lldp"
start_lldpd() { # NAMESPACE NAME [lldpd options]
  local ns=$1 name=$2; shift 2
  ip netns exec "$ns" "$LLDPD" -d -u "$T/lldp/$name.sock" -p "$T/lldp/$name.pid" "$@" \
    >"$T/lldpd-$name.log" 2>&1 &
  track $!
  eval "LLDPD_PID_$name=$!"
  wait_for 20 "lldpd $name's control socket" test -S "$T/lldp/$name.sock"
  lldpcli -u "$T/lldp/$name.sock" configure system hostname "$name" >/dev/null
  lldpcli -u "$T/lldp/$name.sock" configure lldp tx-interval 1 >/dev/null
}
start_lldpd "$SW" sw1 -x -X "$T/snmp/agentx.sock"
start_lldpd "$H1" host1
start_lldpd "$H2" host2

cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: sw1
    address: 127.0.0.1
    snmp: { port: $SNMP_PORT, version: 2c, community_file: $T/community, interval: 1s,
            timeout: 500ms, retries: 1, lldp_interval: 1s }
EOF
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
t_start=$(date +%s.%N)
ip netns exec "$SW" "$FABRICSCOPE" -c "$T/fs.yaml" >"$T/fabricscope.log" 2>&1 &
FS_PID=$!
track "$FS_PID"
URL=http://127.0.0.1:$HTTP
sw_curl() { ip netns exec "$SW" curl -sS "$@"; }
wait_for 20 "fabricscope answers" sw_curl -f -o /dev/null "$URL/healthz"

topo() { sw_curl -f "$URL/api/v1/topology" >"$T/topo.json"; }
# has_link NODE PORT NODE PORT: the link, in either order.
has_link() {
  topo || return 1
  jq -e --arg n1 "$1" --arg p1 "$2" --arg n2 "$3" --arg p2 "$4" '
    [.data.links[] | [.a, .b] | map({node, port})
     | select(index({node: $n1, port: $p1}) != null and index({node: $n2, port: $p2}) != null)]
    | length == 1' "$T/topo.json" >/dev/null
}
no_link() { topo && ! has_link "$@"; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
both_links() { has_link sw1 swp1 host1 eth0 && has_link sw1 swp2 host2 eth0; }

wait_for 60 "both host links in /api/v1/topology" both_links
echo "links appeared after $(since "$t_start") s (fabricscope started, lldpd tx-interval 1 s, lldp_interval 1 s)"
jq -e '.status == "success"' "$T/topo.json" >/dev/null || fail "status"
jq -e '[.data.links[] | select(.a.node == "host1" and .b.node == "sw1")][0]
       | .a.kind == "remote" and .b.kind == "target" and .sources[0].source == "snmp"
         and .sources[0].reported_by == "sw1" and .sources[0].hold_s == 30
         and (.age_s | type == "number") and (.first_seen | test("Z$"))' "$T/topo.json" \
  >/dev/null || { cat "$T/topo.json" >&2; fail "link fields"; }
# lldpd takes the hostname lldpcli gave it a moment after it started (it announced the
# machine's until then): the local identity is re-read with every table.
sw1_identity() {
  topo && jq -e '[.data.nodes[] | select(.name == "sw1" and .kind == "target" and
    .sys_name == "sw1" and (.chassis_id | test("^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")))]
    | length == 1' "$T/topo.json" >/dev/null
}
wait_for 20 "sw1's own LLDP identity (sysName sw1)" sw1_identity
ok "both host links: swp1-host1/eth0, swp2-host2/eth0, learned over SNMP (LLDP-MIB via lldpd -x)"

# The local port names are the counters' interface labels: the links join the series.
sw_curl -f "$URL/metrics" >"$T/metrics.txt"
grep -q '^fabric_port_bytes_total{target="sw1",interface="swp1",direction="rx",source="snmp"}' \
  "$T/metrics.txt" || fail "no series of sw1's swp1 to join the link to"
ok "link ports join the series (interface=\"swp1\")"

code=$(sw_curl -o "$T/bad.json" -w '%{http_code}' "$URL/api/v1/topology?bogus=1")
[ "$code" = 400 ] && jq -e '.status == "error" and (.error | test("bogus"))' "$T/bad.json" >/dev/null ||
  fail "bad parameter: HTTP $code $(cat "$T/bad.json")"
code=$(sw_curl -o "$T/bad.json" -w '%{http_code}' "$URL/api/v1/topology?node=a&node=b")
[ "$code" = 400 ] || fail "repeated parameter: HTTP $code"
sw_curl -f "$URL/api/v1/topology?node=host2" >"$T/f.json"
jq -e '(.data.links | length) == 1 and .data.links[0].a.node == "host2" and
       ([.data.nodes[].name] | sort == ["host2", "sw1"])' "$T/f.json" >/dev/null ||
  fail "node filter: $(cat "$T/f.json")"
ok "bad parameters are 400 with a JSON reason; node filter"

# ---- a link that disappears: host2's cable pulled (veth deleted)
t0=$(date +%s.%N)
ip netns exec "$SW" ip link del swp2
wait_for 30 "host2's link gone" no_link sw1 swp2 host2 eth0
echo "link gone after $(since "$t0") s (veth deleted; hold would be 30 s)"
has_link sw1 swp1 host1 eth0 || fail "host1's link went too"
ok "a deleted veth's link leaves the topology at the next table read"

# ---- a neighbour that stops: host1's lldpd stopped (it sends a shutdown LLDPDU)
t0=$(date +%s.%N)
kill "$LLDPD_PID_host1"
wait_exit "$LLDPD_PID_host1" 10
wait_for 30 "host1's link gone" no_link sw1 swp1 host1 eth0
echo "link gone after $(since "$t0") s (host lldpd stopped)"
jq -e '(.data.links | length) == 0' "$T/topo.json" >/dev/null || fail "links left: $(cat "$T/topo.json")"
grep -q 'topology.*no longer listed' "$T/fabricscope.log" || fail "no log line for dropped links"
ok "a stopped neighbour's link leaves the topology"

#!/usr/bin/env bash
# Topology from the gNMI and ONYX CLI drivers against real peers: the gNMI target
# simulator (tests/sim/gnmi/gnmi_sim.py) over real gRPC on a free loopback port, serving
# openconfig-lldp state from its scenario, and the ONYX CLI simulator behind a real sshd,
# answering `show lldp interfaces ethernet remote` in the layout parse_assumed.c assumes
# (A7, unverified). Two switches, "leaf1" (gNMI) and "sw-onyx" (CLI), cabled to each other
# (leaf1 Eth1/1 <-> sw-onyx Eth1/1) and each to a host (leaf1 Eth1/3 - gpu02 eth1,
# sw-onyx Eth1/2 - gpu01 eth0). Checked in /api/v1/topology: the host links with source
# "gnmi" / "cli" and the right port names (the local ports as the counters name them);
# the switch-to-switch link, reported from both ends, is ONE link with both sources; the
# leaf1 node carries its own identity (/lldp/state). Then a neighbour goes on each side: a
# gNMI delete (the simulator's control file) takes gpu02's link out at once, and the ONYX
# scenario losing gpu01 takes that link out at the next table read. Times are printed.
# Needs root (the ONYX simulator's sshd and test user), python3-grpcio.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
command -v jq >/dev/null || fail "needs jq"
onyx_sim_prereqs # sets PY=/usr/bin/python3 (Debian's grpcio lives there)
$PY -c 'import grpc, google.protobuf' || fail "python3-grpcio / python3-protobuf missing"

# ---- the ONYX switch: its neighbours are leaf1 (the gNMI switch) and a host
SCEN_O=$T/onyx.json
write_onyx() { # write_onyx WITH_GPU01
  $PY - "$SCEN_O.tmp" "$1" <<'EOF'
import json, sys
nb = [{"port": "Eth1/1", "chassis_id": "0c:42:a1:00:00:01", "port_id": "Eth1/1",
       "port_descr": "to sw-onyx", "sys_name": "leaf1"}]
if sys.argv[2] == "1":
    nb.append({"port": "Eth1/2", "chassis_id": "b8:ce:f6:00:00:01", "port_id": "b8:ce:f6:00:00:01",
               "port_id_type": "Mac Address (3)", "port_descr": "eth0", "sys_name": "gpu01"})
json.dump({"ports": 4, "lldp_neighbors": nb}, open(sys.argv[1], "w"))
EOF
  chmod 0644 "$SCEN_O.tmp"
  mv "$SCEN_O.tmp" "$SCEN_O"
}
write_onyx 1
start_onyx_sim cli --scenario "$SCEN_O"

# ---- the gNMI switch: its own identity, sw-onyx on Eth1/1, a host on Eth1/3
cat >"$T/gnmi.json" <<'JSON'
{"ports": 4,
 "lldp_local": {"chassis_id": "0c:42:a1:00:00:01", "system_name": "leaf1"},
 "lldp_neighbors": [
   {"port": "Eth1/1", "id": "1", "chassis_id": "0c:42:a1:00:00:99", "port_id": "Eth1/1",
    "port_id_type": "openconfig-lldp-types:INTERFACE_NAME", "port_descr": "to leaf1",
    "sys_name": "sw-onyx"},
   {"port": "Eth1/3", "id": "7", "chassis_id": "b8:ce:f6:00:00:02", "port_id": "b8:ce:f6:00:00:02",
    "port_id_type": "MAC_ADDRESS", "port_descr": "eth1", "sys_name": "gpu02"}]}
JSON
GNMI_PORT=$(free_tcp_port)
$PY "$FS_SOURCE_DIR/tests/sim/gnmi/gnmi_sim.py" --gen-dir "$T/gen" --scenario "$T/gnmi.json" \
  --port "$GNMI_PORT" --port-file "$T/gnmi.port" --control "$T/gnmi.ctl" >"$T/gnmi.log" 2>&1 &
track $!
wait_for 20 "the gNMI simulator listens" test -s "$T/gnmi.port"

HTTP=$(free_tcp_port)
cat >"$T/fs.yaml" <<EOF
listen: 127.0.0.1:$HTTP
targets:
  - name: leaf1
    address: 127.0.0.1
    gnmi:
      port: $GNMI_PORT
      insecure: true
      encoding: json_ietf
      lldp_interval: 1s
      backoff_min: 200ms
      subscriptions:
        - { path: "/interfaces/interface[name=*]/state/counters", mode: sample, interval: 1s }
  - name: sw-onyx
    address: 127.0.0.1
    cli: { port: $ONYX_SSH_PORT, username: $ONYX_SSH_USER, password_file: $ONYX_PASSWORD_FILE,
           known_hosts: $ONYX_KNOWN_HOSTS, interval: 1s, lldp_interval: 1s }
EOF
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"
t_start=$(date +%s.%N)
start_fabricscope "$T/fs.yaml"
URL=http://127.0.0.1:$HTTP
wait_http "$URL/healthz" 20

topo() { curl -fsS "$URL/api/v1/topology" >"$T/topo.json"; }
# link NODE PORT NODE PORT: the one link joining them (either order), as JSON, or fails.
link() {
  jq -e --arg n1 "$1" --arg p1 "$2" --arg n2 "$3" --arg p2 "$4" '
    [.data.links[] | select(([.a, .b] | map({node, port})) as $e
       | ($e | index({node: $n1, port: $p1})) != null and ($e | index({node: $n2, port: $p2})) != null)]
    | if length == 1 then .[0] else error("links: \(length)") end' "$T/topo.json"
}
has_link() { topo && link "$@" >/dev/null; }
no_link() { topo && ! link "$@" >/dev/null 2>&1; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# sources SOURCE... of the link in $T/l.json, sorted
srcs() { jq -r '[.sources[].source] | sort | join(",")' "$T/l.json"; }

all_links() {
  has_link leaf1 Eth1/3 gpu02 eth1 && has_link sw-onyx Eth1/2 gpu01 eth0 &&
    link leaf1 Eth1/1 sw-onyx Eth1/1 >"$T/l.json" && [ "$(srcs)" = "cli,gnmi" ]
}
wait_for 60 "the gNMI and CLI links in /api/v1/topology" all_links
echo "links appeared after $(since "$t_start") s (fabricscope started; gNMI on_change + sync, CLI interval 1 s, lldp_interval 1 s)"

link leaf1 Eth1/3 gpu02 eth1 >"$T/l.json"
[ "$(srcs)" = gnmi ] || fail "gpu02 link sources: $(srcs)"
jq -e '.sources[0].reported_by == "leaf1"' "$T/l.json" >/dev/null || fail "gpu02 link reporter"
link sw-onyx Eth1/2 gpu01 eth0 >"$T/l.json"
[ "$(srcs)" = cli ] || fail "gpu01 link sources: $(srcs)"
jq -e '.sources[0].reported_by == "sw-onyx"' "$T/l.json" >/dev/null || fail "gpu01 link reporter"
ok "host links: leaf1 Eth1/3 - gpu02 eth1 (gnmi, remote port by description), sw-onyx Eth1/2 - gpu01 eth0 (cli)"

link leaf1 Eth1/1 sw-onyx Eth1/1 >"$T/l.json"
jq -e '.a.kind == "target" and .b.kind == "target"
       and ([.sources[] | {source, reported_by}] | sort_by(.source)
            == [{source: "cli", reported_by: "sw-onyx"}, {source: "gnmi", reported_by: "leaf1"}])' \
  "$T/l.json" >/dev/null || { cat "$T/l.json" >&2; fail "switch link"; }
ok "leaf1 Eth1/1 - sw-onyx Eth1/1 is one link with both sources (gnmi from leaf1, cli from sw-onyx)"
jq -e '[.data.nodes[] | select(.name == "leaf1" and .kind == "target"
        and .chassis_id == "0c:42:a1:00:00:01" and .sys_name == "leaf1")] | length == 1' \
  "$T/topo.json" >/dev/null || { cat "$T/topo.json" >&2; fail "leaf1 node (its /lldp/state identity)"; }
ok "leaf1's own LLDP identity from /lldp/state"

# ---- a neighbour goes on each side
t0=$(date +%s.%N)
echo "delete /lldp/interfaces/interface[name=Eth1/3]/neighbors/neighbor[id=7]" >"$T/gnmi.ctl"
wait_for 30 "gpu02's link leaves after the gNMI delete" no_link leaf1 Eth1/3 gpu02 eth1
echo "gNMI delete: link gone after $(since "$t0") s"
has_link leaf1 Eth1/1 sw-onyx Eth1/1 || fail "the switch link went with the deleted neighbour"
ok "a neighbour deleted over gNMI (on_change delete) takes its link out"

t0=$(date +%s.%N)
write_onyx 0
wait_for 30 "gpu01's link leaves after the ONYX table lost it" no_link sw-onyx Eth1/2 gpu01 eth0
echo "ONYX table without gpu01: link gone after $(since "$t0") s"
has_link leaf1 Eth1/1 sw-onyx Eth1/1 || fail "the switch link went with the other neighbour"
ok "a neighbour gone from the ONYX table takes its link out at the next read"

curl -fsS "$URL/api/v1/targets" >"$T/targets.json"
jq -e '[.. | objects | select(has("lldp_reports")) | select(.lldp == true and .lldp_reports > 0)] | length == 1' \
  "$T/targets.json" >/dev/null || { cat "$T/targets.json" >&2; fail "gnmi lldp detail"; }
jq -e '[.. | objects | select(has("cli_lldp_reads")) | select(.cli_lldp == true and .cli_lldp_reads > 0)] | length == 1' \
  "$T/targets.json" >/dev/null || { cat "$T/targets.json" >&2; fail "cli lldp detail"; }
ok "both drivers' LLDP reads in /api/v1/targets"

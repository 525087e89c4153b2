#!/usr/bin/env bash
# The web view's topology and correlation panels in headless Chromium (Debian's
# `chromium`), against the real binary polling the simulated switch tor1 through a real
# snmpd, with a bearer token and a `topology:` block of static links: two spines, tor1
# and another leaf, two hosts; one host and one spine named with markup
# (`gpu"<script>…`, `spine<img src=x onerror=…>`), as an attacker-controlled LLDP
# sysName would be. Checked in the DOM Chromium renders:
#   - every node and link of /api/v1/topology is drawn, in its layer (spines top, leaves
#     middle, hosts bottom), the hostile names as text (no <img>, no second <script>);
#   - each port's state at the time chosen in the URL fragment (#at=): tor1 Eth1/13 is
#     congested a few seconds into a congestion of the simulator's that has ended since
#     (its queue depth and WRED drops depart from the quiet minute before), not
#     congested at a time before it nor at the latest samples; tor1's other ports are
#     paused (the simulator's pause frames rise on every port); the spines' and hosts'
#     ports, which nothing polls, have no data;
#   - a correlation result's propagation tree: /api/v1/correlate of a small proxy in
#     front of the daemon answers a canned result (no simulator here propagates pauses
#     from switch to switch) whose edges are out of order and one of which names a port
#     of a switch not on the map with markup in its name; the page rings the origin port
#     (tor1 Eth1/13), draws one arrow per edge between ports on the map with its hop,
#     and lists all five edges in onset order, the markup as text. Everything else the
#     proxy passes to the daemon unchanged (headers too, so the page's CSP applies).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
CHROMIUM=${CHROMIUM:-chromium}
command -v "$CHROMIUM" >/dev/null || fail "chromium missing (scripts/install-deps.sh installs it)"
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"

CONG=13
start_snmp_sim --cong-port "$CONG" --cong-tc 3
HTTP=$(free_tcp_port)
PROXY=$(free_tcp_port)
TOKEN="web-topo-$RANDOM$RANDOM"
printf '%s\n' "$TOKEN" >"$T/token"
HOST_EVIL='gpu"<script>alert(1)</script>'
SPINE_EVIL='spine<img src=x onerror=alert(2)>'
cat >"$T/fs.yaml" <<YML
listen: 127.0.0.1:$HTTP
http: { bearer_token_file: $T/token }
targets:
  - name: tor1
    address: 127.0.0.1
    snmp: { port: $PORT, community_file: $SNMP_COMMUNITY_FILE, interval: 1s, timeout: 700ms }
topology:
  links:
    - {a: {node: tor1, port: Eth1/1}, b: {node: '$SPINE_EVIL', port: Eth1/1}}
    - {a: {node: tor1, port: Eth1/2}, b: {node: spine2, port: Eth1/1}}
    - {a: {node: leaf2, port: Eth1/1}, b: {node: '$SPINE_EVIL', port: Eth1/2}}
    - {a: {node: leaf2, port: Eth1/2}, b: {node: spine2, port: Eth1/2}}
    - {a: {node: tor1, port: Eth1/$CONG}, b: {node: '$HOST_EVIL', port: mlx5_0}}
    - {a: {node: leaf2, port: Eth1/13}, b: {node: host2, port: mlx5_0}}
YML
start_fabricscope "$T/fs.yaml"
BASE="http://127.0.0.1:$HTTP"
wait_http "$BASE/healthz"
AUTH="Authorization: Bearer $TOKEN"

n=$(curl -fsS -H "$AUTH" "$BASE/api/v1/topology" | jq '.data.links | length')
[ "$n" = 6 ] || fail "/api/v1/topology has $n links, want the 6 configured"

# ---- a quiet baseline, then congestion on tor1 Eth1/13 (left on) ----
raw() { # raw SELECTOR: the last 5 minutes of the ring
  local now; now=$(date +%s)
  curl -fsS -H "$AUTH" --get "$BASE/api/v1/raw" --data-urlencode "match[]=$1" \
    --data-urlencode "start=$((now - 300))" --data-urlencode "end=$((now + 5))"
}
DEPTH="{__name__=~\"fabric_queue_depth_bytes|fabric_queue_depth_cells\",target=\"tor1\",interface=\"Eth1/$CONG\",tc=\"3\"}"
depth_times() { # "time value" lines of that queue's depth
  raw "$DEPTH" | jq -r '.data.result[0].values[]? | "\(.[0]) \(.[1])"'
}
quiet_samples() { [ "$(depth_times | awk '$2 == 0' | wc -l)" -ge 12 ]; }
wait_for 60 "12 quiet queue-depth samples of tor1 Eth1/$CONG" quiet_samples
T_QUIET=$(depth_times | awk '$2 == 0' | sed -n 10p | cut -d' ' -f1)
kill -USR2 "$SIM_PID" # congestion on: the queue fills 2000 cells/s, WRED drops rise
congested_samples() { [ "$(depth_times | awk '$2 > 0' | wc -l)" -ge 6 ]; }
wait_for 60 "6 congested queue-depth samples of tor1 Eth1/$CONG" congested_samples
kill -USR2 "$SIM_PID" # and off: the queue is empty at once, WRED drops stop
# The third congested sample: a few seconds in, the minute before it mostly quiet.
T_CONG=$(depth_times | awk '$2 > 0' | sed -n 3p | cut -d' ' -f1)
# Quiet again (so a page that showed the latest samples whatever the time chosen would
# not show the congestion at T_CONG).
quiet_again() { depth_times | awk -v c="$T_CONG" '$1 > c && $2 == 0' | grep -q .; }
wait_for 60 "tor1 Eth1/$CONG quiet again" quiet_again
ok "tor1 Eth1/$CONG quiet at $T_QUIET, congested at $T_CONG, quiet again since"

# ---- a proxy whose /api/v1/correlate answers a canned propagation tree ----
cat >"$T/proxy.py" <<'PY'
import http.server, json, sys, urllib.error, urllib.request

port, base, t0, host_evil, spine_evil = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]


def ref(target, interface, metric, kind, direction="", priority="", tc=""):
    r = {"target": target, "interface": interface, "tc": tc, "rule": "", "metric": metric,
         "kind": kind}
    if direction:
        r["direction"] = direction
        r["priority"] = priority
    return r


ORIGIN = ref("tor1", "Eth1/13", "fabric_queue_depth_bytes", "depth", tc="3")
TOR_TX = ref("tor1", "Eth1/1", "fabric_pfc_pause_frames_total", "pfc", "tx", "3")
SP_RX = ref(spine_evil, "Eth1/1", "fabric_pfc_pause_frames_total", "pfc", "rx", "3")
SP_TX = ref(spine_evil, "Eth1/2", "fabric_pfc_pause_frames_total", "pfc", "tx", "3")
L2_RX = ref("leaf2", "Eth1/1", "fabric_pfc_pause_frames_total", "pfc", "rx", "3")
OFF = ref("tor9", "Eth<img src=y onerror=alert(3)>", "fabric_pfc_pause_frames_total", "pfc",
          "rx", "3")


def edge(series, by, onset, hop):
    e = dict(series)
    e.update({"paused_by": by, "onset": round(t0 + onset, 6), "hop": hop})
    return e


# Out of onset order on purpose: the page sorts them.
TREE = [edge(SP_TX, SP_RX, 0.5, 3), edge(TOR_TX, ORIGIN, 0.1, 1), edge(OFF, TOR_TX, 0.35, 2),
        edge(L2_RX, SP_TX, 0.8, 4), edge(SP_RX, TOR_TX, 0.3, 2)]
CORRELATE = {"status": "success", "data": {
    "start": t0 - 900, "end": t0 + 60, "kind": "nccl", "slow": "p99", "events_considered": 1,
    "events_at_dump_time_left_out": 0, "windows": 1, "series_scanned": 40,
    "series_departing": 5, "summary": [],
    "events": [{"host": host_evil, "kind": "nccl", "name": "AllReduce",
                "start": t0, "end": t0 + 2,
                "suspects": [dict(ORIGIN, peak=1e6, baseline=0, z=40, peak_time=t0 + 1,
                                  evidence=0.9, explained=False, lag_ms=0,
                                  clock_uncertainty_ms=1)],
                "propagation": TREE, "propagation_total": len(TREE),
                "other_host_events": [], "other_host_events_total": 0}],
    "events_listed": 1, "clocks": []}}


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.split("?")[0] == "/api/v1/correlate":
            body = json.dumps(CORRELATE).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        req = urllib.request.Request(base + self.path)
        for h in ("Authorization", "Accept"):
            if self.headers.get(h):
                req.add_header(h, self.headers[h])
        try:
            r = urllib.request.urlopen(req, timeout=30)
        except urllib.error.HTTPError as e:
            r = e
        body = r.read()
        self.send_response(r.status if hasattr(r, "status") else r.code)
        for k, v in r.headers.items():
            if k.lower() not in ("date", "server", "content-length", "connection",
                                 "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), H).serve_forever()
PY
$PY "$T/proxy.py" "$PROXY" "$BASE" "$T_CONG" "$HOST_EVIL" "$SPINE_EVIL" 2>"$T/proxy.log" &
track $!
wait_http "http://127.0.0.1:$PROXY/healthz"

# ---- the page in headless Chromium ----
browse() { # one fresh Chromium run, as test_web_view.sh does
  local prof rc=0; prof=$(mktemp -d "$T/chromium.XXXXXX")
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$prof" --window-size=1400,1600 --virtual-time-budget=10000 \
    --enable-logging=stderr --v=0 "$@" 2>"$T/chromium-last.log" || rc=$?
  cat "$T/chromium-last.log" >>"$T/chromium.log"
  return $rc
}
console_errors() {
  grep 'CONSOLE' "$T/chromium-last.log" |
    grep -v 'Failed to load resource: the server responded with a status of 404' || true
}

cat >"$T/check_topo.py" <<'PY'
import sys
from html.parser import HTMLParser

path, mode, cong_port, host_evil, spine_evil = sys.argv[1:6]
want_cong = sys.argv[6] if len(sys.argv) > 6 else ""


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.body = {}
        self.svg = None
        self.nodes = {}        # name -> layer
        self.node_titles = {}  # name -> title text
        self.labels = []       # node label texts
        self.ports = {}        # (node, port) -> state
        self.links = 0
        self.edges = []        # (hop, from, to)
        self.origin = None
        self.items = []        # propagation list: [hop, onset, text]
        self.scripts = 0
        self.imgs = 0
        self.selected = 0
        self.cur_node = None
        self.text_to = None    # list to append data to
        self.stack = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        self.stack.append((tag, self.text_to))
        if tag == "body":
            self.body = a
        if tag == "script":
            self.scripts += 1
        if tag == "img":
            self.imgs += 1
        if tag == "svg" and "topology" in cls:
            self.svg = a
        if tag == "g" and "topo-node" in cls:
            self.cur_node = a.get("data-name")
            self.nodes[self.cur_node] = a.get("data-layer")
        if tag == "text" and "node-label" in cls:
            self.labels.append("")
            self.text_to = ("label", len(self.labels) - 1)
        if tag == "title" and self.cur_node is not None and self.stack[-2:-1] and \
                self.stack[-2][0] == "g":
            self.node_titles[self.cur_node] = ""
            self.text_to = ("title", self.cur_node)
        if tag == "line" and "link" in cls:
            self.links += 1
        if tag == "circle" and "port" in cls:
            self.ports[(a.get("data-node"), a.get("data-port"))] = a.get("data-state")
        if tag == "circle" and "origin-ring" in cls:
            self.origin = (a.get("data-node"), a.get("data-port"))
        if tag == "path" and "prop-edge" in cls:
            self.edges.append((int(a.get("data-hop")), a.get("data-from"), a.get("data-to")))
        if tag == "li" and "prop-item" in cls:
            self.items.append([int(a.get("data-hop")), float(a.get("data-onset")), ""])
            self.text_to = ("item", len(self.items) - 1)
        if tag == "div" and "corr-event" in cls and "selected" in cls:
            self.selected += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_endtag(self, tag):
        while self.stack:
            t, prev = self.stack.pop()
            if t == "g" and tag == "g":
                self.cur_node = None
            if t == tag:
                self.text_to = prev
                break

    def handle_data(self, data):
        if not self.text_to:
            return
        kind, k = self.text_to
        if kind == "label":
            self.labels[k] += data
        elif kind == "title":
            self.node_titles[k] += data
        elif kind == "item":
            self.items[k][2] += data


d = Dom()
d.feed(open(path, encoding="utf-8").read())
p = []
if d.body.get("data-ready") != "1":
    p.append("the page has not finished its first load")
if d.svg is None:
    p.append("no topology drawing (svg.topology)")
want_nodes = {spine_evil: "0", "spine2": "0", "tor1": "1", "leaf2": "1", host_evil: "2",
              "host2": "2"}
if d.nodes != want_nodes:
    p.append("nodes and layers %r, want %r" % (d.nodes, want_nodes))
if d.links != 6 or (d.svg or {}).get("data-links") != "6":
    p.append("%d links drawn, want 6" % d.links)
for name in (host_evil, spine_evil):
    if not (d.node_titles.get(name) or "").startswith(name + " ("):
        p.append("node %r has no title naming it as text: %r" % (name, d.node_titles.get(name)))
    if not any(name.startswith(l.rstrip("…")) and l for l in d.labels):
        p.append("no label shows %r as text: %r" % (name, d.labels))
if d.imgs or d.scripts != 1:
    p.append("markup from a name became elements: %d <img>, %d <script>" % (d.imgs, d.scripts))
if len(d.ports) != 12:
    p.append("%d port dots, want 12: %r" % (len(d.ports), d.ports))
for (node, port), st in d.ports.items():
    if node != "tor1" and st != "nodata":
        p.append("%s %s (not polled) is %r, want nodata" % (node, port, st))
if mode == "states":
    st = d.ports.get(("tor1", "Eth1/" + cong_port))
    if want_cong == "congested" and st != "congested":
        p.append("tor1 Eth1/%s is %r at the congested time, want congested" % (cong_port, st))
    if want_cong == "not-congested" and st in (None, "congested", "nodata"):
        p.append("tor1 Eth1/%s is %r out of the congestion" % (cong_port, st))
    for port in ("Eth1/1", "Eth1/2"):
        if d.ports.get(("tor1", port)) != "paused":
            p.append("tor1 %s is %r, want paused" % (port, d.ports.get(("tor1", port))))
if mode == "tree":
    want_edges = sorted([(1, "tor1 Eth1/13", "tor1 Eth1/1"),
                         (2, "tor1 Eth1/1", spine_evil + " Eth1/1"),
                         (3, spine_evil + " Eth1/1", spine_evil + " Eth1/2"),
                         (4, spine_evil + " Eth1/2", "leaf2 Eth1/1")])
    if sorted(d.edges) != want_edges or (d.svg or {}).get("data-propagation") != "4":
        p.append("arrows %r, want %r" % (sorted(d.edges), want_edges))
    if d.origin != ("tor1", "Eth1/13"):
        p.append("origin ring at %r, want tor1 Eth1/13" % (d.origin,))
    hops = [i[0] for i in d.items]
    onsets = [i[1] for i in d.items]
    if hops != [1, 2, 2, 3, 4] or onsets != sorted(onsets):
        p.append("propagation list hops %r onsets %r, want 5 edges by onset" % (hops, onsets))
    if not any("tor9 Eth<img src=y onerror=alert(3)>" in i[2] for i in d.items):
        p.append("the edge off the map is not listed with its name as text: %r"
                 % [i[2] for i in d.items])
    if d.selected != 1:
        p.append("%d correlation results marked chosen, want 1" % d.selected)
if p:
    print("; ".join(p))
    sys.exit(1)
print("%d nodes in layers %s, %d links, %d ports (tor1: %s)%s" % (
    len(d.nodes), sorted(set(d.nodes.values())), d.links, len(d.ports),
    ", ".join("%s %s" % (k[1], v) for k, v in sorted(d.ports.items()) if k[0] == "tor1"),
    "; arrows %s, list hops %s" % ([e[0] for e in sorted(d.edges)], [i[0] for i in d.items])
    if mode == "tree" else ""))
PY

load_until_ok() { # load_until_ok URL MODE [WANT-CONG]
  local until=$((SECONDS + 90)) out
  while :; do
    browse --dump-dom "$1" >"$T/dom.html" || true
    if out=$($PY "$T/check_topo.py" "$T/dom.html" "$2" "$CONG" "$HOST_EVIL" "$SPINE_EVIL" \
      "${3:-}" 2>&1); then
      echo "$out"
      return 0
    fi
    [ $SECONDS -lt $until ] || fail "the page in Chromium ($2 ${3:-}): $out (DOM in $T/dom.html)"
    sleep 1
  done
}

summary=$(load_until_ok "$BASE/#at=$T_CONG&token=$TOKEN" states congested)
errs=$(console_errors)
[ -z "$errs" ] || fail "the page logged to the console: $errs"
ok "topology at the congested time: $summary; nothing on the console"
summary=$(load_until_ok "$BASE/#at=$T_QUIET&token=$TOKEN" states not-congested)
ok "topology before the congestion: $summary"
summary=$(load_until_ok "$BASE/#token=$TOKEN" states not-congested)
ok "topology at the latest samples, after the congestion: $summary"
summary=$(load_until_ok "http://127.0.0.1:$PROXY/#token=$TOKEN" tree)
errs=$(console_errors)
[ -z "$errs" ] || fail "the page logged to the console: $errs"
ok "propagation tree of the correlation result: $summary"

ART=$FS_BUILD_DIR/test-artifacts
mkdir -p "$ART"
rm -f "$ART/web_topology.png"
browse --screenshot="$ART/web_topology.png" "http://127.0.0.1:$PROXY/#token=$TOKEN" >/dev/null
[ "$(head -c 8 "$ART/web_topology.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "no PNG screenshot at $ART/web_topology.png"
ok "screenshot saved: $ART/web_topology.png"

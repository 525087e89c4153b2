#!/usr/bin/env bash
# A slow resolver cannot hold up the ONYX driver's one I/O thread. fabricscope runs in a
# mount namespace whose /etc/resolv.conf names a real DNS server on loopback
# (slow_dns.py, port 53) that answers the switch names below only after a delay; glibc's
# own resolver asks it. One simulator (a real sshd) serves every target.
#   - fast (127.0.0.1, 1 s interval) keeps its cadence while slow's name (answered after
#     6 s) is being looked up: every poll observed succeeds and no two are further apart
#     than the interval + 1 s;
#   - slow comes up once its name is answered (the lookup really went through the DNS);
#   - a target whose lookup hangs (60 s) is removed by a reload at once: the reload is
#     logged and the target gone from /api/v1/targets within 3 s of the SIGHUP, while the
#     lookup is still unanswered.
source "$(dirname "$0")/lib.sh"

[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
onyx_sim_prereqs
command -v unshare >/dev/null || fail "needs unshare (util-linux)"
SCEN=$T/scenario.json
echo '{"ports": 4, "onyx_faults": {}}' >"$SCEN"
chmod 0644 "$SCEN"
start_onyx_sim cli --scenario "$SCEN"

# The DNS server, on a loopback address of its own.
DNS_ADDR=127.0.0.83
ss -Hlun "src $DNS_ADDR:53" | grep -q . && fail "$DNS_ADDR:53 is taken"
$PY "$FS_SOURCE_DIR/tests/integration/slow_dns.py" --listen "$DNS_ADDR" --log "$T/dns.log" \
  slow-leaf.fs-test=6 hung-leaf.fs-test=60 >"$T/dns-server.log" 2>&1 &
track $!
wait_for 10 "the DNS server is ready" grep -q '^ready' "$T/dns.log"
# attempts:1 and a long timeout: one query per name, answered when the server says so.
printf 'nameserver %s\noptions timeout:30 attempts:1\n' "$DNS_ADDR" >"$T/resolv.conf"
cat >"$T/ns-fabricscope" <<'EOF'
#!/usr/bin/env bash
# fabricscope with its own /etc/resolv.conf (a private mount namespace; same pid).
resolv=$1 bin=$2
shift 2
exec unshare -m -- bash -c 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' ns "$resolv" "$bin" "$@"
EOF
chmod +x "$T/ns-fabricscope"
# Proof that the namespace sees the slow resolver (and that the host does not change).
"$T/ns-fabricscope" "$T/resolv.conf" cat /etc/resolv.conf | grep -q "$DNS_ADDR" ||
  fail "the mount namespace does not see the test's resolv.conf"
grep -q "$DNS_ADDR" /etc/resolv.conf && fail "the host's resolv.conf was changed"

# The simulator's key under each name the targets use.
KEY=$(cut -d' ' -f2- "$ONYX_KNOWN_HOSTS")
{
  cat "$ONYX_KNOWN_HOSTS"
  echo "[slow-leaf.fs-test]:$ONYX_SSH_PORT $KEY"
  echo "[hung-leaf.fs-test]:$ONYX_SSH_PORT $KEY"
} >"$T/known_hosts"

HTTP=$(free_tcp_port)
target() { # target NAME ADDRESS
  cat <<EOF
  - name: $1
    address: $2
    cli: { port: $ONYX_SSH_PORT, username: $ONYX_SSH_USER, password_file: $ONYX_PASSWORD_FILE,
           known_hosts: $T/known_hosts, interval: 1s }
EOF
}
write_cfg() { # write_cfg "NAME ADDRESS" ...
  {
    echo "listen: 127.0.0.1:$HTTP"
    echo "targets:"
    for t in "$@"; do
      # shellcheck disable=SC2086
      target $t
    done
  } >"$T/fs.yaml.tmp"
  mv "$T/fs.yaml.tmp" "$T/fs.yaml"
}
write_cfg "fast 127.0.0.1" "slow slow-leaf.fs-test" "hung hung-leaf.fs-test"
"$FABRICSCOPE" --check-config "$T/fs.yaml" >/dev/null || fail "config refused"

# Watches /api/v1/targets every 100 ms: one line per poll of fast seen (its time, its
# consecutive failures and last error), until told to stop.
cat >"$T/watch.py" <<'EOF'
import json, os, sys, time, urllib.request
url, out, stop = sys.argv[1:4]
seen = None
with open(out, "w") as f:
    while not os.path.exists(stop):
        try:
            rows = json.load(urllib.request.urlopen(url, timeout=2))["data"]
        except Exception:
            time.sleep(0.1)
            continue
        for r in rows:
            if r.get("target") == "fast" and r.get("last_poll_unix") and r["last_poll_unix"] != seen:
                seen = r["last_poll_unix"]
                f.write("poll %.6f %d %s\n" % (seen, r.get("consecutive_failures", -1),
                                              json.dumps(r.get("last_error", ""))))
                f.flush()
        time.sleep(0.1)
EOF

write_cfg "fast 127.0.0.1"
"$T/ns-fabricscope" "$T/resolv.conf" "$FABRICSCOPE" -c "$T/fs.yaml" >"$T/fabricscope.log" 2>&1 &
FS_PID=$!
track "$FS_PID"
wait_http "http://127.0.0.1:$HTTP/healthz" 20
$PY "$T/watch.py" "http://127.0.0.1:$HTTP/api/v1/targets" "$T/polls.txt" "$T/watch.stop" &
WATCH=$!
track "$WATCH"

api() { curl -fsS "http://127.0.0.1:$HTTP/api/v1/targets"; }
target_up() { api | $PY -c '
import json, sys
rows = json.load(sys.stdin)["data"]
sys.exit(0 if any(r.get("target") == sys.argv[1] and r.get("state") == "up" for r in rows) else 1)' "$1"; }

wait_for 30 "fast is up" target_up fast
# A few good polls of fast first, then slow joins: its lookup starts on a running session.
wait_for 30 "4 polls of fast seen" eval '[ "$(grep -c "^poll" "$T/polls.txt")" -ge 4 ]'
write_cfg "fast 127.0.0.1" "slow slow-leaf.fs-test"
hup
wait_for 20 "the DNS server got slow's query" grep -q '^query slow-leaf.fs-test A' "$T/dns.log"
wait_for 20 "the DNS server answered slow's query" grep -q '^answer slow-leaf.fs-test A' "$T/dns.log"
wait_for 30 "slow is up (its name resolved through the DNS)" target_up slow
touch "$T/watch.stop"
wait_exit "$WATCH" 10

# fast's polls from a second before slow's query to a second after its answer.
$PY - "$T/dns.log" "$T/polls.txt" <<'EOF' || fail "fast lost its cadence while slow's name was looked up: $(cat "$T/polls.txt")"
import sys
dns = [l.split() for l in open(sys.argv[1])]
q = min(float(l[3]) for l in dns if l[0] == "query" and l[1] == "slow-leaf.fs-test")
a = max(float(l[3]) for l in dns if l[0] == "answer" and l[1] == "slow-leaf.fs-test")
polls = [l.split() for l in open(sys.argv[2]) if l.startswith("poll ")]
win = [p for p in polls if q - 1.0 <= float(p[1]) <= a + 1.0]
print("lookup %.2f s; fast: %d polls in it" % (a - q, len(win)))
if a - q < 5.5:
    sys.exit("the lookup took %.2f s, not the server's 6 s" % (a - q))
bad = [p for p in win if p[2] != "0"]
if bad:
    sys.exit("fast failed during the lookup: %s" % bad[0])
# the whole window is covered: polls at both ends, none further apart than 2 s
edges = [q - 1.0] + [float(p[1]) for p in win] + [a + 1.0]
gaps = [y - x for x, y in zip(edges, edges[1:])]
print("largest gap %.2f s" % max(gaps))
if max(gaps) > 2.0:
    sys.exit("a gap of %.2f s in fast's polls (interval 1 s)" % max(gaps))
EOF
# The lookup took the server's 6 s: fast's polls above covered it.
ok "fast kept its 1 s cadence (every poll good, no gap beyond 2 s) while slow's name took 6 s to resolve; slow then came up"

# ---- removal while a lookup hangs
write_cfg "fast 127.0.0.1" "slow slow-leaf.fs-test" "hung hung-leaf.fs-test"
hup
wait_for 20 "the DNS server got hung's query" grep -q '^query hung-leaf.fs-test A' "$T/dns.log"
listed() { api | grep -q "\"target\":[ ]*\"$1\""; }
listed hung || fail "hung is not in /api/v1/targets after the reload that added it"
write_cfg "fast 127.0.0.1" "slow slow-leaf.fs-test"
t0=$(date +%s.%N)
hup
gone() { ! listed hung; }
wait_for 3 "hung removed from /api/v1/targets" gone
t1=$(date +%s.%N)
grep -q '^answer hung-leaf.fs-test' "$T/dns.log" && fail "hung's lookup was answered: the removal did not happen during it"
target_up fast || fail "fast is not up after hung's removal"
ok "a target whose lookup hangs was removed by a reload in $($PY -c "print('%.2f' % ($t1 - $t0))") s, its lookup still unanswered"

kill -TERM "$FS_PID"
wait_exit "$FS_PID" 10
ok "fabricscope stops with a lookup still hanging"

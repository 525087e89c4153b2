#!/usr/bin/env bash
# The ONYX CLI driver's known_hosts handling against the ONYX simulator behind a REAL
# OpenSSH sshd (tests/sim/onyx/start-onyx-sim.sh), through build/tests/fs-onyx-poll:
#   a known_hosts file with a line that cannot be parsed is refused whole, for every
#   target that uses it, under both policies: the error names the file and the line, no
#   login happens and the file is left as it was (libssh2 alone stops at that line, so
#   the hosts after it would look unknown, and accept-new would record them);
#   accept-new appends one line for a new host and keeps every other byte of the file
#   (comments, blank lines, host lists, tabs, hashed names, a last line without newline),
#   its mode too, and leaves no temporary file behind; the file it wrote is read back;
#   accept-new refuses a host that already has a key, of the same type (changed key) or of
#   another type, and leaves the file unchanged;
#   a known_hosts that cannot be read (a directory) is an error, not an empty list;
#   a @revoked / @cert-authority marker line is refused (libssh2 does not know markers),
#   and so is a line libssh2 accepts but takes no host from (a name of 1-2 characters);
#   a line longer than libssh2's 4 KiB read buffer is read whole.
# (The changed-key rotation under both policies is in test_onyx_sim.sh.)
source "$(dirname "$0")/lib.sh"

POLL=$FS_BUILD_DIR/tests/fs-onyx-poll
[ -x "$POLL" ] || fail "build fs-onyx-poll first"
onyx_sim_prereqs
SCEN=$T/scenario.json
echo '{"ports": 8, "onyx_faults": {}}' >"$SCEN"
start_onyx_sim main --scenario "$SCEN"
SIM_ENTRY=$(cat "$ONYX_KNOWN_HOSTS") # [127.0.0.1]:PORT ssh-ed25519 KEY
SIM_KEY=$(awk '{print $3}' "$ONYX_KNOWN_HOSTS")
[ "$(awk '{print $2}' "$ONYX_KNOWN_HOSTS")" = ssh-ed25519 ] || fail "the simulator's host key is not ed25519"

# Keys of other hosts (and another ed25519 and an RSA key for the simulator's own name).
for k in ed1 ed2 rsa ecdsa; do
  case $k in ed*) t=ed25519 ;; rsa) t=rsa ;; ecdsa) t=ecdsa ;; esac
  ssh-keygen -q -t "$t" -N '' -f "$T/$k"
done
pub() { cut -d' ' -f1,2 "$T/$1.pub"; }
# An OpenSSH hashed host name (HashKnownHosts) for 10.9.9.9.
HASHED=$($PY -c '
import base64, hashlib, hmac, os
salt = os.urandom(20)
h = hmac.new(salt, b"10.9.9.9", hashlib.sha1).digest()
print("|1|%s|%s" % (base64.b64encode(salt).decode(), base64.b64encode(h).decode()))')

logins() { grep -c "Accepted " "$T/main/sshd.log" || true; }
# kpoll NAME KNOWN_HOSTS [fs-onyx-poll args...]: one poll of the simulator with the password.
# That poll logs in and sets up the CLI session, which on a loaded machine can take longer
# than a poll's deadline: it gets a minute more for it (--login-ms), so that "ok" waits
# for a ready session instead of assuming a quick login.
kpoll() {
  local name=$1 kh=$2
  shift 2
  "$POLL" --port "$ONYX_SSH_PORT" --user "$ONYX_SSH_USER" --password-file "$ONYX_PASSWORD_FILE" \
    --known-hosts "$kh" --polls 1 --login-ms 60000 "$@" >"$T/$name.out" 2>"$T/$name.log" || true
}
result() { awk '$1=="poll" && $2==1 {sub("result=","",$3); print $3; exit}' "$T/$1.out"; }
summary_auth() { sed -n 's/^SUMMARY .* auth=\([0-9]*\) .*/\1/p' "$T/$1.out"; }

# ---------------------------------------------------------------- a line that cannot be parsed
# Line 3 lost its key (a hand edit cut short); the simulator's entry comes after it.
BAD=$T/bad_known_hosts
{
  echo "# switches"
  echo "leaf1.example.net $(pub ed1) leaf1"
  echo "leaf2.example.net ssh-ed25519"
  echo "$SIM_ENTRY"
} >"$BAD"
cp -p "$BAD" "$T/bad.orig"
for mode in strict accept-new; do
  extra=()
  [ $mode = accept-new ] && extra=(--accept-new)
  l0=$(logins)
  kpoll "bad-$mode" "$BAD" --targets 2 "${extra[@]}"
  [ "$(result "bad-$mode")" = auth ] || fail "unparseable known_hosts ($mode): $(result "bad-$mode")"
  [ "$(summary_auth "bad-$mode")" = 2 ] || fail "unparseable known_hosts ($mode): $(grep SUMMARY "$T/bad-$mode.out")"
  for tg in onyx0 onyx1; do
    grep -q "target $tg: known_hosts $BAD line 3 cannot be parsed: " "$T/bad-$mode.log" ||
      fail "unparseable known_hosts ($mode): $tg's error does not name the file and line: $(cat "$T/bad-$mode.log")"
  done
  [ "$(logins)" = "$l0" ] || fail "unparseable known_hosts ($mode): a login happened"
  cmp -s "$BAD" "$T/bad.orig" || fail "unparseable known_hosts ($mode): the file was changed: $(diff "$T/bad.orig" "$BAD")"
done
ok "a known_hosts line that cannot be parsed: every target fails naming file and line 3, no login, file unchanged (strict and accept-new)"

# A marker line: libssh2 would take "@revoked" for a host name and ignore the revocation.
printf '# revoked\n@revoked * %s\n%s\n' "$(pub ed1)" "$SIM_ENTRY" >"$T/marker_known_hosts"
l0=$(logins)
kpoll marker "$T/marker_known_hosts" --accept-new
[ "$(result marker)" = auth ] || fail "a marker line: $(result marker)"
grep -q "known_hosts $T/marker_known_hosts line 2 cannot be parsed: markers" "$T/marker.log" ||
  fail "a marker line is not named: $(cat "$T/marker.log")"
[ "$(logins)" = "$l0" ] || fail "a marker line: a login happened"
# A line libssh2 says yes to but takes no host from (libssh2 1.10 drops names of one or
# two characters): the host "sw" would look new.
printf '%s\nsw %s\n' "$SIM_ENTRY" "$(pub ed1)" >"$T/short_known_hosts"
kpoll short "$T/short_known_hosts"
[ "$(result short)" = auth ] || fail "a line libssh2 drops: $(result short)"
grep -q "known_hosts $T/short_known_hosts line 2 cannot be parsed: libssh2 takes no host" "$T/short.log" ||
  fail "a line libssh2 drops is not named: $(cat "$T/short.log")"
# A line longer than libssh2's own 4 KiB read buffer (a long host list) is one line.
names=$(seq -f 'leaf%03g.fabric.example.net' 1 250 | paste -sd,)
printf '%s %s\n%s\n' "$names" "$(pub ed1)" "$SIM_ENTRY" >"$T/long_known_hosts"
[ "$(head -1 "$T/long_known_hosts" | wc -c)" -gt 5000 ] || fail "the long line is not long"
kpoll long "$T/long_known_hosts"
[ "$(result long)" = ok ] || fail "a long known_hosts line: $(result long): $(tail -2 "$T/long.log")"
ok "a marker line, a line libssh2 takes no host from: refused naming them; a line past 4 KiB is read whole"

# ---------------------------------------------------------------- accept-new appends, keeps every byte
NEW=$T/kh/known_hosts
mkdir -p "$T/kh"
{
  printf '# fabric switches: managed by hand, keep this order\n'
  printf 'leaf1.example.net,10.1.0.1 %s leaf1 (rack 4)  spine side\n' "$(pub ed1)"
  printf '\n   \n'
  printf '[10.1.0.2]:2222\t%s\t\n' "$(pub rsa)"
  printf '%s %s\n' "$HASHED" "$(pub ecdsa)"
  printf '  # indented comment\n'
  printf '10.1.0.3 %s' "$(pub ed2)" # no newline at the end
} >"$NEW"
chmod 0640 "$NEW"
cp -p "$NEW" "$T/new.orig"
ino0=$(stat -c %i "$NEW")
l0=$(logins)
kpoll new "$NEW" --accept-new
[ "$(result new)" = ok ] || fail "accept-new of a new host: $(result new): $(tail -3 "$T/new.log")"
[ "$(logins)" = $((l0 + 1)) ] || fail "accept-new of a new host: no login"
size=$(stat -c %s "$T/new.orig")
cmp -s -n "$size" "$NEW" "$T/new.orig" || fail "accept-new changed the existing bytes: $(diff "$T/new.orig" "$NEW")"
added=$(tail -c +$((size + 1)) "$NEW")
[ "$added" = $'\n'"[127.0.0.1]:$ONYX_SSH_PORT ssh-ed25519 $SIM_KEY" ] ||
  fail "accept-new appended something else than a newline and one line: $(printf '%q' "$added")"
[ "$(tail -c 1 "$NEW" | od -An -c | tr -d ' ')" = '\n' ] || fail "the appended line does not end with a newline"
[ "$(stat -c %a "$NEW")" = 640 ] || fail "accept-new changed the mode: $(stat -c %a "$NEW")"
[ "$(stat -c %i "$NEW")" != "$ino0" ] || fail "accept-new rewrote the file in place (same inode): not renamed"
[ "$(find "$T/kh" -mindepth 1 | wc -l)" = 1 ] || fail "accept-new left files behind: $(ls -la "$T/kh")"
grep -q "recorded new host key" "$T/new.log" || fail "the new key was not logged"
# What was written is read back, and now matches even under strict.
cp -p "$NEW" "$T/new.after"
l0=$(logins)
kpoll new-strict "$NEW"
[ "$(result new-strict)" = ok ] || fail "strict on the file accept-new wrote: $(result new-strict): $(tail -3 "$T/new-strict.log")"
[ "$(logins)" = $((l0 + 1)) ] || fail "strict on the file accept-new wrote: no login"
cmp -s "$NEW" "$T/new.after" || fail "a matching host changed the file"
ok "accept-new appends one line and keeps every byte (comments, blank lines, host lists, tabs, hashed names), the mode, no temp file; read back"

# A symbolic link stays a link: the file it points to gets the new line.
mkdir -p "$T/real"
printf '# the real file\n' >"$T/real/known_hosts"
ln -s "$T/real/known_hosts" "$T/kh/link"
kpoll link "$T/kh/link" --accept-new
[ "$(result link)" = ok ] || fail "accept-new through a symlink: $(result link): $(tail -3 "$T/link.log")"
[ -L "$T/kh/link" ] || fail "accept-new replaced the symlink by a file"
[ "$(cat "$T/real/known_hosts")" = "# the real file"$'\n'"$SIM_ENTRY" ] ||
  fail "accept-new through a symlink: $(cat "$T/real/known_hosts")"
ok "accept-new through a symbolic link writes the file it points to"

# ---------------------------------------------------------------- a host that already has a key
# Another key of the same type (changed), or a key of another type: refused under
# accept-new too, the file unchanged, no login.
for case in changed othertype; do
  KH=$T/$case.known_hosts
  if [ $case = changed ]; then k=$(pub ed2); else k=$(pub rsa); fi
  printf '# %s\n[127.0.0.1]:%s %s\n' "$case" "$ONYX_SSH_PORT" "$k" >"$KH"
  cp -p "$KH" "$T/$case.orig"
  for mode in strict accept-new; do
    extra=()
    [ $mode = accept-new ] && extra=(--accept-new)
    l0=$(logins)
    kpoll "$case-$mode" "$KH" "${extra[@]}"
    [ "$(result "$case-$mode")" = auth ] || fail "$case key ($mode): $(result "$case-$mode")"
    [ "$(logins)" = "$l0" ] || fail "$case key ($mode): a login happened"
    cmp -s "$KH" "$T/$case.orig" || fail "$case key ($mode): the file was changed: $(diff "$T/$case.orig" "$KH")"
    if [ $case = changed ]; then
      grep -q "HOST KEY CHANGED.*$ONYX_HOSTKEY_FP" "$T/$case-$mode.log" ||
        fail "changed key ($mode) not logged: $(cat "$T/$case-$mode.log")"
    else
      grep -q "HOST KEY CHANGED .*known_hosts $KH has a ssh-rsa key .*the server presented a ssh-ed25519 key $ONYX_HOSTKEY_FP" \
        "$T/$case-$mode.log" || fail "key of another type ($mode) not logged as such: $(cat "$T/$case-$mode.log")"
    fi
  done
done
ok "a host with a key of the same or of another type: refused under strict and accept-new, file unchanged, no login"

# ---------------------------------------------------------------- unreadable
l0=$(logins)
kpoll dir "$T/kh" --accept-new
[ "$(result dir)" = auth ] || fail "a directory as known_hosts: $(result dir)"
grep -q "cannot read known_hosts $T/kh: Is a directory" "$T/dir.log" ||
  fail "a directory as known_hosts: $(cat "$T/dir.log")"
[ "$(logins)" = "$l0" ] || fail "a directory as known_hosts: a login happened"
ok "a known_hosts that cannot be read is an error (not an empty list)"

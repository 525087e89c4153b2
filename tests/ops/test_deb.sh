#!/usr/bin/env bash
# The Debian packages (CPack components of CMakeLists.txt's install rules), built from
# this build: fabricscope (the collector) and fabricscope-host-agent (the agent alone).
# For each:
# - its control: Depends taken from the libraries its binary links (dpkg-shlibdeps), one
#   package per library it needs (NEEDED; libc and the compiler runtime aside); its
#   configuration a conffile; the collector's postinst a script that creates its user;
#   Depends on init-system-helpers, a prerm that stops the service on remove and a
#   postrm that purges its enable links (the life cycle itself: deb-life-cycle.sh);
# - its files: the binary, its /etc/fabricscope/*.yaml, its unit (and the collector's
#   sysusers entry and examples), its man page; no file in both packages;
# - lintian: no error, and no no-manual-page;
# - unpacked into an empty directory, the packaged binary accepts the packaged
#   configuration (and the collector every packaged example whose drivers it has), and
#   each unit passes systemd-analyze verify with the packaged paths;
# - apt resolves both packages' dependencies on this machine (apt-get install --simulate).
# Installing them into a freshly bootstrapped root takes minutes and a Debian mirror:
# tests/ops/deb-clean-root.sh does that, outside ctest.
source "$(dirname "$0")/../integration/lib.sh"
AGENT=$FS_BUILD_DIR/fabricscope-host-agent
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
[ -x "$AGENT" ] || fail "build fabricscope-host-agent first"
command -v cpack >/dev/null || fail "needs cpack (cmake)"
command -v lintian >/dev/null || fail "needs lintian (scripts/install-deps.sh installs it)"
[ -f "$FS_BUILD_DIR/CPackConfig.cmake" ] || fail "no CPackConfig.cmake in $FS_BUILD_DIR"
(cd "$T" && cpack --config "$FS_BUILD_DIR/CPackConfig.cmake" -G DEB -B "$T/pkg") >"$T/cpack.log" 2>&1 ||
  fail "cpack: $(tail -n 5 "$T/cpack.log")"
DEB=$(ls "$T"/pkg/fabricscope_*.deb)
ADEB=$(ls "$T"/pkg/fabricscope-host-agent_*.deb)
[ -f "$DEB" ] || fail "no fabricscope package in $T/pkg"
[ -f "$ADEB" ] || fail "no fabricscope-host-agent package in $T/pkg"

# ---- control ----
# check_control DEB PACKAGE BINARY CONFFILE
check_control() {
  local deb=$1 name=$2 bin=$3 conf=$4 deps soname lib real pkg
  dpkg-deb -f "$deb" Package | grep -qx "$name" || fail "Package of $(basename "$deb") is not $name"
  deps=$(dpkg-deb -f "$deb" Depends)
  # The libraries the binary itself needs (NEEDED), where ldd finds them.
  for soname in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    lib=$(ldd "$bin" | awk -v s="$soname" '$1 == s && $3 ~ /^\// {print $3}')
    [ -n "$lib" ] || continue
    real=$(readlink -f "$lib")
    pkg=$(dpkg -S "$real" 2>/dev/null | head -n 1 | cut -d: -f1) ||
      pkg=$(dpkg -S "$lib" 2>/dev/null | head -n 1 | cut -d: -f1) || true
    [ -n "$pkg" ] || continue               # not from a package (a sanitizer runtime of a test build)
    case $pkg in libc6 | libgcc-s1 | gcc-*) continue ;; esac
    grep -qE "(^|, )$pkg( |,|$)" <<<"$deps" || fail "$name: Depends lacks $pkg (for $lib): $deps"
  done
  dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx "$conf" ||
    fail "$name: $conf is not a conffile"
  echo "$deps"
}
deps=$(check_control "$DEB" fabricscope "$FABRICSCOPE" /etc/fabricscope/fabricscope.yaml)
adeps=$(check_control "$ADEB" fabricscope-host-agent "$AGENT" /etc/fabricscope/host-agent.yaml)
ok "control: Depends from the linked libraries; the configurations are conffiles"
# The life cycle's maintainer scripts (run in a root by tests/ops/deb-life-cycle.sh):
# prerm stops the service on remove, postrm purges its enable links, with
# init-system-helpers' deb-systemd-invoke and deb-systemd-helper.
for pair in "$DEB fabricscope" "$ADEB fabricscope-host-agent"; do
  set -- $pair
  dpkg-deb -f "$1" Depends | grep -qE '(^|, )init-system-helpers( |,|$)' ||
    fail "$2: Depends lacks init-system-helpers"
  dpkg-deb --ctrl-tarfile "$1" | tar -xO ./prerm | grep -q "deb-systemd-invoke stop $2.service" ||
    fail "$2: no prerm stopping $2.service"
  dpkg-deb --ctrl-tarfile "$1" | tar -xO ./postrm | grep -q "deb-systemd-helper purge $2.service" ||
    fail "$2: no postrm purging $2.service's enable links"
done
ok "maintainer scripts: prerm stops each service on remove, postrm purges its links (init-system-helpers)"
ok "  fabricscope: $deps"
ok "  fabricscope-host-agent: $adeps"
# The agent alone: none of the drivers' libraries (net-snmp, libssh2, gRPC).
for lib in libsnmp libssh2 libgrpc; do
  ! grep -q "$lib" <<<"$adeps" || fail "fabricscope-host-agent depends on $lib: $adeps"
done
ok "fabricscope-host-agent depends on none of the drivers' libraries"

# ---- files ----
mkdir -p "$T/root" "$T/aroot"
dpkg-deb -x "$DEB" "$T/root"
dpkg-deb -x "$ADEB" "$T/aroot"
for f in usr/bin/fabricscope etc/fabricscope/fabricscope.yaml lib/systemd/system/fabricscope.service \
  usr/lib/sysusers.d/fabricscope.conf usr/share/doc/fabricscope/examples/full.yaml \
  usr/share/man/man1/fabricscope.1.gz; do
  [ -e "$T/root/$f" ] || fail "fabricscope lacks /$f"
done
for f in usr/bin/fabricscope-host-agent etc/fabricscope/host-agent.yaml \
  lib/systemd/system/fabricscope-host-agent.service usr/share/man/man1/fabricscope-host-agent.1.gz \
  usr/share/doc/fabricscope-host-agent/copyright; do
  [ -e "$T/aroot/$f" ] || fail "fabricscope-host-agent lacks /$f"
done
both=$(comm -12 <(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $6}' | sort) \
  <(dpkg-deb -c "$ADEB" | awk '$1 !~ /^d/ {print $6}' | sort))
[ -z "$both" ] || fail "files in both packages: $both"
"$T/root/usr/bin/fabricscope" --check-config "$T/root/etc/fabricscope/fabricscope.yaml" >/dev/null ||
  fail "the packaged binary refuses the packaged configuration"
n=0
for ex in "$T"/root/usr/share/doc/fabricscope/examples/*.yaml; do
  "$T/root/usr/bin/fabricscope" --check-config "$ex" >"$T/ex.out" 2>&1 ||
    grep -q "this build has no" "$T/ex.out" || fail "example $(basename "$ex") refused: $(cat "$T/ex.out")"
  n=$((n + 1))
done
# The packaged agent configuration with its token installed (a scratch copy: the token
# file and state_dir it names are the host's); --check-config refuses it without.
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$T/host-events.token"
sed "s|/etc/fabricscope/host-events.token|$T/host-events.token|; s|^state_dir: .*|state_dir: $T/astate|" \
  "$T/aroot/etc/fabricscope/host-agent.yaml" >"$T/agent-packaged.yaml"
grep -q "token_file: $T/host-events.token" "$T/agent-packaged.yaml" ||
  fail "the packaged agent configuration's token_file is not /etc/fabricscope/host-events.token"
"$T/aroot/usr/bin/fabricscope-host-agent" -c "$T/agent-packaged.yaml" --check-config \
  >"$T/agent-check.out" 2>&1 || fail "the packaged agent refuses its configuration: $(cat "$T/agent-check.out")"
# The units as packaged, their paths moved under the unpacked roots.
mkdir -p "$T/unit"
ln -s "$T/root/usr/bin/fabricscope" "$T/unit/fabricscope"
ln -s "$T/aroot/usr/bin/fabricscope-host-agent" "$T/unit/fabricscope-host-agent"
sed "s|/usr/bin/fabricscope|$T/unit/fabricscope|g" "$T/root/lib/systemd/system/fabricscope.service" \
  >"$T/unit/fabricscope.service"
sed "s|/usr/bin/fabricscope-host-agent|$T/unit/fabricscope-host-agent|g" \
  "$T/aroot/lib/systemd/system/fabricscope-host-agent.service" >"$T/unit/fabricscope-host-agent.service"
for u in fabricscope.service fabricscope-host-agent.service; do
  out=$(cd "$T/unit" && systemd-analyze verify "$u" 2>&1) || fail "systemd-analyze verify $u: $out"
done
ok "files: none in both; the binaries accept their packaged configurations and $n examples; the units verify"

# ---- lintian ----
for d in "$DEB" "$ADEB"; do
  name=$(dpkg-deb -f "$d" Package)
  lintian --tag-display-limit 0 "$d" >"$T/lintian-$name.txt" 2>&1 || true
  errors=$(grep -E '^E: ' "$T/lintian-$name.txt" || true)
  [ -z "$errors" ] || fail "lintian errors ($name): $errors"
  ! grep -q 'no-manual-page' "$T/lintian-$name.txt" || fail "lintian ($name): $(grep no-manual-page "$T/lintian-$name.txt")"
  ok "lintian $name: no error, a manual page ($(grep -cE '^W: ' "$T/lintian-$name.txt" || true) warnings: $(grep -E '^W: ' "$T/lintian-$name.txt" | sed "s/^W: $name: //" | tr '\n' ';'))"
done

# ---- dependencies resolve here ----
apt-get install --simulate -q "$DEB" "$ADEB" >"$T/apt.txt" 2>&1 ||
  fail "apt cannot install them: $(tail -n 5 "$T/apt.txt")"
ok "apt-get install --simulate resolves both packages' dependencies"

#!/usr/bin/env bash
# The Debian package (CPack, CMakeLists.txt's install rules), built from this build:
# - its control: Depends taken from the libraries the binary links (dpkg-shlibdeps), one
#   package per library it needs (NEEDED; libc and the compiler runtime aside); the configuration a conffile; postinst a
#   script that creates the user;
# - its files: the binary, /etc/fabricscope/fabricscope.yaml, the unit and sysusers entry,
#   the examples;
# - lintian: no error;
# - unpacked into an empty directory, the packaged binary accepts the packaged
#   configuration and every packaged example whose drivers it has, and its unit passes
#   systemd-analyze verify with the packaged paths;
# - apt resolves its dependencies on this machine (apt-get install --simulate).
# Installing it into a freshly bootstrapped root is not done here (it needs a Debian
# mirror and minutes): see the README.
source "$(dirname "$0")/../integration/lib.sh"
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
command -v cpack >/dev/null || fail "needs cpack (cmake)"
command -v lintian >/dev/null || fail "needs lintian (scripts/install-deps.sh installs it)"
[ -f "$FS_BUILD_DIR/CPackConfig.cmake" ] || fail "no CPackConfig.cmake in $FS_BUILD_DIR"
(cd "$T" && cpack --config "$FS_BUILD_DIR/CPackConfig.cmake" -G DEB -B "$T/pkg") >"$T/cpack.log" 2>&1 ||
  fail "cpack: $(tail -n 5 "$T/cpack.log")"
DEB=$(ls "$T"/pkg/fabricscope_*.deb)
[ -f "$DEB" ] || fail "no package in $T/pkg"

# ---- control ----
dpkg-deb -f "$DEB" Package | grep -qx fabricscope || fail "Package is not fabricscope"
deps=$(dpkg-deb -f "$DEB" Depends)
# The libraries the binary itself needs (NEEDED), where ldd finds them.
for soname in $(readelf -d "$FABRICSCOPE" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  lib=$(ldd "$FABRICSCOPE" | awk -v s="$soname" '$1 == s && $3 ~ /^\// {print $3}')
  [ -n "$lib" ] || continue
  real=$(readlink -f "$lib")
  pkg=$(dpkg -S "$real" 2>/dev/null | head -n 1 | cut -d: -f1) ||
    pkg=$(dpkg -S "$lib" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  [ -n "$pkg" ] || continue                 # not from a package (a sanitizer runtime of a test build)
  case $pkg in libc6 | libgcc-s1 | gcc-*) continue ;; esac
  grep -qE "(^|, )$pkg( |,|$)" <<<"$deps" || fail "Depends lacks $pkg (for $lib): $deps"
done
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | grep -qx /etc/fabricscope/fabricscope.yaml ||
  fail "the configuration is not a conffile"
ok "control: Depends from the linked libraries ($deps); the configuration is a conffile"

# ---- files ----
mkdir -p "$T/root"
dpkg-deb -x "$DEB" "$T/root"
for f in usr/bin/fabricscope etc/fabricscope/fabricscope.yaml lib/systemd/system/fabricscope.service \
  usr/lib/sysusers.d/fabricscope.conf usr/share/doc/fabricscope/examples/full.yaml; do
  [ -e "$T/root/$f" ] || fail "the package lacks /$f"
done
"$T/root/usr/bin/fabricscope" --check-config "$T/root/etc/fabricscope/fabricscope.yaml" >/dev/null ||
  fail "the packaged binary refuses the packaged configuration"
n=0
for ex in "$T"/root/usr/share/doc/fabricscope/examples/*.yaml; do
  "$T/root/usr/bin/fabricscope" --check-config "$ex" >"$T/ex.out" 2>&1 ||
    grep -q "this build has no" "$T/ex.out" || fail "example $(basename "$ex") refused: $(cat "$T/ex.out")"
  n=$((n + 1))
done
# The unit as packaged, its paths moved under the unpacked root.
mkdir -p "$T/unit"
ln -s "$T/root/usr/bin/fabricscope" "$T/unit/fabricscope"
sed "s|/usr/bin/fabricscope|$T/unit/fabricscope|g" "$T/root/lib/systemd/system/fabricscope.service" \
  >"$T/unit/fabricscope.service"
out=$(cd "$T/unit" && systemd-analyze verify fabricscope.service 2>&1) || fail "systemd-analyze verify: $out"
ok "files: the binary accepts the packaged configuration and $n examples; the unit verifies"

# ---- lintian ----
# Its only warning is no-manual-page (the --help text is the manual for now).
lintian --tag-display-limit 0 "$DEB" >"$T/lintian.txt" 2>&1 || true
errors=$(grep -E '^E: ' "$T/lintian.txt" || true)
[ -z "$errors" ] || fail "lintian errors: $errors"
ok "lintian: no error ($(grep -cE '^W: ' "$T/lintian.txt" || true) warnings: $(grep -E '^W: ' "$T/lintian.txt" | sed 's/^W: fabricscope: //' | tr '\n' ';'))"

# ---- dependencies resolve here ----
apt-get install --simulate -q "$DEB" >"$T/apt.txt" 2>&1 || fail "apt cannot install it: $(tail -n 5 "$T/apt.txt")"
ok "apt-get install --simulate resolves the package's dependencies"

#!/usr/bin/env bash
# A packager installs only the build dependencies: `scripts/install-deps.sh --build-only`
# names none of the test tools, every package it names is also in the full list, and
# `make package` installs those only (deps-build) and builds without the tests
# (FS_TESTS=OFF), apart from the developer's build. (That they suffice was checked by
# `make package` in a fresh debootstrap root; see the README.)
source "$(dirname "$0")/../integration/lib.sh"
S=$FS_SOURCE_DIR/scripts/install-deps.sh
build=$(bash "$S" --build-only --list) || fail "--build-only --list failed"
full=$(bash "$S" --list) || fail "--list failed"
[ -n "$build" ] || fail "--build-only --list printed nothing"
for p in $build; do grep -qx "$p" <<<"$full" || fail "$p is in --build-only but not in the full list"; done
for t in chromium tshark prometheus victoria-metrics snmpd pmacct nfdump-sflow lintian debootstrap libcmocka-dev lldpd clang linux-perf libpcap-dev; do
  ! grep -qx "$t" <<<"$build" || fail "--build-only installs the test tool $t"
done
for b in cmake gcc dpkg-dev file libgrpc-dev protobuf-c-compiler; do
  grep -qx "$b" <<<"$build" || fail "--build-only lacks $b"
done
recipe=$(make -s -C "$FS_SOURCE_DIR" -n package PKG_BUILD=/nonexistent 2>&1) || fail "make -n package: $recipe"
grep -q -- '--build-only' <<<"$recipe" || fail "make package does not use --build-only: $recipe"
grep -qE '^scripts/install-deps.sh *$' <<<"$recipe" && fail "make package installs the test tools: $recipe"
grep -q -- '-DFS_TESTS=OFF' <<<"$recipe" || fail "make package builds the tests: $recipe"
ok "--build-only: $(wc -w <<<"$build") of $(wc -w <<<"$full") packages; make package uses it, without the tests"

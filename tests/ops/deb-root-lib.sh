# shellcheck shell=bash
# Shared by tests/ops/deb-clean-root.sh and tests/ops/deb-systemd-boot.sh (sourced, not
# run): a fresh bookworm root from debootstrap with this machine's apt sources, and the
# two packages built from a build tree and installed there with apt-get. The caller
# defines fail and ok, and unmounts $R/proc in its exit trap (deb_root_install mounts it).
#
# FS_DEB_MIRROR picks the mirror (default: the first URIs of this machine's
# /etc/apt/sources.list.d/debian.sources). FS_DEB_ROOT_CACHE=DIR (e.g.
# /var/cache/fabricscope-test-roots) keeps a tar of each fresh debootstrap root there and
# starts from it when present (delete the tar for a new one); unset, every run
# debootstraps afresh.

deb_root_mirror() {
  local m
  m=${FS_DEB_MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)}
  echo "${m:-http://deb.debian.org/debian}"
}

# deb_root_packages BUILD OUTDIR: both .deb files of BUILD's CPack configuration in OUTDIR.
deb_root_packages() {
  local build=$1 out=$2
  [ -f "$build/CPackConfig.cmake" ] || fail "no CPackConfig.cmake in $build (configure and build first)"
  mkdir -p "$out"
  (cd "$out" && cpack --config "$build/CPackConfig.cmake" -G DEB -B "$out") >"$out/cpack.log" 2>&1 ||
    fail "cpack: $(tail -n 5 "$out/cpack.log")"
  ls "$out"/fabricscope_*.deb "$out"/fabricscope-host-agent_*.deb >/dev/null 2>&1 ||
    fail "cpack made no fabricscope and fabricscope-host-agent packages in $out"
}

# deb_root_bootstrap ROOT LOGDIR [INCLUDE]: `debootstrap --variant=minbase bookworm` into
# ROOT (with --include=INCLUDE, a comma-separated package list, if given); its apt
# sources are bookworm, bookworm-updates and bookworm-security as this machine has them
# (the packages' Depends come from the library versions the build linked), its
# resolv.conf this machine's.
deb_root_bootstrap() {
  local r=$1 logs=$2 include=${3:-} mirror tar start
  command -v debootstrap >/dev/null || fail "needs debootstrap (apt-get install debootstrap)"
  mirror=$(deb_root_mirror)
  start=$(date +%s)
  tar=""
  if [ -n "${FS_DEB_ROOT_CACHE:-}" ]; then
    tar=$FS_DEB_ROOT_CACHE/bookworm-minbase${include:+-${include//,/-}}.tar
  fi
  mkdir -p "$r"
  if [ -n "$tar" ] && [ -f "$tar" ]; then
    tar -C "$r" -xf "$tar" || fail "cannot unpack $tar"
    ok "bookworm root from the cached debootstrap $tar ($(date -r "$tar" -u +%FT%TZ))"
  else
    debootstrap --variant=minbase ${include:+--include="$include"} bookworm "$r" "$mirror" \
      >"$logs/debootstrap.log" 2>&1 || fail "debootstrap: $(tail -n 5 "$logs/debootstrap.log")"
    ok "debootstrap --variant=minbase${include:+ --include=$include} bookworm: $(( $(date +%s) - start )) s"
    # Nothing is mounted in the root yet: it is safe to archive.
    if [ -n "$tar" ]; then
      mkdir -p "$FS_DEB_ROOT_CACHE"
      tar -C "$r" -cf "$tar.part" . && mv "$tar.part" "$tar"
    fi
  fi
  cat >"$r/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
SOURCES
  cp /etc/resolv.conf "$r/etc/resolv.conf"
}

# deb_root_install ROOT PKGDIR LOGDIR: apt-get install of PKGDIR's two .deb files in ROOT
# (chroot, /proc mounted there and left mounted for the caller's next steps). Prints how
# many packages came in.
deb_root_install() {
  local r=$1 pkg=$2 logs=$3 before after t0 p
  mountpoint -q "$r/proc" || mount -t proc proc "$r/proc"
  mkdir -p "$r/tmp/pkg"
  cp "$pkg"/fabricscope_*.deb "$pkg"/fabricscope-host-agent_*.deb "$r/tmp/pkg/"
  before=$(chroot "$r" dpkg-query -W -f '${Package}\n' | wc -l)
  t0=$(date +%s)
  chroot "$r" apt-get update >"$logs/apt-update.log" 2>&1 || fail "apt-get update: $(tail -n 5 "$logs/apt-update.log")"
  DEBIAN_FRONTEND=noninteractive chroot "$r" sh -c 'apt-get install -y --no-install-recommends /tmp/pkg/*.deb' \
    >"$logs/apt-install.log" 2>&1 || fail "apt-get install: $(tail -n 10 "$logs/apt-install.log")"
  after=$(chroot "$r" dpkg-query -W -f '${Package}\n' | wc -l)
  for p in fabricscope fabricscope-host-agent; do
    chroot "$r" dpkg-query -W -f '${Status}\n' "$p" | grep -qx 'install ok installed' || fail "$p not installed"
  done
  rm -rf "$r/tmp/pkg"
  ok "apt-get install of both packages: $((after - before)) packages installed in $(( $(date +%s) - t0 )) s"
}

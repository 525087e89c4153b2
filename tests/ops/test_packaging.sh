#!/usr/bin/env bash
# Packaging, checked offline (no Docker engine needed: tests/ops/image-check.sh, make
# image-check, builds and runs the image; no systemd as PID 1 on the build machines):
# - docker/fabricscope.service: systemd-analyze verify says nothing (every key known,
#   every command executable), the hardening asked for is there, and
#   systemd-analyze security rates its exposure "OK" (at most 2.0 of 10).
# - docker/Dockerfile: multi-stage on bookworm, non-root, its build stage runs
#   scripts/install-deps.sh, and its runtime stage installs exactly the Debian packages
#   of the libraries build/fabricscope links (sanitizer and libc aside); the image ships
#   its configuration (0.0.0.0, bearer token) and the token entrypoint, cleans apt's
#   cache; .dockerignore keeps build trees and .git out of the context.
# - docker/compose.yaml: parses, has no top-level key docker-compose 1.29 refuses, its
#   simulator listens beyond loopback, has its services, and mounts only files that exist.
source "$(dirname "$0")/../integration/lib.sh"
FS_SOURCE_DIR=$(readlink -f "$FS_SOURCE_DIR")
D=$FS_SOURCE_DIR/docker
PY=/usr/bin/python3
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
FABRICSCOPE=$(readlink -f "$FABRICSCOPE") # systemd wants an absolute path

# ---- systemd ----
UNIT=$D/fabricscope.service
for want in '^User=fabricscope$' '^ProtectSystem=strict$' '^NoNewPrivileges=yes$' \
  '^CapabilityBoundingSet=$' '^AmbientCapabilities=$' '^ExecReload=/usr/bin/fabricscope --reload \$MAINPID$' \
  '^ProtectHome=yes$' '^PrivateTmp=yes$'; do
  grep -qE "$want" "$UNIT" || fail "fabricscope.service lacks $want"
done
grep -q '^u fabricscope ' "$D/fabricscope.sysusers" || fail "no sysusers entry for the user"
# verify needs the commands to exist: the unit as shipped, with the built binary.
# systemd splits ExecStart on spaces and the checkout's path may have one: the unit names
# a link to the binary in the scratch dir.
mkdir -p "$T/unit"
ln -s "$FABRICSCOPE" "$T/unit/fabricscope"
sed "s|/usr/bin/fabricscope|$T/unit/fabricscope|g" "$UNIT" >"$T/unit/fabricscope.service"
out=$(cd "$T/unit" && systemd-analyze verify fabricscope.service 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify complained: $out"
sec=$(cd "$T/unit" && systemd-analyze security --offline=true fabricscope.service 2>&1) ||
  fail "systemd-analyze security: $sec"
score=$(sed -n 's/.*Overall exposure level for fabricscope.service: \([0-9.]*\).*/\1/p' <<<"$sec")
[ -n "$score" ] || fail "no exposure score: $sec"
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "exposure $score > 2.0"
ok "fabricscope.service: verify clean, hardening present, exposure $score (systemd-analyze security)"

# ---- Dockerfile ----
DF=$D/Dockerfile
grep -qE '^FROM debian:bookworm AS build$' "$DF" || fail "build stage is not debian:bookworm"
grep -qE '^FROM debian:bookworm-slim AS runtime$' "$DF" || fail "runtime stage is not bookworm-slim"
grep -qE '^RUN scripts/install-deps.sh' "$DF" || fail "build stage does not run scripts/install-deps.sh"
grep -qE '^COPY --from=build /src/build/fabricscope /usr/bin/fabricscope$' "$DF" || fail "binary not copied from the build stage"
user=$(awk '/^FROM .* AS runtime/{r=1} r && /^USER /{u=$2} END{print u}' "$DF")
[ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ] || fail "runtime stage runs as '${user:-root}'"
# The runtime packages listed: the lines of the apt-get install of the runtime stage.
awk '/^FROM .* AS runtime/{r=1} r && /apt-get install/{i=1; next} i && /&&/{i=0} i {print $1}' "$DF" |
  tr -d '\\' | grep . | sort -u >"$T/docker-runtime.txt"
# The Debian package owning a library path.
pkg_of() {
  local real pkg
  real=$(readlink -f "$1")
  pkg=$(dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null) ||
    fail "no Debian package owns $real"
  echo "${pkg%%:*}"
}
skip='libasan[0-9]+|libubsan[0-9]+|libtsan[0-9]+|libc6|libgcc-s1|libstdc\+\+6'
# The packages of the libraries the binary links directly (NEEDED) and uses: all must be
# listed. (A sanitizer build links some without --as-needed; `ldd -u` names those unused.)
ldd -u -r "$FABRICSCOPE" 2>/dev/null | awk '$1 ~ /^\// {print $1}' >"$T/unused.txt" || true
for lib in $(readelf -d "$FABRICSCOPE" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  path=$(ldd "$FABRICSCOPE" | awk -v l="$lib" '$1 == l {print $3}')
  [ -n "$path" ] || fail "ldd does not resolve $lib"
  grep -qxF "$path" "$T/unused.txt" && continue
  pkg_of "$path"
done | sort -u | grep -vxE "$skip" >"$T/needed.txt"
# Every library loaded at all (NEEDED ones and theirs): nothing outside it may be listed.
# (Which libraries are direct depends on the build: a sanitizer build links gRPC's own
# dependencies directly, an optimized one through libgrpc.)
ldd "$FABRICSCOPE" | awk '$3 ~ /^\// {print $3}' | while read -r path; do pkg_of "$path"; done |
  sort -u | grep -vxE "$skip" >"$T/loaded.txt"
# ca-certificates: TLS to gNMI targets and remote_write receivers verifies against it.
missing=$(comm -23 "$T/needed.txt" <(grep -vx ca-certificates "$T/docker-runtime.txt"))
extra=$(comm -13 "$T/loaded.txt" <(grep -vx ca-certificates "$T/docker-runtime.txt"))
[ -z "$missing" ] || fail "Dockerfile runtime stage lacks: $(echo $missing)"
[ -z "$extra" ] || fail "Dockerfile runtime stage installs what fabricscope does not link: $(echo $extra)"
grep -qx ca-certificates "$T/docker-runtime.txt" || fail "no ca-certificates in the runtime stage"
ok "Dockerfile: multi-stage bookworm, user $user, runtime packages: every library the binary links, nothing it does not load ($(wc -l <"$T/docker-runtime.txt"))"
# The image runs as shipped: its configuration and entrypoint are copied in, and apt's
# package cache (kept by a base without Docker's docker-clean hook) goes in the same layer.
grep -qE '^COPY docker/fabricscope-container.yaml /etc/fabricscope/fabricscope.yaml$' "$DF" ||
  fail "the runtime stage ships no configuration"
grep -qE '^ENTRYPOINT \["/usr/local/bin/fabricscope-entrypoint"\]$' "$DF" || fail "entrypoint is not the token script"
awk '/^FROM .* AS runtime/{r=1} r && /apt-get clean/{c=1} END{exit !c}' "$DF" || fail "runtime stage keeps apt's cache"
grep -qE '^listen: 0\.0\.0\.0:9464$' "$D/fabricscope-container.yaml" || fail "the image's configuration does not listen on 0.0.0.0:9464"
grep -qE '^  bearer_token_file: /run/secrets/fabricscope-token$' "$D/fabricscope-container.yaml" ||
  fail "the image's configuration asks no bearer token"
"$FABRICSCOPE" --check-config "$D/fabricscope-container.yaml" >/dev/null || fail "docker/fabricscope-container.yaml refused"
sh -n "$D/entrypoint.sh" || fail "docker/entrypoint.sh does not parse"
# The build context: a host build tree (its CMakeCache.txt names the host's path) and .git
# must stay out of it.
for want in .git build 'build-*'; do
  grep -qxF "$want" "$FS_SOURCE_DIR/.dockerignore" || fail ".dockerignore lacks $want"
done
ok "image: ships docker/fabricscope-container.yaml (0.0.0.0, bearer token; valid) and the token entrypoint; apt cache cleaned; .dockerignore"

# ---- compose ----
"$PY" - "$D/compose.yaml" "$D" <<'PY' || fail "compose.yaml"
import os, sys, yaml
path, base = sys.argv[1], sys.argv[2]
c = yaml.safe_load(open(path))
svcs = c["services"]
want = {"gnmi-sim", "fabricscope", "prometheus", "grafana"}
assert want <= set(svcs), f"services: {sorted(svcs)}"
# Debian's docker-compose 1.29 refuses any other top-level key (`name:` among them).
extra = set(c) - {"services", "networks", "volumes", "secrets", "configs"}
assert all(k.startswith("x-") for k in extra), f"top-level keys docker-compose 1.29 refuses: {sorted(extra)}"
# The collector runs in another container: the simulator must not listen on loopback only.
cmd = svcs["gnmi-sim"]["command"]
assert "--bind" in cmd and cmd[cmd.index("--bind") + 1] in ("0.0.0.0", "::"), f"gnmi-sim binds loopback: {cmd}"
for name, s in svcs.items():
    assert "image" in s or "build" in s, f"{name}: neither image nor build"
    if "build" in s:
        ctx = os.path.normpath(os.path.join(base, s["build"]["context"]))
        df = os.path.join(ctx, s["build"]["dockerfile"])
        assert os.path.isfile(df), f"{name}: no {df}"
        target = s["build"].get("target")
        assert target is None or f" AS {target}\n" in open(df).read(), f"{name}: no stage {target}"
    for d in s.get("depends_on", []):
        assert d in svcs, f"{name} depends on unknown {d}"
    for v in s.get("volumes", []):
        src = v.split(":")[0]
        if src.startswith("."):
            p = os.path.normpath(os.path.join(base, src))
            assert os.path.exists(p), f"{name}: mounts {src}, which does not exist"
print("compose: services", " ".join(sorted(svcs)))
PY
"$FABRICSCOPE" --check-config "$D/fabricscope.yaml" >/dev/null || fail "docker/fabricscope.yaml refused"
# The demo's Prometheus configuration, with the rule file where compose mounts it from.
sed "s|/etc/prometheus/alerts.yml|$FS_SOURCE_DIR/config/alerts.yml|" "$D/prometheus.yml" >"$T/prometheus.yml"
out=$(promtool check config "$T/prometheus.yml" 2>&1) || fail "promtool check config: $out"
ok "compose.yaml parses, its services, stages and mounts exist; its fabricscope config is valid"

#!/usr/bin/env bash
# `make image-check` (not part of make test: it needs a Docker engine). From a fresh clone
# of HEAD, in a directory whose path has a space, with the build trees `make run` and
# `make package` leave behind (configured elsewhere: .dockerignore must keep them out):
#  1. builds the image (docker/Dockerfile, target runtime) and prints its size;
#  2. runs it with a token file mounted at /run/secrets/fabricscope-token: /healthz
#     answers without the token, /metrics answers 401 without it or with a wrong one and
#     200 with it; docker kill -s HUP reloads it; docker stop ends it within its 10 s
#     grace (SIGTERM reaches fabricscope);
#  3. runs it with no token mounted: the entrypoint generates one (logged how to read it,
#     not the token itself), which /metrics then requires;
#  4. runs the compose demo's gnmi-sim and fabricscope with docker-compose (Debian's 1.29
#     by default; COMPOSE="docker compose" for the plugin) and waits for a fabric_ series
#     of the simulated switch on the published /metrics, then docker-compose down.
# Base images debian:bookworm and debian:bookworm-slim must be present or pullable
# (tests/ops/image-base.sh imports them from a debootstrap root where no registry is
# reachable). FS_BUILD_NETWORK (default host) is docker build's --network: a build
# stage's apt-get needs a route out, which the bridge network may lack.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
DOCKER=${DOCKER:-docker}
COMPOSE=${COMPOSE:-docker-compose}
NET=${FS_BUILD_NETWORK:-host}
TAG=fabricscope:image-check
SIM_TAG=fabricscope-sim:image-check

say() { echo "image-check: $*"; }
die() {
  echo "image-check: FAIL: $*" >&2
  exit 1
}

T=$(mktemp -d "${TMPDIR:-/tmp}/fs image check.XXXXXX")
src="$T/src tree"
containers=()
# One project name for every run: compose tags the images it builds <project>_<service>,
# so a fixed name replaces the previous run's tags instead of adding more.
proj=fsimagecheck
compose_up=""
cleanup() {
  local c
  for c in "${containers[@]}"; do $DOCKER rm -f "$c" >/dev/null 2>&1 || true; done
  if [ -n "$compose_up" ]; then
    (cd "$src/docker" && $COMPOSE -p "$proj" down >/dev/null 2>&1) || true
  fi
  rm -rf "$T"
}
trap cleanup EXIT

# HTTP status of a GET, with optional extra curl arguments (a header).
status() {
  local url=$1
  shift
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" "$url" || true
}

# Polls until the container's /healthz answers 200 (60 s), or fails with its log.
wait_healthy() {
  local c=$1 port=$2 deadline=$((SECONDS + 60))
  until [ "$(status "http://127.0.0.1:$port/healthz")" = 200 ]; do
    if [ "$($DOCKER inspect -f '{{.State.Running}}' "$c")" != true ] || [ $SECONDS -ge $deadline ]; then
      $DOCKER logs "$c" >&2 || true
      die "$c: /healthz never answered 200"
    fi
    sleep 0.5
  done
}

host_port() { $DOCKER port "$1" 9464/tcp | head -n1 | sed 's/.*://'; }

$DOCKER info >/dev/null 2>&1 || die "no Docker engine answers '$DOCKER info'"
for b in debian:bookworm debian:bookworm-slim; do
  $DOCKER image inspect "$b" >/dev/null 2>&1 || $DOCKER pull "$b" >/dev/null ||
    die "no base image $b (where no registry is reachable: bash tests/ops/image-base.sh)"
done

# ---- 1. build from a fresh clone ----
head=$(git -C "$top" rev-parse HEAD)
git clone -q --no-checkout "$top" "$src"
git -C "$src" checkout -q "$head"
for d in build build-package; do
  mkdir -p "$src/$d"
  printf 'CMAKE_CACHEFILE_DIR:INTERNAL=/elsewhere/%s\nCMAKE_HOME_DIRECTORY:INTERNAL=/elsewhere\n' \
    "$d" >"$src/$d/CMakeCache.txt"
done
say "clone of ${head:0:12} in '$src' (with stray build/ and build-package/ trees)"
t0=$SECONDS
$DOCKER build --network "$NET" -f "$src/docker/Dockerfile" --target runtime -t "$TAG" "$src" \
  >"$T/build.log" 2>&1 || {
  tail -n 40 "$T/build.log" >&2
  die "docker build of the runtime image"
}
size=$($DOCKER image inspect -f '{{.Size}}' "$TAG")
say "built $TAG in $((SECONDS - t0)) s: size $size bytes ($((size / 1000000)) MB)"

# ---- 2. a mounted token ----
token=$(head -c 24 /dev/urandom | od -An -vtx1 | tr -d ' \n')
printf '%s\n' "$token" >"$T/token"
# The container's user (uid 999) must be able to read it, nobody else.
chown 999:999 "$T/token"
chmod 0400 "$T/token"
c=fs-image-check-$$-a
containers+=("$c")
$DOCKER run -d --name "$c" -p 127.0.0.1::9464 -v "$T/token:/run/secrets/fabricscope-token:ro" \
  "$TAG" >/dev/null
port=$(host_port "$c")
wait_healthy "$c" "$port"
base=http://127.0.0.1:$port
body=$(curl -s --max-time 10 "$base/healthz")
[ "$body" = '{"status":"ok"}' ] || die "/healthz said '$body'"
code=$(status "$base/metrics")
[ "$code" = 401 ] || die "/metrics without the token: $code, not 401"
code=$(status "$base/metrics" -H "Authorization: Bearer not-$token")
[ "$code" = 401 ] || die "/metrics with a wrong token: $code, not 401"
curl -sf --max-time 10 -H "Authorization: Bearer $token" "$base/metrics" >"$T/metrics" ||
  die "/metrics with the token failed"
grep -q '^fabricscope_' "$T/metrics" || die "/metrics with the token has no fabricscope_ series"
say "mounted token: GET /healthz 200 $body without it; /metrics 401 without it, 401 with a" \
  "wrong one, 200 with it ($(grep -c '^fabricscope_' "$T/metrics") fabricscope_ samples)"
# docker kill -s HUP reaches fabricscope (PID 1 through the entrypoint's exec): a reload.
$DOCKER kill -s HUP "$c" >/dev/null
deadline=$((SECONDS + 30))
until $DOCKER logs "$c" 2>&1 | grep -q 'SIGHUP: reloading'; do
  [ $SECONDS -lt $deadline ] || die "docker kill -s HUP: no reload in the log within 30 s"
  sleep 0.5
done
! $DOCKER logs "$c" 2>&1 | grep -q 'reload refused' || die "the reload was refused"
code=$(status "$base/metrics" -H "Authorization: Bearer $token")
[ "$code" = 200 ] || die "/metrics with the token after the reload: $code"
say "docker kill -s HUP: reloaded; /metrics 200 with the token after it"
t0=$SECONDS
$DOCKER stop "$c" >/dev/null
took=$((SECONDS - t0))
rc=$($DOCKER inspect -f '{{.State.ExitCode}}' "$c")
[ "$took" -lt 10 ] || die "docker stop took $took s: SIGTERM did not end fabricscope (killed at 10 s)"
say "docker stop: exited $rc after $took s"

# ---- 3. no token mounted: one generated ----
c=fs-image-check-$$-b
containers+=("$c")
$DOCKER run -d --name "$c" -p 127.0.0.1::9464 "$TAG" >/dev/null
port=$(host_port "$c")
wait_healthy "$c" "$port"
base=http://127.0.0.1:$port
gen=$($DOCKER exec "$c" cat /run/secrets/fabricscope-token)
[[ "$gen" =~ ^[0-9a-f]{64}$ ]] || die "generated token '$gen' is not 64 hex digits"
$DOCKER logs "$c" >"$T/log-b" 2>&1
grep -q 'generated one' "$T/log-b" || die "the log does not say a token was generated"
! grep -qF "$gen" "$T/log-b" || die "the generated token is in the log"
code=$(status "$base/metrics")
[ "$code" = 401 ] || die "/metrics without the generated token: $code, not 401"
code=$(status "$base/metrics" -H "Authorization: Bearer $gen")
[ "$code" = 200 ] || die "/metrics with the generated token: $code, not 200"
mode=$($DOCKER exec "$c" stat -c '%a %U' /run/secrets/fabricscope-token)
say "no token mounted: generated (file $mode, not in the log); /metrics 401 without it, 200 with it"
$DOCKER rm -f "$c" >/dev/null

# ---- 4. the compose demo ----
demo_port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cd "$src/docker"
say "$($COMPOSE version 2>/dev/null | head -n1)"
compose_up=1
$COMPOSE -p "$proj" down >/dev/null 2>&1 || true # what a killed earlier run left
t0=$SECONDS
FS_DEMO_PORT=$demo_port $COMPOSE -p "$proj" up -d --build fabricscope >"$T/compose.log" 2>&1 || {
  tail -n 40 "$T/compose.log" >&2
  die "$COMPOSE up"
}
deadline=$((SECONDS + 120))
until curl -s --max-time 10 "http://127.0.0.1:$demo_port/metrics" >"$T/demo-metrics" &&
  grep -q '^fabric_port_bytes_total{.*target="sim-leaf1"' "$T/demo-metrics"; do
  if [ $SECONDS -ge $deadline ]; then
    $COMPOSE -p "$proj" logs >&2 || true
    die "no fabric_ series of sim-leaf1 on the demo's /metrics within 120 s"
  fi
  sleep 1
done
say "compose demo (gnmi-sim, fabricscope) up in $((SECONDS - t0)) s:" \
  "$(grep -c '^fabric_' "$T/demo-metrics") fabric_ samples, e.g."
grep -m1 '^fabric_port_bytes_total' "$T/demo-metrics"
$COMPOSE -p "$proj" down >"$T/down.log" 2>&1 || {
  cat "$T/down.log" >&2
  die "$COMPOSE down"
}
compose_up=""
left=$($DOCKER ps -a -q --filter "label=com.docker.compose.project=$proj")
[ -z "$left" ] || die "containers left after down: $left"
say "$COMPOSE down: no container of the project left"
say "OK"

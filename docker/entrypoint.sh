#!/bin/sh
# The image's entrypoint: generates the bearer token that the shipped configuration
# (docker/fabricscope-container.yaml) names when none was mounted, then becomes
# fabricscope (exec: it is PID 1 and receives docker stop's SIGTERM).
# Only when /etc/fabricscope/fabricscope.yaml names the token path: a configuration of the
# operator's own (mounted over it) is left alone.
set -eu
tok=/run/secrets/fabricscope-token
if [ ! -e "$tok" ] && grep -qsF "$tok" /etc/fabricscope/fabricscope.yaml; then
  # 32 random bytes as 64 hex digits; the file is the fabricscope user's alone.
  umask 077
  head -c 32 /dev/urandom | od -An -vtx1 | tr -d ' \n' >"$tok.tmp"
  mv "$tok.tmp" "$tok"
  # The token itself stays out of the log (logs are often shipped elsewhere).
  echo "fabricscope-entrypoint: no token mounted at $tok: generated one; read it with" \
    "docker exec <container> cat $tok (it lasts as long as the container)" >&2
fi
exec /usr/bin/fabricscope "$@"

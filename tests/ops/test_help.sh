#!/usr/bin/env bash
# `fabricscope --help` documents every flag and subcommand: each long option defined in
# collector/main.c, the importers' and the host agent's sources (struct option tables),
# and each subcommand main.c dispatches, is named in the help text; --help exits 0 on stdout,
# a bad flag exits 2 with the help on stderr.
source "$(dirname "$0")/../integration/lib.sh"
[ -x "$FABRICSCOPE" ] || fail "build fabricscope first"
help=$("$FABRICSCOPE" --help) || fail "--help exit $?"
src=("$FS_SOURCE_DIR/collector/main.c" "$FS_SOURCE_DIR"/collector/importers/*.c "$FS_SOURCE_DIR"/collector/hostagent/*.c)
opts=$(grep -ohE '\{"[a-z][a-z0-9-]*", *(no|required|optional)_argument' "${src[@]}" | sed 's/{"//; s/".*//' | sort -u)
[ -n "$opts" ] || fail "no option tables found in the sources"
for o in $opts; do
  grep -q -- "--$o\b" <<<"$help" || fail "--help does not document --$o"
done
subs=$(grep -ohE 'strcmp\(argv\[1\], "[a-z-]+"\)' "$FS_SOURCE_DIR/collector/main.c" | sed 's/.*"\(.*\)".*/\1/' | sort -u)
[ -n "$subs" ] || fail "no subcommands found in main.c"
for s in $subs; do
  grep -qE "^  $s( |$)" <<<"$help" || fail "--help does not document the subcommand $s"
done
set +e
"$FABRICSCOPE" --no-such-flag >/dev/null 2>"$T/err"; rc=$?
set -e
[ $rc = 2 ] || fail "a bad flag exits $rc, want 2"
grep -q -- '--shard' "$T/err" || fail "a bad flag does not print the help on stderr"
ok "--help names all $(wc -w <<<"$opts") options and $(wc -w <<<"$subs") subcommands"

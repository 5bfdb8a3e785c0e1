# lib_cli.sh — what the CLI test scripts (tests/cli_*.sh) share, sourced after `set -u`: a
# scratch directory $TMP removed at exit, the pass / fail counters, and their helpers:
#   ok; bad MESSAGE...          count a pass; count a failure and say it on stderr
#   check NAME GOT WANT         a pass when GOT equals WANT, else a failure naming both
#   has FILE PATTERN            "yes" when FILE holds PATTERN (grep), else "no"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() {
    if [ "$2" = "$3" ]; then ok; else bad "$1: got '$2', want '$3'"; fi
}
has() { grep -q -- "$2" "$1" && echo yes || echo no; }

# lib_cli.sh — what the CLI test scripts (tests/cli_*.sh) share, sourced after `set -u`: a
# scratch directory $TMP removed at exit, the pass / fail counters, and their helpers:
#   ok; bad MESSAGE...          count a pass; count a failure and say it on stderr
#   check NAME GOT WANT         a pass when GOT equals WANT, else a failure naming both
#   has FILE PATTERN            "yes" when FILE holds PATTERN (grep), else "no"
#   need_files HINT FILE...     exit 77 (skipped) saying which FILE is missing and HINT (the make
#                               target that installs it); exit 1 instead with LC_REQUIRE_MODEL=1
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
need_files() {
    local hint="$1" f
    shift
    for f in "$@"; do
        if [ ! -f "$f" ]; then
            echo "$f not found ($hint)"
            [ "${LC_REQUIRE_MODEL:-0}" = 1 ] && exit 1
            exit 77
        fi
    done
}
# serve_test_prereqs BIN: what the server tests need, else exit 77 (skipped) saying which is
# missing: the bundled test model (sets MODEL), a build with server support, python3.
serve_test_prereqs() {
    MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
    [ -f "$MODEL" ] || { echo "model $MODEL not found"; exit 77; }
    if "$1" serve --help 2>&1 | grep -q "built without server support"; then
        echo "longctx was built without server support (libmicrohttpd, jansson): skipped"
        exit 77
    fi
    command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
}

#!/usr/bin/env bash
# cli_escape.sh — no byte of a crafted GGUF reaches the terminal raw (issue 20, item 8): a file
# whose key name, string value, architecture and tensor name carry "ESC[2J" (clear screen), an
# OSC title sequence and a C1 CSI byte is shown by `inspect` (stdout) and refused by `run` and
# `tokenize` (stderr) with those bytes escaped as \xHH text. Usage: cli_escape.sh PATH/TO/longctx
set -u
export LC_ALL=C
BIN="$1"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

u32() { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) \
    $((($1 >> 16) & 255)) $((($1 >> 24) & 255)))"; }
u64() { u32 $(($1 & 0xffffffff)); u32 $(($1 >> 32)); }
str() { u64 ${#1}; printf '%s' "$1"; }

ESC=$'\e'
F="$TMP/evil.gguf"
{
    printf 'GGUF'; u32 3; u64 1; u64 3
    str "bad${ESC}[2Jkey"; u32 8; str "v${ESC}]0;pwned"$'\a'" "$'\xc2\x9b'"2J"
    str "general.architecture"; u32 8; str "ll${ESC}[2Jama"
    str "tokenizer.ggml.model"; u32 8; str "gpt${ESC}[2J"
    str "t${ESC}[2Jname"; u32 1; u64 4; u32 0; u64 0
} >"$F"
pad=$(((32 - $(stat -c %s "$F") % 32) % 32))
head -c "$pad" /dev/zero >>"$F"
head -c 16 /dev/zero >>"$F"

# check NAME FILE PATTERN: FILE has no control byte (C0 but newline, DEL, C1 CSI) and
# matches PATTERN (grep -F)
check() {
    if grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$2" || grep -q $'\xc2\x9b' "$2"; then
        fail=$((fail + 1)); echo "FAIL: $1: raw control bytes:" >&2; cat -v "$2" >&2
    elif ! grep -qF -- "$3" "$2"; then
        fail=$((fail + 1)); echo "FAIL: $1: no '$3' in:" >&2; cat -v "$2" >&2
    else
        pass=$((pass + 1))
    fi
}

"$BIN" inspect "$F" >"$TMP/out" 2>"$TMP/err"
check "inspect: exit $?" "$TMP/out" 'bad\x1b[2Jkey'
check "inspect value" "$TMP/out" 'v\x1b]0;pwned\x07 \xc2\x9b2J'
check "inspect architecture" "$TMP/out" '"ll\x1b[2Jama"'
check "inspect tensor name" "$TMP/out" 't\x1b[2Jname'
"$BIN" run -m "$F" -p hi --device cpu >"$TMP/out" 2>"$TMP/err"
check "run" "$TMP/err" 'll\x1b[2Jama'
"$BIN" tokenize -m "$F" -p hi >"$TMP/out" 2>"$TMP/err"
check "tokenize" "$TMP/err" 'gpt\x1b[2J'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

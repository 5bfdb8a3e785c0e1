#!/usr/bin/env bash
# cli_weights_native.sh — `--weights native` (the file's blocks used as they are, issue 23 item
# 4; the CPU's default) on the real SmolLM2 (q4_1): the greedy answer equals that of
# `--weights f32` (the same dequantised values, multiplied in another order), explicitly and as
# the default, and the CUDA backend refuses f32 in one line and runs native (when a GPU is there).
# (test_matmul checks the AVX-512 and the scalar kernels against each other's reference.)
# Usage: cli_weights_native.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
. "$(dirname "$0")/lib_cli.sh"
need_files "make model" "$MODEL"

Q="Name three primary colours."
"$BIN" run -m "$MODEL" --device cpu -t 2 --chat --temp 0 -n 24 -p "$Q" \
    --weights f32 >"$TMP/f32.out" 2>"$TMP/f32.err"
check "f32: exit 0" "$?" "0"
"$BIN" run -m "$MODEL" --device cpu -t 2 --chat --temp 0 -n 24 -p "$Q" \
    --weights native >"$TMP/nat.out" 2>"$TMP/nat.err"
check "native: exit 0" "$?" "0"
check "native answer equals f32's" "$(cat "$TMP/nat.out")" "$(cat "$TMP/f32.out")"
[ -s "$TMP/nat.out" ] && ok || bad "native: empty answer"
"$BIN" run -m "$MODEL" --device cpu -t 2 --chat --temp 0 -n 24 -p "$Q" \
    >"$TMP/auto.out" 2>"$TMP/auto.err"
check "the default (native) answer equals f32's" "$(cat "$TMP/auto.out")" "$(cat "$TMP/f32.out")"
if "$BIN" --version 2>/dev/null | grep -q "^GPU: NVIDIA"; then
    "$BIN" run -m "$MODEL" --device cuda --weights f32 -n 1 -p hi >/dev/null 2>"$TMP/err"
    check "cuda + f32: exit" "$?" "1"
    check "cuda + f32: one line naming f32" "$(grep -c 'f32 is a CPU option' "$TMP/err")" "1"
    "$BIN" run -m "$MODEL" --device cuda --weights native -n 1 -p hi >/dev/null 2>"$TMP/err"
    check "cuda + native: exit" "$?" "0"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# cli_kv_type.sh — `--kv-type` (issue 23 item 2) on the real SmolLM2: the CPU refuses fp8 and
# f16 in one line each naming what it holds, exit 1, no answer written; an unknown type is a
# usage error (exit 2); auto and f32 give the same greedy answer. With a GPU of compute
# capability 8.9+ (when `--version` names one): fp8 runs dense and InfiniteHiP, and HiP /
# TokenSelect are refused naming the method.
# Usage: cli_kv_type.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
. "$(dirname "$0")/lib_cli.sh"
need_files "make model" "$MODEL"

run() { "$BIN" run -m "$MODEL" -t 2 --chat --temp 0 -n 12 -p "Name a colour." "$@"; }
run --device cpu --kv-type fp8 >"$TMP/out" 2>"$TMP/err"
check "cpu + fp8: exit" "$?" "1"
check "cpu + fp8: one line naming fp8 and the cpu backend" \
    "$(grep -c 'fp8 KV cache.*the cpu backend here keeps its KV in fp32' "$TMP/err")" "1"
[ -s "$TMP/out" ] && bad "cpu + fp8: wrote an answer" || ok
run --device cpu --kv-type f16 >"$TMP/out" 2>"$TMP/err"
check "cpu + f16: exit" "$?" "1"
check "cpu + f16: one line saying the CPU holds f32" "$(grep -c 'CPU backend holds KV in f32' "$TMP/err")" "1"
run --device cpu --kv-type fp9 >"$TMP/out" 2>"$TMP/err"
check "unknown type: exit" "$?" "2"
check "unknown type: named" "$(grep -c "'fp9'" "$TMP/err")" "1"
run --device cpu --kv-type f32 >"$TMP/f32.out" 2>/dev/null
check "cpu + f32: exit" "$?" "0"
run --device cpu --kv-type auto >"$TMP/auto.out" 2>/dev/null
check "cpu + auto: exit" "$?" "0"
check "auto answers as f32" "$(cat "$TMP/auto.out")" "$(cat "$TMP/f32.out")"
[ -s "$TMP/f32.out" ] && ok || bad "f32: empty answer"

if "$BIN" --version 2>/dev/null | grep -q "^GPU: NVIDIA"; then
    for attn in dense infinitehip; do
        run --device cuda --kv-type fp8 --attn $attn >"$TMP/out" 2>"$TMP/err"
        check "cuda + fp8 + $attn: exit" "$?" "0"
        [ -s "$TMP/out" ] && ok || bad "cuda + fp8 + $attn: empty answer"
    done
    for attn in hip tokenselect; do
        run --device cuda --kv-type fp8 --attn $attn >"$TMP/out" 2>"$TMP/err"
        check "cuda + fp8 + $attn: exit" "$?" "1"
        check "cuda + fp8 + $attn: refused naming it" "$(grep -c "fp8 KV cache.*$attn's kernels" "$TMP/err")" "1"
    done
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

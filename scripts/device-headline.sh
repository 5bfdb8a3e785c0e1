#!/usr/bin/env bash
# device-headline.sh — issue 23 item 3 on the GPU machine, one call: the Llama-3.1-8B shape
# (gen-model, random Q4_K_M weights), its KV cache in fp8 (--kv-type fp8), InfiniteHiP (the
# default preset), one CTX-token prompt (default 1,048,576) end to end with `longctx bench`:
# prompt tok/s (so TTFT), decode tok/s, and memory by part (weights, KV pool, the rest, the
# backend's peak and the GPU's used memory) into $OUT/headline/. The prompt's progress line
# (stderr) is kept in $OUT/headline-stderr.log, so a run cut by LIMIT (seconds, default 430)
# still says how far it got.
# Env: BUILD=0 reuses build-gpu/; CTX; KV (default fp8); ATTN (default infinitehip); PRESET.
# Run from the repo root with LC_COMMIT set to this machine's commit; writes into $OUT.
set -uo pipefail
. scripts/device-common.sh
M=/tmp/llama-3.1-8b-q4_k_m.gguf
[ -s $M ] || $B/longctx gen-model --arch llama --config llama-3.1-8b --type q4_k_m --out $M > /dev/null 2>&1 ||
    { echo "gen-model failed"; exit 1; }
echo "gen-model at $(( $(date +%s) - t0 )) s"
CTX=${CTX:-1048576}
mkdir -p "$OUT/headline"
timeout ${LIMIT:-430} $B/longctx bench -m $M --contexts $CTX -c $((CTX + 64)) -b 16384 --gen 16 \
    --attn ${ATTN:-infinitehip} ${PRESET:+--preset $PRESET} --kv-type ${KV:-fp8} --out "$OUT/headline" \
    > "$OUT/headline-stdout.log" 2> "$OUT/headline-stderr.log"
echo "bench rc=$? at $(( $(date +%s) - t0 )) s"
tr '\r' '\n' < "$OUT/headline-stderr.log" | grep -v "^$" | tail -6
cat "$OUT/headline-stdout.log" | tail -25

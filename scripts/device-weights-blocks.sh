#!/usr/bin/env bash
# device-weights-blocks.sh — issue 23 item 1 on the GPU machine, one call (bench/NOTES.md §62):
# build (Hopper only); the op registry's block-weight entries (decode GEMV, f16-slice GEMM,
# block-table embed, each against the CPU backend's native products), the 16-bit weight and
# pointwise entries, and SmolLM2 end to end (test_forward_cuda, when models/ has it: the native
# default against the CPU); the 8B-shape op timings (perf mode); then `longctx bench` dense
# decode and prompt on gen-model shapes with Q4_K_M weights, --weights native (the blocks)
# against --weights f16 (dequantised at load), same GPU, one run. Writes into $OUT (few files).
# Run from the repo root with LC_COMMIT set to this machine's commit.
# Usage: scripts/device-weights-blocks.sh [CONFIG ...]   (default: llama-3.1-8b llama-3.2-1b)
# A short kernel iteration: TESTS=test_weights_blocks_cuda BENCH=0 (stop after the perf rows).
set -uo pipefail
. scripts/device-common.sh
{
    for t in ${TESTS:-test_weights_blocks_cuda test_gemm_cuda test_ops_cuda test_forward_cuda}; do
        (cd $B && timeout 120 ctest -R "^$t\$" --output-on-failure 2>&1 | tail -30)
    done
} > "$OUT/tests.log" 2>&1
grep -E "tests passed|failed|Passed|Failed" "$OUT/tests.log" | head -20
echo "tests done at $(( $(date +%s) - t0 )) s"
$B/tests/test_op_registry perf matmul_blocks gemv16 2>&1 | grep -E "median|m14336|m4096 k4096|k14336 n1" > "$OUT/perf.txt"
cat "$OUT/perf.txt"
[ "${BENCH:-1}" = 0 ] && { echo "total $(( $(date +%s) - t0 )) s"; exit 0; }
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(llama-3.1-8b llama-3.2-1b)
for cfg in "${configs[@]}"; do
    $B/longctx gen-model --arch llama --config "$cfg" --type q4_k_m --out /tmp/$cfg.gguf >/dev/null 2>&1
    echo "gen-model $cfg at $(( $(date +%s) - t0 )) s"
    for w in native f16; do
        d="$OUT/$cfg-$w"
        mkdir -p "$d"
        timeout 200 $B/longctx bench -m /tmp/$cfg.gguf --contexts 1024,32768 -c 33792 -b 8192 --gen 64 \
            --attn dense --weights $w --out "$d" > "$d/stdout.log" 2> "$d/stderr.log"
        echo "$cfg $w rc=$? at $(( $(date +%s) - t0 )) s"
        grep -A4 "| context | prompt" "$d/stdout.log" | head -5
    done
    rm -f /tmp/$cfg.gguf
done

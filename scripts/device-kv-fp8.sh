#!/usr/bin/env bash
# device-kv-fp8.sh — issue 23 item 2 (the fp8 KV cache) on the GPU machine, one call: build
# (Hopper only), the op registry's fp8 entries (kv_write_e4m3: CUDA's e4m3 conversion and the
# kv_read dequantisation against the host's; attn_dense_e4m3: decode and prefill over fp8 pages
# against the CPU twin on the values the codes stand for) and the fp16 ones beside them; then,
# unless BENCH=0, one layer of dense decode and prefill over fp16 and fp8 pools against PyTorch
# SDPA (bench/attention_vs_sdpa.py --fp8, same run) into $OUT/attention-fp8.md. QWEN=1 also runs
# test_qwen_logits_cuda (needs models/ linked by scripts/model-to-device.sh first).
# Run from the repo root with LC_COMMIT set to this machine's commit; writes into $OUT.
set -uo pipefail
: "${OUT:?set OUT}"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
echo "build done at $(( $(date +%s) - t0 )) s"
B=build-gpu
$B/tests/test_op_registry ${OPS:-kv_write_e4m3 attn_dense_e4m3 kv_write attn_dense} > "$OUT/ops.log" 2>&1
echo "op registry rc=$? at $(( $(date +%s) - t0 )) s"
grep -E "FAIL|fail|differ|checks" "$OUT/ops.log" | head -30
if [ "${QWEN:-0}" = 1 ]; then
    (cd $B && timeout 400 ctest -R "^test_qwen_logits_cuda\$" --output-on-failure > "$OUT/qwen.log" 2>&1)
    echo "qwen rc=$? at $(( $(date +%s) - t0 )) s"
    grep -E "fp8|FAIL|qwen2.5-coder" "$OUT/qwen.log" | tail -30
fi
[ "${BENCH:-1}" = 0 ] && { echo "total $(( $(date +%s) - t0 )) s"; exit 0; }
timeout 400 python3 bench/attention_vs_sdpa.py $B --fp8 ${SDPA_ARGS:---quick} --out "$OUT/attention-fp8.md" \
    > "$OUT/attention-fp8.log" 2>&1
echo "attention rc=$? at $(( $(date +%s) - t0 )) s"
cat "$OUT/attention-fp8.md"

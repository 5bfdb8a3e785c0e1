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
. scripts/device-common.sh
if [ "${OPS-x}" != "" ]; then # OPS="": no op registry run
    $B/tests/test_op_registry ${OPS:-kv_write_e4m3 attn_dense_e4m3 kv_write attn_dense} > "$OUT/ops.log" 2>&1
    echo "op registry rc=$? at $(( $(date +%s) - t0 )) s"
    grep -E "FAIL|fail|differ|checks" "$OUT/ops.log" | head -30
fi
if [ "${QWEN:-0}" = 1 ]; then
    (cd $B && timeout 400 ./tests/test_qwen_logits_cuda > "$OUT/qwen.log" 2>&1)
    echo "qwen rc=$? at $(( $(date +%s) - t0 )) s"
    grep -E "fp8|FAIL|qwen2.5-coder" "$OUT/qwen.log" | tail -30
fi
if [ "${BENCH:-1}" = 1 ]; then
    timeout 400 python3 bench/attention_vs_sdpa.py $B --fp8 ${SDPA_ARGS:---quick} \
        --out "$OUT/attention-fp8.md" > "$OUT/attention-fp8.log" 2>&1
    echo "attention rc=$? at $(( $(date +%s) - t0 )) s"
    cat "$OUT/attention-fp8.md"
fi
# EVAL=1: quality on Qwen2.5-Coder-1.5B (needs models/ linked and data/haystack carried):
# perplexity of the Django documentation at EVAL_PPL_LEN (default 8K,32K,128K) and the natural-
# text suite at EVAL_LEN (default 16K,32K, EVAL_TRIALS trials, default 10), dense attention,
# f16 KV beside fp8 KV in the same run.
if [ "${EVAL:-0}" = 1 ]; then
    Q=models/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
    for kv in f16 fp8; do
        timeout 300 $B/longctx eval ppl -m $Q -f data/haystack/django-docs.txt \
            --len ${EVAL_PPL_LEN:-8192,32768,131072} -c 131072 --kv-type $kv \
            --out "$OUT/ppl-$kv.tsv" > "$OUT/ppl-$kv.log" 2>&1
        echo "ppl $kv rc=$? at $(( $(date +%s) - t0 )) s"; tail -5 "$OUT/ppl-$kv.log"
    done
    for kv in f16 fp8; do
        timeout 500 $B/longctx eval suite -m $Q --len ${EVAL_LEN:-16K,32K} \
            --trials ${EVAL_TRIALS:-10} --kv-type $kv --out "$OUT/suite-$kv" > "$OUT/suite-$kv.log" 2>&1
        echo "suite $kv rc=$? at $(( $(date +%s) - t0 )) s"; cat "$OUT/suite-$kv.md" 2>/dev/null | tail -20
    done
fi
echo "total $(( $(date +%s) - t0 )) s"

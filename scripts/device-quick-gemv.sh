#!/usr/bin/env bash
# device-quick-gemv.sh — a short GPU iteration loop for the block-weight GEMV (issue 23 item 1, NOTES §63):
# build (Hopper only), test_weights_blocks_cuda, the op registry perf rows, and the 8B-shape Q4_K_M
# dense bench at 1K (WEIGHTS="native f16", PROFILE=--profile, BENCH=0 to skip). Writes into $OUT.
set -uo pipefail
t0=$(date +%s)
bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
B=build-gpu
(cd $B && timeout 120 ctest -R "^test_weights_blocks_cuda\$" --output-on-failure 2>&1 | tail -15)
$B/tests/test_op_registry perf matmul_blocks gemv16 2>&1 | grep -E "median|m14336|m4096 k4096|k14336 n1" | tee $OUT/perf.txt
if [ "${BENCH:-1}" = 1 ]; then
  [ -f /tmp/l8.gguf ] || $B/longctx gen-model --arch llama --config llama-3.1-8b --type q4_k_m --out /tmp/l8.gguf >/dev/null 2>&1
  for w in ${WEIGHTS:-native}; do
    timeout 200 $B/longctx bench -m /tmp/l8.gguf --contexts 1024 -c 2048 --gen 64 --attn dense --weights $w ${PROFILE:-} --out $OUT/$w > $OUT/$w.log 2>&1
    grep -A3 "| context | prompt" $OUT/$w.log | head -4; grep -A3 "step ms (unprofiled)" $OUT/$w.log | head -4
  done
fi
echo "total $(( $(date +%s) - t0 )) s"

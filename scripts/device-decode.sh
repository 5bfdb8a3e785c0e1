#!/usr/bin/env bash
# device-decode.sh — the dense decode kernel (attention.cu) on the GPU machine, one call: the old
# tree (OLD, a tarball made by `git archive`, see bench/compare_commits.sh) built in the
# background while this tree builds (Hopper only) and its op registry entries run (attn_dense,
# attn_dense_e4m3 against the CPU twin; OPS overrides the list, OPS="" skips); then the decode
# cases (CASES, default bench/cases/decode-fp8.txt) new against old in one run
# (bench/compare_commits.sh) into $OUT/decode-compare.md, and unless SDPA=0 one layer of dense
# decode over fp16 and fp8 pools against PyTorch SDPA (bench/attention_vs_sdpa.py --fp8) into
# $OUT/attention-fp8.md. Run from the repo root with LC_COMMIT set; writes into $OUT.
# Usage: OLD=build-prev/COMMIT.tgz scripts/device-decode.sh
set -uo pipefail
: "${OUT:?set OUT}"
OLD=${OLD:?set OLD to the old tree's tarball}
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
export OLD_BUILD_ARGS=-DCMAKE_CUDA_ARCHITECTURES=90a-real
bash bench/compare_commits.sh --build-old "$OLD" > "$OUT/build-old.log" 2>&1 &
old_pid=$!
if [ "${BUILD:-1}" = 1 ]; then
    bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > "$OUT/build.log" 2>&1 ||
        { tail -40 "$OUT/build.log"; exit 1; }
    echo "build done at $(( $(date +%s) - t0 )) s"
fi
B=build-gpu
if [ "${OPS-x}" != "" ]; then
    $B/tests/test_op_registry ${OPS:-attn_dense_e4m3 attn_dense} > "$OUT/ops.log" 2>&1
    echo "op registry rc=$? at $(( $(date +%s) - t0 )) s"
    grep -E "FAIL|fail|nmse|checks" "$OUT/ops.log" | grep -vE ' pass$' | head -30
    grep -cE ' pass$' "$OUT/ops.log"
fi
wait $old_pid; echo "old build rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/build-old.log"
timeout 300 bash bench/compare_commits.sh "$OLD" "$OUT/decode-compare.md" "${CASES:-bench/cases/decode-fp8.txt}" \
    > "$OUT/decode-compare.log" 2>&1
echo "compare rc=$? at $(( $(date +%s) - t0 )) s"
cat "$OUT/decode-compare.md"
if [ "${SDPA:-1}" = 1 ]; then
    timeout 300 python3 bench/attention_vs_sdpa.py $B --fp8 --modes decode \
        --out "$OUT/attention-fp8.md" > "$OUT/attention-fp8.log" 2>&1
    echo "attention rc=$? at $(( $(date +%s) - t0 )) s"
    cat "$OUT/attention-fp8.md"
fi
echo "total $(( $(date +%s) - t0 )) s"

#!/bin/bash
# issue22-verify.sh — the first GPU call of the next session (bench/NOTES.md 46): check on the
# GPU what landed without one (the renames of 8e883af, the caller-owned rotated keys and the
# per-instance stream of 5178a3e), against 8f91d67 in the same run, and profile the batched
# decode step (NOTES 45: why 16 x 32K is not 8x). Prepare here, then one call:
#   rm -rf build-prev-src && mkdir build-prev-src && git archive 8f91d67 | tar -x -C build-prev-src
#   device: LC_COMMIT=xxxx bash bench/runs/issue22-verify.sh   (carry [".deb", "build-prev-src"])
# Everything lands in $OUT/r.tgz (a call returns at most 8 files).
set -u
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
O=/tmp/v; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt
cp -r .deb build-prev-src/ 2>/dev/null
bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > $O/build.log 2>&1 &
(cd build-prev-src && bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > $O/build-prev.log 2>&1) &
wait
test -x build-gpu/longctx && test -x build-prev-src/build-gpu/longctx || { echo build failed; tail $O/build*.log; exit 1; }
ctest --test-dir build-gpu -L cuda -E "qwen|test_attention_cuda" --timeout 300 --output-on-failure -j4 > $O/ctest.log 2>&1
grep -E "tests passed|Failed|\*\*\*" $O/ctest.log
build-gpu/longctx gen-model --arch llama --config smollm2-135m --out /tmp/smol.gguf > /dev/null 2>&1
# InfiniteHiP prefill with plain RoPE (inside the trained window: the rotated tiles), now vs before
for rep in 1 2; do
  for t in now prev; do
    B=build-gpu; [ $t = prev ] && B=build-prev-src/build-gpu
    timeout 120 $B/longctx bench -m /tmp/smol.gguf --contexts 8192 --gen 8 --attn infinitehip \
      --attn-set rope=plain -b 8192 --out $O/$t > $O/prefill-$t-$rep.log 2>&1
    echo "prefill $t $rep: $(grep -E '^\| 8192 \|' $O/prefill-$t-$rep.log | head -1)"
  done
done
timeout 100 build-gpu/bench_prune_chunks > $O/stage-now.log 2>&1
timeout 100 build-prev-src/build-gpu/bench_hip_stage > $O/stage-prev.log 2>&1
tail -3 $O/stage-now.log $O/stage-prev.log
# the batched decode step, op by op
for a in dense infinitehip; do
  timeout 150 build-gpu/longctx bench -m /tmp/smol.gguf --contexts 32768 --gen 48 --seqs 16 --profile \
    --attn $a -b 8192 --out $O > $O/prof16-$a.log 2>&1
  grep -E "profiled decode" $O/prof16-$a.log | cut -c1-400
done
tar -czf ${OUT:-/tmp}/r.tgz -C /tmp v

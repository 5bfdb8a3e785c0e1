#!/bin/bash
# issue22-final2.sh — the second closing GPU call of issue 22: this tree (the dedup of attention.cu /
# attn_segments.cu / prune_chunks.cu / select_blocks.cu, TokenSelect's batched cache) against
# d6fd576 (before both) built side by side (sm_90a): 16 x 32K batched decode of every method
# (steady steps, bench --seqs), and dense with CUDA graphs off; the shared wgmma / mma kernels'
# speed (bench_attention prefill and decode, bench_attn_segments) now vs d6fd576; then every CUDA
# test. Prepare here:
#   rm -rf build-base-src && mkdir build-base-src && git archive d6fd576 | tar -x -C build-base-src
#   device: LC_COMMIT=xxxx bash bench/runs/issue22-final2.sh   (carry [".deb", "build-base-src"])
# Results in $OUT/r.tgz, packed after each phase (a run cut at its limit still returns them).
set -u
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
O=/tmp/g; rm -rf $O; mkdir -p $O/seqs
pack() { tar -czf ${OUT:-/tmp}/r.tgz -C /tmp g; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt
cp -r .deb build-base-src/ 2>/dev/null
bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > $O/build.log 2>&1 &
(cd build-base-src && bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > $O/build-base.log 2>&1) &
wait
test -x build-gpu/longctx || { echo build failed; tail -30 $O/build.log; pack; exit 1; }
B0=build-base-src/build-gpu
build-gpu/longctx gen-model --arch llama --config smollm2-135m --out /tmp/smol.gguf > /dev/null 2>&1
M=/tmp/smol.gguf
for a in dense infinitehip hip tokenselect streaming; do
  timeout 100 build-gpu/longctx bench -m $M --contexts 32768 --gen 64 --seqs 16 --attn $a -b 8192 \
    --out $O/seqs > $O/b16-$a.log 2>&1
  echo "16x32K $a: $(grep -E '^\| 32768 \| 16' $O/b16-$a.log | head -1)"
done
timeout 100 build-gpu/longctx bench -m $M --contexts 32768 --gen 64 --seqs 16 --attn dense -b 8192 \
  --tune cuda-graphs=off --out $O/seqs > $O/b16-dense-nographs.log 2>&1
echo "16x32K dense graphs off: $(grep -E '^\| 32768 \| 16' $O/b16-dense-nographs.log | head -1)"
pack
for t in now base; do
  B=build-gpu; [ $t = base ] && B=$B0
  for mode in "prefill 2 6 64 32768" "prefill 8 4 128 32768" "decode 2 6 64 131072" "decode 8 4 128 1048576"; do
    echo "bench_attention $t $mode: $(timeout 60 $B/bench_attention $mode 2>&1 | tail -1)"
  done
  LONGCTX_BENCH_TUNE=prefill=mma timeout 60 $B/bench_attention prefill 8 4 128 32768 > $O/att-mma-$t.log 2>&1
  echo "bench_attention $t prefill mma 8 4 128 32768: $(tail -1 $O/att-mma-$t.log)"
  timeout 120 $B/bench_attn_segments 20 > $O/seg-$t.log 2>&1
done
tail -n 12 $O/seg-now.log $O/seg-base.log
pack
ctest --test-dir build-gpu -L cuda -E "qwen" --timeout 300 --output-on-failure -j6 > $O/ctest.log 2>&1
grep -E "tests passed|Failed|\*\*\*Failed|Timeout" $O/ctest.log
pack

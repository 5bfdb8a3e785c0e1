#!/bin/bash
# issue22-final.sh — issue 22's closing GPU check, one call: this tree and cda6698 (the issue's
# baseline) built side by side (sm_90a), every CUDA test of this tree (the op registry with the
# batched TokenSelect cache), then in one run: decode at 128K of every method (now and
# cda6698), 16 x 32K aggregate decode of every method (now; cda6698 has no --seqs), and
# bench_infinitehip's 1M per-layer decode (3k preset, now and cda6698). Prepare here:
#   rm -rf build-base-src && mkdir build-base-src && git archive cda6698 | tar -x -C build-base-src
#   device: LC_COMMIT=xxxx bash bench/runs/issue22-final.sh   (carry [".deb", "build-base-src"])
# Everything lands in $OUT/r.tgz.
set -u
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
O=/tmp/f; rm -rf $O; mkdir -p $O/now $O/base $O/seqs
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt
cp -r .deb build-base-src/ 2>/dev/null
bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > $O/build.log 2>&1 &
(cd build-base-src && bash scripts/gpu-build.sh > $O/build-base.log 2>&1) &
wait
test -x build-gpu/longctx || { echo build failed; tail -30 $O/build.log; tar -czf ${OUT:-/tmp}/r.tgz -C /tmp f; exit 1; }
test -x build-base-src/build-gpu/longctx || echo "baseline build failed"
B0=build-base-src/build-gpu
ctest --test-dir build-gpu -L cuda -E "qwen" --timeout 300 --output-on-failure -j4 > $O/ctest.log 2>&1
grep -E "tests passed|Failed|\*\*\*Failed|Timeout" $O/ctest.log
build-gpu/tests/test_op_registry select_tokens > $O/opreg-ts.log 2>&1; echo "op_registry select_tokens rc=$?"
grep -E "batched|FAIL" $O/opreg-ts.log | head -12
build-gpu/longctx gen-model --arch llama --config smollm2-135m --out /tmp/smol.gguf > /dev/null 2>&1
M=/tmp/smol.gguf
for a in dense infinitehip hip tokenselect streaming; do
  for t in now base; do
    B=build-gpu; [ $t = base ] && B=$B0
    [ $t = base ] && [ $a = streaming ] && continue
    timeout 100 $B/longctx bench -m $M --contexts 131072 --gen 64 --attn $a -b 8192 --out $O/$t \
      > $O/b128-$a-$t.log 2>&1
    echo "128K $a $t: $(grep -E '^\| 131072' $O/b128-$a-$t.log | head -1)"
  done
done
for a in dense infinitehip hip tokenselect streaming; do
  timeout 110 build-gpu/longctx bench -m $M --contexts 32768 --gen 64 --seqs 16 --attn $a -b 8192 \
    --out $O/seqs > $O/b16-$a.log 2>&1
  echo "16x32K $a: $(grep -E '^\| 32768 \| 16' $O/b16-$a.log | head -1)"
done
for t in now base; do
  B=build-gpu; [ $t = base ] && B=$B0
  timeout 120 $B/bench_infinitehip decode 8 4 128 1048576 64 3k > $O/ihip1m-$t.log 2>&1
  echo "bench_infinitehip 1M decode $t:"; grep -iE "average|median|dense|back to back" $O/ihip1m-$t.log | head -8
done
tar -czf ${OUT:-/tmp}/r.tgz -C /tmp f

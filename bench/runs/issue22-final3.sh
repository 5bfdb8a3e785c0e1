#!/bin/bash
# issue22-final3.sh — the last GPU call of this stop (issue 22): this tree built (sm_90a), the
# CUDA tests named in $TESTS (a ctest -R regex; default: every CUDA test), then decode at 128K of
# every method over 256 generated tokens (the 64-token means of issue22-final.sh carry each
# refresh class's eager step and graph capture), and, where nsys is installed, a CUDA timeline
# summary of the 16 x 32K batched decode (dense and InfiniteHiP): how much of the step is GPU
# work. Results in $OUT/r.tgz, packed after each phase.
#   device: LC_COMMIT=xxxx TESTS=regex bash bench/runs/issue22-final3.sh   (carry [".deb"])
set -u
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
O=/tmp/h; rm -rf $O; mkdir -p $O/e2e $O/seqs
pack() { tar -czf ${OUT:-/tmp}/r.tgz -C /tmp h; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt
bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > $O/build.log 2>&1 \
  || { echo build failed; tail -30 $O/build.log; pack; exit 1; }
build-gpu/longctx gen-model --arch llama --config smollm2-135m --out /tmp/smol.gguf > /dev/null 2>&1
M=/tmp/smol.gguf
for a in ${METHODS:-dense infinitehip hip tokenselect streaming}; do
  timeout 100 build-gpu/longctx bench -m $M --contexts 131072 --gen 256 --attn $a -b 8192 --out $O/e2e \
    > $O/b128-$a.log 2>&1
  echo "128K gen 256 $a: $(grep -E '^\| 131072' $O/b128-$a.log | head -1)"
done
pack
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  for a in dense infinitehip; do
    timeout 150 $NSYS profile -t cuda --stats=true -o /tmp/nsys-$a -f true build-gpu/longctx bench -m $M \
      --contexts 32768 --gen 32 --seqs 16 --attn $a -b 8192 --out $O/seqs > $O/nsys-$a.log 2>&1
    echo "nsys $a: $(grep -E '^\| 32768 \| 16' $O/nsys-$a.log | head -1)"
    grep -A14 "cuda_api_sum" $O/nsys-$a.log | head -16
  done
else
  echo "no nsys on this machine"
fi
pack
ctest --test-dir build-gpu -L cuda -E qwen -R "${TESTS:-.}" --timeout 300 --output-on-failure -j6 > $O/ctest.log 2>&1
grep -E "tests passed|Failed|\*\*\*Failed|Timeout" $O/ctest.log
pack

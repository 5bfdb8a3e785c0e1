#!/bin/bash
# issue22-batched2.sh — the second call of issue 22's GPU check (after issue22-batched.sh): the
# graph counts of test_graphs_cuda, and 16 sequences x 32K decoding together against one,
# counting only the steps in which all 16 decode (bench --seqs). Everything packed into
# $OUT/r.tgz (a call returns at most 8 files).
set -u
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
O=/tmp/r2; mkdir -p $O/seqs
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt
bash scripts/gpu-build.sh > $O/build.log 2>&1 || { echo build failed; tail -30 $O/build.log; exit 1; }
build-gpu/tests/test_graphs_cuda > $O/graphs.log 2>&1; echo "graphs rc=$?"
grep -E "launched|graphs on|FAIL" $O/graphs.log
build-gpu/longctx gen-model --arch llama --config smollm2-135m --out /tmp/smol.gguf > /dev/null 2>&1
for a in dense infinitehip hip tokenselect streaming; do
  timeout 90 build-gpu/longctx bench -m /tmp/smol.gguf --contexts 32768 --gen 96 --seqs 16 --attn $a \
    -b 8192 --out $O/seqs > $O/b16-$a.log 2>&1
  echo "16x32K $a: $(grep -A3 'Batched decode' $O/b16-$a.log | tail -1)"
done
tar -czf ${OUT:-/tmp}/r.tgz -C /tmp r2

#!/bin/bash
# issue22-batched.sh — the GPU check of issue 22 item 6 (batched, graph-safe sparse decode), one
# call on a fresh machine: build, the CUDA tests the change touches (graphs of every sparse
# method on == off; the selection and sparse-attention ops), then decode speed on the
# SmolLM2-135M shape (random weights: speed does not depend on them): every method at 128K
# against dense, and 16 sequences x 32K decoding together against one. Results to $OUT.
set -u
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
O=${OUT:-/tmp/out}; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt
bash scripts/gpu-build.sh > $O/build.log 2>&1 || { echo build failed; tail -30 $O/build.log; exit 1; }
ctest --test-dir build-gpu -R "test_graphs_cuda|prune_chunks_cuda|select_blocks_cuda|select_tokens_cuda|test_forward_cuda" \
    --output-on-failure -j3 > $O/ctest.log 2>&1
grep -E "tests passed|Passed|Failed|steps launched|graphs on" $O/ctest.log
build-gpu/longctx gen-model --arch llama --config smollm2-135m --out /tmp/smol.gguf > /dev/null 2>&1
M=/tmp/smol.gguf; mkdir -p $O/seqs
for a in dense infinitehip hip tokenselect streaming; do
  timeout 100 build-gpu/longctx bench -m $M --contexts 131072 --gen 64 --attn $a -b 8192 --out $O \
    > $O/b128-$a.log 2>&1
  echo "128K $a: $(grep -E '^\| 131072' $O/b128-$a.log | head -1)"
done
for a in dense infinitehip hip tokenselect streaming; do
  timeout 110 build-gpu/longctx bench -m $M --contexts 32768 --gen 64 --seqs 16 --attn $a -b 8192 \
    --out $O/seqs > $O/b16-$a.log 2>&1
  echo "16x32K $a: $(grep -E '^\| 32768 \| 16' $O/b16-$a.log | head -1)"
done

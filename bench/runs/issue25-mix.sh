#!/bin/bash
# issue25-mix.sh — issue 25's layer-segmented prefill on the GPU: `longctx bench mix` with
# Qwen2.5-Coder-1.5B (CUDA): 8 requests decoding while one long prompt prefills, chunked against
# segmented at several token-layer budgets (dense at 32K and 128K; InfiniteHiP's prefill at
# 128K), the GPU alone; each run also checks that the long request's greedy tokens are the
# same in every setting (exit 1 when not). Then (the timing done) issue21-next5.sh's three
# quality lanes and the CUDA tests of the tree beside them. Start as issue21-gaps.sh: Qwen
# joined in /tmp (scripts/model-to-device.sh), the haystack in $HAY, build-gpu/ built:
#   LC_COMMIT=xxxx HAY=/tmp/haystack scripts/device-job.sh start mix bash bench/runs/issue25-mix.sh
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L/mix
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
B=build-gpu/longctx
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
mix() { local name=$1; shift; timeout ${T:-170} $B bench mix -m $M --decoders 8 --out $L/mix/$name "$@" \
          > $L/mix-$name.txt 2> $L/mix-$name.err; echo "mix $name: exit $?" >> $L/mix-status.txt; }
mix dense32k  --long 32768 -b 512 --token-layers 0,512,2048,4096,8192
mix dense128k --long 131072 -b 2048 --token-layers 0,2048,8192,16384,32768
mix ihip128k  --long 131072 -b 4096 --attn infinitehip --token-layers 0,4096,16384,32768
(cd build-gpu && ctest -L cuda -E "qwen_logits|test_gemm_cuda" --timeout 600 \
    --output-on-failure -j 2) > $L/ctest-cuda-$LC_COMMIT.txt 2>&1 &
HAY=${HAY:-data/haystack} bash bench/runs/issue21-next5.sh
wait

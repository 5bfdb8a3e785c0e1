#!/bin/bash
# issue25-gpu2.sh — this session's GPU run for issue 25 (NOTES 57): issue25-mix.sh's three
# `bench mix` runs (now against the long prompt alone: first-token logits and tokens), then
# issue25-serve-mix.sh (the server under a short + long load per --prefill-token-layers), then
# the CUDA tests beside issue21-next5.sh's quality lanes. Start as issue25-mix.sh.
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L/mix
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
B=build-gpu/longctx
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
mix() { local name=$1; shift; timeout ${T:-200} $B bench mix -m $M --decoders 8 --out $L/mix/$name "$@" \
          > $L/mix-$name.txt 2> $L/mix-$name.err; echo "mix $name: exit $?" >> $L/mix-status.txt; }
mix dense32k  --long 32768 -b 512 --token-layers 0,512,2048,4096,8192
mix dense128k --long 131072 -b 2048 --token-layers 0,2048,8192,16384,32768
mix ihip128k  --long 131072 -b 4096 --attn infinitehip --token-layers 0,4096,16384,32768
bash bench/runs/issue25-serve-mix.sh
(cd build-gpu && ctest -L cuda -E "qwen_logits|test_gemm_cuda" --timeout 600 \
    --output-on-failure -j 2) > $L/ctest-cuda-$LC_COMMIT.txt 2>&1 &
HAY=${HAY:-data/haystack} bash bench/runs/issue21-next5.sh
wait

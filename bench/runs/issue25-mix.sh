#!/bin/bash
# issue25-mix.sh — issue 25's layer-segmented prefill on the GPU: `longctx bench mix` with
# Qwen2.5-Coder-1.5B (CUDA): 8 requests decoding while one long prompt prefills, chunked against
# segmented at several token-layer budgets (dense at 32K and 128K; InfiniteHiP's prefill at
# 128K), the GPU alone; each run also compares the long request's first-token logits and greedy
# tokens with the prompt run alone (exit 1 when a segmented setting differs). Each run at most
# $T seconds (170). Until 8e0f768 this script went on with issue21-next5.sh and the CUDA tests;
# issue25-gpu2.sh does that now. Start as issue21-gaps.sh: Qwen joined in /tmp
# (scripts/model-to-device.sh), build-gpu/ built:
#   LC_COMMIT=xxxx scripts/device-job.sh start mix bash bench/runs/issue25-mix.sh
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

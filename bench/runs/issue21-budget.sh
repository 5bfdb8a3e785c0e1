#!/bin/bash
# issue21-budget.sh — NOTES 55's next step, cut to what one short device budget holds: the six
# late-depth fact trials at 256K that every position policy lost (10, 11, 12, 14, 16, 18) with
# larger stage budgets — all stages x4, the last stage x4, the first two x4 — to tell whether
# the selection budget (prefill's blocks writing the needle, and the question reading it) is
# where they are lost. Start as issue21-gaps.sh (Qwen joined in /tmp, haystack in $HAY).
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
IH="--attn infinitehip -b 4096 --haystack ${HAY:-data/haystack}/django-docs.txt --only 10,11,12,14,16,18"
E="bash bench/eval_suite.sh $L"
timeout 480 $E b256a $M 256K fact 20 "kx4 $IH --hip-k=131072,32768,8192" > $L/laneA.log 2>&1 &
timeout 480 $E b256b $M 256K fact 20 "lastx4 $IH --hip-k=32768,8192,8192" > $L/laneB.log 2>&1 &
timeout 480 $E b256c $M 256K fact 20 "firstx4 $IH --hip-k=131072,32768,2048" > $L/laneC.log 2>&1 &
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
wait

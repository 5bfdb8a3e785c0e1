#!/bin/bash
# issue21-next5.sh — NOTES 56's next run: the six late-depth fact trials at 256K (10, 11, 12, 14,
# 16, 18: lost by every position policy and by 4x budgets) with the parts of InfiniteHiP that
# scale with the prompt length changed: no chunk-indexed first layers, pruning at true positions
# (rope=stream), a larger first-k. Start as issue21-gaps.sh (Qwen joined in /tmp, haystack in
# $HAY); about 6 minutes with three lanes on an H200.
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
IH="--attn infinitehip -b 4096 --haystack ${HAY:-data/haystack}/django-docs.txt --only 10,11,12,14,16,18"
E="bash bench/eval_suite.sh $L"
timeout 480 $E n256a $M 256K fact 20 "first0 $IH --hip-first-layers=0" > $L/laneA.log 2>&1 &
timeout 480 $E n256b $M 256K fact 20 "stream $IH --hip-rope=stream" > $L/laneB.log 2>&1 &
timeout 480 $E n256c $M 256K fact 20 "firstk32k $IH --hip-first-k=32768" > $L/laneC.log 2>&1 &
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
wait

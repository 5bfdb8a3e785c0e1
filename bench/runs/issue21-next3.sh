#!/bin/bash
# issue21-next3.sh — the next GPU run of issue 21 (bench/NOTES.md 44), one background job on a
# warm machine with the Qwen model joined in /tmp (scripts/model-to-device.sh). After the join:
#   LC_COMMIT=xxxx scripts/device-job.sh start main bash bench/runs/issue21-next3.sh
# then `scripts/device-job.sh collect 540` calls back to back (results in /tmp/res).
# §44: with the needle in a 26K sink, InfiniteHiP's default loses it with a last stage of 2048
# one-token segments and finds it with k 512, k 64 or 8-token chunks. Here: those settings at
# 256K (20 trials, the §43 draw), then 512K and 1M.
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
E="timeout 1500 bash bench/eval_suite.sh $L"
laneA() {
  $E k256 $M 256K fact 20 "k512 --attn infinitehip -b 4096 --hip-k=32768,8192,512" \
      "c8 --attn infinitehip -b 4096 --hip-chunks=64,16,8"
}
laneB() {
  $E k512 $M 512K fact 10 "k512 --attn infinitehip -b 4096 --hip-k=32768,8192,512" \
      "c8 --attn infinitehip -b 4096 --hip-chunks=64,16,8"
}
laneC() {
  $E k1m $M 1M fact 6 "default --attn infinitehip -b 4096" \
      "k512 --attn infinitehip -b 4096 --hip-k=32768,8192,512"
}
laneA > $L/laneA.log 2>&1 &
laneB > $L/laneB.log 2>&1 &
laneC > $L/laneC.log 2>&1 &
wait

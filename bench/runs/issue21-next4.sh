#!/bin/bash
# issue21-next4.sh — issue 21's next GPU run (bench/NOTES.md 44, 52) and the CUDA tests of the
# tree, one background job on a warm machine with Qwen (and SmolLM2) joined in /tmp
# (scripts/model-to-device.sh) and the haystack copied to /tmp/hay:
#   LC_COMMIT=xxxx scripts/device-job.sh start main bash bench/runs/issue21-next4.sh
# then `scripts/device-job.sh collect 540` calls back to back (results in /tmp/res).
# next3's plan cut to one 30-minute budget: at 256K the default's last stage (k 2048 single
# tokens) against k 512 and 8-token last-stage chunks, 20 paired trials (§43's draw); at 512K
# k 512, 10 trials (the default found 6/10 there, §44); at 1M the default and k 512, 4 trials.
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
H="--haystack ${HAY:-data/haystack}/django-docs.txt"
E="bash bench/eval_suite.sh $L"
K512="--attn infinitehip -b 4096 --hip-k=32768,8192,512 $H"
C8="--attn infinitehip -b 4096 --hip-chunks=64,16,8 $H"
laneA() { timeout 1080 $E k256 $M 256K fact 20 "k512 $K512" "c8 $C8"; }
laneB() { timeout 1080 $E k512 $M 512K fact 10 "k512 $K512"; }
laneC() { timeout 1080 $E k1m $M 1M fact 4 "default --attn infinitehip -b 4096 $H" "k512 $K512"; }
tests() { (cd build-gpu && ctest -L cuda --output-on-failure -j 4) > $L/ctest-cuda-$LC_COMMIT.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
tests &
laneA > $L/laneA.log 2>&1 &
laneB > $L/laneB.log 2>&1 &
laneC > $L/laneC.log 2>&1 &
wait

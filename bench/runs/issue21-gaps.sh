#!/bin/bash
# issue21-gaps.sh — issue 21 part 4's next GPU run (bench/NOTES.md 52, 55): the sparse
# attention's positions past the window with the gaps between the selected keys kept and
# compressed to fit a span (--hip-attn-span, backend.h GAPS) against the paper's StreamingLLM
# re-indexing (the default, attn-span 0), on the suite's fixed draw of fact trials; and the CUDA
# tests of the tree. One background job on a warm machine with Qwen joined in /tmp
# (scripts/model-to-device.sh):
#   LC_COMMIT=xxxx scripts/device-job.sh start main bash bench/runs/issue21-gaps.sh
# then `scripts/device-job.sh collect 540` calls back to back (results in /tmp/res).
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
H="--haystack ${HAY:-data/haystack}/django-docs.txt"
E="bash bench/eval_suite.sh $L"
IH="--attn infinitehip -b 4096 $H"
laneA() { timeout 1000 $E g256a $M 256K fact 20 "span32k $IH --hip-attn-span=32768";
          timeout 300 $E g512a $M 512K fact 5 "span32k $IH --hip-attn-span=32768"; }
laneB() { timeout 1000 $E g256b $M 256K fact 20 "span16k $IH --hip-attn-span=16384";
          timeout 300 $E g64b $M 64K fact 20 "span16k $IH --hip-attn-span=16384"; }
laneC() { timeout 1000 $E g256c $M 256K fact 20 "default $IH";
          timeout 300 $E g64c $M 64K fact 20 "span32k $IH --hip-attn-span=32768"; }
tests() { (cd build-gpu && ctest -L cuda -E "qwen_logits|test_gemm_cuda" --timeout 600 \
           --output-on-failure -j 2) > $L/ctest-cuda-$LC_COMMIT.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
tests &
laneA > $L/laneA.log 2>&1 &
laneB > $L/laneB.log 2>&1 &
laneC > $L/laneC.log 2>&1 &
wait

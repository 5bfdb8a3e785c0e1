#!/bin/bash
# issue25-gpu2.sh — the GPU run of NOTES 57 (8e0f768): issue25-mix.sh's three `bench mix` runs
# (200 s each at most), then issue25-serve-mix.sh (the server under a short + long load per
# --prefill-token-layers), then the CUDA tests beside issue21-next5.sh's quality lanes. Start as
# issue25-mix.sh, with the haystack in $HAY:
#   LC_COMMIT=xxxx HAY=/tmp/haystack scripts/device-job.sh start gpu2 bash bench/runs/issue25-gpu2.sh
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res
T=${T:-200} bash bench/runs/issue25-mix.sh
bash bench/runs/issue25-serve-mix.sh
(cd build-gpu && ctest -L cuda -E "qwen_logits|test_gemm_cuda" --timeout 600 \
    --output-on-failure -j 2) > $L/ctest-cuda-$LC_COMMIT.txt 2>&1 &
HAY=${HAY:-data/haystack} bash bench/runs/issue21-next5.sh
wait

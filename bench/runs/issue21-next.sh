#!/bin/bash
# issue21-next.sh — the next GPU run of issue 21 (bench/NOTES.md 41), one background job on a
# warm machine with the Qwen model joined in /tmp (scripts/model-to-device.sh). After the join:
#   LC_COMMIT=xxxx scripts/device-job.sh start main bash bench/runs/issue21-next.sh
# then `scripts/device-job.sh collect 540` calls back to back (results in /tmp/res).
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
E="timeout 900 bash bench/eval_suite.sh $L"
laneA() { # InfiniteHiP at 256K
  # oracles with existing knobs: the needle inside the true-position window (trial 18 of the
  # 20-trial seed, depth 0.94, ~16K from the end; trial 16 at 0.84 is outside it) and inside
  # the sink (trial 0 of the 8-trial seed, needle [26448, 26465); trial 6 outside)
  $E or-win $M 256K fact 20 "win20k --attn infinitehip -b 4096 --hip-stream=20480 --only 16,18 -v"
  $E or-sink $M 256K fact 8 "sink26k --attn infinitehip -b 4096 --hip-sink=26624 --only 0,6 -v"
  # the lost trials with the per-token mask (2ef06e1), default and with tail blocks of 16
  $E tr256m $M 256K fact 20 "default --attn infinitehip -b 4096 --only 3,6,8 --trace -v" "tail16 --attn infinitehip -b 4096 --hip-tail-block=16 --only 3,6,8 --trace -v"
  $E q256t16 $M 256K fact 20 "tail16 --attn infinitehip -b 4096 --hip-tail-block=16"
  $E q256t4 $M 256K fact 20 "tail4 --attn infinitehip -b 4096 --hip-tail-block=4 --hip-q-stride=4,4,1"
}
laneB() { # part 3 at 64K (fact, 20 trials, one seed: paired), then refresh at 256K
  $E q64 $M 64K fact 20 "dense --attn dense" "ts --attn tokenselect" "ts-tail16 --attn tokenselect --ts-tail-block=16" "hip --attn hip" "hip-tail8 --attn hip --hip-tail-block=8" "ihip --attn infinitehip" "ihip-tail16 --attn infinitehip --hip-tail-block=16"
  $E q256rf $M 256K fact 20 "refresh --attn infinitehip -b 4096 --hip-refresh=16,1,1"
}
laneC() { # the GPU tests of the selection code the tail blocks touched (not the 5-min attention ones)
  ctest --test-dir build-gpu -L cuda -R 'hip|select_tokens|graphs|sampling|ops|numerics' --output-on-failure
}
laneC > $L/laneC.log 2>&1 &
laneA > $L/laneA.log 2>&1 &
laneB > $L/laneB.log 2>&1 &
wait
printf '#!/bin/bash\nexec timeout 300 %s/build-gpu/longctx "$@"\n' $PWD > /tmp/lc-timeout.sh; chmod +x /tmp/lc-timeout.sh
BIN=/tmp/lc-timeout.sh bash bench/e2e_methods.sh $L e2e-512k $M 524288 32 'ihip-3k --attn infinitehip --preset 3k' 'infinitehip --attn infinitehip' 'hip --attn hip' 'dense --attn dense'

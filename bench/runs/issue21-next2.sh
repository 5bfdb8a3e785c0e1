#!/bin/bash
# issue21-next2.sh — the next GPU run of issue 21 (bench/NOTES.md 43), one background job on a
# warm machine with the Qwen model joined in /tmp (scripts/model-to-device.sh). After the join:
#   LC_COMMIT=xxxx scripts/device-job.sh start main bash bench/runs/issue21-next2.sh
# then `scripts/device-job.sh collect 540` calls back to back (results in /tmp/res). Lanes in
# order of what the issue needs most; each fits the ~25 minutes a session has after the model.
cd "$(dirname "$0")/../.."
export LC_COMMIT=${LC_COMMIT:-unknown}
L=/tmp/res; mkdir -p $L
M=/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
E="timeout 1200 bash bench/eval_suite.sh $L"
laneA() { # what else the attention reads: the oracles of §43 with less of the last stage
  # trial 0 of the 8-trial draw has its needle inside a 26K sink; trial 18 of the 20-trial
  # draw inside a 20K window
  # the cleanest control: StreamingLLM (no selected tokens at all) holding the needle in its
  # sink or its window
  $E ostr $M 256K fact 8 "sink26k --attn streaming -b 4096 --attn-set sink=26624 --attn-set window=1024 --only 0"
  $E ostrw $M 256K fact 20 "win20k --attn streaming -b 4096 --attn-set sink=4 --attn-set window=20480 --only 18"
  $E osk $M 256K fact 8 "k2048 --attn infinitehip -b 4096 --hip-sink=26624 --only 0" "k512 --attn infinitehip -b 4096 --hip-sink=26624 --hip-k=32768,8192,512 --only 0" "k64 --attn infinitehip -b 4096 --hip-sink=26624 --hip-k=32768,8192,64 --only 0" "c8 --attn infinitehip -b 4096 --hip-sink=26624 --hip-chunks=64,16,8 --only 0"
  $E owin $M 256K fact 20 "k64 --attn infinitehip -b 4096 --hip-stream=20480 --hip-k=32768,8192,64 --only 18" "k512 --attn infinitehip -b 4096 --hip-stream=20480 --hip-k=32768,8192,512 --only 18"
  # the paper's presets with tail blocks, and a smaller last stage, at 256K
  $E p256 $M 256K fact 20 "3k-t16 --attn infinitehip -b 4096 --preset 3k --hip-tail-block=16" "k512-t16 --attn infinitehip -b 4096 --hip-k=32768,8192,512"
  # part 4: TokenSelect and HiP past the window (their defaults: tail blocks)
  $E o256 $M 256K fact 20 "ts --attn tokenselect -b 4096" "hip --attn hip -b 4096"
}
laneB() { # part 4's lengths with the default, and tail-block 4 at 64K
  $E q64t4 $M 64K fact 20 "ihip-tail4 --attn infinitehip --hip-tail-block=4" "streaming --attn streaming"
  $E q512 $M 512K fact 10 "default --attn infinitehip -b 4096"
  $E q1m $M 1M fact 10 "default --attn infinitehip -b 4096"
}
laneC() { # every GPU test (the tuning struct replaced the variables the CUDA tests set, 4d9008c;
  # the profiler's timers moved behind the backend's measurement ops), then a profiled bench
  ctest --test-dir build-gpu -L cuda --output-on-failure -j2
  build-gpu/longctx bench -m $M --contexts 32768 --gen 16 --profile --attn infinitehip -b 8192 --out $L/prof
}
laneC > $L/laneC.log 2>&1 &
laneA > $L/laneA.log 2>&1 &
laneB > $L/laneB.log 2>&1 &
wait
# part 5's missing rows: dense and HiP at 512K and 1M (a bench is cut at 300 s)
printf '#!/bin/bash\nexec timeout 300 %s/build-gpu/longctx "$@"\n' $PWD > /tmp/lc-timeout.sh; chmod +x /tmp/lc-timeout.sh
BIN=/tmp/lc-timeout.sh bash bench/e2e_methods.sh $L e2e-big $M 524288,1048576 32 'hip --attn hip' 'dense --attn dense'

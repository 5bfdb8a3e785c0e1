#!/usr/bin/env bash
# device-slot-cache.sh — issue 24's slot cache on the GPU machine, one call (bench/NOTES.md §60):
# build (Hopper only), the CUDA tier test (bit-identical results with the slot cache), then
# `longctx bench` InfiniteHiP decode at 128K on a gen-model Llama-3.2-1B Q4_K_M with all KV on
# the GPU, a 2 GiB GPU tier, and a 1 GiB GPU tier + a 1 GiB slot cache (the same GPU memory).
# Writes into $OUT (few files: the device tool brings back a handful). Run from the repo root
# with LC_COMMIT set to this machine's commit.
set -uo pipefail
: "${OUT:?set OUT}"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
echo "build done at $(( $(date +%s) - t0 )) s"
B=build-gpu
{ $B/tests/test_kv_tiers_cuda; echo "test_kv_tiers_cuda rc=$?"; } > "$OUT/tests.log" 2>&1
tail -4 "$OUT/tests.log"
echo "tests done at $(( $(date +%s) - t0 )) s"
$B/longctx gen-model --arch llama --config llama-3.2-1b --type q4_k_m --out /tmp/l1b.gguf >/dev/null 2>&1
for cfg in "all-gpu|" "gpu-2gb|--kv-gpu-gb 2" "gpu-1gb-slot-1gb|--kv-gpu-gb 1 --kv-slot-cache-gb 1"; do
    name=${cfg%%|*}
    args=${cfg#*|}
    mkdir -p "$OUT/$name"
    # shellcheck disable=SC2086
    timeout 100 $B/longctx bench -m /tmp/l1b.gguf --contexts 131072 -c 135168 -b 8192 --gen 64 \
        --attn infinitehip $args --out "$OUT/$name" > "$OUT/$name/stdout.log" 2> "$OUT/$name/stderr.log"
    echo "$name rc=$? at $(( $(date +%s) - t0 )) s"
    grep -A2 "| context | prompt" "$OUT/$name/stdout.log" | tail -1
    grep -A3 "KV slot cache after" "$OUT/$name/stdout.log" | tail -1
done

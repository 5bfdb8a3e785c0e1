# device-common.sh — sourced by the scripts/device-*.sh jobs (one device call each): checks that
# $OUT is set, starts the clock (t0, for the "at N s" lines), records the GPU into $OUT/gpu.txt,
# and unless BUILD=0 (reuse the build-gpu/ an earlier call on the same warm machine left) builds
# this tree for Hopper only into build-gpu/ (scripts/gpu-build.sh; its log in $OUT/build.log,
# the last 40 lines printed and the job stopped if it fails). Sets B=build-gpu.
: "${OUT:?set OUT}"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
if [ "${BUILD:-1}" = 1 ]; then
    bash scripts/gpu-build.sh -DCMAKE_CUDA_ARCHITECTURES=90a-real > "$OUT/build.log" 2>&1 ||
        { tail -40 "$OUT/build.log"; exit 1; }
    echo "build done at $(( $(date +%s) - t0 )) s"
fi
B=build-gpu

#!/usr/bin/env bash
# run-fuzz.sh — build the libFuzzer targets in build-fuzz/ with clang and run fuzz_gguf for
# N seconds (default 60) on a scratch copy of fuzz/corpus/. Exits non-zero when the fuzzer
# finds a crash, leak or sanitizer error (artifacts land in fuzz/, named crash-*, leak-*).
# Usage: scripts/run-fuzz.sh [seconds] [extra libFuzzer flags...]
set -euo pipefail

SECONDS_TO_RUN="${1:-60}"
shift || true
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-fuzz"

CC_BIN=""
for c in "${CC_FUZZ:-}" clang clang-18 clang-17 clang-16 clang-15 clang-14; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then CC_BIN="$(command -v "$c")"; break; fi
done
if [ -z "$CC_BIN" ]; then
    echo "run-fuzz.sh: no clang found (install clang and libclang-rt-dev)" >&2
    exit 2
fi

cmake -S "$ROOT" -B "$BUILD" -DLC_FUZZ=ON -DLC_CUDA=OFF -DCMAKE_C_COMPILER="$CC_BIN" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target fuzz_gguf -j"$(nproc)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/lc-fuzz-corpus.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cp "$ROOT"/fuzz/corpus/* "$WORK"/

echo "run-fuzz.sh: fuzz_gguf for ${SECONDS_TO_RUN}s on $(ls "$WORK" | wc -l) seeds"
set +e
"$BUILD/fuzz/fuzz_gguf" "$WORK" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$ROOT/fuzz/" "$@"
rc=$?
set -e
if [ $rc -ne 0 ]; then
    echo "run-fuzz.sh: fuzz_gguf failed (exit $rc); see the artifact in $ROOT/fuzz/" >&2
    exit $rc
fi
echo "run-fuzz.sh: no crashes"

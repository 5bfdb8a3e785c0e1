#!/usr/bin/env bash
# run-fuzz.sh — build the libFuzzer targets in build-fuzz/ with clang, run fuzz_gguf for
# N seconds (default 60) on a scratch copy of fuzz/corpus/ and fuzz_tokenizer for N/2 seconds
# on fuzz/corpus-tokenizer/. Exits non-zero when a fuzzer finds a crash, leak, sanitizer error
# or broken round trip (artifacts land in fuzz/, named crash-*, leak-*).
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
cmake --build "$BUILD" --target fuzz_gguf fuzz_tokenizer -j"$(nproc)"

# run_target NAME CORPUS SECONDS: fuzz on a scratch copy of the corpus; exit on a finding
run_target() {
    local name="$1" corpus="$2" secs="$3"
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/lc-fuzz-corpus.XXXXXX")"
    cp "$ROOT/fuzz/$corpus"/* "$work"/
    echo "run-fuzz.sh: $name for ${secs}s on $(ls "$work" | wc -l) seeds"
    set +e
    (cd "$ROOT" && "$BUILD/fuzz/$name" "$work" -max_total_time="$secs" -max_len=65536 \
        -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$ROOT/fuzz/" "${EXTRA[@]}")
    local rc=$?
    set -e
    rm -rf "$work"
    if [ $rc -ne 0 ]; then
        echo "run-fuzz.sh: $name failed (exit $rc); see the artifact in $ROOT/fuzz/" >&2
        exit $rc
    fi
}

EXTRA=("$@")
run_target fuzz_gguf corpus "$SECONDS_TO_RUN"
# the tokenizer target checks decode(encode(x)) == x on every valid UTF-8 input
run_target fuzz_tokenizer corpus-tokenizer "$(( (SECONDS_TO_RUN + 1) / 2 ))"
echo "run-fuzz.sh: no crashes"

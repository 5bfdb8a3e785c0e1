#!/usr/bin/env bash
# run-fuzz.sh — build the libFuzzer targets in build-fuzz/ with clang and run them.
#
#   scripts/run-fuzz.sh [seconds] [extra libFuzzer flags...]           (make fuzz)
#     A short run on scratch copies of the corpora kept in the repo: fuzz_gguf (fuzz/corpus/)
#     and fuzz_model (fuzz/corpus-model/) for seconds/2 each, fuzz_tokenizer
#     (fuzz/corpus-tokenizer/), fuzz_tokenizer_load (fuzz/corpus-tokenizer-load/) and
#     fuzz_serve_request (fuzz/corpus-serve/: `longctx serve`'s request bodies) and
#     fuzz_bench_client (fuzz/corpus-bench-client/: responses to `longctx bench serve`) for
#     seconds/4 each; seconds defaults to 60 (120 s of fuzzing in all). Stops at the first
#     crash, leak, sanitizer error, out-of-memory or broken invariant; the artifact lands in
#     fuzz/ (crash-*, leak-*, oom-*, timeout-*).
#   scripts/run-fuzz.sh --long [seconds] [extra libFuzzer flags...]    (make fuzz-long)
#     Each target for `seconds` (default 600) on a scratch copy of its repo corpus, in
#     libFuzzer's fork mode with one job so that a finding does not end the run (artifacts in
#     build-fuzz/findings/<target>/). Then the new inputs are merged back into the repo corpus,
#     minimised: -merge=1 into a fresh directory that starts from the corpus's named seeds
#     (files not named by a 40-hex hash, e.g. those of scripts/gen_fuzz_seeds.py), keeping
#     the corpus under $FUZZ_CORPUS_MAX_KB (default 512) KiB by dropping the largest merged
#     inputs, and that directory replaces the corpus. Prints a table: executions, exec/s, coverage (cov: edges, ft:
#     features) at the end of the run and of the merged corpus, corpus files and size, findings.
#
# $FUZZ_TARGETS (space-separated) limits the targets run (default: all six).
# fuzz_model runs with -malloc_limit_mb=256: a model that fits a 64 KiB input needs a few MB,
# so a larger allocation means hyper-parameters were trusted before being checked against the
# tensors (reported as an oom-* finding).
set -euo pipefail

LONG=0
if [ "${1:-}" = "--long" ]; then
    LONG=1
    shift
fi
if [ $LONG = 1 ]; then SECONDS_TO_RUN="${1:-600}"; else SECONDS_TO_RUN="${1:-60}"; fi
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
# NAME:CORPUS:DIVISOR (the short run gives NAME seconds/DIVISOR)
ALL_TARGETS=(fuzz_gguf:corpus:2 fuzz_tokenizer:corpus-tokenizer:4
             fuzz_tokenizer_load:corpus-tokenizer-load:4 fuzz_model:corpus-model:2
             fuzz_serve_request:corpus-serve:4 fuzz_bench_client:corpus-bench-client:4)
TARGETS=()
for t in "${ALL_TARGETS[@]}"; do
    if [ -z "${FUZZ_TARGETS:-}" ] || [[ " $FUZZ_TARGETS " == *" ${t%%:*} "* ]]; then TARGETS+=("$t"); fi
done
NAMES=()
for t in "${TARGETS[@]}"; do NAMES+=("${t%%:*}"); done
if [ ${#NAMES[@]} = 0 ]; then
    echo "run-fuzz.sh: FUZZ_TARGETS='${FUZZ_TARGETS:-}' names no target" >&2
    exit 2
fi
cmake --build "$BUILD" --target "${NAMES[@]}" -j"$(nproc)"

# flags_for NAME: per-target libFuzzer flags
flags_for() {
    case "$1" in
    fuzz_model) echo "-malloc_limit_mb=256" ;;
    *) echo "" ;;
    esac
}

# run_target NAME CORPUS SECONDS: fuzz on a scratch copy of the corpus; exit on a finding
run_target() {
    local name="$1" corpus="$2" secs="$3"
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/lc-fuzz-corpus.XXXXXX")"
    cp "$ROOT/fuzz/$corpus"/* "$work"/
    echo "run-fuzz.sh: $name for ${secs}s on $(ls "$work" | wc -l) seeds"
    set +e
    # shellcheck disable=SC2046
    (cd "$ROOT" && "$BUILD/fuzz/$name" "$work" -max_total_time="$secs" -max_len=65536 \
        -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 $(flags_for "$name") \
        -artifact_prefix="$ROOT/fuzz/" "${EXTRA[@]}") 2>&1 | tee "$BUILD/fuzz-$name.log"
    local rc=${PIPESTATUS[0]}
    set -e
    rm -rf "$work"
    local execs eps cov ft
    read -r execs eps cov ft <<<"$(stat_of "$BUILD/fuzz-$name.log")"
    SUMMARY+=("$(printf '%-20s %4ss %9s execs  cov %5s  ft %5s' "$name" "$secs" "$execs" "$cov" "$ft")")
    if [ $rc -ne 0 ]; then
        echo "run-fuzz.sh: $name failed (exit $rc); see the artifact in $ROOT/fuzz/" >&2
        exit $rc
    fi
}

# stat_of LOG: "execs exec/s cov ft" from the last status line of a libFuzzer log (plain:
# "#N DONE cov: C ft: F ..."; fork mode: "#N: cov: C ft: F corp: ... exec/s: E ...")
stat_of() {
    awk '/^#[0-9]+:?[ \t].*cov: / { line = $0 }
         END {
             n = line; sub(/^#/, "", n); sub(/[: \t].*/, "", n)
             c = line; sub(/.*cov: /, "", c); sub(/ .*/, "", c)
             f = line; sub(/.*ft: /, "", f); sub(/ .*/, "", f)
             e = "-"; if (line ~ /exec\/s:? /) { e = line; sub(/.*exec\/s:? /, "", e); sub(/ .*/, "", e) }
             if (line == "") print "- - - -"; else print n, e, c, f
         }' "$1"
}

# long_target NAME CORPUS SECONDS: fork-mode run, merge back into the repo corpus, stats row
long_target() {
    local name="$1" corpus="$ROOT/fuzz/$2" secs="$3"
    local work fresh log findings before_n
    work="$(mktemp -d "${TMPDIR:-/tmp}/lc-fuzz-corpus.XXXXXX")"
    fresh="$(mktemp -d "${TMPDIR:-/tmp}/lc-fuzz-merge.XXXXXX")"
    log="$BUILD/findings/$name.log"
    findings="$BUILD/findings/$name"
    mkdir -p "$findings"
    cp "$corpus"/* "$work"/
    before_n=$(ls "$corpus" | wc -l)
    echo "run-fuzz.sh: $name for ${secs}s on $before_n seeds (log: $log)"
    local n_before_art
    n_before_art=$(ls "$findings" | wc -l)
    # shellcheck disable=SC2046
    (cd "$ROOT" && "$BUILD/fuzz/$name" "$work" -fork=1 -ignore_crashes=1 -ignore_ooms=1 \
        -ignore_timeouts=1 -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
        -timeout=10 -print_final_stats=1 $(flags_for "$name") -artifact_prefix="$findings/" \
        "${EXTRA[@]}") >"$log" 2>&1 || true
    local run_stats
    run_stats="$(stat_of "$log")"
    # minimised merge: named seeds first (always kept), then whatever adds coverage
    for f in "$corpus"/*; do
        [[ "$(basename "$f")" =~ ^[0-9a-f]{40}$ ]] || cp "$f" "$fresh"/
    done
    # (-use_counters=0: edges, not hit-count buckets, decide what is new; far fewer files)
    (cd "$ROOT" && "$BUILD/fuzz/$name" -merge=1 -use_counters=0 -max_len=65536 \
        -rss_limit_mb=2048 -timeout=10 $(flags_for "$name") -artifact_prefix="$findings/" \
        "$fresh" "$corpus" "$work") \
        >"$log.merge" 2>&1 || echo "run-fuzz.sh: $name: merge failed, corpus left as it was (see $log.merge)" >&2
    # size budget: drop the largest merged (hash-named) files until the corpus fits
    local total dropped=0 big
    total=$(cat "$fresh"/* | wc -c)
    while [ "$total" -gt "$BUDGET" ]; do
        big="$(ls -S "$fresh" | grep -E '^[0-9a-f]{40}$' | head -1 || true)"
        [ -n "$big" ] || break
        total=$(( total - $(stat -c %s "$fresh/$big") ))
        rm -f "$fresh/$big"
        dropped=$(( dropped + 1 ))
    done
    [ $dropped = 0 ] || echo "run-fuzz.sh: $name: $dropped merged inputs dropped to keep the corpus under $(( BUDGET / 1024 )) KiB"
    if grep -q "MERGE-OUTER: .* new files" "$log.merge"; then
        rm -f "$corpus"/*
        cp "$fresh"/* "$corpus"/
    fi
    # coverage of the corpus as kept
    (cd "$ROOT" && "$BUILD/fuzz/$name" -runs=0 -max_len=65536 -rss_limit_mb=2048 \
        $(flags_for "$name") -artifact_prefix="$findings/" "$corpus") >"$log.corpus" 2>&1 || true
    local corp_stats n_art
    corp_stats="$(awk '/INITED cov: / { l = $0 } END { c = l; sub(/.*cov: /, "", c); sub(/ .*/, "", c)
                                                       f = l; sub(/.*ft: /, "", f); sub(/ .*/, "", f)
                                                       print (l == "" ? "- -" : c " " f) }' "$log.corpus")"
    n_art=$(( $(ls "$findings" | wc -l) - n_before_art ))
    FOUND=$(( FOUND + n_art ))
    rm -rf "$work" "$fresh"
    read -r execs eps cov ft <<<"$run_stats"
    read -r ccov cft <<<"$corp_stats"
    ROWS+=("$(printf '%-20s %6s %10s %7s %6s %6s %7s %7s %6s %8s %8s' "$name" "$secs" "$execs" "$eps" \
        "$cov" "$ft" "$ccov" "$cft" "$before_n>$(ls "$corpus" | wc -l)" \
        "$(( ($(cat "$corpus"/* | wc -c) + 1023) / 1024 ))K" "$n_art")")
}

EXTRA=("$@")
BUDGET=$(( ${FUZZ_CORPUS_MAX_KB:-512} * 1024 ))
if [ $LONG = 1 ]; then
    FOUND=0
    ROWS=()
    for t in "${TARGETS[@]}"; do
        IFS=: read -r name corpus _ <<<"$t"
        long_target "$name" "$corpus" "$SECONDS_TO_RUN"
    done
    echo
    echo "run-fuzz.sh --long: ${SECONDS_TO_RUN}s per target (run: end of the fuzzing run; corpus: the merged corpus"
    echo "as kept in fuzz/; cov = edges, ft = features; findings in $BUILD/findings/<target>/)"
    printf '%-20s %6s %10s %7s %6s %6s %7s %7s %6s %8s %8s\n' target secs execs exec/s cov ft \
        corp.cov corp.ft files size findings
    for r in "${ROWS[@]}"; do echo "$r"; done
    if [ "$FOUND" -gt 0 ]; then
        echo "run-fuzz.sh --long: $FOUND finding(s); reproduce with build-fuzz/fuzz/<target> <file>" >&2
        exit 1
    fi
    echo "run-fuzz.sh --long: no findings; review and commit the corpus changes (git status fuzz/)"
    exit 0
fi
SUMMARY=()
for t in "${TARGETS[@]}"; do
    IFS=: read -r name corpus div <<<"$t"
    # fuzz_tokenizer checks decode(encode(x)) == x on every valid UTF-8 input
    run_target "$name" "$corpus" "$(( (SECONDS_TO_RUN + div - 1) / div ))"
done
for r in "${SUMMARY[@]}"; do echo "run-fuzz.sh: $r"; done
echo "run-fuzz.sh: no crashes"

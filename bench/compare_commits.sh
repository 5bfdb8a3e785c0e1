#!/usr/bin/env bash
# compare_commits.sh — the kernel benchmarks of this tree against an older commit's, on the same
# GPU in one run (the brief's rule for a speed claim), for the GPU machine, which has no git
# history: the old tree travels as a tarball made here with
#   mkdir -p build-prev && git archive --format=tar.gz -o build-prev/OLD.tgz OLD
# and is carried with the call. Both trees are built by scripts/gpu-build.sh (needs .deb/ as
# that script says); each benchmark then runs new, old, new, old and the table gives both
# medians of the two runs' medians and new/old.
#
# Usage: bench/compare_commits.sh OLD.tgz OUT.md [CASES]
#        bench/compare_commits.sh --build-old OLD.tgz   (only build the old tree, e.g. in the
#        background while the tests run)
#   CASES: a file of benchmark command lines (a program of build-gpu/ and its arguments, one a
#   line, '#' comments); default: dense decode and prefill (bench_attention) and InfiniteHiP
#   decode and prefill at 1M (bench_infinitehip 3k), the Llama-3.1-8B shape, and the Qwen2.5
#   shape (2 KV heads x 6). A line "PROGRAM NEW ARGS || OLD ARGS" runs the old tree's program
#   with other arguments (an option the old program lacks).
#   OLD_BUILD_ARGS: extra cmake arguments for the old tree's build (e.g.
#   -DCMAKE_CUDA_ARCHITECTURES=90a-real: Hopper only, faster).
# The current tree must already be built in build-gpu/ (scripts/gpu-build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_ONLY=0
if [ "${1:-}" = --build-old ]; then BUILD_ONLY=1; shift; fi
OLD=${1:?usage: bench/compare_commits.sh OLD.tgz OUT.md [CASES]}
OUT=${2:-}
[ "$BUILD_ONLY" = 1 ] || [ -n "$OUT" ] || { echo "usage: bench/compare_commits.sh OLD.tgz OUT.md [CASES]" >&2; exit 1; }
CASES=${3:-}
[ -f "$OLD" ] || { echo "compare_commits: no tarball '$OLD'" >&2; exit 1; }
[ "$BUILD_ONLY" = 1 ] || [ -x build-gpu/longctx ] || { echo "compare_commits: build-gpu/ is not built (scripts/gpu-build.sh)" >&2; exit 1; }
# the old tree is built once per tarball (kept in /tmp while the machine stays warm)
ODIR=/tmp/lc-old
SUM=$(sha256sum "$OLD" | cut -c1-16)
if ! [ -x "$ODIR/build-gpu/longctx" ] || [ "$(cat "$ODIR/.tarball" 2>/dev/null)" != "$SUM" ]; then
    rm -rf "$ODIR" && mkdir -p "$ODIR"
    tar -xzf "$OLD" -C "$ODIR"
    [ -d .deb ] && ln -sfn "$PWD/.deb" "$ODIR/.deb"
    echo "compare_commits: building the old tree in $ODIR" >&2
    (cd "$ODIR" && bash scripts/gpu-build.sh ${OLD_BUILD_ARGS:-}) >&2
    echo "$SUM" > "$ODIR/.tarball"
fi
[ "$BUILD_ONLY" = 1 ] && exit 0

default_cases() {
    cat <<'EOF'
bench_attention decode 8 4 128 131072 20
bench_attention decode 8 4 128 1048576 20
bench_attention prefill 8 4 128 32768 5
bench_attention decode 2 6 128 1048576 20
bench_infinitehip decode 8 4 128 1048576 256 3k
bench_infinitehip prefill 8 4 128 1048576 32768 3k
bench_infinitehip decode 2 6 128 1048576 256 3k
EOF
}
if [ -n "$CASES" ]; then LIST=$(grep -v '^\s*#' "$CASES" | sed '/^\s*$/d'); else LIST=$(default_cases); fi

# the first number of a result line each program prints, in microseconds:
#   bench_attention: "mode kv_heads group head_dim keys median_us min_us" -> median_us
#   bench_infinitehip decode: "... infinitehip average X us/step ..." -> X;
#   bench_infinitehip prefill: "prefill rows R at K keys: infinitehip X us, ..." -> X
measure() {
    local dir=$1 line=$2 prog args out
    prog=${line%% *}
    args=${line#* }
    out=$("$dir/build-gpu/$prog" $args 2>/dev/null) || { echo "nan"; return; }
    case "$prog" in
    bench_attention) echo "$out" | awk 'NF >= 7 && $1 ~ /^(decode|prefill)$/ {print $6; exit}' ;;
    bench_infinitehip)
        echo "$out" | awk '/infinitehip average/ {for (i = 1; i < NF; i++) if ($i == "average") {print $(i + 1); exit}}
                           /^prefill rows/ {for (i = 1; i < NF; i++) if ($i == "infinitehip") {print $(i + 1); exit}}' ;;
    *) echo "$out" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) {print $i; exit}}' ;;
    esac
}

GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)
NEW_C=${LC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo new)}
OLD_C=$(basename "$OLD" .tgz)
{
    echo "# Kernel benchmarks: $NEW_C against $OLD_C"
    echo
    echo "GPU: $GPU; date $(date -u +%F); each case run new, old, new, old; the median of each"
    echo "program's own repeats, the two runs averaged. Times in µs (InfiniteHiP decode: average of"
    echo "a step over its refresh cycle; prefill: the whole chunk)."
    echo
    echo "| benchmark | $NEW_C | $OLD_C | new / old |"
    echo "|---|---:|---:|---:|"
} > "$OUT"
n=$(echo "$LIST" | wc -l)
i=0
while IFS= read -r line; do
    i=$((i + 1))
    echo "compare_commits: [$i/$n] $line" >&2
    new_line=${line%% || *}
    old_line=$new_line
    case "$line" in *" || "*) old_line="${new_line%% *} ${line#* || }" ;; esac
    a1=$(measure . "$new_line"); b1=$(measure "$ODIR" "$old_line")
    a2=$(measure . "$new_line"); b2=$(measure "$ODIR" "$old_line")
    awk -v l="$line" -v a1="$a1" -v a2="$a2" -v b1="$b1" -v b2="$b2" 'BEGIN {
        a = (a1 + a2) / 2; b = (b1 + b2) / 2
        printf("| `%s` | %.1f (%s, %s) | %.1f (%s, %s) | %.3f |\n", l, a, a1, a2, b, b1, b2, b > 0 ? a / b : 0)
    }' >> "$OUT"
    tail -1 "$OUT" >&2
done <<< "$LIST"
cat "$OUT"

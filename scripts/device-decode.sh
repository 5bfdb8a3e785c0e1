#!/usr/bin/env bash
# device-decode.sh — the two dense decode kernels of attention.cu on the GPU machine, one call:
# build (Hopper only); the op registry's attn_dense and attn_dense_e4m3 against the CPU twin with
# each kernel (--tune dense-decode=staged, the default, and =direct; OPS overrides the entries,
# OPS="" skips); each line of CASES (bench_attention arguments, default
# bench/cases/decode-fp8.txt) timed with staged and direct alternately, twice, into
# $OUT/decode-kernels.md; unless SDPA=0, one layer of dense decode over fp16 and fp8 pools
# against PyTorch SDPA (bench/attention_vs_sdpa.py --fp8, with the direct kernel) into
# $OUT/attention-fp8.md. Run from the repo root with LC_COMMIT set; writes into $OUT.
set -uo pipefail
. scripts/device-common.sh
if [ "${OPS-x}" != "" ]; then
    for k in staged direct; do
        $B/tests/test_op_registry ${OPS:-attn_dense_e4m3 attn_dense} dense-decode=$k > "$OUT/ops-$k.log" 2>&1
        echo "op registry ($k) rc=$? at $(( $(date +%s) - t0 )) s; $(grep -cE ' pass$' "$OUT/ops-$k.log") pass"
        grep -E "FAIL|fail|sequence" "$OUT/ops-$k.log" | head -20
    done
fi
us() { # the median µs of one bench_attention run with kernel $1 and arguments $2
    LONGCTX_BENCH_TUNE=dense-decode=$1 $B/bench_attention $2 2>/dev/null | awk 'NF >= 7 {print $6; exit}'
}
{
    echo "# Dense decode: the staged kernel against the direct one"
    echo
    echo "GPU: $(head -1 "$OUT/gpu.txt"); date $(date -u +%F); commit ${LC_COMMIT:-unknown}. One layer,"
    echo "bench_attention (median of its 50 runs), staged and direct alternately, twice: µs."
    echo
    echo "| bench_attention | staged | direct | direct speed |"
    echo "|---|---:|---:|---:|"
} > "$OUT/decode-kernels.md"
grep -v '^\s*#' "${CASES:-bench/cases/decode-fp8.txt}" | sed '/^\s*$/d' | while IFS= read -r c; do
    s1=$(us staged "$c"); d1=$(us direct "$c"); s2=$(us staged "$c"); d2=$(us direct "$c")
    awk -v c="$c" -v s1="$s1" -v s2="$s2" -v d1="$d1" -v d2="$d2" 'BEGIN {
        s = (s1 + s2) / 2; d = (d1 + d2) / 2
        printf("| `%s` | %.1f (%s, %s) | %.1f (%s, %s) | %.2fx |\n", c, s, s1, s2, d, d1, d2, d > 0 ? s / d : 0)
    }' >> "$OUT/decode-kernels.md"
done
echo "kernels done at $(( $(date +%s) - t0 )) s"
cat "$OUT/decode-kernels.md"
if [ "${SDPA:-1}" = 1 ]; then
    LONGCTX_BENCH_TUNE=dense-decode=direct timeout 300 python3 bench/attention_vs_sdpa.py $B --fp8 \
        --modes decode --out "$OUT/attention-fp8.md" > "$OUT/attention-fp8.log" 2>&1
    echo "attention rc=$? at $(( $(date +%s) - t0 )) s"
    cat "$OUT/attention-fp8.md"
fi
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# eval_suite.sh — run `longctx eval suite` for several attention methods one after another on
# one machine and draw them together. Everything is written to OUT/<tag>/ (per method
# <tag>-<label>.{tsv,md}, -trials.tsv and .err; <tag>.png over all of them; <tag>.log), and
# packed into OUT/<tag>.tgz next to copies of the log and the plot (the device tool returns a
# few files per call, not dozens).
#
# Usage: bench/eval_suite.sh OUT TAG MODEL LENS TASKS TRIALS 'LABEL ARGS...' ['LABEL ARGS...' ...]
#   e.g. bench/eval_suite.sh $OUT qwen-64k models/Qwen...gguf 16K,64K fact,multikey 20 \
#        'dense --attn dense' 'infinitehip --attn infinitehip' 'hip-2k --attn hip --preset 2k'
# TRIALS 0: the suite's default (20 up to 128K, 10 beyond). BIN (default build-gpu/longctx).
set -uo pipefail
[ $# -ge 7 ] || { sed -n 2,11p "$0" >&2; exit 2; }
TOP=$1 TAG=$2 MODEL=$3 LENS=$4 TASKS=$5 TRIALS=$6
shift 6
OUT=$TOP/$TAG
BIN=${BIN:-build-gpu/longctx}
mkdir -p "$OUT"
tsvs=()
for spec in "$@"; do
    label=${spec%% *}
    args=${spec#"$label"}
    trials=()
    [ "$TRIALS" != 0 ] && trials=(--trials "$TRIALS")
    echo "== $TAG $label: $args" | tee -a "$OUT/$TAG.log"
    # shellcheck disable=SC2086
    "$BIN" eval suite -m "$MODEL" --len "$LENS" --tasks "$TASKS" "${trials[@]}" $args \
        --out "$OUT/$TAG-$label" >>"$OUT/$TAG.log" 2>"$OUT/$TAG-$label.err"
    echo "   exit $?" | tee -a "$OUT/$TAG.log"
    grep -v "^eval suite: trial" "$OUT/$TAG-$label.err" | tail -n 5 >>"$OUT/$TAG.log"
    [ -s "$OUT/$TAG-$label.tsv" ] && tsvs+=("$OUT/$TAG-$label.tsv")
done
if [ ${#tsvs[@]} -gt 0 ]; then
    labels=()
    for t in "${tsvs[@]}"; do
        l=${t##*/$TAG-}
        labels+=(--label "$t=${l%.tsv}")
    done
    python3 scripts/plot_eval.py "${tsvs[@]}" "${labels[@]}" -o "$OUT/$TAG.png" \
        --title "$TAG: $(basename "$MODEL")" >>"$OUT/$TAG.log" 2>&1
fi
tar -czf "$TOP/$TAG.tgz" -C "$TOP" "$TAG"
cp "$OUT/$TAG.log" "$TOP/"
[ -f "$OUT/$TAG.png" ] && cp "$OUT/$TAG.png" "$TOP/"
exit 0

#!/usr/bin/env bash
# cli_bench_mix.sh — `longctx bench mix` end to end on the bundled model (CPU, small): the
# long prompt alone is the reference row; two layer-segmented budgets give it exactly its alone
# first-token logits (delta 0) and greedy tokens, chunked prefill beside the decoders within
# 1e-3 (its matrices have other shapes) and the exit is 0; the layers-a-step column follows the
# budget (64 token-layers over 128-row chunks: 1; 512: 4), the step counts are those of the
# schedule (ceil(768/128) chunks: 6 steps chunked; x30 layers one a step: 180; /4 a step: 48),
# the per-step TSV is written with a header and a row per step, the PNG plot is drawn when
# matplotlib is there; bad options exit 2 with a message. Usage: cli_bench_mix.sh PATH/TO/longctx
set -u
BIN="$1"
. "$(dirname "$0")/lib_cli.sh"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$MODEL" ] || { echo "model $MODEL not found"; exit 77; }

"$BIN" bench mix -m "$MODEL" --device cpu --long 768 --decoders 2 --decode-prompt 64 -b 128 \
    --token-layers 0,64,512 --after 4 --out "$TMP/res" >"$TMP/out" 2>"$TMP/err"
check "bench mix exit" "$?" 0
md=$(ls "$TMP"/res/bench-mix-cpu-*.md 2>/dev/null | head -n 1)
tsv="${md%.md}.tsv"
check "markdown written" "$([ -f "$md" ] && echo yes)" yes
check "tsv written" "$([ -f "$tsv" ] && echo yes)" yes
row() { grep -E "^\| $1( |\|)" "$TMP/out"; }
col() { row "$1" | awk -F'|' -v c="$2" '{gsub(/ /,"",$c); print $c}'; }
check "alone row" "$(grep -c '^| alone (chunked, no decoders) | all | 6 |' "$TMP/out")" 1
for tl in 0 64 512; do
    check "row $tl same tokens" "$(col $tl 13)" yes
done
for tl in 64 512; do
    check "row $tl logits as alone" "$(col $tl 12)" 0
done
check "chunked logits within 1e-3 of alone" "$(col 0 12 | awk '{print ($1 <= 1e-3) ? "yes" : $1}')" yes
# layers/step and steps to the first token
check "chunked layers/step" "$(col 0 3)" all
check "64: layers/step" "$(col 64 3)" 1
check "512: layers/step" "$(col 512 3)" 4
# chunked: the long prompt gets 128 - 2 rows a step beside the two decode tokens: ceil(768/126)
check "chunked steps" "$(col 0 4)" 7
check "64: steps" "$(col 64 4)" 180
check "512: steps" "$(col 512 4)" 48
# the TSV: header plus, per setting, 16 before-steps, the window's steps and 4 after
if [ -f "$tsv" ]; then
    check "tsv header" "$(head -n 1 "$tsv")" "$(printf 'token_layers\tphase\tstep\tms\tdecode_tokens\tprompt_done')"
    check "tsv window rows of 64" "$(awk -F'\t' '$1==64 && $2=="window"' "$tsv" | wc -l)" 180
    check "tsv after rows of 512" "$(awk -F'\t' '$1==512 && $2=="after"' "$tsv" | wc -l)" 4
    if python3 -c "import matplotlib" 2>/dev/null; then
        python3 scripts/plot_bench_mix.py "$tsv" "$TMP/mix.png" && [ -s "$TMP/mix.png" ] && ok ||
            bad "plot_bench_mix.py drew nothing"
    fi
fi

# bad input: exit 2, a message naming the option
"$BIN" bench mix -m "$MODEL" --token-layers "" >/dev/null 2>"$TMP/e1"
check "empty list exit" "$?" 2
check "empty list message" "$(has "$TMP/e1" "token-layers")" yes
"$BIN" bench mix -m "$MODEL" --token-layers 0,-5 >/dev/null 2>"$TMP/e2"
check "negative exit" "$?" 2
"$BIN" bench mix --long 10 >/dev/null 2>"$TMP/e3"
check "no model exit" "$?" 2
"$BIN" bench mix -m "$MODEL" --frobnicate >/dev/null 2>"$TMP/e4"
check "unknown option exit" "$?" 2
check "unknown option message" "$(has "$TMP/e4" "frobnicate")" yes
"$BIN" run -m "$MODEL" --prefill-token-layers -1 -p hi >/dev/null 2>"$TMP/e5"
check "run: negative --prefill-token-layers exit" "$?" 2

echo "cli_bench_mix: $pass checks passed, $fail failed"
[ "$fail" -eq 0 ]

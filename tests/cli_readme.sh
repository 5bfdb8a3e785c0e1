#!/usr/bin/env bash
# cli_readme.sh — the README's command examples against the tree (issue 26: every README
# detail checked against what exists). Every `longctx ...` line of the README's sh blocks: its
# command exists, every --option it uses is in that command's --help, every --preset it names is
# among the presets the help lists (any method's), every --hip-KEY,
# --ts-KEY and --attn-set KEY is a setting the help lists; the lines that name the bundled model
# run as written and exit 0 (chat with its input ended at once; serve, which runs until a
# signal, is not run). Usage: cli_readme.sh PATH/TO/longctx
set -u
BIN="$1"
README=README.md
[ -f "$README" ] || { echo "no README.md here"; exit 77; }
. "$(dirname "$0")/lib_cli.sh" # TMP, pass / fail, ok, bad, check, has

awk '/^```sh/{f=1;next}/^```/{f=0}f' "$README" | sed 's/  *#.*$//' | grep -E '^longctx ' >"$TMP/lines"
[ -s "$TMP/lines" ] || { echo "no longctx lines found in the README's sh blocks"; exit 1; }
while IFS= read -r line; do
    read -r -a w <<<"$line"
    cmd="${w[1]}"
    sub=""
    [ "$cmd" = eval ] && sub="${w[2]}"
    [ "$cmd" = bench ] && [ "${w[2]:-}" = serve ] && sub=serve
    [ "$cmd" = bench ] && [ "${w[2]:-}" = mix ] && sub=mix
    help="$TMP/help-$cmd-$sub"
    if [ ! -f "$help" ]; then
        if [ -n "$sub" ]; then "$BIN" "$cmd" "$sub" --help >"$help" 2>&1; else "$BIN" "$cmd" --help >"$help" 2>&1; fi
        # the options shared by run and the other generating commands are listed by run's help
        "$BIN" run --help >>"$help" 2>&1
    fi
    grep -q "usage: longctx $cmd" "$help" && ok || bad "README line '$line': no command '$cmd'"
    for ((i = 2; i < ${#w[@]}; i++)); do
        t="${w[$i]}"
        case "$t" in
        --hip-* | --ts-*)
            key="${t%%=*}"
            key="${key#--hip-}"
            key="${key#--ts-}"
            grep -qE "^ +$key[ =]|^ +$key$|[ ,]$key=" "$help" && ok || bad "README line '$line': setting '$key' of $t is not in the help"
            ;;
        --attn-set)
            key="${w[$((i + 1))]%%=*}"
            grep -qE "^ +$key[ =]|^ +$key$" "$help" && ok || bad "README line '$line': setting '$key' is not in the help"
            ;;
        --preset)
            name="${w[$((i + 1))]}"
            grep -qE "^ +$name( |$)" "$help" && ok || bad "README line '$line': preset '$name' is not in the help"
            ;;
        --*)
            opt="${t%%=*}"
            grep -qE -- "(^|[ ,[])$opt([] =,]|$)" "$help" && ok || bad "README line '$line': option '$opt' is not in 'longctx $cmd $sub --help'"
            ;;
        esac
    done
done <"$TMP/lines"

# the lines that name the bundled model run as written
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$MODEL" ]; then
    while IFS= read -r line; do
        read -r -a w <<<"$line"
        # the words as the shell would split them (quotes kept together)
        eval "set -- ${line#longctx }"
        [ "${w[1]}" = serve ] && continue # (serves until a signal: options checked above only)
        if [ "${w[1]}" = chat ]; then
            timeout 300 "$BIN" "$@" --device cpu </dev/null >"$TMP/out" 2>"$TMP/err"
        else
            timeout 300 "$BIN" "$@" --device cpu >"$TMP/out" 2>"$TMP/err"
        fi
        rc=$?
        [ $rc -eq 0 ] && ok || { bad "README line '$line' exits $rc: $(tail -n 2 "$TMP/err")"; }
    done < <(grep -F "$MODEL" "$TMP/lines")
fi
echo "cli_readme: $pass checks passed, $fail failed ($(wc -l <"$TMP/lines") README lines)"
[ "$fail" -eq 0 ]

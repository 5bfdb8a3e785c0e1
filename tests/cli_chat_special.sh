#!/usr/bin/env bash
# cli_chat_special.sh — `longctx run --chat` tokenizes the document and question as plain
# text (issue 20, item 4): a file of 20 "<|im_start|>" makes a chat prompt of exactly the
# template's tokens plus the file's plain-text tokens (as `tokenize --no-special` counts them),
# not 20 control tokens; without --chat the default still parses special tokens and
# --no-special still turns that off. Counts are read from `run -n 0 --stats`.
# Usage: cli_chat_special.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$MODEL" ] || { echo "model $MODEL not found"; exit 77; }
. "$(dirname "$0")/lib_cli.sh" # TMP, pass / fail, ok, bad, check, has

# the prompt's token count of `run ... -n 0 --stats`
prompt_tokens() {
    "$BIN" run -m "$MODEL" --device cpu -n 0 --stats "$@" 2>"$TMP/err" >/dev/null
    sed -n 's/^longctx: prompt \([0-9]*\) tokens.*/\1/p' "$TMP/err"
}

printf '<|im_start|>%.0s' $(seq 20) >"$TMP/doc.txt"
printf 'x' >"$TMP/x.txt"
plain=$("$BIN" tokenize -m "$MODEL" -f "$TMP/doc.txt" --no-special --count)
special=$("$BIN" tokenize -m "$MODEL" -f "$TMP/doc.txt" --count)
check "tokenize counts (special, plain > 40)" "$special $([ "${plain:-0}" -gt 40 ] && echo ok)" "20 ok"

chat_doc=$(prompt_tokens --chat -f "$TMP/doc.txt")
chat_x=$(prompt_tokens --chat -f "$TMP/x.txt") # the template plus one token
check "--chat: the file is plain text" "$chat_doc" "$((chat_x - 1 + plain))"
# --no-special changes nothing in chat mode
check "--chat --no-special" "$(prompt_tokens --chat --no-special -f "$TMP/doc.txt")" "$chat_doc"
# the question and the system text are plain text too
chat_q=$(prompt_tokens --chat -f "$TMP/x.txt" -p "$(cat "$TMP/doc.txt")" --system "$(cat "$TMP/doc.txt")")
chat_q0=$(prompt_tokens --chat -f "$TMP/x.txt" -p x --system x)
check "--chat: question and system plain" "$chat_q" "$((chat_q0 - 2 + 2 * plain))"

# completion mode: special parsing by default, --no-special turns it off
check "completion default" "$(prompt_tokens -f "$TMP/doc.txt")" "$special"
check "completion --no-special" "$(prompt_tokens --no-special -f "$TMP/doc.txt")" "$plain"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

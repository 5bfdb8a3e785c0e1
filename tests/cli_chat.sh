#!/usr/bin/env bash
# cli_chat.sh — `longctx chat` from a scripted standard input (issue 26): answers stream per
# line; the KV cache is kept between turns (turn 2 evaluates only its own tokens, --stats);
# the first turn's greedy answer equals `run --chat`'s; -f reads the document once and /clear
# goes back to it; Ctrl-C (SIGINT) stops the current answer and the chat goes on; usage
# errors exit 2, an unrecognised chat template too, with one line naming --chat-template.
# Usage: cli_chat.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$MODEL" ] || { echo "model $MODEL not found"; exit 77; }
. "$(dirname "$0")/lib_cli.sh" # TMP, pass / fail, ok, bad, check, has
CHAT=("$BIN" chat -m "$MODEL" --device cpu --temp 0 -t 1 --stats)

# two turns, /clear, one more: the answers on stdout, one line each
printf 'What is the capital of France?\nAnd of Japan?\n/clear\nWhat is the capital of France?\n/exit\nnot read\n' |
    "${CHAT[@]}" -n 24 >"$TMP/out" 2>"$TMP/err"
check "chat exit status" "$?" "0"
check "answer 1" "$(sed -n 1p "$TMP/out" | grep -c Paris)" "1"
check "answer 2" "$(sed -n 2p "$TMP/out" | grep -c Tokyo)" "1"
check "after /clear, the same answer as turn 1" "$(sed -n 3p "$TMP/out")" "$(sed -n 1p "$TMP/out")"
check "/exit ends (three answers)" "$(wc -l <"$TMP/out")" "3"
# turn 2 evaluates only its new tokens: fewer than the KV cache held before it
read -r new2 kv2 <<<"$(sed -n 's/.*turn evaluated \([0-9]*\) new tokens (KV cache \([0-9]*\) ->.*/\1 \2/p' "$TMP/err" | sed -n 2p)"
check "turn 2 prefills only its own tokens" "$([ "${kv2:-0}" -gt 0 ] && [ "${new2:-99999}" -lt "${kv2:-0}" ] && echo yes)" "yes"
check "/clear empties the KV cache" "$(sed -n 's/.*(KV cache \([0-9]*\) ->.*/\1/p' "$TMP/err" | sed -n 3p)" "0"
check "/clear said" "$(has "$TMP/err" "the conversation starts over")" "yes"

# turn 1 is the same prompt as run --chat: the same greedy answer
"$BIN" run -m "$MODEL" --device cpu --temp 0 -t 1 --chat -p "What is the capital of France?" -n 24 \
    >"$TMP/run" 2>/dev/null
check "turn 1 = run --chat" "$(cat "$TMP/run")" "$(sed -n 1p "$TMP/out")"

# a document read once; the questions are about it; /clear keeps it
printf 'The secret password is BLUE-42. Alice owns a red bicycle. Bob lives in Lisbon.\n' >"$TMP/doc.txt"
printf 'What is the secret password?\nWhere does Bob live?\n/clear\nWhat is the secret password?\n' |
    "${CHAT[@]}" -n 16 -f "$TMP/doc.txt" >"$TMP/out" 2>"$TMP/err"
check "chat -f exit status" "$?" "0"
ndoc=$(sed -n 's/.*read the document (\([0-9]*\) tokens).*/\1/p' "$TMP/err")
check "the document read once" "$([ "${ndoc:-0}" -gt 20 ] && echo yes)" "yes"
check "-f answer 1" "$(sed -n 1p "$TMP/out" | grep -c BLUE-42)" "1"
check "-f answer 2" "$(sed -n 2p "$TMP/out" | grep -c Lisbon)" "1"
check "-f: turn 1 starts after the document" "$(sed -n 's/.*(KV cache \([0-9]*\) ->.*/\1/p' "$TMP/err" | sed -n 1p)" "$ndoc"
check "-f: /clear goes back to the document" "$(sed -n 's/.*(KV cache \([0-9]*\) ->.*/\1/p' "$TMP/err" | sed -n 3p)" "$ndoc"
check "-f: after /clear the same answer as turn 1" "$(sed -n 3p "$TMP/out")" "$(sed -n 1p "$TMP/out")"

# Ctrl-C stops the current answer, not the program
mkfifo "$TMP/in"
"${CHAT[@]}" -n 600 <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
pid=$!
exec 3>"$TMP/in"
echo "Write a very long story about a dragon who learns to read." >&3
for _ in $(seq 100); do [ -s "$TMP/out" ] && break; sleep 0.1; done
sleep 1
kill -INT "$pid"
echo "What is the capital of France?" >&3
echo "/exit" >&3
exec 3>&-
wait "$pid"
check "SIGINT: exit status" "$?" "0"
check "SIGINT: the answer stopped" "$(has "$TMP/err" '\[stopped\]')" "yes"
check "SIGINT: the next question answered" "$(tail -n 1 "$TMP/out" | grep -c Paris)" "1"
check "SIGINT: the story cut short" "$(sed -n 's/.*; \([0-9]*\) tokens at.*/\1/p' "$TMP/err" | sed -n 1p | awk '{print ($1 < 600) ? "yes" : "no"}')" "yes"

# usage errors: exit 2, one line
"$BIN" chat >/dev/null 2>"$TMP/err" </dev/null
check "no -m" "$?" "2"
"$BIN" chat -m "$MODEL" -p hi >/dev/null 2>"$TMP/err" </dev/null
check "-p refused" "$? $(has "$TMP/err" 'standard input')" "2 yes"
"$BIN" chat -m "$MODEL" -f - >/dev/null 2>"$TMP/err" </dev/null
check "-f - refused" "$?" "2"
"$BIN" chat -m "$MODEL" -n 0 >/dev/null 2>"$TMP/err" </dev/null
check "-n 0 refused" "$?" "2"
printf '/nope\n' | "$BIN" chat -m "$MODEL" -t 1 >/dev/null 2>"$TMP/err"
check "unknown /command: said, goes on" "$? $(has "$TMP/err" 'unknown command /nope')" "0 yes"

# a template none of the families: one line naming --chat-template, exit 2; the option fixes it
if command -v python3 >/dev/null; then
    python3 - "$MODEL" "$TMP/odd.gguf" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
k = d.index(b"tokenizer.chat_template") + len(b"tokenizer.chat_template")
n, = struct.unpack_from("<Q", d, k + 4)
s = d[k + 12:k + 12 + n].replace(b"<|im_start|>", b"<|im_begin|>")
open(sys.argv[2], "wb").write(d[:k + 12] + s + d[k + 12 + n:])
EOF
    printf 'hi\n' | "$BIN" chat -m "$TMP/odd.gguf" -t 1 >/dev/null 2>"$TMP/err"
    check "odd template: exit 2" "$?" "2"
    check "odd template: one line naming --chat-template" \
        "$(grep -v '^loading' "$TMP/err" | grep -c -- '--chat-template NAME (chatml, llama3, llama3.1, mistral, gemma, phi3)')" "1"
    printf 'What is the capital of France?\n' | "$BIN" chat -m "$TMP/odd.gguf" -t 1 --temp 0 -n 12 \
        --chat-template chatml >"$TMP/out" 2>/dev/null
    check "odd template with --chat-template chatml" "$? $(grep -c Paris "$TMP/out")" "0 1"
    "$BIN" run -m "$TMP/odd.gguf" -t 1 --chat -p hi >/dev/null 2>"$TMP/err"
    check "run --chat, odd template: exit 2" "$?" "2"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

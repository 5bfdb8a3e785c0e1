#!/usr/bin/env bash
# cli_badinput.sh — bad input to the longctx CLI: missing, empty, truncated, random and
# wrong-magic files, directories, unknown options and commands, bad numbers, a prompt longer
# than the context, invalid UTF-8, unknown chat templates, bad --tune knobs. Each must exit
# non-zero (2 for usage errors, 1 for runtime errors) with a one-line message naming what and
# where — never a crash (exit >= 128) or a hang. Usage: cli_badinput.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf 'A short text of a few words.\n' >"$TMP/short.txt"
pass=0
fail=0

# expect CODE PATTERN -- command...: exit code CODE, stderr matching PATTERN (grep -E), and
# stderr of one line (warnings aside)
expect() {
    local code="$1" pattern="$2"
    shift 3
    timeout 120 "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    local lines
    # progress lines ("loading 12/363 tensors ...") and warnings are not the error message
    lines=$(grep -v -e "warning" -e "^loading " -e "^prompt " "$TMP/err" | wc -l)
    if [ "$rc" -eq "$code" ] && grep -Eq -- "$pattern" "$TMP/err" && [ "$lines" -le 1 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $* -> exit $rc (want $code), stderr:" >&2
        sed 's/^/    /' "$TMP/err" >&2
    fi
}

# usage errors
if "$BIN" >/dev/null 2>"$TMP/err"; then fail=$((fail + 1)); echo "FAIL: no arguments exits 0" >&2
elif grep -q "usage: longctx COMMAND" "$TMP/err"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
expect 2 "unknown command 'frobnicate'" -- "$BIN" frobnicate
expect 2 "unknown option '--bogus'" -- "$BIN" run --bogus
expect 2 "unknown option '--bogus'" -- "$BIN" inspect --bogus x
expect 2 "unknown option '--bogus'" -- "$BIN" tokenize --bogus
expect 2 "unknown option '--bogus'" -- "$BIN" bench --bogus
expect 2 "unknown task 'nope'" -- "$BIN" eval nope
expect 2 "no model given" -- "$BIN" run -p hi
expect 2 "give a prompt" -- "$BIN" run -m "$MODEL"
expect 2 "'abc' is not an integer" -- "$BIN" run -m "$MODEL" -p hi -n abc
expect 2 "out of range" -- "$BIN" run -m "$MODEL" -p hi --temp -1
expect 2 "out of range" -- "$BIN" run -m "$MODEL" -p hi --top-p 2
expect 2 "needs a value" -- "$BIN" run -m "$MODEL" -p
expect 2 "not a power of two" -- "$BIN" run -m "$MODEL" -p hi --page-size 48
expect 2 "kv-gb" -- "$BIN" run -m "$MODEL" -p hi --kv-gb 0
expect 2 "-c: 0 is out of range" -- "$BIN" run -m "$MODEL" -p hi -c 0
expect 2 "the prompt is empty" -- "$BIN" run -m "$MODEL" -p ""
expect 2 "kv-tokens" -- "$BIN" run -m "$MODEL" -p hi --kv-tokens -5
expect 1 "KV|pages" -- "$BIN" run -m "$MODEL" -p "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty" --kv-tokens 16 --page-size 16
expect 2 "not one of cpu, cuda" -- "$BIN" run -m "$MODEL" -p hi --device tpu
expect 2 "unknown template 'jinja9'" -- "$BIN" run -m "$MODEL" -p hi --chat-template jinja9
# the backend's tuning (--tune NAME=VALUE): refused before the model loads, naming the knob
expect 2 "unknown tuning knob --tune graphs .*cuda-graphs" -- "$BIN" run -m "$MODEL" -p hi --tune graphs=off
expect 2 "tune cuda-graphs=0: expected on or off" -- "$BIN" run -m "$MODEL" -p hi --tune cuda-graphs=0
expect 2 "tune stage-tiles=3: expected auto, 1, 2 or 4" -- "$BIN" bench -m "$MODEL" --tune stage-tiles=3
expect 2 "'gemv' is not NAME=VALUE" -- "$BIN" eval passkey -m "$MODEL" --tune gemv
expect 2 "needs a value" -- "$BIN" run -m "$MODEL" -p hi --tune
# attention methods and their knobs (InfiniteHiP, HiP, TokenSelect): refused before anything
# runs, naming the option
expect 2 "unknown method 'sparse9'" -- "$BIN" run -m "$MODEL" -p hi --attn sparse9
expect 2 "hip-k needs --attn infinitehip or hip" -- "$BIN" run -m "$MODEL" -p hi --hip-k=4096
expect 2 "ts-k needs --attn tokenselect" -- "$BIN" run -m "$MODEL" -p hi --attn hip --ts-k=4096
expect 2 "hip has no preset .3k." -- "$BIN" run -m "$MODEL" -p hi --attn hip --preset 3k
expect 2 "tokenselect has no preset .3k. \\(presets: default, paper\\)" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --preset 3k
expect 2 "hip: k=1001.*multiple of block-k 2" -- "$BIN" run -m "$MODEL" -p hi --attn hip --hip-k=1001
expect 2 "hip: k-stride=4.*block-k \\(2\\)" -- "$BIN" run -m "$MODEL" -p hi --attn hip --hip-k-stride=4
expect 2 "hip: q-stride=64.*block-q \\(32\\)" -- "$BIN" run -m "$MODEL" -p hi --attn hip --hip-q-stride=64
expect 2 "hip: refresh=0 is outside 1..1048576" -- "$BIN" run -m "$MODEL" -p hi --attn hip --hip-refresh=0
expect 2 "hip has no setting .chunks. \\(a setting of infinitehip" -- "$BIN" run -m "$MODEL" -p hi --attn hip --hip-chunks=64
expect 2 "tokenselect: k=0 is outside 1..1073741824" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --ts-k=0
expect 2 "tokenselect: theta=nan is outside -1..2" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --ts-theta=nan
expect 2 "tokenselect: local=256.*chunk \\(512\\)" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --ts-local=256
expect 2 "tokenselect: gqa=div is not one of group or mod" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --ts-gqa=div
expect 2 "tokenselect: rope=stream is not one of auto, extend or plain" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --ts-rope=stream
expect 2 "tokenselect has no setting .bogus. \\(settings: k, init" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --ts-bogus=1
expect 2 "infinitehip has no preset .9k." -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --preset 9k
expect 2 "infinitehip: k: .*multiple of its chunk 64" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-k=1000,512,256  # stage 1 of the default 3k-fine64: 64-token chunks
expect 2 "infinitehip: chunks: .*power of two" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-chunks=256,48,8
expect 2 "infinitehip: chunks: .*divide" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-chunks=256,512,8
expect 2 "infinitehip: k: .*more than" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-k=32768,8192,16384
expect 2 "infinitehip: overlap=2 is not 0 or 1" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-overlap=2
expect 2 "infinitehip: kv-descent=1,3 is outside 0..1" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-kv-descent=1,3
expect 2 "infinitehip: overlap=1 needs" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-chunks=256 --hip-k=2048 --hip-first-k=2048 --hip-overlap=1
expect 2 "infinitehip: stagger=5 is not 0 or 1" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-stagger=5
expect 2 "infinitehip: block-q=0 is outside 1..64" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-block-q=0
expect 2 "infinitehip: stream=0 is outside" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-stream=0
expect 2 "infinitehip: refresh=16,0,4 is outside 1..1048576" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-refresh=16,0,4
expect 2 "infinitehip: rope=yarn is not one of auto, extend, plain or stream" -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-rope=yarn
expect 2 "infinitehip has no setting .bogus." -- "$BIN" run -m "$MODEL" -p hi --attn infinitehip --hip-bogus=1
expect 2 "tokenselect has no setting .chunks. \\(a setting of infinitehip" -- "$BIN" run -m "$MODEL" -p hi --attn tokenselect --attn-set chunks=64
expect 2 "hip: tail-block=600 is outside 0..512" -- "$BIN" run -m "$MODEL" -p hi --attn hip --attn-set k=4096 --attn-set tail-block=600
expect 2 "attn-set: 'k' is not KEY=VALUE" -- "$BIN" run -m "$MODEL" -p hi --attn hip --attn-set k
expect 2 "give a long natural text" -- "$BIN" eval fidelity -m "$MODEL" --len 4096
expect 2 "give a long natural text" -- "$BIN" eval ppl -m "$MODEL" --len 4096
expect 2 "--window 4096 must be below every --len" -- "$BIN" eval ppl -m "$MODEL" -f "$TMP/short.txt" --len 8192,4096 --window 4096
expect 1 "has [0-9]+ tokens, fewer than --len 100000" -- "$BIN" eval ppl -m "$MODEL" -f "$TMP/short.txt" --len 100000
expect 2 "preset needs --attn NAME" -- "$BIN" eval ppl -m "$MODEL" -f "$TMP/short.txt" --preset 3k
expect 2 "unknown task 'ruler9'" -- "$BIN" eval passkey -m "$MODEL" --task ruler9
expect 2 "--depths: 1.5 is out of range" -- "$BIN" eval passkey -m "$MODEL" --depths 0,1.5
expect 2 "--len: 'x' is not a number" -- "$BIN" eval passkey -m "$MODEL" --len x

expect 2 "--config" -- "$BIN" gen-model --arch llama --config llama-9000 --out "$TMP/x.gguf"
expect 2 "--arch" -- "$BIN" gen-model --arch qwen2 --config tiny --out "$TMP/x.gguf"
expect 2 "--type" -- "$BIN" gen-model --arch llama --config tiny --type q3_k --out "$TMP/x.gguf"
expect 1 "/nonexistent-dir/x.gguf" -- "$BIN" gen-model --arch llama --config tiny --out /nonexistent-dir/x.gguf
# a generated model loads and runs
if "$BIN" gen-model --arch llama --config tiny --type q8_0 --out "$TMP/tiny.gguf" 2>/dev/null &&
    "$BIN" run -m "$TMP/tiny.gguf" -p "hello" -n 4 --temp 0 --device cpu >/dev/null 2>&1; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: gen-model tiny + run" >&2; fi

# --help everywhere
for c in run inspect tokenize eval bench gen-model; do
    if "$BIN" $c --help >/dev/null 2>&1; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: $c --help" >&2; fi
done

# bad files (inspect, tokenize and run all go through the GGUF reader)
printf '' >"$TMP/empty.gguf"
head -c 4096 /dev/urandom >"$TMP/random.gguf"
printf 'GGUF\x01\x00\x00\x00' >"$TMP/v1.gguf"
printf 'GGML\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' >"$TMP/magic.gguf"
mkdir "$TMP/dir.gguf"
expect 1 "$TMP/missing.gguf" -- "$BIN" inspect "$TMP/missing.gguf"
expect 1 "empty.gguf" -- "$BIN" inspect "$TMP/empty.gguf"
expect 1 "random.gguf" -- "$BIN" inspect "$TMP/random.gguf"
expect 1 "GGUFv1" -- "$BIN" inspect "$TMP/v1.gguf"
expect 1 "magic" -- "$BIN" inspect "$TMP/magic.gguf"
expect 1 "dir.gguf" -- "$BIN" inspect "$TMP/dir.gguf"
expect 1 "random.gguf" -- "$BIN" run -m "$TMP/random.gguf" -p hi
expect 1 "random.gguf" -- "$BIN" tokenize -m "$TMP/random.gguf" -p hi

if [ -f "$MODEL" ]; then
    head -c 200000 "$MODEL" >"$TMP/trunc.gguf"
    expect 1 "past the end|past end|extends|exceeds" -- "$BIN" inspect "$TMP/trunc.gguf"
    expect 1 "trunc.gguf" -- "$BIN" run -m "$TMP/trunc.gguf" -p hi
    # a prompt longer than the context
    python3 -c "print('hello world ' * 400)" >"$TMP/long.txt"
    expect 1 "prompt has [0-9]+ tokens but the context holds 64" -- \
        "$BIN" run -m "$MODEL" -f "$TMP/long.txt" -c 64 -n 4 --device cpu
    # invalid UTF-8, in a file and on the command line
    printf 'abc\xff\xfedef' >"$TMP/bad-utf8.txt"
    expect 1 "UTF-8.*(byte|offset) 3" -- "$BIN" run -m "$MODEL" -f "$TMP/bad-utf8.txt" -n 4 --device cpu
    expect 1 "UTF-8" -- "$BIN" tokenize -m "$MODEL" -p "$(printf 'a\xc3')"
    expect 1 "missing.txt" -- "$BIN" run -m "$MODEL" -f "$TMP/missing.txt"
    # a GPU request on a machine or build without one
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
        expect 1 "CUDA|cuda" -- "$BIN" run -m "$MODEL" -p hi --device cuda
    fi
    # a context that fills before -n says so (exit 0: the text so far is the answer)
    expect 0 "stopped after 31 of 1000 tokens: the context is full" -- \
        "$BIN" run -m "$MODEL" -p Count -c 32 -n 1000 --ignore-eos --temp 0 --device cpu
    # the happy paths still work, -f - reading standard input
    if "$BIN" tokenize -m "$MODEL" -p "Hello world" | grep -q '\[19556, 905\]'; then
        pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: tokenize Hello world" >&2; fi
    if printf 'Hello world' | "$BIN" tokenize -m "$MODEL" -f - | grep -q '\[19556, 905\]'; then
        pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: tokenize -f - (stdin)" >&2; fi
    if "$BIN" --version | grep -q '^longctx [0-9].* (commit '; then
        pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --version" >&2; fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

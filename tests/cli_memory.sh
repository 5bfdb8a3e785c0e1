#!/usr/bin/env bash
# cli_memory.sh — the CLI checks memory before it allocates (issue 20, items 2, 3 and 9): a
# prompt whose KV cache cannot fit (5,000,000 emoji = 15M tokens), --kv-gb past the machine and
# a huge -n are refused at once in one line with the numbers, without allocating gigabytes;
# -c far past the prompt does not size the RoPE table by -c; input files are read with a limit
# and checked as they are read (NUL bytes, invalid UTF-8, oversized files and endless streams
# stop at the first bad byte with its offset); a FIFO with no writer says it is waiting; -t
# past the core count warns; the KV tier options (--kv-host-*, --kv-gpu-*, --kv-slot-cache-*)
# refuse contradictions and give the one-tier answer. Usage: cli_memory.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
TMP=$(mktemp -d)
FIFO_PID=""
trap '[ -n "$FIFO_PID" ] && kill "$FIFO_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
pass=0
fail=0
# an uninstrumented binary runs under a virtual-memory cap, so a regression that reads or
# allocates without bound fails here instead of driving the machine into the OOM killer
# (ASan reserves terabytes of shadow address space and cannot run under one)
if grep -q __asan_init "$BIN" 2>/dev/null; then ASAN=1; CAP="ulimit -v unlimited"
else ASAN=0; CAP="ulimit -v 4000000"; fi

# run_cmd command...: its stdout and stderr to $TMP/out and $TMP/err, its peak resident memory
# (KiB) to $TMP/rss; returns its exit code (124 after 300 s)
run_cmd() {
    python3 - "$TMP" "$@" <<'EOF'
import resource, subprocess, sys
tmp = sys.argv[1]
with open(tmp + "/out", "wb") as o, open(tmp + "/err", "wb") as e:
    try:
        rc = subprocess.run(sys.argv[2:], stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                            timeout=300).returncode
    except subprocess.TimeoutExpired:
        rc = 124
with open(tmp + "/rss", "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc if rc >= 0 else 128 - rc)
EOF
}

# expect CODE PATTERN -- command...: exit code CODE, stderr matching PATTERN (grep -E; "": any),
# one line of stderr at most (progress lines and warnings aside)
expect() {
    local code="$1" pattern="$2"
    shift 3
    (eval "$CAP"; run_cmd "$@")
    local rc=$?
    local lines
    lines=$(grep -v -e "warning" -e "^loading " -e "^prompt " "$TMP/err" | wc -l)
    if [ "$rc" -eq "$code" ] && { [ -z "$pattern" ] || grep -Eq -- "$pattern" "$TMP/err"; } &&
        [ "$lines" -le 1 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $* -> exit $rc (want $code), stderr:" >&2
        sed 's/^/    /' "$TMP/err" >&2
    fi
}

# peak resident memory (KiB) of a command
maxrss_kb() {
    (eval "$CAP"; run_cmd "$@") >/dev/null 2>&1
    cat "$TMP/rss"
}

# ---- input files: limit and checks while reading ----
printf 'hello world\n' >"$TMP/ok.txt"
expect 1 "/dev/zero: a NUL byte at byte offset 0" -- "$BIN" run -m "$MODEL" -f /dev/zero
printf 'abc\0def' >"$TMP/nul.txt"
expect 1 "nul.txt: a NUL byte at byte offset 3" -- "$BIN" tokenize -m "$MODEL" -f "$TMP/nul.txt"
printf 'ab\xe2\x82' >"$TMP/cut.txt"
expect 1 "cut.txt: invalid UTF-8.*offset 2" -- "$BIN" tokenize -m "$MODEL" -f "$TMP/cut.txt"
printf 'ab\xed\xa0\x80' >"$TMP/surrogate.txt"
expect 1 "invalid UTF-8 at byte offset 2" -- "$BIN" tokenize -m "$MODEL" -f "$TMP/surrogate.txt"
# an endless stream with a bad byte early: stops there
expect 1 "/dev/stdin: invalid UTF-8 at byte offset 5" -- bash -c \
    "(printf 'hello'; printf '\\xff'; yes) | \"$BIN\" run -m \"$MODEL\" -f /dev/stdin"
# a character split across reads is not an error (4-byte characters over a pipe in pieces)
if (python3 -c "
import sys, time
for i in range(3):
    sys.stdout.buffer.write('\U0001F600'.encode()[:2]); sys.stdout.flush(); time.sleep(0.05)
    sys.stdout.buffer.write('\U0001F600'.encode()[2:]); sys.stdout.flush()
" | "$BIN" tokenize -m "$MODEL" -f /dev/stdin >"$TMP/out" 2>"$TMP/err") && grep -q '\[' "$TMP/out"; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: split characters" >&2; cat "$TMP/err" >&2; fi
# a file larger than the input limit: refused from its size, before reading
truncate -s 1T "$TMP/huge.txt"
expect 1 "huge.txt is 1.0 TiB, more than the .* of input this machine can tokenize" -- \
    "$BIN" run -m "$MODEL" -f "$TMP/huge.txt"
expect 1 "huge.txt is 1.0 TiB" -- "$BIN" eval ppl -m "$MODEL" -f "$TMP/huge.txt" --len 4096
# a FIFO without a writer: "waiting for input" after a second, then the input is read
mkfifo "$TMP/fifo"
"$BIN" tokenize -m "$MODEL" -f "$TMP/fifo" >"$TMP/fifo.out" 2>"$TMP/fifo.err" &
FIFO_PID=$!
for _ in $(seq 600); do grep -qs "waiting for input on $TMP/fifo" "$TMP/fifo.err" && break; sleep 0.1; done
if grep -q "longctx tokenize: waiting for input on $TMP/fifo" "$TMP/fifo.err"; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: no 'waiting for input' for a FIFO" >&2; fi
printf 'Hello world' >"$TMP/fifo"
wait "$FIFO_PID"
rc=$?
FIFO_PID=""
if [ "$rc" -eq 0 ] && grep -q '\[19556, 905\]' "$TMP/fifo.out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: FIFO input after waiting (exit $rc)" >&2; cat "$TMP/fifo.err" >&2; fi

# ---- -n and -t ----
expect 2 "^longctx run: -n 1073741824: .*2\\^30" -- "$BIN" run -m "$MODEL" -p hi -n 1073741824 --device cpu
"$BIN" gen-model --arch llama --config tiny --type q8_0 --out "$TMP/tiny.gguf" 2>/dev/null
cores=$(nproc)
many=$((cores * 4))
"$BIN" run -m "$TMP/tiny.gguf" -p hello -n 2 --temp 0 --device cpu -t "$many" >/dev/null 2>"$TMP/err"
if grep -q "warning: -t $many is more than the $cores CPU cores" "$TMP/err" && [ "$(wc -l <"$TMP/err")" -eq 1 ]; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: -t $many: no one-line warning" >&2; cat "$TMP/err" >&2; fi
"$BIN" run -m "$TMP/tiny.gguf" -p hello -n 2 --temp 0 --device cpu -t 1 >/dev/null 2>"$TMP/err"
if ! grep -q "warning" "$TMP/err"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: -t 1 warns" >&2; fi

if [ -f "$MODEL" ]; then
    # ---- the memory budget of the context ----
    # 5,000,000 emoji (20 MB) are 15M tokens: a KV cache of ~640 GiB on the CPU
    python3 -c "import sys; sys.stdout.buffer.write(('\U0001F600' * 5000000).encode())" >"$TMP/emoji.txt"
    expect 1 "creating the context: the KV cache for 15,000,[0-9]{3} tokens needs [0-9.]+ [GT]iB .* of host memory .* at most ~[0-9,]+ tokens fit .*--overcommit" -- \
        "$BIN" run -m "$MODEL" -f "$TMP/emoji.txt" --device cpu -n 4
    # ... and is refused before the big allocations (8 GB resident before the fix)
    kb=$(cat "$TMP/rss")
    if [ "$kb" -lt 3000000 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: refusing the emoji prompt peaked at $kb KiB" >&2; fi
    expect 1 "the KV cache for [0-9,]+ tokens needs [0-9.]+ TiB .* at most ~[0-9,]+ tokens fit \\(lower -c/--ctx, --kv-tokens or --kv-gb\\)" -- \
        "$BIN" run -m "$MODEL" -p hi -n 2 --kv-gb 100000 --device cpu
    expect 1 "the KV cache for 1,073,741,000 tokens" -- \
        "$BIN" run -m "$MODEL" -p hi -n 1073740999 --device cpu
    expect 1 "the KV cache for 1,073,741,824 tokens .* at most ~" -- \
        "$BIN" run -m "$MODEL" -p hi -n 2 -c 1073741824 --device cpu
    # -c far past a small KV: the RoPE table follows the positions used, not -c (2^30
    # positions: 256 GiB before)
    expect 0 "" -- "$BIN" run -m "$MODEL" -p hi -n 2 --temp 0 -c 1073741824 --kv-tokens 4096 --device cpu
    base=$(maxrss_kb "$BIN" run -m "$MODEL" -p hi -n 2 --temp 0 -c 4096 --kv-tokens 4096 --device cpu)
    big=$(maxrss_kb "$BIN" run -m "$MODEL" -p hi -n 2 --temp 0 -c 5000000 --kv-tokens 4096 --device cpu)
    if [ "$big" -lt $((base + 200000)) ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: -c 5000000 peaked at $big KiB, -c 4096 at $base KiB" >&2; fi
    # --overcommit: the check is skipped (the KV is reserved, not touched)
    if [ "$ASAN" -eq 0 ]; then
        CAP="ulimit -v unlimited"
        expect 0 "" -- "$BIN" run -m "$MODEL" -p hi -n 2 --temp 0 -c 2000000 --overcommit --device cpu
    fi
fi
# ---- the KV tiers' options: contradictions refused in one line; a host tier gives the same
# answer (on the CPU the split is only counted, but the pages come from both stacks) ----
if [ -f "$MODEL" ]; then
    expect 1 "in tokens or in GiB, not both" -- "$BIN" run -m "$MODEL" -p hi -n 1 --device cpu \
        --kv-host-gb 0.01 --kv-host-tokens 64
    expect 1 "leave out --kv-tokens" -- "$BIN" run -m "$MODEL" -p hi -n 1 --device cpu \
        --kv-host-tokens 512 --kv-gpu-tokens 512 --kv-tokens 4096
    expect 2 "--kv-host-gb" -- "$BIN" run -m "$MODEL" -p hi -n 1 --device cpu --kv-host-gb abc
    P="The capital of France is"
    (eval "$CAP"; run_cmd "$BIN" run -m "$MODEL" -p "$P" -n 12 --temp 0 -c 256 --page-size 16 --device cpu)
    cp "$TMP/out" "$TMP/one-tier.txt"
    for t in "--kv-host-tokens 240" "--kv-gpu-tokens 16" "--kv-gpu-tokens 16 --kv-host-tokens 240"; do
        (eval "$CAP"; run_cmd "$BIN" run -m "$MODEL" -p "$P" -n 12 --temp 0 -c 256 --page-size 16 --device cpu $t)
        if [ $? -eq 0 ] && [ -s "$TMP/out" ] && cmp -s "$TMP/out" "$TMP/one-tier.txt"; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1)); echo "FAIL: run $t: not the one-tier answer" >&2; cat "$TMP/err" >&2
        fi
    done
    # the slot cache of host reads: it needs a host tier and a method that keeps selections;
    # with both, the answer without it
    expect 1 "caches the KV host tier" -- "$BIN" run -m "$MODEL" -p hi -n 1 --device cpu \
        --kv-slot-cache-tokens 64
    expect 1 "not dense" -- "$BIN" run -m "$MODEL" -p hi -n 1 --device cpu --attn dense \
        --kv-host-tokens 240 --kv-slot-cache-tokens 64
    expect 1 "in tokens or in GiB, not both" -- "$BIN" run -m "$MODEL" -p hi -n 1 --device cpu \
        --kv-host-tokens 240 --kv-slot-cache-tokens 64 --kv-slot-cache-gb 0.01
    (eval "$CAP"; run_cmd "$BIN" run -m "$MODEL" -p "$P" -n 12 --temp 0 -c 256 --page-size 16 --device cpu --attn infinitehip)
    cp "$TMP/out" "$TMP/ihip.txt"
    (eval "$CAP"; run_cmd "$BIN" run -m "$MODEL" -p "$P" -n 12 --temp 0 -c 256 --page-size 16 \
        --device cpu --attn infinitehip --kv-host-tokens 240 --kv-slot-cache-tokens 64)
    if [ $? -eq 0 ] && [ -s "$TMP/out" ] && cmp -s "$TMP/out" "$TMP/ihip.txt"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL: run with a slot cache: not the answer without" >&2; cat "$TMP/err" >&2
    fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

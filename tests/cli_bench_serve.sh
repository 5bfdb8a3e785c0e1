#!/usr/bin/env bash
# cli_bench_serve.sh — `longctx bench serve` (issue 25's benchmark client) against `longctx
# serve` with SmolLM2 on a free loopback port: every request completes with exactly the asked
# output length (--ignore-eos), the JSON has vllm bench serve's fields with consistent values
# (TTFT <= end-to-end, one ITL list per request, goodput = throughput under loose SLOs, 0 under
# impossible ones), Poisson arrivals take about N/R seconds, and the failures are clear: a wrong
# API key (each request's HTTP 401 reported, exit 1), no server (exit 1), a prompt longer than
# the dataset and a bad option (exit 2). Skips (77) without server support or the model.
# Usage: cli_bench_serve.sh PATH/TO/longctx
set -u
BIN="$1"
. "$(dirname "$0")/lib_cli.sh" # TMP, pass / fail, check, has, serve_test_prereqs
serve_test_prereqs "$BIN"
DATA="$(dirname "$0")/../README.md" # real prose, a few thousand tokens

"$BIN" serve -m "$MODEL" --port 0 --parallel 4 --api-key sekrit 2>"$TMP/srv.err" >/dev/null &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; rm -rf "$TMP"' EXIT
PORT=""
for _ in $(seq 1 600); do # "ready" follows the model's load
    grep -q 'longctx serve: ready' "$TMP/srv.err" && break
    kill -0 $SRV 2>/dev/null || break
    sleep 0.2
done
PORT=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$TMP/srv.err" | head -n1 | sed 's/.*://')
if [ -z "$PORT" ] || ! grep -q 'longctx serve: ready' "$TMP/srv.err"; then
    cat "$TMP/srv.err"
    echo "FAIL: the server did not start"
    exit 1
fi
URL="http://127.0.0.1:$PORT"

# 1. all at once, at most 3 in flight, lengths spread
"$BIN" bench serve --url "$URL" --api-key sekrit --dataset "$DATA" --num-prompts 6 \
    --max-concurrency 3 --input-len 48 --output-len 6 --range-ratio 0.5 --ignore-eos \
    --goodput ttft:600000,tpot:600000 --result-file "$TMP/a.json" --save-detailed \
    >"$TMP/a.out" 2>"$TMP/a.err"
check "bench serve exit" "$?" 0
check "table printed" "$(has "$TMP/a.out" 'Successful requests: *6')" yes
check "progress on stderr" "$(has "$TMP/a.err" '6/6 requests')" yes
python3 - "$TMP/a.json" <<'PY' || bad "result JSON (above)"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ["date", "backend", "model_id", "num_prompts", "request_rate", "max_concurrency",
          "duration", "completed", "total_input_tokens", "total_output_tokens",
          "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
          "input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors",
          "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
          "p90_itl_ms", "mean_e2el_ms", "p50_e2el_ms"]:
    assert k in d, "missing " + k
assert d["completed"] == 6 and d["num_prompts"] == 6 and d["max_concurrency"] == 3, d
ins, outs = d["input_lens"], d["output_lens"]
assert all(24 <= x <= 72 for x in ins) and len(set(ins)) > 1, ins
assert all(3 <= y <= 9 for y in outs), outs
assert d["total_input_tokens"] == sum(ins) and d["total_output_tokens"] == sum(outs), d
assert all(1 <= len(l) <= y - 1 for l, y in zip(d["itls"], outs)), d["itls"]
assert all(t > 0 for t in d["ttfts"]) and all(e == "" for e in d["errors"])
assert all(txt for txt in d["generated_texts"])
assert 0 < d["mean_ttft_ms"] <= d["mean_e2el_ms"] and d["p99_ttft_ms"] >= d["median_ttft_ms"]
assert abs(d["request_goodput"] - d["request_throughput"]) < 1e-9, d
assert abs(d["request_throughput"] - 6 / d["duration"]) < 1e-6, d
print("result JSON ok")
PY
[ $? -eq 0 ] && ok

# 2. Poisson arrivals at 4/s: 8 requests take at least ~the arrivals; impossible SLOs
"$BIN" bench serve --url "$URL" --api-key sekrit --dataset "$DATA" --num-prompts 8 \
    --request-rate 4 --seed 3 --input-len 16 --output-len 2 --ignore-eos --goodput ttft:0.001 \
    --result-file "$TMP/b.json" >"$TMP/b.out" 2>"$TMP/b.err"
check "poisson exit" "$?" 0
python3 - "$TMP/b.json" <<'PY' || bad "poisson JSON (above)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["completed"] == 8 and d["request_rate"] == 4, d
assert d["request_goodput"] == 0, d
assert d["duration"] > 0.3, d  # 7 exponential gaps of mean 0.25 s (seed 3)
assert "ttfts" not in d  # only with --save-detailed
PY
[ $? -eq 0 ] && ok

# 3. failures
"$BIN" bench serve --url "$URL" --api-key wrong --dataset "$DATA" --num-prompts 2 \
    --input-len 8 --output-len 2 >"$TMP/c.out" 2>"$TMP/c.err"
code=$?
# /tokenize answers 401 first: the run stops there
check "wrong key exit" "$code" 1
check "wrong key says 401" "$(has "$TMP/c.err" '401')" yes
"$BIN" bench serve --url "http://127.0.0.1:1" --dataset "$DATA" --num-prompts 1 \
    >/dev/null 2>"$TMP/d.err"
check "no server exit" "$?" 1
check "no server says so" "$(has "$TMP/d.err" 'cannot connect')" yes
"$BIN" bench serve --url "$URL" --api-key sekrit --dataset "$DATA" --num-prompts 1 \
    --input-len 10000000 >/dev/null 2>"$TMP/e.err"
check "prompt beyond the dataset exit" "$?" 2
check "prompt beyond the dataset says so" "$(has "$TMP/e.err" 'wants 10000000 prompt tokens')" yes
"$BIN" bench serve --url "https://x" >/dev/null 2>"$TMP/f.err"
check "https url exit" "$?" 2
"$BIN" bench serve --request-rate -1 >/dev/null 2>&1
check "bad rate exit" "$?" 2

echo "cli_bench_serve: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/bin/bash
# issue25-serve-mix.sh — layer-segmented prefill at the server level (issue 25): `longctx serve`
# with Qwen2.5-Coder-1.5B on the GPU (dense, -b 2048, 16 sequences) under two `longctx bench
# serve` clients at once — short chat-like requests (256 tokens in, 128 out, Poisson 6/s) and a
# few long ones (32K tokens in, 16 out, Poisson 0.15/s) — for --prefill-token-layers 0 (chunked),
# 2048 (one layer a step) and 8192 (four): the short requests' TPOT/ITL and the long ones' TTFT,
# each client's JSON and table in $L/serve/. Expects Qwen in /tmp and build-gpu/ (as
# issue25-mix.sh); the haystack in $HAY. (M, B, LONG, NS, NL, TLS: a smaller run elsewhere.)
cd "$(dirname "$0")/../.."
L=${L:-/tmp/res}/serve; mkdir -p $L
M=${M:-/tmp/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf}
B=${B:-build-gpu/longctx}
LONG=${LONG:-32768} NS=${NS:-160} NL=${NL:-4}
D=${HAY:-data/haystack}/django-docs.txt
port=8091
for TL in ${TLS:-0 2048 8192}; do
    port=$((port + 1))
    $B serve -m $M --port $port --parallel 16 -b 2048 --ctx-max $((LONG + 1024)) \
        --prefill-token-layers $TL ${KV:+--kv-tokens $KV} > $L/server-$TL.log 2>&1 &
    spid=$!
    up=0
    for i in $(seq 1 120); do
        python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" \
            2>/dev/null && { up=1; break; }
        sleep 0.5
    done
    [ $up = 1 ] || { echo "server $TL did not come up" >> $L/status.txt; kill $spid; continue; }
    U=http://127.0.0.1:$port
    timeout 240 $B bench serve --url $U --dataset $D --num-prompts $NS --request-rate 6 \
        --input-len 256 --output-len 128 --ignore-eos --goodput tpot:25 --seed 0 \
        --result-file $L/short-$TL.json > $L/short-$TL.txt 2> $L/short-$TL.err &
    c1=$!
    timeout 240 $B bench serve --url $U --dataset $D --num-prompts $NL --request-rate 0.15 \
        --input-len $LONG --output-len 16 --ignore-eos --goodput ttft:5000 --seed 1 \
        --result-file $L/long-$TL.json > $L/long-$TL.txt 2> $L/long-$TL.err &
    c2=$!
    wait $c1; r1=$?; wait $c2; r2=$?
    echo "token-layers $TL: short exit $r1, long exit $r2" >> $L/status.txt
    kill $spid; wait $spid 2>/dev/null
done

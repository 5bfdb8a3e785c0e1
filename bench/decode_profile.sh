#!/usr/bin/env bash
# decode_profile.sh — where a decode step's time goes, for one model, by attention method,
# context, prompt batch (-b) and KV pool size (-c): `longctx bench --profile` (a second,
# profiled pass that splits a decode step into attention / GEMM / other ops / untimed host work)
# per configuration, every table and split line into OUT/decode-profile.md, the raw outputs
# packed into OUT/decode-profile.tgz (the device tool returns a few files per call). Made for
# bench/NOTES.md 37/39 (decode far below the kernels' cost on Qwen2.5-Coder-1.5B).
#
# Usage: bench/decode_profile.sh OUT MODEL [GEN]      (BIN: default build-gpu/longctx; TO: a
#        per-configuration time limit in seconds, default 150)
# Configurations: dense at 32K and 128K with -b 512 and -b 8192; InfiniteHiP 3k at 128K in a
# 128K pool and in a 1M pool; InfiniteHiP 3k and TokenSelect at 1M.
set -uo pipefail
[ $# -ge 2 ] || { sed -n 2,14p "$0" >&2; exit 2; }
OUT=$1 MODEL=$2 GEN=${3:-64}
BIN=${BIN:-build-gpu/longctx}
TO=${TO:-150}
mkdir -p "$OUT/decode-profile"
sum=$OUT/decode-profile.md
{
    echo "# Decode profile: $(basename "$MODEL")"
    echo
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1);" \
         "commit ${LC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; $(date -u +%F);" \
         "\`longctx bench --profile --gen $GEN\`"
} >"$sum"
run() {
    local tag=$1
    shift
    echo "== $tag: $*" | tee -a "$sum"
    timeout "$TO" "$BIN" bench -m "$MODEL" --gen "$GEN" "$@" --profile \
        >"$OUT/decode-profile/$tag.txt" 2>"$OUT/decode-profile/$tag.err"
    echo "exit $?" >>"$sum"
    echo >>"$sum"
    grep -E "^\|" "$OUT/decode-profile/$tag.txt" >>"$sum"
    grep "per step" "$OUT/decode-profile/$tag.err" | cut -c1-800 >>"$sum"
    echo >>"$sum"
}
run dense-b512 --contexts 32768,131072 -b 512 --attn dense
run dense-b8192 --contexts 32768,131072 -b 8192 --attn dense
run ihip3k-128k --contexts 131072 -b 8192 --attn infinitehip --preset 3k
run ihip3k-128k-pool1m --contexts 131072 -b 8192 -c 1048640 --attn infinitehip --preset 3k
run ihip3k-1m --contexts 1048576 -b 8192 --attn infinitehip --preset 3k
run ts-1m --contexts 1048576 -b 8192 --attn tokenselect
tar -czf "$OUT/decode-profile.tgz" -C "$OUT" decode-profile
cat "$sum"

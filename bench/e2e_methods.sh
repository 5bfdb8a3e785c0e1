#!/usr/bin/env bash
# e2e_methods.sh — end-to-end speed of several attention methods on one model, one after another
# on one machine (issue 21 part 5: prompt and decode tokens/s, time to first token, memory):
# `longctx bench` once per method at the given context lengths, each into OUT/<tag>/<label>/,
# then one table of all of them (OUT/<tag>/<tag>.md) and everything packed into OUT/<tag>.tgz
# beside a copy of that table and the log (the device tool returns a few files per call).
#
# Usage: bench/e2e_methods.sh OUT TAG MODEL CONTEXTS GEN 'LABEL ARGS...' ['LABEL ARGS...' ...]
#   e.g. bench/e2e_methods.sh $OUT qwen-e2e models/Qwen...gguf 32768,131072 32 \
#        'dense --attn dense' 'infinitehip --attn infinitehip' 'hip --attn hip'
# Each method gets -c (the longest context + GEN) and -b 8192 unless its ARGS say otherwise.
# BIN (default build-gpu/longctx). Time to first token = prompt tokens / prompt tokens/s (the
# prompt is one request, evaluated in -b sized chunks, and its first token is sampled at the
# end of it).
set -uo pipefail
[ $# -ge 6 ] || { sed -n 2,14p "$0" >&2; exit 2; }
TOP=$1 TAG=$2 MODEL=$3 CTXS=$4 GEN=$5
shift 5
OUT=$TOP/$TAG
BIN=${BIN:-build-gpu/longctx}
mkdir -p "$OUT"
max=0
IFS=, read -ra lens <<<"$CTXS"
for l in "${lens[@]}"; do [ "$l" -gt "$max" ] && max=$l; done
summary=$OUT/$TAG.md
{
    echo "# End to end: $(basename "$MODEL"), $TAG"
    echo
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1);" \
         "commit ${LC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; $(date -u +%F);" \
         "\`longctx bench --gen $GEN\`, one run per method."
    echo
    echo "| method | context | prompt tok/s | TTFT s | decode tok/s (mean) | decode tok/s (median step) | peak GiB (backend) |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
} >"$summary"
for spec in "$@"; do
    label=${spec%% *}
    args=${spec#"$label"}
    dir=$OUT/$label
    mkdir -p "$dir"
    echo "== $TAG $label: $args" | tee -a "$OUT/$TAG.log"
    extra=()
    [[ " $args " == *" -c "* || " $args " == *" --ctx "* ]] || extra+=(-c $((max + GEN)))
    [[ " $args " == *" -b "* || " $args " == *" --batch "* ]] || extra+=(-b 8192)
    start=$(date +%s)
    # shellcheck disable=SC2086
    "$BIN" bench -m "$MODEL" --contexts "$CTXS" --gen "$GEN" "${extra[@]}" $args --out "$dir" \
        >"$dir/stdout.txt" 2>"$dir/stderr.txt"
    echo "   exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/$TAG.log"
    tail -n 3 "$dir/stderr.txt" >>"$OUT/$TAG.log"
    md=$(ls "$dir"/bench-*.md 2>/dev/null | head -1)
    [ -n "$md" ] || continue
    python3 - "$md" "$label" >>"$summary" <<'PY'
import re, sys
md, label = sys.argv[1], sys.argv[2]
rows, mem, hdr = {}, {}, None
for line in open(md, encoding="utf-8"):
    if not line.startswith("|"):
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cells and cells[0] == "context":
        hdr = [c.lower() for c in cells]
        continue
    if not hdr or not cells or not re.match(r"^\d+$", cells[0]):
        continue
    ctx = int(cells[0])
    def col(word):
        for i, h in enumerate(hdr):
            if word in h and i < len(cells):
                return cells[i]
        return None
    if any("prompt" in h for h in hdr):
        rows[ctx] = (col("prompt"), col("decode") or col("gen"), col("median"))
    if any("backend peak" in h for h in hdr):
        mem[ctx] = col("backend peak")
def num(s):
    m = re.search(r"[\d,]+(\.\d+)?", s or "")
    return float(m.group(0).replace(",", "")) if m else None
for ctx in sorted(rows):
    p, d, dm = rows[ctx]
    pv = num(p)
    ttft = f"{ctx / pv:.2f}" if pv else "–"
    print(f"| {label} | {ctx} | {p or '–'} | {ttft} | {d or '–'} | {dm or '–'} | {mem.get(ctx) or '–'} |")
PY
done
cat "$summary" | tee -a "$OUT/$TAG.log"
tar -czf "$TOP/$TAG.tgz" -C "$TOP" "$TAG"
cp "$OUT/$TAG.log" "$summary" "$TOP/"
exit 0

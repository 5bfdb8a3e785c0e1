#!/usr/bin/env bash
# cli_eval_suite.sh — `longctx eval suite` (issue 21, part 2) on the CPU with SmolLM2: the
# --quick run (every task at 4K, 3 trials) completes and writes a coherent summary, trial table
# and Markdown table; every prompt is exactly --len tokens, holds each expected answer, and the
# span reported as the answer's sentence (what --trace follows) does hold the answer; bad input
# (a missing or too short haystack, a qa document without settings, bad --len / --tasks) gets a
# one-line error naming what and where and a non-zero exit.
# Usage: cli_eval_suite.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
HAY="data/haystack/django-docs.txt"
QA="data/haystack/django-settings.txt"
. "$(dirname "$0")/lib_cli.sh" # TMP, pass / fail, ok, bad, check, has, need_files
need_files "make model haystack" "$MODEL" "$HAY" "$QA"

# expect CODE PATTERN -- command...: exit code CODE and stderr matching PATTERN, one line
expect() {
    local code="$1" pattern="$2"
    shift 3
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$?
    local lines
    lines=$(grep -v -e "^loading " -e "warning" "$TMP/err" | wc -l)
    if [ "$rc" -eq "$code" ] && grep -Eq -- "$pattern" "$TMP/err" && [ "$lines" -le 2 ]; then
        ok
    else
        bad "$* -> exit $rc (want $code), stderr:"
        sed 's/^/    /' "$TMP/err" >&2
    fi
}

# ---- bad input ----
expect 1 "/nonexistent/hay.txt" -- "$BIN" eval suite -m "$MODEL" --haystack /nonexistent/hay.txt
expect 2 "--len 100: out of range" -- "$BIN" eval suite -m "$MODEL" --len 100
expect 2 "--len 'abc'" -- "$BIN" eval suite -m "$MODEL" --len abc
expect 2 "unknown task 'bogus'" -- "$BIN" eval suite -m "$MODEL" --tasks fact,bogus
head -c 20000 "$HAY" >"$TMP/short.txt"
expect 1 "short.txt has [0-9]+ tokens, fewer than --len 8192" -- \
    "$BIN" eval suite -m "$MODEL" --haystack "$TMP/short.txt" --tasks fact --len 8K
grep -v "^Default: " "$TMP/short.txt" >"$TMP/nodefaults.txt"
expect 1 "no chat template.*--chat-template.*--no-chat" -- \
    "$BIN" eval suite -m tests/fixtures/tiny/qwen2.gguf --tasks fact --len 1K
expect 1 "nodefaults.txt: no setting" -- \
    "$BIN" eval suite -m "$MODEL" --qa-doc "$TMP/nodefaults.txt" --tasks qa

# ---- the quick run (at 1K under ASan, whose forward is ~10x slower: same code paths) ----
LEN=4096
grep -q __asan_init "$BIN" 2>/dev/null && LEN=1024
if "$BIN" eval suite -m "$MODEL" --quick --len "$LEN" --out "$TMP/q" \
        --dump-prompts "$TMP/prompts.tsv" >"$TMP/out" 2>"$TMP/err"; then
    ok
else
    bad "eval suite --quick failed:"
    tail -n 20 "$TMP/err" >&2
fi
python3 - "$TMP" "$LEN" <<'PY'
import csv, sys
tmp, LEN = sys.argv[1], sys.argv[2]
LABEL = {"4096": "4K", "1024": "1K"}[LEN]
tasks = ["fact", "multikey", "multivalue", "twohop", "aggregate", "qa"]
errors = []
summ = list(csv.DictReader(open(tmp + "/q.tsv"), delimiter="\t"))
if [r["task"] for r in summ] != tasks:
    errors.append(f"summary tasks {[r['task'] for r in summ]}")
for r in summ:
    m, lo, hi = float(r["mean"]), float(r["ci_lo"]), float(r["ci_hi"])
    if r["len"] != LEN or r["trials"] != "3" or not (0 <= lo <= m <= hi <= 1):
        errors.append(f"summary row {r}")
trials = list(csv.DictReader(open(tmp + "/q-trials.tsv"), delimiter="\t", quoting=csv.QUOTE_NONE))
if len(trials) != 18:
    errors.append(f"{len(trials)} trial rows, want 18")
for t in trials:
    if t["n_prompt"] != LEN or not 0 <= float(t["depth"]) <= 1 or not 0 <= float(t["score"]) <= 1:
        errors.append(f"trial row {t}")
# the summary's means are the trials' means
for r in summ:
    sc = [float(t["score"]) for t in trials if t["task"] == r["task"]]
    if sc and abs(sum(sc) / len(sc) - float(r["mean"])) > 1e-3:
        errors.append(f"{r['task']}: mean {r['mean']} != trials' {sum(sc) / len(sc)}")
# depths are spread: trial i of 3 lands in [i/3, (i+1)/3) up to paragraph snapping
md = open(tmp + "/q.md").read()
if f"| task | {LABEL} |" not in md or md.count("(n=3)") != 6:
    errors.append("markdown table:\n" + md)
dumps = [l.rstrip("\n").split("\t") for l in open(tmp + "/prompts.tsv")]
if len(dumps) != 18:
    errors.append(f"{len(dumps)} prompts dumped, want 18")
for task, ln, tr, expect, key, prompt in dumps:
    for e in expect.split("|"):
        if e not in prompt:
            errors.append(f"{task} trial {tr}: '{e}' not in the prompt")
    first = expect.split("|")[0]
    if task != "aggregate" and first not in key:
        errors.append(f"{task} trial {tr}: the answer's span '{key}' lacks '{first}'")
    if task == "aggregate" and expect.split("|")[0] not in key:
        errors.append(f"aggregate trial {tr}: span '{key}' is not a sighting of the top bird")
    if "Question:" not in prompt[-600:]:
        errors.append(f"{task} trial {tr}: no question at the end")
    if task == "qa" and prompt.count(first) != 1:
        errors.append(f"qa trial {tr}: the changed value '{first}' appears {prompt.count(first)} times")
for e in errors:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
if [ $? -eq 0 ]; then ok; else bad "the files of the quick run (above)"; fi
grep -Eq "^fact +[14]K +3 " "$TMP/out" && ok || bad "no fact row on stdout: $(cat "$TMP/out")"

# ---- --only: one trial of the quick run alone keeps its needle, depth and (greedy) answer ----
expect 2 "--only: '1,,2' is not a list" -- "$BIN" eval suite -m "$MODEL" --quick --only 1,,2
expect 2 "--only: '-1' is not a list" -- "$BIN" eval suite -m "$MODEL" --quick --only -1
if "$BIN" eval suite -m "$MODEL" --quick --len "$LEN" --tasks fact --only 2 --out "$TMP/o" \
        >"$TMP/out" 2>"$TMP/err"; then
    ok
else
    bad "eval suite --only failed:"
    tail -n 20 "$TMP/err" >&2
fi
want=$(awk -F'\t' '$1 == "fact" && $3 == 2' "$TMP/q-trials.tsv")
got=$(tail -n +2 "$TMP/o-trials.tsv")
[ -n "$want" ] && [ "$got" = "$want" ] && ok || bad "--only 2 gave '$got', the full run's trial 2 '$want'"

# ---- --trace: the answer's sentence followed through a sparse method, layer by layer, for the
# question's rows and the first decode step ----
if "$BIN" eval suite -m "$MODEL" --tasks fact --len 2K --trials 1 --attn infinitehip \
        --hip-chunks=64,16,4 --hip-k=512,256,128 --hip-stream=128 --hip-sink=16 \
        --hip-first-layers=1 --hip-first-k=256 --trace --out "$TMP/t" >"$TMP/out" 2>"$TMP/err"; then
    ok
else
    bad "eval suite --trace failed:"
    tail -n 20 "$TMP/err" >&2
fi
python3 - "$TMP/t-trace.tsv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
errors = []
# SmolLM2-135M has 30 layers: probed at the last 16 prompt rows, then at the first decode step
want = [("prompt", "16", str(l)) for l in range(30)] + [("decode", "1", str(l)) for l in range(30)]
if [(r["rows"], r["n_rows"], r["layer"]) for r in rows] != want:
    errors.append(f"trace rows {[(r['rows'], r['n_rows'], r['layer']) for r in rows]}")
for r in rows:
    m, mr, sr, rc = (float(r[k]) for k in ("span_mass", "span_mass_read", "span_read", "recall"))
    if not (0 <= mr <= m * (1 + 1e-9) + 1e-12 <= 1 + 1e-9 and 0 <= sr <= 1 and 0 <= rc <= 1 + 1e-9):
        errors.append(f"row out of range: {r}")
    if sr == 0 and mr != 0 or sr == 1 and abs(mr - m) > 1e-9 * max(m, 1e-30):
        errors.append(f"tokens read and mass read disagree: {r}")
    if m <= 0:
        errors.append(f"no attention mass on the answer's sentence: {r}")
    # InfiniteHiP's stages refine one another: each keeps a part of what the one before kept,
    # and the keys read are the last stage's plus the sink and the window
    st = [float(r[f"stage{i}_read"]) for i in (1, 2, 3)]
    if r["stage4_read"] != "" or not (1 >= st[0] >= st[1] - 1e-9 >= st[2] - 2e-9 >= -2e-9) \
            or sr < st[2] - 1e-9:
        errors.append(f"stage shares out of order: {r}")
for where in ("prompt", "decode"):
    if not any(r["rows"] == where and r["sparse"] == "1" and float(r["span_read"]) < 1
               for r in rows):
        errors.append(f"{where}: no sparse layer left part of the sentence out (the settings "
                      "are meant to)")
for e in errors:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
if [ $? -eq 0 ]; then ok; else bad "the trace of --trace (above)"; fi
# the library's per-block lines: stage coverage, and for a short span which of its tokens the
# last stage kept, one mark per token of the sentence the suite prints
python3 - "$TMP/err" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
errors = []
m = re.search(r"^trace: fact len \d+ trial 0 depth [\d.]+ answer tokens \[(\d+),(\d+)\):((?:\|[^|\n]*)+)\|$",
              text, re.M)
if not m:
    errors.append("no sentence line")
else:
    a, b, toks = int(m.group(1)), int(m.group(2)), m.group(3).split("|")[1:]
    if len(toks) != b - a:
        errors.append(f"{len(toks)} tokens printed for [{a}, {b})")
    lines = re.findall(r"^hip-trace layer (\d+) (prefill|decode) pos \d+ needle \[(\d+), (\d+)\):"
                       r"((?: s\d \d+/\d+)+) \[([#.]+)\]$", text, re.M)
    if not any(l[1] == "prefill" for l in lines) or not any(l[1] == "decode" for l in lines):
        errors.append(f"hip-trace lines missing: {len(lines)}")
    for l in lines:
        last = re.findall(r"s\d (\d+)/(\d+)", l[4])[-1]
        if len(l[5]) != b - a or l[5].count("#") != int(last[0]) or int(last[1]) != b - a:
            errors.append(f"mask {l[5]} against {l[4]} for [{a}, {b})")
for e in errors[:5]:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
if [ $? -eq 0 ]; then ok; else bad "the hip-trace lines of --trace (above)"; fi

echo "cli_eval_suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

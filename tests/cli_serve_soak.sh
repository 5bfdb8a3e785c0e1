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
. "$(dirname "$0")/lib_cli.sh" # serve_test_prereqs
serve_test_prereqs "$BIN"
ASAN=""
ldd "$BIN" 2>/dev/null | grep -q libasan && ASAN="--asan"
python3 "$(dirname "$0")/serve_soak.py" "$BIN" "$MODEL" 2000 64 $ASAN

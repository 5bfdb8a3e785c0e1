#!/usr/bin/env bash
# cli_serve.sh — `longctx serve`, the OpenAI-compatible server (issue 25), end to end with
# SmolLM2: tests/serve_check.py starts it on a free loopback port and checks the routes, greedy
# answers against `longctx run`, streaming, stop strings, logprobs, the error cases, 8
# concurrent requests against their solo answers, a full queue, disconnecting clients and
# SIGTERM. The official openai client's checks run when it can be installed into a venv in the
# build directory (PyPI); offline they are skipped with a message. Skips (77) when the binary
# was built without server support (no libmicrohttpd / jansson) or the model is missing.
# Usage: cli_serve.sh PATH/TO/longctx
set -u
BIN="$1"
. "$(dirname "$0")/lib_cli.sh" # serve_test_prereqs
serve_test_prereqs "$BIN"
PY=python3
VENV="$(cd "$(dirname "$BIN")" && pwd)/serve-venv" # kept between runs: installed once
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import openai" 2>/dev/null; then
    rm -rf "$VENV"
    if python3 -m venv "$VENV" >/dev/null 2>&1 &&
        "$VENV/bin/pip" install -q --disable-pip-version-check openai >/dev/null 2>&1; then
        :
    else
        echo "cli_serve: could not install the openai package (offline?): its checks are skipped"
        rm -rf "$VENV"
    fi
fi
[ -x "$VENV/bin/python" ] && PY="$VENV/bin/python"
"$PY" "$(dirname "$0")/serve_check.py" "$BIN" "$MODEL"

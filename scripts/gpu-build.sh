#!/usr/bin/env bash
# gpu-build.sh — configure and build longctx on a GPU machine that lacks the PCRE2 headers
# (the lent H100/H200 machines): unpacks Debian's libpcre2 .deb files from .deb/ (fetched with
# `apt-get download libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3`)
# into a private prefix, then builds Release for sm_90a into build-gpu/.
# Usage: scripts/gpu-build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
PFX=/tmp/lc-deps
if ! pkg-config --exists libpcre2-8 2>/dev/null; then
    mkdir -p "$PFX"
    for f in .deb/*.deb; do dpkg -x "$f" "$PFX"; done
    # the .pc files name /usr as prefix; point them at the unpacked tree
    for pc in "$PFX"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
        sed -i "s|^prefix=.*|prefix=$PFX/usr|" "$pc"
    done
    export PKG_CONFIG_PATH="$PFX/usr/lib/x86_64-linux-gnu/pkgconfig"
    export LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real "$@" >/dev/null
cmake --build build-gpu -j"$(nproc)" 2>&1 | grep -E -A3 " error|Error |warning" || true
test -x build-gpu/longctx

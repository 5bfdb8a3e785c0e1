#!/usr/bin/env bash
# gpu-build.sh — configure and build longctx on a GPU machine that lacks the PCRE2 headers
# (the lent H100/H200 machines, which reach no package registry): unpacks Debian's libpcre2
# .deb files (and those of libmicrohttpd and jansson, for `longctx serve`) from .deb/ into a
# private prefix, then builds Release for sm_80 and sm_90a (as the
# README says; add -DCMAKE_CUDA_ARCHITECTURES=90a-real for a faster Hopper-only build) into
# build-gpu/. Fill .deb/ on a machine with Debian's archive, once:
#   mkdir -p .deb && cd .deb && apt-get download libpcre2-dev libpcre2-8-0 libpcre2-16-0 \
#       libpcre2-32-0 libpcre2-posix3 libmicrohttpd-dev libmicrohttpd12 libjansson-dev libjansson4
# and carry it to the GPU machine (the device tool's carry list). A machine with the headers
# installed (pkg-config finds libpcre2-8, libmicrohttpd and jansson) needs no .deb/.
# Usage: scripts/gpu-build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
PFX=/tmp/lc-deps
if ! pkg-config --exists libpcre2-8 libmicrohttpd jansson 2>/dev/null; then
    if ! ls .deb/*.deb >/dev/null 2>&1; then
        echo "gpu-build: no PCRE2 headers here and no .deb/ files to unpack them from (see the" \
             "header of $0 for the apt-get download line)" >&2
        exit 1
    fi
    mkdir -p "$PFX"
    for f in .deb/*.deb; do dpkg -x "$f" "$PFX"; done
    # the .pc files name /usr as prefix; point them at the unpacked tree
    for pc in "$PFX"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
        sed -i "s|^prefix=.*|prefix=$PFX/usr|" "$pc"
        sed -i '/^Requires.private:/d' "$pc" # (gnutls: no .pc there; only static links need it)
    done
    export PKG_CONFIG_PATH="$PFX/usr/lib/x86_64-linux-gnu/pkgconfig"
    export LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # and the binaries find them later without LD_LIBRARY_PATH (a later call's shell has none)
    RPATH_ARG="-DCMAKE_BUILD_RPATH=$PFX/usr/lib/x86_64-linux-gnu"
fi
build() { cmake --build build-gpu -j"$(nproc)" 2>&1 | grep -E -A3 " error|Error |warning" || true; }
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="80-real;90a-real" \
    ${RPATH_ARG:-} "$@" >/dev/null
build
test -x build-gpu/longctx
# the unpacked libmicrohttpd needs the machine's GnuTLS (libgnutls.so.30): without it the binary
# cannot start, so build again without the server
if ldd build-gpu/longctx | grep -q "not found"; then
    ldd build-gpu/longctx | grep "not found" >&2
    echo "gpu-build: a library above is missing here; building without \`longctx serve\`" >&2
    cmake -S . -B build-gpu -DLC_SERVER=OFF >/dev/null
    build
fi
build-gpu/longctx serve --help >/dev/null 2>&1 && echo "gpu-build: longctx serve built" ||
    echo "gpu-build: longctx serve not built"

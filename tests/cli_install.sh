#!/usr/bin/env bash
# cli_install.sh — `make install`'s part (cmake --install of the build the tested binary is in):
# under a scratch prefix the CLI, the static library, the header and longctx.pc land where they
# should, the installed CLI runs (--version), and a C program built with
# `pkg-config --cflags / --static --libs longctx` against the installed files links and runs.
# Usage: cli_install.sh PATH/TO/build/longctx
set -u
BIN="$1"
BUILD=$(cd "$(dirname "$BIN")" && pwd)
. "$(dirname "$0")/lib_cli.sh" # TMP, pass / fail, ok, bad, check, has
if ! cmake --install "$BUILD" --prefix "$TMP/p" >"$TMP/install.log" 2>&1; then
    bad "cmake --install"; cat "$TMP/install.log" >&2
fi
LIBDIR=$(dirname "$(find "$TMP/p" -name liblongctx.a | head -1)")
for f in "$TMP/p/bin/longctx" "$TMP/p/include/longctx.h" "$LIBDIR/liblongctx.a" "$LIBDIR/pkgconfig/longctx.pc"; do
    if [ -e "$f" ]; then ok; else bad "missing $f"; fi
done
if "$TMP/p/bin/longctx" --version | grep -q '^longctx [0-9]'; then ok; else bad "installed --version"; fi
cat >"$TMP/use.c" <<'C'
#include <longctx.h>
#include <stdio.h>
int main(void) {
    lc_build_info b = lc_build();
    printf("longctx %s\n", b.version);
    return b.version && b.version[0] ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
# a sanitizer build's library needs its runtime in the program too
SAN=""
grep -q '^LC_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN="-fsanitize=address,undefined"
if cc $SAN $(pkg-config --cflags longctx) "$TMP/use.c" -o "$TMP/use" $(pkg-config --static --libs longctx) \
    2>"$TMP/cc.log" && "$TMP/use" | grep -q '^longctx [0-9]'; then
    ok
else
    bad "a program built with pkg-config longctx"; cat "$TMP/cc.log" >&2
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

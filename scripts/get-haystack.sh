#!/usr/bin/env bash
# get-haystack.sh — install the natural-text haystack of `longctx eval suite` into data/haystack/:
# the documentation of Django 5.1.4 (reStructuredText prose, BSD-3-Clause), taken from the
# project's source distribution on PyPI (sha256 pinned below).
#
#   data/haystack/django-docs.txt      every docs/**/*.txt file except the settings reference,
#                                      in sorted path order, ~5.8 MB (~1.3M Qwen2.5 tokens)
#   data/haystack/django-settings.txt  docs/ref/settings.txt (the settings reference), the
#                                      long document of the suite's "qa" task
#
# Idempotent: does nothing when both files are present with the pinned checksums. A failed
# download or a checksum mismatch stops the script with one line saying which (exit 1); nothing
# but complete, verified files is left in data/haystack/.
#
# HAYSTACK_SDIST=FILE: use this Django-5.1.4.tar.gz instead of downloading it (same checksum).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=5.1.4
SDIST=Django-$VERSION.tar.gz
SDIST_SHA256=de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a
DEST=data/haystack
DOCS_SHA256=4e9da625883991d9d48ca9166d21b85798de7adb987a10d18aa0da1b974d3565
SETTINGS_SHA256=fe48517ec8552f44da39bc6fdbb653f3dae815c2ab4ae41bdb0e9e44ab3a3e47

fail() {
    echo "get-haystack: $*" >&2
    exit 1
}

if [ -f "$DEST/django-docs.txt" ] && [ -f "$DEST/django-settings.txt" ] &&
    echo "$DOCS_SHA256  $DEST/django-docs.txt" | sha256sum -c --status &&
    echo "$SETTINGS_SHA256  $DEST/django-settings.txt" | sha256sum -c --status; then
    echo "get-haystack: $DEST is present and verified"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${HAYSTACK_SDIST:-}" ]; then
    [ -f "$HAYSTACK_SDIST" ] || fail "HAYSTACK_SDIST=$HAYSTACK_SDIST: no such file"
    cp "$HAYSTACK_SDIST" "$tmp/$SDIST"
else
    PY=$(command -v python3 || command -v python || true)
    [ -n "$PY" ] || fail "python3 with pip is needed to download Django==$VERSION's sdist from PyPI"
    echo "get-haystack: downloading Django==$VERSION (source distribution, 10.7 MB) from PyPI" >&2
    # the file itself through PyPI's JSON API (pip download would build the sdist's metadata);
    # pip, which follows a configured index or proxy, where that fails
    if ! "$PY" - "$VERSION" "$tmp/$SDIST" >"$tmp/get.log" 2>&1 <<'PY'
import json, sys, urllib.request
ver, dest = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(f"https://pypi.org/pypi/Django/{ver}/json", timeout=60) as r:
    meta = json.load(r)
url = next(u["url"] for u in meta["urls"] if u["packagetype"] == "sdist")
with urllib.request.urlopen(url, timeout=300) as r, open(dest, "wb") as f:
    while chunk := r.read(1 << 20):
        f.write(chunk)
PY
    then
        rm -f "$tmp/$SDIST"
        if ! "$PY" -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
                "django==$VERSION" -d "$tmp" >"$tmp/pip.log" 2>&1 || [ ! -f "$tmp/$SDIST" ]; then
            fail "django==$VERSION: download failed: $(tail -n1 "$tmp/get.log"); pip: $(grep -m1 -E 'ERROR|error' "$tmp/pip.log" || tail -n1 "$tmp/pip.log")"
        fi
    fi
fi
echo "$SDIST_SHA256  $tmp/$SDIST" | sha256sum -c --status ||
    fail "$SDIST: sha256 $(sha256sum "$tmp/$SDIST" | cut -d' ' -f1), expected $SDIST_SHA256"
tar -xzf "$tmp/$SDIST" -C "$tmp" "Django-$VERSION/docs" || fail "$SDIST: cannot extract docs/"
docs=$tmp/Django-$VERSION/docs
mkdir -p "$DEST"
# one file after another, each introduced by its path (a natural section break)
(cd "$docs" && find . -name '*.txt' ! -path ./ref/settings.txt | LC_ALL=C sort |
    while read -r f; do
        printf '\n\n%s\n\n' "${f#./}"
        cat "$f"
    done) >"$tmp/django-docs.txt"
cp "$docs/ref/settings.txt" "$tmp/django-settings.txt"
for f in django-docs.txt django-settings.txt; do
    want=$DOCS_SHA256
    [ "$f" = django-settings.txt ] && want=$SETTINGS_SHA256
    echo "$want  $tmp/$f" | sha256sum -c --status ||
        fail "$f: sha256 $(sha256sum "$tmp/$f" | cut -d' ' -f1), expected $want (extraction differs)"
    mv "$tmp/$f" "$DEST/$f"
done
echo "get-haystack: installed $DEST/django-docs.txt ($(wc -c <"$DEST/django-docs.txt") bytes) and $DEST/django-settings.txt"

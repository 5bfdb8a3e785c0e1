#!/usr/bin/env bash
# install-deps.sh — install the system packages longctx builds with (Debian/Ubuntu), only
# those missing. Needs root (or sudo). CUDA is optional and not installed here.
set -euo pipefail
PKGS="build-essential cmake pkg-config libopenblas-openmp-dev libpcre2-dev libedit-dev libmicrohttpd-dev libjansson-dev clang libclang-rt-dev python3 python3-pip python3-venv"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present" >&2
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing$missing" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing

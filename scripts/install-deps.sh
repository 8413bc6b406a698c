#!/bin/sh
# Installs the Debian 12 packages kvverify builds and tests with.
# Runs apt-get directly as root, through sudo otherwise.
set -e
PKGS="build-essential clang libclang-rt-14-dev llvm pkg-config \
libopenblas-dev libmpfr-dev libgmp-dev libcmocka-dev zlib1g-dev nettle-dev \
libjansson-dev libpcre2-dev libutf8proc-dev libxml2-utils libsimde-dev time"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
else
    echo "all build dependencies are installed"
fi

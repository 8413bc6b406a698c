#!/bin/sh
# Installs the Debian 12 packages kvverify builds and tests with (chromium
# and python3: the HTML reports' browser test and the misbehaving test
# server of tests/cli/test_serve.sh; libcurl: `kvverify serve`), then
# llama.cpp's prebuilt libraries and headers for the llama.cpp plugin
# (scripts/fetch-llama-cpp.sh: npm packages into deps/llama.cpp/), then
# llama-server from the same pinned llama.cpp source (CPU, Release, for
# tests/cli/test_serve.sh; scripts/build-llama-tools.sh into
# deps/llama.cpp/build/bin/, cached: a second run builds nothing).
# Runs apt-get directly as root, through sudo otherwise.
set -e
PKGS="build-essential clang libclang-rt-14-dev llvm pkg-config \
libopenblas-dev libmpfr-dev libgmp-dev libcmocka-dev zlib1g-dev nettle-dev \
libjansson-dev libpcre2-dev libutf8proc-dev libxml2-utils libsimde-dev time \
jq git mesa-vulkan-drivers libvulkan1 chromium python3 libcurl4-openssl-dev cmake"
# npm fetches llama.cpp's packages; Debian's npm only where no npm is present
# (a nodejs package from elsewhere ships its own and conflicts with it)
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
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
sh "$(dirname "$0")/fetch-llama-cpp.sh"
sh "$(dirname "$0")/build-llama-tools.sh" llama-server

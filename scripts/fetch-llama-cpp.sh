#!/bin/sh
# fetch-llama-cpp.sh — puts llama.cpp where the llama.cpp plugin
# (plugins/llama.cpp/) finds it: deps/llama.cpp/ (ignored by git).
# Called by scripts/install-deps.sh; safe to run again (does nothing when
# the pinned versions are already there).
#
# No build of llama.cpp: the binaries are the prebuilt ones node-llama-cpp
# ships as npm packages (fetched with `npm pack`; node is not needed at run
# time), and the headers come from the llama.cpp source that the
# node-llama-cpp package carries as a git bundle, at the tag those binaries
# were built from:
#
#   deps/llama.cpp/linux-x64/         libllama, libggml, ggml's CPU backend in
#                                     per-CPU variants (chosen at load time)
#   deps/llama.cpp/linux-x64-vulkan/  the same with ggml's Vulkan backend
#   deps/llama.cpp/include/llama.h, deps/llama.cpp/ggml/include/*.h
#   deps/llama.cpp/versions           what was fetched (read by the plugin)
#
# CUDA (not fetched: ~143 MB and useless without an NVIDIA GPU and driver):
#   sh scripts/fetch-llama-cpp.sh --cuda
# adds deps/llama.cpp/linux-x64-cuda/ (@node-llama-cpp/linux-x64-cuda); the
# CUDA runtime libraries must then be installed (node-llama-cpp's
# @node-llama-cpp/linux-x64-cuda-ext carries them, another ~177 MB).
set -e

cd "$(dirname "$0")/.."
# the pins (NODE_LLAMA_CPP_VERSION, LLAMA_CPP_RELEASE) and llama_cpp_bundle
. scripts/llama-cpp-pins.sh
D=deps/llama.cpp
stamp="node-llama-cpp=$NODE_LLAMA_CPP_VERSION llama.cpp=$LLAMA_CPP_RELEASE"
want_cuda=0
[ "${1:-}" = "--cuda" ] && want_cuda=1

have() { [ -f "$D/versions" ] && grep -qx "stamp=$stamp" "$D/versions"; }
if have && { [ $want_cuda -eq 0 ] || [ -d "$D/linux-x64-cuda" ]; }; then
    echo "llama.cpp: $stamp already in $D"
    exit 0
fi
for tool in npm git tar; do
    command -v $tool >/dev/null 2>&1 || { echo "fetch-llama-cpp: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

tmp=$(cd "$(mktemp -d "${TMPDIR:-/tmp}/kvv-llama.XXXXXX")" && pwd) # absolute
trap 'rm -rf "$tmp"' EXIT INT TERM

# pack NAME DIR: npm package NAME@pin unpacked, its bins/DIR moved to $D/DIR
pack() {
    echo "llama.cpp: npm pack $1@$NODE_LLAMA_CPP_VERSION"
    (cd "$tmp" && npm pack --silent "$1@$NODE_LLAMA_CPP_VERSION" >/dev/null)
    mkdir -p "$tmp/$2"
    tar -xzf "$tmp"/*"$2"-"$NODE_LLAMA_CPP_VERSION".tgz -C "$tmp/$2"
    rm -rf "${D:?}/$2"
    mv "$tmp/$2/package/bins/$2" "$D/$2"
    rm -f "$tmp"/*.tgz
}

mkdir -p "$D"
rm -f "$D/versions"
if [ $want_cuda -eq 0 ] || ! have; then
    pack @node-llama-cpp/linux-x64 linux-x64
    pack @node-llama-cpp/linux-x64-vulkan linux-x64-vulkan

    echo "llama.cpp: headers from node-llama-cpp@$NODE_LLAMA_CPP_VERSION llama/gitRelease.bundle"
    rev=$(llama_cpp_bundle "$tmp") || exit 1
    rm -rf "$D/include" "$D/ggml"
    git -C "$tmp/src.git" archive "$rev" include/llama.h ggml/include | tar -x -C "$D"
fi
if [ $want_cuda -eq 1 ]; then
    pack @node-llama-cpp/linux-x64-cuda linux-x64-cuda
fi

{
    echo "stamp=$stamp"
    echo "node-llama-cpp=$NODE_LLAMA_CPP_VERSION"
    echo "llama.cpp=$LLAMA_CPP_RELEASE"
    echo "source=${rev:-unchanged}"
} > "$D/versions"
echo "llama.cpp: $stamp in $D"

#!/bin/sh
# The README's first command: install the Debian packages, build kvverify,
# make a small synthetic model and audit it.
set -e
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
make -j2
mkdir -p out
./kvverify synth --arch llama --seed 1 -o out/llama-tiny.gguf
./kvverify info out/llama-tiny.gguf
./kvverify out/llama-tiny.gguf

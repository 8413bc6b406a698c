#!/bin/sh
# The README's first command: install the Debian packages, build kvverify,
# make a small synthetic model and audit it.
set -e
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
make -j2
mkdir -p out
./kvverify synth --arch llama --shape tiny --seed 1 -o out/tiny-llama.gguf
./kvverify info out/tiny-llama.gguf
if ./kvverify --help | grep -q '^  audit'; then
    ./kvverify out/tiny-llama.gguf
fi

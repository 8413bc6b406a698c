#!/bin/sh
# build-llama-tools.sh — builds llama.cpp's own programs (CMake targets such
# as llama-bench) from the llama.cpp source that node-llama-cpp's npm package
# ships (the pins of scripts/llama-cpp-pins.sh, the same source the plugin's
# prebuilt libraries and headers come from): Release, tuned for this CPU
# (GGML_NATIVE), static, CPU only, into deps/llama.cpp/build/ (ignored by
# git). scripts/install-deps.sh runs it for llama-server (the real server of
# tests/cli/test_serve.sh); other targets (llama-bench) on request. The
# source is unpacked there too, never into the repository.
#
#   sh scripts/build-llama-tools.sh [options] TARGET...
#
#   --dir DIR   where to build (default $KVV_LLAMA_BUILD_DIR, else
#               deps/llama.cpp/build): DIR/src the source, DIR/cmake CMake's
#               build folder, DIR/bin/TARGET the programs, DIR/stamp what was
#               built from what
#   --jobs N    parallel compile jobs (default: the CPUs, nproc)
#   --force     build even when the stamp says the target is current
#   --dry-run   print what would be done and exit, changing nothing
#
# A target is current when DIR/bin/TARGET exists and DIR/stamp holds its line
# for the same source, CMake flags, compiler and CPU (a native build is made
# for this CPU): a second run then builds nothing. Exit 0 built or current,
# 1 a step failed, 2 bad arguments.
set -u
cd "$(dirname "$0")/.."
. scripts/llama-cpp-pins.sh

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}
die_usage() { echo "build-llama-tools: $*" >&2; echo "usage: sh scripts/build-llama-tools.sh [--dir DIR] [--jobs N] [--force] [--dry-run] TARGET..." >&2; exit 2; }

DIR=${KVV_LLAMA_BUILD_DIR:-deps/llama.cpp/build}
JOBS=$(nproc 2>/dev/null || echo 2)
FORCE=0
DRY=0
TARGETS=""
while [ $# -gt 0 ]; do
    case $1 in
    --help|-h) usage; exit 0 ;;
    --dir) [ $# -ge 2 ] && [ -n "$2" ] || die_usage "--dir needs a folder"; DIR=$2; shift ;;
    --dir=*) DIR=${1#--dir=}; [ -n "$DIR" ] || die_usage "--dir needs a folder" ;;
    --jobs) [ $# -ge 2 ] || die_usage "--jobs needs a number"; JOBS=$2; shift
        case $JOBS in ''|*[!0-9]*|0) die_usage "--jobs '$JOBS' is not a positive number" ;; esac ;;
    --force) FORCE=1 ;;
    --dry-run) DRY=1 ;;
    -*) die_usage "unknown option '$1'" ;;
    *) case $1 in
        *[!A-Za-z0-9_-]*) die_usage "'$1' is not a CMake target name (letters, digits, - and _)" ;;
        esac
        case " $TARGETS " in *" $1 "*) ;; *) TARGETS="$TARGETS $1" ;; esac ;;
    esac
    shift
done
[ -n "$TARGETS" ] || die_usage "no TARGET given (e.g. llama-bench)"

# What a build depends on besides the source: one line, in the stamp.
FLAGS="-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF"
CC_ID=$( (${CC:-cc} --version 2>/dev/null || echo unknown) | head -n 1)
CPU_ID=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
CPU_FLAGS=$(sed -n 's/^flags[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1 | cksum | cut -d' ' -f1)
KEY="node-llama-cpp=$NODE_LLAMA_CPP_VERSION llama.cpp=$LLAMA_CPP_RELEASE flags=[$FLAGS] cc=[$CC_ID] cpu=[$CPU_ID/$CPU_FLAGS]"

current() { # TARGET: built from this KEY and still there
    [ -x "$DIR/bin/$1" ] && [ -f "$DIR/stamp" ] && grep -qxF "$1 $KEY" "$DIR/stamp"
}

todo=""
for t in $TARGETS; do
    if [ $FORCE -eq 0 ] && current "$t"; then
        echo "build-llama-tools: $t is current ($DIR/bin/$t)"
    else
        todo="$todo $t"
    fi
done
if [ $DRY -eq 1 ]; then
    echo "build-llama-tools: dry run"
    echo "  source:  node-llama-cpp@$NODE_LLAMA_CPP_VERSION llama/gitRelease.bundle (llama.cpp $LLAMA_CPP_RELEASE) -> $DIR/src"
    echo "  cmake:   $FLAGS"
    echo "  jobs:    $JOBS"
    echo "  build:  ${todo:- (nothing: every target is current)}"
    exit 0
fi
[ -n "$todo" ] || exit 0
command -v cmake >/dev/null 2>&1 || { echo "build-llama-tools: cmake not found (apt-get install cmake)" >&2; exit 1; }

mkdir -p "$DIR" || exit 1
DIR=$(cd "$DIR" && pwd)
# the source, unpacked once per pinned commit
if [ ! -f "$DIR/src/.kvv-source" ] || ! grep -qx "llama.cpp=$LLAMA_CPP_RELEASE node-llama-cpp=$NODE_LLAMA_CPP_VERSION" "$DIR/src/.kvv-source"; then
    tmp=$(cd "$(mktemp -d "${TMPDIR:-/tmp}/kvv-llama-src.XXXXXX")" && pwd)
    trap 'rm -rf "$tmp"' EXIT INT TERM
    echo "build-llama-tools: source from node-llama-cpp@$NODE_LLAMA_CPP_VERSION llama/gitRelease.bundle"
    rev=$(llama_cpp_bundle "$tmp") || exit 1
    rm -rf "$DIR/src" "$DIR/cmake"
    mkdir -p "$DIR/src"
    git -C "$tmp/src.git" archive "$rev" | tar -x -C "$DIR/src" || exit 1
    echo "llama.cpp=$LLAMA_CPP_RELEASE node-llama-cpp=$NODE_LLAMA_CPP_VERSION" >"$DIR/src/.kvv-source"
    echo "commit=$rev" >>"$DIR/src/.kvv-source"
    rm -rf "$tmp"
fi
start=$(date +%s)
# shellcheck disable=SC2086 # FLAGS is a list of words
cmake -S "$DIR/src" -B "$DIR/cmake" $FLAGS >"$DIR/cmake.log" 2>&1 ||
    { echo "build-llama-tools: cmake configure failed (see $DIR/cmake.log)" >&2; tail -n 20 "$DIR/cmake.log" >&2; exit 1; }
mkdir -p "$DIR/bin"
for t in $todo; do
    echo "build-llama-tools: building $t ($JOBS jobs)"
    if ! cmake --build "$DIR/cmake" --target "$t" -j "$JOBS" >>"$DIR/cmake.log" 2>&1; then
        echo "build-llama-tools: building $t failed (see $DIR/cmake.log)" >&2
        tail -n 20 "$DIR/cmake.log" >&2
        exit 1
    fi
    cp "$DIR/cmake/bin/$t" "$DIR/bin/$t.tmp" && mv "$DIR/bin/$t.tmp" "$DIR/bin/$t" || exit 1
    { [ -f "$DIR/stamp" ] && grep -v "^$t " "$DIR/stamp"; echo "$t $KEY"; } >"$DIR/stamp.tmp"
    mv "$DIR/stamp.tmp" "$DIR/stamp"
    echo "build-llama-tools: $DIR/bin/$t"
done
echo "build-llama-tools: done in $(( $(date +%s) - start )) s"

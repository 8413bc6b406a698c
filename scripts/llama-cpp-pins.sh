# llama-cpp-pins.sh — sourced (`. scripts/llama-cpp-pins.sh`) by
# fetch-llama-cpp.sh and build-llama-tools.sh: the versions of llama.cpp
# kvverify uses, written down in this one place, and how its source is had.
#
# node-llama-cpp's npm package carries the llama.cpp source its prebuilt
# binaries were built from, as a git bundle (package/llama/gitRelease.bundle).

# ---- the pins ----
NODE_LLAMA_CPP_VERSION=3.22.1
LLAMA_CPP_RELEASE=v0.5.0    # llama/binariesGithubRelease.json of that version

# llama_cpp_bundle TMP: npm-packs node-llama-cpp@pin into TMP, checks that it
# carries the pinned release, fetches its source bundle into the bare
# repository TMP/src.git and prints the commit. @return 1 with a message.
llama_cpp_bundle() {
    for tool in npm git tar; do
        command -v $tool >/dev/null 2>&1 ||
            { echo "llama.cpp: $tool not found (scripts/install-deps.sh installs it)" >&2; return 1; }
    done
    (cd "$1" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null) || return 1
    mkdir -p "$1/nlc"
    tar -xzf "$1"/node-llama-cpp-"$NODE_LLAMA_CPP_VERSION".tgz -C "$1/nlc" \
        package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json || return 1
    rm -f "$1"/node-llama-cpp-"$NODE_LLAMA_CPP_VERSION".tgz
    _rel=$(sed -n 's/.*"release": *"\([^"]*\)".*/\1/p' "$1/nlc/package/llama/binariesGithubRelease.json")
    if [ "$_rel" != "$LLAMA_CPP_RELEASE" ]; then
        echo "llama.cpp: node-llama-cpp $NODE_LLAMA_CPP_VERSION carries llama.cpp $_rel, the pin says $LLAMA_CPP_RELEASE" >&2
        return 1
    fi
    git init -q --bare "$1/src.git" &&
        git -C "$1/src.git" fetch -q "$1/nlc/package/llama/gitRelease.bundle" &&
        git -C "$1/src.git" rev-parse FETCH_HEAD
}

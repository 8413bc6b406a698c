# golden.sh — shell helpers for the shipped golden vectors (sourced by
# vectors/update.sh and tests/cli/test_vectors.sh, test_suite.sh).
#
#   . vectors/golden.sh
#   kvv_golden_each DIR FUNC     for each entry of vectors/golden/list.txt:
#                                materialise its model (synth into DIR, or
#                                the ../shared file) and call
#                                FUNC NAME MODEL_PATH "GEN OPTIONS"
#                                (MODEL_PATH is "" when ../shared lacks it)
#
# Needs $KVV (the kvverify binary). KVV_SHARED overrides ../shared.

KVV_GOLDEN_DIR=${KVV_GOLDEN_DIR:-vectors/golden}

kvv_golden_trim() { # strip leading/trailing blanks
    printf '%s' "$1" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//'
}

kvv_golden_each() { # DIR FUNC
    _gdir=$1; _gfn=$2
    _shared=${KVV_SHARED:-../shared}
    grep -v '^[[:space:]]*#' "$KVV_GOLDEN_DIR/list.txt" | grep -v '^[[:space:]]*$' |
    while IFS='|' read -r _name _src _opts; do
        _name=$(kvv_golden_trim "$_name")
        _src=$(kvv_golden_trim "$_src")
        _opts=$(kvv_golden_trim "$_opts")
        case $_src in
        synth\ *)
            _model="$_gdir/$_name.gguf"
            # shellcheck disable=SC2086
            if ! "$KVV" synth ${_src#synth } -o "$_model" >/dev/null; then
                echo "golden: $_name: kvverify synth ${_src#synth } failed" >&2
                return 1
            fi ;;
        shared\ *)
            _model="$_shared/${_src#shared }"
            [ -r "$_model" ] || _model="" ;;
        *)
            echo "golden: $_name: unknown model source '$_src'" >&2
            return 1 ;;
        esac
        "$_gfn" "$_name" "$_model" "$_opts" || return 1
    done
}

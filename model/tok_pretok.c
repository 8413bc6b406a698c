/*
 * tok_pretok.c — byte-level BPE pre-tokenizers, split exactly as llama.cpp's
 * unicode_regex_split splits (src/unicode.cpp):
 *
 *   1. tokenizer.ggml.pre selects a list of regexes (llama.cpp's table in
 *      llm_tokenizer_bpe). Each regex splits every chunk the previous one
 *      produced; matches AND the text between matches become chunks.
 *   2. The GPT-2 pattern and the Llama-3 pattern are not run as regexes:
 *      llama.cpp uses hand-written scanners over its Unicode flags, and so do
 *      we (split_gpt2, split_llama3), including their quirks (the Llama-3
 *      scanner checks the first code point's flags, not the one after a
 *      space, before taking "[^\s\p{L}\p{N}]+").
 *   3. Any other regex that uses \p{..} runs on a "collapsed" text: each code
 *      point >= 128 becomes one byte naming its class (whitespace 0x0B, N 0xD1,
 *      L 0xD2, P 0xD3, M 0xD4, S 0xD5, other 0xD0) and \p{X} becomes a class
 *      of that byte plus the ASCII members (\p{S} lacks '~', as in llama.cpp).
 *      We run the collapsed regex with PCRE2 in byte mode, so one byte = one
 *      code point, which is what std::regex sees there.
 *   4. A regex without \p{..} (the CJK ranges of the deepseek lists) runs on
 *      the code points themselves, non-ASCII whitespace replaced by U+000B,
 *      with PCRE2 in UTF mode. \s is ASCII-only in both paths (PCRE2 without
 *      UCP, like std::regex in the C locale); $ matches only at the end.
 *   5. Every chunk is mapped through GPT-2's bytes_to_unicode.
 *
 * Regex strings below are llama.cpp's, character for character, so that a
 * reader can diff them against src/llama-vocab.cpp.
 */
#include "model/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ------------------------------------------------------------ the tables */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                          \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                           \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"
#define RE_PORO " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"

#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_TEKKEN                                                                               \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"                    \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| "             \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_CONTRACTIONS "?|" \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_CONTRACTIONS "?|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* U+4E00-U+9FA5, U+3040-U+309F, U+30A0-U+30FF */
#define RE_CJK_KANA "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+"

enum { SET_DEFAULT, SET_LLAMA3, SET_DEEPSEEK_LLM, SET_DEEPSEEK_CODER, SET_FALCON, SET_STARCODER,
       SET_GPT2, SET_QWEN2, SET_PORO, SET_VIKING, SET_TEKKEN, SET_GPT4O, SET_DEEPSEEK3,
       SET_SEED_CODER, SET_BAILINGMOE, SET_UFAKZEKA, SET_QWEN35, SET_MINICPM5, SET_COUNT };

#define MAX_STEPS 6
static const char *const k_sets[SET_COUNT][MAX_STEPS + 1] = {
    [SET_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
    [SET_LLAMA3] = {RE_LLAMA3, NULL},
    [SET_DEEPSEEK_LLM] = {
        "[\r\n]",
        "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf"
        "\xc7\x84-\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf"
        "\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81"
        "\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5"
        "\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-"
        "\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95"
        "\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-"
        "\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-"
        "\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-"
        "\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac"
        "\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-"
        "\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8"
        "\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf"
        "\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb"
        "\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-"
        "\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87"
        "\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-"
        "\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91"
        "\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-"
        "\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e"
        "\xa4\x80-\xf0\x9e\xa5\x83]+",
        "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f"
        "\xe3\x80\x80-\xe3\x80\x82]+",
        "\\s+$", RE_CJK, "\\p{N}+", NULL},
    [SET_DEEPSEEK_CODER] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}", NULL},
    [SET_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL},
    [SET_STARCODER] = {"\\p{N}", RE_GPT2, NULL},
    [SET_GPT2] = {RE_GPT2, NULL},
    [SET_QWEN2] = {RE_QWEN2, NULL},
    [SET_PORO] = {RE_PORO, NULL},
    [SET_VIKING] = {RE_PORO, "\\p{N}", NULL},
    [SET_TEKKEN] = {RE_TEKKEN, NULL},
    [SET_GPT4O] = {RE_GPT4O, NULL},
    [SET_DEEPSEEK3] = {"\\p{N}{1,3}", RE_CJK_KANA,
                       "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                       "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
                       "\\s*[\r\n]+|\\s+(?!\\S)|\\s+", NULL},
    [SET_SEED_CODER] = {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
                        "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL},
    [SET_BAILINGMOE] = {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                        "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+", NULL},
    [SET_UFAKZEKA] = {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL},
    [SET_QWEN35] = {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL},
    [SET_MINICPM5] = {"\\p{N}{1,3}", RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| "
                      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL},
};

/* tokenizer.ggml.pre names llama.cpp knows, with the flags it sets. */
typedef struct {
    const char *name;
    int set;
    bool clean_spaces, ignore_merges, add_bos, add_sep, bos_null;
} pre_entry;

static const pre_entry k_pre[] = {
    {"default", SET_DEFAULT, true, false, false, false, false},
    {"llama3", SET_LLAMA3, true, true, true, false, false},
    {"llama-v3", SET_LLAMA3, true, true, true, false, false},
    {"llama-bpe", SET_LLAMA3, true, true, true, false, false},
    {"falcon3", SET_LLAMA3, true, true, true, false, false},
    {"falcon-h1", SET_LLAMA3, true, true, true, false, false},
    {"pixtral", SET_LLAMA3, true, true, true, false, false},
    {"midm-2.0", SET_LLAMA3, true, true, true, false, false},
    {"lfm2", SET_LLAMA3, true, true, true, false, false},
    {"jina-v5-nano", SET_LLAMA3, true, true, true, false, false},
    {"deepseek-llm", SET_DEEPSEEK_LLM, false, false, false, false, false},
    {"deepseek-coder", SET_DEEPSEEK_CODER, false, false, false, false, false},
    {"falcon", SET_FALCON, true, false, false, false, false},
    {"mpt", SET_GPT2, true, false, false, false, false},
    {"starcoder", SET_STARCODER, true, false, false, false, false},
    {"gpt-2", SET_GPT2, true, false, false, false, false},
    {"phi-2", SET_GPT2, true, false, false, false, false},
    {"jina-es", SET_GPT2, true, false, false, false, false},
    {"jina-de", SET_GPT2, true, false, false, false, false},
    {"gigachat", SET_GPT2, true, false, false, false, false},
    {"jina-v2-es", SET_GPT2, true, false, false, false, false},
    {"jina-v2-de", SET_GPT2, true, false, false, false, false},
    {"a.x-4.0", SET_GPT2, true, false, false, false, false},
    {"mellum", SET_GPT2, true, false, false, false, false},
    {"modern-bert", SET_GPT2, true, false, false, false, false},
    {"jina-v1-en", SET_GPT2, true, false, false, true, false},
    {"jina-v2-code", SET_GPT2, true, false, false, true, false},
    {"roberta-bpe", SET_GPT2, true, false, false, true, false},
    {"refact", SET_STARCODER, true, false, false, false, false},
    {"command-r", SET_STARCODER, false, false, false, false, false},
    {"qwen2", SET_QWEN2, false, false, false, false, false},
    {"deepseek-r1-qwen", SET_QWEN2, false, false, false, false, false},
    {"kormo", SET_QWEN2, false, false, false, false, false},
    {"f2llmv2", SET_QWEN2, false, false, false, false, false},
    {"stablelm2", SET_QWEN2, true, false, false, false, false},
    {"olmo", SET_GPT2, true, false, false, false, false},
    {"dbrx", SET_LLAMA3, true, false, false, false, false},
    {"smaug-bpe", SET_LLAMA3, true, false, false, false, false},
    {"poro-chat", SET_PORO, false, false, false, false, false},
    {"glm4", SET_LLAMA3, true, false, false, false, true},
    {"chatglm-bpe", SET_LLAMA3, true, false, false, false, true},
    {"viking", SET_VIKING, false, false, false, false, false},
    {"jais", SET_GPT2, true, false, false, false, false},
    {"smollm", SET_STARCODER, false, false, false, false, false},
    {"codeshell", SET_STARCODER, true, false, false, false, false},
    {"bloom", SET_PORO, true, false, false, false, false},
    {"gpt3-finnish", SET_PORO, true, false, false, false, false},
    {"exaone", SET_STARCODER, true, false, false, false, false},
    {"exaone4", SET_GPT2, true, false, false, false, false},
    {"minerva-7b", SET_STARCODER, true, false, false, false, false},
    {"megrez", SET_QWEN2, true, false, false, false, false},
    {"trillion", SET_GPT2, false, false, false, false, false},
    {"granite-docling", SET_GPT2, false, false, false, false, false},
    {"mellum2", SET_STARCODER, true, false, false, false, false},
    {"grok-2", SET_QWEN2, false, false, false, false, false},
    {"hunyuan", SET_QWEN2, false, false, false, false, false},
    {"solar-open", SET_QWEN2, false, false, false, false, false},
    {"tekken", SET_TEKKEN, false, true, true, false, false},
    {"gpt-4o", SET_GPT4O, false, false, false, false, false},
    {"llama4", SET_GPT4O, false, false, false, false, false},
    {"kanana2", SET_GPT4O, false, false, false, false, false},
    {"talkie", SET_GPT4O, false, false, false, false, false},
    {"minimax-m2", SET_GPT4O, false, false, false, false, false},
    {"deepseek-v3", SET_DEEPSEEK3, false, false, false, false, false},
    {"hunyuan-dense", SET_DEEPSEEK3, false, false, false, false, false},
    {"joyai-llm", SET_DEEPSEEK3, false, false, false, false, false},
    {"hy_v4", SET_DEEPSEEK3, false, false, false, false, false},
    {"seed-coder", SET_SEED_CODER, false, false, false, false, false},
    {"bailingmoe", SET_BAILINGMOE, false, false, false, false, false},
    {"bailingmoe2", SET_BAILINGMOE, false, false, false, false, false},
    {"llada-moe", SET_BAILINGMOE, false, false, false, false, false},
    {"ufakzeka", SET_UFAKZEKA, false, false, false, false, false},
    {"qwen35", SET_QWEN35, false, false, false, false, false},
    {"minicpm5", SET_MINICPM5, true, true, false, false, false},
};

/* ------------------------------------------------------------ compiled form */

typedef enum { STEP_GPT2, STEP_LLAMA3, STEP_COLLAPSED, STEP_WIDE } step_kind;

typedef struct {
    step_kind kind;
    pcre2_code *re;
} pretok_step;

struct kvv_pretok {
    int n_steps;
    bool need_collapse;        /* some step runs on the collapsed text */
    bool need_wide;            /* some step runs on the code points */
    pretok_step steps[MAX_STEPS];
};

static const char *const k_ucat[] = {"\\p{N}", "\\p{L}", "\\p{P}", "\\p{M}", "\\p{S}",
                                     "\\p{Lu}", "\\p{Ll}", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}"};
#define N_UCAT (sizeof k_ucat / sizeof k_ucat[0])
/* For each entry of k_ucat: the collapsed byte and the ASCII members. */
static const char k_ucat_byte[N_UCAT] = {'\xD1', '\xD2', '\xD3', '\xD4', '\xD5',
                                         '\xD2', '\xD2', '\xD2', '\xD2', '\xD2'};
static const char *const k_ucat_ascii[N_UCAT] = {
    "0-9", "A-Za-z", "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}", "", "\\$\\+<->^`\\|",
    "A-Za-z", "A-Za-z", "A-Za-z", "A-Za-z", "A-Za-z"};

static bool uses_ucat(const char *re)
{
    for (size_t i = 0; i < N_UCAT; i++)
        if (strstr(re, k_ucat[i]))
            return true;
    return false;
}

/* llama.cpp's regex collapse: \p{X} -> [<byte><ascii>] (no extra brackets
 * inside a class). out must hold 4 * strlen(re) + 1 bytes. */
static void collapse_regex(const char *re, char *out)
{
    size_t n = strlen(re), o = 0;
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
            out[o++] = '[';
            inside = true;
            continue;
        }
        if (inside && re[i] == ']' && re[i - 1] != '\\') {
            out[o++] = ']';
            inside = false;
            continue;
        }
        if (re[i] == '\\' && i + 3 < n && re[i + 1] == 'p' && re[i + 2] == '{') {
            const char *cb = strchr(re + i + 3, '}');
            if (cb && (size_t)(cb - re) <= i + 10) {
                size_t plen = (size_t)(cb - re) - i + 1;
                for (size_t k = 0; k < N_UCAT; k++) {
                    if (strlen(k_ucat[k]) != plen || memcmp(k_ucat[k], re + i, plen) != 0)
                        continue;
                    if (!inside)
                        out[o++] = '[';
                    out[o++] = k_ucat_byte[k];
                    size_t al = strlen(k_ucat_ascii[k]);
                    memcpy(out + o, k_ucat_ascii[k], al);
                    o += al;
                    if (!inside)
                        out[o++] = ']';
                    i = (size_t)(cb - re);
                    goto next;
                }
            }
        }
        out[o++] = re[i];
    next:;
    }
    out[o] = '\0';
}

const char *kvv_pretok_name(int i)
{
    if (i < 0 || (size_t)i >= sizeof k_pre / sizeof k_pre[0])
        return NULL;
    return k_pre[i].name;
}

void kvv_pretok_free(kvv_pretok *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_steps; i++)
        pcre2_code_free(p->steps[i].re);
    free(p);
}

kvv_status kvv_pretok_open(const char *name, kvv_pretok **out, kvv_pretok_flags *flags,
                           kvv_error *err)
{
    *out = NULL;
    const pre_entry *e = NULL;
    const char *key = (name && name[0]) ? name : "default";
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
        if (strcmp(k_pre[i].name, key) == 0)
            e = &k_pre[i];
    if (!e)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                             "pre-tokenizer '%s' is not supported (unknown to kvverify; current "
                             "llama.cpp rejects unknown names too)",
                             key);
    flags->clean_spaces = e->clean_spaces;
    flags->ignore_merges = e->ignore_merges;
    flags->add_bos = e->add_bos;
    flags->add_sep = e->add_sep;
    flags->bos_null = e->bos_null;

    kvv_pretok *p = calloc(1, sizeof *p);
    if (!p)
        return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
    for (const char *const *re = k_sets[e->set]; *re; re++) {
        pretok_step *s = &p->steps[p->n_steps++];
        if (strcmp(*re, RE_GPT2) == 0) {
            s->kind = STEP_GPT2;
            continue;
        }
        if (strcmp(*re, RE_LLAMA3) == 0) {
            s->kind = STEP_LLAMA3;
            continue;
        }
        char buf[4096];
        const char *pat = *re;
        uint32_t opts = PCRE2_DOLLAR_ENDONLY;
        if (uses_ucat(*re)) {
            s->kind = STEP_COLLAPSED;
            p->need_collapse = true;
            if (strlen(*re) * 4 + 1 > sizeof buf) {
                kvv_pretok_free(p);
                return kvv_error_set(err, KVV_ERR_INTERNAL, "pre-tokenizer '%s': regex too long", key);
            }
            collapse_regex(*re, buf);
            pat = buf;
        } else {
            s->kind = STEP_WIDE;
            p->need_wide = true;
            opts |= PCRE2_UTF;
        }
        int ec;
        PCRE2_SIZE eo;
        s->re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
        if (!s->re) {
            PCRE2_UCHAR msg[256];
            int idx = p->n_steps;
            pcre2_get_error_message(ec, msg, sizeof msg);
            kvv_pretok_free(p);
            return kvv_error_set(err, KVV_ERR_INTERNAL,
                                 "pre-tokenizer '%s': regex %d does not compile at %zu: %s", key,
                                 idx, (size_t)eo, (const char *)msg);
        }
        /* optional: 1.4-1.8x faster splitting when the JIT is available. (Under
         * valgrind, JIT code reports uninitialised reads, a known PCRE2 false
         * positive; ASan/UBSan runs are clean.) */
        pcre2_jit_compile(s->re, PCRE2_JIT_COMPLETE);
    }
    *out = p;
    return KVV_OK;
}

/* ------------------------------------------------------------ splitting */

typedef struct {
    size_t *v;
    size_t n, cap;
    bool oom;
} lens;

static void lens_push(lens *l, size_t x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        size_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

#define OOR 0xFFFFFFFFu

typedef struct {
    const uint32_t *cpts;
    const uint16_t *flags;
    size_t ini, end, prev;
    lens *out;
} scan;

static uint32_t sc_cpt(const scan *s, size_t pos)
{
    return (pos >= s->ini && pos < s->end) ? s->cpts[pos] : OOR;
}

static uint16_t sc_flags(const scan *s, size_t pos)
{
    return (pos >= s->ini && pos < s->end) ? s->flags[pos] : 0;
}

static size_t sc_add(scan *s, size_t end)
{
    size_t len = end - s->prev;
    if (len > 0)
        lens_push(s->out, len);
    s->prev = end;
    return len;
}

#define F_WS KVV_CPT_WHITESPACE
#define F_L KVV_CPT_LETTER
#define F_N KVV_CPT_NUMBER

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(scan *s)
{
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t cpt = sc_cpt(s, pos);
        uint16_t flags = sc_flags(s, pos);
        if (cpt == '\'' && pos + 1 < s->end) {
            uint32_t nx = sc_cpt(s, pos + 1);
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                pos += sc_add(s, pos + 2);
                continue;
            }
            if (pos + 2 < s->end) {
                uint32_t nn = sc_cpt(s, pos + 2);
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    pos += sc_add(s, pos + 3);
                    continue;
                }
            }
        }
        uint16_t f2 = cpt == ' ' ? sc_flags(s, pos + 1) : flags;
        if (f2 & F_L) {
            pos += (cpt == ' ');
            while (f2 & F_L)
                f2 = sc_flags(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        if (f2 & F_N) {
            pos += (cpt == ' ');
            while (f2 & F_N)
                f2 = sc_flags(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        if (!(f2 & (F_WS | F_L | F_N)) && f2) {
            pos += (cpt == ' ');
            while (!(f2 & (F_WS | F_L | F_N)) && f2)
                f2 = sc_flags(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        size_t nws = 0;
        while (sc_flags(s, pos + nws) & F_WS)
            nws++;
        if (nws > 1 && sc_cpt(s, pos + nws) != OOR) {
            pos += nws - 1;
            sc_add(s, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            sc_add(s, pos);
            continue;
        }
        sc_add(s, ++pos);
    }
}

/* Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static void split_llama3(scan *s)
{
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t cpt = sc_cpt(s, pos);
        uint16_t flags = sc_flags(s, pos);
        if (cpt == '\'' && pos + 1 < s->end) {
            uint32_t nx = kvv_cpt_tolower(sc_cpt(s, pos + 1));
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                pos += sc_add(s, pos + 2);
                continue;
            }
            if (pos + 2 < s->end) {
                uint32_t nn = kvv_cpt_tolower(sc_cpt(s, pos + 2));
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    pos += sc_add(s, pos + 3);
                    continue;
                }
            }
        }
        if (!(cpt == '\r' || cpt == '\n' || (flags & F_N))) {
            if ((flags & F_L) || (sc_flags(s, pos + 1) & F_L)) {
                pos++;
                while (sc_flags(s, pos) & F_L)
                    pos++;
                sc_add(s, pos);
                continue;
            }
        }
        if (flags & F_N) {
            size_t ini = pos;
            while (sc_flags(s, pos) & F_N) {
                if (++pos - ini >= 3) {
                    sc_add(s, pos);
                    ini = pos;
                }
            }
            sc_add(s, pos);
            continue;
        }
        uint16_t f2 = cpt == ' ' ? sc_flags(s, pos + 1) : flags;
        if (!(f2 & (F_WS | F_L | F_N)) && flags) {
            pos += (cpt == ' ');
            while (!(f2 & (F_WS | F_L | F_N)) && f2)
                f2 = sc_flags(s, ++pos);
            uint32_t c2 = sc_cpt(s, pos);
            while (c2 == '\r' || c2 == '\n')
                c2 = sc_cpt(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (sc_flags(s, pos + nws) & F_WS) {
            uint32_t c2 = sc_cpt(s, pos + nws);
            if (c2 == '\r' || c2 == '\n')
                last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            sc_add(s, pos);
            continue;
        }
        if (nws > 1 && sc_cpt(s, pos + nws) != OOR) {
            pos += nws - 1;
            sc_add(s, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            sc_add(s, pos);
            continue;
        }
        sc_add(s, ++pos);
    }
}

/* Run re over subject[0..len) and push gap and match lengths, converted to
 * code points through b2c (NULL: bytes are code points). */
static kvv_status split_regex(const pcre2_code *re, pcre2_match_data *md, const char *subject,
                              size_t len, const size_t *b2c, bool utf, lens *out, kvv_error *err)
{
    size_t pos = 0, last = 0;
    uint32_t mopts = utf ? PCRE2_NO_UTF_CHECK : 0;
#define CP(b) (b2c ? b2c[b] : (b))
    while (pos <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)subject, len, pos, mopts, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return kvv_error_set(err, KVV_ERR_INTERNAL, "pre-tokenizer: regex match failed: %s",
                                 (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* empty match: step over one character */
            pos = ms + 1;
            while (utf && pos < len && ((unsigned char)subject[pos] & 0xC0) == 0x80)
                pos++;
            continue;
        }
        if (ms > last)
            lens_push(out, CP(ms) - CP(last));
        lens_push(out, CP(me) - CP(ms));
        last = pos = me;
    }
    if (last < len)
        lens_push(out, CP(len) - CP(last));
#undef CP
    return KVV_OK;
}

kvv_status kvv_pretok_split(const kvv_pretok *p, const char *text, size_t len, char **words,
                            size_t *words_len, int *n_words, kvv_error *err)
{
    uint32_t *cpts = NULL;
    size_t n = 0;
    kvv_status st = kvv_utf8_decode(text, len, &cpts, &n, err);
    if (st)
        return st;
    uint16_t *flags = malloc((n ? n : 1) * sizeof *flags);
    char *coll = malloc(n + 1);
    char *wide = malloc(4 * n + 1);
    size_t *b2c = malloc((4 * n + 1) * sizeof *b2c);
    size_t *c2b = malloc((n + 1) * sizeof *c2b);
    lens cur = {0}, next = {0};
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    char *buf = NULL;
    if (!flags || !coll || !wide || !b2c || !c2b || !md) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "pre-tokenizer: out of memory (%zu code points)", n);
        goto done;
    }
    size_t wlen = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cpts[i];
        flags[i] = kvv_cpt_flags(c);
        uint16_t cat = flags[i] & KVV_CPT_CATEGORIES;
        if (p->need_collapse) {
            if (c < 128)
                coll[i] = (char)c;
            else if (flags[i] & KVV_CPT_WHITESPACE)
                coll[i] = 0x0B;
            else
                coll[i] = (char)(cat == KVV_CPT_NUMBER ? 0xD1 : cat == KVV_CPT_LETTER ? 0xD2
                               : cat == KVV_CPT_PUNCTUATION ? 0xD3 : cat == KVV_CPT_MARK ? 0xD4
                               : cat == KVV_CPT_SYMBOL ? 0xD5 : 0xD0);
        }
        if (!p->need_wide)
            continue;
        uint32_t w = (c > 0x7F && (flags[i] & KVV_CPT_WHITESPACE)) ? 0x0B : c;
        if (w >= 0xD800 && w <= 0xDFFF) /* PCRE2 needs valid UTF-8; no range holds these */
            w = 0xFFFD;
        c2b[i] = wlen;
        size_t k = (size_t)kvv_utf8_encode(w, wide + wlen);
        for (size_t j = 0; j < k; j++)
            b2c[wlen + j] = i;
        wlen += k;
    }
    b2c[wlen] = n;
    c2b[n] = wlen;
    if (n > 0)
        lens_push(&cur, n);

    for (int si = 0; si < p->n_steps; si++) {
        const pretok_step *step = &p->steps[si];
        next.n = 0;
        size_t start = 0;
        for (size_t c = 0; c < cur.n && !st; c++) {
            size_t cl = cur.v[c];
            if (step->kind == STEP_GPT2 || step->kind == STEP_LLAMA3) {
                scan s = {cpts, flags, start, start + cl, start, &next};
                if (step->kind == STEP_GPT2)
                    split_gpt2(&s);
                else
                    split_llama3(&s);
            } else if (step->kind == STEP_COLLAPSED) {
                st = split_regex(step->re, md, coll + start, cl, NULL, false, &next, err);
            } else {
                /* bytes of code points [start, start+cl) in wide; b2c + bs maps
                 * them to absolute code point indexes, whose differences are
                 * the lengths */
                size_t bs = c2b[start], be = c2b[start + cl];
                st = split_regex(step->re, md, wide + bs, be - bs, b2c + bs, true, &next, err);
            }
            start += cl;
        }
        if (st)
            goto done;
        if (next.oom) {
            st = kvv_error_set(err, KVV_ERR_NOMEM, "pre-tokenizer: out of memory");
            goto done;
        }
        lens tmp = cur;
        cur = next;
        next = tmp;
    }

    /* Words: code points -> UTF-8 -> each byte through bytes_to_unicode. */
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += 8;
    cap += cur.n;
    buf = malloc(cap);
    if (!buf) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "pre-tokenizer: out of memory");
        goto done;
    }
    size_t o = 0, at = 0;
    for (size_t w = 0; w < cur.n; w++) {
        for (size_t i = at; i < at + cur.v[w]; i++) {
            char u8[4];
            int k = kvv_utf8_encode(cpts[i], u8);
            for (int j = 0; j < k; j++)
                o += (size_t)kvv_utf8_encode(kvv_byte_to_cpt((uint8_t)u8[j]), buf + o);
        }
        buf[o++] = '\0';
        at += cur.v[w];
    }
    *words = buf;
    *words_len = o;
    *n_words = (int)cur.n;
    buf = NULL;
done:
    free(buf);
    free(cpts);
    free(flags);
    free(coll);
    free(wide);
    free(b2c);
    free(c2b);
    free(cur.v);
    free(next.v);
    pcre2_match_data_free(md);
    return st;
}

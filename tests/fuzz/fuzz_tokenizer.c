/*
 * fuzz_tokenizer.c — libFuzzer target for the tokenizers (model/tokenizer.h):
 * SentencePiece (SPM), byte-level BPE under several pre-tokenizers, and
 * WordPiece (WPM), encode and decode, on arbitrary bytes.
 *
 *   make fuzz-one FUZZ_TARGET=fuzz_tokenizer
 *   build/tests/fuzz/replay_fuzz_tokenizer tests/fuzz/corpus/tokenizer   # inside make test
 *
 * Input: byte 0 chooses, the rest is the text.
 *   bits 0-3  which tokenizer (index into k_vocabs, modulo its size)
 *   bit 4     add_special (BOS/EOS/SEP as the vocabulary says)
 *   bit 5     parse_special (control token texts in the input become tokens)
 *   bit 6     the rest is not text but little-endian int32 ids to decode
 * (Hostile vocabulary files themselves are fuzz_vocab.c's; opening one
 * compiles its pre-tokenizer's regexes, a thousand times slower than a
 * tokenization, so the two are separate targets.)
 *
 * The vocabularies are built here with kvverify's own writer (no file from
 * ../shared): the synthetic SPM vocabulary of `kvverify synth` (256 byte
 * tokens, so every byte can be encoded), a GPT-2 style BPE vocabulary (all
 * 256 byte symbols, a few merges, a control and a user-defined token), and a
 * BERT style WordPiece vocabulary. KVV_FUZZ_DUMP_SEEDS=DIR writes them as
 * vocab-*.gguf into DIR (how fuzz_vocab's seed corpus was made).
 *
 * Properties (a broken one calls abort()):
 *   - encode returns KVV_OK, or KVV_ERR_FORMAT with a message (BPE and WPM
 *     refuse code points above U+10FFFF, as llama.cpp throws); SPM with its
 *     byte fallback accepts every input;
 *   - every id is inside the vocabulary, and decoding them succeeds;
 *   - round trip: decode(encode(text)) == text for valid UTF-8 text without
 *     special tokens, for SPM (unless the text holds U+2581, SPM's escaped
 *     space) and for BPE whose pre-tokenizer does not clean spaces
 *     (llama.cpp's clean_spaces edits " ." and the like);
 *   - decoding arbitrary ids is KVV_OK when all are in the vocabulary and
 *     KVV_ERR_USAGE otherwise; kvv_token_piece agrees on each id's range.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/synth.h"
#include "model/tokenizer.h"
#include "model/tokenizer_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

/* ------------------------------------------------------------ vocabularies */

typedef struct {
    const char *name;   /* seed file name: vocab-NAME.gguf */
    const char *model;  /* tokenizer.ggml.model */
    const char *pre;    /* tokenizer.ggml.pre (BPE), NULL = none */
    bool round_trip;    /* decode(encode(valid UTF-8)) must give the text back */
} vocab_spec;

static const vocab_spec k_vocabs[] = {
    {"spm", "llama", NULL, true},
    {"bpe-gpt2", "gpt2", "gpt-2", false},          /* clean_spaces */
    {"bpe-llama3", "gpt2", "llama3", false},       /* clean_spaces; hand-written splitter */
    {"bpe-qwen2", "gpt2", "qwen2", true},
    {"bpe-deepseek-llm", "gpt2", "deepseek-llm", true},
    {"bpe-deepseek-coder", "gpt2", "deepseek-coder", true},
    {"bpe-poro", "gpt2", "poro-chat", true},
    {"bpe-viking", "gpt2", "viking", true},
    {"bpe-command-r", "gpt2", "command-r", true},
    {"bpe-falcon", "gpt2", "falcon", false},
    {"wpm", "bert", NULL, false},
};
#define N_VOCABS ((int)(sizeof k_vocabs / sizeof k_vocabs[0]))

/* A growable list of token strings with their types. */
typedef struct {
    char **tok;
    int32_t *type;
    float *score;
    int n, cap;
} tok_list;

static void add_tok(tok_list *l, const char *s, int32_t type)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 512;
        l->tok = realloc(l->tok, (size_t)l->cap * sizeof *l->tok);
        l->type = realloc(l->type, (size_t)l->cap * sizeof *l->type);
        l->score = realloc(l->score, (size_t)l->cap * sizeof *l->score);
        check(l->tok && l->type && l->score);
    }
    l->tok[l->n] = strdup(s);
    check(l->tok[l->n] != NULL);
    l->type[l->n] = type;
    l->score[l->n] = -(float)l->n;
    l->n++;
}

static void free_toks(tok_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->tok[i]);
    free(l->tok);
    free(l->type);
    free(l->score);
}

/* The GPT-2 symbol string of raw bytes s (bytes_to_unicode), into out. */
static void byte_symbols(const char *s, char *out)
{
    size_t o = 0;
    for (; *s; s++)
        o += (size_t)kvv_utf8_encode(kvv_byte_to_cpt((uint8_t)*s), out + o);
    out[o] = '\0';
}

/* GPT-2 style: every byte symbol, merges building a few words, a control
 * token and a user-defined one. */
static void bpe_vocab(kvv_gguf_writer *w)
{
    static const char *const merges_raw[][2] = {
        {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {"e", "r"}, {" ", "a"}, {"o", "n"},
        {"r", "e"}, {" ", "w"}, {"o", "r"}, {" w", "or"}, {"l", "d"}, {" wor", "ld"}, {"1", "2"},
        {"\n", "\n"}, {" ", " "}, {"\xc3", "\xa9"}, {"in", "g"}, {"'", "s"},
    };
    enum { NM = sizeof merges_raw / sizeof merges_raw[0] };
    tok_list l = {0};
    char buf[64];
    for (int b = 0; b < 256; b++) {
        char s[2] = {(char)b, 0};
        if (b == 0) {                 /* byte_symbols stops at NUL: encode directly */
            buf[kvv_utf8_encode(kvv_byte_to_cpt(0), buf)] = '\0';
        } else {
            byte_symbols(s, buf);
        }
        add_tok(&l, buf, 1);
    }
    const char *merges[NM];
    char mbuf[NM][96];
    for (int i = 0; i < NM; i++) {
        char a[32], b[32], both[64];
        byte_symbols(merges_raw[i][0], a);
        byte_symbols(merges_raw[i][1], b);
        snprintf(mbuf[i], sizeof mbuf[i], "%s %s", a, b);
        merges[i] = mbuf[i];
        snprintf(both, sizeof both, "%s%s", a, b);
        add_tok(&l, both, 1);
    }
    add_tok(&l, "<|endoftext|>", 3);
    add_tok(&l, "<tool>", 4);
    check(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)l.tok,
                                      (uint64_t)l.n) == KVV_OK);
    check(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KVV_GGUF_INT32, l.type,
                                  (uint64_t)l.n) == KVV_OK);
    check(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, NM) == KVV_OK);
    check(kvv_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)l.n - 2) == KVV_OK);
    check(kvv_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)l.n - 2) == KVV_OK);
    free_toks(&l);
}

/* BERT style: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103 as the
 * default ids say, then characters, "##" pieces and a few words. */
static void wpm_vocab(kvv_gguf_writer *w)
{
    tok_list l = {0};
    char buf[24]; /* "[unused" + any int + "]" */
    add_tok(&l, "[PAD]", 3);
    for (int i = 1; i < 100; i++) {
        snprintf(buf, sizeof buf, "[unused%d]", i);
        add_tok(&l, buf, 5);
    }
    add_tok(&l, "[UNK]", 2);
    add_tok(&l, "[CLS]", 3);
    add_tok(&l, "[SEP]", 3);
    add_tok(&l, "[MASK]", 3);
    for (int c = 33; c < 127; c++) {
        snprintf(buf, sizeof buf, "%c", c);
        add_tok(&l, buf, 1);
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
            snprintf(buf, sizeof buf, "##%c", c);
            add_tok(&l, buf, 1);
        }
    }
    static const char *const words[] = {"the", "hello", "world", "##ing", "##ed", "un", "##able",
                                        "\xc3\xa9t\xc3\xa9", "\xe4\xb8\x80"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        add_tok(&l, words[i], 1);
    check(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)l.tok,
                                      (uint64_t)l.n) == KVV_OK);
    check(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KVV_GGUF_INT32, l.type,
                                  (uint64_t)l.n) == KVV_OK);
    free_toks(&l);
}

/* The synthetic SentencePiece vocabulary `kvverify synth` writes. */
static void spm_vocab(kvv_gguf_writer *w)
{
    kvv_synth_vocab v;
    kvv_error err = {0};
    check(kvv_synth_vocab_build(600, &v, &err) == KVV_OK);
    check(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tokens,
                                      (uint64_t)v.n) == KVV_OK);
    check(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.scores", KVV_GGUF_FLOAT32, v.scores,
                                  (uint64_t)v.n) == KVV_OK);
    check(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KVV_GGUF_INT32, v.types,
                                  (uint64_t)v.n) == KVV_OK);
    kvv_synth_vocab_free(&v);
}

/* A vocabulary-only GGUF for spec s, malloc'ed into *buf. */
static size_t vocab_gguf(const vocab_spec *s, uint8_t **buf)
{
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, KVV_GGUF_DEFAULT_ALIGNMENT);
    check(w != NULL);
    check(kvv_gguf_writer_set_str(w, "general.architecture", "llama") == KVV_OK);
    check(kvv_gguf_writer_set_str(w, "tokenizer.ggml.model", s->model) == KVV_OK);
    if (s->pre)
        check(kvv_gguf_writer_set_str(w, "tokenizer.ggml.pre", s->pre) == KVV_OK);
    if (strcmp(s->model, "llama") == 0)
        spm_vocab(w);
    else if (strcmp(s->model, "gpt2") == 0)
        bpe_vocab(w);
    else
        wpm_vocab(w);
    size_t n = 0;
    kvv_error err = {0};
    check(kvv_gguf_writer_to_buffer(w, buf, &n, &err) == KVV_OK);
    kvv_gguf_writer_free(w);
    return n;
}

/* The tokenizers, built once (the fuzzer calls the target millions of
 * times); they live until the process ends. */
static kvv_tokenizer *tokenizer(int i)
{
    static kvv_tokenizer *built[N_VOCABS];
    static bool dumped;
    const char *dump = getenv("KVV_FUZZ_DUMP_SEEDS");
    if (dump && !dumped) {
        dumped = true;
        for (int k = 0; k < N_VOCABS; k++) {
            uint8_t *b;
            size_t n = vocab_gguf(&k_vocabs[k], &b);
            char path[512];
            snprintf(path, sizeof path, "%s/vocab-%s.gguf", dump, k_vocabs[k].name);
            FILE *f = fopen(path, "wb");
            check(f && fwrite(b, 1, n, f) == n && fclose(f) == 0);
            free(b);
        }
    }
    if (!built[i]) {
        uint8_t *b;
        size_t n = vocab_gguf(&k_vocabs[i], &b);
        kvv_gguf *g = NULL;
        kvv_error err = {0};
        check(kvv_gguf_open_memory(b, n, k_vocabs[i].name, &g, &err) == KVV_OK);
        if (kvv_tokenizer_open(g, &built[i], &err) != KVV_OK) {
            fprintf(stderr, "fuzz_tokenizer: vocabulary %s: %s\n", k_vocabs[i].name, err.msg);
            abort();
        }
        kvv_gguf_close(g);
        free(b);
    }
    return built[i];
}

/* ------------------------------------------------------------ properties */

/* Strict UTF-8: shortest forms, no surrogates, at most U+10FFFF, no NUL
 * (a NUL ends a C string somewhere in every tokenizer's special-token pass). */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        uint32_t cp;
        size_t len;
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > n)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

/* Every id in range, decodable, and each piece consistent with the range. */
static void check_ids(const kvv_tokenizer *t, const int32_t *ids, int n)
{
    int nv = kvv_tokenizer_n_vocab(t);
    char piece[8];
    for (int i = 0; i < n; i++) {
        check(ids[i] >= 0 && ids[i] < nv);
        check(kvv_token_piece(t, ids[i], piece, sizeof piece) >= 0);
    }
}

static void run_text(const kvv_tokenizer *t, const vocab_spec *s, const uint8_t *text, size_t len,
                     bool add_special, bool parse_special)
{
    int32_t *ids = NULL;
    int n = 0;
    kvv_error err = {0};
    kvv_status st = kvv_tokenize_ex(t, (const char *)text, len, add_special, parse_special, &ids,
                                    &n, &err);
    if (st != KVV_OK) {
        check(st == KVV_ERR_FORMAT && err.msg[0] != '\0');
        check(strcmp(s->model, "llama") != 0); /* SPM's byte fallback takes every byte */
        return;
    }
    check(n >= 0 && (n == 0 || ids != NULL));
    check_ids(t, ids, n);
    char *back = NULL;
    size_t bl = 0;
    check(kvv_detokenize(t, ids, n, &back, &bl, &err) == KVV_OK);
    check(back != NULL && back[bl] == '\0');
    /* SPM writes spaces as U+2581 and reads every U+2581 back as a space
     * (llama.cpp does the same), so a text holding that character is the
     * one valid UTF-8 text it cannot give back */
    bool escaped = false;
    for (size_t i = 0; i + 3 <= len && !escaped; i++)
        escaped = memcmp(text + i, "\xe2\x96\x81", 3) == 0;
    escaped = escaped && strcmp(s->model, "llama") == 0;
    if (s->round_trip && !add_special && !parse_special && !escaped && valid_utf8(text, len))
        check(bl == len && memcmp(back, text, len) == 0);
    free(back);
    free(ids);
}

static void run_ids(const kvv_tokenizer *t, const uint8_t *p, size_t len)
{
    int n = (int)(len / 4 > 4096 ? 4096 : len / 4);
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    check(ids != NULL);
    bool in_range = true;
    int nv = kvv_tokenizer_n_vocab(t);
    for (int i = 0; i < n; i++) {
        uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                     (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        /* mostly small ids, so most inputs are decodable */
        ids[i] = (u & 0x80000000u) ? (int32_t)u : (int32_t)(u % (uint32_t)(nv + 8));
        in_range = in_range && ids[i] >= 0 && ids[i] < nv;
        char piece[4];
        check((kvv_token_piece(t, ids[i], piece, sizeof piece) >= 0) ==
              (ids[i] >= 0 && ids[i] < nv));
    }
    char *back = NULL;
    size_t bl = 0;
    kvv_error err = {0};
    kvv_status st = kvv_detokenize(t, ids, n, &back, &bl, &err);
    check(in_range ? st == KVV_OK : st == KVV_ERR_USAGE);
    if (st == KVV_OK)
        check(back != NULL && back[bl] == '\0');
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t sel = data[0];
    const int i = (sel & 0x0F) % N_VOCABS;
    const kvv_tokenizer *t = tokenizer(i);
    if (sel & 0x40)
        run_ids(t, data + 1, size - 1);
    else
        run_text(t, &k_vocabs[i], data + 1, size - 1, (sel & 0x10) != 0, (sel & 0x20) != 0);
    return 0;
}

/* test_tokenizer.c — the tokenizers against llama.cpp's own test vectors
 * (../shared/models/vocab/NAME.gguf.inp and .out, made with
 * add_special=false), the
 * stories260K prompts of the peer dumps, round trips, load speed, and
 * hostile metadata built in memory (those need no ../shared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_impl.h"
#include "tests/test_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static kvv_tokenizer *open_vocab(const char *path, double *secs)
{
    kvv_gguf *g = NULL;
    kvv_tokenizer *t = NULL;
    kvv_error err = {0};
    double t0 = now_s();
    if (kvv_gguf_open(path, &g, &err) != KVV_OK) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
    if (kvv_tokenizer_open(g, &t, &err) != KVV_OK) {
        fprintf(stderr, "%s\n", err.msg);
        kvv_gguf_close(g);
        fail();
    }
    if (secs)
        *secs = now_s() - t0;
    kvv_gguf_close(g);
    return t;
}

/* ------------------------------------------------------------ vectors */

/* How many of the 46 vectors must survive decode(encode(s)) == s. The
 * losses are by design (docs/tokenizer.md): GPT-2, MPT and Refact clean
 * spaces on decoding (" ?" -> "?", " 'told" -> "'told"), which vectors 32
 * and 45 contain; BERT lowercases, strips accents, drops control characters
 * and characters it has no piece for, and decodes every word with a leading
 * space, so only 4 vectors ("", " (", "!!!!!!" and " discards") come back. */
typedef struct {
    const char *name;
    int round_trip_expected; /* vectors out of 46 that must round-trip */
} vocab_case;

static const vocab_case k_vocabs[] = {
    {"ggml-vocab-llama-spm", 46},
    {"ggml-vocab-phi-3", 46},
    {"ggml-vocab-gpt-2", 44},
    {"ggml-vocab-deepseek-coder", 46},
    {"ggml-vocab-mpt", 44},
    {"ggml-vocab-refact", 44},
    {"ggml-vocab-bert-bge", 4},
};

/* Split the .inp file like test-tokenizer-0.cpp: strings separated by
 * "\n__ggml_vocab_test__\n"; the file ends with a separator. */
static int split_inputs(char *raw, size_t size, char **s, size_t *len, int max)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sl = sizeof sep - 1;
    int n = 0;
    size_t pos = 0;
    while (pos < size && n < max) {
        char *next = NULL;
        for (size_t i = pos; i + sl <= size; i++)
            if (memcmp(raw + i, sep, sl) == 0) {
                next = raw + i;
                break;
            }
        s[n] = raw + pos;
        if (!next) {
            len[n++] = size - pos;
            break;
        }
        len[n++] = (size_t)(next - (raw + pos));
        pos = (size_t)(next - raw) + sl;
    }
    return n;
}

static void run_vectors(const vocab_case *vc)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/vocab/%s.gguf", vc->name);
    KVV_NEED_SHARED(p, rel);
    char path[4096], pin[4200], pout[4200];
    snprintf(path, sizeof path, "%s", p);
    snprintf(pin, sizeof pin, "%s.inp", path);
    snprintf(pout, sizeof pout, "%s.out", path);
    size_t isz, osz;
    char *inp = (char *)kvv_test_read_file(pin, &isz);
    char *outp = (char *)kvv_test_read_file(pout, &osz);
    assert_non_null(inp);
    assert_non_null(outp);
    double load_s;
    kvv_tokenizer *t = open_vocab(path, &load_s);

    char *s[128];
    size_t sl[128];
    int n = split_inputs(inp, isz, s, sl, 128);
    int matched = 0, round = 0, lines = 0;
    double enc_s = 0;
    char *line = outp;
    for (int i = 0; i < n; i++) {
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = '\0';
        lines++;
        int32_t want[1024];
        int nw = 0;
        for (char *q = line; *q;) {
            while (*q == ' ')
                q++;
            if (!*q)
                break;
            want[nw++] = (int32_t)strtol(q, &q, 10);
        }
        int32_t *ids;
        int ni;
        kvv_error err = {0};
        double t0 = now_s();
        assert_int_equal(kvv_tokenize(t, s[i], sl[i], false, &ids, &ni, &err), KVV_OK);
        enc_s += now_s() - t0;
        bool ok = ni == nw && (nw == 0 || memcmp(ids, want, (size_t)nw * sizeof *ids) == 0);
        if (ok) {
            matched++;
        } else {
            fprintf(stderr, "%s vector %d '%.*s': got", vc->name, i, (int)sl[i], s[i]);
            for (int k = 0; k < ni; k++)
                fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n    want");
            for (int k = 0; k < nw; k++)
                fprintf(stderr, " %d", want[k]);
            fprintf(stderr, "\n");
        }
        char *text;
        size_t tl;
        assert_int_equal(kvv_detokenize(t, ids, ni, &text, &tl, &err), KVV_OK);
        if (tl == sl[i] && memcmp(text, s[i], tl) == 0)
            round++;
        else if (getenv("KVV_TOK_VERBOSE") || vc->round_trip_expected > 40)
            printf("  %s: vector %d does not round-trip: '%.*s' -> '%s'\n", vc->name, i,
                   (int)sl[i] > 60 ? 60 : (int)sl[i], s[i], text);
        free(text);
        free(ids);
        line = eol + 1;
    }
    printf("vocab %-28s %2d/%d vectors match, %2d/%d round-trip, load %.1f ms, encode %.2f ms\n",
           vc->name, matched, n, round, n, load_s * 1e3, enc_s * 1e3);
    assert_int_equal(n, 46);
    assert_int_equal(lines, n);
    assert_int_equal(matched, n);
    assert_int_equal(round, vc->round_trip_expected);
    /* load time is printed, not asserted: no timed tests on shared machines */
    kvv_tokenizer_free(t);
    free(inp);
    free(outp);
}

static void test_vectors_llama_spm(void **state) { (void)state; run_vectors(&k_vocabs[0]); }
static void test_vectors_phi3(void **state) { (void)state; run_vectors(&k_vocabs[1]); }
static void test_vectors_gpt2(void **state) { (void)state; run_vectors(&k_vocabs[2]); }
static void test_vectors_deepseek_coder(void **state) { (void)state; run_vectors(&k_vocabs[3]); }
static void test_vectors_mpt(void **state) { (void)state; run_vectors(&k_vocabs[4]); }
static void test_vectors_refact(void **state) { (void)state; run_vectors(&k_vocabs[5]); }
static void test_vectors_bert(void **state) { (void)state; run_vectors(&k_vocabs[6]); }

/* ------------------------------------------------------------ stories260K */

static void test_stories_prompts(void **state)
{
    (void)state;
    KVV_NEED_SHARED(p, "models/stories260K-f32.gguf");
    kvv_tokenizer *t = open_vocab(p, NULL);
    static const struct { const char *text; int n; int32_t ids[12]; } cases[] = {
        {"Once upon a time", 5, {1, 403, 407, 261, 378}},
        {"The little dog", 5, {1, 291, 376, 400, 428}},
        {"Lily wanted to", 5, {1, 317, 391, 266, 267}},
        {"One day, a boy named Tom", 11, {1, 385, 328, 432, 261, 268, 414, 422, 395, 274, 287}},
    };
    assert_int_equal(kvv_tokenizer_bos(t), 1);
    assert_int_equal(kvv_tokenizer_eos(t), 2);
    assert_int_equal(kvv_tokenizer_n_vocab(t), 512);
    assert_string_equal(kvv_tokenizer_model(t), "llama");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t *ids;
        int n;
        kvv_error err = {0};
        assert_int_equal(kvv_tokenize(t, cases[c].text, strlen(cases[c].text), true, &ids, &n, &err),
                         KVV_OK);
        assert_int_equal(n, cases[c].n);
        assert_memory_equal(ids, cases[c].ids, (size_t)n * sizeof *ids);
        /* raw ids decode back to the text; after BOS llama.cpp keeps the
         * prefix space */
        char *text;
        size_t tl;
        assert_int_equal(kvv_detokenize(t, ids + 1, n - 1, &text, &tl, &err), KVV_OK);
        assert_string_equal(text, cases[c].text);
        free(text);
        assert_int_equal(kvv_detokenize(t, ids, n, &text, &tl, &err), KVV_OK);
        assert_int_equal(text[0], ' ');
        assert_string_equal(text + 1, cases[c].text);
        free(text);
        free(ids);
    }
    /* pieces as printed during generation; BOS prints nothing */
    char buf[32];
    assert_int_equal(kvv_token_piece(t, 1, buf, sizeof buf), 0);
    assert_int_equal(kvv_token_piece(t, 512, buf, sizeof buf), -1);
    assert_int_equal(kvv_token_piece(t, 403, buf, sizeof buf), 5);
    assert_string_equal(buf, " Once");
    assert_int_equal(kvv_token_piece(t, 3 + 'A', buf, sizeof buf), 1); /* <0x41> */
    assert_string_equal(buf, "A");
    kvv_tokenizer_free(t);
}

/* The teacher-forced story: its first 64 ids (with BOS) from llama.cpp. */
static void test_stories_story(void **state)
{
    (void)state;
    KVV_NEED_SHARED(p, "peer/ref/stories260K-f32__tf.json");
    char path[4096];
    snprintf(path, sizeof path, "%s", p);
    KVV_NEED_SHARED(m, "models/stories260K-f32.gguf");
    kvv_tokenizer *t = open_vocab(m, NULL);
    char *json = (char *)kvv_test_read_file(path, NULL);
    assert_non_null(json);
    char *pt = strstr(json, "\"prompt_text\"");
    char *tk = strstr(json, "\"prompt_tokens\"");
    assert_non_null(pt);
    assert_non_null(tk);
    char *q = strchr(pt + 13, '"') + 1, text[2048];
    size_t tl = 0;
    while (*q != '"' && tl + 1 < sizeof text) {
        if (*q == '\\') /* \" only in this story */
            q++;
        text[tl++] = *q++;
    }
    text[tl] = '\0';
    int32_t want[64];
    int nw = 0;
    q = strchr(tk, '[') + 1;
    while (nw < 64 && *q != ']') {
        want[nw++] = (int32_t)strtol(q, &q, 10);
        while (*q == ',' || *q == ' ' || *q == '\n')
            q++;
    }
    assert_int_equal(nw, 64);
    int32_t *ids;
    int n;
    kvv_error err = {0};
    assert_int_equal(kvv_tokenize_ex(t, text, tl, true, true, &ids, &n, &err), KVV_OK);
    assert_true(n >= 64);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    free(json);
    kvv_tokenizer_free(t);
}

/* ------------------------------------------------------------ other vocabularies */

static void test_other_vocabs(void **state)
{
    (void)state;
    static const char *const names[] = {"baichuan", "deepseek-llm", "falcon", "starcoder",
                                        "gpt-neox"};
    static const char text[] = "Hello world, it's 2024!\n  indented\tcode();  \xc3\xa9t\xc3\xa9 "
                               "\xe6\x88\x91\xe6\x83\xb3 \xf0\x9f\xa6\x99 3333";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf", names[i]);
        KVV_NEED_SHARED(p, rel);
        double secs;
        kvv_tokenizer *t = open_vocab(p, &secs);
        int32_t *ids;
        int n;
        kvv_error err = {0};
        assert_int_equal(kvv_tokenize(t, text, sizeof text - 1, false, &ids, &n, &err), KVV_OK);
        assert_true(n > 10);
        char *back;
        size_t bl;
        assert_int_equal(kvv_detokenize(t, ids, n, &back, &bl, &err), KVV_OK);
        /* these vocabularies cover every byte, so the text comes back
         * (falcon/gpt-neox/starcoder clean " ," only; the text has none) */
        bool same = bl == sizeof text - 1 && memcmp(back, text, bl) == 0;
        printf("vocab %-14s %d tokens, load %.1f ms, round trip %s\n", names[i], n, secs * 1e3,
               same ? "exact" : "differs");
        assert_true(same);
        free(back);
        free(ids);
        kvv_tokenizer_free(t);
    }
}

/* Random bytes (invalid UTF-8 included) never crash any tokenizer model and
 * give ids inside the vocabulary; SPM gives every valid raw text back. */
static void test_random_bytes(void **state)
{
    (void)state;
    static const char *const names[] = {"llama-spm", "gpt-2", "deepseek-coder", "bert-bge"};
    uint32_t seed = 12345;
    for (size_t v = 0; v < sizeof names / sizeof names[0]; v++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf", names[v]);
        KVV_NEED_SHARED(p, rel);
        kvv_tokenizer *t = open_vocab(p, NULL);
        int exact = 0, rejected = 0;
        for (int iter = 0; iter < 200; iter++) {
            char buf[256];
            size_t n = 0, want = (size_t)(iter % 48) + 1;
            for (size_t i = 0; i < want; i++) {
                seed = seed * 1664525u + 1013904223u;
                unsigned r = seed >> 24;
                if (iter % 2 == 0) { /* raw bytes, mostly broken UTF-8 */
                    buf[n++] = (char)(r < 32 ? ' ' : r < 64 ? 'a' + (r % 26) : r);
                    continue;
                }
                /* valid UTF-8: spaces, letters, and code points of 2-4 bytes */
                uint32_t c = r < 32 ? ' ' : r < 128 ? 'a' + (r % 26)
                           : r < 192 ? 0x80 + (seed & 0x7FF) % 0x780
                           : r < 240 ? 0x800 + (seed & 0xFFFF) % 0xD000
                           : 0x10000 + (seed & 0xFFFFF) % 0x30000;
                if (c < 0x80) {
                    buf[n++] = (char)c;
                } else if (c < 0x800) {
                    buf[n++] = (char)(0xC0 | (c >> 6));
                    buf[n++] = (char)(0x80 | (c & 0x3F));
                } else if (c < 0x10000) {
                    buf[n++] = (char)(0xE0 | (c >> 12));
                    buf[n++] = (char)(0x80 | ((c >> 6) & 0x3F));
                    buf[n++] = (char)(0x80 | (c & 0x3F));
                } else {
                    buf[n++] = (char)(0xF0 | (c >> 18));
                    buf[n++] = (char)(0x80 | ((c >> 12) & 0x3F));
                    buf[n++] = (char)(0x80 | ((c >> 6) & 0x3F));
                    buf[n++] = (char)(0x80 | (c & 0x3F));
                }
            }
            int32_t *ids;
            int ni;
            kvv_error err = {0};
            kvv_status st = kvv_tokenize(t, buf, n, iter % 2 == 0, &ids, &ni, &err);
            if (st != KVV_OK) {
                /* F5..F7 lead bytes encode code points above U+10FFFF, which
                 * llama.cpp's BPE/WPM code throws on: an error here */
                assert_int_equal(st, KVV_ERR_FORMAT);
                assert_true(iter % 2 == 0 && strcmp(names[v], "llama-spm") != 0);
                assert_non_null(strstr(err.msg, "above U+10FFFF"));
                rejected++;
                continue;
            }
            for (int k = 0; k < ni; k++)
                assert_true(ids[k] >= 0 && ids[k] < kvv_tokenizer_n_vocab(t));
            char *back;
            size_t bl;
            assert_int_equal(kvv_detokenize(t, ids, ni, &back, &bl, &err), KVV_OK);
            if (iter % 2 == 1 && bl == n && memcmp(back, buf, n) == 0)
                exact++;
            free(back);
            free(ids);
        }
        printf("random text  %-15s %3d/100 valid UTF-8 texts round-trip exactly, %d/100 broken "
               "texts rejected\n", names[v], exact, rejected);
        /* SPM's byte fallback and BPE's byte alphabet keep every valid text
         * (no "?!.,'" here for clean_spaces to touch). (Broken UTF-8 need not
         * come back: a space after a truncated lead byte is swallowed into
         * its symbol and returns as the bytes of U+2581, as in llama.cpp.) */
        if (strcmp(names[v], "bert-bge") != 0)
            assert_int_equal(exact, 100);
        kvv_tokenizer_free(t);
    }
}

/* The GGUF v2 falcon vocabulary tokenizes exactly as the v3 one. */
static void test_falcon_v2(void **state)
{
    (void)state;
    static const char text[] = "Hello world, it's 2024!\n  def f(x):\treturn x**2  # \xc3\xa9t\xc3\xa9";
    int32_t *ids[2];
    int n[2];
    const char *rels[2] = {"models/malformed/ggml-vocab-falcon.v2-5dd6f5ac.gguf",
                           "models/vocab/ggml-vocab-falcon.gguf"};
    for (int k = 0; k < 2; k++) {
        KVV_NEED_SHARED(p, rels[k]);
        kvv_tokenizer *t = open_vocab(p, NULL);
        kvv_error err = {0};
        assert_int_equal(kvv_tokenize(t, text, sizeof text - 1, true, &ids[k], &n[k], &err), KVV_OK);
        kvv_tokenizer_free(t);
    }
    assert_int_equal(n[0], n[1]);
    assert_memory_equal(ids[0], ids[1], (size_t)n[0] * sizeof *ids[0]);
    free(ids[0]);
    free(ids[1]);
}

static void test_stablelm_unsupported(void **state)
{
    (void)state;
    KVV_NEED_SHARED(p, "models/vocab/ggml-vocab-stablelm.gguf");
    kvv_gguf *g;
    kvv_tokenizer *t = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open(p, &g, &err), KVV_OK);
    assert_int_equal(kvv_tokenizer_open(g, &t, &err), KVV_ERR_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(err.msg, "tokenizer.ggml.pre"));
    assert_non_null(strstr(err.msg, "stablelm"));
    kvv_gguf_close(g);
}

/* ------------------------------------------------------------ synthetic (no ../shared) */

/* A tiny SPM vocabulary: merges follow scores, unknown characters fall back
 * to byte tokens. */
static kvv_gguf *tiny_vocab(const char *model, bool dup, bool bad_types, bool merges,
                            uint8_t **buf)
{
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b",
                                       "ab", "\xe2\x96\x81" "ab", "\xe2\x96\x81" "a", "<0xC3>",
                                       "<0xA9>", "<0x0A>"};
    enum { N = sizeof toks / sizeof toks[0] };
    const char *t2[N];
    memcpy(t2, toks, sizeof toks);
    if (dup)
        t2[5] = "a";
    float scores[N] = {0, 0, 0, -1, -2, -2, -1.5f, -0.5f, -3, 0, 0, 0};
    int32_t types[N] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 6};
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    assert_non_null(w);
    assert_int_equal(kvv_gguf_writer_set_str(w, "general.architecture", "llama"), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_str(w, "tokenizer.ggml.model", model), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", t2, N), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.scores", KVV_GGUF_FLOAT32, scores, N),
                     KVV_OK);
    if (bad_types)
        assert_int_equal(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KVV_GGUF_FLOAT32,
                                                 scores, N), KVV_OK);
    else
        assert_int_equal(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KVV_GGUF_INT32,
                                                 types, N), KVV_OK);
    if (merges) {
        static const char *const m[] = {"a b"};
        assert_int_equal(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", m, 1), KVV_OK);
    }
    size_t size;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, buf, &size, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    kvv_gguf *g = NULL;
    assert_int_equal(kvv_gguf_open_memory(*buf, size, "tiny.gguf", &g, &err), KVV_OK);
    return g;
}

static void test_tiny_spm(void **state)
{
    (void)state;
    uint8_t *buf;
    kvv_gguf *g = tiny_vocab("llama", false, false, false, &buf);
    kvv_tokenizer *t;
    kvv_error err = {0};
    assert_int_equal(kvv_tokenizer_open(g, &t, &err), KVV_OK);
    kvv_gguf_close(g);
    free(buf);
    int32_t *ids;
    int n;
    /* " ab" -> "▁ab" (score -0.5 beats "ab" -1.5); "é" -> bytes C3 A9 */
    assert_int_equal(kvv_tokenize(t, "ab\xc3\xa9\n", 5, true, &ids, &n, &err), KVV_OK);
    int32_t want[] = {1, 7, 9, 10, 11};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof want);
    char *text;
    size_t tl;
    assert_int_equal(kvv_detokenize(t, ids + 1, n - 1, &text, &tl, &err), KVV_OK);
    assert_string_equal(text, "ab\xc3\xa9\n");
    free(text);
    free(ids);
    /* empty text: BOS only with add_special, nothing without */
    assert_int_equal(kvv_tokenize(t, "", 0, true, &ids, &n, &err), KVV_OK);
    assert_int_equal(n, 1);
    free(ids);
    assert_int_equal(kvv_tokenize(t, "", 0, false, &ids, &n, &err), KVV_OK);
    assert_int_equal(n, 0);
    free(ids);
    /* a character with no byte token is an error naming the byte */
    assert_int_equal(kvv_tokenize(t, "\xe2\x82\xac", 3, false, &ids, &n, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "<0xE2>"));
    /* ids outside the vocabulary are rejected by detokenize */
    int32_t bad[] = {4, 99};
    assert_int_equal(kvv_detokenize(t, bad, 2, &text, &tl, &err), KVV_ERR_USAGE);
    kvv_tokenizer_free(t);
}

static void test_hostile_metadata(void **state)
{
    (void)state;
    uint8_t *buf;
    kvv_tokenizer *t = NULL;
    kvv_error err = {0};
    kvv_gguf *g = tiny_vocab("llama", true, false, false, &buf);
    assert_int_equal(kvv_tokenizer_open(g, &t, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "duplicate token"));
    assert_non_null(strstr(err.msg, "tiny.gguf"));
    assert_non_null(strstr(err.msg, "at byte"));
    kvv_gguf_close(g);
    free(buf);

    g = tiny_vocab("llama", false, true, false, &buf);
    assert_int_equal(kvv_tokenizer_open(g, &t, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "tokenizer.ggml.token_type"));
    kvv_gguf_close(g);
    free(buf);

    g = tiny_vocab("t5", false, false, false, &buf);
    assert_int_equal(kvv_tokenizer_open(g, &t, &err), KVV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "tokenizer.ggml.model"));
    kvv_gguf_close(g);
    free(buf);

    g = tiny_vocab("gpt2", false, false, false, &buf); /* no merges */
    assert_int_equal(kvv_tokenizer_open(g, &t, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "tokenizer.ggml.merges"));
    kvv_gguf_close(g);
    free(buf);

    /* a BPE vocabulary with one merge: "ab" merges, the rest are bytes */
    g = tiny_vocab("gpt2", false, false, true, &buf);
    assert_int_equal(kvv_tokenizer_open(g, &t, &err), KVV_OK);
    kvv_gguf_close(g);
    free(buf);
    int32_t *ids;
    int n;
    assert_int_equal(kvv_tokenize(t, "ab", 2, false, &ids, &n, &err), KVV_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 6);
    free(ids);
    kvv_tokenizer_free(t);
    kvv_tokenizer_free(NULL);
}

/* ------------------------------------------------------------ pre-tokenizer oracle */

/* Split text with PCRE2 (UTF + UCP) running the tokenizer.json regex itself
 * and map each piece through bytes_to_unicode: an independent oracle for the
 * hand-written Llama-3 scanner and the collapsed Qwen2 regex, valid where
 * the text's characters have the same class in both Unicode tables. */
static size_t oracle_split(const char *re, const char *text, char *out)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                     &ec, &eo, NULL);
    assert_non_null(code);
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    size_t len = strlen(text), pos = 0, last = 0, o = 0;
    for (;;) {
        int rc = pcre2_match(code, (PCRE2_SPTR)text, len, pos, 0, md, NULL);
        size_t ms = len, me = len;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            ms = ov[0];
            me = ov[1];
        }
        for (int part = 0; part < 2; part++) {
            size_t a = part ? ms : last, b = part ? me : ms;
            if (b <= a)
                continue;
            for (size_t i = a; i < b; i++) {
                char u8[4];
                int k = kvv_utf8_encode(kvv_byte_to_cpt((uint8_t)text[i]), u8);
                memcpy(out + o, u8, (size_t)k);
                o += (size_t)k;
            }
            out[o++] = '\0';
        }
        if (rc < 0)
            break;
        last = pos = me;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    return o;
}

static void test_pretok_oracle(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "Hello world", " Hello  World!  ", "I'm sure it's OK, we'll see; they've I'D 'LL 'Re",
        "3 33 333 3333 33333 1234567 x1y22z333", "\n\n \n\t\n  indented\r\n\tcode();  ",
        "price: $100.00 (approx.) -- 50% off!!! ...", "caf\xc3\xa9 na\xc3\xafve \xc3\x9c\xc3\xb1\xc3\xae" "c\xc3\xb8" "d\xc3\xa9",
        "\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9",
        "\xf0\x9f\x9a\x80 (normal) \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f end",
        "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8",
        "a\u00a0b \u3000c", "x  \n  y", "```````\"\"\"\"......!!!!!!??????",
        "   ", "\t", "end with spaces   ", "a'b 's", NULL};
    /* ascii: llama.cpp's adaptation of the case classes ([^a-z] after a
     * letter lookahead) equals the original only for ASCII letters, so those
     * compare on ASCII texts */
    static const struct { const char *pre, *re; bool ascii; } cases[] = {
        {"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", false},
        {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", false},
        {"gpt-2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", false},
        {"tekken", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}"
                   "\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
                   "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
                   "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", true},
        {"gpt-4o", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}"
                   "\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}"
                   "\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|"
                   "'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
                   "\\s+(?!\\S)|\\s+", true},
        {"seed-coder", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
                       "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kvv_pretok *p;
        kvv_pretok_flags f;
        kvv_error err = {0};
        assert_int_equal(kvv_pretok_open(cases[c].pre, &p, &f, &err), KVV_OK);
        /* the built-in texts, then llama.cpp's 46 test strings when present */
        const char *all[128];
        int n_all = 0;
        for (const char *const *tx = texts; *tx; tx++)
            all[n_all++] = *tx;
        char *inp = NULL, *vs[64];
        size_t vl[64];
        const char *path = kvv_test_shared("models/vocab/ggml-vocab-gpt-2.gguf.inp");
        size_t isz = 0;
        if (path && (inp = (char *)kvv_test_read_file(path, &isz))) {
            int nv = split_inputs(inp, isz, vs, vl, 64);
            for (int i = 0; i < nv; i++) {
                vs[i][vl[i]] = '\0'; /* overwrites the separator's first byte */
                all[n_all++] = vs[i];
            }
        }
        int agree = 0, n = 0;
        for (int ti = 0; ti < n_all; ti++) {
            const char *const *tx = &all[ti];
            bool ascii = true;
            for (const char *q = *tx; *q; q++)
                ascii = ascii && (unsigned char)*q < 0x80;
            if (cases[c].ascii && !ascii)
                continue;
            n++;
            char want[8192];
            size_t wl = oracle_split(cases[c].re, *tx, want);
            char *words;
            size_t len;
            int nw;
            assert_int_equal(kvv_pretok_split(p, *tx, strlen(*tx), &words, &len, &nw, &err), KVV_OK);
            if (len == wl && memcmp(words, want, wl) == 0) {
                agree++;
            } else {
                fprintf(stderr, "%s: '%s' splits differently:\n  got ", cases[c].pre, *tx);
                for (size_t i = 0; i < len; i++)
                    fputc(words[i] ? words[i] : '|', stderr);
                fprintf(stderr, "\n  want ");
                for (size_t i = 0; i < wl; i++)
                    fputc(want[i] ? want[i] : '|', stderr);
                fputc('\n', stderr);
            }
            free(words);
        }
        printf("pre-tokenizer %-10s agrees with PCRE2 on the original regex for %d/%d texts\n",
               cases[c].pre, agree, n);
        assert_int_equal(agree, n);
        free(inp);
        kvv_pretok_free(p);
    }
}

/* Every pre-tokenizer kvverify knows compiles, and its words, mapped back
 * through bytes_to_unicode and concatenated, are exactly the input. */
static void test_pretok_lossless(void **state)
{
    (void)state;
    static const char text[] = "Hello, y'all! How are you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3"
                               " 1234567 x\t\n\n  \xd0\xbd\xd0\xb0 caf\xc3\xa9 I'VE 'll ...\r\n";
    int n_names = 0;
    for (const char *name; (name = kvv_pretok_name(n_names)); n_names++) {
        kvv_pretok *p;
        kvv_pretok_flags f;
        kvv_error err = {0};
        if (kvv_pretok_open(name, &p, &f, &err) != KVV_OK) {
            fprintf(stderr, "%s: %s\n", name, err.msg);
            fail();
        }
        char *words;
        size_t len;
        int nw;
        assert_int_equal(kvv_pretok_split(p, text, sizeof text - 1, &words, &len, &nw, &err), KVV_OK);
        assert_true(nw > 1);
        char back[sizeof text];
        size_t bl = 0;
        uint32_t *cpts;
        size_t nc;
        assert_int_equal(kvv_utf8_decode(words, len, &cpts, &nc, &err), KVV_OK);
        for (size_t i = 0; i < nc; i++) {
            if (cpts[i] == 0)
                continue; /* word separator */
            int b = kvv_cpt_to_byte(cpts[i]);
            assert_true(b >= 0 && bl < sizeof back);
            back[bl++] = (char)b;
        }
        assert_int_equal(bl, sizeof text - 1);
        assert_memory_equal(back, text, bl);
        free(cpts);
        free(words);
        kvv_pretok_free(p);
    }
    printf("%d pre-tokenizer names compile and split losslessly\n", n_names);
    assert_true(n_names >= 70);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_spm),
        cmocka_unit_test(test_hostile_metadata),
        cmocka_unit_test(test_pretok_oracle),
        cmocka_unit_test(test_pretok_lossless),
        cmocka_unit_test(test_vectors_llama_spm),
        cmocka_unit_test(test_vectors_phi3),
        cmocka_unit_test(test_vectors_gpt2),
        cmocka_unit_test(test_vectors_deepseek_coder),
        cmocka_unit_test(test_vectors_mpt),
        cmocka_unit_test(test_vectors_refact),
        cmocka_unit_test(test_vectors_bert),
        cmocka_unit_test(test_stories_prompts),
        cmocka_unit_test(test_stories_story),
        cmocka_unit_test(test_other_vocabs),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_falcon_v2),
        cmocka_unit_test(test_stablelm_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

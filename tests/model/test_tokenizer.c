/* test_tokenizer.c — the tokenizers against llama.cpp's own test vectors
 * (../shared/models/vocab/NAME.gguf.inp and .out, made with
 * add_special=false), the
 * stories260K prompts of the peer dumps, round trips, load speed, and
 * hostile metadata built in memory (those need no ../shared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
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
    assert_true(load_s < 1.0);
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
        assert_true(secs < 1.0);
        free(back);
        free(ids);
        kvv_tokenizer_free(t);
    }
}

/* Random bytes (invalid UTF-8 included) never crash any tokenizer model and
 * give ids inside the vocabulary; without BOS, SPM gives every text back. */
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
        int exact = 0;
        for (int iter = 0; iter < 200; iter++) {
            char buf[64];
            size_t n = (size_t)(iter % 48) + 1;
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                /* mostly bytes >= 0x80 and spaces: broken sequences */
                unsigned r = seed >> 24;
                buf[i] = (char)(r < 32 ? ' ' : r < 64 ? 'a' + (r % 26) : r);
            }
            int32_t *ids;
            int ni;
            kvv_error err = {0};
            assert_int_equal(kvv_tokenize(t, buf, n, iter % 2 == 0, &ids, &ni, &err), KVV_OK);
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
        printf("random bytes %-15s %3d/100 raw texts round-trip exactly\n", names[v], exact);
        /* SPM's byte fallback keeps every byte; BPE replaces invalid UTF-8
         * with U+FFFD first (as llama.cpp), so only valid texts come back */
        if (strcmp(names[v], "llama-spm") == 0)
            assert_int_equal(exact, 100);
        kvv_tokenizer_free(t);
    }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_spm),
        cmocka_unit_test(test_hostile_metadata),
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
        cmocka_unit_test(test_stablelm_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

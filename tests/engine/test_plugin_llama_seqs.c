/*
 * test_plugin_llama_seqs.c — sequences through the llama.cpp plugin
 * (plugins/llama.cpp/llama_seqs.c), on the CPU, on every machine.
 *
 * Asserted: the mechanics, with kv_unified 0 and 1 and flash attention on
 * and off — the capability and the description, a decode call of several
 * sequences gives logits for the tokens asked for and stores each
 * sequence's rows in its own cache (present where computed, absent beyond),
 * sequence 0 is the mirror's, prefix copies are bit-exact (shared cells or
 * llama.cpp's buffer copy), removal, llama.cpp's position rule and the
 * copies it cannot do refused with a message, never an abort.
 *
 * Measured, not asserted (llama.cpp's numerics are what the batch check
 * certifies): whether a request computed alone and computed beside another
 * in the same call gets the same bits, and whether A beside B and A beside
 * B' (same lengths) do. Printed per configuration (KVV_TEST_VERBOSE=1, or
 * in the failure message of nothing); plugins/llama.cpp/README.md records
 * the figures.
 */
#include "tests/engine/plugin_fixture.h"


static kvv_engine *open_seqs(const kvv_model *m, const char *fa, const char *unified,
                             kvv_cache_type ct)
{
    const char *opts[] = {fa, unified, NULL};
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "llama.cpp";
    o.mode = KVV_MODE_INVARIANT; /* what the CLI passes; llama.cpp has no modes */
    o.cache_type = ct;
    o.n_ctx = 32;
    o.n_seq_max = 4;
    o.engine_opts = opts;
    o.n_engine_opts = 2;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    if (kvv_engine_open(m, &o, &e, &err))
        fail_msg("open llama.cpp %s %s: %s", fa, unified, err.msg);
    return e;
}

/* seq's rows pos0..pos0+n-1 of every layer, K then V, and presence, into
 * buf / pr (sized by the caller). */
static void read_seq(kvv_engine *e, int seq, int pos0, int n, float *buf, uint8_t *pr)
{
    const kvv_hparams *hp = &kvv_engine_model(e)->hp;
    size_t K = (size_t)hp->n_head_kv * hp->head_dim, V = (size_t)hp->n_head_kv * hp->head_dim_v;
    for (int l = 0; l < hp->n_layer; l++) {
        float *k = buf + (size_t)l * n * (K + V);
        kvv_error err = {0};
        if (kvv_engine_seq_kv(e, seq, l, pos0, n, k, k + (size_t)n * K,
                              pr + (size_t)l * n * hp->n_head_kv, &err))
            fail_msg("seq_kv %d: %s", seq, err.msg);
    }
}

typedef struct {
    float *kv;
    uint8_t *pr;
    size_t floats, flags;
} rows_t;

static rows_t rows_of(kvv_engine *e, int seq, int pos0, int n)
{
    const kvv_hparams *hp = &kvv_engine_model(e)->hp;
    rows_t r;
    r.floats = (size_t)hp->n_layer * n * hp->n_head_kv * (hp->head_dim + hp->head_dim_v);
    r.flags = (size_t)hp->n_layer * n * hp->n_head_kv;
    r.kv = malloc(r.floats * sizeof *r.kv);
    r.pr = malloc(r.flags);
    assert_non_null(r.kv);
    assert_non_null(r.pr);
    read_seq(e, seq, pos0, n, r.kv, r.pr);
    return r;
}

static bool rows_equal(const rows_t *a, const rows_t *b)
{
    return memcmp(a->kv, b->kv, a->floats * sizeof *a->kv) == 0 &&
           memcmp(a->pr, b->pr, a->flags) == 0;
}

static void rows_free(rows_t *r)
{
    free(r->kv);
    free(r->pr);
}

/* Every flag of layer-major rows [layer][pos][head] at positions p0..p1-1
 * (of n read) is want. */
static void presence(const kvv_hparams *hp, const rows_t *r, int n, int p0, int p1, int want)
{
    for (int l = 0; l < hp->n_layer; l++)
        for (int p = p0; p < p1; p++)
            for (int h = 0; h < hp->n_head_kv; h++)
                if (r->pr[((size_t)l * n + p) * hp->n_head_kv + h] != want)
                    fail_msg("layer %d position %d head %d: present %d, want %d", l, p, h,
                             r->pr[((size_t)l * n + p) * hp->n_head_kv + h], want);
}

static int32_t tok_of(const kvv_hparams *hp, int seed, int i)
{
    return (int32_t)((i * 7919 + seed * 31 + 13) % hp->n_vocab);
}

/* A (8 tokens, sequence 0) decoded alone, beside B (sequence 1, 5 tokens)
 * and beside B' (other tokens, same length), in fresh engines; then one
 * step each. Logits of every A token and A's rows compared bit for bit. */
static void measure(const kvv_model *m, const char *fa, const char *unified, kvv_cache_type ct,
                    char *line, size_t size)
{
    const kvv_hparams *hp = &m->hp;
    const size_t V = (size_t)hp->n_vocab;
    float *lg[3];
    rows_t rw[3], rs[3]; /* A's prompt rows, its step row */
    for (int k = 0; k < 3; k++) { /* 0 alone, 1 beside B, 2 beside B' */
        kvv_engine *e = open_seqs(m, fa, unified, ct);
        lg[k] = malloc((size_t)9 * V * sizeof *lg[k]);
        float *tmp = malloc((size_t)16 * V * sizeof *tmp);
        assert_non_null(lg[k]);
        assert_non_null(tmp);
        fx_batch b = {0};
        for (int i = 0; i < 8; i++) {
            fx_add(&b, 0, i, tok_of(hp, 1, i), 1);
            if (k && i < 5)
                fx_add(&b, 1, i, tok_of(hp, k == 1 ? 2 : 3, i), 0);
        }
        fx_must_decode(e, &b, tmp);
        memcpy(lg[k], tmp, (size_t)8 * V * sizeof *tmp); /* A's rows come first: only A asks */
        b.n = 0; /* a step: A's token 8, with B's token 5 */
        fx_add(&b, 0, 8, tok_of(hp, 1, 8), 1);
        if (k)
            fx_add(&b, 1, 5, tok_of(hp, k == 1 ? 2 : 3, 5), 0);
        fx_must_decode(e, &b, tmp);
        memcpy(lg[k] + (size_t)8 * V, tmp, V * sizeof *tmp);
        rw[k] = rows_of(e, 0, 0, 8);
        rs[k] = rows_of(e, 0, 8, 1);
        presence(hp, &rw[k], 8, 0, 8, 1);
        presence(hp, &rs[k], 1, 0, 1, 1);
        free(tmp);
        kvv_engine_close(e);
    }
    bool pre = memcmp(lg[0], lg[1], (size_t)8 * V * sizeof(float)) == 0;
    bool step = memcmp(lg[0] + 8 * V, lg[1] + 8 * V, V * sizeof(float)) == 0;
    bool kv = rows_equal(&rw[0], &rw[1]), kvs = rows_equal(&rs[0], &rs[1]);
    bool iso = memcmp(lg[1], lg[2], (size_t)9 * V * sizeof(float)) == 0 &&
               rows_equal(&rw[1], &rw[2]) && rows_equal(&rs[1], &rs[2]);
#define SAME(x) ((x) ? "same" : "DIFFER")
    snprintf(line, size, "%s %s %s: A alone vs beside B: prompt logits %s K/V %s, step logits %s "
             "K/V %s; A beside B vs beside B': %s", fa, unified, kvv_cache_type_name(ct),
             SAME(pre), SAME(kv), SAME(step), SAME(kvs), SAME(iso));
#undef SAME
    for (int k = 0; k < 3; k++) {
        free(lg[k]);
        rows_free(&rw[k]);
        rows_free(&rs[k]);
    }
}

static void expect(kvv_status s, const kvv_error *err, kvv_status want, const char *needle)
{
    if (s != want || !strstr(err->msg, needle))
        fail_msg("status %d (want %d): '%s' (want '%s')", (int)s, (int)want, err->msg, needle);
}

static void mechanics(const kvv_model *m, const char *fa, const char *unified)
{
    const kvv_hparams *hp = &m->hp;
    const bool uni = strcmp(unified, "kv_unified=1") == 0;
    kvv_engine *e = open_seqs(m, fa, unified, KVV_CACHE_F32);
    assert_true(kvv_engine_caps(e) & KVV_ENGINE_CAP_SEQS);
    assert_int_equal(kvv_engine_n_seq(e), 4);
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    assert_int_equal(d.n_seq_max, 4);
    assert_int_equal(d.kv_unified, uni);
    assert_non_null(strstr(d.kernels, uni ? "kv_unified=1" : "kv_unified=0"));
    float *lg = malloc((size_t)16 * hp->n_vocab * sizeof *lg);
    assert_non_null(lg);
    /* A (seq 0, 6 tokens) and B (seq 1, 3 tokens), interleaved, logits of
     * A's last and B's last */
    fx_batch b = {0};
    for (int i = 0; i < 6; i++) {
        fx_add(&b, 0, i, tok_of(hp, 1, i), i == 5);
        if (i < 3)
            fx_add(&b, 1, i, tok_of(hp, 2, i), i == 2);
    }
    fx_must_decode(e, &b, lg);
    for (size_t i = 0; i < (size_t)2 * hp->n_vocab; i++)
        assert_true(lg[i] == lg[i]); /* written, not NaN */
    rows_t a = rows_of(e, 0, 0, 8), bs = rows_of(e, 1, 0, 8);
    presence(hp, &a, 8, 0, 6, 1);
    presence(hp, &a, 8, 6, 8, 0);
    presence(hp, &bs, 8, 0, 3, 1);
    presence(hp, &bs, 8, 3, 8, 0);
    /* sequence 0 is the mirror's */
    const kvv_kv_cache *c = kvv_engine_cache(e);
    assert_non_null(c);
    assert_int_equal(c->n_pos, 6);
    {
        float k0[512];
        size_t K = (size_t)hp->n_head_kv * hp->head_dim;
        assert_true(K <= 512);
        kvv_kv_cache_load_k(c, 0, 5, k0);
        assert_memory_equal(k0, a.kv + 5 * K, K * sizeof *k0);
    }
    kvv_error err;
    /* a prefix of A copied into sequence 2 (read before any decode: with
     * kv_unified=0 from the source, as llama.cpp copies it next decode) */
    if (kvv_engine_seq_cp(e, 0, 2, 0, 4, &err))
        fail_msg("seq_cp: %s", err.msg);
    for (int pass = 0; pass < 2; pass++) {
        rows_t p2 = rows_of(e, 2, 0, 8);
        presence(hp, &p2, 8, 0, 4 + pass, 1);
        presence(hp, &p2, 8, 4 + pass, 8, 0);
        const kvv_hparams *h = hp;
        size_t per = (size_t)8 * h->n_head_kv * (h->head_dim + h->head_dim_v);
        for (int l = 0; l < h->n_layer; l++) { /* rows 0..3: K then V blocks of 8 rows */
            size_t K = (size_t)h->n_head_kv * h->head_dim, Vd = (size_t)h->n_head_kv * h->head_dim_v;
            assert_memory_equal(p2.kv + l * per, a.kv + l * per, 4 * K * sizeof(float));
            assert_memory_equal(p2.kv + l * per + 8 * K, a.kv + l * per + 8 * K,
                                4 * Vd * sizeof(float));
        }
        rows_free(&p2);
        /* then the rest of A computed in sequence 2 (the copy applied) */
        b.n = 0;
        if (pass == 0) {
            fx_add(&b, 2, 4, tok_of(hp, 1, 4), 1);
            fx_must_decode(e, &b, lg);
        }
    }
    /* removal: B cut at 1, A untouched */
    if (kvv_engine_seq_rm(e, 1, 1, -1, &err))
        fail_msg("seq_rm: %s", err.msg);
    rows_t b2 = rows_of(e, 1, 0, 8), a2 = rows_of(e, 0, 0, 8);
    presence(hp, &b2, 8, 0, 1, 1);
    presence(hp, &b2, 8, 1, 8, 0);
    assert_true(rows_equal(&a, &a2));
    /* llama.cpp's rule: a sequence continues at its last position + 1 */
    b.n = 0;
    fx_add(&b, 1, 3, tok_of(hp, 2, 3), 0);
    expect(fx_decode(e, &b, NULL, &err), &err, KVV_ERR_USAGE, "expected 1");
    /* a copy starting past 0 across streams llama.cpp cannot do: refused */
    kvv_status s = kvv_engine_seq_cp(e, 0, 3, 2, 4, &err);
    if (uni)
        assert_int_equal(s, KVV_OK);
    else
        expect(s, &err, KVV_ERR_UNSUPPORTED, "kv_unified=0");
    rows_free(&a);
    rows_free(&a2);
    rows_free(&b2);
    rows_free(&bs);
    free(lg);
    kvv_engine_close(e);
}

static void configs(const kvv_model *m, const char *what)
{
    static const char *const fa[] = {"flash_attn=off", "flash_attn=on"};
    static const char *const un[] = {"kv_unified=0", "kv_unified=1"};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            mechanics(m, fa[i], un[j]);
            char line[300];
            measure(m, fa[i], un[j], KVV_CACHE_F32, line, sizeof line);
            if (getenv("KVV_TEST_VERBOSE"))
                fprintf(stderr, "llama.cpp %s: %s\n", what, line);
        }
}

static void test_synthetic(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    configs(f.m, "llama-tiny f32");
    fx_model_close(&f);
}

static void test_stories(void **state)
{
    (void)state;
    static const char *const files[] = {"models/stories260K-f32.gguf",
                                        "models/stories260K-q8_0.gguf"};
    for (size_t i = 0; i < 2; i++) {
        KVV_NEED_SHARED(path, files[i]);
        kvv_model *m = NULL;
        kvv_error err = {0};
        if (kvv_model_open(path, &m, &err))
            fail_msg("%s", err.msg);
        configs(m, files[i] + 7);
        kvv_model_close(m);
    }
}

/* A split sliding-window cache: no sequences (read through its tensors,
 * sequence 0 only), said as a missing capability. */
static void test_split_cache(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "gemma2-tiny", KVV_TYPE_F32);
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "llama.cpp";
    o.mode = KVV_MODE_INVARIANT;
    o.n_ctx = 32;
    o.n_seq_max = 2;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    expect(kvv_engine_open(f.m, &o, &e, &err), &err, KVV_ERR_UNSUPPORTED, "serves one sequence");
    assert_null(e);
    fx_model_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_stories),
        cmocka_unit_test(test_split_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

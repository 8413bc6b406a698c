/* check.c — what every check shares (see check.h). */
#include "verify/check.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

kvv_check_opts kvv_check_opts_default(void)
{
    kvv_check_opts o;
    memset(&o, 0, sizeof o);
    o.engine = kvv_engine_opts_default();
    o.n_gen = 64;
    o.controls = true;
    o.seed = 1;
    return o;
}

int kvv_check_jobs(const kvv_check_opts *o)
{
    if (o->n_jobs < 2 || !kvv_engine_name_concurrent(o->engine.name))
        return 1;
    return o->n_jobs;
}

kvv_status kvv_check_opts_validate(const kvv_check_opts *o, int n_positions, kvv_error *err)
{
    if (!o->model)
        return kvv_error_set(err, KVV_ERR_USAGE, "check: no model");
    if (!o->tokens || o->n_tokens < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "check: the prompt is empty");
    const kvv_hparams *hp = &o->model->hp;
    for (int i = 0; i < o->n_tokens; i++)
        if (o->tokens[i] < 0 || o->tokens[i] >= hp->n_vocab)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "check: prompt token %d (index %d) is outside the vocabulary "
                                 "0..%d",
                                 (int)o->tokens[i], i, hp->n_vocab - 1);
    int n_ctx = o->engine.n_ctx;
    if (n_ctx <= 0)
        n_ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (n_positions > n_ctx)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "check: %d positions do not fit the engine's context of %d",
                             n_positions, n_ctx);
    return KVV_OK;
}

kvv_engine_opts kvv_check_engine_opts(const kvv_check_opts *o, int n_positions)
{
    kvv_engine_opts e = o->engine;
    if (e.n_ctx <= 0)
        e.n_ctx = n_positions;
    return e;
}

kvv_status kvv_check_open_engine(const kvv_model *m, const kvv_engine_opts *eo, unsigned needs,
                                 const char *check, kvv_engine **out, kvv_error *err)
{
    kvv_status s = kvv_engine_open(m, eo, out, err);
    if (s)
        return s;
    if ((s = kvv_engine_require(*out, needs, check, err))) {
        kvv_engine_close(*out);
        *out = NULL;
    }
    return s;
}

uint64_t kvv_check_nonfinite(const kvv_check_result *r, uint64_t *n_nan, uint64_t *n_inf)
{
    uint64_t nan = 0, inf = 0;
    for (int i = 0; i < r->n_rows; i++) {
        nan += r->rows[i].st.n_nan;
        inf += r->rows[i].st.n_inf;
    }
    if (n_nan)
        *n_nan = nan;
    if (n_inf)
        *n_inf = inf;
    return nan + inf;
}

bool kvv_check_fail_nonfinite(kvv_check_result *r, const char *figure)
{
    uint64_t nan, inf, bad = kvv_check_nonfinite(r, &nan, &inf);
    if (!bad)
        return false;
    kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%llu compared values not finite (%llu NaN, "
                          "%llu inf); %s", (unsigned long long)bad, (unsigned long long)nan,
                          (unsigned long long)inf, figure);
    kvv_check_set_message(r, "a run this check compares holds NaN or inf (%llu NaN, %llu inf "
                          "among the compared values): a non-finite value is never equal, "
                          "whatever the other side holds", (unsigned long long)nan,
                          (unsigned long long)inf);
    return true;
}

kvv_status kvv_check_frame(const kvv_check_opts *o, kvv_check_result *r, int n_positions,
                           kvv_check_body body, void *ctx, kvv_error *err)
{
    double t0 = kvv_now_seconds();
    kvv_status s = kvv_check_opts_validate(o, n_positions, err);
    if (!s)
        s = body(ctx, err);
    if (s)
        kvv_check_set_error(r, err);
    else if (r->verdict == KVV_VERDICT_PASS) { /* whatever rule the check ended with */
        char key[512];
        snprintf(key, sizeof key, "%s", kvv_check_key_figure(r)); /* r's own is rewritten */
        kvv_check_fail_nonfinite(r, key);
    }
    r->seconds = kvv_now_seconds() - t0;
    return s;
}

void kvv_check_conclude(kvv_check_result *r, bool differs, const char *pass_key,
                        const char *fail_key, const char *clean)
{
    int missed = kvv_check_controls_missed(r);
    if (kvv_check_fail_nonfinite(r, differs ? fail_key : clean)) {
        /* the reason first: a NaN or inf in a compared run */
    } else if (differs) {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%s", fail_key);
    } else if (missed) {
        /* the reason first (the key figure states why the verdict is FAIL) */
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%d control%s NOT detected; %s", missed,
                              missed > 1 ? "s" : "", clean);
        kvv_check_set_message(r, "a negative control was not detected: the check cannot be "
                                 "trusted to fail");
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%s", pass_key);
    }
}

bool kvv_check_skip_one_path(kvv_check_result *r, kvv_engine *e, const int *sizes, int n)
{
    kvv_batch_paths p;
    kvv_engine_batch_paths(e, &p);
    const bool routes = p.known && p.n > 0; /* else: every size counts as its own */
    int lo = sizes[0], hi = sizes[0];
    for (int i = 1; i < n; i++) {
        lo = sizes[i] < lo ? sizes[i] : lo;
        hi = sizes[i] > hi ? sizes[i] : hi;
    }
    if (lo != hi && (!routes || kvv_batch_path_of(&p, lo) != kvv_batch_path_of(&p, hi)))
        return false;
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    char shapes[48];
    if (lo == hi)
        snprintf(shapes, sizeof shapes, "%d token%s", lo, lo == 1 ? "" : "s");
    else
        snprintf(shapes, sizeof shapes, "%d to %d tokens", lo, hi);
    json_object_set_new(r->details, "one_path", json_pack("{s:i, s:i}", "min", lo, "max", hi));
    if (lo != hi) {
        int k = kvv_batch_path_of(&p, lo); /* the switch above the sizes, or the last below */
        const kvv_batch_switch *sw = &p.sw[k < p.n ? k : p.n - 1];
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED,
                              "nothing could be checked: every batch shape (%s) runs one "
                              "kernel path of %s (%s)", shapes, d.name, d.mode);
        kvv_check_set_message(r, "every batch shape this prompt gives (%s) runs the same "
                              "kernels of engine %s (%s), whose kernels switch at %d tokens "
                              "(%s): the variants cannot differ; give a prompt of at least %d "
                              "tokens", shapes, d.name, d.mode, sw->at, sw->what,
                              k < p.n ? sw->at : lo);
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED,
                              "nothing could be checked: every batch shape is %s", shapes);
        kvv_check_set_message(r, "every run of this check has the same batch shape (%s) on "
                              "engine %s: the variants cannot differ; give a prompt of at "
                              "least 2 tokens", shapes, d.name);
    }
    return true;
}

/* splitmix64: a tiny, well-mixed generator with explicit state. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void kvv_prompt_random(uint64_t seed, int n_vocab, int32_t bos, int32_t *out, int n)
{
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        if (i == 0 && bos >= 0 && bos < n_vocab) {
            out[i] = bos;
            continue;
        }
        /* multiply-shift maps 32 random bits onto [0, n_vocab) without modulo bias
         * worth mentioning for vocabularies << 2^32 */
        uint64_t r = splitmix64(&s) >> 32;
        out[i] = (int32_t)((r * (uint64_t)n_vocab) >> 32);
    }
}


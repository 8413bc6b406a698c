/* patch.c — the patch check: residual patching gives KL exactly 0 (see
 * patch.h). */
#include "verify/patch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/capture.h"

/* log-softmax of x into lp (double). */
static void log_softmax(const float *x, int n, double *lp)
{
    if (n <= 0)
        return;
    double m = -INFINITY;
    for (int i = 0; i < n; i++)
        if ((double)x[i] > m)
            m = (double)x[i];
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += exp((double)x[i] - m);
    double lse = m + log(s);
    for (int i = 0; i < n; i++)
        lp[i] = (double)x[i] - lse;
}

/* KL(p || q) for p = softmax(a), q = softmax(b) over n logits, in double
 * with libm (verify/ is not the computed path). Both sides go through the
 * same code, so bit-identical rows give bit-identical log-probabilities and
 * every term is exactly 0: KL is exactly 0.0. NaN when out of memory. */
static double kl_logits(const float *a, const float *b, int n)
{
    double *la = malloc((size_t)n * 2 * sizeof *la);
    if (!la)
        return NAN;
    double *lb = la + n;
    log_softmax(a, n, la);
    log_softmax(b, n, lb);
    double kl = 0.0;
    for (int i = 0; i < n; i++) {
        double p = exp(la[i]);
        if (p == 0.0)
            continue; /* 0 * log(0/q) = 0, also avoids -inf - -inf */
        kl += p * (la[i] - lb[i]);
    }
    free(la);
    return kl;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void kvv_patch_prompt_b(const int32_t *a, int n, int n_vocab, uint64_t seed, int32_t *b)
{
    uint64_t s = seed ^ 0x70a7c4b0b5eedull;
    for (int i = 0; i < n; i++)
        b[i] = i == 0 ? a[0] : (int32_t)(((splitmix64(&s) >> 32) * (uint64_t)n_vocab) >> 32);
    bool differ = false;
    for (int i = 0; i + 1 < n; i++)
        differ |= a[i] != b[i];
    if (!differ && n >= 2 && n_vocab >= 2) {
        int i = n >= 3 ? 1 : 0; /* keep the shared first token when we can */
        b[i] = (a[i] + 1) % n_vocab;
    }
}

static void fmt_kl(double kl, char *txt, size_t nt, char *hex, size_t nh)
{
    if (isnan(kl)) { /* shown as such: a NaN logit makes the KL undefined */
        snprintf(txt, nt, "NaN");
        snprintf(hex, nh, "NaN");
        return;
    }
    snprintf(txt, nt, "%.9g", kl);
    snprintf(hex, nh, "%a", kl);
}

/* KL at every position as JSON (null where not finite), for the report's
 * KL-per-position figure. */
static json_t *kl_array(const double *kl, int T)
{
    json_t *a = json_array();
    for (int t = 0; t < T; t++)
        json_array_append_new(a, isfinite(kl[t]) ? json_real(kl[t]) : json_null());
    return a;
}

/* Max KL over positions of logits la vs lp [T][V]; *pos_of_max; the KL of
 * each position into per_pos[T] when not NULL. */
static double max_kl(const float *la, const float *lp, int T, int V, int *pos_of_max,
                     double *per_pos)
{
    double mx = 0.0;
    *pos_of_max = -1;
    for (int t = 0; t < T; t++) {
        double kl = kl_logits(la + (size_t)t * V, lp + (size_t)t * V, V);
        if (per_pos)
            per_pos[t] = kl;
        if (kl != 0.0 && (*pos_of_max < 0 || !(kl <= mx))) {
            mx = kl;
            *pos_of_max = t;
        }
    }
    return mx;
}

typedef struct {
    const kvv_check_opts *o;
    kvv_check_result *r;
    int L, T, V;
    int32_t *pos, *tok_b;
    float *la, *lb, *lp;   /* [T][V] logits: A, B, patched B */
    double *kl;            /* [T] KL per position of the latest comparison */
    kvv_capture cap_a;     /* A's residuals */
    kvv_capture cap_p;     /* patching hooks (records nothing) */
} patch_ctx;

static kvv_status patched_run(patch_ctx *c, kvv_engine *e, int layer, int lo, kvv_error *err)
{
    kvv_engine_reset(e);
    c->cap_p.patch_layer = layer;
    c->cap_p.patch_src = kvv_capture_resid(&c->cap_a, layer, 0);
    c->cap_p.patch_lo = lo;
    c->cap_p.patch_hi = c->T - 1;
    kvv_hooks h = kvv_capture_hooks(&c->cap_p);
    return kvv_engine_forward(e, c->T, c->tok_b, c->pos, &h, KVV_LOGITS_ALL, c->lp, err);
}

static kvv_status run(patch_ctx *c, kvv_error *err)
{
    const kvv_check_opts *o = c->o;
    kvv_check_result *r = c->r;
    kvv_engine *e;
    kvv_engine_opts eo = kvv_check_engine_opts(o, c->T);
    kvv_status s = kvv_check_open_engine(o->model, &eo, KVV_CHECK_PATCH_NEEDS, "patch", &e, err);
    if (s)
        return s;
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    kvv_check_set_engine(r, &d);

    kvv_hooks ha = kvv_capture_hooks(&c->cap_a);
    if ((s = kvv_engine_forward(e, c->T, o->tokens, c->pos, &ha, KVV_LOGITS_ALL, c->la, err)))
        goto out;
    kvv_engine_reset(e);
    if ((s = kvv_engine_forward(e, c->T, c->tok_b, c->pos, NULL, KVV_LOGITS_ALL, c->lb, err)))
        goto out;
    int pm;
    double kl_ab = max_kl(c->la, c->lb, c->T, c->V, &pm, c->kl);
    json_object_set_new(r->details, "kl_unpatched_by_position", kl_array(c->kl, c->T));

    json_t *per_layer = json_array();
    json_object_set_new(r->details, "layers", per_layer);
    kvv_cmp_stats tot;
    kvv_cmp_init(&tot);
    double kl_all = 0.0;
    int n_nonzero = 0, lo = o->force_fail ? c->T - 1 : 0;
    for (int l = 0; l <= c->L; l++) {
        if ((s = patched_run(c, e, l, lo, err)))
            goto out;
        kvv_cmp_stats st;
        kvv_cmp_init(&st);
        kvv_cmp_update(&st, c->la, c->lp, (size_t)c->T * c->V);
        if (kvv_check_add_row(r, l, "logits", &st))
            goto nomem;
        if (st.first >= 0)
            kvv_check_row_where(r, "t=%d,i=%d", (int)(st.first / c->V), (int)(st.first % c->V));
        kvv_cmp_merge(&tot, &st);
        if (st.first >= 0) {
            kvv_mismatch m = {.layer = l, .token = (int)(st.first / c->V), .head = -1,
                              .index = (int)(st.first % c->V), .expected = st.first_ref,
                              .actual = st.first_test};
            snprintf(m.tensor, sizeof m.tensor, "logits");
            snprintf(m.variant, sizeof m.variant, "patched at layer %d", l);
            kvv_check_note_mismatch(r, &m);
        }
        int pos_max;
        double kl = max_kl(c->la, c->lp, c->T, c->V, &pos_max, c->kl);
        if (kl != 0.0 || isnan(kl))
            n_nonzero++;
        if (!(kl <= kl_all))
            kl_all = kl;
        char txt[40], hex[40];
        fmt_kl(kl, txt, sizeof txt, hex, sizeof hex);
        json_array_append_new(per_layer,
                              json_pack("{s:i, s:o, s:s, s:s, s:i, s:I, s:o}", "layer", l, "kl_max",
                                        isfinite(kl) ? json_real(kl) : json_null(),
                                        "kl_max_text", txt,
                                        "kl_max_hex", hex, "kl_max_position", pos_max,
                                        "logits_differing", (json_int_t)st.n_diff,
                                        "kl_by_position", kl_array(c->kl, c->T)));
        if (o->progress)
            o->progress(o->progress_user, "patch", l + 1, c->L + 1);
    }

    if (o->controls) {
        int lc = c->L / 2;
        if ((s = patched_run(c, e, lc, c->T - 1, err)))
            goto out;
        int pc;
        max_kl(c->la, c->lp, c->T, c->V, &pc, c->kl);
        double kl = c->kl[c->T - 1];
        json_object_set_new(r->details, "control_layer", json_integer(lc));
        json_object_set_new(r->details, "control_kl_by_position", kl_array(c->kl, c->T));
        char txt[40], hex[40], name[96];
        fmt_kl(kl, txt, sizeof txt, hex, sizeof hex);
        snprintf(name, sizeof name, "patch only the last position at layer %d", lc);
        if (kvv_check_add_control(r, name, kl > 0.0, "KL at the last position = %s (%s)", txt,
                                  hex))
            goto nomem;
    }

    char txt[40], hex[40];
    fmt_kl(kl_ab, txt, sizeof txt, hex, sizeof hex);
    json_object_set_new(r->details, "kl_unpatched_max", json_string(txt));
    json_object_set_new(r->details, "kl_unpatched_max_hex", json_string(hex));
    json_object_set_new(r->details, "n_tokens", json_integer(c->T));
    json_object_set_new(r->details, "force_fail", json_boolean(o->force_fail));
    json_t *jb = json_array();
    for (int t = 0; t < c->T; t++)
        json_array_append_new(jb, json_integer(c->tok_b[t]));
    json_object_set_new(r->details, "prompt_b", jb);

    fmt_kl(kl_all, txt, sizeof txt, hex, sizeof hex);
    char pass[160], fail[160];
    snprintf(pass, sizeof pass, "KL = %s (%s) at %d positions x %d layers; logits bit-equal", txt,
             hex, c->T, c->L + 1);
    snprintf(fail, sizeof fail, "max KL = %s (%s) at %d of %d layers; %llu logits differ", txt,
             hex, n_nonzero, c->L + 1, (unsigned long long)tot.n_diff);
    kvv_check_conclude(r, tot.n_diff || n_nonzero, pass, fail, "KL = 0");
    goto out;
nomem:
    s = kvv_error_set(err, KVV_ERR_NOMEM, "patch: out of memory");
out:
    kvv_engine_close(e);
    return s;
}

/* Its own option checks (prompt B), the buffers, run, free. */
static kvv_status body(void *ctx, kvv_error *err)
{
    patch_ctx *c = ctx;
    const kvv_check_opts *o = c->o;
    if (o->n_tokens < 2)
        return kvv_error_set(err, KVV_ERR_USAGE, "patch: needs a prompt of at least 2 tokens");
    const kvv_hparams *hp = &o->model->hp;
    c->L = hp->n_layer;
    c->T = o->n_tokens;
    c->V = hp->n_vocab;
    size_t nl = (size_t)c->T * c->V;
    c->pos = malloc((size_t)c->T * sizeof *c->pos);
    c->tok_b = malloc((size_t)c->T * sizeof *c->tok_b);
    c->la = malloc(nl * sizeof(float));
    c->lb = malloc(nl * sizeof(float));
    c->lp = malloc(nl * sizeof(float));
    c->kl = malloc((size_t)c->T * sizeof *c->kl);
    kvv_status s = KVV_OK;
    if (!c->pos || !c->tok_b || !c->la || !c->lb || !c->lp || !c->kl)
        s = kvv_error_set(err, KVV_ERR_NOMEM, "patch: out of memory for %d x %d logits", c->T,
                          c->V);
    if (!s) {
        for (int t = 0; t < c->T; t++)
            c->pos[t] = t;
        if (o->tokens_b)
            memcpy(c->tok_b, o->tokens_b, (size_t)c->T * sizeof *c->tok_b);
        else
            kvv_patch_prompt_b(o->tokens, c->T, c->V, o->seed, c->tok_b);
        bool differ = false;
        for (int t = 0; t < c->T; t++) {
            if (c->tok_b[t] < 0 || c->tok_b[t] >= c->V) {
                s = kvv_error_set(err, KVV_ERR_USAGE,
                                  "patch: prompt B token %d (index %d) is outside the "
                                  "vocabulary 0..%d",
                                  (int)c->tok_b[t], t, c->V - 1);
                break;
            }
            if (t + 1 < c->T)
                differ |= c->tok_b[t] != o->tokens[t];
        }
        if (!s && !differ)
            s = kvv_error_set(err, KVV_ERR_USAGE,
                              "patch: prompts A and B must differ before the last position");
    }
    if (!s)
        s = kvv_capture_init(&c->cap_a, hp, c->T, KVV_CAPTURE_RESID, err);
    if (!s)
        s = kvv_capture_init(&c->cap_p, hp, c->T, 0, err);
    if (!s)
        s = run(c, err);
    kvv_capture_free(&c->cap_a);
    kvv_capture_free(&c->cap_p);
    free(c->pos);
    free(c->tok_b);
    free(c->la);
    free(c->lb);
    free(c->lp);
    free(c->kl);
    return s;
}

kvv_status kvv_check_patch(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    patch_ctx c = {.o = o, .r = r};
    return kvv_check_frame(o, r, o->n_tokens, body, &c, err);
}

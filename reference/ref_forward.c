/*
 * ref_forward.c — the reference forward pass, in data-flow order:
 *
 *   embedding (gemma: times sqrtf(n_embd))
 *   for each layer l:
 *     [hook residual(l)]
 *     attention inputs: xn = attn_norm(x); q, k, v = projections (+ qwen2
 *       biases); qwen3/gemma3: per-head RMSNorm of q, k; RoPE; K, V rounded
 *       to the cache dtype                       (ref_attn_inputs, shared
 *                                                 with kv_from_residual)
 *     store K, V in the cache                    [hook kv(l)]
 *     attention over the present cache entries   [hook attn(l)] [hook attn_out(l)]
 *     x += (gemma: post_attention_norm) (wo . attn)
 *     x += (gemma: post_ffw_norm) (down(act(gate . ffn_norm(x)) * (up . ffn_norm(x))))
 *   [hook residual(n_layer)]
 *   logits = output . output_norm(x)  (gemma2: final soft-cap)
 *
 * Every token's computation reads only its own row and the cache entries at
 * positions <= its own, and every reduction has a fixed order that depends
 * only on its length (ref_ops.c): one batch, chunks or one token at a time
 * give the same bits.
 */
#include <stdlib.h>
#include <string.h>

#include "reference/ref_internal.h"
#include "runtime/op_taps.h"

/* The op tap (runtime/op_taps.h) of rows x [n][width], when forward has one. */
static void ref_tap(const kvv_ref *r, int layer, int op, int n, const int32_t *pos, int width,
                    const float *x)
{
    if (r->tap && r->tap->op && x)
        r->tap->op(r->tap->user, layer, op, n, pos, width, x);
}

/* ------------------------------------------------------------ attention inputs */

void ref_proj(const kvv_ref *r, float *out, const float *x, const ref_mat *W, const float *bias,
              int n, bool reversed, ref_ggml_scratch *g)
{
    if ((r->opts.ggml & (KVV_GGML_ACT_QUANT | KVV_GGML_KQ_ACT | KVV_GGML_Q40_ACT | KVV_GGML_Q80_ACT)) && g)
        ref_matmul_ggml(out, x, W, bias, n, reversed, r->wrow, g, r->opts.ggml);
    else
        ref_matmul_mat(out, x, W, bias, n, reversed, r->wrow);
}

void ref_attn_inputs(kvv_ref *r, int layer, int n, const float *h, const int32_t *pos,
                     float *xn, float *q, float *k, float *v, bool reversed,
                     ref_ggml_scratch *g)
{
    const kvv_hparams *hp = &r->hp;
    const ref_layer *L = &r->w.layers[layer];
    const int E = hp->n_embd, hd = hp->head_dim;
    const int Q = hp->n_head * hd, K = hp->n_head_kv * hd, V = hp->n_head_kv * hp->head_dim_v;
    const float ts = r->theta_scale[hp->swa_layer[layer] ? 1 : 0];
    float *cs = r->rope_cs;                                 /* (n_rot) cos/sin pairs */

    ref_rmsnorm(xn, h, L->attn_norm, n, E, hp->norm_eps);  /* xn (n, E) */
    ref_tap(r, layer, KVV_TAP_ATTN_NORM, n, pos, E, xn);
    if (q)
        ref_proj(r, q, xn, &L->wq, L->bq, n, reversed, g);  /* q (n, Q) */
    ref_proj(r, k, xn, &L->wk, L->bk, n, reversed, g);      /* k (n, K) */
    ref_proj(r, v, xn, &L->wv, L->bv, n, reversed, g);      /* v (n, V) */
    ref_tap(r, layer, KVV_TAP_Q, n, pos, Q, q);
    ref_tap(r, layer, KVV_TAP_K, n, pos, K, k);
    ref_tap(r, layer, KVV_TAP_V, n, pos, V, v);
    if (hp->has_qk_norm) {                                  /* per head, before RoPE */
        if (q)
            ref_rmsnorm(q, q, L->q_norm, n * hp->n_head, hd, hp->norm_eps);
        ref_rmsnorm(k, k, L->k_norm, n * hp->n_head_kv, hd, hp->norm_eps);
        ref_tap(r, layer, KVV_TAP_Q_NORM, n, pos, Q, q);
        ref_tap(r, layer, KVV_TAP_K_NORM, n, pos, K, k);
    }
    for (int t = 0; t < n; t++) {
        ref_rope_angles(cs, pos[t], hp->n_rot, ts, hp->rope_freqs);
        for (int hh = 0; q && hh < hp->n_head; hh++)
            ref_rope_apply(q + (size_t)t * Q + (size_t)hh * hd, cs, hp->n_rot, hp->rope_type);
        for (int hh = 0; hh < hp->n_head_kv; hh++)
            ref_rope_apply(k + (size_t)t * K + (size_t)hh * hd, cs, hp->n_rot, hp->rope_type);
    }
    ref_tap(r, layer, KVV_TAP_Q_ROPE, n, pos, Q, q);
    ref_tap(r, layer, KVV_TAP_K_ROPE, n, pos, K, k);
    if (r->opts.cache_type != KVV_CACHE_F32) {              /* rounding at store */
        for (size_t i = 0; i < (size_t)n * (size_t)K; i++)
            k[i] = kvv_cache_round(r->opts.cache_type, k[i]);
        for (size_t i = 0; i < (size_t)n * (size_t)V; i++)
            v[i] = kvv_cache_round(r->opts.cache_type, v[i]);
    }
}

/* ------------------------------------------------------------ per-call scratch */

typedef struct {
    float *x;         /* (n, E) residual stream */
    float *xn;        /* (n, E) normalized input of the current block */
    float *q;         /* (n, Q) queries after q norm and RoPE */
    float *k;         /* (n, K) keys of the batch as stored */
    float *v;         /* (n, V) values of the batch as stored */
    float *att;       /* (n, O) attention output, heads concatenated */
    float *proj;      /* (n, E) output of wo or w_down */
    float *gate;      /* (n, F) gate projection, then act(gate) * up */
    float *up;        /* (n, F) up projection */
    float *kc;        /* (n_ctx, K) keys of the positions the batch can see, fp32 */
    float *vc;        /* (n_ctx, V) values of those positions */
    int32_t *key_pos; /* (n_ctx) their positions, ascending */
    float *score;     /* (n_ctx) scores, then probabilities, of one query head */
    int32_t *vis;     /* (n_ctx) index into key_pos of each visible key */
    int32_t *cand_pos;/* (n_ctx) positions of the visible keys, for the select hook */
    uint8_t *keep;    /* (n_ctx) the select hook's verdicts */
    float *qs;        /* (head_dim) a query head multiplied by the query scale */
    float *probs;     /* (n, n_head, n_ctx) for the attn hook, or NULL */
    bool ggml_on;     /* KVV_GGML_ACT_QUANT / KQ_ACT: ggml below is allocated */
    ref_ggml_scratch ggml; /* (n, max(E, F, O)) activation copies for ggml emulation */
    const int32_t *seq;  /* (n) sequence of each row (kvv_ref_decode), or NULL: all are
                          * sequence 0, r->cache (kvv_ref_forward) */
} scratch;

static void scratch_free(scratch *s)
{
    free(s->x);
    free(s->xn);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->att);
    free(s->proj);
    free(s->gate);
    free(s->up);
    free(s->kc);
    free(s->vc);
    free(s->key_pos);
    free(s->score);
    free(s->vis);
    free(s->cand_pos);
    free(s->keep);
    free(s->qs);
    free(s->probs);
    ref_ggml_scratch_free(&s->ggml);
}

static float *falloc(size_t count)
{
    return malloc((count ? count : 1) * sizeof(float));
}

/* n_keys: positions 0..max_pos the batch could see. */
static int max3(int a, int b, int c)
{
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

static bool scratch_alloc(scratch *s, const kvv_hparams *hp, int n, int n_keys, bool probs,
                          bool ggml)
{
    const size_t N = (size_t)n, E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    const size_t Q = (size_t)hp->n_head * (size_t)hp->head_dim;
    const size_t K = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    const size_t V = (size_t)hp->n_head_kv * (size_t)hp->head_dim_v;
    const size_t O = (size_t)hp->n_head * (size_t)hp->head_dim_v;
    const size_t NK = (size_t)n_keys;
    memset(s, 0, sizeof *s);
    s->x = falloc(N * E);
    s->xn = falloc(N * E);
    s->q = falloc(N * Q);
    s->k = falloc(N * K);
    s->v = falloc(N * V);
    s->att = falloc(N * O);
    s->proj = falloc(N * E);
    s->gate = falloc(N * F);
    s->up = falloc(N * F);
    s->kc = falloc(NK * K);
    s->vc = falloc(NK * V);
    s->key_pos = malloc(NK * sizeof(int32_t));
    s->score = falloc(NK);
    s->vis = malloc(NK * sizeof(int32_t));
    s->cand_pos = malloc(NK * sizeof(int32_t));
    s->keep = malloc(NK ? NK : 1);
    s->qs = falloc((size_t)hp->head_dim);
    if (probs && !(s->probs = falloc(N * (size_t)hp->n_head * NK)))
        return false;
    s->ggml_on = ggml;
    if (ggml && !ref_ggml_scratch_alloc(&s->ggml, n, max3(hp->n_embd, hp->n_ff,
                                                          hp->n_head * hp->head_dim_v)))
        return false;
    return s->x && s->xn && s->q && s->k && s->v && s->att && s->proj && s->gate && s->up &&
           s->kc && s->vc && s->key_pos && s->score && s->vis && s->cand_pos && s->keep && s->qs;
}

/* ------------------------------------------------------------ attention */

/* Scores are q.k * query_scale, except that gemma2, gemma3 and phi3 multiply
 * q by the scale before the dot product (as llama.cpp's graphs do); gemma2
 * then soft-caps them. Query t (position p) sees key position j of KV head g
 * iff j <= p, (j, g) is present in the cache, and, on sliding-window layers,
 * p - j < n_swa; a select hook may then drop some of them for this query
 * head. Softmax over the visible keys; the output sums p_j * v_j in
 * ascending j, per dimension, starting from +0. */
static void attention(kvv_ref *r, const kvv_kv_cache *c, int l, int t0, int n,
                      const int32_t *pos, const kvv_hooks *hooks, scratch *s)
{
    const kvv_hparams *hp = &r->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v;
    const int Q = hp->n_head * hd, K = hp->n_head_kv * hd, V = hp->n_head_kv * hdv;
    const int O = hp->n_head * hdv;
    const int group = hp->n_head / hp->n_head_kv;
    const bool prescale = hp->arch == KVV_ARCH_GEMMA2 || hp->arch == KVV_ARCH_GEMMA3 ||
                          hp->arch == KVV_ARCH_PHI3;
    const bool swa = hp->swa_layer[l] && hp->n_swa > 0;

    /* The keys the batch can see: present positions 0..max(pos), ascending. */
    int max_pos = 0;
    for (int t = t0; t < t0 + n; t++)
        if (pos[t] > max_pos)
            max_pos = pos[t];
    int n_keys = 0;
    for (int j = 0; j <= max_pos; j++) {
        bool any = false;
        for (int g = 0; g < hp->n_head_kv && !any; g++)
            any = kvv_kv_cache_present(c, l, j, g);
        if (!any)
            continue;
        s->key_pos[n_keys] = j;
        kvv_kv_cache_load_k(c, l, j, s->kc + (size_t)n_keys * K);
        kvv_kv_cache_load_v(c, l, j, s->vc + (size_t)n_keys * V);
        n_keys++;
    }
    float *probs = hooks && hooks->attn ? s->probs : NULL; /* (n, n_head, n_keys) */
    if (probs)
        memset(probs, 0, (size_t)n * (size_t)hp->n_head * (size_t)n_keys * sizeof(float));

    for (int t = t0; t < t0 + n; t++) {
        const int p = pos[t];
        for (int h = 0; h < hp->n_head; h++) {
            const int g = h / group;                       /* GQA: kv head of q head h */
            const float *qh = s->q + (size_t)t * Q + (size_t)h * hd;   /* (hd) */
            if (prescale) {
                for (int d = 0; d < hd; d++)
                    s->qs[d] = qh[d] * hp->query_scale;
                qh = s->qs;
            }
            /* visible keys: present, causal, inside the window */
            int nv = 0;
            for (int jj = 0; jj < n_keys; jj++) {
                const int j = s->key_pos[jj];
                if (j > p || (swa && p - j >= hp->n_swa) || !kvv_kv_cache_present(c, l, j, g))
                    continue;
                s->vis[nv++] = jj;
            }
            if (hooks && hooks->select && nv > 0) {
                /* a policy may exclude keys from this query's softmax */
                for (int i = 0; i < nv; i++) {
                    s->cand_pos[i] = s->key_pos[s->vis[i]];
                    s->keep[i] = 1;
                }
                hooks->select(hooks->user, l, p, h, s->q + (size_t)t * Q + (size_t)h * hd, nv,
                              s->cand_pos, s->keep);
                int kept = 0;
                for (int i = 0; i < nv; i++)
                    if (s->keep[i])
                        s->vis[kept++] = s->vis[i];
                nv = kept;
            }
            for (int i = 0; i < nv; i++) {
                const int jj = s->vis[i];
                float sc = ref_dot(qh, s->kc + (size_t)jj * K + (size_t)g * hd, hd);
                if (!prescale)
                    sc = sc * hp->query_scale;
                if (hp->attn_softcap > 0.0f)
                    sc = ref_softcap(sc, hp->attn_softcap);
                s->score[i] = sc;
            }
            ref_softmax(s->score, nv);
            float *o = s->att + (size_t)t * O + (size_t)h * hdv;        /* (hdv) */
            for (int d = 0; d < hdv; d++)
                o[d] = 0.0f;
            for (int i = 0; i < nv; i++) {
                const float pj = s->score[i];
                const float *vj = s->vc + (size_t)s->vis[i] * V + (size_t)g * hdv;
                for (int d = 0; d < hdv; d++)
                    o[d] = o[d] + pj * vj[d];
            }
            if (probs) {
                float *row = probs + ((size_t)(t - t0) * hp->n_head + (size_t)h) * (size_t)n_keys;
                for (int i = 0; i < nv; i++)
                    row[s->vis[i]] = s->score[i];
            }
        }
    }
    if (probs)
        hooks->attn(hooks->user, l, n, pos + t0, n_keys, s->key_pos, probs);
}

/* The cache row t's K/V go to: its sequence's (kvv_ref_decode has
 * allocated it), or r->cache. */
static kvv_kv_cache *row_cache(kvv_ref *r, const scratch *s, int t)
{
    return s->seq ? r->seqs.c[s->seq[t]] : r->cache;
}

/* Attention of each run of consecutive rows of one sequence against that
 * sequence's cache (one run, r->cache, in a forward). Every row's keys are
 * its own sequence's, so no row sees another request's tokens. */
static void attention_runs(kvv_ref *r, int l, int n, const int32_t *pos,
                           const kvv_hooks *hooks, scratch *s)
{
    for (int t0 = 0, t1; t0 < n; t0 = t1) {
        t1 = t0 + 1;
        while (s->seq && t1 < n && s->seq[t1] == s->seq[t0])
            t1++;
        if (!s->seq)
            t1 = n;
        attention(r, row_cache(r, s, t0), l, t0, t1 - t0, pos, hooks, s);
    }
}

/* ------------------------------------------------------------ blocks */

static void add_rows(float *x, const float *y, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = x[i] + y[i];
}

static void layer_forward(kvv_ref *r, int l, int n, const int32_t *pos, const kvv_hooks *hooks,
                          scratch *s)
{
    const kvv_hparams *hp = &r->hp;
    const ref_layer *L = &r->w.layers[l];
    ref_ggml_scratch *gs = s->ggml_on ? &s->ggml : NULL;
    const int E = hp->n_embd, F = hp->n_ff;
    const int K = hp->n_head_kv * hp->head_dim, V = hp->n_head_kv * hp->head_dim_v;
    const size_t NE = (size_t)n * (size_t)E;

    if (hooks && hooks->residual)
        hooks->residual(hooks->user, l, n, pos, s->x);

    /* attention block */
    ref_attn_inputs(r, l, n, s->x, pos, s->xn, s->q, s->k, s->v, false, gs);
    for (int t = 0; t < n; t++)
        kvv_kv_cache_store(row_cache(r, s, t), l, pos[t], s->k + (size_t)t * K,
                           s->v + (size_t)t * V);
    if (hooks && hooks->kv)
        hooks->kv(hooks->user, l, n, pos, s->k, s->v);
    attention_runs(r, l, n, pos, hooks, s);
    if (hooks && hooks->attn_out)
        hooks->attn_out(hooks->user, l, n, pos, s->att);
    ref_tap(r, l, KVV_TAP_ATTN_OUT, n, pos, hp->n_head * hp->head_dim_v, s->att);
    ref_proj(r, s->proj, s->att, &L->wo, NULL, n, false, gs);  /* proj (n, E) */
    ref_tap(r, l, KVV_TAP_WO, n, pos, E, s->proj);
    if (L->post_attn_norm) {
        ref_rmsnorm(s->proj, s->proj, L->post_attn_norm, n, E, hp->norm_eps);
        ref_tap(r, l, KVV_TAP_POST_ATTN_NORM, n, pos, E, s->proj);
    }
    add_rows(s->x, s->proj, NE);
    ref_tap(r, l, KVV_TAP_ATTN_RESID, n, pos, E, s->x);

    /* feed-forward block */
    ref_rmsnorm(s->xn, s->x, L->ffn_norm, n, E, hp->norm_eps);
    ref_tap(r, l, KVV_TAP_FFN_NORM, n, pos, E, s->xn);
    ref_proj(r, s->gate, s->xn, &L->w_gate, NULL, n, false, gs); /* gate (n, F) */
    ref_proj(r, s->up, s->xn, &L->w_up, NULL, n, false, gs);     /* up (n, F) */
    ref_tap(r, l, KVV_TAP_GATE, n, pos, F, s->gate);
    ref_tap(r, l, KVV_TAP_UP, n, pos, F, s->up);
    const bool gelu16 = (r->opts.ggml & KVV_GGML_GELU_FP16) != 0;
    for (size_t i = 0; i < (size_t)n * (size_t)F; i++) {
        const float a = hp->act == KVV_ACT_SILU ? ref_silu(s->gate[i])
                        : gelu16                ? ref_gelu_ggml(s->gate[i])
                                                : ref_gelu_tanh(s->gate[i]);
        s->gate[i] = a * s->up[i];
    }
    ref_tap(r, l, KVV_TAP_ACT, n, pos, F, s->gate);
    ref_proj(r, s->proj, s->gate, &L->w_down, NULL, n, false, gs); /* proj (n, E) */
    ref_tap(r, l, KVV_TAP_DOWN, n, pos, E, s->proj);
    if (L->post_ffw_norm) {
        ref_rmsnorm(s->proj, s->proj, L->post_ffw_norm, n, E, hp->norm_eps);
        ref_tap(r, l, KVV_TAP_POST_FFW_NORM, n, pos, E, s->proj);
    }
    add_rows(s->x, s->proj, NE);
    ref_tap(r, l, KVV_TAP_FFN_RESID, n, pos, E, s->x);
}

/* ------------------------------------------------------------ forward */

static kvv_status check_positions(const kvv_ref *r, int n, const int32_t *pos, const char *what,
                                  kvv_error *err)
{
    for (int t = 0; t < n; t++)
        if (pos[t] < 0 || pos[t] >= r->opts.n_ctx)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "%s: position %d (batch row %d) is outside the cache 0..%d", what,
                                 (int)pos[t], t, r->opts.n_ctx - 1);
    return KVV_OK;
}

/* The pass both kvv_ref_forward and kvv_ref_decode run: seq NULL (every
 * row sequence 0, r->cache) with logits as lm says, or seq (the rows'
 * sequences, their caches allocated) with logits for the rows want flags.
 * Arguments checked by the caller. */
static kvv_status run(kvv_ref *r, int n, const int32_t *tokens, const int32_t *pos,
                      const int32_t *seq, const kvv_hooks *hooks, kvv_logits_mode lm,
                      const uint8_t *want, float *logits, kvv_error *err)
{
    const kvv_hparams *hp = &r->hp;
    int max_pos = 0;
    for (int t = 0; t < n; t++)
        if (pos[t] > max_pos)
            max_pos = pos[t];

    scratch s;
    if (!scratch_alloc(&s, hp, n, max_pos + 1, hooks && hooks->attn,
                       (r->opts.ggml & (KVV_GGML_ACT_QUANT | KVV_GGML_KQ_ACT | KVV_GGML_Q40_ACT | KVV_GGML_Q80_ACT)) != 0)) {
        scratch_free(&s);
        return kvv_error_set(err, KVV_ERR_NOMEM, "forward: out of memory for a %d-token batch", n);
    }
    s.seq = seq;
    const int E = hp->n_embd;

    /* embedding: x[t] = tok_embd[token] (gemma: * sqrtf(n_embd)) */
    for (int t = 0; t < n; t++) {
        const float *e = ref_mat_row(&r->w.tok_embd, tokens[t], r->wrow);  /* (E) */
        float *xt = s.x + (size_t)t * (size_t)E;
        for (int i = 0; i < E; i++)
            xt[i] = hp->embd_scale != 1.0f ? e[i] * hp->embd_scale : e[i];
    }

    r->tap = hooks && hooks->op ? hooks : NULL;
    for (int l = 0; l < hp->n_layer; l++)
        layer_forward(r, l, n, pos, hooks, &s);

    if (hooks && hooks->residual)
        hooks->residual(hooks->user, hp->n_layer, n, pos, s.x);

    /* output: logits rows for the requested tokens, normed into xn */
    int rows = 0;
    const int32_t *row_pos = NULL; /* the rows' positions for the taps; a decode
                                      call's picked rows are not tapped */
    if (want) {
        for (int t = 0; t < n; t++)
            if (want[t])
                ref_rmsnorm(s.xn + (size_t)rows++ * (size_t)E, s.x + (size_t)t * (size_t)E,
                            r->w.output_norm, 1, E, hp->norm_eps);
    } else if (lm != KVV_LOGITS_NONE) {
        const int first = lm == KVV_LOGITS_LAST ? n - 1 : 0;
        rows = n - first;
        row_pos = pos + first;
        ref_rmsnorm(s.xn, s.x + (size_t)first * (size_t)E, r->w.output_norm, rows, E,
                    hp->norm_eps);
    }
    if (rows > 0) {
        if (row_pos)
            ref_tap(r, hp->n_layer, KVV_TAP_OUT_NORM, rows, row_pos, E, s.xn);
        /* logits (rows, n_vocab); KVV_GGML_Q40/Q80_ACT are the layers' only (runtime.h) */
        if (s.ggml_on)
            ref_matmul_ggml(logits, s.xn, &r->w.output, NULL, rows, false, r->wrow, &s.ggml,
                            r->opts.ggml & ~(unsigned)(KVV_GGML_Q40_ACT | KVV_GGML_Q80_ACT));
        else
            ref_proj(r, logits, s.xn, &r->w.output, NULL, rows, false, NULL);
        if (row_pos)
            ref_tap(r, hp->n_layer, KVV_TAP_HEAD, rows, row_pos, hp->n_vocab, logits);
        if (hp->final_softcap > 0.0f)
            for (size_t i = 0; i < (size_t)rows * (size_t)hp->n_vocab; i++)
                logits[i] = ref_softcap(logits[i], hp->final_softcap);
    }
    r->tap = NULL;
    scratch_free(&s);
    return KVV_OK;
}

static kvv_status check_tokens(const kvv_ref *r, int n, const int32_t *tokens, const char *what,
                               kvv_error *err)
{
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= r->hp.n_vocab)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "%s: token id %d (batch row %d) is outside the vocabulary "
                                 "0..%d",
                                 what, (int)tokens[t], t, r->hp.n_vocab - 1);
    return KVV_OK;
}

kvv_status kvv_ref_forward(kvv_ref *r, int n, const int32_t *tokens, const int32_t *pos,
                           const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                           kvv_error *err)
{
    if (!r || n <= 0 || !tokens || !pos)
        return kvv_error_set(err, KVV_ERR_USAGE, "forward: empty batch or missing arrays");
    if (lm != KVV_LOGITS_NONE && !logits)
        return kvv_error_set(err, KVV_ERR_USAGE, "forward: logits requested into a NULL buffer");
    kvv_status st = check_tokens(r, n, tokens, "forward", err);
    if (!st)
        st = check_positions(r, n, pos, "forward", err);
    return st ? st : run(r, n, tokens, pos, NULL, hooks, lm, NULL, logits, err);
}

kvv_status kvv_ref_decode(kvv_ref *r, int n, const int32_t *tokens, const int32_t *pos,
                          const int32_t *seq, const uint8_t *want, float *logits, kvv_error *err)
{
    if (!r || n <= 0 || !tokens || !pos || !seq)
        return kvv_error_set(err, KVV_ERR_USAGE, "decode: empty batch or missing arrays");
    bool any = false;
    for (int t = 0; t < n && want; t++)
        any |= want[t] != 0;
    if (any && !logits)
        return kvv_error_set(err, KVV_ERR_USAGE, "decode: logits requested into a NULL buffer");
    kvv_status st = check_tokens(r, n, tokens, "decode", err);
    if (!st)
        st = check_positions(r, n, pos, "decode", err);
    if (!st)
        st = kvv_kv_seqs_check(&r->seqs, n, pos, seq, "decode", err);
    return st ? st : run(r, n, tokens, pos, seq, NULL, KVV_LOGITS_NONE, any ? want : NULL,
                         logits, err);
}

/* ------------------------------------------------------------ K/V from residuals */

kvv_status kvv_ref_kv_from_residual(kvv_ref *r, int layer, int n, const float *h,
                                    const int32_t *pos, float *k, float *v, kvv_error *err)
{
    if (!r || n <= 0 || !h || !pos || !k || !v)
        return kvv_error_set(err, KVV_ERR_USAGE, "kv_from_residual: empty batch or missing arrays");
    if (layer < 0 || layer >= r->hp.n_layer)
        return kvv_error_set(err, KVV_ERR_USAGE, "kv_from_residual: layer %d is outside 0..%d",
                             layer, r->hp.n_layer - 1);
    kvv_status st = check_positions(r, n, pos, "kv_from_residual", err);
    if (st)
        return st;
    float *xn = falloc((size_t)n * (size_t)r->hp.n_embd);    /* (n, E) */
    ref_ggml_scratch g;
    memset(&g, 0, sizeof g);
    const bool ggml = (r->opts.ggml & (KVV_GGML_ACT_QUANT | KVV_GGML_KQ_ACT | KVV_GGML_Q40_ACT | KVV_GGML_Q80_ACT)) != 0;
    if (!xn || (ggml && !ref_ggml_scratch_alloc(&g, n, r->hp.n_embd))) {
        free(xn);
        ref_ggml_scratch_free(&g);
        return kvv_error_set(err, KVV_ERR_NOMEM, "kv_from_residual: out of memory");
    }
    ref_attn_inputs(r, layer, n, h, pos, xn, NULL, k, v,
                    (r->opts.control & KVV_CTL_KV_REVERSED_SUM) != 0, ggml ? &g : NULL);
    free(xn);
    ref_ggml_scratch_free(&g);
    return KVV_OK;
}

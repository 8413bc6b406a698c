/*
 * plugin_engine.c — a plugin behind the engine vtable (engine/engine.h):
 * opening (parameters, the plugin's reading of the model checked against
 * kvverify's, capabilities against slots, controls the host must plant),
 * and forward / kv_from_residual / cache / describe / caps / close with the
 * capability checks of plugin.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/breadcrumb.h"
#include "engine/engine_impl.h"
#include "engine/hook_relay.h"
#include "engine/plugin/plugin_impl.h"

/* The engine's capability bits are the ABI's, bit for bit. */
_Static_assert((unsigned)KVV_ENGINE_CAP_LOGITS_ALL == (unsigned)KVV_PLUGIN_CAP_LOGITS_ALL &&
                   (unsigned)KVV_ENGINE_CAP_RESIDUAL_READ == (unsigned)KVV_PLUGIN_CAP_RESIDUAL_READ &&
                   (unsigned)KVV_ENGINE_CAP_RESIDUAL_WRITE == (unsigned)KVV_PLUGIN_CAP_RESIDUAL_WRITE &&
                   (unsigned)KVV_ENGINE_CAP_KV_HOOK == (unsigned)KVV_PLUGIN_CAP_KV_HOOK &&
                   (unsigned)KVV_ENGINE_CAP_KV_READ == (unsigned)KVV_PLUGIN_CAP_KV_READ &&
                   (unsigned)KVV_ENGINE_CAP_KV_FROM_RESIDUAL == (unsigned)KVV_PLUGIN_CAP_KV_FROM_RESIDUAL &&
                   (unsigned)KVV_ENGINE_CAP_ATTN == (unsigned)KVV_PLUGIN_CAP_ATTN &&
                   (unsigned)KVV_ENGINE_CAP_ATTN_OUT == (unsigned)KVV_PLUGIN_CAP_ATTN_OUT &&
                   (unsigned)KVV_ENGINE_CAP_SELECT == (unsigned)KVV_PLUGIN_CAP_SELECT &&
                   (unsigned)KVV_ENGINE_CAP_KV_EVICT == (unsigned)KVV_PLUGIN_CAP_KV_EVICT &&
                   (unsigned)KVV_ENGINE_CAP_KV_EVICT_HEAD == (unsigned)KVV_PLUGIN_CAP_KV_EVICT_HEAD &&
                   (unsigned)KVV_ENGINE_CAP_KV_WRITE == (unsigned)KVV_PLUGIN_CAP_KV_WRITE &&
                   (unsigned)KVV_ENGINE_CAP_THREADS == (unsigned)KVV_PLUGIN_CAP_THREADS &&
                   (unsigned)KVV_ENGINE_CAP_UBATCH == (unsigned)KVV_PLUGIN_CAP_UBATCH &&
                   (unsigned)KVV_ENGINE_CAP_OVERWRITE == (unsigned)KVV_PLUGIN_CAP_OVERWRITE &&
                   (unsigned)KVV_ENGINE_CAP_SEQS == (unsigned)KVV_PLUGIN_CAP_SEQS,
               "engine capability bits must equal the plugin ABI's");
_Static_assert((int)KVV_CACHE_F32 == KVV_PLUGIN_DTYPE_F32 &&
                   (int)KVV_CACHE_F16 == KVV_PLUGIN_DTYPE_F16 &&
                   (int)KVV_CACHE_BF16 == KVV_PLUGIN_DTYPE_BF16 &&
                   (int)KVV_LOGITS_ALL == KVV_PLUGIN_LOGITS_ALL &&
                   (int)KVV_LOGITS_LAST == KVV_PLUGIN_LOGITS_LAST,
               "cache dtypes and logits modes must equal the plugin ABI's");

static kvv_plugin_state *ps_of(kvv_engine *e)
{
    return (kvv_plugin_state *)e->impl;
}

static void state_free(kvv_plugin_state *ps)
{
    if (!ps)
        return;
    if (ps->pe) {
        kvv_breadcrumb_enter(KVV_CRUMB_CLOSE);
        ps->lib.t.close(ps->pe);
    }
    kvv_plugin_lib_close(&ps->lib);
    kvv_kv_cache_free(ps->mirror);
    kvv_kv_cache_free(ps->shadow);
    free(ps->scratch);
    kvv_plugin_stage_free(&ps->st_logits);
    kvv_plugin_stage_free(&ps->st_k);
    kvv_plugin_stage_free(&ps->st_v);
    kvv_plugin_stage_free(&ps->st_present);
    free(ps);
}

static void p_close(kvv_engine *e)
{
    state_free(ps_of(e));
    free(e);
}

/* ------------------------------------------------------------ forward */

static kvv_status need(kvv_engine *e, unsigned cap, const char *what, kvv_error *err)
{
    return kvv_engine_require(e, cap, what, err);
}

/* Every hook and logits mode asked for must be a declared capability. */
static kvv_status check_call(kvv_engine *e, const kvv_hooks *h, kvv_logits_mode lm,
                             kvv_error *err)
{
    kvv_status s = KVV_OK;
    if (lm == KVV_LOGITS_ALL)
        s = need(e, KVV_ENGINE_CAP_LOGITS_ALL, "logits for every position", err);
    if (!s && h && h->residual)
        s = need(e, KVV_ENGINE_CAP_RESIDUAL_READ, "the residual hook", err);
    if (!s && h && h->kv)
        s = need(e, KVV_ENGINE_CAP_KV_HOOK, "the kv hook", err);
    if (!s && h && h->attn)
        s = need(e, KVV_ENGINE_CAP_ATTN, "the attention hook", err);
    if (!s && h && h->attn_out)
        s = need(e, KVV_ENGINE_CAP_ATTN_OUT, "the attention-output hook", err);
    if (!s && h && h->select)
        s = need(e, KVV_ENGINE_CAP_SELECT, "the key-selection hook", err);
    if (!s && h && h->op)
        s = need(e, KVV_ENGINE_CAP_OP_TAPS, "op taps", err);
    return s;
}

static kvv_status check_positions(kvv_engine *e, int n, const int32_t *pos, kvv_error *err)
{
    if (n <= 0 || n > e->opts.n_ctx || !pos)
        return kvv_error_set(err, KVV_ERR_USAGE, "forward: %d tokens (1..%d)", n,
                             e->opts.n_ctx);
    for (int i = 0; i < n; i++) {
        if (pos[i] < 0 || pos[i] >= e->opts.n_ctx)
            return kvv_error_set(err, KVV_ERR_USAGE, "forward: position %d outside 0..%d",
                                 pos[i], e->opts.n_ctx - 1);
        if (i > 0 && pos[i] <= pos[i - 1])
            return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                                 "engine %s takes strictly increasing positions (got %d after "
                                 "%d)",
                                 ps_of(e)->name, pos[i], pos[i - 1]);
    }
    return KVV_OK;
}

static int cached(const kvv_kv_cache *c, int p)
{
    if (p >= c->n_pos)
        return 0;
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_kv_head; h++)
            if (kvv_kv_cache_present(c, l, p, h))
                return 1;
    return 0;
}

/* Without CAP_OVERWRITE, cached positions the call recomputes are removed
 * first — only when no other cached position after pos[0] would be lost. */
static kvv_status make_room(kvv_engine *e, int n, const int32_t *pos, kvv_error *err)
{
    kvv_plugin_state *ps = ps_of(e);
    const kvv_kv_cache *m = ps->mirror;
    if (!m || (ps->info.caps & KVV_PLUGIN_CAP_OVERWRITE) || pos[0] >= m->n_pos)
        return KVV_OK;
    int j = 0, any = 0;
    for (int p = pos[0]; p < m->n_pos; p++) {
        if (!cached(m, p))
            continue;
        while (j < n && pos[j] < p)
            j++;
        if (j == n || pos[j] != p)
            return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                                 "engine %s cannot run positions from %d while it holds position "
                                 "%d: without the overwrite capability it takes positions after "
                                 "its cached ones only (evicting the later ones would lose them)",
                                 ps->engine_name, pos[0], p);
        any = 1;
    }
    for (int p = m->n_pos - 1; any && p >= pos[0]; p--)
        if (cached(m, p)) {
            kvv_status s = kvv_plugin_mirror_evict(ps, p, err);
            if (s)
                return s;
        }
    return KVV_OK;
}

/* Residual step for a plugin without RESIDUAL_WRITE: the caller's hook must
 * hand h back unchanged; a change is remembered and undone. */
static void guard_residual(kvv_hook_relay *r, int layer, int n, const int32_t *pos, float *h)
{
    kvv_plugin_state *ps = r->ctx;
    size_t bytes = (size_t)n * (size_t)ps->info.n_embd * sizeof(float);
    memcpy(ps->scratch, h, bytes);
    kvv_hook_relay_inner_residual(r, layer, n, pos, h);
    if (memcmp(ps->scratch, h, bytes) != 0) {
        if (ps->violated_layer < 0)
            ps->violated_layer = layer;
        memcpy(h, ps->scratch, bytes);
    }
}

/* A reset of an engine without a mirror: the plugin empties its cache now. */
kvv_status kvv_plugin_clear_pending(kvv_plugin_state *ps, kvv_error *err)
{
    if (!ps->clear_pending)
        return KVV_OK;
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    int code = ps->lib.t.kv_clear(ps->pe, &perr);
    if (code)
        return kvv_plugin_fail(ps, code, "kv_clear", &perr, err);
    ps->clear_pending = 0;
    return KVV_OK;
}

static kvv_status p_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                            const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                            kvv_error *err)
{
    kvv_plugin_state *ps = ps_of(e);
    kvv_status s = check_positions(e, n, pos, err);
    /* The ABI promises the plugin a logits buffer for LAST and ALL: refuse
     * a NULL one here, as the reference engine does, instead of handing the
     * plugin NULL to write (found by tests/fuzz/fuzz_plugin.c). */
    if (!s && lm != KVV_LOGITS_NONE && !logits)
        s = kvv_error_set(err, KVV_ERR_USAGE, "forward: logits NULL with a mode that writes them");
    if (!s)
        s = check_call(e, hooks, lm, err);
    if (!s)
        s = kvv_plugin_clear_pending(ps, err);
    if (!s)
        s = kvv_plugin_mirror_push(ps, err);
    if (!s)
        s = make_room(e, n, pos, err);
    if (s)
        return s;
    kvv_hook_relay relay = {hooks, guard_residual, ps};
    kvv_hooks guarded;
    if (hooks && hooks->residual && !(ps->info.caps & KVV_PLUGIN_CAP_RESIDUAL_WRITE)) {
        guarded = kvv_hook_relay_hooks(&relay);
        hooks = &guarded;
    }
    kvv_plugin_hooks ph;
    memset(&ph, 0, sizeof ph);
    if (hooks) {
        ph.struct_size = sizeof ph;
        ph.user = hooks->user;
        ph.residual = hooks->residual;
        ph.kv = hooks->kv;
        ph.attn = hooks->attn;
        ph.attn_out = hooks->attn_out;
        ph.select = hooks->select;
        kvv_plugin_ops_hooks(ps, hooks, &ph);
    }
    ps->violated_layer = -1;
    /* logits through a stage (plugin_guard.c): the plugin never writes ours */
    size_t V = (size_t)ps->info.n_vocab;
    size_t n_out = lm == KVV_LOGITS_ALL ? (size_t)n * V : lm == KVV_LOGITS_LAST ? V : 0;
    void *stage = NULL;
    if (n_out && (s = kvv_plugin_stage_begin(ps, &ps->st_logits, n_out * sizeof(float), "forward",
                                             "logits", &stage, err)))
        return s;
    kvv_plugin_crumb crumb;
    kvv_breadcrumb_enter(KVV_CRUMB_FORWARD); /* after the mirror's edits */
    kvv_breadcrumb_positions(pos[0], pos[n - 1]);
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    /* Under LOGITS_NONE the plugin gets NULL, never the caller's buffer: a
     * plugin writing logits it was not asked for would otherwise write the
     * caller's memory unguarded (found by tests/fuzz/fuzz_plugin.c). */
    const kvv_plugin_hooks *relayed =
        kvv_plugin_crumb_hooks(&crumb, hooks ? &ph : NULL, ps, e->opts.n_ctx, n, pos);
    kvv_plugin_ops_relay(&crumb, hooks ? &ph : NULL, ps, &e->model->hp);
    int code = ps->lib.t.forward(ps->pe, n, tokens, pos, relayed, (int)lm, n_out ? stage : NULL,
                                 &perr);
    kvv_status sg = n_out ? kvv_plugin_stage_end(ps, &ps->st_logits, KVV_STAGE_FLOATS, code == 0,
                                                 V, logits, err)
                          : KVV_OK;
    if (sg)
        s = sg;
    else if (crumb.bad[0])
        s = kvv_error_set(err, KVV_ERR_ENGINE, "%s", crumb.bad);
    else if (code)
        s = kvv_plugin_fail(ps, code, "forward", &perr, err);
    else if (ps->violated_layer >= 0)
        s = kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                          "engine %s does not offer residual-write (needed by patching): the "
                          "residual hook changed layer %d",
                          ps->engine_name, ps->violated_layer);
    /* Read back what the call stored even after a failure, so the mirror
     * stays the plugin's cache. */
    kvv_status s2 = kvv_plugin_mirror_pull(ps, n, pos, err);
    return s ? s : s2;
}

/* ------------------------------------------------------------ the rest */

static kvv_status p_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                     const int32_t *pos, float *k, float *v, kvv_error *err)
{
    kvv_plugin_state *ps = ps_of(e);
    kvv_status s = need(e, KVV_ENGINE_CAP_KV_FROM_RESIDUAL, "recomputing K/V from residuals",
                        err);
    if (s)
        return s;
    if (layer < 0 || layer >= ps->info.n_layer || n <= 0 || n > e->opts.n_ctx)
        return kvv_error_set(err, KVV_ERR_USAGE, "kv_from_residual: layer %d or n %d out of range",
                             layer, n);
    size_t kn = (size_t)n * (size_t)ps->info.n_head_kv * (size_t)ps->info.head_dim;
    size_t vn = (size_t)n * (size_t)ps->info.n_head_kv * (size_t)ps->info.head_dim_v;
    void *sk, *sv;
    if ((s = kvv_plugin_stage_begin(ps, &ps->st_k, kn * sizeof(float), "kv_from_residual", "k",
                                    &sk, err)) ||
        (s = kvv_plugin_stage_begin(ps, &ps->st_v, vn * sizeof(float), "kv_from_residual", "v",
                                    &sv, err)))
        return s;
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    int code = ps->lib.t.kv_from_residual(ps->pe, layer, n, h, pos, sk, sv, &perr);
    size_t kr = kn / (size_t)n, vr = vn / (size_t)n;
    kvv_status sg = kvv_plugin_stage_end(ps, &ps->st_k, KVV_STAGE_FLOATS, code == 0, kr, k, err);
    kvv_status sg2 = kvv_plugin_stage_end(ps, &ps->st_v, KVV_STAGE_FLOATS, code == 0 && !sg, vr,
                                          v, sg ? NULL : err);
    if (sg || sg2)
        return sg ? sg : sg2;
    return code ? kvv_plugin_fail(ps, code, "kv_from_residual", &perr, err) : KVV_OK;
}

static kvv_kv_cache *p_cache(kvv_engine *e)
{
    return ps_of(e)->mirror;
}

/* A plugin's threads are its own: kvverify cannot tell them from others. */
static double p_worker_cpu_seconds(kvv_engine *e)
{
    (void)e;
    return -1;
}

static unsigned p_caps(kvv_engine *e)
{
    /* the 1.0 bits as declared; sequences only as plugin_seqs.c found them,
     * op taps as plugin_ops.c did */
    kvv_plugin_state *ps = ps_of(e);
    return (unsigned)(ps->info.caps & KVV_ENGINE_CAP_ALL) | (ps->seqs ? KVV_ENGINE_CAP_SEQS : 0u) |
           kvv_plugin_ops_caps(ps);
}

/* With a mirror the next forward's push sees it empty and clears the
 * plugin; without one the plugin is told directly, before that forward. */
static void p_reset(kvv_engine *e)
{
    kvv_plugin_state *ps = ps_of(e);
    if (ps->mirror)
        kvv_kv_cache_clear(ps->mirror);
    else
        ps->clear_pending = 1;
}

static void p_describe(kvv_engine *e, kvv_engine_desc *d)
{
    kvv_plugin_state *ps = ps_of(e);
    kvv_plugin_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.struct_size = sizeof pd;
    if (ps->lib.t.describe)
        ps->lib.t.describe(ps->pe, &pd);
    /* the plugin's strings may lack their NUL */
    pd.mode[sizeof pd.mode - 1] = pd.version[sizeof pd.version - 1] = '\0';
    pd.device[sizeof pd.device - 1] = pd.variant[sizeof pd.variant - 1] = '\0';
    pd.flash_attn[sizeof pd.flash_attn - 1] = pd.kernels[sizeof pd.kernels - 1] = '\0';
    if (!pd.version[0])
        snprintf(pd.version, sizeof pd.version, "%s %s", ps->lib.t.name,
                 ps->lib.t.version ? ps->lib.t.version : "");
    snprintf(d->name, sizeof d->name, "%s", ps->name);
    snprintf(d->mode, sizeof d->mode, "%s", pd.mode[0] ? pd.mode : "native");
    snprintf(d->cache_type, sizeof d->cache_type, "%s",
             kvv_cache_type_name((kvv_cache_type)ps->info.cache_type));
    d->n_threads = ps->info.n_threads;
    d->n_ubatch = ps->info.n_ubatch;
    snprintf(d->version, sizeof d->version, "%s", pd.version);
    snprintf(d->device, sizeof d->device, "%s", pd.device);
    snprintf(d->variant, sizeof d->variant, "%s", pd.variant);
    snprintf(d->flash_attn, sizeof d->flash_attn, "%s", pd.flash_attn);
    snprintf(d->kernels, sizeof d->kernels, "%s", pd.kernels);
    d->kv_unified = ps->kv_unified;
}

#define PLUGIN_VTABLE_SLOTS                                                            \
    .close = p_close, .forward = p_forward, .kv_from_residual = p_kv_from_residual,   \
    .cache = p_cache, .describe = p_describe, .caps = p_caps,                        \
    .worker_cpu_seconds = p_worker_cpu_seconds, .reset = p_reset, .serial = true

static const kvv_engine_vtable plugin_vtable = {PLUGIN_VTABLE_SLOTS};

/* A plugin with sequences (plugin_seqs.c); without them the wrappers'
 * defaults serve sequence 0 through forward and the mirror. */
static const kvv_engine_vtable plugin_seq_vtable = {
    PLUGIN_VTABLE_SLOTS,
    .decode = kvv_plugin_decode,
    .seq_rm = kvv_plugin_seq_rm,
    .seq_cp = kvv_plugin_seq_cp,
    .seq_kv = kvv_plugin_seq_kv,
};

/* ------------------------------------------------------------ open */

/* The plugin's reading of the model must be kvverify's. */
static kvv_status check_info(const kvv_plugin_state *ps, const kvv_model *m,
                             const kvv_plugin_params *p, kvv_error *err)
{
    const kvv_hparams *hp = &m->hp;
    const kvv_plugin_info *in = &ps->info;
    const struct { const char *what; int theirs, ours; } f[] = {
        {"n_layer", in->n_layer, hp->n_layer},       {"n_embd", in->n_embd, hp->n_embd},
        {"n_head", in->n_head, hp->n_head},          {"n_head_kv", in->n_head_kv, hp->n_head_kv},
        {"head_dim", in->head_dim, hp->head_dim},    {"head_dim_v", in->head_dim_v, hp->head_dim_v},
        {"n_vocab", in->n_vocab, hp->n_vocab},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].theirs != f[i].ours)
            return kvv_error_set(err, KVV_ERR_FORMAT,
                                 "engine %s reads %s as %s = %d, kvverify reads %d", ps->engine_name,
                                 p->model_path, f[i].what, f[i].theirs, f[i].ours);
    if (in->n_ctx < p->n_ctx || in->cache_type != p->cache_type)
        return kvv_error_set(err, KVV_ERR_INTERNAL,
                             "engine %s opened a %s cache of %d positions (asked: %s, %d)",
                             ps->engine_name, kvv_cache_type_name((kvv_cache_type)in->cache_type),
                             in->n_ctx, kvv_cache_type_name((kvv_cache_type)p->cache_type),
                             p->n_ctx);
    /* every declared capability needs its slot */
    const kvv_plugin_table *t = &ps->lib.t;
    const struct { uint64_t cap; const void *slot; const char *name; } s[] = {
        {KVV_PLUGIN_CAP_KV_FROM_RESIDUAL, (const void *)t->kv_from_residual, "kv_from_residual"},
        {KVV_PLUGIN_CAP_KV_READ, (const void *)t->kv_read, "kv_read"},
        {KVV_PLUGIN_CAP_KV_EVICT, (const void *)t->kv_evict, "kv_evict"},
        {KVV_PLUGIN_CAP_KV_EVICT_HEAD, (const void *)t->kv_evict, "kv_evict"},
        {KVV_PLUGIN_CAP_KV_WRITE, (const void *)t->kv_write, "kv_write"},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if ((in->caps & s[i].cap) && !s[i].slot) {
            char names[64];
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "plugin %s declares %s but its %s slot is NULL", ps->lib.path,
                                 kvv_engine_cap_names((unsigned)s[i].cap, names, sizeof names),
                                 s[i].name);
        }
    if ((in->caps & KVV_PLUGIN_CAP_RESIDUAL_WRITE) && !(in->caps & KVV_PLUGIN_CAP_RESIDUAL_READ))
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "plugin %s declares residual-write without residual-read",
                             ps->lib.path);
    return KVV_OK;
}

/* Controls asked for: those the plugin planted stay, the others become
 * host-side controls (engine/host_control.h). */
static unsigned controls_in_force(unsigned asked, uint32_t planted, uint64_t caps)
{
    unsigned c = asked & KVV_CTL_HOST_ALL;
    if (asked & KVV_CTL_KV_REVERSED_SUM)
        c |= (planted & KVV_PLUGIN_CTL_KV_REVERSED_SUM) ? KVV_CTL_KV_REVERSED_SUM
                                                        : KVV_CTL_HOST_KV_ULP;
    if (asked & KVV_CTL_PERTURB_WEIGHT)
        c |= (planted & KVV_PLUGIN_CTL_PERTURB_WEIGHT) ? KVV_CTL_PERTURB_WEIGHT
             : (caps & KVV_PLUGIN_CAP_RESIDUAL_WRITE) ? KVV_CTL_HOST_RESIDUAL
                                                      : KVV_CTL_HOST_REORDER;
    return c;
}

static kvv_status open_state(kvv_plugin_state *ps, const kvv_model *m, const kvv_engine_opts *o,
                             int n_ctx, kvv_error *err)
{
    kvv_plugin_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.model_path = m->gguf->path;
    p.device = ps->device;
    p.mode = kvv_mode_name(o->mode);
    p.cache_type = (int)o->cache_type;
    p.n_ctx = n_ctx;
    p.n_threads = o->n_threads > 0 ? o->n_threads : 1;
    p.n_ubatch = o->n_ubatch;
    p.controls = ((o->control & KVV_CTL_KV_REVERSED_SUM) ? KVV_PLUGIN_CTL_KV_REVERSED_SUM : 0u) |
                 ((o->control & KVV_CTL_PERTURB_WEIGHT) ? KVV_PLUGIN_CTL_PERTURB_WEIGHT : 0u);
    p.options = o->engine_opts;
    p.n_options = o->n_engine_opts;
    p.n_seq_max = o->n_seq_max > 1 ? o->n_seq_max : 1;
    ps->host = kvv_plugin_host_table(ps);
    memset(&ps->info, 0, sizeof ps->info);
    ps->info.struct_size = sizeof ps->info;
    ps->info.kv_unified = -1; /* "not known" unless the plugin says */
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    kvv_breadcrumb_enter(KVV_CRUMB_OPEN);
    int code = ps->lib.t.open(&ps->host, &p, &ps->pe, &ps->info, &perr);
    if (code) {
        ps->pe = NULL;
        return kvv_plugin_fail(ps, code, "open", &perr, err);
    }
    if (!ps->pe)
        return kvv_error_set(err, KVV_ERR_INTERNAL, "engine %s: open returned no engine",
                             ps->engine_name);
    ps->info.controls &= p.controls;
    if (ps->info.n_threads < 1)
        ps->info.n_threads = 1;
    if (ps->info.n_ubatch < 0) /* reports would carry "n_ubatch -5" (fuzz_plugin) */
        ps->info.n_ubatch = 0;
    kvv_status s = check_info(ps, m, &p, err);
    return s ? s : kvv_plugin_seqs_open(ps, err);
}

static kvv_status open_plugin(const kvv_model *m, const kvv_engine_opts *o, const char *path,
                              const char *engine_name, kvv_engine **out, kvv_error *err)
{
    *out = NULL;
    if (!path || !path[0])
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: no plugin path", engine_name);
    kvv_plugin_state *ps = calloc(1, sizeof *ps);
    kvv_engine *e = calloc(1, sizeof *e);
    if (!ps || !e) {
        free(ps);
        free(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "engine %s: out of memory", engine_name);
    }
    ps->violated_layer = -1;
    snprintf(ps->engine_name, sizeof ps->engine_name, "%s", engine_name);
    snprintf(ps->device, sizeof ps->device, "%s", o->device ? o->device : "");
    kvv_status s = kvv_plugin_lib_open(path, &ps->lib, err);
    if (!s) {
        snprintf(ps->name, sizeof ps->name, "%s", ps->lib.t.name);
        const kvv_hparams *hp = &m->hp;
        int n_ctx = o->n_ctx > 0 ? o->n_ctx
                    : hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        s = open_state(ps, m, o, n_ctx, err);
        if (!s && (ps->info.caps & KVV_PLUGIN_CAP_KV_READ)) {
            ps->mirror = kvv_kv_cache_new(o->cache_type, hp->n_layer, n_ctx, hp->n_head_kv,
                                          hp->head_dim, hp->head_dim_v);
            ps->shadow = kvv_kv_cache_new(o->cache_type, hp->n_layer, n_ctx, hp->n_head_kv,
                                          hp->head_dim, hp->head_dim_v);
            if (!ps->mirror || !ps->shadow)
                s = kvv_error_set(err, KVV_ERR_NOMEM, "engine %s: out of memory for the cache "
                                  "mirror (%d positions)", ps->engine_name, n_ctx);
        }
        if (!s && !(ps->info.caps & KVV_PLUGIN_CAP_RESIDUAL_WRITE)) {
            ps->scratch = malloc((size_t)n_ctx * (size_t)hp->n_embd * sizeof(float));
            if (!ps->scratch)
                s = kvv_error_set(err, KVV_ERR_NOMEM, "engine %s: out of memory", ps->engine_name);
        }
        e->opts = *o;
        e->opts.n_ctx = n_ctx;
    }
    if (s) {
        state_free(ps);
        free(e);
        return s;
    }
    e->vt = ps->seqs ? &plugin_seq_vtable : &plugin_vtable;
    e->model = m;
    e->opts.name = ps->engine_name;
    e->opts.device = ps->device[0] ? ps->device : NULL;
    e->opts.engine_opts = NULL; /* borrowed from the caller; not kept */
    e->opts.n_engine_opts = 0;
    e->opts.n_threads = ps->info.n_threads;
    e->opts.n_ubatch = ps->info.n_ubatch;
    e->opts.n_seq_max = ps->seqs ? ps->info.n_seq_max : 1; /* served (kvv_engine_n_seq) */
    e->opts.cache_type = (kvv_cache_type)ps->info.cache_type;
    e->opts.control = controls_in_force(o->control, ps->info.controls, ps->info.caps);
    e->impl = ps;
    *out = e;
    return KVV_OK;
}

kvv_status kvv_engine_open_plugin(const kvv_model *m, const kvv_engine_opts *o, const char *path,
                                  const char *name, kvv_engine **out, kvv_error *err)
{
    char full[1040];
    snprintf(full, sizeof full, KVV_PLUGIN_PREFIX "%s", path ? path : "");
    return open_plugin(m, o, path, name ? name : full, out, err);
}

bool kvv_plugin_find_by_name(const char *name, char *path, size_t size)
{
    size_t n = strlen(name);
    if (n < 1 || n > 15 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789._-") != n || name[0] == '.')
        return false;
    char file[32];
    kvv_error ignored = {0};
    snprintf(file, sizeof file, "%s.so", name);
    return kvv_plugin_find(file, path, size, &ignored) == KVV_OK;
}

bool kvv_engine_open_plugin_by_name(const kvv_model *m, const kvv_engine_opts *o,
                                    const char *name, kvv_engine **out, kvv_status *status,
                                    kvv_error *err)
{
    char path[1024];
    if (!kvv_plugin_find_by_name(name, path, sizeof path))
        return false;
    *status = open_plugin(m, o, path, name, out, err);
    return true;
}

kvv_status kvv_engine_open_llama_cpp(const kvv_model *m, const kvv_engine_opts *o,
                                     kvv_engine **out, kvv_error *err)
{
    char path[1024];
    *out = NULL;
    kvv_status s = kvv_plugin_find(KVV_LLAMA_CPP_PLUGIN, path, sizeof path, err);
    return s ? s : open_plugin(m, o, path, "llama.cpp", out, err);
}

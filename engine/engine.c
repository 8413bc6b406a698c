/*
 * engine.c — the thin wrappers over the vtable every caller goes through
 * (engine/engine.h): mode names, option defaults, forward, K/V from a
 * residual, describe, capabilities, batch paths. Opening an engine by name
 * is engine_registry.c's job.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/breadcrumb.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/host_control.h"

static const char *const mode_names[] = {"exact", "fast", "invariant"};

const char *kvv_mode_name(kvv_mode m)
{
    if ((unsigned)m < sizeof mode_names / sizeof mode_names[0])
        return mode_names[m];
    return "unknown";
}

int kvv_mode_from_name(const char *s, kvv_mode *out)
{
    for (unsigned i = 0; s && i < sizeof mode_names / sizeof mode_names[0]; i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *out = (kvv_mode)i;
            return 1;
        }
    return 0;
}

static const struct {
    unsigned opt;
    const char *name;
} opt_names[] = {
    {KVV_ENGINE_OPT_ENGINE, "--engine"},         {KVV_ENGINE_OPT_MODE, "--mode"},
    {KVV_ENGINE_OPT_THREADS, "--threads"},       {KVV_ENGINE_OPT_CACHE, "--cache-type"},
    {KVV_ENGINE_OPT_DEVICE, "--device"},         {KVV_ENGINE_OPT_UBATCH, "--ubatch"},
    {KVV_ENGINE_OPT_EOPT, "--engine-opt"},       {KVV_ENGINE_OPT_ISA, "--isa"},
    {KVV_ENGINE_OPT_REPACK, "--repack"},         {KVV_ENGINE_OPT_GGML, "--emulate-ggml"},
};

const char *kvv_engine_opt_name(unsigned opt)
{
    for (size_t i = 0; i < sizeof opt_names / sizeof opt_names[0]; i++)
        if (opt_names[i].opt == opt)
            return opt_names[i].name;
    return "?";
}

kvv_engine_opts kvv_engine_opts_default(void)
{
    kvv_engine_opts o;
    memset(&o, 0, sizeof o);
    o.name = "ref";
    o.mode = KVV_MODE_EXACT;
    o.n_threads = 1;
    o.cache_type = KVV_CACHE_F32;
    o.n_ctx = 0;
    o.control = 0;
    o.ggml = 0;
    o.isa = NULL;
    o.repack = 0;
    o.device = NULL;
    o.n_ubatch = 0;
    o.engine_opts = NULL;
    o.n_engine_opts = 0;
    return o;
}

void kvv_engine_close(kvv_engine *e)
{
    if (e && e->vt && e->vt->close)
        e->vt->close(e);
}

/* ------------------------------------------------------------ wrappers */

kvv_status kvv_engine_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                              const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                              kvv_error *err)
{
    if (!e)
        return kvv_error_set(err, KVV_ERR_USAGE, "forward: no engine");
    kvv_breadcrumb_enter(KVV_CRUMB_FORWARD); /* what a crash report names (isolation) */
    if (n > 0 && pos)
        kvv_breadcrumb_positions(pos[0], pos[n - 1]);
    kvv_crumb_relay relay; /* isolated: the hooks name the layer too */
    hooks = kvv_breadcrumb_hooks(&relay, hooks);
    if (e->opts.control & (KVV_CTL_HOST_RESIDUAL | KVV_CTL_HOST_REORDER))
        return kvv_host_control_forward(e, n, tokens, pos, hooks, lm, logits, err);
    return e->vt->forward(e, n, tokens, pos, hooks, lm, logits, err);
}

kvv_status kvv_engine_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                       const int32_t *pos, float *k, float *v, kvv_error *err)
{
    if (!e)
        return kvv_error_set(err, KVV_ERR_USAGE, "kv_from_residual: no engine");
    kvv_breadcrumb_enter(KVV_CRUMB_KV_FROM_RESIDUAL);
    kvv_breadcrumb_layer(layer, n > 0 && pos ? pos[0] : -1, n > 0 && pos ? pos[n - 1] : -1);
    kvv_status s = e->vt->kv_from_residual(e, layer, n, h, pos, k, v, err);
    if (s == KVV_OK && (e->opts.control & KVV_CTL_HOST_KV_ULP))
        kvv_host_control_kv(e->opts.cache_type, n, e->model->hp.n_head_kv * e->model->hp.head_dim,
                            k);
    return s;
}

kvv_kv_cache *kvv_engine_cache(kvv_engine *e)
{
    return e ? e->vt->cache(e) : NULL;
}

const kvv_model *kvv_engine_model(const kvv_engine *e)
{
    return e ? e->model : NULL;
}

const kvv_engine_opts *kvv_engine_options(const kvv_engine *e)
{
    return e ? &e->opts : NULL;
}

void kvv_engine_describe(kvv_engine *e, kvv_engine_desc *d)
{
    memset(d, 0, sizeof *d);
    if (!e)
        return;
    /* Defaults every engine shares; the engine fills in the rest. */
    snprintf(d->name, sizeof d->name, "%s", e->opts.name ? e->opts.name : "?");
    snprintf(d->mode, sizeof d->mode, "%s", kvv_mode_name(e->opts.mode));
    snprintf(d->cache_type, sizeof d->cache_type, "%s", kvv_cache_type_name(e->opts.cache_type));
    d->n_threads = e->opts.n_threads > 0 ? e->opts.n_threads : 1;
    d->control = e->opts.control;
    d->n_seq_max = kvv_engine_n_seq(e);
    d->kv_unified = -1;
    e->vt->describe(e, d);
    if (e->opts.control & KVV_CTL_HOST_ALL) { /* say which kvverify-side control is in force */
        char names[64];
        size_t len = strlen(d->kernels);
        snprintf(d->kernels + len, sizeof d->kernels - len, "%scontrol=%s", len ? " " : "",
                 kvv_host_control_names(e->opts.control, names, sizeof names));
    }
}

const char *kvv_engine_control_name(unsigned control, const char *native, char *buf,
                                    size_t size)
{
    static const struct { unsigned flag; const char *text; } host[] = {
        {KVV_CTL_HOST_KV_ULP, "host-kv-ulp (kvverify moves K[t][0] of every recomputed row by "
                              "one ULP of the cache dtype)"},
        {KVV_CTL_HOST_RESIDUAL, "host-residual (kvverify negates the largest element of the "
                                "final residual)"},
        {KVV_CTL_HOST_REORDER, "host-reorder (kvverify swaps the first two distinct tokens)"},
    };
    unsigned c = control;
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        if (c & host[i].flag) {
            snprintf(buf, size, "%s", host[i].text);
            return buf;
        }
    snprintf(buf, size, "%s", native);
    return buf;
}

void kvv_engine_reset(kvv_engine *e)
{
    if (e && e->vt->reset) {
        e->vt->reset(e);
        return;
    }
    kvv_kv_cache *c = kvv_engine_cache(e);
    if (c)
        kvv_kv_cache_clear(c);
}

/* ------------------------------------------------------------ sequences */

int kvv_engine_n_seq(kvv_engine *e)
{
    if (!(kvv_engine_caps(e) & KVV_ENGINE_CAP_SEQS))
        return 1;
    return e->opts.n_seq_max > 1 ? e->opts.n_seq_max : 1;
}

static kvv_status check_seq(kvv_engine *e, const char *call, int seq, kvv_error *err)
{
    if (!e)
        return kvv_error_set(err, KVV_ERR_USAGE, "%s: no engine", call);
    int n_seq = kvv_engine_n_seq(e);
    if (seq < 0 || seq >= n_seq)
        return kvv_error_set(err, seq > 0 && n_seq == 1 ? KVV_ERR_UNSUPPORTED : KVV_ERR_USAGE,
                             "%s: sequence %d outside 0..%d (engine %s%s)", call, seq, n_seq - 1,
                             e->opts.name ? e->opts.name : "?",
                             n_seq == 1 ? " serves one sequence" : "");
    return KVV_OK;
}

/* The default decode: sequence 0 only, with a logits pattern forward has. */
static kvv_status decode_as_forward(kvv_engine *e, const kvv_batch *b, float *logits,
                                    kvv_error *err)
{
    int n_want = 0;
    for (int i = 0; i < b->n; i++)
        n_want += b->logits && b->logits[i];
    kvv_logits_mode lm = n_want == 0 ? KVV_LOGITS_NONE
                         : n_want == b->n ? KVV_LOGITS_ALL
                         : n_want == 1 && b->logits[b->n - 1] ? KVV_LOGITS_LAST
                                                              : (kvv_logits_mode)-1;
    if ((int)lm < 0)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "decode: engine %s has no sequences and "
                             "returns logits for no row, the last or all (asked for %d of %d)",
                             e->opts.name ? e->opts.name : "?", n_want, b->n);
    return kvv_engine_forward(e, b->n, b->token, b->pos, NULL, lm, logits, err);
}

kvv_status kvv_engine_decode(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err)
{
    if (!e || !b || b->n <= 0 || !b->token || !b->pos || !b->seq)
        return kvv_error_set(err, KVV_ERR_USAGE, "decode: %s", !e ? "no engine"
                             : !b || b->n <= 0 ? "no tokens" : "token, pos or seq missing");
    const int n_seq = kvv_engine_n_seq(e), n_ctx = e->opts.n_ctx;
    const int V = e->model->hp.n_vocab;
    bool only0 = true, want = false;
    for (int i = 0; i < b->n; i++) {
        kvv_status s = check_seq(e, "decode", b->seq[i], err);
        if (s)
            return s;
        if (b->token[i] < 0 || b->token[i] >= V || b->pos[i] < 0 || b->pos[i] >= n_ctx)
            return kvv_error_set(err, KVV_ERR_USAGE, "decode: token %d: id %d or position %d "
                                 "outside the vocabulary (%d) or the context (%d)", i,
                                 b->token[i], b->pos[i], V, n_ctx);
        only0 &= b->seq[i] == 0;
        want |= b->logits && b->logits[i];
    }
    if (want && !logits)
        return kvv_error_set(err, KVV_ERR_USAGE, "decode: logits asked for but no buffer");
    (void)n_seq;
    kvv_breadcrumb_enter(KVV_CRUMB_FORWARD);
    kvv_breadcrumb_positions(b->pos[0], b->pos[b->n - 1]);
    if (e->vt->decode)
        return e->vt->decode(e, b, logits, err);
    if (!only0)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "decode: engine %s serves one sequence",
                             e->opts.name ? e->opts.name : "?");
    return decode_as_forward(e, b, logits, err);
}

kvv_status kvv_engine_seq_rm(kvv_engine *e, int seq, int p0, int p1, kvv_error *err)
{
    kvv_status s = check_seq(e, "seq_rm", seq, err);
    if (s)
        return s;
    if (p0 < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "seq_rm: p0 %d is negative", p0);
    if (e->vt->seq_rm)
        return e->vt->seq_rm(e, seq, p0, p1, err);
    kvv_kv_cache *c = kvv_engine_cache(e);
    if (!c)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "seq_rm: engine %s has no readable cache",
                             e->opts.name ? e->opts.name : "?");
    if (p1 < 0 || p1 >= c->n_ctx) { /* to the end: a truncation */
        kvv_kv_cache_truncate(c, p0);
        return KVV_OK;
    }
    for (int l = 0; l < c->n_layer; l++)
        for (int p = p0; p < p1; p++)
            for (int h = 0; h < c->n_kv_head; h++)
                kvv_kv_cache_evict(c, l, p, h);
    return KVV_OK;
}

kvv_status kvv_engine_seq_cp(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err)
{
    kvv_status s = check_seq(e, "seq_cp", src, err);
    if (s || (s = check_seq(e, "seq_cp", dst, err)))
        return s;
    if (p0 < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "seq_cp: p0 %d is negative", p0);
    if (src == dst)
        return KVV_OK;
    if (!e->vt->seq_cp)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "seq_cp: engine %s cannot copy sequences",
                             e->opts.name ? e->opts.name : "?");
    return e->vt->seq_cp(e, src, dst, p0, p1, err);
}

kvv_status kvv_engine_seq_kv(kvv_engine *e, int seq, int layer, int pos0, int n, float *k,
                             float *v, uint8_t *present, kvv_error *err)
{
    kvv_status s = check_seq(e, "seq_kv", seq, err);
    if (s)
        return s;
    const kvv_hparams *hp = &e->model->hp;
    if (layer < 0 || layer >= hp->n_layer || pos0 < 0 || n < 0 || pos0 + n > e->opts.n_ctx)
        return kvv_error_set(err, KVV_ERR_USAGE, "seq_kv: layer %d or rows %d..%d outside the "
                             "model (%d layers) or the context (%d)", layer, pos0, pos0 + n - 1,
                             hp->n_layer, e->opts.n_ctx);
    if (e->vt->seq_kv)
        return e->vt->seq_kv(e, seq, layer, pos0, n, k, v, present, err);
    kvv_kv_cache *c = kvv_engine_cache(e);
    if (!c)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "seq_kv: engine %s has no readable cache",
                             e->opts.name ? e->opts.name : "?");
    const int K = hp->n_head_kv * hp->head_dim, Vd = hp->n_head_kv * hp->head_dim_v;
    for (int i = 0; i < n; i++) {
        kvv_kv_cache_load_k(c, layer, pos0 + i, k + (size_t)i * K);
        kvv_kv_cache_load_v(c, layer, pos0 + i, v + (size_t)i * Vd);
        if (present)
            for (int h = 0; h < hp->n_head_kv; h++)
                present[(size_t)i * hp->n_head_kv + h] =
                    kvv_kv_cache_present(c, layer, pos0 + i, h);
    }
    return KVV_OK;
}

/* ------------------------------------------------------------ capabilities */

void kvv_engine_batch_paths(kvv_engine *e, kvv_batch_paths *out)
{
    memset(out, 0, sizeof *out);
    if (e && e->vt->batch_paths)
        e->vt->batch_paths(e, out);
}

int kvv_batch_path_of(const kvv_batch_paths *p, int n)
{
    if (!p->known)
        return n;
    int k = 0;
    while (k < p->n && p->sw[k].at <= n)
        k++;
    return k;
}

void kvv_batch_paths_add(kvv_batch_paths *p, int at, const char *what)
{
    p->known = true;
    int k = 0;
    while (k < p->n && p->sw[k].at < at)
        k++;
    if (k < p->n && p->sw[k].at == at) {
        if (strstr(p->sw[k].what, what))
            return;
        size_t len = strlen(p->sw[k].what);
        snprintf(p->sw[k].what + len, sizeof p->sw[k].what - len, "; %s", what);
        return;
    }
    if (p->n >= KVV_BATCH_MAX_SWITCHES)
        return;
    memmove(&p->sw[k + 1], &p->sw[k], (size_t)(p->n - k) * sizeof p->sw[0]);
    p->sw[k].at = at;
    snprintf(p->sw[k].what, sizeof p->sw[k].what, "%s", what);
    p->n++;
}

const char *kvv_batch_paths_list(const kvv_batch_paths *p, char *buf, size_t size)
{
    if (!p->known || !p->n) {
        snprintf(buf, size, "%s", p->known ? "none" : "unknown");
        return buf;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < p->n && off < size; k++)
        off += (size_t)snprintf(buf + off, size - off, "%s%d", k ? ", " : "", p->sw[k].at);
    return buf;
}

static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double kvv_engine_cpu_seconds(kvv_engine *e)
{
    double workers = e && e->vt->worker_cpu_seconds ? e->vt->worker_cpu_seconds(e) : 0;
    if (workers < 0) /* threads kvverify cannot see (a plugin's) */
        return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    return clock_seconds(CLOCK_THREAD_CPUTIME_ID) + workers;
}

bool kvv_engine_concurrent(const kvv_engine *e)
{
    return e && !e->vt->serial;
}

unsigned kvv_engine_caps(kvv_engine *e)
{
    if (!e)
        return 0;
    return e->vt->caps ? e->vt->caps(e) : KVV_ENGINE_CAP_BUILTIN;
}

static const char *const cap_names[] = {
    "logits-all", "residual-read", "residual-write", "kv-hook", "kv-read",
    "kv-from-residual", "attn", "attn-out", "select", "kv-evict",
    "kv-evict-head", "kv-write", "threads", "ubatch", "overwrite", "seqs", "op-taps",
};

const char *kvv_engine_cap_names(unsigned caps, char *buf, size_t size)
{
    size_t off = 0;
    if (size)
        buf[0] = '\0';
    for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
        if (caps & (1u << i)) {
            int w = snprintf(buf + off, size - off, "%s%s", off ? "," : "", cap_names[i]);
            if (w < 0 || (size_t)w >= size - off)
                break;
            off += (size_t)w;
        }
    return buf;
}

kvv_status kvv_engine_require(kvv_engine *e, unsigned need, const char *what, kvv_error *err)
{
    unsigned missing = need & ~kvv_engine_caps(e);
    if (!missing)
        return KVV_OK;
    char names[256];
    return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "engine %s does not offer %s (needed by %s)",
                         e && e->opts.name ? e->opts.name : "?",
                         kvv_engine_cap_names(missing, names, sizeof names), what);
}

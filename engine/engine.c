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
    "kv-evict-head", "kv-write", "threads", "ubatch", "overwrite",
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

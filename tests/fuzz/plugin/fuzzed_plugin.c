/*
 * fuzzed_plugin.c — a plugin whose every answer is scripted by fuzz bytes,
 * for tests/fuzz/fuzz_plugin.c (built only against
 * include/kvverify/engine_plugin.h, into fuzzed_plugin.so beside the target).
 *
 * Each decision reads the next script byte; 0 (and the end of the script)
 * means "behave": the plugin then is a complete, well-behaved engine over a
 * toy model of the right dimensions (a float cache of its own, every hook,
 * every slot), so deep host paths stay reachable. Other bytes pick a
 * misbehaviour: the table (NULL, wrong ABI, short or long struct_size, bad
 * names, no devices, NULL slots), open (any status code, messages without
 * a NUL, no engine, arbitrary capabilities, wrong dimensions, n_ctx,
 * cache type, threads, micro-batch, controls), and per call: failing with
 * any code, writing fewer values than declared, NaN/Inf, writing past the
 * declared end INSIDE the host's guard (KVV_PLUGIN_GUARD_FLOATS = 64 floats,
 * engine/plugin/plugin_impl.h; never beyond: that would be memory corruption
 * no host can stop), calling hooks with arbitrary layer / n / positions /
 * keys, logits written under KVV_PLUGIN_LOGITS_NONE, describe strings
 * without NUL, and a pointer to a host buffer kept and written during a
 * later call (only where the host cannot have freed or grown that buffer in
 * between, so the write stays inside memory the host still owns).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvverify/engine_plugin.h"
#include "tests/fuzz/plugin/fuzzed_plugin.h"

#define GUARD_FLOATS 64 /* the host's KVV_PLUGIN_GUARD_FLOATS */
#define WILD_ROWS 128   /* rows of the buffers wild hook calls pass */

static const uint8_t *g_script;
static size_t g_size, g_at;
static kvv_fuzz_dims g_dims;

/* The next script byte; 0 ("behave") once the script is used up. */
static unsigned take(void)
{
    return g_at < g_size ? g_script[g_at++] : 0u;
}

static int take_i8(void)
{
    return (int)(int8_t)take();
}

/* ------------------------------------------------------------ stale writes */

enum { CALL_FORWARD, CALL_KV_READ, CALL_FROM_RES, CALL_EVICT, CALL_WRITE, CALL_CLEAR,
       CALL_DESCRIBE, CALL_CLOSE };

static unsigned char *g_kept_logits, *g_kept_k; /* host stages kept past their call */
static size_t g_kept_logits_n, g_kept_k_n;      /* their declared bytes */

/* A write through a pointer kept from an earlier call. The host grows a
 * stage only when it starts a call that uses it, so the logits stage is
 * safe to write until the next forward and the k stage until the next
 * kv_read / kv_from_residual; elsewhere the kept pointer is dropped. */
static void stale_write(int call)
{
    if (g_kept_logits && call != CALL_FORWARD)
        g_kept_logits[take() % g_kept_logits_n] ^= 0x40;
    if (g_kept_k && call != CALL_KV_READ && call != CALL_FROM_RES)
        g_kept_k[take() % g_kept_k_n] ^= 0x40;
    g_kept_logits = g_kept_k = NULL;
}

/* ------------------------------------------------------------ messages */

static int fail(kvv_plugin_error *err, const char *msg)
{
    int code = take_i8();
    if (code == 0)
        code = KVV_PLUGIN_ERR_INTERNAL;
    switch (take() % 4) {
    case 1: /* no NUL anywhere */
        memset(err->msg, 'x', sizeof err->msg);
        break;
    case 2: /* no message */
        break;
    default:
        strncpy(err->msg, msg, sizeof err->msg - 1);
        break;
    }
    return code;
}

static int usage(kvv_plugin_error *err, const char *msg)
{
    strncpy(err->msg, msg, sizeof err->msg - 1);
    return KVV_PLUGIN_ERR_USAGE;
}

/* ------------------------------------------------------------ the engine */

struct kvv_plugin_engine {
    const kvv_plugin_host *host;
    int n_ctx, kd, vd;
    float *k, *v;          /* [n_layer][n_ctx][kd or vd] */
    uint8_t *present;      /* [n_layer][n_ctx][n_head_kv] */
};

static float *k_at(kvv_plugin_engine *e, int l, int p)
{
    return e->k + ((size_t)l * (size_t)e->n_ctx + (size_t)p) * (size_t)e->kd;
}

static float *v_at(kvv_plugin_engine *e, int l, int p)
{
    return e->v + ((size_t)l * (size_t)e->n_ctx + (size_t)p) * (size_t)e->vd;
}

static uint8_t *pr_at(kvv_plugin_engine *e, int l, int p)
{
    return e->present + ((size_t)l * (size_t)e->n_ctx + (size_t)p) * (size_t)g_dims.n_head_kv;
}

static void f_close(kvv_plugin_engine *e)
{
    stale_write(CALL_CLOSE);
    if (!e)
        return;
    free(e->k);
    free(e->v);
    free(e->present);
    free(e);
}

static int f_open(const kvv_plugin_host *host, const kvv_plugin_params *p, kvv_plugin_engine **out,
                  kvv_plugin_info *info, kvv_plugin_error *err)
{
    const kvv_fuzz_dims *d = &g_dims;
    *out = NULL;
    unsigned how = take();
    if (how & 1u) { /* fail, sometimes leaving a dangling *out */
        if (take() & 1u)
            *out = (kvv_plugin_engine *)(uintptr_t)0x10;
        return fail(err, "open: scripted failure");
    }
    if (how & 2u)
        return KVV_PLUGIN_OK; /* success without an engine */
    if (host && (how & 4u) && host->log)
        host->log(host->log_user, 2 + (int)(take() % 8), (take() & 1u) ? NULL : "scripted note");
    if (p->cache_type != KVV_PLUGIN_DTYPE_F32)
        return usage(err, "open: cache_type: this plugin stores f32 only");
    if (p->n_ctx < 1 || p->n_ctx > 4096)
        return usage(err, "open: n_ctx out of range");
    kvv_plugin_engine *e = calloc(1, sizeof *e);
    if (!e)
        return KVV_PLUGIN_ERR_NOMEM;
    e->host = host;
    e->n_ctx = p->n_ctx;
    e->kd = d->n_head_kv * d->head_dim;
    e->vd = d->n_head_kv * d->head_dim_v;
    size_t cells = (size_t)d->n_layer * (size_t)e->n_ctx;
    e->k = calloc(cells * (size_t)e->kd, sizeof(float));
    e->v = calloc(cells * (size_t)e->vd, sizeof(float));
    e->present = calloc(cells * (size_t)d->n_head_kv, 1);
    if (!e->k || !e->v || !e->present) {
        f_close(e);
        return KVV_PLUGIN_ERR_NOMEM;
    }
    info->caps = 0x7fffu; /* every capability */
    info->n_layer = d->n_layer;
    info->n_embd = d->n_embd;
    info->n_head = d->n_head;
    info->n_head_kv = d->n_head_kv;
    info->head_dim = d->head_dim;
    info->head_dim_v = d->head_dim_v;
    info->n_vocab = d->n_vocab;
    info->n_ctx = p->n_ctx;
    info->cache_type = p->cache_type;
    info->n_threads = p->n_threads;
    info->n_ubatch = p->n_ubatch;
    info->controls = 0;
    if (how & 8u) /* arbitrary capabilities, unknown bits included */
        info->caps = (uint64_t)take() | (uint64_t)take() << 8 | (uint64_t)(take() & 0x81u) << 56;
    if (how & 16u) { /* one dimension off */
        int *f[] = {&info->n_layer, &info->n_embd, &info->n_head, &info->n_head_kv,
                    &info->head_dim, &info->head_dim_v, &info->n_vocab};
        *f[take() % 7] += take_i8();
    }
    if (how & 32u) { /* the engine as opened, arbitrary */
        info->n_ctx += take_i8();
        info->cache_type = take_i8();
        info->n_threads = take_i8();
        info->n_ubatch = take_i8();
    }
    if (how & 64u)
        info->controls = take();
    *out = e;
    return KVV_PLUGIN_OK;
}

/* The toy model: deterministic, finite, depending on tokens and positions. */
static void embed(int n, const int32_t *tokens, float *h)
{
    int E = g_dims.n_embd;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < E; j++)
            h[(size_t)i * E + j] = (float)((tokens[i] * 31 + j * 7) % 97) / 97.0f - 0.5f;
}

static void project(int n, const float *h, const int32_t *pos, int width, float scale, float *out)
{
    int E = g_dims.n_embd;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < width; j++)
            out[(size_t)i * width + j] = scale * h[(size_t)i * E + j % E] + 0.01f * (float)pos[i];
}

/* Buffers for a wild hook call: big enough for WILD_ROWS rows and keys. */
static void wild_hook(kvv_plugin_engine *e, const kvv_plugin_hooks *hk)
{
    const kvv_fuzz_dims *d = &g_dims;
    int layer = take_i8(), n = take_i8(), n_keys = take_i8(), kind = (int)(take() % 5);
    int32_t pos[WILD_ROWS];
    for (int i = 0; i < WILD_ROWS; i++)
        pos[i] = take_i8();
    int width = d->n_embd > e->kd ? d->n_embd : e->kd;
    if (e->vd > width)
        width = e->vd;
    if (d->n_head * d->head_dim_v > width)
        width = d->n_head * d->head_dim_v;
    size_t rows = (size_t)WILD_ROWS * (size_t)(d->n_head > 1 ? d->n_head : 1) * WILD_ROWS;
    float *buf = calloc(rows > (size_t)WILD_ROWS * width ? rows : (size_t)WILD_ROWS * width,
                        sizeof(float));
    float *buf2 = calloc((size_t)WILD_ROWS * width, sizeof(float));
    uint8_t keep[WILD_ROWS];
    memset(keep, 1, sizeof keep);
    int null_pos = (take() & 1u) != 0;
    const int32_t *pp = null_pos ? NULL : pos;
    if (buf && buf2) {
        if (kind == 0 && hk->residual)
            hk->residual(hk->user, layer, n, pp, buf);
        else if (kind == 1 && hk->kv)
            hk->kv(hk->user, layer, n, pp, buf, buf2);
        else if (kind == 2 && hk->attn)
            hk->attn(hk->user, layer, n, pp, n_keys, pos, buf);
        else if (kind == 3 && hk->attn_out)
            hk->attn_out(hk->user, layer, n, pp, buf);
        else if (kind == 4 && hk->select)
            hk->select(hk->user, layer, pos[0], n, buf, n_keys, pp, keep);
    }
    free(buf);
    free(buf2);
}

/* One layer's hooks for the call's rows (h [n][n_embd]); stores K/V. */
static void run_layer(kvv_plugin_engine *e, int l, int n, const int32_t *pos,
                      const kvv_plugin_hooks *hk, float *h, float *k, float *v, float *scratch)
{
    const kvv_fuzz_dims *d = &g_dims;
    if (hk && hk->residual)
        hk->residual(hk->user, l, n, pos, h);
    project(n, h, pos, e->kd, 0.5f, k);
    project(n, h, pos, e->vd, 0.25f, v);
    if (hk && hk->kv)
        hk->kv(hk->user, l, n, pos, k, v);
    for (int i = 0; i < n; i++) {
        memcpy(k_at(e, l, pos[i]), k + (size_t)i * e->kd, (size_t)e->kd * sizeof(float));
        memcpy(v_at(e, l, pos[i]), v + (size_t)i * e->vd, (size_t)e->vd * sizeof(float));
        memset(pr_at(e, l, pos[i]), 1, (size_t)d->n_head_kv);
    }
    /* keys: cached positions up to the last query (head 0's view) */
    int32_t *key_pos = (int32_t *)scratch;
    int n_keys = 0;
    for (int p = 0; p <= pos[n - 1]; p++)
        if (pr_at(e, l, p)[0])
            key_pos[n_keys++] = p;
    float *pa = scratch + e->n_ctx;
    if (hk && hk->attn && n_keys > 0) {
        for (int i = 0; i < n; i++) {
            int seen = 0;
            for (int j = 0; j < n_keys; j++)
                seen += key_pos[j] <= pos[i];
            for (int hh = 0; hh < d->n_head; hh++)
                for (int j = 0; j < n_keys; j++)
                    pa[((size_t)i * d->n_head + hh) * n_keys + j] =
                        key_pos[j] <= pos[i] && seen ? 1.0f / (float)seen : 0.0f;
        }
        hk->attn(hk->user, l, n, pos, n_keys, key_pos, pa);
    }
    if (hk && hk->select && n_keys > 0) {
        uint8_t keep[4096];
        for (int i = 0; i < n; i++)
            for (int hh = 0; hh < d->n_head; hh++) {
                memset(keep, 1, (size_t)n_keys);
                hk->select(hk->user, l, pos[i], hh, h + (size_t)i * d->n_embd, n_keys, key_pos,
                           keep);
            }
    }
    int ad = d->n_head * d->head_dim_v;
    project(n, h, pos, ad, 0.1f, pa);
    if (hk && hk->attn_out)
        hk->attn_out(hk->user, l, n, pos, pa);
    for (size_t i = 0; i < (size_t)n * d->n_embd; i++)
        h[i] = 0.9f * h[i] + 0.05f;
}

static int f_forward(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                     const kvv_plugin_hooks *hooks, int lm, float *logits, kvv_plugin_error *err)
{
    const kvv_fuzz_dims *d = &g_dims;
    stale_write(CALL_FORWARD);
    if (n < 1 || n > e->n_ctx || !tokens || !pos)
        return usage(err, "forward: n out of range");
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= d->n_vocab || pos[i] < 0 || pos[i] >= e->n_ctx ||
            (i > 0 && pos[i] <= pos[i - 1]))
            return usage(err, "forward: token or position out of range");
    size_t V = (size_t)d->n_vocab, rows = lm == KVV_PLUGIN_LOGITS_ALL ? (size_t)n : 1;
    size_t n_out = lm == KVV_PLUGIN_LOGITS_NONE ? 0 : rows * V;
    unsigned how = take();
    if (how == 1)
        return fail(err, "forward: scripted failure");
    if (how == 2) /* success, nothing computed or written */
        return KVV_PLUGIN_OK;
    if (how == 3 && hooks)
        wild_hook(e, hooks);
    size_t E = (size_t)d->n_embd;
    float *h = malloc((size_t)n * E * sizeof(float));
    float *k = malloc((size_t)n * (size_t)e->kd * sizeof(float));
    float *v = malloc((size_t)n * (size_t)e->vd * sizeof(float));
    size_t sn = (size_t)e->n_ctx * (1 + (size_t)n * (size_t)d->n_head) +
                (size_t)n * (size_t)d->n_head * (size_t)d->head_dim_v;
    float *scratch = malloc(sn * sizeof(float));
    if (!h || !k || !v || !scratch) {
        free(h), free(k), free(v), free(scratch);
        return KVV_PLUGIN_ERR_NOMEM;
    }
    embed(n, tokens, h);
    for (int l = 0; l < d->n_layer; l++)
        run_layer(e, l, n, pos, how == 4 ? NULL : hooks, h, k, v, scratch);
    const int32_t *fpos = lm == KVV_PLUGIN_LOGITS_ALL ? pos : pos + (n - 1);
    float *fh = lm == KVV_PLUGIN_LOGITS_ALL ? h : h + (size_t)(n - 1) * E;
    if (hooks && hooks->residual && how != 4)
        hooks->residual(hooks->user, d->n_layer, (int)rows, fpos, fh);
    if (lm == KVV_PLUGIN_LOGITS_NONE && how == 5 && logits) /* writes what it was not asked */
        for (size_t i = 0; i < V; i++)
            logits[i] = 1.0f;
    for (size_t r = 0; r < (n_out ? rows : 0); r++)
        for (size_t t = 0; t < V; t++)
            logits[r * V + t] = fh[r * E + t % E] + 1e-3f * (float)t;
    free(h), free(k), free(v), free(scratch);
    if (!n_out || how < 6 || how > 10)
        return KVV_PLUGIN_OK;
    unsigned at = how == 10 ? 0 : take();
    switch (how) {
    case 6: /* fewer values than declared: the last ones left alone */
        for (size_t i = n_out - 1 - at % n_out; i < n_out; i++) {
            const unsigned char poison[4] = {0xa5, 0xa5, 0xc5, 0x7f};
            memcpy(logits + i, poison, 4);
        }
        break;
    case 7: /* a NaN or an infinity */
        logits[at % n_out] = (at & 1u) ? NAN : (at & 2u) ? INFINITY : -INFINITY;
        break;
    case 8: /* past the declared end, inside the guard */
        for (size_t i = 0; i <= at % GUARD_FLOATS; i++)
            logits[n_out + i] = (float)i;
        break;
    case 9: /* keeps the pointer and writes it during a later call */
        g_kept_logits = (unsigned char *)logits;
        g_kept_logits_n = n_out * sizeof(float);
        break;
    case 10: /* fails after writing everything */
        return fail(err, "forward: scripted late failure");
    default:
        break;
    }
    return KVV_PLUGIN_OK;
}

static int f_kv_clear(kvv_plugin_engine *e, kvv_plugin_error *err)
{
    stale_write(CALL_CLEAR);
    if (take() == 1)
        return fail(err, "kv_clear: scripted failure");
    memset(e->present, 0, (size_t)g_dims.n_layer * (size_t)e->n_ctx * (size_t)g_dims.n_head_kv);
    return KVV_PLUGIN_OK;
}

static void f_describe(kvv_plugin_engine *e, kvv_plugin_desc *dd)
{
    (void)e;
    stale_write(CALL_DESCRIBE);
    unsigned how = take();
    if (how == 1) { /* no NUL in any field */
        memset(dd->mode, 'M', sizeof dd->mode);
        memset(dd->version, 'V', sizeof dd->version);
        memset(dd->device, 'D', sizeof dd->device);
        memset(dd->variant, 'W', sizeof dd->variant);
        memset(dd->flash_attn, 'F', sizeof dd->flash_attn);
        memset(dd->kernels, 'K', sizeof dd->kernels);
        return;
    }
    if (how == 2) { /* arbitrary bytes */
        char *f[] = {dd->mode, dd->version, dd->device, dd->variant, dd->flash_attn, dd->kernels};
        size_t s[] = {sizeof dd->mode, sizeof dd->version, sizeof dd->device,
                      sizeof dd->variant, sizeof dd->flash_attn, sizeof dd->kernels};
        for (int i = 0; i < 6; i++)
            for (size_t j = 0; j < s[i]; j++)
                f[i][j] = (char)take();
        return;
    }
    if (how == 3)
        return; /* nothing */
    strcpy(dd->mode, "native");
    strcpy(dd->version, "fuzzed 1.0");
    strcpy(dd->device, "cpu");
    strcpy(dd->variant, "toy");
    strcpy(dd->flash_attn, "n/a");
    strcpy(dd->kernels, "scripted");
}

/* Shared by kv_from_residual (FLOATS) and kv_read (raw f32 bits). */
static void misbehave_out(unsigned how, unsigned char *k, size_t kn, unsigned char *v, size_t vn)
{
    if (how < 2 || how > 5)
        return;
    unsigned at = take();
    unsigned char *b = (at & 1u) ? v : k;
    size_t bn = (at & 1u) ? vn : kn;
    switch (how) {
    case 2: { /* fewer bytes than declared: the tail back to the host's poison */
        const unsigned char poison[4] = {0xa5, 0xa5, 0xc5, 0x7f};
        for (size_t i = bn - 4 * (1 + (at >> 1) % (bn / 4)); i < bn; i++)
            b[i] = poison[i & 3];
        break;
    }
    case 3: { /* a NaN or infinity */
        float x = (at & 2u) ? NAN : INFINITY;
        memcpy(b + 4 * ((at >> 2) % (bn / 4)), &x, 4);
        break;
    }
    case 4: /* past the end, inside the guard */
        for (size_t i = 0; i <= (at >> 1) % (GUARD_FLOATS * 4); i++)
            b[bn + i] = (unsigned char)i;
        break;
    case 5: /* keeps k */
        g_kept_k = k;
        g_kept_k_n = kn;
        break;
    default:
        break;
    }
}

static int f_kv_from_residual(kvv_plugin_engine *e, int layer, int n, const float *h,
                              const int32_t *pos, float *k, float *v, kvv_plugin_error *err)
{
    stale_write(CALL_FROM_RES);
    if (layer < 0 || layer >= g_dims.n_layer || n < 1 || n > e->n_ctx || !h || !pos)
        return usage(err, "kv_from_residual: layer or n out of range");
    unsigned how = take();
    if (how == 1)
        return fail(err, "kv_from_residual: scripted failure");
    project(n, h, pos, e->kd, 0.5f, k);
    project(n, h, pos, e->vd, 0.25f, v);
    misbehave_out(how, (unsigned char *)k, (size_t)n * e->kd * 4, (unsigned char *)v,
                  (size_t)n * e->vd * 4);
    return KVV_PLUGIN_OK;
}

static int f_kv_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
                     uint8_t *present, kvv_plugin_error *err)
{
    int H = g_dims.n_head_kv;
    stale_write(CALL_KV_READ);
    if (layer < 0 || layer >= g_dims.n_layer || n < 1 || pos0 < 0 || pos0 > e->n_ctx - n)
        return usage(err, "kv_read: layer or positions out of range");
    unsigned how = take();
    if (how == 1)
        return fail(err, "kv_read: scripted failure");
    memcpy(k, k_at(e, layer, pos0), (size_t)n * e->kd * sizeof(float));
    memcpy(v, v_at(e, layer, pos0), (size_t)n * e->vd * sizeof(float));
    memcpy(present, pr_at(e, layer, pos0), (size_t)n * H);
    if (how == 6) { /* present flags: some left unwritten, or odd non-zero values */
        unsigned at = take();
        if (at & 1u) { /* the host's poison byte for that index */
            const unsigned char poison[4] = {0xa5, 0xa5, 0xc5, 0x7f};
            size_t i = (at >> 1) % ((unsigned)n * (unsigned)H);
            present[i] = poison[i & 3];
        } else
            for (int i = 0; i < n * H; i++)
                present[i] = present[i] ? (uint8_t)(at | 1u) : 0;
    } else if (how == 7) { /* present flags past the end, inside the guard */
        unsigned at = take();
        for (unsigned i = 0; i <= at % (GUARD_FLOATS * 4); i++)
            present[(size_t)n * H + i] = 1;
    } else
        misbehave_out(how, k, (size_t)n * e->kd * 4, v, (size_t)n * e->vd * 4);
    return KVV_PLUGIN_OK;
}

static int f_kv_evict(kvv_plugin_engine *e, int layer, int pos, int head, kvv_plugin_error *err)
{
    stale_write(CALL_EVICT);
    if (layer < -1 || layer >= g_dims.n_layer || pos < 0 || pos >= e->n_ctx || head < -1 ||
        head >= g_dims.n_head_kv)
        return usage(err, "kv_evict: layer, position or head out of range");
    if (take() == 1)
        return fail(err, "kv_evict: scripted failure");
    for (int l = 0; l < g_dims.n_layer; l++)
        for (int h = 0; h < g_dims.n_head_kv; h++)
            if ((layer < 0 || l == layer) && (head < 0 || h == head))
                pr_at(e, l, pos)[h] = 0;
    return KVV_PLUGIN_OK;
}

static int f_kv_write(kvv_plugin_engine *e, int layer, int pos, const void *k, const void *v,
                      kvv_plugin_error *err)
{
    stale_write(CALL_WRITE);
    if (layer < 0 || layer >= g_dims.n_layer || pos < 0 || pos >= e->n_ctx || !k || !v)
        return usage(err, "kv_write: layer or position out of range");
    if (take() == 1)
        return fail(err, "kv_write: scripted failure");
    memcpy(k_at(e, layer, pos), k, (size_t)e->kd * sizeof(float));
    memcpy(v_at(e, layer, pos), v, (size_t)e->vd * sizeof(float));
    memset(pr_at(e, layer, pos), 1, (size_t)g_dims.n_head_kv);
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ the table */

static kvv_plugin_table g_table;

KVV_PLUGIN_EXPORT const kvv_plugin_table *kvv_plugin_entry(void)
{
    static const char *const names[] = {"", "sixteen-chars-xx", "bad name", NULL, "\xff",
                                        "fuzzed"};
    kvv_plugin_table *t = &g_table;
    memset(t, 0, sizeof *t);
    t->abi_major = KVV_PLUGIN_ABI_MAJOR;
    t->abi_minor = KVV_PLUGIN_ABI_MINOR;
    t->struct_size = sizeof *t;
    t->name = "fuzzed";
    t->version = "1.0";
    t->devices = "cpu";
    t->options_help = NULL;
    t->open = f_open;
    t->close = f_close;
    t->forward = f_forward;
    t->kv_clear = f_kv_clear;
    t->describe = f_describe;
    t->kv_from_residual = f_kv_from_residual;
    t->kv_read = f_kv_read;
    t->kv_evict = f_kv_evict;
    t->kv_write = f_kv_write;
    unsigned how = take();
    if (how & 1u)
        return NULL;
    if (how & 2u)
        t->abi_major = take();
    if (how & 4u) /* a smaller or a larger table (the host reads only what it knows) */
        t->struct_size = (take() & 1u) ? (uint32_t)(take() * 4u) % sizeof *t
                                       : (uint32_t)sizeof *t + take();
    if (how & 8u)
        t->name = names[take() % 6];
    if (how & 16u)
        t->devices = (take() & 1u) ? NULL : "";
    if (how & 32u) { /* required slots */
        unsigned m = take();
        t->open = (m & 1u) ? NULL : t->open;
        t->close = (m & 2u) ? NULL : t->close;
        t->forward = (m & 4u) ? NULL : t->forward;
        t->kv_clear = (m & 8u) ? NULL : t->kv_clear;
    }
    if (how & 64u) { /* optional slots */
        unsigned m = take();
        t->describe = (m & 1u) ? NULL : t->describe;
        t->kv_from_residual = (m & 2u) ? NULL : t->kv_from_residual;
        t->kv_read = (m & 4u) ? NULL : t->kv_read;
        t->kv_evict = (m & 8u) ? NULL : t->kv_evict;
        t->kv_write = (m & 16u) ? NULL : t->kv_write;
    }
    if (how & 128u)
        t->version = NULL;
    return t;
}

KVV_PLUGIN_EXPORT void kvv_fuzz_plugin_script(const kvv_fuzz_dims *d, const uint8_t *data,
                                              size_t size)
{
    g_dims = *d;
    g_script = data;
    g_size = size;
    g_at = 0;
    g_kept_logits = g_kept_k = NULL;
}

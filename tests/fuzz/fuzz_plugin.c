/*
 * fuzz_plugin.c — libFuzzer target: a plugin engine returning arbitrary
 * tables and buffers (engine/plugin/: the loader, the vtable, the staging
 * guards, the hook relay and the cache mirror).
 *
 * The plugin is tests/fuzz/plugin/fuzzed_plugin.so, found beside this
 * executable (build/tests/fuzz/ for the replay, build-fuzz/ for libFuzzer).
 * Input byte 0 picks the engine options (host-planted controls, threads,
 * micro-batch, a residual hook that writes without residual-write); the
 * rest is the plugin's script (fuzzed_plugin.c): zero bytes and the end of
 * the input mean "behave", other bytes pick a misbehaviour. Per input the
 * engine "plugin:PATH" is opened on a synthetic llama-tiny (F32, written
 * once to a temp file, removed once read) and, when it opens, driven
 * through every host path: forward with every declared hook and logits
 * LAST / ALL / NONE, logits NULL, the cache mirror (read, evict a position
 * and a head, change a row), forward over cached positions,
 * kv_from_residual (valid and invalid layer), reset, describe; then closed.
 *
 * Properties (a broken one calls abort()):
 *   - every call returns KVV_OK or an error status with a message;
 *   - the hooks the host relays get arguments inside the ABI's contract
 *     (layer, rows, positions of the call, keys, heads, buffers), whatever
 *     the plugin passed;
 *   - after a successful forward every logit asked for was written and is
 *     finite; under KVV_LOGITS_NONE the caller's buffer is not touched;
 *     a successful kv_from_residual wrote every K/V value, all finite;
 *   - the mirror holds presence flags 0 or 1 only.
 * No output on stdout; KVV_PLUGIN_VERBOSE is unset so the host logs only
 * the plugin's errors and warnings. KVV_FUZZ_TRACE=1 prints each call's
 * status on stderr (to see what a seed reaches).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "model/arch.h"
#include "model/synth.h"
#include "tests/fuzz/plugin/fuzzed_plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_CTX 16

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_plugin: property broken: %s\n", what);
        abort();
    }
}

/* ------------------------------------------------------------ once */

static kvv_model *g_model;
static char g_model_path[512];
static char g_engine[1100];
static kvv_fuzz_script_fn g_script;
static kvv_fuzz_dims g_dims;
static bool g_trace; /* KVV_FUZZ_TRACE set: each call's status on stderr */

static void close_model(void)
{
    kvv_model_close(g_model);
}

static void setup(void)
{
    kvv_error err = {0};
    unsetenv("KVV_PLUGIN_VERBOSE");
    g_trace = getenv("KVV_FUZZ_TRACE") != NULL;
    kvv_synth_opts o;
    memset(&o, 0, sizeof o);
    o.shape = kvv_shape_find("llama-tiny");
    o.type = KVV_TYPE_F32;
    o.seed = 3;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_model_path, sizeof g_model_path, "%s/kvv-fuzz-plugin-%ld.gguf",
             tmp && *tmp ? tmp : "/tmp", (long)getpid());
    if (!o.shape || kvv_synth_write(&o, g_model_path, &err) ||
        kvv_model_open(g_model_path, &g_model, &err)) {
        fprintf(stderr, "fuzz_plugin: model: %s\n", err.msg);
        abort();
    }
    /* gone from the folder at once (the model is read; the plugin never
     * opens its path), so a crashing input leaves no file behind */
    remove(g_model_path);
    atexit(close_model);
    char exe[1024];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    check(len > 0, "readlink /proc/self/exe");
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    check(slash != NULL, "executable folder");
    *slash = '\0';
    char so[1060];
    snprintf(so, sizeof so, "%s/fuzzed_plugin.so", exe);
    snprintf(g_engine, sizeof g_engine, "plugin:%s", so);
    /* kept open for the process's life: the host's own dlopen of the same
     * file then finds it loaded, and the script setter stays valid */
    void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "fuzz_plugin: %s\n", dlerror());
        abort();
    }
    void *sym = dlsym(dl, KVV_FUZZ_SCRIPT_SYMBOL);
    check(sym != NULL, "the plugin exports " KVV_FUZZ_SCRIPT_SYMBOL);
    memcpy(&g_script, &sym, sizeof g_script);
    const kvv_hparams *hp = &g_model->hp;
    g_dims = (kvv_fuzz_dims){hp->n_layer, hp->n_embd,  hp->n_head, hp->n_head_kv,
                             hp->head_dim, hp->head_dim_v, hp->n_vocab};
}

/* ------------------------------------------------------------ hooks */

typedef struct {
    int n;                 /* the forward call's rows and positions */
    const int32_t *pos;
    bool write_residual;   /* the residual hook adds 0.25 to h[0] */
    volatile float sink;
} hook_ctx;

static bool call_positions(const hook_ctx *c, int n, const int32_t *pos)
{
    if (n < 1 || n > c->n || !pos)
        return false;
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && pos[i] <= pos[i - 1])
            return false;
        while (j < c->n && c->pos[j] < pos[i])
            j++;
        if (j == c->n || c->pos[j] != pos[i])
            return false;
    }
    return true;
}

static bool keys_ok(int n_keys, const int32_t *key_pos)
{
    if (n_keys < 0 || n_keys > N_CTX || (n_keys > 0 && !key_pos))
        return false;
    for (int j = 0; j < n_keys; j++)
        if (key_pos[j] < 0 || key_pos[j] >= N_CTX || (j > 0 && key_pos[j] <= key_pos[j - 1]))
            return false;
    return true;
}

/* Read every value a hook may read (AddressSanitizer checks the sizes). */
static void touch(hook_ctx *c, const float *x, size_t n)
{
    float s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    c->sink = s;
}

static void h_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    hook_ctx *c = u;
    check(layer >= 0 && layer <= g_dims.n_layer && call_positions(c, n, pos) && h,
          "residual hook arguments");
    touch(c, h, (size_t)n * g_dims.n_embd);
    if (c->write_residual)
        h[0] += 0.25f;
}

static void h_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    hook_ctx *c = u;
    check(layer >= 0 && layer < g_dims.n_layer && call_positions(c, n, pos) && k && v,
          "kv hook arguments");
    touch(c, k, (size_t)n * g_dims.n_head_kv * g_dims.head_dim);
    touch(c, v, (size_t)n * g_dims.n_head_kv * g_dims.head_dim_v);
}

static void h_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                   const int32_t *key_pos, const float *p)
{
    hook_ctx *c = u;
    check(layer >= 0 && layer < g_dims.n_layer && call_positions(c, n, pos) &&
              keys_ok(n_keys, key_pos) && (p || n_keys == 0),
          "attn hook arguments");
    touch(c, p, (size_t)n * g_dims.n_head * n_keys);
}

static void h_attn_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    hook_ctx *c = u;
    check(layer >= 0 && layer < g_dims.n_layer && call_positions(c, n, pos) && o,
          "attn_out hook arguments");
    touch(c, o, (size_t)n * g_dims.n_head * g_dims.head_dim_v);
}

static void h_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                     const int32_t *key_pos, uint8_t *keep)
{
    hook_ctx *c = u;
    check(layer >= 0 && layer < g_dims.n_layer && call_positions(c, 1, &qpos) && head >= 0 &&
              head < g_dims.n_head && q && keys_ok(n_keys, key_pos) && (keep || n_keys == 0),
          "select hook arguments");
    touch(c, q, (size_t)g_dims.head_dim);
    if (n_keys > 1)
        keep[n_keys - 1] = keep[n_keys - 1] ? 1 : 0;
}

/* ------------------------------------------------------------ calls */

static void check_status(kvv_status s, const kvv_error *err)
{
    if (g_trace)
        fprintf(stderr, "fuzz_plugin: status %d %s\n", (int)s, s ? err->msg : "");
    check(s == KVV_OK || (err->msg[0] != '\0' && s > KVV_OK && s <= KVV_ERR_ENGINE),
          "an error status comes with a message");
}

static float g_logits[N_CTX * 4096];

static kvv_status forward(kvv_engine *e, int p0, int n, kvv_logits_mode lm, bool hooks_on,
                          bool write_residual, bool null_logits)
{
    unsigned caps = kvv_engine_caps(e);
    int32_t tok[N_CTX], pos[N_CTX];
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)((p0 + i) * 37 % g_dims.n_vocab);
        pos[i] = p0 + i;
    }
    hook_ctx c = {.n = n, .pos = pos, .write_residual = write_residual};
    kvv_hooks h = {.user = &c};
    if (hooks_on) {
        h.residual = (caps & KVV_ENGINE_CAP_RESIDUAL_READ) ? h_residual : NULL;
        h.kv = (caps & KVV_ENGINE_CAP_KV_HOOK) ? h_kv : NULL;
        h.attn = (caps & KVV_ENGINE_CAP_ATTN) ? h_attn : NULL;
        h.attn_out = (caps & KVV_ENGINE_CAP_ATTN_OUT) ? h_attn_out : NULL;
        h.select = (caps & KVV_ENGINE_CAP_SELECT) ? h_select : NULL;
    }
    size_t V = (size_t)g_dims.n_vocab;
    size_t n_out = lm == KVV_LOGITS_ALL ? (size_t)n * V : lm == KVV_LOGITS_LAST ? V : 0;
    for (size_t i = 0; i < (size_t)n * V; i++)
        g_logits[i] = NAN; /* not finite: what is not written shows */
    kvv_error err = {0};
    kvv_status s = kvv_engine_forward(e, n, tok, pos, hooks_on ? &h : NULL, lm,
                                      null_logits ? NULL : g_logits, &err);
    check_status(s, &err);
    if (null_logits && lm != KVV_LOGITS_NONE)
        check(s != KVV_OK, "forward with logits NULL and a mode that writes them fails");
    if (s == KVV_OK && !null_logits) {
        for (size_t i = 0; i < n_out; i++)
            check(isfinite(g_logits[i]), "every logit of a successful forward written and finite");
        for (size_t i = n_out; i < (size_t)n * V; i++)
            check(isnan(g_logits[i]), "nothing written past the logits asked for");
    }
    return s;
}

static void mirror_check(kvv_engine *e)
{
    kvv_kv_cache *m = kvv_engine_cache(e);
    if (!(kvv_engine_caps(e) & KVV_ENGINE_CAP_KV_READ)) {
        check(m == NULL, "no mirror without kv-read");
        return;
    }
    check(m != NULL && m->n_pos >= 0 && m->n_pos <= N_CTX, "the mirror exists and fits");
    for (int l = 0; l < m->n_layer; l++) /* every position, in use or not yet */
        for (size_t i = 0; i < (size_t)m->n_ctx * (size_t)m->n_kv_head; i++)
            check(m->present[l][i] <= 1, "presence flags are 0 or 1");
}

/* Edits a policy makes: a whole position, one head, one changed row. */
static void mirror_edit(kvv_engine *e)
{
    kvv_kv_cache *m = kvv_engine_cache(e);
    if (!m || m->n_pos < 4)
        return;
    for (int l = 0; l < m->n_layer; l++)
        kvv_kv_cache_evict(m, l, 1, -1);
    kvv_kv_cache_evict(m, 0, 2, 0);
    if (m->present[m->n_layer - 1][3 * (size_t)m->n_kv_head]) {
        unsigned char *k = kvv_kv_cache_k_ptr(m, m->n_layer - 1, 3);
        k[0] ^= 1;
    }
}

static void from_residual(kvv_engine *e, int layer)
{
    enum { N = 3 };
    int kd = g_dims.n_head_kv * g_dims.head_dim, vd = g_dims.n_head_kv * g_dims.head_dim_v;
    static float h[N * 4096], k[N * 4096], v[N * 4096];
    int32_t pos[N] = {0, 1, 2};
    for (int i = 0; i < N * g_dims.n_embd; i++)
        h[i] = (float)(i % 13) * 0.125f - 0.75f;
    for (int i = 0; i < N * kd; i++)
        k[i] = NAN;
    for (int i = 0; i < N * vd; i++)
        v[i] = NAN;
    kvv_error err = {0};
    kvv_status s = kvv_engine_kv_from_residual(e, layer, N, h, pos, k, v, &err);
    check_status(s, &err);
    if (layer < 0 || layer >= g_dims.n_layer)
        check(s != KVV_OK, "kv_from_residual refuses a layer out of range");
    if (s == KVV_OK) {
        for (int i = 0; i < N * kd; i++)
            check(isfinite(k[i]), "kv_from_residual: every K written and finite");
        for (int i = 0; i < N * vd; i++)
            check(isfinite(v[i]), "kv_from_residual: every V written and finite");
    }
}

static void drive(kvv_engine *e, bool write_residual)
{
    unsigned caps = kvv_engine_caps(e);
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    check(memchr(d.version, 0, sizeof d.version) && memchr(d.kernels, 0, sizeof d.kernels),
          "describe's strings are terminated");
    check(d.n_threads >= 1 && d.n_ubatch >= 0, "describe: threads >= 1, micro-batch >= 0");
    kvv_logits_mode lm = (caps & KVV_ENGINE_CAP_LOGITS_ALL) ? KVV_LOGITS_ALL : KVV_LOGITS_LAST;
    forward(e, 0, 6, lm, true, write_residual, false);
    mirror_check(e);
    forward(e, 6, 2, KVV_LOGITS_NONE, true, false, false);
    forward(e, 8, 1, KVV_LOGITS_LAST, false, false, true);
    mirror_check(e);
    mirror_edit(e);
    forward(e, 8, 1, KVV_LOGITS_LAST, true, false, false);
    mirror_check(e);
    forward(e, 7, 3, KVV_LOGITS_LAST, false, false, false); /* over cached positions */
    mirror_check(e);
    from_residual(e, 0);
    from_residual(e, g_dims.n_layer - 1);
    from_residual(e, g_dims.n_layer);
    kvv_engine_reset(e);
    forward(e, 0, 2, KVV_LOGITS_LAST, true, false, false);
    mirror_check(e);
    kvv_engine_describe(e, &d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_model)
        setup();
    unsigned how = size ? data[0] : 0;
    g_script(&g_dims, size ? data + 1 : data, size ? size - 1 : 0);
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = g_engine;
    o.n_ctx = N_CTX;
    o.control = ((how & 1u) ? KVV_CTL_KV_REVERSED_SUM : 0u) |
                ((how & 2u) ? KVV_CTL_PERTURB_WEIGHT : 0u);
    o.n_ubatch = (int)(how >> 3 & 3u);
    o.n_threads = (how & 32u) ? 2 : 1;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    kvv_status s = kvv_engine_open(g_model, &o, &e, &err);
    check_status(s, &err);
    check((s == KVV_OK) == (e != NULL), "open gives an engine or an error, never both");
    if (e) {
        drive(e, (how & 4u) != 0);
        kvv_engine_close(e);
    }
    return 0;
}

/*
 * example_plugin.c — the example plugin: kvverify's reference engine behind
 * the plugin ABI (include/kvverify/engine_plugin.h).
 *
 * It talks to the host only through that header; its implementation is the
 * reference engine (reference/ref.h over model/arch.h), linked into the
 * shared object as a private copy. Forward, every hook, K/V read-back,
 * kv_from_residual and logits therefore carry exactly the reference engine's
 * bits, and a check run through it must give the same figures as
 * `--engine ref` — the proof that the ABI carries every bit. It declares
 * every capability but threads (the reference engine is single-threaded),
 * plants the reference engine's negative controls itself, and has options
 * that make it a fault injector for tests of the host:
 *
 *   native_controls=1|0   plant KVV_PLUGIN_CTL_* in the reference engine (1,
 *                         default) or leave them to the host (0)
 *   without=CAP[,CAP...]  do not declare these capabilities (names as in
 *                         docs/plugins.md: residual-write, kv-read, ...)
 *   fault=none|recompute|decode|kv-read
 *                         be wrong on purpose: flip the lowest bit of
 *                         kv_from_residual's K[0] at layer 0 / of logit 0 of
 *                         every one-token forward / of the first K element
 *                         kv_read returns at layer 0
 *   fault=segv|abort|hang|nan|short|wrong-size|leak
 *                         break the way engines break, to prove kvverify's
 *                         isolation and buffer guards (docs/isolation.md):
 *                         a NULL store, abort(), an endless wait, a NaN
 *                         output, an output left short, a write past the
 *                         declared end, a host pointer written after its
 *                         call returned (at the plugin's next call)
 *   fault=seq-leak        (sequences) after a decode call carrying several
 *                         sequences, each one's layer-0 K/V row at the last
 *                         position it shares with the next sequence of the
 *                         call is replaced by that sequence's: its attention
 *                         then reads another request's position (the
 *                         negative control of the batch check's isolation)
 *   fault=op:NAME:LN      plant an error in one op: op NAME (docs/ops.md) of
 *                         layer N is 1% off in one element per row, inside
 *                         the pass (example_ops.h); `compare --ops` must
 *                         name exactly it
 *   fault_at=forward|kv|kv_from_residual
 *                         the call that breaks (default forward; kv = kv_read)
 *   fault_layer=N         only at layer N (forward: inside the pass, after
 *                         the residual hook of layer N — the host's
 *                         breadcrumb then names the layer); default any
 *   fault_pos=N           only in a call covering position N; default any
 *
 * Sequences (ABI 1.1, example_seqs.c): up to 64, each a reference engine of
 * its own opened on first use; a decode call runs each sequence's tokens
 * through its engine, which gives the bits of the same tokens run alone.
 *
 * The micro-batch size (params.n_ubatch) splits every forward into calls of
 * that many tokens, which the reference engine answers with the same bits.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvverify/engine_plugin.h"
#include "model/arch.h"
#include "plugins/example/example_impl.h"
#include "plugins/example/example_ops.h"
#include "reference/ref.h"

#include <signal.h>
#include <unistd.h>

static const char *const fault_names[N_FAULTS] = {
    "none", "recompute", "decode", "kv-read", "segv", "abort", "hang", "nan", "short",
    "wrong-size", "leak", "seq-leak"};
enum { AT_FORWARD, AT_KV, AT_RECOMPUTE, N_AT };
static const char *const at_names[N_AT] = {"forward", "kv", "kv_from_residual"};

int kvv_example_fail(kvv_plugin_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

int kvv_example_from_status(kvv_status s, const kvv_error *e, kvv_plugin_error *err)
{
    static const int map[] = {
        [KVV_OK] = KVV_PLUGIN_OK,
        [KVV_ERR_IO] = KVV_PLUGIN_ERR_IO,
        [KVV_ERR_FORMAT] = KVV_PLUGIN_ERR_FORMAT,
        [KVV_ERR_USAGE] = KVV_PLUGIN_ERR_USAGE,
        [KVV_ERR_UNSUPPORTED] = KVV_PLUGIN_ERR_UNSUPPORTED,
        [KVV_ERR_NOMEM] = KVV_PLUGIN_ERR_NOMEM,
        [KVV_ERR_INTERNAL] = KVV_PLUGIN_ERR_INTERNAL,
    };
    if (s == KVV_OK)
        return KVV_PLUGIN_OK;
    snprintf(err->msg, sizeof err->msg, "%s", e->msg);
    return (unsigned)s < sizeof map / sizeof map[0] ? map[s] : KVV_PLUGIN_ERR_INTERNAL;
}

static float flip_low_bit(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u ^= 1u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ------------------------------------------------------------ faults */

/* FAULT_LEAK: the host buffer kept from an earlier call is written now,
 * after that call returned (what the host's staging must catch). */
void kvv_example_leak_write(kvv_plugin_engine *e)
{
    if (e->leaked)
        memset(e->leaked, 0, 4);
    e->leaked = NULL;
}

static bool crashing(int fault)
{
    return fault == FAULT_SEGV || fault == FAULT_ABORT || fault == FAULT_HANG;
}

/* Page 0 is never mapped; volatile, so the compiler cannot see the value
 * (a literal NULL store is undefined behaviour it may remove). */
static volatile uintptr_t unmapped_address = 16;

/* The crashing faults, now. */
static void crash_now(int fault)
{
    if (fault == FAULT_SEGV) {
        /* a sanitizer's SIGSEGV handler would turn the crash into an exit */
        signal(SIGSEGV, SIG_DFL);
        *(volatile int *)unmapped_address = 1; /* a store the compiler cannot drop */
        raise(SIGSEGV);
    } else if (fault == FAULT_ABORT) {
        abort();
    } else if (fault == FAULT_HANG) {
        for (;;)
            pause();
    }
}

/* Does the fault fire in a call of kind `at` at layer (-1: not known yet)
 * covering positions p0..p1? */
static bool fires(const kvv_plugin_engine *e, int at, int layer, int p0, int p1)
{
    if (e->fault < FAULT_SEGV || e->fault_at != at)
        return false;
    if (e->fault_layer >= 0 && layer >= 0 && layer != e->fault_layer)
        return false;
    return e->fault_pos < 0 || (e->fault_pos >= p0 && e->fault_pos <= p1);
}

/* Inside a forward pass: the residual hook of fault_layer (after the
 * host's, so the host's breadcrumb holds the layer) crashes. */
typedef struct {
    const kvv_plugin_engine *e;
    kvv_hooks inner;
} fault_hook;

static void fault_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    const fault_hook *f = u;
    if (f->inner.residual)
        f->inner.residual(f->inner.user, layer, n, pos, h);
    if (layer == f->e->fault_layer && fires(f->e, AT_FORWARD, layer, pos[0], pos[n - 1]))
        crash_now(f->e->fault);
}

static void fault_kv(void *u, int layer, int n, const int32_t *pos, const float *k,
                     const float *v)
{
    const fault_hook *f = u;
    f->inner.kv(f->inner.user, layer, n, pos, k, v);
}

static void fault_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                       const int32_t *key_pos, const float *p)
{
    const fault_hook *f = u;
    f->inner.attn(f->inner.user, layer, n, pos, n_keys, key_pos, p);
}

static void fault_attn_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    const fault_hook *f = u;
    f->inner.attn_out(f->inner.user, layer, n, pos, o);
}

static void fault_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                         const int32_t *key_pos, uint8_t *keep)
{
    const fault_hook *f = u;
    f->inner.select(f->inner.user, layer, qpos, head, q, n_keys, key_pos, keep);
}

/* ------------------------------------------------------------ options */

static const struct { const char *name; uint64_t cap; } cap_names[] = {
    {"logits-all", KVV_PLUGIN_CAP_LOGITS_ALL},
    {"residual-read", KVV_PLUGIN_CAP_RESIDUAL_READ},
    {"residual-write", KVV_PLUGIN_CAP_RESIDUAL_WRITE},
    {"kv-hook", KVV_PLUGIN_CAP_KV_HOOK},
    {"kv-read", KVV_PLUGIN_CAP_KV_READ},
    {"kv-from-residual", KVV_PLUGIN_CAP_KV_FROM_RESIDUAL},
    {"attn", KVV_PLUGIN_CAP_ATTN},
    {"attn-out", KVV_PLUGIN_CAP_ATTN_OUT},
    {"select", KVV_PLUGIN_CAP_SELECT},
    {"kv-evict", KVV_PLUGIN_CAP_KV_EVICT},
    {"kv-evict-head", KVV_PLUGIN_CAP_KV_EVICT_HEAD},
    {"kv-write", KVV_PLUGIN_CAP_KV_WRITE},
    {"ubatch", KVV_PLUGIN_CAP_UBATCH},
    {"overwrite", KVV_PLUGIN_CAP_OVERWRITE},
    {"seqs", KVV_PLUGIN_CAP_SEQS},
    {"op-taps", KVV_PLUGIN_CAP_OP_TAPS},
};
#define N_CAP_NAMES (sizeof cap_names / sizeof cap_names[0])
#define ALL_CAPS                                                                          \
    (KVV_PLUGIN_CAP_LOGITS_ALL | KVV_PLUGIN_CAP_RESIDUAL_READ |                           \
     KVV_PLUGIN_CAP_RESIDUAL_WRITE | KVV_PLUGIN_CAP_KV_HOOK | KVV_PLUGIN_CAP_KV_READ |    \
     KVV_PLUGIN_CAP_KV_FROM_RESIDUAL | KVV_PLUGIN_CAP_ATTN | KVV_PLUGIN_CAP_ATTN_OUT |    \
     KVV_PLUGIN_CAP_SELECT | KVV_PLUGIN_CAP_KV_EVICT | KVV_PLUGIN_CAP_KV_EVICT_HEAD |     \
     KVV_PLUGIN_CAP_KV_WRITE | KVV_PLUGIN_CAP_UBATCH | KVV_PLUGIN_CAP_OVERWRITE |         \
     KVV_PLUGIN_CAP_SEQS)

/* "residual-write,kv-read" -> cap bits; false on an unknown name. */
static bool parse_caps(const char *list, uint64_t *out, kvv_plugin_error *err)
{
    *out = 0;
    while (*list) {
        size_t len = strcspn(list, ",");
        size_t i = 0;
        while (i < N_CAP_NAMES &&
               !(strlen(cap_names[i].name) == len && strncmp(cap_names[i].name, list, len) == 0))
            i++;
        if (i == N_CAP_NAMES) {
            snprintf(err->msg, sizeof err->msg, "option without: unknown capability '%.*s'",
                     (int)len, list);
            return false;
        }
        *out |= cap_names[i].cap;
        list += len + (list[len] == ',');
    }
    return true;
}

typedef struct {
    bool native_controls;
    uint64_t without;
    int fault;
    int fault_at, fault_layer, fault_pos;
    const char *op_fault;  /* fault=op:NAME:LN, parsed once the model is read */
} options;

/* index of v in names[n], or -1 */
static int name_index(const char *const *names, int n, const char *v)
{
    for (int j = 0; j < n; j++)
        if (strcmp(v, names[j]) == 0)
            return j;
    return -1;
}

/* A non-negative decimal option value into *out; false when it is not one. */
static bool parse_index(const char *v, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < 0 || x > 1 << 30)
        return false;
    *out = (int)x;
    return true;
}

static int parse_options(const kvv_plugin_params *p, options *o, kvv_plugin_error *err)
{
    o->native_controls = true;
    o->without = 0;
    o->fault = FAULT_NONE;
    o->fault_at = AT_FORWARD;
    o->fault_layer = o->fault_pos = -1;
    o->op_fault = NULL;
    for (int i = 0; i < p->n_options; i++) {
        const char *kv = p->options[i], *eq = strchr(kv, '=');
        const char *v = eq ? eq + 1 : "";
        size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
        if (klen == 15 && strncmp(kv, "native_controls", klen) == 0 &&
            (strcmp(v, "0") == 0 || strcmp(v, "1") == 0))
            o->native_controls = v[0] == '1';
        else if (klen == 7 && strncmp(kv, "without", klen) == 0) {
            if (!parse_caps(v, &o->without, err))
                return KVV_PLUGIN_ERR_USAGE;
        } else if (klen == 5 && strncmp(kv, "fault", klen) == 0 && strncmp(v, "op:", 3) == 0) {
            o->op_fault = v;
        } else if (klen == 5 && strncmp(kv, "fault", klen) == 0) {
            if ((o->fault = name_index(fault_names, N_FAULTS, v)) < 0)
                return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE,
                            "option fault: '%s' is not none, recompute, decode, kv-read, segv, "
                            "abort, hang, nan, short, wrong-size, leak or seq-leak", v);
        } else if (klen == 8 && strncmp(kv, "fault_at", klen) == 0) {
            if ((o->fault_at = name_index(at_names, N_AT, v)) < 0)
                return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE,
                            "option fault_at: '%s' is not forward, kv or kv_from_residual", v);
        } else if (klen == 11 && strncmp(kv, "fault_layer", klen) == 0) {
            if (!parse_index(v, &o->fault_layer))
                return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE, "option fault_layer: '%s' is not a layer", v);
        } else if (klen == 9 && strncmp(kv, "fault_pos", klen) == 0) {
            if (!parse_index(v, &o->fault_pos))
                return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE, "option fault_pos: '%s' is not a position",
                            v);
        } else
            return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE,
                        "unknown engine option '%s' (known: native_controls=0|1, "
                        "without=CAP[,CAP], fault=none|recompute|decode|kv-read|segv|abort|hang|"
                        "nan|short|wrong-size|leak|seq-leak, fault_at=forward|kv|kv_from_residual, "
                        "fault_layer=N, fault_pos=N)",
                        kv);
    }
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ open/close */

static void ex_close(kvv_plugin_engine *e)
{
    if (!e)
        return;
    kvv_example_seqs_close(e);
    kvv_ref_close(e->ref);
    kvv_model_close(e->model);
    free(e);
}

static int ex_open(const kvv_plugin_host *host, const kvv_plugin_params *p,
                   kvv_plugin_engine **out, kvv_plugin_info *info, kvv_plugin_error *err)
{
    (void)host;
    *out = NULL;
    options o;
    int code = parse_options(p, &o, err);
    if (code)
        return code;
    if (p->n_seq_max > KVV_EXAMPLE_MAX_SEQS)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                                "open: %d sequences asked for, this plugin serves %d",
                                p->n_seq_max, KVV_EXAMPLE_MAX_SEQS);
    if (p->device[0] && strcmp(p->device, "cpu") != 0)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE, "unknown device '%s' (this plugin has: cpu)",
                    p->device);
    if (strcmp(p->mode, "fast") == 0)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE,
                    "mode '%s' not offered: the reference engine runs exact (which is also "
                    "batch-invariant) only",
                    p->mode);
    kvv_plugin_engine *e = calloc(1, sizeof *e);
    if (!e)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_NOMEM, "open: out of memory for %s", p->model_path);
    kvv_error kerr = {0};
    kvv_status s = kvv_model_open(p->model_path, &e->model, &kerr);
    if (!s) {
        kvv_ref_opts ro = kvv_ref_opts_default();
        ro.cache_type = (kvv_cache_type)p->cache_type;
        ro.n_ctx = p->n_ctx;
        if (o.native_controls)
            ro.control = ((p->controls & KVV_PLUGIN_CTL_KV_REVERSED_SUM) ? KVV_CTL_KV_REVERSED_SUM
                                                                         : 0u) |
                         ((p->controls & KVV_PLUGIN_CTL_PERTURB_WEIGHT) ? KVV_CTL_PERTURB_WEIGHT
                                                                        : 0u);
        e->ref_opts = ro;
        s = kvv_ref_open(e->model, &ro, &e->ref, &kerr);
        e->seq[0] = e->ref;
    }
    if (s) {
        ex_close(e);
        return kvv_example_from_status(s, &kerr, err);
    }
    const kvv_hparams *hp = &e->model->hp;
    e->n_ubatch = p->n_ubatch > 0 ? p->n_ubatch : 0;
    e->fault = o.fault;
    e->fault_at = o.fault_at;
    e->fault_layer = o.fault_layer;
    e->fault_pos = o.fault_pos;
    e->ops.op = -1;
    if (o.op_fault && ex_ops_parse_fault(o.op_fault, hp, &e->ops, err->msg, sizeof err->msg) < 0) {
        ex_close(e);
        return KVV_PLUGIN_ERR_USAGE;
    }
    e->caps = ALL_CAPS & ~o.without;
    if (info->struct_size >= offsetof(kvv_plugin_info, ops) + sizeof info->ops &&
        !(o.without & KVV_PLUGIN_CAP_OP_TAPS)) { /* a 1.1 host */
        e->caps |= KVV_PLUGIN_CAP_OP_TAPS;
        info->ops = ex_ops_mask(hp);
    }
    info->caps = e->caps;
    info->n_layer = hp->n_layer;
    info->n_embd = hp->n_embd;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->head_dim = hp->head_dim;
    info->head_dim_v = hp->head_dim_v;
    info->n_vocab = hp->n_vocab;
    info->n_ctx = kvv_ref_cache(e->ref)->n_ctx;
    info->cache_type = p->cache_type;
    info->n_threads = 1;
    info->n_ubatch = e->n_ubatch;
    info->controls = o.native_controls ? p->controls : 0u;
    info->n_seq_max = KVV_EXAMPLE_MAX_SEQS;
    info->kv_unified = 0; /* a cache per sequence */
    *out = e;
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ forward */

/* The output faults of a forward on its count logits (computed into
 * `computed`, which is the host's buffer `out` except for FAULT_SHORT). */
static void forward_output_fault(kvv_plugin_engine *e, float *out, float *computed, size_t count)
{
    switch (e->fault) {
    case FAULT_NAN:
        out[0] = NAN;
        break;
    case FAULT_SHORT: /* the last half left unwritten */
        memcpy(out, computed, (count - count / 2) * sizeof *out);
        free(computed);
        break;
    case FAULT_WRONG_SIZE: /* one float past the declared end */
        out[count] = 0.0f;
        break;
    case FAULT_LEAK:
        e->leaked = (unsigned char *)out;
        break;
    }
}

static int ex_forward(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                      const kvv_plugin_hooks *ph, int lm, float *logits, kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    fault_hook fh = {e, {0}};
    if (ph) { /* the same signatures: the host's hooks pass straight through */
        fh.inner.user = ph->user;
        fh.inner.residual = ph->residual;
        fh.inner.kv = ph->kv;
        fh.inner.attn = ph->attn;
        fh.inner.attn_out = ph->attn_out;
        fh.inner.select = ph->select;
    }
    kvv_hooks h = fh.inner;
    const bool fire = fires(e, AT_FORWARD, -1, pos[0], pos[n - 1]);
    if (fire && crashing(e->fault) && e->fault_layer < 0)
        crash_now(e->fault);
    if (fire && crashing(e->fault)) { /* at fault_layer, inside the pass */
        h.user = &fh;
        h.residual = fault_residual;
        h.kv = fh.inner.kv ? fault_kv : NULL;
        h.attn = fh.inner.attn ? fault_attn : NULL;
        h.attn_out = fh.inner.attn_out ? fault_attn_out : NULL;
        h.select = fh.inner.select ? fault_select : NULL;
    }
    ex_ops_hooks(&e->ops, e->caps & KVV_PLUGIN_CAP_OP_TAPS ? ph : NULL, &h);
    const bool any_hook = h.residual || h.kv || h.attn || h.attn_out || h.select || h.op;
    const int V = e->model->hp.n_vocab;
    const size_t count = !logits ? 0 : lm == KVV_PLUGIN_LOGITS_ALL ? (size_t)n * V
                                     : lm == KVV_PLUGIN_LOGITS_LAST ? (size_t)V : 0;
    const bool out_fault = fire && count && !crashing(e->fault);
    float *host = logits;
    if (out_fault && e->fault == FAULT_SHORT && !(logits = malloc(count * sizeof *logits)))
        return kvv_example_fail(err, KVV_PLUGIN_ERR_NOMEM, "forward: out of memory");
    const int step = e->n_ubatch > 0 ? e->n_ubatch : n;
    kvv_error kerr = {0};
    for (int t0 = 0; t0 < n; t0 += step) {
        int m = n - t0 < step ? n - t0 : step;
        bool last = t0 + m == n;
        /* LAST: only the final piece writes its last row; ALL: rows in order */
        kvv_logits_mode plm = lm == KVV_PLUGIN_LOGITS_ALL ? KVV_LOGITS_ALL
                              : lm == KVV_PLUGIN_LOGITS_LAST && last ? KVV_LOGITS_LAST
                                                                     : KVV_LOGITS_NONE;
        float *out = plm == KVV_LOGITS_ALL ? logits + (size_t)t0 * V
                     : plm == KVV_LOGITS_LAST ? logits : NULL;
        kvv_status s = kvv_ref_forward(e->ref, m, tokens + t0, pos + t0, any_hook ? &h : NULL,
                                       plm, out, &kerr);
        if (s) {
            if (logits != host)
                free(logits);
            return kvv_example_from_status(s, &kerr, err);
        }
    }
    if (out_fault)
        forward_output_fault(e, host, logits, count);
    if (e->fault == FAULT_DECODE && n == 1 && logits && lm != KVV_PLUGIN_LOGITS_NONE)
        logits[0] = flip_low_bit(logits[0]);
    return KVV_PLUGIN_OK;
}

static int ex_kv_from_residual(kvv_plugin_engine *e, int layer, int n, const float *h,
                               const int32_t *pos, float *k, float *v, kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    const bool fire = fires(e, AT_RECOMPUTE, layer, pos[0], pos[n - 1]);
    if (fire)
        crash_now(e->fault);
    const kvv_hparams *hp = &e->model->hp;
    size_t kn = (size_t)n * hp->n_head_kv * hp->head_dim;
    size_t vn = (size_t)n * hp->n_head_kv * hp->head_dim_v;
    float *vout = v;
    if (fire && e->fault == FAULT_SHORT && !(vout = malloc(vn * sizeof *vout)))
        return kvv_example_fail(err, KVV_PLUGIN_ERR_NOMEM, "kv_from_residual: out of memory");
    kvv_error kerr = {0};
    kvv_status s = kvv_ref_kv_from_residual(e->ref, layer, n, h, pos, k, vout, &kerr);
    if (!s && e->fault == FAULT_RECOMPUTE && layer == 0)
        k[0] = flip_low_bit(k[0]);
    if (!s && fire && e->fault == FAULT_NAN)
        k[0] = NAN;
    if (!s && fire && e->fault == FAULT_WRONG_SIZE)
        k[kn] = 0.0f; /* one float past the declared end */
    if (!s && fire && e->fault == FAULT_LEAK)
        e->leaked = (unsigned char *)k;
    if (vout != v) { /* FAULT_SHORT: the last V element left unwritten */
        memcpy(v, vout, (vn - 1) * sizeof *v);
        free(vout);
    }
    return kvv_example_from_status(s, &kerr, err);
}

/* ------------------------------------------------------------ the cache */

static size_t elem_size(const kvv_kv_cache *c)
{
    return c->type == KVV_CACHE_F32 ? 4 : 2;
}

/* layer -1 (every layer) only where all_layers allows it */
static int check_pos(const kvv_kv_cache *c, int layer, bool all_layers, int p0, int n,
                     kvv_plugin_error *err)
{
    if (layer < (all_layers ? -1 : 0) || layer >= c->n_layer || p0 < 0 || n < 1 ||
        p0 + n > c->n_ctx) {
        snprintf(err->msg, sizeof err->msg, "cache: layer %d positions %d..%d out of range",
                 layer, p0, p0 + n - 1);
        return KVV_PLUGIN_ERR_USAGE;
    }
    return KVV_PLUGIN_OK;
}

int kvv_example_kv_read(kvv_plugin_engine *e, kvv_kv_cache *c, int layer, int pos0, int n,
                        void *k, void *v, uint8_t *present, kvv_plugin_error *err)
{
    int code = check_pos(c, layer, false, pos0, n, err);
    if (code)
        return code;
    if (fires(e, AT_KV, layer, pos0, pos0 + n - 1))
        crash_now(e->fault);
    size_t kb = (size_t)c->n_kv_head * c->head_dim_k * elem_size(c);
    size_t vb = (size_t)c->n_kv_head * c->head_dim_v * elem_size(c);
    memcpy(k, kvv_kv_cache_k_ptr(c, layer, pos0), (size_t)n * kb);
    memcpy(v, kvv_kv_cache_v_ptr(c, layer, pos0), (size_t)n * vb);
    const bool fire = fires(e, AT_KV, layer, pos0, pos0 + n - 1);
    size_t np = (size_t)n * c->n_kv_head;
    /* FAULT_SHORT: the last present flag left unwritten */
    memcpy(present, c->present[layer] + (size_t)pos0 * c->n_kv_head,
           fire && e->fault == FAULT_SHORT ? np - 1 : np);
    if (e->fault == FAULT_KV_READ && layer == 0 && pos0 == 0)
        ((uint8_t *)k)[0] ^= 1u;
    if (fire && e->fault == FAULT_NAN) { /* a NaN in the cache dtype */
        static const uint8_t nan32[4] = {0, 0, 0xc0, 0x7f}, nan16[2] = {0, 0x7e}, nanbf[2] = {0xc0, 0x7f};
        memcpy(k, c->type == KVV_CACHE_F32 ? nan32 : c->type == KVV_CACHE_F16 ? nan16 : nanbf,
               elem_size(c));
    }
    if (fire && e->fault == FAULT_WRONG_SIZE)
        ((uint8_t *)v)[(size_t)n * vb] = 0; /* one byte past the declared end */
    if (fire && e->fault == FAULT_LEAK)
        e->leaked = k;
    return KVV_PLUGIN_OK;
}

static int ex_kv_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
                      uint8_t *present, kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    return kvv_example_kv_read(e, kvv_ref_cache(e->ref), layer, pos0, n, k, v, present, err);
}

static int ex_kv_evict(kvv_plugin_engine *e, int layer, int pos, int head, kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    kvv_kv_cache *c = kvv_ref_cache(e->ref);
    int code = check_pos(c, layer, true, pos, 1, err);
    if (code)
        return code;
    for (int l = 0; l < c->n_layer; l++)
        if (layer < 0 || l == layer)
            kvv_kv_cache_evict(c, l, pos, head);
    return KVV_PLUGIN_OK;
}

static int ex_kv_write(kvv_plugin_engine *e, int layer, int pos, const void *k, const void *v,
                       kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    kvv_kv_cache *c = kvv_ref_cache(e->ref);
    int code = check_pos(c, layer, false, pos, 1, err);
    if (code)
        return code;
    memcpy(kvv_kv_cache_k_ptr(c, layer, pos), k, (size_t)c->n_kv_head * c->head_dim_k * elem_size(c));
    memcpy(kvv_kv_cache_v_ptr(c, layer, pos), v, (size_t)c->n_kv_head * c->head_dim_v * elem_size(c));
    memset(c->present[layer] + (size_t)pos * c->n_kv_head, 1, (size_t)c->n_kv_head);
    if (pos + 1 > c->n_pos)
        c->n_pos = pos + 1;
    return KVV_PLUGIN_OK;
}

static int ex_kv_clear(kvv_plugin_engine *e, kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    (void)err;
    kvv_kv_cache_clear(kvv_ref_cache(e->ref));
    return KVV_PLUGIN_OK;
}

static void ex_describe(kvv_plugin_engine *e, kvv_plugin_desc *d)
{
    (void)e;
    snprintf(d->mode, sizeof d->mode, "exact");
    snprintf(d->version, sizeof d->version, "kvverify reference engine (example plugin 1.0)");
    snprintf(d->device, sizeof d->device, "cpu");
    snprintf(d->variant, sizeof d->variant, "scalar");
    snprintf(d->flash_attn, sizeof d->flash_attn, "n/a");
    snprintf(d->kernels, sizeof d->kernels,
             "scalar fp32 dot=8-lane-fixed norm=f64-sum softmax=f64-sum math=kvv-kmath");
}

static const kvv_plugin_table example_table = {
    .abi_major = KVV_PLUGIN_ABI_MAJOR,
    .abi_minor = KVV_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(kvv_plugin_table),
    .name = "example",
    .version = "1.0",
    .devices = "cpu",
    .options_help = "native_controls=0|1   plant the negative controls in the engine (1)\n"
                    "without=CAP[,CAP]     leave these capabilities undeclared\n"
                    "fault=none|recompute|decode|kv-read   be wrong on purpose\n"
                    "fault=segv|abort|hang|nan|short|wrong-size|leak   break on purpose\n"
                    "fault=seq-leak        a sequence's K/V row lands in another's cache\n"
                    "fault_at=forward|kv|kv_from_residual   where (default forward)\n"
                    "fault_layer=N, fault_pos=N   only at that layer / position\n",
    .open = ex_open,
    .close = ex_close,
    .forward = ex_forward,
    .kv_clear = ex_kv_clear,
    .describe = ex_describe,
    .kv_from_residual = ex_kv_from_residual,
    .kv_read = ex_kv_read,
    .kv_evict = ex_kv_evict,
    .kv_write = ex_kv_write,
    .decode = kvv_example_decode,
    .seq_rm = kvv_example_seq_rm,
    .seq_cp = kvv_example_seq_cp,
    .kv_read_seq = kvv_example_kv_read_seq,
};

KVV_PLUGIN_EXPORT const kvv_plugin_table *kvv_plugin_entry(void)
{
    return &example_table;
}

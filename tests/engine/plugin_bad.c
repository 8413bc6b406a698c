/*
 * plugin_bad.c — plugins that break the ABI on purpose, for
 * test_plugin_host.c. Built once per kind (-DBAD_KIND="abi" ...) into
 * $O/tests/plugins/bad_KIND.so:
 *   abi    built for ABI major 2 (the host must refuse it, naming 2.0 and 1.0)
 *   slot   declares kv-read but has no kv_read slot
 *   dims   reads the model with one layer too many
 *   null   entry returns NULL
 *   nosym  exports no entry symbol at all
 *   v10    a plugin built against ABI 1.0: its table ends before the 1.1
 *          slots, and it sets caps bit 15 (unknown to 1.0, so ignored):
 *          it loads and serves one sequence
 *   seqs   ABI 1.1, declares seqs with n_seq_max 4 but has no decode slot
 *   old    a 1.0 plugin (abi_minor 0) whose caps carry bit 16 (op taps in
 *          1.1): it loads, and op taps stay unsupported
 * The engine behind it is a stub that can only fail: a bad plugin is
 * refused at open, before any forward.
 */
#include <stdio.h>
#include <string.h>

#include "kvverify/engine_plugin.h"

#if defined(BAD_abi)
#define KIND "abi"
#define MAJOR 2u
#elif defined(BAD_slot)
#define KIND "slot"
#elif defined(BAD_dims)
#define KIND "dims"
#define EXTRA_LAYER 1
#elif defined(BAD_null)
#define KIND "null"
#elif defined(BAD_v10)
#define KIND "v10"
#define MINOR 0u
#elif defined(BAD_seqs)
#define KIND "seqs"
#define MINOR 1u
#elif defined(BAD_old)
#define KIND "old"
#define MINOR 0u
#define STRAY_CAPS (1u << 16)
#elif defined(BAD_nosym)
#define KIND "nosym"
#define kvv_plugin_entry kvv_plugin_entry_misspelt
#else
#error "build with -DBAD_abi, -DBAD_slot, -DBAD_dims, -DBAD_null, -DBAD_nosym, -DBAD_v10, -DBAD_seqs or -DBAD_old"
#endif
#ifndef MAJOR
#define MAJOR KVV_PLUGIN_ABI_MAJOR
#endif
#ifndef MINOR
#define MINOR 0u
#endif
#ifndef STRAY_CAPS
#define STRAY_CAPS 0u
#endif
#ifndef EXTRA_LAYER
#define EXTRA_LAYER 0
#endif

struct kvv_plugin_engine {
    int n_head_kv;
};

static struct kvv_plugin_engine the_engine;

static int b_open(const kvv_plugin_host *host, const kvv_plugin_params *p,
                  kvv_plugin_engine **out, kvv_plugin_info *info, kvv_plugin_error *err)
{
    (void)host;
    (void)err;
    /* the stories/synthetic test model: the test passes its dimensions as options */
    int v[7] = {0};
    for (int i = 0; i < p->n_options && i < 7; i++)
        sscanf(p->options[i], "%*[^=]=%d", &v[i]);
    info->n_layer = v[0] + EXTRA_LAYER;
    info->n_embd = v[1];
    info->n_head = v[2];
    info->n_head_kv = v[3];
    the_engine.n_head_kv = v[3];
    info->head_dim = v[4];
    info->head_dim_v = v[5];
    info->n_vocab = v[6];
    info->n_ctx = p->n_ctx;
    info->cache_type = p->cache_type;
    info->n_threads = 1;
    info->caps = KVV_PLUGIN_CAP_KV_READ | STRAY_CAPS;
#if defined(BAD_v10) || defined(BAD_seqs)
    info->caps |= 1u << 15; /* KVV_PLUGIN_CAP_SEQS in 1.1 */
#endif
#if defined(BAD_seqs) /* a 1.0 plugin never writes past its info struct */
    info->n_seq_max = 4;
#endif
    *out = &the_engine;
    return KVV_PLUGIN_OK;
}

static void b_close(kvv_plugin_engine *e)
{
    (void)e;
}

static int b_forward(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                     const kvv_plugin_hooks *hooks, int lm, float *logits,
                     kvv_plugin_error *err)
{
    (void)e, (void)n, (void)tokens, (void)pos, (void)hooks, (void)lm, (void)logits;
    snprintf(err->msg, sizeof err->msg, "forward: this stub computes nothing");
    return KVV_PLUGIN_ERR_INTERNAL;
}

static int b_kv_clear(kvv_plugin_engine *e, kvv_plugin_error *err)
{
    (void)e, (void)err;
    return KVV_PLUGIN_OK;
}

#ifndef BAD_slot
static int b_kv_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
                     uint8_t *present, kvv_plugin_error *err)
{
    (void)layer, (void)pos0, (void)k, (void)v, (void)err;
    memset(present, 0, (size_t)n * (size_t)e->n_head_kv);
    return KVV_PLUGIN_OK;
}
#endif

#if defined(BAD_seqs)
static int b_seq_rm(kvv_plugin_engine *e, int seq, int p0, int p1, kvv_plugin_error *err)
{
    (void)e, (void)seq, (void)p0, (void)p1, (void)err;
    return KVV_PLUGIN_OK;
}

static int b_seq_cp(kvv_plugin_engine *e, int src, int dst, int p0, int p1,
                    kvv_plugin_error *err)
{
    (void)e, (void)src, (void)dst, (void)p0, (void)p1, (void)err;
    return KVV_PLUGIN_OK;
}

static int b_kv_read_seq(kvv_plugin_engine *e, int seq, int layer, int pos0, int n, void *k,
                         void *v, uint8_t *present, kvv_plugin_error *err)
{
    (void)seq;
    return b_kv_read(e, layer, pos0, n, k, v, present, err);
}
#endif

static const kvv_plugin_table table = {
    .abi_major = MAJOR,
    .abi_minor = MINOR,
#if defined(BAD_v10) /* the 1.0 table: everything before the 1.1 slots */
    .struct_size = offsetof(kvv_plugin_table, decode),
#else
    .struct_size = sizeof(kvv_plugin_table),
#endif
    .name = "bad-" KIND,
    .version = "0",
    .devices = "cpu",
    .open = b_open,
    .close = b_close,
    .forward = b_forward,
    .kv_clear = b_kv_clear,
#ifndef BAD_slot
    .kv_read = b_kv_read,
#endif
#if defined(BAD_seqs) /* every sequence slot but decode */
    .seq_rm = b_seq_rm,
    .seq_cp = b_seq_cp,
    .kv_read_seq = b_kv_read_seq,
#endif
};

KVV_PLUGIN_EXPORT const kvv_plugin_table *kvv_plugin_entry(void)
{
#ifdef BAD_null
    (void)table;
    return NULL;
#else
    return &table;
#endif
}

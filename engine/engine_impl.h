/*
 * engine_impl.h — for engine implementations only (engine/engine.c,
 * engine/engine_registry.c, engine/ref/, engine/cpu/, engine/plugin/, and a
 * test's mock engine): the vtable behind the opaque kvv_engine of
 * engine/engine.h and the struct every engine fills in. verify/, cli/ and
 * vectors/ use engine.h and engine_registry.h, never this.
 *
 * An engine's open function receives the model (borrowed) and the options,
 * already checked against the engine's registry row (kvv_engine_check_opts:
 * its modes, the options it takes, its --engine-opt keys) and for the common
 * fields (cache type, n_ctx >= 0), and returns a kvv_engine it allocated,
 * with vt, model, opts and impl filled in.
 * kvv_engine_close calls vt->close, which frees impl AND the kvv_engine.
 * The wrappers of engine.c apply every default named below, so an engine
 * fills in only the slots it has.
 *
 * Adding an engine: one folder engine/NAME/ whose open function (a
 * kvv_engine_open_fn, declared below) fills a kvv_engine_vtable, and one row
 * in the table of engine/engine_registry.c: its name, open function, modes
 * and default mode, whether it runs concurrently, the KVV_ENGINE_OPT_* it
 * takes (and its --engine-opt keys), its device, its op set if it has one
 * (engine_ops.h). The wrappers, the option checks and their messages, the
 * --engine list, `kvverify engines` and every check then work with it. docs/engines.md walks through it; docs/plugins.md
 * has the other way, a shared object loaded at run time.
 */
#ifndef KVV_ENGINE_IMPL_H
#define KVV_ENGINE_IMPL_H

#include <stdbool.h>

#include "engine/engine.h"

/* Each slot is required unless marked (optional), with the default the
 * wrapper in engine/engine.c applies when it is NULL. */
typedef struct {
    void (*close)(kvv_engine *e);
    /* the forward contract of engine/engine.h (kvv_engine_forward); the
     * wrapper has already planted the host controls (KVV_CTL_HOST_*) */
    kvv_status (*forward)(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                          const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                          kvv_error *err);
    kvv_status (*kv_from_residual)(kvv_engine *e, int layer, int n, const float *h,
                                   const int32_t *pos, float *k, float *v, kvv_error *err);
    kvv_kv_cache *(*cache)(kvv_engine *e);
    /* fills d after the wrapper's defaults (name, mode, cache type,
     * threads, control from the options) */
    void (*describe)(kvv_engine *e, kvv_engine_desc *d);
    /* (optional) KVV_ENGINE_CAP_* bits; default KVV_ENGINE_CAP_BUILTIN */
    unsigned (*caps)(kvv_engine *e);
    /* (optional) the batch sizes where its kernels change (kvv_batch_paths,
     * filled from zero); default: not known */
    void (*batch_paths)(kvv_engine *e, kvv_batch_paths *p);
    /* (optional) CPU seconds used since open by the engine's own threads
     * besides the caller's (a pool's workers), or < 0 when they cannot be
     * told apart (a plugin's: the process's CPU time is used); default:
     * none (0), the engine runs on the caller's thread only */
    double (*worker_cpu_seconds)(kvv_engine *e);
    /* (optional) empty the cache: a new sequence starts with the next
     * forward; default: clear what cache() returns */
    void (*reset)(kvv_engine *e);
    /* ---- sequences (KVV_ENGINE_CAP_SEQS; engine.h "sequences") ----
     * (optional) decode: default, every token sequence 0 with the flags
     * none/last/all: forward; else KVV_ERR_UNSUPPORTED. The wrapper has
     * checked b's ids, positions' range and n. */
    kvv_status (*decode)(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err);
    /* (optional) default: sequence 0 through cache() (truncate / evict),
     * others KVV_ERR_UNSUPPORTED */
    kvv_status (*seq_rm)(kvv_engine *e, int seq, int p0, int p1, kvv_error *err);
    /* (optional) default: KVV_ERR_UNSUPPORTED (src == dst is a no-op) */
    kvv_status (*seq_cp)(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err);
    /* (optional) default: sequence 0 through cache(), others UNSUPPORTED */
    kvv_status (*seq_kv)(kvv_engine *e, int seq, int layer, int pos0, int n, float *k, float *v,
                         uint8_t *present, kvv_error *err);
    /* engines of this kind must not run on several threads at once (a
     * plugin: the ABI promises it one call at a time); default false. Its
     * registry row says the same before opening (kvv_engine_name_concurrent). */
    bool serial;
} kvv_engine_vtable;

struct kvv_engine {
    const kvv_engine_vtable *vt;
    const kvv_model *model;     /* borrowed */
    kvv_engine_opts opts;       /* as opened, resolved (n_ctx, n_threads in effect) */
    void *impl;                 /* the engine's own state */
};

/* What a registry row calls to open its engine (o->name is the row's). */
typedef kvv_status (*kvv_engine_open_fn)(const kvv_model *m, const kvv_engine_opts *o,
                                         kvv_engine **out, kvv_error *err);

/* The reference engine (engine/ref/engine_ref.c): mode exact. */
kvv_status kvv_engine_open_ref(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err);

/* The optimized CPU engine (engine/cpu/cpu_engine.c): fast or invariant. */
kvv_status kvv_engine_open_cpu(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err);

#endif

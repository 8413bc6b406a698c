/*
 * engine.h — the engine interface: one small vtable every engine implements,
 * so verify/ can certify the reference, the cpu engine (and later a GPU or a
 * third-party engine) the same way. DESIGN.md §2.
 *
 *   kvv_engine_opts o = kvv_engine_opts_default();
 *   o.name = "cpu"; o.mode = KVV_MODE_INVARIANT; o.n_threads = 2;
 *   kvv_engine *e;
 *   if (kvv_engine_open(model, &o, &e, &err)) ...
 *   kvv_engine_forward(e, n, tokens, pos, &hooks, KVV_LOGITS_LAST, logits, &err);
 *   kvv_engine_close(e);
 */
#ifndef KVV_ENGINE_H
#define KVV_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "model/arch.h"
#include "model/error.h"
#include "runtime/kv_cache.h"
#include "runtime/runtime.h" /* cache types, hooks, KVV_CTL_* and KVV_GGML_* flags */

typedef enum {
    KVV_MODE_EXACT = 0,     /* the reference engine's only mode */
    KVV_MODE_FAST = 1,      /* cpu: whatever is fastest */
    KVV_MODE_INVARIANT = 2  /* cpu: batch-invariant kernels */
} kvv_mode;

const char *kvv_mode_name(kvv_mode m);                 /* "exact", "fast", "invariant" */
int kvv_mode_from_name(const char *s, kvv_mode *out);  /* 1 on success */
/* The mode an engine runs in when none is asked for: exact for "ref",
 * invariant for the others (the one place this default is decided). */
kvv_mode kvv_engine_default_mode(const char *name);

/* The most threads an engine may be asked for: the cpu engine refuses more
 * (its pool's bound), the reference runs one whatever it is given, and the
 * command line rejects more before any engine opens (cli/engine_opts.c). */
#define KVV_ENGINE_MAX_THREADS 256

typedef struct {
    const char *name;           /* "ref" (default) or "cpu" */
    kvv_mode mode;              /* ref: EXACT; cpu: FAST or INVARIANT (default INVARIANT) */
    int n_threads;              /* cpu only; default 1; at most KVV_ENGINE_MAX_THREADS */
    kvv_cache_type cache_type;  /* default f32 */
    int n_ctx;                  /* cache positions; 0 = min(n_ctx_train, 4096) */
    unsigned control;           /* KVV_CTL_* negative-control flags; 0 normally */
    unsigned ggml;              /* ref only: KVV_GGML_* llama.cpp emulation flags; 0 normally */
    const char *isa;            /* cpu only: kernel table "generic", "avx2" or "avx512";
                                 * NULL, "" or "auto" = the best this CPU runs
                                 * (engine/cpu/cpu_isa.h); borrowed, read at open */
} kvv_engine_opts;

kvv_engine_opts kvv_engine_opts_default(void);

/* What every report records about the engine. */
typedef struct {
    char name[16];          /* "ref", "cpu" */
    char mode[16];          /* "exact", "fast", "invariant" */
    char cache_type[8];     /* "f32", "f16", "bf16" */
    int n_threads;
    unsigned control;       /* KVV_CTL_* flags in force */
    char kernels[192];      /* e.g. "gemm=openblas gemv=avx2 attn=avx2" */
    char isa[16];           /* cpu: the kernel table that ran ("generic", "avx2",
                             * "avx512"); "" for an engine without tables */
} kvv_engine_desc;

typedef struct kvv_engine kvv_engine;

/* Each slot is required unless marked optional. */
typedef struct {
    void (*close)(kvv_engine *e);
    kvv_status (*forward)(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                          const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                          kvv_error *err);
    kvv_status (*kv_from_residual)(kvv_engine *e, int layer, int n, const float *h,
                                   const int32_t *pos, float *k, float *v, kvv_error *err);
    kvv_kv_cache *(*cache)(kvv_engine *e);
    void (*describe)(kvv_engine *e, kvv_engine_desc *d);
} kvv_engine_vtable;

struct kvv_engine {
    const kvv_engine_vtable *vt;
    const kvv_model *model;     /* borrowed */
    kvv_engine_opts opts;
    void *impl;                 /* the engine's own state */
};

/* Open the engine named by o->name for model m (borrowed; must outlive the
 * engine). KVV_ERR_USAGE for an unknown name or a mode the engine lacks. */
kvv_status kvv_engine_open(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                           kvv_error *err);
void kvv_engine_close(kvv_engine *e); /* accepts NULL */
/* The registered engine names, "ref, cpu", into buf (for messages, help). */
void kvv_engine_list(char *buf, size_t size);

/* Thin wrappers over the vtable (see reference/ref.h for the semantics). */
kvv_status kvv_engine_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                              const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                              kvv_error *err);
kvv_status kvv_engine_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                       const int32_t *pos, float *k, float *v, kvv_error *err);
kvv_kv_cache *kvv_engine_cache(kvv_engine *e);
void kvv_engine_describe(kvv_engine *e, kvv_engine_desc *d);

/* Convenience: clear the cache (a new sequence). */
void kvv_engine_reset(kvv_engine *e);

#endif

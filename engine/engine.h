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

/* Negative controls the engine layer plants on kvverify's side, for engines
 * whose kernels kvverify cannot change (plugins). Set in
 * kvv_engine_opts.control like the KVV_CTL_* flags of reference/ref.h; a
 * plugin engine turns a KVV_CTL_* request the plugin cannot plant itself into
 * one of these, and describe() reports the flags in force. Any engine
 * accepts them (tests use the reference engine). */
enum {
    KVV_CTL_HOST_KV_ULP = 1u << 8,   /* kv_from_residual: K[t][0] of every row moved by
                                        one unit in the last place of the cache dtype */
    KVV_CTL_HOST_RESIDUAL = 1u << 9, /* forward: the lowest mantissa bit of element 0 of
                                        every final residual row (layer n_layer) flipped
                                        after the caller's hook (needs residual write) */
    KVV_CTL_HOST_REORDER = 1u << 10  /* forward: the first two distinct tokens of every
                                        call with n >= 2 swapped */
};
#define KVV_CTL_HOST_ALL (KVV_CTL_HOST_KV_ULP | KVV_CTL_HOST_RESIDUAL | KVV_CTL_HOST_REORDER)

typedef struct {
    const char *name;           /* "ref" (default), "cpu", "llama.cpp" or "plugin:PATH.so" */
    kvv_mode mode;              /* ref: EXACT; cpu: FAST or INVARIANT (default INVARIANT) */
    int n_threads;              /* cpu only; default 1; at most KVV_ENGINE_MAX_THREADS */
    kvv_cache_type cache_type;  /* default f32 */
    int n_ctx;                  /* cache positions; 0 = min(n_ctx_train, 4096) */
    unsigned control;           /* KVV_CTL_* negative-control flags; 0 normally */
    unsigned ggml;              /* ref only: KVV_GGML_* llama.cpp emulation flags; 0 normally */
    const char *isa;            /* cpu only: kernel table "generic", "avx2" or "avx512";
                                 * NULL, "" or "auto" = the best this CPU runs
                                 * (engine/cpu/cpu_isa.h); borrowed, read at open */
    const char *device;         /* plugins: a device the plugin names ("cpu", "vulkan",
                                   "cuda"); NULL = its default. Built-ins: NULL or "cpu" */
    int n_ubatch;               /* plugins with micro-batches: size; 0 = engine default */
    const char *const *engine_opts; /* plugins: n_engine_opts "KEY=VALUE" strings
                                       (--engine-opt), borrowed; built-ins take none */
    int n_engine_opts;
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
    /* plugins (empty for built-ins): as the plugin reports them */
    char version[96];       /* engine version, e.g. "llama.cpp v0.5.0 ggml 0.9.4" */
    char device[96];        /* e.g. "Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits))" */
    char variant[64];       /* build/kernel variant loaded, e.g. "ggml-cpu-zen4" */
    char flash_attn[16];    /* "on", "off", "auto", "n/a" */
    int n_ubatch;           /* micro-batch size in effect (0 = whole calls) */
    unsigned ggml;          /* KVV_GGML_* roundings of llama.cpp this engine's
                             * arithmetic has at every batch size (the cpu engine:
                             * KVV_GGML_KQ_ACT); the reference opened with these
                             * flags computes the same function (compare uses it) */
} kvv_engine_desc;

/* What an engine can do (kvv_engine_caps). The built-in engines have every
 * capability; a plugin declares its own (include/kvverify/engine_plugin.h
 * documents each one and which checks need it). */
enum {
    KVV_ENGINE_CAP_LOGITS_ALL = 1u << 0,       /* KVV_LOGITS_ALL */
    KVV_ENGINE_CAP_RESIDUAL_READ = 1u << 1,    /* hooks.residual (reading) */
    KVV_ENGINE_CAP_RESIDUAL_WRITE = 1u << 2,   /* hooks.residual overwrites (patching) */
    KVV_ENGINE_CAP_KV_HOOK = 1u << 3,          /* hooks.kv */
    KVV_ENGINE_CAP_KV_READ = 1u << 4,          /* kvv_engine_cache reads the cache back */
    KVV_ENGINE_CAP_KV_FROM_RESIDUAL = 1u << 5, /* kvv_engine_kv_from_residual */
    KVV_ENGINE_CAP_ATTN = 1u << 6,             /* hooks.attn */
    KVV_ENGINE_CAP_ATTN_OUT = 1u << 7,         /* hooks.attn_out */
    KVV_ENGINE_CAP_SELECT = 1u << 8,           /* hooks.select */
    KVV_ENGINE_CAP_KV_EVICT = 1u << 9,         /* evicting a position from all layers */
    KVV_ENGINE_CAP_KV_EVICT_HEAD = 1u << 10,   /* evicting one (layer, position, head) */
    KVV_ENGINE_CAP_KV_WRITE = 1u << 11,        /* inserting rows into the cache */
    KVV_ENGINE_CAP_THREADS = 1u << 12,         /* honours n_threads */
    KVV_ENGINE_CAP_UBATCH = 1u << 13,          /* honours n_ubatch */
    KVV_ENGINE_CAP_OVERWRITE = 1u << 14        /* forward over already cached positions */
};
#define KVV_ENGINE_CAP_ALL 0x7fffu

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
    /* (optional) KVV_ENGINE_CAP_* bits; default KVV_ENGINE_CAP_ALL */
    unsigned (*caps)(kvv_engine *e);
} kvv_engine_vtable;

struct kvv_engine {
    const kvv_engine_vtable *vt;
    const kvv_model *model;     /* borrowed */
    kvv_engine_opts opts;
    void *impl;                 /* the engine's own state */
};

/* Open the engine named by o->name for model m (borrowed; must outlive the
 * engine): "ref", "cpu", "llama.cpp" (the plugin built into
 * O/plugins/llama.cpp.so, see engine/plugin/plugin.h), "plugin:PATH.so", or
 * the name of any plugin NAME.so in $KVV_PLUGIN_DIR or in plugins/ beside
 * the executable (e.g. "example").
 * KVV_ERR_USAGE for an unknown name, a mode the engine lacks, engine options
 * or a device a built-in engine does not take, a plugin whose ABI major
 * differs (the message names both versions); KVV_ERR_UNSUPPORTED when a
 * plugin's device is not present here ("no CUDA device"). */
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

/* Capabilities of an open engine (KVV_ENGINE_CAP_*; NULL engine: 0). */
unsigned kvv_engine_caps(kvv_engine *e);

/* Comma-separated names of the capability bits in caps ("logits-all,
 * residual-write") into buf. @return buf. */
const char *kvv_engine_cap_names(unsigned caps, char *buf, size_t size);

/* KVV_OK when e has every capability in need, else KVV_ERR_UNSUPPORTED with
 * "engine NAME does not offer CAPS (needed by WHAT)" — the message a check
 * reports as "unsupported by this engine". */
kvv_status kvv_engine_require(kvv_engine *e, unsigned need, const char *what, kvv_error *err);

#endif

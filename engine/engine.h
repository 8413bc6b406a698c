/*
 * engine.h — the engine interface: an opaque kvv_engine and its operations,
 * so verify/ can certify the reference, the cpu engine, llama.cpp and any
 * plugin the same way (DESIGN.md §2). Which engines there are and what each
 * takes: engine/engine_registry.h (kvv_engine_open below opens them by
 * name). Writing an engine: the vtable in engine/engine_impl.h, and
 * docs/engines.md.
 *
 *   kvv_engine_opts o = kvv_engine_opts_default();
 *   o.name = "cpu"; o.mode = KVV_MODE_INVARIANT; o.n_threads = 2;
 *   kvv_engine *e;
 *   if (kvv_engine_open(model, &o, &e, &err)) ...
 *   kvv_engine_forward(e, n, tokens, pos, &hooks, KVV_LOGITS_LAST, logits, &err);
 *   kvv_engine_close(e);
 *
 * The contract every engine keeps (the reference, reference/ref.h, is its
 * model; a check that finds an engine breaking it reports a verdict):
 *
 *   - An engine holds one sequence in its KV cache of n_ctx positions
 *     (kvv_engine_options(e)->n_ctx once open). kvv_engine_forward processes
 *     n >= 1 tokens at increasing positions pos[i], 0 <= pos[i] < n_ctx,
 *     gaps allowed (a policy's evictions, KV-Direct's restarts; the built-in
 *     engines take distinct positions in any order, plugins refuse that with
 *     KVV_ERR_UNSUPPORTED): their K/V are stored, then every token attends to
 *     the present cache entries at positions <= its own (inside the sliding
 *     window on local layers). A position that is already cached is
 *     recomputed and overwritten (all KV heads become present again).
 *   - Hooks (runtime/runtime.h) may be NULL; each is called during the call,
 *     per layer in layer order, on the calling thread. A hook needs its
 *     capability (KVV_ENGINE_CAP_*); kvv_engine_require says which is missing.
 *   - logits: KVV_LOGITS_LAST one row, KVV_LOGITS_ALL n rows, each n_vocab
 *     floats; KVV_LOGITS_NONE writes none (logits may then be NULL).
 *   - Errors: KVV_ERR_USAGE (a token outside the vocabulary, a position
 *     outside 0..n_ctx-1, n <= 0, logits NULL with a mode that writes them),
 *     KVV_ERR_UNSUPPORTED (a hook or logits mode the engine lacks),
 *     KVV_ERR_NOMEM, KVV_ERR_ENGINE (a plugin failed).
 *   - The engine computes in its mode: exact (the reference: one documented
 *     order of every sum, whatever the batch), invariant (the same bits for
 *     any batching, chunking and thread count), fast (neither promised).
 *     Architecture semantics are the reference's.
 */
#ifndef KVV_ENGINE_H
#define KVV_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/arch.h"
#include "common/error.h"
#include "runtime/kv_cache.h"
#include "runtime/runtime.h" /* cache types, hooks, KVV_CTL_* and KVV_GGML_* flags */

/* How an engine computes (the contract above); which modes each engine has
 * and its default: engine_registry.h. */
typedef enum {
    KVV_MODE_EXACT = 0,     /* the reference engine's only mode */
    KVV_MODE_FAST = 1,      /* cpu: whatever is fastest */
    KVV_MODE_INVARIANT = 2  /* cpu: batch-invariant kernels */
} kvv_mode;
#define KVV_MODE_COUNT 3

const char *kvv_mode_name(kvv_mode m);                 /* "exact", "fast", "invariant" */
int kvv_mode_from_name(const char *s, kvv_mode *out);  /* 1 on success */

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
    KVV_CTL_HOST_RESIDUAL = 1u << 9, /* forward: the largest element of every final
                                        residual row (layer n_layer) negated after the
                                        caller's hook (needs residual write) */
    KVV_CTL_HOST_REORDER = 1u << 10  /* forward: the first two distinct tokens of every
                                        call with n >= 2 swapped */
};
#define KVV_CTL_HOST_ALL (KVV_CTL_HOST_KV_ULP | KVV_CTL_HOST_RESIDUAL | KVV_CTL_HOST_REORDER)

/* The control an engine with control flags `control` in force (its
 * description's `control`) really plants, for a report's control line:
 * `native` (the control as the engine plants it, e.g. "one perturbed
 * weight (output_norm[0])") when the engine plants it itself, else what
 * kvverify plants instead, e.g. "host-residual (kvverify negates the
 * largest element of the final residual)". @return buf. */
const char *kvv_engine_control_name(unsigned control, const char *native, char *buf,
                                    size_t size);

/* The options of kvv_engine_opts, one bit each, named by their command-line
 * spelling (kvv_engine_opt_name). Which engine takes which is a column of
 * the registry's table (kvv_engine_takes, engine_registry.h): kvv_engine_open
 * refuses an option given to an engine that does not take it with "engine
 * NAME does not take --OPTION ..." (kvv_engine_check_opts), except
 * --threads, which an engine without threads runs as one. Commands say
 * with the same bits which options they accept (cli/engine_opts.h). */
enum {
    KVV_ENGINE_OPT_ENGINE = 1u << 0,   /* name: --engine (every engine) */
    KVV_ENGINE_OPT_MODE = 1u << 1,     /* mode: --mode (every engine; its modes) */
    KVV_ENGINE_OPT_THREADS = 1u << 2,  /* n_threads: --threads */
    KVV_ENGINE_OPT_CACHE = 1u << 3,    /* cache_type: --cache-type (every engine) */
    KVV_ENGINE_OPT_DEVICE = 1u << 4,   /* device: --device */
    KVV_ENGINE_OPT_UBATCH = 1u << 5,   /* n_ubatch: --ubatch */
    KVV_ENGINE_OPT_EOPT = 1u << 6,     /* engine_opts: --engine-opt KEY=VALUE */
    KVV_ENGINE_OPT_ISA = 1u << 7,      /* isa: --isa (kernel tables) */
    KVV_ENGINE_OPT_REPACK = 1u << 8,   /* repack: --repack / --no-repack */
    KVV_ENGINE_OPT_GGML = 1u << 9      /* ggml: --emulate-ggml (llama.cpp emulation) */
};

/* "--isa" for KVV_ENGINE_OPT_ISA, ...; "?" for anything else. */
const char *kvv_engine_opt_name(unsigned opt);

typedef struct {
    const char *name;           /* "ref" (default), "cpu", "llama.cpp" or "plugin:PATH.so" */
    kvv_mode mode;              /* one of the engine's modes (kvv_engine_has_mode);
                                 * default EXACT, the reference's */
    int n_threads;              /* THREADS: default 1; at most KVV_ENGINE_MAX_THREADS */
    kvv_cache_type cache_type;  /* default f32 */
    int n_ctx;                  /* cache positions; 0 = min(n_ctx_train, 4096) */
    unsigned control;           /* KVV_CTL_* negative-control flags; 0 normally */
    unsigned ggml;              /* GGML: KVV_GGML_* llama.cpp emulation flags; 0 normally */
    const char *isa;            /* ISA: kernel table "generic", "avx2" or "avx512";
                                 * NULL, "" or "auto" = the best this CPU runs
                                 * (engine/cpu/cpu_isa.h); borrowed, read at open */
    const char *device;         /* DEVICE: a device the engine names ("cpu", "vulkan",
                                   "cuda"); NULL = its default. An engine that does not
                                   take it runs on its one device: NULL or that name */
    int n_ubatch;               /* UBATCH: micro-batch size; 0 = the engine's default */
    const char *const *engine_opts; /* EOPT: n_engine_opts "KEY=VALUE" strings
                                       (--engine-opt), borrowed; the keys are the
                                       engine's own (a built-in's: kvv_engine_opt_keys) */
    int n_engine_opts;
    int n_seq_max;              /* sequences the caller will use at once (kvv_engine_decode);
                                 * 0 = 1. An engine without sequences refuses more than 1
                                 * at open (KVV_ERR_UNSUPPORTED) */
    int repack;                 /* REPACK, invariant mode: 1 = hold the repacked copies
                                 * that decode faster (the X16 copies fast mode holds; X4
                                 * for Q8_0/Q4_0/Q5_0 heads); 0 (default) = read the
                                 * mapped file wherever a kernel can, for a process that
                                 * also holds the reference or other engines on the same
                                 * model (the checks, the audit). The bits are the same
                                 * either way. Fast mode always repacks */
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
    int n_seq_max;          /* sequences served at once (1 without sequences) */
    int kv_unified;         /* 1: one cache pool shared by every sequence; 0: a pool per
                             * sequence; -1: not applicable / not known */
    unsigned ggml;          /* KVV_GGML_* roundings of llama.cpp this engine's
                             * arithmetic has at every batch size (the cpu engine:
                             * KVV_GGML_KQ_ACT); the reference opened with these
                             * flags computes the same function (compare uses it) */
} kvv_engine_desc;

/* What an engine can do (kvv_engine_caps). The built-in engines have every
 * capability but micro-batches (KVV_ENGINE_CAP_BUILTIN: they run a forward
 * as one call); a plugin declares its own (include/kvverify/engine_plugin.h
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
    KVV_ENGINE_CAP_OVERWRITE = 1u << 14,       /* forward over already cached positions */
    /* (plugin ABI 1.1) */
    KVV_ENGINE_CAP_SEQS = 1u << 15,            /* several sequences: kvv_engine_decode,
                                                  seq_rm, seq_cp, seq_kv (below) */
    KVV_ENGINE_CAP_OP_TAPS = 1u << 16          /* hooks.op (runtime/op_taps.h) */
};
/* The capabilities of plugin ABI 1.0 (a 1.0 plugin can declare no others). */
#define KVV_ENGINE_CAP_ALL 0x7fffu
#define KVV_ENGINE_CAP_BUILTIN \
    ((KVV_ENGINE_CAP_ALL & ~(unsigned)KVV_ENGINE_CAP_UBATCH) | KVV_ENGINE_CAP_OP_TAPS)

/* Where an engine's kernels change with the number of tokens n in one call
 * (forward, kv_from_residual): at each switch some product takes another
 * kernel for n >= at than for n < at (the cpu engine in fast mode: GEMV
 * kernels below 4 tokens, OpenBLAS sgemm from 4). Batch sizes between two
 * switches run the same kernels, so comparing them cannot show a
 * batch-shape difference: a check whose shapes all lie on one path has
 * nothing to check (verify/check.h), and the audit sizes its workload to
 * straddle every switch (verify/audit.h). An engine that does not say
 * (known = false: the reference, plugins) is taken to possibly change at
 * every size. */
#define KVV_BATCH_MAX_SWITCHES 8
typedef struct {
    int at;                 /* first batch size of the new path, >= 2 */
    char what[96];          /* what changes there, e.g. "Q8_0 products: one-token X4 GEMV
                               below, dequantized tiles from here" */
} kvv_batch_switch;

typedef struct {
    bool known;             /* the engine described its paths (even as none) */
    int n;                  /* switches in sw[], ascending by at, distinct */
    kvv_batch_switch sw[KVV_BATCH_MAX_SWITCHES];
} kvv_batch_paths;

/* Which path batch size n runs on: the number of switches at or below n
 * (paths unknown: n itself, every size its own path). */
int kvv_batch_path_of(const kvv_batch_paths *p, int n);
/* Add a switch at `at` (kept ascending; one at the same size adds its
 * `what` after "; " unless it is there already). For engines describing
 * their paths. */
void kvv_batch_paths_add(kvv_batch_paths *p, int at, const char *what);
/* "4" / "2, 4" / "none" / "unknown" into buf. @return buf. */
const char *kvv_batch_paths_list(const kvv_batch_paths *p, char *buf, size_t size);

/* An open engine; its fields are the engine's own (engine/engine_impl.h). */
typedef struct kvv_engine kvv_engine;

/* Open the engine named by o->name for model m (borrowed; must outlive the
 * engine): "ref", "cpu", "llama.cpp" (the plugin built into
 * O/plugins/llama.cpp.so, see engine/plugin/plugin.h), "plugin:PATH.so", or
 * the name of any plugin NAME.so in $KVV_PLUGIN_DIR or in plugins/ beside
 * the executable (e.g. "example"); engine_registry.h lists them.
 * KVV_ERR_USAGE for an unknown name, a mode the engine lacks or an option it
 * does not take (the registry's check, kvv_engine_check_opts: "engine ref
 * does not take --isa generic (it applies to the cpu engine)"), a plugin
 * whose ABI major differs (the message names both versions);
 * KVV_ERR_UNSUPPORTED when a plugin's device is not present here ("no CUDA
 * device"). */
kvv_status kvv_engine_open(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                           kvv_error *err);
void kvv_engine_close(kvv_engine *e); /* accepts NULL */
/* Process n tokens at positions pos[] with hooks (may be NULL), writing
 * logits as lm says: the contract at the top of this file. */
kvv_status kvv_engine_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                              const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                              kvv_error *err);
/* Recompute K and V of layer `layer` from residuals h [n][n_embd] entering
 * that layer, exactly as forward computes them (attn_norm, projections,
 * biases, q/k norm, RoPE at pos[i], rounding to the cache dtype): k
 * [n][n_head_kv*head_dim], v [n][n_head_kv*head_dim_v]. Does not touch the
 * cache. Needs KVV_ENGINE_CAP_KV_FROM_RESIDUAL. */
kvv_status kvv_engine_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                       const int32_t *pos, float *k, float *v, kvv_error *err);
/* The engine's KV cache as kvverify sees it (a policy evicts and inserts
 * through it; a plugin's is a mirror pushed back before the next forward).
 * Borrowed; valid until close. NULL engine: NULL. */
kvv_kv_cache *kvv_engine_cache(kvv_engine *e);
/* What the engine is and runs (kvv_engine_desc) into *d (NULL e: zeroed). */
void kvv_engine_describe(kvv_engine *e, kvv_engine_desc *d);
/* The model e was opened on (borrowed from the caller of kvv_engine_open). */
const kvv_model *kvv_engine_model(const kvv_engine *e);
/* The options e runs with, resolved at open: name, mode, n_ctx (never 0),
 * n_threads in effect, control flags in force (a plugin's host controls);
 * engine options were read at open and are not kept (none here).
 * Borrowed; valid until close. */
const kvv_engine_opts *kvv_engine_options(const kvv_engine *e);

/* Clear the cache: the next forward starts a new sequence (also on an
 * engine whose cache kvverify cannot read, e.g. a plugin without kv-read:
 * the engine empties its own; an error there fails that next forward). */
void kvv_engine_reset(kvv_engine *e);

/* The batch sizes where e's kernels change (see kvv_batch_paths); an
 * engine without the slot (or NULL) gives known = false. */
void kvv_engine_batch_paths(kvv_engine *e, kvv_batch_paths *out);

/* ---------------------------------------------------------------- sequences
 * Several requests sharing one forward call, as a server batches them
 * (KVV_ENGINE_CAP_SEQS). Each sequence s (0 <= s < kvv_engine_n_seq(e)) has
 * its own cache; sequence 0 is the one kvv_engine_forward, kvv_engine_cache,
 * kv_from_residual and reset act on, so single-sequence callers see an
 * unchanged engine. A token of sequence s attends only to s's cache. The
 * built-in engines allocate a sequence's cache on its first use. */

/* The most sequences kvv_engine_opts.n_seq_max may ask of a built-in engine. */
#define KVV_ENGINE_MAX_SEQS 64

typedef struct {
    int n;                  /* tokens in the call, >= 1 */
    const int32_t *token;   /* [n] token ids */
    const int32_t *pos;     /* [n] position of each token within its own sequence */
    const int32_t *seq;     /* [n] sequence id of each token, 0 .. n_seq-1 */
    const uint8_t *logits;  /* [n] 1 = write this token's logits row; NULL = none */
} kvv_batch;

/* Process the tokens of b in ONE call: the projections and FFN as one batch
 * over every token (the point of batching), attention per sequence against
 * that sequence's cache. Each sequence's tokens have strictly increasing
 * positions, the first one past that sequence's last cached position (no
 * gaps; what llama.cpp requires too). logits: one [n_vocab] row per token
 * whose flag is set, in call order (NULL when none is set). No hooks.
 * KVV_ERR_USAGE (a token, position or sequence id out of range, n <= 0),
 * KVV_ERR_UNSUPPORTED for an engine without KVV_ENGINE_CAP_SEQS unless every
 * token is sequence 0 and the flags ask for no row, the last or all (then it
 * is a plain forward). */
kvv_status kvv_engine_decode(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err);
/* Remove positions p0..p1-1 of sequence seq (p1 < 0: to its end; (0, -1)
 * empties it). Other sequences are untouched. */
kvv_status kvv_engine_seq_rm(kvv_engine *e, int seq, int p0, int p1, kvv_error *err);
/* Make positions p0..p1-1 of sequence dst hold what src holds there (p1 < 0:
 * to src's end), as a prompt cache or a fork does; what dst held from p0 on
 * is removed first. Exact: dst then computes as if it had computed them. */
kvv_status kvv_engine_seq_cp(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err);
/* Rows pos0..pos0+n-1 of sequence seq's cache in layer `layer`, widened to
 * fp32: k [n][n_head_kv*head_dim], v [n][n_head_kv*head_dim_v], present
 * [n][n_head_kv] (may be NULL) — what the batch check compares. */
kvv_status kvv_engine_seq_kv(kvv_engine *e, int seq, int layer, int pos0, int n, float *k,
                             float *v, uint8_t *present, kvv_error *err);
/* Sequences e serves at once (1 without KVV_ENGINE_CAP_SEQS). */
int kvv_engine_n_seq(kvv_engine *e);

/* CPU seconds the engine's threads have used: the calling thread's CPU
 * clock plus the engine's own worker threads (vtable worker_cpu_seconds),
 * so a benchmark counts the engine's work and not another library's idle
 * threads (OpenBLAS's). For plugins, whose threads kvverify cannot see,
 * the whole process's CPU time. Differences between two calls from the
 * same thread are meaningful; the value itself is not. */
double kvv_engine_cpu_seconds(kvv_engine *e);

/* May engines of e's kind run on several threads at once? (The built-in
 * engines: yes, each on its own; plugins: no, one call at a time.) Before
 * opening: kvv_engine_name_concurrent (engine_registry.h). */
bool kvv_engine_concurrent(const kvv_engine *e);

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

/*
 * engine_plugin.h — the kvverify engine plugin ABI, version 1.1.
 *
 * A plugin is a shared object that lets kvverify certify an inference engine
 * it did not write (llama.cpp, a vendor's kernels, a team's fork). kvverify
 * opens it with dlopen(), calls the one exported entry symbol, checks the ABI
 * version and the declared capabilities, and runs every check through it the
 * same way it runs its own engines. This header is the whole contract: a
 * plugin includes only this file (plain C types, no kvverify internals) and
 * never links kvverify's libraries to talk to the host; whatever helper it
 * needs from kvverify comes through kvv_plugin_host.
 *
 *   #include "kvverify/engine_plugin.h"
 *   static const kvv_plugin_table table = {
 *       .abi_major = KVV_PLUGIN_ABI_MAJOR, .abi_minor = KVV_PLUGIN_ABI_MINOR,
 *       .struct_size = sizeof(kvv_plugin_table),
 *       .name = "mine", .version = "1.2", .devices = "cpu",
 *       .open = my_open, .close = my_close, .forward = my_forward,
 *       .kv_clear = my_kv_clear,
 *   };
 *   KVV_PLUGIN_EXPORT const kvv_plugin_table *kvv_plugin_entry(void) { return &table; }
 *
 *   cc -shared -fPIC -I kvverify/include mine.c -o mine.so
 *   kvverify audit model.gguf --engine plugin:./mine.so
 *
 * docs/plugins.md walks through a complete plugin; plugins/example/ is one
 * over kvverify's own reference engine, plugins/llama.cpp/ one over llama.cpp.
 *
 * ------------------------------------------------------------------------
 * Conventions (they hold for every function below)
 * ------------------------------------------------------------------------
 * - Status: every fallible function returns an int, KVV_PLUGIN_OK (0) or a
 *   KVV_PLUGIN_ERR_* code, and on failure writes one line (no newline,
 *   NUL-terminated, at most KVV_PLUGIN_MSG_MAX bytes with the NUL) into
 *   err->msg naming the call and the field, e.g. "forward: token 9000 outside
 *   the vocabulary (512)". The host clears err->msg before each call.
 * - Memory: buffers are owned by the caller and valid only during the call;
 *   a plugin never frees or keeps a host pointer past the call that passed it
 *   (except kvv_plugin_host, valid until close). Strings a plugin returns in
 *   its table are static. Shapes are given as [rows][columns], row-major,
 *   contiguous, no padding.
 * - Numbers: activations, logits and hook buffers are IEEE-754 binary32
 *   (float), little-endian in memory as the host CPU stores them. Token ids
 *   and positions are int32_t. "Cache dtype" data (kv_read/kv_write) is the
 *   raw bit pattern of the cache's element type: 4 bytes per element for F32,
 *   2 for F16 (IEEE binary16) and BF16 (the top half of binary32).
 * - Threads: the host calls a plugin from one thread at a time per engine
 *   (it may run several engines of the same plugin in turn, never
 *   concurrently). Hooks are called on the thread that called forward.
 * - Failure: a plugin must not exit, abort or print to stdout; it may write
 *   diagnostics to stderr (or through host->log). A crash is a certification
 *   result, not an error path.
 * - Versioning: KVV_PLUGIN_ABI_MAJOR changes when anything here changes
 *   incompatibly; the host refuses a plugin whose major differs (exit 2,
 *   naming both versions). Within a major, a minor version only appends
 *   fields to the end of structs and slots to the end of the table; every
 *   struct that crosses the boundary starts with struct_size, so each side
 *   reads only the prefix both know. A slot beyond the plugin's struct_size,
 *   or NULL, takes the default documented at it.
 * - Minor versions: 1.0 the single-sequence engine; 1.1 appends sequences
 *   (several requests sharing one forward call: CAP_SEQS, params.n_seq_max,
 *   info.n_seq_max and kv_unified, slots decode, seq_rm, seq_cp,
 *   kv_read_seq) and op taps (per-operation outputs: CAP_OP_TAPS,
 *   info.ops, hooks.op). A 1.0 plugin loads in a 1.1 host; the checks that
 *   need the 1.1 features list it "unsupported by this engine", never passed.
 */
#ifndef KVVERIFY_ENGINE_PLUGIN_H
#define KVVERIFY_ENGINE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVV_PLUGIN_ABI_MAJOR 1
#define KVV_PLUGIN_ABI_MINOR 1

/* The one symbol a plugin exports (C linkage, default visibility). */
#define KVV_PLUGIN_ENTRY_SYMBOL "kvv_plugin_entry"
#if defined(__GNUC__)
#define KVV_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KVV_PLUGIN_EXPORT
#endif

#define KVV_PLUGIN_MSG_MAX 512

/* ------------------------------------------------------------------------
 * Status codes (int). The host maps them to its exit codes: USAGE, IO,
 * FORMAT, NOMEM, INTERNAL -> exit 2; UNSUPPORTED and NO_DEVICE -> exit 77
 * ("nothing could be checked") when nothing else ran. An unknown code is
 * treated as INTERNAL.
 * ------------------------------------------------------------------------ */
enum {
    KVV_PLUGIN_OK = 0,
    KVV_PLUGIN_ERR_USAGE = 1,       /* bad argument or option (name it in msg) */
    KVV_PLUGIN_ERR_IO = 2,          /* cannot read the model or a library it needs */
    KVV_PLUGIN_ERR_FORMAT = 3,      /* the model file is malformed for this engine */
    KVV_PLUGIN_ERR_UNSUPPORTED = 4, /* valid request this engine cannot do (say why) */
    KVV_PLUGIN_ERR_NOMEM = 5,
    KVV_PLUGIN_ERR_INTERNAL = 6,    /* the engine failed (e.g. a decode call returned an error) */
    KVV_PLUGIN_ERR_NO_DEVICE = 7    /* the requested device exists in name but not here
                                       (no GPU, no driver, library not installed) */
};

typedef struct {
    char msg[KVV_PLUGIN_MSG_MAX]; /* one line; set by the plugin on failure */
} kvv_plugin_error;

/* Cache element types (kvv_plugin_params.cache_type, kvv_plugin_info.cache_type). */
enum {
    KVV_PLUGIN_DTYPE_F32 = 0,
    KVV_PLUGIN_DTYPE_F16 = 1,
    KVV_PLUGIN_DTYPE_BF16 = 2
};

/* Which rows of logits forward() writes (same values as kvverify's own). */
enum {
    KVV_PLUGIN_LOGITS_NONE = 0, /* none; logits may be NULL */
    KVV_PLUGIN_LOGITS_LAST = 1, /* one row: the last token of the call */
    KVV_PLUGIN_LOGITS_ALL = 2   /* n rows, one per token, in call order */
};

/* ------------------------------------------------------------------------
 * Capabilities (kvv_plugin_info.caps, a bit set declared at open). A check
 * that needs a capability the engine lacks is reported "unsupported by this
 * engine" (skipped, with the reason) — never passed. The host also refuses,
 * with KVV_ERR_UNSUPPORTED, any call that would need an undeclared one (a
 * hook passed to forward, a slot called). Declaring a capability whose slot
 * is NULL makes open fail (exit 2). Unknown bits are ignored.
 * ------------------------------------------------------------------------ */
enum {
    /* forward writes one logits row per token (KVV_PLUGIN_LOGITS_ALL).
     * Needed by patch, compare, invariance. */
    KVV_PLUGIN_CAP_LOGITS_ALL = 1u << 0,
    /* forward calls hooks->residual with the residual entering each layer
     * and the final one (layer == n_layer). Needed by kv, patch, invariance. */
    KVV_PLUGIN_CAP_RESIDUAL_READ = 1u << 1,
    /* the residual hook may overwrite h, and the pass continues from the new
     * values (residual injection: patching). Needed by patch, kvdirect. */
    KVV_PLUGIN_CAP_RESIDUAL_WRITE = 1u << 2,
    /* forward calls hooks->kv with K/V exactly as stored. Needed by kv. */
    KVV_PLUGIN_CAP_KV_HOOK = 1u << 3,
    /* kv_read reads K/V back from the engine's cache, in the cache dtype.
     * Needed by kv, invariance, evict and every cache policy. */
    KVV_PLUGIN_CAP_KV_READ = 1u << 4,
    /* kv_from_residual recomputes K/V from given residuals. Needed by kv,
     * kvdirect, latency. */
    KVV_PLUGIN_CAP_KV_FROM_RESIDUAL = 1u << 5,
    /* forward calls hooks->attn (probabilities after softmax). Needed by the
     * score-based eviction policies (H2O, TOVA, SnapKV, ...). */
    KVV_PLUGIN_CAP_ATTN = 1u << 6,
    /* forward calls hooks->attn_out. Needed by compare's per-layer tables. */
    KVV_PLUGIN_CAP_ATTN_OUT = 1u << 7,
    /* forward calls hooks->select per query and head (Quest-like policies). */
    KVV_PLUGIN_CAP_SELECT = 1u << 8,
    /* kv_evict removes one position from every layer and head. */
    KVV_PLUGIN_CAP_KV_EVICT = 1u << 9,
    /* kv_evict also removes a single (layer, position, KV head) entry. */
    KVV_PLUGIN_CAP_KV_EVICT_HEAD = 1u << 10,
    /* kv_write stores given rows into the cache (insert / overwrite). */
    KVV_PLUGIN_CAP_KV_WRITE = 1u << 11,
    /* the engine honours params.n_threads > 1. Needed by invariance's
     * thread-count variants. */
    KVV_PLUGIN_CAP_THREADS = 1u << 12,
    /* the engine honours params.n_ubatch (splits a forward into micro-batches
     * of that size). Needed by invariance's micro-batch variants. */
    KVV_PLUGIN_CAP_UBATCH = 1u << 13,
    /* forward may be given positions that are already cached and recomputes
     * and overwrites them. Without it the host first removes such positions
     * with kv_evict (CAP_KV_EVICT) when that loses no other cached position,
     * and otherwise refuses the call (UNSUPPORTED). */
    KVV_PLUGIN_CAP_OVERWRITE = 1u << 14,
    /* (ABI 1.1) the engine serves several sequences at once: decode,
     * seq_rm, seq_cp and kv_read_seq are set, and info.n_seq_max >= 2.
     * Needed by the batch check. See "Sequences" below. */
    KVV_PLUGIN_CAP_SEQS = 1u << 15,
    /* (ABI 1.1) forward calls hooks->op with the outputs of the operations
     * info.ops lists. Needed by compare --ops. See "Op taps" below. */
    KVV_PLUGIN_CAP_OP_TAPS = 1u << 16
};

/* ------------------------------------------------------------------------
 * Sequences (ABI 1.1). A server batches requests: one call carries tokens
 * of several sequences (requests), each with its own cache. Sequence ids
 * are 0..info.n_seq_max-1; sequence 0 is the one forward, kv_read,
 * kv_evict, kv_write, kv_from_residual and kv_clear act on, so a 1.0 host
 * and the single-sequence checks see an unchanged engine. A token of
 * sequence s attends only to s's cache (positions <= its own, inside the
 * window): what another sequence holds must never change a bit of s's
 * results beyond what the engine's kernels do with batch shape. Positions
 * are per sequence: each sequence's tokens in a call have strictly
 * increasing positions, the first one past the sequence's last cached
 * position (no gaps). Engines whose cache is one pool shared by every
 * sequence (llama.cpp's kv_unified) say so in info.kv_unified.
 * ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------
 * Op taps (ABI 1.1). The outputs of each operation of a layer, in data-flow
 * order, so that a difference between engines can be localized to one
 * operation: the host recomputes the operation exactly on the engine's own
 * inputs (the outputs of the operation before it) and compares. An engine
 * emits the ops it can (info.ops, a bit per KVV_PLUGIN_OP_* value) and
 * leaves the others out; the host lists those as "not tapped". Unless
 * noted, a tap's data is x [n][width] with one row per token of the call,
 * in call order, as float.
 * ------------------------------------------------------------------------ */
enum {
    KVV_PLUGIN_OP_ATTN_NORM = 0,  /* rmsnorm(x) * attn_norm                    [n][n_embd] */
    KVV_PLUGIN_OP_Q = 1,          /* xn Wq^T (+ bq), before q norm and RoPE     [n][n_head*head_dim] */
    KVV_PLUGIN_OP_K = 2,          /* xn Wk^T (+ bk)                            [n][n_head_kv*head_dim] */
    KVV_PLUGIN_OP_V = 3,          /* xn Wv^T (+ bv)                            [n][n_head_kv*head_dim_v] */
    KVV_PLUGIN_OP_Q_NORM = 4,     /* per-head rmsnorm(q) * q_norm (qwen3, gemma3) */
    KVV_PLUGIN_OP_K_NORM = 5,     /* per-head rmsnorm(k) * k_norm (qwen3, gemma3) */
    KVV_PLUGIN_OP_Q_ROPE = 6,     /* q after RoPE (the queries attention uses) */
    KVV_PLUGIN_OP_K_ROPE = 7,     /* k after RoPE, before rounding to the cache dtype */
    KVV_PLUGIN_OP_KQ = 8,         /* scores q.k (scaled; soft-capped for gemma2) per head
                                     over the call's visible keys: [n][n_head*n_keys],
                                     n_keys = width / n_head, keys = positions 0..n_keys-1
                                     of the sequence; invisible ones -inf */
    KVV_PLUGIN_OP_SOFTMAX = 9,    /* probabilities, same layout as KQ; invisible ones 0 */
    KVV_PLUGIN_OP_ATTN_OUT = 10,  /* attention output, heads concatenated [n][n_head*head_dim_v] */
    KVV_PLUGIN_OP_WO = 11,        /* attn_out Wo^T                             [n][n_embd] */
    KVV_PLUGIN_OP_POST_ATTN_NORM = 12, /* rmsnorm(wo) * post_attention_norm (gemma) */
    KVV_PLUGIN_OP_ATTN_RESID = 13,/* x + attention branch (llama.cpp's ffn_inp) [n][n_embd] */
    KVV_PLUGIN_OP_FFN_NORM = 14,  /* rmsnorm(.) * ffn_norm                     [n][n_embd] */
    KVV_PLUGIN_OP_GATE = 15,      /* xn Wgate^T                                [n][n_ff] */
    KVV_PLUGIN_OP_UP = 16,        /* xn Wup^T                                  [n][n_ff] */
    KVV_PLUGIN_OP_ACT = 17,       /* act(gate) * up (SiLU or tanh-GELU)        [n][n_ff] */
    KVV_PLUGIN_OP_DOWN = 18,      /* act Wdown^T                               [n][n_embd] */
    KVV_PLUGIN_OP_POST_FFW_NORM = 19, /* rmsnorm(down) * post_ffw_norm (gemma) */
    KVV_PLUGIN_OP_FFN_RESID = 20, /* the layer's output residual (l_out)       [n][n_embd] */
    /* after the last layer, reported with layer == n_layer: */
    KVV_PLUGIN_OP_OUT_NORM = 21,  /* rmsnorm(x) * output_norm                  [n][n_embd] */
    KVV_PLUGIN_OP_HEAD = 22,      /* logits before the final soft-cap          [n][n_vocab] */
    KVV_PLUGIN_OP_COUNT = 23
};

/* ------------------------------------------------------------------------
 * Negative controls. A check proves it can fail by planting a known
 * difference. A plugin that can plant one itself, inside its kernels, says so
 * in kvv_plugin_info.controls; the host emulates every requested control the
 * plugin did not plant, on its own side (flipped bit in a recomputed K row, a
 * perturbed final residual, reordered tokens) and records which one fired.
 * ------------------------------------------------------------------------ */
enum {
    /* kv_from_residual sums its dot products in another order */
    KVV_PLUGIN_CTL_KV_REVERSED_SUM = 1u << 0,
    /* flip the lowest mantissa bit of one weight (output_norm[0]) */
    KVV_PLUGIN_CTL_PERTURB_WEIGHT = 1u << 1
};

/* ------------------------------------------------------------------------
 * What the host offers a plugin (valid from open until close).
 * ------------------------------------------------------------------------ */
typedef struct {
    uint32_t struct_size;      /* sizeof(kvv_plugin_host) as the host knows it */
    uint32_t abi_major;        /* the host's KVV_PLUGIN_ABI_MAJOR / MINOR */
    uint32_t abi_minor;
    const char *host_version;  /* names the host, e.g. "kvverify (plugin ABI 1.1)" */
    /* Round x to the cache dtype with kvverify's rounding (nearest, ties to
     * even; NaN stays NaN) and widen it back to float: what the host's own
     * engines store. For a plugin that keeps its cache in a host-side array. */
    float (*round_to_dtype)(int dtype, float x);
    /* Widen one element of dtype at p (raw bits, see Conventions) to float. */
    float (*dtype_to_float)(int dtype, const void *p);
    /* Diagnostics: level 0 error, 1 warning, 2 info. The host prints errors
     * and warnings on stderr, info only when asked to be verbose. */
    void (*log)(void *log_user, int level, const char *msg);
    void *log_user;
} kvv_plugin_host;

/* ------------------------------------------------------------------------
 * Opening an engine.
 * ------------------------------------------------------------------------ */
typedef struct {
    uint32_t struct_size;      /* sizeof(kvv_plugin_params) as the host knows it */
    const char *model_path;    /* the GGUF file; the plugin loads it itself (its
                                  loader is part of what is certified) */
    const char *device;        /* a name from kvv_plugin_table.devices; "" = the first */
    const char *mode;          /* the mode the user asked for: "exact", "fast" or
                                  "invariant". A plugin without modes ignores it and
                                  reports its own name in describe (e.g. "native");
                                  one with modes rejects a name it lacks (USAGE). */
    int cache_type;            /* KVV_PLUGIN_DTYPE_* the cache must store */
    int n_ctx;                 /* positions 0..n_ctx-1 the cache must hold (>= 1) */
    int n_threads;             /* threads to use (>= 1); honoured with CAP_THREADS */
    int n_ubatch;              /* micro-batch size; 0 = the engine's default.
                                  Honoured with CAP_UBATCH */
    uint32_t controls;         /* KVV_PLUGIN_CTL_* the host would like planted */
    const char *const *options; /* n_options engine options "KEY=VALUE" (--engine-opt),
                                   in the order given; unknown keys are USAGE errors
                                   naming the key and the keys the plugin knows */
    int n_options;
    /* ABI 1.1 */
    int n_seq_max;             /* sequences the host will use at once (>= 1); an engine
                                  with CAP_SEQS serves at least these or fails open
                                  with UNSUPPORTED saying its limit */
} kvv_plugin_params;

/* What open reports back. The host zero-fills it and sets struct_size. */
typedef struct {
    uint32_t struct_size;      /* set by the host; the plugin writes only that prefix */
    uint64_t caps;             /* KVV_PLUGIN_CAP_* this engine, as opened, offers */
    /* The model as the plugin's own loader read it; the host checks every
     * field against its reading of the same file and refuses a mismatch. */
    int n_layer, n_embd, n_head, n_head_kv;
    int head_dim;              /* K per head */
    int head_dim_v;            /* V per head */
    int n_vocab;
    /* The engine as opened */
    int n_ctx;                 /* positions the cache holds (>= params.n_ctx) */
    int cache_type;            /* KVV_PLUGIN_DTYPE_* actually stored (= params) */
    int n_threads;             /* in effect (1 without CAP_THREADS) */
    int n_ubatch;              /* in effect (0 = whole calls) */
    uint32_t controls;         /* of params.controls, those the plugin planted itself */
    /* ABI 1.1 */
    int n_seq_max;             /* sequences served at once (with CAP_SEQS, >= 2); 0 = 1 */
    int kv_unified;            /* 1: one cache pool shared by every sequence; 0: a pool
                                  per sequence; -1 (or absent): not applicable / unknown */
    uint64_t ops;              /* with CAP_OP_TAPS: bit (1 << KVV_PLUGIN_OP_*) for each
                                  op hooks->op is called with */
} kvv_plugin_info;

/* Strings every report records (describe). The host zero-fills it and sets
 * struct_size; the plugin fills what applies, NUL-terminated. */
typedef struct {
    uint32_t struct_size;
    char mode[16];             /* "exact", "native", ... */
    char version[96];          /* the engine's version, e.g. "llama.cpp v0.5.0 ggml 0.9.4" */
    char device[96];           /* the device as the engine names it */
    char variant[64];          /* the build or kernel variant loaded, e.g. "ggml-cpu-zen4" */
    char flash_attn[16];       /* "on", "off", "auto", "n/a" */
    char kernels[192];         /* anything else that decides the bits (free text) */
} kvv_plugin_desc;

/* ------------------------------------------------------------------------
 * Hooks: the host passes these to forward; all optional (NULL = do not
 * call). They are called during forward, per layer in layer order. When the
 * engine splits a call into micro-batches it calls each hook once per
 * micro-batch: n and pos then describe that micro-batch's rows (positions
 * are absolute, so the host places rows by position). Buffers are valid only
 * during the hook call. The host never passes a hook whose capability the
 * plugin did not declare.
 * ------------------------------------------------------------------------ */
typedef struct {
    uint32_t struct_size;
    void *user;
    /* Residual stream ENTERING layer `layer` (layer 0 = the scaled token
     * embeddings), h [n][n_embd]. Also called with layer == n_layer for the
     * final residual before the output norm; an engine that computes it only
     * for the rows whose logits the call asks for (llama.cpp) passes just
     * those rows there (n and pos say which) rather than compute more than
     * the caller's call would: observing must not change a bit. With
     * CAP_RESIDUAL_WRITE the hook may overwrite h, and the pass must
     * continue from the new values. */
    void (*residual)(void *user, int layer, int n, const int32_t *pos, float *h);
    /* K and V exactly as the cache stores them (after q/k norm, RoPE and
     * rounding to the cache dtype), widened to float:
     * k [n][n_head_kv*head_dim], v [n][n_head_kv*head_dim_v]. */
    void (*kv)(void *user, int layer, int n, const int32_t *pos, const float *k,
               const float *v);
    /* Attention probabilities after softmax, p[(i*n_head + h)*n_keys + j] for
     * query i, head h, over the n_keys cached positions key_pos[] the call
     * could see (ascending); masked or evicted entries exactly 0. */
    void (*attn)(void *user, int layer, int n, const int32_t *pos, int n_keys,
                 const int32_t *key_pos, const float *p);
    /* Attention output before the output projection, [n][n_head*head_dim_v]. */
    void (*attn_out)(void *user, int layer, int n, const int32_t *pos, const float *o);
    /* Per-query key selection: keep[j] (all 1 on entry) cleared excludes key
     * key_pos[j] from query position qpos, head `head` (q: [head_dim], final). */
    void (*select)(void *user, int layer, int qpos, int head, const float *q, int n_keys,
                   const int32_t *key_pos, uint8_t *keep);
    /* ABI 1.1 (read it only when struct_size covers it). With CAP_OP_TAPS:
     * the output of operation `op` (KVV_PLUGIN_OP_*) of layer `layer`
     * (layer == n_layer for OUT_NORM and HEAD), x [n][width] (see "Op
     * taps"), called once per op per layer (per micro-batch), in data-flow
     * order, for the ops info.ops lists. Read-only: observing must not
     * change a bit of the pass. */
    void (*op)(void *user, int layer, int op, int n, const int32_t *pos, int width,
               const float *x);
} kvv_plugin_hooks;

typedef struct kvv_plugin_engine kvv_plugin_engine; /* the plugin's own state */

/* ------------------------------------------------------------------------
 * The table. Required slots must be non-NULL; optional ones say their
 * default. kvv_plugin_entry() returns a pointer to a static table.
 * ------------------------------------------------------------------------ */
typedef struct {
    uint32_t abi_major;        /* KVV_PLUGIN_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor;        /* KVV_PLUGIN_ABI_MINOR the plugin was built with */
    uint32_t struct_size;      /* sizeof(kvv_plugin_table) as the plugin knows it */
    const char *name;          /* engine name for reports: 1-15 characters of
                                  [A-Za-z0-9._-], e.g. "llama.cpp" */
    const char *version;       /* the plugin's own version */
    const char *devices;       /* comma-separated device names; the first is the
                                  default, e.g. "cpu,vulkan,cuda" */
    const char *options_help;  /* the KEY=VALUE options, one per line
                                  ("flash_attn=on|off|auto  ..."); may be NULL */

    /* Load params->model_path and create an engine with an empty cache.
     * host is borrowed until close. On success *out is the engine and info
     * is filled; on failure *out is NULL and nothing is left allocated.
     * Errors: USAGE (option, mode, device name), IO, FORMAT, UNSUPPORTED
     * (architecture, cache dtype), NO_DEVICE, NOMEM. Required. */
    int (*open)(const kvv_plugin_host *host, const kvv_plugin_params *params,
                kvv_plugin_engine **out, kvv_plugin_info *info, kvv_plugin_error *err);

    /* Free everything the engine holds. Accepts NULL. Required. */
    void (*close)(kvv_plugin_engine *e);

    /* Process n tokens (tokens[n], 1 <= n <= n_ctx, ids < n_vocab) at
     * positions pos[n] (each in 0..n_ctx-1, strictly increasing) against
     * the current cache: store their K/V, then each token attends to every
     * cached position <= its own (and inside the sliding window on local
     * layers). Writes logits per lm: LAST = [n_vocab], ALL = [n][n_vocab].
     * hooks may be NULL. Positions already cached are recomputed and
     * overwritten with CAP_OVERWRITE; without it the host never passes one
     * (see CAP_OVERWRITE). Errors: USAGE (token, position, n), UNSUPPORTED,
     * INTERNAL. Required. */
    int (*forward)(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                   const kvv_plugin_hooks *hooks, int lm, float *logits,
                   kvv_plugin_error *err);

    /* Empty the cache (a new sequence). Required. */
    int (*kv_clear)(kvv_plugin_engine *e, kvv_plugin_error *err);

    /* Fill d (see kvv_plugin_desc). (optional) default: the host records the
     * table's name and version and mode "native". */
    void (*describe)(kvv_plugin_engine *e, kvv_plugin_desc *d);

    /* Recompute layer `layer`'s K/V from residuals h [n][n_embd] entering it,
     * exactly as forward computes them (attn_norm, projections, biases, q/k
     * norm, RoPE at pos[i], rounding to the cache dtype), widened to float:
     * k [n][n_head_kv*head_dim], v [n][n_head_kv*head_dim_v]. Must not change
     * the cache. (optional, CAP_KV_FROM_RESIDUAL) default: UNSUPPORTED. */
    int (*kv_from_residual)(kvv_plugin_engine *e, int layer, int n, const float *h,
                            const int32_t *pos, float *k, float *v, kvv_plugin_error *err);

    /* Read layer `layer`'s cache at positions pos0..pos0+n-1 as stored:
     * k [n][n_head_kv*head_dim] and v [n][n_head_kv*head_dim_v] elements of
     * the cache dtype (raw bits), present [n][n_head_kv] = 1 where the
     * (position, KV head) entry is live, else 0 (its k/v bytes are then
     * unspecified). The host calls it after every forward for the positions
     * the call stored and keeps a mirror that checks and policies read and
     * edit; their edits come back before the next forward as kv_clear,
     * kv_evict and kv_write calls (or the forward fails with UNSUPPORTED when
     * the slot is missing). (optional, CAP_KV_READ) default: UNSUPPORTED. */
    int (*kv_read)(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
                   uint8_t *present, kvv_plugin_error *err);

    /* Remove the entry at position pos: layer -1 = every layer, head -1 =
     * every KV head. A removed entry is invisible to attention from then on.
     * (layer, head) = (-1, -1) needs CAP_KV_EVICT, anything narrower
     * CAP_KV_EVICT_HEAD. (optional) default: UNSUPPORTED. */
    int (*kv_evict)(kvv_plugin_engine *e, int layer, int pos, int head,
                    kvv_plugin_error *err);

    /* Store one position's rows of layer `layer` (k [n_head_kv*head_dim],
     * v [n_head_kv*head_dim_v], cache dtype, raw bits) and mark every head of
     * it present. (optional, CAP_KV_WRITE) default: UNSUPPORTED. */
    int (*kv_write)(kvv_plugin_engine *e, int layer, int pos, const void *k, const void *v,
                    kvv_plugin_error *err);

    /* ---- ABI 1.1: sequences (all four with CAP_SEQS; see "Sequences") ---- */

    /* Process n tokens of one or more sequences in ONE call, as a server
     * batches requests: token i is tokens[i] at position pos[i] of sequence
     * seq[i] (0 <= seq[i] < info.n_seq_max). Each sequence's tokens are
     * stored in its own cache and attend only to it. want[i] = 1 asks for
     * token i's logits: they are written to logits as one [n_vocab] row per
     * asked token, in call order (logits may be NULL when none is asked).
     * No hooks. Errors: USAGE (token, position, sequence, n), UNSUPPORTED,
     * INTERNAL. (optional, CAP_SEQS) default: UNSUPPORTED. */
    int (*decode)(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                  const int32_t *seq, const uint8_t *want, float *logits,
                  kvv_plugin_error *err);

    /* Remove positions p0..p1-1 of sequence seq from its cache (p1 < 0: to
     * the end); (0, -1) empties it. Other sequences are untouched.
     * (optional, CAP_SEQS) default: UNSUPPORTED. */
    int (*seq_rm)(kvv_plugin_engine *e, int seq, int p0, int p1, kvv_plugin_error *err);

    /* Make positions p0..p1-1 of sequence dst hold what sequence src holds
     * there (p1 < 0: to src's end), as a prompt cache or a fork does; dst
     * must hold no position >= p0 (the host calls seq_rm first). The copy
     * must be exact: attention in dst then computes as if dst had computed
     * those positions itself. (optional, CAP_SEQS) default: UNSUPPORTED. */
    int (*seq_cp)(kvv_plugin_engine *e, int src, int dst, int p0, int p1,
                  kvv_plugin_error *err);

    /* kv_read for sequence seq (same layout and rules as kv_read).
     * (optional, CAP_SEQS) default: UNSUPPORTED. */
    int (*kv_read_seq)(kvv_plugin_engine *e, int seq, int layer, int pos0, int n, void *k,
                       void *v, uint8_t *present, kvv_plugin_error *err);
} kvv_plugin_table;

/* The entry symbol's type: returns the static table (never NULL). Called
 * once after dlopen, before anything else. */
typedef const kvv_plugin_table *(*kvv_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif

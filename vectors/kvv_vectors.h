/*
 * kvv_vectors.h — golden vectors: run an engine once over a prompt and a
 * greedy continuation, record everything it computed (vectors/kvv_file.h
 * records), and later recompute and compare bit for bit.
 *
 * Records of a vector (names, types and shapes; docs/vectors-format.md):
 *
 *   meta          json                       vectors/kvv_meta.h
 *   prompt        i32 [n_prompt]             prompt token ids
 *   greedy        i32 [n_gen]                greedy tokens (argmax, lowest id on ties)
 *   logits        f32 [n_gen][n_vocab]       logits that chose each greedy token
 *   logits.hash   u64 [n_gen]                (instead of logits with --logits hash)
 *   hash.resid    u64 [n_layer+1][n_pos]     FNV-1a 64 of each residual row entering
 *                                            layer l (l = n_layer: final residual)
 *   hash.k        u64 [n_layer][n_pos]       FNV-1a 64 of each cached K row
 *   hash.v        u64 [n_layer][n_pos]       ... V row
 *   full.resid    f32 [n_layer+1][n_pos][n_embd]   (--full)
 *   full.k        f32 [n_layer][n_pos][kv_dim_k]   (--full)
 *   full.v        f32 [n_layer][n_pos][kv_dim_v]   (--full)
 *   kv            u64 [n_layer][5]           kv result: elements compared, K and V
 *                                            elements differing when recomputed from
 *                                            the residuals all at once, then one
 *                                            token at a time
 *   patch.donor   i32 [n_prompt]             patch: prompt B (random, seed + 1)
 *   patch         u64 [n_layer][2]           patch result per layer: logits elements
 *                                            differing from prompt A's, and the
 *                                            FNV-1a 64 of the patched logits
 *
 * n_pos = n_prompt + n_gen - 1 (the last greedy token is chosen, never fed).
 *
 *   kvv_vectors_opts o = kvv_vectors_opts_default();
 *   o.tokens = toks; o.n_tokens = 8; o.n_gen = 8;
 *   kvv_vectors_gen("m.gguf", &o, "m.kvv", &err);
 *   kvv_vectors_result res;
 *   kvv_vectors_check("m.gguf", "m.kvv", &over, &res, &err);  // res.n_diverged
 *   kvv_vectors_result_free(&res);
 */
#ifndef KVV_VECTORS_H
#define KVV_VECTORS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "common/error.h"
#include "vectors/kvv_file.h"

/* FNV-1a 64 over the little-endian bytes of n fp32 values (the hash of every
 * hash.* record). Defined so any implementation can recompute it. */
uint64_t kvv_vectors_hash_f32(const float *x, uint64_t n);

/* Deterministic random prompt: n ids uniform in [0, n_vocab) from splitmix64
 * (same seed -> same tokens everywhere). */
void kvv_vectors_random_tokens(uint64_t seed, int n_vocab, int32_t *out, int n);

typedef struct {
    kvv_engine_opts engine;     /* name, mode, threads, cache type (control: see below) */
    const int32_t *tokens;      /* prompt (borrowed), n_tokens >= 1 */
    int n_tokens;
    const char *prompt_source;  /* "text", "tokens" or "random" (for meta) */
    const char *prompt_text;    /* text prompts: the text (for meta), else NULL */
    uint64_t seed;              /* patch donor = random(seed + 1); recorded */
    const char *kvverify_version; /* recorded in meta (cli passes KVV_VERSION) */
    int n_gen;                  /* greedy steps, >= 1 (default 8) */
    bool full;                  /* store full K/V/residual tensors */
    bool logits_full;           /* logits as bits (default) or hashes */
    bool patch;                 /* compute the kv and patch records (default true) */
    /* Negative control for check: flip the lowest mantissa bit of element 0
     * of the residual entering layer perturb_layer at position perturb_pos
     * (through the writable residual hook). -1 = off. */
    int perturb_layer;
    int perturb_pos;
    /* (optional) progress: label, done of total, from the computing thread */
    void (*progress)(void *user, const char *label, long done, long total);
    void *progress_user;
} kvv_vectors_opts;

kvv_vectors_opts kvv_vectors_opts_default(void);

/* Run the engine and write the vector to out_path (atomically). The model is
 * opened from model_path (its sha256 and base name go into meta).
 * @return KVV_OK; KVV_ERR_USAGE (bad options, token out of range);
 * errors of the model, engine or file writer. */
kvv_status kvv_vectors_gen(const char *model_path, const kvv_vectors_opts *o,
                           const char *out_path, kvv_error *err);

/* One divergence found by check. Fields that do not apply are -1. */
typedef struct {
    char record[KVV_FILE_NAME_MAX + 1];
    int layer;          /* layer (-1 for logits and greedy: see step) */
    int position;       /* sequence position (-1 for per-layer results) */
    int step;           /* greedy step for logits/greedy, else -1 */
    int head;           /* KV head for full.k/full.v, else -1 */
    int index;          /* element index inside the head / row / result */
    uint64_t expected;  /* stored bits (fp32 bits, token id, hash, count) */
    uint64_t actual;    /* recomputed bits */
    bool is_f32;        /* expected/actual are fp32 bits */
} kvv_divergence;

/* Per-record tally of a check. */
typedef struct {
    char name[KVV_FILE_NAME_MAX + 1];
    uint64_t compared;  /* elements compared */
    uint64_t diverged;  /* elements that differ */
} kvv_record_tally;

typedef struct {
    bool diverged;              /* any record differs */
    kvv_divergence first;       /* first in computation order: position, layer,
                                   resid < K < V < logits < greedy < kv < patch */
    uint64_t n_diverged;        /* all differing elements, every record */
    kvv_record_tally tally[24];
    int n_tally;
    double seconds;             /* wall time of the recomputation + compare */
    kvv_engine_desc engine;     /* the engine that recomputed */
    char model_sha256[65];
} kvv_vectors_result;

/* Overrides for check: engine name/mode/threads different from the file's
 * (e.g. certify the cpu engine against a reference vector), control flags,
 * and the residual perturbation above. NULL fields / -1 = from the file. */
typedef struct {
    const char *engine;
    const char *mode;
    int n_threads;          /* 0 = 1 */
    const char *device;     /* plugins: --device (NULL = the engine's default) */
    int n_ubatch;           /* plugins: --ubatch (0 = the engine's) */
    const char *const *engine_opts; /* plugins: --engine-opt KEY=VALUE, borrowed */
    int n_engine_opts;
    const char *isa;        /* cpu: kernel table (--isa); NULL = the recorded one when
                               the engine is the recorded cpu engine, else the best */
    unsigned control;       /* KVV_CTL_* flags */
    int perturb_layer;      /* -1 = off */
    int perturb_pos;
    void (*progress)(void *user, const char *label, long done, long total); /* optional */
    void *progress_user;
} kvv_vectors_check_opts;

kvv_vectors_check_opts kvv_vectors_check_opts_default(void);

/* Read and validate vec_path, verify that model_path's sha256 is the one
 * recorded, recompute everything with the recorded options and compare.
 * @return KVV_OK when a comparison was made (r->diverged says how it went);
 * KVV_ERR_FORMAT for a corrupt file, a wrong model (hash mismatch) or a
 * record set that does not match its meta; KVV_ERR_IO; engine errors. */
kvv_status kvv_vectors_check(const char *model_path, const char *vec_path,
                             const kvv_vectors_check_opts *co, kvv_vectors_result *r,
                             kvv_error *err);

/* One line "RECORD layer L position P head H index I: expected 0x.. actual 0x.."
 * into buf. @return buf. */
char *kvv_divergence_format(const kvv_divergence *d, char *buf, size_t size);

#endif

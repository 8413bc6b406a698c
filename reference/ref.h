/*
 * ref.h — the deterministic reference engine (kvverify's oracle).
 *
 * Scalar, single-threaded, fp32 activations. Weight matrices stay as the
 * file stores them (the model's mapping, shared with any other engine on
 * the same model); each row is dequantized exactly when it is used. Every
 * reduction runs in one documented order that depends only on
 * its length (docs/reference-engine.md; comments in ref_ops.c), the
 * build uses -ffp-contract=off, and no libm transcendental is on the computed
 * path (reference/kmath.h). So: the same model and inputs give the same bits
 * on any machine, compiler and -O level, and a prompt processed in one batch,
 * in chunks or token by token gives the same bits by construction.
 *
 *   kvv_ref *r; kvv_ref_opts o = kvv_ref_opts_default();
 *   kvv_ref_open(model, &o, &r, &err);
 *   int32_t tok[3] = {1, 403, 407}, pos[3] = {0, 1, 2};
 *   kvv_ref_forward(r, 3, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err);
 *   kvv_ref_close(r);
 */
#ifndef KVV_REF_H
#define KVV_REF_H

#include <stdint.h>

#include "model/arch.h"
#include "common/error.h"
#include "runtime/kv_cache.h"
#include "runtime/kv_seqs.h"
#include "runtime/mem_limit.h"
#include "runtime/runtime.h" /* also KVV_CTL_* and KVV_GGML_* flags */

typedef struct {
    kvv_cache_type cache_type;  /* default f32 */
    int n_ctx;                  /* cache positions; 0 = min(n_ctx_train, 4096) */
    unsigned control;           /* KVV_CTL_* flags (runtime/runtime.h), 0 normally */
    unsigned ggml;              /* KVV_GGML_* emulation flags (runtime/runtime.h, ref_ggml.c), 0 normally */
    int n_seq;                  /* sequences kvv_ref_decode takes, 1..KVV_KV_MAX_SEQS
                                 * (0 = 1); each cache beyond sequence 0's is
                                 * allocated on the sequence's first use */
} kvv_ref_opts;

kvv_ref_opts kvv_ref_opts_default(void);

typedef struct kvv_ref kvv_ref;

/* What kvv_ref_open(m, o) will allocate (norm and bias vectors as fp32, one
 * weight row of scratch, the KV cache), part by part, into *p (o NULL: the
 * defaults). */
void kvv_ref_plan(const kvv_model *m, const kvv_ref_opts *o, kvv_mem_plan *p);

/* Binds the weights, after checking kvv_ref_plan against the memory limit
 * (runtime/mem_limit.h): matrices are borrowed from the model's mapping (the
 * model must outlive the engine), norm and bias vectors dequantized to fp32.
 * Errors: KVV_ERR_UNSUPPORTED for a tensor type it cannot dequantize,
 * KVV_ERR_FORMAT for a tensor whose rows do not fit its data, KVV_ERR_NOMEM
 * (the plan does not fit: the message names each part). */
kvv_status kvv_ref_open(const kvv_model *m, const kvv_ref_opts *o, kvv_ref **out, kvv_error *err);
void kvv_ref_close(kvv_ref *r); /* accepts NULL */

/* Process n tokens at distinct positions pos[] (each < n_ctx, in any
 * order) against the current cache, as the engine contract at the top of
 * engine/engine.h states for every engine: their K/V are stored, then every
 * token attends to the present cache entries at positions <= its own (and
 * inside the sliding window on local layers); a position already cached is
 * recomputed and overwritten. Hooks may be NULL. logits: rows per mode ×
 * n_vocab. Errors: KVV_ERR_USAGE (token id outside the vocabulary, position
 * outside 0..n_ctx-1, n <= 0, logits NULL with a mode that writes them),
 * KVV_ERR_NOMEM. */
kvv_status kvv_ref_forward(kvv_ref *r, int n, const int32_t *tokens, const int32_t *pos,
                           const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                           kvv_error *err);

/* Recompute K and V of layer `layer` from residuals h [n][n_embd] entering
 * that layer, exactly as forward does (attn_norm, projections, biases, q/k
 * norm, RoPE at pos[i], rounding to the cache dtype): k [n][n_head_kv*head_dim],
 * v [n][n_head_kv*head_dim_v]. Does not touch the cache. */
kvv_status kvv_ref_kv_from_residual(kvv_ref *r, int layer, int n, const float *h,
                                    const int32_t *pos, float *k, float *v, kvv_error *err);

/* The engine's cache (borrowed; policies evict/insert through it): sequence 0's. */
kvv_kv_cache *kvv_ref_cache(kvv_ref *r);

/* Several sequences in one call (engine/engine.h kvv_engine_decode): n
 * tokens, token t of sequence seq[t] at position pos[t], each sequence's
 * tokens continuing its cache in order without gaps (kvv_kv_seqs_check).
 * Every token's projections and FFN as forward computes them, its K/V
 * stored in its sequence's cache, attention against that cache only. A
 * token's bits depend on its own sequence alone (every reduction's order is
 * fixed by its length), so the same request gives the same bits whatever
 * else shares the call. logits: one n_vocab row per token with want[t] set,
 * in call order (want NULL: none). Errors as forward's, KVV_ERR_USAGE for a
 * sequence id or position breaking the rule, KVV_ERR_NOMEM. */
kvv_status kvv_ref_decode(kvv_ref *r, int n, const int32_t *tokens, const int32_t *pos,
                          const int32_t *seq, const uint8_t *want, float *logits, kvv_error *err);

/* The sequences' caches (borrowed; runtime/kv_seqs.h: seq_rm, seq_cp and
 * reading rows back go through it). */
kvv_kv_seqs *kvv_ref_seqs(kvv_ref *r);

#endif

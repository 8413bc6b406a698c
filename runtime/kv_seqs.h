/*
 * kv_seqs.h — the KV caches of several sequences (requests) of one engine,
 * as the built-in engines hold them for kvv_engine_decode (engine/engine.h
 * "sequences"): a kvv_kv_cache per sequence, sequence 0's being the
 * engine's own (borrowed), the others allocated on their first use (so
 * n_seq_max costs nothing until a sequence is used). The reference and the
 * cpu engine share this code: the same checks, messages and copy rules.
 *
 *   kvv_kv_seqs s;
 *   kvv_kv_seqs_init(&s, engine_cache, n_seq);
 *   if (kvv_kv_seqs_check(&s, n, pos, seq, "decode", &err)) ...   // no gaps
 *   kvv_kv_cache *c = kvv_kv_seqs_get(&s, 3, true);                // allocates
 *   kvv_kv_seqs_free(&s);                                          // not seq 0's
 */
#ifndef KVV_KV_SEQS_H
#define KVV_KV_SEQS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "runtime/kv_cache.h"

/* The most sequences one engine holds (= KVV_ENGINE_MAX_SEQS, engine.h). */
#define KVV_KV_MAX_SEQS 64

typedef struct {
    int n_seq;                          /* ids 0..n_seq-1 are accepted */
    kvv_kv_cache *c[KVV_KV_MAX_SEQS];   /* [0] borrowed (the engine's); others owned,
                                         * NULL until first used */
} kvv_kv_seqs;

/* seq0: the engine's cache (borrowed; it gives the others their shape and
 * dtype). n_seq is clamped to 1..KVV_KV_MAX_SEQS. */
void kvv_kv_seqs_init(kvv_kv_seqs *s, kvv_kv_cache *seq0, int n_seq);
/* Frees every cache but sequence 0's. Accepts NULL. */
void kvv_kv_seqs_free(kvv_kv_seqs *s);

/* Sequence seq's cache; when it has none yet: a new empty one if create
 * (NULL on OOM), else NULL (an empty sequence). seq must be < n_seq. */
kvv_kv_cache *kvv_kv_seqs_get(kvv_kv_seqs *s, int seq, bool create);

/* One past the last position sequence seq holds (any layer, any head):
 * where its next token must be. 0 for an empty sequence. */
int kvv_kv_seqs_next(const kvv_kv_seqs *s, int seq);

/* The batch rule of kvv_engine_decode: every seq[i] in 0..n_seq-1, and each
 * sequence's tokens at strictly increasing positions, its first one at
 * kvv_kv_seqs_next (no gaps, no overwrite). Then allocates the cache of
 * every sequence in the batch. KVV_ERR_USAGE naming the token, its
 * sequence and the position expected; KVV_ERR_NOMEM. `who` prefixes the
 * message ("engine ref: decode"). */
kvv_status kvv_kv_seqs_check(kvv_kv_seqs *s, int n, const int32_t *pos, const int32_t *seq,
                             const char *who, kvv_error *err);

/* kvv_engine_seq_rm: positions p0..p1-1 of seq (p1 < 0: to the end) no
 * longer present in any layer (a truncation when it runs to the end). */
void kvv_kv_seqs_rm(kvv_kv_seqs *s, int seq, int p0, int p1);

/* kvv_engine_seq_cp: dst's positions from p0 on are removed, then the K/V
 * bytes and presence flags of src's positions p0..p1-1 (p1 < 0: to src's
 * end) are copied to dst as stored (exact). KVV_ERR_NOMEM when dst's cache
 * cannot be allocated. */
kvv_status kvv_kv_seqs_cp(kvv_kv_seqs *s, int src, int dst, int p0, int p1, kvv_error *err);

/* kvv_engine_seq_kv: rows pos0..pos0+n-1 of layer `layer` of seq widened
 * to fp32 (k [n][n_kv_head*head_dim_k], v [n][n_kv_head*head_dim_v]) and
 * their presence [n][n_kv_head] (may be NULL); an empty sequence reads as
 * zeros, nothing present. Ranges checked by the caller. */
void kvv_kv_seqs_read(const kvv_kv_seqs *s, int seq, int layer, int pos0, int n, float *k,
                      float *v, uint8_t *present);

/* A planted fault, for the batch check's negative control (the cpu
 * engine's seq_leak=1, the example plugin's fault=seq-leak): after a call,
 * with caches[0..n) its sequences in order of appearance and last[i] the
 * last position sequence i computed in it, each one's layer-0 K/V row at
 * the last position it shares with the next one (cyclically) becomes that
 * one's, taken before any is changed: its attention then reads another
 * request's row. n < 2 plants nothing. @return false when no memory was
 * left (nothing planted: the control then shows it as not detected). */
bool kvv_kv_caches_leak(kvv_kv_cache *const *caches, const int *last, int n);

#endif

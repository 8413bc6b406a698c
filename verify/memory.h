/*
 * memory.h — `kvverify memory`: bytes held over a multi-turn conversation by
 * the full cache and by KV-Direct (both modes) at a live-token budget
 * (DESIGN.md §4 memory), plus the arithmetic behind the paper's Gemma 3-4B
 * figures for any shape.
 *
 * Measured mode: each turn prefills the turn's user tokens in one batch and
 * then decodes `gen_per_turn` tokens greedily; after every turn the bytes
 * each policy holds (live K/V + checkpoints, exact) are recorded. The
 * conversations run in lockstep, and the logits of every forward of each
 * KV-Direct mode are compared bit for bit with the full cache's.
 *
 * Verdict: PASS iff both KV-Direct conversations are bit-equal to the full
 * cache's (every logit, hence every token) and the control is detected:
 * kvdirect-layer with bf16 checkpoints must differ; force_fail plants bf16
 * checkpoints into both real conversations. SKIPPED (exit 77) when the
 * budget holds the whole conversation: nothing was evicted, nothing
 * verified.
 *
 * Arithmetic mode (kvv_memory_arith): no model file; from hyperparameters
 * alone, the bytes a full cache, KV-Direct and a sliding-window-aware cache
 * hold at a range of context lengths.
 */
#ifndef KVV_MEMORY_H
#define KVV_MEMORY_H

#include <stdio.h>

#include "verify/check.h"

typedef struct {
    kvv_check_opts check;          /* model, engine, seed, progress (tokens unused) */
    int n_turns;                   /* default 20 */
    int gen_per_turn;              /* default 16 */
    int budget;                    /* KV-Direct live tokens; 0 = a quarter of the conversation */
    const int32_t *const *turn_tokens; /* per-turn user tokens; NULL = seeded random ids */
    const int *turn_len;
    int random_turn_len;           /* length of random turns (default 12) */
} kvv_memory_opts;

typedef struct {
    int turn;
    int positions;                 /* positions in the cache after the turn */
    uint64_t full_bytes;
    uint64_t kvd_layer_bytes;
    uint64_t kvd_token_bytes;
} kvv_memory_turn;

typedef struct {
    int n_turns;
    kvv_memory_turn *turns;
    uint64_t peak_full, peak_layer, peak_token;
    int budget;
    bool layer_tokens_equal, token_tokens_equal; /* generated tokens identical to full */
    bool layer_bit_equal, token_bit_equal;       /* every logit bit-equal to full's */
    /* why the engine could not run a mode ("" = it ran): its figures are 0 */
    char layer_unsupported[192], token_unsupported[192];
    int64_t recomputed_layer, recomputed_token;  /* (token, layer) rows restored */
} kvv_memory_result;

kvv_status kvv_check_memory(const kvv_memory_opts *o, kvv_memory_result *res,
                            kvv_check_result *r, kvv_error *err);
void kvv_memory_result_free(kvv_memory_result *res);
void kvv_memory_print(FILE *f, const kvv_memory_result *res);

/* What the arithmetic assumes. */
typedef struct {
    double full_mb, kvd_mb;   /* figures to reproduce, "full = full_mb, KV-Direct =
                                 kvd_mb" (MB = 1e6 bytes); <= 0: none */
    int budget;               /* KV-Direct's live tokens (default 256) */
    kvv_cache_type storage;   /* element type of K/V and residuals (default bf16, as the
                                 paper's figures assume) */
} kvv_memory_arith_opts;

kvv_memory_arith_opts kvv_memory_arith_opts_default(void);

/* Arithmetic table for hyperparameters hp: bytes per token, rows for
 * several context lengths (full cache, window-aware cache, both KV-Direct
 * modes at o->budget live tokens), and the (n, B) pair that reproduces the
 * figures o gives. */
void kvv_memory_arith(FILE *f, const kvv_hparams *hp, const kvv_memory_arith_opts *o);
/* The same as one JSON object (new reference; NULL on OOM). */
json_t *kvv_memory_arith_json(const kvv_hparams *hp, const kvv_memory_arith_opts *o);

#endif

/*
 * op_explain.h — why an op is beyond budget (issue 36): the op is run
 * again, exactly but for one named hypothesis, on the engine's own inputs,
 * and each hypothesis is held against the engine's bits:
 *
 *   inputs rounded to f16 / bf16; output rounded to f16 / bf16; the
 *   activation from a 16-bit lookup table (ggml's fp16 GELU/SiLU table);
 *   FMA contraction; fp32 sums in another order (ascending, pairwise,
 *   blocks of 16/32/256); denormals flushed; activations quantized to Q8_0
 *   (ggml's vec_dot_type for Q8_0/Q4_0 weights).
 *
 * A hypothesis reproduces the engine when at least 99% of the op's
 * elements are bit-equal to it, or explains it when the engine is within
 * the op's budget of it (max |b - h| / (scale u) <= budget) — with the
 * hypothesis' own error against the exact op within a factor 2 of the
 * engine's. "None of the known" (n_explained 0) is an honest answer.
 */
#ifndef KVV_OP_EXPLAIN_H
#define KVV_OP_EXPLAIN_H

#include "verify/oplocal.h"

#define KVV_OPL_N_HYP 13

typedef struct {
    const char *name;     /* "inputs rounded to f16", ... (static) */
    bool applies;         /* the hypothesis means something for this op */
    double bits_equal;    /* fraction of elements bit-equal to the hypothesis */
    double resid;         /* max |b - h| / (scale u): the engine against the hypothesis */
    double hyp_err;       /* max |h - exact| / (scale u): the hypothesis' own error */
    bool reproduces;      /* bits_equal >= 0.99 */
    bool explains;        /* reproduces, or resid <= budget and hyp_err within 2x of b's */
} kvv_opl_hyp_result;

typedef struct {
    int layer, op;        /* the op explained (rep->first) */
    double err, budget;   /* its error and budget (u) */
    kvv_opl_hyp_result h[KVV_OPL_N_HYP];
    int n_explained;
} kvv_opl_explanation;

/* Test every hypothesis on (layer, op) of rep (kvv_opl_run's; use
 * rep->first's). @return false when the op was not checked (or no memory). */
bool kvv_opl_explain(const kvv_opl_report *rep, int layer, int op, kvv_opl_explanation *out);

#endif

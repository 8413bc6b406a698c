/*
 * numerics.h — how far each engine's operations are from the correctly
 * rounded answer, in ULPs, on the real data of a forward pass (issue 8).
 *
 * Bit-equality between two engines says they agree, not that either is
 * right. kvv_numerics_run:
 *   1. runs the reference engine's forward pass over the prompt (one batch,
 *      positions 0..n-1) and captures through its hooks the residual
 *      entering every layer, K/V as cached, the attention probabilities and
 *      the attention output;
 *   2. rebuilds every op input of every layer from those with the
 *      reference's own ops (the same calls its forward makes) and checks the
 *      rebuild bit for bit against what the hooks saw (K after RoPE, the
 *      softmax output, the next residual, the logits) — so the inputs are
 *      the real ones;
 *   3. on `samples` token rows per layer feeds the same fp32 inputs to each
 *      op set (engine/engine_ops.h: ref, cpu fast, cpu invariant, ...) and
 *      to the MPFR oracle (reference/oracle.h) and accumulates, per engine,
 *      layer and op, the ULP distance of every output element from the
 *      correctly rounded result: histogram, max, mean and where the max is.
 *   Inputs per op:
 *     rmsnorm  residual rows (attn_norm, ffn_norm), projection rows (gemma's
 *              post norms), the final residual (output_norm)
 *     matmul   normed rows x Wq/Wk/Wv, attention output x Wo, FFN input x
 *              Wgate/Wup, act*up x Wdown, normed final rows x output; the
 *              whole prompt as one batch, as the forward pass runs it
 *     dot      q . k of every visible key (the attention-score products)
 *     softmax  the attention scores of every head of the sampled rows
 *     rope     Q and K head vectors before RoPE
 *     silu, gelu  the FFN gate values (both forms measured on every model)
 *     softcap  attention scores before the cap (gemma2) and the final
 *              logits, with the model's caps (30 when the model has none)
 *   4. measures each op set's portable scalar math (exp, tanh, sin, cos,
 *      pow) on dense samples of the ranges the engines use.
 *
 *   kvv_numerics_opts o = kvv_numerics_opts_default();
 *   o.model = m; o.tokens = toks; o.n_tokens = 32;
 *   kvv_ops *ref, *fast;  kvv_ops_open_ref(m, &eo, &ref, &err); ...
 *   kvv_ops *list[2] = {ref, fast};
 *   kvv_numerics_report rep;
 *   if (kvv_numerics_run(&o, ref, list, 2, &rep, &err)) ...
 *   rep.engines[1].total[KVV_OP_MATMUL].hist.max ...
 *   kvv_numerics_report_free(&rep);
 */
#ifndef KVV_NUMERICS_H
#define KVV_NUMERICS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine_ops.h"
#include "reference/oracle.h"
#include "verify/check.h"

typedef struct {
    const kvv_model *model;      /* borrowed; required */
    const int32_t *tokens;       /* the prompt (borrowed), n_tokens >= 1 */
    int n_tokens;
    int samples;                 /* token rows measured per layer (default 4; <= n_tokens) */
    uint64_t seed;               /* picks the rows (default 1); row n-1 is always one */
    int max_outputs;             /* weight rows per matrix and token row (default 256) */
    int math_samples;            /* samples per math function (default 20000; 0 = none) */
    bool force_fail;             /* plant one flipped bit (the lowest mantissa bit) in the
                                    first rebuilt value the rebuild check compares: the
                                    check must then find it (capture_mismatch >= 1) */
    kvv_progress_fn progress;    /* optional */
    void *progress_user;
} kvv_numerics_opts;

kvv_numerics_opts kvv_numerics_opts_default(void);

/* Where an error was found. */
typedef struct {
    int layer;          /* n_layer = the output block */
    int row;            /* token row of the prompt (= its position) */
    int index;          /* output element within the op's output */
    float input;        /* the element's own input (NaN for dot/matmul) */
    float got, exact;   /* the engine's and the correctly rounded result */
    uint64_t ulp;       /* their distance (KVV_ULP_NAN: a NaN) */
    char what[64];      /* "attn_q row 17 (K=64)", "head 3 of 14 keys", ... */
    bool set;
} kvv_numerics_where;

typedef struct {
    kvv_oracle_hist hist;
    kvv_numerics_where worst;
    /* matmul and dot only: the largest |got - exact| / ulp(sum |a[i]*b[i]|),
     * the error relative to the magnitude of the terms rather than of the
     * (possibly cancelled) result; classic bound: about the number of
     * additions in the longest chain, n/lanes + lanes. */
    double max_scaled;
} kvv_numerics_cell;

typedef struct {
    char name[32];                        /* "ref", "cpu/fast", ... */
    kvv_engine_desc desc;
    bool measured[KVV_OP_COUNT];          /* false: the engine has no separate kernel */
    char where[KVV_OP_COUNT][96];         /* the engine's code for each op */
    kvv_numerics_cell *cells;             /* [(n_layer + 1) * KVV_OP_COUNT], owned */
    kvv_numerics_cell total[KVV_OP_COUNT];
} kvv_numerics_engine;

/* One portable math function of one engine over one range. */
typedef struct {
    char engine[32];
    kvv_math_fn fn;
    char range[64];         /* "[-104, 89]", "x in [1, 1e8], y = -2/n_rot" */
    char where[96];
    long samples;
    double max_err;         /* largest |got - exact| / ulp(exact) */
    uint64_t max_ulp;       /* largest distance from the correctly rounded result */
    long n_not_rounded;     /* samples not equal to the correctly rounded result */
    float worst_x, worst_y, worst_got, worst_exact;
} kvv_numerics_math;

typedef struct {
    int n_layer, n_tokens, samples, max_outputs;
    int *rows;                       /* [samples] the measured token rows, ascending */
    bool used[KVV_OP_COUNT];         /* the model's forward uses the op */
    float attn_cap, final_cap;       /* soft-caps measured (0: none measured) */
    kvv_numerics_engine *engines;    /* [n_engines] */
    int n_engines;
    kvv_numerics_math *math;         /* [n_math] */
    int n_math;
    long capture_checked;            /* rebuilt values compared with the hooks */
    long capture_mismatch;           /* ... that differed (0 = inputs are the real ones) */
    char capture_note[160];          /* first mismatch, if any ("planted: " first when
                                        force_fail planted it) */
    kvv_oracle_stats oracle;
    double seconds;
} kvv_numerics_report;

/* Run the measurement. capture: the reference op set (kvv_ops_open_ref;
 * its engine runs the forward pass and its tensor() gives the weights);
 * ops[0..n_ops): the op sets to measure (capture may be one of them).
 * Errors: KVV_ERR_USAGE (bad options: message names the field),
 * KVV_ERR_NOMEM, engine errors. On success rep is filled (free it with
 * kvv_numerics_report_free); on error rep holds nothing. */
kvv_status kvv_numerics_run(const kvv_numerics_opts *o, kvv_ops *capture, kvv_ops *const *ops,
                            int n_ops, kvv_numerics_report *rep, kvv_error *err);
void kvv_numerics_report_free(kvv_numerics_report *rep); /* accepts NULL */

/* Cell of engine e, layer l (0..n_layer), op. */
const kvv_numerics_cell *kvv_numerics_cell_at(const kvv_numerics_report *rep, int e, int layer,
                                              kvv_op op);

#endif

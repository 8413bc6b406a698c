/*
 * oplocal_impl.h — what oplocal.c and op_explain.c share: the captured
 * taps, the weights and the evaluation of one op on one row under a
 * hypothesis (kvv_opl_hyp; the exact op is the zero hypothesis).
 */
#ifndef KVV_OPLOCAL_IMPL_H
#define KVV_OPLOCAL_IMPL_H

#include "engine/engine_ops.h"
#include "verify/oplocal.h"

/* How the op is computed: the exact op (all zero), or one named hypothesis. */
typedef enum {
    OPL_ROUND_NONE = 0, OPL_ROUND_F16, OPL_ROUND_BF16, OPL_ROUND_FTZ /* flush denormals */
} opl_round;

typedef enum {
    OPL_SUM_EXACT = 0,   /* double: exact for our purpose */
    OPL_SUM_SEQ,         /* fp32, ascending, product rounded then added */
    OPL_SUM_FMA,         /* fp32, ascending, fmaf */
    OPL_SUM_PAIRWISE,    /* fp32 pairwise (recursive halving) */
    OPL_SUM_BLOCK16, OPL_SUM_BLOCK32, OPL_SUM_BLOCK256 /* fp32 per block, then the blocks */
} opl_sum;

typedef struct {
    opl_round in, out;   /* inputs / output rounded */
    bool lut;            /* the activation from ggml's fp16 table */
    bool q8_act;         /* activations of a product quantized to Q8_0 (ggml vec_dot_type) */
    opl_sum sum;         /* products' and norms' summation */
} kvv_opl_hyp;

typedef struct {
    const kvv_hparams *hp;
    int n_layer, n_pos;
    kvv_cache_type cache_type;
    float **tap;         /* [(n_layer+1)*COUNT] -> [n_pos][width], or NULL */
    uint8_t **have;      /* same index -> [n_pos] row captured */
    float *emb;          /* [n_pos][n_embd] residual entering layer 0 */
    uint8_t *have_emb;
    kvv_ops *w;          /* the reference's op set: tensor() weights */
    kvv_ops *orc;        /* the MPFR oracle's: rope */
    char bad[160];       /* first malformed tap seen, "" if none */
    unsigned scores;     /* 1 << KVV_TAP_KQ / SOFTMAX when the engine tapped them */
} opl_cap;

/* The input rows of (layer, op) at position t: in[0..3] (NULL past the
 * op's inputs). @return 0, or the missing input's op + 1 (0 - 1 = -1 for
 * the layer-0 residual: returns INT_MIN), or -1 when unsupported. */
int opl_inputs(const opl_cap *c, int layer, int op, int t, const float *in[4]);

/* e[i], scale[i], budget[i] (i < width) of (layer, op) at position t under
 * hypothesis h (NULL: exact). @return false when an input is missing. */
bool opl_eval(const opl_cap *c, int layer, int op, int t, const kvv_opl_hyp *h, double *e,
              double *scale, double *budget);

#endif

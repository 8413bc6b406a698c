/*
 * numerics_impl.h — private to verify/numerics/: the state of one run and
 * the pieces the files share, in data-flow order:
 *   capture.c  the reference's forward pass through hooks, and every op's
 *              input rebuilt from what the hooks saw (checked bit for bit)
 *   measure.c  one op on the same inputs in every op set and in the MPFR
 *              oracle, recorded as ULP histograms per engine, layer and op
 *   math.c     the portable scalar math on dense samples of its ranges
 *   run.c      kvv_numerics_run: options, the report, the order of the above
 */
#ifndef KVV_NUMERICS_IMPL_H
#define KVV_NUMERICS_IMPL_H

#include <stdlib.h>

#include "verify/numerics/numerics.h"

/* What the capture hooks keep of the reference's forward pass. */
typedef struct {
    const kvv_hparams *hp;
    int n;
    float *resid;   /* [n_layer+1][n][E] residual entering each layer; [n_layer] final */
    float *k;       /* [n_layer][n][K] K as cached */
    float *probs;   /* [n_layer][S][n_head][n] attention probabilities of the sampled rows */
    const int *rows;/* [S] the sampled rows */
    int S;
    float *att;     /* [n_layer][n][O] attention output */
    int bad;        /* hook calls with an unexpected shape */
} hooks_capture;

/* The state of one run. */
typedef struct {
    const kvv_numerics_opts *o;
    const kvv_hparams *hp;
    kvv_ops *cap;                 /* the reference ops (rebuild, weights) */
    kvv_ops *const *ops;          /* op sets measured */
    int n_ops;
    kvv_numerics_report *rep;
    kvv_oracle *orc;
    int n;                        /* prompt length = batch */
    float *got;                   /* scratch: one engine's output */
    float *exact;                 /* scratch: the oracle's output */
    float *tmp;                   /* scratch: one row */
    float *batch;                 /* scratch: [n][max rows] engine matmul output */
} nrun;

/* Scratch rows of one layer's rebuild (capture.c). */
typedef struct {
    float *xn, *q, *k, *qpre, *kpre, *proj, *down, *hmid, *xf, *gate, *up, *act, *hout, *sc, *qs;
} layer_buf;

/* Zeroed floats (at least one); NULL on OOM. */
static inline float *num_falloc(size_t n)
{
    return calloc(n ? n : 1, sizeof(float));
}

/* ---- capture.c */

/* Run the capture engine's forward pass over the prompt (positions pos)
 * with c's hooks; logits [n][n_vocab]. KVV_ERR_INTERNAL if a hook saw an
 * unexpected shape. */
kvv_status num_capture(nrun *r, hooks_capture *c, const int32_t *pos, float *logits,
                       kvv_error *err);
/* Layer l: rebuild its op inputs from c with the reference's ops, check
 * them against c, measure every op set on the sampled rows. */
void num_rebuild_layer(nrun *r, int l, const hooks_capture *c, layer_buf *b);
/* The output block (layer n_layer): output_norm, output matrix, soft-cap. */
void num_rebuild_output(nrun *r, const hooks_capture *c, const float *logits,
                        layer_buf *b);

/* ---- measure.c: each engine's op on the same input against the oracle */

void num_measure_rmsnorm(nrun *r, int layer, int row, const float *x, const float *w,
                         int n, const char *what);
/* y = x W^T over the whole batch; the sampled rows' outputs (at most
 * max_outputs weight rows, evenly spaced). */
void num_measure_matmul(nrun *r, int layer, kvv_ops_tensor t, const float *x);
/* silu, gelu or softcap (cap c) on count inputs. */
void num_measure_scalar(nrun *r, int layer, kvv_op op, int row, int first,
                        const float *x, int count, float c, const char *what);
void num_measure_rope(nrun *r, int layer, int row, const float *x, const char *what);
/* One attention-score product q.k of n elements (key position `key`). */
void num_measure_dot(nrun *r, int layer, int row, int key, const float *q,
                     const float *k, int n, const char *what);
/* Softmax of n scores x; clobbers r->got and r->exact. */
void num_measure_softmax(nrun *r, int layer, int row, const float *x, int n,
                         const char *what);

/* ---- math.c */

/* Every op set's portable math on dense samples (rep->math). KVV_ERR_NOMEM. */
kvv_status num_math(nrun *r, kvv_error *err);

#endif

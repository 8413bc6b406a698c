/*
 * oplocal.h — the local error of each operation of an engine (issue 36):
 * engine B runs one teacher-forced sequence with op taps
 * (runtime/op_taps.h); for every tapped op the reference applies the same
 * op, exactly (double precision on the model's fp32 weights as the
 * reference reads them; RoPE from the MPFR oracle), to B's OWN inputs of
 * that op (the taps of the ops before it), so what is measured is the
 * op's own error, not everything propagated from earlier ones.
 *
 * Each element's error is |b - exact| / (scale * u), u = 2^-24, where the
 * scale is the op's magnitude (sum |x_k w_k| for a product, |exact| for a
 * norm, |a| + |b| for an add, ...), and its budget is the worst-case fp32
 * bound for any correct implementation (docs/ops.md): a product of n
 * terms n + 2 (Higham's gamma_n, any summation order), an RMS norm n/2 + 8,
 * an add 1, the activation 16, RoPE 4 + the angle error of an fp32 angle,
 * attention from the score error and the softmax. An op beyond budget is
 * the first place the engine computes something no fp32 implementation
 * of that op would; op_explain.h then tests named hypotheses on it.
 *
 *   kvv_opl_report rep;
 *   if (kvv_opl_run(m, &eo, toks, n, &rep, &err)) ...
 *   if (rep.first >= 0) printf("%s L%d\n", kvv_tap_name(rep.rows[rep.first].op), ...);
 *   kvv_opl_free(&rep);
 */
#ifndef KVV_OPLOCAL_H
#define KVV_OPLOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "runtime/op_taps.h"

/* How one (layer, op) fared. */
typedef enum {
    KVV_OPL_OK = 0,      /* checked, every element within budget */
    KVV_OPL_BEYOND,      /* checked, some element beyond budget */
    KVV_OPL_NOT_TAPPED,  /* the engine did not emit this op */
    KVV_OPL_NO_INPUT,    /* emitted, but an input op was not (row.input says which) */
    KVV_OPL_ABSENT,      /* the model has no such op (q_norm on llama, ...) */
    KVV_OPL_UNCHECKED    /* emitted, no exact recompute here (kq, softmax) */
} kvv_opl_state;

const char *kvv_opl_state_name(kvv_opl_state s); /* "ok", "beyond budget", ... */

typedef struct {
    int layer, op;        /* op: KVV_TAP_*; layer n_layer for out_norm and head */
    kvv_opl_state state;
    int input;            /* NO_INPUT: the missing op (-1: the layer-0 residual) */
    long n;               /* elements checked */
    double max_err;       /* max |b - exact| / (scale u) */
    double budget;        /* the budget at that element, same unit */
    double max_ratio;     /* max over elements of error / budget (> 1: beyond) */
    double max_rel;       /* max |b - exact| / scale */
    uint64_t max_ulp;     /* max ULP distance of b to the exact value rounded to fp32 */
    uint64_t n_diff;      /* elements whose bits differ from that rounded value */
    int where_pos, where_i; /* the element of max_ratio: position and index in the row */
    float got;            /* b there */
    double want;          /* the exact value there */
} kvv_opl_row;

typedef struct {
    int n_layer, n_pos;
    kvv_opl_row *rows;    /* [(n_layer + 1) * KVV_TAP_COUNT]: [layer][op] (owned) */
    int first;            /* index of the first op beyond budget in data-flow order, -1 */
    int n_checked, n_beyond, n_tapped;
    char engine[96];      /* B's description: name (mode) */
    void *cap;            /* private: the captured taps and the weights (op_explain.h) */
} kvv_opl_report;

/* Run engine eo (opened here on m, borrowed) over tokens[0..n) at positions
 * 0..n-1 in one call with op taps, then check every op.
 * @return KVV_OK with rep filled (free with kvv_opl_free); KVV_ERR_UNSUPPORTED
 * when the engine has no op taps (kvv_engine_require's message);
 * KVV_ERR_ENGINE when a tap's width or layer is not the vocabulary's (the
 * message names the op); those of kvv_engine_open / forward; KVV_ERR_NOMEM. */
kvv_status kvv_opl_run(const kvv_model *m, const kvv_engine_opts *eo, const int32_t *tokens,
                       int n, kvv_opl_report *rep, kvv_error *err);

/* Check a plant: multiply B's tap of (layer, op) at position pos, index i
 * by (1 + rel) before checking, as if the engine had computed it so (the
 * verdict's negative control). Call before kvv_opl_check_all. */
void kvv_opl_plant(kvv_opl_report *rep, int layer, int op, int pos, int i, double rel);

/* (Re)check every op from the captured taps into rep->rows. */
void kvv_opl_check_all(kvv_opl_report *rep);

/* The row of (layer, op). */
const kvv_opl_row *kvv_opl_row_at(const kvv_opl_report *rep, int layer, int op);

void kvv_opl_free(kvv_opl_report *rep); /* accepts a zeroed rep */

#endif

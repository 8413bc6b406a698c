/*
 * ops_check.h — the "ops" check (issue 36, docs/ops.md): engine B's local
 * error per operation (verify/oplocal.h) as a report result, with the
 * first op beyond budget and its explanation (verify/op_explain.h).
 *
 *   rows: one per checked (layer, op): what = the op's name ("ffn_up"),
 *     layer (n_layer for out_norm and head), stats of B against the exact
 *     op rounded to fp32 (elements, differing bits, max ULP, max |delta|),
 *     where = "err E u / budget B u, rel R, pos P i I".
 *   details.ops: {engine, n_checked, n_beyond, first (null or {layer, op,
 *     err_u, budget_u, max_ulp, rel, pos, i, got, want}), explanation
 *     ({hypotheses: [{name, bits_equal, resid_u, hyp_err_u, reproduces,
 *     explains}], explained: [names], none_known}), table: [every (layer,
 *     op): {layer, op, state, ...}], not_tapped: ["q_rope", ...]}.
 *   verdict: PASS when every checked op is within budget, FAIL naming the
 *     first op beyond (layer, op, figures, the hypotheses that explain it).
 *     SKIPPED (unsupported) without op taps; nothing checked: SKIPPED.
 *   control: a 1% error planted in one element of one checked op (the
 *     middle layer's ffn_up, or the last checked op) must be named as the
 *     first op beyond budget (or, with an earlier op already beyond, that
 *     op must be found beyond).
 */
#ifndef KVV_OPS_CHECK_H
#define KVV_OPS_CHECK_H

#include "verify/check.h"

/* Run the ops check of engine b on m over tokens[0..n) into r.
 * @return KVV_OK with a verdict, or an error (r marked): those of kvv_opl_run. */
kvv_status kvv_ops_check_run(const kvv_model *m, const kvv_engine_opts *b,
                             const int32_t *tokens, int n, bool controls, kvv_check_result *r,
                             kvv_error *err);

/* The audit's form: B = o->engine. */
kvv_status kvv_check_ops(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

#endif

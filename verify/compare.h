/*
 * compare.h — the compare check (DESIGN.md §4): engine A (the reference,
 * by default) against engine B (the engine under test, e.g. cpu fast or
 * invariant) on one teacher-forced sequence, per layer and on the logits.
 *
 * Both engines run the same tokens in one batch with every logit row
 * requested (B first). When A is the reference at its own numerics and B
 * declares llama.cpp's activation roundings (kvv_engine_desc.ggml: the cpu
 * engine rounds activations to Q8_K/Q8_1 for its K-quant products), A runs
 * with those KVV_GGML_* emulation flags, so the tolerance measures B's
 * kernels, not the rounding both agree on; details.engine_a says so in
 * its kernels. Whenever both engines round activations to 8 bits (the
 * reference emulating B, or an engine of its own such as the cpu engine
 * with another kernel table: both descriptions' ggml nonzero) and A can
 * overwrite its residual, A runs layer by layer ("layerwise"): after
 * recording its own residual entering each layer it continues from B's.
 * The two engines' fp32 values differ in their last bits, so now and then
 * one 8-bit activation rounds the other way; every later layer of a deep
 * model amplifies that quantum (measured: 1e-14 NMSE up to the layer where
 * it happens, 3e-2 of the logits 19 layers on), so end to end the logits
 * would measure the model's chaos, not B's kernels. Layer by layer, each
 * row is that layer's own error; the verdict then also needs every
 * layer's residual within KVV_COMPARE_LAYER_TOL (relative RMS).
 * Hooks record, per layer l, the residual entering l, the
 * K and V stored in the cache and the attention output (before the output
 * projection), plus the final residual. Rows of the table (verify/report/report.h):
 *   layer l: "residual", "K", "V", "attn_out"      (kvv_cmp_stats of B vs A)
 *   layer n_layer: "residual" (final, before the output norm)
 *   layer -1: "logits"
 * Each row carries max ULP, NMSE, max |Δ| and the count of differing bits.
 * On the logits the check also computes, per position, KL(p_A || p_B) of the
 * softmaxes (double precision; mean and max, printed %.9g and as hex float)
 * and whether the top-1 tokens agree.
 *
 * Verdict: PASS when every compared value is finite (rows and logits), the
 * per-position error max|Δlogit| / max|logit_A| stays within rel_tol at
 * every position, the top-1 tokens agree at every position whose A-margin
 * (top1 - top2) exceeds twice that position's max|Δ| (below that a flip is
 * within the measured error), layer by layer every layer's residual is
 * within KVV_COMPARE_LAYER_TOL, and every control was detected. Otherwise
 * FAIL, and the key figure begins with the reasons (the failing figure
 * beside its tolerance, printed with enough digits that it never reads
 * equal to it: kvv_figure_vs_bound). Bit-equality is not required: two
 * engines with different kernels legitimately differ in the last bits; the
 * table says by how much.
 *
 * Controls (opts controls) test the verdict itself, with the tolerance in
 * force: one logit of B (at the worst position, the index of A's largest
 * |logit| there) is moved by 2 x rel_tol x that |logit| (one ulp when that
 * rounds to nothing), and, layer by layer, B's residual entering the worst
 * layer is moved by 3 x KVV_COMPARE_LAYER_TOL of its RMS; the verdict rule
 * must FAIL on each. A tolerance no finite plant can exceed (inf, or one
 * past FLT_MAX / max|logit|) is KVV_ERR_USAGE (exit 2): the run could not
 * show that its verdict can fail. force_fail negates B's top logit at
 * position 0 before the comparison, so the check must FAIL.
 *
 * A and B the same engine with the same options (equal descriptions, B
 * without --engine-opt) is KVV_ERR_USAGE: an engine compared with itself
 * proves nothing about a second one.
 *
 *   kvv_compare_opts co = kvv_compare_opts_default();
 *   co.model = m; co.tokens = toks; co.n_tokens = 64;
 *   co.b.name = "cpu"; co.b.mode = KVV_MODE_FAST; co.b.n_threads = 2;
 *   kvv_check_result r; kvv_check_result_init(&r, "compare");
 *   kvv_check_compare_engines(&co, &r, &err);
 */
#ifndef KVV_COMPARE_H
#define KVV_COMPARE_H

#include <stdbool.h>

#include "verify/check.h"

/* Default per-position tolerance on max|Δlogit| / max|logit|. The cpu
 * engine measures <= 3e-5 against the reference on every shared model
 * (docs/cpu-engine.md), llama.cpp's own batch-shape noise is ~1e-6. */
#define KVV_COMPARE_REL_TOL 1e-3
/* Layer by layer, for an engine B that rounds activations to 8 bits (see
 * above): the bound on each layer's relative RMS residual error. One
 * activation that rounds the other way moves one column of a product by a
 * quantum: measured up to 3.3e-3 of a layer's residual on the synthetic
 * smollm2-135m and qwen3-0.6b K-quant models (their residual gains of 32
 * magnify it), 2e-7 where none does; a wrong kernel moves every column. */
#define KVV_COMPARE_LAYER_TOL 1e-2

typedef struct {
    const kvv_model *model;   /* borrowed; required */
    kvv_engine_opts a;        /* reference side (default: "ref", exact) */
    kvv_engine_opts b;        /* side under test (default: "cpu", invariant) */
    const int32_t *tokens;    /* teacher-forced sequence (borrowed), n_tokens >= 1 */
    int n_tokens;
    double rel_tol;           /* default KVV_COMPARE_REL_TOL */
    bool controls;            /* default true */
    bool force_fail;          /* default false */
    kvv_progress_fn progress; /* optional: after each engine's run */
    void *progress_user;
} kvv_compare_opts;

kvv_compare_opts kvv_compare_opts_default(void);

/* Run the comparison into r (its verdict, rows, details, controls; r's
 * engine is B's description, details.engine_a A's).
 * @return KVV_OK with a verdict, or an error (r->verdict ERROR/SKIPPED):
 * KVV_ERR_USAGE for a bad model/tokens, a NaN or negative rel_tol, a
 * tolerance no control can exceed, or A and B the same engine. */
kvv_status kvv_check_compare_engines(const kvv_compare_opts *o, kvv_check_result *r,
                                     kvv_error *err);

/* The audit's form: A = the reference engine (same cache dtype and n_ctx as
 * o->engine), B = o->engine, tokens = o->tokens. When o->engine is the
 * reference itself, B = the cpu engine in invariant mode (o->engine's
 * threads): an engine compared with itself could not fail. */
kvv_status kvv_check_compare(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

/* What compare needs from both engines: every position's logits (else:
 * unsupported by this engine). The per-layer rows (residual, K and V,
 * attention output) are those both engines' hooks can show. */
#define KVV_CHECK_COMPARE_NEEDS KVV_ENGINE_CAP_LOGITS_ALL

#endif

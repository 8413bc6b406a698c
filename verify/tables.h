/*
 * tables.h — the `tables` check: the invariant-mode claim of the cpu engine
 * holds for every kernel table this machine runs, and what the tables give
 * differs between them (by design) by this much.
 *
 * The cpu engine has one kernel table per instruction set (generic, avx2,
 * avx512; engine/cpu/cpu_isa.h), each with its own reduction order (8 or 16
 * lanes, fused or not: engine/cpu/cpu_kernels.h). Invariant mode promises
 * batch- and thread-invariant bits PER TABLE; the bits of two tables differ
 * as two summation orders do — by no more than the kernels' contract allows
 * for the model's tensor types (verify/table_bounds.h). So:
 *
 *   1. per table (every table this CPU can run, KVV_CPU_MAX_ISA applied): the
 *      invariance check (verify/invariance.h) on the cpu engine opened with
 *      that table in invariant mode, with its negative control; the table is
 *      bit-exact, or its first divergence is reported. Rows
 *      "invariance TABLE" (all of that run's comparisons merged); controls
 *      "TABLE: ..." (each run's own).
 *   2. across tables: one whole-prompt forward per table; for each pair (A
 *      the narrower table, B the wider):
 *      - end to end, figures without a bound: the max ULP, NMSE and first
 *        difference of K and V (every layer) and the logits (every
 *        position), rows "K B vs A", "V B vs A", "logits B vs A" (8-bit
 *        activation roundings that go the other way are amplified by later
 *        layers, so no bound holds end to end);
 *      - layer by layer, the verdict: A's forward continued from B's
 *        residual at every layer; the largest layer's residual relative RMS
 *        error and the largest per-position max|Δlogit|/max|logit_B| must
 *        be within the bounds of table_bounds.h for the model (details
 *        "bounds"; the key figure prints each beside its bound).
 *      Controls of the bound (first pair): B's residual at the worst layer
 *      moved by 3 x the layer bound of its RMS, and one logit by 2 x the
 *      head bound, must each fail the bound ("PAIR: residual moved 3 x the
 *      layer bound", "PAIR: a logit moved 2 x the head bound").
 *
 * Verdict: FAIL when a table is not bit-exact under invariance, or a pair is
 * past a bound (the reasons first in the key figure), or a control was not
 * detected; ERROR when a table's run could not be made; PASS otherwise.
 * SKIPPED — never PASS — for an engine other than cpu (unsupported by this
 * engine) and on a machine that runs one table only (nothing to compare
 * across tables). The table o->engine.isa names (--isa) does not restrict
 * the check: it runs every table; o->engine.mode is replaced by invariant.
 *
 * Details: "mode", "tables" (per table: name, verdict, key figure, values
 * compared and differing, first mismatch), "bounds" ({layers, head}: kind
 * "order" or "quantum", the type that sets it, cache, K, n, bound, text),
 * "cross_table" (per pair: a, b, the K, V and logits comparison objects, and
 * layer_by_layer {residual_rel_rms, worst_layer, logits_rel,
 * worst_position, within_bounds}), "note".
 */
#ifndef KVV_TABLES_H
#define KVV_TABLES_H

#include "verify/check.h"

/* The check (signature of verify/check.h). @return KVV_OK whenever r holds
 * a verdict (PASS, FAIL or SKIPPED); otherwise the status, also in r. */
kvv_status kvv_check_tables(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

#endif

/*
 * tables.h — the `tables` check: the invariant-mode claim of the cpu engine
 * holds for every kernel table this machine runs, and what the tables give
 * differs between them (by design) by this much.
 *
 * The cpu engine has one kernel table per instruction set (generic, avx2,
 * avx512; engine/cpu/cpu_isa.h), each with its own reduction order (8 or 16
 * lanes, fused or not: engine/cpu/cpu_kernels.h). Invariant mode promises
 * batch- and thread-invariant bits PER TABLE; the bits of two tables differ
 * as two summation orders do. So:
 *
 *   1. per table (every table this CPU can run, KVV_CPU_MAX_ISA applied): the
 *      invariance check (verify/invariance.h) on the cpu engine opened with
 *      that table in invariant mode, with its negative control; the table is
 *      bit-exact, or its first divergence is reported. Rows
 *      "invariance TABLE" (all of that run's comparisons merged); controls
 *      "TABLE: ..." (each run's own).
 *   2. across tables (no verdict: they differ by design): one whole-prompt
 *      forward per table, and for each pair the max ULP, NMSE and first
 *      difference of K and V (every layer) and the logits (every position),
 *      rows "K B vs A", "V B vs A", "logits B vs A" (A the narrower table).
 *
 * Verdict: PASS when every table is bit-exact under invariance (and every
 * control was detected); FAIL when any table is not (the key figure names
 * it); ERROR when a table's run could not be made. SKIPPED — never PASS —
 * for an engine other than cpu (unsupported by this engine) and on a
 * machine that runs one table only (nothing to compare across tables).
 * The table o->engine.isa names (--isa) does not restrict the check: it
 * runs every table; o->engine.mode is replaced by invariant.
 *
 * Details: "mode", "tables" (per table: name, verdict, key figure, values
 * compared and differing, first mismatch), "cross_table" (per pair: a, b
 * and the K, V and logits comparison objects), "note".
 */
#ifndef KVV_TABLES_H
#define KVV_TABLES_H

#include "verify/check.h"

/* The check (signature of verify/check.h). @return KVV_OK whenever r holds
 * a verdict (PASS, FAIL or SKIPPED); otherwise the status, also in r. */
kvv_status kvv_check_tables(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

#endif

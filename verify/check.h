/*
 * check.h — what every check takes: one config struct, the same for kv,
 * patch, greedy, invariance (and the checks other modules add). Each check
 * is a library function
 *
 *   kvv_status kvv_check_NAME(const kvv_check_opts *o, kvv_check_result *r,
 *                             kvv_error *err);
 *
 * that opens its own engine(s) through engine/engine.h from o->engine, runs,
 * and fills r (verify/report/report.h). It returns KVV_OK whenever r holds a
 * verdict — PASS or FAIL alike; a non-OK status (bad options, engine cannot
 * open the model, out of memory) also sets r->verdict = ERROR (or SKIPPED
 * for KVV_ERR_UNSUPPORTED) with the message.
 *
 *   kvv_check_opts o = kvv_check_opts_default();
 *   o.model = m;  o.tokens = toks;  o.n_tokens = 16;
 *   o.engine.cache_type = KVV_CACHE_F16;
 *   kvv_check_result r;  kvv_check_result_init(&r, "kv");
 *   kvv_check_kv(&o, &r, &err);
 *
 * Negative controls (o->controls, on by default): each check plants a known
 * difference and records whether it saw it; a control not detected makes the
 * verdict FAIL. o->force_fail plants the check's control into the real
 * comparison, so the check must FAIL — the documented way for tests to
 * exercise exit code 1.
 */
#ifndef KVV_CHECK_H
#define KVV_CHECK_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h" /* kvv_now_seconds, which every check times itself with */
#include "engine/engine.h"
#include "engine/engine_registry.h"
#include "model/arch.h"
#include "verify/report/report.h"

/* Progress callback: label, done of total (called from the checking thread). */
typedef void (*kvv_progress_fn)(void *user, const char *label, long done, long total);

typedef struct {
    const kvv_model *model;      /* borrowed; required */
    kvv_engine_opts engine;      /* engine to certify (name, mode, threads, cache dtype) */
    const int32_t *tokens;       /* prompt A (borrowed); required, n_tokens >= 1 */
    int n_tokens;
    const int32_t *tokens_b;     /* patch: prompt B, same length; NULL = derived from seed */
    int n_gen;                   /* greedy: tokens to decode (default 64) */
    int chunk;                   /* kv: odd chunk size (0 = 5, or 3 when 5 divides n) */
    const int *chunks;           /* invariance: chunk sizes, ascending (NULL = 1, 2, 7);
                                    the audit's straddle the engine's switches */
    int n_chunks;
    const int *thread_counts;    /* invariance: thread counts to try (NULL = {1, 2}) */
    int n_thread_counts;
    int n_requests;              /* batch: requests sharing the calls, A included
                                    (0 = KVV_BATCH_DEFAULT_REQUESTS, verify/batch.h) */
    unsigned batch_modes;        /* batch: KVV_BATCH_MODE_* bits to run (0 = all) */
    int n_jobs;                  /* independent runs at a time (greedy's cache-free steps,
                                    the audit's checks); < 2 = one after another */
    bool controls;               /* run negative controls (default true) */
    bool force_fail;             /* plant the control in the real comparison */
    uint64_t seed;               /* for derived prompts */
    kvv_progress_fn progress;    /* optional */
    void *progress_user;
    int isolate;                 /* kvv_isolate_mode (verify/isolate.h): run each check in
                                    a child process; 0 = off (default) */
    double timeout;              /* isolated checks: seconds before the child is killed;
                                    0 = kvv_isolate_default_timeout */
    volatile sig_atomic_t *stop; /* when *stop turns nonzero (a signal handler's flag,
                                    cli/interrupt.h): an isolated check's child is killed
                                    and the check ends at once, the audit starts no
                                    further check; NULL = never */
} kvv_check_opts;

kvv_check_opts kvv_check_opts_default(void);

/* How many independent runs of o may go at once: o->n_jobs (at least 1),
 * and 1 for an engine that must not run on several threads at once (a
 * plugin: kvv_engine_name_concurrent). */
int kvv_check_jobs(const kvv_check_opts *o);

/* Validate the common fields (model, tokens in range, positions fit the
 * engine's context). KVV_ERR_USAGE with a message naming the field. */
kvv_status kvv_check_opts_validate(const kvv_check_opts *o, int n_positions, kvv_error *err);

/* The engine options a check opens with: o->engine, with n_ctx set to
 * n_positions when the caller left it 0 (a cache sized to the check, not to
 * the model's training context: 30 layers x 4096 positions of a 135M model
 * would be 377 MB per engine). */
kvv_engine_opts kvv_check_engine_opts(const kvv_check_opts *o, int n_positions);

/* Open the engine a check measures (kvv_engine_open with eo) and make sure
 * it offers `needs` (KVV_ENGINE_CAP_*): an engine that lacks one is closed
 * again and KVV_ERR_UNSUPPORTED says "engine NAME does not offer CAPS
 * (needed by CHECK)" — the check is then reported unsupported by this
 * engine (skipped, with that reason), never passed. On success *out is the
 * caller's to close. */
kvv_status kvv_check_open_engine(const kvv_model *m, const kvv_engine_opts *eo, unsigned needs,
                                 const char *check, kvv_engine **out, kvv_error *err);

/* Signature of the audit's checks (their column of verify/catalog.h). */
typedef kvv_status (*kvv_check_fn)(const kvv_check_opts *o, kvv_check_result *r,
                                   kvv_error *err);

/* ---------------------------------------------------------------- the skeleton
 *
 * Every comparison check (kv, patch, greedy, invariance) has the same
 * beginning and end, written once here:
 *
 *   kvv_status kvv_check_kv(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
 *   {
 *       kv_ctx c = {.o = o, .r = r};
 *       return kvv_check_frame(o, r, o->n_tokens, kv_body, &c, err);
 *   }
 *   // kv_body: its own option checks, buffers, engines, comparisons, then
 *   kvv_check_conclude(r, n_diff > 0, pass_key, fail_key, "0 K/V differ");
 */

/* A check's work between validation and timing: ctx is the check's own. */
typedef kvv_status (*kvv_check_body)(void *ctx, kvv_error *err);

/* Run body the one way every check runs: validate o for n_positions
 * (kvv_check_opts_validate), call body(ctx, err), record a failing status
 * in r (kvv_check_set_error: ERROR, or SKIPPED for KVV_ERR_UNSUPPORTED), and
 * set r->seconds to the wall time of the whole call. A validation failure
 * skips body. A PASS over rows holding a NaN or inf becomes a FAIL
 * (kvv_check_fail_nonfinite). @return the status: KVV_OK whenever r holds
 * a verdict. */
kvv_status kvv_check_frame(const kvv_check_opts *o, kvv_check_result *r, int n_positions,
                           kvv_check_body body, void *ctx, kvv_error *err);

/* Pairs holding a NaN or an infinity (either side) over r's rows, a value
 * compared in several rows counted in each; *n_nan, *n_inf (may be NULL)
 * split them. @return their sum. */
uint64_t kvv_check_nonfinite(const kvv_check_result *r, uint64_t *n_nan, uint64_t *n_inf);
/* When r's rows compared any non-finite value (kvv_check_nonfinite): FAIL
 * with key figure "N compared values not finite (x NaN, y inf); figure" and
 * a message saying why. kvv_check_conclude and kvv_check_frame (after a
 * PASS) apply it, so every check fails on a NaN or inf in a run it
 * compares, whatever the other side holds. @return true when r was failed. */
bool kvv_check_fail_nonfinite(kvv_check_result *r, const char *figure);

/* The verdict rule every comparison check ends with, in this order: FAIL
 * when a compared run held a NaN or inf (kvv_check_fail_nonfinite); FAIL
 * with key figure fail_key when the comparison found differences (differs);
 * else FAIL when a negative control went undetected — the check could not
 * be trusted to fail (`clean` says what the comparison found, e.g.
 * "KL = 0"; the message says why); else PASS with pass_key. */
void kvv_check_conclude(kvv_check_result *r, bool differs, const char *pass_key,
                        const char *fail_key, const char *clean);

/* The one-path rule (engine/engine.h kvv_batch_paths): a check that compares
 * runs of different batch sizes, sizes[0..n), has nothing to compare when
 *   - they are all one size, or
 *   - e switches kernels by batch size and every size lies between the same
 *     two switches (e.g. 1 to 3 tokens on the cpu engine in fast mode, whose
 *     GEMM starts at 4): the comparison cannot reach the routes' difference.
 * Then r becomes SKIPPED — "nothing could be checked" — with the sizes, the
 * switch and the smallest prompt that would cross it, and the check returns
 * without a verdict. An engine with one route for every size (the cpu
 * engine's invariant mode on F32 weights) or that does not describe its
 * routes (the reference, plugins) is compared across any distinct sizes:
 * that is all the batch shape can change there. @return true when r was
 * marked SKIPPED. */
bool kvv_check_skip_one_path(kvv_check_result *r, kvv_engine *e, const int *sizes, int n);

/* Deterministic pseudo-random prompt: n tokens uniform in [0, n_vocab),
 * from seed (splitmix64; same seed -> same tokens on every machine). When
 * bos >= 0 the first token is bos. */
void kvv_prompt_random(uint64_t seed, int n_vocab, int32_t bos, int32_t *out, int n);


#endif

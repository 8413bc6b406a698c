/*
 * isolate.h — a check that survives the engine it certifies: run one check
 * in a forked child process with a time limit, its result carried back
 * through a pipe (docs/isolation.md).
 *
 * A plugin engine's segfault, abort or endless loop is a certification
 * result, not a reason for kvverify to die (deqp-runner runs each case in a
 * child the same way). The parent forks; the child attaches a breadcrumb in
 * shared memory (engine/breadcrumb.h), runs the check, writes its
 * kvv_check_result to the pipe (kvv_check_result_pack) and _exits. The
 * parent reads until end of file or the time limit, then:
 *
 *   - the child exited 0 with a whole result: that result, as if run here;
 *   - it died by a signal, or exited without a whole result: FAIL, fault
 *     "crash", "SIGSEGV in forward, layer 3, position 17" (the signal and
 *     the breadcrumb's last stage);
 *   - the time limit passed: the child is killed (SIGKILL), FAIL, fault
 *     "timeout", "no result after 5 s (last stage: forward, positions 0..15)".
 *
 *   kvv_isolate_opts io = {.timeout = 30};
 *   kvv_check_result r;  kvv_check_result_init(&r, "kv");
 *   kvv_isolate_run(&io, my_check_body, ctx, &r, &err);   // r holds a verdict
 *
 * Cost: one fork (the model is shared copy-on-write) and one pipe per
 * check; docs/isolation.md has the measured figure. Fork from a process
 * with one thread: to run several checks at once use kvv_isolate_run_jobs,
 * never kvv_isolate_run from several threads (see there why).
 */
#ifndef KVV_ISOLATE_H
#define KVV_ISOLATE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "verify/audit_plan.h"
#include "verify/check.h"
#include "verify/report/report.h"

/* Whether checks run isolated (kvv_check_opts.isolate). */
typedef enum {
    KVV_ISOLATE_OFF = 0,      /* in this process (the library's default) */
    KVV_ISOLATE_ON = 1,       /* each check in a child (--isolate) */
    KVV_ISOLATE_AUTO = 2      /* on for plugin engines, off for the built-in ones
                                 (the command line's default) */
} kvv_isolate_mode;

typedef struct {
    double timeout;           /* seconds before the child is killed; > 0 */
    volatile sig_atomic_t *stop; /* nonzero: kill the child now (NULL: never); r then
                                    holds ERROR "interrupted" */
} kvv_isolate_opts;

/* The work done in the child: fill r (a check function's contract,
 * verify/check.h). */
typedef kvv_status (*kvv_isolate_fn)(void *ctx, kvv_check_result *r, kvv_error *err);

/* Run fn(ctx, r, err) in a child process under io's time limit (see
 * above). r must be initialised (kvv_check_result_init); on return it holds
 * the child's result, or a crash/timeout fault. The child's non-OK status
 * comes back in err (KVV_ERR_NOMEM and the like). @return KVV_OK whenever r
 * holds a verdict (crash and timeout included); KVV_ERR_INTERNAL when the
 * pipe or the fork failed (err says which), the check not run. */
kvv_status kvv_isolate_run(const kvv_isolate_opts *io, kvv_isolate_fn fn, void *ctx,
                           kvv_check_result *r, kvv_error *err);

/* Job `job` of kvv_isolate_run_jobs, run in its child: fill r (a check
 * function's contract, verify/check.h). */
typedef kvv_status (*kvv_isolate_job_fn)(void *ctx, int job, kvv_check_result *r,
                                         kvv_error *err);

/* Run jobs 0..n_jobs-1 as kvv_isolate_run would, each in its own child
 * under io's time limit (counted from its own start), up to at_once
 * children at a time; rs[job] (initialised) receives job's result. The
 * calling thread forks every child and reads every pipe (poll), so several
 * checks run at once without a second thread in the parent. Why: a fork
 * copies only the forking thread, and a lock another thread held at that
 * moment stays held in the child forever. AddressSanitizer's allocator in
 * GCC 12 takes no such care, and a check's child forked beside a thread in
 * malloc hung until its time limit (docs/isolation.md). With *io->stop set
 * the running children are killed and the remaining jobs are not started;
 * all of those read ERROR "interrupted". @return KVV_OK when every result
 * holds a verdict; otherwise the first KVV_ERR_INTERNAL (a pipe or fork that
 * failed: that job's result is ERROR naming it) or KVV_ERR_NOMEM, the other
 * jobs run all the same. */
kvv_status kvv_isolate_run_jobs(const kvv_isolate_opts *io, int n_jobs, int at_once,
                                kvv_isolate_job_fn fn, void *ctx, kvv_check_result *const *rs,
                                kvv_error *err);

/* Whether a check of o runs isolated: ON, or AUTO with a plugin engine
 * (kvv_engine_name_concurrent false: not "ref" or "cpu"). */
bool kvv_isolate_wanted(const kvv_check_opts *o);

/* The default time limit of one check of o: 120 s plus 1 s per 1e7
 * multiply-adds of the audit's estimate for o's prompt and steps
 * (kvv_audit_cost) — a bound for any one check, generous on slow engines;
 * ten times that on a device other than the CPU (a software GPU such as
 * lavapipe runs ~250x slower than llama.cpp's CPU backend). */
double kvv_isolate_default_timeout(const kvv_check_opts *o);

/* The isolation of a check of o: time limit o->timeout, or the default
 * above when 0, and o's stop flag. */
kvv_isolate_opts kvv_isolate_opts_for(const kvv_check_opts *o);

/* Run check fn with o into r: isolated when kvv_isolate_wanted(o) (with
 * kvv_isolate_opts_for(o)), else directly. The same
 * contract as the check itself (verify/check.h). */
kvv_status kvv_isolate_check(const kvv_check_opts *o, kvv_check_fn fn, kvv_check_result *r,
                             kvv_error *err);

/* kvv_audit_plan_engine (verify/audit_plan.h) in a child process under a time
 * limit (<= 0: 120 s): the engine is opened only there, to ask where its
 * kernels switch. So the parent of isolated checks never initialises the
 * engine — a device's state (a GPU driver's threads) does not survive a
 * fork into the checks' children — and a crash or hang while opening is
 * KVV_ERR_ENGINE naming the signal or the limit, not the death of the
 * command. Errors of the open itself are returned as they are. */
kvv_status kvv_isolate_plan_engine(const kvv_model *m, const kvv_engine_opts *eo, bool quick,
                                   double timeout, kvv_audit_plan *out, kvv_error *err);

/* ---------------------------------------------------------- the wire
 * A result as bytes and back (the child's pipe): the fixed fields, rows,
 * controls, the long key figure and message, and the details as JSON text.
 * Both ends are the same program (fork), so the layout is the struct's. */

/* Serialize r into *out (malloc'd, *len bytes). KVV_ERR_NOMEM. */
kvv_status kvv_check_result_pack(const kvv_check_result *r, unsigned char **out, size_t *len);
/* Rebuild r (initialised; its old contents freed) from buf[len].
 * KVV_ERR_FORMAT when buf is not a whole packed result. */
kvv_status kvv_check_result_unpack(kvv_check_result *r, const unsigned char *buf, size_t len);

/* "SIGSEGV", "SIGABRT", ... ("signal N" for others) into buf. @return buf. */
const char *kvv_signal_name(int sig, char *buf, size_t size);

#endif

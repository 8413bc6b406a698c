/*
 * interrupt.h — ^C (SIGINT) and kill (SIGTERM) for the commands that run
 * checks: suite and every check command (cli/check_cli.h). One mechanism
 * for all of them:
 *
 *   - the first signal sets a flag and says so on stderr; a check running
 *     in an isolated child is killed at once (verify/isolate.h watches the
 *     flag), an in-process one finishes first, and no further check or case
 *     starts;
 *   - the command then prints and writes its reports with what finished,
 *     marked interrupted (JSON "interrupted": true, "exit_code": 130), and
 *     exits 130 (KVV_EXIT_INTERRUPTED);
 *   - a second signal ends the process at once, as if nothing caught it
 *     (no reports; an isolated child dies with it, PR_SET_PDEATHSIG).
 *
 *   volatile sig_atomic_t *stop = kvv_interrupt_flag();
 *   o.stop = stop;                  // kvv_check_opts, kvv_suite_run_opts
 *   kvv_interrupt_catch();
 *   ... run the checks ...
 *   kvv_interrupt_release();
 *   if (*stop) ... mark the report interrupted, exit 130
 *
 * The flag is the one state a signal handler may touch, so it is this
 * file's (a process has one set of handlers).
 */
#ifndef KVV_INTERRUPT_H
#define KVV_INTERRUPT_H

#include <signal.h>
#include <stdbool.h>

/* The flag the handlers set (nonzero: stop). Borrowed, valid for the
 * process's life; starts at 0. */
volatile sig_atomic_t *kvv_interrupt_flag(void);

/* Catch SIGINT and SIGTERM (see above) from now on, the flag kept as it
 * is; without SA_RESTART, so a waiting poll or read returns. Idempotent. */
void kvv_interrupt_catch(void);

/* Back to the actions the process had before kvv_interrupt_catch (by
 * default: a signal ends it). The flag stays as it is. Idempotent. */
void kvv_interrupt_release(void);

#endif

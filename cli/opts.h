/*
 * opts.h — small helpers every subcommand uses to parse options the same way.
 *
 * Conventions: options may come before or after positional arguments;
 * `--opt VALUE` and `--opt=VALUE` are both accepted; every bad value is a
 * one-line message "kvverify CMD: option --opt: ..." and exit code 2.
 */
#ifndef KVV_OPTS_H
#define KVV_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/error.h"

#define KVV_VERSION "0.1.0"

/* Walks argv[1..argc). */
typedef struct {
    int argc;
    char **argv;
    int i;               /* next index */
    const char *cmd;     /* subcommand name for messages */
    const char *value;   /* value of the last matched option */
    const char *arg;     /* current argument (option or positional) */
    bool failed;         /* a message was printed; exit 2 */
} kvv_opts;

void kvv_opts_init(kvv_opts *o, const char *cmd, int argc, char **argv);
/* Advance; false when argv is exhausted. o->arg is the current argument. */
bool kvv_opts_next(kvv_opts *o);
/* Is o->arg the flag `name` (e.g. "--json", or "-n" aliases)? */
bool kvv_opts_flag(kvv_opts *o, const char *name);
/* Is o->arg the option `name` taking a value? Consumes the value into
 * o->value ("--name V" or "--name=V"); a missing value sets failed. */
bool kvv_opts_value(kvv_opts *o, const char *name);
/* Is o->arg a positional argument (does not start with '-' or is "-")? */
bool kvv_opts_positional(const kvv_opts *o);

/* Parse helpers: print "kvverify CMD: option NAME: ..." and set failed on error. */
bool kvv_opts_int(kvv_opts *o, const char *name, const char *s, long lo, long hi, long *out);
bool kvv_opts_u64(kvv_opts *o, const char *name, const char *s, uint64_t *out);
bool kvv_opts_double(kvv_opts *o, const char *name, const char *s, double *out);
/* Comma-separated ints, e.g. "1,2,3": malloc'ed array (caller frees). */
bool kvv_opts_int_list(kvv_opts *o, const char *name, const char *s, int32_t **out, int *n);
/* Report an unknown option or extra positional and set failed. */
void kvv_opts_unknown(kvv_opts *o);
/* printf-style usage error: "kvverify CMD: ...", sets failed. */
void kvv_opts_error(kvv_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "kvverify: MSG" for a library error and return its exit code. */
int kvv_cli_fail(const kvv_error *err);

/* Progress on stderr for long jobs: only when stderr is a terminal or
 * KVV_PROGRESS=1; "\r[label] done/total" and a final newline. */
void kvv_progress(const char *label, long done, long total);

#endif

/*
 * opts.h — how every subcommand reads its command line: one option loop
 * (kvv_opts_parse) over groups of options, and the small parsers the groups
 * are written with.
 *
 * Conventions: options may come before or after positional arguments;
 * `--opt VALUE` and `--opt=VALUE` are both accepted; `--` ends the options
 * (every later argument is positional, so `kvverify tokenize MODEL -- --x`
 * tokenizes "--x"); every bad value is a one-line message "kvverify CMD:
 * option --opt: ..." and exit code 2.
 *
 * A command's options are groups, each a parse function over its own state:
 * the shared ones (cli/engine_opts.h: --engine --mode --threads
 * --cache-type; cli/output_opts.h: --json --junit --quiet;
 * cli/prompt_opts.h: -p --tokens --random --seed; cli/check_cli.h: what
 * every check command shares) and the command's own:
 *
 *   static bool own(void *state, kvv_opts *o)       // the command's options
 *   {
 *       my_args *a = state;
 *       if (kvv_opts_value(o, "--chunk")) { ...; return true; }
 *       return false;                               // not one of mine
 *   }
 *   kvv_opts o;
 *   kvv_opts_init(&o, "kv", argc, argv);
 *   kvv_opt_group g[] = {kvv_engine_cli_group(&eng), {own, NULL, &args}};
 *   int code = kvv_opts_parse(&o, help, g, 2);
 *   if (code != KVV_OPTS_RUN) return code;          // 0 after --help, else 2
 *
 * So an option every command shares is added once, to its group (parse,
 * help line, and the field it fills); `--` ending the options, or a new
 * convention for every command, is one edit to kvv_opts_next /
 * kvv_opts_parse.
 *
 * Global options, taken by every command in this loop itself (its --help
 * lists them after the command's own lines):
 *
 *   --max-memory BYTES   cap what the run may allocate (512M, 4G, 1.5GiB;
 *                        runtime/mem_limit.h): applied when the loop ends,
 *                        so an engine's or a check's planned allocations
 *                        that do not fit are a message and exit 2, and any
 *                        allocation past the cap fails as out of memory
 *                        (exit 2) instead of the kernel killing the run.
 */
#ifndef KVV_OPTS_H
#define KVV_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

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
    uint64_t max_memory; /* --max-memory BYTES, 0 = not given */
    bool end_of_options; /* `--` was seen: every argument after it is positional */
} kvv_opts;

void kvv_opts_init(kvv_opts *o, const char *cmd, int argc, char **argv);
/* Advance; false when argv is exhausted. o->arg is the current argument.
 * The first `--` is skipped and sets end_of_options. */
bool kvv_opts_next(kvv_opts *o);
/* Is o->arg the flag `name` (e.g. "--json", or "-n" aliases)? Never after `--`. */
bool kvv_opts_flag(kvv_opts *o, const char *name);
/* Is o->arg the option `name` taking a value? Consumes the value into
 * o->value ("--name V" or "--name=V"); a missing value sets failed. Never
 * after `--`. */
bool kvv_opts_value(kvv_opts *o, const char *name);
/* Is o->arg a positional argument (does not start with '-', is "-", or
 * comes after `--`)? */
bool kvv_opts_positional(const kvv_opts *o);

/* Parse helpers: print "kvverify CMD: option NAME: ..." and set failed on error. */
bool kvv_opts_int(kvv_opts *o, const char *name, const char *s, long lo, long hi, long *out);
bool kvv_opts_u64(kvv_opts *o, const char *name, const char *s, uint64_t *out);
bool kvv_opts_double(kvv_opts *o, const char *name, const char *s, double *out);
/* A byte count: digits (a decimal fraction allowed) and an optional binary
 * suffix K, M, G or T (also KB/KiB..., any case): "4096", "512M", "1.5G".
 * Must be at least 1 and fit in 63 bits. */
bool kvv_opts_bytes(kvv_opts *o, const char *name, const char *s, uint64_t *out);
/* Comma-separated ints, e.g. "1,2,3": malloc'ed array (caller frees). */
bool kvv_opts_int_list(kvv_opts *o, const char *name, const char *s, int32_t **out, int *n);
/* Report an unknown option or extra positional and set failed. */
void kvv_opts_unknown(kvv_opts *o);
/* printf-style usage error: "kvverify CMD: ...", sets failed. */
void kvv_opts_error(kvv_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One group of a command's options. parse consumes o->arg when it is one
 * of the group's (a bad value prints a message and sets o->failed) and
 * returns true; false leaves it to the next group. finish (optional) runs
 * once after the last argument, for checks that need every option (one of
 * -p/--tokens/--random, a bound that depends on another option). */
typedef struct {
    bool (*parse)(void *state, kvv_opts *o);
    void (*finish)(void *state, kvv_opts *o);
    void *state;
} kvv_opt_group;

/* kvv_opts_parse's answer when the command should go on and run. */
#define KVV_OPTS_RUN (-1)

/* The one option loop every command runs: -h / --help prints help(stdout)
 * and the global options' lines, and stops; a global option is taken here;
 * every other argument is offered to the groups in order until one takes
 * it, else it is an unknown option (or an unexpected positional); then each
 * group's finish; then the global options are applied (--max-memory: the
 * limit is set). The first bad argument stops the loop.
 * @return KVV_OPTS_RUN, 0 after --help, or KVV_EXIT_BAD_INPUT after the
 * message. */
int kvv_opts_parse(kvv_opts *o, void (*help)(FILE *f), const kvv_opt_group *groups, int n);

/* The global options' help lines (what kvv_opts_parse prints after a
 * command's --help; also `kvverify --help`). */
void kvv_opts_global_help(FILE *f);

/* Test seam for the option-parser fuzz target (tests/fuzz/fuzz_opts.c) and
 * nothing else: while on, kvv_opts_parse parses and finishes as usual but
 * applies no global option and never answers KVV_OPTS_RUN (0 instead, as
 * after --help), so a command returns after parsing and frees what it
 * parsed, without running. Off by default. */
void kvv_opts_set_parse_only(bool on);

/* Print "kvverify: MSG" for a library error and return its exit code. */
int kvv_cli_fail(const kvv_error *err);

#endif

/*
 * check_cli.h — what every check command shares (kv, patch, greedy,
 * invariance, compare, audit, evict, memory, latency, numerics): its option
 * loop, its --help lines, and the one code path that turns the options into
 * a run: open and validate the model, build the prompt, run the checks
 * (verify/audit.h), print the report, write --json / --junit, and return
 * the exit code (DESIGN.md §6).
 *
 *   static bool own(void *state, kvv_opts *o)        // the command's options
 *   {
 *       kvv_check_cli *c = state;
 *       if (kvv_opts_value(o, "--chunk")) { ...; return true; }
 *       return false;
 *   }
 *   kvv_check_cli c;
 *   kvv_check_cli_init(&c, "kv");
 *   int code = kvv_check_cli_parse(&c, argc, argv, help, &(kvv_opt_group){own, NULL, &c});
 *   if (code != KVV_OPTS_RUN)
 *       return code;                                  // c already freed
 *   const char *names[] = {"kv"};
 *   return kvv_check_cli_run(&c, names, 1);          // frees c
 *
 * The options are groups (cli/opts.h): the positional MODEL and the
 * controls (--no-controls, --force-fail, --layers) here; the engine options
 * (cli/engine_opts.h), the prompt (cli/prompt_opts.h: default random
 * tokens sized to the model, first token BOS when the model names one, so
 * models without a tokenizer work) and the outputs (cli/output_opts.h:
 * --json, --junit [FILE|-], -q) from their own files, each parsed in one
 * place for every command.
 */
#ifndef KVV_CHECK_CLI_H
#define KVV_CHECK_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/engine_opts.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "cli/prompt_opts.h"
#include "verify/audit.h"
#include "verify/check.h"
#include "verify/isolate.h"

/* The check options a command takes (kvv_check_cli.accepts). */
enum {
    KVV_CHECK_OPT_CONTROLS = 1u << 0,  /* --no-controls, --force-fail */
    KVV_CHECK_OPT_LAYERS = 1u << 1,    /* --layers */
    KVV_CHECK_OPT_QUICK = 1u << 2,     /* --quick */
    KVV_CHECK_OPT_JOBS = 1u << 3,      /* --jobs */
    KVV_CHECK_OPT_PROMPT = 1u << 4,    /* -p, --tokens, --random (--seed is always taken) */
    KVV_CHECK_OPT_ISOLATE = 1u << 5,   /* --isolate, --no-isolate, --timeout */
    KVV_CHECK_OPT_ALL = 0x3fu
};

typedef struct {
    const char *cmd;            /* subcommand name (messages, help) */
    unsigned accepts;           /* KVV_CHECK_OPT_* (default all) */
    const char *model_path;     /* positional MODEL */
    kvv_engine_cli engine;      /* --engine (default ref) --mode --threads --cache-type */
    kvv_prompt_cli prompt;      /* -p --tokens --random --seed */
    kvv_output_cli out;         /* --json, --junit [FILE|-], -q / --quiet */
    int32_t *tokens_b;          /* --tokens-b (patch; owned) */
    int n_tokens_b;
    int *thread_counts;         /* --thread-counts (invariance; owned) */
    int n_thread_counts;
    long n_gen;                 /* -n (greedy; 0 = sized to the model) */
    long chunk;                 /* --chunk (kv; 0 = default) */
    long requests;              /* --requests (batch; 0 = default) */
    unsigned batch_modes;       /* --modes (batch; 0 = all) */
    bool controls;              /* --no-controls clears */
    bool force_fail;            /* --force-fail */
    bool layers;                /* --layers: per-layer tables (default for single checks) */
    bool quick;                 /* --quick: the workload sized to the time budget alone */
    long jobs;                  /* --jobs N: independent runs at a time (0: default) */
    int isolate;                /* 0: default (plugins isolated), 1: --isolate, 2: --no-isolate */
    double timeout;             /* --timeout SECONDS (0: default, verify/isolate.h) */
    const char *exit_codes;     /* the help's exit-code lines (NULL: the checks' own) */
} kvv_check_cli;

/* Defaults: engine ref, every option accepted, controls on. */
void kvv_check_cli_init(kvv_check_cli *c, const char *cmd);
void kvv_check_cli_free(kvv_check_cli *c); /* accepts NULL */

/* The one option loop of the check commands: the shared groups, then the
 * command's own group (own NULL: none); --help prints help(stdout).
 * @return KVV_OPTS_RUN to go on; otherwise 0 (help) or 2 (bad option,
 * message printed), and c has been freed. */
int kvv_check_cli_parse(kvv_check_cli *c, int argc, char **argv, void (*help)(FILE *f),
                        const kvv_opt_group *own);

/* The shared options' help lines (engine, prompt, controls and output) and
 * the exit codes, as c accepts them (c NULL: a check command's defaults),
 * printed after each command's own. */
void kvv_check_cli_help(FILE *f, const kvv_check_cli *c);

/* Run `names` (NULL = the whole audit table), print, write reports, free c.
 * @return the process exit code. */
int kvv_check_cli_run(kvv_check_cli *c, const char *const *names, int n_names);

/* The same path in three steps, for a command whose check is not in the
 * audit table (evict, memory, ...):
 *
 *   kvv_check_run run;
 *   int code = kvv_check_cli_prepare(&c, &run);     // model, prompt, opts, report
 *   if (code) return code;                          // (c freed, nothing to free)
 *   kvv_check_result *r = kvv_check_cli_report(&run, "evict");
 *   if (r) my_check(&run.opts, r, &err);            // fills r; errors recorded in r
 *   return kvv_check_cli_finish(&c, &run);          // print, --json/--junit, free
 */
typedef struct {
    kvv_model *model;          /* owned */
    int32_t *prompt;           /* owned; run.opts.tokens points here */
    int n_prompt;
    kvv_check_opts opts;       /* ready to pass to a check */
    kvv_report report;         /* model, sha256, seed, prompt filled in */
    int n_default_prompt;      /* the audit plan's sizes for this model */
    int n_default_gen;
    int chunks[KVV_AUDIT_MAX_CHUNKS]; /* invariance's chunkings (run.opts.chunks) */
    int n_chunks;
    bool header_printed;       /* kvv_check_cli_print_header ran: finish skips it */
    bool header_from_opts;     /* ... with the engine as the options name it (a plugin's
                                  version and device are known only after the run) */
} kvv_check_run;

/* Open the model, build the prompt, fill run. @return 0, or an exit code
 * (then c is freed and run holds nothing). run->opts.isolate says whether
 * the command's check is to run in a child (a plugin engine, --isolate,
 * --timeout): the command then runs it through kvv_check_cli_run_body. When
 * isolated, the engine is opened only in children (kvv_isolate_plan_engine). */
int kvv_check_cli_prepare(kvv_check_cli *c, kvv_check_run *run);
/* Run the command's check body fn(ctx, r, err): in a forked child under a
 * time limit when run->opts asks for isolation (kvv_isolate_wanted) — a
 * crash or hang is then r's fault, not the command's death — else here.
 * The limit is --timeout, or `passes` times the default of one check
 * (kvv_isolate_default_timeout) for a command that runs the engine over
 * several prompts or turns. fn runs in the child: what it prints it must
 * fflush, what it writes (--csv) goes to a file, and only r and its status
 * come back. @return fn's status (err filled), or kvv_isolate_run's. */
kvv_status kvv_check_cli_run_body(const kvv_check_run *run, double passes, kvv_isolate_fn fn,
                                  void *ctx, kvv_check_result *r, kvv_error *err);
/* A new result slot in run->report (borrowed; NULL on OOM). */
kvv_check_result *kvv_check_cli_report(kvv_check_run *run, const char *name);
/* Print the header (model, engine under test, prompt) now, before the
 * command's own tables, and not again at finish; nothing with --quiet. The
 * engine line is what run->opts.engine asks for (the check records the
 * engine's own description, kernels included, in the report). */
void kvv_check_cli_print_header(const kvv_check_cli *c, kvv_check_run *run);
/* A command that sizes its own work (evict's prompt set, memory's turns)
 * states it: n_prompt tokens (0: none, e.g. latency's seeded residuals),
 * n_gen decode steps; the audit's floor does not apply to it. */
void kvv_check_cli_own_workload(kvv_check_run *run, int n_prompt, int n_gen);
/* Print the report, write --json/--junit, free run and c. @return exit code. */
int kvv_check_cli_finish(kvv_check_cli *c, kvv_check_run *run);
/* Free run and c without printing (a command that writes its own output).
 * Accepts a run that prepare filled or one that is all zero. */
void kvv_check_cli_close(kvv_check_cli *c, kvv_check_run *run);

#endif

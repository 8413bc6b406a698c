/*
 * prompt_opts.h — the options every check command shares (kv, patch,
 * greedy, invariance, audit) and the one code path that turns them into a
 * run: open and validate the model, build the prompt, run the checks
 * (verify/audit.h), print the report, write --json / --junit, and return the
 * exit code (DESIGN.md §6).
 *
 *   kvv_check_cli c;
 *   kvv_check_cli_init(&c, "kv");
 *   kvv_opts o; kvv_opts_init(&o, "kv", argc, argv);
 *   while (kvv_opts_next(&o)) {
 *       if (kvv_check_cli_option(&c, &o)) continue;      // shared options
 *       if (kvv_opts_value(&o, "--chunk")) ...            // the command's own
 *       else kvv_opts_unknown(&o);
 *   }
 *   if (o.failed) return 2;
 *   const char *names[] = {"kv"};
 *   return kvv_check_cli_run(&c, names, 1);              // frees c
 *
 * Prompt: -p/--prompt TEXT (tokenized with the model's tokenizer, BOS per
 * its metadata), --tokens 1,2,3, or --random N (seeded by --seed; the
 * default: random tokens sized to the model, first token BOS when the model
 * names one, so models without a tokenizer work).
 */
#ifndef KVV_PROMPT_OPTS_H
#define KVV_PROMPT_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/opts.h"
#include "verify/check.h"

typedef struct {
    const char *cmd;            /* subcommand name (messages, help) */
    const char *model_path;     /* positional MODEL */
    const char *engine_name;    /* --engine (default "ref") */
    const char *mode_name;      /* --mode (default per engine) */
    long n_threads;             /* --threads (default 1) */
    kvv_cache_type cache_type;  /* --cache-type */
    const char *device;         /* --device (plugins) */
    long n_ubatch;              /* --ubatch (plugins; 0 = engine default) */
    const char **engine_opts;   /* --engine-opt KEY=VALUE, repeated (owned array) */
    int n_engine_opts;
    uint64_t seed;              /* --seed (default 1) */
    const char *text;           /* -p / --prompt */
    int32_t *tokens;            /* --tokens (owned) */
    int n_tokens;
    long n_random;              /* --random N (0 = sized to the model) */
    int32_t *tokens_b;          /* --tokens-b (patch; owned) */
    int n_tokens_b;
    int *thread_counts;         /* --thread-counts (invariance; owned) */
    int n_thread_counts;
    long n_gen;                 /* -n (greedy; 0 = sized to the model) */
    long chunk;                 /* --chunk (kv; 0 = default) */
    bool controls;              /* --no-controls clears */
    bool force_fail;            /* --force-fail */
    bool quiet;                 /* --quiet / -q */
    bool layers;                /* --layers: per-layer tables (default for single checks) */
    const char *json_path;      /* --json FILE */
    const char *junit_path;     /* --junit FILE */
} kvv_check_cli;

void kvv_check_cli_init(kvv_check_cli *c, const char *cmd);
void kvv_check_cli_free(kvv_check_cli *c); /* accepts NULL */

/* Consume o->arg if it is a shared option (or the positional MODEL).
 * @return true when consumed (o->failed may be set by a bad value). */
bool kvv_check_cli_option(kvv_check_cli *c, kvv_opts *o);

/* Help text of the shared options (printed after each command's own). */
void kvv_check_cli_help(FILE *f);

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
} kvv_check_run;

/* @return 0, or an exit code (then c is freed and run holds nothing). */
int kvv_check_cli_prepare(kvv_check_cli *c, kvv_check_run *run);
/* A new result slot in run->report (borrowed; NULL on OOM). */
kvv_check_result *kvv_check_cli_report(kvv_check_run *run, const char *name);
/* Print the report, write --json/--junit, free run and c. @return exit code. */
int kvv_check_cli_finish(kvv_check_cli *c, kvv_check_run *run);

#endif

/*
 * cmd_evict.c — `kvverify evict MODEL`: every cache policy and both KV-Direct
 * modes against the full cache at several budgets, over a set of prompts
 * (verify/evict.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"
#include "verify/evict.h"
#include "verify/prompt_set.h"
#include "verify/texts.h"

/* Default prompt length of the built-in set and tokens decoded: long
 * enough that 10% of the context is a real eviction, short enough for eight
 * prompts, eleven policies and four budgets in seconds (docs/policies.md). */
#define EVICT_PROMPT_TOKENS 96
#define EVICT_GEN_TOKENS 32

/* The check options evict uses; --quick (its prompt set is its own size) and
 * --layers (it has no per-layer table) are refused as "not used by evict". */
#define ACCEPTS (KVV_CHECK_OPT_CONTROLS | KVV_CHECK_OPT_PROMPT | KVV_CHECK_OPT_JOBS | \
                 KVV_CHECK_OPT_ISOLATE)

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify evict MODEL [options]\n\n"
           "Runs the eviction baselines (window, streaming, streaming-reindex, h2o, tova,\n"
           "snapkv, pyramidkv, knorm, quest) and KV-Direct (kvdirect-layer,\n"
           "kvdirect-token) against the full cache at several budgets, over a set of\n"
           "prompts: greedy token match, prefix match (steps to the first divergence),\n"
           "teacher-forced top-1 agreement, mean and max KL per step, bytes held, per\n"
           "prompt (JSON, CSV) and as mean [min, max] over the prompts (tables); then a\n"
           "second table at equal total bytes (KV-Direct's checkpoints charged to its\n"
           "budget). The baselines run on the cpu engine in invariant mode (their figures\n"
           "are not about exactness); KV-Direct runs on the engine under test (--engine),\n"
           "where each run must be bit-equal to the full cache: the verdict, with its\n"
           "control (bf16 checkpoints must be detected).\n"
           "Default prompts: %d built-in texts of different kinds, cut to %d tokens, for\n"
           "models with a tokenizer; else %d seeded random prompts of %d tokens.\n"
           "Method and defaults: docs/policies.md.\n\n"
           "  -n N                tokens to decode (default %d)\n"
           "  --budgets 16,32,64  live-token budgets (default 10,25,50,75%% of the shortest\n"
           "                      context)\n"
           "  --policies a,b      only these policies (names as above, plus full)\n"
           "  --prompts FILE      one prompt per line (blank lines skipped), instead of the\n"
           "                      built-in set; -p, --tokens or --random give one prompt\n"
           "  --n-prompts K       the first K prompts of the built-in set (default %d; at\n"
           "                      most %d texts, any number of random prompts)\n"
           "  --figures-engine E  engine of the baselines: cpu (default; invariant mode),\n"
           "                      ref, or same (the engine under test; KV-Direct then runs\n"
           "                      on every prompt)\n"
           "  --verify-prompts N  prompts KV-Direct runs on, the first ones (default 1)\n"
           "  --no-equal-bytes    skip the equal-total-bytes table\n"
           "  --csv FILE          both tables as CSV, one line per policy, budget and\n"
           "                      prompt, for plotting\n",
           KVV_TEXT_PROMPTS, EVICT_PROMPT_TOKENS, KVV_TEXT_PROMPTS, EVICT_PROMPT_TOKENS,
           EVICT_GEN_TOKENS, KVV_TEXT_PROMPTS, KVV_TEXT_PROMPTS);
    kvv_check_cli h;
    kvv_check_cli_init(&h, "evict");
    h.accepts = ACCEPTS;
    kvv_check_cli_help(f, &h);
    kvv_check_cli_free(&h);
}

static bool parse_policies(kvv_opts *o, const char *s, kvv_policy_kind **out, int *n)
{
    *n = 0;
    *out = calloc(KVV_POLICY_COUNT * 4 + strlen(s), sizeof **out);
    char *copy = strdup(s);
    if (!*out || !copy) {
        free(copy);
        kvv_opts_error(o, "out of memory");
        return false;
    }
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!kvv_policy_from_name(t, &(*out)[*n])) {
            kvv_opts_error(o, "option --policies: unknown policy '%s' (known: full, window, "
                              "streaming, streaming-reindex, h2o, tova, snapkv, pyramidkv, knorm, quest, "
                              "kvdirect-layer, kvdirect-token)", t);
            free(copy);
            return false;
        }
        (*n)++;
    }
    free(copy);
    if (*n == 0)
        kvv_opts_error(o, "option --policies: empty list");
    return *n > 0;
}

/* evict's own options. */
typedef struct {
    kvv_check_cli *c;
    const char *csv, *prompts_file, *figures;
    int32_t *budgets;
    int n_budgets;
    kvv_policy_kind *pols;
    int n_pols;
    long n_gen;               /* -n: tokens to decode */
    long n_prompts, verify_prompts;
    bool n_prompts_given;
    bool equal_bytes;
} evict_args;

static void args_free(evict_args *a)
{
    free(a->budgets);
    free(a->pols);
}

/* One evict option (not a shared one). @return false if o->arg is none. */
static bool own_option(void *state, kvv_opts *o)
{
    evict_args *a = state;
    long v;
    if (kvv_opts_value(o, "-n")) {
        if (o->value && kvv_opts_int(o, "-n", o->value, 1, 1 << 20, &v))
            a->n_gen = v;
    } else if (kvv_opts_value(o, "--budgets")) {
        free(a->budgets);
        a->budgets = NULL;
        if (o->value && kvv_opts_int_list(o, "--budgets", o->value, &a->budgets, &a->n_budgets))
            for (int i = 0; i < a->n_budgets; i++)
                if (a->budgets[i] < 1)
                    kvv_opts_error(o, "option --budgets: %d is not a positive budget",
                                   a->budgets[i]);
    } else if (kvv_opts_value(o, "--policies")) {
        free(a->pols);
        a->pols = NULL;
        if (o->value)
            parse_policies(o, o->value, &a->pols, &a->n_pols);
    } else if (kvv_opts_value(o, "--prompts")) {
        a->prompts_file = o->value;
    } else if (kvv_opts_value(o, "--n-prompts")) {
        if (o->value)
            kvv_opts_int(o, "--n-prompts", o->value, 1, 1000, &a->n_prompts);
        a->n_prompts_given = true;
    } else if (kvv_opts_value(o, "--figures-engine")) {
        a->figures = o->value;
        if (o->value && strcmp(o->value, "same") && kvv_engine_is_plugin(o->value))
            kvv_opts_error(o, "option --figures-engine: '%s' is not cpu, ref or same", o->value);
    } else if (kvv_opts_value(o, "--verify-prompts")) {
        if (o->value)
            kvv_opts_int(o, "--verify-prompts", o->value, 1, 1000, &a->verify_prompts);
    } else if (kvv_opts_value(o, "--csv")) {
        a->csv = o->value;
        if (a->csv)
            kvv_output_path_check(o, "--csv", a->csv, false); /* before the run, like --json */
    } else if (kvv_opts_flag(o, "--no-equal-bytes")) {
        a->equal_bytes = false;
    } else {
        return false;
    }
    return true;
}

/* Once every option is read: a prompt file and one prompt exclude each other. */
static void own_finish(void *state, kvv_opts *o)
{
    const evict_args *a = state;
    if (a->prompts_file && kvv_prompt_cli_given(&a->c->prompt))
        kvv_opts_error(o, "option --prompts: give a prompt file or one prompt (-p, --tokens, "
                          "--random), not both");
    else if (a->n_prompts_given && (a->prompts_file || kvv_prompt_cli_given(&a->c->prompt)))
        kvv_opts_error(o, "option --n-prompts: picks from the built-in set, which --prompts, "
                          "-p, --tokens and --random replace");
}

/* The prompts: the one the shared options gave, a file's lines, or the
 * built-in set. @return 0 or an exit code (message printed). */
static int build_prompts(const kvv_check_cli *c, const evict_args *a, kvv_check_run *run,
                         bool single, kvv_prompt_set *ps, kvv_error *err)
{
    kvv_status s;
    const kvv_model *m = run->model;
    if (single) {
        s = kvv_prompt_set_add(ps, run->prompt, run->n_prompt, "prompt", err);
        snprintf(ps->source, sizeof ps->source, "%s", run->report.prompt_source);
    } else if (a->prompts_file) {
        s = kvv_prompt_set_from_file(m, a->prompts_file, ps, err);
    } else {
        int room = m->hp.n_ctx_train - (int)a->n_gen;
        if (room < 1) {
            kvv_error_set(err, KVV_ERR_USAGE, "evict: %ld tokens to decode leave no room for a "
                          "prompt in the model's context of %d", a->n_gen, m->hp.n_ctx_train);
            return kvv_cli_fail(err);
        }
        s = kvv_prompt_set_builtin(m, (int)a->n_prompts,
                                   room < EVICT_PROMPT_TOKENS ? room : EVICT_PROMPT_TOKENS,
                                   c->prompt.seed, ps, err);
        if (s == KVV_ERR_USAGE && a->n_prompts > KVV_TEXT_PROMPTS) /* never fewer, silently */
            kvv_error_set(err, s, "evict: option --n-prompts: %ld prompts asked, the built-in "
                          "texts are %d (more: --prompts FILE)", a->n_prompts, KVV_TEXT_PROMPTS);
    }
    if (s != KVV_OK)
        return kvv_cli_fail(err);
    kvv_report *rep = &run->report;
    snprintf(rep->prompt_source, sizeof rep->prompt_source, "%s",
             strcmp(ps->source, "file") == 0 ? "text" : ps->source);
    rep->n_prompt = ps->items[0].n_tokens;
    int most = 0;
    for (int i = 0; i < ps->n; i++)
        most = ps->items[i].n_tokens > most ? ps->items[i].n_tokens : most;
    kvv_check_cli_own_workload(run, most, (int)a->n_gen);
    return 0;
}

static void print_prompts(const kvv_prompt_set *ps, long n_gen)
{
    int lo = ps->items[0].n_tokens, hi = lo;
    for (int i = 1; i < ps->n; i++) {
        lo = ps->items[i].n_tokens < lo ? ps->items[i].n_tokens : lo;
        hi = ps->items[i].n_tokens > hi ? ps->items[i].n_tokens : hi;
    }
    const char *what = strcmp(ps->source, "text") == 0     ? "built-in texts"
                       : strcmp(ps->source, "random") == 0 ? "seeded random prompts"
                       : strcmp(ps->source, "file") == 0   ? "prompts from the file"
                                                           : "prompts";
    printf("prompts %d %s, ", ps->n, what);
    if (lo == hi)
        printf("%d tokens each", lo);
    else
        printf("%d to %d tokens", lo, hi);
    printf(", %ld generated:", n_gen);
    for (int i = 0; i < ps->n && i < 12; i++)
        printf("%s %s", i ? "," : "", ps->items[i].name);
    printf("%s\n\n", ps->n > 12 ? ", ..." : "");
}

/* The baselines' engine: --figures-engine, or the engine under test (same). */
static kvv_engine_opts figures_engine(const kvv_engine_opts *under_test, const char *figures)
{
    kvv_engine_opts fig = *under_test;
    if (strcmp(figures, "same") != 0) {
        fig = kvv_engine_opts_for(under_test, figures);
        fig.n_threads = 1;
        fig.control = 0;
        fig.ggml = 0;
    }
    return fig;
}

/* What the evict run needs where it runs (here, or an isolated child). */
typedef struct {
    const kvv_evict_opts *eo;
    const kvv_prompt_set *ps;
    const char *csv;           /* --csv FILE or NULL */
    bool verbose;              /* print the tables */
} evict_job;

/* The check's body (kvv_check_cli_run_body): run, print the tables, write
 * --csv. A failed --csv is the returned status; a failed run is r's. */
static kvv_status evict_body(void *u, kvv_check_result *r, kvv_error *err)
{
    const evict_job *j = u;
    kvv_evict_result res;
    memset(&res, 0, sizeof res);
    kvv_status s = KVV_OK;
    if (kvv_check_evict(j->eo, &res, r, err) == KVV_OK) {
        if (j->verbose)
            kvv_evict_print(stdout, &res);
        if (j->csv)
            s = kvv_evict_write_csv(&res, j->ps, j->csv, err);
    }
    kvv_evict_result_free(&res);
    fflush(stdout); /* an isolated child _exits */
    return s;
}

/* Run evict over the prompt set on the prepared run; print, --csv.
 * @return the exit code of a failed --csv write, else 0. */
static int evict(kvv_check_run *run, const evict_args *a, const kvv_prompt_set *ps,
                 kvv_error *err)
{
    const kvv_check_cli *c = a->c;
    kvv_check_cli_print_header(c, run);
    if (kvv_output_cli_verbose(&c->out))
        print_prompts(ps, a->n_gen);
    int *bud = NULL;
    if (a->budgets) {
        bud = malloc((size_t)a->n_budgets * sizeof *bud);
        for (int i = 0; bud && i < a->n_budgets; i++)
            bud[i] = a->budgets[i];
    }
    kvv_engine_opts fig = figures_engine(&run->opts.engine, a->figures);
    kvv_evict_opts eo = {.check = run->opts, .prompts = ps, .budgets = bud,
                         .n_budgets = a->n_budgets, .policies = a->pols,
                         .n_policies = a->n_pols, .equal_bytes = a->equal_bytes,
                         .figures = &fig, .verify_prompts = (int)a->verify_prompts,
                         .n_threads = run->opts.n_jobs};
    kvv_check_result *r = kvv_check_cli_report(run, "evict");
    int fail = 0;
    evict_job job = {&eo, ps, a->csv, kvv_output_cli_verbose(&c->out)};
    /* isolated: a time limit of four checks per prompt (each prompt runs
     * every policy at every budget, plus the full-cache baseline) */
    if (r && kvv_check_cli_run_body(run, 4.0 * ps->n, evict_body, &job, r, err))
        fail = kvv_cli_fail(err);
    if (kvv_output_cli_verbose(&c->out))
        printf("\n");
    free(bud);
    return fail;
}

/* -n into the check's options, checked against the context. */
static int own_opts(void *user, kvv_check_run *run)
{
    const evict_args *a = user;
    return kvv_check_cli_steps(a->c, run, a->n_gen);
}

int kvv_cmd_evict(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "evict");
    c.accepts = ACCEPTS;
    evict_args a = {.c = &c, .n_prompts = KVV_TEXT_PROMPTS, .equal_bytes = true,
                    .figures = "cpu"};
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, own_finish, &a});
    if (code != KVV_OPTS_RUN) {
        args_free(&a);
        return code;
    }
    bool single = kvv_prompt_cli_given(&c.prompt);
    if (!single)
        c.prompt.n_random = 1; /* the prompt set replaces it */
    if (a.n_gen == 0)
        a.n_gen = EVICT_GEN_TOKENS;
    c.own_opts = own_opts;
    c.own_user = &a;
    kvv_check_run run;
    if ((code = kvv_check_cli_prepare(&c, &run))) {
        args_free(&a);
        return code;
    }
    kvv_prompt_set ps;
    kvv_prompt_set_init(&ps);
    kvv_error err = {0};
    code = build_prompts(&c, &a, &run, single, &ps, &err);
    if (code) {
        /* Recorded too, so a --json report says why nothing ran. */
        kvv_check_result *r = kvv_check_cli_report(&run, "evict");
        if (r)
            kvv_check_set_error(r, &err);
        c.out.quiet = true;
        kvv_check_cli_finish(&c, &run);
        kvv_prompt_set_free(&ps);
        args_free(&a);
        return code;
    }
    int fail = evict(&run, &a, &ps, &err);
    code = kvv_check_cli_finish(&c, &run);
    kvv_prompt_set_free(&ps);
    args_free(&a);
    return fail ? fail : code;
}

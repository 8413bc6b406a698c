/*
 * cmd_memory.c — `kvverify memory MODEL --turns 20` and `kvverify memory
 * --shape NAME` (arithmetic only): bytes held over a conversation by the full
 * cache and by KV-Direct (verify/memory.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"
#include "model/shapes.h"
#include "model/tokenizer.h"
#include "verify/memory.h"
#include "verify/texts.h"

/* The check options memory uses (the conversation's turns are its prompt;
 * --quick, --jobs, --layers: nothing to size, split or print); the others
 * are refused as "not used by memory". */
#define ACCEPTS (KVV_CHECK_OPT_CONTROLS | KVV_CHECK_OPT_ISOLATE)

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify memory MODEL [options]\n"
            "       kvverify memory --shape NAME [--budget B] [--cache-type T]\n"
            "                       [--paper-mb FULL,KVDIRECT] [--json [FILE|-]]\n\n"
            "A scripted multi-turn conversation (turns of real text for models with a\n"
            "tokenizer, seeded token ids otherwise): each turn prefills its text and decodes\n"
            "--gen tokens. Per turn: bytes held by the full cache and by KV-Direct (per-layer\n"
            "residual checkpoints, and one vector per token) at a live-token budget; the\n"
            "peak; whether KV-Direct generated the same tokens; and the per-token memory\n"
            "table. With --shape (no file): the arithmetic for that shape, including how the\n"
            "paper's Gemma 3-4B figures (103 MB full vs 42 MB KV-Direct) could arise and what\n"
            "a sliding-window-aware cache holds instead.\n\n"
            "  --turns N           conversation turns (default 20)\n"
            "  --gen N             tokens decoded per turn (default 16, or as many as the\n"
            "                      model's context holds when fewer: 5 on stories260K's 512;\n"
            "                      the conversation line says how many)\n"
            "  --budget B          KV-Direct live tokens (default a quarter of the\n"
            "                      conversation; with --shape 256)\n"
            "  --shape NAME        arithmetic only, for a named shape (kvverify info --shape);\n"
            "                      it takes --budget, --cache-type (its storage type,\n"
            "                      default bf16 as the paper's), --paper-mb and --json, and\n"
            "                      refuses every other option (exit 2): no model runs\n"
            "  --paper-mb F,K      figures to reproduce in the arithmetic (default 103,42)\n");
    kvv_check_cli h;
    kvv_check_cli_init(&h, "memory");
    h.accepts = ACCEPTS;
    kvv_check_cli_help(f, &h);
    kvv_check_cli_free(&h);
}

static int run_shape(const char *name, const kvv_memory_arith_opts *ao, const kvv_output_cli *out)
{
    const char *json_path = out->json_path;
    const kvv_shape *s = kvv_shape_find(name);
    if (!s) {
        char list[1024];
        kvv_shape_list(list, sizeof list);
        fprintf(stderr, "kvverify memory: option --shape: unknown shape '%s' (known: %s)\n", name,
                list);
        return KVV_EXIT_BAD_INPUT;
    }
    kvv_hparams hp;
    kvv_shape_hparams(s, 0, &hp);
    if (!out->stdout_taken) {
        printf("shape %s (%s): %d layers, n_embd %d, %d/%d heads, head dim %d\n", s->name,
               hp.arch_name, hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim);
        kvv_memory_arith(stdout, &hp, ao);
    }
    if (json_path) {
        json_t *j = kvv_memory_arith_json(&hp, ao);
        json_object_set_new(j, "shape", json_string(s->name));
        kvv_error err = {0};
        kvv_status st = kvv_json_write_file(j, JSON_INDENT(2) | JSON_SORT_KEYS, json_path, &err);
        json_decref(j);
        if (st)
            return kvv_cli_fail(&err);
    }
    return 0;
}

/* `memory --shape NAME`: arithmetic, no model. Its own option loop: what
 * the arithmetic uses (--shape, --budget, --cache-type, --paper-mb, --json)
 * and nothing else — a conversation's, an engine's or a check's option
 * would run nothing here, so each is refused, never ignored. */
typedef struct {
    const char *shape;
    kvv_memory_arith_opts ao;
} shape_args;

static bool paper_mb(kvv_opts *o, double *full_mb, double *kvd_mb)
{
    if (!kvv_opts_value(o, "--paper-mb"))
        return false;
    if (o->value && (sscanf(o->value, "%lf,%lf", full_mb, kvd_mb) != 2 || *full_mb <= 0 ||
                     *kvd_mb <= 0))
        kvv_opts_error(o, "option --paper-mb: '%s' is not FULL,KVDIRECT in MB", o->value);
    return true;
}

static bool shape_option(void *state, kvv_opts *o)
{
    shape_args *a = state;
    long v;
    if (kvv_opts_value(o, "--shape")) {
        a->shape = o->value;
    } else if (paper_mb(o, &a->ao.full_mb, &a->ao.kvd_mb)) {
    } else if (kvv_opts_value(o, "--budget")) {
        if (o->value && kvv_opts_int(o, "--budget", o->value, 1, 1 << 24, &v))
            a->ao.budget = (int)v;
    } else if (kvv_opts_value(o, "--cache-type")) {
        if (o->value && !kvv_cache_type_from_name(o->value, &a->ao.storage))
            kvv_opts_error(o, "option --cache-type: '%s' is not f32, f16 or bf16", o->value);
    } else if (kvv_opts_positional(o)) {
        kvv_opts_error(o, "give MODEL or --shape, not both");
    } else { /* the last group: every other option is one the arithmetic would drop */
        size_t n = strcspn(o->arg, "=");
        kvv_opts_error(o, "option %.*s: not used by memory --shape (arithmetic for a named "
                          "shape: no model runs, nothing is verified)", (int)n, o->arg);
    }
    return true;
}

static int cmd_shape(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "memory", argc, argv);
    kvv_output_cli out;
    kvv_output_cli_init(&out, "memory --shape", KVV_OUT_JSON);
    shape_args a = {.ao = kvv_memory_arith_opts_default()};
    const kvv_opt_group g[] = {kvv_output_cli_group(&out), {shape_option, NULL, &a}};
    int code = kvv_opts_parse(&o, help, g, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    return run_shape(a.shape, &a.ao, &out);
}

/* Is this the --shape form (--shape before any `--`)? */
static bool shape_form(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--shape") == 0 || strncmp(argv[i], "--shape=", 8) == 0)
            return true;
    return false;
}

/* Tokenize the built-in turns (BOS before the first); NULL when the model
 * has no usable tokenizer. */
static int32_t **text_turns(const kvv_model *m, int n_turns, int **lens)
{
    kvv_tokenizer *tok = NULL;
    kvv_error err = {0};
    if (kvv_tokenizer_open(m->gguf, &tok, &err) != KVV_OK)
        return NULL;
    int32_t **turns = calloc((size_t)n_turns, sizeof *turns);
    *lens = calloc((size_t)n_turns, sizeof **lens);
    bool ok = turns && *lens;
    for (int t = 0; ok && t < n_turns; t++) {
        const char *txt = kvv_text_turns[t % KVV_TEXT_TURNS];
        char buf[512];
        snprintf(buf, sizeof buf, "%s%s", t ? " " : "", txt);
        ok = kvv_tokenize(tok, buf, strlen(buf), t == 0, &turns[t], &(*lens)[t], &err) == KVV_OK &&
             (*lens)[t] > 0;
    }
    kvv_tokenizer_free(tok);
    if (!ok) {
        for (int t = 0; turns && t < n_turns; t++)
            free(turns[t]);
        free(turns);
        free(*lens);
        *lens = NULL;
        return NULL;
    }
    return turns;
}

/* memory's own options. */
typedef struct {
    long turns, gen, budget;
    bool gen_given;
} memory_args;

static bool own_option(void *state, kvv_opts *o)
{
    memory_args *a = state;
    if (kvv_opts_value(o, "--turns")) {
        if (o->value)
            kvv_opts_int(o, "--turns", o->value, 1, 10000, &a->turns);
    } else if (kvv_opts_value(o, "--gen")) {
        if (o->value)
            kvv_opts_int(o, "--gen", o->value, 0, 100000, &a->gen);
        a->gen_given = true;
    } else if (kvv_opts_value(o, "--budget")) {
        if (o->value)
            kvv_opts_int(o, "--budget", o->value, 1, 1 << 24, &a->budget);
    } else if (kvv_opts_value(o, "--paper-mb")) { /* the arithmetic's (shape_form) */
        kvv_opts_error(o, "option --paper-mb: used with --shape only (the arithmetic)");
    } else {
        return false;
    }
    return true;
}

/* What the memory run needs where it runs (here, or an isolated child). */
typedef struct {
    const kvv_memory_opts *mo;
    const kvv_hparams *hp;
    bool verbose;              /* print the tables */
} memory_job;

/* The check's body (kvv_check_cli_run_body): run and print; a failed run is
 * recorded in r. */
static kvv_status memory_body(void *u, kvv_check_result *r, kvv_error *err)
{
    const memory_job *j = u;
    kvv_memory_result res;
    kvv_status s = kvv_check_memory(j->mo, &res, r, err);
    if (s == KVV_OK) {
        if (j->verbose) {
            kvv_memory_print(stdout, &res);
            kvv_token_memory tm;
            kvv_token_memory_of(j->hp, &tm);
            printf("per token: K+V f32 %llu B, f16/bf16 %llu B; one residual f32 %llu B; "
                   "residuals of every layer f32 %llu B\n",
                   (unsigned long long)tm.kv_f32, (unsigned long long)tm.kv_bf16,
                   (unsigned long long)tm.resid_f32, (unsigned long long)tm.resid_layers_f32);
        }
        kvv_memory_result_free(&res);
    }
    fflush(stdout); /* an isolated child _exits */
    return s;
}

int kvv_cmd_memory(int argc, char **argv)
{
    if (shape_form(argc, argv))
        return cmd_shape(argc, argv);
    kvv_check_cli c;
    kvv_check_cli_init(&c, "memory");
    c.accepts = ACCEPTS;
    memory_args a = {.turns = 20, .gen = 16};
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN)
        return code;
    long turns = a.turns, gen = a.gen, budget = a.budget;
    c.prompt.n_random = 1; /* the turns are the prompt (-p and the like are refused) */
    kvv_check_run run;
    if ((code = kvv_check_cli_prepare(&c, &run)))
        return code;
    int *lens = NULL;
    int32_t **tt = text_turns(run.model, (int)turns, &lens);
    if (!a.gen_given) {
        /* Fit the default conversation into the model's context. */
        long text = 0;
        for (int t = 0; t < turns; t++)
            text += tt ? lens[t] : 12;
        long room = (run.model->hp.n_ctx_train - text) / turns;
        if (room < gen)
            gen = room > 1 ? room : 1;
    }
    run.report.n_prompt = 0;
    for (int t = 0; tt && t < turns; t++)
        run.report.n_prompt += lens[t];
    kvv_memory_opts mo = {.check = run.opts, .n_turns = (int)turns, .gen_per_turn = (int)gen,
                          .budget = (int)budget, .turn_tokens = (const int32_t *const *)tt,
                          .turn_len = lens, .random_turn_len = 12};
    snprintf(run.report.prompt_source, sizeof run.report.prompt_source, "%s",
             tt ? "text" : "random");
    kvv_check_cli_own_workload(&run, run.report.n_prompt, (int)(turns * gen));
    kvv_check_cli_print_header(&c, &run);
    if (kvv_output_cli_verbose(&c.out)) {
        printf("conversation: %d turns of %s, %ld tokens decoded per turn", (int)turns,
               tt ? "built-in text" : "seeded token ids", gen);
        if (gen < a.gen) /* the default, cut to the context */
            printf(" (not %ld: the model's context of %d positions holds no more)", a.gen,
                   run.model->hp.n_ctx_train);
        printf("\n");
        fflush(stdout);
    }
    kvv_check_result *r = kvv_check_cli_report(&run, "memory");
    kvv_error err = {0};
    memory_job job = {&mo, &run.model->hp, kvv_output_cli_verbose(&c.out)};
    if (r) /* isolated: a time limit of one check per turn */
        kvv_check_cli_run_body(&run, (double)turns, memory_body, &job, r, &err);
    if (kvv_output_cli_verbose(&c.out))
        printf("\n");
    for (int t = 0; tt && t < turns; t++)
        free(tt[t]);
    free(tt);
    free(lens);
    return kvv_check_cli_finish(&c, &run);
}

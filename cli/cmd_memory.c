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
            "       kvverify memory --shape NAME [--paper-mb FULL,KVDIRECT] [--json [FILE|-]]\n\n"
            "A scripted multi-turn conversation (turns of real text for models with a\n"
            "tokenizer, seeded token ids otherwise): each turn prefills its text and decodes\n"
            "--gen tokens. Per turn: bytes held by the full cache and by KV-Direct (per-layer\n"
            "residual checkpoints, and one vector per token) at a live-token budget; the\n"
            "peak; whether KV-Direct generated the same tokens; and the per-token memory\n"
            "table. With --shape (no file): the arithmetic for that shape, including how the\n"
            "paper's Gemma 3-4B figures (103 MB full vs 42 MB KV-Direct) could arise and what\n"
            "a sliding-window-aware cache holds instead.\n\n"
            "  --turns N           conversation turns (default 20)\n"
            "  --gen N             tokens decoded per turn (default 16)\n"
            "  --budget B          KV-Direct live tokens (default a quarter of the conversation)\n"
            "  --shape NAME        arithmetic only, for a named shape (kvverify info --shape)\n"
            "  --paper-mb F,K      figures to reproduce in the arithmetic (default 103,42)\n");
    kvv_check_cli h;
    kvv_check_cli_init(&h, "memory");
    h.accepts = ACCEPTS;
    kvv_check_cli_help(f, &h);
    kvv_check_cli_free(&h);
}

static int run_shape(const char *name, double full_mb, double kvd_mb, const kvv_output_cli *out)
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
        kvv_memory_arith(stdout, &hp, full_mb, kvd_mb);
    }
    if (json_path) {
        json_t *j = kvv_memory_arith_json(&hp, full_mb, kvd_mb);
        json_object_set_new(j, "shape", json_string(s->name));
        kvv_error err = {0};
        kvv_status st = kvv_json_write_file(j, JSON_INDENT(2) | JSON_SORT_KEYS, json_path, &err);
        json_decref(j);
        if (st)
            return kvv_cli_fail(&err);
    }
    return 0;
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
    const char *shape;
    double full_mb, kvd_mb;
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
    } else if (kvv_opts_value(o, "--shape")) {
        a->shape = o->value;
    } else if (kvv_opts_value(o, "--paper-mb")) {
        if (o->value && (sscanf(o->value, "%lf,%lf", &a->full_mb, &a->kvd_mb) != 2 ||
                         a->full_mb <= 0 || a->kvd_mb <= 0))
            kvv_opts_error(o, "option --paper-mb: '%s' is not FULL,KVDIRECT in MB", o->value);
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
    kvv_status s = kvv_memory_run(j->mo, &res, r, err);
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
    kvv_check_cli c;
    kvv_check_cli_init(&c, "memory");
    c.accepts = ACCEPTS;
    memory_args a = {.turns = 20, .gen = 16, .full_mb = 103, .kvd_mb = 42};
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN)
        return code;
    long turns = a.turns, gen = a.gen, budget = a.budget;
    if (a.shape) {
        /* Arithmetic verifies nothing: there is no comparison to plant a failure in. */
        code = c.model_path ? (fprintf(stderr, "kvverify memory: give MODEL or --shape, not "
                                               "both\n"),
                               KVV_EXIT_BAD_INPUT)
               : c.force_fail ? (fprintf(stderr, "kvverify memory: option --force-fail: "
                                                 "--shape is arithmetic and verifies "
                                                 "nothing\n"),
                                 KVV_EXIT_BAD_INPUT)
               : c.out.html_path ? (fprintf(stderr, "kvverify memory: option --html: --shape "
                                                    "prints arithmetic, it has no figures\n"),
                                    KVV_EXIT_BAD_INPUT)
                              : run_shape(a.shape, a.full_mb, a.kvd_mb, &c.out);
        kvv_check_cli_free(&c);
        return code;
    }
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
        printf("conversation: %d turns of %s, %ld tokens decoded per turn\n", (int)turns,
               tt ? "built-in text" : "seeded token ids", gen);
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

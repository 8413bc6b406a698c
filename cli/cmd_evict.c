/*
 * cmd_evict.c — `kvverify evict MODEL`: every cache policy and both KV-Direct
 * modes against the full cache at several budgets (verify/evict.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"
#include "model/tokenizer.h"
#include "verify/evict.h"
#include "verify/texts.h"

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify evict MODEL [options]\n\n"
            "Runs the eviction baselines (window, streaming, streaming-reindex, h2o, tova,\n"
            "snapkv, pyramidkv, knorm, quest) and KV-Direct (kvdirect-layer,\n"
            "kvdirect-token) against the full\n"
            "cache at several budgets: greedy token match, prefix match (steps to the first\n"
            "divergence), teacher-forced top-1 agreement, mean and max KL per step, bytes\n"
            "held; then a second table at equal total bytes (KV-Direct's checkpoints charged\n"
            "to its budget). Default prompt: a built-in story (>= 256 tokens) for models\n"
            "with a tokenizer, else 256 seeded random tokens. Policy defaults:\n"
            "docs/policies.md.\n\n"
            "  -n N                tokens to decode (default 64)\n"
            "  --budgets 16,32,64  live-token budgets (default 10,25,50,75%% of the context)\n"
            "  --policies a,b      only these policies (names as above, plus full)\n"
            "  --no-equal-bytes    skip the equal-total-bytes table\n"
            "  --csv FILE          both tables as CSV, for plotting\n");
    kvv_check_cli_help(f, NULL);
}

/* Whether MODEL carries a tokenizer kvverify can use (then the built-in
 * story is the default prompt). Errors here are reported later by the
 * normal model open. */
static bool model_has_tokenizer(const char *path)
{
    kvv_gguf *g = NULL;
    kvv_tokenizer *tok = NULL;
    kvv_error err = {0};
    bool ok = kvv_gguf_open(path, &g, &err) == KVV_OK && kvv_tokenizer_open(g, &tok, &err) == KVV_OK;
    kvv_tokenizer_free(tok);
    kvv_gguf_close(g);
    return ok;
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
    const char *csv;
    int32_t *budgets;       /* owned */
    int n_budgets;
    kvv_policy_kind *pols;  /* owned */
    int n_pols;
    bool equal_bytes;
} evict_args;

static bool own_option(void *state, kvv_opts *o)
{
    evict_args *a = state;
    long v;
    if (kvv_opts_value(o, "-n")) {
        if (o->value && kvv_opts_int(o, "-n", o->value, 1, 1 << 20, &v))
            a->c->n_gen = v;
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
    } else if (kvv_opts_value(o, "--csv")) {
        a->csv = o->value;
    } else if (kvv_opts_flag(o, "--no-equal-bytes")) {
        a->equal_bytes = false;
    } else {
        return false;
    }
    return true;
}

/* Run evict on the prepared run; print, --csv. @return the exit code of a
 * failed --csv write, else 0. */
static int evict(kvv_check_run *run, const evict_args *a)
{
    int *bud = NULL;
    if (a->budgets) {
        bud = malloc((size_t)a->n_budgets * sizeof *bud);
        for (int i = 0; bud && i < a->n_budgets; i++)
            bud[i] = a->budgets[i];
    }
    kvv_evict_opts eo = {.check = run->opts, .budgets = bud, .n_budgets = a->n_budgets,
                         .policies = a->pols, .n_policies = a->n_pols,
                         .equal_bytes = a->equal_bytes};
    kvv_check_result *r = kvv_check_cli_report(run, "evict");
    kvv_evict_result res;
    kvv_error err = {0};
    int fail = 0;
    if (r && kvv_evict_run(&eo, &res, r, &err) == KVV_OK) {
        if (!a->c->out.quiet)
            kvv_evict_print(stdout, &res);
        if (a->csv && kvv_evict_write_csv(&res, a->csv, &err))
            fail = kvv_cli_fail(&err);
        kvv_evict_result_free(&res);
    }
    free(bud);
    return fail;
}

int kvv_cmd_evict(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "evict");
    evict_args a = {.c = &c, .equal_bytes = true};
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN) {
        free(a.budgets);
        free(a.pols);
        return code;
    }
    bool story = false;
    if (!kvv_prompt_cli_given(&c.prompt) && c.model_path) {
        /* Real text where the model can read it, else seeded ids. */
        story = model_has_tokenizer(c.model_path);
        if (story)
            c.prompt.text = kvv_text_story;
        else
            c.prompt.n_random = 256;
    }
    if (c.n_gen == 0)
        c.n_gen = 64;
    kvv_check_run run;
    if ((code = kvv_check_cli_prepare(&c, &run))) {
        free(a.budgets);
        free(a.pols);
        return code;
    }
    if (story) {
        /* The built-in story is longer than small contexts: keep its first
         * 320 tokens, fewer if the model's context needs room to decode. */
        int room = run.model->hp.n_ctx_train - (int)c.n_gen;
        int keep = room < 320 ? room : 320;
        if (keep >= 1 && run.opts.n_tokens > keep) {
            run.opts.n_tokens = keep;
            run.n_prompt = keep;
            run.report.n_prompt = keep;
        }
    }
    int fail = evict(&run, &a);
    code = kvv_check_cli_finish(&c, &run);
    free(a.budgets);
    free(a.pols);
    return fail ? fail : code;
}

/* prompt_opts.c — shared options and run path of the check commands (see
 * prompt_opts.h). */
#include "cli/prompt_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer.h"
#include "verify/audit.h"
#include "verify/report.h"

void kvv_check_cli_init(kvv_check_cli *c, const char *cmd)
{
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    c->engine_name = "ref";
    c->n_threads = 1;
    c->cache_type = KVV_CACHE_F32;
    c->seed = 1;
    c->controls = true;
}

void kvv_check_cli_free(kvv_check_cli *c)
{
    if (!c)
        return;
    free(c->tokens);
    free(c->tokens_b);
    free(c->thread_counts);
    free(c->engine_opts);
    c->engine_opts = NULL;
    c->tokens = c->tokens_b = NULL;
    c->thread_counts = NULL;
}

void kvv_check_cli_help(FILE *f)
{
    fprintf(f,
            "engine:\n"
            "  --engine NAME       engine to certify: ref (default), cpu, llama.cpp or\n"
            "                      plugin:PATH.so (docs/plugins.md)\n"
            "  --mode MODE         exact (ref), fast or invariant (cpu; default invariant)\n"
            "  --threads N         engine threads (default 1)\n"
            "  --cache-type T      KV cache storage: f32 (default), f16, bf16\n"
            "  --device D          plugins: device (llama.cpp: cpu, vulkan, cuda)\n"
            "  --ubatch N          plugins: micro-batch size (default: the engine's)\n"
            "  --engine-opt K=V    plugins: an engine option (repeatable; see the plugin)\n"
            "prompt (one of; default: random tokens sized to the model):\n"
            "  -p, --prompt TEXT   text, tokenized with the model's tokenizer\n"
            "  --tokens 1,2,3      token ids\n"
            "  --random N          N pseudo-random tokens from --seed (first = BOS if any)\n"
            "  --seed N            seed for random prompts (default 1)\n"
            "controls and output:\n"
            "  --no-controls       skip the negative controls (on by default)\n"
            "  --force-fail        plant each check's control into the real comparison so\n"
            "                      the check must FAIL (exit 1); for testing pipelines\n"
            "  --json FILE         write the JSON report (docs/report-schema.md)\n"
            "  --junit FILE        write a JUnit XML report\n"
            "  --layers            print the per-layer tables\n"
            "  -q, --quiet         print only the summary table and failures\n"
            "exit codes: 0 every check ran and passed, 1 a check failed (or a control was\n"
            "not detected), 2 bad input or usage, 77 nothing could be checked.\n");
}

bool kvv_check_cli_option(kvv_check_cli *c, kvv_opts *o)
{
    long v;
    if (kvv_opts_positional(o)) {
        if (c->model_path)
            kvv_opts_unknown(o);
        else
            c->model_path = o->arg;
        return true;
    }
    if (kvv_opts_value(o, "--engine")) {
        c->engine_name = o->value;
        return true;
    }
    if (kvv_opts_value(o, "--mode")) {
        kvv_mode m;
        if (o->value && !kvv_mode_from_name(o->value, &m))
            kvv_opts_error(o, "option --mode: '%s' is not exact, fast or invariant", o->value);
        c->mode_name = o->value;
        return true;
    }
    if (kvv_opts_value(o, "--threads")) {
        if (o->value && kvv_opts_int(o, "--threads", o->value, 1, 1024, &v))
            c->n_threads = v;
        return true;
    }
    if (kvv_opts_value(o, "--cache-type")) {
        if (o->value && !kvv_cache_type_from_name(o->value, &c->cache_type))
            kvv_opts_error(o, "option --cache-type: '%s' is not f32, f16 or bf16", o->value);
        return true;
    }
    if (kvv_opts_value(o, "--device")) {
        c->device = o->value;
        return true;
    }
    if (kvv_opts_value(o, "--ubatch")) {
        if (o->value && kvv_opts_int(o, "--ubatch", o->value, 1, 1 << 20, &v))
            c->n_ubatch = v;
        return true;
    }
    if (kvv_opts_value(o, "--engine-opt")) {
        if (o->value && !strchr(o->value, '=')) {
            kvv_opts_error(o, "option --engine-opt: '%s' is not KEY=VALUE", o->value);
            return true;
        }
        const char **a = o->value ? realloc(c->engine_opts, (size_t)(c->n_engine_opts + 1) *
                                                                sizeof *a)
                                  : NULL;
        if (a) {
            a[c->n_engine_opts++] = o->value;
            c->engine_opts = a;
        } else if (o->value) {
            kvv_opts_error(o, "option --engine-opt: out of memory");
        }
        return true;
    }
    if (kvv_opts_value(o, "--seed")) {
        if (o->value)
            kvv_opts_u64(o, "--seed", o->value, &c->seed);
        return true;
    }
    if (kvv_opts_value(o, "-p") || kvv_opts_value(o, "--prompt")) {
        c->text = o->value;
        return true;
    }
    if (kvv_opts_value(o, "--tokens")) {
        free(c->tokens);
        c->tokens = NULL;
        if (o->value)
            kvv_opts_int_list(o, "--tokens", o->value, &c->tokens, &c->n_tokens);
        return true;
    }
    if (kvv_opts_value(o, "--random")) {
        if (o->value && kvv_opts_int(o, "--random", o->value, 1, 1 << 20, &v))
            c->n_random = v;
        return true;
    }
    if (kvv_opts_flag(o, "--no-controls")) {
        c->controls = false;
        return true;
    }
    if (kvv_opts_flag(o, "--force-fail")) {
        c->force_fail = true;
        return true;
    }
    if (kvv_opts_flag(o, "--quiet") || kvv_opts_flag(o, "-q")) {
        c->quiet = true;
        return true;
    }
    if (kvv_opts_flag(o, "--layers")) {
        c->layers = true;
        return true;
    }
    if (kvv_opts_value(o, "--json")) {
        c->json_path = o->value;
        return true;
    }
    if (kvv_opts_value(o, "--junit")) {
        c->junit_path = o->value;
        return true;
    }
    return false;
}

static void progress(void *user, const char *label, long done, long total)
{
    (void)user;
    kvv_progress(label, done, total);
}

/* The prompt the options ask for; *source names it. @return exit code 0 or 2/77. */
static int make_prompt(kvv_check_cli *c, const kvv_model *m, int n_default, int32_t **out,
                       int *n, const char **source)
{
    kvv_error err = {0};
    int given = (c->text != NULL) + (c->tokens != NULL) + (c->n_random > 0);
    if (given > 1) {
        fprintf(stderr, "kvverify %s: options -p, --tokens and --random exclude each other\n",
                c->cmd);
        return KVV_EXIT_BAD_INPUT;
    }
    if (c->text) {
        kvv_tokenizer *tok;
        if (kvv_tokenizer_open(m->gguf, &tok, &err))
            return kvv_cli_fail(&err);
        kvv_status s = kvv_tokenize(tok, c->text, strlen(c->text), true, out, n, &err);
        kvv_tokenizer_free(tok);
        if (s)
            return kvv_cli_fail(&err);
        if (*n < 1) {
            fprintf(stderr, "kvverify %s: option -p: the text gives no tokens\n", c->cmd);
            return KVV_EXIT_BAD_INPUT;
        }
        *source = "text";
        return 0;
    }
    if (c->tokens) {
        *out = malloc((size_t)c->n_tokens * sizeof **out);
        if (!*out)
            return KVV_EXIT_BAD_INPUT;
        memcpy(*out, c->tokens, (size_t)c->n_tokens * sizeof **out);
        *n = c->n_tokens;
        *source = "tokens";
        return 0;
    }
    *n = c->n_random > 0 ? (int)c->n_random : n_default;
    *out = malloc((size_t)*n * sizeof **out);
    if (!*out)
        return KVV_EXIT_BAD_INPUT;
    uint32_t bos = UINT32_MAX;
    if (kvv_gguf_get_u32(m->gguf, "tokenizer.ggml.bos_token_id", false, &bos, &err) ||
        bos >= (uint32_t)m->hp.n_vocab)
        bos = UINT32_MAX;
    kvv_prompt_random(c->seed, m->hp.n_vocab, bos == UINT32_MAX ? -1 : (int32_t)bos, *out, *n);
    *source = "random";
    return 0;
}

static int prepare(kvv_check_cli *c, kvv_check_run *run)
{
    memset(run, 0, sizeof *run);
    if (!c->model_path) {
        fprintf(stderr, "kvverify %s: missing MODEL (see kvverify %s --help)\n", c->cmd, c->cmd);
        return KVV_EXIT_BAD_INPUT;
    }
    kvv_engine_opts eo = kvv_engine_opts_default();
    eo.name = c->engine_name;
    eo.mode = strcmp(c->engine_name, "ref") == 0 ? KVV_MODE_EXACT : KVV_MODE_INVARIANT;
    if (c->mode_name)
        kvv_mode_from_name(c->mode_name, &eo.mode);
    eo.n_threads = (int)c->n_threads;
    eo.cache_type = c->cache_type;
    eo.device = c->device;
    eo.n_ubatch = (int)c->n_ubatch;
    eo.engine_opts = c->engine_opts;
    eo.n_engine_opts = c->n_engine_opts;

    kvv_error err = {0};
    if (kvv_model_open(c->model_path, &run->model, &err)) {
        int code = kvv_cli_fail(&err);
        if (code == KVV_EXIT_NOTHING)
            fprintf(stderr, "kvverify %s: nothing could be checked\n", c->cmd);
        return code;
    }
    const kvv_model *m = run->model;
    kvv_audit_plan plan;
    kvv_audit_plan_for(&m->hp, 0, &plan);
    run->n_default_prompt = plan.n_prompt;
    run->n_default_gen = plan.n_gen;
    const char *source = "random";
    int code = make_prompt(c, m, plan.n_prompt, &run->prompt, &run->n_prompt, &source);
    if (code)
        return code;
    if (c->tokens_b && c->n_tokens_b != run->n_prompt) {
        fprintf(stderr, "kvverify %s: option --tokens-b: %d tokens, but the prompt has %d\n",
                c->cmd, c->n_tokens_b, run->n_prompt);
        return KVV_EXIT_BAD_INPUT;
    }

    kvv_check_opts *o = &run->opts;
    *o = kvv_check_opts_default();
    o->model = m;
    o->engine = eo;
    o->tokens = run->prompt;
    o->n_tokens = run->n_prompt;
    o->tokens_b = c->tokens_b;
    o->n_gen = c->n_gen > 0 ? (int)c->n_gen : plan.n_gen;
    o->chunk = (int)c->chunk;
    o->thread_counts = c->thread_counts;
    o->n_thread_counts = c->n_thread_counts;
    o->controls = c->controls;
    o->force_fail = c->force_fail;
    o->seed = c->seed;
    o->progress = progress;

    kvv_report *rep = &run->report;
    kvv_report_init(rep, c->model_path, c->seed);
    snprintf(rep->architecture, sizeof rep->architecture, "%s", m->hp.arch_name);
    snprintf(rep->prompt_source, sizeof rep->prompt_source, "%s", source);
    rep->n_prompt = run->n_prompt;
    if (kvv_sha256_file(c->model_path, rep->model_sha256, &err))
        return kvv_cli_fail(&err);
    return 0;
}

static void run_free(kvv_check_run *run)
{
    kvv_report_free(&run->report);
    free(run->prompt);
    kvv_model_close(run->model);
    memset(run, 0, sizeof *run);
}

int kvv_check_cli_prepare(kvv_check_cli *c, kvv_check_run *run)
{
    int code = prepare(c, run);
    if (code) {
        run_free(run);
        kvv_check_cli_free(c);
    }
    return code;
}

kvv_check_result *kvv_check_cli_report(kvv_check_run *run, const char *name)
{
    return kvv_report_add(&run->report, name);
}

int kvv_check_cli_finish(kvv_check_cli *c, kvv_check_run *run)
{
    kvv_report *rep = &run->report;
    kvv_error err = {0};
    if (rep->seconds == 0)
        for (int i = 0; i < rep->n_checks; i++)
            rep->seconds += rep->checks[i].seconds;
    if (!rep->has_engine)
        for (int i = 0; i < rep->n_checks && !rep->has_engine; i++)
            if (rep->checks[i].has_engine) {
                rep->engine = rep->checks[i].engine;
                rep->engine.control = 0;
                rep->has_engine = true;
            }
    unsigned flags = c->quiet ? KVV_CONSOLE_QUIET : (c->layers ? KVV_CONSOLE_LAYERS : 0);
    kvv_report_print_console(stdout, rep, flags);
    fflush(stdout);
    int code = kvv_report_exit_code(rep);
    if (c->json_path && kvv_report_write_json(rep, c->json_path, &err))
        code = kvv_cli_fail(&err);
    if (c->junit_path && kvv_report_write_junit(rep, c->junit_path, &err))
        code = kvv_cli_fail(&err);
    run_free(run);
    kvv_check_cli_free(c);
    return code;
}

int kvv_check_cli_run(kvv_check_cli *c, const char *const *names, int n_names)
{
    kvv_check_run run;
    int code = kvv_check_cli_prepare(c, &run);
    if (code)
        return code;
    kvv_error err = {0};
    if (kvv_audit_run(&run.opts, names, n_names, &run.report, &err)) {
        code = kvv_cli_fail(&err);
        run_free(&run);
        kvv_check_cli_free(c);
        return code;
    }
    return kvv_check_cli_finish(c, &run);
}

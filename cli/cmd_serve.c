/*
 * cmd_serve.c — `kvverify serve URL --model F.gguf`: certify a running
 * server over its HTTP completion API (verify/serve/serve.h,
 * docs/serve.md). Parses options, asks the server, prints the report.
 */
#include <stdio.h>
#include <string.h>

#include "cli/check_cli.h"
#include "cli/commands.h"
#include "cli/opts.h"
#include "verify/serve/serve.h"

/* The check options serve uses: controls and a prompt. --timeout is its own
 * (seconds per request): it is read through the isolation group, whose
 * other options serve refuses. */
#define ACCEPTS (KVV_CHECK_OPT_CONTROLS | KVV_CHECK_OPT_PROMPT | KVV_CHECK_OPT_ISOLATE)

typedef struct {
    kvv_check_cli *c;
    const char *model;
    kvv_serve_opts so;
    const char *checks; /* --checks a,b (NULL: all) */
} serve_args;

static void help(FILE *f)
{
    kvv_serve_opts d = kvv_serve_opts_default();
    fprintf(f, "usage: kvverify serve URL --model F.gguf [options]\n\n"
            "Certify a running inference server (llama-server, or any OpenAI-compatible one)\n"
            "from outside: greedy completions of token-id prompts with top-k logprobs,\n"
            "compared bit for bit (docs/serve.md). F.gguf is the model the server is said\n"
            "to serve: its vocabulary and kvverify's engine (--engine, default ref) on it\n"
            "are the reference side. The checks, in this order:\n"
            "  serve-model       the server serves F.gguf (vocabulary, first-step logprobs);\n"
            "                    when it fails no other check runs\n"
            "  serve-repeat      the same request --repeats times, one at a time: bit-equal\n"
            "  serve-concurrent  the request alone vs among --parallel - 1 others of other\n"
            "                    lengths, --rounds rounds per mode: single (all sent at once)\n"
            "                    and mixed (sent while the others decode, later each round);\n"
            "                    distinct completions and the first step where they part\n"
            "  serve-prefix      cache_prompt off vs on: the same request again, and after\n"
            "                    another request that shares its first half\n"
            "  serve-reference   greedy tokens and logprobs vs the reference engine: first\n"
            "                    divergence, max |d logprob| (within --tol); a divergence\n"
            "                    whose top-1/top-2 gap is within twice that error is a\n"
            "                    near-tie, not a failure\n\n"
            "  --model F.gguf      the model the server serves (required)\n"
            "  --api llama|openai  llama: POST /completion (llama-server); openai: POST\n"
            "                      /v1/completions (default llama)\n"
            "  --server-model NAME openai's \"model\" field (default: the first of /v1/models)\n"
            "  --parallel N        requests in flight in serve-concurrent (default: the\n"
            "                      server's slots from /props, else 4)\n"
            "  --rounds N          serve-concurrent rounds per mode (default %d)\n"
            "  --repeats N         serve-repeat requests (default %d)\n"
            "  -n N                tokens per completion (default %d)\n"
            "  --top-k N           logprobs per step (default %d)\n"
            "  --tol NATS          serve-reference: largest |d logprob| (default %g)\n"
            "  --cache-prompt on|off  requests of repeat, concurrent and reference may\n"
            "                      reuse the server's prompt cache (default off)\n"
            "  --timeout SECONDS   per request (default %g); past it the request failed\n"
            "  --checks a,b        only these checks (names above; serve-model always runs)\n",
            d.rounds, d.repeats, d.n_predict, d.n_probs, d.tol, d.timeout);
    kvv_check_cli c;
    kvv_check_cli_init(&c, "serve");
    c.accepts = ACCEPTS & ~KVV_CHECK_OPT_ISOLATE;
    c.exit_codes = "exit codes: 0 every check ran and passed, 1 a check failed (or a control\n"
                   "was not detected, or the server serves another model), 2 bad usage or\n"
                   "the server failed a request (unreachable, reset, HTTP error, not JSON,\n"
                   "no logprobs, --timeout), the message naming the request, 77 nothing\n"
                   "could be checked, 130 interrupted.\n";
    kvv_check_cli_help(f, &c);
    kvv_check_cli_free(&c);
}

static bool own_option(void *state, kvv_opts *o)
{
    serve_args *a = state;
    long v;
    double x;
    if (kvv_opts_value(o, "--model")) {
        a->model = o->value;
    } else if (kvv_opts_value(o, "--api")) {
        if (o->value && !kvv_serve_api_from_name(o->value, &a->so.api))
            kvv_opts_error(o, "option --api: '%s' is not llama or openai", o->value);
    } else if (kvv_opts_value(o, "--server-model")) {
        a->so.model_name = o->value;
    } else if (kvv_opts_value(o, "--parallel")) {
        if (o->value && kvv_opts_int(o, "--parallel", o->value, 1, 64, &v))
            a->so.parallel = (int)v;
    } else if (kvv_opts_value(o, "--rounds")) {
        if (o->value && kvv_opts_int(o, "--rounds", o->value, 1, 1000, &v))
            a->so.rounds = (int)v;
    } else if (kvv_opts_value(o, "--repeats")) {
        if (o->value && kvv_opts_int(o, "--repeats", o->value, 2, 1000, &v))
            a->so.repeats = (int)v;
    } else if (kvv_opts_value(o, "-n")) {
        if (o->value && kvv_opts_int(o, "-n", o->value, 1, 4096, &v))
            a->so.n_predict = (int)v;
    } else if (kvv_opts_value(o, "--top-k")) {
        if (o->value && kvv_opts_int(o, "--top-k", o->value, 2, 100, &v))
            a->so.n_probs = (int)v;
    } else if (kvv_opts_value(o, "--tol")) {
        if (o->value && kvv_opts_double(o, "--tol", o->value, &x)) {
            if (!(x >= 0) || x > 100)
                kvv_opts_error(o, "option --tol: %s is not in [0, 100] nats", o->value);
            a->so.tol = x;
        }
    } else if (kvv_opts_value(o, "--cache-prompt")) {
        if (o->value && strcmp(o->value, "on") && strcmp(o->value, "off"))
            kvv_opts_error(o, "option --cache-prompt: '%s' is not on or off", o->value);
        a->so.cache_prompt = o->value && strcmp(o->value, "on") == 0;
    } else if (kvv_opts_value(o, "--checks")) {
        a->checks = o->value;
    } else {
        return false;
    }
    return true;
}

/* prepare checks that the prompt and -n steps fit the reference */
static int own_opts(void *user, kvv_check_run *run)
{
    const serve_args *a = user;
    return kvv_check_cli_steps(a->c, run, a->so.n_predict);
}

/* Is check `name` in the --checks list (NULL: all)? serve-model always is. */
static bool wanted(const char *list, const char *name)
{
    if (!list || strcmp(name, "serve-model") == 0)
        return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        if (l == n && strncmp(p, name, n) == 0)
            return true;
        p += l + (p[l] == ',');
    }
    return false;
}

static int bad_checks(const char *list)
{
    int n;
    const char *const *names = kvv_serve_checks(&n);
    for (const char *p = list; p && *p;) {
        size_t l = strcspn(p, ",");
        bool ok = false;
        for (int i = 0; i < n && !ok; i++)
            ok = strlen(names[i]) == l && strncmp(p, names[i], l) == 0;
        if (!ok) {
            fprintf(stderr, "kvverify serve: option --checks: '%.*s' is not a serve check "
                            "(serve-model, serve-repeat, serve-concurrent, serve-prefix, "
                            "serve-reference)\n", (int)l, p);
            return KVV_EXIT_BAD_INPUT;
        }
        p += l + (p[l] == ',');
    }
    return 0;
}

int kvv_cmd_serve(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "serve");
    c.accepts = ACCEPTS;
    serve_args a = {.c = &c, .so = kvv_serve_opts_default()};
    c.own_opts = own_opts;
    c.own_user = &a;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN)
        return code;
    /* the positional is the URL; the model comes from --model */
    const char *url = c.model_path;
    const char *refuse = c.isolate == 1 ? "--isolate" : c.isolate == 2 ? "--no-isolate" : NULL;
    if (refuse || !url || !a.model || (code = bad_checks(a.checks))) {
        if (refuse)
            fprintf(stderr, "kvverify serve: option %s: not used by serve\n", refuse);
        else if (!url)
            fprintf(stderr, "kvverify serve: missing URL (see kvverify serve --help)\n");
        else if (!a.model)
            fprintf(stderr, "kvverify serve: missing --model F.gguf: the model the server "
                            "serves\n");
        kvv_check_cli_free(&c);
        return KVV_EXIT_BAD_INPUT;
    }
    if (c.timeout > 0)
        a.so.timeout = c.timeout;
    c.timeout = 0; /* seconds per request, not an isolated check's limit */
    c.model_path = a.model;
    kvv_check_run run;
    if ((code = kvv_check_cli_prepare(&c, &run)))
        return code;
    a.so.url = url;
    a.so.check = &run.opts;
    kvv_serve *s = NULL;
    kvv_error err = {0};
    if (kvv_serve_open(&a.so, &s, &err)) {
        fprintf(stderr, "kvverify serve: %s\n", err.msg);
        kvv_check_cli_close(&c, &run);
        return KVV_EXIT_BAD_INPUT;
    }
    kvv_check_cli_own_workload(&run, run.n_prompt, a.so.n_predict);
    if (!c.out.quiet && !c.out.stdout_taken) {
        int slots = kvv_serve_slots(s);
        char sl[32] = "slots not told";
        if (slots > 0)
            snprintf(sl, sizeof sl, "%d slot%s", slots, slots == 1 ? "" : "s");
        printf("server  %s (api %s, %s)\n", url, kvv_serve_api_name(a.so.api), sl);
    }
    kvv_check_cli_print_header(&c, &run);
    int n;
    const char *const *names = kvv_serve_checks(&n);
    for (int i = 0; i < n; i++) {
        if (!wanted(a.checks, names[i]))
            continue;
        kvv_check_result *r = kvv_check_cli_report(&run, names[i]);
        if (!r) {
            fprintf(stderr, "kvverify serve: out of memory\n");
            break;
        }
        kvv_serve_run(s, names[i], r);
        if (c.out.progress)
            fprintf(stderr, "serve: %s %s\n", names[i], kvv_verdict_name(r->verdict));
    }
    bool faulted = kvv_serve_faulted(s);
    kvv_serve_close(s);
    code = kvv_check_cli_finish(&c, &run);
    if (faulted && (code == KVV_EXIT_PASS || code == KVV_EXIT_FAIL || code == KVV_EXIT_NOTHING))
        code = KVV_EXIT_BAD_INPUT; /* a request failed: the run proves nothing whole */
    return code;
}

/*
 * cmd_compare.c — `kvverify compare MODEL --engine A --against B`: engine A
 * against engine B per layer (residual, K, V, attention output) and on the
 * logits of a teacher-forced sequence (verify/compare.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"
#include "engine/cpu/cpu_isa.h"
#include "verify/compare.h"
#include "verify/ops_check.h"

/* compare's share of the check options: --engine is A, --mode and --threads B's. */
static void compare_cli(kvv_check_cli *c)
{
    kvv_check_cli_init(c, "compare");
    c->layers = true;
    c->engine.threads_elsewhere = true;
    c->engine.isa_elsewhere = true; /* --isa is engine B's; own_finish checks it */
    c->engine.engine_help = "engine A, the reference side (default ref)";
    c->engine.mode_help = "mode of engine B, the engine under test (A: --mode-a)";
}

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify compare MODEL [--engine A] [--against B] [options]\n\n"
            "A vs B: run the same teacher-forced sequence (the prompt) through engine A,\n"
            "the reference side (--engine, default ref), and engine B, the engine under\n"
            "test (--against, default cpu), and compare, per layer, the residual entering\n"
            "the layer, the cached K and V and the attention output, and the logits: count\n"
            "of differing elements, max ULP distance, NMSE, max |delta|; on the logits also\n"
            "KL(p_A || p_B) per position (mean, max; %%.9g and hex) and top-1 agreement.\n"
            "Passes when max|dlogit|/max|logit| <= --tol at every position and the top-1\n"
            "tokens agree wherever A's top-1/top-2 margin exceeds twice the error. The\n"
            "control moves one logit of B by twice --tol and the verdict must FAIL, so a\n"
            "--tol no finite difference can exceed (inf) is exit 2 unless --no-controls.\n"
            "An engine compared with itself (A and B the same, same options) is exit 2.\n\n"
            "  --against NAME      engine B, the engine under test (default cpu); --mode,\n"
            "                      --threads, --isa, --device, --ubatch and --engine-opt\n"
            "                      apply to B, --cache-type to both\n"
            "  --mode-a MODE       mode of engine A (default: its own default)\n"
            "  --isa-a NAME        kernel table of engine A when it is cpu (default: the\n"
            "                      widest this CPU runs; --isa is engine B's)\n"
            "  --tol X             per-position relative logit tolerance (default %g)\n"
            "  --ops               also check engine B op by op (docs/ops.md): each tapped\n"
            "                      op recomputed exactly on B's own inputs, its local error\n"
            "                      against its fp32 budget; names the first op beyond\n"
            "                      budget and the hypotheses that explain it\n",
            KVV_COMPARE_REL_TOL);
    kvv_check_cli c;
    compare_cli(&c);
    kvv_check_cli_help(f, &c);
}

/* compare's own options: engine B, A's mode, the tolerance. */
typedef struct {
    const char *against, *mode_a, *isa_a;
    const kvv_engine_cli *engine; /* --engine (A) and --isa (B's) */
    double tol;
    bool ops; /* --ops */
} compare_args;

static bool own_option(void *state, kvv_opts *o)
{
    compare_args *a = state;
    kvv_mode m;
    if (kvv_opts_value(o, "--against")) {
        if (o->value)
            a->against = o->value;
    } else if (kvv_opts_value(o, "--mode-a")) {
        if (o->value && !kvv_mode_from_name(o->value, &m))
            kvv_opts_error(o, "option --mode-a: '%s' is not exact, fast or invariant", o->value);
        a->mode_a = o->value;
    } else if (kvv_opts_value(o, "--isa-a")) {
        kvv_cpu_isa t;
        if (o->value && strcmp(o->value, "auto") != 0 && !kvv_cpu_isa_from_name(o->value, &t))
            kvv_opts_error(o, "option --isa-a %s: no such kernel table (generic, avx2, avx512 "
                              "or auto)", o->value);
        a->isa_a = o->value;
    } else if (kvv_opts_flag(o, "--ops")) {
        a->ops = true;
    } else if (kvv_opts_value(o, "--tol")) {
        if (o->value && kvv_opts_double(o, "--tol", o->value, &a->tol) && !(a->tol >= 0))
            kvv_opts_error(o, "option --tol: %s is not a non-negative number", o->value);
    } else {
        return false;
    }
    return true;
}

static void own_finish(void *state, kvv_opts *o)
{
    const compare_args *a = state;
    if (kvv_engine_cli_check_name(o, "--against", a->against))
        kvv_engine_cli_check_isa(o, "--isa", a->engine->isa, a->against);
    kvv_engine_cli_check_isa(o, "--isa-a", a->isa_a, a->engine->engine);
}

/* The check's body (kvv_check_cli_run_body): here, or in an isolated child. */
static kvv_status compare_body(void *u, kvv_check_result *r, kvv_error *err)
{
    return kvv_check_compare_engines(u, r, err);
}

/* --ops: engine B op by op (verify/ops_check.h). */
static kvv_status ops_body(void *u, kvv_check_result *r, kvv_error *err)
{
    const kvv_compare_opts *co = u;
    return kvv_ops_check_run(co->model, &co->b, co->tokens, co->n_tokens, co->controls, r, err);
}

int kvv_cmd_compare(int argc, char **argv)
{
    kvv_check_cli c;
    compare_cli(&c);
    compare_args a = {.against = "cpu", .tol = KVV_COMPARE_REL_TOL, .engine = &c.engine};
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, own_finish, &a});
    if (code != KVV_OPTS_RUN)
        return code;
    const char *engine_a = c.engine.engine;
    /* prepare() builds the engine options (and the workload) for the engine
     * under test: B, with --mode, --threads, --device, ...; A is derived below */
    c.engine.engine = a.against;
    kvv_check_run run;
    if ((code = kvv_check_cli_prepare(&c, &run)))
        return code;

    /* an engine A from outside is isolated by default too, not only B */
    if (run.opts.isolate == KVV_ISOLATE_AUTO && !kvv_engine_name_concurrent(engine_a))
        run.opts.isolate = KVV_ISOLATE_ON;
    kvv_compare_opts co = kvv_compare_opts_default();
    co.model = run.opts.model;
    co.tokens = run.opts.tokens;
    co.n_tokens = run.opts.n_tokens;
    co.controls = run.opts.controls;
    co.force_fail = run.opts.force_fail;
    co.progress = run.opts.progress;
    co.progress_user = run.opts.progress_user;
    co.rel_tol = a.tol;
    /* --device, --ubatch, --engine-opt, --repack: engine B's, like --threads */
    co.a = kvv_engine_opts_for(&run.opts.engine, engine_a);
    co.a.n_threads = 1;
    co.a.isa = a.isa_a; /* --isa is engine B's */
    if (a.mode_a)
        kvv_mode_from_name(a.mode_a, &co.a.mode);
    co.b = run.opts.engine;
    snprintf(run.report.vs, sizeof run.report.vs, "%s (%s)", engine_a, kvv_mode_name(co.a.mode));

    kvv_check_result *r = kvv_check_cli_report(&run, "compare");
    if (r) {
        kvv_error err = {0};
        if (kvv_check_cli_run_body(&run, 1, compare_body, &co, r, &err) == KVV_ERR_USAGE)
            fprintf(stderr, "kvverify compare: %s\n", err.msg);
    }
    kvv_check_result *ro = a.ops ? kvv_check_cli_report(&run, "ops") : NULL;
    if (ro) {
        kvv_error err = {0};
        if (kvv_check_cli_run_body(&run, 1, ops_body, &co, ro, &err) == KVV_ERR_USAGE)
            fprintf(stderr, "kvverify compare --ops: %s\n", err.msg);
    }
    return kvv_check_cli_finish(&c, &run);
}

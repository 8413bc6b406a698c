/*
 * cmd_latency.c — `kvverify latency MODEL`: read cached K/V vs recompute them
 * from residual checkpoints, per layer and batch size (verify/latency.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"
#include "verify/latency.h"

/* The check options latency uses (seeded residuals, no prompt; --quick,
 * --jobs: nothing to size or split); the others are refused as "not used
 * by latency". */
#define ACCEPTS (KVV_CHECK_OPT_CONTROLS | KVV_CHECK_OPT_LAYERS | KVV_CHECK_OPT_ISOLATE)

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify latency MODEL [options]\n\n"
            "Per layer: the time to read cached K/V against the time to recompute them\n"
            "from checkpointed residuals (the engine's kv_from_residual), for batch sizes\n"
            "1 ... 4096 tokens; bytes moved, FLOPs, achieved GB/s and GFLOP/s beside the\n"
            "machine's roofline measured by a built-in probe (streaming read bandwidth,\n"
            "OpenBLAS sgemm). Medians over repeats. Verdict: the two paths must do the\n"
            "same work, every recomputed K/V element bit-equal (after rounding to the\n"
            "cache's type) to the cached one it replaces, at every batch size; which is\n"
            "faster is the key figure. Control: a residual changed by +1 must show.\n\n"
            "  --batches 1,16,256  batch sizes (default 1,4,16,64,256,1024,4096)\n"
            "  --repeats N         repeats per measurement, median reported (default 5)\n"
            "  --all-layers        measure every layer (default: first, middle, last)\n"
            "  --layers            print every layer's row, not only the means\n");
    kvv_check_cli h;
    kvv_check_cli_init(&h, "latency");
    h.accepts = ACCEPTS;
    kvv_check_cli_help(f, &h);
    kvv_check_cli_free(&h);
}

/* latency's own options. */
typedef struct {
    int32_t *batches;  /* owned */
    int n_batches;
    long repeats;
    bool all_layers;
} latency_args;

static bool own_option(void *state, kvv_opts *o)
{
    latency_args *a = state;
    if (kvv_opts_value(o, "--batches")) {
        free(a->batches);
        a->batches = NULL;
        if (o->value && kvv_opts_int_list(o, "--batches", o->value, &a->batches, &a->n_batches) &&
            a->n_batches > KVV_WORKLOAD_MAX) /* every size is stated in the report */
            kvv_opts_error(o, "option --batches: %d sizes, at most %d", a->n_batches,
                           KVV_WORKLOAD_MAX);
        else if (a->batches)
            for (int i = 0; i < a->n_batches; i++)
                if (a->batches[i] < 1 || a->batches[i] > 65536)
                    kvv_opts_error(o, "option --batches: %d is outside 1..65536", a->batches[i]);
    } else if (kvv_opts_value(o, "--repeats")) {
        if (o->value)
            kvv_opts_int(o, "--repeats", o->value, 1, 1000, &a->repeats);
    } else if (kvv_opts_flag(o, "--all-layers")) {
        a->all_layers = true;
    } else {
        return false;
    }
    return true;
}

/* What the latency run needs where it runs (here, or an isolated child). */
typedef struct {
    const kvv_latency_opts *lo;
    bool verbose;              /* print the table */
    bool layers;               /* ... per layer */
} latency_job;

/* The check's body (kvv_check_cli_run_body): run and print; a failed run is
 * recorded in r. */
static kvv_status latency_body(void *u, kvv_check_result *r, kvv_error *err)
{
    const latency_job *j = u;
    kvv_latency_result res;
    kvv_status s = kvv_latency_run(j->lo, &res, r, err);
    if (s == KVV_OK) {
        if (j->verbose)
            kvv_latency_print(stdout, &res, j->layers);
        kvv_latency_result_free(&res);
    }
    fflush(stdout); /* an isolated child _exits */
    return s;
}

int kvv_cmd_latency(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "latency");
    c.accepts = ACCEPTS;
    latency_args a = {.repeats = 5};
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN) {
        free(a.batches);
        return code;
    }
    int32_t *batches = a.batches;
    int n_batches = a.n_batches;
    c.prompt.n_random = 1; /* seeded residuals, not a prompt (-p and the like are refused) */
    kvv_check_run run;
    if ((code = kvv_check_cli_prepare(&c, &run))) {
        free(batches);
        return code;
    }
    int *b = NULL;
    if (batches) {
        b = malloc((size_t)n_batches * sizeof *b);
        for (int i = 0; b && i < n_batches; i++)
            b[i] = batches[i];
    }
    kvv_latency_opts lo = {.check = run.opts, .batches = b, .n_batches = n_batches,
                           .repeats = (int)a.repeats, .all_layers = a.all_layers};
    run.report.n_prompt = 0; /* seeded residuals, no prompt: no prompt line */
    kvv_check_cli_own_workload(&run, 0, 0);
    { /* its workload: the batch sizes and repeats it measures */
        static const int dflt[] = {1, 4, 16, 64, 256, 1024, 4096};
        kvv_workload *w = &run.report.workload;
        const int *bs = b ? b : dflt;
        int nb = b ? n_batches : (int)(sizeof dflt / sizeof dflt[0]);
        for (w->n_batches = 0; w->n_batches < nb && w->n_batches < KVV_WORKLOAD_MAX; w->n_batches++)
            w->batches[w->n_batches] = bs[w->n_batches];
        w->repeats = (int)a.repeats;
        w->set = true;
    }
    kvv_check_cli_print_header(&c, &run);
    kvv_check_result *r = kvv_check_cli_report(&run, "latency");
    kvv_error err = {0};
    latency_job job = {&lo, kvv_output_cli_verbose(&c.out), c.layers};
    if (r) /* isolated: a time limit of one check per batch size */
        kvv_check_cli_run_body(&run, run.report.workload.n_batches, latency_body, &job, r, &err);
    if (kvv_output_cli_verbose(&c.out))
        printf("\n");
    code = kvv_check_cli_finish(&c, &run);
    free(b);
    free(batches);
    return code;
}

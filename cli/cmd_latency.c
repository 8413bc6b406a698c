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

static void help(void)
{
    printf("usage: kvverify latency MODEL [options]\n\n"
           "Per layer: the time to read cached K/V against the time to recompute them\n"
           "from checkpointed residuals (the engine's kv_from_residual), for batch sizes\n"
           "1 ... 4096 tokens; bytes moved, FLOPs, achieved GB/s and GFLOP/s beside the\n"
           "machine's roofline measured by a built-in probe (stream copy bandwidth,\n"
           "OpenBLAS sgemm). Medians over repeats. A table, no verdict.\n\n"
           "  --batches 1,16,256  batch sizes (default 1,4,16,64,256,1024,4096)\n"
           "  --repeats N         repeats per measurement, median reported (default 5)\n"
           "  --all-layers        measure every layer (default: first, middle, last)\n"
           "  --layers            print every layer's row, not only the means\n");
    kvv_check_cli_help(stdout);
}

int kvv_cmd_latency(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "latency");
    int32_t *batches = NULL;
    int n_batches = 0;
    long repeats = 5;
    bool all_layers = false;
    kvv_opts o;
    kvv_opts_init(&o, "latency", argc, argv);
    while (kvv_opts_next(&o)) {
        if (kvv_opts_flag(&o, "--help") || kvv_opts_flag(&o, "-h")) {
            help();
            kvv_check_cli_free(&c);
            free(batches);
            return 0;
        }
        if (kvv_check_cli_option(&c, &o))
            continue;
        if (kvv_opts_value(&o, "--batches")) {
            free(batches);
            batches = NULL;
            if (o.value && kvv_opts_int_list(&o, "--batches", o.value, &batches, &n_batches))
                for (int i = 0; i < n_batches; i++)
                    if (batches[i] < 1 || batches[i] > 65536)
                        kvv_opts_error(&o, "option --batches: %d is outside 1..65536", batches[i]);
        } else if (kvv_opts_value(&o, "--repeats")) {
            if (o.value)
                kvv_opts_int(&o, "--repeats", o.value, 1, 1000, &repeats);
        } else if (kvv_opts_flag(&o, "--all-layers")) {
            all_layers = true;
        } else {
            kvv_opts_unknown(&o);
        }
    }
    if (o.failed) {
        free(batches);
        kvv_check_cli_free(&c);
        return KVV_EXIT_BAD_INPUT;
    }
    if (!c.text && !c.tokens && c.n_random == 0)
        c.n_random = 1; /* latency uses seeded residuals, not a prompt */
    kvv_check_run run;
    int code = kvv_check_cli_prepare(&c, &run);
    if (code) {
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
                           .repeats = (int)repeats, .all_layers = all_layers};
    kvv_check_result *r = kvv_check_cli_report(&run, "latency");
    kvv_latency_result res;
    kvv_error err = {0};
    if (r && kvv_latency_run(&lo, &res, r, &err) == KVV_OK) {
        if (!c.quiet)
            kvv_latency_print(stdout, &res, c.layers);
        kvv_latency_result_free(&res);
    }
    code = kvv_check_cli_finish(&c, &run);
    free(b);
    free(batches);
    return code;
}

/*
 * cmd_invariance.c — `kvverify invariance MODEL`: the same tokens through
 * different chunkings, prefill vs decode and thread counts give the same bits
 * (verify/invariance.h). Parses options and prints.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify invariance MODEL [options]\n\n"
            "Run the same tokens all at once (baseline), in chunks of 1, 2 and 7, as a\n"
            "prefill followed by token-by-token decode, and with other thread counts when\n"
            "the engine has threads; K, V, the residual entering every layer and the\n"
            "logits must be bit-equal to the baseline. Control: one flipped residual bit\n"
            "must be detected.\n\n"
            "  --thread-counts 1,2 thread counts to compare (default 1,2)\n");
    kvv_check_cli_help(f, NULL);
}

/* invariance's own option. */
typedef struct {
    int *thread_counts;       /* --thread-counts (owned), NULL = the check's default */
    int n_thread_counts;
} invariance_args;

static bool own_option(void *state, kvv_opts *o)
{
    invariance_args *a = state;
    if (!kvv_opts_value(o, "--thread-counts"))
        return false;
    int32_t *list = NULL;
    int n = 0;
    if (o->value && kvv_opts_int_list(o, "--thread-counts", o->value, &list, &n)) {
        free(a->thread_counts);
        a->thread_counts = malloc((size_t)n * sizeof *a->thread_counts);
        a->n_thread_counts = a->thread_counts ? n : 0;
        for (int i = 0; i < a->n_thread_counts; i++) {
            if (list[i] < 1 || list[i] > KVV_ENGINE_MAX_THREADS)
                kvv_opts_error(o, "option --thread-counts: %d is outside 1..%d", (int)list[i],
                               KVV_ENGINE_MAX_THREADS);
            a->thread_counts[i] = (int)list[i];
        }
    }
    free(list);
    return true;
}

static int own_opts(void *user, kvv_check_run *run)
{
    const invariance_args *a = user;
    run->opts.thread_counts = a->thread_counts;
    run->opts.n_thread_counts = a->n_thread_counts;
    return 0;
}

int kvv_cmd_invariance(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "invariance");
    c.layers = true;
    invariance_args a = {NULL, 0};
    c.own_opts = own_opts;
    c.own_user = &a;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code == KVV_OPTS_RUN) {
        const char *names[] = {"invariance"};
        code = kvv_check_cli_run(&c, names, 1);
    }
    free(a.thread_counts);
    return code;
}

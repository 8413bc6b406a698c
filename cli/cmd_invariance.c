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

static void help(void)
{
    printf("usage: kvverify invariance MODEL [options]\n\n"
           "Run the same tokens all at once (baseline), in chunks of 1, 2 and 7, as a\n"
           "prefill followed by token-by-token decode, and with other thread counts when\n"
           "the engine has threads; K, V, the residual entering every layer and the\n"
           "logits must be bit-equal to the baseline. Control: one flipped residual bit\n"
           "must be detected.\n\n"
           "  --thread-counts 1,2 thread counts to compare (default 1,2)\n");
    kvv_check_cli_help(stdout);
}

int kvv_cmd_invariance(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "invariance");
    c.layers = true;
    kvv_opts o;
    kvv_opts_init(&o, "invariance", argc, argv);
    while (kvv_opts_next(&o)) {
        if (kvv_opts_flag(&o, "--help") || kvv_opts_flag(&o, "-h")) {
            help();
            kvv_check_cli_free(&c);
            return 0;
        }
        if (kvv_check_cli_option(&c, &o))
            continue;
        if (kvv_opts_value(&o, "--thread-counts")) {
            int32_t *list = NULL;
            int n = 0;
            if (o.value && kvv_opts_int_list(&o, "--thread-counts", o.value, &list, &n)) {
                free(c.thread_counts);
                c.thread_counts = malloc((size_t)n * sizeof *c.thread_counts);
                c.n_thread_counts = c.thread_counts ? n : 0;
                for (int i = 0; i < c.n_thread_counts; i++) {
                    if (list[i] < 1 || list[i] > 1024)
                        kvv_opts_error(&o, "option --thread-counts: %d is outside 1..1024",
                                       (int)list[i]);
                    c.thread_counts[i] = (int)list[i];
                }
            }
            free(list);
        } else {
            kvv_opts_unknown(&o);
        }
    }
    if (o.failed) {
        kvv_check_cli_free(&c);
        return KVV_EXIT_BAD_INPUT;
    }
    const char *names[] = {"invariance"};
    return kvv_check_cli_run(&c, names, 1);
}

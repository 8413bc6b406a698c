/*
 * cmd_greedy.c — `kvverify greedy MODEL -n N`: cached vs cache-free greedy
 * decoding (verify/greedy.h). Parses options and prints.
 */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify greedy MODEL [-n N] [options]\n\n"
            "Decode N tokens greedily with the KV cache, and with no cache at all (the\n"
            "whole sequence recomputed from scratch at every step): the tokens must be\n"
            "identical and the logits bit-equal. On a mismatch: the first divergent step,\n"
            "the top-1 and top-2 logits there and their margin. Control: the cached decode\n"
            "on an engine with one perturbed weight must differ.\n\n"
            "  -n N                tokens to decode (default 64)\n");
    kvv_check_cli_help(f, NULL);
}

/* greedy's own option. */
typedef struct {
    const kvv_check_cli *c;
    long n_gen;               /* -n */
} greedy_args;

static bool own_option(void *state, kvv_opts *o)
{
    greedy_args *a = state;
    long v;
    if (!kvv_opts_value(o, "-n"))
        return false;
    if (o->value && kvv_opts_int(o, "-n", o->value, 1, 1 << 16, &v))
        a->n_gen = v;
    return true;
}

static int own_opts(void *user, kvv_check_run *run)
{
    const greedy_args *a = user;
    return kvv_check_cli_steps(a->c, run, a->n_gen);
}

int kvv_cmd_greedy(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "greedy");
    greedy_args a = {&c, 64};
    c.own_opts = own_opts;
    c.own_user = &a;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN)
        return code;
    const char *names[] = {"greedy"};
    return kvv_check_cli_run(&c, names, 1);
}

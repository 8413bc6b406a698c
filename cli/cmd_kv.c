/*
 * cmd_kv.c — `kvverify kv MODEL`: cached K/V against K/V recomputed from the
 * residual stream (verify/kv.h). Parses options and prints; the check is a
 * library function.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify kv MODEL [options]\n\n"
            "For every layer and token, capture the residual entering the layer and the K/V\n"
            "held in the cache (after RoPE and rounding to the cache dtype); recompute K/V\n"
            "from the residual one token at a time, all at once, and in odd-sized chunks;\n"
            "compare bit for bit. Prints per layer: elements compared and differing, max\n"
            "ULP distance, NMSE, and the first mismatch (layer, token, head, index, hex).\n\n"
            "  --chunk N           odd chunk size for the chunked recompute (default 5, or\n"
            "                      3 when 5 divides the prompt length)\n");
    kvv_check_cli_help(f, NULL);
}

/* kv's own option. */
typedef struct {
    const kvv_check_cli *c;
    long chunk;               /* --chunk, 0 = the plan's */
} kv_args;

static bool own_option(void *state, kvv_opts *o)
{
    kv_args *a = state;
    long v;
    if (!kvv_opts_value(o, "--chunk"))
        return false;
    if (o->value && kvv_opts_int(o, "--chunk", o->value, 1, 1 << 20, &v)) {
        if (v % 2 == 0)
            kvv_opts_error(o, "option --chunk: %ld is even; the chunk size must be odd", v);
        a->chunk = v;
    }
    return true;
}

static int own_opts(void *user, kvv_check_run *run)
{
    const kv_args *a = user;
    if (a->chunk <= 0)
        return 0;
    if (a->chunk >= run->opts.n_tokens) {
        fprintf(stderr, "kvverify %s: option --chunk: %ld is not below the prompt's %d tokens: "
                        "the chunked recompute would be the whole one\n", a->c->cmd, a->chunk,
                run->opts.n_tokens);
        return KVV_EXIT_BAD_INPUT;
    }
    run->opts.chunk = (int)a->chunk;
    return 0;
}

int kvv_cmd_kv(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "kv");
    c.layers = true;
    kv_args a = {&c, 0};
    c.own_opts = own_opts;
    c.own_user = &a;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN)
        return code;
    const char *names[] = {"kv"};
    return kvv_check_cli_run(&c, names, 1);
}

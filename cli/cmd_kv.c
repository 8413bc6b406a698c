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

static bool own_option(void *state, kvv_opts *o)
{
    kvv_check_cli *c = state;
    long v;
    if (!kvv_opts_value(o, "--chunk"))
        return false;
    if (o->value && kvv_opts_int(o, "--chunk", o->value, 1, 1 << 20, &v)) {
        if (v % 2 == 0)
            kvv_opts_error(o, "option --chunk: %ld is even; the chunk size must be odd", v);
        c->chunk = v;
    }
    return true;
}

int kvv_cmd_kv(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "kv");
    c.layers = true;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &c});
    if (code != KVV_OPTS_RUN)
        return code;
    const char *names[] = {"kv"};
    return kvv_check_cli_run(&c, names, 1);
}

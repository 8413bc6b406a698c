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

static void help(void)
{
    printf("usage: kvverify kv MODEL [options]\n\n"
           "For every layer and token, capture the residual entering the layer and the K/V\n"
           "held in the cache (after RoPE and rounding to the cache dtype); recompute K/V\n"
           "from the residual one token at a time, all at once, and in odd-sized chunks;\n"
           "compare bit for bit. Prints per layer: elements compared and differing, max\n"
           "ULP distance, NMSE, and the first mismatch (layer, token, head, index, hex).\n\n"
           "  --chunk N           odd chunk size for the chunked recompute (default 5, or\n"
           "                      3 when 5 divides the prompt length)\n");
    kvv_check_cli_help(stdout);
}

int kvv_cmd_kv(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "kv");
    c.layers = true;
    kvv_opts o;
    kvv_opts_init(&o, "kv", argc, argv);
    while (kvv_opts_next(&o)) {
        long v;
        if (kvv_opts_flag(&o, "--help") || kvv_opts_flag(&o, "-h")) {
            help();
            kvv_check_cli_free(&c);
            return 0;
        }
        if (kvv_check_cli_option(&c, &o))
            continue;
        if (kvv_opts_value(&o, "--chunk")) {
            if (o.value && kvv_opts_int(&o, "--chunk", o.value, 1, 1 << 20, &v)) {
                if (v % 2 == 0)
                    kvv_opts_error(&o, "option --chunk: %ld is even; the chunk size must be odd",
                                   v);
                c.chunk = v;
            }
        } else {
            kvv_opts_unknown(&o);
        }
    }
    if (o.failed) {
        kvv_check_cli_free(&c);
        return KVV_EXIT_BAD_INPUT;
    }
    const char *names[] = {"kv"};
    return kvv_check_cli_run(&c, names, 1);
}

/*
 * cmd_patch.c — `kvverify patch MODEL`: residual patching at every layer gives
 * KL exactly 0 (verify/patch.h). Parses options and prints.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify patch MODEL [options]\n\n"
            "Run prompts A and B (same length, different content). For every layer l,\n"
            "run B again with its whole layer-l residual matrix overwritten by A's and\n"
            "finish the pass: the logits must equal A's bit for bit and KL(p_A||p_patched)\n"
            "must be exactly 0.0 at every position (printed with %%.9g and as a hex\n"
            "float). Control: patching only the last position must give KL > 0.\n\n"
            "  --tokens-b 1,2,3    prompt B (same length as A; default: derived from --seed)\n");
    kvv_check_cli_help(f, NULL);
}

static bool own_option(void *state, kvv_opts *o)
{
    kvv_check_cli *c = state;
    if (!kvv_opts_value(o, "--tokens-b"))
        return false;
    free(c->tokens_b);
    c->tokens_b = NULL;
    if (o->value)
        kvv_opts_int_list(o, "--tokens-b", o->value, &c->tokens_b, &c->n_tokens_b);
    return true;
}

int kvv_cmd_patch(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "patch");
    c.layers = true;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &c});
    if (code != KVV_OPTS_RUN)
        return code;
    const char *names[] = {"patch"};
    return kvv_check_cli_run(&c, names, 1);
}

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

/* patch's own option. */
typedef struct {
    const kvv_check_cli *c;
    int32_t *tokens_b;        /* --tokens-b (owned), NULL = derived from --seed */
    int n_tokens_b;
} patch_args;

static bool own_option(void *state, kvv_opts *o)
{
    patch_args *a = state;
    if (!kvv_opts_value(o, "--tokens-b"))
        return false;
    free(a->tokens_b);
    a->tokens_b = NULL;
    if (o->value)
        kvv_opts_int_list(o, "--tokens-b", o->value, &a->tokens_b, &a->n_tokens_b);
    return true;
}

static int own_opts(void *user, kvv_check_run *run)
{
    const patch_args *a = user;
    if (!a->tokens_b)
        return 0;
    if (a->n_tokens_b != run->n_prompt) {
        fprintf(stderr, "kvverify %s: option --tokens-b: %d tokens, but the prompt has %d\n",
                a->c->cmd, a->n_tokens_b, run->n_prompt);
        return KVV_EXIT_BAD_INPUT;
    }
    run->opts.tokens_b = a->tokens_b;
    return 0;
}

int kvv_cmd_patch(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "patch");
    c.layers = true;
    patch_args a = {&c, NULL, 0};
    c.own_opts = own_opts;
    c.own_user = &a;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code == KVV_OPTS_RUN) {
        const char *names[] = {"patch"};
        code = kvv_check_cli_run(&c, names, 1);
    }
    free(a.tokens_b);
    return code;
}

/*
 * cmd_batch.c — `kvverify batch MODEL`: request A alone against A among
 * other requests sharing the forward calls, per mode (verify/batch.h).
 * Parses options and prints.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli/check_cli.h"
#include "cli/commands.h"
#include "cli/opts.h"
#include "verify/batch.h"

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify batch MODEL [options]\n\n"
            "Request A (the prompt) alone, and A among other requests sharing the same\n"
            "forward calls, as a server batches them: every logit and every K/V row of A,\n"
            "at every layer, must be bit-equal. Modes:\n"
            "  single     A's prompt in one call with the others' prompts (other lengths)\n"
            "  decode     A's next tokens in the same calls as the others' (1, 2 and %d\n"
            "             tokens per request per call)\n"
            "  mixed      A's prompt in the same call as the others' decode tokens\n"
            "  prefix     A's first half computed in another sequence and copied into A,\n"
            "             against the same split without the copy, and the split against\n"
            "             one call\n"
            "  isolation  A beside B against A beside B' (same lengths, other tokens): a\n"
            "             difference is a leak between requests, whatever the engine's mode\n"
            "Control: A's last prompt token changed in the shared call must be found.\n"
            "An engine without sequences is unsupported (exit 77 when nothing else ran).\n\n"
            "  --requests N       requests sharing the calls, A included (default %d, 2..%d)\n"
            "  --modes a,b        modes to run (default all): single, decode, mixed,\n"
            "                     prefix, isolation\n"
            "  -n N               decode tokens of A in the decode mode (at most %d)\n",
            KVV_BATCH_DECODE_K, KVV_BATCH_DEFAULT_REQUESTS, KVV_ENGINE_MAX_SEQS,
            2 * (3 + KVV_BATCH_DECODE_K));
    kvv_check_cli_help(f, NULL);
}

/* batch's own options. */
typedef struct {
    const kvv_check_cli *c;
    long requests;            /* --requests, 0 = the default */
    unsigned modes;           /* --modes, 0 = all */
    long n_gen;               /* -n, 0 = the plan's */
} batch_args;

static bool own_option(void *state, kvv_opts *o)
{
    batch_args *a = state;
    if (kvv_opts_value(o, "--requests")) {
        long v;
        if (o->value && kvv_opts_int(o, "--requests", o->value, 2, KVV_ENGINE_MAX_SEQS, &v))
            a->requests = v;
        return true;
    }
    if (kvv_opts_value(o, "--modes")) {
        char bad[80];
        if (o->value && !kvv_batch_modes_parse(o->value, &a->modes, bad, sizeof bad))
            kvv_opts_error(o, "option --modes: unknown mode '%s' (single, decode, mixed, "
                           "prefix, isolation, all)", bad);
        return true;
    }
    if (kvv_opts_value(o, "-n")) {
        long v;
        if (o->value && kvv_opts_int(o, "-n", o->value, 1, 1 << 16, &v))
            a->n_gen = v;
        return true;
    }
    return false;
}

static int own_opts(void *user, kvv_check_run *run)
{
    const batch_args *a = user;
    run->opts.n_requests = (int)a->requests;
    run->opts.batch_modes = a->modes;
    return a->n_gen > 0 ? kvv_check_cli_steps(a->c, run, a->n_gen) : 0;
}

int kvv_cmd_batch(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "batch");
    c.layers = true;
    batch_args a = {&c, 0, 0, 0};
    c.own_opts = own_opts;
    c.own_user = &a;
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, NULL, &a});
    if (code != KVV_OPTS_RUN)
        return code;
    const char *names[] = {"batch"};
    return kvv_check_cli_run(&c, names, 1);
}

/*
 * main.c — the kvverify command: dispatch to subcommands.
 *
 *   kvverify COMMAND [options]      see kvverify --help
 *   kvverify MODEL.gguf [options]   the one-shot audit (kvverify audit MODEL)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/opts.h"

static void usage(FILE *f)
{
    fprintf(f,
            "kvverify %s — certify that a transformer inference engine computes what it\n"
            "claims, bit for bit: KV recompute from residuals, patching, cache-free greedy\n"
            "decoding, batch invariance, KV-Direct against eviction baselines.\n\n"
            "usage: kvverify COMMAND [options]     (kvverify COMMAND --help for details)\n"
            "       kvverify MODEL.gguf [options]  one-shot audit of a model\n\n"
            "commands:\n",
            KVV_VERSION);
    int n;
    const kvv_command *commands = kvv_commands(&n);
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fputc('\n', f);
    kvv_opts_global_help(f);
    fprintf(f,
            "\nexit codes: 0 every check ran and passed, 1 a check failed, 2 bad input or\n"
            "usage, 77 nothing could be checked (e.g. unsupported architecture).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return KVV_EXIT_BAD_INPUT;
    }
    const char *a = argv[1];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(a, "--version") == 0 || strcmp(a, "version") == 0) {
        printf("kvverify %s\n", KVV_VERSION);
        return 0;
    }
    const kvv_command *c = kvv_command_find(a);
    if (c)
        return c->run(argc - 1, argv + 1);
    /* `kvverify MODEL` is the audit. */
    const kvv_command *audit = kvv_command_find("audit");
    if (audit && a[0] != '-') {
        argv[0] = (char *)"audit";
        return audit->run(argc, argv);
    }
    fprintf(stderr, "kvverify: unknown command '%s' (see kvverify --help)\n", a);
    return KVV_EXIT_BAD_INPUT;
}

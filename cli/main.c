/*
 * main.c — the kvverify command: dispatch to subcommands.
 *
 *   kvverify COMMAND [options]      see kvverify --help
 *   kvverify MODEL.gguf [options]   the one-shot audit (kvverify audit MODEL)
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cli/commands.h"
#include "cli/opts.h"

/* Edit distance of a and b (insertions, deletions, substitutions and
 * swaps of neighbours), for the did-you-mean of a mistyped command. */
static int distance(const char *a, const char *b)
{
    enum { MAX = 32 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= MAX || m >= MAX)
        return MAX;
    int d[MAX][MAX];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* The command closest to name, if it is a likely typo (NULL otherwise). */
static const char *closest_command(const char *name)
{
    const char *best = NULL;
    int bd = 3; /* at most 2 edits, and fewer than half the word */
    int n;
    const kvv_command *commands = kvv_commands(&n);
    for (int i = 0; i < n; i++) {
        int d = distance(name, commands[i].name);
        if (d < bd && 2 * d < (int)strlen(commands[i].name)) {
            bd = d;
            best = commands[i].name;
        }
    }
    int dh = distance(name, "help"); /* not in the table, but a command all the same */
    if (dh < bd && 2 * dh < 4)
        best = "help";
    return best;
}

/* `kvverify MODEL` is the audit: a first argument that names a file (or
 * looks like one: a path or a .gguf name) is a model; a bare word that is
 * no command is a mistyped command. */
static bool looks_like_model(const char *a)
{
    size_t n = strlen(a);
    return access(a, F_OK) == 0 || strchr(a, '/') || (n > 5 && strcmp(a + n - 5, ".gguf") == 0);
}

static void usage(FILE *f)
{
    fprintf(f,
            "kvverify %s — certify that a transformer inference engine computes what it\n"
            "claims, bit for bit: KV recompute from residuals, patching, cache-free greedy\n"
            "decoding, batch invariance, KV-Direct against eviction baselines.\n\n"
            "usage: kvverify COMMAND [options]     (kvverify help COMMAND for details)\n"
            "       kvverify MODEL.gguf [options]  one-shot audit of a model\n\n"
            "commands:\n",
            KVV_VERSION);
    int n;
    const kvv_command *commands = kvv_commands(&n);
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-12s %s\n", "help",
            "this list; help COMMAND: that command's help (as COMMAND --help)");
    fputc('\n', f);
    kvv_opts_global_help(f);
    fprintf(f,
            "\nexit codes: 0 every check that could run passed (the others are listed as\n"
            "unsupported by this engine), 1 a check failed, 2 bad input or usage, 77\n"
            "nothing could be checked (e.g. unsupported architecture), 130 interrupted\n"
            "(^C or SIGTERM: the reports hold what finished, marked interrupted).\n");
}

int main(int argc, char **argv)
{
#if defined(__GLIBC__)
    /* Large buffers (an engine's caches, a check's captures) go back to the
     * system when freed. glibc otherwise raises its mmap threshold after the
     * first such free and serves later ones from the heap, which it keeps:
     * the audit's checks, one after another, then held the sum of their
     * peaks (qwen3-0.6b Q8_0 with --engine cpu: 866 MB, 544 MB with this). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
    /* A closed stdout (`kvverify MODEL --json r.json | head -1`) must not
     * kill the run before it writes its report files: console text to it
     * is lost (the exit code stays the verdict's), and a document asked for
     * on stdout that cannot be written is an error like any failed write
     * (exit 2, the message on stderr). */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return KVV_EXIT_BAD_INPUT;
    }
    const char *a = argv[1];
    /* `kvverify help` and `kvverify help help` list the commands */
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ||
        (strcmp(a, "help") == 0 &&
         (argc == 2 || strcmp(argv[2], "help") == 0 || strcmp(argv[2], "--help") == 0 ||
          strcmp(argv[2], "-h") == 0))) {
        usage(stdout);
        return 0;
    }
    if (strcmp(a, "help") == 0) { /* `kvverify help kv` is `kvverify kv --help` */
        if (argc > 3) {
            fprintf(stderr, "kvverify help: unexpected argument '%s' (kvverify help [COMMAND])\n",
                    argv[3]);
            return KVV_EXIT_BAD_INPUT;
        }
        const kvv_command *h = kvv_command_find(argv[2]);
        if (!h) {
            const char *near = closest_command(argv[2]);
            fprintf(stderr, "kvverify help: unknown command '%s'%s%s%s (see kvverify --help)\n",
                    argv[2], near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
            return KVV_EXIT_BAD_INPUT;
        }
        char *hargv[] = {(char *)h->name, (char *)"--help", NULL};
        return h->run(2, hargv);
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
    if (audit && a[0] != '-' && looks_like_model(a)) {
        argv[0] = (char *)"audit";
        return audit->run(argc, argv);
    }
    const char *near = a[0] != '-' ? closest_command(a) : NULL;
    if (near)
        fprintf(stderr, "kvverify: unknown command '%s' (did you mean %s?)\n", a, near);
    else if (a[0] == '-')
        fprintf(stderr, "kvverify: unknown option '%s' (see kvverify --help)\n", a);
    else
        fprintf(stderr, "kvverify: unknown command '%s', and no file of that name (see "
                        "kvverify --help)\n", a);
    return KVV_EXIT_BAD_INPUT;
}

/*
 * fuzz_opts.c — libFuzzer target for the command line: the one option loop
 * (cli/opts.c), the option groups (engine_opts.c, output_opts.c,
 * prompt_opts.c, check_cli.c) and every subcommand's own options, driven
 * with arbitrary argv vectors.
 *
 *   make fuzz-one FUZZ_TARGET=fuzz_opts
 *   build/tests/fuzz/replay_fuzz_opts tests/fuzz/corpus/opts   # inside make test
 *
 * Input: byte 0 picks the subcommand (index into cli/commands.c's table,
 * modulo its length); the rest, split at NUL bytes, is its arguments (at
 * most 64). The seam: kvv_opts_set_parse_only(true) makes the option loop
 * parse and check everything (each group's finish included) but never
 * answer "run", so a command returns after parsing and frees what it
 * parsed: nothing is opened, written or computed, and no global option is
 * applied (--max-memory would set a process limit). The commands' stdout
 * goes to /dev/null and their stderr to a memory buffer for the call
 * (sanitizer reports still reach the real stderr: they write to file
 * descriptor 2 directly).
 *
 * Properties (a broken one calls abort()): the exit code is 0 (parsed, or
 * --help) or 2 (bad usage), never anything else in parse-only mode; exit 2
 * comes with a message (or the usage) on stderr that names kvverify. LeakSanitizer checks that every path frees what the
 * parse allocated (token lists, check lists, budgets ...).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    kvv_opts_set_parse_only(true);
    int n_cmds;
    const kvv_command *cmds = kvv_commands(&n_cmds);
    const kvv_command *cmd = &cmds[data[0] % n_cmds];

    /* argv: the command's name, then the NUL-separated pieces (each its own
     * exact-size copy, so ASan sees a read past any argument's end) */
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)cmd->name;
    for (size_t i = 1; i < size && argc <= MAX_ARGS;) {
        const uint8_t *end = memchr(data + i, 0, size - i);
        size_t len = end ? (size_t)(end - (data + i)) : size - i;
        char *a = malloc(len + 1);
        check(a != NULL);
        memcpy(a, data + i, len);
        a[len] = '\0';
        argv[argc++] = a;
        i += len + 1;
    }
    argv[argc] = NULL;
    char *args_copy[MAX_ARGS + 2];
    memcpy(args_copy, argv, sizeof argv); /* commands may reorder argv */

    /* stdout to /dev/null, stderr into a fixed buffer: both opened once
     * (open_memstream per call cost 300 us under ASan) */
    static FILE *fo, *fe;
    static char errs[1 << 16];
    if (!fo) {
        fo = fopen("/dev/null", "w");
        fe = fmemopen(errs, sizeof errs - 1, "w");
        check(fo && fe);
    }
    rewind(fe);
    FILE *saved_out = stdout, *saved_err = stderr;
    stdout = fo;
    stderr = fe;
    int rc = cmd->run(argc, argv);
    stdout = saved_out;
    stderr = saved_err;
    fflush(fo);
    fflush(fe);
    long err_len = ftell(fe);
    check(err_len >= 0 && (size_t)err_len < sizeof errs);
    errs[err_len] = '\0';

    check(rc == 0 || rc == 2);
    if (rc == 2) /* a message, or the usage (`kvverify vectors` without a subcommand) */
        check(err_len > 0 && strstr(errs, "kvverify") != NULL);
    for (int i = 1; i < argc; i++)
        free(args_copy[i]);
    return 0;
}

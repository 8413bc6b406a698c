/*
 * output_opts.h — the one parser of the output options, shared by every
 * command that has them (the checks, compare, audit, evict, memory,
 * latency, numerics, suite, run, bench, info, tokenize, vectors check/show):
 *
 *   --json FILE, --json=FILE   write the command's JSON to FILE
 *   --json                     print the command's JSON on stdout
 *   --junit FILE               write a JUnit XML report
 *   -q, --quiet                print less (the command says what)
 *
 * Which forms a command takes is its `accepts` (KVV_OUT_*): today the check
 * commands write JSON to a file, info/run/tokenize/vectors print it, and
 * bench does both (bare --json prints, --json=FILE writes).
 *
 *   kvv_output_cli out;
 *   kvv_output_cli_init(&out, "kv", KVV_OUT_JSON_FILE | KVV_OUT_JUNIT | KVV_OUT_QUIET);
 *   out.json_help = "write the JSON report (docs/report-schema.md)";
 *   kvv_opt_group g[] = {..., kvv_output_cli_group(&out)};
 *
 * Adding an output option (--html FILE, --progress) is one edit in this
 * pair of files: a KVV_OUT_* bit, a field, its case in kvv_output_cli_parse
 * and its line in kvv_output_cli_help; the commands that accept it then
 * write it (the reports room, verify/report/, has the writers). A new
 * convention for every command — e.g. `--json` alone = stdout, `--json
 * FILE` / `--json=FILE` = a file, `-` = stdout, output paths checked before
 * the run — is a change to kvv_output_cli_parse and a finish function of
 * this group, not to the commands.
 */
#ifndef KVV_OUTPUT_OPTS_H
#define KVV_OUTPUT_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/opts.h"

/* The output options a command takes (kvv_output_cli.accepts). */
enum {
    KVV_OUT_JSON_FILE = 1u << 0,   /* --json FILE, --json=FILE (beside JSON_STDOUT: =FILE only) */
    KVV_OUT_JSON_STDOUT = 1u << 1, /* --json alone: JSON on stdout */
    KVV_OUT_JUNIT = 1u << 2,       /* --junit FILE */
    KVV_OUT_QUIET = 1u << 3,       /* -q, --quiet */
    KVV_OUT_HTML = 1u << 4         /* --html FILE, --html=FILE: the HTML report */
};

typedef struct {
    /* what the command takes: set by kvv_output_cli_init, then adjustable */
    const char *cmd;             /* subcommand name, for messages */
    unsigned accepts;            /* KVV_OUT_* */
    const char *json_help;       /* what the JSON is, for --help (NULL: "JSON") */
    const char *quiet_help;      /* what --quiet leaves out, for --help */
    /* what the command line said */
    const char *json_path;       /* --json FILE / --json=FILE (borrowed), NULL = none */
    bool json_stdout;            /* --json alone */
    const char *junit_path;      /* --junit FILE (borrowed), NULL = none */
    const char *html_path;       /* --html FILE (borrowed), NULL = none */
    bool quiet;                  /* -q, --quiet */
} kvv_output_cli;

/* Nothing given yet. */
void kvv_output_cli_init(kvv_output_cli *out, const char *cmd, unsigned accepts);

/* The group for kvv_opts_parse (state: out, which must outlive the parse). */
kvv_opt_group kvv_output_cli_group(kvv_output_cli *out);
/* Consume o->arg if it is an output option; one this command does not take
 * is an error ("not used by CMD"). @return true when consumed. */
bool kvv_output_cli_parse(void *out, kvv_opts *o);

/* The option lines of the options out accepts. */
void kvv_output_cli_help(FILE *f, const kvv_output_cli *out);

#endif

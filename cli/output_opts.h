/*
 * output_opts.h — the one parser of the output options, shared by every
 * command that has them (the checks, compare, audit, evict, memory,
 * latency, numerics, suite, run, bench, info, tokenize, vectors check/show).
 * One convention for all of them:
 *
 *   --json              the command's JSON on stdout
 *   --json FILE         ... written to FILE (also --json=FILE)
 *   --json -            ... on stdout (so is --json=-)
 *   --junit [FILE|-]    a JUnit XML report, the same way
 *   --html [FILE|-]     a self-contained HTML report, the same way
 *   -q, --quiet         print less (the command says what), and no progress
 *   --progress          progress on stderr even when it is not a terminal
 *
 * Progress (kvv_output_progress) goes to stderr only, never into stdout or
 * a document: shown when stderr is a terminal, or with --progress (or
 * KVV_PROGRESS=1 in the environment; KVV_PROGRESS=0 turns it off), never
 * with --quiet.
 *
 * `--json FILE` takes the next argument as FILE when it does not start with
 * '-' (or is "-"), so `kvverify kv MODEL --json` and `... --json --junit
 * r.xml` print the JSON, and `... --json r.json` writes it.
 *
 * When one of them writes to stdout, stdout carries that document alone:
 * the command leaves its console text out (out.stdout_taken) and messages
 * and progress stay on stderr. At most one output may take stdout.
 *
 * Output paths are checked once every option is read, before anything
 * runs (the group's finish), by what they name (common/atomic_file.h),
 * found without opening them:
 *   - a regular FILE, or none yet (a symbolic link is followed to the file
 *     it points to): not a folder, its folder exists and is writable, not
 *     an existing GGUF model or .kvv vector file (a model named after
 *     --json by mistake is never overwritten); the writers then write a
 *     temporary file beside it and rename it over it, so a run that fails
 *     to write leaves an existing FILE as it was;
 *   - a device (/dev/null), FIFO, socket or open descriptor (/dev/fd/N, a
 *     shell's >(cmd)): written through as a stream, never replaced and
 *     never read;
 *   - "-" or /dev/stdout (which finish rewrites to "-"): standard output
 *     to every writer (KVV_OUTPUT_STDOUT).
 * No two outputs may name the same file, however spelt (same device and
 * inode, or the same canonical folder and name), and at most one may be
 * stdout: "options --json and --junit both write r.json and ./r.json".
 *
 *   kvv_output_cli out;
 *   kvv_output_cli_init(&out, "kv", KVV_OUT_JSON | KVV_OUT_JUNIT | KVV_OUT_QUIET);
 *   out.json_help = "the JSON report (docs/report-schema.md)";
 *   kvv_opt_group g[] = {..., kvv_output_cli_group(&out)};
 *   ... kvv_opts_parse ...
 *   if (!out.stdout_taken) print_the_table(stdout);
 *   if (out.json_path) kvv_report_write_json(&rep, out.json_path, &err);  // "-" = stdout
 *
 * Which options a command takes is its `accepts` (KVV_OUT_*); one it does
 * not take is "not used by CMD". The HTML report's writer lives in the
 * reports room (verify/report/); a command that writes it takes
 * KVV_OUT_HTML and reads out.html_path.
 */
#ifndef KVV_OUTPUT_OPTS_H
#define KVV_OUTPUT_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/opts.h"

/* The output options a command takes (kvv_output_cli.accepts). */
enum {
    KVV_OUT_JSON = 1u << 0,   /* --json [FILE|-] */
    KVV_OUT_JUNIT = 1u << 1,  /* --junit [FILE|-] */
    KVV_OUT_HTML = 1u << 2,   /* --html [FILE|-] */
    KVV_OUT_QUIET = 1u << 3,  /* -q, --quiet */
    KVV_OUT_PROGRESS = 1u << 4 /* --progress (commands that run long) */
};

/* The output path that means standard output (verify/report/sbuf.h writes
 * it there). */
#define KVV_OUTPUT_STDOUT "-"

typedef struct {
    /* what the command takes: set by kvv_output_cli_init, then adjustable */
    const char *cmd;             /* subcommand name, for messages */
    unsigned accepts;            /* KVV_OUT_* */
    const char *json_help;       /* what the JSON is, for --help (NULL: "JSON") */
    const char *html_help;       /* what the HTML is, for --help (NULL: "an HTML report") */
    const char *quiet_help;      /* what --quiet leaves out, for --help */
    /* what the command line said; each path NULL = not asked, "-" = stdout,
     * else a FILE (borrowed from argv) that finish has checked */
    const char *json_path;       /* --json */
    const char *junit_path;      /* --junit */
    const char *html_path;       /* --html */
    bool quiet;                  /* -q, --quiet */
    bool progress_given;         /* --progress */
    /* decided by finish */
    bool stdout_taken;           /* one of the paths is "-": no console text on stdout */
    bool progress;               /* show progress on stderr */
} kvv_output_cli;

/* Nothing given yet. */
void kvv_output_cli_init(kvv_output_cli *out, const char *cmd, unsigned accepts);

/* The group for kvv_opts_parse (state: out, which must outlive the parse);
 * its finish checks the output paths (see the top of this file). */
kvv_opt_group kvv_output_cli_group(kvv_output_cli *out);
/* Consume o->arg if it is an output option; one this command does not take
 * is an error ("not used by CMD"). @return true when consumed. */
bool kvv_output_cli_parse(void *out, kvv_opts *o);

/* Is path the standard output ("-")? NULL is not. */
bool kvv_output_is_stdout(const char *path);

/* Check an output FILE before the run, for an option of any group (e.g.
 * evict's --csv, synth's -o): "-" passes; otherwise the rules at the top
 * of this file, the message naming the option and the reason ("kvverify
 * CMD: option --json: cannot write /x/r.json: folder /x does not exist"),
 * o->failed set. model_out: FILE is itself a model or vector file (synth
 * -o, vectors gen -o), so an existing one may be replaced. @return true
 * when it may be written. */
bool kvv_output_path_check(kvv_opts *o, const char *option, const char *path, bool model_out);

/* Does the command print its detailed text (tables, notes) on stdout:
 * neither --quiet nor a document on stdout? */
bool kvv_output_cli_verbose(const kvv_output_cli *out);

/* "\r[label] done/total" on stderr when out (a kvv_output_cli; void * so
 * it is a check's progress callback as it stands, with out as its user
 * pointer) says progress, a newline when done reaches total. */
void kvv_output_progress(void *out, const char *label, long done, long total);

/* Write j (borrowed) with json_dumps flags to path ("-": stdout), the one
 * way a command writes its JSON document (atomically to a FILE). A failure
 * is printed. @return 0, or the exit code. */
int kvv_output_write_json(const char *path, const json_t *j, size_t flags);

/* The option lines of the options out accepts. */
void kvv_output_cli_help(FILE *f, const kvv_output_cli *out);

#endif

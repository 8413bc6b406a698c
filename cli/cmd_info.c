/*
 * cmd_info.c — `kvverify info`: what is in a GGUF file, and what a model
 * shape costs per token.
 *
 *   kvverify info MODEL.gguf [--json [FILE|-]]
 *   kvverify info --shape NAME [--vocab N] [--json [FILE|-]]
 *   kvverify info --cpu [--json [FILE|-]]
 *
 * Prints the metadata (long arrays summarized), every tensor (name, type,
 * shape, bytes), totals per type, the architecture summary (hyperparameters
 * as kvverify reads them) and the per-token memory table: K+V bytes per
 * token over all layers (f32/f16/bf16 storage) against one residual vector
 * per token and a residual per layer per token. With --cpu: the cpu
 * engine's kernel tables this CPU can run and the one it runs by default.
 *
 * info is a file viewer: a file of an unsupported architecture, or a
 * vocabulary-only file, is still shown (exit 0) with a note. A file the
 * reader rejects gives its one-line message and exit 2; a model whose
 * tensors do not bind (missing or misshaped) is shown, then the binding
 * error, exit 2. The descriptions themselves are verify/info.h's.
 */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "verify/info.h"

static void info_usage(FILE *f)
{
    fprintf(f,
            "usage: kvverify info MODEL.gguf [--json [FILE|-]]\n"
            "       kvverify info --shape NAME [--vocab N] [--json [FILE|-]]\n"
            "       kvverify info --cpu [--json [FILE|-]]\n\n"
            "Show a GGUF file: metadata (long arrays summarized), tensors (name, type,\n"
            "shape, bytes), totals per type, the architecture as kvverify reads it, and\n"
            "the per-token memory table: K+V bytes per token over all layers (f32, f16,\n"
            "bf16 storage) against one residual vector per token and a residual per\n"
            "layer per token. With --shape, the architecture and memory of a named shape\n"
            "(see kvverify synth --list-shapes) without a file. With --cpu, the cpu\n"
            "engine's kernel tables (generic, avx2, avx512: each its own reduction order)\n"
            "this CPU can run, and the one --engine cpu runs unless --isa says otherwise;\n"
            "KVV_CPU_MAX_ISA=generic|avx2 in the environment hides the wider ones.\n\n"
            "options:\n"
            "  --shape NAME   describe a named shape instead of a file\n"
            "  --cpu          the kernel tables this CPU can run, and the default\n"
            "  --vocab N      vocabulary size for --shape (default: the shape's)\n"
            "  --json [FILE|-] one JSON object to FILE (--json=FILE), or alone / - to stdout\n"
            "  -h, --help     this help\n\n"
            "exit codes: 0 shown (also for an unsupported architecture, which is noted),\n"
            "2 unreadable or malformed file, or tensors that do not match the architecture\n");
}

/* root (consumed) to --json's FILE or stdout. @return 0 or the exit code. */
static int emit_json(json_t *root, const char *path)
{
    int rc = kvv_output_write_json(path, root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return rc;
}

static int info_cpu(const kvv_output_cli *out)
{
    kvv_cpu_isa_info ci;
    kvv_error err = {0};
    if (kvv_cpu_isa_probe(&ci, &err))
        return kvv_cli_fail(&err);
    if (out->json_path) {
        int rc = emit_json(kvv_info_cpu_json(&ci), out->json_path);
        if (rc || out->stdout_taken)
            return rc;
    }
    kvv_info_cpu_print(&ci);
    return 0;
}

static int info_shape(const char *name, long vocab, const kvv_output_cli *out)
{
    const kvv_shape *s = kvv_shape_find(name);
    if (!s) {
        char names[1024];
        kvv_shape_list(names, sizeof names);
        fprintf(stderr, "kvverify info: option --shape: unknown shape '%s' (valid: %s)\n", name, names);
        return KVV_EXIT_BAD_INPUT;
    }
    kvv_hparams hp;
    kvv_shape_hparams(s, (int)vocab, &hp);
    if (out->json_path) {
        int rc = emit_json(kvv_info_shape_json(s, &hp), out->json_path);
        if (rc || out->stdout_taken)
            return rc;
    }
    kvv_info_shape_print(s, &hp);
    return 0;
}

/* A file: described even when its architecture is unsupported; exit 2 when
 * its tensors do not match the architecture. */
static int info_file(const char *path, const kvv_output_cli *out)
{
    kvv_info_file f;
    kvv_error err = {0};
    if (kvv_info_file_open(path, &f, &err))
        return kvv_cli_fail(&err);
    int rc = 0;
    if (out->json_path)
        rc = emit_json(kvv_info_file_json(&f), out->json_path);
    if (!out->stdout_taken)
        kvv_info_file_print(&f);
    if (f.bind_status == KVV_ERR_FORMAT) {
        fprintf(stderr, "kvverify: %s\n", f.bind_err.msg);
        rc = KVV_EXIT_BAD_INPUT;
    }
    kvv_info_file_close(&f);
    return rc;
}

/* info's own options. */
typedef struct {
    const char *file, *shape;
    long vocab;
    bool cpu;
} info_args;

static bool own_option(void *state, kvv_opts *o)
{
    info_args *a = state;
    if (kvv_opts_flag(o, "--cpu")) {
        a->cpu = true;
    } else if (kvv_opts_value(o, "--shape")) {
        a->shape = o->value;
    } else if (kvv_opts_value(o, "--vocab")) {
        if (o->value)
            kvv_opts_int(o, "--vocab", o->value, 1, 1 << 24, &a->vocab);
    } else if (kvv_opts_positional(o) && !a->file) {
        a->file = o->arg;
    } else {
        return false;
    }
    return true;
}

int kvv_cmd_info(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "info", argc, argv);
    kvv_output_cli out;
    kvv_output_cli_init(&out, "info", KVV_OUT_JSON);
    info_args a = {0};
    const kvv_opt_group g[] = {kvv_output_cli_group(&out), {own_option, NULL, &a}};
    int code = kvv_opts_parse(&o, info_usage, g, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    const char *file = a.file, *shape = a.shape;
    const bool cpu = a.cpu;
    const long vocab = a.vocab;
    if ((file != NULL) + (shape != NULL) + cpu > 1) {
        kvv_opts_error(&o, "give one of a MODEL file, --shape or --cpu");
        return KVV_EXIT_BAD_INPUT;
    }
    if (cpu && vocab) {
        kvv_opts_error(&o, "--vocab only applies to --shape");
        return KVV_EXIT_BAD_INPUT;
    }
    if (cpu)
        return info_cpu(&out);
    if (shape)
        return info_shape(shape, vocab, &out);
    if (!file) {
        kvv_opts_error(&o, "missing MODEL file (or --shape NAME)");
        return KVV_EXIT_BAD_INPUT;
    }
    if (vocab) {
        kvv_opts_error(&o, "--vocab only applies to --shape");
        return KVV_EXIT_BAD_INPUT;
    }
    return info_file(file, &out);
}

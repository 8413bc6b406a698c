/* output_opts.c — the output options every command shares (see output_opts.h). */
#include "cli/output_opts.h"

#include <string.h>

void kvv_output_cli_init(kvv_output_cli *out, const char *cmd, unsigned accepts)
{
    memset(out, 0, sizeof *out);
    out->cmd = cmd;
    out->accepts = accepts;
}

/* --json, --json FILE, --json=FILE, as the command takes them. */
static bool json_option(kvv_output_cli *out, kvv_opts *o)
{
    const bool bare = strcmp(o->arg, "--json") == 0;
    const bool with_value = strncmp(o->arg, "--json=", 7) == 0;
    if (!bare && !with_value)
        return false;
    if (!(out->accepts & (KVV_OUT_JSON_FILE | KVV_OUT_JSON_STDOUT))) {
        kvv_opts_error(o, "option --json: not used by %s", out->cmd);
    } else if (bare && (out->accepts & KVV_OUT_JSON_STDOUT)) {
        out->json_stdout = true;
    } else if (!(out->accepts & KVV_OUT_JSON_FILE)) {
        kvv_opts_error(o, "option --json prints to stdout and takes no FILE here");
    } else if (kvv_opts_value(o, "--json") && o->value) {
        if (!o->value[0])
            kvv_opts_error(o, "option --json: empty file name");
        out->json_path = o->value;
    }
    return true;
}

bool kvv_output_cli_parse(void *state, kvv_opts *o)
{
    kvv_output_cli *out = state;
    if (json_option(out, o))
        return true;
    if (kvv_opts_value(o, "--junit")) {
        if (!(out->accepts & KVV_OUT_JUNIT))
            kvv_opts_error(o, "option --junit: not used by %s", out->cmd);
        out->junit_path = o->value;
        return true;
    }
    if (kvv_opts_value(o, "--html")) {
        if (!(out->accepts & KVV_OUT_HTML))
            kvv_opts_error(o, "option --html: not used by %s", out->cmd);
        else if (o->value && !o->value[0])
            kvv_opts_error(o, "option --html: empty file name");
        out->html_path = o->value;
        return true;
    }
    if (kvv_opts_flag(o, "--quiet") || kvv_opts_flag(o, "-q")) {
        if (!(out->accepts & KVV_OUT_QUIET))
            kvv_opts_error(o, "option %s: not used by %s", o->arg, out->cmd);
        out->quiet = true;
        return true;
    }
    return false;
}

kvv_opt_group kvv_output_cli_group(kvv_output_cli *out)
{
    return (kvv_opt_group){kvv_output_cli_parse, NULL, out};
}

void kvv_output_cli_help(FILE *f, const kvv_output_cli *out)
{
    const char *what = out->json_help ? out->json_help : "JSON";
    const unsigned a = out->accepts;
    if ((a & KVV_OUT_JSON_STDOUT) && (a & KVV_OUT_JSON_FILE)) {
        fprintf(f, "  --json              print %s on stdout\n", what);
        fprintf(f, "  --json=FILE         also write it to FILE\n");
    } else if (a & KVV_OUT_JSON_STDOUT) {
        fprintf(f, "  --json              print %s on stdout\n", what);
    } else if (a & KVV_OUT_JSON_FILE) {
        fprintf(f, "  --json FILE         write %s to FILE\n", what);
    }
    if (a & KVV_OUT_JUNIT)
        fprintf(f, "  --junit FILE        write a JUnit XML report to FILE\n");
    if (a & KVV_OUT_HTML)
        fprintf(f, "  --html FILE         write a self-contained HTML report with figures to FILE\n");
    if (a & KVV_OUT_QUIET)
        fprintf(f, "  -q, --quiet         %s\n", out->quiet_help ? out->quiet_help : "print less");
}

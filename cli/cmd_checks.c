/*
 * cmd_checks.c — `kvverify checks`: every check, what it proves, the
 * negative control that shows it can fail, and how to run it alone
 * (verify/catalog.h); which of them the one-shot audit runs (verify/audit.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "verify/audit.h"
#include "verify/catalog.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvverify checks [--json [FILE|-]]\n\n"
            "Every check kvverify has: what a PASS proves, the negative control it must\n"
            "detect (a check that cannot fail is a defect), how to run it alone, and\n"
            "whether the one-shot audit (kvverify MODEL) runs it. Details and how to read\n"
            "each report: docs/checks.md.\n\n"
            "  --json [FILE|-]     one JSON object to FILE (--json=FILE), or alone / - to\n"
            "                      stdout\n");
}

/* Print s wrapped at 78 columns, each line indented by indent spaces. */
static void wrapped(const char *label, const char *s)
{
    const int indent = 14, width = 78;
    printf("  %-11s ", label);
    int col = indent;
    while (*s) {
        const char *sp = strchr(s, ' ');
        int w = sp ? (int)(sp - s) : (int)strlen(s);
        if (col > indent && col + 1 + w > width) {
            printf("\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            putchar(' ');
            col++;
        }
        printf("%.*s", w, s);
        col += w;
        s += w;
        while (*s == ' ')
            s++;
    }
    putchar('\n');
}

int kvv_cmd_checks(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "checks", argc, argv);
    kvv_output_cli out;
    kvv_output_cli_init(&out, "checks", KVV_OUT_JSON);
    const kvv_opt_group g[] = {kvv_output_cli_group(&out)};
    int code = kvv_opts_parse(&o, usage, g, 1);
    if (code != KVV_OPTS_RUN)
        return code;
    int n;
    const kvv_check_entry *a = kvv_check_catalog(&n);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const bool audit = kvv_audit_find(a[i].name) != NULL;
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "name",
                                             a[i].name, "command", a[i].command, "proves",
                                             a[i].proves, "control", a[i].control, "verdict",
                                             a[i].verdict, "in_audit", audit));
        if (out.stdout_taken)
            continue;
        printf("%s%s%s\n", i ? "\n" : "", a[i].name,
               audit ? "  (in the audit)" : a[i].verdict ? "" : "  (measures; no verdict of its own)");
        wrapped("proves", a[i].proves);
        wrapped("control", a[i].control);
        wrapped("run", a[i].command);
    }
    code = 0;
    if (out.json_path) {
        json_t *root = json_pack("{s:o}", "checks", arr);
        code = kvv_output_write_json(out.json_path, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
    } else {
        json_decref(arr);
    }
    return code;
}

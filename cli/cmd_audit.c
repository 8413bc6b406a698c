/*
 * cmd_audit.c — `kvverify audit MODEL` (also `kvverify MODEL`): validate the
 * file, then run every check of the audit table (verify/audit.h) with
 * defaults sized to the model, and print one summary table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"
#include "verify/audit.h"

static void help(void)
{
    int n;
    const kvv_check_entry *t = kvv_audit_checks(&n);
    printf("usage: kvverify MODEL [options]\n"
           "       kvverify audit MODEL [options]\n\n"
           "One-shot audit: validate the GGUF file, then run these checks with defaults\n"
           "sized to the model (about a minute on two cores for a 135M model), each with\n"
           "its negative controls, and print one table (check, verdict, key figure, time):\n\n");
    for (int i = 0; i < n; i++)
        printf("  %-12s %s\n", t[i].name, t[i].summary);
    printf("\n  --checks a,b        run only these checks (names above)\n"
           "  -n N                greedy: tokens to decode (default sized to the model)\n");
    kvv_check_cli_help(stdout);
}

int kvv_cmd_audit(int argc, char **argv)
{
    kvv_check_cli c;
    kvv_check_cli_init(&c, "audit");
    kvv_opts o;
    kvv_opts_init(&o, "audit", argc, argv);
    const char *names[16];
    int n_names = 0;
    char *checks_buf = NULL;
    while (kvv_opts_next(&o)) {
        long v;
        if (kvv_opts_flag(&o, "--help") || kvv_opts_flag(&o, "-h")) {
            help();
            kvv_check_cli_free(&c);
            free(checks_buf);
            return 0;
        }
        if (kvv_check_cli_option(&c, &o))
            continue;
        if (kvv_opts_value(&o, "-n")) {
            if (o.value && kvv_opts_int(&o, "-n", o.value, 1, 1 << 16, &v))
                c.n_gen = v;
        } else if (kvv_opts_value(&o, "--checks")) {
            if (!o.value)
                continue;
            free(checks_buf);
            checks_buf = strdup(o.value);
            n_names = 0;
            char *save = NULL;
            for (char *p = checks_buf ? strtok_r(checks_buf, ",", &save) : NULL; p;
                 p = strtok_r(NULL, ",", &save)) {
                if (!kvv_audit_find(p)) {
                    kvv_opts_error(&o, "option --checks: unknown check '%s'", p);
                    break;
                }
                if (n_names < (int)(sizeof names / sizeof names[0]))
                    names[n_names++] = p;
            }
            if (!o.failed && n_names == 0)
                kvv_opts_error(&o, "option --checks: empty list");
        } else {
            kvv_opts_unknown(&o);
        }
    }
    if (o.failed) {
        kvv_check_cli_free(&c);
        free(checks_buf);
        return KVV_EXIT_BAD_INPUT;
    }
    int code = kvv_check_cli_run(&c, n_names ? names : NULL, n_names);
    free(checks_buf);
    return code;
}

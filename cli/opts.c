/* opts.c — see opts.h. */
#include "cli/opts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/mem_limit.h"

void kvv_opts_init(kvv_opts *o, const char *cmd, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->argc = argc;
    o->argv = argv;
    o->i = 1;
    o->cmd = cmd;
}

bool kvv_opts_next(kvv_opts *o)
{
    if (o->failed || o->i >= o->argc)
        return false;
    o->arg = o->argv[o->i++];
    o->value = NULL;
    if (!o->end_of_options && strcmp(o->arg, "--") == 0) {
        o->end_of_options = true;
        return kvv_opts_next(o);
    }
    return true;
}

bool kvv_opts_flag(kvv_opts *o, const char *name)
{
    return !o->end_of_options && strcmp(o->arg, name) == 0;
}

bool kvv_opts_value(kvv_opts *o, const char *name)
{
    if (o->end_of_options)
        return false;
    size_t n = strlen(name);
    if (strncmp(o->arg, name, n) != 0)
        return false;
    if (o->arg[n] == '=') {
        o->value = o->arg + n + 1;
        return true;
    }
    if (o->arg[n] != '\0')
        return false;
    if (o->i >= o->argc) {
        kvv_opts_error(o, "option %s needs a value", name);
        return true;
    }
    o->value = o->argv[o->i++];
    return true;
}

bool kvv_opts_positional(const kvv_opts *o)
{
    return o->end_of_options || o->arg[0] != '-' || o->arg[1] == '\0';
}

void kvv_opts_error(kvv_opts *o, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kvverify %s: ", o->cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see kvverify %s --help)\n", o->cmd);
    o->failed = true;
}

void kvv_opts_unknown(kvv_opts *o)
{
    if (kvv_opts_positional(o))
        kvv_opts_error(o, "unexpected argument '%s'", o->arg);
    else
        kvv_opts_error(o, "unknown option '%s'", o->arg);
}

bool kvv_opts_int(kvv_opts *o, const char *name, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno) {
        kvv_opts_error(o, "option %s: '%s' is not an integer", name, s ? s : "");
        return false;
    }
    if (v < lo || v > hi) {
        kvv_opts_error(o, "option %s: %ld is outside %ld..%ld", name, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool kvv_opts_u64(kvv_opts *o, const char *name, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || s[0] == '-') {
        kvv_opts_error(o, "option %s: '%s' is not a non-negative integer", name, s ? s : "");
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

bool kvv_opts_double(kvv_opts *o, const char *name, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno) {
        kvv_opts_error(o, "option %s: '%s' is not a number", name, s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

bool kvv_opts_int_list(kvv_opts *o, const char *name, const char *s, int32_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!s || !*s) {
        kvv_opts_error(o, "option %s: empty list", name);
        return false;
    }
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += (*p == ',');
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        kvv_opts_error(o, "option %s: out of memory", name);
        return false;
    }
    const char *p = s;
    int k = 0;
    for (;;) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < INT32_MIN || x > INT32_MAX || (*end && *end != ',')) {
            kvv_opts_error(o, "option %s: item %d of '%s' is not an integer", name, k + 1, s);
            free(v);
            return false;
        }
        v[k++] = (int32_t)x;
        if (!*end)
            break;
        p = end + 1;
    }
    *out = v;
    *n = k;
    return true;
}

bool kvv_opts_bytes(kvv_opts *o, const char *name, const char *s, uint64_t *out)
{
    static const char units[] = "KMGT";
    char *end;
    errno = 0;
    double v = s && *s >= '0' && *s <= '9' ? strtod(s, &end) : -1;
    uint64_t mul = 1;
    if (v >= 0 && !errno && *end) {
        const char *u = strchr(units, *end >= 'a' ? *end - 'a' + 'A' : *end);
        if (u && *end) {
            for (const char *k = units; k <= u; k++)
                mul *= 1024;
            end++;
            if (strcmp(end, "B") == 0 || strcmp(end, "b") == 0 || strcmp(end, "iB") == 0)
                end += strlen(end);
        }
    }
    double bytes = v * (double)mul;
    if (v < 0 || errno || *end || bytes < 1 || bytes >= 9223372036854775807.0) {
        kvv_opts_error(o, "option %s: '%s' is not a byte count (e.g. 4096, 512M, 4G)", name,
                       s ? s : "");
        return false;
    }
    *out = (uint64_t)bytes;
    return true;
}

/* Test seam (opts.h): the only mutable state of the option loop. */
static bool parse_only;

void kvv_opts_set_parse_only(bool on)
{
    parse_only = on;
}

void kvv_opts_global_help(FILE *f)
{
    fprintf(f, "global options (every command):\n"
            "  --max-memory BYTES  cap what the run may allocate (suffix K, M, G or T: 512M,\n"
            "                      4G): weights, KV cache and captures that would not fit are\n"
            "                      refused before they are allocated, and any allocation past\n"
            "                      the cap fails; either is a message and exit 2\n");
}

/* A global option (opts.h)? Consumed (a bad value sets failed). */
static bool global_option(kvv_opts *o)
{
    if (!kvv_opts_value(o, "--max-memory"))
        return false;
    if (o->value)
        kvv_opts_bytes(o, "--max-memory", o->value, &o->max_memory);
    return true;
}

/* Apply the global options once the command line is known good. */
static void apply_globals(kvv_opts *o)
{
    kvv_error err = {0};
    if (o->max_memory && kvv_mem_limit_set(o->max_memory, &err))
        kvv_opts_error(o, "option %s", err.msg);
}

int kvv_opts_parse(kvv_opts *o, void (*help)(FILE *f), const kvv_opt_group *groups, int n)
{
    while (kvv_opts_next(o)) {
        if (kvv_opts_flag(o, "--help") || kvv_opts_flag(o, "-h")) {
            help(stdout);
            fputc('\n', stdout);
            kvv_opts_global_help(stdout);
            return 0;
        }
        if (global_option(o))
            continue;
        int i = 0;
        while (i < n && !groups[i].parse(groups[i].state, o))
            i++;
        if (i == n)
            kvv_opts_unknown(o);
    }
    for (int i = 0; i < n && !o->failed; i++)
        if (groups[i].finish)
            groups[i].finish(groups[i].state, o);
    if (parse_only)
        return o->failed ? KVV_EXIT_BAD_INPUT : 0;
    if (!o->failed)
        apply_globals(o);
    return o->failed ? KVV_EXIT_BAD_INPUT : KVV_OPTS_RUN;
}

int kvv_cli_fail(const kvv_error *err)
{
    fprintf(stderr, "kvverify: %s\n", err->msg[0] ? err->msg : kvv_strerror(err->status));
    return kvv_exit_code(err->status);
}

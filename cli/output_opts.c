/* output_opts.c — the output options every command shares (see output_opts.h). */
#include "cli/output_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "vectors/kvv_file.h"
#include "verify/report/report.h"

void kvv_output_cli_init(kvv_output_cli *out, const char *cmd, unsigned accepts)
{
    memset(out, 0, sizeof *out);
    out->cmd = cmd;
    out->accepts = accepts;
}

bool kvv_output_is_stdout(const char *path)
{
    return path && strcmp(path, KVV_OUTPUT_STDOUT) == 0;
}

bool kvv_output_cli_verbose(const kvv_output_cli *out)
{
    return !out->quiet && !out->stdout_taken;
}

/* Is o->arg the output option `name`? Sets *path to "-" (bare, or a next
 * argument that is an option), FILE (--name FILE, --name=FILE). An option
 * the command does not take (bit) is consumed with an error. */
static bool path_option(const kvv_output_cli *out, kvv_opts *o, const char *name, unsigned bit,
                        const char **path)
{
    if (o->end_of_options)
        return false;
    size_t n = strlen(name);
    if (strncmp(o->arg, name, n) != 0 || (o->arg[n] != '\0' && o->arg[n] != '='))
        return false;
    if (!(out->accepts & bit)) {
        kvv_opts_error(o, "option %s: not used by %s", name, out->cmd);
        return true;
    }
    const char *v = KVV_OUTPUT_STDOUT;
    if (o->arg[n] == '=') {
        v = o->arg + n + 1;
    } else if (o->i < o->argc) {
        const char *next = o->argv[o->i];
        if (next[0] != '-' || strcmp(next, KVV_OUTPUT_STDOUT) == 0) {
            v = next;
            o->i++;
        }
    }
    if (!v[0])
        kvv_opts_error(o, "option %s: empty file name", name);
    *path = v;
    return true;
}

bool kvv_output_cli_parse(void *state, kvv_opts *o)
{
    kvv_output_cli *out = state;
    if (path_option(out, o, "--json", KVV_OUT_JSON, &out->json_path) ||
        path_option(out, o, "--junit", KVV_OUT_JUNIT, &out->junit_path) ||
        path_option(out, o, "--html", KVV_OUT_HTML, &out->html_path))
        return true;
    if (kvv_opts_flag(o, "--quiet") || kvv_opts_flag(o, "-q")) {
        if (!(out->accepts & KVV_OUT_QUIET))
            kvv_opts_error(o, "option %s: not used by %s", o->arg, out->cmd);
        out->quiet = true;
        return true;
    }
    if (kvv_opts_flag(o, "--progress")) {
        if (!(out->accepts & KVV_OUT_PROGRESS))
            kvv_opts_error(o, "option --progress: not used by %s (it runs briefly)", out->cmd);
        out->progress_given = true;
        return true;
    }
    return false;
}

/* --progress, else KVV_PROGRESS (0 or 1), else whether stderr is a terminal;
 * never with --quiet. */
static bool want_progress(const kvv_output_cli *out)
{
    if (out->quiet || !(out->accepts & KVV_OUT_PROGRESS))
        return false;
    if (out->progress_given)
        return true;
    const char *e = getenv("KVV_PROGRESS");
    return e ? strcmp(e, "0") != 0 : isatty(2);
}

void kvv_output_progress(void *state, const char *label, long done, long total)
{
    const kvv_output_cli *out = state;
    if (!out || !out->progress)
        return;
    fprintf(stderr, "\r[%s] %ld/%ld", label, done, total);
    if (done >= total)
        fputc('\n', stderr);
    fflush(stderr);
}

/* Does the regular file at path begin with a GGUF or .kvv magic? (Only
 * ever asked of a regular file: reading a FIFO would wait for a writer.) */
static bool is_input_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char magic[4] = {0};
    size_t n = fread(magic, 1, sizeof magic, f);
    fclose(f);
    return n == 4 && (memcmp(magic, "GGUF", 4) == 0 || memcmp(magic, KVV_FILE_MAGIC, 4) == 0);
}

/* The checks of one resolved target t of path (see kvv_output_path_check). */
static bool target_check(kvv_opts *o, const char *option, const char *path,
                         const kvv_file_target *t, bool model_out)
{
    if (t->kind != KVV_TARGET_FILE)
        return true; /* a stream: written through, nothing to rename or protect */
    /* "r.json (a link to /x/r.json)": where the rename goes */
    char shown[1200];
    snprintf(shown, sizeof shown, t->via_link ? "%s (a link to %s)" : "%s", path, t->path);
    if (t->is_dir) {
        kvv_opts_error(o, "option %s: cannot write %s: it is a folder", option, shown);
        return false;
    }
    if (t->exists && !model_out && is_input_file(t->path)) {
        kvv_opts_error(o, "option %s: %s is a model or vector file; refusing to overwrite "
                          "it (--json FILE takes the next argument: write --json=FILE, or "
                          "put --json after MODEL)", option, shown);
        return false;
    }
    /* the folder: the writer creates TARGET.tmp.PID there and renames it */
    const char *slash = strrchr(t->path, '/');
    char *dir = slash ? strndup(t->path, slash == t->path ? 1 : (size_t)(slash - t->path))
                      : strdup(".");
    if (!dir) {
        kvv_opts_error(o, "option %s: out of memory", option);
        return false;
    }
    struct stat st;
    bool ok = false;
    if (stat(dir, &st) != 0)
        kvv_opts_error(o, "option %s: cannot write %s: folder %s %s", option, shown, dir,
                       errno == ENOENT ? "does not exist" : strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        kvv_opts_error(o, "option %s: cannot write %s: %s is not a folder", option, shown, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        kvv_opts_error(o, "option %s: cannot write %s: folder %s is not writable (%s)", option,
                       shown, dir, strerror(errno));
    else
        ok = true;
    free(dir);
    return ok;
}

/* Resolve path into t (common/atomic_file.h) and check it. @return true
 * when it may be written (t filled; the caller frees it). */
static bool resolve_check(kvv_opts *o, const char *option, const char *path, bool model_out,
                          kvv_file_target *t)
{
    kvv_error err = {0};
    if (kvv_file_target_resolve(path, t, &err)) {
        kvv_opts_error(o, "option %s: cannot write %s", option, err.msg);
        return false;
    }
    if (target_check(o, option, path, t, model_out))
        return true;
    kvv_file_target_free(t);
    return false;
}

bool kvv_output_path_check(kvv_opts *o, const char *option, const char *path, bool model_out)
{
    if (!path || kvv_output_is_stdout(path))
        return true;
    kvv_file_target t;
    if (!resolve_check(o, option, path, model_out, &t))
        return false;
    kvv_file_target_free(&t);
    return true;
}

/* After the last option: the paths, at most one of them stdout ("-" or
 * /dev/stdout, which becomes "-"), none the same file twice under two
 * spellings (device and inode, or canonical folder and name). */
static void finish(void *state, kvv_opts *o)
{
    kvv_output_cli *out = state;
    static const char *const names[] = {"--json", "--junit", "--html"};
    const char **paths[] = {&out->json_path, &out->junit_path, &out->html_path};
    kvv_file_target t[3];
    int n_t = 0, n_stdout = 0;
    for (int i = 0; i < 3 && !o->failed; i++, n_t++) {
        memset(&t[i], 0, sizeof t[i]);
        if (!*paths[i])
            continue;
        if (!resolve_check(o, names[i], *paths[i], false, &t[i]))
            break;
        if (t[i].kind == KVV_TARGET_STDOUT) {
            *paths[i] = KVV_OUTPUT_STDOUT; /* one spelling downstream */
            n_stdout++;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (*paths[j] && kvv_file_target_same(&t[i], &t[j])) {
                kvv_opts_error(o, "options %s and %s both write %s%s%s", names[j], names[i],
                               *paths[j], strcmp(*paths[j], *paths[i]) ? " and " : "",
                               strcmp(*paths[j], *paths[i]) ? *paths[i] : "");
                break;
            }
    }
    for (int i = 0; i < n_t; i++)
        kvv_file_target_free(&t[i]);
    if (n_stdout > 1 && !o->failed)
        kvv_opts_error(o, "only one of --json, --junit and --html can write to stdout; give "
                          "the others a FILE");
    out->stdout_taken = n_stdout > 0;
    out->progress = want_progress(out);
}

int kvv_output_write_json(const char *path, const json_t *j, size_t flags)
{
    kvv_error err = {0};
    return kvv_json_write_file(j, flags, path, &err) ? kvv_cli_fail(&err) : 0;
}

kvv_opt_group kvv_output_cli_group(kvv_output_cli *out)
{
    return (kvv_opt_group){kvv_output_cli_parse, finish, out};
}

void kvv_output_cli_help(FILE *f, const kvv_output_cli *out)
{
    const unsigned a = out->accepts;
    if (a & KVV_OUT_JSON)
        fprintf(f, "  --json [FILE|-]     %s to FILE (--json=FILE), or alone / - to stdout\n",
                out->json_help ? out->json_help : "JSON");
    if (a & KVV_OUT_JUNIT)
        fprintf(f, "  --junit [FILE|-]    a JUnit XML report, the same way\n");
    if (a & KVV_OUT_HTML)
        fprintf(f, "  --html [FILE|-]     %s, the same way\n",
                out->html_help ? out->html_help : "a self-contained HTML report");
    if (a & KVV_OUT_QUIET)
        fprintf(f, "  -q, --quiet         %s%s\n", out->quiet_help ? out->quiet_help : "print less",
                a & KVV_OUT_PROGRESS ? "; no progress" : "");
    if (a & KVV_OUT_PROGRESS)
        fprintf(f, "  --progress          progress on stderr also when it is not a terminal\n");
    if (a & (KVV_OUT_JSON | KVV_OUT_JUNIT | KVV_OUT_HTML))
        fprintf(f, "                      (a document on stdout replaces the console text)\n");
}

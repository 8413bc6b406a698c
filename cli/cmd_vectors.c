/*
 * cmd_vectors.c — `kvverify vectors gen|check|show`: golden vectors
 * (vectors/kvv_vectors.h, format in docs/vectors-format.md).
 *
 *   kvverify vectors gen MODEL -o FILE [--engine E] [--mode M] [--threads N]
 *        [--cache-type T] [-p TEXT | --tokens LIST | --random N] [--seed S]
 *        [-n N] [--full] [--logits full|hash] [--no-patch]
 *   kvverify vectors check [MODEL] FILE [--engine E] [--mode M] [--threads N]
 *        [--force-fail[=weight|resid:LAYER:POS]] [-q] [--json [FILE|-]] [--junit [FILE|-]]
 *   kvverify vectors show FILE [--json [FILE|-]]
 *
 * Exit codes: 0 pass / written / shown; 1 check found a divergence; 2 bad
 * usage, a corrupt or mismatched file (wrong model, truncated, bad CRC,
 * unknown version); 77 the model cannot be checked (unsupported).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "cli/prompt_opts.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "vectors/kvv_file.h"
#include "vectors/kvv_meta.h"
#include "vectors/kvv_vectors.h"
#include "verify/report/report.h"

static void gen_engine(kvv_engine_cli *e);
static void check_engine(kvv_engine_cli *e);

static void usage(FILE *f)
{
    kvv_engine_cli ge, ce;
    gen_engine(&ge);
    check_engine(&ce);
    fprintf(f, "usage: kvverify vectors gen MODEL -o FILE [options]   record a golden vector\n"
            "       kvverify vectors check [MODEL] FILE [options] recompute and compare (MODEL:\n"
            "                                                     default the vector's own,\n"
            "                                                     beside FILE or here)\n"
            "       kvverify vectors show FILE [--json [FILE|-]] metadata and records\n\n"
            "gen options:\n"
            "  -o FILE             output .kvv (written atomically; required)\n");
    kvv_engine_cli_help(f, &ge, false);
    kvv_prompt_cli_help(f, "--random 8");
    fprintf(f, "  -n N                greedy steps (default 8)\n"
            "  --full              also store full K, V and residual tensors\n"
            "  --logits full|hash  store logits as fp32 bits (default) or one hash per step\n"
            "  --no-patch          leave out the kv and patch result records\n"
            "(the seed also derives the patch donor; threads are not recorded: they must not\n"
            "change a bit)\n\n"
            "  --progress          progress on stderr also when it is not a terminal\n"
            "check options:\n");
    kvv_engine_cli_help(f, &ce, false);
    fprintf(f, "  --force-fail        plant the negative control into the comparison so the\n"
            "                      check must FAIL (exit 1): one flipped weight bit\n"
            "  --force-fail=resid:L:P  ... one flipped bit of the residual entering layer L at\n"
            "                      position P instead (--force-fail=weight: the default)\n"
            "                      (--perturb WHAT, its old name, is still taken, with a note)\n"
            "  -q, --quiet         no progress (the verdict line and a divergence's stay)\n"
            "  --junit [FILE|-]    a JUnit XML report (one testcase, \"vector\"), the same way\n"
            "  --json [FILE|-]     machine-readable result to FILE (--json=FILE), or alone /\n"
            "                      - to stdout\n"
            "  --progress          progress on stderr also when it is not a terminal\n\n"
            "exit codes: 0 pass, 1 divergence, 2 bad usage or corrupt/mismatched file\n"
            "(wrong model, truncated, bad CRC, unknown version), 77 unsupported model.\n");
}

/* ============================================================ gen */

static int prompt_from_text(const char *model, const char *text, int32_t **ids, int *n)
{
    kvv_error err = {0};
    kvv_gguf *g = NULL;
    kvv_tokenizer *tok = NULL;
    if (kvv_gguf_open(model, &g, &err) || kvv_tokenizer_open(g, &tok, &err) ||
        kvv_tokenize(tok, text, strlen(text), true, ids, n, &err)) {
        kvv_tokenizer_free(tok);
        kvv_gguf_close(g);
        return kvv_cli_fail(&err);
    }
    kvv_tokenizer_free(tok);
    kvv_gguf_close(g);
    if (*n < 1) {
        fprintf(stderr, "kvverify vectors gen: option -p: the text gives no tokens\n");
        return KVV_EXIT_BAD_INPUT;
    }
    return 0;
}

/* gen's engine options: all of them, ref by default. */
static void gen_engine(kvv_engine_cli *e)
{
    kvv_engine_cli_init(e, "vectors gen", "ref", KVV_ENGINE_OPT_ALL);
}

/* check's: the recorded engine and mode unless given; the cache type is the vector's. */
static void check_engine(kvv_engine_cli *e)
{
    kvv_engine_cli_init(e, "vectors check", NULL,
                        KVV_ENGINE_OPT_ENGINE | KVV_ENGINE_OPT_MODE | KVV_ENGINE_OPT_THREADS |
                            KVV_ENGINE_OPT_PLUGIN | KVV_ENGINE_OPT_ISA);
    e->engine_help = "engine to certify against the vector (default: the recorded one)";
    e->mode_help = "exact (ref), fast or invariant (cpu; default: the recorded one)";
    e->isa_help = "cpu: kernel table generic, avx2, avx512 or auto (default: the\n"
                  "                      recorded one; tables differ by design)";
}

/* gen's own options. */
typedef struct {
    const char *model, *out;
    kvv_vectors_opts *vo;
    const kvv_prompt_cli *prompt;
} gen_args;

static bool gen_option(void *state, kvv_opts *o)
{
    gen_args *a = state;
    long lv;
    if (kvv_opts_value(o, "-o") || kvv_opts_value(o, "--output")) {
        a->out = o->value;
        if (a->out) /* checked before the run; a .kvv may replace a .kvv */
            kvv_output_path_check(o, "-o", a->out, true);
    } else if (kvv_opts_value(o, "-n")) {
        if (kvv_opts_int(o, "-n", o->value, 1, 1 << 16, &lv))
            a->vo->n_gen = (int)lv;
    } else if (kvv_opts_flag(o, "--full")) {
        a->vo->full = true;
    } else if (kvv_opts_value(o, "--logits")) {
        if (o->value && strcmp(o->value, "full") == 0)
            a->vo->logits_full = true;
        else if (o->value && strcmp(o->value, "hash") == 0)
            a->vo->logits_full = false;
        else if (o->value)
            kvv_opts_error(o, "option --logits: '%s' is not full or hash", o->value);
    } else if (kvv_opts_flag(o, "--no-patch")) {
        a->vo->patch = false;
    } else if (kvv_opts_positional(o) && !a->model) {
        a->model = o->arg;
    } else {
        return false;
    }
    return true;
}

/* What a .kvv file can hold. */
static void gen_finish(void *state, kvv_opts *o)
{
    const gen_args *a = state;
    if (!a->model || !a->out)
        kvv_opts_error(o, "needs MODEL and -o FILE");
    else if (a->prompt->n_random > 1 << 16)
        kvv_opts_error(o, "option --random: %ld is outside 1..65536", a->prompt->n_random);
    else if (a->prompt->seed > KVV_META_MAX_SEED)
        kvv_opts_error(o, "option --seed: %llu is above 2^53-1",
                       (unsigned long long)a->prompt->seed);
}

static int cmd_gen(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "vectors gen", argc, argv);
    kvv_vectors_opts vo = kvv_vectors_opts_default();
    vo.kvverify_version = KVV_VERSION;
    kvv_engine_cli eng;
    gen_engine(&eng);
    kvv_prompt_cli prompt;
    kvv_prompt_cli_init(&prompt, "vectors gen");
    gen_args a = {.vo = &vo, .prompt = &prompt};
    kvv_output_cli output;
    kvv_output_cli_init(&output, "vectors gen", KVV_OUT_PROGRESS);
    const kvv_opt_group groups[] = {kvv_engine_cli_group(&eng), kvv_prompt_cli_group(&prompt),
                                    {gen_option, gen_finish, &a}, kvv_output_cli_group(&output)};
    int code = kvv_opts_parse(&o, usage, groups, 4);
    if (code != KVV_OPTS_RUN) {
        kvv_prompt_cli_free(&prompt);
        return code;
    }
    const char *model = a.model, *out = a.out, *text = prompt.text;
    vo.engine = kvv_engine_cli_opts(&eng);
    vo.progress = kvv_output_progress;
    vo.progress_user = &output;
    vo.seed = prompt.seed;
    int32_t *toks = prompt.tokens;
    int n_toks = prompt.n_tokens;
    long n_random = prompt.n_random;
    prompt.tokens = NULL;
    int rc = 0;
    if (text) {
        if ((rc = prompt_from_text(model, text, &toks, &n_toks)))
            return rc;
        vo.prompt_source = "text";
        vo.prompt_text = text;
    } else if (toks) {
        vo.prompt_source = "tokens";
    } else {
        /* random prompt: needs the vocabulary size */
        kvv_error err = {0};
        kvv_gguf *g = NULL;
        kvv_hparams hp;
        if (kvv_gguf_open(model, &g, &err) || kvv_hparams_read(g, &hp, &err)) {
            kvv_gguf_close(g);
            return kvv_cli_fail(&err);
        }
        kvv_gguf_close(g);
        n_toks = n_random > 0 ? (int)n_random : 8;
        toks = malloc(sizeof(int32_t) * (size_t)n_toks);
        if (!toks) {
            fprintf(stderr, "kvverify vectors gen: out of memory\n");
            return KVV_EXIT_BAD_INPUT;
        }
        kvv_vectors_random_tokens(vo.seed, hp.n_vocab, toks, n_toks);
        vo.prompt_source = "random";
    }
    vo.tokens = toks;
    vo.n_tokens = n_toks;
    kvv_error err = {0};
    if (kvv_vectors_gen(model, &vo, out, &err))
        rc = kvv_cli_fail(&err);
    else
        printf("wrote %s (%d prompt tokens, %d greedy steps)\n", out, n_toks, vo.n_gen);
    free(toks);
    return rc;
}

/* ============================================================ check */

static json_t *divergence_json(const kvv_divergence *d)
{
    char line[512];
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:s}", "record", d->record, "layer",
                          d->layer, "position", d->position, "step", d->step, "head", d->head,
                          "index", d->index, "message", kvv_divergence_format(d, line, sizeof line));
    char e[24], a[24];
    snprintf(e, sizeof e, "0x%0*llx", d->is_f32 ? 8 : 16, (unsigned long long)d->expected);
    snprintf(a, sizeof a, "0x%0*llx", d->is_f32 ? 8 : 16, (unsigned long long)d->actual);
    if (j) {
        json_object_set_new(j, "expected_bits", json_string(e));
        json_object_set_new(j, "actual_bits", json_string(a));
    }
    return j;
}

/* check's own options. */
typedef struct {
    const char *model, *vec;
    kvv_vectors_check_opts *co;
    char found[1024];           /* the model found from the vector's meta */
} check_args;

/* The planted failure: "weight" or "resid:LAYER:POS" (option: its name, for
 * messages). */
static void force_fail(check_args *a, kvv_opts *o, const char *option, const char *what)
{
    int l, p, k = 0;
    if (strcmp(what, "weight") == 0) {
        a->co->control |= KVV_CTL_PERTURB_WEIGHT;
    } else if (sscanf(what, "resid:%d:%d%n", &l, &p, &k) == 2 && what[k] == '\0' && l >= 0 &&
               p >= 0) {
        a->co->perturb_layer = l;
        a->co->perturb_pos = p;
    } else {
        kvv_opts_error(o, "option %s: '%s' is not weight or resid:LAYER:POS", option, what);
    }
}

static bool check_option(void *state, kvv_opts *o)
{
    check_args *a = state;
    if (kvv_opts_flag(o, "--force-fail")) { /* a value only as --force-fail=WHAT: a lone
                                                 flag never takes the next argument */
        force_fail(a, o, "--force-fail", "weight");
    } else if (strncmp(o->arg, "--force-fail=", 13) == 0 && !o->end_of_options) {
        force_fail(a, o, "--force-fail", o->arg + 13);
    } else if (kvv_opts_value(o, "--perturb")) { /* the old name */
        if (o->value) {
            fprintf(stderr, "kvverify vectors check: note: --perturb is deprecated: use "
                            "--force-fail=%s\n", o->value);
            force_fail(a, o, "--perturb", o->value);
        }
    } else if (kvv_opts_positional(o) && !a->model) {
        a->model = o->arg;
    } else if (kvv_opts_positional(o) && !a->vec) {
        a->vec = o->arg;
    } else {
        return false;
    }
    return true;
}

/* What a file is by its first bytes: 'G' a GGUF model, 'K' a .kvv vector,
 * 0 neither (or unreadable). */
static char file_kind(const char *path)
{
    FILE *f = fopen(path, "rb");
    char m[4] = {0};
    size_t n = f ? fread(m, 1, 4, f) : 0;
    if (f)
        fclose(f);
    return n < 4 ? 0 : !memcmp(m, "GGUF", 4) ? 'G' : !memcmp(m, KVV_FILE_MAGIC, 4) ? 'K' : 0;
}

/* The model a vector names (its meta's file name), found beside the vector
 * or in the current folder, into out. @return true when found; else a
 * message says where it looked. */
static bool model_of_vector(kvv_opts *o, const char *vec, char *out, size_t size)
{
    kvv_error err = {0};
    kvv_file *f = NULL;
    kvv_meta mt;
    if (kvv_file_read(vec, &f, &err) || kvv_meta_parse(f, &mt, &err)) {
        kvv_file_free(f);
        kvv_opts_error(o, "%s", err.msg);
        return false;
    }
    const char *slash = strrchr(vec, '/');
    int dir = slash ? (int)(slash - vec) : 0;
    bool found = false;
    for (int i = 0; i < 2 && !found; i++) { /* beside the vector, then here */
        int d = i == 0 ? dir : 0;
        snprintf(out, size, "%.*s%s%s", d, vec, d ? "/" : "", mt.model_file);
        found = access(out, R_OK) == 0;
    }
    if (!found)
        kvv_opts_error(o, "%s was recorded on %s (sha256 %.16s...), which is neither beside it "
                          "nor in the current folder: give it, `kvverify vectors check MODEL "
                          "%s`", vec, mt.model_file, mt.model_sha256, vec);
    kvv_meta_free(&mt);
    kvv_file_free(f);
    return found;
}

/* MODEL FILE in this order (said when swapped); MODEL may be left out when
 * the vector's model sits beside it or here (a->found holds it then). */
static void check_finish(void *state, kvv_opts *o)
{
    check_args *a = state;
    if (!a->model) {
        kvv_opts_error(o, "needs FILE.kvv (and MODEL before it, unless the vector's model is "
                          "beside it)");
        return;
    }
    char k1 = file_kind(a->model), k2 = a->vec ? file_kind(a->vec) : 0;
    if (a->vec && k1 == 'K' && k2 == 'G') {
        kvv_opts_error(o, "the arguments are swapped: %s is the vector and %s the model; the "
                          "order is MODEL FILE (kvverify vectors check %s %s)",
                       a->model, a->vec, a->vec, a->model);
    } else if (!a->vec && k1 == 'K') {
        a->vec = a->model;
        a->model = model_of_vector(o, a->vec, a->found, sizeof a->found) ? a->found : NULL;
    } else if (!a->vec) {
        kvv_opts_error(o, "needs FILE.kvv after MODEL%s", k1 == 'G' ? "" : " (or FILE.kvv alone)");
    }
}

/* --junit: the check as one testcase "vector" (r NULL: it could not run,
 * err says why). A planted failure (force_fail) fails it either way: found,
 * as planted, or not found, the comparison is broken. @return 0, or the
 * exit code of a failed write (message printed). */
static int write_junit(const char *path, const char *model, const char *vec,
                       const kvv_vectors_result *r, const kvv_vectors_check_opts *co,
                       const kvv_error *err)
{
    kvv_report rep;
    kvv_report_init(&rep, model, 0);
    kvv_check_result *t = kvv_report_add(&rep, "vector");
    kvv_error werr = {0};
    int code = 0;
    if (!t) {
        kvv_report_free(&rep);
        kvv_error_set(&werr, KVV_ERR_NOMEM, "%s: out of memory", path);
        return kvv_cli_fail(&werr);
    }
    bool planted = co->control || co->perturb_layer >= 0;
    if (!r) {
        kvv_check_set_error(t, err);
    } else {
        char line[512];
        uint64_t n = 0;
        for (int i = 0; i < r->n_tally; i++)
            n += r->tally[i].compared;
        t->seconds = rep.seconds = r->seconds;
        t->engine = r->engine;
        t->has_engine = rep.has_engine = true;
        rep.engine = r->engine;
        if (planted)
            kvv_check_add_control(t, "planted failure (--force-fail)", r->diverged,
                                  r->diverged ? "the vector check found it" : "not found");
        if (!r->diverged && !planted)
            kvv_check_set_verdict(t, KVV_VERDICT_PASS, "%llu values in %d records bit-identical "
                                  "to %s", (unsigned long long)n, r->n_tally, vec);
        else if (!r->diverged)
            kvv_check_set_verdict(t, KVV_VERDICT_FAIL, "control NOT detected: the perturbed "
                                  "engine still reproduces every value of %s", vec);
        else
            kvv_check_set_verdict(t, KVV_VERDICT_FAIL, "%llu of %llu values diverge from %s%s",
                                  (unsigned long long)r->n_diverged, (unsigned long long)n, vec,
                                  planted ? " (as planted)" : "");
        if (r->diverged)
            kvv_check_set_message(t, "first divergence: %s",
                                  kvv_divergence_format(&r->first, line, sizeof line));
    }
    if (kvv_report_write_junit(&rep, path, &werr))
        code = kvv_cli_fail(&werr);
    kvv_report_free(&rep);
    return code;
}

static int cmd_check(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "vectors check", argc, argv);
    kvv_vectors_check_opts co = kvv_vectors_check_opts_default();
    kvv_engine_cli eng;
    check_engine(&eng);
    kvv_output_cli out;
    kvv_output_cli_init(&out, "vectors check",
                        KVV_OUT_JSON | KVV_OUT_JUNIT | KVV_OUT_QUIET | KVV_OUT_PROGRESS);
    check_args a = {.co = &co};
    const kvv_opt_group g[] = {kvv_engine_cli_group(&eng), kvv_output_cli_group(&out),
                               {check_option, check_finish, &a}};
    int code = kvv_opts_parse(&o, usage, g, 3);
    if (code != KVV_OPTS_RUN)
        return code;
    const char *model = a.model, *vec = a.vec;
    const char *json = out.json_path;
    const bool text = !out.stdout_taken;
    co.engine = eng.engine;
    co.mode = eng.mode;
    co.progress = kvv_output_progress;
    co.progress_user = &out;
    if (eng.n_threads > 0)
        co.n_threads = eng.n_threads;
    kvv_engine_opts eo = kvv_engine_cli_opts(&eng); /* --device --ubatch --engine-opt */
    co.device = eo.device;
    co.n_ubatch = eo.n_ubatch;
    co.engine_opts = eo.engine_opts;
    co.n_engine_opts = eo.n_engine_opts;
    co.isa = eo.isa; /* NULL: the vector's recorded table (cpu) */
    kvv_vectors_result r;
    kvv_error err = {0};
    if (kvv_vectors_check(model, vec, &co, &r, &err)) {
        if (out.junit_path)
            write_junit(out.junit_path, model, vec, NULL, &co, &err);
        if (json) {
            /* machine readers get a verdict too; the message also goes to stderr */
            json_t *j = json_pack("{s:s, s:s, s:s, s:i}", "verdict", "error", "vector", vec,
                                  "message", err.msg, "exit_code", kvv_exit_code(err.status));
            kvv_output_write_json(json, j, JSON_INDENT(2) | JSON_SORT_KEYS);
            json_decref(j);
        }
        return kvv_cli_fail(&err);
    }
    char line[512];
    if (out.junit_path && (code = write_junit(out.junit_path, model, vec, &r, &co, NULL)))
        return code;
    if (json) {
        json_t *recs = json_array();
        for (int i = 0; i < r.n_tally; i++)
            json_array_append_new(recs, json_pack("{s:s, s:I, s:I}", "name", r.tally[i].name,
                                                  "compared", (json_int_t)r.tally[i].compared,
                                                  "diverged", (json_int_t)r.tally[i].diverged));
        json_t *root = json_pack("{s:s, s:s, s:s, s:I, s:f, s:o, s:o}",
                                 "verdict", r.diverged ? "diverged" : "pass", "vector", vec,
                                 "model_sha256", r.model_sha256, "n_diverged",
                                 (json_int_t)r.n_diverged, "seconds", r.seconds, "records", recs,
                                 "engine", kvv_engine_desc_to_json(&r.engine));
        if (root && r.diverged)
            json_object_set_new(root, "first", divergence_json(&r.first));
        code = kvv_output_write_json(json, root, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(root);
        if (code)
            return code;
    }
    if (!text) {
        /* stdout holds the JSON */
    } else if (!r.diverged && (co.control || co.perturb_layer >= 0)) {
        printf("CONTROL NOT DETECTED %s: the perturbed engine (engine %s %s) still reproduces "
               "every value; the comparison or the engine's control is broken\n", vec,
               r.engine.name, r.engine.mode);
    } else if (!r.diverged) {
        uint64_t n = 0;
        for (int i = 0; i < r.n_tally; i++)
            n += r.tally[i].compared;
        printf("PASS %s: %llu values in %d records bit-identical (engine %s %s, cache %s) in %.3f s\n",
               vec, (unsigned long long)n, r.n_tally, r.engine.name, r.engine.mode,
               r.engine.cache_type, r.seconds);
    } else {
        printf("DIVERGED %s (engine %s %s, cache %s)%s\n", vec, r.engine.name, r.engine.mode,
               r.engine.cache_type,
               co.control || co.perturb_layer >= 0 ? " - negative control detected" : "");
        printf("first divergence: %s\n", kvv_divergence_format(&r.first, line, sizeof line));
        printf("%llu divergences:", (unsigned long long)r.n_diverged);
        for (int i = 0; i < r.n_tally; i++)
            if (r.tally[i].diverged)
                printf(" %s %llu/%llu", r.tally[i].name, (unsigned long long)r.tally[i].diverged,
                       (unsigned long long)r.tally[i].compared);
        printf("\n");
    }
    /* a perturbed run must diverge; when it does not, that is a failure too */
    return r.diverged || co.control || co.perturb_layer >= 0 ? KVV_EXIT_FAIL : KVV_EXIT_PASS;
}

/* ============================================================ show */

static bool show_option(void *state, kvv_opts *o)
{
    const char **path = state;
    if (!kvv_opts_positional(o) || *path)
        return false;
    *path = o->arg;
    return true;
}

static void show_finish(void *state, kvv_opts *o)
{
    if (!*(const char **)state)
        kvv_opts_error(o, "needs FILE");
}

static int cmd_show(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "vectors show", argc, argv);
    const char *path = NULL;
    kvv_output_cli out;
    kvv_output_cli_init(&out, "vectors show", KVV_OUT_JSON);
    const kvv_opt_group g[] = {kvv_output_cli_group(&out), {show_option, show_finish, &path}};
    int code = kvv_opts_parse(&o, usage, g, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    const char *json = out.json_path;
    code = 0;
    kvv_error err = {0};
    kvv_file *f = NULL;
    kvv_meta mt;
    if (kvv_file_read(path, &f, &err))
        return kvv_cli_fail(&err);
    if (kvv_meta_parse(f, &mt, &err)) {
        kvv_file_free(f);
        return kvv_cli_fail(&err);
    }
    uint64_t raw = 0, z = 0;
    for (int i = 0; i < f->n_records; i++) {
        raw += f->records[i].raw_size;
        z += f->records[i].z_size;
    }
    if (json) {
        json_t *recs = json_array();
        for (int i = 0; i < f->n_records; i++) {
            const kvv_record *r = &f->records[i];
            json_t *dims = json_array();
            for (int d = 0; d < r->n_dims; d++)
                json_array_append_new(dims, json_integer((json_int_t)r->dims[d]));
            json_array_append_new(recs, json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:f}", "name",
                                                  r->name, "type", kvv_rec_type_name(r->type),
                                                  "dims", dims, "offset", (json_int_t)r->offset,
                                                  "raw_size", (json_int_t)r->raw_size,
                                                  "compressed_size", (json_int_t)r->z_size,
                                                  "ratio", r->z_size ? (double)r->raw_size / (double)r->z_size : 0.0));
        }
        json_t *meta = json_loadb((const char *)f->records[0].data, f->records[0].raw_size, 0, NULL);
        json_t *root = json_pack("{s:s, s:I, s:i, s:o, s:o, s:I, s:I, s:f}", "file", path, "size",
                                 (json_int_t)f->size, "format_version", (int)f->version, "meta",
                                 meta ? meta : json_null(), "records", recs, "raw_total",
                                 (json_int_t)raw, "compressed_total", (json_int_t)z, "ratio",
                                 (double)raw / (double)(z ? z : 1));
        code = kvv_output_write_json(json, root, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(root);
    }
    if (!out.stdout_taken && !code) {
        printf("file      %s (%llu bytes, .kvv format version %u)\n", path,
               (unsigned long long)f->size, f->version);
        printf("model     %s  sha256 %s\n", mt.model_file, mt.model_sha256);
        printf("          arch %s, %d layers, n_embd %d, vocab %d, kv dims %d/%d\n", mt.arch,
               mt.n_layer, mt.n_embd, mt.n_vocab, mt.kv_dim_k, mt.kv_dim_v);
        printf("engine    %s, mode %s, cache %s%s%s\n", mt.engine, mt.mode, mt.cache_type,
               mt.isa[0] ? ", kernel table " : "", mt.isa);
        if (mt.engine_version[0])
            printf("          %s; device %s; variant %s; flash attention %s; n_ubatch %d\n",
                   mt.engine_version, mt.device, mt.variant, mt.flash_attn, mt.n_ubatch);
        printf("prompt    %s, %d tokens%s%s%s; seed %llu\n", mt.prompt_source, mt.n_prompt,
               mt.prompt_text ? " \"" : "", mt.prompt_text ? mt.prompt_text : "",
               mt.prompt_text ? "\"" : "", (unsigned long long)mt.seed);
        printf("options   -n %d, full %s, logits %s, kv/patch %s\n", mt.n_gen, mt.full ? "yes" : "no",
               mt.logits_full ? "full" : "hash", mt.patch ? "yes" : "no");
        printf("kvverify  %s\n\n", mt.kvverify_version);
        printf("%-12s %-5s %-18s %10s %10s %7s\n", "record", "type", "shape", "raw", "compressed",
               "ratio");
        for (int i = 0; i < f->n_records; i++) {
            const kvv_record *r = &f->records[i];
            char shape[64] = "";
            size_t off = 0;
            for (int d = 0; d < r->n_dims && off < sizeof shape; d++)
                off += (size_t)snprintf(shape + off, sizeof shape - off, "%s%llu", d ? "x" : "",
                                        (unsigned long long)r->dims[d]);
            if (r->n_dims == 0)
                snprintf(shape, sizeof shape, "-");
            printf("%-12s %-5s %-18s %10llu %10llu %7.2f\n", r->name, kvv_rec_type_name(r->type),
                   shape, (unsigned long long)r->raw_size, (unsigned long long)r->z_size,
                   r->z_size ? (double)r->raw_size / (double)r->z_size : 0.0);
        }
        printf("%-12s %-5s %-18s %10llu %10llu %7.2f\n", "total", "", "", (unsigned long long)raw,
               (unsigned long long)z, (double)raw / (double)(z ? z : 1));
    }
    kvv_meta_free(&mt);
    kvv_file_free(f);
    return code;
}

int kvv_cmd_vectors(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return KVV_EXIT_BAD_INPUT;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        fputc('\n', stdout);
        kvv_opts_global_help(stdout);
        return 0;
    }
    if (strcmp(sub, "gen") == 0)
        return cmd_gen(argc - 1, argv + 1);
    if (strcmp(sub, "check") == 0)
        return cmd_check(argc - 1, argv + 1);
    if (strcmp(sub, "show") == 0)
        return cmd_show(argc - 1, argv + 1);
    fprintf(stderr, "kvverify vectors: unknown subcommand '%s' (gen, check or show; see "
                    "kvverify vectors --help)\n", sub);
    return KVV_EXIT_BAD_INPUT;
}

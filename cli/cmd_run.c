/*
 * cmd_run.c — `kvverify run`: greedy decoding or a teacher-forced pass with
 * any engine, printing token ids, text and logits. The decode itself is
 * verify/decode.h's (greedy through engine/greedy.h, the argmax and top-K of
 * runtime/logits.h, --hash through reference/ref_trace.h); this file reads
 * the options, opens the model and engine, and prints.
 *
 *   kvverify run MODEL (-p TEXT | --tokens 1,2,3 | --random N) [-n N] [--top K]
 *                [--teacher] [--json [--all-logits]] [--hash] [--cache-type T]
 *                [--engine E]
 *
 * Logits print with %.9g (round-trips fp32).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "cli/prompt_opts.h"
#include "engine/engine.h"
#include "model/arch.h"
#include "model/tokenizer.h"
#include "verify/decode.h"
#include "verify/report/report.h"

typedef struct {
    const char *model_path;
    kvv_prompt_cli prompt;   /* -p --tokens --random --seed; --raw sets prompt.raw */
    long n_gen;
    bool n_given;
    long top_k;
    bool top_given;
    bool teacher, all_logits, hash, time;
    unsigned ggml;           /* --emulate-ggml */
    long n_ctx;              /* --n-ctx, 0 = the engine's default */
    kvv_engine_cli engine;   /* --engine --mode --threads --cache-type */
    kvv_output_cli out;      /* --json [FILE|-] */
} run_args;

static void run_args_init(run_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_gen = 16;
    a->top_k = 5;
    kvv_prompt_cli_init(&a->prompt, "run");
    kvv_engine_cli_init(&a->engine, "run", "ref", KVV_ENGINE_OPT_ALL);
    a->engine.repack_default = true; /* one engine: decode speed over memory */
    kvv_output_cli_init(&a->out, "run", KVV_OUT_JSON | KVV_OUT_PROGRESS);
    a->out.json_help = "one JSON object (steps: position, argmax, top-K)";
}

static void run_usage(FILE *f)
{
    run_args a;
    run_args_init(&a);
    fprintf(f, "usage: kvverify run MODEL.gguf (-p TEXT | --tokens 1,2,3 | --random N) "
            "[options]\n\n"
            "Greedy continuation of a prompt (token ids and text), or with --teacher a\n"
            "teacher-forced pass reporting the logits at every position. The next token\n"
            "is the argmax of the logits: the lowest id on a tie, NaN never chosen.\n\n");
    kvv_prompt_cli_help(f, "none, one is required");
    fprintf(f, "  --raw               with -p: add no special tokens (no BOS)\n"
            "options:\n"
            "  -n N                tokens to generate (default 16)\n"
            "  --top K             show the K largest logits at each step (default: none\n"
            "                      in greedy text output, 5 otherwise)\n"
            "  --teacher           feed the whole token list, report every position\n");
    kvv_output_cli_help(f, &a.out);
    fprintf(f, "  --all-logits        with --teacher --json: every logit of every position\n"
            "  --hash              sha256 over all logits, K, V and residuals of the run\n"
            "  --time              print load, prompt and decode times (tokens/s) on stderr\n");
    kvv_engine_cli_help(f, &a.engine, false);
    fprintf(f, "  --n-ctx N           cache positions (default: min(context_length, 4096))\n"
            "  --emulate-ggml      ref engine: emulate llama.cpp's CPU shortcuts (fp16 GELU\n"
            "                      table; activations rounded to fp16 / quantized to Q8_0\n"
            "                      before F16 / Q8_0 matmuls, to Q8_K / Q8_1 before K-quant /\n"
            "                      Q4_1, Q5_1 matmuls)\n"
            "  -h, --help          this help\n\n"
            "exit codes: 0 done, 1 done but some logits were not finite (NaN or inf: the\n"
            "tokens are not meaningful; a warning on stderr says how many), 2 bad input or\n"
            "usage, 77 unsupported architecture\n");
}

/* run's own options: the prompt, what to report, --n-ctx, --emulate-ggml. */
static bool own_option(void *state, kvv_opts *o)
{
    run_args *a = state;
    long v;
    if (kvv_opts_flag(o, "--raw")) {
        a->prompt.raw = true;
    } else if (kvv_opts_value(o, "-n")) {
        /* 0 and -5 alike: "-n: 0 is outside 1..1048576" (--teacher takes no -n) */
        if (o->value && kvv_opts_int(o, "-n", o->value, 1, 1 << 20, &a->n_gen))
            a->n_given = true;
    } else if (kvv_opts_value(o, "--top")) {
        if (o->value && kvv_opts_int(o, "--top", o->value, 0, 1 << 24, &a->top_k))
            a->top_given = true;
    } else if (kvv_opts_flag(o, "--teacher")) {
        a->teacher = true;
    } else if (kvv_opts_flag(o, "--all-logits")) {
        a->all_logits = true;
    } else if (kvv_opts_flag(o, "--hash")) {
        a->hash = true;
    } else if (kvv_opts_flag(o, "--emulate-ggml")) {
        a->ggml = KVV_GGML_GELU_FP16 | KVV_GGML_ACT_QUANT | KVV_GGML_KQ_ACT;
    } else if (kvv_opts_flag(o, "--time")) {
        a->time = true;
    } else if (kvv_opts_value(o, "--n-ctx")) {
        if (o->value && kvv_opts_int(o, "--n-ctx", o->value, 1, 1 << 20, &v))
            a->n_ctx = v;
    } else if (kvv_opts_positional(o) && !a->model_path) {
        a->model_path = o->arg;
    } else {
        return false;
    }
    return true;
}

/* The options that only make sense together. */
static void own_finish(void *state, kvv_opts *o)
{
    const run_args *a = state;
    if (!a->model_path)
        kvv_opts_error(o, "missing MODEL.gguf");
    else if (!kvv_prompt_cli_given(&a->prompt))
        kvv_opts_error(o, "give a prompt: -p TEXT, --tokens LIST or --random N");
    else if (a->prompt.raw && !a->prompt.text)
        kvv_opts_error(o, "--raw applies to -p only");
    else if (a->teacher && a->n_given)
        kvv_opts_error(o, "-n does not apply to --teacher (it reports every position)");
    else if (a->all_logits && !(a->teacher && a->out.json_path))
        kvv_opts_error(o, "--all-logits needs --teacher and --json");
}

/* @return KVV_OPTS_RUN to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, run_args *a)
{
    kvv_opts o;
    kvv_opts_init(&o, "run", argc, argv);
    run_args_init(a);
    const kvv_opt_group g[] = {kvv_prompt_cli_group(&a->prompt), kvv_engine_cli_group(&a->engine),
                               kvv_output_cli_group(&a->out), {own_option, own_finish, a}};
    int code = kvv_opts_parse(&o, run_usage, g, 4);
    if (code != KVV_OPTS_RUN)
        kvv_prompt_cli_free(&a->prompt);
    return code;
}

/* ------------------------------------------------------------ text helpers */

/* A JSON string for bytes that may not be UTF-8: bytes >= 0x80 of an invalid
 * sequence become U+0080..U+00FF (as the peer dumps escape them). */
static json_t *json_bytes(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len);
    if (j)
        return j;
    char *u = malloc(2 * len + 1);
    if (!u)
        return json_null();
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80 && c != 0) {
            u[k++] = (char)c;
        } else {
            u[k++] = (char)(0xc0 | (c >> 6));
            u[k++] = (char)(0x80 | (c & 0x3f));
        }
    }
    j = json_stringn(u, k);
    free(u);
    return j ? j : json_null();
}

static json_t *json_logit(float x)
{
    return isfinite(x) ? json_real((double)x) : json_null();
}

/* Print a piece in quotes with control bytes escaped. */
static void put_piece(const char *s, int len)
{
    putchar('"');
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int piece_of(const kvv_tokenizer *tok, int32_t id, char *buf, size_t size)
{
    if (!tok)
        return 0;
    int n = kvv_token_piece(tok, id, buf, size);
    if (n < 0)
        return 0;
    return n < (int)size ? n : (int)size;
}

/* ------------------------------------------------------------ one step's report */

typedef struct {
    const kvv_tokenizer *tok;
    json_t *steps;      /* JSON array, or NULL in text mode */
    bool print_steps;   /* text mode: a line per step */
} reporter;

/* verify/decode.h's on_step: the step as a JSON object and/or a text line. */
static void report_step(void *user, const kvv_decode_step *st)
{
    reporter *rp = user;
    char piece[256];
    int plen = piece_of(rp->tok, st->argmax, piece, sizeof piece);
    if (rp->steps) {
        json_t *s = json_object();
        json_object_set_new(s, "step", json_integer(st->step));
        json_object_set_new(s, "pos", json_integer(st->pos));
        json_object_set_new(s, "input_token", json_integer(st->input));
        json_object_set_new(s, "argmax", json_integer(st->argmax));
        if (rp->tok)
            json_object_set_new(s, "argmax_piece", json_bytes(piece, (size_t)plen));
        json_t *top = json_array();
        for (int j = 0; j < st->k; j++) {
            json_t *pr = json_array();
            json_array_append_new(pr, json_integer(st->top[j]));
            json_array_append_new(pr, json_logit(st->row[st->top[j]]));
            json_array_append_new(top, pr);
        }
        json_object_set_new(s, "top", top);
        json_array_append_new(rp->steps, s);
    }
    if (!rp->print_steps)
        return;
    printf("step %d  pos %d  input %d  argmax %d ", st->step, st->pos, (int)st->input,
           (int)st->argmax);
    put_piece(piece, plen);
    if (st->k > 0) {
        printf("  top:");
        for (int j = 0; j < st->k; j++)
            printf(" %d:%.9g", st->top[j], (double)st->row[st->top[j]]);
    }
    putchar('\n');
}

/* ------------------------------------------------------------ the command */

static double seconds_since(const struct timespec *t0, clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static void print_phase(const char *what, int n, double wall, double cpu)
{
    fprintf(stderr, "; %s %d tokens %.3f s wall, %.3f s cpu (%.1f tokens/s wall, %.1f cpu)", what,
            n, wall, cpu, wall > 0 ? n / wall : 0.0, cpu > 0 ? n / cpu : 0.0);
}

/* --time: load, prompt and decode, on stderr. */
static void print_times(double load_wall, double load_cpu, int n_prompt,
                        const kvv_decode_result *r)
{
    fprintf(stderr, "time: load %.3f s wall, %.3f s cpu", load_wall, load_cpu);
    print_phase("prompt", n_prompt, r->prompt_wall, r->prompt_cpu);
    if (r->n_gen > 1)
        print_phase("decode", r->n_gen - 1, r->dec_wall, r->dec_cpu);
    fputc('\n', stderr);
}

static void print_ids(const char *label, const int32_t *ids, int n)
{
    printf("%s:", label);
    for (int i = 0; i < n; i++)
        printf(" %d", (int)ids[i]);
    putchar('\n');
}

/* Everything one run holds (run_free frees it). */
typedef struct {
    kvv_model *m;
    kvv_tokenizer *tok;      /* NULL when kvverify cannot tokenize the vocabulary */
    kvv_engine *e;
    int32_t *seq;            /* the prompt */
    int n_prompt;
    kvv_decode_result res;
    char *text;              /* the generated text (NULL without a tokenizer) */
    size_t text_len;
} run_state;

static void run_free(run_state *s)
{
    kvv_decode_result_free(&s->res);
    kvv_engine_close(s->e);
    kvv_tokenizer_free(s->tok);
    kvv_model_close(s->m);
    free(s->seq);
    free(s->text);
}

/* The model, its tokenizer, and the prompt ids (checked against the
 * vocabulary). @return 0 or the exit code (messages printed). */
static int load(const run_args *a, run_state *s)
{
    kvv_error err = {0};
    if (kvv_model_open(a->model_path, &s->m, &err))
        return kvv_cli_fail(&err);
    /* The tokenizer is needed for -p and for printing text; a model whose
     * vocabulary kvverify cannot tokenize still runs from --tokens. */
    if (kvv_tokenizer_open(s->m->gguf, &s->tok, &err)) {
        if (a->prompt.text)
            return kvv_cli_fail(&err);
        s->tok = NULL;
    }
    const char *source;
    int rc = kvv_prompt_cli_make(&a->prompt, s->m, 0, &s->seq, &s->n_prompt, &source);
    if (rc)
        return rc;
    const int nv = s->m->hp.n_vocab;
    for (int i = 0; i < s->n_prompt; i++)
        if (s->seq[i] < 0 || s->seq[i] >= nv) {
            fprintf(stderr, "kvverify run: option --tokens: id %d (item %d) is outside the "
                    "vocabulary 0..%d of %s\n", (int)s->seq[i], i + 1, nv - 1, a->model_path);
            return KVV_EXIT_BAD_INPUT;
        }
    return 0;
}

static kvv_status open_engine(const run_args *a, run_state *s, kvv_error *err)
{
    kvv_engine_opts eo = kvv_engine_cli_opts(&a->engine);
    eo.n_ctx = (int)a->n_ctx;
    eo.ggml = a->ggml;
    return kvv_engine_open(s->m, &eo, &s->e, err);
}

/* The generated text. */
static kvv_status conclude(run_state *s, kvv_error *err)
{
    if (s->tok && s->res.n_gen > 0)
        return kvv_detokenize(s->tok, s->res.gen, s->res.n_gen, &s->text, &s->text_len, err);
    return KVV_OK;
}

/* The JSON object to --json's FILE or stdout; steps (taken from the
 * reporter) already collected. @return 0 or the exit code. */
static int write_json(const run_args *a, const run_state *s, json_t *steps)
{
    const int nv = s->m->hp.n_vocab;
    const kvv_decode_result *r = &s->res;
    json_t *root = json_object();
    kvv_engine_desc d;
    kvv_engine_describe(s->e, &d);
    json_object_set_new(root, "model", json_string(a->model_path));
    json_object_set_new(root, "arch", json_string(s->m->hp.arch_name));
    json_t *ej = kvv_engine_desc_to_json(&d); /* the reports' engine object */
    if (ej)
        json_object_set_new(ej, "ggml_emulation", json_integer(a->ggml));
    json_object_set_new(root, "engine", ej ? ej : json_null());
    json_object_set_new(root, "mode", json_string(a->teacher ? "teacher_forced" : "greedy"));
    if (a->prompt.text)
        json_object_set_new(root, "prompt_text", json_string(a->prompt.text));
    json_t *pj = json_array();
    for (int i = 0; i < s->n_prompt; i++)
        json_array_append_new(pj, json_integer(s->seq[i]));
    json_object_set_new(root, "prompt_tokens", pj);
    if (!a->teacher) {
        json_t *gj = json_array();
        for (int i = 0; i < r->n_gen; i++)
            json_array_append_new(gj, json_integer(r->gen[i]));
        json_object_set_new(root, "generated_tokens", gj);
        if (s->text)
            json_object_set_new(root, "generated_text", json_bytes(s->text, s->text_len));
    }
    json_object_set_new(root, "steps", steps);
    json_object_set_new(root, "logits_not_finite",
                        json_pack("{s:I, s:I, s:I}", "logits", (json_int_t)r->n_logits, "nan",
                                  (json_int_t)r->n_nan, "inf", (json_int_t)r->n_inf));
    if (a->all_logits) {
        json_t *all = json_array();
        for (int t = 0; t < r->n_rows; t++) {
            json_t *row = json_array();
            for (int i = 0; i < nv; i++)
                json_array_append_new(row, json_logit(r->logits[(size_t)t * nv + i]));
            json_array_append_new(all, row);
        }
        json_object_set_new(root, "logits_all", all);
    }
    if (a->hash)
        json_object_set_new(root, "sha256", json_string(r->sha256));
    int rc = kvv_output_write_json(a->out.json_path, root, JSON_REAL_PRECISION(9) | JSON_COMPACT);
    json_decref(root);
    return rc;
}

/* Text: the generated ids and text, the hash. */
static void print_text(const run_args *a, const run_state *s)
{
    if (!a->teacher) {
        print_ids("generated", s->res.gen, s->res.n_gen);
        if (s->text) {
            printf("text: ");
            fwrite(s->text, 1, s->text_len, stdout);
            putchar('\n');
        }
    }
    if (a->hash)
        printf("sha256: %s\n", s->res.sha256);
}

int kvv_cmd_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != KVV_OPTS_RUN)
        return rc;
    kvv_error err = {0};
    struct timespec w0, c0;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    run_state s;
    memset(&s, 0, sizeof s);
    reporter rp = {NULL, NULL, false};
    kvv_status st = KVV_OK;
    rc = load(&a, &s);
    if (!rc && (st = open_engine(&a, &s, &err)))
        rc = kvv_cli_fail(&err);
    if (!rc) {
        rp.tok = s.tok;
        if (a.out.json_path)
            rp.steps = json_array();
        kvv_decode_opts o = {.engine = s.e, .prompt = s.seq, .n_prompt = s.n_prompt,
                             .n_gen = (int)a.n_gen, .teacher = a.teacher, .top_k = (int)a.top_k,
                             .hash = a.hash, .on_step = report_step, .user = &rp,
                             .progress = kvv_output_progress, .progress_user = &a.out};
        if (!a.out.stdout_taken) {
            rp.print_steps = a.teacher || a.top_given;
            if (!a.top_given && !a.teacher && !rp.steps)
                o.top_k = 0;
            kvv_engine_desc d; /* which engine, mode and kernel table ran */
            kvv_engine_describe(s.e, &d);
            kvv_engine_desc_print(stdout, &d);
            print_ids("prompt", s.seq, s.n_prompt);
        }
        const double load_wall = seconds_since(&w0, CLOCK_MONOTONIC);
        const double load_cpu = seconds_since(&c0, CLOCK_PROCESS_CPUTIME_ID);
        st = kvv_decode(&o, &s.res, &err);
        if (!st && a.time)
            print_times(load_wall, load_cpu, s.n_prompt, &s.res);
        if (!st)
            st = conclude(&s, &err);
        if (!st && !a.out.stdout_taken)
            print_text(&a, &s);
        rc = st ? kvv_cli_fail(&err) : 0;
    }
    if (!rc && a.out.json_path) {
        rc = write_json(&a, &s, rp.steps);
        rp.steps = NULL;
    }
    if (!st && !rc && (s.res.n_nan || s.res.n_inf)) {
        fprintf(stderr, "kvverify run: warning: %ld of %ld logits are not finite (%ld NaN, %ld "
                        "inf): the tokens and text are not meaningful\n",
                s.res.n_nan + s.res.n_inf, s.res.n_logits, s.res.n_nan, s.res.n_inf);
        rc = KVV_EXIT_FAIL;
    }
    json_decref(rp.steps);
    run_free(&s);
    kvv_prompt_cli_free(&a.prompt);
    return rc;
}

/*
 * cmd_run.c — `kvverify run`: greedy decoding or a teacher-forced pass with
 * any engine, printing token ids, text and logits.
 *
 *   kvverify run MODEL (-p TEXT | --tokens 1,2,3) [-n N] [--top K] [--teacher]
 *                [--json [--all-logits]] [--hash] [--cache-type T] [--engine E]
 *
 * Greedy: the prompt goes through the engine in one batch (logits of its last
 * position), then each generated token in its own forward call; the next
 * token is the argmax of the logits (engine/greedy.h, runtime/logits.h: the
 * lowest id on a tie, as llama.cpp's peer dumps; NaN never wins). Generation does not stop at EOS. Step i reports the position
 * whose logits chose generated token i.
 *
 * Teacher-forced (--teacher): the whole token list in one batch, logits at
 * every position; step t reports position t (its input token, argmax, top-K).
 *
 * Logits print with %.9g (round-trips fp32). --hash prints the sha256 of
 * every logit, K, V and residual of the run in a canonical order
 * (reference/ref_trace.h): the same hash means the same bits.
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
#include "engine/engine.h"
#include "engine/greedy.h"
#include "model/arch.h"
#include "model/tokenizer.h"
#include "reference/ref_trace.h"
#include "runtime/logits.h"
#include "verify/report/report.h"

typedef struct {
    const char *model_path;
    const char *prompt;      /* -p */
    int32_t *ids;            /* --tokens (owned) */
    int n_ids;
    bool raw;
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
    kvv_engine_cli_init(&a->engine, "run", "ref", KVV_ENGINE_OPT_ALL);
    a->engine.repack_default = true; /* one engine: decode speed over memory */
    kvv_output_cli_init(&a->out, "run", KVV_OUT_JSON | KVV_OUT_PROGRESS);
    a->out.json_help = "one JSON object (steps: position, argmax, top-K)";
}

static void run_usage(FILE *f)
{
    run_args a;
    run_args_init(&a);
    fprintf(f, "usage: kvverify run MODEL.gguf (-p TEXT | --tokens 1,2,3) [options]\n\n"
            "Greedy continuation of a prompt (token ids and text), or with --teacher a\n"
            "teacher-forced pass reporting the logits at every position.\n\n"
            "options:\n"
            "  -p, --prompt TEXT   prompt text (tokenized with BOS as the vocabulary says)\n"
            "  --tokens LIST       prompt as comma-separated token ids, used as given\n"
            "  --raw               with -p: add no special tokens (no BOS)\n"
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
    if (kvv_opts_value(o, "-p") || kvv_opts_value(o, "--prompt")) {
        if (o->value)
            a->prompt = o->value;
    } else if (kvv_opts_value(o, "--tokens")) {
        free(a->ids);
        a->ids = NULL;
        if (o->value && kvv_opts_int_list(o, "--tokens", o->value, &a->ids, &a->n_ids) &&
            a->n_ids == 0)
            kvv_opts_error(o, "option --tokens: empty list");
    } else if (kvv_opts_flag(o, "--raw")) {
        a->raw = true;
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
    else if (!a->prompt == !a->ids)
        kvv_opts_error(o, "give exactly one of -p TEXT and --tokens LIST");
    else if (a->raw && !a->prompt)
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
    const kvv_opt_group g[] = {kvv_engine_cli_group(&a->engine), kvv_output_cli_group(&a->out),
                               {own_option, own_finish, a}};
    int code = kvv_opts_parse(&o, run_usage, g, 3);
    if (code != KVV_OPTS_RUN) {
        free(a->ids);
        a->ids = NULL;
    }
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
    int n_vocab;
    int k;              /* top-K actually shown */
    int *top;           /* (k) scratch */
    json_t *steps;      /* JSON array, or NULL in text mode */
    bool print_steps;   /* text mode: a line per step */
} reporter;

static void report_step(reporter *rp, int step, int pos, int32_t input, const float *row)
{
    const int am = kvv_logits_argmax(row, rp->n_vocab);
    char piece[256];
    int plen = piece_of(rp->tok, am, piece, sizeof piece);
    if (rp->k > 0)
        kvv_logits_top_k(row, rp->n_vocab, rp->k, rp->top);
    if (rp->steps) {
        json_t *s = json_object();
        json_object_set_new(s, "step", json_integer(step));
        json_object_set_new(s, "pos", json_integer(pos));
        json_object_set_new(s, "input_token", json_integer(input));
        json_object_set_new(s, "argmax", json_integer(am));
        if (rp->tok)
            json_object_set_new(s, "argmax_piece", json_bytes(piece, (size_t)plen));
        json_t *top = json_array();
        for (int j = 0; j < rp->k; j++) {
            json_t *pr = json_array();
            json_array_append_new(pr, json_integer(rp->top[j]));
            json_array_append_new(pr, json_logit(row[rp->top[j]]));
            json_array_append_new(top, pr);
        }
        json_object_set_new(s, "top", top);
        json_array_append_new(rp->steps, s);
    }
    if (!rp->print_steps)
        return;
    printf("step %d  pos %d  input %d  argmax %d ", step, pos, (int)input, am);
    put_piece(piece, plen);
    if (rp->k > 0) {
        printf("  top:");
        for (int j = 0; j < rp->k; j++)
            printf(" %d:%.9g", rp->top[j], (double)row[rp->top[j]]);
    }
    putchar('\n');
}

/* ------------------------------------------------------------ the command */

/* Wall-clock and process CPU seconds. */
typedef struct {
    double wall, cpu;
} stamp;

static stamp now_s(void)
{
    struct timespec w, c;
    clock_gettime(CLOCK_MONOTONIC, &w);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    stamp s = {(double)w.tv_sec + 1e-9 * (double)w.tv_nsec,
               (double)c.tv_sec + 1e-9 * (double)c.tv_nsec};
    return s;
}

static void stamp_add(stamp *acc, stamp from, stamp to)
{
    acc->wall += to.wall - from.wall;
    acc->cpu += to.cpu - from.cpu;
}

static void print_phase(const char *what, int n, stamp t)
{
    fprintf(stderr, "; %s %d tokens %.3f s wall, %.3f s cpu (%.1f tokens/s wall, %.1f cpu)", what,
            n, t.wall, t.cpu, t.wall > 0 ? n / t.wall : 0.0, t.cpu > 0 ? n / t.cpu : 0.0);
}

static void print_times(stamp load, int n_prompt, stamp prompt, int n_dec, stamp dec)
{
    fprintf(stderr, "time: load %.3f s wall, %.3f s cpu", load.wall, load.cpu);
    print_phase("prompt", n_prompt, prompt);
    if (n_dec > 0)
        print_phase("decode", n_dec, dec);
    fputc('\n', stderr);
}

static void print_ids(const char *label, const int32_t *ids, int n)
{
    printf("%s:", label);
    for (int i = 0; i < n; i++)
        printf(" %d", (int)ids[i]);
    putchar('\n');
}

/* Teacher forcing: the whole prompt in one batch, logits at every position,
 * with the trace's hooks and its logit rows (if any). */
static kvv_status teacher_forward(kvv_engine *e, kvv_trace *tr, int n, const int32_t *tok,
                                  float *logits, int n_vocab, kvv_error *err)
{
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    if (!pos)
        return kvv_error_set(err, KVV_ERR_NOMEM, "run: out of memory");
    for (int i = 0; i < n; i++)
        pos[i] = i;
    kvv_hooks h;
    if (tr)
        h = kvv_trace_hooks(tr);
    kvv_status st = kvv_engine_forward(e, n, tok, pos, tr ? &h : NULL, KVV_LOGITS_ALL, logits, err);
    for (int i = 0; !st && tr && i < n; i++)
        kvv_trace_add_logits(tr, i, logits + (size_t)i * n_vocab);
    free(pos);
    return st;
}

/* Everything one run holds (run_free frees it). */
typedef struct {
    kvv_model *m;
    kvv_tokenizer *tok;      /* NULL when kvverify cannot tokenize the vocabulary */
    kvv_engine *e;
    kvv_trace *tr;           /* --hash, else NULL */
    int32_t *seq;            /* the prompt */
    int n_prompt;
    int32_t *gen;            /* the generated tokens */
    int n_gen;
    float *logits;           /* [teacher ? n_prompt : 1][n_vocab] */
    int *top;                /* top-K scratch */
    char *text;              /* the generated text (NULL without a tokenizer) */
    size_t text_len;
    char hash[65];           /* --hash */
    stamp t_load, t_prompt, t_dec;
    long n_logits;           /* logits produced (rows x n_vocab) */
    long n_nan, n_inf;       /* of them NaN, +-inf */
} run_state;

/* Count the rows' non-finite logits into s. */
static void count_logits(run_state *s, const float *rows, int n_rows)
{
    const long n = (long)n_rows * s->m->hp.n_vocab;
    for (long i = 0; i < n; i++) {
        s->n_nan += isnan(rows[i]) != 0;
        s->n_inf += isinf(rows[i]) != 0;
    }
    s->n_logits += n;
}

static void run_free(run_state *s)
{
    kvv_trace_free(s->tr);
    kvv_engine_close(s->e);
    kvv_tokenizer_free(s->tok);
    kvv_model_close(s->m);
    free(s->seq);
    free(s->gen);
    free(s->logits);
    free(s->top);
    free(s->text);
}

/* The model, its tokenizer, and the prompt ids (checked against the vocabulary). */
static kvv_status load(run_args *a, run_state *s, kvv_error *err)
{
    kvv_status st;
    if ((st = kvv_model_open(a->model_path, &s->m, err)))
        return st;
    /* The tokenizer is needed for -p and for printing text; a model whose
     * vocabulary kvverify cannot tokenize still runs from --tokens. */
    if ((st = kvv_tokenizer_open(s->m->gguf, &s->tok, err))) {
        if (a->prompt)
            return st;
        s->tok = NULL;
        memset(err, 0, sizeof *err);
    }
    const int nv = s->m->hp.n_vocab;
    if (a->prompt) {
        if ((st = kvv_tokenize(s->tok, a->prompt, strlen(a->prompt), !a->raw, &s->seq,
                               &s->n_prompt, err)))
            return st;
        if (s->n_prompt == 0)
            return kvv_error_set(err, KVV_ERR_USAGE, "run: the prompt tokenizes to no tokens");
    } else {
        s->seq = a->ids;
        a->ids = NULL;
        s->n_prompt = a->n_ids;
    }
    for (int i = 0; i < s->n_prompt; i++)
        if (s->seq[i] < 0 || s->seq[i] >= nv)
            return kvv_error_set(err, KVV_ERR_USAGE, "run: option --tokens: id %d (item %d) is "
                                 "outside the vocabulary 0..%d of %s", (int)s->seq[i], i + 1,
                                 nv - 1, a->model_path);
    return KVV_OK;
}

/* The engine, sized and checked against the run; the trace and buffers. */
static kvv_status open_engine(const run_args *a, run_state *s, kvv_error *err)
{
    kvv_engine_opts eo = kvv_engine_cli_opts(&a->engine);
    eo.n_ctx = (int)a->n_ctx;
    eo.ggml = a->ggml;
    kvv_status st;
    if ((st = kvv_engine_open(s->m, &eo, &s->e, err)))
        return st;
    const int nv = s->m->hp.n_vocab;
    const int n_ctx = kvv_engine_options(s->e)->n_ctx; /* the resolved size (a plugin may expose no cache) */
    /* Greedy evaluates n_prompt + n_gen - 1 positions. */
    if (s->n_prompt + (s->n_gen > 0 ? s->n_gen - 1 : 0) > n_ctx)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "run: %d prompt tokens + %d generated do not fit the %d-position "
                             "cache (see --n-ctx)", s->n_prompt, s->n_gen, n_ctx);
    if (a->hash && !(s->tr = kvv_trace_new(&s->m->hp, n_ctx)))
        return kvv_error_set(err, KVV_ERR_NOMEM, "run: out of memory for --hash");
    const int k = (int)(a->top_k < nv ? a->top_k : nv);
    const size_t rows = a->teacher ? (size_t)s->n_prompt : 1;
    s->logits = malloc(sizeof(float) * rows * (size_t)nv);
    s->top = malloc(sizeof(int) * (size_t)(k > 0 ? k : 1));
    s->gen = malloc(sizeof(int32_t) * (size_t)(s->n_gen > 0 ? s->n_gen : 1));
    if (!s->logits || !s->top || !s->gen)
        return kvv_error_set(err, KVV_ERR_NOMEM, "run: out of memory");
    return KVV_OK;
}

/* The greedy run's view of each row (engine/greedy.h calls it). */
typedef struct {
    const run_args *a;
    run_state *s;
    reporter *rp;
    stamp t0;     /* before the prompt */
    stamp last;   /* when the previous row was done with */
} greedy_user;

/* Row i: timed (the forward calls only), hashed, counted and reported. */
static kvv_status greedy_row(void *user, int i, const float *row, int32_t argmax, kvv_error *err)
{
    (void)argmax, (void)err;
    greedy_user *u = user;
    run_state *s = u->s;
    stamp_add(i == 0 ? &s->t_prompt : &s->t_dec, i == 0 ? u->t0 : u->last, now_s());
    const int pos = s->n_prompt - 1 + i;
    if (s->tr)
        kvv_trace_add_logits(s->tr, pos, row);
    count_logits(s, row, 1);
    report_step(u->rp, i, pos, i == 0 ? s->seq[s->n_prompt - 1] : s->gen[i - 1], row);
    kvv_output_progress((void *)&u->a->out, "run", i + 1, s->n_gen);
    u->last = now_s();
    return KVV_OK;
}

/* The forward passes, each step reported: teacher-forced (one batch, every
 * position) or greedy (engine/greedy.h: the prompt, then one token a call). */
static kvv_status decode(const run_args *a, run_state *s, reporter *rp, kvv_error *err)
{
    const int nv = s->m->hp.n_vocab;
    const stamp t0 = now_s();
    if (a->teacher) {
        kvv_status st = teacher_forward(s->e, s->tr, s->n_prompt, s->seq, s->logits, nv, err);
        if (st)
            return st;
        stamp_add(&s->t_prompt, t0, now_s());
        count_logits(s, s->logits, s->n_prompt);
        for (int t = 0; t < s->n_prompt; t++)
            report_step(rp, t, t, s->seq[t], s->logits + (size_t)t * nv);
        return KVV_OK;
    }
    kvv_hooks h;
    if (s->tr)
        h = kvv_trace_hooks(s->tr);
    greedy_user u = {a, s, rp, t0, t0};
    const kvv_greedy g = {.forward = kvv_greedy_engine_forward, .ctx = s->e,
                          .hooks = s->tr ? &h : NULL, .n_vocab = nv, .prompt = s->seq,
                          .n_prompt = s->n_prompt, .n_gen = s->n_gen, .one_row = true,
                          .on_row = greedy_row, .user = &u};
    return kvv_greedy_decode(&g, s->logits, s->gen, NULL, err);
}

/* The run's hash (--hash) and generated text. */
static kvv_status conclude(run_state *s, kvv_error *err)
{
    if (s->tr) {
        if (kvv_trace_dropped(s->tr))
            return kvv_error_set(err, KVV_ERR_NOMEM, "run: --hash could not record %ld rows",
                                 kvv_trace_dropped(s->tr));
        kvv_trace_sha256_hex(s->tr, s->hash);
    }
    if (s->tok && s->n_gen > 0)
        return kvv_detokenize(s->tok, s->gen, s->n_gen, &s->text, &s->text_len, err);
    return KVV_OK;
}

/* --json: one object on stdout; steps (taken from rp) already collected. */
/* The JSON object to --json's FILE or stdout. @return 0 or the exit code. */
static int write_json(const run_args *a, const run_state *s, json_t *steps)
{
    const int nv = s->m->hp.n_vocab;
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
    if (a->prompt)
        json_object_set_new(root, "prompt_text", json_string(a->prompt));
    json_t *pj = json_array();
    for (int i = 0; i < s->n_prompt; i++)
        json_array_append_new(pj, json_integer(s->seq[i]));
    json_object_set_new(root, "prompt_tokens", pj);
    if (!a->teacher) {
        json_t *gj = json_array();
        for (int i = 0; i < s->n_gen; i++)
            json_array_append_new(gj, json_integer(s->gen[i]));
        json_object_set_new(root, "generated_tokens", gj);
        if (s->text)
            json_object_set_new(root, "generated_text", json_bytes(s->text, s->text_len));
    }
    json_object_set_new(root, "steps", steps);
    json_object_set_new(root, "logits_not_finite",
                        json_pack("{s:I, s:I, s:I}", "logits", (json_int_t)s->n_logits, "nan",
                                  (json_int_t)s->n_nan, "inf", (json_int_t)s->n_inf));
    if (a->all_logits) {
        json_t *all = json_array();
        for (int t = 0; t < s->n_prompt; t++) {
            json_t *row = json_array();
            for (int i = 0; i < nv; i++)
                json_array_append_new(row, json_logit(s->logits[(size_t)t * nv + i]));
            json_array_append_new(all, row);
        }
        json_object_set_new(root, "logits_all", all);
    }
    if (s->tr)
        json_object_set_new(root, "sha256", json_string(s->hash));
    int rc = kvv_output_write_json(a->out.json_path, root, JSON_REAL_PRECISION(9) | JSON_COMPACT);
    json_decref(root);
    return rc;
}

/* Text: the generated ids and text, the hash. */
static void print_text(const run_args *a, const run_state *s)
{
    if (!a->teacher) {
        print_ids("generated", s->gen, s->n_gen);
        if (s->text) {
            printf("text: ");
            fwrite(s->text, 1, s->text_len, stdout);
            putchar('\n');
        }
    }
    if (s->tr)
        printf("sha256: %s\n", s->hash);
}

int kvv_cmd_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != KVV_OPTS_RUN)
        return rc;
    kvv_error err = {0};
    const stamp t_start = now_s();
    run_state s;
    memset(&s, 0, sizeof s);
    s.n_gen = a.teacher ? 0 : (int)a.n_gen;
    reporter rp = {NULL, 0, 0, NULL, NULL, false};
    kvv_status st = load(&a, &s, &err);
    if (!st)
        st = open_engine(&a, &s, &err);
    if (!st) {
        rp.tok = s.tok;
        rp.n_vocab = s.m->hp.n_vocab;
        rp.k = (int)(a.top_k < rp.n_vocab ? a.top_k : rp.n_vocab);
        rp.top = s.top;
        if (a.out.json_path)
            rp.steps = json_array();
        if (!a.out.stdout_taken) {
            rp.print_steps = a.teacher || a.top_given;
            if (!a.top_given && !a.teacher && !rp.steps)
                rp.k = 0;
            kvv_engine_desc d; /* which engine, mode and kernel table ran */
            kvv_engine_describe(s.e, &d);
            kvv_engine_desc_print(stdout, &d);
            print_ids("prompt", s.seq, s.n_prompt);
        }
        stamp_add(&s.t_load, t_start, now_s());
        st = decode(&a, &s, &rp, &err);
    }
    if (!st && a.time)
        print_times(s.t_load, s.n_prompt, s.t_prompt, s.n_gen > 0 ? s.n_gen - 1 : 0, s.t_dec);
    if (!st)
        st = conclude(&s, &err);
    if (!st && !a.out.stdout_taken)
        print_text(&a, &s);
    rc = st ? kvv_cli_fail(&err) : 0;
    if (!st && a.out.json_path) {
        rc = write_json(&a, &s, rp.steps);
        rp.steps = NULL;
    }
    if (!st && (s.n_nan || s.n_inf)) {
        fprintf(stderr, "kvverify run: warning: %ld of %ld logits are not finite (%ld NaN, %ld "
                        "inf): the tokens and text are not meaningful\n",
                s.n_nan + s.n_inf, s.n_logits, s.n_nan, s.n_inf);
        rc = rc ? rc : KVV_EXIT_FAIL;
    }
    json_decref(rp.steps);
    run_free(&s);
    free(a.ids);
    return rc;
}

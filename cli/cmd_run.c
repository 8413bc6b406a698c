/*
 * cmd_run.c — `kvverify run`: greedy decoding or a teacher-forced pass with
 * any engine, printing token ids, text and logits.
 *
 *   kvverify run MODEL (-p TEXT | --tokens 1,2,3) [-n N] [--top K] [--teacher]
 *                [--json [--all-logits]] [--hash] [--cache-type T] [--engine E]
 *
 * Greedy: the prompt goes through the engine in one batch (logits of its last
 * position), then each generated token in its own forward call; the next
 * token is the argmax of the logits, the lowest id on a tie (as llama.cpp's
 * peer dumps). Generation does not stop at EOS. Step i reports the position
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
#include "cli/opts.h"
#include "engine/engine.h"
#include "model/arch.h"
#include "model/tokenizer.h"
#include "reference/ref_trace.h"

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: kvverify run MODEL.gguf (-p TEXT | --tokens 1,2,3) [options]\n\n"
            "Greedy continuation of a prompt (token ids and text), or with --teacher a\n"
            "teacher-forced pass reporting the logits at every position.\n\n"
            "options:\n"
            "  -p, --prompt TEXT     prompt text (tokenized with BOS as the vocabulary says)\n"
            "  --tokens LIST         prompt as comma-separated token ids, used as given\n"
            "  --raw                 with -p: add no special tokens (no BOS)\n"
            "  -n N                  tokens to generate (default 16)\n"
            "  --top K               show the K largest logits at each step (default: none\n"
            "                        in greedy text output, 5 otherwise)\n"
            "  --teacher             feed the whole token list, report every position\n"
            "  --json                one JSON object on stdout: steps with position, argmax,\n"
            "                        top-K [id, logit] pairs\n"
            "  --all-logits          with --teacher --json: every logit of every position\n"
            "  --hash                sha256 over all logits, K, V and residuals of the run\n"
            "  --time                print load, prompt and decode times (tokens/s) on stderr\n"
            "  --engine NAME         ref (default) or another registered engine\n"
            "  --mode M              engine mode: exact (ref), fast or invariant (cpu)\n"
            "  --threads N           engine threads (cpu engine)\n"
            "  --cache-type T        KV cache storage: f32 (default), f16, bf16\n"
            "  --n-ctx N             cache positions (default: min(context_length, 4096))\n"
            "  --emulate-ggml        ref engine: emulate llama.cpp's CPU shortcuts (fp16 GELU\n"
            "                        table; activations rounded to fp16 / quantized to Q8_0\n"
            "                        before F16 / Q8_0 matmuls)\n"
            "  -h, --help            this help\n\n"
            "exit codes: 0 done, 2 bad input or usage, 77 unsupported architecture\n");
}

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
    bool teacher, json, all_logits, hash, time;
    kvv_engine_opts eo;
} run_args;

/* @return 0 to go on, else an exit code (help printed: 0 via *done). */
static int parse_args(int argc, char **argv, run_args *a, bool *done)
{
    kvv_opts o;
    kvv_opts_init(&o, "run", argc, argv);
    memset(a, 0, sizeof *a);
    a->n_gen = 16;
    a->top_k = 5;
    a->eo = kvv_engine_opts_default();
    long v;
    while (kvv_opts_next(&o)) {
        if (kvv_opts_flag(&o, "-h") || kvv_opts_flag(&o, "--help")) {
            run_usage(stdout);
            *done = true;
            free(a->ids);
            a->ids = NULL;
            return 0;
        } else if (kvv_opts_value(&o, "-p") || kvv_opts_value(&o, "--prompt")) {
            if (o.value)
                a->prompt = o.value;
        } else if (kvv_opts_value(&o, "--tokens")) {
            free(a->ids);
            a->ids = NULL;
            if (o.value && kvv_opts_int_list(&o, "--tokens", o.value, &a->ids, &a->n_ids) &&
                a->n_ids == 0)
                kvv_opts_error(&o, "option --tokens: empty list");
        } else if (kvv_opts_flag(&o, "--raw")) {
            a->raw = true;
        } else if (kvv_opts_value(&o, "-n")) {
            if (o.value && kvv_opts_int(&o, "-n", o.value, 0, 1 << 20, &a->n_gen))
                a->n_given = true;
        } else if (kvv_opts_value(&o, "--top")) {
            if (o.value && kvv_opts_int(&o, "--top", o.value, 0, 1 << 24, &a->top_k))
                a->top_given = true;
        } else if (kvv_opts_flag(&o, "--teacher")) {
            a->teacher = true;
        } else if (kvv_opts_flag(&o, "--json")) {
            a->json = true;
        } else if (kvv_opts_flag(&o, "--all-logits")) {
            a->all_logits = true;
        } else if (kvv_opts_flag(&o, "--hash")) {
            a->hash = true;
        } else if (kvv_opts_flag(&o, "--emulate-ggml")) {
            a->eo.ggml = KVV_GGML_GELU_FP16 | KVV_GGML_ACT_QUANT;
        } else if (kvv_opts_flag(&o, "--time")) {
            a->time = true;
        } else if (kvv_opts_value(&o, "--engine")) {
            if (o.value)
                a->eo.name = o.value;
        } else if (kvv_opts_value(&o, "--mode")) {
            if (o.value && !kvv_mode_from_name(o.value, &a->eo.mode))
                kvv_opts_error(&o, "option --mode: '%s' is not exact, fast or invariant", o.value);
        } else if (kvv_opts_value(&o, "--threads")) {
            if (o.value && kvv_opts_int(&o, "--threads", o.value, 1, 1024, &v))
                a->eo.n_threads = (int)v;
        } else if (kvv_opts_value(&o, "--cache-type")) {
            if (o.value && !kvv_cache_type_from_name(o.value, &a->eo.cache_type))
                kvv_opts_error(&o, "option --cache-type: '%s' is not f32, f16 or bf16", o.value);
        } else if (kvv_opts_value(&o, "--n-ctx")) {
            if (o.value && kvv_opts_int(&o, "--n-ctx", o.value, 1, 1 << 20, &v))
                a->eo.n_ctx = (int)v;
        } else if (kvv_opts_positional(&o) && !a->model_path) {
            a->model_path = o.arg;
        } else {
            kvv_opts_unknown(&o);
        }
    }
    if (!o.failed && !a->model_path)
        kvv_opts_error(&o, "missing MODEL.gguf");
    if (!o.failed && !a->prompt == !a->ids)
        kvv_opts_error(&o, "give exactly one of -p TEXT and --tokens LIST");
    if (!o.failed && a->raw && !a->prompt)
        kvv_opts_error(&o, "--raw applies to -p only");
    if (!o.failed && a->teacher && a->n_given)
        kvv_opts_error(&o, "-n does not apply to --teacher (it reports every position)");
    if (!o.failed && a->all_logits && !(a->teacher && a->json))
        kvv_opts_error(&o, "--all-logits needs --teacher and --json");
    if (!o.failed && !a->teacher && a->n_gen == 0)
        kvv_opts_error(&o, "option -n: generate at least 1 token");
    if (o.failed) {
        free(a->ids);
        a->ids = NULL;
        return KVV_EXIT_BAD_INPUT;
    }
    return 0;
}

/* ------------------------------------------------------------ logits helpers */

static int argmax_row(const float *x, int n)
{
    int best = 0; /* lowest id wins a tie */
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* The k largest logits, descending, equal values by ascending id (NaN last). */
static void top_k(const float *x, int n, int k, int *ids)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int q = 0; q < j && !taken; q++)
                taken = ids[q] == i;
            if (taken)
                continue;
            if (best < 0 || x[i] > x[best] || (x[best] != x[best] && x[i] == x[i]))
                best = i;
        }
        ids[j] = best;
    }
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
    const run_args *a;
    const kvv_tokenizer *tok;
    int n_vocab;
    int k;              /* top-K actually shown */
    int *top;           /* (k) scratch */
    json_t *steps;      /* JSON array, or NULL in text mode */
    bool print_steps;   /* text mode: a line per step */
} reporter;

static void report_step(reporter *rp, int step, int pos, int32_t input, const float *row)
{
    const int am = argmax_row(row, rp->n_vocab);
    char piece[256];
    int plen = piece_of(rp->tok, am, piece, sizeof piece);
    if (rp->k > 0)
        top_k(row, rp->n_vocab, rp->k, rp->top);
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
        return;
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

/* Forward n tokens at positions start.. with hooks of the trace (if any),
 * recording returned logit rows into the trace. */
static kvv_status step_forward(kvv_engine *e, kvv_trace *tr, int n, const int32_t *tok, int start,
                               kvv_logits_mode lm, float *logits, int n_vocab, kvv_error *err)
{
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    if (!pos)
        return kvv_error_set(err, KVV_ERR_NOMEM, "run: out of memory");
    for (int i = 0; i < n; i++)
        pos[i] = start + i;
    kvv_hooks h;
    if (tr)
        h = kvv_trace_hooks(tr);
    kvv_status st = kvv_engine_forward(e, n, tok, pos, tr ? &h : NULL, lm, logits, err);
    if (!st && tr) {
        if (lm == KVV_LOGITS_ALL)
            for (int i = 0; i < n; i++)
                kvv_trace_add_logits(tr, start + i, logits + (size_t)i * n_vocab);
        else if (lm == KVV_LOGITS_LAST)
            kvv_trace_add_logits(tr, start + n - 1, logits);
    }
    free(pos);
    return st;
}

int kvv_cmd_run(int argc, char **argv)
{
    run_args a;
    bool done = false;
    int rc = parse_args(argc, argv, &a, &done);
    if (rc || done)
        return rc;

    kvv_error err = {0};
    const stamp t_start = now_s();
    stamp t_prompt = {0, 0}, t_dec = {0, 0}, t_load = {0, 0};
    kvv_model *m = NULL;
    kvv_tokenizer *tok = NULL;
    kvv_engine *e = NULL;
    kvv_trace *tr = NULL;
    int32_t *seq = NULL, *gen = NULL;
    float *logits = NULL;
    int *top = NULL;
    json_t *root = NULL;
    reporter rp = {&a, NULL, 0, 0, NULL, NULL, false};
    kvv_status st;

    if ((st = kvv_model_open(a.model_path, &m, &err)))
        goto fail;
    /* The tokenizer is needed for -p and for printing text; a model whose
     * vocabulary kvverify cannot tokenize still runs from --tokens. */
    if (kvv_tokenizer_open(m->gguf, &tok, &err)) {
        if (a.prompt)
            goto fail_err;
        tok = NULL;
        memset(&err, 0, sizeof err);
    }
    const int nv = m->hp.n_vocab;
    int n_prompt;
    if (a.prompt) {
        if ((st = kvv_tokenize(tok, a.prompt, strlen(a.prompt), !a.raw, &seq, &n_prompt, &err)))
            goto fail;
        if (n_prompt == 0) {
            kvv_error_set(&err, KVV_ERR_USAGE, "run: the prompt tokenizes to no tokens");
            goto fail_err;
        }
    } else {
        seq = a.ids;
        a.ids = NULL;
        n_prompt = a.n_ids;
    }
    for (int i = 0; i < n_prompt; i++)
        if (seq[i] < 0 || seq[i] >= nv) {
            kvv_error_set(&err, KVV_ERR_USAGE, "run: option --tokens: id %d (item %d) is outside "
                          "the vocabulary 0..%d of %s", (int)seq[i], i + 1, nv - 1, a.model_path);
            goto fail_err;
        }
    const int n_gen = a.teacher ? 0 : (int)a.n_gen;
    if ((st = kvv_engine_open(m, &a.eo, &e, &err)))
        goto fail;
    const int n_ctx = e->opts.n_ctx; /* the resolved size (a plugin may expose no cache) */
    /* Greedy evaluates n_prompt + n_gen - 1 positions. */
    if (n_prompt + (n_gen > 0 ? n_gen - 1 : 0) > n_ctx) {
        kvv_error_set(&err, KVV_ERR_USAGE,
                      "run: %d prompt tokens + %d generated do not fit the %d-position cache "
                      "(see --n-ctx)", n_prompt, n_gen, n_ctx);
        goto fail_err;
    }
    if (a.hash && !(tr = kvv_trace_new(&m->hp, n_ctx))) {
        kvv_error_set(&err, KVV_ERR_NOMEM, "run: out of memory for --hash");
        goto fail_err;
    }
    const int k = (int)(a.top_k < nv ? a.top_k : nv);
    const size_t rows = a.teacher ? (size_t)n_prompt : 1;
    logits = malloc(sizeof(float) * rows * (size_t)nv);
    top = malloc(sizeof(int) * (size_t)(k > 0 ? k : 1));
    gen = malloc(sizeof(int32_t) * (size_t)(n_gen > 0 ? n_gen : 1));
    if (!logits || !top || !gen) {
        kvv_error_set(&err, KVV_ERR_NOMEM, "run: out of memory");
        goto fail_err;
    }

    rp.tok = tok;
    rp.n_vocab = nv;
    rp.k = k;
    rp.top = top;
    if (a.json) {
        root = json_object();
        rp.steps = json_array();
    } else {
        rp.print_steps = a.teacher || a.top_given;
        if (!a.top_given && !a.teacher)
            rp.k = 0;
        print_ids("prompt", seq, n_prompt);
    }

    stamp_add(&t_load, t_start, now_s());
    const stamp t0 = now_s();
    if (a.teacher) {
        if ((st = step_forward(e, tr, n_prompt, seq, 0, KVV_LOGITS_ALL, logits, nv, &err)))
            goto fail;
        stamp_add(&t_prompt, t0, now_s());
        for (int t = 0; t < n_prompt; t++)
            report_step(&rp, t, t, seq[t], logits + (size_t)t * nv);
    } else {
        if ((st = step_forward(e, tr, n_prompt, seq, 0, KVV_LOGITS_LAST, logits, nv, &err)))
            goto fail;
        stamp_add(&t_prompt, t0, now_s());
        for (int s = 0; s < n_gen; s++) {
            const int pos = n_prompt - 1 + s;
            report_step(&rp, s, pos, s == 0 ? seq[n_prompt - 1] : gen[s - 1], logits);
            gen[s] = argmax_row(logits, nv);
            const stamp t1 = now_s();
            if (s + 1 < n_gen &&
                (st = step_forward(e, tr, 1, &gen[s], pos + 1, KVV_LOGITS_LAST, logits, nv, &err)))
                goto fail;
            stamp_add(&t_dec, t1, now_s());
        }
    }
    if (a.time)
        print_times(t_load, n_prompt, t_prompt, n_gen > 0 ? n_gen - 1 : 0, t_dec);

    char hex[65] = "";
    if (tr) {
        if (kvv_trace_dropped(tr)) {
            kvv_error_set(&err, KVV_ERR_NOMEM, "run: --hash could not record %ld rows",
                          kvv_trace_dropped(tr));
            goto fail_err;
        }
        kvv_trace_sha256_hex(tr, hex);
    }
    char *text = NULL;
    size_t text_len = 0;
    if (tok && n_gen > 0 && (st = kvv_detokenize(tok, gen, n_gen, &text, &text_len, &err)))
        goto fail;

    if (a.json) {
        kvv_engine_desc d;
        kvv_engine_describe(e, &d);
        json_object_set_new(root, "model", json_string(a.model_path));
        json_object_set_new(root, "arch", json_string(m->hp.arch_name));
        json_t *ej = json_object();
        json_object_set_new(ej, "name", json_string(d.name));
        json_object_set_new(ej, "mode", json_string(d.mode));
        json_object_set_new(ej, "cache_type", json_string(d.cache_type));
        json_object_set_new(ej, "n_threads", json_integer(d.n_threads));
        json_object_set_new(ej, "control", json_integer(d.control));
        json_object_set_new(ej, "ggml_emulation", json_integer(a.eo.ggml));
        json_object_set_new(ej, "kernels", json_string(d.kernels));
        json_object_set_new(root, "engine", ej);
        json_object_set_new(root, "mode", json_string(a.teacher ? "teacher_forced" : "greedy"));
        if (a.prompt)
            json_object_set_new(root, "prompt_text", json_string(a.prompt));
        json_t *pj = json_array();
        for (int i = 0; i < n_prompt; i++)
            json_array_append_new(pj, json_integer(seq[i]));
        json_object_set_new(root, "prompt_tokens", pj);
        if (!a.teacher) {
            json_t *gj = json_array();
            for (int i = 0; i < n_gen; i++)
                json_array_append_new(gj, json_integer(gen[i]));
            json_object_set_new(root, "generated_tokens", gj);
            if (text)
                json_object_set_new(root, "generated_text", json_bytes(text, text_len));
        }
        json_object_set_new(root, "steps", rp.steps);
        rp.steps = NULL;
        if (a.all_logits) {
            json_t *all = json_array();
            for (int t = 0; t < n_prompt; t++) {
                json_t *row = json_array();
                for (int i = 0; i < nv; i++)
                    json_array_append_new(row, json_logit(logits[(size_t)t * nv + i]));
                json_array_append_new(all, row);
            }
            json_object_set_new(root, "logits_all", all);
        }
        if (tr)
            json_object_set_new(root, "sha256", json_string(hex));
        json_dumpf(root, stdout, JSON_REAL_PRECISION(9) | JSON_COMPACT);
        putchar('\n');
    } else {
        if (!a.teacher) {
            print_ids("generated", gen, n_gen);
            if (text) {
                printf("text: ");
                fwrite(text, 1, text_len, stdout);
                putchar('\n');
            }
        }
        if (tr)
            printf("sha256: %s\n", hex);
    }
    free(text);
    rc = 0;
    goto out;

fail:
    (void)st;
fail_err:
    rc = kvv_cli_fail(&err);
out:
    json_decref(root);
    json_decref(rp.steps);
    kvv_trace_free(tr);
    kvv_engine_close(e);
    kvv_tokenizer_free(tok);
    kvv_model_close(m);
    free(seq);
    free(gen);
    free(logits);
    free(top);
    free(a.ids);
    return rc;
}

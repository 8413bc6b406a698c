/*
 * cmd_bench.c — `kvverify bench MODEL`: prompt and decode throughput of an
 * engine (median of --repeats runs), with the roofline of the model beside
 * it: FLOPs and weight bytes per token, and the GFLOP/s and GB/s the
 * measured rates imply.
 *
 * One repeat: clear the cache, process the prompt in one forward call
 * (logits of the last row only, as llama-bench's pp test); clear it again,
 * then decode --gen tokens one forward call each from position 0 (as
 * llama-bench's tg test, which also starts from an empty cache; decoding
 * after a long prompt adds the attention over it). Token ids are
 * pseudo-random from --seed. A warm-up pass (up to 8 prompt tokens) first
 * pages the mapped weights in. Beside wall-clock rates the command reports
 * the process CPU time over wall time of each phase ("cpu" column): on a
 * shared machine a figure well below the thread count means the rates were
 * measured while other processes held the cores.
 */
#include <cblas.h>
#include <jansson.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/engine.h"
#include "model/tensor_types.h"
#include "verify/audit.h"
#include "verify/check.h"

typedef struct {
    const char *model_path, *isa;
    bool dequant_all, f32_act, roofline;
    long prompt, gen, repeats;
    uint64_t seed;
    kvv_engine_cli engine;   /* --engine (default cpu) --mode --threads --cache-type */
    kvv_output_cli out;      /* --json (stdout), --json=FILE */
} bench_args;

static void bench_args_init(bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->prompt = 128;
    a->gen = 64;
    a->repeats = 3;
    a->seed = 1;
    kvv_engine_cli_init(&a->engine, "bench", "cpu", KVV_ENGINE_OPT_ALL);
    kvv_output_cli_init(&a->out, "bench", KVV_OUT_JSON_STDOUT | KVV_OUT_JSON_FILE);
    a->out.json_help = "one JSON object instead of the table";
}

static void help(FILE *f)
{
    bench_args a;
    bench_args_init(&a);
    fprintf(f, "usage: kvverify bench MODEL [options]\n\n"
            "Prompt (prefill) and decode throughput in tokens/s, median of repeats, with the\n"
            "model's FLOPs and weight bytes per token and the GFLOP/s and GB/s they imply.\n\n");
    kvv_engine_cli_help(f, &a.engine, false);
    fprintf(f, "  --prompt N          prompt tokens per repeat (default 128; 0 skips)\n"
            "  --gen N             decoded tokens per repeat, from an empty cache as\n"
            "                      llama-bench's tg test (default 64; 0 skips)\n"
            "  --repeats R         repeats; the median is reported (default 3)\n"
            "  --seed S            token ids (default 1)\n"
            "  --isa NAME          cpu: the kernel table, generic, avx2 or avx512 (default: the\n"
            "                      widest this CPU runs; kvverify info --cpu lists them)\n"
            "  --dequant-all       cpu: hold every quantized weight as F32 (for comparison)\n"
            "  --f32-act           cpu fast: fp32 activations for Q8_0/Q4_0 products instead\n"
            "                      of rounding them to Q8_0 (for comparison)\n"
            "  --roofline          also measure this machine's roofline: OpenBLAS sgemm\n"
            "                      GFLOP/s (128x1536x576, --threads) and read GB/s (256 MiB)\n");
    kvv_output_cli_help(f, &a.out);
}

/* Bytes of weights one token's pass reads: as the cpu engine holds them
 * (it says), or as the file stores them (the reference reads the mapped
 * rows and widens each to fp32 as it uses it). */
static double weight_bytes(const kvv_model *m, const kvv_engine *e, double *head)
{
    double b = kvv_cpu_engine_weight_bytes(e, head);
    if (b >= 0)
        return b;
    b = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const kvv_layer_tensors *L = &m->layers[l];
        const kvv_gguf_tensor *ts[] = {L->wq, L->wk, L->wv, L->wqkv, L->wo,
                                       L->w_gate, L->w_up, L->w_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (ts[i])
                b += (double)ts[i]->nbytes;
    }
    const kvv_gguf_tensor *h = m->output ? m->output : m->tok_embd;
    *head = (double)h->nbytes;
    return b;
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of 10: a plain sgemm of a prompt-sized product (OpenBLAS with
 * `threads` threads), in GFLOP/s. 0 on allocation failure. */
static double measure_sgemm(int threads)
{
    const int M = 128, N = 1536, K = 576;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C = malloc(sizeof(float) * M * N);
    double best = 0;
    if (A && B && C) {
        for (int i = 0; i < M * K; i++)
            A[i] = (float)(i % 13) * 0.01f;
        for (int i = 0; i < N * K; i++)
            B[i] = (float)(i % 7) * 0.01f;
        openblas_set_num_threads(threads);
        for (int r = 0; r < 10; r++) {
            double t0 = kvv_now_seconds();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K,
                        0.0f, C, N);
            double t = kvv_now_seconds() - t0;
            if (t > 0 && 2.0 * M * N * K / t * 1e-9 > best)
                best = 2.0 * M * N * K / t * 1e-9;
        }
        openblas_set_num_threads(1);
    }
    free(A);
    free(B);
    free(C);
    return best;
}

/* Best of 3: one thread summing a 256 MiB array (8 independent sums, which
 * the compiler vectorises), in GB/s; *sink keeps the sums alive. */
static double measure_read(double *sink)
{
    size_t n = (size_t)64 << 20;
    float *a = malloc(n * sizeof(float));
    double best = 0;
    *sink = 0;
    if (!a)
        return 0;
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i & 7);
    for (int r = 0; r < 3; r++) {
        float s[8] = {0};
        double t0 = kvv_now_seconds();
        for (size_t i = 0; i < n; i += 8)
            for (int j = 0; j < 8; j++)
                s[j] += a[i + j];
        double t = kvv_now_seconds() - t0;
        for (int j = 0; j < 8; j++)
            *sink += s[j];
        if (t > 0 && (double)n * sizeof(float) / t * 1e-9 > best)
            best = (double)n * sizeof(float) / t * 1e-9;
    }
    free(a);
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* bench's own options. */
static bool own_option(void *state, kvv_opts *o)
{
    bench_args *a = state;
    if (kvv_opts_value(o, "--prompt")) {
        if (o->value)
            kvv_opts_int(o, "--prompt", o->value, 0, 1 << 20, &a->prompt);
    } else if (kvv_opts_value(o, "--gen")) {
        if (o->value)
            kvv_opts_int(o, "--gen", o->value, 0, 1 << 20, &a->gen);
    } else if (kvv_opts_value(o, "--repeats")) {
        if (o->value)
            kvv_opts_int(o, "--repeats", o->value, 1, 1000, &a->repeats);
    } else if (kvv_opts_value(o, "--isa")) {
        a->isa = o->value;
    } else if (kvv_opts_flag(o, "--roofline")) {
        a->roofline = true;
    } else if (kvv_opts_flag(o, "--dequant-all")) {
        a->dequant_all = true;
    } else if (kvv_opts_flag(o, "--f32-act")) {
        a->f32_act = true;
    } else if (kvv_opts_value(o, "--seed")) {
        if (o->value)
            kvv_opts_u64(o, "--seed", o->value, &a->seed);
    } else if (kvv_opts_positional(o) && !a->model_path) {
        a->model_path = o->arg;
    } else {
        return false;
    }
    return true;
}

static void own_finish(void *state, kvv_opts *o)
{
    const bench_args *a = state;
    if (!a->model_path)
        kvv_opts_error(o, "missing MODEL");
    else if ((a->isa || a->dequant_all || a->f32_act) && strcmp(a->engine.engine, "cpu") != 0)
        kvv_opts_error(o, "--isa, --dequant-all and --f32-act apply to --engine cpu only");
    else if (a->prompt == 0 && a->gen == 0)
        kvv_opts_error(o, "--prompt 0 and --gen 0: nothing to measure");
}

/* The measured rates: per repeat, and their medians. */
typedef struct {
    double *pp, *tg;            /* [repeats] prompt and decode tokens/s */
    double *ppc, *tgc;          /* [repeats] CPU seconds per wall second of each phase */
    double pp_med, tg_med, ppc_med, tgc_med;
} rates;

/* A warm-up pass, then the repeats: the prompt in one forward call, then
 * --gen tokens one call each, each phase from an empty cache. @return 0 or
 * the exit code. */
static int measure(const bench_args *a, kvv_engine *e, const kvv_hparams *hp, rates *r)
{
    const int np = (int)a->prompt, ng = (int)a->gen, total = np + ng;
    kvv_error err = {0};
    int32_t *tok = malloc((size_t)total * sizeof *tok), *pos = malloc((size_t)total * sizeof *pos);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    int code = 0;
    if (!tok || !pos || !logits || !r->pp || !r->tg || !r->ppc || !r->tgc) {
        fprintf(stderr, "kvverify bench: out of memory\n");
        code = KVV_EXIT_BAD_INPUT;
        goto out;
    }
    kvv_prompt_random(a->seed, hp->n_vocab, -1, tok, total);
    for (int i = 0; i < total; i++)
        pos[i] = i;
    /* warm-up: page the weights in */
    if (kvv_engine_forward(e, np > 8 ? 8 : (np > 0 ? np : 1), tok, pos, NULL, KVV_LOGITS_LAST,
                           logits, &err)) {
        code = kvv_cli_fail(&err);
        goto out;
    }
    for (int k = 0; k < a->repeats; k++) {
        kvv_engine_reset(e);
        double t0 = kvv_now_seconds(), c0 = cpu_seconds();
        if (np > 0 && kvv_engine_forward(e, np, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err)) {
            code = kvv_cli_fail(&err);
            goto out;
        }
        double t1 = kvv_now_seconds(), c1 = cpu_seconds();
        r->pp[k] = np > 0 ? np / (t1 - t0) : 0;
        r->ppc[k] = np > 0 ? (c1 - c0) / (t1 - t0) : 0;
        kvv_engine_reset(e);
        t1 = kvv_now_seconds();
        c1 = cpu_seconds();
        for (int i = np; i < total; i++)
            if (kvv_engine_forward(e, 1, tok + i, pos + (i - np), NULL, KVV_LOGITS_LAST, logits,
                                   &err)) {
                code = kvv_cli_fail(&err);
                goto out;
            }
        double t2 = kvv_now_seconds(), c2 = cpu_seconds();
        r->tg[k] = ng > 0 ? ng / (t2 - t1) : 0;
        r->tgc[k] = ng > 0 ? (c2 - c1) / (t2 - t1) : 0;
    }
    r->pp_med = median(r->pp, (int)a->repeats);
    r->tg_med = median(r->tg, (int)a->repeats);
    r->ppc_med = median(r->ppc, (int)a->repeats);
    r->tgc_med = median(r->tgc, (int)a->repeats);
out:
    free(tok);
    free(pos);
    free(logits);
    return code;
}

/* What the rates mean: FLOPs and weight bytes per token, the engine, and
 * (--roofline) the machine's own figures. */
typedef struct {
    double flops_pp, flops_tg, bytes_pp, bytes_tg;
    kvv_engine_desc d;
    int threads;                  /* --threads, as given (the roofline's sgemm uses them) */
    double roof_gflops, roof_gbs, sink;
} figures;

static void figures_of(const bench_args *a, const kvv_model *m, kvv_engine *e, figures *f)
{
    const int np = (int)a->prompt;
    double macs_layers, macs_head, head_bytes;
    kvv_model_macs_per_token(&m->hp, &macs_layers, &macs_head);
    double wbytes = weight_bytes(m, e, &head_bytes);
    f->flops_pp = 2.0 * macs_layers + (np > 0 ? 2.0 * macs_head / np : 0);
    f->flops_tg = 2.0 * (macs_layers + macs_head);
    f->bytes_tg = wbytes + head_bytes;
    f->bytes_pp = np > 0 ? (wbytes + head_bytes) / np : 0;
    kvv_engine_describe(e, &f->d);
    f->threads = kvv_engine_cli_opts(&a->engine).n_threads;
    f->roof_gflops = f->roof_gbs = f->sink = 0;
    if (a->roofline) {
        f->roof_gflops = measure_sgemm(f->threads);
        f->roof_gbs = measure_read(&f->sink);
    }
}

static json_t *results_json(const bench_args *a, const kvv_model *m, const rates *r,
                            const figures *f)
{
    json_t *j = json_object();
    json_object_set_new(j, "model", json_string(a->model_path));
    json_object_set_new(j, "architecture", json_string(m->hp.arch_name));
    json_object_set_new(j, "engine", kvv_engine_desc_to_json(&f->d));
    if (f->d.isa[0]) /* the cpu engine's kernel table */
        json_object_set_new(j, "isa", json_string(f->d.isa));
    json_object_set_new(j, "n_prompt", json_integer(a->prompt));
    json_object_set_new(j, "n_gen", json_integer(a->gen));
    json_object_set_new(j, "repeats", json_integer(a->repeats));
    json_object_set_new(j, "prompt_tok_s", json_real(r->pp_med));
    json_object_set_new(j, "decode_tok_s", json_real(r->tg_med));
    json_object_set_new(j, "prompt_cpu_util", json_real(r->ppc_med));
    json_object_set_new(j, "decode_cpu_util", json_real(r->tgc_med));
    /* tokens per CPU-second: the rate with the machine to ourselves, if the
     * other processes took only time (not memory bandwidth) from us */
    json_object_set_new(j, "prompt_tok_per_cpu_s",
                        json_real(r->ppc_med > 0 ? r->pp_med / r->ppc_med : 0));
    json_object_set_new(j, "decode_tok_per_cpu_s",
                        json_real(r->tgc_med > 0 ? r->tg_med / r->tgc_med : 0));
    if (a->roofline) {
        json_object_set_new(j, "machine_sgemm_gflop_s", json_real(f->roof_gflops));
        json_object_set_new(j, "machine_read_gb_s", json_real(f->roof_gbs));
    }
    json_t *jp = json_array(), *jt = json_array();
    for (int k = 0; k < a->repeats; k++) {
        json_array_append_new(jp, json_real(r->pp[k]));
        json_array_append_new(jt, json_real(r->tg[k]));
    }
    json_object_set_new(j, "prompt_tok_s_all", jp);
    json_object_set_new(j, "decode_tok_s_all", jt);
    json_object_set_new(j, "flops_per_prompt_token", json_real(f->flops_pp));
    json_object_set_new(j, "flops_per_decode_token", json_real(f->flops_tg));
    json_object_set_new(j, "weight_bytes_per_prompt_token", json_real(f->bytes_pp));
    json_object_set_new(j, "weight_bytes_per_decode_token", json_real(f->bytes_tg));
    json_object_set_new(j, "prompt_gflop_s", json_real(f->flops_pp * r->pp_med * 1e-9));
    json_object_set_new(j, "decode_gb_s", json_real(f->bytes_tg * r->tg_med * 1e-9));
    return j;
}

static void print_table(const bench_args *a, const kvv_model *m, const rates *r,
                        const figures *f)
{
    const kvv_hparams *hp = &m->hp;
    const kvv_engine_desc *d = &f->d;
    printf("model    %s (%s, %d layers, n_embd %d, vocab %d)\n", a->model_path, hp->arch_name,
           hp->n_layer, hp->n_embd, hp->n_vocab);
    printf("engine   %s mode=%s%s%s threads=%d cache=%s  [%s]\n", d->name, d->mode,
           d->isa[0] ? " isa=" : "", d->isa, d->n_threads, d->cache_type, d->kernels);
    printf("%-8s %8s %12s %6s %14s %14s %10s\n", "test", "tokens", "tok/s", "cpu", "FLOP/token",
           "bytes/token", "achieved");
    if (a->prompt > 0)
        printf("%-8s %8ld %12.1f %6.2f %14.4g %14.4g %6.1f GFLOP/s\n", "prompt", a->prompt,
               r->pp_med, r->ppc_med, f->flops_pp, f->bytes_pp, f->flops_pp * r->pp_med * 1e-9);
    if (a->gen > 0)
        printf("%-8s %8ld %12.1f %6.2f %14.4g %14.4g %6.1f GB/s\n", "decode", a->gen, r->tg_med,
               r->tgc_med, f->flops_tg, f->bytes_tg, f->bytes_tg * r->tg_med * 1e-9);
    printf("(median of %ld repeats; bytes = weights read once per forward call)\n", a->repeats);
    if (a->roofline)
        printf("machine roofline: sgemm %.1f GFLOP/s (%d threads), read %.1f GB/s (1 "
               "thread)%s\n",
               f->roof_gflops, f->threads, f->roof_gbs, f->sink < 0 ? " " : "");
}

/* The engine the options ask for (--isa is kvv_engine_opts.isa);
 * --dequant-all and --f32-act go to the cpu engine's own open. */
static kvv_status open_engine(const bench_args *a, const kvv_model *m, kvv_engine **e,
                              kvv_error *err)
{
    kvv_engine_opts eo = kvv_engine_cli_opts(&a->engine);
    eo.n_ctx = (int)(a->prompt + a->gen);
    eo.isa = a->isa;
    if (!a->dequant_all && !a->f32_act)
        return kvv_engine_open(m, &eo, e, err);
    kvv_cpu_opts co = kvv_cpu_opts_default();
    co.dequant_all = a->dequant_all;
    co.f32_act = a->f32_act;
    return kvv_cpu_engine_open_ex(m, &eo, &co, e, err);
}

int kvv_cmd_bench(int argc, char **argv)
{
    bench_args a;
    bench_args_init(&a);
    kvv_opts o;
    kvv_opts_init(&o, "bench", argc, argv);
    const kvv_opt_group g[] = {kvv_engine_cli_group(&a.engine), kvv_output_cli_group(&a.out),
                               {own_option, own_finish, &a}};
    int code = kvv_opts_parse(&o, help, g, 3);
    if (code != KVV_OPTS_RUN)
        return code;
    kvv_error err = {0};
    kvv_model *m;
    if (kvv_model_open(a.model_path, &m, &err))
        return kvv_cli_fail(&err);
    kvv_engine *e;
    if (open_engine(&a, m, &e, &err)) {
        kvv_model_close(m);
        return kvv_cli_fail(&err);
    }
    rates r = {.pp = calloc((size_t)a.repeats, sizeof(double)),
               .tg = calloc((size_t)a.repeats, sizeof(double)),
               .ppc = calloc((size_t)a.repeats, sizeof(double)),
               .tgc = calloc((size_t)a.repeats, sizeof(double))};
    code = measure(&a, e, &m->hp, &r);
    if (!code) {
        figures f;
        figures_of(&a, m, e, &f);
        json_t *j = results_json(&a, m, &r, &f);
        if (a.out.json_stdout) {
            json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
            printf("\n");
        } else {
            print_table(&a, m, &r, &f);
        }
        if (a.out.json_path && kvv_json_write_file(j, JSON_INDENT(2) | JSON_REAL_PRECISION(9),
                                                   a.out.json_path, &err))
            code = kvv_cli_fail(&err);
        json_decref(j);
    }
    free(r.pp);
    free(r.tg);
    free(r.ppc);
    free(r.tgc);
    kvv_engine_close(e);
    kvv_model_close(m);
    return code;
}

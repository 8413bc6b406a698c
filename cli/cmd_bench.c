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
 * the CPU time of the engine's threads over wall time of each phase ("cpu"
 * column; kvv_engine_cpu_seconds: the calling thread plus the engine's own
 * workers, so OpenBLAS's idle threads are not counted; a plugin's threads
 * are the process's): on a shared machine a figure well below the thread
 * count means the rates were measured while other processes held the cores.
 *
 * --against ENGINE (llama.cpp, or plugin:PATH) opens that engine on the
 * same file in the same process, with the same threads, prompt and tokens,
 * and alternates: each repeat runs both engines back to back, the order
 * swapped from one repeat to the next, so both see the same machine load.
 * The ratio ours / theirs is printed from the medians, with the spread of
 * the per-repeat ratios. --roofline measures the streaming read bandwidth
 * (common/roofline.h) once per repeat too, beside the runs.
 *
 * --requests N serves N sequences together, as llama-batched-bench: the N
 * prompts (each its own tokens) in one kvv_engine_decode call, then --gen
 * steps of one call carrying one token of each sequence; the rates are
 * aggregate (N x tokens / wall time), so N = 1 is the same request alone.
 */
#include <jansson.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "common/median.h"
#include "common/roofline.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/engine.h"
#include "model/tensor_types.h"
#include "verify/audit.h"
#include "verify/check.h"

typedef struct {
    const char *model_path;
    bool dequant_all, f32_act, roofline;
    long prompt, gen, repeats;
    long requests;                  /* --requests N: sequences together (0: plain forward) */
    uint64_t seed;
    const char *against;            /* --against ENGINE or NULL */
    kvv_cache_type against_cache;   /* its cache (default f16: llama.cpp's own default) */
    kvv_engine_cli engine;   /* --engine (default cpu) --mode --threads --cache-type */
    kvv_output_cli out;      /* --json [FILE|-] */
} bench_args;

static void bench_args_init(bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->prompt = 128;
    a->gen = 64;
    a->repeats = 3;
    a->seed = 1;
    a->against_cache = KVV_CACHE_F16;
    kvv_engine_cli_init(&a->engine, "bench", "cpu", KVV_ENGINE_OPT_ALL);
    a->engine.repack_default = true; /* one engine: decode speed over memory */
    kvv_output_cli_init(&a->out, "bench", KVV_OUT_JSON | KVV_OUT_PROGRESS);
    a->out.json_help = "one JSON object (one line on stdout)";
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
            "  --dequant-all       cpu: hold every quantized weight as F32 (for comparison;\n"
            "                      --engine-opt dequant_all=1)\n"
            "  --f32-act           cpu fast: fp32 activations for Q8_0/Q4_0 products instead\n"
            "                      of rounding them to Q8_0 (for comparison; f32_act=1)\n"
            "  --roofline          also measure this machine's roofline: OpenBLAS sgemm\n"
            "                      GFLOP/s (128x1536x576, --threads) and the streaming read\n"
            "                      GB/s of --threads threads over 256 MiB (best of 3\n"
            "                      passes) once per repeat beside the runs; each repeat's\n"
            "                      decode GB/s is taken against its own, median printed\n"
            "  --against ENGINE    also time ENGINE (llama.cpp, plugin:PATH) on the same file,\n"
            "                      threads, prompt and tokens in this process, alternating\n"
            "                      with the engine under test repeat by repeat, and print the\n"
            "                      ratio; --device, --ubatch and --engine-opt apply to it,\n"
            "                      llama.cpp keeps its defaults otherwise (flash attention\n"
            "                      auto, weight repacking on)\n"
            "  --against-cache-type T  its KV cache type (default f16, llama.cpp's default)\n"
            "  --requests N        N sequences together, as llama-batched-bench: their\n"
            "                      prompts in one call, then each decode step one call with\n"
            "                      a token of each; aggregate tok/s (N = 1: alone). Needs an\n"
            "                      engine with sequences\n");
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
    } else if (kvv_opts_value(o, "--requests")) {
        if (o->value)
            kvv_opts_int(o, "--requests", o->value, 1, KVV_ENGINE_MAX_SEQS, &a->requests);
    } else if (kvv_opts_value(o, "--against")) {
        a->against = o->value;
    } else if (kvv_opts_value(o, "--against-cache-type")) {
        if (o->value && !kvv_cache_type_from_name(o->value, &a->against_cache))
            kvv_opts_error(o, "option --against-cache-type: '%s' is not f32, f16 or bf16",
                           o->value);
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

/* --dequant-all and --f32-act are --engine-opt KEY=1 of the engine under
 * test (the cpu engine's keys). @return true when it takes the key. */
static bool takes_key(kvv_opts *o, const char *option, const char *engine, const char *key)
{
    kvv_error err = {0};
    if (kvv_engine_check_opt(engine, KVV_ENGINE_OPT_EOPT, key, &err) == KVV_OK)
        return true;
    kvv_opts_error(o, "option %s: %s", option, err.msg);
    return false;
}

static void own_finish(void *state, kvv_opts *o)
{
    const bench_args *a = state;
    if (!a->model_path)
        kvv_opts_error(o, "missing MODEL");
    else if (a->dequant_all && !takes_key(o, "--dequant-all", a->engine.engine, "dequant_all=1"))
        ;
    else if (a->f32_act && !takes_key(o, "--f32-act", a->engine.engine, "f32_act=1"))
        ;
    else if (a->prompt == 0 && a->gen == 0)
        kvv_opts_error(o, "--prompt 0 and --gen 0: nothing to measure");
    else if (a->against && !a->against[0])
        kvv_opts_error(o, "option --against: empty engine name");
}

/* What the rates mean: FLOPs and weight bytes per token, the engine. */
typedef struct {
    double flops_pp, flops_tg, bytes_pp, bytes_tg;
    kvv_engine_desc d;
} figures;

/* One engine's runs: per repeat, and their medians. */
typedef struct {
    kvv_engine *e;
    double *pp, *tg;            /* [repeats] prompt and decode tokens/s */
    double *ppc, *tgc;          /* [repeats] CPU seconds per wall second of each phase */
    double pp_med, tg_med, ppc_med, tgc_med;
    figures f;
} side;

/* The token ids and positions every engine runs, and one logits row per
 * sequence; the call being built for --requests. */
typedef struct {
    int32_t *tok, *pos;
    float *logits;
    int32_t *btok, *bpos, *bseq;
    uint8_t *blg;
} bench_io;

/* Warm-up: page the weights in (up to 8 prompt tokens). */
static int warm_up(const bench_args *a, kvv_engine *e, bench_io *io)
{
    kvv_error err = {0};
    const int np = (int)a->prompt;
    kvv_engine_reset(e);
    if (kvv_engine_forward(e, np > 8 ? 8 : (np > 0 ? np : 1), io->tok, io->pos, NULL,
                           KVV_LOGITS_LAST, io->logits, &err))
        return kvv_cli_fail(&err);
    return 0;
}

/* Repeat k on one engine: the prompt in one forward call, then --gen
 * tokens one call each, each phase from an empty cache. @return 0 or the
 * exit code. */
static int one_repeat(const bench_args *a, side *s, bench_io *io, int k)
{
    const int np = (int)a->prompt, ng = (int)a->gen, total = np + ng;
    kvv_error err = {0};
    kvv_engine *e = s->e;
    kvv_engine_reset(e);
    double t0 = kvv_now_seconds(), c0 = kvv_engine_cpu_seconds(e);
    if (np > 0 && kvv_engine_forward(e, np, io->tok, io->pos, NULL, KVV_LOGITS_LAST, io->logits,
                                     &err))
        return kvv_cli_fail(&err);
    double t1 = kvv_now_seconds(), c1 = kvv_engine_cpu_seconds(e);
    s->pp[k] = np > 0 ? np / (t1 - t0) : 0;
    s->ppc[k] = np > 0 ? (c1 - c0) / (t1 - t0) : 0;
    kvv_engine_reset(e);
    t1 = kvv_now_seconds();
    c1 = kvv_engine_cpu_seconds(e);
    for (int i = np; i < total; i++)
        if (kvv_engine_forward(e, 1, io->tok + i, io->pos + (i - np), NULL, KVV_LOGITS_LAST,
                               io->logits, &err))
            return kvv_cli_fail(&err);
    double t2 = kvv_now_seconds(), c2 = kvv_engine_cpu_seconds(e);
    s->tg[k] = ng > 0 ? ng / (t2 - t1) : 0;
    s->tgc[k] = ng > 0 ? (c2 - c1) / (t2 - t1) : 0;
    return 0;
}

/* Repeat k with --requests N: the N prompts in one call (sequence s reads
 * the tokens from offset s), then --gen calls of one token per sequence;
 * each phase from empty caches. @return 0 or the exit code. */
static int requests_repeat(const bench_args *a, side *s, bench_io *io, int k)
{
    const int np = (int)a->prompt, ng = (int)a->gen, N = (int)a->requests, total = np + ng;
    kvv_error err = {0};
    kvv_engine *e = s->e;
    kvv_status st = KVV_OK;
    for (int q = 0; q < N && !st; q++)
        st = kvv_engine_seq_rm(e, q, 0, -1, &err);
    int n = 0;
    for (int q = 0; q < N; q++)
        for (int i = 0; i < np; i++, n++) {
            io->btok[n] = io->tok[(i + q) % total];
            io->bpos[n] = i;
            io->bseq[n] = q;
            io->blg[n] = i == np - 1;
        }
    double t0 = kvv_now_seconds(), c0 = kvv_engine_cpu_seconds(e);
    if (!st && np > 0)
        st = kvv_engine_decode(e, &(kvv_batch){n, io->btok, io->bpos, io->bseq, io->blg},
                               io->logits, &err);
    double t1 = kvv_now_seconds(), c1 = kvv_engine_cpu_seconds(e);
    s->pp[k] = np > 0 ? (double)N * np / (t1 - t0) : 0;
    s->ppc[k] = np > 0 ? (c1 - c0) / (t1 - t0) : 0;
    for (int q = 0; q < N && !st; q++)
        st = kvv_engine_seq_rm(e, q, 0, -1, &err);
    t1 = kvv_now_seconds();
    c1 = kvv_engine_cpu_seconds(e);
    for (int i = 0; i < ng && !st; i++) {
        for (int q = 0; q < N; q++) {
            io->btok[q] = io->tok[(np + i + q) % total];
            io->bpos[q] = i;
            io->bseq[q] = q;
            io->blg[q] = 1;
        }
        st = kvv_engine_decode(e, &(kvv_batch){N, io->btok, io->bpos, io->bseq, io->blg},
                               io->logits, &err);
    }
    if (st)
        return kvv_cli_fail(&err);
    double t2 = kvv_now_seconds(), c2 = kvv_engine_cpu_seconds(e);
    s->tg[k] = ng > 0 ? (double)N * ng / (t2 - t1) : 0;
    s->tgc[k] = ng > 0 ? (c2 - c1) / (t2 - t1) : 0;
    return 0;
}

/* Every engine warmed up, then the repeats, each running every engine
 * once (the order rotating from one repeat to the next) and, with
 * --roofline, one pass of the read loop after them (read[k]). */
static int measure(const bench_args *a, side *sides, int n_sides, const kvv_hparams *hp,
                   double *read, double *sink)
{
    const int total = (int)(a->prompt + a->gen), R = (int)a->repeats;
    const size_t nb = (size_t)(a->requests > 1 ? a->requests : 1) * (size_t)(total + 1);
    bench_io io = {malloc((size_t)total * sizeof(int32_t)), malloc((size_t)total * sizeof(int32_t)),
                   malloc(nb * (size_t)hp->n_vocab * sizeof(float)), malloc(nb * sizeof(int32_t)),
                   malloc(nb * sizeof(int32_t)), malloc(nb * sizeof(int32_t)), malloc(nb)};
    int code = 0;
    if (!io.tok || !io.pos || !io.logits || !io.btok || !io.bpos || !io.bseq || !io.blg) {
        fprintf(stderr, "kvverify bench: out of memory\n");
        code = KVV_EXIT_BAD_INPUT;
        goto out;
    }
    kvv_prompt_random(a->seed, hp->n_vocab, -1, io.tok, total);
    for (int i = 0; i < total; i++)
        io.pos[i] = i;
    for (int s = 0; s < n_sides && !code; s++)
        code = warm_up(a, sides[s].e, &io);
    for (int k = 0; k < R && !code; k++) {
        for (int i = 0; i < n_sides && !code; i++)
            code = a->requests ? requests_repeat(a, &sides[(i + k) % n_sides], &io, k)
                               : one_repeat(a, &sides[(i + k) % n_sides], &io, k);
        for (int p = 0; read && !code && p < KVV_ROOFLINE_READ_PASSES; p++) {
            double g = kvv_roofline_read_gbs(kvv_engine_cli_opts(&a->engine).n_threads, sink);
            read[k] = g > read[k] ? g : read[k];
        }
        kvv_output_progress((void *)&a->out, "bench", k + 1, R);
    }
    for (int s = 0; s < n_sides && !code; s++) {
        side *d = &sides[s];
        d->pp_med = kvv_median(d->pp, R);
        d->tg_med = kvv_median(d->tg, R);
        d->ppc_med = kvv_median(d->ppc, R);
        d->tgc_med = kvv_median(d->tgc, R);
    }
out:
    free(io.tok);
    free(io.pos);
    free(io.logits);
    free(io.btok);
    free(io.bpos);
    free(io.bseq);
    free(io.blg);
    return code;
}

static void figures_of(const bench_args *a, const kvv_model *m, kvv_engine *e, figures *f)
{
    const int np = (int)a->prompt;
    double macs_layers, macs_head, head_bytes;
    kvv_model_macs_per_token(&m->hp, &macs_layers, &macs_head);
    double wbytes = weight_bytes(m, e, &head_bytes);
    f->flops_pp = 2.0 * macs_layers + (np > 0 ? 2.0 * macs_head / np : 0);
    f->flops_tg = 2.0 * (macs_layers + macs_head);
    /* one call reads the weights once for every sequence's token in it */
    const double nreq = a->requests > 1 ? (double)a->requests : 1.0;
    f->bytes_tg = (wbytes + head_bytes) / nreq;
    f->bytes_pp = np > 0 ? (wbytes + head_bytes) / (np * nreq) : 0;
    kvv_engine_describe(e, &f->d);
}

static json_t *reals(const double *v, int n)
{
    json_t *j = json_array();
    for (int k = 0; k < n; k++)
        json_array_append_new(j, json_real(v[k]));
    return j;
}

/* One engine's figures into j. */
static void side_json(json_t *j, const bench_args *a, const side *s)
{
    const figures *f = &s->f;
    json_object_set_new(j, "engine", kvv_engine_desc_to_json(&f->d));
    if (f->d.isa[0]) /* the cpu engine's kernel table */
        json_object_set_new(j, "isa", json_string(f->d.isa));
    json_object_set_new(j, "prompt_tok_s", json_real(s->pp_med));
    json_object_set_new(j, "decode_tok_s", json_real(s->tg_med));
    json_object_set_new(j, "prompt_cpu_util", json_real(s->ppc_med));
    json_object_set_new(j, "decode_cpu_util", json_real(s->tgc_med));
    /* tokens per CPU-second: the rate with the machine to ourselves, if the
     * other processes took only time (not memory bandwidth) from us */
    json_object_set_new(j, "prompt_tok_per_cpu_s",
                        json_real(s->ppc_med > 0 ? s->pp_med / s->ppc_med : 0));
    json_object_set_new(j, "decode_tok_per_cpu_s",
                        json_real(s->tgc_med > 0 ? s->tg_med / s->tgc_med : 0));
    json_object_set_new(j, "prompt_tok_s_all", reals(s->pp, (int)a->repeats));
    json_object_set_new(j, "decode_tok_s_all", reals(s->tg, (int)a->repeats));
    json_object_set_new(j, "flops_per_prompt_token", json_real(f->flops_pp));
    json_object_set_new(j, "flops_per_decode_token", json_real(f->flops_tg));
    json_object_set_new(j, "weight_bytes_per_prompt_token", json_real(f->bytes_pp));
    json_object_set_new(j, "weight_bytes_per_decode_token", json_real(f->bytes_tg));
    json_object_set_new(j, "prompt_gflop_s", json_real(f->flops_pp * s->pp_med * 1e-9));
    json_object_set_new(j, "decode_gb_s", json_real(f->bytes_tg * s->tg_med * 1e-9));
}

/* The machine's figures (--roofline) and the ratios (--against). */
typedef struct {
    int threads;
    double sgemm_gflops, read_med, read_lo, read_hi, sink;
    double *read;                      /* [repeats] */
    double *frac;                      /* [repeats] decode GB/s / that repeat's read */
    double frac_med, frac_lo, frac_hi;
    double *r_pp, *r_tg;               /* [repeats] ours / theirs, repeat by repeat */
    double r_pp_med, r_tg_med, r_pp_lo, r_pp_hi, r_tg_lo, r_tg_hi;
} comparison;

static json_t *results_json(const bench_args *a, const kvv_model *m, const side *sides,
                            int n_sides, const comparison *c)
{
    json_t *j = json_object();
    json_object_set_new(j, "model", json_string(a->model_path));
    json_object_set_new(j, "architecture", json_string(m->hp.arch_name));
    json_object_set_new(j, "n_prompt", json_integer(a->prompt));
    json_object_set_new(j, "n_gen", json_integer(a->gen));
    json_object_set_new(j, "repeats", json_integer(a->repeats));
    json_object_set_new(j, "requests", json_integer(a->requests > 0 ? a->requests : 1));
    side_json(j, a, &sides[0]);
    if (a->roofline) {
        json_object_set_new(j, "machine_sgemm_gflop_s", json_real(c->sgemm_gflops));
        json_object_set_new(j, "machine_read_gb_s", json_real(c->read_med));
        json_object_set_new(j, "machine_read_gb_s_all", reals(c->read, (int)a->repeats));
        json_object_set_new(j, "machine_read_threads", json_integer(c->threads));
        json_object_set_new(j, "decode_read_fraction", json_real(c->frac_med));
        json_object_set_new(j, "decode_read_fraction_all", reals(c->frac, (int)a->repeats));
    }
    if (n_sides > 1) {
        json_t *t = json_object();
        side_json(t, a, &sides[1]);
        json_object_set_new(j, "against", t);
        json_object_set_new(j, "ratio_prompt", json_real(c->r_pp_med));
        json_object_set_new(j, "ratio_decode", json_real(c->r_tg_med));
        json_object_set_new(j, "ratio_prompt_all", reals(c->r_pp, (int)a->repeats));
        json_object_set_new(j, "ratio_decode_all", reals(c->r_tg, (int)a->repeats));
    }
    return j;
}

static void print_engine(const char *label, const kvv_engine_desc *d)
{
    printf("%-8s %s mode=%s%s%s threads=%d cache=%s", label, d->name, d->mode,
           d->isa[0] ? " isa=" : "", d->isa, d->n_threads, d->cache_type);
    if (d->flash_attn[0])
        printf(" flash_attn=%s", d->flash_attn);
    if (d->version[0])
        printf(" (%s)", d->version);
    printf("  [%s]\n", d->kernels);
}

static void print_table(const bench_args *a, const kvv_model *m, const side *sides,
                        int n_sides, const comparison *c)
{
    const kvv_hparams *hp = &m->hp;
    printf("model    %s (%s, %d layers, n_embd %d, vocab %d)\n", a->model_path, hp->arch_name,
           hp->n_layer, hp->n_embd, hp->n_vocab);
    print_engine("engine", &sides[0].f.d);
    if (n_sides > 1)
        print_engine("against", &sides[1].f.d);
    printf("%-8s %-10s %8s %12s %6s %14s %14s %10s\n", "test", "engine", "tokens", "tok/s", "cpu",
           "FLOP/token", "bytes/token", "achieved");
    for (int s = 0; s < n_sides && a->prompt > 0; s++) {
        const side *d = &sides[s];
        printf("%-8s %-10s %8ld %12.1f %6.2f %14.4g %14.4g %6.1f GFLOP/s\n", "prompt",
               d->f.d.name, a->prompt, d->pp_med, d->ppc_med, d->f.flops_pp, d->f.bytes_pp,
               d->f.flops_pp * d->pp_med * 1e-9);
    }
    for (int s = 0; s < n_sides && a->gen > 0; s++) {
        const side *d = &sides[s];
        printf("%-8s %-10s %8ld %12.1f %6.2f %14.4g %14.4g %6.1f GB/s\n", "decode", d->f.d.name,
               a->gen, d->tg_med, d->tgc_med, d->f.flops_tg, d->f.bytes_tg,
               d->f.bytes_tg * d->tg_med * 1e-9);
    }
    printf("(median of %ld repeats; bytes = weights read once per forward call)\n", a->repeats);
    if (a->requests > 0)
        printf("(%ld requests together: tokens and tok/s per request x %ld, aggregate)\n",
               a->requests, a->requests);
    if (n_sides > 1) {
        printf("ratio %s / %s:", sides[0].f.d.name, sides[1].f.d.name);
        if (a->prompt > 0)
            printf(" prompt %.2fx (repeats %.2f-%.2f)", c->r_pp_med, c->r_pp_lo, c->r_pp_hi);
        if (a->gen > 0)
            printf("%s decode %.2fx (repeats %.2f-%.2f)", a->prompt > 0 ? "," : "", c->r_tg_med,
                   c->r_tg_lo, c->r_tg_hi);
        printf("\n");
    }
    if (a->roofline) {
        printf("machine roofline: sgemm %.1f GFLOP/s, read %.1f GB/s (%d threads; median of "
               "%ld measurements beside the runs, each the best of %d passes, %.1f-%.1f)%s\n",
               c->sgemm_gflops, c->read_med, c->threads, a->repeats, KVV_ROOFLINE_READ_PASSES,
               c->read_lo, c->read_hi, c->sink < 0 ? " " : "");
        if (a->gen > 0 && c->read_med > 0)
            printf("decode reads weights at %.0f%% of the read loop's bandwidth (median of the "
                   "repeats, each against its own measurement: %.0f-%.0f%%)\n",
                   100.0 * c->frac_med, 100.0 * c->frac_lo, 100.0 * c->frac_hi);
    }
}

/* The engine the options ask for (--isa is kvv_engine_opts.isa);
 * --dequant-all and --f32-act are its engine options dequant_all=1 and
 * f32_act=1. With --against, --device, --ubatch and --engine-opt belong to
 * that engine. */
static kvv_status open_engine(const bench_args *a, const kvv_model *m, kvv_engine **e,
                              kvv_error *err)
{
    kvv_engine_opts eo = kvv_engine_cli_opts(&a->engine);
    eo.n_ctx = (int)(a->prompt + a->gen);
    eo.n_seq_max = a->requests > 1 ? (int)a->requests : 0;
    if (a->against) {
        eo.device = NULL;
        eo.n_ubatch = 0;
        eo.engine_opts = NULL;
        eo.n_engine_opts = 0;
    }
    const char *keys[KVV_ENGINE_CLI_MAX_EOPTS + 2];
    int n = 0;
    for (int i = 0; i < eo.n_engine_opts; i++)
        keys[n++] = eo.engine_opts[i];
    if (a->dequant_all)
        keys[n++] = "dequant_all=1";
    if (a->f32_act)
        keys[n++] = "f32_act=1";
    eo.engine_opts = n ? keys : NULL;
    eo.n_engine_opts = n;
    return kvv_engine_open(m, &eo, e, err); /* the engine reads its options at open */
}

/* The --against engine: the same threads and context, its own default
 * mode, --against-cache-type, and the plugin options. */
static kvv_status open_against(const bench_args *a, const kvv_model *m, kvv_engine **e,
                               kvv_error *err)
{
    kvv_engine_opts cli = kvv_engine_cli_opts(&a->engine);
    kvv_engine_opts eo = kvv_engine_opts_for(&cli, a->against);
    eo.cache_type = a->against_cache;
    eo.n_ctx = (int)(a->prompt + a->gen);
    eo.n_seq_max = a->requests > 1 ? (int)a->requests : 0;
    eo.isa = NULL; /* --isa is the engine under test's (--engine cpu) */
    eo.device = cli.device; /* --device, --ubatch and --engine-opt are --against's */
    eo.n_ubatch = cli.n_ubatch;
    eo.engine_opts = cli.engine_opts;
    eo.n_engine_opts = cli.n_engine_opts;
    return kvv_engine_open(m, &eo, e, err);
}

static bool side_alloc(side *s, long repeats)
{
    s->pp = calloc((size_t)repeats, sizeof(double));
    s->tg = calloc((size_t)repeats, sizeof(double));
    s->ppc = calloc((size_t)repeats, sizeof(double));
    s->tgc = calloc((size_t)repeats, sizeof(double));
    return s->pp && s->tg && s->ppc && s->tgc;
}

static void side_free(side *s)
{
    free(s->pp);
    free(s->tg);
    free(s->ppc);
    free(s->tgc);
    kvv_engine_close(s->e);
}

/* Ratios repeat by repeat, their median and range; the read loop's. */
static void compare_sides(const bench_args *a, const side *sides, int n_sides, comparison *c)
{
    const int R = (int)a->repeats;
    if (a->roofline) {
        c->read_med = kvv_median(c->read, R);
        kvv_range(c->read, R, &c->read_lo, &c->read_hi);
        /* repeat by repeat: the machine's speed drifts between repeats */
        for (int k = 0; k < R; k++)
            c->frac[k] = c->read[k] > 0 ? sides[0].f.bytes_tg * sides[0].tg[k] * 1e-9 / c->read[k]
                                        : 0;
        c->frac_med = kvv_median(c->frac, R);
        kvv_range(c->frac, R, &c->frac_lo, &c->frac_hi);
    }
    if (n_sides < 2)
        return;
    for (int k = 0; k < R; k++) {
        c->r_pp[k] = sides[1].pp[k] > 0 ? sides[0].pp[k] / sides[1].pp[k] : 0;
        c->r_tg[k] = sides[1].tg[k] > 0 ? sides[0].tg[k] / sides[1].tg[k] : 0;
    }
    c->r_pp_med = sides[1].pp_med > 0 ? sides[0].pp_med / sides[1].pp_med : 0;
    c->r_tg_med = sides[1].tg_med > 0 ? sides[0].tg_med / sides[1].tg_med : 0;
    kvv_range(c->r_pp, R, &c->r_pp_lo, &c->r_pp_hi);
    kvv_range(c->r_tg, R, &c->r_tg_lo, &c->r_tg_hi);
}

static int report(const bench_args *a, const kvv_model *m, const side *sides, int n_sides,
                  const comparison *c)
{
    kvv_error err = {0};
    int code = 0;
    json_t *j = results_json(a, m, sides, n_sides, c);
    if (!a->out.stdout_taken)
        print_table(a, m, sides, n_sides, c);
    /* on stdout one line, so runs append to a .jsonl file */
    size_t flags = a->out.stdout_taken ? JSON_COMPACT : JSON_INDENT(2);
    if (a->out.json_path &&
        kvv_json_write_file(j, flags | JSON_REAL_PRECISION(9), a->out.json_path, &err))
        code = kvv_cli_fail(&err);
    json_decref(j);
    return code;
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
    side sides[2];
    memset(sides, 0, sizeof sides);
    const int n_sides = a.against ? 2 : 1;
    comparison c;
    memset(&c, 0, sizeof c);
    c.threads = kvv_engine_cli_opts(&a.engine).n_threads;
    c.read = calloc((size_t)a.repeats, sizeof(double));
    c.frac = calloc((size_t)a.repeats, sizeof(double));
    c.r_pp = calloc((size_t)a.repeats, sizeof(double));
    c.r_tg = calloc((size_t)a.repeats, sizeof(double));
    if (!c.read || !c.frac || !c.r_pp || !c.r_tg || !side_alloc(&sides[0], a.repeats) ||
        !side_alloc(&sides[1], a.repeats)) {
        fprintf(stderr, "kvverify bench: out of memory\n");
        code = KVV_EXIT_BAD_INPUT;
    } else if (open_engine(&a, m, &sides[0].e, &err) ||
               (a.against && open_against(&a, m, &sides[1].e, &err))) {
        code = kvv_cli_fail(&err);
    } else {
        if (a.roofline)
            c.sgemm_gflops = kvv_roofline_sgemm_gflops(c.threads);
        code = measure(&a, sides, n_sides, &m->hp, a.roofline ? c.read : NULL, &c.sink);
    }
    if (!code) {
        for (int s = 0; s < n_sides; s++)
            figures_of(&a, m, sides[s].e, &sides[s].f);
        compare_sides(&a, sides, n_sides, &c);
        code = report(&a, m, sides, n_sides, &c);
    }
    side_free(&sides[0]);
    side_free(&sides[1]);
    free(c.read);
    free(c.frac);
    free(c.r_pp);
    free(c.r_tg);
    kvv_roofline_free();
    kvv_model_close(m);
    return code;
}

/*
 * cmd_bench.c — `kvverify bench MODEL`: prompt and decode throughput of an
 * engine (median of --repeats runs), with the roofline of the model beside
 * it: FLOPs and weight bytes per token, and the GFLOP/s and GB/s the
 * measured rates imply.
 *
 * The measuring — warm-up, one repeat, --requests N, the alternation with
 * --against ENGINE, the --roofline passes beside the runs, the medians and
 * ratios — is verify/bench.h's, which says what each figure is. This file
 * parses the options, opens the engine under test (and --against's, in the
 * same process, with the same threads, prompt and tokens) through the
 * CLI's engine options, runs kvv_bench_run, and prints the table or the
 * JSON object. The "cpu" column is the CPU time of the engine's threads
 * over wall time of each phase (kvv_engine_cpu_seconds: the calling thread
 * plus the engine's own workers, so OpenBLAS's idle threads are not
 * counted; a plugin's threads are the process's): on a shared machine a
 * figure well below the thread count means the rates were measured while
 * other processes held the cores.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "common/roofline.h"
#include "engine/engine.h"
#include "verify/bench.h"

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

static json_t *reals(const double *v, int n)
{
    json_t *j = json_array();
    for (int k = 0; k < n; k++)
        json_array_append_new(j, json_real(v[k]));
    return j;
}

/* One engine's figures into j. */
static void side_json(json_t *j, const bench_args *a, const kvv_bench_side *s)
{
    const kvv_bench_figures *f = &s->f;
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

static json_t *results_json(const bench_args *a, const kvv_model *m, const kvv_bench_result *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "model", json_string(a->model_path));
    json_object_set_new(j, "architecture", json_string(m->hp.arch_name));
    json_object_set_new(j, "n_prompt", json_integer(a->prompt));
    json_object_set_new(j, "n_gen", json_integer(a->gen));
    json_object_set_new(j, "repeats", json_integer(a->repeats));
    json_object_set_new(j, "requests", json_integer(a->requests > 0 ? a->requests : 1));
    side_json(j, a, &r->sides[0]);
    if (a->roofline) {
        json_object_set_new(j, "machine_sgemm_gflop_s", json_real(r->sgemm_gflops));
        json_object_set_new(j, "machine_read_gb_s", json_real(r->read_med));
        json_object_set_new(j, "machine_read_gb_s_all", reals(r->read, (int)a->repeats));
        json_object_set_new(j, "machine_read_threads", json_integer(r->threads));
        json_object_set_new(j, "decode_read_fraction", json_real(r->frac_med));
        json_object_set_new(j, "decode_read_fraction_all", reals(r->frac, (int)a->repeats));
    }
    if (r->n_sides > 1) {
        json_t *t = json_object();
        side_json(t, a, &r->sides[1]);
        json_object_set_new(j, "against", t);
        json_object_set_new(j, "ratio_prompt", json_real(r->r_pp_med));
        json_object_set_new(j, "ratio_decode", json_real(r->r_tg_med));
        json_object_set_new(j, "ratio_prompt_all", reals(r->r_pp, (int)a->repeats));
        json_object_set_new(j, "ratio_decode_all", reals(r->r_tg, (int)a->repeats));
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

static void print_table(const bench_args *a, const kvv_model *m, const kvv_bench_result *r)
{
    const kvv_bench_side *sides = r->sides;
    const int n_sides = r->n_sides;
    const kvv_hparams *hp = &m->hp;
    printf("model    %s (%s, %d layers, n_embd %d, vocab %d)\n", a->model_path, hp->arch_name,
           hp->n_layer, hp->n_embd, hp->n_vocab);
    print_engine("engine", &sides[0].f.d);
    if (n_sides > 1)
        print_engine("against", &sides[1].f.d);
    printf("%-8s %-10s %8s %12s %6s %14s %14s %10s\n", "test", "engine", "tokens", "tok/s", "cpu",
           "FLOP/token", "bytes/token", "achieved");
    for (int s = 0; s < n_sides && a->prompt > 0; s++) {
        const kvv_bench_side *d = &sides[s];
        printf("%-8s %-10s %8ld %12.1f %6.2f %14.4g %14.4g %6.1f GFLOP/s\n", "prompt",
               d->f.d.name, a->prompt, d->pp_med, d->ppc_med, d->f.flops_pp, d->f.bytes_pp,
               d->f.flops_pp * d->pp_med * 1e-9);
    }
    for (int s = 0; s < n_sides && a->gen > 0; s++) {
        const kvv_bench_side *d = &sides[s];
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
            printf(" prompt %.2fx (repeats %.2f-%.2f)", r->r_pp_med, r->r_pp_lo, r->r_pp_hi);
        if (a->gen > 0)
            printf("%s decode %.2fx (repeats %.2f-%.2f)", a->prompt > 0 ? "," : "", r->r_tg_med,
                   r->r_tg_lo, r->r_tg_hi);
        printf("\n");
    }
    if (a->roofline) {
        printf("machine roofline: sgemm %.1f GFLOP/s, read %.1f GB/s (%d threads; median of "
               "%ld measurements beside the runs, each the best of %d passes, %.1f-%.1f)%s\n",
               r->sgemm_gflops, r->read_med, r->threads, a->repeats, KVV_ROOFLINE_READ_PASSES,
               r->read_lo, r->read_hi, r->sink < 0 ? " " : "");
        if (a->gen > 0 && r->read_med > 0)
            printf("decode reads weights at %.0f%% of the read loop's bandwidth (median of the "
                   "repeats, each against its own measurement: %.0f-%.0f%%)\n",
                   100.0 * r->frac_med, 100.0 * r->frac_lo, 100.0 * r->frac_hi);
    }
}

/* Positions per sequence, and at least the largest call: --requests puts
 * every prompt in one call, and a plugin host takes at most n_ctx tokens
 * per call. */
static int bench_n_ctx(const bench_args *a)
{
    long n = a->prompt + a->gen, call = a->requests > 1 ? a->requests * a->prompt : 0;
    return (int)(call > n ? call : n);
}

/* The engine the options ask for (--isa is kvv_engine_opts.isa);
 * --dequant-all and --f32-act are its engine options dequant_all=1 and
 * f32_act=1. With --against, --device, --ubatch and --engine-opt belong to
 * that engine. */
static kvv_status open_engine(const bench_args *a, const kvv_model *m, kvv_engine **e,
                              kvv_error *err)
{
    kvv_engine_opts eo = kvv_engine_cli_opts(&a->engine);
    eo.n_ctx = bench_n_ctx(a);
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
    eo.n_ctx = bench_n_ctx(a);
    eo.n_seq_max = a->requests > 1 ? (int)a->requests : 0;
    eo.isa = NULL; /* --isa is the engine under test's (--engine cpu) */
    eo.device = cli.device; /* --device, --ubatch and --engine-opt are --against's */
    eo.n_ubatch = cli.n_ubatch;
    eo.engine_opts = cli.engine_opts;
    eo.n_engine_opts = cli.n_engine_opts;
    return kvv_engine_open(m, &eo, e, err);
}

/* An error of the run: bench's own allocations read "kvverify bench: out
 * of memory" (exit 2), any other error as every command prints it. */
static int fail(const kvv_error *err)
{
    if (err->status == KVV_ERR_NOMEM && !strcmp(err->msg, "out of memory")) {
        fprintf(stderr, "kvverify bench: out of memory\n");
        return KVV_EXIT_BAD_INPUT;
    }
    return kvv_cli_fail(err);
}

static int report(const bench_args *a, const kvv_model *m, const kvv_bench_result *r)
{
    kvv_error err = {0};
    int code = 0;
    json_t *j = results_json(a, m, r);
    if (!a->out.stdout_taken)
        print_table(a, m, r);
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
    kvv_engine *e[KVV_BENCH_MAX_ENGINES] = {NULL, NULL};
    kvv_bench_result res;
    memset(&res, 0, sizeof res);
    if (open_engine(&a, m, &e[0], &err) || (a.against && open_against(&a, m, &e[1], &err))) {
        code = kvv_cli_fail(&err);
    } else {
        const kvv_bench_opts bo = {
            .model = m,
            .engines = {e[0], e[1]},
            .n_engines = a.against ? 2 : 1,
            .n_prompt = (int)a.prompt,
            .n_gen = (int)a.gen,
            .repeats = (int)a.repeats,
            .requests = (int)a.requests,
            .seed = a.seed,
            .roofline = a.roofline,
            .threads = kvv_engine_cli_opts(&a.engine).n_threads,
            .progress = kvv_output_progress,
            .progress_user = &a.out,
        };
        if (kvv_bench_run(&bo, &res, &err))
            code = fail(&err);
        else
            code = report(&a, m, &res);
    }
    kvv_bench_result_free(&res);
    kvv_engine_close(e[0]);
    kvv_engine_close(e[1]);
    kvv_model_close(m);
    return code;
}

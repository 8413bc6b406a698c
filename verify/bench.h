/*
 * bench.h — what `kvverify bench` measures: prompt (prefill) and decode
 * throughput of one engine, or of two engines alternating, as the median of
 * repeats, with the model's work per token beside it (FLOPs and weight
 * bytes) and, on request, the machine's roofline (common/roofline.h).
 *
 *   kvv_bench_opts o = {.model = m, .engines = {e}, .n_engines = 1,
 *                       .n_prompt = 128, .n_gen = 64, .repeats = 3, .seed = 1};
 *   kvv_bench_result res;
 *   if (kvv_bench_run(&o, &res, &err)) ...    // res.sides[0].tg_med: decode tok/s
 *   kvv_bench_result_free(&res);
 *
 * Tokens. n_prompt + n_gen pseudo-random ids from seed (kvv_prompt_random),
 * the same for every engine and every repeat.
 *
 * Warm-up. Before the first repeat each engine runs one forward call of up
 * to 8 prompt tokens (1 when n_prompt is 0), which pages the mapped weights
 * in; it is not timed.
 *
 * One repeat, one engine (requests 0). Clear the cache, process the prompt
 * in one kvv_engine_forward call (logits of the last row only, as
 * llama-bench's pp test); clear it again, then decode n_gen tokens one
 * forward call each from position 0 (as llama-bench's tg test, which also
 * starts from an empty cache; decoding after a long prompt would add the
 * attention over it). A phase of 0 tokens is skipped and its rate is 0.
 *
 * One repeat with requests N >= 1 (as llama-batched-bench). Sequences
 * 0..N-1 are emptied (kvv_engine_seq_rm); the N prompts, sequence q reading
 * the ids from offset q (wrapping), go in one kvv_engine_decode call with a
 * logits row at each prompt's last token; the sequences are emptied again,
 * then n_gen calls each carry one token of every sequence. Rates are
 * aggregate: N x tokens / wall seconds, so N = 1 is one request alone
 * through the sequence interface. The engines need sequences (n_seq_max >=
 * N when N > 1).
 *
 * Beside each phase's wall time the CPU time of the engine's threads
 * (kvv_engine_cpu_seconds) over it: the "cpu" figure. On a shared machine a
 * figure well below the thread count means other processes held the cores
 * while the rate was measured.
 *
 * Alternation. With two engines each repeat runs both back to back, the
 * order swapped from one repeat to the next (repeat k starts with engine
 * k mod 2), so both see the same machine load; the ratios engine 0 / engine
 * 1 are taken repeat by repeat (their range is the spread) and from the
 * medians. With roofline, after the engines of each repeat the streaming
 * read loop runs KVV_ROOFLINE_READ_PASSES passes (best one counts), so the
 * read bandwidth is measured beside the runs, and each repeat's decode GB/s
 * is taken as a fraction of its own repeat's; the sgemm figure is measured
 * once before the warm-up.
 *
 * Work per token (kvv_bench_figures). FLOPs: 2 x the model's
 * multiply-accumulates per token (verify/audit_plan.h), the output head's
 * share spread over the prompt in the prompt phase (one logits row per
 * call). Weight bytes: as the cpu engine holds its weights (it says), else
 * as the file stores them; one call reads them once for all the tokens in
 * it, so per prompt token they are divided by n_prompt x N and per decode
 * token by N.
 */
#ifndef KVV_VERIFY_BENCH_H
#define KVV_VERIFY_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "verify/check.h"

#define KVV_BENCH_MAX_ENGINES 2

typedef struct {
    const kvv_model *model;   /* borrowed: its hparams and weight sizes */
    kvv_engine *engines[KVV_BENCH_MAX_ENGINES]; /* borrowed, opened by the caller on
                                 model with n_ctx >= n_prompt + n_gen; [0] is the
                                 engine under test, [1] the one it is compared with */
    int n_engines;            /* 1 or 2 */
    int n_prompt, n_gen;      /* tokens per repeat of each phase (>= 0, not both 0) */
    int repeats;              /* >= 1; the medians are over them */
    int requests;             /* 0: one sequence through kvv_engine_forward; N >= 1:
                                 N sequences through kvv_engine_decode */
    uint64_t seed;            /* the token ids */
    bool roofline;            /* also measure sgemm and the read loop (common/roofline.h) */
    int threads;              /* the roofline's threads (the engines' own) */
    kvv_progress_fn progress; /* optional: after each repeat, label "bench" */
    void *progress_user;
} kvv_bench_opts;

/* What one engine's rates mean: the work per token, and the engine. */
typedef struct {
    double flops_pp, flops_tg;   /* FLOPs per prompt / decode token */
    double bytes_pp, bytes_tg;   /* weight bytes read per prompt / decode token */
    kvv_engine_desc d;           /* kvv_engine_describe, after the runs */
} kvv_bench_figures;

/* One engine's runs: per repeat, and their medians (kvv_median). */
typedef struct {
    double *pp, *tg;          /* [repeats] prompt and decode tokens/s (0: phase skipped) */
    double *ppc, *tgc;        /* [repeats] CPU seconds per wall second of each phase */
    double pp_med, tg_med, ppc_med, tgc_med;
    kvv_bench_figures f;
} kvv_bench_side;

typedef struct {
    int repeats, n_sides;     /* as asked; sides[n_sides..] hold nothing */
    kvv_bench_side sides[KVV_BENCH_MAX_ENGINES];
    /* roofline (all 0 without it) */
    int threads;
    double sgemm_gflops;      /* kvv_roofline_sgemm_gflops, once */
    double *read;             /* [repeats] read loop GB/s beside repeat k; NULL without */
    double read_med, read_lo, read_hi;
    double sink;              /* the read loop's sums, kept so they are not optimised away */
    double *frac;             /* [repeats] engine 0's decode GB/s / read[k]; NULL without */
    double frac_med, frac_lo, frac_hi;
    /* ratios engine 0 / engine 1 (all 0 with one engine; 0 where engine 1's rate is 0) */
    double *r_pp, *r_tg;      /* [repeats] repeat by repeat; NULL with one engine */
    double r_pp_med, r_tg_med; /* of the medians */
    double r_pp_lo, r_pp_hi, r_tg_lo, r_tg_hi; /* range of the per-repeat ratios */
} kvv_bench_result;

/* Run the measurement described at the top of this file: the sgemm figure
 * (with roofline), the warm-up, the repeats, then each engine's figures
 * and the comparisons. Releases the read loop's buffer (kvv_roofline_free)
 * before it returns. res is the caller's to free with
 * kvv_bench_result_free, also after an error.
 * @return KVV_OK; KVV_ERR_USAGE (n_engines outside 1..2, repeats < 1, a
 * negative phase or both 0, requests outside 0..KVV_ENGINE_MAX_SEQS);
 * KVV_ERR_NOMEM for its own buffers (message "out of memory"); or the first
 * engine error, with err naming it — then the figures are not filled. */
kvv_status kvv_bench_run(const kvv_bench_opts *o, kvv_bench_result *res, kvv_error *err);

/* Free res's arrays (the engines are the caller's); accepts NULL and a
 * result that holds nothing. */
void kvv_bench_result_free(kvv_bench_result *res);

#endif

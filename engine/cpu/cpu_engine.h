/*
 * cpu_engine.h — the optimized CPU engine ("cpu"): OpenBLAS sgemm for
 * multi-token products in fast mode, SIMD kernels (AVX-512 / AVX2+FMA /
 * portable C, chosen once at open from cpuid), a pthread pool, and a
 * batch-invariant mode. Architecture semantics, hooks, the shared host KV
 * cache (runtime/kv_cache.h), kv_from_residual and the KVV_CTL_* controls
 * are those of the reference engine (reference/ref.h). docs/cpu-engine.md
 * describes the kernels, the modes and the measured trade-offs.
 *
 * Opened through the engine registry (its row in engine/engine_registry.c),
 * its own options as --engine-opt keys:
 *   kvv_engine_opts o = kvv_engine_opts_default();
 *   o.name = "cpu"; o.mode = KVV_MODE_INVARIANT; o.n_threads = 2;
 *   const char *own[] = {"dequant_all=1"};
 *   o.engine_opts = own; o.n_engine_opts = 1;
 *   kvv_engine_open(model, &o, &e, &err);
 * or directly by tests, with kvv_cpu_opts:
 *   kvv_cpu_opts co = kvv_cpu_opts_default();
 *   co.dequant_all = 1;
 *   kvv_cpu_engine_open_ex(model, &o, &co, &e, &err);
 *
 * Kernel tables: o->isa ("generic", "avx2", "avx512"; NULL = the best this
 * CPU runs) picks the instruction set; cpu_isa.h lists what the CPU can run
 * and why a choice is refused. The table that ran is kvv_engine_desc.isa.
 *
 * Modes:
 *   KVV_MODE_INVARIANT: every dot product runs in the order fixed by
 *     cpu_kernels.h (a function of its length only), attention per
 *     (token, head) in ascending key order; threads split only independent
 *     outputs. Any batching, chunking or thread count gives the same bits.
 *   KVV_MODE_FAST: multi-token products (>= 4 tokens) go to cblas_sgemm,
 *     whose blocking depends on the shape; single tokens use the GEMV
 *     kernels, and for Q8_0/Q4_0 weights the integer kernels of
 *     cpu_q8dot.h (activations rounded to Q8_0 as ggml does; co->f32_act
 *     turns that off). Results agree with invariant mode to rounding (F32
 *     weights) or to ~1e-2 of the logit scale (Q8_0 decode), not bits.
 *     Side effect: opening in fast mode calls openblas_set_num_threads(1)
 *     (process-wide), so each sgemm runs inside one of our pool's threads.
 *
 * Threads: o->n_threads (--threads) threads, the caller included, in a pool
 * owned by the engine; work is cut into chunks claimed dynamically, and
 * which thread runs a chunk never changes a bit.
 *
 * Weights (cpu_weights.c; the table in docs/cpu-engine.md): F32 used in
 * place from the mapped file; the quantized types kept in the file's blocks
 * or repacked into 16-row groups (X16, cpu_x16.h) and multiplied as
 * integers, with values exactly those of ggml's formulas; F16, BF16 and the
 * other types dequantized to F32 at open. Fast mode repacks where that is
 * faster; invariant mode does too with o->repack (run and bench), and
 * otherwise reads the mapped file wherever a kernel can (the checks, which
 * hold the reference's mapping beside it): the same bits either way.
 */
#ifndef KVV_CPU_ENGINE_H
#define KVV_CPU_ENGINE_H

#include "engine/cpu/cpu_isa.h"
#include "engine/engine.h"
#include "runtime/mem_limit.h"

typedef struct {
    int dequant_all;    /* 1: dequantize Q8_0/Q4_0 to F32 at open as well */
    int f32_act;        /* fast mode, 1: keep fp32 activations for Q8_0/Q4_0 weights
                         * (no Q8_0 activation rounding; for comparison) */
    int seq_leak;       /* 1: a planted fault, the batch check's negative control:
                         * after each decode call of several sequences, each one's
                         * layer-0 K/V row is another's (runtime/kv_seqs.h) */
} kvv_cpu_opts;

kvv_cpu_opts kvv_cpu_opts_default(void);

/* The cpu engine's own options through kvv_engine_opts.engine_opts
 * (--engine-opt KEY=VALUE; the registry's column): dequant_all=0|1,
 * f32_act=0|1 and seq_leak=0|1 set the fields above. */
#define KVV_CPU_ENGINE_KEYS "dequant_all, f32_act, seq_leak"

/* Open the cpu engine on m (borrowed; must outlive the engine) with the
 * cpu-only options co, bypassing the registry (tests: kvv_engine_open with
 * o->name "cpu" is the usual way, its --engine-opt keys setting co).
 * o->mode FAST, or INVARIANT (any other mode is taken to mean invariant).
 * Errors: KVV_ERR_USAGE (bad threads, n_ctx, an o->isa the CPU cannot run:
 * kvv_cpu_isa_choose's message), KVV_ERR_UNSUPPORTED (a tensor type that
 * cannot be dequantized), KVV_ERR_NOMEM. Close with kvv_engine_close. */
kvv_status kvv_cpu_engine_open_ex(const kvv_model *m, const kvv_engine_opts *o,
                                  const kvv_cpu_opts *co, kvv_engine **out, kvv_error *err);

/* What kvv_cpu_engine_open_ex(m, o, co) will allocate (weights as held,
 * KV cache, RoPE tables, thread scratch), part by part; open checks it
 * against the memory limit first (runtime/mem_limit.h). co NULL: defaults. */
void kvv_cpu_engine_plan(const kvv_model *m, const kvv_engine_opts *o, const kvv_cpu_opts *co,
                         kvv_mem_plan *p);

/* Bytes of weights one token's pass reads as this engine holds them (the
 * layers' projections; *head: the output head), for roofline figures.
 * -1 if e is not a cpu engine. */
double kvv_cpu_engine_weight_bytes(const kvv_engine *e, double *head);

#endif

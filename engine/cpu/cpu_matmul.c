/*
 * cpu_matmul.c — threaded weight products y = x W^T of the cpu engine.
 *
 * Threads split the OUTPUT rows of each matrix in units of 16 rows (one
 * token: the call's outputs end to end, cut in equal weight bytes); a
 * thread computes every token of its rows. In invariant mode each (row, token)
 * element is one kernel dot product in the fixed order of cpu_kernels.h,
 * so neither the split nor the batch changes a bit. In fast mode a thread's
 * rows go to cblas_sgemm (OpenBLAS, single-threaded inside our pool) when
 * the batch has at least KVV_CPU_SGEMM_MIN_TOKENS tokens.
 *
 * Matrices held in the X16 layout (cpu_weights.c: Q4_0 and Q5_0 in both
 * modes; in fast mode and invariant mode with c->repack also Q8_0, Q4_1,
 * Q5_1 and, with AVX-512, Q4_K) take its integer products (cpu_x16.h:
 * Q8_0, Q8_1 or Q8_K activations) at every batch size. Without c->repack
 * invariant mode's layer Q8_0 (x16_fly) stays in the file and
 * gets the same products through 16-row groups packed per call (batches)
 * or rows_x16 (one token); its Q4_1/Q5_1/Q4_K batches of 4 or more tokens
 * are packed the same way (the bits of gemm_kq).
 *
 * Other quantized weights (Q8_0, Q4_0: heads, --f32-act): small batches use
 * the fused Q8_0 kernel (invariant mode; one token over X4-laid-out rows
 * where the head has them, cpu_impl.h) or, in fast mode, the integer kernels on Q8_0-rounded
 * activations (cpu_q8dot.h);
 * otherwise a tile of rows is dequantized into the thread's scratch and fed
 * to the f32 kernel (or sgemm). Dequantization is exact, so in invariant
 * mode every route gives the bits of the f32 kernel on the dequantized
 * matrix.
 *
 * K-quant, Q4_1 and Q5_1 weights take the integer products of
 * cpu_kquant.h at every batch size, in both modes: the activations are
 * rounded (Q8_K, Q8_1) once per call, and each output's order depends on
 * K only. (--f32-act: tiles dequantized for the f32 route instead.)
 */
#include <cblas.h>
#include <string.h>

#include "engine/cpu/cpu_impl.h"
#include "model/tensor_types.h"

kvv_cpu_weight kvv_cpu_weight_rows(const kvv_cpu_weight *w, int r0, int n)
{
    kvv_cpu_weight v = *w;
    v.rows = n;
    v.data = w->data + (size_t)r0 * w->row_bytes;
    return v;
}

/* Work below this many multiply-accumulates runs on the calling thread. */
#define MIN_PARALLEL_MACS 131072

typedef struct {
    kvv_cpu *c;
    int n;
    const float *x;
    size_t ldx;
    int n_out;
    const kvv_cpu_mm_out *outs;
    bool use_sgemm;
    bool q8;        /* x is also in c->qx / c->dx (Q8_0 activations) */
    bool sums;      /* ... with the block sums in c->sx (an X16 Q4_0/Q5_0 output) */
    bool q8k, q81;  /* ... and in c->q8k / c->q81 (Q8_K, Q8_1 activations) */
    int rows_per_chunk;
    int first_chunk[4];   /* chunk index where output o starts; [n_out] = total */
    /* One token on several threads: chunk k is the rows [cut[k], cut[k+1])
     * of the outputs laid end to end (n_cut chunks; 0: per-output chunks). */
    int n_cut;
    int cut[KVV_ENGINE_MAX_THREADS + 1];
} mm_job;

const uint8_t *kvv_cpu_x4_block(const kvv_cpu_weight *w, int r, int b)
{
    return w->data + (size_t)(r / 4) * 4 * w->row_bytes + ((size_t)b * 4 + (size_t)(r % 4)) * 34;
}

bool kvv_cpu_rounds_act(const kvv_cpu *c, const kvv_cpu_weight *w)
{
    return (w->kq >= 0 && c->kq_act) || w->x16 ||
           w->x16_fly || (c->q8_act && (w->type == KVV_TYPE_Q8_0 || w->type == KVV_TYPE_Q4_0));
}

void kvv_cpu_dequant_rows(const kvv_cpu *c, const kvv_cpu_weight *w, int r0, int nr, float *dst)
{
    if (w->x16) {
        for (int r = 0; r < nr; r++)
            kvv_cpu_x16_dequant_row((kvv_x16)kvv_cpu_x16_of((kvv_type)w->type), w->cols, w->data,
                                    r0 + r, dst + (size_t)r * w->cols);
        return;
    }
    if (w->kq >= 0) {
        for (int r = 0; r < nr; r++)
            kvv_dequantize_row((kvv_type)w->type, w->data + (size_t)(r0 + r) * w->row_bytes,
                               dst + (size_t)r * w->cols, w->cols);
        return;
    }
    if (w->x4) {
        for (int r = 0; r < nr; r++)
            for (int b = 0; b < w->cols / 32; b++)
                c->k->dequant_q8_0(kvv_cpu_x4_block(w, r0 + r, b), dst + (size_t)r * w->cols + 32 * b,
                                   32);
        return;
    }
    for (int r = 0; r < nr; r++) {
        const uint8_t *src = w->data + (size_t)(r0 + r) * w->row_bytes;
        float *d = dst + (size_t)r * w->cols;
        if (w->type == KVV_TYPE_Q8_0)
            c->k->dequant_q8_0(src, d, w->cols);
        else
            c->k->dequant_q4_0(src, d, w->cols);
    }
}

static void f32_rows(const kvv_cpu *c, bool sgemm, int K, const float *W, int nr, const float *x,
                     size_t ldx, int n, float *y, size_t ldy)
{
    if (sgemm)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, nr, K, 1.0f, x, (int)ldx, W, K,
                    0.0f, y, (int)ldy);
    else
        c->k->gemm_f32(K, W, (size_t)K, nr, x, ldx, n, y, ldy);
}

/* The X16 product's activations for type x (Q8_0 / Q8_1 / Q8_K buffers). */
static kvv_cpu_x16_act x16_act(const kvv_cpu *c, kvv_x16 x)
{
    return x == KVV_X16_Q4_K        ? (kvv_cpu_x16_act){c->q8k.q, c->q8k.d, NULL, NULL, c->q8k.bsums}
           : kvv_cpu_x16_has_min(x) ? (kvv_cpu_x16_act){c->q81.q, c->q81.d, NULL, c->q81.s, NULL}
                                    : (kvv_cpu_x16_act){c->qx, c->dx, c->sx, NULL, NULL};
}

/* A file-block weight whose X16 product gives gemm_kq's bits (Q4_1, Q5_1,
 * and Q4_K where the table has it; cpu_x16.h). */
static bool x16_repackable(const kvv_cpu *c, const kvv_cpu_weight *w)
{
    const int x = kvv_cpu_x16_of((kvv_type)w->type);
    return (x == KVV_X16_Q4_1 || x == KVV_X16_Q5_1 || x == KVV_X16_Q4_K) && c->k->gemm_x16[x];
}

/* Rows [r0, r0+nr) of a weight in the file's rows: each 16-row group is
 * repacked into the thread's scratch (16 rows' bytes, at most 17 per
 * column for Q8_0; the tile holds at least 5*cols floats) and multiplied
 * there, so the X16 product runs without an X16 copy of the matrix
 * (invariant mode keeps the file's blocks for the audit's memory). The
 * repack reads each weight once per call, the products n times: prompts
 * of Q4_1/Q5_1/Q4_K (generic pack), and Q8_0 at every batch size with a
 * table's own pack (x16_fly). */
static void x16_repacked(const kvv_cpu *c, int n, const kvv_cpu_weight *w, int r0, int nr,
                         float *y, size_t ldy, uint8_t *scratch)
{
    const kvv_x16 x = (kvv_x16)kvv_cpu_x16_of((kvv_type)w->type);
    const kvv_cpu_x16_act a = x16_act(c, x);
    const kvv_cpu_x16_pack_fn pack = c->k->pack_x16[x];
    for (int r = r0; r < r0 + nr; r += KVV_CPU_X16) {
        const int g = r0 + nr - r < KVV_CPU_X16 ? r0 + nr - r : KVV_CPU_X16;
        const uint8_t *src = w->data + (size_t)r * w->row_bytes;
        if (pack)
            pack(w->cols, src, w->row_bytes, g, scratch);
        else
            kvv_cpu_x16_pack(x, w->cols, src, w->row_bytes, g, scratch);
        c->k->gemm_x16[x](w->cols, scratch, g, &a, n, y + r, ldy);
    }
}

/* Rows [r0, r1) of one output, all tokens, on thread ith. */
static void mm_rows(const mm_job *j, int ith, const kvv_cpu_mm_out *out, int r0, int r1)
{
    kvv_cpu *c = j->c;
    const kvv_cpu_weight *w = out->w;
    int K = w->cols, nr = r1 - r0;
    if (nr <= 0)
        return;
    if (w->type == KVV_TYPE_F32) {
        f32_rows(c, j->use_sgemm, K, (const float *)(w->data + (size_t)r0 * w->row_bytes), nr,
                 j->x, j->ldx, j->n, out->y + r0, out->ldy);
        return;
    }
    if (w->x16_fly && r0 % KVV_CPU_X16 == 0) { /* every batch size, the same bits */
        const kvv_x16 x = (kvv_x16)kvv_cpu_x16_of((kvv_type)w->type);
        if (j->n == 1 && c->k->rows_x16[x]) { /* decode: the file's rows as they stream by */
            const kvv_cpu_x16_act a = x16_act(c, x);
            c->k->rows_x16[x](K, w->data + (size_t)r0 * w->row_bytes, w->row_bytes, nr, &a,
                              out->y + r0);
        } else {
            x16_repacked(c, j->n, w, r0, nr, out->y, out->ldy, (uint8_t *)c->ts[ith].tile);
        }
        return;
    }
    if (w->x16 && r0 % KVV_CPU_X16 == 0) {
        const kvv_x16 x = (kvv_x16)kvv_cpu_x16_of((kvv_type)w->type);
        const kvv_cpu_x16_act a = x16_act(c, x);
        c->k->gemm_x16[x](K, w->data + (size_t)r0 * w->row_bytes, nr, &a, j->n, out->y + r0,
                          out->ldy);
        return;
    }
    if (w->kq >= 0 && c->kq_act && !w->x16 && j->n >= KVV_CPU_X16_REPACK_MIN_TOKENS &&
        x16_repackable(c, w) && r0 % KVV_CPU_X16 == 0) {
        x16_repacked(c, j->n, w, r0, nr, out->y, out->ldy, (uint8_t *)c->ts[ith].tile);
        return;
    }
    if (w->kq >= 0 && c->kq_act && !w->x16) {
        const kvv_cpu_actbuf *b = kvv_cpu_kq_is_k((kvv_kq)w->kq) ? &c->q8k : &c->q81;
        const kvv_cpu_qact a = {b->q, b->d, b->bsums, b->s};
        c->k->gemm_kq[w->kq](K, w->data + (size_t)r0 * w->row_bytes, w->row_bytes, nr, &a, j->n,
                             out->y + r0, out->ldy);
        return;
    }
    if (j->q8 && !w->x16 && (w->type == KVV_TYPE_Q8_0 || w->type == KVV_TYPE_Q4_0)) {
        const int8_t *qx = c->qx;
        const float *dx = c->dx;
        if (w->type == KVV_TYPE_Q8_0)
            c->k->gemm_q8_0_q8(K, w->data + (size_t)r0 * w->row_bytes, w->row_bytes, nr, qx, dx,
                               j->n, out->y + r0, out->ldy);
        else
            c->k->gemm_q4_0_q8(K, w->data + (size_t)r0 * w->row_bytes, w->row_bytes, nr, qx, dx,
                               j->n, out->y + r0, out->ldy);
        return;
    }
    if (w->x4 && j->n == 1 && r0 % 4 == 0 && nr % 4 == 0) {
        c->k->gemv_q8_0_x4(K, w->data + (size_t)r0 * w->row_bytes, nr / 4, j->x, out->y + r0);
        return;
    }
    if (w->type == KVV_TYPE_Q8_0 && !w->x4 && j->n <= KVV_CPU_FUSED_MAX_TOKENS) {
        c->k->gemv_q8_0(K, w->data + (size_t)r0 * w->row_bytes, w->row_bytes, nr, j->x, j->ldx,
                        j->n, out->y + r0, out->ldy);
        return;
    }
    float *tile = c->ts[ith].tile;
    /* sgemm: large tiles (each call re-packs the activations); the blocked
     * kernel: tiles that stay in L2 */
    int rt = (j->use_sgemm ? KVV_CPU_TILE_FLOATS : KVV_CPU_TILE_FLOATS / 4) / K;
    rt = rt < 4 ? 4 : rt - rt % 4;
    for (int r = r0; r < r1; r += rt) {
        int n_r = r1 - r < rt ? r1 - r : rt;
        kvv_cpu_dequant_rows(c, w, r, n_r, tile);
        f32_rows(c, j->use_sgemm, K, tile, n_r, j->x, j->ldx, j->n, out->y + r, out->ldy);
    }
}

/* The switches of mm_rows's routes for one weight (keep in step with it). */
static void weight_paths(const kvv_cpu *c, const kvv_cpu_weight *w, kvv_batch_paths *p)
{
    const bool fast = c->mode == KVV_MODE_FAST;
    char what[96];
    if (w->kq >= 0 && c->kq_act) {
        if (x16_repackable(c, w)) /* the same bits on both sides (cpu_x16.h) */
            kvv_batch_paths_add(p, KVV_CPU_X16_REPACK_MIN_TOKENS,
                                "Q4_1/Q5_1/Q4_K products: 16-row groups repacked to X16 from here");
        return; /* otherwise one integer kernel at every batch size */
    }
    if (w->x16_fly && c->k->rows_x16[kvv_cpu_x16_of((kvv_type)w->type)])
        kvv_batch_paths_add(p, 2, "Q8_0 products: the X16 bits from the file's rows for one "
                                  "token, 16-row groups packed per call from here");
    if (w->x16 || w->x16_fly)
        return; /* X16: one integer kernel (order) at every batch size */
    if (fast) /* every other route but the integer one ends in sgemm from here */
        kvv_batch_paths_add(p, KVV_CPU_SGEMM_MIN_TOKENS, "products: OpenBLAS sgemm from here");
    bool q = w->type == KVV_TYPE_Q8_0 || w->type == KVV_TYPE_Q4_0;
    if (q && c->q8_act) {
        snprintf(what, sizeof what, "Q8_0/Q4_0 products: int8 on Q8_0 activations up to %d "
                 "tokens", KVV_CPU_FUSED_MAX_TOKENS);
        kvv_batch_paths_add(p, KVV_CPU_FUSED_MAX_TOKENS + 1, what);
    } else if (w->x4) {
        kvv_batch_paths_add(p, 2, "Q8_0 products: one-token X4 GEMV below, dequantized tiles "
                                  "from here");
    } else if (w->type == KVV_TYPE_Q8_0 && !w->x4) {
        snprintf(what, sizeof what, "Q8_0 products: fused GEMV up to %d tokens, dequantized "
                 "tiles from here", KVV_CPU_FUSED_MAX_TOKENS);
        kvv_batch_paths_add(p, KVV_CPU_FUSED_MAX_TOKENS + 1, what);
    }
}

void kvv_cpu_batch_paths(const kvv_cpu *c, kvv_batch_paths *p)
{
    memset(p, 0, sizeof *p);
    p->known = true;
    for (int l = 0; l < c->hp->n_layer; l++) {
        const kvv_cpu_layer *y = &c->layers[l];
        const kvv_cpu_weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->wu, &y->wd};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i]->data)
                weight_paths(c, ws[i], p);
    }
    weight_paths(c, &c->output, p);
}

/* Chunk k: a block of rows_per_chunk rows of one output, all tokens; or,
 * with cuts, the part of each output inside [cut[k], cut[k+1]). */
static void mm_task(void *ctx, int k, int ith)
{
    const mm_job *j = ctx;
    if (j->n_cut) {
        for (int o = 0, base = 0; o < j->n_out; base += j->outs[o++].w->rows) {
            int r0 = j->cut[k] - base, r1 = j->cut[k + 1] - base;
            r0 = r0 < 0 ? 0 : r0;
            r1 = r1 > j->outs[o].w->rows ? j->outs[o].w->rows : r1;
            mm_rows(j, ith, &j->outs[o], r0, r1);
        }
        return;
    }
    int o = 0;
    while (o + 1 < j->n_out && k >= j->first_chunk[o + 1])
        o++;
    const kvv_cpu_mm_out *out = &j->outs[o];
    int r0 = (k - j->first_chunk[o]) * j->rows_per_chunk;
    int r1 = r0 + j->rows_per_chunk < out->w->rows ? r0 + j->rows_per_chunk : out->w->rows;
    mm_rows(j, ith, out, r0, r1);
}

/* The one-token split: nth chunks of about equal weight bytes (decode
 * reads each weight once, so bytes are its time), across output
 * boundaries. A cut inside an output falls on a multiple of 16 rows (the
 * X16 groups). Splitting each output in nth instead left one thread with
 * Wv's Q6_K beside its half of Wq (qwen3-0.6b Q4_K_M: 1.45 MB against
 * 1.18 MB per layer). */
static int one_token_cuts(const kvv_cpu_mm_out *outs, int n_out, int nth, int *cut)
{
    double total = 0;
    for (int o = 0; o < n_out; o++)
        total += (double)outs[o].w->rows * (double)outs[o].w->row_bytes;
    cut[0] = 0;
    int o = 0, base = 0;
    double before = 0; /* bytes of the outputs before o */
    for (int k = 1; k < nth; k++) {
        double at = total * k / nth;
        while (o < n_out - 1 && before + (double)outs[o].w->rows * outs[o].w->row_bytes <= at) {
            before += (double)outs[o].w->rows * outs[o].w->row_bytes;
            base += outs[o++].w->rows;
        }
        int r = (int)((at - before) / (double)outs[o].w->row_bytes + 8) / 16 * 16;
        r = r > outs[o].w->rows ? outs[o].w->rows : r;
        cut[k] = base + r < cut[k - 1] ? cut[k - 1] : base + r;
    }
    cut[nth] = 0;
    for (int q = 0; q < n_out; q++)
        cut[nth] += outs[q].w->rows;
    return nth;
}

void kvv_cpu_matmul(kvv_cpu *c, int n, const float *x, size_t ldx, int n_out,
                    const kvv_cpu_mm_out *outs, bool allow_fast)
{
    mm_job j = {
        .c = c, .n = n, .x = x, .ldx = ldx, .n_out = n_out, .outs = outs,
        .use_sgemm = allow_fast && c->mode == KVV_MODE_FAST && n >= KVV_CPU_SGEMM_MIN_TOKENS,
    };
    double macs = 0;
    int max_rows = 0;
    /* Q8_0 activations (fast mode, decode-sized batches): quantized once
     * here, read by every quantized output (an F32 one in the same call
     * still reads x). Larger batches of row-major Q8_0/Q4_0 (output heads)
     * take fp32 activations and sgemm, which measured faster than this
     * integer GEMM (docs/cpu-engine.md); X16 outputs take Q8_0 activations
     * at every size, with their block sums. */
    j.q8 = j.sums = false;
    for (int o = 0; o < n_out; o++) {
        j.q8 = j.q8 || (c->q8_act && n <= KVV_CPU_FUSED_MAX_TOKENS &&
                        (outs[o].w->type == KVV_TYPE_Q8_0 || outs[o].w->type == KVV_TYPE_Q4_0));
        j.sums = j.sums || ((outs[o].w->x16 || outs[o].w->x16_fly) && outs[o].w->kq < 0);
    }
    if (j.q8 || j.sums) {
        int K = outs[0].w->cols;
        for (int t = 0; t < n; t++)
            c->k->quantize_act(K, x + (size_t)t * ldx, c->qx + (size_t)t * K,
                               c->dx + (size_t)t * (K / 32));
        if (j.sums)
            kvv_cpu_block_sums(K, c->qx, n, c->sx);
    }
    /* Q8_K / Q8_1 activations for the kq weights, every batch size */
    j.q8k = j.q81 = false;
    for (int o = 0; o < n_out && c->kq_act; o++)
        if (outs[o].w->kq >= 0) {
            if (kvv_cpu_kq_is_k((kvv_kq)outs[o].w->kq))
                j.q8k = true;
            else
                j.q81 = true;
        }
    const int K = outs[0].w->cols;
    for (int t = 0; t < n && j.q8k; t++)
        c->k->quantize_q8_k(K, x + (size_t)t * ldx, c->q8k.q + (size_t)t * K,
                            c->q8k.d + (size_t)t * (K / 256), c->q8k.bsums + (size_t)t * (K / 16));
    for (int t = 0; t < n && j.q81; t++)
        c->k->quantize_q8_1(K, x + (size_t)t * ldx, c->q81.q + (size_t)t * K,
                            c->q81.d + (size_t)t * (K / 32), c->q81.s + (size_t)t * (K / 32));
    for (int o = 0; o < n_out; o++) {
        macs += (double)n * outs[o].w->rows * outs[o].w->cols;
        max_rows = outs[o].w->rows > max_rows ? outs[o].w->rows : max_rows;
    }
    /* sgemm runs only for outputs without an integer product */
    bool sgemm_any = false;
    for (int o = 0; o < n_out; o++)
        sgemm_any = sgemm_any ||
                    !((outs[o].w->kq >= 0 && c->kq_act) || outs[o].w->x16 || outs[o].w->x16_fly);
    int nth = c->n_threads;
    j.n_cut = 0;
    if (n == 1 && nth > 1 && macs >= MIN_PARALLEL_MACS) {
        j.n_cut = one_token_cuts(outs, n_out, nth, j.cut);
        kvv_cpu_pool_run(c->pool, mm_task, &j, j.n_cut);
        return;
    }
    if (nth == 1 || macs < MIN_PARALLEL_MACS) {
        j.rows_per_chunk = max_rows > 0 ? max_rows : 1;
    } else {
        /* sgemm prefers few large calls (one per thread and output).
         * Other batches take 4 chunks per thread for load balance. Rows
         * per chunk are a multiple of 16 (the register and tile blocking). */
        int parts = j.use_sgemm && sgemm_any ? nth : 4 * nth;
        int rpc = (max_rows + parts - 1) / parts;
        j.rows_per_chunk = (rpc + 15) / 16 * 16;
    }
    int total = 0;
    for (int o = 0; o < n_out; o++) {
        j.first_chunk[o] = total;
        total += (outs[o].w->rows + j.rows_per_chunk - 1) / j.rows_per_chunk;
    }
    j.first_chunk[n_out] = total;
    kvv_cpu_pool_run(c->pool, mm_task, &j, total);
}

void kvv_cpu_matmul_reversed(kvv_cpu *c, int n, const float *x, size_t ldx,
                             const kvv_cpu_weight *w, float *y, size_t ldy)
{
    float *row = c->ts[0].tile;
    int K = w->cols;
    for (int r = 0; r < w->rows; r++) {
        const float *wr;
        if (w->type == KVV_TYPE_F32) {
            wr = (const float *)(w->data + (size_t)r * w->row_bytes);
        } else {
            kvv_cpu_dequant_rows(c, w, r, 1, row);
            wr = row;
        }
        for (int t = 0; t < n; t++) {
            const float *xt = x + (size_t)t * ldx;
            float s = 0.0f;
            for (int i = K - 1; i >= 0; i--)
                s = s + wr[i] * xt[i];
            y[(size_t)t * ldy + r] = s;
        }
    }
}

/*
 * cpu_x16.h — fast mode's products for the 32-weight block types Q4_0,
 * Q5_0, Q4_1 and Q5_1 on a 16-row repacked layout (private to engine/cpu;
 * reached through the kernel table, cpu_kernels.h contract K11).
 *
 * Why: the weights are unsigned levels u (4 or 5 bits) with a per-block
 * scale (and, for the _1 types, a per-block minimum). Stored so that one
 * 64-byte vector holds 4 consecutive levels of 16 rows, one multiply-add of
 * unsigned by signed bytes (AVX-512 VNNI vpdpbusd, or vpmaddubsw +
 * vpmaddwd) gives 16 rows' partial sums at once, lane = row, and a block
 * needs no horizontal reduction: one conversion and one or two fused
 * multiply-adds per 16 outputs. The row-major kernels (cpu_q8dot.h,
 * cpu_kquant.h) reduce 8 lanes per output per block instead; on prompts
 * they were slower than dequantizing to fp32 for sgemm, these are not
 * (docs/cpu-engine.md).
 *
 * KVV_CPU_X16 layout (the file's size: rows padded with zeros to a
 * multiple of 16): group g holds rows 16g..16g+15 and starts at
 * g * 16 * row_bytes (row_bytes = K/32 * the file's block bytes), so row
 * r0 (a multiple of 16) still starts at r0 * row_bytes. Within a group,
 * block b (32 weights of each row) takes 16 file blocks' bytes at
 * b * kvv_cpu_x16_block(x):
 *   [0, 32)       the 16 rows' fp16 scales d, row i at 2i;
 *   [32, 64)      _1 types: the 16 rows' fp16 minimums m;
 *   NIB: 256 B    4 chunks c = 0..3 of 64 bytes: byte 4i + j of chunk c is
 *                 byte 4c + j of row i's qs (low nibble: element 4c + j,
 *                 high nibble: element 16 + 4c + j);
 *                 Q8_0: 512 B, 8 chunks c = 0..7: byte 4i + j is element
 *                 4c + j of row i plus 128 (an unsigned level);
 *   QH:  64 B     Q5 types: row i's 32 high bits at 4i (bit e = bit 4 of
 *                 element e), as in the file.
 * Q4_K, per super-block (256 weights, 2304 bytes): [0, 32) d, [32, 64)
 * dmin, [64, 256) the 12 packed scale bytes as 3 chunks of 64 (chunk k:
 * bytes 4k..4k+3 of row i at 4i), [256, 2304) 32 chunks c = 8j + l of 64
 * bytes: bytes 32j + 4l .. +3 of row i's qs at 4i (low nibbles: elements
 * 64j + 4l.., sub-block 2j; high: 64j + 32 + 4l.., sub-block 2j + 1).
 *
 * Activations (kvv_cpu_x16_act), rounded as ggml rounds them for the
 * type's vec_dot_type: Q4_0, Q5_0: Q8_0 (quantize_act: q, d) with sum[b],
 * the sum of the block's 32 q (kvv_cpu_block_sums), which carries the
 * offset; Q4_1, Q5_1: Q8_1 (quantize_q8_1: q, d, s). Q8_0 takes Q8_0
 * activations like Q4_0.
 *
 * Order (every table, the same bits): per output (row r, token t), from
 * acc = +0, per block b ascending, with exact int32 sums:
 *   Q4_0, Q5_0, Q8_0 (offset o = 8, 16, 128):
 *     acc = fmaf(dw_b * dx_b, (float)(sum_i u_i*q_i - o*sum_b), acc)
 *   Q4_1, Q5_1 (the order of cpu_kquant.h, so the same bits as gemm_kq):
 *     acc = fmaf(dw_b * dx_b, (float)(sum_i u_i*q_i), acc)
 *     acc = fmaf(mw_b, s_b, acc)
 *   Q4_K: cpu_kquant.h's order per super-block (exact S and M from the
 *     sub-blocks' integer sums, then its two fused steps): gemm_kq's bits.
 *   Y[t*ldy + r] = acc   (each product dw_b * dx_b rounded once).
 * It depends on K and the inputs only: prefill and decode agree bit for
 * bit, for any batch, row blocking or thread split (K2).
 */
#ifndef KVV_CPU_X16_H
#define KVV_CPU_X16_H

#include <stddef.h>
#include <stdint.h>

#include "model/tensor_types.h"

#define KVV_CPU_X16 16

/* The types with an X16 product (index of the table's gemm_x16). */
typedef enum {
    KVV_X16_Q4_0,
    KVV_X16_Q5_0,
    KVV_X16_Q4_1,
    KVV_X16_Q5_1,
    KVV_X16_Q8_0, /* the layers' Q8_0 (the output head keeps fp32 activations) */
    KVV_X16_Q4_K, /* AVX-512 only (NULL elsewhere): the bits of gemm_kq (cpu_kquant.h) */
    KVV_X16_COUNT
} kvv_x16;

/* kvv_x16 of a ggml type, or -1. */
int kvv_cpu_x16_of(kvv_type t);
/* Bytes of one block of a 16-row group: 16 x the file's block. */
static inline size_t kvv_cpu_x16_block(kvv_x16 x)
{
    static const unsigned short b[KVV_X16_COUNT] = {288, 352, 320, 384, 544, 2304};
    return b[x];
}
/* Weights per row in a block: 32, or 256 (a Q4_K super-block). */
static inline int kvv_cpu_x16_elems(kvv_x16 x)
{
    return x == KVV_X16_Q4_K ? 256 : 32;
}
/* The level's offset of the types without a minimum: w = u - offset. */
static inline int kvv_cpu_x16_offset(kvv_x16 x)
{
    return x == KVV_X16_Q4_0 ? 8 : x == KVV_X16_Q8_0 ? 128 : 16;
}
static inline int kvv_cpu_x16_has_min(kvv_x16 x)
{
    return x == KVV_X16_Q4_1 || x == KVV_X16_Q5_1;
}
static inline int kvv_cpu_x16_has_qh(kvv_x16 x)
{
    return x == KVV_X16_Q5_0 || x == KVV_X16_Q5_1;
}
/* Offsets of the nibbles and the high bits in a block. */
static inline size_t kvv_cpu_x16_nib(kvv_x16 x)
{
    return kvv_cpu_x16_has_min(x) ? 64 : 32;
}
static inline size_t kvv_cpu_x16_qh(kvv_x16 x)
{
    return kvv_cpu_x16_nib(x) + 256;
}

/* Bytes of the X16 copy of an n_rows x K matrix (rows padded). */
size_t kvv_cpu_x16_bytes(kvv_x16 x, int n_rows, int K);
/* Repack n_rows rows of the file (src, row_bytes apart) into dst
 * (kvv_cpu_x16_bytes of it). */
void kvv_cpu_x16_pack(kvv_x16 x, int K, const void *src, size_t row_bytes, int n_rows, void *dst);
/* A table's faster kvv_cpu_x16_pack for one type (the same bytes); NULL
 * where it has none (kvv_cpu_x16_pack serves). Invariant mode multiplies
 * batches of the mapped Q8_0 through 16-row groups packed per call instead
 * of holding a copy (cpu_matmul.c). */
typedef void (*kvv_cpu_x16_pack_fn)(int K, const void *src, size_t row_bytes, int n_rows,
                                    void *dst);
/* Row r of an X16 matrix as K floats, exactly kvv_dequantize_row's. */
void kvv_cpu_x16_dequant_row(kvv_x16 x, int K, const void *G, int r, float *dst);
/* sum[t*nb + b] = the sum of the 32 q of block b of token t (nb = K/32). */
void kvv_cpu_block_sums(int K, const int8_t *q, int n_tok, int32_t *sum);

/* Rounded activations of n_tok tokens: q [n_tok][K]; d, sum, s [n_tok][K/32]. */
typedef struct {
    const int8_t *q;
    const float *d;
    const int32_t *sum; /* Q4_0, Q5_0 */
    const float *s;     /* Q4_1, Q5_1 (Q8_1's s) */
    const int16_t *bsums; /* Q4_K: Q8_K's sums of 16 ([n_tok][K/16]); d is then
                           * [n_tok][K/256] */
} kvv_cpu_x16_act;

/* Y[t*ldy + r] for r < n_rows, t < n_tok; G the first group. */
typedef void (*kvv_cpu_x16_fn)(int K, const void *G, int n_rows, const kvv_cpu_x16_act *A,
                               int n_tok, float *Y, size_t ldy);

/* A table's product of one token with n_rows rows in the FILE's layout
 * (row_bytes apart), with gemm_x16's bits for the type (A's first token;
 * Y[r]); NULL where it has none. Decode of invariant mode's Q8_0, which
 * keeps no copy (cpu_weights.c). */
typedef void (*kvv_cpu_x16_rows_fn)(int K, const void *W, size_t row_bytes, int n_rows,
                                    const kvv_cpu_x16_act *A, float *Y);

/* A table may leave an entry NULL (Q4_K outside AVX-512): the engine then
 * keeps that type's file layout and its own kernels. */
extern const kvv_cpu_x16_fn kvv_cpu_x16_generic[KVV_X16_COUNT];
/* All NULL: the generic and AVX2 tables' packs (kvv_cpu_x16_pack serves). */
extern const kvv_cpu_x16_pack_fn kvv_cpu_x16_pack_none[KVV_X16_COUNT];
/* The generic table's rows products: Q8_0 (the order in plain C). */
extern const kvv_cpu_x16_rows_fn kvv_cpu_x16_rows_generic[KVV_X16_COUNT];
/* x86-64 only: AVX2 (vpmaddubsw + vpmaddwd), AVX-512BW (the same, 16
 * lanes) and AVX-512 VNNI (vpdpbusd, compiled apart with -mavx512vnni);
 * the AVX-512 table's entries take VNNI when the CPU has it. */
extern const kvv_cpu_x16_fn kvv_cpu_x16_avx2[KVV_X16_COUNT];
extern const kvv_cpu_x16_fn kvv_cpu_x16_avx512[KVV_X16_COUNT];
extern const kvv_cpu_x16_fn kvv_cpu_x16_avx512bw[KVV_X16_COUNT];
extern const kvv_cpu_x16_fn kvv_cpu_x16_avx512vnni[KVV_X16_COUNT];
/* The AVX-512 table's packs: Q8_0 (a 16 x 8 transpose of 4-byte groups per
 * block); the others NULL. */
extern const kvv_cpu_x16_pack_fn kvv_cpu_x16_pack_avx512[KVV_X16_COUNT];
/* The AVX2 and AVX-512 tables' rows products: Q8_0; the others NULL. */
extern const kvv_cpu_x16_rows_fn kvv_cpu_x16_rows_avx2[KVV_X16_COUNT];

#endif

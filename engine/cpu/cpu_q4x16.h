/*
 * cpu_q4x16.h — fast mode's Q4_0 product on a 16-row repacked layout
 * (private to engine/cpu; reached through the kernel table, cpu_kernels.h
 * contract K11).
 *
 * Why: a Q4_0 weight is an unsigned 4-bit level u (0..15) minus 8. Stored
 * so that one 64-byte vector holds 4 consecutive levels of 16 rows, one
 * multiply-add of unsigned bytes by signed bytes (AVX-512 VNNI vpdpbusd,
 * or vpmaddubsw + vpmaddwd) gives 16 rows' partial sums at once, lane =
 * row, and a block's sums need no horizontal reduction: one conversion and
 * one fused multiply-add per 16 outputs per block. The row-major kernel
 * (cpu_q8dot.h) reduces 8 lanes per output instead; on prompts it was
 * slower than dequantizing to fp32 for sgemm, this one is not
 * (docs/cpu-engine.md).
 *
 * KVV_CPU_X16 layout (same size as the file: 18 bytes per 32 weights per
 * row; rows padded with zeros to a multiple of 16): group g holds rows
 * 16g..16g+15 and starts at g * 16 * row_bytes (row_bytes = K/32 * 18, the
 * file's), so row r0 (a multiple of 16) still starts at r0 * row_bytes.
 * Within a group, block b (32 weights of each row) is 288 bytes at b * 288:
 *   [0, 32)     the 16 rows' fp16 scales d, row i at 2i;
 *   [32, 288)   4 chunks c = 0..3 of 64 bytes: byte 4i + j of chunk c is
 *               byte 4c + j of row i's block in the file (low nibble:
 *               element 4c + j, high nibble: element 16 + 4c + j).
 *
 * Activations: Q8_0-rounded as for cpu_q8dot.h (quantize_act): q [n_tok][K]
 * int8, d [n_tok][K/32]; and s [n_tok][K/32] int32, the sum of each
 * block's 32 q (kvv_cpu_block_sums), which carries the -8.
 *
 * Order (every table, the same bits): per output (row r, token t), from
 * acc = +0, per block b ascending:
 *   S = sum_{i<32} u_i * q_i - 8 * s_b            (exact int32)
 *   acc = fmaf(dw_b * dx_b, (float)S, acc)          (product rounded once)
 *   Y[t*ldy + r] = acc.
 * It depends on K and the inputs only: prefill and decode agree bit for
 * bit, for any batch, row blocking or thread split (K2).
 */
#ifndef KVV_CPU_Q4X16_H
#define KVV_CPU_Q4X16_H

#include <stddef.h>
#include <stdint.h>

#define KVV_CPU_X16 16
#define KVV_CPU_X16_BLOCK 288 /* bytes of one block of a 16-row group */

/* Bytes of the X16 copy of an n_rows x K Q4_0 matrix (rows padded). */
size_t kvv_cpu_x16_bytes(int n_rows, int K);
/* Repack n_rows Q4_0 rows (src, row_bytes apart) into dst
 * (kvv_cpu_x16_bytes of it). */
void kvv_cpu_x16_pack(int K, const void *src, size_t row_bytes, int n_rows, void *dst);
/* Row r of an X16 matrix as n = K floats, exactly kvv_dequantize_row's. */
void kvv_cpu_x16_dequant_row(int K, const void *G, int r, float *dst);
/* s[t*nb + b] = sum of the 32 q of block b of token t (nb = K/32). */
void kvv_cpu_block_sums(int K, const int8_t *q, int n_tok, int32_t *s);

/* Y[t*ldy + r] for r < n_rows, t < n_tok; G the first group. */
typedef void (*kvv_cpu_x16_fn)(int K, const void *G, int n_rows, const int8_t *QX,
                               const float *DX, const int32_t *SX, int n_tok, float *Y,
                               size_t ldy);

void kvv_cpu_gemm_q4_0_x16_generic(int K, const void *G, int n_rows, const int8_t *QX,
                                   const float *DX, const int32_t *SX, int n_tok, float *Y,
                                   size_t ldy);
/* x86-64 only: AVX2 (vpmaddubsw + vpmaddwd), AVX-512BW (the same, 16
 * lanes) and AVX-512 VNNI (vpdpbusd, compiled apart with -mavx512vnni);
 * the AVX-512 table's entry picks VNNI when the CPU has it. */
void kvv_cpu_gemm_q4_0_x16_avx2(int K, const void *G, int n_rows, const int8_t *QX,
                                const float *DX, const int32_t *SX, int n_tok, float *Y,
                                size_t ldy);
void kvv_cpu_gemm_q4_0_x16_avx512(int K, const void *G, int n_rows, const int8_t *QX,
                                  const float *DX, const int32_t *SX, int n_tok, float *Y,
                                  size_t ldy);
void kvv_cpu_gemm_q4_0_x16_avx512bw(int K, const void *G, int n_rows, const int8_t *QX,
                                    const float *DX, const int32_t *SX, int n_tok, float *Y,
                                    size_t ldy);
void kvv_cpu_gemm_q4_0_x16_avx512vnni(int K, const void *G, int n_rows, const int8_t *QX,
                                      const float *DX, const int32_t *SX, int n_tok, float *Y,
                                      size_t ldy);

#endif

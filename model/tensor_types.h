/*
 * tensor_types.h — GGML tensor types: traits, dequantization, quantization.
 *
 * Type ids and block layouts are exactly those of llama.cpp's ggml.h and
 * ggml-common.h, so a GGUF tensor's bytes can be decoded without ggml. A row
 * of n elements of type t occupies kvv_type_row_size(t, n) bytes; n must be a
 * multiple of the type's block size.
 *
 *   const kvv_type_traits *tt = kvv_type_traits_of(KVV_TYPE_Q8_0);
 *   float row[64];
 *   kvv_dequantize_row(KVV_TYPE_Q8_0, bytes, row, 64);
 *
 * Conversions between fp32 and fp16/bf16 round to nearest, ties to even, and
 * keep NaN a NaN.
 */
#ifndef KVV_TENSOR_TYPES_H
#define KVV_TENSOR_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml_type ids as stored in GGUF tensor infos (ggml.h). Gaps are ids ggml
 * has retired; they are unknown types to kvverify. */
typedef enum {
    KVV_TYPE_F32 = 0,
    KVV_TYPE_F16 = 1,
    KVV_TYPE_Q4_0 = 2,
    KVV_TYPE_Q4_1 = 3,
    KVV_TYPE_Q5_0 = 6,
    KVV_TYPE_Q5_1 = 7,
    KVV_TYPE_Q8_0 = 8,
    KVV_TYPE_Q8_1 = 9,
    KVV_TYPE_Q2_K = 10,
    KVV_TYPE_Q3_K = 11,
    KVV_TYPE_Q4_K = 12,
    KVV_TYPE_Q5_K = 13,
    KVV_TYPE_Q6_K = 14,
    KVV_TYPE_Q8_K = 15,
    KVV_TYPE_IQ2_XXS = 16,
    KVV_TYPE_IQ2_XS = 17,
    KVV_TYPE_IQ3_XXS = 18,
    KVV_TYPE_IQ1_S = 19,
    KVV_TYPE_IQ4_NL = 20,
    KVV_TYPE_IQ3_S = 21,
    KVV_TYPE_IQ2_S = 22,
    KVV_TYPE_IQ4_XS = 23,
    KVV_TYPE_I8 = 24,
    KVV_TYPE_I16 = 25,
    KVV_TYPE_I32 = 26,
    KVV_TYPE_I64 = 27,
    KVV_TYPE_F64 = 28,
    KVV_TYPE_IQ1_M = 29,
    KVV_TYPE_BF16 = 30,
    KVV_TYPE_TQ1_0 = 34,
    KVV_TYPE_TQ2_0 = 35,
    KVV_TYPE_MXFP4 = 39,
    KVV_TYPE_COUNT = 40   /* one past the largest id kvverify knows */
} kvv_type;

typedef struct {
    const char *name;     /* "F32", "Q8_0", ... as llama.cpp prints it */
    int64_t blck_size;    /* elements per block (1 for plain types) */
    size_t type_size;     /* bytes per block */
    bool can_dequantize;  /* kvv_dequantize_row handles it */
    bool can_quantize;    /* kvv_quantize_row handles it */
} kvv_type_traits;

/* Traits of type id t, or NULL if t is not a type kvverify knows (an unknown
 * type in a file is a format error). Borrowed from a static table. */
const kvv_type_traits *kvv_type_traits_of(uint32_t t);

/* Name of type t ("Q8_0"), or "unknown". Never NULL. */
const char *kvv_type_name(uint32_t t);

/* Parse a name like "q8_0" or "F16" (case-insensitive).
 * @return true and *out on success. */
bool kvv_type_from_name(const char *name, kvv_type *out);

/* Bytes of a row of n elements; 0 if t is unknown or n is not a multiple of
 * the block size. */
size_t kvv_type_row_size(uint32_t t, int64_t n);

/* Decode n elements (a multiple of the block size) of type t into dst.
 * Exactly the formulas of ggml's dequantize_row_* (fp32 arithmetic; the
 * fp16 scales converted exactly). Returns false if t cannot be dequantized. */
bool kvv_dequantize_row(kvv_type t, const void *src, float *dst, int64_t n);

/* Encode n elements of src as type t into dst (kvv_type_row_size(t, n)
 * bytes). F16/BF16: round to nearest even. Q8_0: d = amax/127 (stored as
 * fp16), q = round(x/d) like ggml's quantize_row_q8_0_ref. Q4_0, Q4_1,
 * Q5_0, Q5_1 as ggml's quantize_row_*_ref. Q2_K..Q6_K and IQ4_NL:
 * kvverify's own encoders (least-squares sub-block fits, quantize_k.c):
 * valid blocks llama.cpp reads, not byte-equal to llama-quantize's.
 * Returns false if t cannot be quantized. */
bool kvv_quantize_row(kvv_type t, const float *src, void *dst, int64_t n);

/* Re-encode n elements (a multiple of 32) of Q4_0 or Q5_0 as Q8_0 blocks
 * (kvv_type_row_size(KVV_TYPE_Q8_0, n) bytes): the same fp16 scale and the
 * signed integer each weight already is, so kvv_dequantize_row gives the
 * same floats for both encodings (y = (float)q * d). Lossless; engines use
 * it to run one kernel on three types. Returns false for other types. */
bool kvv_widen_to_q8_0(kvv_type t, const void *src, void *dst, int64_t n);

/* Q4_1, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K as scaled integers: for each
 * group of 16 weights g, y[i] = s[g] * (float)q[i] - m[g] in fp32 (each
 * operation rounded), which is exactly what kvv_dequantize_row gives
 * (it is computed this way). n: a multiple of the block size; s and m get
 * n/16 values, q n. quant_groups.c. Returns false for other types. */
bool kvv_quant_groups_type(kvv_type t);
bool kvv_quant_groups(kvv_type t, const void *src, int64_t n, float *s, float *m, int8_t *q);

/* A Q2_K..Q6_K super-block as integers: weight i (group g = i/16) is
 *     y = (d * sc[g]) * (u[i] - off) - dmin * mn[g]
 * in fp32, which is kvv_dequantize_row's value (d*sc and dmin*mn are exact
 * products). u: the unsigned level (Q2_K 0..3, Q3_K 0..7 with off 4,
 * Q4_K 0..15, Q5_K 0..31, Q6_K 0..63 with off 32); sc: signed group scale
 * (Q3_K -32..31, Q6_K -128..127, else 0..63); mn: group min (0 for Q3_K,
 * Q6_K). For integer dot products (ggml's vec_dot_*_q8_K): sum u*x per
 * group, scaled by sc, minus off*sc and mn times the group's sum of x.
 * quant_groups.c (the one decoder of each layout). @return false for other
 * types. */
typedef struct {
    uint8_t u[256];
    int16_t sc[16], mn[16];
    float d, dmin;
    int off;
} kvv_kblock;
bool kvv_kblock_unpack(kvv_type t, const void *block, kvv_kblock *out);

/* Scalar conversions (round to nearest even; NaN stays NaN). */
float kvv_fp16_to_fp32(uint16_t h);
uint16_t kvv_fp32_to_fp16(float f);
float kvv_bf16_to_fp32(uint16_t h);
uint16_t kvv_fp32_to_bf16(float f);

#endif

/*
 * tensor_types.c — GGML type traits (names, block sizes, row sizes) and the
 * fp16/bf16 scalar conversions every decoder and encoder is built on.
 * Decoding is in dequant.c (with dequant_k.c and quant_groups.c), encoding
 * in quantize.c; all of them use this file and nothing above it.
 *
 * Every block layout is byte-for-byte that of llama.cpp's ggml-common.h and
 * every formula that of ggml's dequantize_row_* / quantize_row_*_ref,
 * evaluated in fp32 in the same order (the build has -ffp-contract=off, so
 * nothing is fused). Multi-byte fields are read as little-endian bytes, so
 * the code does not depend on the host's byte order. No libm: rounding and
 * |x| are done on the bits.
 */
#include "model/tensor_types.h"
#include "model/tensor_types_impl.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ trait table */

/* Indexed by ggml type id. Retired ids (4, 5: Q4_2/Q4_3; 31-33: Q4_0_4_4,
 * Q4_0_4_8, Q4_0_8_8; 36-38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) have no
 * name and are unknown. Sizes as ggml.c's type_traits. */
static const kvv_type_traits TRAITS[KVV_TYPE_COUNT] = {
    [KVV_TYPE_F32]     = { "F32",     1,    4,   true,  true  },
    [KVV_TYPE_F16]     = { "F16",     1,    2,   true,  true  },
    [KVV_TYPE_Q4_0]    = { "Q4_0",    QK,   18,  true,  true  },
    [KVV_TYPE_Q4_1]    = { "Q4_1",    QK,   20,  true,  true  },
    [KVV_TYPE_Q5_0]    = { "Q5_0",    QK,   22,  true,  true  },
    [KVV_TYPE_Q5_1]    = { "Q5_1",    QK,   24,  true,  true  },
    [KVV_TYPE_Q8_0]    = { "Q8_0",    QK,   34,  true,  true  },
    [KVV_TYPE_Q8_1]    = { "Q8_1",    QK,   36,  false, false },
    [KVV_TYPE_Q2_K]    = { "Q2_K",    QK_K, 84,  true,  true  },
    [KVV_TYPE_Q3_K]    = { "Q3_K",    QK_K, 110, true,  true  },
    [KVV_TYPE_Q4_K]    = { "Q4_K",    QK_K, 144, true,  true  },
    [KVV_TYPE_Q5_K]    = { "Q5_K",    QK_K, 176, true,  true  },
    [KVV_TYPE_Q6_K]    = { "Q6_K",    QK_K, 210, true,  true  },
    [KVV_TYPE_Q8_K]    = { "Q8_K",    QK_K, 292, true,  false },
    [KVV_TYPE_IQ2_XXS] = { "IQ2_XXS", QK_K, 66,  false, false },
    [KVV_TYPE_IQ2_XS]  = { "IQ2_XS",  QK_K, 74,  false, false },
    [KVV_TYPE_IQ3_XXS] = { "IQ3_XXS", QK_K, 98,  false, false },
    [KVV_TYPE_IQ1_S]   = { "IQ1_S",   QK_K, 50,  false, false },
    [KVV_TYPE_IQ4_NL]  = { "IQ4_NL",  QK,   18,  true,  true  },
    [KVV_TYPE_IQ3_S]   = { "IQ3_S",   QK_K, 110, false, false },
    [KVV_TYPE_IQ2_S]   = { "IQ2_S",   QK_K, 82,  false, false },
    [KVV_TYPE_IQ4_XS]  = { "IQ4_XS",  QK_K, 136, true,  false },
    [KVV_TYPE_I8]      = { "I8",      1,    1,   false, false },
    [KVV_TYPE_I16]     = { "I16",     1,    2,   false, false },
    [KVV_TYPE_I32]     = { "I32",     1,    4,   false, false },
    [KVV_TYPE_I64]     = { "I64",     1,    8,   false, false },
    [KVV_TYPE_F64]     = { "F64",     1,    8,   false, false },
    [KVV_TYPE_IQ1_M]   = { "IQ1_M",   QK_K, 56,  false, false },
    [KVV_TYPE_BF16]    = { "BF16",    1,    2,   true,  true  },
    [KVV_TYPE_TQ1_0]   = { "TQ1_0",   QK_K, 54,  true,  false },
    [KVV_TYPE_TQ2_0]   = { "TQ2_0",   QK_K, 66,  true,  false },
    [KVV_TYPE_MXFP4]   = { "MXFP4",   QK,   17,  true,  false },
};

const kvv_type_traits *kvv_type_traits_of(uint32_t t)
{
    if (t >= KVV_TYPE_COUNT || TRAITS[t].name == NULL)
        return NULL;
    return &TRAITS[t];
}

const char *kvv_type_name(uint32_t t)
{
    const kvv_type_traits *tt = kvv_type_traits_of(t);
    return tt ? tt->name : "unknown";
}

static char ascii_upper(char c)
{
    return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

bool kvv_type_from_name(const char *name, kvv_type *out)
{
    if (name == NULL)
        return false;
    for (uint32_t t = 0; t < KVV_TYPE_COUNT; t++) {
        const char *n = TRAITS[t].name;
        if (n == NULL)
            continue;
        size_t i = 0;
        while (n[i] != '\0' && ascii_upper(name[i]) == n[i])
            i++;
        if (n[i] == '\0' && name[i] == '\0') {
            if (out)
                *out = (kvv_type)t;
            return true;
        }
    }
    return false;
}

size_t kvv_type_row_size(uint32_t t, int64_t n)
{
    const kvv_type_traits *tt = kvv_type_traits_of(t);
    if (tt == NULL || n < 0 || n % tt->blck_size != 0)
        return 0;
    uint64_t blocks = (uint64_t)(n / tt->blck_size);
    if (blocks > SIZE_MAX / tt->type_size)
        return 0;
    return (size_t)blocks * tt->type_size;
}

/* ------------------------------------------------------ bits and scalars */

float kvv_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {                 /* inf, or NaN: payload kept, quieted */
        u = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u);
    } else if (exp == 0) {
        if (mant == 0) {
            u = sign;                  /* +-0 */
        } else {                       /* subnormal: mant * 2^-24, normalise */
            uint32_t e = 113;          /* 127 - 15 + 1 */
            while (!(mant & 0x400u)) {
                mant <<= 1;
                e--;
            }
            u = sign | (e << 23) | ((mant & 0x3ffu) << 13);
        }
    } else {
        u = sign | ((exp + 112) << 23) | (mant << 13);
    }
    return bits_f32(u);
}

uint16_t kvv_fp32_to_fp16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)               /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u)              /* >= 65520 rounds to inf (tie: even) */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {             /* below 2^-14: fp16 subnormal or 0 */
        uint32_t e = a >> 23;
        if (e < 102)                   /* < 2^-25: rounds to 0 */
            return sign;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;      /* result = m * 2^(e-126), 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;                       /* may carry into the smallest normal */
        return (uint16_t)(sign | q);
    }
    /* normal: rebias, round the 13 dropped bits to nearest even */
    uint32_t r = (a - 0x38000000u) + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float kvv_bf16_to_fp32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t kvv_fp32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN: force quiet */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/*
 * simde_x86.h — prelude of the kernel tests' emulated builds (test-only;
 * never part of ./kvverify).
 *
 * The Makefile compiles the x86 kernel files (engine/cpu/..._avx2.c and
 * ..._avx512.c) a second time without any -m flag, with -DKVV_CPU_EMULATED
 * and `-include tests/engine/simde_x86.h`: every x86 intrinsic they use
 * then resolves to SIMDe's portable implementation (Debian libsimde-dev,
 * SIMDE_ENABLE_NATIVE_ALIASES). tests/engine/test_cpu_kernels.c runs those
 * tables on every machine, so a CPU without AVX-512 still checks the
 * AVX-512 kernels' bits, and a CPU with it checks that the emulated bits
 * equal the native ones. The exported names get an `_emu` suffix (below) so
 * the native and the emulated build link into one test binary.
 *
 * SIMDe 0.7.4 (Debian 12) needs help in two places, fixed here for the
 * emulated build only:
 *  - without native FMA its fused multiply-adds are a rounded multiply then
 *    a rounded add; the kernels' order is ONE rounding per step, so the
 *    fmadd intrinsics are replaced by per-lane fmaf (correctly rounded, C99);
 *  - _mm512_cvtepi32_ps, _mm512_cvtepi8_epi32, _mm512_cvttps_epi32,
 *    _mm512_cvtph_ps and the
 *    scalar F16C conversions _cvtsh_ss / _cvtss_sh are missing: exact
 *    per-lane versions below (cvttps: x86's 0x80000000 for NaN and out of
 *    range, never C's undefined conversion);
 *  - its native alias of _mm512_madd_epi16 has the masked form's four
 *    arguments (the function is right; the alias is fixed below);
 *  - its _mm512_mask_sub_epi32 subtracts in signed C lanes, all of them,
 *    then masks: 0x80000000 - 1 (a NaN lane's integer in exp16) is
 *    undefined behaviour there (UBSan stops make test-asan) where the
 *    hardware wraps; a wrapping per-lane version below.
 */
#ifndef KVV_TESTS_SIMDE_X86_H
#define KVV_TESTS_SIMDE_X86_H

#if defined(__x86_64__) || defined(__i386__)
/* The compiler's own declarations first: SIMDe then reuses its vector types
 * (the kernel file's later #include <immintrin.h> is a no-op). */
#include <immintrin.h>
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__has_include)
#if !__has_include(<simde/x86/avx512.h>)
#error "SIMDe headers not found: run scripts/install-deps.sh (Debian package libsimde-dev)"
#endif
#endif
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>

/* ---- exported names of the emulated build ---- */
#define kvv_cpu_kernels_avx2 kvv_cpu_kernels_avx2_emu
#define kvv_cpu_kernels_avx512 kvv_cpu_kernels_avx512_emu
#define kvv_cpu_avx2_widen_f16 kvv_cpu_avx2_widen_f16_emu
#define kvv_cpu_wsum_tail kvv_cpu_wsum_tail_emu
#define kvv_cpu_avx2_widen_bf16 kvv_cpu_avx2_widen_bf16_emu
#define kvv_cpu_quantize_q8_k_avx2 kvv_cpu_quantize_q8_k_avx2_emu
#define kvv_cpu_quantize_q8_1_avx2 kvv_cpu_quantize_q8_1_avx2_emu
#define kvv_cpu_kq_avx2 kvv_cpu_kq_avx2_emu
#define kvv_cpu_kq_avx512 kvv_cpu_kq_avx512_emu
#define kvv_cpu_kq_avx512bw kvv_cpu_kq_avx512bw_emu
#define kvv_cpu_kq_avx512vnni kvv_cpu_kq_avx512vnni_emu
#define kvv_cpu_avx2_scale kvv_cpu_avx2_scale_emu
#define kvv_cpu_quantize_act_avx2 kvv_cpu_quantize_act_avx2_emu
#define kvv_cpu_gemm_q8_0_q8_avx2 kvv_cpu_gemm_q8_0_q8_avx2_emu
#define kvv_cpu_gemm_q4_0_q8_avx2 kvv_cpu_gemm_q4_0_q8_avx2_emu
#define kvv_cpu_x16_avx2 kvv_cpu_x16_avx2_emu
#define kvv_cpu_x16_avx512 kvv_cpu_x16_avx512_emu
#define kvv_cpu_x16_avx512bw kvv_cpu_x16_avx512bw_emu
#define kvv_cpu_x16_avx512vnni kvv_cpu_x16_avx512vnni_emu
#define kvv_cpu_x16_pack_avx512 kvv_cpu_x16_pack_avx512_emu
#define kvv_cpu_x16_rows_avx2 kvv_cpu_x16_rows_avx2_emu

/* ---- exact fused multiply-add ---- */
static inline simde__m256 kvv_emu_fmadd256(simde__m256 a, simde__m256 b, simde__m256 c)
{
    float x[8], y[8], z[8];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    memcpy(z, &c, sizeof z);
    for (int i = 0; i < 8; i++)
        z[i] = fmaf(x[i], y[i], z[i]);
    memcpy(&c, z, sizeof z);
    return c;
}

static inline simde__m512 kvv_emu_fmadd512(simde__m512 a, simde__m512 b, simde__m512 c)
{
    float x[16], y[16], z[16];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    memcpy(z, &c, sizeof z);
    for (int i = 0; i < 16; i++)
        z[i] = fmaf(x[i], y[i], z[i]);
    memcpy(&c, z, sizeof z);
    return c;
}

#undef _mm256_fmadd_ps
#define _mm256_fmadd_ps(a, b, c) kvv_emu_fmadd256((a), (b), (c))
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps(a, b, c) kvv_emu_fmadd512((a), (b), (c))

/* ---- what SIMDe 0.7.4 lacks ---- */
static inline simde__m512 kvv_emu_mm512_cvtepi32_ps(simde__m512i a)
{
    int32_t v[16];
    float f[16];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 16; i++)
        f[i] = (float)v[i]; /* round to nearest even, as cvtdq2ps under the default MXCSR */
    simde__m512 r;
    memcpy(&r, f, sizeof f);
    return r;
}

static inline simde__m512i kvv_emu_mm512_cvtepi8_epi32(simde__m128i a)
{
    int8_t b[16];
    int32_t v[16];
    memcpy(b, &a, sizeof b);
    for (int i = 0; i < 16; i++)
        v[i] = b[i];
    simde__m512i r;
    memcpy(&r, v, sizeof v);
    return r;
}

static inline simde__m512i kvv_emu_mm512_cvttps_epi32(simde__m512 a)
{
    float f[16];
    int32_t v[16];
    memcpy(f, &a, sizeof f);
    for (int i = 0; i < 16; i++)
        v[i] = f[i] >= -2147483648.0f && f[i] < 2147483648.0f ? (int32_t)f[i] : INT32_MIN;
    simde__m512i r;
    memcpy(&r, v, sizeof v);
    return r;
}

static inline simde__m512 kvv_emu_mm512_cvtph_ps(simde__m256i a)
{
    simde__m128i h[2];
    memcpy(h, &a, sizeof h);
    simde__m256 lo = simde_mm256_cvtph_ps(h[0]), hi = simde_mm256_cvtph_ps(h[1]);
    simde__m512 r;
    memcpy(&r, &lo, sizeof lo);
    memcpy((char *)&r + sizeof lo, &hi, sizeof hi);
    return r;
}

static inline float kvv_emu_cvtsh_ss(unsigned short h)
{
    return simde_mm_cvtss_f32(simde_mm_cvtph_ps(simde_mm_cvtsi32_si128((int)h)));
}

static inline unsigned short kvv_emu_cvtss_sh(float f)
{
    /* SIMDe rounds to nearest even, the only mode the kernels ask for */
    simde__m128i h = simde_mm_cvtps_ph(simde_mm_set_ss(f), 0);
    return (unsigned short)simde_mm_extract_epi16(h, 0);
}

static inline simde__m512i kvv_emu_mm512_mask_sub_epi32(simde__m512i src, simde__mmask16 k,
                                                       simde__m512i a, simde__m512i b)
{
    uint32_t s[16], x[16], y[16];
    memcpy(s, &src, sizeof s);
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    for (int i = 0; i < 16; i++)
        if (k >> i & 1)
            s[i] = x[i] - y[i];
    memcpy(&src, s, sizeof s);
    return src;
}

/* SIMDe 0.7.4's native alias of _mm512_madd_epi16 takes the masked form's
 * four arguments (a typo there); the function itself is right */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16((a), (b))
#undef _mm512_mask_sub_epi32
#define _mm512_mask_sub_epi32(src, k, a, b) kvv_emu_mm512_mask_sub_epi32((src), (k), (a), (b))
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps(a) kvv_emu_mm512_cvtepi32_ps(a)
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32(a) kvv_emu_mm512_cvtepi8_epi32(a)
#undef _mm512_cvttps_epi32
#define _mm512_cvttps_epi32(a) kvv_emu_mm512_cvttps_epi32(a)
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps(a) kvv_emu_mm512_cvtph_ps(a)
#undef _cvtsh_ss
#define _cvtsh_ss(h) kvv_emu_cvtsh_ss(h)
#undef _cvtss_sh
#define _cvtss_sh(f, rounding) kvv_emu_cvtss_sh(f)

#endif

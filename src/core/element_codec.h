/* element_codec.h -- the per-element encode/decode arithmetic, compiled by both the C library
 * (src/core/element.c wraps it as lofp_encode / lofp_decode) and the CUDA backend (cuda/
 * lofp_cuda_device.cuh calls it from its kernels and from the host-side check), so that there is
 * one definition of every codec rather than a C original and a device port that must be kept in
 * step by hand.
 *
 * Rules for this file: C11 and CUDA C++ at once (no bool, no references, no compound literals, no
 * namespaces); every function is `static` inline and marked LOFP_CODEC_FN, which adds
 * __host__ __device__ under nvcc; integer arithmetic and exact fp32 operations only (products
 * by powers of two), so no build flag can change a result. Rounding modes and overflow policies
 * take the values of lofp_rounding and lofp_overflow (include/lofp/lofp.h).
 *
 * Every signed minifloat (E2M1, E2M3, E3M2, E4M3, E5M2, bf16, fp16) goes through one integer
 * encoder driven by a lofp_ec_minifloat row: the magnitude code of a sign-magnitude minifloat is
 * monotonic in its value, and ((te - emin) << mbits) + q, with q the significand in units of the
 * target ulp, is exactly that code for subnormals and normals alike (a carry out of the mantissa
 * bumps the exponent for free). Rounding is decided on the integer remainder, so no fp operation
 * can round twice. Decoding builds the value from the fields, exactly. */
#ifndef LOFP_ELEMENT_CODEC_H
#define LOFP_ELEMENT_CODEC_H

#include <stdint.h>
#include <string.h>

#include "lofp/lofp.h"

#if defined(__CUDACC__)
#define LOFP_CODEC_FN static __forceinline__ __host__ __device__
#else
#define LOFP_CODEC_FN static inline
#endif

LOFP_CODEC_FN uint32_t lofp_ec_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

LOFP_CODEC_FN float lofp_ec_bits_f32(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

/* 2^e as an fp32 (e in [-149, 127]), built from its bits. */
LOFP_CODEC_FN float lofp_ec_pow2(int e)
{
    return e >= -126 ? lofp_ec_bits_f32((uint32_t)(e + 127) << 23)
                     : lofp_ec_bits_f32((uint32_t)1 << (e + 149));
}

/* What the minifloat encoder and decoder need of a type (the same fields as its row of
 * lofp_elem_traits, src/core/traits.c). */
typedef struct lofp_ec_minifloat {
    int mbits, bias;
    int emax_binade;        /* fp32 exponent of the binade holding max */
    uint32_t max_code;      /* largest finite magnitude code */
    uint32_t sign_bit;      /* code bit holding the sign (UE4M3: the bit above the code) */
    uint32_t overflow_code; /* IEEE overflow result (Inf or NaN magnitude code), 0 = saturate */
    uint32_t nan_code;      /* magnitude code for NaN input, 0 = type has none (NaN -> +0) */
    int nan_keeps_sign;
    int has_inf;
} lofp_ec_minifloat;

LOFP_CODEC_FN lofp_ec_minifloat lofp_ec_minifloat_make(int mbits, int bias, int emax_binade,
                                                       uint32_t max_code, uint32_t sign_bit,
                                                       uint32_t overflow_code, uint32_t nan_code,
                                                       int nan_keeps_sign, int has_inf)
{
    lofp_ec_minifloat m;
    m.mbits = mbits;
    m.bias = bias;
    m.emax_binade = emax_binade;
    m.max_code = max_code;
    m.sign_bit = sign_bit;
    m.overflow_code = overflow_code;
    m.nan_code = nan_code;
    m.nan_keeps_sign = nan_keeps_sign;
    m.has_inf = has_inf;
    return m;
}

/* The minifloat row of element type t (a lofp_elem: E2M1, E2M3, E3M2, E4M3, E5M2, UE4M3, BF16;
 * anything else gives fp16). Device code cannot read the host's traits table, so the rows are
 * spelled out here; the C library reads lofp_elem_traits instead, and tests/cuda/test_codec_host.cu
 * compares the two through every code and input class. */
LOFP_CODEC_FN lofp_ec_minifloat lofp_ec_minifloat_of(int t)
{
    switch (t) {
    case LOFP_ELEM_E2M1: return lofp_ec_minifloat_make(1, 1, 2, 0x7u, 0x8u, 0u, 0u, 1, 0);
    case LOFP_ELEM_E2M3: return lofp_ec_minifloat_make(3, 1, 2, 0x1Fu, 0x20u, 0u, 0u, 1, 0);
    case LOFP_ELEM_E3M2: return lofp_ec_minifloat_make(2, 3, 4, 0x1Fu, 0x20u, 0u, 0u, 1, 0);
    case LOFP_ELEM_E4M3: return lofp_ec_minifloat_make(3, 7, 8, 0x7Eu, 0x80u, 0x7Fu, 0x7Fu, 1, 0);
    case LOFP_ELEM_E5M2: return lofp_ec_minifloat_make(2, 15, 15, 0x7Bu, 0x80u, 0x7Cu, 0x7Eu, 1, 1);
    case LOFP_ELEM_UE4M3: return lofp_ec_minifloat_make(3, 7, 8, 0x7Eu, 0x80u, 0u, 0x7Fu, 0, 0);
    case LOFP_ELEM_BF16:
        return lofp_ec_minifloat_make(7, 127, 127, 0x7F7Fu, 0x8000u, 0x7F80u, 0x7FC0u, 1, 1);
    default: return lofp_ec_minifloat_make(10, 15, 15, 0x7BFFu, 0x8000u, 0x7C00u, 0x7E00u, 1, 1);
    }
}

/* Whether to round the magnitude up, given the kept integer q, the dropped bits rem and their
 * count `shift` (rem < 2^shift, shift >= 1). */
LOFP_CODEC_FN int lofp_ec_round_up(int mode, uint64_t q, uint64_t rem, unsigned shift,
                                   uint32_t rbits)
{
    uint64_t half;
    if (rem == 0) return 0;
    if (shift > 64) {
        /* Everything dropped and rem < 2^24 << 40: only the nearest-family "down" answers remain,
         * and stochastic rounds up only when rbits < rem * 2^(32-shift) < 1, i.e. rbits == 0. */
        return mode == LOFP_STOCHASTIC ? rbits == 0 : 0;
    }
    half = (uint64_t)1 << (shift - 1);
    switch (mode) {
    case LOFP_RNE: return rem > half || (rem == half && (q & 1));
    case LOFP_TIES_TO_ZERO: return rem > half;
    case LOFP_TIES_AWAY: return rem >= half;
    case LOFP_STOCHASTIC:
        /* up iff rbits < rem / 2^shift * 2^32, compared exactly in integers */
        if (shift <= 32) return ((uint64_t)rbits << shift) < (rem << 32) ? 1 : 0;
        return ((uint64_t)rbits << (shift - 32)) < rem;
    }
    return 0;
}

/* Magnitude code of |x| (x finite, bits `a` without the sign), before overflow handling: may
 * exceed tr->max_code (then it is max_code + 1 or more). */
LOFP_CODEC_FN uint32_t lofp_ec_minifloat_mag(const lofp_ec_minifloat *tr, uint32_t a, int mode,
                                             uint32_t rbits)
{
    int ex, te;
    uint64_t sig, q, rem, code;
    unsigned shift;
    const int mbits = tr->mbits;
    const int emin = 1 - tr->bias;
    if (a == 0) return 0;
    ex = (int)(a >> 23);
    sig = a & 0x7FFFFFu;
    if (ex == 0) ex = 1; /* fp32 subnormal: value = sig * 2^(1-127-23) */
    else sig |= 0x800000u;
    ex -= 127;
    /* Far above the largest binade: certainly an overflow; avoid huge shifts below. */
    if (ex > tr->emax_binade + 1) return tr->max_code + 1;
    te = ex > emin ? ex : emin;
    /* value = sig * 2^(ex-23); target ulp = 2^(te-mbits); drop shift bits */
    shift = (unsigned)((te - mbits) - (ex - 23));
    if (shift >= 64) { q = 0; rem = sig; }
    else { q = sig >> shift; rem = sig & (((uint64_t)1 << shift) - 1); }
    q += (uint64_t)lofp_ec_round_up(mode, q, rem, shift, rbits);
    code = ((uint64_t)(te - emin) << mbits) + q;
    return code > 0xFFFFFFu ? 0xFFFFFFu : (uint32_t)code;
}

/* Signed minifloat code of x; ovf is a lofp_overflow. */
LOFP_CODEC_FN uint32_t lofp_ec_encode_minifloat(const lofp_ec_minifloat *tr, float x, int mode,
                                                int ovf, uint32_t rbits)
{
    const uint32_t u = lofp_ec_f32_bits(x);
    const uint32_t sign = (u >> 31) ? tr->sign_bit : 0;
    const uint32_t a = u & 0x7FFFFFFFu;
    uint32_t mag;
    if (a > 0x7F800000u) return tr->nan_code ? (tr->nan_code | (tr->nan_keeps_sign ? sign : 0)) : 0;
    if (a == 0x7F800000u) {
        if (ovf == LOFP_IEEE && tr->overflow_code) return tr->overflow_code | sign;
        return tr->max_code | sign;
    }
    mag = lofp_ec_minifloat_mag(tr, a, mode, rbits);
    if (mag > tr->max_code) {
        if (ovf == LOFP_IEEE && tr->overflow_code) return tr->overflow_code | sign;
        mag = tr->max_code;
    }
    return mag | sign;
}

/* UE4M3 (tr: its row): NaN -> 0x7F; a negative input's nearest representable value is +0. */
LOFP_CODEC_FN uint32_t lofp_ec_encode_ue4m3(const lofp_ec_minifloat *tr, float x, int mode, int ovf,
                                            uint32_t rbits)
{
    const uint32_t u = lofp_ec_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7F;
    if (u >> 31) return 0;
    return lofp_ec_encode_minifloat(tr, x, mode, ovf, rbits);
}

/* E8M0: 2^(e-127), e = 0..254. Nearest in the linear domain: between 2^k and 2^(k+1) the
 * midpoint is 1.5 * 2^k, i.e. fp32 mantissa 0x400000 within the binade. */
LOFP_CODEC_FN uint32_t lofp_ec_encode_e8m0(float x, int mode, int ovf, uint32_t rbits)
{
    const uint32_t u = lofp_ec_f32_bits(x);
    const uint32_t a = u & 0x7FFFFFFFu;
    int ex;
    uint64_t m;
    uint32_t e;
    if (a > 0x7F800000u) return 0xFF;
    if ((u >> 31) || a == 0) return ovf == LOFP_IEEE ? 0xFF : 0x00; /* no zero, no sign */
    if (a == 0x7F800000u) return ovf == LOFP_IEEE ? 0xFF : 0xFE;
    ex = (int)(a >> 23);
    m = a & 0x7FFFFFu;
    if (ex == 0) {
        /* fp32 subnormal: value m * 2^-149 < 2^-126. Neighbours 2^-127 (code 0) and 2^-126
         * (code 1) above 2^-127; below it the nearest is code 0 anyway (saturating low). */
        if (m <= 0x400000u) return 0x00;
        /* between 2^-127 (m = 2^22) and 2^-126 (m = 2^23): frac = (m - 2^22) / 2^22 */
        return (uint32_t)lofp_ec_round_up(mode, 0 /* code 0 is even */, m - 0x400000u, 22, rbits);
    }
    e = (uint32_t)ex; /* value in [2^(e-127), 2^(e-126)), frac = m / 2^23 */
    e += (uint32_t)lofp_ec_round_up(mode, e, m, 23, rbits);
    if (e > 254) return ovf == LOFP_IEEE ? 0xFF : 0xFE;
    return e;
}

/* MXINT8: k * 2^-6, k in [-127, 127], stored as two's complement. Rounding applies to |x|*64
 * (exact: a power-of-two scaling), sign restored afterwards, so the modes are symmetric. */
LOFP_CODEC_FN uint32_t lofp_ec_encode_mxint8(float x, int mode, uint32_t rbits)
{
    const uint32_t u = lofp_ec_f32_bits(x);
    const uint32_t a = u & 0x7FFFFFFFu;
    uint32_t k;
    int v;
    if (a > 0x7F800000u) return 0;
    if (a >= 0x43000000u) k = 127; /* |x| * 64 >= 128 (includes Inf) */
    else if (a == 0) k = 0;
    else {
        int ex = (int)(a >> 23);
        uint64_t sig = a & 0x7FFFFFu, q, rem;
        unsigned shift;
        if (ex == 0) ex = 1; else sig |= 0x800000u;
        /* |x|*64 = sig * 2^(ex-127-23+6); integer part drops shift = 144 - ex bits */
        shift = (unsigned)(144 - ex);
        if (shift >= 64) { q = 0; rem = sig; }
        else { q = sig >> shift; rem = sig & (((uint64_t)1 << shift) - 1); }
        q += (uint64_t)lofp_ec_round_up(mode, q, rem, shift, rbits);
        k = q > 127 ? 127 : (uint32_t)q;
    }
    v = (u >> 31) ? -(int)k : (int)k;
    return (uint32_t)(uint8_t)(int8_t)v;
}

/* fp32 -> bf16 bits under RNE; NaN -> the quiet NaN of its sign (as lofp_encode gives it). */
LOFP_CODEC_FN uint16_t lofp_ec_fp32_to_bf16(float x)
{
    uint32_t u = lofp_ec_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7FC0u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* RNE; overflow carries into Inf as IEEE wants */
    return (uint16_t)(u >> 16);
}

/* Value of a minifloat code (code holds the magnitude and sign bits only): exact for every code.
 * m * 2^e is exact because m has at most 11 bits and the result is an fp32 normal or subnormal. */
LOFP_CODEC_FN float lofp_ec_decode_minifloat(const lofp_ec_minifloat *tr, uint32_t code)
{
    const int mbits = tr->mbits;
    const uint32_t sign = (code & tr->sign_bit) ? 0x80000000u : 0;
    const uint32_t mag = code & (tr->sign_bit - 1);
    uint32_t e, m;
    float v;
    if (tr->nan_code && (mag == tr->nan_code || (tr->has_inf && mag > tr->overflow_code)))
        return lofp_ec_bits_f32(sign | 0x7FC00000u);
    if (tr->has_inf && mag == tr->overflow_code) return lofp_ec_bits_f32(sign | 0x7F800000u);
    e = mag >> mbits;
    m = mag & ((1u << mbits) - 1);
    if (e == 0) v = (float)m * lofp_ec_pow2(1 - tr->bias - mbits);
    else v = (float)((1u << mbits) | m) * lofp_ec_pow2((int)e - tr->bias - mbits);
    return lofp_ec_bits_f32(lofp_ec_f32_bits(v) | sign);
}

/* E8M0 value: 0xFF is NaN, 0x00 is 2^-127 (an fp32 subnormal). */
LOFP_CODEC_FN float lofp_ec_decode_e8m0(uint32_t code)
{
    code &= 0xFFu;
    if (code == 0xFF) return lofp_ec_bits_f32(0x7FC00000u);
    if (code == 0) return lofp_ec_bits_f32(0x00400000u);
    return lofp_ec_bits_f32(code << 23);
}

/* MXINT8 value: the two's-complement byte times 2^-6 (exact). */
LOFP_CODEC_FN float lofp_ec_decode_mxint8(uint32_t code)
{
    return (float)(int8_t)(uint8_t)code * 0.015625f;
}

#endif

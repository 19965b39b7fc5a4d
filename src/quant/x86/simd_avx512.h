/* simd_avx512.h -- 512-bit building blocks shared by the x86 *_avx512.c kernels (compiled with the
 * AVX2 flags plus AVX-512 F/BW/VL/VNNI/BF16/VBMI). Include only from those files: everything is
 * `static inline`, so no AVX-512 instruction is shared with another translation unit.
 *
 * E2M1 at 512 bits: the byte-domain keys of simd_avx2.h (floor key F and ceiling key C of |e|,
 * minus 999, saturated) clamped to 50 and summed, K = F + C in [0, 100]: C is F or F + 1, so K
 * names the pair (F, C) exactly below 100, and from 99 on every midpoint (the largest key
 * compared is 35) is passed. One vpermi2b looks the code magnitude up in a 128-byte table built
 * from the same seven compares v_e2m1_pack32 makes; a vpermb puts the 64 codes in element order
 * and a multiply-add joins nibble pairs. Bit for bit v_e2m1_pack32's (and the reference's) codes. */
#ifndef LOFP_SIMD_AVX512_H
#define LOFP_SIMD_AVX512_H

#include "simd_avx2.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)

#define V16I(x) _mm512_set1_epi32((int)(x))

/* The E2M1 magnitude (0..7) of a value with floor key F and ceiling key C (offsets from 999, as
 * in simd_avx2.h) under a tie rule: the seven compares of v_e2m1_pack32. */
static inline int v512_e2m1_count(lofp_rounding mode, int F, int C)
{
    if (mode == LOFP_TIES_TO_ZERO)
        return (C > 1) + (C > 13) + (C > 19) + (C > 23) + (C > 27) + (C > 31) + (C > 35);
    if (mode == LOFP_TIES_AWAY)
        return (F > 0) + (F > 12) + (F > 18) + (F > 22) + (F > 26) + (F > 30) + (F > 34);
    return (C > 1) + (F > 12) + (C > 19) + (F > 22) + (C > 27) + (F > 30) + (C > 35);
}

/* Fills the code magnitude tables indexed by K = min(F, 50) + min(C, 50), one per tie rule
 * (v512_lut_index), from the seven compares of v_e2m1_pack32. */
static inline void v512_e2m1_luts(uint8_t lut[3][128])
{
    static const lofp_rounding modes[3] = { LOFP_RNE, LOFP_TIES_TO_ZERO, LOFP_TIES_AWAY };
    for (int m = 0; m < 3; m++)
        for (int K = 0; K < 128; K++) {
            int F = K >> 1, C = F + (K & 1);
            lut[m][K] = (uint8_t)(K >= 100 ? 7 : v512_e2m1_count(modes[m], F, C));
        }
}

static inline int v512_lut_index(lofp_rounding mode)
{
    return mode == LOFP_TIES_TO_ZERO ? 1 : mode == LOFP_TIES_AWAY ? 2 : 0;
}

/* 16-bit keys of 32 values (two zmm of fp32) in pack order, magnitude part minus 999,
 * saturated, clamped to 50; *sgn the sign bits (bit 11 of the raw key). */
static inline __attribute__((always_inline)) __m512i v512_keys16(__m512i k0, __m512i k1, __m512i *sgn)
{
    __m512i a = _mm512_packus_epi32(k0, k1);
    if (sgn) *sgn = _mm512_srli_epi16(a, 11);
    __m512i r = _mm512_subs_epu16(_mm512_and_si512(a, _mm512_set1_epi16(0x7FF)), _mm512_set1_epi16(999));
    return _mm512_min_epu16(r, _mm512_set1_epi16(50));
}

/* Table index K = min(F, 50) + min(C, 50) of 64 values e0..e3 (16 each, in element order) and
 * their sign bits (0/1), as bytes in pack order (byte 16L + 4q + r holds element 16q + 4L + r). */
static inline __attribute__((always_inline)) void v512_keys64(__m512 e0, __m512 e1, __m512 e2, __m512 e3, __m512i *K,
                                                              __m512i *s8)
{
    const __m512i c20 = V16I(0xFFFFF);
    __m512i u0 = _mm512_castps_si512(e0), u1 = _mm512_castps_si512(e1);
    __m512i u2 = _mm512_castps_si512(e2), u3 = _mm512_castps_si512(e3);
    __m512i sa, sb;
    __m512i Fa = v512_keys16(_mm512_srli_epi32(u0, 20), _mm512_srli_epi32(u1, 20), &sa);
    __m512i Fb = v512_keys16(_mm512_srli_epi32(u2, 20), _mm512_srli_epi32(u3, 20), &sb);
    __m512i Ca = v512_keys16(_mm512_srli_epi32(_mm512_add_epi32(u0, c20), 20),
                             _mm512_srli_epi32(_mm512_add_epi32(u1, c20), 20), NULL);
    __m512i Cb = v512_keys16(_mm512_srli_epi32(_mm512_add_epi32(u2, c20), 20),
                             _mm512_srli_epi32(_mm512_add_epi32(u3, c20), 20), NULL);
    *K = _mm512_packus_epi16(_mm512_add_epi16(Fa, Ca), _mm512_add_epi16(Fb, Cb));
    *s8 = _mm512_packus_epi16(sa, sb);
}

/* 64 4-bit codes as bytes in pack order -> 32 bytes in element order, element 2i in the low
 * nibble. */
static inline __attribute__((always_inline)) __m256i v512_nibbles64(__m512i c)
{
    /* pack order (byte 16L + 4q + r holds element 16q + 4L + r) -> element order */
    const __m512i ord = _mm512_set_epi8(63, 62, 61, 60, 47, 46, 45, 44, 31, 30, 29, 28, 15, 14, 13, 12,
                                        59, 58, 57, 56, 43, 42, 41, 40, 27, 26, 25, 24, 11, 10, 9, 8,
                                        55, 54, 53, 52, 39, 38, 37, 36, 23, 22, 21, 20, 7, 6, 5, 4,
                                        51, 50, 49, 48, 35, 34, 33, 32, 19, 18, 17, 16, 3, 2, 1, 0);
    c = _mm512_permutexvar_epi8(ord, c);
    __m512i w = _mm512_maddubs_epi16(c, _mm512_set1_epi16(0x1001)); /* lo + 16 * hi */
    return _mm512_cvtepi16_epi8(w);
}

/* E2M1 codes of 64 values e0..e3 (16 each, in element order) -> 32 bytes, element 2i in the low
 * nibble; lut is the 128-byte table of the tie rule (64-byte aligned). */
static inline __attribute__((always_inline)) __m256i v512_e2m1_pack64(const uint8_t *lut, __m512 e0, __m512 e1,
                                                                      __m512 e2, __m512 e3)
{
    __m512i K, s8;
    v512_keys64(e0, e1, e2, e3, &K, &s8);
    const __m512i t0 = _mm512_load_si512((const void *)lut), t1 = _mm512_load_si512((const void *)(lut + 64));
    __m512i c = _mm512_permutex2var_epi8(t0, K, t1);
    return v512_nibbles64(_mm512_or_si512(c, _mm512_slli_epi16(s8, 3)));
}

/* UltraQuant snap (kq_uq_code, v_uq_pack32) of 64 values: positive values count the midpoints
 * strictly below them (the ties-to-zero table: ceiling key), negative ones the midpoints at or
 * below |y| (the ties-away table: floor key); the sign nibble bit only for a non-zero count
 * (never -0). ttz and away: the tables of v512_e2m1_luts for those tie rules. */
static inline __attribute__((always_inline)) __m256i v512_uq_pack64(const uint8_t *ttz, const uint8_t *away, __m512 e0,
                                                                    __m512 e1, __m512 e2, __m512 e3)
{
    __m512i K, s8;
    v512_keys64(e0, e1, e2, e3, &K, &s8);
    __m512i cp = _mm512_permutex2var_epi8(_mm512_load_si512((const void *)ttz), K, _mm512_load_si512((const void *)(ttz + 64)));
    __m512i cn = _mm512_permutex2var_epi8(_mm512_load_si512((const void *)away), K, _mm512_load_si512((const void *)(away + 64)));
    const __mmask64 neg = _mm512_test_epi8_mask(s8, s8);
    __m512i c = _mm512_mask_blend_epi8(neg, cp, cn);
    c = _mm512_mask_add_epi8(c, neg & _mm512_test_epi8_mask(c, c), c, _mm512_set1_epi8(8));
    return v512_nibbles64(c);
}

/* Lane j = max over the 16 lanes of m[j]. */
static inline __attribute__((always_inline)) __m512i v512_reduce16_max_u32(const __m512i m[16])
{
    __m512i a[8], u[4];
    for (int k = 0; k < 8; k++)
        a[k] = _mm512_max_epu32(_mm512_unpacklo_epi32(m[2 * k], m[2 * k + 1]),
                                _mm512_unpackhi_epi32(m[2 * k], m[2 * k + 1]));
    for (int k = 0; k < 4; k++)
        u[k] = _mm512_max_epu32(_mm512_unpacklo_epi64(a[2 * k], a[2 * k + 1]),
                                _mm512_unpackhi_epi64(a[2 * k], a[2 * k + 1]));
    __m512i v01 = _mm512_max_epu32(_mm512_shuffle_i32x4(u[0], u[1], 0x88), _mm512_shuffle_i32x4(u[0], u[1], 0xDD));
    __m512i v23 = _mm512_max_epu32(_mm512_shuffle_i32x4(u[2], u[3], 0x88), _mm512_shuffle_i32x4(u[2], u[3], 0xDD));
    return _mm512_max_epu32(_mm512_shuffle_i32x4(v01, v23, 0x88), _mm512_shuffle_i32x4(v01, v23, 0xDD));
}

/* 16 floats to o: one ordinary store (st 0); streamed when asked and o is 64-byte aligned (st 3:
 * then every 16-float group is), else through the AVX2 streaming rule of 8-float halves. */
static inline __attribute__((always_inline)) void v512_store16(float *o, __m512 v, int st)
{
    if (st == 0) {
        _mm512_storeu_ps(o, v);
    } else if (st == 3) {
        _mm512_stream_ps(o, v);
    } else {
        v_store8(o, _mm512_castps512_ps256(v), st);
        v_store8(o + 8, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), st);
    }
}

/* ---- signed minifloat magnitude (kq_mf_mag_raw), mode not stochastic: v_mf_mag_raw on 16 lanes ---- */
typedef struct {
    __m512i eminb, maxc, sign_bit, bias_add; /* bias_add: 0 (to zero / even), 1 (away) */
    __m128i m;                               /* shift count for << m */
    uint32_t mshift;                         /* 23 - m */
    int rne;
} v512_mf;

static inline void v512_mf_init(kq_mf p, uint32_t sign_bit, lofp_rounding mode, v512_mf *V)
{
    V->eminb = V16I(p.eminb);
    V->maxc = V16I(p.maxc);
    V->sign_bit = V16I(sign_bit);
    V->bias_add = V16I(mode == LOFP_TIES_AWAY ? 1 : 0);
    V->m = _mm_cvtsi32_si128((int)p.m);
    V->mshift = 23u - p.m;
    V->rne = mode == LOFP_RNE;
}

/* The magnitude code of a = |x| bits (finite) before saturation, kq_mf_mag_raw's integer steps. */
static inline __attribute__((always_inline)) __m512i v512_mf_mag_raw(const v512_mf *V, __m512i a)
{
    const __m512i one = V16I(1);
    __m512i ex = _mm512_srli_epi32(a, 23);
    __m512i man = _mm512_and_si512(a, V16I(0x7FFFFF));
    __m512i sig = _mm512_mask_or_epi32(man, _mm512_test_epi32_mask(ex, ex), man, V16I(0x800000));
    __m512i exu = _mm512_max_epu32(ex, one);
    __m512i teb = _mm512_max_epu32(exu, V->eminb);
    __m512i shift = _mm512_add_epi32(V16I(V->mshift), _mm512_sub_epi32(teb, exu));
    shift = _mm512_min_epu32(shift, V16I(25));
    __m512i q = _mm512_srlv_epi32(sig, shift);
    __m512i p2 = _mm512_sllv_epi32(one, shift);
    __m512i rem = _mm512_and_si512(sig, _mm512_sub_epi32(p2, one));
    __m512i half = _mm512_srli_epi32(p2, 1);
    /* bias = half - 1 + (away ? 1 : rne ? q & 1 : 0) */
    __m512i bias = _mm512_add_epi32(_mm512_sub_epi32(half, one), V->bias_add);
    if (V->rne) bias = _mm512_add_epi32(bias, _mm512_and_si512(q, one));
    __m512i up = _mm512_srlv_epi32(_mm512_add_epi32(rem, bias), shift);
    return _mm512_add_epi32(_mm512_sll_epi32(_mm512_sub_epi32(teb, V->eminb), V->m), _mm512_add_epi32(q, up));
}

/* The same code for round to nearest even in fewer steps (RNE is every MX preset's default):
 * - |e| in the target's normal range (fp32 exponent field >= eminb): round the fp32 pattern to m
 *   mantissa bits by adding half - 1 plus the kept lsb and shifting (a carry moves into the
 *   exponent, as rounding up to the next binade does), then rebase the exponent:
 *   ((a + half - 1 + lsb) >> (23 - m)) - ((eminb - 1) << m), 1 << m at the smallest normal;
 * - below it the codes are the fixed-point grid of step 2^(emin - m): |e| * 2^(m - emin) is exact
 *   (a power-of-two upscale) and vcvtps2dq rounds it to the nearest integer, ties to even (the
 *   MXCSR default, which lofp never changes): 0 .. 1 << m, the last being the smallest normal.
 * kq_mf_mag's shift-and-bias rounding gives the same integers in both ranges; then saturation at
 * maxc and the sign bit as v512_mf_code. */
typedef struct {
    __m512i eminb_bits, half_m1, rebase, maxc, sign_bit;
    __m512 sub_scale;
    uint32_t sh; /* 23 - m */
} v512_mf_rne;

static inline void v512_mf_rne_init(kq_mf p, uint32_t sign_bit, v512_mf_rne *R)
{
    R->sh = 23u - p.m;
    R->eminb_bits = V16I(p.eminb << 23);
    R->half_m1 = V16I((1u << (R->sh - 1u)) - 1u);
    R->rebase = V16I((p.eminb - 1u) << p.m);
    R->maxc = V16I(p.maxc);
    R->sign_bit = V16I(sign_bit);
    R->sub_scale = _mm512_castsi512_ps(V16I((254u + p.m - p.eminb) << 23)); /* 2^(m - emin) */
}

static inline __attribute__((always_inline)) __m512i v512_mf_code_rne(const v512_mf_rne *R, __m512 e)
{
    const __m128i sh = _mm_cvtsi32_si128((int)R->sh);
    __m512i u = _mm512_castps_si512(e);
    __m512i a = _mm512_and_si512(u, V16I(0x7FFFFFFF));
    __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(a, sh), V16I(1));
    __m512i nrm = _mm512_sub_epi32(_mm512_srl_epi32(_mm512_add_epi32(_mm512_add_epi32(a, R->half_m1), lsb), sh), R->rebase);
    __m512i sub = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), R->sub_scale));
    __m512i mag = _mm512_mask_blend_epi32(_mm512_cmpge_epu32_mask(a, R->eminb_bits), sub, nrm);
    mag = _mm512_min_epu32(mag, R->maxc);
    return _mm512_mask_or_epi32(mag, _mm512_cmplt_epi32_mask(u, _mm512_setzero_si512()), mag, R->sign_bit);
}

/* Signed minifloat code (saturating) of e: v_mf_code on 16 lanes. */
static inline __attribute__((always_inline)) __m512i v512_mf_code(const v512_mf *V, __m512 e)
{
    __m512i u = _mm512_castps_si512(e);
    __m512i mag = _mm512_min_epu32(v512_mf_mag_raw(V, _mm512_and_si512(u, V16I(0x7FFFFFFF))), V->maxc);
    return _mm512_mask_or_epi32(mag, _mm512_cmplt_epi32_mask(u, _mm512_setzero_si512()), mag, V->sign_bit);
}

#endif
#endif

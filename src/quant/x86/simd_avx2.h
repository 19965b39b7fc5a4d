/* simd_avx2.h -- AVX2 building blocks of the x86 kernels. Include only from src/quant/x86/<name>_avx2.c
 * and <name>_avx512.c (whose flags are a superset)
 * (compiled with -mavx2 -mfma -mf16c): everything is `static inline`, so no AVX2 code is ever
 * shared with a generic translation unit. Each helper is the vector form of a kernel_util.h
 * formula, lane by lane the same integer or fp32 operations. */
#ifndef LOFP_SIMD_AVX2_H
#define LOFP_SIMD_AVX2_H

#include <immintrin.h>

#include "quant/dispatch.h"
#include "quant/kernel_util.h"

#define V8I(x) _mm256_set1_epi32((int)(x))

static inline __m256i v_bits(__m256 v) { return _mm256_castps_si256(v); }

static inline __m256i v_absbits(__m256 v) { return _mm256_and_si256(v_bits(v), V8I(0x7FFFFFFF)); }

/* Horizontal unsigned max of 8 lanes. */
static inline uint32_t v_hmax_u32(__m256i m)
{
    __m128i a = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0x4E));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(a);
}

/* Lane j of the result = max over the 8 lanes of m[j] (a transpose-reduce: 14 shuffles). */
static inline __m256i v_reduce8_max_u32(const __m256i m[8])
{
    __m256i a0 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[0], m[1]), _mm256_unpackhi_epi32(m[0], m[1]));
    __m256i a1 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[2], m[3]), _mm256_unpackhi_epi32(m[2], m[3]));
    __m256i a2 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[4], m[5]), _mm256_unpackhi_epi32(m[4], m[5]));
    __m256i a3 = _mm256_max_epu32(_mm256_unpacklo_epi32(m[6], m[7]), _mm256_unpackhi_epi32(m[6], m[7]));
    __m256i u0 = _mm256_max_epu32(_mm256_unpacklo_epi64(a0, a1), _mm256_unpackhi_epi64(a0, a1));
    __m256i u1 = _mm256_max_epu32(_mm256_unpacklo_epi64(a2, a3), _mm256_unpackhi_epi64(a2, a3));
    return _mm256_max_epu32(_mm256_permute2x128_si256(u0, u1, 0x20),
                            _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* ---- E2M1 and the UltraQuant snap, 32 values at a time in the byte domain ----
 * All seven E2M1 midpoints (0.25 .. 5) are multiples of 2^21 as fp32 bit patterns, so with
 * a = |x| bits and M a midpoint: a >= M  <=>  (a >> 20) >= M >> 20, and a > M  <=>
 * ceil(a / 2^20) > M >> 20. Two 12-bit keys per value, u >> 20 ("floor") and (u + 0xFFFFF) >> 20
 * ("ceiling"; no carry reaches the sign for finite u), keep the sign in bit 11; their magnitudes
 * minus 999, saturated to [0, 100], fit a byte, and the midpoints become the small integers
 * 1, 13, 19, 23, 27, 31, 35. The seven compares then run on 32 lanes at once. Bit-identical to
 * kq_e2m1_code (the tests compare every variant), and about 1.3x faster than seven 32-bit compares
 * per 8 lanes. */
#define V_KF(e) _mm256_srli_epi32(v_bits(e), 20)
#define V_KC(e) _mm256_srli_epi32(_mm256_add_epi32(v_bits(e), V8I(0xFFFFF)), 20)
#define V_GT8(x, t) _mm256_cmpgt_epi8((x), _mm256_set1_epi8((char)(t)))

/* Byte keys of 32 values from their 32-bit keys (order: see v_nibbles_from_bytes); *sign8 gets
 * 0/1 per value when non-NULL. */
static inline __attribute__((always_inline)) __m256i v_byte_keys(__m256i k0, __m256i k1, __m256i k2,
                                                                 __m256i k3, __m256i *sign8)
{
    __m256i a = _mm256_packus_epi32(k0, k1), b = _mm256_packus_epi32(k2, k3);
    if (sign8) *sign8 = _mm256_packus_epi16(_mm256_srli_epi16(a, 11), _mm256_srli_epi16(b, 11));
    const __m256i m = _mm256_set1_epi16(0x7FF), off = _mm256_set1_epi16(999);
    __m256i ra = _mm256_subs_epu16(_mm256_and_si256(a, m), off);
    __m256i rb = _mm256_subs_epu16(_mm256_and_si256(b, m), off);
    return _mm256_min_epu8(_mm256_packus_epi16(ra, rb), _mm256_set1_epi8(100));
}

/* 32 codes as bytes in pack order ([0-3, 8-11, 16-19, 24-27 | 4-7, ...], what two packus_epi32
 * and a packus_epi16 of four 8-lane vectors give) -> 16 bytes, element 2i in the low nibble. */
static inline __attribute__((always_inline)) __m128i v_nibbles_from_bytes(__m256i c)
{
    __m256i w = _mm256_maddubs_epi16(c, _mm256_set1_epi16(0x1001)); /* lo + 16 * hi */
    __m128i p = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    return _mm_shuffle_epi8(p, _mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
}

/* E2M1 codes (sign = the sign bit, as kq_e2m1_code) of 32 values; `mode` is RNE, TIES_TO_ZERO or
 * TIES_AWAY and should be a compile-time constant at the call site. */
static inline __attribute__((always_inline)) __m128i v_e2m1_pack32(lofp_rounding mode, __m256 e0, __m256 e1,
                                                                   __m256 e2, __m256 e3)
{
    __m256i s8, c;
    if (mode == LOFP_TIES_TO_ZERO) { /* every tie down: strict, ceiling key */
        __m256i C = v_byte_keys(V_KC(e0), V_KC(e1), V_KC(e2), V_KC(e3), &s8);
        c = _mm256_add_epi8(_mm256_add_epi8(_mm256_add_epi8(V_GT8(C, 1), V_GT8(C, 13)),
                                            _mm256_add_epi8(V_GT8(C, 19), V_GT8(C, 23))),
                            _mm256_add_epi8(_mm256_add_epi8(V_GT8(C, 27), V_GT8(C, 31)), V_GT8(C, 35)));
    } else if (mode == LOFP_TIES_AWAY) { /* every tie up: >=, floor key */
        __m256i F = v_byte_keys(V_KF(e0), V_KF(e1), V_KF(e2), V_KF(e3), &s8);
        c = _mm256_add_epi8(_mm256_add_epi8(_mm256_add_epi8(V_GT8(F, 0), V_GT8(F, 12)),
                                            _mm256_add_epi8(V_GT8(F, 18), V_GT8(F, 22))),
                            _mm256_add_epi8(_mm256_add_epi8(V_GT8(F, 26), V_GT8(F, 30)), V_GT8(F, 34)));
    } else { /* to even: 0.25, 1.25, 2.5, 5 down (strict), 0.75, 1.75, 3.5 up */
        __m256i F = v_byte_keys(V_KF(e0), V_KF(e1), V_KF(e2), V_KF(e3), &s8);
        __m256i C = v_byte_keys(V_KC(e0), V_KC(e1), V_KC(e2), V_KC(e3), NULL);
        c = _mm256_add_epi8(_mm256_add_epi8(_mm256_add_epi8(V_GT8(C, 1), V_GT8(F, 12)),
                                            _mm256_add_epi8(V_GT8(C, 19), V_GT8(F, 22))),
                            _mm256_add_epi8(_mm256_add_epi8(V_GT8(C, 27), V_GT8(F, 30)), V_GT8(C, 35)));
    }
    c = _mm256_sub_epi8(_mm256_setzero_si256(), c);
    return v_nibbles_from_bytes(_mm256_or_si256(c, _mm256_slli_epi16(s8, 3)));
}

/* UltraQuant snap (kq_uq_code) of 32 values: positive values count midpoints strictly below
 * (ceiling key), negative ones count midpoints <= |y| (floor key + 1 > m  <=>  floor >= m); the
 * sign nibble bit only when the count is non-zero (never -0). */
static inline __attribute__((always_inline)) __m128i v_uq_pack32(__m256 e0, __m256 e1, __m256 e2, __m256 e3)
{
    __m256i s8;
    __m256i F = v_byte_keys(V_KF(e0), V_KF(e1), V_KF(e2), V_KF(e3), &s8);
    __m256i C = v_byte_keys(V_KC(e0), V_KC(e1), V_KC(e2), V_KC(e3), NULL);
    __m256i neg = _mm256_cmpgt_epi8(s8, _mm256_setzero_si256());
    __m256i k = _mm256_blendv_epi8(C, _mm256_add_epi8(F, _mm256_set1_epi8(1)), neg);
    __m256i c = _mm256_add_epi8(_mm256_add_epi8(_mm256_add_epi8(V_GT8(k, 1), V_GT8(k, 13)),
                                                _mm256_add_epi8(V_GT8(k, 19), V_GT8(k, 23))),
                                _mm256_add_epi8(_mm256_add_epi8(V_GT8(k, 27), V_GT8(k, 31)), V_GT8(k, 35)));
    c = _mm256_sub_epi8(_mm256_setzero_si256(), c);
    __m256i sign = _mm256_and_si256(_mm256_and_si256(neg, _mm256_cmpgt_epi8(c, _mm256_setzero_si256())),
                                    _mm256_set1_epi8(8));
    return v_nibbles_from_bytes(_mm256_or_si256(c, sign));
}

/* ---- signed minifloat magnitude (kq_mf_mag_raw), mode not stochastic ---- */
typedef struct {
    __m256i eminb, maxc, sign_bit, bias_add; /* bias_add: 0 (to zero / even), 1 (away) */
    __m128i m;                               /* shift count for << m */
    uint32_t mshift;                         /* 23 - m */
    int rne;
} v_mf;

static inline void v_mf_init(kq_mf p, uint32_t sign_bit, lofp_rounding mode, v_mf *V)
{
    V->eminb = V8I(p.eminb);
    V->maxc = V8I(p.maxc);
    V->sign_bit = V8I(sign_bit);
    V->bias_add = V8I(mode == LOFP_TIES_AWAY ? 1 : 0);
    V->m = _mm_cvtsi32_si128((int)p.m);
    V->mshift = 23u - p.m;
    V->rne = mode == LOFP_RNE;
}

static inline __m256i v_mf_mag_raw(const v_mf *V, __m256i a)
{
    const __m256i one = V8I(1);
    __m256i ex = _mm256_srli_epi32(a, 23);
    __m256i exz = _mm256_cmpeq_epi32(ex, _mm256_setzero_si256());
    __m256i sig = _mm256_or_si256(_mm256_and_si256(a, V8I(0x7FFFFF)),
                                  _mm256_andnot_si256(exz, V8I(0x800000)));
    __m256i exu = _mm256_max_epu32(ex, one);
    __m256i teb = _mm256_max_epu32(exu, V->eminb);
    __m256i shift = _mm256_add_epi32(V8I(V->mshift), _mm256_sub_epi32(teb, exu));
    shift = _mm256_min_epu32(shift, V8I(25));
    __m256i q = _mm256_srlv_epi32(sig, shift);
    __m256i p2 = _mm256_sllv_epi32(one, shift);
    __m256i rem = _mm256_and_si256(sig, _mm256_sub_epi32(p2, one));
    __m256i half = _mm256_srli_epi32(p2, 1);
    /* bias = half - 1 + (away ? 1 : rne ? q & 1 : 0) */
    __m256i bias = _mm256_add_epi32(_mm256_sub_epi32(half, one), V->bias_add);
    if (V->rne) bias = _mm256_add_epi32(bias, _mm256_and_si256(q, one));
    __m256i up = _mm256_srlv_epi32(_mm256_add_epi32(rem, bias), shift);
    return _mm256_add_epi32(_mm256_sll_epi32(_mm256_sub_epi32(teb, V->eminb), V->m),
                            _mm256_add_epi32(q, up));
}

/* Signed minifloat code (saturating) of e. */
static inline __m256i v_mf_code(const v_mf *V, __m256 e)
{
    __m256i u = v_bits(e);
    __m256i mag = _mm256_min_epu32(v_mf_mag_raw(V, _mm256_and_si256(u, V8I(0x7FFFFFFF))), V->maxc);
    __m256i neg = _mm256_srai_epi32(u, 31);
    return _mm256_or_si256(mag, _mm256_and_si256(neg, V->sign_bit));
}

/* MXINT8 code (kq_mxint8), as a 0..255 value per lane. */
static inline __m256i v_mxint8_code(const v_mf *V, __m256 e)
{
    const __m256i one = V8I(1);
    __m256i u = v_bits(e);
    __m256i a = _mm256_and_si256(u, V8I(0x7FFFFFFF));
    __m256i ex = _mm256_srli_epi32(a, 23);
    __m256i exz = _mm256_cmpeq_epi32(ex, _mm256_setzero_si256());
    __m256i sig = _mm256_or_si256(_mm256_and_si256(a, V8I(0x7FFFFF)),
                                  _mm256_andnot_si256(exz, V8I(0x800000)));
    __m256i exu = _mm256_max_epu32(ex, one);
    /* exu <= 134 where it matters (a < 128.0); larger exponents are saturated below */
    __m256i shift = _mm256_min_epu32(_mm256_sub_epi32(V8I(144), _mm256_min_epu32(exu, V8I(144))), V8I(25));
    __m256i q = _mm256_srlv_epi32(sig, shift);
    __m256i p2 = _mm256_sllv_epi32(one, shift);
    __m256i rem = _mm256_and_si256(sig, _mm256_sub_epi32(p2, one));
    __m256i half = _mm256_srli_epi32(p2, 1);
    __m256i bias = _mm256_add_epi32(_mm256_sub_epi32(half, one), V->bias_add);
    if (V->rne) bias = _mm256_add_epi32(bias, _mm256_and_si256(q, one));
    __m256i k = _mm256_add_epi32(q, _mm256_srlv_epi32(_mm256_add_epi32(rem, bias), shift));
    k = _mm256_min_epu32(k, V8I(127));
    k = _mm256_blendv_epi8(k, V8I(127), _mm256_cmpgt_epi32(a, V8I(0x42FFFFFF))); /* |x| >= 128 */
    __m256i neg = _mm256_srai_epi32(u, 31);
    __m256i sk = _mm256_sub_epi32(_mm256_xor_si256(k, neg), neg); /* -k where negative */
    return _mm256_and_si256(sk, V8I(0xFF));
}

/* The scale rule (kq_mx_scale_byte, rule for rule) for 8 blocks at once from their finite amax
 * bits; lanes of non-finite blocks come out unspecified (the caller overwrites them). Sets
 * *scalar when a FLOOR/CEIL/EVEN amax is an fp32 subnormal (its exponent needs a leading-zero
 * count): the caller then uses the scalar rule for the batch. */
static inline __m256i v_mx_scale8(const kq_mx *p, __m256i am, int *scalar)
{
    const __m256i zero = _mm256_setzero_si256(), one = V8I(1);
    __m256 a = _mm256_max_ps(_mm256_castsi256_ps(am), _mm256_set1_ps(p->amax_floor)); /* amax < floor */
    __m256i u = _mm256_castps_si256(a);
    if (p->rule == LOFP_SCALE_RCEIL) {
        __m256i r = _mm256_castps_si256(_mm256_div_ps(a, _mm256_set1_ps(p->max)));
        __m256i ex = _mm256_srli_epi32(r, 23), m = _mm256_and_si256(r, V8I(0x7FFFFF));
        __m256i e = _mm256_add_epi32(ex, _mm256_andnot_si256(_mm256_cmpeq_epi32(m, zero), one));
        if (p->ceil_clamp) return _mm256_max_epi32(_mm256_min_epi32(e, V8I(254)), one);
        e = _mm256_min_epi32(e, V8I(254));
        __m256i sub = _mm256_and_si256(_mm256_cmpgt_epi32(m, V8I(0x400000)), one); /* 0x00 is 2^-127 */
        return _mm256_blendv_epi8(e, sub, _mm256_cmpeq_epi32(ex, zero));
    }
    __m256i iszero = _mm256_cmpeq_epi32(u, zero);
    __m256i ex = _mm256_srli_epi32(u, 23);
    if (!_mm256_testc_si256(_mm256_or_si256(iszero, _mm256_cmpgt_epi32(ex, zero)), _mm256_set1_epi32(-1))) {
        *scalar = 1;
        return zero;
    }
    if (p->rule == LOFP_SCALE_EVEN) /* round to the element's mantissa; a carry may reach field 255 */
        u = _mm256_and_si256(_mm256_add_epi32(u, V8I(1u << (22 - p->mbits))), V8I(0x7F800000));
    __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(u, 23), V8I(127));
    if (p->rule == LOFP_SCALE_CEIL) /* not a power of two: one up */
        e = _mm256_add_epi32(e, _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(u, V8I(0x7FFFFF)), zero), one));
    e = _mm256_add_epi32(e, V8I(127 - p->emax));
    e = _mm256_max_epi32(_mm256_min_epi32(e, V8I(254)), zero);
    return _mm256_andnot_si256(iszero, e); /* an all-zero block: 0x00 */
}

/* ---- packing ---- */

/* 32 codes < 256 -> 32 bytes in element order. */
static inline __m256i v_pack_bytes(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 8 lanes of bytes (< 256) -> 8 bytes. */
static inline __m128i v_pack8_bytes(__m256i c)
{
    __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c, c), _mm256_setzero_si256());
    return _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
}

/* ---- stores ---- */

/* How a dequantizer stores a row to `out`: 0 ordinary stores; when streaming is asked for, 2 for
 * a 32-byte aligned row (256-bit non-temporal stores), 1 for a 16-byte aligned one (two 128-bit
 * ones: what glibc's malloc returns for large blocks). Rows are stored in 8-float groups, so the
 * alignment of `out` holds for every group. */
static inline int v_stream_ok(unsigned flags, const float *out)
{
    if (!(flags & LOFP_KFLAG_STREAM)) return 0;
    uintptr_t a = (uintptr_t)out;
    return (a & 31) == 0 ? 2 : (a & 15) == 0 ? 1 : 0;
}

static inline __attribute__((always_inline)) void v_store8(float *o, __m256 v, int stream)
{
    if (stream == 2) {
        _mm256_stream_ps(o, v);
    } else if (stream == 1) {
        _mm_stream_ps(o, _mm256_castps256_ps128(v));
        _mm_stream_ps(o + 4, _mm256_extractf128_ps(v, 1));
    } else {
        _mm256_storeu_ps(o, v);
    }
}

/* Software prefetch distance for the quantizers' input: 4 KiB ahead of the batch being read.
 * Measured on this machine (BENCHMARKS.md): without it a single thread's compute and its DRAM
 * stalls add up (3.4 GB/s for MXFP4), with it they overlap (6.0 GB/s); 2 and 8 KiB were no
 * better. Prefetches never fault, so reading past the end of the tensor is harmless. */
#define V_PREFETCH_FLOATS 1024

static inline void v_prefetch(const float *p, size_t floats)
{
    for (size_t l = 0; l < floats; l += 16) _mm_prefetch((const char *)(p + l + V_PREFETCH_FLOATS), _MM_HINT_T0);
}

/* ---- unpacking ---- */

/* 16 bytes of FP4 codes -> 32 codes as bytes in element order (lo: 0..15, hi: 16..31). */
static inline void v_unpack_nibbles(__m128i b, __m128i *lo, __m128i *hi)
{
    __m128i m = _mm_set1_epi8(0x0F);
    __m128i l = _mm_and_si128(b, m), h = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    *lo = _mm_unpacklo_epi8(l, h);
    *hi = _mm_unpackhi_epi8(l, h);
}

/* E2M1 value of 8 codes (0..15, any upper bits ignored) as fp32: a permute of the magnitudes
 * and the sign from bit 3 (the reference decode gives -0 for code 8). */
static inline __m256 v_e2m1_decode(__m256i idx)
{
    const __m256 mag = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    __m256 v = _mm256_permutevar8x32_ps(mag, idx);
    __m256i sign = _mm256_and_si256(_mm256_slli_epi32(idx, 28), V8I(0x80000000u));
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

#endif

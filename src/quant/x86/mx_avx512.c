/* mx_avx512.c -- MX row kernels at 512 bits for the two element kinds that matter for speed:
 * MXFP4 (any tie rule) and MXINT8 (round to nearest even), block 32, not stochastic; every
 * other MX case runs the AVX2 row kernel this file replaces in the table. Same three passes as
 * mx_avx2.c, 16 blocks at a time: the block maxima (integer max of magnitude bits, a 16 x 16
 * transpose-reduce), the scale rule of 16 blocks (v_mx_scale8 on each half, the AVX2 kernel's
 * integer steps), then the encodes, two blocks (64 values) per step:
 *
 * - E2M1: the byte-domain keys of simd_avx2.h (floor key F and ceiling key C of |e|, minus 999,
 *   saturated) clamped to 50 and summed, K = F + C in [0, 100]: C is F or F + 1, so K names the
 *   pair (F, C) exactly below 50, and from 50 on every midpoint (the largest key is 35) is
 *   passed. One vpermi2b looks the code magnitude up in a 128-byte table built from the same
 *   seven compares the AVX2 kernel makes; a vpermb puts the 64 codes in element order and a
 *   multiply-add joins nibble pairs. Bit for bit the AVX2 (and the reference's) codes.
 * - MXINT8: e * 64 is exact (a power-of-two multiply of e = x * 2^-s), vcvtps2dq rounds it to
 *   nearest even (the MXCSR default, which lofp never changes), saturation to +-127 and |e| >=
 *   128 -> +-127 as kq_mxint8.
 *
 * Needs AVX-512 F/BW/VL and VBMI (installed by kernels_avx512.c only then). */
#include <pthread.h>

#include "simd_avx2.h"
#include "quant/generic_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)

#define V16I(x) _mm512_set1_epi32((int)(x))

static lofp_kquant_row_fn g_avx2_quant;
static lofp_kdequant_row_fn g_avx2_dequant;

/* Code magnitude tables indexed by K = min(F, 50) + min(C, 50) (see above), per tie rule. */
static uint8_t g_e2m1_lut[3][128] __attribute__((aligned(64)));

static int e2m1_count(lofp_rounding mode, int F, int C)
{
    if (mode == LOFP_TIES_TO_ZERO)
        return (C > 1) + (C > 13) + (C > 19) + (C > 23) + (C > 27) + (C > 31) + (C > 35);
    if (mode == LOFP_TIES_AWAY)
        return (F > 0) + (F > 12) + (F > 18) + (F > 22) + (F > 26) + (F > 30) + (F > 34);
    return (C > 1) + (F > 12) + (C > 19) + (F > 22) + (C > 27) + (F > 30) + (C > 35);
}

static void build_luts(void)
{
    static const lofp_rounding modes[3] = { LOFP_RNE, LOFP_TIES_TO_ZERO, LOFP_TIES_AWAY };
    for (int m = 0; m < 3; m++)
        for (int K = 0; K < 128; K++) {
            int F = K >> 1, C = F + (K & 1);
            g_e2m1_lut[m][K] = (uint8_t)(K >= 100 ? 7 : e2m1_count(modes[m], F, C));
        }
}

static inline int lut_index(lofp_rounding mode) { return mode == LOFP_TIES_TO_ZERO ? 1 : mode == LOFP_TIES_AWAY ? 2 : 0; }

/* 16-bit keys of 32 values (two zmm of fp32) in pack order, magnitude part minus 999,
 * saturated, clamped to 50; *sgn the sign bits (bit 11 of the raw key). */
static inline __attribute__((always_inline)) __m512i keys16(__m512i k0, __m512i k1, __m512i *sgn)
{
    __m512i a = _mm512_packus_epi32(k0, k1);
    if (sgn) *sgn = _mm512_srli_epi16(a, 11);
    __m512i r = _mm512_subs_epu16(_mm512_and_si512(a, _mm512_set1_epi16(0x7FF)), _mm512_set1_epi16(999));
    return _mm512_min_epu16(r, _mm512_set1_epi16(50));
}

/* E2M1 codes of 64 values e0..e3 (16 each, in element order) -> 32 bytes, element 2i in the low
 * nibble. */
static inline __attribute__((always_inline)) __m256i e2m1_pack64(const uint8_t *lut, __m512 e0, __m512 e1,
                                                                 __m512 e2, __m512 e3)
{
    const __m512i c20 = V16I(0xFFFFF);
    __m512i u0 = _mm512_castps_si512(e0), u1 = _mm512_castps_si512(e1);
    __m512i u2 = _mm512_castps_si512(e2), u3 = _mm512_castps_si512(e3);
    __m512i sa, sb;
    __m512i Fa = keys16(_mm512_srli_epi32(u0, 20), _mm512_srli_epi32(u1, 20), &sa);
    __m512i Fb = keys16(_mm512_srli_epi32(u2, 20), _mm512_srli_epi32(u3, 20), &sb);
    __m512i Ca = keys16(_mm512_srli_epi32(_mm512_add_epi32(u0, c20), 20),
                        _mm512_srli_epi32(_mm512_add_epi32(u1, c20), 20), NULL);
    __m512i Cb = keys16(_mm512_srli_epi32(_mm512_add_epi32(u2, c20), 20),
                        _mm512_srli_epi32(_mm512_add_epi32(u3, c20), 20), NULL);
    __m512i K = _mm512_packus_epi16(_mm512_add_epi16(Fa, Ca), _mm512_add_epi16(Fb, Cb));
    __m512i s8 = _mm512_packus_epi16(sa, sb);
    const __m512i t0 = _mm512_load_si512((const void *)lut), t1 = _mm512_load_si512((const void *)(lut + 64));
    __m512i c = _mm512_permutex2var_epi8(t0, K, t1);
    c = _mm512_or_si512(c, _mm512_slli_epi16(s8, 3));
    /* pack order (byte 16L + 4q + r holds element 16q + 4L + r) -> element order */
    const __m512i ord = _mm512_set_epi8(63, 62, 61, 60, 47, 46, 45, 44, 31, 30, 29, 28, 15, 14, 13, 12,
                                        59, 58, 57, 56, 43, 42, 41, 40, 27, 26, 25, 24, 11, 10, 9, 8,
                                        55, 54, 53, 52, 39, 38, 37, 36, 23, 22, 21, 20, 7, 6, 5, 4,
                                        51, 50, 49, 48, 35, 34, 33, 32, 19, 18, 17, 16, 3, 2, 1, 0);
    c = _mm512_permutexvar_epi8(ord, c);
    __m512i w = _mm512_maddubs_epi16(c, _mm512_set1_epi16(0x1001)); /* lo + 16 * hi */
    return _mm512_cvtepi16_epi8(w);
}

/* MXINT8 codes of 16 values (RNE), as bytes. */
static inline __attribute__((always_inline)) __m128i int8_code16(__m512 e)
{
    __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(e, _mm512_set1_ps(64.0f)));
    c = _mm512_max_epi32(_mm512_min_epi32(c, V16I(127)), V16I(-127));
    /* |e| >= 128: +-127 (the convert may have overflowed) */
    __mmask16 big = _mm512_cmpgt_epu32_mask(_mm512_and_si512(_mm512_castps_si512(e), V16I(0x7FFFFFFF)), V16I(0x42FFFFFF));
    __m512i sat = _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(_mm512_castps_si512(e), _mm512_setzero_si512()),
                                  V16I(127), V16I(-127));
    c = _mm512_mask_blend_epi32(big, c, sat);
    return _mm512_cvtepi32_epi8(c);
}

/* Lane j = max over the 16 lanes of m[j]. */
static inline __attribute__((always_inline)) __m512i reduce16_max_u32(const __m512i m[16])
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

static inline __attribute__((always_inline)) __m512i absbits16(const float *p)
{
    return _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(p)), V16I(0x7FFFFFFF));
}

/* Scale byte of a block from its amax bits (the scalar rule); reciprocal or 0 (non-finite). */
static inline float mx_scale1(const kq_mx *p, uint32_t amax, size_t b, uint8_t *scales)
{
    if (LOFP_UNLIKELY(amax >= 0x7F800000u)) {
        scales[b] = 0xFF;
        return 0.0f;
    }
    uint8_t sb = kq_mx_scale_byte(p, lofp_bits_f32(amax));
    scales[b] = sb;
    return kq_e8m0_recip(sb);
}

/* 8 lanes of scale rule (v_mx_scale8) and reciprocals; returns 0 when the scalar rule is needed. */
static inline __attribute__((always_inline)) int scale8(const kq_mx *p, __m256i amv, uint8_t *scales, float *rs)
{
    int scalar = 0;
    __m256i sb = v_mx_scale8(p, amv, &scalar);
    if (LOFP_UNLIKELY(scalar)) return 0;
    __m256i nf = _mm256_cmpgt_epi32(amv, V8I(0x7F7FFFFF));
    sb = _mm256_blendv_epi8(sb, V8I(0xFF), nf);
    _mm_storel_epi64((__m128i *)(void *)scales, v_pack8_bytes(sb));
    __m256i rb = _mm256_slli_epi32(_mm256_sub_epi32(V8I(254), sb), 23);
    rb = _mm256_blendv_epi8(rb, V8I(0x00400000), _mm256_cmpeq_epi32(sb, V8I(254)));
    _mm256_storeu_ps(rs, _mm256_castsi256_ps(_mm256_andnot_si256(nf, rb)));
    return 1;
}

/* Codes of blocks b, b + 1 (32 values each at x) given their reciprocal scales. */
static inline __attribute__((always_inline)) void code_pair(kq_mx_kind kind, const uint8_t *lut, const float *x,
                                                            float r0, float r1, uint8_t *dst)
{
    __m512 s0 = _mm512_set1_ps(r0), s1 = _mm512_set1_ps(r1);
    __m512 e0 = _mm512_mul_ps(_mm512_loadu_ps(x), s0), e1 = _mm512_mul_ps(_mm512_loadu_ps(x + 16), s0);
    __m512 e2 = _mm512_mul_ps(_mm512_loadu_ps(x + 32), s1), e3 = _mm512_mul_ps(_mm512_loadu_ps(x + 48), s1);
    if (kind == KQ_MX_FP4) {
        _mm256_storeu_si256((__m256i *)(void *)dst, e2m1_pack64(lut, e0, e1, e2, e3));
    } else {
        _mm_storeu_si128((__m128i *)(void *)dst, int8_code16(e0));
        _mm_storeu_si128((__m128i *)(void *)(dst + 16), int8_code16(e1));
        _mm_storeu_si128((__m128i *)(void *)(dst + 32), int8_code16(e2));
        _mm_storeu_si128((__m128i *)(void *)(dst + 48), int8_code16(e3));
    }
}

/* One block alone (a zero-padded copy of a pair): codes, or zeros for a non-finite block. */
static inline void code_one(kq_mx_kind kind, const uint8_t *lut, const float *x, float r, uint8_t *dst)
{
    const size_t cb = kind == KQ_MX_FP4 ? 16 : 32;
    if (r == 0.0f) { memset(dst, 0, cb); return; }
    float t[64] = { 0 };
    uint8_t o[64];
    memcpy(t, x, 32 * sizeof(float));
    code_pair(kind, lut, t, r, 1.0f, o);
    memcpy(dst, o, cb);
}

static inline __attribute__((always_inline)) size_t mx_row512(const kq_mx *p, kq_mx_kind kind, const uint8_t *lut,
                                                              const float *x, size_t kp, uint8_t *codes,
                                                              uint8_t *scales)
{
    const size_t nb = kp / 32, cb = kind == KQ_MX_FP4 ? 16 : 32;
    size_t bad = 0, b = 0;
    for (; b + 16 <= nb; b += 16) {
        const float *xb = x + b * 32;
        for (int l = 0; l < 32; l++) _mm_prefetch((const char *)(xb + 16 * l + V_PREFETCH_FLOATS), _MM_HINT_T0);
        __m512i m[16];
        for (int j = 0; j < 16; j++) m[j] = _mm512_max_epu32(absbits16(xb + 32 * j), absbits16(xb + 32 * j + 16));
        __m512i amv = reduce16_max_u32(m);
        float rs[16];
        for (int h = 0; h < 2; h++) {
            __m256i am8 = h ? _mm512_extracti64x4_epi64(amv, 1) : _mm512_castsi512_si256(amv);
            if (!scale8(p, am8, scales + b + 8 * h, rs + 8 * h)) {
                uint32_t am[8];
                _mm256_storeu_si256((__m256i *)(void *)am, am8);
                for (int j = 0; j < 8; j++) rs[8 * h + j] = mx_scale1(p, am[j], b + 8 * h + j, scales);
            }
        }
        for (int j = 0; j < 16; j += 2) {
            uint8_t *dst = codes + (b + j) * cb;
            if (LOFP_LIKELY(rs[j] != 0.0f && rs[j + 1] != 0.0f)) {
                code_pair(kind, lut, xb + 32 * j, rs[j], rs[j + 1], dst);
            } else {
                bad += (rs[j] == 0.0f) + (rs[j + 1] == 0.0f);
                code_one(kind, lut, xb + 32 * j, rs[j], dst);
                code_one(kind, lut, xb + 32 * j + 32, rs[j + 1], dst + cb);
            }
        }
    }
    for (; b < nb; b++) {
        uint32_t am = (uint32_t)_mm512_reduce_max_epu32(_mm512_max_epu32(absbits16(x + b * 32), absbits16(x + b * 32 + 16)));
        float r = mx_scale1(p, am, b, scales);
        bad += r == 0.0f;
        code_one(kind, lut, x + b * 32, r, codes + b * cb);
    }
    return bad;
}

static size_t mx_quant_row_avx512(const lofp_scheme *s, const float *x, size_t kp, float global, uint64_t base,
                                  uint8_t *codes, uint8_t *scales, float *scratch)
{
    kq_mx p;
    kq_mx_init(s, &p);
    if (s->block != 32 || s->rounding == LOFP_STOCHASTIC || p.kind == KQ_MX_MINIFLOAT ||
        (p.kind == KQ_MX_INT8 && s->rounding != LOFP_RNE))
        return g_avx2_quant(s, x, kp, global, base, codes, scales, scratch);
    if (p.kind == KQ_MX_INT8) return mx_row512(&p, KQ_MX_INT8, NULL, x, kp, codes, scales);
    return mx_row512(&p, KQ_MX_FP4, g_e2m1_lut[lut_index(s->rounding)], x, kp, codes, scales);
}

/* ---- dequantize: E2M1 and MXINT8 at 512 bits, the rest by the AVX2 kernel ---- */

/* 16 floats to o: streamed when asked and o is 64-byte aligned (then every 16-float group is),
 * else through the AVX2 store rule of 8-float halves. */
static inline __attribute__((always_inline)) void store16(float *o, __m512 v, int st)
{
    if (st == 3) {
        _mm512_stream_ps(o, v);
    } else {
        v_store8(o, _mm512_castps512_ps256(v), st);
        v_store8(o + 8, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), st);
    }
}

static void mx_dequant_row_avx512(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales, float global,
                                  size_t kp, float *out, unsigned flags)
{
    const int int8 = s->elem == LOFP_ELEM_MXINT8;
    if (s->block != 32 || (s->elem != LOFP_ELEM_E2M1 && !int8)) {
        g_avx2_dequant(s, codes, scales, global, kp, out, flags);
        return;
    }
    int st = v_stream_ok(flags, out);
    if (st == 2 && ((uintptr_t)out & 63) == 0) st = 3;
    const float *e8m0 = lofp_decode_table(LOFP_ELEM_E8M0);
    /* E2M1 values of the 16 codes (code 8 is -0, as the reference decode) */
    const __m512 tab = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                      -2.0f, -3.0f, -4.0f, -6.0f);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (size_t b = 0; b < kp / 32; b++) {
        float *o = out + b * 32;
        if (LOFP_UNLIKELY(scales[b] == 0xFF)) { /* the whole block is the scale's NaN */
            store16(o, _mm512_set1_ps(e8m0[0xFF]), st);
            store16(o + 16, _mm512_set1_ps(e8m0[0xFF]), st);
            continue;
        }
        const __m512 sc = _mm512_set1_ps(e8m0[scales[b]]);
        if (int8) {
            const __m512 u = _mm512_set1_ps(0.015625f);
            __m128i c0 = _mm_loadu_si128((const __m128i *)(const void *)(codes + b * 32));
            __m128i c1 = _mm_loadu_si128((const __m128i *)(const void *)(codes + b * 32 + 16));
            /* (float)(int8_t)code * 2^-6 (exact), then * scale: the reference's two products */
            store16(o, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c0)), u), sc), st);
            store16(o + 16, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c1)), u), sc), st);
        } else {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(codes + b * 16));
            __m128i l = _mm_and_si128(v, m4), h = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
            __m128i lo = _mm_unpacklo_epi8(l, h), hi = _mm_unpackhi_epi8(l, h);
            store16(o, _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(lo), tab), sc), st);
            store16(o + 16, _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(hi), tab), sc), st);
        }
    }
    if (st) _mm_sfence();
}

void lofp_kernels_init_mx_avx512(lofp_kernel_table *t)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_luts);
    g_avx2_quant = t->quant[LOFP_KFAM_MX].quant_row;
    g_avx2_dequant = t->quant[LOFP_KFAM_MX].dequant_row;
    t->quant[LOFP_KFAM_MX] = (lofp_quant_kernels){ "avx512", mx_quant_row_avx512, mx_dequant_row_avx512 };
}

#else
void lofp_kernels_init_mx_avx512(lofp_kernel_table *t) { (void)t; }
#endif

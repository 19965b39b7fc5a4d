/* mx_avx512.c -- MX row kernels at 512 bits, any block of 32 * n (32; tilelang-mxfp8's 128), not
 * stochastic: MXFP4 (any tie rule), MXFP6 / MXFP8 (any tie rule) and MXINT8 (round to nearest
 * even) quantize, and the dequantize of every element kind; every other MX case (stochastic
 * rounding, MXINT8 with another tie rule) runs the AVX2 row kernel this file replaces in the
 * table. Same three passes as mx_avx2.c, 16 blocks at a time: the block maxima (integer max of
 * magnitude bits, a 16 x 16 transpose-reduce), the scale rule of 16 blocks (v_mx_scale8 on each
 * half, the AVX2 kernel's integer steps), then the encodes, two 32-value chunks (64 values) per
 * step, each with its block's reciprocal scale:
 *
 * - E2M1: the byte-domain keys summed and looked up in a 128-byte table by one vpermi2b
 *   (v512_e2m1_pack64, simd_avx512.h). Bit for bit the AVX2 (and the reference's) codes.
 * - FP6 / FP8: ties to even by rounding the fp32 pattern (normal range) or vcvtps2dq on the
 *   fixed-point grid (subnormal range) (v512_mf_code_rne, simd_avx512.h); the other tie rules
 *   by kq_mf_mag's integer rounding on 16 lanes (v512_mf_code, the AVX2 kernel's v_mf_code step
 *   for step); saturated, sign bit added, truncated to bytes.
 * - MXINT8: e * 64 is exact (a power-of-two multiply of e = x * 2^-s), vcvtps2dq rounds it to
 *   nearest even (the MXCSR default, which lofp never changes), saturation to +-127 and |e| >=
 *   128 -> +-127 as kq_mxint8.
 *
 * Needs AVX-512 F/BW/VL and VBMI (installed by kernels_avx512.c only then). */
#include <pthread.h>

#include "simd_avx512.h"
#include "quant/generic_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)

static lofp_kquant_row_fn g_avx2_quant;
static lofp_kdequant_row_fn g_avx2_dequant;

/* E2M1 code magnitude tables (simd_avx512.h), per tie rule. */
static uint8_t g_e2m1_lut[3][128] __attribute__((aligned(64)));

static void build_luts(void) { v512_e2m1_luts(g_e2m1_lut); }

/* What the encodes need: the E2M1 table of the tie rule, or the FP6/FP8 rounding parameters. */
typedef struct {
    const uint8_t *lut;
    v512_mf V;
    v512_mf_rne R; /* FP6/FP8 with ties to even (rne set) */
    int rne;
} mx512_ctx;

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

/* Codes of two 32-value chunks (64 values at x) given their reciprocal scales. */
static inline __attribute__((always_inline)) void code_pair(kq_mx_kind kind, const mx512_ctx *c, const float *x,
                                                            float r0, float r1, uint8_t *dst)
{
    __m512 s0 = _mm512_set1_ps(r0), s1 = _mm512_set1_ps(r1);
    __m512 e0 = _mm512_mul_ps(_mm512_loadu_ps(x), s0), e1 = _mm512_mul_ps(_mm512_loadu_ps(x + 16), s0);
    __m512 e2 = _mm512_mul_ps(_mm512_loadu_ps(x + 32), s1), e3 = _mm512_mul_ps(_mm512_loadu_ps(x + 48), s1);
    if (kind == KQ_MX_FP4) {
        _mm256_storeu_si256((__m256i *)(void *)dst, v512_e2m1_pack64(c->lut, e0, e1, e2, e3));
    } else if (kind == KQ_MX_MINIFLOAT && c->rne) {
        _mm_storeu_si128((__m128i *)(void *)dst, _mm512_cvtepi32_epi8(v512_mf_code_rne(&c->R, e0)));
        _mm_storeu_si128((__m128i *)(void *)(dst + 16), _mm512_cvtepi32_epi8(v512_mf_code_rne(&c->R, e1)));
        _mm_storeu_si128((__m128i *)(void *)(dst + 32), _mm512_cvtepi32_epi8(v512_mf_code_rne(&c->R, e2)));
        _mm_storeu_si128((__m128i *)(void *)(dst + 48), _mm512_cvtepi32_epi8(v512_mf_code_rne(&c->R, e3)));
    } else if (kind == KQ_MX_MINIFLOAT) {
        _mm_storeu_si128((__m128i *)(void *)dst, _mm512_cvtepi32_epi8(v512_mf_code(&c->V, e0)));
        _mm_storeu_si128((__m128i *)(void *)(dst + 16), _mm512_cvtepi32_epi8(v512_mf_code(&c->V, e1)));
        _mm_storeu_si128((__m128i *)(void *)(dst + 32), _mm512_cvtepi32_epi8(v512_mf_code(&c->V, e2)));
        _mm_storeu_si128((__m128i *)(void *)(dst + 48), _mm512_cvtepi32_epi8(v512_mf_code(&c->V, e3)));
    } else {
        _mm_storeu_si128((__m128i *)(void *)dst, int8_code16(e0));
        _mm_storeu_si128((__m128i *)(void *)(dst + 16), int8_code16(e1));
        _mm_storeu_si128((__m128i *)(void *)(dst + 32), int8_code16(e2));
        _mm_storeu_si128((__m128i *)(void *)(dst + 48), int8_code16(e3));
    }
}

/* One 32-value chunk alone (a zero-padded copy of a pair): codes, or zeros for a non-finite
 * block (r = 0). */
static inline void code_one(kq_mx_kind kind, const mx512_ctx *c, const float *x, float r, uint8_t *dst)
{
    const size_t cb = kind == KQ_MX_FP4 ? 16 : 32;
    if (r == 0.0f) { memset(dst, 0, cb); return; }
    float t[64] = { 0 };
    uint8_t o[64];
    memcpy(t, x, 32 * sizeof(float));
    code_pair(kind, c, t, r, 1.0f, o);
    memcpy(dst, o, cb);
}

/* Blocks of B = 32 * nc values (nc = B / 32 chunks), 16 blocks per batch. */
static inline __attribute__((always_inline)) size_t mx_row512(const kq_mx *p, kq_mx_kind kind, const mx512_ctx *c,
                                                              const float *x, size_t kp, uint32_t B,
                                                              uint8_t *codes, uint8_t *scales)
{
    const size_t nb = kp / B, nc = B / 32, cb = kind == KQ_MX_FP4 ? 16 : 32; /* cb: code bytes per chunk */
    size_t bad = 0, b = 0;
    for (; b + 16 <= nb; b += 16) {
        const float *xb = x + b * B;
        for (size_t l = 0; l < B; l++) _mm_prefetch((const char *)(xb + 16 * l + V_PREFETCH_FLOATS), _MM_HINT_T0);
        __m512i m[16];
        for (int j = 0; j < 16; j++) {
            const float *v = xb + (size_t)j * B;
            m[j] = _mm512_max_epu32(absbits16(v), absbits16(v + 16));
            for (size_t q = 1; q < nc; q++)
                m[j] = _mm512_max_epu32(m[j], _mm512_max_epu32(absbits16(v + 32 * q), absbits16(v + 32 * q + 16)));
        }
        __m512i amv = v512_reduce16_max_u32(m);
        float rs[16];
        for (int h = 0; h < 2; h++) {
            __m256i am8 = h ? _mm512_extracti64x4_epi64(amv, 1) : _mm512_castsi512_si256(amv);
            if (!scale8(p, am8, scales + b + 8 * h, rs + 8 * h)) {
                uint32_t am[8];
                _mm256_storeu_si256((__m256i *)(void *)am, am8);
                for (int j = 0; j < 8; j++) rs[8 * h + j] = mx_scale1(p, am[j], b + 8 * h + j, scales);
            }
        }
        for (int j = 0; j < 16; j++) bad += rs[j] == 0.0f;
        /* 16 * nc chunks (even): pairs, each chunk with its block's reciprocal */
        for (size_t q = 0; q < 16 * nc; q += 2) {
            const float r0 = rs[q / nc], r1 = rs[(q + 1) / nc];
            uint8_t *dst = codes + (b * nc + q) * cb;
            if (LOFP_LIKELY(r0 != 0.0f && r1 != 0.0f)) {
                code_pair(kind, c, xb + 32 * q, r0, r1, dst);
            } else {
                code_one(kind, c, xb + 32 * q, r0, dst);
                code_one(kind, c, xb + 32 * q + 32, r1, dst + cb);
            }
        }
    }
    for (; b < nb; b++) {
        const float *v = x + b * B;
        __m512i m = _mm512_max_epu32(absbits16(v), absbits16(v + 16));
        for (size_t q = 1; q < nc; q++) m = _mm512_max_epu32(m, _mm512_max_epu32(absbits16(v + 32 * q), absbits16(v + 32 * q + 16)));
        float r = mx_scale1(p, (uint32_t)_mm512_reduce_max_epu32(m), b, scales);
        bad += r == 0.0f;
        for (size_t q = 0; q < nc; q++) code_one(kind, c, v + 32 * q, r, codes + (b * nc + q) * cb);
    }
    return bad;
}

static size_t mx_quant_row_avx512(const lofp_scheme *s, const float *x, size_t kp, float global, uint64_t base,
                                  uint8_t *codes, uint8_t *scales, float *scratch)
{
    kq_mx p;
    kq_mx_init(s, &p);
    if (s->block % 32 != 0 || s->rounding == LOFP_STOCHASTIC || (p.kind == KQ_MX_INT8 && s->rounding != LOFP_RNE))
        return g_avx2_quant(s, x, kp, global, base, codes, scales, scratch);
    mx512_ctx c;
    c.lut = g_e2m1_lut[v512_lut_index(s->rounding)];
    v512_mf_init(p.mf, p.sign_bit, s->rounding, &c.V);
    v512_mf_rne_init(p.mf, p.sign_bit, &c.R);
    c.rne = s->rounding == LOFP_RNE;
    if (p.kind == KQ_MX_INT8) return mx_row512(&p, KQ_MX_INT8, &c, x, kp, s->block, codes, scales);
    if (p.kind == KQ_MX_MINIFLOAT) return mx_row512(&p, KQ_MX_MINIFLOAT, &c, x, kp, s->block, codes, scales);
    return mx_row512(&p, KQ_MX_FP4, &c, x, kp, s->block, codes, scales);
}

/* ---- dequantize: block 32 at 512 bits, the rest by the AVX2 kernel ---- */

/* The FP6/FP8 decode of mx_avx2.c (v_mf_decode: element.c decode_minifloat from the fields) on
 * 16 lanes. */
typedef struct {
    __m512i code_mask, sign_bit, mag_mask, mant_mask, exp_add, nan_lo, inf_code;
    __m512 sub_scale;
    int mbits, has_nan, has_inf;
} mfdec512;

static void mfdec512_init(lofp_elem t, mfdec512 *d)
{
    const lofp_elem_traits_t *tr = &lofp_elem_traits[t];
    const int mb = (int)tr->info.mbits, bias = tr->info.bias;
    d->code_mask = V16I((tr->sign_bit << 1) - 1);
    d->sign_bit = V16I(tr->sign_bit);
    d->mag_mask = V16I(tr->sign_bit - 1);
    d->mant_mask = V16I((1u << mb) - 1);
    d->exp_add = V16I(127 - bias);
    d->sub_scale = _mm512_set1_ps(lofp_bits_f32((uint32_t)(127 + 1 - bias - mb) << 23));
    d->mbits = mb;
    /* NaN: mag == nan_code, or (with Inf) mag > overflow_code; Inf: mag == overflow_code */
    d->has_nan = tr->nan_code != 0;
    d->has_inf = tr->info.has_inf;
    d->nan_lo = V16I(tr->info.has_inf ? tr->overflow_code : tr->nan_code - 1); /* NaN iff mag > nan_lo */
    d->inf_code = V16I(tr->overflow_code);
}

static inline __attribute__((always_inline)) __m512 mf_decode16(const mfdec512 *d, __m512i c)
{
    c = _mm512_and_si512(c, d->code_mask);
    __m512i mag = _mm512_and_si512(c, d->mag_mask);
    __m512i e = _mm512_srl_epi32(mag, _mm_cvtsi32_si128(d->mbits));
    __m512i mt = _mm512_and_si512(mag, d->mant_mask);
    __m512 normal = _mm512_castsi512_ps(_mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(e, d->exp_add), 23),
                                                        _mm512_sll_epi32(mt, _mm_cvtsi32_si128(23 - d->mbits))));
    __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(mt), d->sub_scale);
    __m512 v = _mm512_mask_blend_ps(_mm512_testn_epi32_mask(e, e), normal, sub);
    if (d->has_nan)
        v = _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(mag, d->nan_lo), v, _mm512_castsi512_ps(V16I(0x7FC00000)));
    if (d->has_inf)
        v = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(mag, d->inf_code), v, _mm512_castsi512_ps(V16I(0x7F800000)));
    __m512i vi = _mm512_castps_si512(v);
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(vi, _mm512_test_epi32_mask(c, d->sign_bit), vi, V16I(0x80000000u)));
}

static void mx_dequant_row_avx512(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales, float global,
                                  size_t kp, float *out, unsigned flags)
{
    const int int8 = s->elem == LOFP_ELEM_MXINT8, fp4 = s->elem == LOFP_ELEM_E2M1;
    if (s->block % 32 != 0) {
        g_avx2_dequant(s, codes, scales, global, kp, out, flags);
        return;
    }
    mfdec512 d;
    memset(&d, 0, sizeof d);
    if (!int8 && !fp4) mfdec512_init(s->elem, &d);
    int st = v_stream_ok(flags, out);
    if (st == 2 && ((uintptr_t)out & 63) == 0) st = 3;
    const float *e8m0 = lofp_decode_table(LOFP_ELEM_E8M0);
    /* E2M1 values of the 16 codes (code 8 is -0, as the reference decode) */
    const __m512 tab = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                      -2.0f, -3.0f, -4.0f, -6.0f);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const size_t nc = s->block / 32; /* 32-value chunks per block */
    for (size_t q = 0; q < kp / 32; q++) {
        const size_t b = q / nc;
        float *o = out + q * 32;
        if (LOFP_UNLIKELY(scales[b] == 0xFF)) { /* the whole block is the scale's NaN */
            v512_store16(o, _mm512_set1_ps(e8m0[0xFF]), st);
            v512_store16(o + 16, _mm512_set1_ps(e8m0[0xFF]), st);
            continue;
        }
        const __m512 sc = _mm512_set1_ps(e8m0[scales[b]]);
        if (int8) {
            const __m512 u = _mm512_set1_ps(0.015625f);
            __m128i c0 = _mm_loadu_si128((const __m128i *)(const void *)(codes + q * 32));
            __m128i c1 = _mm_loadu_si128((const __m128i *)(const void *)(codes + q * 32 + 16));
            /* (float)(int8_t)code * 2^-6 (exact), then * scale: the reference's two products */
            v512_store16(o, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c0)), u), sc), st);
            v512_store16(o + 16, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c1)), u), sc), st);
        } else if (!fp4) { /* FP6 / FP8: v * scale, the element value first as mx_avx2.c */
            __m128i c0 = _mm_loadu_si128((const __m128i *)(const void *)(codes + q * 32));
            __m128i c1 = _mm_loadu_si128((const __m128i *)(const void *)(codes + q * 32 + 16));
            v512_store16(o, _mm512_mul_ps(mf_decode16(&d, _mm512_cvtepu8_epi32(c0)), sc), st);
            v512_store16(o + 16, _mm512_mul_ps(mf_decode16(&d, _mm512_cvtepu8_epi32(c1)), sc), st);
        } else {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(codes + q * 16));
            __m128i l = _mm_and_si128(v, m4), h = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
            __m128i lo = _mm_unpacklo_epi8(l, h), hi = _mm_unpackhi_epi8(l, h);
            v512_store16(o, _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(lo), tab), sc), st);
            v512_store16(o + 16, _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(hi), tab), sc), st);
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

/* mx_avx2.c -- MX row kernels (MXFP4/6/8, MXINT8, tilelang-mxfp8), AVX2. Per block: amax as the
 * integer max of magnitude bits (NaN/Inf sort above every finite value, so the same max says
 * whether the block is finite), the scale byte by the scalar rule (once per block, kernel_util.h),
 * elements v * 2^-s (kq_e8m0_recip: the same real number as the reference's v / 2^s, so the same
 * rounding), then the element encoder lane by lane. Stochastic rounding stays scalar. */
#include "simd_avx2.h"
#include "quant/generic_kernels.h"

typedef struct {
    kq_mx p;
    v_mf V; /* FP6/FP8/MXINT8 rounding (mode from the scheme) */
} mx_ctx;

static void mx_ctx_init(const lofp_scheme *s, mx_ctx *c)
{
    kq_mx_init(s, &c->p);
    lofp_rounding r = s->rounding == LOFP_STOCHASTIC ? LOFP_RNE : s->rounding;
    v_mf_init(c->p.mf, c->p.sign_bit, r, &c->V);
}

/* Codes of 32 values v[0..32) * r, written at dst (16 bytes for FP4, 32 otherwise). `kind` and
 * `mode` are compile-time constants in each specialised row function below. */
static inline __attribute__((always_inline)) void mx_code32(const mx_ctx *c, kq_mx_kind kind,
                                                            lofp_rounding mode, const float *v,
                                                            __m256 r, uint8_t *dst)
{
    __m256 e0 = _mm256_mul_ps(_mm256_loadu_ps(v), r);
    __m256 e1 = _mm256_mul_ps(_mm256_loadu_ps(v + 8), r);
    __m256 e2 = _mm256_mul_ps(_mm256_loadu_ps(v + 16), r);
    __m256 e3 = _mm256_mul_ps(_mm256_loadu_ps(v + 24), r);
    if (kind == KQ_MX_FP4)
        _mm_storeu_si128((__m128i *)(void *)dst, v_e2m1_pack32(mode, e0, e1, e2, e3));
    else if (kind == KQ_MX_MINIFLOAT)
        _mm256_storeu_si256((__m256i *)(void *)dst,
                            v_pack_bytes(v_mf_code(&c->V, e0), v_mf_code(&c->V, e1),
                                         v_mf_code(&c->V, e2), v_mf_code(&c->V, e3)));
    else
        _mm256_storeu_si256((__m256i *)(void *)dst,
                            v_pack_bytes(v_mxint8_code(&c->V, e0), v_mxint8_code(&c->V, e1),
                                         v_mxint8_code(&c->V, e2), v_mxint8_code(&c->V, e3)));
}

/* Lane-wise max of the magnitude bits of B values (B a multiple of 32). */
static inline __attribute__((always_inline)) __m256i block_max(const float *v, uint32_t B)
{
    __m256i m0 = v_absbits(_mm256_loadu_ps(v)), m1 = v_absbits(_mm256_loadu_ps(v + 8));
    __m256i m2 = v_absbits(_mm256_loadu_ps(v + 16)), m3 = v_absbits(_mm256_loadu_ps(v + 24));
    for (uint32_t i = 32; i < B; i += 32) {
        m0 = _mm256_max_epu32(m0, v_absbits(_mm256_loadu_ps(v + i)));
        m1 = _mm256_max_epu32(m1, v_absbits(_mm256_loadu_ps(v + i + 8)));
        m2 = _mm256_max_epu32(m2, v_absbits(_mm256_loadu_ps(v + i + 16)));
        m3 = _mm256_max_epu32(m3, v_absbits(_mm256_loadu_ps(v + i + 24)));
    }
    return _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3));
}

/* Scale byte of block b from its amax bits; returns the reciprocal scale, or 0 for a non-finite
 * block (whose scale byte is then 0xFF and whose codes the caller zeroes). */
static inline __attribute__((always_inline)) float mx_scale(const mx_ctx *c, uint32_t amax, size_t b,
                                                            uint8_t *scales)
{
    if (LOFP_UNLIKELY(amax >= 0x7F800000u)) {
        scales[b] = 0xFF; /* propagation: NaN scale, zero codes */
        return 0.0f;
    }
    uint8_t sb = kq_mx_scale_byte(&c->p, lofp_bits_f32(amax));
    scales[b] = sb;
    return kq_e8m0_recip(sb);
}

/* Codes of block b given its reciprocal scale (0: a non-finite block). Returns 1 when bad. */
static inline __attribute__((always_inline)) int mx_codes(const lofp_scheme *s, const mx_ctx *c,
                                                          kq_mx_kind kind, lofp_rounding mode,
                                                          const float *v, float rs, uint64_t base,
                                                          size_t b, uint8_t *codes)
{
    const uint32_t B = s->block;
    const size_t cbytes = kind == KQ_MX_FP4 ? B / 2 : B, c32 = kind == KQ_MX_FP4 ? 16 : 32;
    uint8_t *cb = codes + b * cbytes;
    if (LOFP_UNLIKELY(rs == 0.0f)) {
        memset(cb, 0, cbytes);
        return 1;
    }
    if (LOFP_UNLIKELY(s->rounding == LOFP_STOCHASTIC)) {
        float e[32];
        for (uint32_t i0 = 0; i0 < B; i0 += 32) {
            for (int i = 0; i < 32; i++) e[i] = v[i0 + i] * rs;
            lofp_stochastic_codes(s, e, 32, base + b * B + i0, codes, b * B + i0);
        }
        return 0;
    }
    const __m256 r = _mm256_set1_ps(rs);
    for (uint32_t i0 = 0; i0 < B; i0 += 32) mx_code32(c, kind, mode, v + i0, r, cb + (i0 / 32) * c32);
    return 0;
}

static inline __attribute__((always_inline)) size_t
mx_row(const lofp_scheme *s, const mx_ctx *c, kq_mx_kind kind, lofp_rounding mode, const float *x,
       size_t kp, uint64_t base, uint8_t *codes, uint8_t *scales)
{
    const uint32_t B = s->block;
    const size_t nb = kp / B;
    size_t bad = 0, b = 0;
    /* 8 blocks at a time, in three passes: amaxes (one transpose-reduce), the 8 independent
     * scalar scale rules, then the encodes. Interleaving scale and encode per block puts the
     * scalar rule on each encode's critical path: 1.5-2x slower on this machine. */
    for (; b + 8 <= nb; b += 8) {
        __m256i m[8];
        uint32_t am[8];
        float rs[8];
        v_prefetch(x + b * B, 8 * (size_t)B);
        for (int j = 0; j < 8; j++) m[j] = block_max(x + (b + j) * B, B);
        __m256i amv = v_reduce8_max_u32(m);
        int scalar = 0;
        __m256i sb = v_mx_scale8(&c->p, amv, &scalar);
        if (LOFP_UNLIKELY(scalar)) {
            _mm256_storeu_si256((__m256i *)(void *)am, amv);
            for (int j = 0; j < 8; j++) rs[j] = mx_scale(c, am[j], b + j, scales);
        } else {
            /* non-finite blocks: byte 0xFF and reciprocal 0 (mx_codes zeroes them) */
            __m256i nf = _mm256_cmpgt_epi32(amv, V8I(0x7F7FFFFF));
            sb = _mm256_blendv_epi8(sb, V8I(0xFF), nf);
            _mm_storel_epi64((__m128i *)(void *)(scales + b), v_pack8_bytes(sb));
            /* 2^(127 - byte): field 254 - byte, and 2^-127 (0x00400000) for byte 254 */
            __m256i rb = _mm256_slli_epi32(_mm256_sub_epi32(V8I(254), sb), 23);
            rb = _mm256_blendv_epi8(rb, V8I(0x00400000), _mm256_cmpeq_epi32(sb, V8I(254)));
            _mm256_storeu_ps(rs, _mm256_castsi256_ps(_mm256_andnot_si256(nf, rb)));
        }
        for (int j = 0; j < 8; j++)
            bad += (size_t)mx_codes(s, c, kind, mode, x + (b + j) * B, rs[j], base, b + j, codes);
    }
    for (; b < nb; b++) {
        float rs = mx_scale(c, v_hmax_u32(block_max(x + b * B, B)), b, scales);
        bad += (size_t)mx_codes(s, c, kind, mode, x + b * B, rs, base, b, codes);
    }
    return bad;
}

static size_t mx_quant_row_avx2(const lofp_scheme *s, const float *x, size_t kp, float global,
                                uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)global;
    (void)scratch;
    mx_ctx c;
    mx_ctx_init(s, &c);
    /* one specialised copy per element kind and E2M1 tie rule (stochastic codes are scalar) */
    if (c.p.kind == KQ_MX_FP4) {
        if (s->rounding == LOFP_TIES_TO_ZERO)
            return mx_row(s, &c, KQ_MX_FP4, LOFP_TIES_TO_ZERO, x, kp, base, codes, scales);
        if (s->rounding == LOFP_TIES_AWAY)
            return mx_row(s, &c, KQ_MX_FP4, LOFP_TIES_AWAY, x, kp, base, codes, scales);
        return mx_row(s, &c, KQ_MX_FP4, LOFP_RNE, x, kp, base, codes, scales);
    }
    if (c.p.kind == KQ_MX_INT8) return mx_row(s, &c, KQ_MX_INT8, LOFP_RNE, x, kp, base, codes, scales);
    return mx_row(s, &c, KQ_MX_MINIFLOAT, LOFP_RNE, x, kp, base, codes, scales);
}

/* ---- dequantize ---- */

typedef struct {
    __m256i code_mask, sign_bit, mag_mask, mant_mask, exp_add, nan_lo, inf_code;
    __m256 sub_scale;
    int mbits, has_nan, has_inf;
} v_mfdec;

static void v_mfdec_init(lofp_elem t, v_mfdec *d)
{
    const lofp_elem_traits_t *tr = &lofp_elem_traits[t];
    const int mb = (int)tr->info.mbits, bias = tr->info.bias;
    d->code_mask = V8I((tr->sign_bit << 1) - 1);
    d->sign_bit = V8I(tr->sign_bit);
    d->mag_mask = V8I(tr->sign_bit - 1);
    d->mant_mask = V8I((1u << mb) - 1);
    d->exp_add = V8I(127 - bias);
    d->sub_scale = _mm256_set1_ps(lofp_bits_f32((uint32_t)(127 + 1 - bias - mb) << 23));
    d->mbits = mb;
    /* NaN: mag == nan_code, or (with Inf) mag > overflow_code; Inf: mag == overflow_code */
    d->has_nan = tr->nan_code != 0;
    d->has_inf = tr->info.has_inf;
    d->nan_lo = V8I(tr->info.has_inf ? tr->overflow_code : tr->nan_code - 1); /* NaN iff mag > nan_lo */
    d->inf_code = V8I(tr->overflow_code);
}

/* The reference decode (element.c decode_minifloat) of 8 codes, from the fields. */
static inline __m256 v_mf_decode(const v_mfdec *d, __m256i c)
{
    c = _mm256_and_si256(c, d->code_mask);
    __m256i mag = _mm256_and_si256(c, d->mag_mask);
    __m256i e = _mm256_srli_epi32(mag, d->mbits);
    __m256i mt = _mm256_and_si256(mag, d->mant_mask);
    __m256 normal = _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, d->exp_add), 23),
                                                        _mm256_slli_epi32(mt, 23 - d->mbits)));
    __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mt), d->sub_scale);
    __m256 v = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_setzero_si256())));
    if (d->has_nan)
        v = _mm256_blendv_ps(v, _mm256_castsi256_ps(V8I(0x7FC00000)),
                             _mm256_castsi256_ps(_mm256_cmpgt_epi32(mag, d->nan_lo)));
    if (d->has_inf)
        v = _mm256_blendv_ps(v, _mm256_castsi256_ps(V8I(0x7F800000)),
                             _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, d->inf_code)));
    __m256i sign = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_and_si256(c, d->sign_bit), d->sign_bit),
                                    V8I(0x80000000u));
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

static void mx_dequant_row_avx2(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                                float global, size_t kp, float *out, unsigned flags)
{
    (void)global;
    const int st = v_stream_ok(flags, out);
    const float *e8m0 = lofp_decode_table(LOFP_ELEM_E8M0);
    const uint32_t B = s->block;
    /* a 0xFF (NaN) scale: the whole block is the scale's NaN (see generic_mx.c) */
    for (size_t b = 0; b < kp / B; b++)
        if (LOFP_UNLIKELY(scales[b] == 0xFF))
            for (uint32_t i = 0; i < B; i += 8) v_store8(out + b * B + i, _mm256_set1_ps(e8m0[0xFF]), st);
    if (s->elem == LOFP_ELEM_E2M1) {
        for (size_t b = 0; b < kp / B; b++) {
            if (LOFP_UNLIKELY(scales[b] == 0xFF)) continue;
            const __m256 sc = _mm256_set1_ps(e8m0[scales[b]]);
            for (uint32_t i0 = 0; i0 < B; i0 += 32) {
                const uint8_t *cb = codes + (b * B + i0) / 2;
                float *o = out + b * B + i0;
                __m128i lo, hi;
                v_unpack_nibbles(_mm_loadu_si128((const __m128i *)(const void *)cb), &lo, &hi);
                v_store8(o, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(lo)), sc), st);
                v_store8(o + 8, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), sc), st);
                v_store8(o + 16, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(hi)), sc), st);
                v_store8(o + 24, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), sc), st);
            }
        }
        if (st) _mm_sfence();
        return;
    }
    const int int8 = s->elem == LOFP_ELEM_MXINT8;
    v_mfdec d;
    if (!int8) v_mfdec_init(s->elem, &d);
    for (size_t b = 0; b < kp / B; b++) {
        if (LOFP_UNLIKELY(scales[b] == 0xFF)) continue;
        const __m256 sc = _mm256_set1_ps(e8m0[scales[b]]);
        for (uint32_t i = 0; i < B; i += 8) {
            __m128i c8 = _mm_loadl_epi64((const __m128i *)(const void *)(codes + b * B + i));
            __m256 v;
            if (int8) /* (float)(int8_t)code * 2^-6, as the reference */
                v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c8)), _mm256_set1_ps(0.015625f));
            else
                v = v_mf_decode(&d, _mm256_cvtepu8_epi32(c8));
            v_store8(out + b * B + i, _mm256_mul_ps(v, sc), st);
        }
    }
    if (st) _mm_sfence();
}

void lofp_kernels_init_mx_avx2(lofp_kernel_table *t)
{
    t->quant[LOFP_KFAM_MX] = (lofp_quant_kernels){ "avx2", mx_quant_row_avx2, mx_dequant_row_avx2 };
}

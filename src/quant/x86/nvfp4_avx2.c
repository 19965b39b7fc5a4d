/* nvfp4_avx2.c -- NVFP4 row kernels, AVX2. Quantize works on 8 blocks (128 values) at a time so
 * that the per-block scale arithmetic is itself one vector: g = x * global (mul), block max of
 * |g| (integer max of magnitude bits, transpose-reduced), bs = bmax / 6 (div_ps, correctly rounded
 * like the scalar division), clamp to [1e-12, 448] (max/min of finite values), UE4M3 by the
 * integer encoder, bq decoded from its fields, e = g / bq (div_ps: a true division, as required),
 * E2M1 by thresholds. Dequantize replaces (code * scale) / global by a table of those exact
 * quotients, built once per global per thread. */
#include "simd_avx2.h"
#include "quant/generic_kernels.h"

/* One batch of 8 blocks at xb (128 floats, readable). Returns the non-finite block count.
 * `mode` (the E2M1 tie rule) is a compile-time constant in each specialised caller. */
static inline __attribute__((always_inline)) size_t
nvfp4_batch8(const lofp_scheme *s, lofp_rounding mode, const float *xb, __m256 vglobal,
             const v_mf *ue4m3, uint64_t base, uint8_t *codes, uint8_t *scales)
{
    __m256 g[16];
    __m256i m[8];
    for (int j = 0; j < 8; j++) {
        g[2 * j] = _mm256_mul_ps(_mm256_loadu_ps(xb + 16 * j), vglobal);
        g[2 * j + 1] = _mm256_mul_ps(_mm256_loadu_ps(xb + 16 * j + 8), vglobal);
        m[j] = _mm256_max_epu32(v_absbits(g[2 * j]), v_absbits(g[2 * j + 1]));
    }
    __m256i mx = v_reduce8_max_u32(m);
    __m256 bs = _mm256_div_ps(_mm256_castsi256_ps(mx), _mm256_set1_ps(6.0f));
    bs = _mm256_max_ps(bs, _mm256_set1_ps(1e-12f));
    bs = _mm256_min_ps(bs, _mm256_set1_ps(448.0f));
    __m256i sb = _mm256_min_epu32(v_mf_mag_raw(ue4m3, v_bits(bs)), ue4m3->maxc);
    /* decode: e = 0 gives m * 2^-9 (then 0 -> 2^-9 as the reference's !(bq > 0)), else fields */
    __m256i e = _mm256_srli_epi32(sb, 3), mant = _mm256_and_si256(sb, V8I(7));
    __m256 normal = _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, V8I(120)), 23),
                                                        _mm256_slli_epi32(mant, 20)));
    __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mant), _mm256_set1_ps(0x1p-9f));
    __m256i ez = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
    __m256 bq = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(ez));
    bq = _mm256_blendv_ps(bq, _mm256_set1_ps(0x1p-9f),
                          _mm256_castsi256_ps(_mm256_cmpeq_epi32(sb, _mm256_setzero_si256())));
    _mm_storel_epi64((__m128i *)(void *)scales, v_pack8_bytes(sb));

    if (LOFP_UNLIKELY(s->rounding == LOFP_STOCHASTIC)) {
        float bqs[8], e16[16];
        _mm256_storeu_ps(bqs, bq);
        for (int j = 0; j < 8; j++) {
            __m256 q = _mm256_set1_ps(bqs[j]);
            __m256 lim = _mm256_set1_ps(6.0f), nlim = _mm256_set1_ps(-6.0f);
            /* the reference clamps e before the stochastic encode: max/min agree on finite e */
            _mm256_storeu_ps(e16, _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(g[2 * j], q), nlim), lim));
            _mm256_storeu_ps(e16 + 8, _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(g[2 * j + 1], q), nlim), lim));
            lofp_stochastic_codes(s, e16, 16, base + 16 * (uint64_t)j, codes, 16 * (size_t)j);
        }
    } else {
        for (int j = 0; j < 8; j += 2) {
            __m256 q0 = _mm256_permutevar8x32_ps(bq, V8I(j));
            __m256 q1 = _mm256_permutevar8x32_ps(bq, V8I(j + 1));
            _mm_storeu_si128((__m128i *)(void *)(codes + 8 * j),
                             v_e2m1_pack32(mode, _mm256_div_ps(g[2 * j], q0), _mm256_div_ps(g[2 * j + 1], q0),
                                           _mm256_div_ps(g[2 * j + 2], q1), _mm256_div_ps(g[2 * j + 3], q1)));
        }
    }

    /* |g| >= Inf: a non-finite x, or finite x overflowing with a large given multiplier (that
     * block is already right: the vector ops are the reference's on Inf too) */
    int infmask = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(mx, V8I(0x7F7FFFFF))));
    size_t bad = 0;
    while (LOFP_UNLIKELY(infmask)) {
        int j = __builtin_ctz((unsigned)infmask);
        infmask &= infmask - 1;
        if (kq_first_nonfinite_f32(xb + 16 * j, 16) < 16) {
            scales[j] = 0;
            memset(codes + 8 * j, 0, 8);
            bad++;
        }
    }
    return bad;
}

static inline __attribute__((always_inline)) size_t
nvfp4_row(const lofp_scheme *s, lofp_rounding mode, const float *x, size_t kp, float global,
          uint64_t base, uint8_t *codes, uint8_t *scales)
{
    v_mf ue4m3;
    const kq_mf p = { 3, 121, 0x7E };
    v_mf_init(p, 0, LOFP_RNE, &ue4m3);
    const __m256 vg = _mm256_set1_ps(global);
    const size_t nb = kp / 16;
    size_t b = 0, bad = 0;
    for (; b + 8 <= nb; b += 8) {
        v_prefetch(x + b * 16, 128);
        bad += nvfp4_batch8(s, mode, x + b * 16, vg, &ue4m3, base + b * 16, codes + b * 8, scales + b);
    }
    if (b < nb) {
        /* the last 1..7 blocks go through the same code on a zero-padded copy */
        float tmp[128];
        uint8_t tc[64], ts[8];
        size_t m = nb - b;
        memset(tmp, 0, sizeof tmp);
        memcpy(tmp, x + b * 16, m * 16 * sizeof(float));
        bad += nvfp4_batch8(s, mode, tmp, vg, &ue4m3, base + b * 16, tc, ts);
        memcpy(codes + b * 8, tc, m * 8);
        memcpy(scales + b, ts, m);
    }
    return bad;
}

static size_t nvfp4_quant_row_avx2(const lofp_scheme *s, const float *x, size_t kp, float global,
                                   uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)scratch;
    /* one specialised copy per E2M1 tie rule (stochastic codes are scalar) */
    if (s->rounding == LOFP_TIES_TO_ZERO)
        return nvfp4_row(s, LOFP_TIES_TO_ZERO, x, kp, global, base, codes, scales);
    if (s->rounding == LOFP_TIES_AWAY)
        return nvfp4_row(s, LOFP_TIES_AWAY, x, kp, global, base, codes, scales);
    return nvfp4_row(s, LOFP_RNE, x, kp, global, base, codes, scales);
}

/* (E2M1(c) * UE4M3(sb)) / global for every sb & 0x7F and c: the reference expression on the same
 * operands, so a lookup is the reference result (NaN scale bytes included). Rebuilt when a call
 * with another global (compared as bits) reaches this thread. */
static _Thread_local struct {
    uint32_t global_bits;
    int valid;
    float v[128][16];
} dq_tab;

static const float (*nvfp4_table(float global))[16]
{
    uint32_t gb = lofp_f32_bits(global);
    if (!dq_tab.valid || dq_tab.global_bits != gb) {
        const float *ue4m3 = lofp_decode_table(LOFP_ELEM_UE4M3);
        const __m256i i0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256 e0 = v_e2m1_decode(i0), e1 = v_e2m1_decode(_mm256_add_epi32(i0, V8I(8)));
        const __m256 vg = _mm256_set1_ps(global);
        for (int sb = 0; sb < 128; sb++) {
            __m256 sc = _mm256_set1_ps(ue4m3[sb]);
            _mm256_storeu_ps(dq_tab.v[sb], _mm256_div_ps(_mm256_mul_ps(e0, sc), vg));
            _mm256_storeu_ps(dq_tab.v[sb] + 8, _mm256_div_ps(_mm256_mul_ps(e1, sc), vg));
        }
        dq_tab.global_bits = gb;
        dq_tab.valid = 1;
    }
    return (const float (*)[16])dq_tab.v;
}

static void nvfp4_dequant_row_avx2(const lofp_scheme *s, const uint8_t *codes,
                                   const uint8_t *scales, float global, size_t kp, float *out,
                                   unsigned flags)
{
    (void)s;
    const int st = v_stream_ok(flags, out);
    const float (*tab)[16] = nvfp4_table(global);
    const size_t nb = kp / 16;
    for (size_t b = 0; b < nb; b++) {
        const float *t = tab[scales[b] & 0x7F];
        __m256 lo = _mm256_loadu_ps(t), hi = _mm256_loadu_ps(t + 8);
        __m128i bytes = _mm_loadl_epi64((const __m128i *)(const void *)(codes + 8 * b));
        __m128i l = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
        __m128i h = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
        __m128i n = _mm_unpacklo_epi8(l, h); /* 16 codes in element order */
        __m256i i0 = _mm256_cvtepu8_epi32(n), i1 = _mm256_cvtepu8_epi32(_mm_srli_si128(n, 8));
        /* bit 3 of the code picks the upper half of the 16-entry row */
        __m256 v0 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, i0), _mm256_permutevar8x32_ps(hi, i0),
                                     _mm256_castsi256_ps(_mm256_slli_epi32(i0, 28)));
        __m256 v1 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, i1), _mm256_permutevar8x32_ps(hi, i1),
                                     _mm256_castsi256_ps(_mm256_slli_epi32(i1, 28)));
        v_store8(out + 16 * b, v0, st);
        v_store8(out + 16 * b + 8, v1, st);
    }
    if (st) _mm_sfence();
}

void lofp_kernels_init_nvfp4_avx2(lofp_kernel_table *t)
{
    t->quant[LOFP_KFAM_NVFP4] = (lofp_quant_kernels){ "avx2", nvfp4_quant_row_avx2,
                                                      nvfp4_dequant_row_avx2 };
}

/* uq_avx2.c -- UltraQuant row kernels, AVX2. The butterfly keeps the reference's stages (ascending
 * stride), pairs and operations: per pair s = a + b, t = a - b, then s * r and t * r. Strides 1, 2
 * and 4 live inside one vector: with y = x with lanes j and j^h swapped, the lower lane of a
 * pair gets x + y = a + b (fp addition is commutative) and the upper lane y - x = a - b. Larger
 * strides pair whole vectors. The per-group scale keeps the reference's double log2 (one call per
 * 32 values); elements are v * 2^-e (exact reciprocal, see kq_e8m0_recip) snapped by thresholds. */
#include <math.h>

#include "simd_avx2.h"
#include "quant/generic_kernels.h"

/* Stages h = 1, 2, 4 of one vector, in place: see the file comment. */
static inline __attribute__((always_inline)) __m256 bfly_in_vector(__m256 v, __m256 r)
{
    __m256 y = _mm256_permute_ps(v, 0xB1); /* h = 1: lanes [1 0 3 2 ...] */
    v = _mm256_mul_ps(_mm256_blend_ps(_mm256_add_ps(v, y), _mm256_sub_ps(y, v), 0xAA), r);
    y = _mm256_permute_ps(v, 0x4E); /* h = 2: lanes [2 3 0 1 ...] */
    v = _mm256_mul_ps(_mm256_blend_ps(_mm256_add_ps(v, y), _mm256_sub_ps(y, v), 0xCC), r);
    y = _mm256_permute2f128_ps(v, v, 0x01); /* h = 4: halves swapped */
    return _mm256_mul_ps(_mm256_blend_ps(_mm256_add_ps(v, y), _mm256_sub_ps(y, v), 0xF0), r);
}

/* One pair of a cross-vector stage: (a, b) -> ((a + b) r, (a - b) r). */
#define BFLY_PAIR(a, b, r)                                                                     \
    do {                                                                                       \
        __m256 s_ = _mm256_add_ps(a, b), t_ = _mm256_sub_ps(a, b);                             \
        a = _mm256_mul_ps(s_, r);                                                              \
        b = _mm256_mul_ps(t_, r);                                                              \
    } while (0)

static void butterfly_avx2(float *x, size_t d)
{
    const __m256 r = _mm256_set1_ps(0.70710678118654752f);
    if (d == 32) {
        __m256 v0 = bfly_in_vector(_mm256_loadu_ps(x), r), v1 = bfly_in_vector(_mm256_loadu_ps(x + 8), r);
        __m256 v2 = bfly_in_vector(_mm256_loadu_ps(x + 16), r), v3 = bfly_in_vector(_mm256_loadu_ps(x + 24), r);
        BFLY_PAIR(v0, v1, r); BFLY_PAIR(v2, v3, r);          /* h = 8 */
        BFLY_PAIR(v0, v2, r); BFLY_PAIR(v1, v3, r);          /* h = 16 */
        _mm256_storeu_ps(x, v0); _mm256_storeu_ps(x + 8, v1);
        _mm256_storeu_ps(x + 16, v2); _mm256_storeu_ps(x + 24, v3);
        return;
    }
    /* d >= 64: stages up to h = 32 on 64-float blocks held in registers (stages only combine
     * elements within aligned groups of 2h, so finishing one block before the next changes no
     * operand), then the larger strides across the row in memory */
    for (size_t i = 0; i < d; i += 64) {
        __m256 v0 = bfly_in_vector(_mm256_loadu_ps(x + i), r), v1 = bfly_in_vector(_mm256_loadu_ps(x + i + 8), r);
        __m256 v2 = bfly_in_vector(_mm256_loadu_ps(x + i + 16), r), v3 = bfly_in_vector(_mm256_loadu_ps(x + i + 24), r);
        __m256 v4 = bfly_in_vector(_mm256_loadu_ps(x + i + 32), r), v5 = bfly_in_vector(_mm256_loadu_ps(x + i + 40), r);
        __m256 v6 = bfly_in_vector(_mm256_loadu_ps(x + i + 48), r), v7 = bfly_in_vector(_mm256_loadu_ps(x + i + 56), r);
        BFLY_PAIR(v0, v1, r); BFLY_PAIR(v2, v3, r); BFLY_PAIR(v4, v5, r); BFLY_PAIR(v6, v7, r); /* h = 8 */
        BFLY_PAIR(v0, v2, r); BFLY_PAIR(v1, v3, r); BFLY_PAIR(v4, v6, r); BFLY_PAIR(v5, v7, r); /* h = 16 */
        BFLY_PAIR(v0, v4, r); BFLY_PAIR(v1, v5, r); BFLY_PAIR(v2, v6, r); BFLY_PAIR(v3, v7, r); /* h = 32 */
        _mm256_storeu_ps(x + i, v0); _mm256_storeu_ps(x + i + 8, v1);
        _mm256_storeu_ps(x + i + 16, v2); _mm256_storeu_ps(x + i + 24, v3);
        _mm256_storeu_ps(x + i + 32, v4); _mm256_storeu_ps(x + i + 40, v5);
        _mm256_storeu_ps(x + i + 48, v6); _mm256_storeu_ps(x + i + 56, v7);
    }
    for (size_t h = 64; h < d; h <<= 1) {
        for (size_t i = 0; i < d; i += 2 * h) {
            for (size_t j = i; j < i + h; j += 8) {
                __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
                BFLY_PAIR(a, b, r);
                _mm256_storeu_ps(x + j, a);
                _mm256_storeu_ps(x + j + h, b);
            }
        }
    }
}

static size_t uq_groups_avx2(const lofp_scheme *s, const float *v, size_t kp, uint8_t *codes,
                             uint8_t *scales)
{
    size_t bad = 0;
    for (size_t g = 0; g < kp / 32; g++) {
        const float *vg = v + g * 32;
        uint8_t *cg = codes + g * 16;
        __m256 x0 = _mm256_loadu_ps(vg), x1 = _mm256_loadu_ps(vg + 8);
        __m256 x2 = _mm256_loadu_ps(vg + 16), x3 = _mm256_loadu_ps(vg + 24);
        uint32_t mx = v_hmax_u32(_mm256_max_epu32(_mm256_max_epu32(v_absbits(x0), v_absbits(x1)),
                                                  _mm256_max_epu32(v_absbits(x2), v_absbits(x3))));
        int finite = mx < 0x7F800000u;
        float s_raw = lofp_bits_f32(mx) * s->c;
        if (!finite || !(s_raw > 0.0f) || !isfinite(s_raw)) {
            bad += !finite;
            scales[g] = 0;
            memset(cg, 0, 16);
            continue;
        }
        int e = kq_uq_exponent(s_raw); /* = floorf((float)log2((double)s_raw) + 0.5f) */
        if (e < -126) e = -126;
        if (e > 127) e = 127;
        scales[g] = (uint8_t)(e + 127);
        const __m256 r = _mm256_set1_ps(kq_e8m0_recip((uint32_t)(e + 127)));
        _mm_storeu_si128((__m128i *)(void *)cg, v_uq_pack32(_mm256_mul_ps(x0, r), _mm256_mul_ps(x1, r),
                                                            _mm256_mul_ps(x2, r), _mm256_mul_ps(x3, r)));
    }
    return bad;
}

static size_t uq_quant_row_avx2(const lofp_scheme *s, const float *x, size_t kp, float global,
                                uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)global;
    (void)base;
    const float *v = x;
    if (s->rotate) {
        if (s->hadamard == LOFP_HADAMARD_DENSE) {
            lofp_hadamard_dense_generic(x, scratch, kp); /* O(d^2) reference form, rarely used */
        } else {
            memcpy(scratch, x, kp * sizeof(float));
            butterfly_avx2(scratch, kp); /* kp is a power of two >= 32 here */
        }
        v = scratch;
    }
    return uq_groups_avx2(s, v, kp, codes, scales);
}

static void uq_dequant_row_avx2(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                                float global, size_t kp, float *out, unsigned flags)
{
    (void)s;
    (void)global;
    const int st = v_stream_ok(flags, out);
    for (size_t g = 0; g < kp / 32; g++) {
        uint8_t b = scales[g];
        const __m256 sc = _mm256_set1_ps(b ? lofp_bits_f32((uint32_t)b << 23) : 0.0f);
        __m128i lo, hi;
        v_unpack_nibbles(_mm_loadu_si128((const __m128i *)(const void *)(codes + g * 16)), &lo, &hi);
        float *o = out + g * 32;
        v_store8(o, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(lo)), sc), st);
        v_store8(o + 8, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), sc), st);
        v_store8(o + 16, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(hi)), sc), st);
        v_store8(o + 24, _mm256_mul_ps(v_e2m1_decode(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), sc), st);
    }
    if (st) _mm_sfence();
}

void lofp_kernels_init_uq_avx2(lofp_kernel_table *t)
{
    t->quant[LOFP_KFAM_UQ] = (lofp_quant_kernels){ "avx2", uq_quant_row_avx2, uq_dequant_row_avx2 };
}

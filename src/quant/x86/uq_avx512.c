/* uq_avx512.c -- UltraQuant row kernels at 512 bits: uq_avx2.c's operations on 16 lanes. The
 * butterfly keeps the reference's stages (ascending stride), pairs and operations: per pair
 * s = a + b, t = a - b, then s * r and t * r. Strides 1, 2, 4 and 8 live inside one zmm: with
 * y = x with lanes j and j^h swapped, the lower lane of a pair gets x + y = a + b (fp addition is
 * commutative) and the upper lane y - x = a - b; strides 16, 32 and 64 pair whole registers of a
 * 128-value block, larger strides run across the row in memory (stages only combine elements
 * within aligned groups of 2h, so finishing one block before the next changes no operand). The
 * per-group scale is the AVX2 kernel's (the reference's double log2 through kq_uq_exponent),
 * computed for 16 groups at a time between the maxima and the encodes; elements are v * 2^-e
 * (exact reciprocal) snapped by the byte-key table lookups (v512_uq_pack64). Dequantize:
 * E2M1 value (one vpermps) times 2^(b - 127), or times 0 for byte 0, as the AVX2 kernel.
 * The dense Hadamard stays the portable reference form (O(d^2), rarely used).
 *
 * Needs AVX-512 F/BW/VL and VBMI (installed by kernels_avx512.c only then). */
#include <math.h>
#include <pthread.h>

#include "simd_avx512.h"
#include "quant/generic_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)

/* The E2M1 count tables of simd_avx512.h: rows 1 (ties to zero) and 2 (ties away) serve the snap. */
static uint8_t g_luts[3][128] __attribute__((aligned(64)));

static void build_luts(void) { v512_e2m1_luts(g_luts); }

/* Stages h = 1, 2, 4, 8 of one zmm, in place: see the file comment. */
static inline __attribute__((always_inline)) __m512 bfly_in_vector16(__m512 v, __m512 r)
{
    __m512 y = _mm512_permute_ps(v, 0xB1); /* h = 1: lanes [1 0 3 2 ...] */
    v = _mm512_mul_ps(_mm512_mask_blend_ps(0xAAAA, _mm512_add_ps(v, y), _mm512_sub_ps(y, v)), r);
    y = _mm512_permute_ps(v, 0x4E); /* h = 2: lanes [2 3 0 1 ...] */
    v = _mm512_mul_ps(_mm512_mask_blend_ps(0xCCCC, _mm512_add_ps(v, y), _mm512_sub_ps(y, v)), r);
    y = _mm512_shuffle_f32x4(v, v, 0xB1); /* h = 4: 128-bit quarters [1 0 3 2] */
    v = _mm512_mul_ps(_mm512_mask_blend_ps(0xF0F0, _mm512_add_ps(v, y), _mm512_sub_ps(y, v)), r);
    y = _mm512_shuffle_f32x4(v, v, 0x4E); /* h = 8: 256-bit halves swapped */
    return _mm512_mul_ps(_mm512_mask_blend_ps(0xFF00, _mm512_add_ps(v, y), _mm512_sub_ps(y, v)), r);
}

/* One pair of a cross-register stage: (a, b) -> ((a + b) r, (a - b) r). */
#define BFLY_PAIR16(a, b, r)                                                                   \
    do {                                                                                       \
        __m512 s_ = _mm512_add_ps(a, b), t_ = _mm512_sub_ps(a, b);                             \
        a = _mm512_mul_ps(s_, r);                                                              \
        b = _mm512_mul_ps(t_, r);                                                              \
    } while (0)

static void butterfly_avx512(float *x, size_t d)
{
    const __m512 r = _mm512_set1_ps(0.70710678118654752f);
    if (d <= 64) { /* d = 32 or 64: two or four registers */
        __m512 v[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
        const size_t n = d / 16;
        for (size_t i = 0; i < n; i++) v[i] = bfly_in_vector16(_mm512_loadu_ps(x + 16 * i), r);
        BFLY_PAIR16(v[0], v[1], r); /* h = 16 */
        if (n == 4) {
            BFLY_PAIR16(v[2], v[3], r);
            BFLY_PAIR16(v[0], v[2], r); BFLY_PAIR16(v[1], v[3], r); /* h = 32 */
        }
        for (size_t i = 0; i < n; i++) _mm512_storeu_ps(x + 16 * i, v[i]);
        return;
    }
    /* d >= 128: stages up to h = 64 on 128-value blocks held in registers */
    for (size_t i = 0; i < d; i += 128) {
        __m512 v[8];
        for (int j = 0; j < 8; j++) v[j] = bfly_in_vector16(_mm512_loadu_ps(x + i + 16 * j), r);
        BFLY_PAIR16(v[0], v[1], r); BFLY_PAIR16(v[2], v[3], r); BFLY_PAIR16(v[4], v[5], r); BFLY_PAIR16(v[6], v[7], r); /* h = 16 */
        BFLY_PAIR16(v[0], v[2], r); BFLY_PAIR16(v[1], v[3], r); BFLY_PAIR16(v[4], v[6], r); BFLY_PAIR16(v[5], v[7], r); /* h = 32 */
        BFLY_PAIR16(v[0], v[4], r); BFLY_PAIR16(v[1], v[5], r); BFLY_PAIR16(v[2], v[6], r); BFLY_PAIR16(v[3], v[7], r); /* h = 64 */
        for (int j = 0; j < 8; j++) _mm512_storeu_ps(x + i + 16 * j, v[j]);
    }
    /* the larger strides two stages per pass over memory (h and 2h on the four values j, j + h,
     * j + 2h, j + 3h of an aligned group of 4h: stage 2h only combines stage-h results of the
     * same group), so the row is loaded and stored half as often; a last odd stage alone */
    size_t h = 128;
    for (; 2 * h < d; h <<= 2) {
        for (size_t i = 0; i < d; i += 4 * h) {
            for (size_t j = i; j < i + h; j += 16) {
                __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + h);
                __m512 c = _mm512_loadu_ps(x + j + 2 * h), e = _mm512_loadu_ps(x + j + 3 * h);
                BFLY_PAIR16(a, b, r); BFLY_PAIR16(c, e, r); /* stage h */
                BFLY_PAIR16(a, c, r); BFLY_PAIR16(b, e, r); /* stage 2h */
                _mm512_storeu_ps(x + j, a);
                _mm512_storeu_ps(x + j + h, b);
                _mm512_storeu_ps(x + j + 2 * h, c);
                _mm512_storeu_ps(x + j + 3 * h, e);
            }
        }
    }
    if (h < d) {
        for (size_t j = 0; j < h; j += 16) { /* h = d / 2: one group */
            __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + h);
            BFLY_PAIR16(a, b, r);
            _mm512_storeu_ps(x + j, a);
            _mm512_storeu_ps(x + j + h, b);
        }
    }
}

/* The group scale from its max |v| bits (uq_avx2.c's rule): writes the byte, returns the
 * reciprocal 2^-e, or 0 for a group whose codes are all zero (scale byte 0: zero or underflowing
 * groups, and non-finite ones, which are also counted in *bad). */
static inline float uq_scale1(const lofp_scheme *s, uint32_t mx, uint8_t *scale, size_t *bad)
{
    int finite = mx < 0x7F800000u;
    float s_raw = lofp_bits_f32(mx) * s->c;
    if (!finite || !(s_raw > 0.0f) || !isfinite(s_raw)) {
        *bad += !finite;
        *scale = 0;
        return 0.0f;
    }
    int e = kq_uq_exponent(s_raw); /* = floorf((float)log2((double)s_raw) + 0.5f) */
    if (e < -126) e = -126;
    if (e > 127) e = 127;
    *scale = (uint8_t)(e + 127);
    return kq_e8m0_recip((uint32_t)(e + 127)); /* 2^-e, never 0 for e <= 127 */
}

/* Codes of two groups of 32 values (64 at vg) given their reciprocal scales (0: all-zero codes). */
static inline __attribute__((always_inline)) void uq_codes64(const float *vg, float r0, float r1, uint8_t *cg)
{
    const __m512 a = _mm512_set1_ps(r0), b = _mm512_set1_ps(r1);
    _mm256_storeu_si256((__m256i *)(void *)cg,
                        v512_uq_pack64(g_luts[v512_lut_index(LOFP_TIES_TO_ZERO)], g_luts[v512_lut_index(LOFP_TIES_AWAY)],
                                       _mm512_mul_ps(_mm512_loadu_ps(vg), a), _mm512_mul_ps(_mm512_loadu_ps(vg + 16), a),
                                       _mm512_mul_ps(_mm512_loadu_ps(vg + 32), b), _mm512_mul_ps(_mm512_loadu_ps(vg + 48), b)));
    if (LOFP_UNLIKELY(r0 == 0.0f)) memset(cg, 0, 16);
    if (LOFP_UNLIKELY(r1 == 0.0f)) memset(cg + 16, 0, 16);
}

/* One group alone (a zero-padded copy of a pair). */
static inline void uq_codes32(const float *vg, float rs, uint8_t *cg)
{
    float t[64] = { 0 };
    uint8_t o[32];
    memcpy(t, vg, 32 * sizeof(float));
    uq_codes64(t, rs, 1.0f, o);
    memcpy(cg, o, 16);
}

static inline __attribute__((always_inline)) __m512i absbits(const float *p)
{
    return _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(p)), V16I(0x7FFFFFFF));
}

/* 16 groups per batch in three passes, as the MX kernels: the 16 maxima by one transpose-reduce,
 * the 16 independent scalar scale rules, then the encodes. One group at a time put the whole
 * chain (horizontal max, scale rule, encode) on the critical path of every group. */
static size_t uq_groups_avx512(const lofp_scheme *s, const float *v, size_t kp, uint8_t *codes, uint8_t *scales)
{
    const size_t ng = kp / 32;
    size_t bad = 0, g = 0;
    for (; g + 16 <= ng; g += 16) {
        const float *vb = v + g * 32;
        __m512i m[16];
        for (int j = 0; j < 16; j++) m[j] = _mm512_max_epu32(absbits(vb + 32 * j), absbits(vb + 32 * j + 16));
        uint32_t mx[16];
        float rs[16];
        _mm512_storeu_si512((void *)mx, v512_reduce16_max_u32(m));
        for (int j = 0; j < 16; j++) rs[j] = uq_scale1(s, mx[j], scales + g + (size_t)j, &bad);
        for (int j = 0; j < 16; j += 2) uq_codes64(vb + 32 * j, rs[j], rs[j + 1], codes + (g + (size_t)j) * 16);
    }
    for (; g < ng; g++) {
        const float *vg = v + g * 32;
        uint32_t mx = (uint32_t)_mm512_reduce_max_epu32(_mm512_max_epu32(absbits(vg), absbits(vg + 16)));
        uq_codes32(vg, uq_scale1(s, mx, scales + g, &bad), codes + g * 16);
    }
    return bad;
}

static size_t uq_quant_row_avx512(const lofp_scheme *s, const float *x, size_t kp, float global, uint64_t base,
                                  uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)global;
    (void)base;
    const float *v = x;
    if (s->rotate) {
        if (s->hadamard == LOFP_HADAMARD_DENSE) {
            lofp_hadamard_dense_generic(x, scratch, kp); /* O(d^2) reference form, rarely used */
        } else {
            memcpy(scratch, x, kp * sizeof(float));
            butterfly_avx512(scratch, kp); /* kp is a power of two >= 32 here */
        }
        v = scratch;
    }
    return uq_groups_avx512(s, v, kp, codes, scales);
}

static void uq_dequant_row_avx512(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales, float global,
                                  size_t kp, float *out, unsigned flags)
{
    (void)s;
    (void)global;
    int st = v_stream_ok(flags, out);
    if (st == 2 && ((uintptr_t)out & 63) == 0) st = 3; /* then every 16-float half-group is aligned */
    /* E2M1 values of the 16 codes (code 8 is -0, as v_e2m1_decode) */
    const __m512 tab = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                      -2.0f, -3.0f, -4.0f, -6.0f);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (size_t g = 0; g < kp / 32; g++) {
        uint8_t b = scales[g];
        const __m512 sc = _mm512_set1_ps(b ? lofp_bits_f32((uint32_t)b << 23) : 0.0f);
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(codes + g * 16));
        __m128i l = _mm_and_si128(v, m4), h = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        float *o = out + g * 32;
        v512_store16(o, _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(l, h)), tab), sc), st);
        v512_store16(o + 16, _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(l, h)), tab), sc),
                     st);
    }
    if (st) _mm_sfence();
}

void lofp_kernels_init_uq_avx512(lofp_kernel_table *t)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_luts);
    t->quant[LOFP_KFAM_UQ] = (lofp_quant_kernels){ "avx512", uq_quant_row_avx512, uq_dequant_row_avx512 };
}

#else
void lofp_kernels_init_uq_avx512(lofp_kernel_table *t) { (void)t; }
#endif

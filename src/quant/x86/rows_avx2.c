/* rows_avx2.c -- tensor-wide helpers, AVX2 + F16C: the fused amax / non-finite scan (integer max
 * of magnitude bits, see generic_rows.c) and dtype <-> fp32 row conversions. F16C converts
 * finite values and Inf exactly as lofp's codecs do (RNE, IEEE overflow); NaN lanes are rewritten
 * to the canonical quiet NaN with the input's sign that lofp_fp16_to_fp32 / lofp_fp32_to_fp16
 * produce, since F16C keeps payload bits instead. */
#include "simd_avx2.h"
#include "quant/generic_kernels.h"

#define CHUNK 256 /* elements between exit tests */

static int scan_f32(const float *x, size_t n, float *amax, size_t *first_bad)
{
    __m256i acc = _mm256_setzero_si256();
    size_t i0 = 0;
    for (; i0 + CHUNK <= n; i0 += CHUNK) {
        __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
        for (size_t i = i0; i < i0 + CHUNK; i += 32) {
            m0 = _mm256_max_epu32(m0, v_absbits(_mm256_loadu_ps(x + i)));
            m1 = _mm256_max_epu32(m1, v_absbits(_mm256_loadu_ps(x + i + 8)));
            m2 = _mm256_max_epu32(m2, v_absbits(_mm256_loadu_ps(x + i + 16)));
            m3 = _mm256_max_epu32(m3, v_absbits(_mm256_loadu_ps(x + i + 24)));
        }
        __m256i m = _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3));
        if (LOFP_UNLIKELY(!_mm256_testz_si256(_mm256_cmpgt_epi32(m, V8I(0x7F7FFFFF)), _mm256_set1_epi32(-1)))) {
            *first_bad = i0 + kq_first_nonfinite_f32(x + i0, CHUNK);
            return 1;
        }
        acc = _mm256_max_epu32(acc, m);
    }
    uint32_t mx = v_hmax_u32(acc);
    for (size_t i = i0; i < n; i++) {
        uint32_t a = lofp_f32_bits(x[i]) & 0x7FFFFFFFu;
        if (a >= 0x7F800000u) { *first_bad = i; return 1; }
        mx = a > mx ? a : mx;
    }
    *amax = lofp_bits_f32(mx);
    return 0;
}

static int scan_u16(lofp_dtype dt, const uint16_t *x, size_t n, float *amax, size_t *first_bad)
{
    const uint16_t inf = dt == LOFP_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
    const __m256i mask = _mm256_set1_epi16(0x7FFF), lim = _mm256_set1_epi16((short)(inf - 1));
    __m256i acc = _mm256_setzero_si256();
    size_t i0 = 0;
    for (; i0 + CHUNK <= n; i0 += CHUNK) {
        __m256i m0 = _mm256_setzero_si256(), m1 = m0;
        for (size_t i = i0; i < i0 + CHUNK; i += 32) {
            m0 = _mm256_max_epu16(m0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i)), mask));
            m1 = _mm256_max_epu16(m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i + 16)), mask));
        }
        __m256i m = _mm256_max_epu16(m0, m1);
        if (LOFP_UNLIKELY(!_mm256_testz_si256(_mm256_cmpgt_epi16(m, lim), _mm256_set1_epi32(-1)))) break;
        acc = _mm256_max_epu16(acc, m);
    }
    /* horizontal max of 16 u16 lanes */
    __m128i a = _mm_max_epu16(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    a = _mm_max_epu16(a, _mm_shuffle_epi32(a, 0x4E));
    a = _mm_max_epu16(a, _mm_shuffle_epi32(a, 0xB1));
    a = _mm_max_epu16(a, _mm_shufflelo_epi16(a, 0xB1));
    uint16_t mx = (uint16_t)_mm_extract_epi16(a, 0);
    for (size_t i = i0; i < n; i++) { /* the tail, or the chunk holding the first non-finite */
        uint16_t h = x[i] & 0x7FFFu;
        if (h >= inf) { *first_bad = i; return 1; }
        mx = h > mx ? h : mx;
    }
    *amax = dt == LOFP_DTYPE_BF16 ? lofp_bits_f32((uint32_t)mx << 16) : lofp_fp16_to_fp32(mx);
    return 0;
}

static int scan_avx2(lofp_dtype dt, const void *x, size_t n, float *amax, size_t *first_bad)
{
    if (dt == LOFP_DTYPE_F32) return scan_f32(x, n, amax, first_bad);
    return scan_u16(dt, x, n, amax, first_bad);
}

static void load_row_avx2(lofp_dtype dt, const void *x, size_t n, float *out)
{
    if (dt == LOFP_DTYPE_F32) { memcpy(out, x, n * sizeof(float)); return; }
    const uint16_t *h = x;
    size_t i = 0;
    if (dt == LOFP_DTYPE_BF16) {
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(h + i)));
            _mm256_storeu_si256((__m256i *)(void *)(out + i), _mm256_slli_epi32(w, 16));
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            __m128i hv = _mm_loadu_si128((const __m128i *)(const void *)(h + i));
            __m256 f = _mm256_cvtph_ps(hv);
            __m256i w = _mm256_cvtepu16_epi32(hv);
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, V8I(0x7FFF)), V8I(0x7C00));
            __m256i canon = _mm256_or_si256(V8I(0x7FC00000), _mm256_slli_epi32(_mm256_and_si256(w, V8I(0x8000)), 16));
            _mm256_storeu_ps(out + i, _mm256_blendv_ps(f, _mm256_castsi256_ps(canon), _mm256_castsi256_ps(nan)));
        }
    }
    if (i < n) lofp_load_row_generic(dt, h + i, n - i, out + i);
}

static void store_row_avx2(lofp_dtype dt, const float *x, size_t n, void *out)
{
    if (dt == LOFP_DTYPE_F32) { memcpy(out, x, n * sizeof(float)); return; }
    uint16_t *h = out;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256i u = v_bits(v);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, V8I(0x7FFFFFFF)), V8I(0x7F800000));
        __m256i r;
        if (dt == LOFP_DTYPE_BF16) {
            /* lofp_fp32_to_bf16: RNE by adding 0x7FFF + lsb; NaN: sign | 0x7FC0 (canonical) */
            __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), V8I(1));
            __m256i rn = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(V8I(0x7FFF), lsb)), 16);
            __m256i qn = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), V8I(0x8000)), V8I(0x7FC0));
            r = _mm256_blendv_epi8(rn, qn, nan);
        } else {
            __m256i f = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            __m256i qn = _mm256_or_si256(V8I(0x7E00), _mm256_and_si256(_mm256_srli_epi32(u, 16), V8I(0x8000)));
            r = _mm256_blendv_epi8(f, qn, nan);
        }
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
        _mm_storeu_si128((__m128i *)(void *)(h + i), _mm256_castsi256_si128(p));
    }
    if (i < n) lofp_store_row_generic(dt, x + i, n - i, h + i);
}

void lofp_kernels_init_rows_avx2(lofp_kernel_table *t)
{
    t->scan = scan_avx2;
    t->load_row = load_row_avx2;
    t->store_row = store_row_avx2;
}

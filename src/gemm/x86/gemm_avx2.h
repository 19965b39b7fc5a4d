/* gemm_avx2.h -- static inline helpers shared by x86/gemm_i8_avx2.c and x86/gemm_f32_avx2.c.
 * Include only from files compiled with -mavx2 -mfma -mf16c. */
#ifndef LOFP_GEMM_AVX2_H
#define LOFP_GEMM_AVX2_H

#include <immintrin.h>
#include <stdlib.h>

#include "gemm/gemm_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Superblocks per on-the-fly repack chunk: 64 * (128 + 16) bytes stay on the stack. */
#define GEMM_X8_CHUNK 64

/* Software prefetch distance of the GEMV kernels. A single core does not reach the DRAM read
 * bandwidth on a stream it computes on between loads (the hardware prefetchers run too short
 * ahead); fetching 4 KiB ahead took the cold 4096^2 GEMV from 1.7 to 1.1 ms on the
 * development machine (BENCHMARKS.md). x8: one stream; rows: one per weight row. */
#define GEMM_PF_BYTES 4096
#define GEMM_PF_ROW_BYTES 1024

/* Prefetches the two cache lines of the x8 superblock GEMM_PF_BYTES ahead of w. */
ALWAYS_INLINE void gx_prefetch_sb(const uint8_t *w)
{
    _mm_prefetch((const char *)w + GEMM_PF_BYTES, _MM_HINT_T0);
    _mm_prefetch((const char *)w + GEMM_PF_BYTES + 64, _MM_HINT_T0);
}

/* 8 E8M0 bytes -> 2^(e-127) as fp32; byte 0 gives 2^-127 through the max with its bit pattern
 * 0x00400000. 0xFF (NaN) would give +Inf: groups holding it are flagged and go generic. */
ALWAYS_INLINE __m256 gx_e8m0x8(const uint8_t *p)
{
    __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    e = _mm256_max_epu32(_mm256_slli_epi32(e, 23), _mm256_set1_epi32(0x00400000));
    return _mm256_castsi256_ps(e);
}

/* 16 UE4M3 bytes -> two vectors of 8 exact fp32: the 7 value bits placed at fp16 bits 13..7
 * make an fp16 worth value * 2^-8, subnormals included; times 256 is exact. 0x7F (NaN) would
 * decode finite: groups holding it are flagged and go generic. */
ALWAYS_INLINE void gx_ue4m3x16(const uint8_t *p, __m256 *lo, __m256 *hi)
{
    __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p));
    w = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7F)), 7);
    const __m256 k = _mm256_set1_ps(256.0f);
    *lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(w)), k);
    *hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(w, 1)), k);
}

ALWAYS_INLINE float gx_hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Stores the 8 lanes of one x8 group for activation row i (cnt <= 8 valid rows), applying the
 * NVFP4 epilogue in double when there is one. */
ALWAYS_INLINE void gx_store8(const gemm_plan *p, size_t i, size_t j, __m256 acc, unsigned cnt)
{
    float *c = p->c + i * p->ldc + j;
    if (p->epi != 1.0) {
        __m256d e = _mm256_set1_pd(p->epi);
        __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(acc)), e));
        __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(acc, 1)), e));
        acc = _mm256_set_m128(hi, lo);
    }
    if (cnt == 8) {
        _mm256_storeu_ps(c, acc);
    } else {
        float t[8];
        _mm256_storeu_ps(t, acc);
        memcpy(c, t, cnt * sizeof(float));
    }
}

/* A run of x8 superblocks of one group: codes (128 bytes per superblock) and scales. MX scales
 * are 8 bytes per scale block of `per` superblocks; NVFP4 16 bytes per superblock (first 16
 * elements' scales of rows 0..7, then the last 16's). */
typedef struct {
    const uint8_t *codes, *scales;
    size_t nsb, per;
} gx_run;

/* Repacks superblocks [b0, b0 + nb) of rows 8g..8g+7 of a rows-layout E2M1 matrix into x8
 * form (one scale entry per superblock: per = 1). Rows past n and elements past padded K are
 * zero. Returns 1 when a scale the SIMD decoders skip (NaN) was copied.
 *
 * Rows-layout byte t of a superblock holds elements 2t (low) and 2t+1 (high); the x8 byte t of
 * a row holds elements t (low) and 16+t (high), i.e. Q = natural[0..15] | natural[16..31] << 4,
 * and chunk c of the group is dword c of Q of each of the 8 rows: a 4x8 dword transpose. */
ALWAYS_INLINE int gx_rows_to_x8(const gemm_plan *p, size_t g, size_t b0, size_t nb, uint8_t *codes,
                                uint8_t *scales, const int nv)
{
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const size_t full = p->kp / 32, ss = nv ? 16 : 8;
    int special = 0;
    for (size_t t = 0; t < nb; t++) {
        size_t b = b0 + t;
        __m128i q[8];
        for (unsigned r = 0; r < 8; r++) {
            size_t j = g * GEMM_X8_ROWS + r;
            if (j >= p->n) { q[r] = _mm_setzero_si128(); continue; }
            const uint8_t *w = p->wcodes + j * p->wrow_bytes + 16 * b;
            __m128i v = b < full ? _mm_loadu_si128((const __m128i *)(const void *)w)
                                 : _mm_loadl_epi64((const __m128i *)(const void *)w);
            __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
            q[r] = _mm_or_si128(_mm_unpacklo_epi8(lo, hi), _mm_slli_epi16(_mm_unpackhi_epi8(lo, hi), 4));
        }
        uint8_t *out = codes + t * GEMM_X8_SB_BYTES;
        for (int h = 0; h < 2; h++) { /* rows 0-3, then 4-7 */
            __m128i t0 = _mm_unpacklo_epi32(q[4 * h], q[4 * h + 1]), t1 = _mm_unpacklo_epi32(q[4 * h + 2], q[4 * h + 3]);
            __m128i t2 = _mm_unpackhi_epi32(q[4 * h], q[4 * h + 1]), t3 = _mm_unpackhi_epi32(q[4 * h + 2], q[4 * h + 3]);
            _mm_storeu_si128((__m128i *)(void *)(out + 0 + 16 * h), _mm_unpacklo_epi64(t0, t1));
            _mm_storeu_si128((__m128i *)(void *)(out + 32 + 16 * h), _mm_unpackhi_epi64(t0, t1));
            _mm_storeu_si128((__m128i *)(void *)(out + 64 + 16 * h), _mm_unpacklo_epi64(t2, t3));
            _mm_storeu_si128((__m128i *)(void *)(out + 96 + 16 * h), _mm_unpackhi_epi64(t2, t3));
        }
        uint8_t *so = scales + t * ss;
        size_t sj = nv ? 0 : 32 * b / p->wblock;
        for (unsigned r = 0; r < 8; r++) {
            size_t j = g * GEMM_X8_ROWS + r;
            const uint8_t *sr = p->wscales + j * p->wnsc;
            if (nv) {
                uint8_t lo = j < p->n ? sr[2 * b] : 0, hi = j < p->n && b < full ? sr[2 * b + 1] : 0;
                so[r] = lo;
                so[8 + r] = hi;
                special |= (lo & 0x7F) == 0x7F || (hi & 0x7F) == 0x7F;
            } else {
                uint8_t s = j < p->n ? sr[sj] : 0;
                so[r] = s;
                special |= s == 0xFF;
            }
        }
    }
    return special;
}

#endif

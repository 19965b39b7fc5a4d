/* attention_avx512.c -- the AVX-512 (F, BW, VL) variant of the split-K attention tile kernel,
 * compiled with the AVX-512 flags CMakeLists.txt gives every x86 _avx512.c file and reached only when
 * lofp_cpu_features() reports AVX512F, AVX512BW and AVX512VL. The task driver and the helpers it
 * shares with the AVX2 kernel are in attention_x86.h / attention_avx2.c. */
#if defined(__x86_64__) || defined(__i386__)
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv/x86/attention_x86.h"

/* ---- AVX-512 helpers --------------------------------------------------------------------------
 * The same tile algorithm with 512-bit registers, for fp32 / bf16 caches and UltraQuant at
 * D = 64 (D >= 128 has its own kernels at the end of this section). UltraQuant decodes two groups
 * (32 code bytes) per step: the bytes are broadcast to both 256-bit halves, the low half keeps the low nibbles,
 * the high half the high ones; each 128-bit lane then holds one group's evens or odds, so the
 * group scale is a blend of two broadcasts. 32 registers allow 4 rows x 4 tokens of score
 * accumulators and 4 rows x 64 values of P.V accumulators next to a decoded block. Needs D >= 64.
 * Reached only when lofp_cpu_features() has AVX512F, AVX512BW and AVX512VL. */

/* Position p of a decoded 64-element block (two groups) holds element perm64(p). */
static int perm64(int p)
{
    int v = p / 16, lane = (p % 16) / 4, i = p % 4;
    return 32 * (lane & 1) + (lane >> 1) + 16 * (v / 2) + 2 * (v % 2) + 4 * i;
}

static void decode_all512(const lofp_attn_geom *G, const uint8_t *const *tokp, size_t tn, size_t h0,
                          size_t nh, float *Kf, float *Vf)
{
    const size_t D = G->D, T = G->tile;
    for (size_t t = 0; t < tn; t++)
        for (size_t hk = 0; hk < nh; hk++) {
            const uint8_t *s = tokp[t] + (h0 + hk) * G->slot;
            float *kd = Kf + (hk * T + t) * D, *vd = Vf + (hk * T + t) * D;
            if (G->format == LOFP_KV_BF16) {
                for (size_t d = 0; d < D; d += 16) {
                    __m512i wk = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(s + G->k_off + 2 * d)));
                    __m512i wv = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(s + G->v_off + 2 * d)));
                    _mm512_store_ps(kd + d, _mm512_castsi512_ps(_mm512_slli_epi32(wk, 16)));
                    _mm512_store_ps(vd + d, _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16)));
                }
            } else {
                for (size_t d = 0; d < D; d += 16) {
                    _mm512_store_ps(kd + d, _mm512_loadu_ps((const float *)(const void *)(s + G->k_off) + d));
                    _mm512_store_ps(vd + d, _mm512_loadu_ps((const float *)(const void *)(s + G->v_off) + d));
                }
            }
        }
}

static inline __m256 fold512(__m512 a)
{
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

static void scores512(const float *qb, size_t R, const float *Kf, size_t D, size_t T, size_t tn,
                      float scale, float *P)
{
    const __m256 vs = _mm256_set1_ps(scale);
    const size_t t4 = (tn + 3) & ~(size_t)3, t8 = (tn + 7) & ~(size_t)7;
    size_t r = 0;
    for (; r + 2 <= R; r += 2) {
        const float *q0 = qb + r * D, *q1 = q0 + D;
        for (size_t t = 0; t < t4; t += 4) {
            const float *k0 = Kf + t * D, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
            __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            for (size_t d = 0; d < D; d += 16) {
                __m512 x0 = _mm512_load_ps(q0 + d), x1 = _mm512_load_ps(q1 + d), y;
                y = _mm512_load_ps(k0 + d); a00 = _mm512_fmadd_ps(x0, y, a00); a10 = _mm512_fmadd_ps(x1, y, a10);
                y = _mm512_load_ps(k1 + d); a01 = _mm512_fmadd_ps(x0, y, a01); a11 = _mm512_fmadd_ps(x1, y, a11);
                y = _mm512_load_ps(k2 + d); a02 = _mm512_fmadd_ps(x0, y, a02); a12 = _mm512_fmadd_ps(x1, y, a12);
                y = _mm512_load_ps(k3 + d); a03 = _mm512_fmadd_ps(x0, y, a03); a13 = _mm512_fmadd_ps(x1, y, a13);
            }
            __m256 s = _mm256_mul_ps(hsum8x(fold512(a00), fold512(a01), fold512(a02), fold512(a03), fold512(a10),
                                            fold512(a11), fold512(a12), fold512(a13)), vs);
            _mm_storeu_ps(P + r * T + t, _mm256_castps256_ps128(s));
            _mm_storeu_ps(P + (r + 1) * T + t, _mm256_extractf128_ps(s, 1));
        }
    }
    if (r < R) {
        const float *q0 = qb + r * D;
        for (size_t t = 0; t < t8; t += 8) {
            const float *k = Kf + t * D;
            __m512 a[8];
            for (int j = 0; j < 8; j++) a[j] = _mm512_setzero_ps();
            for (size_t d = 0; d < D; d += 16) {
                __m512 x0 = _mm512_load_ps(q0 + d);
                for (int j = 0; j < 8; j++) a[j] = _mm512_fmadd_ps(x0, _mm512_load_ps(k + j * D + d), a[j]);
            }
            _mm256_storeu_ps(P + r * T + t, _mm256_mul_ps(hsum8x(fold512(a[0]), fold512(a[1]), fold512(a[2]), fold512(a[3]),
                                                                 fold512(a[4]), fold512(a[5]), fold512(a[6]), fold512(a[7])), vs));
        }
    }
}

static inline __attribute__((always_inline)) void pv_block512(const int NR, float *const *acc,
                                                             const float *P, size_t T,
                                                             const float *Vf, size_t D, size_t tn)
{
    for (size_t d = 0; d < D; d += 32) {
        __m512 a0[4], a1[4];
        for (int r = 0; r < NR; r++) {
            a0[r] = _mm512_loadu_ps(acc[r] + d);
            a1[r] = _mm512_loadu_ps(acc[r] + d + 16);
        }
        for (size_t t = 0; t < tn; t++) {
            __m512 v0 = _mm512_load_ps(Vf + t * D + d), v1 = _mm512_load_ps(Vf + t * D + d + 16);
            for (int r = 0; r < NR; r++) {
                __m512 p = _mm512_set1_ps(P[r * T + t]);
                a0[r] = _mm512_fmadd_ps(p, v0, a0[r]);
                a1[r] = _mm512_fmadd_ps(p, v1, a1[r]);
            }
        }
        for (int r = 0; r < NR; r++) {
            _mm512_storeu_ps(acc[r] + d, a0[r]);
            _mm512_storeu_ps(acc[r] + d + 16, a1[r]);
        }
    }
}

static void pv512(float *const *acc, size_t R, const float *P, size_t T, const float *Vf, size_t D,
                  size_t tn)
{
    for (size_t r = 0; r < R; r += 4) {
        size_t nr = R - r < 4 ? R - r : 4;
        switch (nr) {
        case 4: pv_block512(4, acc + r, P + r * T, T, Vf, D, tn); break;
        case 3: pv_block512(3, acc + r, P + r * T, T, Vf, D, tn); break;
        case 2: pv_block512(2, acc + r, P + r * T, T, Vf, D, tn); break;
        default: pv_block512(1, acc + r, P + r * T, T, Vf, D, tn); break;
        }
    }
}

/* Two groups (64 values) of UltraQuant codes at c, scales sc[0..1], decoded and scaled, in perm64
 * order. */
#define UQ512_CONSTS                                                                                 \
    const __m512i lutlo = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, (char)0x80, (char)0xC0, 0, 0x40, \
        (char)0x80, (char)0xC0, 0, 0, (char)0x80, (char)0xC0, 0, 0x40, (char)0x80, (char)0xC0));     \
    const __m512i luthi = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, \
        0x40, (char)0x80, (char)0xBF, (char)0xBF, (char)0xBF, (char)0xC0, (char)0xC0, (char)0xC0,    \
        (char)0xC0));                                                                                \
    const __m512i m0f = _mm512_set1_epi8(0x0F), hiw = _mm512_set1_epi32((int)0xFFFF0000u);          \
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4)

#define UQ512_DECODE(c, sc, slut, f0, f1, f2, f3)                                                    \
    do {                                                                                             \
        __m512i b_ = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(c))); \
        __m512i n_ = _mm512_and_si512(_mm512_srlv_epi32(b_, sh), m0f);                               \
        __m512i lo_ = _mm512_shuffle_epi8(lutlo, n_), hi_ = _mm512_shuffle_epi8(luthi, n_);          \
        __m512i w0_ = _mm512_unpacklo_epi8(lo_, hi_), w1_ = _mm512_unpackhi_epi8(lo_, hi_);          \
        __m512 s_ = _mm512_mask_blend_ps((__mmask16)0xF0F0, _mm512_set1_ps((slut)[(sc)[0]]),          \
                                         _mm512_set1_ps((slut)[(sc)[1]]));                            \
        f0 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w0_, 16)), s_);                     \
        f1 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(w0_, hiw)), s_);                     \
        f2 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w1_, 16)), s_);                     \
        f3 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(w1_, hiw)), s_);                     \
    } while (0)

/* Scores of NR rows (1, 2 or 4) x 4 tokens per step, K decoded once per token and row block. */
static inline __attribute__((always_inline)) void uq_scores_block(const int NR, const uint8_t *const *sp,
                                                                 const lofp_attn_geom *G, size_t t4,
                                                                 const float *q, const float *slut,
                                                                 float *P, pfq_t *pf)
{
    UQ512_CONSTS;
    const size_t D = G->D, T = G->tile;
    const __m256 vs = _mm256_set1_ps(G->scale);
    for (size_t t = 0; t < t4; t += 4) {
        __m512 a[4][4];
        pf_one(pf);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) a[i][j] = _mm512_setzero_ps();
        for (size_t pr = 0; pr < D / 64; pr++) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const uint8_t *s = sp[t + j];
                __m512 k0, k1, k2, k3;
                UQ512_DECODE(s + G->k_off + 32 * pr, s + G->ks_off + 2 * pr, slut, k0, k1, k2, k3);
#pragma GCC unroll 4
                for (int i = 0; i < NR; i++) {
                    const float *qi = q + i * D + 64 * pr;
                    a[i][j] = _mm512_fmadd_ps(_mm512_load_ps(qi), k0, a[i][j]);
                    a[i][j] = _mm512_fmadd_ps(_mm512_load_ps(qi + 16), k1, a[i][j]);
                    a[i][j] = _mm512_fmadd_ps(_mm512_load_ps(qi + 32), k2, a[i][j]);
                    a[i][j] = _mm512_fmadd_ps(_mm512_load_ps(qi + 48), k3, a[i][j]);
                }
            }
        }
#pragma GCC unroll 2
        for (int i = 0; i < NR; i += 2) {
            __m256 z = _mm256_setzero_ps();
            __m256 s = _mm256_mul_ps(hsum8x(fold512(a[i][0]), fold512(a[i][1]), fold512(a[i][2]), fold512(a[i][3]),
                                            i + 1 < NR ? fold512(a[i + 1][0]) : z, i + 1 < NR ? fold512(a[i + 1][1]) : z,
                                            i + 1 < NR ? fold512(a[i + 1][2]) : z, i + 1 < NR ? fold512(a[i + 1][3]) : z), vs);
            _mm_storeu_ps(P + i * T + t, _mm256_castps256_ps128(s));
            if (i + 1 < NR) _mm_storeu_ps(P + (i + 1) * T + t, _mm256_extractf128_ps(s, 1));
        }
    }
}

static void uq_scores512(const uint8_t *const *sp, const lofp_attn_geom *G, size_t tn,
                         const float *qb, size_t R, const float *slut, float *P, pfq_t *pf)
{
    const size_t D = G->D, T = G->tile, t4 = (tn + 3) & ~(size_t)3;
    size_t r = 0;
    for (; r + 4 <= R; r += 4) uq_scores_block(4, sp, G, t4, qb + r * D, slut, P + r * T, pf);
    if (R - r >= 2) { uq_scores_block(2, sp, G, t4, qb + r * D, slut, P + r * T, pf); r += 2; }
    if (r < R) uq_scores_block(1, sp, G, t4, qb + r * D, slut, P + r * T, pf);
}

/* P.V for NR (1..4) rows: V decoded once per token, pair of groups and row block. */
static inline __attribute__((always_inline)) void uq_pv_block(const int NR, const uint8_t *const *sp,
                                                             const lofp_attn_geom *G, size_t tn,
                                                             float *const *acc, const float *P,
                                                             const float *slut, pfq_t *pf)
{
    UQ512_CONSTS;
    const size_t D = G->D, T = G->tile;
    for (size_t pr = 0; pr < D / 64; pr++) {
        __m512 a[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) a[i][k] = _mm512_loadu_ps(acc[i] + 64 * pr + 16 * k);
        for (size_t t = 0; t < tn; t++) {
            const uint8_t *s = sp[t];
            __m512 v0, v1, v2, v3;
            pf_one(pf);
            UQ512_DECODE(s + G->v_off + 32 * pr, s + G->vs_off + 2 * pr, slut, v0, v1, v2, v3);
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) {
                __m512 p = _mm512_set1_ps(P[i * T + t]);
                a[i][0] = _mm512_fmadd_ps(p, v0, a[i][0]);
                a[i][1] = _mm512_fmadd_ps(p, v1, a[i][1]);
                a[i][2] = _mm512_fmadd_ps(p, v2, a[i][2]);
                a[i][3] = _mm512_fmadd_ps(p, v3, a[i][3]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) _mm512_storeu_ps(acc[i] + 64 * pr + 16 * k, a[i][k]);
    }
}

static void uq_pv512(const uint8_t *const *sp, const lofp_attn_geom *G, size_t tn, float *const *acc,
                     size_t R, const float *P, const float *slut, pfq_t *pf)
{
    const size_t T = G->tile;
    for (size_t r = 0; r < R; r += 4) {
        size_t nr = R - r < 4 ? R - r : 4;
        switch (nr) {
        case 4: uq_pv_block(4, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        case 3: uq_pv_block(3, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        case 2: uq_pv_block(2, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        default: uq_pv_block(1, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        }
    }
}


/* ---- AVX-512 UltraQuant kernels for D >= 128 ---------------------------------------------------
 * 512-bit work issues on two ports here (p0, p5; shuffles on p5 only), so every decode, shuffle or
 * multiply takes an FMA slot. These kernels spend as few as possible per value:
 *
 * - Scores, 16 tokens per step with one token per lane (no horizontal sums): the 64 code bytes of
 *   a K chunk (128 elements, 4 groups) of 16 tokens are transposed as a 16 x 16 dword matrix, so
 *   vector w holds dword w (elements 8w..8w+7) of every token. A right shift by 4b brings element
 *   8w + b to the low nibble, and vpermps, which reads only the low 4 bits of each index, looks up
 *   its E2M1 value: 2 instructions per 16 values, unscaled. Each decoded vector feeds one FMA per
 *   row with q[row][8w + b] broadcast from memory. The group scale is a power of two, so it
 *   factors out of the group's partial sum: after the 32 elements of group q, one FMA per row
 *   adds partial * 2^(e - 127) (byte q of each token's scale dword moved to bits 23..30 by a
 *   vpshufb and a shift; byte 0 gives 0).
 * - Softmax on rows of 16 tokens per vector.
 * - P.V: each V group's 16 code bytes are widened to dwords (vpmovzxbd); the low nibble gives the
 *   even elements, a shift by 4 the odd ones, each through one vpermps. V's group scale is folded
 *   into the probability, P'[row][group][t] = p * 2^(e - 127) (exact), 16 tokens per multiply,
 *   and the FMAs broadcast P' from memory. The accumulators are in the order position 64h + 16k
 *   + w = element 64h + 32(k >> 1) + 2w + (k & 1), restored once per task.
 *
 * Rows go in blocks of 4 (one GQA group of 4); other counts are padded with zero rows that write
 * to dummy records. Tiles are 64 tokens. */

#define UQT_TILE 64u
/* vpshufb control moving byte 0 of each dword to its byte 3, zeros elsewhere; adding g << 24
 * picks byte g instead */
#define UQT_CTL0 _mm512_set_epi32(0x0C808080, 0x08808080, 0x04808080, 0x00808080, 0x0C808080, 0x08808080, \
                                  0x04808080, 0x00808080, 0x0C808080, 0x08808080, 0x04808080, 0x00808080, \
                                  0x0C808080, 0x08808080, 0x04808080, 0x00808080)

static inline __m512 exp512(__m512 x)
{
    /* exp256's polynomial at 512 bits (the same constants and steps: <= 2 ulp; -Inf and
     * arguments at or below -88.376 give exactly 0) */
    x = _mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f));
    x = _mm512_max_ps(x, _mm512_set1_ps(-88.3762626647949f));
    __m512 fx = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f));
    fx = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
    __m512 z = _mm512_mul_ps(x, x);
    y = _mm512_fmadd_ps(y, z, x);
    y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
    __m512i n = _mm512_cvttps_epi32(fx);
    n = _mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(n));
}

/* 16 x 16 dword transpose: y[w] lane j = x[j] lane w. */
static inline void transpose16(const __m512i *x, __m512i *y)
{
    __m512i a[16], b[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_epi32(x[i], x[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(x[i], x[i + 1]);
    }
    /* a[2m] lane (L, 0..3) = x[2m][4L], x[2m+1][4L], x[2m][4L+1], x[2m+1][4L+1] */
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
        b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    /* b[4m + i] lane (L, jj) = x[4m + jj][4L + i] */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512i c0 = _mm512_shuffle_i32x4(b[i], b[4 + i], 0x44);      /* L0 L1 of m=0 | L0 L1 of m=1 */
        __m512i c1 = _mm512_shuffle_i32x4(b[i], b[4 + i], 0xEE);      /* L2 L3 | L2 L3 */
        __m512i c2 = _mm512_shuffle_i32x4(b[8 + i], b[12 + i], 0x44);
        __m512i c3 = _mm512_shuffle_i32x4(b[8 + i], b[12 + i], 0xEE);
        y[i] = _mm512_shuffle_i32x4(c0, c2, 0x88);      /* L0 of m = 0,1,2,3 */
        y[4 + i] = _mm512_shuffle_i32x4(c0, c2, 0xDD);  /* L1 */
        y[8 + i] = _mm512_shuffle_i32x4(c1, c3, 0x88);  /* L2 */
        y[12 + i] = _mm512_shuffle_i32x4(c1, c3, 0xDD); /* L3 */
    }
}

/* Scores of 4 rows (q: [4][D], natural order) x tokens [0, t16) into P[r][UQT_TILE], times
 * scale: 16 tokens per step, one token per lane, so no horizontal sums. */
static void uqt_scores(const uint8_t *const *tp, size_t hoff, const lofp_attn_geom *G, size_t t16,
                       const float *q, float *P, pfq_t *pf, unsigned nb)
{
    const size_t D = G->D, nc = D / 128;
    const __m512 lut = _mm512_loadu_ps(lofp_e2m1_values), vs = _mm512_set1_ps(G->scale);
    /* vpshufb control: byte g of each dword to its byte 3, zeros elsewhere (g added per group) */
    const __m512i ctl0 = UQT_CTL0;
    __m512i y[16];
    _Alignas(64) uint32_t yb[256]; /* the transposed codes: 16 vectors */
    for (size_t t = 0; t < t16; t += 16) {
        __m512 s[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
        for (size_t c = 0; c < nc; c++) {
            __m512i x[16];
            uint32_t sb[16];
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) {
                const uint8_t *sl = tp[t + (size_t)j] + hoff;
                x[j] = _mm512_loadu_si512((const void *)(sl + G->k_off + 64 * c));
                memcpy(&sb[j], sl + G->ks_off + 4 * c, 4);
            }
            transpose16(x, y);
            for (int w = 0; w < 16; w++) _mm512_store_si512((void *)(yb + 16 * w), y[w]);
            const __m512i S = _mm512_loadu_si512((const void *)sb);
            const float *qc = q + 128 * c;
#pragma GCC unroll 1
            for (int g = 0; g < 4; g++) {
                for (unsigned u = 0; u < nb; u++) pf_one(pf);
                /* 16 independent FMA chains: 2 FMA ports x 4 cycles latency x 2 */
                __m512 a[4][4];
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    const int w = 4 * g + i;
                    const __m512i yw = _mm512_load_si512((const void *)(yb + 16 * w));
#pragma GCC unroll 8
                    for (int b = 0; b < 8; b++) {
                        const __m512 k = _mm512_permutexvar_ps(b ? _mm512_srli_epi32(yw, (unsigned)(4 * b)) : yw, lut);
#pragma GCC unroll 4
                        for (int r = 0; r < 4; r++) {
                            const __m512 qv = _mm512_set1_ps(qc[(size_t)r * D + 8 * (size_t)w + (size_t)b]);
                            /* the first product of each chain is a multiply, not an FMA on zero */
                            a[r][b & 3] = i == 0 && b < 4 ? _mm512_mul_ps(qv, k) : _mm512_fmadd_ps(qv, k, a[r][b & 3]);
                        }
                    }
                }
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) a[r][0] = _mm512_add_ps(_mm512_add_ps(a[r][0], a[r][2]), _mm512_add_ps(a[r][1], a[r][3]));
                /* byte g of each token's scale dword to bits 23..30: 2^(e - 127), byte 0 -> 0 */
                const __m512i ctl = _mm512_add_epi32(ctl0, _mm512_set1_epi32((int)((uint32_t)g << 24)));
                const __m512 sc = _mm512_castsi512_ps(_mm512_srli_epi32(_mm512_shuffle_epi8(S, ctl), 1));
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) s[r] = _mm512_fmadd_ps(a[r][0], sc, s[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) _mm512_store_ps(P + (size_t)r * UQT_TILE + t, _mm512_mul_ps(s[r], vs));
    }
}

static void uqt_pv(const uint8_t *const *tp, size_t hoff, const lofp_attn_geom *G, size_t tn,
                   float *const *acc, const float *alpha, const float *Pp, pfq_t *pf)
{
    const size_t D = G->D, ng = D / 32;
    const __m512 lut = _mm512_loadu_ps(lofp_e2m1_values);
    for (size_t h = 0; h < D / 64; h++) {
        __m512 a[4][4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const __m512 al = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) a[r][k] = _mm512_mul_ps(_mm512_loadu_ps(acc[r] + 64 * h + 16 * k), al);
        }
        const float *pp0[4], *pp1[4];
        for (int r = 0; r < 4; r++) {
            pp0[r] = Pp + ((size_t)r * ng + 2 * h) * UQT_TILE;
            pp1[r] = pp0[r] + UQT_TILE;
        }
        for (size_t t = 0; t < tn; t++) {
            const uint8_t *c = tp[t] + hoff + G->v_off + 32 * h;
            if ((t & 1) == 0) pf_one(pf);
            const __m512i c0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)c));
            const __m512i c1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(c + 16)));
            const __m512 v0 = _mm512_permutexvar_ps(c0, lut), v1 = _mm512_permutexvar_ps(_mm512_srli_epi32(c0, 4), lut);
            const __m512 v2 = _mm512_permutexvar_ps(c1, lut), v3 = _mm512_permutexvar_ps(_mm512_srli_epi32(c1, 4), lut);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const __m512 p0 = _mm512_set1_ps(pp0[r][t]), p1 = _mm512_set1_ps(pp1[r][t]);
                a[r][0] = _mm512_fmadd_ps(p0, v0, a[r][0]);
                a[r][1] = _mm512_fmadd_ps(p0, v1, a[r][1]);
                a[r][2] = _mm512_fmadd_ps(p1, v2, a[r][2]);
                a[r][3] = _mm512_fmadd_ps(p1, v3, a[r][3]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) _mm512_storeu_ps(acc[r] + 64 * h + 16 * k, a[r][k]);
    }
}

static void run_task_uq512(const lofp_attn_geom *G, const lofp_attn_task *t, void *raw)
{
    const size_t D = G->D, TT = UQT_TILE, g = G->g, Hq = G->Hq, ng = D / 32;
    const size_t R = (size_t)t->qn * g, Rp = (R + 3) & ~(size_t)3;
    const size_t nh = t->h1 - t->h0;
    scratch_t s;
    scratch_split(G, raw, R, &s);
    /* the fp32 tile area is free here: P' [4][ng][TT] and 4 dummy records */
    float *Pp = s.Kf, *dummy = Pp + TT * ng * 4;
    const __m512i ctl0 = UQT_CTL0;
    memset(dummy, 0, 4 * (D + 16) * sizeof(float));

    for (size_t hk = 0; hk < nh; hk++)
        for (size_t r = 0; r < Rp; r++) {
            float *dst = s.qb + (hk * Rp + r) * D;
            if (r >= R) { memset(dst, 0, D * sizeof(float)); continue; }
            size_t i = r / g, h = (t->h0 + hk) * g + r % g;
            memcpy(dst, t->q + i * t->q_tok_stride + h * D, D * sizeof(float));
            float *rec = t->part + (i * Hq + h) * t->part_stride;
            memset(rec, 0, D * sizeof(float));
            rec[D] = -INFINITY;
            rec[D + 1] = 0.0f;
        }

    size_t maxlim = t->start;
    for (uint32_t i = 0; i < t->qn; i++) {
        size_t l = t->limit[i] < t->end ? t->limit[i] : t->end;
        if (l > maxlim) maxlim = l;
    }

    for (size_t ts = t->start; ts < maxlim; ts += TT) {
        const size_t tn = maxlim - ts < TT ? maxlim - ts : TT, t16 = (tn + 15) & ~(size_t)15;
        token_ptrs(G, t->block_table, ts, tn, s.tokp);
        for (size_t j = tn; j < t16; j++) s.tokp[j] = s.tokp[0]; /* any real slot: masked below */
        const size_t tn_next = ts + TT >= maxlim ? 0 : (maxlim - ts - TT < TT ? maxlim - ts - TT : TT);
        pfq_t pf;
        pf.rows = tn_next;
        pf.rowb = nh * G->slot;
        pf.i = pf.o = 0;
        if (pf.rows) {
            token_ptrs(G, t->block_table, ts + TT, tn_next, s.sp); /* borrowed for a moment */
            for (size_t j = 0; j < tn_next; j++) pf.row[j] = (const char *)s.sp[j] + t->h0 * G->slot;
        } else if (t->next_bt && t->next_end > t->next_start) {
            /* the last tile: the next work item's first tile instead */
            const size_t n = t->next_end - t->next_start < TT ? t->next_end - t->next_start : TT;
            token_ptrs(G, t->next_bt, t->next_start, n, s.sp);
            for (size_t j = 0; j < n; j++) pf.row[j] = (const char *)s.sp[j] + t->next_h0 * G->slot;
            pf.rows = n;
            pf.rowb = (t->next_h1 - t->next_h0) * G->slot;
        }
        /* The next tile's lines, spread evenly over this tile's work so that the requests keep
         * flowing at the rate the compute allows instead of bursting (full line-fill buffers stall
         * the loads): one line every other token of each P.V pass, the rest of each head's share
         * nb lines per score step (16 tokens x 32 elements). */
        const size_t share = (pf.rows * pf.rowb / 64 + nh - 1) / nh, steps = t16 / 16 * (D / 32);
        const size_t in_pv = tn / 2 * (D / 64); /* every other token of each P.V pass */
        const unsigned nb = (unsigned)((share > in_pv ? share - in_pv + steps - 1 : 0) / steps);
        for (size_t hk = 0; hk < nh; hk++) {
            const size_t hoff = (t->h0 + hk) * G->slot;
            for (size_t rb = 0; rb < Rp; rb += 4) {
                float *P = s.P + rb * TT;
                uqt_scores(s.tokp, hoff, G, t16, s.qb + (hk * Rp + rb) * D, P, &pf, nb);
                float *rec[4], al[4], dm[4] = { 0, 0, 0, 0 }, ls[4] = { 0, 0, 0, 0 };
                for (int r = 0; r < 4; r++) {
                    size_t row = rb + (size_t)r, vis = 0;
                    float *Pr = P + (size_t)r * TT;
                    if (row < R) {
                        size_t i = row / g, h = (t->h0 + hk) * g + row % g;
                        rec[r] = t->part + (i * Hq + h) * t->part_stride;
                        vis = t->limit[i] <= ts ? 0 : t->limit[i] - ts;
                        if (vis > tn) vis = tn;
                    } else {
                        rec[r] = dummy + (size_t)r * (D + 16);
                    }
                    if (vis == 0) {
                        for (size_t j = 0; j < t16; j += 16) _mm512_store_ps(Pr + j, _mm512_setzero_ps());
                        continue;
                    }
                    __m512 mx = _mm512_set1_ps(-INFINITY);
                    for (size_t j = 0; j < t16; j += 16) {
                        __mmask16 in = vis >= j + 16 ? (__mmask16)0xFFFF : vis <= j ? (__mmask16)0 : (__mmask16)((1u << (vis - j)) - 1);
                        __m512 x = _mm512_mask_blend_ps(in, _mm512_set1_ps(-INFINITY), _mm512_load_ps(Pr + j));
                        _mm512_store_ps(Pr + j, x);
                        mx = _mm512_max_ps(mx, x);
                    }
                    float mt = _mm512_reduce_max_ps(mx), m_old = rec[r][D], m_new = m_old > mt ? m_old : mt;
                    dm[r] = m_old - m_new; /* alpha = exp(dm), -Inf - finite gives 0 below */
                    const __m512 vm = _mm512_set1_ps(m_new);
                    __m512 sum = _mm512_setzero_ps();
                    for (size_t j = 0; j < t16; j += 16) {
                        __m512 e = exp512(_mm512_sub_ps(_mm512_load_ps(Pr + j), vm));
                        _mm512_store_ps(Pr + j, e);
                        sum = _mm512_add_ps(sum, e);
                    }
                    ls[r] = _mm512_reduce_add_ps(sum);
                    rec[r][D] = m_new;
                }
                /* the 4 rescale factors in one vector exp (rows without visible keys: dm = 0) */
                _mm_storeu_ps(al, _mm512_castps512_ps128(exp512(_mm512_zextps128_ps512(_mm_loadu_ps(dm)))));
                for (int r = 0; r < 4; r++) rec[r][D + 1] = rec[r][D + 1] * al[r] + ls[r];
                /* P'[r][group][t] = p * 2^(e - 127), 16 tokens per vector */
                for (size_t j = 0; j < tn; j += 16) {
                    for (size_t c = 0; c < ng; c += 4) {
                        uint32_t sb[16];
                        for (int u = 0; u < 16; u++) memcpy(&sb[u], s.tokp[j + (size_t)u] + hoff + G->vs_off + c, 4);
                        const __m512i S = _mm512_loadu_si512((const void *)sb);
#pragma GCC unroll 4
                        for (int gg = 0; gg < 4; gg++) {
                            const __m512 sc = _mm512_castsi512_ps(_mm512_srli_epi32(
                                _mm512_shuffle_epi8(S, _mm512_add_epi32(ctl0, _mm512_set1_epi32((int)((uint32_t)gg << 24)))), 1));
#pragma GCC unroll 4
                            for (int r = 0; r < 4; r++)
                                _mm512_store_ps(Pp + ((size_t)r * ng + c + (size_t)gg) * TT + j,
                                                _mm512_mul_ps(_mm512_load_ps(P + (size_t)r * TT + j), sc));
                        }
                    }
                }
                uqt_pv(s.tokp, hoff, G, tn, rec, al, Pp, &pf);
            }
        }
    }
    /* accumulators back to the natural order: element 32a + 2w + b sits at 16(2a + b) + w */
    const __m512i i0 = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i i1 = _mm512_add_epi32(i0, _mm512_set1_epi32(8));
    for (size_t hk = 0; hk < nh; hk++)
        for (size_t r = 0; r < R; r++) {
            size_t i = r / g, h = (t->h0 + hk) * g + r % g;
            float *rec = t->part + (i * Hq + h) * t->part_stride;
            for (size_t b = 0; b < D; b += 32) {
                const __m512 ev = _mm512_loadu_ps(rec + b), od = _mm512_loadu_ps(rec + b + 16);
                _mm512_storeu_ps(rec + b, _mm512_permutex2var_ps(ev, i0, od));
                _mm512_storeu_ps(rec + b + 16, _mm512_permutex2var_ps(ev, i1, od));
            }
        }
}

/* lofp_attn_prep_q with the rotation 16 outputs per vector: out[i] = sum over j in order of
 * x[j] * H[i][j], a multiply then an add per step (the build never contracts them into an FMA),
 * so every output is the same sequential fp32 sum as the portable code's, bit for bit. H is
 * symmetric, so the 16 H[i][j] of one j are a contiguous piece of row j. */
size_t lofp_attn_prep_q_avx512(const float *x, size_t nr, uint32_t D, const float *hs, float *dst)
{
    size_t sat = 0;
    float acc[LOFP_KV_MAX_D];
    for (size_t r = 0; r < nr; r++) {
        const float *xr = x + r * D;
        for (size_t i0 = 0; i0 < D; i0 += 128) {
            const size_t nv = D - i0 < 128 ? (D - i0) / 16 : 8;
            __m512 a[8];
            for (size_t v = 0; v < 8; v++) a[v] = _mm512_setzero_ps();
            for (size_t j = 0; j < D; j++) {
                const __m512 xj = _mm512_set1_ps(xr[j]);
                const float *h = hs + j * D + i0;
                if (nv == 8) {
#pragma GCC unroll 8
                    for (size_t v = 0; v < 8; v++) a[v] = _mm512_add_ps(a[v], _mm512_mul_ps(xj, _mm512_loadu_ps(h + 16 * v)));
                } else {
                    for (size_t v = 0; v < nv; v++) a[v] = _mm512_add_ps(a[v], _mm512_mul_ps(xj, _mm512_loadu_ps(h + 16 * v)));
                }
            }
            for (size_t v = 0; v < nv; v++) _mm512_storeu_ps(acc + i0 + 16 * v, a[v]);
        }
        for (size_t i = 0; i < D; i++) {
            sat += fabsf(acc[i]) > 464.0f;
            dst[r * D + i] = lofp_e4m3_saturate(acc[i]);
        }
    }
    return sat;
}


static const kern_t k_avx512 = { decode_all512, scores512, pv512, perm64, 64, uq_scores512, uq_pv512 };

void lofp_attn_task_avx512(const lofp_attn_geom *G, const lofp_attn_task *t, void *raw)
{
    if (G->D < 64) lofp_attn_task_avx2(G, t, raw); /* one group per head: nothing to pair */
    else if (G->format == LOFP_KV_ULTRAQUANT && G->D >= 128) run_task_uq512(G, t, raw);
    else lofp_attn_x86_run_task(&k_avx512, G, t, raw);
}
#else
#include "kv/attention_internal.h"
size_t lofp_attn_prep_q_avx512(const float *x, size_t nr, uint32_t D, const float *hs, float *dst)
{
    return lofp_attn_prep_q(x, nr, D, hs, dst);
}
void lofp_attn_task_avx512(const lofp_attn_geom *G, const lofp_attn_task *t, void *scratch)
{
    lofp_attn_task_scalar(G, t, scratch);
}
#endif

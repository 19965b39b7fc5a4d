/* gemm_f32_avx512.c -- the fp32 blocked GEMM (W4A16 and every pair without an integer path, m >=
 * GEMM_BIG_M) with 512-bit FMA. The AVX2 kernel's blocking and panels (decoded by its decoder,
 * x86/gemm_f32_avx2.c, exact w * s, 16 rows wide), two panels side by side per micro-tile: 8
 * activation rows x 32 weight rows, 16 zmm accumulators. Every output is the AVX2 kernel's FMA
 * chain over the K chunk, added to C in the same order, so the two give the same bits (tested).
 * Only static helpers plus the table filler. */
#include "gemm/gemm_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX2__) && \
    defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <stdlib.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

#define GK_KC 256 /* the AVX2 kernel's K chunk: the same chunking, the same sums */
#define GK_NR 16  /* rows per decoded panel */
#define GK_NB 256 /* weight rows per block */
#define GK_MR 8   /* activation rows per micro-tile */

typedef void (*panel_fn)(const gemm_plan *p, size_t js, unsigned nr, size_t k0, size_t kc, float *panel);
static panel_fn g_decode;

/* C row i, columns js..js+nr (nr <= 16): (+)= c; the epilogue after the last chunk. */
ALWAYS_INLINE void c_update(const gemm_plan *p, size_t i, size_t js, unsigned nr, __m512 c, int first, int last)
{
    float *out = p->c + i * p->ldc + js;
    if (nr == GK_NR) {
        if (!first) c = _mm512_add_ps(_mm512_loadu_ps(out), c);
        if (last && p->epi != 1.0) {
            __m512d e = _mm512_set1_pd(p->epi);
            __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(c)), e));
            __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(
                _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1))), e));
            c = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
        }
        _mm512_storeu_ps(out, c);
        return;
    }
    float t[GK_NR];
    _mm512_storeu_ps(t, c);
    for (unsigned col = 0; col < nr; col++) {
        float v = first ? t[col] : out[col] + t[col];
        out[col] = last && p->epi != 1.0 ? (float)((double)v * p->epi) : v;
    }
}

/* C[i..i+R)[js..js+32) (+)= A[i..i+R)[k0..k0+kc) . (panel a | panel b); np = 1 uses panel a only. */
ALWAYS_INLINE void micro(const gemm_plan *p, const float *pa, const float *pb, const int R, const int np,
                         size_t i, size_t js, unsigned nra, unsigned nrb, size_t k0, size_t kc, int first, int last)
{
    const size_t ld = p->lda_f;
    const float *a = p->af + i * ld + k0;
    __m512 c0[GK_MR], c1[GK_MR];
    for (int r = 0; r < R; r++) c0[r] = c1[r] = _mm512_setzero_ps();
    for (size_t kk = 0; kk < kc; kk++) {
        __m512 w0 = _mm512_load_ps(pa + kk * GK_NR), w1 = np == 2 ? _mm512_load_ps(pb + kk * GK_NR) : w0;
        for (int r = 0; r < R; r++) {
            __m512 av = _mm512_set1_ps(a[r * ld + kk]);
            c0[r] = _mm512_fmadd_ps(av, w0, c0[r]);
            if (np == 2) c1[r] = _mm512_fmadd_ps(av, w1, c1[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        c_update(p, i + (size_t)r, js, nra, c0[r], first, last);
        if (np == 2) c_update(p, i + (size_t)r, js + GK_NR, nrb, c1[r], first, last);
    }
}

static void f32_gemm(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    size_t nbmax = j1 - j0 < GK_NB ? j1 - j0 : GK_NB, npan = (nbmax + GK_NR - 1) / GK_NR;
    void *raw = malloc(npan * GK_KC * GK_NR * sizeof(float) + 64);
    float stack_panel[GK_KC * GK_NR] __attribute__((aligned(64)));
    float *panels = raw ? (float *)(((uintptr_t)raw + 63) & ~(uintptr_t)63) : NULL;
    for (size_t jb = j0; jb < j1; jb += GK_NB) {
        size_t je = j1 - jb < GK_NB ? j1 : jb + GK_NB;
        for (size_t k0 = 0; k0 < p->kp; k0 += GK_KC) {
            size_t kc = p->kp - k0 < GK_KC ? p->kp - k0 : GK_KC;
            int first = k0 == 0, last = k0 + kc == p->kp;
            if (!panels) { /* no memory for the block's panels: one strip at a time */
                for (size_t js = jb; js < je; js += GK_NR) {
                    unsigned nr = (unsigned)(je - js < GK_NR ? je - js : GK_NR);
                    g_decode(p, js, nr, k0, kc, stack_panel);
                    size_t i = i0;
                    for (; i + GK_MR <= i1; i += GK_MR)
                        micro(p, stack_panel, NULL, GK_MR, 1, i, js, nr, 0, k0, kc, first, last);
                    for (; i < i1; i++) micro(p, stack_panel, NULL, 1, 1, i, js, nr, 0, k0, kc, first, last);
                }
                continue;
            }
            for (size_t js = jb, t = 0; js < je; js += GK_NR, t++)
                g_decode(p, js, (unsigned)(je - js < GK_NR ? je - js : GK_NR), k0, kc, panels + t * GK_KC * GK_NR);
            for (size_t i = i0; i < i1;) {
                const int full = i + GK_MR <= i1;
                for (size_t js = jb, t = 0; js < je; js += 2 * GK_NR, t += 2) {
                    unsigned nra = (unsigned)(je - js < GK_NR ? je - js : GK_NR);
                    const float *pa = panels + t * GK_KC * GK_NR;
                    if (js + GK_NR < je) {
                        unsigned nrb = (unsigned)(je - js - GK_NR < GK_NR ? je - js - GK_NR : GK_NR);
                        const float *pb = pa + GK_KC * GK_NR;
                        if (full) micro(p, pa, pb, GK_MR, 2, i, js, nra, nrb, k0, kc, first, last);
                        else micro(p, pa, pb, 1, 2, i, js, nra, nrb, k0, kc, first, last);
                    } else {
                        if (full) micro(p, pa, NULL, GK_MR, 1, i, js, nra, 0, k0, kc, first, last);
                        else micro(p, pa, NULL, 1, 1, i, js, nra, 0, k0, kc, first, last);
                    }
                }
                i += full ? GK_MR : 1;
            }
        }
    }
    free(raw);
}

void lofp_gemm_kernels_avx512_f32(gemm_kernels *k)
{
    if (!k->f32_decode_panel) return; /* needs the AVX2 table underneath */
    g_decode = k->f32_decode_panel;
    k->f32_gemm = f32_gemm;
}

#else
void lofp_gemm_kernels_avx512_f32(gemm_kernels *k) { (void)k; }
#endif

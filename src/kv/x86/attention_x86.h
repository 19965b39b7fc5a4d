/* attention_x86.h -- what the AVX2 and the AVX-512 attention kernels share: the vector
 * helpers (compiled for each file's ISA, hence static inline), the prefetch queue, the scratch
 * layout, and the split-K task driver run_task (defined once, in attention_avx2.c) with the table
 * of tile helpers it calls. Included only by src/kv/x86/attention_avx{2,512}.c. */
#ifndef LOFP_KV_ATTENTION_X86_H
#define LOFP_KV_ATTENTION_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kv/attention_internal.h"

static inline __m256 exp256(__m256 x)
{
    /* Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial; ~1 ulp. Inputs at or below
     * -88.376 (and -Inf) give exactly 0: n = -127 makes the 2^n factor's bits zero. */
    x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
    __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
    fx = _mm256_floor_ps(fx);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    __m256 z = _mm256_mul_ps(x, x);
    y = _mm256_fmadd_ps(y, z, x);
    y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
    __m256i n = _mm256_cvttps_epi32(fx);
    n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

static inline float hmax256(__m256 v)
{
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

static inline float hsum256(__m256 v)
{
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

/* Lane i of the result = the sum of the 8 lanes of v_i. */
static inline __m256 hsum8x(__m256 v0, __m256 v1, __m256 v2, __m256 v3, __m256 v4, __m256 v5,
                            __m256 v6, __m256 v7)
{
    __m256 t0 = _mm256_hadd_ps(v0, v1), t1 = _mm256_hadd_ps(v2, v3);
    __m256 t2 = _mm256_hadd_ps(v4, v5), t3 = _mm256_hadd_ps(v6, v7);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* The next tile's cache rows, prefetched a line at a time from inside the compute loops, so that
 * the requests trickle out instead of filling the line-fill buffers in a burst. */
typedef struct {
    const char *row[64];
    size_t rows, rowb, i, o;
} pfq_t;

static inline void pf_one(pfq_t *q)
{
    if (q->i < q->rows) {
        _mm_prefetch(q->row[q->i] + q->o, _MM_HINT_T0);
        q->o += 64;
        if (q->o >= q->rowb) {
            q->o = 0;
            q->i++;
        }
    }
}

typedef struct {
    float *Kf, *Vf, *P, *qb, *slut, *tmp;
    const uint8_t **tokp, **sp;
    float **acc;
} scratch_t;

static inline void scratch_split(const lofp_attn_geom *G, void *raw, size_t max_rows, scratch_t *s)
{
    size_t T = G->tile, D = G->D;
    float *f = (float *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    const size_t H = LOFP_ATTN_TASK_HEADS;
    s->Kf = f;                               /* [head][T][D] */
    s->Vf = s->Kf + H * T * D;
    const size_t rows = (max_rows + 3) & ~(size_t)3; /* the AVX-512 UltraQuant kernel pads to 4 */
    s->P = s->Vf + H * T * D;                 /* [rows][64]: the AVX-512 UltraQuant tile is 64 */
    s->qb = s->P + rows * 64;
    s->slut = s->qb + rows * H * D;
    s->tmp = s->slut + 256;
    s->tokp = (const uint8_t **)(void *)(s->tmp + D + 16);
    s->sp = s->tokp + 64;
    s->acc = (float **)(void *)(s->sp + 64);
}
/* Token addresses of positions [ts, ts+n) (consecutive: one division per call). */
static inline void token_ptrs(const lofp_attn_geom *G, const int32_t *bt, size_t ts, size_t n,
                       const uint8_t **out)
{
    size_t blk = ts / G->bs, row = ts % G->bs;
    const uint8_t *base = G->cache + (size_t)bt[blk] * G->block_bytes;
    for (size_t j = 0; j < n; j++) {
        out[j] = base + row * G->token_bytes;
        if (++row == G->bs && j + 1 < n) {
            row = 0;
            base = G->cache + (size_t)bt[++blk] * G->block_bytes;
        }
    }
}

/* ---- the task driver, shared by the AVX2 and the AVX-512 helpers ----------------------------- */

typedef struct {
    void (*decode)(const lofp_attn_geom *G, const uint8_t *const *tokp, size_t tn, size_t h0,
                   size_t nh, float *Kf, float *Vf); /* fp32 / bf16 caches */
    void (*scores)(const float *qb, size_t R, const float *Kf, size_t D, size_t T, size_t tn,
                   float scale, float *P);
    void (*pv)(float *const *acc, size_t R, const float *P, size_t T, const float *Vf, size_t D,
               size_t tn);
    int (*perm)(int p);  /* element held by position p of a decoded UltraQuant block */
    int block;           /* elements per permutation block: 32 (AVX2) or 64 (AVX-512) */
    /* UltraQuant: scores and P.V straight from the codes (no fp32 tiles); sp[t] is the slot of
     * token t of the current head (a zero slot past the tile's end) */
    void (*uq_scores)(const uint8_t *const *sp, const lofp_attn_geom *G, size_t tn,
                      const float *qb, size_t R, const float *slut, float *P, pfq_t *pf);
    void (*uq_pv)(const uint8_t *const *sp, const lofp_attn_geom *G, size_t tn, float *const *acc,
                  size_t R, const float *P, const float *slut, pfq_t *pf);
} kern_t;

/* The task driver over a table of tile helpers; the AVX-512 file passes its own table. */
void lofp_attn_x86_run_task(const kern_t *k, const lofp_attn_geom *G, const lofp_attn_task *t,
                            void *raw);

#endif

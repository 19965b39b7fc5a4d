/* attention_avx2.c -- the AVX2+FMA tile kernel of the split-K attention (compiled with -mavx2
 * -mfma -mf16c; reached only after lofp_cpu_features() reports AVX2 and FMA) and the task driver
 * shared with the AVX-512 kernel (attention_avx512.c).
 *
 * Per tile of `tile` tokens (4096/D, so the fp32 K and V tiles take 32 KiB together and stay in
 * L1) and per KV head: decode the K tile to fp32, scores for every query row of the head, online
 * softmax, decode the V tile, P.V into the running accumulators. The next tile's token rows are
 * prefetched while this one is computed.
 *
 * UltraQuant never materialises fp32 tiles: K and V are decoded into registers inside the score
 * and P.V loops. Decode of a group: its 16 code bytes (32 nibbles) are broadcast to both 128-bit
 * lanes, lane 0 keeps the low nibbles (even elements), lane 1 the high ones (odd elements); two
 * pshufb lookups give the low and high byte of the bf16 pattern of each E2M1 value, two byte
 * unpacks make bf16 words, and a shift / a mask of each 32-bit lane turns the even / odd word into
 * fp32 — exact, no conversion instruction, half of the work off the shuffle port; one multiply by
 * the power-of-two group scale (a 256-entry table, 0 for byte 0) finishes it. A decoded group
 * comes out permuted (perm32 below); instead of shuffling it back, Q is permuted the same way once
 * per task and the accumulators are un-permuted once at the end (the dot product and P.V do not
 * care about element order). fp32 and bf16 caches are widened into fp32 tiles instead.
 * UltraQuant at D >= 128 with AVX-512 has its own task driver (run_task_uq512, attention_avx512.c). */
#if defined(__x86_64__) || defined(__i386__)
#include <math.h>
#include <stdlib.h>

#include "kv/x86/attention_x86.h"

int lofp_attn_avx2_built(void) { return 1; }


/* Position p of a decoded group holds element perm32(p). */
static inline int perm32(int p)
{
    int v = p / 8, lane = (p % 8) / 4, i = p % 4;
    return 16 * (v / 2) + 4 * i + lane + 2 * (v % 2);
}


/* ---- tile widening (fp32 / bf16 caches) ------------------------------------------------- *
 * Token-major over every head of the task, so that the cache is read sequentially (a tile of one
 * block's rows is contiguous) and the hardware prefetchers can stream it. Kf and Vf are
 * [head][T][D]. */

static inline __attribute__((always_inline)) void bf16_dec256(const uint8_t *src, size_t D, float *o)
{
    for (size_t d = 0; d < D; d += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(src + 2 * d)));
        _mm256_store_ps(o + d, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
}

static inline __attribute__((always_inline)) void f32_dec256(const uint8_t *src, size_t D, float *o)
{
    for (size_t d = 0; d < D; d += 8) _mm256_store_ps(o + d, _mm256_loadu_ps((const float *)(const void *)src + d));
}

static void decode_all(const lofp_attn_geom *G, const uint8_t *const *tokp, size_t tn, size_t h0,
                       size_t nh, float *Kf, float *Vf)
{
    const size_t D = G->D, T = G->tile;
    for (size_t t = 0; t < tn; t++)
        for (size_t hk = 0; hk < nh; hk++) {
            const uint8_t *s = tokp[t] + (h0 + hk) * G->slot;
            float *kd = Kf + (hk * T + t) * D, *vd = Vf + (hk * T + t) * D;
            if (G->format == LOFP_KV_BF16) {
                bf16_dec256(s + G->k_off, D, kd);
                bf16_dec256(s + G->v_off, D, vd);
            } else {
                f32_dec256(s + G->k_off, D, kd);
                f32_dec256(s + G->v_off, D, vd);
            }
        }
}

/* ---- scores ------------------------------------------------------------------------------ */

/* P[r*T + t] = (q_r . K_t) * scale for rows [0, R) and t < round_up(tn, 4) (pairs of rows) or
 * round_up(tn, 8) (a last odd row). */
static void scores(const float *qb, size_t R, const float *Kf, size_t D, size_t T, size_t tn,
                   float scale, float *P)
{
    const __m256 vs = _mm256_set1_ps(scale);
    const size_t t4 = (tn + 3) & ~(size_t)3, t8 = (tn + 7) & ~(size_t)7;
    size_t r = 0;
    for (; r + 2 <= R; r += 2) {
        const float *q0 = qb + r * D, *q1 = q0 + D;
        for (size_t t = 0; t < t4; t += 4) {
            const float *k0 = Kf + t * D, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            for (size_t d = 0; d < D; d += 8) {
                __m256 x0 = _mm256_load_ps(q0 + d), x1 = _mm256_load_ps(q1 + d), y;
                y = _mm256_load_ps(k0 + d); a00 = _mm256_fmadd_ps(x0, y, a00); a10 = _mm256_fmadd_ps(x1, y, a10);
                y = _mm256_load_ps(k1 + d); a01 = _mm256_fmadd_ps(x0, y, a01); a11 = _mm256_fmadd_ps(x1, y, a11);
                y = _mm256_load_ps(k2 + d); a02 = _mm256_fmadd_ps(x0, y, a02); a12 = _mm256_fmadd_ps(x1, y, a12);
                y = _mm256_load_ps(k3 + d); a03 = _mm256_fmadd_ps(x0, y, a03); a13 = _mm256_fmadd_ps(x1, y, a13);
            }
            __m256 s = _mm256_mul_ps(hsum8x(a00, a01, a02, a03, a10, a11, a12, a13), vs);
            _mm_storeu_ps(P + r * T + t, _mm256_castps256_ps128(s));
            _mm_storeu_ps(P + (r + 1) * T + t, _mm256_extractf128_ps(s, 1));
        }
    }
    if (r < R) {
        const float *q0 = qb + r * D;
        for (size_t t = 0; t < t8; t += 8) {
            const float *k = Kf + t * D;
            __m256 a[8];
            for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
            for (size_t d = 0; d < D; d += 8) {
                __m256 x0 = _mm256_load_ps(q0 + d);
                for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(x0, _mm256_load_ps(k + j * D + d), a[j]);
            }
            _mm256_storeu_ps(P + r * T + t, _mm256_mul_ps(hsum8x(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]), vs));
        }
    }
}

/* ---- P.V --------------------------------------------------------------------------------- */

/* acc[r][d] += sum_t P[r][t] * V[t][d] for rows [0, NR). */
static inline __attribute__((always_inline)) void pv_block(const int NR, float *const *acc,
                                                          const float *P, size_t T,
                                                          const float *Vf, size_t D, size_t tn)
{
    for (size_t d = 0; d < D; d += 16) {
        const float *Pg = P;
        __m256 a0[4], a1[4];
        for (int r = 0; r < NR; r++) {
            a0[r] = _mm256_loadu_ps(acc[r] + d);
            a1[r] = _mm256_loadu_ps(acc[r] + d + 8);
        }
        for (size_t t = 0; t < tn; t++) {
            __m256 v0 = _mm256_load_ps(Vf + t * D + d), v1 = _mm256_load_ps(Vf + t * D + d + 8);
            for (int r = 0; r < NR; r++) {
                __m256 p = _mm256_broadcast_ss(Pg + r * T + t);
                a0[r] = _mm256_fmadd_ps(p, v0, a0[r]);
                a1[r] = _mm256_fmadd_ps(p, v1, a1[r]);
            }
        }
        for (int r = 0; r < NR; r++) {
            _mm256_storeu_ps(acc[r] + d, a0[r]);
            _mm256_storeu_ps(acc[r] + d + 8, a1[r]);
        }
    }
}

/* P rows are R consecutive tables of T. */
static void pv(float *const *acc, size_t R, const float *P, size_t T, const float *Vf, size_t D,
               size_t tn)
{
    for (size_t r = 0; r < R; r += 4) {
        size_t nr = R - r < 4 ? R - r : 4;
        switch (nr) {
        case 4: pv_block(4, acc + r, P + r * T, T, Vf, D, tn); break;
        case 3: pv_block(3, acc + r, P + r * T, T, Vf, D, tn); break;
        case 2: pv_block(2, acc + r, P + r * T, T, Vf, D, tn); break;
        default: pv_block(1, acc + r, P + r * T, T, Vf, D, tn); break;
        }
    }
}

/* An all-zero UltraQuant slot (scale bytes 0: zero groups) for the padding tokens of a tile. */
static const uint8_t zero_slot[LOFP_KV_MAX_D + LOFP_KV_MAX_D / 16];

void lofp_attn_x86_run_task(const kern_t *k, const lofp_attn_geom *G, const lofp_attn_task *t, void *raw)
{
    const size_t D = G->D, T = G->tile, g = G->g, Hq = G->Hq;
    const size_t R = (size_t)t->qn * g; /* rows per KV head */
    const size_t nh = t->h1 - t->h0;
    const int uq = G->format == LOFP_KV_ULTRAQUANT;
    scratch_t s;
    scratch_split(G, raw, R, &s);
    float **acc = s.acc; /* record of each row of the current head */

    for (int b = 0; b < 256; b++) s.slut[b] = lofp_uq_scale((uint8_t)b);
    int pm[64];
    const size_t blk = (size_t)k->block;
    for (int p = 0; p < k->block; p++) pm[p] = uq ? k->perm(p) : p;

    /* q rows of every head, permuted for UltraQuant; records start empty */
    for (size_t hk = 0; hk < nh; hk++)
        for (size_t r = 0; r < R; r++) {
            size_t i = r / g, h = (t->h0 + hk) * g + r % g;
            const float *q = t->q + i * t->q_tok_stride + h * D;
            float *dst = s.qb + (hk * R + r) * D;
            for (size_t b = 0; b < D; b += blk)
                for (size_t p = 0; p < blk; p++) dst[b + p] = q[b + pm[p]];
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

    for (size_t ts = t->start; ts < maxlim; ts += T) {
        const size_t tn = maxlim - ts < T ? maxlim - ts : T, t8 = (tn + 7) & ~(size_t)7;
        token_ptrs(G, t->block_table, ts, tn, s.tokp);
        if (ts + T < maxlim && !uq) { /* the next tile may start in another block */
            const char *nx = (const char *)lofp_attn_token(G, t->block_table, ts + T) + t->h0 * G->slot;
            for (size_t o = 0; o < 4 * 64; o += 64) _mm_prefetch(nx + o, _MM_HINT_T0);
        }
        const int fused = uq;
        if (!fused) k->decode(G, s.tokp, tn, t->h0, nh, s.Kf, s.Vf);
        const size_t tn_next = ts + T >= maxlim ? 0 : (maxlim - ts - T < T ? maxlim - ts - T : T);
        pfq_t pf;
        pf.rows = fused ? tn_next : 0;
        pf.rowb = nh * G->slot;
        pf.i = pf.o = 0;
        if (pf.rows) {
            token_ptrs(G, t->block_table, ts + T, tn_next, s.sp); /* borrowed for a moment */
            for (size_t j = 0; j < tn_next; j++) pf.row[j] = (const char *)s.sp[j] + t->h0 * G->slot;
        }
        for (size_t hk = 0; hk < nh; hk++) {
            float *Kf = s.Kf + hk * T * D, *Vf = s.Vf + hk * T * D;
            const float *qb = s.qb + hk * R * D;
            if (fused) {
                for (size_t j = 0; j < t8; j++)
                    s.sp[j] = j < tn ? s.tokp[j] + (t->h0 + hk) * G->slot : zero_slot;
                k->uq_scores(s.sp, G, tn, qb, R, s.slut, s.P, &pf);
            } else {
                if (t8 > tn) memset(Kf + tn * D, 0, (t8 - tn) * D * sizeof(float));
                k->scores(qb, R, Kf, D, T, tn, G->scale, s.P);
            }
            /* online softmax per row */
            for (size_t r = 0; r < R; r++) {
                size_t i = r / g, h = (t->h0 + hk) * g + r % g;
                float *rec = t->part + (i * Hq + h) * t->part_stride, *Pr = s.P + r * T;
                acc[r] = rec;
                size_t vis = t->limit[i] <= ts ? 0 : t->limit[i] - ts;
                if (vis > tn) vis = tn;
                if (vis == 0) {
                    memset(Pr, 0, T * sizeof(float));
                    continue;
                }
                for (size_t j = vis; j < t8; j++) Pr[j] = -INFINITY;
                __m256 mx = _mm256_loadu_ps(Pr);
                for (size_t j = 8; j < t8; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(Pr + j));
                float mt = hmax256(mx), m_old = rec[D], m_new = m_old > mt ? m_old : mt;
                float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
                __m256 vm = _mm256_set1_ps(m_new), sum = _mm256_setzero_ps();
                for (size_t j = 0; j < t8; j += 8) {
                    __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(Pr + j), vm));
                    _mm256_storeu_ps(Pr + j, e);
                    sum = _mm256_add_ps(sum, e);
                }
                rec[D + 1] = rec[D + 1] * alpha + hsum256(sum);
                rec[D] = m_new;
                if (alpha != 1.0f) {
                    __m256 va = _mm256_set1_ps(alpha);
                    for (size_t d = 0; d < D; d += 8) _mm256_storeu_ps(rec + d, _mm256_mul_ps(_mm256_loadu_ps(rec + d), va));
                }
            }
            if (fused) {
                k->uq_pv(s.sp, G, tn, acc, R, s.P, s.slut, &pf);
            } else {
                k->pv(acc, R, s.P, T, Vf, D, tn);
            }
        }
    }
    if (uq) /* accumulators back to the natural element order */
        for (size_t hk = 0; hk < nh; hk++)
            for (size_t r = 0; r < R; r++) {
                size_t i = r / g, h = (t->h0 + hk) * g + r % g;
                float *rec = t->part + (i * Hq + h) * t->part_stride;
                for (size_t b = 0; b < D; b += blk)
                    for (size_t p = 0; p < blk; p++) s.tmp[b + pm[p]] = rec[b + p];
                memcpy(rec, s.tmp, D * sizeof(float));
            }
}


/* ---- AVX2 UltraQuant kernels straight from the codes ------------------------------------------
 * No fp32 tile: each group is decoded into four registers inside the score and P.V loops. With 16
 * registers the blocking is: scores, 4 rows x 2 tokens (or 2 x 4, 1 x 8) = 8 accumulators plus a
 * decoded group; P.V, half a group (16 values) x up to 4 rows = 8 accumulators. */

#define UQ256_CONSTS                                                                                   \
    const __m256i lutlo = _mm256_setr_epi8(0, 0, (char)0x80, (char)0xC0, 0, 0x40, (char)0x80, (char)0xC0, \
        0, 0, (char)0x80, (char)0xC0, 0, 0x40, (char)0x80, (char)0xC0, 0, 0, (char)0x80, (char)0xC0, 0,  \
        0x40, (char)0x80, (char)0xC0, 0, 0, (char)0x80, (char)0xC0, 0, 0x40, (char)0x80, (char)0xC0);    \
    const __m256i luthi = _mm256_setr_epi8(0, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40, (char)0x80,     \
        (char)0xBF, (char)0xBF, (char)0xBF, (char)0xC0, (char)0xC0, (char)0xC0, (char)0xC0, 0, 0x3F,   \
        0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40, (char)0x80, (char)0xBF, (char)0xBF, (char)0xBF, (char)0xC0, \
        (char)0xC0, (char)0xC0, (char)0xC0);                                                         \
    const __m256i m0f = _mm256_set1_epi8(0x0F), sh = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);      \
    const __m256i hiw = _mm256_set1_epi32((int)0xFFFF0000u)

/* bf16 words of one group (32 codes at c): w0 holds perm32 positions 0..15, w1 16..31 */
#define UQ256_WORDS(c, w0, w1, both)                                                                  \
    do {                                                                                             \
        __m256i b_ = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(c))); \
        __m256i n_ = _mm256_and_si256(_mm256_srlv_epi32(b_, sh), m0f);                               \
        __m256i lo_ = _mm256_shuffle_epi8(lutlo, n_), hi_ = _mm256_shuffle_epi8(luthi, n_);          \
        w0 = _mm256_unpacklo_epi8(lo_, hi_);                                                         \
        if (both) w1 = _mm256_unpackhi_epi8(lo_, hi_);                                               \
    } while (0)
#define UQ256_EVEN(w, s) _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), s)
#define UQ256_ODD(w, s) _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(w, hiw)), s)

static inline __attribute__((always_inline)) void uq_scores_block256(const int NR, const uint8_t *const *sp,
                                                                    const lofp_attn_geom *G, size_t tn,
                                                                    const float *q, const float *slut,
                                                                    float *P, pfq_t *pf)
{
    UQ256_CONSTS;
    const int TT = 8 / NR; /* tokens per step: 8 accumulators */
    const size_t D = G->D, T = G->tile;
    const __m256 vs = _mm256_set1_ps(G->scale);
    for (size_t t = 0; t < tn; t += (size_t)TT) {
        __m256 a[8];
#pragma GCC unroll 8
        for (int x = 0; x < 8; x++) a[x] = _mm256_setzero_ps();
        pf_one(pf);
        for (size_t grp = 0; grp < D / 32; grp++) {
#pragma GCC unroll 8
            for (int j = 0; j < TT; j++) {
                const uint8_t *s = sp[t + (size_t)j];
                __m256i w0, w1 = _mm256_setzero_si256();
                UQ256_WORDS(s + G->k_off + 16 * grp, w0, w1, 1);
                const __m256 sc = _mm256_broadcast_ss(&slut[s[G->ks_off + grp]]);
                const __m256 k0 = UQ256_EVEN(w0, sc), k1 = UQ256_ODD(w0, sc);
                const __m256 k2 = UQ256_EVEN(w1, sc), k3 = UQ256_ODD(w1, sc);
#pragma GCC unroll 4
                for (int i = 0; i < NR; i++) {
                    const float *qi = q + (size_t)i * D + 32 * grp;
                    __m256 x = a[i * TT + j];
                    x = _mm256_fmadd_ps(_mm256_load_ps(qi), k0, x);
                    x = _mm256_fmadd_ps(_mm256_load_ps(qi + 8), k1, x);
                    x = _mm256_fmadd_ps(_mm256_load_ps(qi + 16), k2, x);
                    a[i * TT + j] = _mm256_fmadd_ps(_mm256_load_ps(qi + 24), k3, x);
                }
            }
        }
        /* lane i*TT + j = row i, token t + j: each row's TT scores are contiguous */
        __m256 r = _mm256_mul_ps(hsum8x(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]), vs);
        if (TT == 8) {
            _mm256_storeu_ps(P + t, r);
        } else if (TT == 4) {
            _mm_storeu_ps(P + t, _mm256_castps256_ps128(r));
            _mm_storeu_ps(P + T + t, _mm256_extractf128_ps(r, 1));
        } else {
            __m128 lo = _mm256_castps256_ps128(r), hi = _mm256_extractf128_ps(r, 1);
            _mm_storel_pi((__m64 *)(void *)(P + t), lo);
            _mm_storeh_pi((__m64 *)(void *)(P + T + t), lo);
            _mm_storel_pi((__m64 *)(void *)(P + 2 * T + t), hi);
            _mm_storeh_pi((__m64 *)(void *)(P + 3 * T + t), hi);
        }
    }
}

static void uq_scores256(const uint8_t *const *sp, const lofp_attn_geom *G, size_t tn,
                         const float *qb, size_t R, const float *slut, float *P, pfq_t *pf)
{
    const size_t D = G->D, T = G->tile;
    size_t r = 0;
    for (; r + 4 <= R; r += 4) uq_scores_block256(4, sp, G, tn, qb + r * D, slut, P + r * T, pf);
    if (R - r >= 2) { uq_scores_block256(2, sp, G, tn, qb + r * D, slut, P + r * T, pf); r += 2; }
    if (r < R) uq_scores_block256(1, sp, G, tn, qb + r * D, slut, P + r * T, pf);
}

static inline __attribute__((always_inline)) void uq_pv_block256(const int NR, const uint8_t *const *sp,
                                                                const lofp_attn_geom *G, size_t tn,
                                                                float *const *acc, const float *P,
                                                                const float *slut, pfq_t *pf)
{
    UQ256_CONSTS;
    const size_t D = G->D, T = G->tile;
    for (size_t hg = 0; hg < D / 16; hg++) { /* half groups */
        const size_t grp = hg / 2;
        __m256 a0[4], a1[4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            a0[i] = _mm256_loadu_ps(acc[i] + 16 * hg);
            a1[i] = _mm256_loadu_ps(acc[i] + 16 * hg + 8);
        }
        for (size_t t = 0; t < tn; t++) {
            const uint8_t *s = sp[t];
            __m256i w0, wl = _mm256_setzero_si256();
            if (hg & 1) UQ256_WORDS(s + G->v_off + 16 * grp, wl, w0, 1); /* w0 = the high half */
            else UQ256_WORDS(s + G->v_off + 16 * grp, w0, wl, 0);
            (void)wl;
            const __m256 sc = _mm256_broadcast_ss(&slut[s[G->vs_off + grp]]);
            const __m256 v0 = UQ256_EVEN(w0, sc), v1 = UQ256_ODD(w0, sc);
            if ((t & 3) == 0) pf_one(pf);
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) {
                __m256 p = _mm256_broadcast_ss(P + (size_t)i * T + t);
                a0[i] = _mm256_fmadd_ps(p, v0, a0[i]);
                a1[i] = _mm256_fmadd_ps(p, v1, a1[i]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            _mm256_storeu_ps(acc[i] + 16 * hg, a0[i]);
            _mm256_storeu_ps(acc[i] + 16 * hg + 8, a1[i]);
        }
    }
}

static void uq_pv256(const uint8_t *const *sp, const lofp_attn_geom *G, size_t tn, float *const *acc,
                     size_t R, const float *P, const float *slut, pfq_t *pf)
{
    const size_t T = G->tile;
    for (size_t r = 0; r < R; r += 4) {
        size_t nr = R - r < 4 ? R - r : 4;
        switch (nr) {
        case 4: uq_pv_block256(4, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        case 3: uq_pv_block256(3, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        case 2: uq_pv_block256(2, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        default: uq_pv_block256(1, sp, G, tn, acc + r, P + r * T, slut, pf); break;
        }
    }
}

static const kern_t k_avx2 = { decode_all, scores, pv, perm32, 32, uq_scores256, uq_pv256 };

void lofp_attn_task_avx2(const lofp_attn_geom *G, const lofp_attn_task *t, void *raw)
{
    lofp_attn_x86_run_task(&k_avx2, G, t, raw);
}
#else
#include "kv/attention_internal.h"
int lofp_attn_avx2_built(void) { return 0; }
void lofp_attn_task_avx2(const lofp_attn_geom *G, const lofp_attn_task *t, void *scratch)
{
    lofp_attn_task_scalar(G, t, scratch);
}
#endif

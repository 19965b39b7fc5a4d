/* gemm_f32_avx2.c -- fp32-accumulating GEMV/GEMM (W4A16, and every operand pair without an
 * integer path): E2M1 or E4M3 weights decoded exactly to fp32, multiplied by fp32 activations.
 * AVX2 + FMA + F16C; only static helpers plus the table filler.
 *
 * E2M1 -> fp32 in registers: an E2M1 value's fp32 bit pattern has zeros in its low 16 bits, so
 * two pshufb lookups give its top two bytes, one unpack pairs them into 16-bit words, and a
 * shift (even words) or a mask (odd words) turns a pair of words into two fp32 vectors. The
 * lanes come out in a fixed shuffled order; the activations are shuffled to match instead.
 * E4M3 -> fp32: the 7 magnitude bits placed at fp16 bits 13..7 (sign at 15) form an fp16 worth
 * value * 2^-8, subnormals included, which vcvtph2ps widens; the 2^8 is put back exactly after
 * the block sum. Each weight scale block's partial sum is multiplied by its scale once. */
#include "gemm/gemm_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "gemm_avx2.h"

/* top two bytes of the fp32 pattern of each E2M1 code */
static const uint8_t k_th[16] = { 0x00, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40,
                                  0x80, 0xBF, 0xBF, 0xBF, 0xC0, 0xC0, 0xC0, 0xC0 };
static const uint8_t k_tl[16] = { 0x00, 0x00, 0x80, 0xC0, 0x00, 0x40, 0x80, 0xC0,
                                  0x00, 0x00, 0x80, 0xC0, 0x00, 0x40, 0x80, 0xC0 };

typedef struct {
    __m256i th, tl, m4, hm;
} e2m1_dec;

ALWAYS_INLINE e2m1_dec e2m1_dec_init(void)
{
    e2m1_dec d;
    d.th = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)k_th));
    d.tl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)k_tl));
    d.m4 = _mm256_set1_epi8(0x0F);
    d.hm = _mm256_set1_epi32((int)0xFFFF0000u);
    return d;
}

/* 32 nibble indices (one per byte) -> four fp32 vectors: per 128-bit lane, f0 = words 0,2,4,6
 * of the low 8 bytes, g0 = words 1,3,5,7, f1/g1 the same for the high 8 bytes. */
ALWAYS_INLINE void e2m1_dec4(const e2m1_dec *d, __m256i idx, __m256 *f0, __m256 *g0, __m256 *f1, __m256 *g1)
{
    __m256i h = _mm256_shuffle_epi8(d->th, idx), l = _mm256_shuffle_epi8(d->tl, idx);
    __m256i u0 = _mm256_unpacklo_epi8(l, h), u1 = _mm256_unpackhi_epi8(l, h);
    *f0 = _mm256_castsi256_ps(_mm256_slli_epi32(u0, 16));
    *g0 = _mm256_castsi256_ps(_mm256_and_si256(u0, d->hm));
    *f1 = _mm256_castsi256_ps(_mm256_slli_epi32(u1, 16));
    *g1 = _mm256_castsi256_ps(_mm256_and_si256(u1, d->hm));
}

/* ------------------------------------------------------------------------------------------ */
/* x8 weights, small m                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* The activation vectors one x8 superblock multiplies, 16 per superblock: for each chunk c,
 * (x[4c], x[4c+2]) and (x[4c+1], x[4c+3]) repeated (matching e2m1_dec4's f and g lanes), then
 * the same for x[16+4c..]. Built once per call and activation row (shuffles are this kernel's
 * bottleneck), or on the fly when there is no memory for them: the same values either way. */
ALWAYS_INLINE void x8_f32_xvec(const float *x, int c, __m256 *xl02, __m256 *xl13, __m256 *xh02, __m256 *xh13)
{
    __m256 xl = _mm256_broadcast_ps((const __m128 *)(const void *)(x + 4 * c));
    __m256 xh = _mm256_broadcast_ps((const __m128 *)(const void *)(x + 16 + 4 * c));
    *xl02 = _mm256_permute_ps(xl, 0x88);
    *xl13 = _mm256_permute_ps(xl, 0xDD);
    *xh02 = _mm256_permute_ps(xh, 0x88);
    *xh13 = _mm256_permute_ps(xh, 0xDD);
}

/* Accumulates one superblock of a group: lanes of the a* accumulators are rows 0,0,1,1,4,4,5,5
 * and of the b* ones rows 2,2,3,3,6,6,7,7 (two partial lanes per row); lo = the first 16
 * elements, hi = the last 16; f/g = e2m1_dec4's even/odd words (eight short FMA chains). xa:
 * the arranged activation vectors of this superblock, or NULL to build them from x. */
ALWAYS_INLINE void x8_f32_sb(const e2m1_dec *d, const uint8_t *w, const float *x, const __m256 *xa, __m256 *acc)
{
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(w + 32 * c));
        for (int hi = 0; hi < 2; hi++) { /* one half at a time: fewer live registers */
            __m256 f0, g0, f1, g1, x02, x13;
            if (xa) {
                x02 = xa[4 * c + 2 * hi];
                x13 = xa[4 * c + 2 * hi + 1];
            } else {
                __m256 t02, t13, u02, u13;
                x8_f32_xvec(x, c, &t02, &t13, &u02, &u13);
                x02 = hi ? u02 : t02;
                x13 = hi ? u13 : t13;
            }
            __m256i idx = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, d->m4);
            e2m1_dec4(d, idx, &f0, &g0, &f1, &g1);
            acc[4 * hi + 0] = _mm256_fmadd_ps(f0, x02, acc[4 * hi + 0]);
            acc[4 * hi + 1] = _mm256_fmadd_ps(g0, x13, acc[4 * hi + 1]);
            acc[4 * hi + 2] = _mm256_fmadd_ps(f1, x02, acc[4 * hi + 2]);
            acc[4 * hi + 3] = _mm256_fmadd_ps(g1, x13, acc[4 * hi + 3]);
        }
    }
}

ALWAYS_INLINE void x8_f32(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1, const int nv)
{
    const e2m1_dec d = e2m1_dec_init();
    const size_t per = nv ? 1 : p->x8.sblock / 32, sbs = p->x8.sbs;
    void *raw = malloc((i1 - i0) * sbs * 16 * sizeof(__m256) + 32);
    __m256 *xarr = raw ? (__m256 *)(((uintptr_t)raw + 31) & ~(uintptr_t)31) : NULL;
    for (size_t i = i0; xarr && i < i1; i++)
        for (size_t b = 0; b < sbs; b++)
            for (int c = 0; c < 4; c++) {
                __m256 *o = xarr + ((i - i0) * sbs + b) * 16 + 4 * c;
                x8_f32_xvec(p->af + i * p->lda_f + 32 * b, c, o, o + 1, o + 2, o + 3);
            }
    for (size_t g = j0 / GEMM_X8_ROWS; g * GEMM_X8_ROWS < j1; g++) {
        size_t jr = g * GEMM_X8_ROWS;
        unsigned cnt = (unsigned)(j1 - jr < GEMM_X8_ROWS ? j1 - jr : GEMM_X8_ROWS);
        if (p->wpacked[g] & GEMM_X8_FLAG_SPECIAL) {
            lofp_gemm_generic_f32_x8(p, i0, i1, jr, jr + cnt);
            continue;
        }
        const uint8_t *gb = p->wpacked + p->x8.header + g * p->x8.group_bytes, *sc = gb + p->x8.kq * 4;
        for (size_t i = i0; i < i1; i++) {
            const float *x = p->af + i * p->lda_f;
            const __m256 *xa = xarr ? xarr + (i - i0) * sbs * 16 : NULL;
            __m256 ta = _mm256_setzero_ps(), tb = _mm256_setzero_ps();
            size_t sidx = 0, scnt = 0;
            __m256 acc[8];
            for (int t = 0; t < 8; t++) acc[t] = _mm256_setzero_ps();
            for (size_t b = 0; b < sbs; b++) {
                if (i == i0) gx_prefetch_sb(gb + b * GEMM_X8_SB_BYTES);
                x8_f32_sb(&d, gb + b * GEMM_X8_SB_BYTES, x + 32 * b, xa ? xa + 16 * b : NULL, acc);
                if (nv) {
                    __m256 wl, wh;
                    gx_ue4m3x16(sc + 16 * b, &wl, &wh);
                    ta = _mm256_fmadd_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_unpacklo_ps(wl, wl), ta);
                    ta = _mm256_fmadd_ps(_mm256_add_ps(acc[4], acc[5]), _mm256_unpacklo_ps(wh, wh), ta);
                    tb = _mm256_fmadd_ps(_mm256_add_ps(acc[2], acc[3]), _mm256_unpackhi_ps(wl, wl), tb);
                    tb = _mm256_fmadd_ps(_mm256_add_ps(acc[6], acc[7]), _mm256_unpackhi_ps(wh, wh), tb);
                } else if (++scnt == per) {
                    __m256 ws = gx_e8m0x8(sc + 8 * sidx);
                    __m256 pa = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[4], acc[5]));
                    __m256 pb = _mm256_add_ps(_mm256_add_ps(acc[2], acc[3]), _mm256_add_ps(acc[6], acc[7]));
                    ta = _mm256_fmadd_ps(pa, _mm256_unpacklo_ps(ws, ws), ta);
                    tb = _mm256_fmadd_ps(pb, _mm256_unpackhi_ps(ws, ws), tb);
                    scnt = 0;
                    sidx++;
                } else {
                    continue; /* the scale block goes on: keep summing */
                }
                for (int t = 0; t < 8; t++) acc[t] = _mm256_setzero_ps();
            }
            gx_store8(p, i, jr, _mm256_hadd_ps(ta, tb), cnt); /* lane pairs -> rows 0..7 */
        }
    }
    free(raw);
}

static void x8_f32_mx(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    x8_f32(p, i0, i1, j0, j1, 0);
}

static void x8_f32_nv(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    x8_f32(p, i0, i1, j0, j1, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* rows weights, small m                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Natural activations a[0..32) -> the lane order e2m1_dec4 produces for a rows-layout
 * superblock (low nibbles = even elements in the low lane, odd elements in the high lane):
 * p0 = a0 a4 a8 a12 | a1 a5 a9 a13, p1 = a2 a6 a10 a14 | a3 a7 a11 a15, p2/p3 the same +16. */
ALWAYS_INLINE void rows_perm(const float *a, __m256 *p0, __m256 *p1, __m256 *p2, __m256 *p3)
{
    const __m256i ix = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 x0 = _mm256_loadu_ps(a), x1 = _mm256_loadu_ps(a + 8), x2 = _mm256_loadu_ps(a + 16),
           x3 = _mm256_loadu_ps(a + 24);
    *p0 = _mm256_permutevar8x32_ps(_mm256_unpacklo_ps(x0, x1), ix);
    *p1 = _mm256_permutevar8x32_ps(_mm256_unpackhi_ps(x0, x1), ix);
    *p2 = _mm256_permutevar8x32_ps(_mm256_unpacklo_ps(x2, x3), ix);
    *p3 = _mm256_permutevar8x32_ps(_mm256_unpackhi_ps(x2, x3), ix);
}

#define ROWS_NR 4

/* E2M1 rows: weight rows j..j+nr-1 against activation row i. MX: one partial per scale block
 * (block/32 superblocks); NVFP4: one per 16. Scales through the plan's table (NaN included). */
ALWAYS_INLINE void rows_f32_e2m1(const gemm_plan *p, size_t i, size_t j, const unsigned nr, const int nv)
{
    const e2m1_dec d = e2m1_dec_init();
    const float *x = p->af + i * p->lda_f;
    const size_t full = p->kp / 32, nsb = full + (p->kp % 32 != 0), per = nv ? 1 : p->wblock / 32;
    __m256 acc[ROWS_NR], plo[ROWS_NR], phi[ROWS_NR];
    size_t sidx = 0, scnt = 0; /* MX: the scale block being summed (no division in the loop) */
    for (unsigned r = 0; r < nr; r++) acc[r] = plo[r] = phi[r] = _mm256_setzero_ps();
    for (size_t b = 0; b < nsb; b++) {
        __m256 p0, p1, p2, p3;
        rows_perm(x + 32 * b, &p0, &p1, &p2, &p3);
        for (unsigned r = 0; r < nr; r++) {
            const uint8_t *w = p->wcodes + (j + r) * p->wrow_bytes + 16 * b;
            if ((b & 3) == 0) _mm_prefetch((const char *)w + GEMM_PF_ROW_BYTES, _MM_HINT_T0);
            __m128i v = b < full ? _mm_loadu_si128((const __m128i *)(const void *)w)
                                 : _mm_loadl_epi64((const __m128i *)(const void *)w);
            __m128i m4 = _mm_set1_epi8(0x0F);
            __m256i idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
            __m256 f0, g0, f1, g1;
            e2m1_dec4(&d, idx, &f0, &g0, &f1, &g1);
            plo[r] = _mm256_fmadd_ps(f0, p0, plo[r]);
            phi[r] = _mm256_fmadd_ps(f1, p2, phi[r]);
            plo[r] = _mm256_fmadd_ps(g0, p1, plo[r]);
            phi[r] = _mm256_fmadd_ps(g1, p3, phi[r]);
        }
        if (nv) {
            for (unsigned r = 0; r < nr; r++) {
                const uint8_t *s = p->wscales + (j + r) * p->wnsc;
                acc[r] = _mm256_fmadd_ps(plo[r], _mm256_set1_ps(p->slut[s[2 * b]]), acc[r]);
                if (b < full) acc[r] = _mm256_fmadd_ps(phi[r], _mm256_set1_ps(p->slut[s[2 * b + 1]]), acc[r]);
                plo[r] = phi[r] = _mm256_setzero_ps();
            }
        } else if (++scnt == per) {
            for (unsigned r = 0; r < nr; r++) {
                const uint8_t *s = p->wscales + (j + r) * p->wnsc;
                acc[r] = _mm256_fmadd_ps(_mm256_add_ps(plo[r], phi[r]), _mm256_set1_ps(p->slut[s[sidx]]), acc[r]);
                plo[r] = phi[r] = _mm256_setzero_ps();
            }
            scnt = 0;
            sidx++;
        }
    }
    for (unsigned r = 0; r < nr; r++) lofp_gemm_store(p, i, j + r, gx_hsum8(acc[r]));
}

/* E4M3 rows (MXFP8): natural-order decode through fp16. Returns 1 when a NaN code was seen
 * (the caller then recomputes the rows exactly). */
ALWAYS_INLINE int rows_f32_e4m3(const gemm_plan *p, size_t i, size_t j, const unsigned nr)
{
    const float *x = p->af + i * p->lda_f;
    const size_t nsb = p->kp / 32, per = p->wblock / 32;
    const __m256i m7f = _mm256_set1_epi8(0x7F), m7f16 = _mm256_set1_epi16(0x7F), m80 = _mm256_set1_epi16(0x80);
    const __m256 k256 = _mm256_set1_ps(256.0f);
    __m256 acc[ROWS_NR], part[ROWS_NR];
    size_t sidx = 0, scnt = 0;
    __m256i nan = _mm256_setzero_si256();
    for (unsigned r = 0; r < nr; r++) acc[r] = part[r] = _mm256_setzero_ps();
    for (size_t b = 0; b < nsb; b++) {
        __m256 x0 = _mm256_loadu_ps(x + 32 * b), x1 = _mm256_loadu_ps(x + 32 * b + 8),
               x2 = _mm256_loadu_ps(x + 32 * b + 16), x3 = _mm256_loadu_ps(x + 32 * b + 24);
        for (unsigned r = 0; r < nr; r++) {
            const uint8_t *w = p->wcodes + (j + r) * p->wrow_bytes + 32 * b;
            if ((b & 1) == 0) _mm_prefetch((const char *)w + GEMM_PF_ROW_BYTES, _MM_HINT_T0);
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)w);
            nan = _mm256_or_si256(nan, _mm256_cmpeq_epi8(_mm256_and_si256(v, m7f), m7f));
            __m256i lo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(v));
            __m256i hi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(v, 1));
            lo = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(lo, m7f16), 7),
                                 _mm256_slli_epi16(_mm256_and_si256(lo, m80), 8));
            hi = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(hi, m7f16), 7),
                                 _mm256_slli_epi16(_mm256_and_si256(hi, m80), 8));
            __m256 t = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(lo)), x0);
            t = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1)), x1, t);
            t = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(hi)), x2, t);
            t = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1)), x3, t);
            part[r] = _mm256_add_ps(part[r], t);
        }
        if (++scnt == per) {
            for (unsigned r = 0; r < nr; r++) {
                const uint8_t *s = p->wscales + (j + r) * p->wnsc;
                /* the decode left values * 2^-8: * 256 first (exact), then the scale */
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(part[r], k256), _mm256_set1_ps(p->slut[s[sidx]]), acc[r]);
                part[r] = _mm256_setzero_ps();
            }
            scnt = 0;
            sidx++;
        }
    }
    if (!_mm256_testz_si256(nan, nan)) return 1;
    for (unsigned r = 0; r < nr; r++) lofp_gemm_store(p, i, j + r, gx_hsum8(acc[r]));
    return 0;
}

ALWAYS_INLINE void rows_f32(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1, const int kind)
{
    for (size_t j = j0; j < j1; j += ROWS_NR) {
        unsigned nr = (unsigned)(j1 - j < ROWS_NR ? j1 - j : ROWS_NR);
        for (size_t i = i0; i < i1; i++) {
            if (kind == GEMM_W_E4M3_E8M0) {
                int bad = nr == ROWS_NR ? rows_f32_e4m3(p, i, j, ROWS_NR) : rows_f32_e4m3(p, i, j, nr);
                if (bad) lofp_gemm_generic_f32_rows(p, i, i + 1, j, j + nr);
            } else {
                const int nv = kind == GEMM_W_E2M1_UE4M3;
                if (nr == ROWS_NR) rows_f32_e2m1(p, i, j, ROWS_NR, nv);
                else rows_f32_e2m1(p, i, j, nr, nv);
            }
        }
    }
}

static void rows_f32_mx(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    rows_f32(p, i0, i1, j0, j1, GEMM_W_E2M1_E8M0);
}

static void rows_f32_nv(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    rows_f32(p, i0, i1, j0, j1, GEMM_W_E2M1_UE4M3);
}

static void rows_f32_fp8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    rows_f32(p, i0, i1, j0, j1, GEMM_W_E4M3_E8M0);
}

/* ------------------------------------------------------------------------------------------ */
/* Blocked GEMM for large m, any weights                                                        */
/* ------------------------------------------------------------------------------------------ */

#define GK_KC 256 /* K per panel: a 16-row panel of KC floats is 16 KiB, L1-resident */
#define GK_NR 16  /* weight rows per panel: two vectors */
#define GK_MR 6   /* activation rows per micro-tile: 12 accumulators */

/* fp32 of 8 E2M1 nibbles, one per 32-bit lane in bits 0..3 (higher bits ignored): vpermps
 * looks the magnitude up by the low 3 bits, bit 3 becomes the sign. */
ALWAYS_INLINE __m256 e2m1_lanes(__m256i x, __m256 tab)
{
    __m256 mag = _mm256_permutevar8x32_ps(tab, x);
    __m256i sign = _mm256_and_si256(_mm256_slli_epi32(x, 28), _mm256_set1_epi32((int)0x80000000u));
    return _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
}

/* Superblocks [b0, b0+nb) of x8 group g, decoded and scaled (exact) into dst[kk * 16 + r],
 * r < 8. Rows-layout weights are repacked to x8 first. Returns 1, writing nothing, when the
 * group holds a NaN scale (the caller decodes it through the tables). */
static int decode_group_e2m1(const gemm_plan *p, size_t g, size_t b0, size_t nb, float *dst)
{
    const int nv = p->wkind == GEMM_W_E2M1_UE4M3;
    const __m256 tab = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    uint8_t cbuf[8 * GEMM_X8_SB_BYTES] __attribute__((aligned(64))), sbuf[8 * 16];
    const uint8_t *codes, *scales;
    size_t per = 1, sb0 = 0;
    if (p->layout == LOFP_WEIGHT_X8) {
        if (p->wpacked[g] & GEMM_X8_FLAG_SPECIAL) return 1;
        const uint8_t *gb = p->wpacked + p->x8.header + g * p->x8.group_bytes;
        codes = gb + b0 * GEMM_X8_SB_BYTES;
        scales = gb + p->x8.kq * 4;
        per = nv ? 1 : p->x8.sblock / 32;
        sb0 = b0;
    } else {
        if (gx_rows_to_x8(p, g, b0, nb, cbuf, sbuf, nv)) return 1;
        codes = cbuf;
        scales = sbuf;
    }
    size_t sidx = sb0 / per, scnt = sb0 % per;
    for (size_t t = 0; t < nb; t++) {
        __m256 wl, wh;
        if (nv) gx_ue4m3x16(scales + (sb0 + t) * 16, &wl, &wh);
        else wl = wh = gx_e8m0x8(scales + sidx * 8);
        if (++scnt == per) { scnt = 0; sidx++; }
        float *d = dst + t * 32 * 16;
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + t * GEMM_X8_SB_BYTES + 32 * c));
            for (int i = 0; i < 4; i++) {
                __m256i x = _mm256_srli_epi32(v, 8 * i);
                _mm256_storeu_ps(d + (4 * c + i) * 16, _mm256_mul_ps(e2m1_lanes(x, tab), wl));
                _mm256_storeu_ps(d + (16 + 4 * c + i) * 16, _mm256_mul_ps(e2m1_lanes(_mm256_srli_epi32(x, 4), tab), wh));
            }
        }
    }
    return 0;
}

/* Rows j..j+cnt-1 through the plan's tables (any scheme, NaN included) into dst[kk * 16 + r]. */
static void decode_rows_lut(const gemm_plan *p, size_t j, unsigned cnt, size_t k0, size_t kc, float *dst)
{
    int e2m1 = p->ws->elem == LOFP_ELEM_E2M1, x8 = p->layout == LOFP_WEIGHT_X8;
    for (unsigned r = 0; r < cnt; r++) {
        size_t row = j + r, g = row / GEMM_X8_ROWS;
        unsigned rr = (unsigned)(row % GEMM_X8_ROWS);
        const uint8_t *rc = x8 ? NULL : p->wcodes + row * p->wrow_bytes, *rs = x8 ? NULL : p->wscales + row * p->wnsc;
        for (size_t e0 = k0; e0 < k0 + kc; e0 += p->wblock - e0 % p->wblock) {
            size_t e1 = e0 + p->wblock - e0 % p->wblock;
            if (e1 > k0 + kc) e1 = k0 + kc;
            float sc = p->slut[x8 ? lofp_x8_scale(&p->x8, p->wpacked, g, rr, e0 / p->wblock) : rs[e0 / p->wblock]];
            for (size_t e = e0; e < e1; e++) {
                unsigned c = x8 ? lofp_x8_code(&p->x8, p->wpacked, g, rr, e)
                                : e2m1 ? (rc[e >> 1] >> ((e & 1) * 4)) & 15u : rc[e];
                dst[(e - k0) * GK_NR + r] = p->elut[c] * sc;
            }
        }
    }
}

/* panel[kk][r] = value of weight row js + r at element k0 + kk times its scale (exact in fp32),
 * zero for rows past the strip. E2M1 weights are decoded eight rows at a time in registers;
 * every path writes the same values. */
static void decode_panel(const gemm_plan *p, size_t js, unsigned nr, size_t k0, size_t kc, float *panel)
{
    int e2m1 = p->wkind == GEMM_W_E2M1_E8M0 || p->wkind == GEMM_W_E2M1_UE4M3;
    for (unsigned h = 0; h < GK_NR / GEMM_X8_ROWS; h++) {
        float *dst = panel + h * GEMM_X8_ROWS;
        size_t j = js + h * GEMM_X8_ROWS;
        unsigned cnt = nr > h * GEMM_X8_ROWS ? nr - h * GEMM_X8_ROWS : 0;
        if (cnt > GEMM_X8_ROWS) cnt = GEMM_X8_ROWS;
        if (cnt == 0) {
            for (size_t kk = 0; kk < kc; kk++) _mm256_storeu_ps(dst + kk * GK_NR, _mm256_setzero_ps());
            continue;
        }
        /* rows past j + cnt inside the group are decoded too but never stored to C */
        if (e2m1 && decode_group_e2m1(p, j / GEMM_X8_ROWS, k0 / 32, (kc + 31) / 32, dst) == 0) continue;
        for (size_t kk = 0; kk < kc; kk++) _mm256_storeu_ps(dst + kk * GK_NR, _mm256_setzero_ps());
        decode_rows_lut(p, j, cnt, k0, kc, dst);
    }
}

/* C row i, columns js..js+nr: (+)= the two accumulator vectors; the epilogue after the last
 * chunk. Vector when the strip is full, scalar at the n edge: the same fp32 adds either way. */
ALWAYS_INLINE void c_update(const gemm_plan *p, size_t i, size_t js, unsigned nr, __m256 c0, __m256 c1, int first,
                            int last)
{
    float *out = p->c + i * p->ldc + js;
    if (nr == GK_NR) {
        if (!first) {
            c0 = _mm256_add_ps(_mm256_loadu_ps(out), c0);
            c1 = _mm256_add_ps(_mm256_loadu_ps(out + 8), c1);
        }
        if (last && p->epi != 1.0) {
            __m256d e = _mm256_set1_pd(p->epi);
            c0 = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(c0, 1)), e)),
                                 _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(c0)), e)));
            c1 = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(c1, 1)), e)),
                                 _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(c1)), e)));
        }
        _mm256_storeu_ps(out, c0);
        _mm256_storeu_ps(out + 8, c1);
        return;
    }
    float t[GK_NR];
    _mm256_storeu_ps(t, c0);
    _mm256_storeu_ps(t + 8, c1);
    for (unsigned col = 0; col < nr; col++) {
        float v = first ? t[col] : out[col] + t[col];
        out[col] = last && p->epi != 1.0 ? (float)((double)v * p->epi) : v;
    }
}

/* C[i..i+6)[js..js+nr) (+)= A[i..i+6)[k0..k0+kc) . panel, twelve accumulators in registers. Per
 * output: a fresh FMA chain over the chunk, then added to what C holds from earlier chunks. */
static void micro6(const gemm_plan *p, const float *panel, size_t i, size_t js, unsigned nr, size_t k0,
                   size_t kc, int first, int last)
{
    const size_t ld = p->lda_f;
    const float *a0 = p->af + i * ld + k0, *a1 = a0 + ld, *a2 = a1 + ld, *a3 = a2 + ld, *a4 = a3 + ld,
                *a5 = a4 + ld;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
           c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (size_t kk = 0; kk < kc; kk++) {
        __m256 w0 = _mm256_load_ps(panel + kk * GK_NR), w1 = _mm256_load_ps(panel + kk * GK_NR + 8), av;
        av = _mm256_broadcast_ss(a0 + kk); c00 = _mm256_fmadd_ps(av, w0, c00); c01 = _mm256_fmadd_ps(av, w1, c01);
        av = _mm256_broadcast_ss(a1 + kk); c10 = _mm256_fmadd_ps(av, w0, c10); c11 = _mm256_fmadd_ps(av, w1, c11);
        av = _mm256_broadcast_ss(a2 + kk); c20 = _mm256_fmadd_ps(av, w0, c20); c21 = _mm256_fmadd_ps(av, w1, c21);
        av = _mm256_broadcast_ss(a3 + kk); c30 = _mm256_fmadd_ps(av, w0, c30); c31 = _mm256_fmadd_ps(av, w1, c31);
        av = _mm256_broadcast_ss(a4 + kk); c40 = _mm256_fmadd_ps(av, w0, c40); c41 = _mm256_fmadd_ps(av, w1, c41);
        av = _mm256_broadcast_ss(a5 + kk); c50 = _mm256_fmadd_ps(av, w0, c50); c51 = _mm256_fmadd_ps(av, w1, c51);
    }
    c_update(p, i, js, nr, c00, c01, first, last);
    c_update(p, i + 1, js, nr, c10, c11, first, last);
    c_update(p, i + 2, js, nr, c20, c21, first, last);
    c_update(p, i + 3, js, nr, c30, c31, first, last);
    c_update(p, i + 4, js, nr, c40, c41, first, last);
    c_update(p, i + 5, js, nr, c50, c51, first, last);
}

/* One activation row: the same per-output arithmetic as micro6. */
static void micro1(const gemm_plan *p, const float *panel, size_t i, size_t js, unsigned nr, size_t k0,
                   size_t kc, int first, int last)
{
    const float *a0 = p->af + i * p->lda_f + k0;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00;
    for (size_t kk = 0; kk < kc; kk++) {
        __m256 av = _mm256_broadcast_ss(a0 + kk);
        c00 = _mm256_fmadd_ps(av, _mm256_load_ps(panel + kk * GK_NR), c00);
        c01 = _mm256_fmadd_ps(av, _mm256_load_ps(panel + kk * GK_NR + 8), c01);
    }
    c_update(p, i, js, nr, c00, c01, first, last);
}

#define GK_NB 256 /* weight rows per block: its decoded panels (KC x NB floats) and its C columns stay
                     in L2 while every activation row passes */

/* For each block of GK_NB weight rows and each K chunk: decode the block's panels once, then run
 * every activation row of the range through them. The K chunking is fixed (GK_KC), so the
 * result does not depend on the rectangle. */
static void f32_gemm(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    float *panels = NULL;
    float stack_panel[GK_KC * GK_NR] __attribute__((aligned(64)));
    size_t nbmax = j1 - j0 < GK_NB ? j1 - j0 : GK_NB, npan = (nbmax + GK_NR - 1) / GK_NR;
    void *raw = malloc(npan * GK_KC * GK_NR * sizeof(float) + 64);
    if (raw) panels = (float *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    for (size_t jb = j0; jb < j1; jb += GK_NB) {
        size_t je = j1 - jb < GK_NB ? j1 : jb + GK_NB;
        for (size_t k0 = 0; k0 < p->kp; k0 += GK_KC) {
            size_t kc = p->kp - k0 < GK_KC ? p->kp - k0 : GK_KC;
            int first = k0 == 0, last = k0 + kc == p->kp;
            if (panels) {
                for (size_t js = jb, t = 0; js < je; js += GK_NR, t++)
                    decode_panel(p, js, (unsigned)(je - js < GK_NR ? je - js : GK_NR), k0, kc,
                                 panels + t * GK_KC * GK_NR);
                size_t i = i0;
                for (; i + GK_MR <= i1; i += GK_MR)
                    for (size_t js = jb, t = 0; js < je; js += GK_NR, t++)
                        micro6(p, panels + t * GK_KC * GK_NR, i, js, (unsigned)(je - js < GK_NR ? je - js : GK_NR),
                               k0, kc, first, last);
                for (; i < i1; i++)
                    for (size_t js = jb, t = 0; js < je; js += GK_NR, t++)
                        micro1(p, panels + t * GK_KC * GK_NR, i, js, (unsigned)(je - js < GK_NR ? je - js : GK_NR),
                               k0, kc, first, last);
            } else { /* no memory for the block's panels: one strip at a time, same arithmetic */
                for (size_t js = jb; js < je; js += GK_NR) {
                    unsigned nr = (unsigned)(je - js < GK_NR ? je - js : GK_NR);
                    decode_panel(p, js, nr, k0, kc, stack_panel);
                    size_t i = i0;
                    for (; i + GK_MR <= i1; i += GK_MR) micro6(p, stack_panel, i, js, nr, k0, kc, first, last);
                    for (; i < i1; i++) micro1(p, stack_panel, i, js, nr, k0, kc, first, last);
                }
            }
        }
    }
    free(raw);
}

/* The panel decoder for the 512-bit GEMM (x86/gemm_f32_avx512.c): the same panels, so the same
 * products. AVX2 code, called only from a table that requires AVX2. */
static void decode_panel_hook(const gemm_plan *p, size_t js, unsigned nr, size_t k0, size_t kc, float *panel)
{
    decode_panel(p, js, nr, k0, kc, panel);
}

void lofp_gemm_kernels_avx2_f32(gemm_kernels *k)
{
    k->f32_decode_panel = decode_panel_hook;
    k->f32_x8[GEMM_W_E2M1_E8M0] = x8_f32_mx;
    k->f32_x8[GEMM_W_E2M1_UE4M3] = x8_f32_nv;
    k->f32_rows[GEMM_W_E2M1_E8M0] = rows_f32_mx;
    k->f32_rows[GEMM_W_E2M1_UE4M3] = rows_f32_nv;
    k->f32_rows[GEMM_W_E4M3_E8M0] = rows_f32_fp8;
    k->f32_gemm = f32_gemm;
}

#else
void lofp_gemm_kernels_avx2_f32(gemm_kernels *k) { (void)k; }
#endif

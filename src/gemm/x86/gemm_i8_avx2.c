/* gemm_i8_avx2.c -- integer-dot GEMV/GEMM for E2M1 weights (MXFP4, NVFP4) against int8
 * activations (MXINT8 codes, or E2M1 values doubled for W4A4), and the MXINT8 activation
 * quantizer that feeds them. AVX2 + FMA + F16C; only static helpers plus the table filler.
 *
 * The llama.cpp way, with one change: a pshufb maps each E2M1 nibble to 2*value + 12, an
 * unsigned byte in [0, 24], so vpmaddubsw (unsigned x signed) needs no sign juggling; the extra
 * 12 * sum(a) per 16 activations is the same for every weight row and is subtracted once per
 * block from the int32 sum (the activation side precomputes it). Pairs stay below
 * 2*24*128 = 6144 and four of them below 24576, so the int16 stage never saturates and every
 * block sum is exact. Each block's sum then becomes fp32 exactly and is scaled by
 * (weight scale * activation scale), itself exact in the fp32 normal range, and accumulated:
 * the same terms in the same order as the portable kernel, so the two agree bit for bit. */
#include "gemm/gemm_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <math.h>

#include "gemm_avx2.h"

/* 2 * E2M1 + 12 for each nibble */
static const uint8_t k_lut_u[16] = { 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0 };

ALWAYS_INLINE __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* ------------------------------------------------------------------------------------------ */
/* x8 weights (and rows weights repacked to x8 on the fly when m is large)                      */
/* ------------------------------------------------------------------------------------------ */

#define I8_PANEL 64 /* activation rows whose accumulators live across decode chunks */

/* GEMV: acc[t] += the run's dot products with activation rows i0 + t (t < mr, called with
 * mr = 1 so that the accumulator lives in a register), decoding each superblock in registers as
 * the weights stream past (prefetched ahead). The run's superblock 0 is activation superblock
 * ba. nv: UE4M3 scales (two per superblock); halves: 1 = one term per superblock, 2 = one per
 * 16. */
ALWAYS_INLINE void x8_i8_tile(const gemm_plan *p, const gx_run *run, size_t ba, size_t i0, size_t mr,
                              __m256 *acc, const int nv, const int halves)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)k_lut_u));
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t nh = p->kq / 16;
    size_t sidx = 0, scnt = 0; /* MX scale entry of superblock b, without a division */
    for (size_t b = 0; b < run->nsb; b++) {
        const uint8_t *w = run->codes + b * GEMM_X8_SB_BYTES;
        if (mr == 1) gx_prefetch_sb(w); /* GEMV streams the weights once */
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)w);
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 32));
        __m256i v2 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 64));
        __m256i v3 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 96));
        /* low nibbles: elements 4c..4c+3 of each row; high nibbles: 16+4c.. */
        __m256i l0 = _mm256_shuffle_epi8(lut, _mm256_and_si256(v0, m4));
        __m256i l1 = _mm256_shuffle_epi8(lut, _mm256_and_si256(v1, m4));
        __m256i l2 = _mm256_shuffle_epi8(lut, _mm256_and_si256(v2, m4));
        __m256i l3 = _mm256_shuffle_epi8(lut, _mm256_and_si256(v3, m4));
        __m256i h0 = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4));
        __m256i h1 = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4));
        __m256i h2 = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v2, 4), m4));
        __m256i h3 = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v3, 4), m4));
        __m256 wsl, wsh;
        if (nv) gx_ue4m3x16(run->scales + b * 16, &wsl, &wsh);
        else {
            wsh = wsl = gx_e8m0x8(run->scales + sidx * 8);
            if (++scnt == run->per) { scnt = 0; sidx++; }
        }
        for (size_t t = 0; t < mr; t++) {
            const int8_t *a = p->aq + (i0 + t) * p->kq + (ba + b) * 32;
            const float *s = p->as16 + (i0 + t) * nh + 2 * (ba + b);
            const int32_t *cr = p->acorr16 + (i0 + t) * nh + 2 * (ba + b);
            __m256i tl = _mm256_maddubs_epi16(l0, bcast4(a));
            tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(l1, bcast4(a + 4)));
            tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(l2, bcast4(a + 8)));
            tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(l3, bcast4(a + 12)));
            __m256i th = _mm256_maddubs_epi16(h0, bcast4(a + 16));
            th = _mm256_add_epi16(th, _mm256_maddubs_epi16(h1, bcast4(a + 20)));
            th = _mm256_add_epi16(th, _mm256_maddubs_epi16(h2, bcast4(a + 24)));
            th = _mm256_add_epi16(th, _mm256_maddubs_epi16(h3, bcast4(a + 28)));
            if (halves == 1) {
                __m256i S = _mm256_add_epi32(_mm256_madd_epi16(tl, ones), _mm256_madd_epi16(th, ones));
                S = _mm256_sub_epi32(S, _mm256_set1_epi32(cr[0])); /* the 32's correction */
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_mul_ps(wsl, _mm256_set1_ps(s[0])), acc[t]);
            } else {
                __m256i Sl = _mm256_sub_epi32(_mm256_madd_epi16(tl, ones), _mm256_set1_epi32(cr[0]));
                __m256i Sh = _mm256_sub_epi32(_mm256_madd_epi16(th, ones), _mm256_set1_epi32(cr[1]));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Sl), _mm256_mul_ps(wsl, _mm256_set1_ps(s[0])), acc[t]);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Sh), _mm256_mul_ps(wsh, _mm256_set1_ps(s[1])), acc[t]);
            }
        }
    }
}

/* A chunk of superblocks decoded once for many activation rows: the 8 nibble-lookup vectors
 * and the two scale vectors of each (320 bytes; 64 superblocks stay in L1). */
typedef struct {
    __m256i w[8];
    __m256 sl, sh;
} dec_sb;

ALWAYS_INLINE void x8_i8_decode(const gx_run *run, size_t b0, size_t nb, dec_sb *out, const int nv)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)k_lut_u));
    size_t sidx = b0 / run->per, scnt = b0 % run->per;
    for (size_t t = 0; t < nb; t++) {
        const uint8_t *w = run->codes + (b0 + t) * GEMM_X8_SB_BYTES;
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(w + 32 * c));
            out[t].w[c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
            out[t].w[4 + c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
        if (nv) {
            gx_ue4m3x16(run->scales + (b0 + t) * 16, &out[t].sl, &out[t].sh);
        } else {
            out[t].sl = out[t].sh = gx_e8m0x8(run->scales + sidx * 8);
            if (++scnt == run->per) { scnt = 0; sidx++; }
        }
    }
}

/* acc[t - i0] += decoded superblocks [0, nb) (activation superblocks ba..) for rows [i0, i1):
 * the accumulator stays in a register along the chunk. The same terms in the same order as
 * x8_i8_tile, so both give the same bits. */
ALWAYS_INLINE void x8_i8_dec_rows(const gemm_plan *p, const dec_sb *d, size_t nb, size_t ba, size_t i0, size_t i1,
                                  __m256 *acc, const int halves)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t nh = p->kq / 16;
    for (size_t i = i0; i < i1; i++) {
        const int8_t *a = p->aq + i * p->kq + ba * 32;
        const float *s = p->as16 + i * nh + 2 * ba;
        const int32_t *cr = p->acorr16 + i * nh + 2 * ba;
        __m256 ac = acc[i - i0];
        for (size_t b = 0; b < nb; b++, a += 32, s += 2, cr += 2) {
            __m256i tl = _mm256_maddubs_epi16(d[b].w[0], bcast4(a));
            tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(d[b].w[1], bcast4(a + 4)));
            tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(d[b].w[2], bcast4(a + 8)));
            tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(d[b].w[3], bcast4(a + 12)));
            __m256i th = _mm256_maddubs_epi16(d[b].w[4], bcast4(a + 16));
            th = _mm256_add_epi16(th, _mm256_maddubs_epi16(d[b].w[5], bcast4(a + 20)));
            th = _mm256_add_epi16(th, _mm256_maddubs_epi16(d[b].w[6], bcast4(a + 24)));
            th = _mm256_add_epi16(th, _mm256_maddubs_epi16(d[b].w[7], bcast4(a + 28)));
            if (halves == 1) {
                __m256i S = _mm256_add_epi32(_mm256_madd_epi16(tl, ones), _mm256_madd_epi16(th, ones));
                S = _mm256_sub_epi32(S, _mm256_set1_epi32(cr[0]));
                ac = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_mul_ps(d[b].sl, _mm256_set1_ps(s[0])), ac);
            } else {
                __m256i Sl = _mm256_sub_epi32(_mm256_madd_epi16(tl, ones), _mm256_set1_epi32(cr[0]));
                __m256i Sh = _mm256_sub_epi32(_mm256_madd_epi16(th, ones), _mm256_set1_epi32(cr[1]));
                ac = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Sl), _mm256_mul_ps(d[b].sl, _mm256_set1_ps(s[0])), ac);
                ac = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Sh), _mm256_mul_ps(d[b].sh, _mm256_set1_ps(s[1])), ac);
            }
        }
        acc[i - i0] = ac;
    }
}

/* Rows [i0, i1) against one run: one row decodes in registers as it streams (GEMV); several
 * rows share each chunk of GEMM_X8_CHUNK decoded superblocks. */
ALWAYS_INLINE void x8_i8_run(const gemm_plan *p, const gx_run *run, size_t ba, size_t i0, size_t i1, __m256 *acc,
                             const int nv, const int halves)
{
    if (i1 - i0 == 1) {
        x8_i8_tile(p, run, ba, i0, 1, acc, nv, halves);
        return;
    }
    dec_sb d[GEMM_X8_CHUNK];
    for (size_t b0 = 0; b0 < run->nsb; b0 += GEMM_X8_CHUNK) {
        size_t nb = run->nsb - b0 < GEMM_X8_CHUNK ? run->nsb - b0 : GEMM_X8_CHUNK;
        x8_i8_decode(run, b0, nb, d, nv);
        x8_i8_dec_rows(p, d, nb, ba + b0, i0, i1, acc, halves);
    }
}

ALWAYS_INLINE void x8_i8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1, const int nv,
                         const int halves)
{
    __m256 acc[I8_PANEL];
    for (size_t g = j0 / GEMM_X8_ROWS; g * GEMM_X8_ROWS < j1; g++) {
        size_t jr = g * GEMM_X8_ROWS;
        unsigned cnt = (unsigned)(j1 - jr < GEMM_X8_ROWS ? j1 - jr : GEMM_X8_ROWS);
        if (p->wpacked[g] & GEMM_X8_FLAG_SPECIAL) {
            lofp_gemm_generic_i8_x8(p, i0, i1, jr, jr + cnt);
            continue;
        }
        const uint8_t *gb = p->wpacked + p->x8.header + g * p->x8.group_bytes;
        gx_run run = { gb, gb + p->x8.kq * 4, p->x8.sbs, nv ? 1 : p->x8.sblock / 32 };
        for (size_t ip = i0; ip < i1; ip += I8_PANEL) {
            size_t ie = i1 - ip < I8_PANEL ? i1 : ip + I8_PANEL;
            for (size_t t = 0; t < ie - ip; t++) acc[t] = _mm256_setzero_ps();
            x8_i8_run(p, &run, 0, ip, ie, acc, nv, halves);
            for (size_t t = 0; t < ie - ip; t++) gx_store8(p, ip + t, jr, acc[t], cnt);
        }
    }
}

static void x8_i8_mx(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    if (p->halves == 1) x8_i8(p, i0, i1, j0, j1, 0, 1);
    else x8_i8(p, i0, i1, j0, j1, 0, 2);
}

static void x8_i8_nv(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    x8_i8(p, i0, i1, j0, j1, 1, 2);
}

/* rows weights, many activation rows: each group is repacked to x8 a chunk of superblocks at a
 * time (the scales one entry per superblock) and run through the same tile, so the result is
 * the x8 kernel's bit for bit. A chunk with a NaN scale sends the group to the exact kernel. */
ALWAYS_INLINE void rows_i8_gemm(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1, const int nv,
                                const int halves)
{
    uint8_t codes[GEMM_X8_CHUNK * GEMM_X8_SB_BYTES] __attribute__((aligned(64)));
    uint8_t scales[GEMM_X8_CHUNK * 16];
    __m256 acc[I8_PANEL];
    const size_t sbs = (p->kp + 31) / 32;
    for (size_t g = j0 / GEMM_X8_ROWS; g * GEMM_X8_ROWS < j1; g++) {
        size_t jr = g * GEMM_X8_ROWS;
        unsigned cnt = (unsigned)(j1 - jr < GEMM_X8_ROWS ? j1 - jr : GEMM_X8_ROWS);
        for (size_t ip = i0; ip < i1; ip += I8_PANEL) {
            size_t ie = i1 - ip < I8_PANEL ? i1 : ip + I8_PANEL;
            int special = 0;
            for (size_t t = 0; t < ie - ip; t++) acc[t] = _mm256_setzero_ps();
            for (size_t b0 = 0; b0 < sbs && !special; b0 += GEMM_X8_CHUNK) {
                size_t nb = sbs - b0 < GEMM_X8_CHUNK ? sbs - b0 : GEMM_X8_CHUNK;
                special = gx_rows_to_x8(p, g, b0, nb, codes, scales, nv);
                gx_run run = { codes, scales, nb, 1 };
                if (!special) x8_i8_run(p, &run, b0, ip, ie, acc, nv, halves);
            }
            if (special) lofp_gemm_generic_i8_rows(p, ip, ie, jr, jr + cnt);
            else for (size_t t = 0; t < ie - ip; t++) gx_store8(p, ip + t, jr, acc[t], cnt);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* rows weights                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* One superblock of one rows-layout weight row as int32 lanes: the 16 code bytes (element 2i
 * low, 2i+1 high) are re-interleaved to natural order so that lane l holds elements 4l..4l+3
 * (lanes 0-3: the first 16, 4-7: the last 16) against natural-order activations. `bytes` is 16,
 * or 8 for NVFP4's last half superblock (never read past the row). */
ALWAYS_INLINE __m256i rows_sb(const uint8_t *w, const int8_t *a, __m256i lut, unsigned bytes)
{
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m128i v = bytes == 16 ? _mm_loadu_si128((const __m128i *)(const void *)w)
                            : _mm_loadl_epi64((const __m128i *)(const void *)w);
    __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
    __m256i idx = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
    __m256i wu = _mm256_shuffle_epi8(lut, idx);
    __m256i p16 = _mm256_maddubs_epi16(wu, _mm256_loadu_si256((const __m256i *)(const void *)a));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

#define ROWS_NR 4 /* weight rows sharing one activation superblock's setup */

/* For activation row i and weight rows j..j+nr-1 (rows layout). Each lane's 12 * sum(a) over
 * its own 4 activations is subtracted in the lane, so every lane holds an exact signed partial
 * dot (|.| <= 4*12*128); the scale vector is (ws * as) of the first 16 in lanes 0-3 and of the
 * last 16 in lanes 4-7. Scales are decoded through the plan's table, NaN included. */
ALWAYS_INLINE void rows_i8_block(const gemm_plan *p, size_t i, size_t j, const unsigned nr, const int nv)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)k_lut_u));
    const __m256i twelve = _mm256_set1_epi8(12), ones = _mm256_set1_epi16(1);
    const size_t nh = p->kq / 16, full = p->kp / 32;
    const int8_t *q = p->aq + i * p->kq;
    const float *s16 = p->as16 + i * nh;
    __m256 acc[ROWS_NR];
    for (unsigned r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    const size_t per = nv ? 1 : p->wblock / 32;
    size_t sidx = 0, scnt = 0; /* MX: scale of superblock b (no division in the loop) */
    for (size_t b = 0; b < full + (p->kp % 32 != 0); b++) {
        int tail = b == full; /* NVFP4 with padded K = 16 mod 32: only the first half exists */
        size_t s0 = nv ? 2 * b : sidx, s1 = nv ? 2 * b + 1 : sidx;
        if (!nv && ++scnt == per) { scnt = 0; sidx++; }
        __m256i av = _mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * b));
        __m256i corr = _mm256_madd_epi16(_mm256_maddubs_epi16(twelve, av), ones);
        for (unsigned r = 0; r < nr; r++) {
            const uint8_t *wr = p->wcodes + (j + r) * p->wrow_bytes, *sr = p->wscales + (j + r) * p->wnsc;
            if ((b & 3) == 0) _mm_prefetch((const char *)(wr + 16 * b) + GEMM_PF_ROW_BYTES, _MM_HINT_T0);
            __m256i S = _mm256_sub_epi32(rows_sb(wr + 16 * b, q + 32 * b, lut, tail ? 8u : 16u), corr);
            float slo = p->slut[sr[s0]] * s16[2 * b];
            float shi = tail ? 0.0f : p->slut[sr[s1]] * s16[2 * b + 1];
            __m256 sc = _mm256_set_m128(_mm_set1_ps(shi), _mm_set1_ps(slo));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), sc, acc[r]);
        }
    }
    for (unsigned r = 0; r < nr; r++) {
        /* 8 lane sums, each a sum of exact terms, added pairwise (docs/GEMM.md: exactness) */
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        lofp_gemm_store(p, i, j + r, _mm_cvtss_f32(s));
    }
}

/* rows weights: one activation row at a time below GEMM_BIG_M (each weight byte is used once
 * or a few times: decoding in place is cheaper than repacking), the repacked x8 tile above. */
ALWAYS_INLINE void rows_i8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1, const int nv,
                           const int halves)
{
    if (p->m >= GEMM_BIG_M) {
        rows_i8_gemm(p, i0, i1, j0, j1, nv, halves);
        return;
    }
    for (size_t j = j0; j < j1; j += ROWS_NR) {
        unsigned nr = (unsigned)(j1 - j < ROWS_NR ? j1 - j : ROWS_NR);
        for (size_t i = i0; i < i1; i++) {
            if (nr == ROWS_NR) rows_i8_block(p, i, j, ROWS_NR, nv);
            else rows_i8_block(p, i, j, nr, nv);
        }
    }
}

static void rows_i8_mx(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    if (p->halves == 1) rows_i8(p, i0, i1, j0, j1, 0, 1);
    else rows_i8(p, i0, i1, j0, j1, 0, 2);
}

static void rows_i8_nv(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    rows_i8(p, i0, i1, j0, j1, 1, 2);
}

/* ------------------------------------------------------------------------------------------ */
/* MXINT8 activation quantizer (block 32, FLOOR, RNE): lofp_quantize's codes, bit for bit      */
/* ------------------------------------------------------------------------------------------ */

/* 8 values of a dense row as fp32 (exact widening). */
ALWAYS_INLINE __m256 load8(lofp_dtype dt, const void *x, size_t i)
{
    if (dt == LOFP_DTYPE_F32) return _mm256_loadu_ps((const float *)x + i);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)x + i));
    if (dt == LOFP_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

ALWAYS_INLINE int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static size_t quant_mxint8(lofp_dtype dt, const void *a, size_t lda, size_t m, size_t k, size_t kq,
                           uint32_t block, int halves, int8_t *q, float *s16, int32_t *corr16)
{
    if (block != 32) return 0; /* the driver only sends block 32 here */
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i pk = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const size_t nh = kq / 16, kp = (k + 31) / 32 * 32;
    for (size_t i = 0; i < m; i++) {
        const void *row = dt == LOFP_DTYPE_F32 ? (const void *)((const float *)a + i * lda)
                                               : (const void *)((const uint16_t *)a + i * lda);
        for (size_t e0 = 0; e0 < kq; e0 += 32) {
            int8_t *qo = q + i * kq + e0;
            float *so = s16 + i * nh + e0 / 16;
            int32_t *co = corr16 + i * nh + e0 / 16;
            if (e0 >= kp) { /* past A's own padding: nothing */
                memset(qo, 0, 32);
                so[0] = so[1] = 0.0f;
                co[0] = co[1] = 0;
                continue;
            }
            __m256 x[4];
            if (e0 + 32 <= k) {
                for (int c = 0; c < 4; c++) x[c] = load8(dt, row, e0 + 8 * (size_t)c);
            } else { /* the partial last block, zero-padded, without reading past the row */
                float t[32] = { 0 };
                for (size_t e = e0; e < k; e++) t[e - e0] = lofp_load_f32(dt, row, e);
                for (int c = 0; c < 4; c++) x[c] = _mm256_loadu_ps(t + 8 * c);
            }
            __m256i ab = _mm256_max_epi32(
                _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(x[0]), absm),
                                 _mm256_and_si256(_mm256_castps_si256(x[1]), absm)),
                _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(x[2]), absm),
                                 _mm256_and_si256(_mm256_castps_si256(x[3]), absm)));
            __m128i m1 = _mm_max_epi32(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1));
            m1 = _mm_max_epi32(m1, _mm_shuffle_epi32(m1, 0x4E));
            m1 = _mm_max_epi32(m1, _mm_shuffle_epi32(m1, 0xB1));
            uint32_t amax = (uint32_t)_mm_cvtsi128_si32(m1); /* |x| bits: NaN/Inf are the largest */
            if (amax >= 0x7F800000u) {
                for (size_t e = e0; e < k && e < e0 + 32; e++)
                    if (!isfinite(lofp_load_f32(dt, row, e))) return i * k + e + 1;
                return i * k + e0 + 1;
            }
            /* FLOOR with emax 0: the scale byte is amax's exponent field (0 for subnormal amax
             * and for an all-zero block) */
            uint32_t sb = amax >> 23;
            /* elements x / 2^(sb-127): one exact power-of-two multiply (2^-127 is the
             * subnormal 0x00400000), then * 64 (exact), then RNE to an integer */
            float mult = lofp_bits_f32(sb == 254 ? 0x00400000u : (254u - sb) << 23);
            __m256 mv = _mm256_set1_ps(mult), s64 = _mm256_set1_ps(64.0f);
            __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127), c[4];
            for (int t = 0; t < 4; t++) {
                c[t] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_mul_ps(x[t], mv), s64));
                c[t] = _mm256_max_epi32(_mm256_min_epi32(c[t], lim), nlim);
            }
            __m256i p16 = _mm256_packs_epi32(c[0], c[1]), p16b = _mm256_packs_epi32(c[2], c[3]);
            __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16, p16b), pk);
            _mm256_storeu_si256((__m256i *)(void *)qo, p8);
            if (halves == 1) {
                co[0] = 12 * hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3])));
                co[1] = 0;
            } else {
                co[0] = 12 * hsum_epi32(_mm256_add_epi32(c[0], c[1]));
                co[1] = 12 * hsum_epi32(_mm256_add_epi32(c[2], c[3]));
            }
            /* scale of each 16: 2^(sb-127) * 2^-6 (MXINT8 unit) * 1/2 (doubled weights) */
            float sc = lofp_bits_f32(sb >= 8 ? (sb - 7) << 23 : 1u << (sb + 15));
            so[0] = so[1] = sc;
        }
    }
    return 0;
}

void lofp_gemm_kernels_avx2_i8(gemm_kernels *k)
{
    k->i8_x8[GEMM_W_E2M1_E8M0] = x8_i8_mx;
    k->i8_x8[GEMM_W_E2M1_UE4M3] = x8_i8_nv;
    k->i8_rows[GEMM_W_E2M1_E8M0] = rows_i8_mx;
    k->i8_rows[GEMM_W_E2M1_UE4M3] = rows_i8_nv;
    k->quant_mxint8 = quant_mxint8;
}

#else
void lofp_gemm_kernels_avx2_i8(gemm_kernels *k) { (void)k; }
#endif

/* gemm_i8_avx512.c -- integer-dot GEMV/GEMM for E2M1 weights (MXFP4, NVFP4) against int8
 * activations with AVX-512 VNNI (vpdpbusd: four u8 x s8 products summed into an int32 lane, no
 * int16 stage), and the MXINT8 activation quantizer at 512 bits. Only static helpers plus the
 * table filler; compiled with the *_avx512.c flags and installed only when the CPU has AVX-512
 * F/BW/VL + VNNI (gemm.c).
 *
 * The weights are the AVX2 kernel's: a vpshufb maps each nibble to 2 * E2M1 + 12 (unsigned, in
 * [0, 24]) and the activation side's 12 * sum(a) is subtracted from the int32 sum. One 64-byte
 * load holds two x8 chunks (rows 0..7 of chunk c, then of chunk c + 1); a dword permute puts
 * them in pairs, lane 2r = row r chunk c, lane 2r + 1 = row r chunk c + 1, so that one 8-byte
 * broadcast of the activations (elements 4c .. 4c + 7) feeds both lanes of every row. After the
 * superblock's vpdpbusd the two lanes of a row are added (exact int32): both then hold the
 * row's block sum S, and the fp32 step is the AVX2 kernel's, (float)S * (ws * as) accumulated
 * in K order, duplicated in the pair. Same terms, same order: bit for bit the portable kernel
 * (docs/GEMM.md §3.1). */
#include "gemm/gemm_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <math.h>

#include "gemm_avx2.h"

/* 2 * E2M1 + 12 for each nibble */
static const uint8_t k_lut_u[16] = { 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0 };

/* The AVX2 table's rows kernels (small m), kept before this file overrides the entries. */
static gemm_kernel_fn g_avx2_rows[GEMM_W_KINDS_];

ALWAYS_INLINE __m512i lut512(void)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)k_lut_u));
}

ALWAYS_INLINE __m512i pair_idx(void)
{
    return _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
}

ALWAYS_INLINE __m512 dup8(__m256 v) /* lanes 2r and 2r + 1 = v[r] */
{
    const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(v));
}

ALWAYS_INLINE __m512i bcast8(const int8_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* One superblock decoded: w[0] low nibbles of chunks 0,1, w[1] of chunks 2,3, w[2], w[3] the
 * high nibbles (elements 16..31), each in pair order; sl / sh the weight scales of the first and
 * last 16 elements, duplicated in pairs. */
typedef struct {
    __m512i w[4];
    __m512 sl, sh;
} dec_sb;

ALWAYS_INLINE void decode_sb(const uint8_t *w, const uint8_t *sc, const int nv, dec_sb *d)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), lut = lut512(), pidx = pair_idx();
    __m512i v01 = _mm512_loadu_si512((const void *)w), v23 = _mm512_loadu_si512((const void *)(w + 64));
    d->w[0] = _mm512_permutexvar_epi32(pidx, _mm512_shuffle_epi8(lut, _mm512_and_si512(v01, m4)));
    d->w[1] = _mm512_permutexvar_epi32(pidx, _mm512_shuffle_epi8(lut, _mm512_and_si512(v23, m4)));
    d->w[2] = _mm512_permutexvar_epi32(pidx, _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v01, 4), m4)));
    d->w[3] = _mm512_permutexvar_epi32(pidx, _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v23, 4), m4)));
    if (nv) {
        __m256 lo, hi;
        gx_ue4m3x16(sc, &lo, &hi);
        d->sl = dup8(lo);
        d->sh = dup8(hi);
    } else {
        d->sl = d->sh = dup8(gx_e8m0x8(sc));
    }
}

/* acc += the superblock's terms for activation superblock a (32 int8), its per-16 scales s and
 * corrections cr. */
ALWAYS_INLINE __m512 dot_sb(const dec_sb *d, const int8_t *a, const float *s, const int32_t *cr, __m512 acc,
                            const int halves)
{
    if (halves == 1) {
        __m512i S = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d->w[0], bcast8(a));
        S = _mm512_dpbusd_epi32(S, d->w[1], bcast8(a + 8));
        S = _mm512_dpbusd_epi32(S, d->w[2], bcast8(a + 16));
        S = _mm512_dpbusd_epi32(S, d->w[3], bcast8(a + 24));
        S = _mm512_add_epi32(S, _mm512_shuffle_epi32(S, _MM_PERM_CDAB));
        S = _mm512_sub_epi32(S, _mm512_set1_epi32(cr[0]));
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d->sl, _mm512_set1_ps(s[0])), acc);
    }
    __m512i Sl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d->w[0], bcast8(a));
    __m512i Sh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d->w[2], bcast8(a + 16));
    Sl = _mm512_dpbusd_epi32(Sl, d->w[1], bcast8(a + 8));
    Sh = _mm512_dpbusd_epi32(Sh, d->w[3], bcast8(a + 24));
    Sl = _mm512_add_epi32(Sl, _mm512_shuffle_epi32(Sl, _MM_PERM_CDAB));
    Sh = _mm512_add_epi32(Sh, _mm512_shuffle_epi32(Sh, _MM_PERM_CDAB));
    Sl = _mm512_sub_epi32(Sl, _mm512_set1_epi32(cr[0]));
    Sh = _mm512_sub_epi32(Sh, _mm512_set1_epi32(cr[1]));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Sl), _mm512_mul_ps(d->sl, _mm512_set1_ps(s[0])), acc);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(Sh), _mm512_mul_ps(d->sh, _mm512_set1_ps(s[1])), acc);
}

/* The 8 rows' results: the even lanes. */
ALWAYS_INLINE __m256 even8(__m512 acc)
{
    return _mm256_castsi256_ps(_mm512_cvtepi64_epi32(_mm512_castps_si512(acc)));
}

#define I8_PANEL 64 /* activation rows whose accumulators live across decode chunks */

/* ---- GEMM: two groups (16 rows) per tile, one row per lane ----------------------------------
 * Lane r of a vector is row r of group g (r < 8) or row r - 8 of group g + 1: a 32-byte chunk
 * of each group side by side. Against a 4-byte broadcast of the activations, one vpdpbusd
 * gives each of the 16 rows its 4 products of that chunk, so a superblock is eight vpdpbusd
 * (two chains of four, added: the same exact int32 S) and one fp32 step for 16 rows: no pair
 * fold, half the fp32 work per product of the 8-row tile. Same terms, same order. */
#define PAIR_CHUNK 32 /* superblocks decoded at a time: 32 x 640 bytes stay in L1 */

typedef struct {
    __m512i w[8]; /* low nibbles of chunks 0..3, then high nibbles */
    __m512 sl, sh;
} dec2_sb;

ALWAYS_INLINE __m512 join8(__m256 a, __m256 b)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(a)), _mm256_castps_pd(b), 1));
}

ALWAYS_INLINE void decode2_sb(const uint8_t *wa, const uint8_t *wb, const uint8_t *sa, const uint8_t *sb, const int nv,
                              dec2_sb *d)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), lut = lut512();
    for (int c = 0; c < 4; c++) {
        __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(wa + 32 * c))),
                                       _mm256_loadu_si256((const __m256i *)(const void *)(wb + 32 * c)), 1);
        d->w[c] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
        d->w[4 + c] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
    if (nv) {
        __m256 la, ha, lb, hb;
        gx_ue4m3x16(sa, &la, &ha);
        gx_ue4m3x16(sb, &lb, &hb);
        d->sl = join8(la, lb);
        d->sh = join8(ha, hb);
    } else {
        d->sl = d->sh = join8(gx_e8m0x8(sa), gx_e8m0x8(sb));
    }
}

ALWAYS_INLINE __m512i bcast4z(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

ALWAYS_INLINE __m512 dot2_sb(const dec2_sb *d, const int8_t *a, const float *s, const int32_t *cr, __m512 acc,
                             const int halves)
{
    __m512i Sl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d->w[0], bcast4z(a));
    __m512i Sh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d->w[4], bcast4z(a + 16));
    Sl = _mm512_dpbusd_epi32(Sl, d->w[1], bcast4z(a + 4));
    Sh = _mm512_dpbusd_epi32(Sh, d->w[5], bcast4z(a + 20));
    Sl = _mm512_dpbusd_epi32(Sl, d->w[2], bcast4z(a + 8));
    Sh = _mm512_dpbusd_epi32(Sh, d->w[6], bcast4z(a + 24));
    Sl = _mm512_dpbusd_epi32(Sl, d->w[3], bcast4z(a + 12));
    Sh = _mm512_dpbusd_epi32(Sh, d->w[7], bcast4z(a + 28));
    if (halves == 1) {
        __m512i S = _mm512_sub_epi32(_mm512_add_epi32(Sl, Sh), _mm512_set1_epi32(cr[0]));
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d->sl, _mm512_set1_ps(s[0])), acc);
    }
    Sl = _mm512_sub_epi32(Sl, _mm512_set1_epi32(cr[0]));
    Sh = _mm512_sub_epi32(Sh, _mm512_set1_epi32(cr[1]));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Sl), _mm512_mul_ps(d->sl, _mm512_set1_ps(s[0])), acc);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(Sh), _mm512_mul_ps(d->sh, _mm512_set1_ps(s[1])), acc);
}

/* Rows [i0, i1) against two runs of the same length (groups g, g + 1), activation superblock
 * ba first; acc lanes as above. */
ALWAYS_INLINE void run_rows2(const gemm_plan *p, const gx_run *ra, const gx_run *rb, size_t ba, size_t i0, size_t i1,
                             __m512 *acc, const int nv, const int halves)
{
    dec2_sb d[PAIR_CHUNK];
    const size_t nh = p->kq / 16;
    for (size_t b0 = 0; b0 < ra->nsb; b0 += PAIR_CHUNK) {
        size_t nb = ra->nsb - b0 < PAIR_CHUNK ? ra->nsb - b0 : PAIR_CHUNK;
        size_t sidx = b0 / ra->per, scnt = b0 % ra->per;
        for (size_t t = 0; t < nb; t++) {
            size_t so = nv ? (b0 + t) * 16 : sidx * 8;
            decode2_sb(ra->codes + (b0 + t) * GEMM_X8_SB_BYTES, rb->codes + (b0 + t) * GEMM_X8_SB_BYTES,
                       ra->scales + so, rb->scales + so, nv, &d[t]);
            if (!nv && ++scnt == ra->per) { scnt = 0; sidx++; }
        }
        const size_t bb = ba + b0;
        size_t i = i0;
        for (; i + 2 <= i1; i += 2) {
            const int8_t *a0 = p->aq + i * p->kq + bb * 32, *a1 = a0 + p->kq;
            const float *s0 = p->as16 + i * nh + 2 * bb, *s1 = s0 + nh;
            const int32_t *c0 = p->acorr16 + i * nh + 2 * bb, *c1 = c0 + nh;
            __m512 x0 = acc[i - i0], x1 = acc[i + 1 - i0];
            for (size_t b = 0; b < nb; b++) {
                x0 = dot2_sb(&d[b], a0 + 32 * b, s0 + 2 * b, c0 + 2 * b, x0, halves);
                x1 = dot2_sb(&d[b], a1 + 32 * b, s1 + 2 * b, c1 + 2 * b, x1, halves);
            }
            acc[i - i0] = x0;
            acc[i + 1 - i0] = x1;
        }
        for (; i < i1; i++) {
            const int8_t *a0 = p->aq + i * p->kq + bb * 32;
            const float *s0 = p->as16 + i * nh + 2 * bb;
            const int32_t *c0 = p->acorr16 + i * nh + 2 * bb;
            __m512 x0 = acc[i - i0];
            for (size_t b = 0; b < nb; b++) x0 = dot2_sb(&d[b], a0 + 32 * b, s0 + 2 * b, c0 + 2 * b, x0, halves);
            acc[i - i0] = x0;
        }
    }
}

/* Stores the 16 lanes: rows jr.. of group g (cnt_a valid) and of group g + 1 (cnt_b valid). */
ALWAYS_INLINE void store16(const gemm_plan *p, size_t i, size_t jr, __m512 acc, unsigned cnt_a, unsigned cnt_b)
{
    gx_store8(p, i, jr, _mm512_castps512_ps256(acc), cnt_a);
    gx_store8(p, i, jr + GEMM_X8_ROWS, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)), cnt_b);
}

/* GEMV: one activation row against a run, decoding each superblock in registers as the weights
 * stream past (prefetched ahead). The run's superblock 0 is activation superblock ba. */
ALWAYS_INLINE __m512 run_one(const gemm_plan *p, const gx_run *run, size_t ba, size_t i, __m512 acc,
                             const int nv, const int halves)
{
    const size_t nh = p->kq / 16;
    const int8_t *a = p->aq + i * p->kq + ba * 32;
    const float *s = p->as16 + i * nh + 2 * ba;
    const int32_t *cr = p->acorr16 + i * nh + 2 * ba;
    size_t sidx = 0, scnt = 0;
    for (size_t b = 0; b < run->nsb; b++, a += 32, s += 2, cr += 2) {
        const uint8_t *w = run->codes + b * GEMM_X8_SB_BYTES;
        gx_prefetch_sb(w);
        dec_sb d;
        decode_sb(w, nv ? run->scales + b * 16 : run->scales + sidx * 8, nv, &d);
        if (!nv && ++scnt == run->per) { scnt = 0; sidx++; }
        acc = dot_sb(&d, a, s, cr, acc, halves);
    }
    return acc;
}

/* Rows [i0, i1) against one run: GEMV decodes in registers; several rows share each chunk of
 * GEMM_X8_CHUNK decoded superblocks (20 KiB, in L1), two rows at a time (two independent
 * accumulator chains). */
ALWAYS_INLINE void run_rows(const gemm_plan *p, const gx_run *run, size_t ba, size_t i0, size_t i1, __m512 *acc,
                            const int nv, const int halves)
{
    if (i1 - i0 == 1) {
        acc[0] = run_one(p, run, ba, i0, acc[0], nv, halves);
        return;
    }
    dec_sb d[GEMM_X8_CHUNK];
    const size_t nh = p->kq / 16;
    for (size_t b0 = 0; b0 < run->nsb; b0 += GEMM_X8_CHUNK) {
        size_t nb = run->nsb - b0 < GEMM_X8_CHUNK ? run->nsb - b0 : GEMM_X8_CHUNK;
        size_t sidx = b0 / run->per, scnt = b0 % run->per;
        for (size_t t = 0; t < nb; t++) {
            decode_sb(run->codes + (b0 + t) * GEMM_X8_SB_BYTES,
                      nv ? run->scales + (b0 + t) * 16 : run->scales + sidx * 8, nv, &d[t]);
            if (!nv && ++scnt == run->per) { scnt = 0; sidx++; }
        }
        const size_t bb = ba + b0;
        size_t i = i0;
        for (; i + 2 <= i1; i += 2) {
            const int8_t *a0 = p->aq + i * p->kq + bb * 32, *a1 = a0 + p->kq;
            const float *s0 = p->as16 + i * nh + 2 * bb, *s1 = s0 + nh;
            const int32_t *c0 = p->acorr16 + i * nh + 2 * bb, *c1 = c0 + nh;
            __m512 x0 = acc[i - i0], x1 = acc[i + 1 - i0];
            for (size_t b = 0; b < nb; b++) {
                x0 = dot_sb(&d[b], a0 + 32 * b, s0 + 2 * b, c0 + 2 * b, x0, halves);
                x1 = dot_sb(&d[b], a1 + 32 * b, s1 + 2 * b, c1 + 2 * b, x1, halves);
            }
            acc[i - i0] = x0;
            acc[i + 1 - i0] = x1;
        }
        for (; i < i1; i++) {
            const int8_t *a0 = p->aq + i * p->kq + bb * 32;
            const float *s0 = p->as16 + i * nh + 2 * bb;
            const int32_t *c0 = p->acorr16 + i * nh + 2 * bb;
            __m512 x0 = acc[i - i0];
            for (size_t b = 0; b < nb; b++) x0 = dot_sb(&d[b], a0 + 32 * b, s0 + 2 * b, c0 + 2 * b, x0, halves);
            acc[i - i0] = x0;
        }
    }
}

ALWAYS_INLINE void x8_i8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1, const int nv,
                         const int halves)
{
    __m512 acc[I8_PANEL];
    for (size_t g = j0 / GEMM_X8_ROWS; g * GEMM_X8_ROWS < j1; g++) {
        size_t jr = g * GEMM_X8_ROWS;
        unsigned cnt = (unsigned)(j1 - jr < GEMM_X8_ROWS ? j1 - jr : GEMM_X8_ROWS);
        if (i1 - i0 > 1 && (g + 1) * GEMM_X8_ROWS < j1 && !(p->wpacked[g] & GEMM_X8_FLAG_SPECIAL) &&
            !(p->wpacked[g + 1] & GEMM_X8_FLAG_SPECIAL)) { /* two groups at once */
            size_t jr2 = jr + GEMM_X8_ROWS;
            unsigned cnt2 = (unsigned)(j1 - jr2 < GEMM_X8_ROWS ? j1 - jr2 : GEMM_X8_ROWS);
            const uint8_t *ga = p->wpacked + p->x8.header + g * p->x8.group_bytes, *gb2 = ga + p->x8.group_bytes;
            gx_run ra = { ga, ga + p->x8.kq * 4, p->x8.sbs, nv ? 1 : p->x8.sblock / 32 };
            gx_run rb = { gb2, gb2 + p->x8.kq * 4, p->x8.sbs, ra.per };
            for (size_t ip = i0; ip < i1; ip += I8_PANEL) {
                size_t ie = i1 - ip < I8_PANEL ? i1 : ip + I8_PANEL;
                for (size_t t = 0; t < ie - ip; t++) acc[t] = _mm512_setzero_ps();
                run_rows2(p, &ra, &rb, 0, ip, ie, acc, nv, halves);
                for (size_t t = 0; t < ie - ip; t++) store16(p, ip + t, jr, acc[t], cnt, cnt2);
            }
            g++;
            continue;
        }
        if (p->wpacked[g] & GEMM_X8_FLAG_SPECIAL) {
            lofp_gemm_generic_i8_x8(p, i0, i1, jr, jr + cnt);
            continue;
        }
        const uint8_t *gb = p->wpacked + p->x8.header + g * p->x8.group_bytes;
        gx_run run = { gb, gb + p->x8.kq * 4, p->x8.sbs, nv ? 1 : p->x8.sblock / 32 };
        for (size_t ip = i0; ip < i1; ip += I8_PANEL) {
            size_t ie = i1 - ip < I8_PANEL ? i1 : ip + I8_PANEL;
            for (size_t t = 0; t < ie - ip; t++) acc[t] = _mm512_setzero_ps();
            run_rows(p, &run, 0, ip, ie, acc, nv, halves);
            for (size_t t = 0; t < ie - ip; t++) gx_store8(p, ip + t, jr, even8(acc[t]), cnt);
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

/* rows weights, many activation rows: repacked to x8 a chunk at a time (gemm_avx2.h) and run
 * through the same tile, so the result is the x8 kernel's bit for bit; a chunk with a NaN scale
 * sends the group to the exact kernel. Small m: the AVX2 rows kernel. */
ALWAYS_INLINE void rows_i8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1, const int nv,
                           const int halves)
{
    uint8_t codes[GEMM_X8_CHUNK * GEMM_X8_SB_BYTES] __attribute__((aligned(64)));
    uint8_t codes2[GEMM_X8_CHUNK * GEMM_X8_SB_BYTES] __attribute__((aligned(64)));
    uint8_t scales[GEMM_X8_CHUNK * 16], scales2[GEMM_X8_CHUNK * 16];
    __m512 acc[I8_PANEL];
    const size_t sbs = (p->kp + 31) / 32;
    for (size_t g = j0 / GEMM_X8_ROWS; g * GEMM_X8_ROWS < j1; g++) {
        size_t jr = g * GEMM_X8_ROWS;
        unsigned cnt = (unsigned)(j1 - jr < GEMM_X8_ROWS ? j1 - jr : GEMM_X8_ROWS);
        if ((g + 1) * GEMM_X8_ROWS < j1) { /* two groups at once; a NaN scale in either: both exact */
            size_t jr2 = jr + GEMM_X8_ROWS;
            unsigned cnt2 = (unsigned)(j1 - jr2 < GEMM_X8_ROWS ? j1 - jr2 : GEMM_X8_ROWS);
            for (size_t ip = i0; ip < i1; ip += I8_PANEL) {
                size_t ie = i1 - ip < I8_PANEL ? i1 : ip + I8_PANEL;
                int special = 0;
                for (size_t t = 0; t < ie - ip; t++) acc[t] = _mm512_setzero_ps();
                for (size_t b0 = 0; b0 < sbs && !special; b0 += GEMM_X8_CHUNK) {
                    size_t nb = sbs - b0 < GEMM_X8_CHUNK ? sbs - b0 : GEMM_X8_CHUNK;
                    special = gx_rows_to_x8(p, g, b0, nb, codes, scales, nv);
                    special |= gx_rows_to_x8(p, g + 1, b0, nb, codes2, scales2, nv);
                    gx_run ra = { codes, scales, nb, 1 }, rb = { codes2, scales2, nb, 1 };
                    if (!special) run_rows2(p, &ra, &rb, b0, ip, ie, acc, nv, halves);
                }
                if (special) lofp_gemm_generic_i8_rows(p, ip, ie, jr, jr2 + cnt2);
                else for (size_t t = 0; t < ie - ip; t++) store16(p, ip + t, jr, acc[t], cnt, cnt2);
            }
            g++;
            continue;
        }
        for (size_t ip = i0; ip < i1; ip += I8_PANEL) {
            size_t ie = i1 - ip < I8_PANEL ? i1 : ip + I8_PANEL;
            int special = 0;
            for (size_t t = 0; t < ie - ip; t++) acc[t] = _mm512_setzero_ps();
            for (size_t b0 = 0; b0 < sbs && !special; b0 += GEMM_X8_CHUNK) {
                size_t nb = sbs - b0 < GEMM_X8_CHUNK ? sbs - b0 : GEMM_X8_CHUNK;
                special = gx_rows_to_x8(p, g, b0, nb, codes, scales, nv);
                gx_run run = { codes, scales, nb, 1 };
                if (!special) run_rows(p, &run, b0, ip, ie, acc, nv, halves);
            }
            if (special) lofp_gemm_generic_i8_rows(p, ip, ie, jr, jr + cnt);
            else for (size_t t = 0; t < ie - ip; t++) gx_store8(p, ip + t, jr, even8(acc[t]), cnt);
        }
    }
}

static void rows_i8_mx(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    if (p->m < GEMM_BIG_M) { g_avx2_rows[GEMM_W_E2M1_E8M0](p, i0, i1, j0, j1); return; }
    if (p->halves == 1) rows_i8(p, i0, i1, j0, j1, 0, 1);
    else rows_i8(p, i0, i1, j0, j1, 0, 2);
}

static void rows_i8_nv(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    if (p->m < GEMM_BIG_M) { g_avx2_rows[GEMM_W_E2M1_UE4M3](p, i0, i1, j0, j1); return; }
    rows_i8(p, i0, i1, j0, j1, 1, 2);
}

/* ------------------------------------------------------------------------------------------ */
/* MXINT8 activation quantizer (block 32, FLOOR, RNE): lofp_quantize's codes, bit for bit      */
/* ------------------------------------------------------------------------------------------ */

/* The AVX2 quantizer's steps (x86/gemm_i8_avx2.c) on two blocks per step: 16-lane loads, the
 * block amax by an unsigned max reduce within each 256-bit half, the scale byte = amax's
 * exponent field, x * 2^(127 - sb) * 64 rounded to nearest even by vcvtps2dq, saturated to
 * [-127, 127] by vpmovsdb after a max with -127 (the pack saturates at +127 by itself). */
ALWAYS_INLINE __m512 load16(lofp_dtype dt, const void *x, size_t i)
{
    if (dt == LOFP_DTYPE_F32) return _mm512_loadu_ps((const float *)x + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)x + i));
    if (dt == LOFP_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static size_t quant_mxint8(lofp_dtype dt, const void *a, size_t lda, size_t m, size_t k, size_t kq,
                           uint32_t block, int halves, int8_t *q, float *s16, int32_t *corr16)
{
    if (block != 32) return 0; /* the driver only sends block 32 here */
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF);
    const size_t nh = kq / 16, kp = (k + 31) / 32 * 32;
    const size_t es = dt == LOFP_DTYPE_F32 ? 4 : 2;
    for (size_t i = 0; i < m; i++) {
        const uint8_t *row = (const uint8_t *)a + i * lda * es;
        size_t e0 = 0;
        /* two full blocks per step */
        for (; e0 + 64 <= k; e0 += 64) {
            _mm_prefetch((const char *)(row + (e0 + 1024) * es), _MM_HINT_T0);
            _mm_prefetch((const char *)(row + (e0 + 1024) * es + 64), _MM_HINT_T0);
            if (es == 4) {
                _mm_prefetch((const char *)(row + (e0 + 1024) * es + 128), _MM_HINT_T0);
                _mm_prefetch((const char *)(row + (e0 + 1024) * es + 192), _MM_HINT_T0);
            }
            __m512 x0 = load16(dt, row, e0), x1 = load16(dt, row, e0 + 16);
            __m512 x2 = load16(dt, row, e0 + 32), x3 = load16(dt, row, e0 + 48);
            /* block A = x0, x1; block B = x2, x3 */
            __m512i mA = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x0), absm),
                                          _mm512_and_si512(_mm512_castps_si512(x1), absm));
            __m512i mB = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x2), absm),
                                          _mm512_and_si512(_mm512_castps_si512(x3), absm));
            uint32_t amA = _mm512_reduce_max_epu32(mA), amB = _mm512_reduce_max_epu32(mB);
            if (LOFP_UNLIKELY(amA >= 0x7F800000u || amB >= 0x7F800000u)) {
                for (size_t e = e0; e < e0 + 64; e++)
                    if (!isfinite(lofp_load_f32(dt, row, e))) return i * k + e + 1;
                return i * k + e0 + 1;
            }
            uint32_t sbA = amA >> 23, sbB = amB >> 23;
            __m512 mvA = _mm512_set1_ps(lofp_bits_f32(sbA == 254 ? 0x00400000u : (254u - sbA) << 23));
            __m512 mvB = _mm512_set1_ps(lofp_bits_f32(sbB == 254 ? 0x00400000u : (254u - sbB) << 23));
            const __m512 s64 = _mm512_set1_ps(64.0f);
            const __m512i nlim = _mm512_set1_epi32(-127);
            __m512i c0 = _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(x0, mvA), s64)), nlim);
            __m512i c1 = _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(x1, mvA), s64)), nlim);
            __m512i c2 = _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(x2, mvB), s64)), nlim);
            __m512i c3 = _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(x3, mvB), s64)), nlim);
            /* saturating narrows: > 127 (only 128, from an RNE tie at the top) becomes 127 */
            c0 = _mm512_min_epi32(c0, _mm512_set1_epi32(127));
            c1 = _mm512_min_epi32(c1, _mm512_set1_epi32(127));
            c2 = _mm512_min_epi32(c2, _mm512_set1_epi32(127));
            c3 = _mm512_min_epi32(c3, _mm512_set1_epi32(127));
            int8_t *qo = q + i * kq + e0;
            _mm_storeu_si128((__m128i *)(void *)qo, _mm512_cvtepi32_epi8(c0));
            _mm_storeu_si128((__m128i *)(void *)(qo + 16), _mm512_cvtepi32_epi8(c1));
            _mm_storeu_si128((__m128i *)(void *)(qo + 32), _mm512_cvtepi32_epi8(c2));
            _mm_storeu_si128((__m128i *)(void *)(qo + 48), _mm512_cvtepi32_epi8(c3));
            float *so = s16 + i * nh + e0 / 16;
            int32_t *co = corr16 + i * nh + e0 / 16;
            if (halves == 1) {
                co[0] = 12 * _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
                co[1] = 0;
                co[2] = 12 * _mm512_reduce_add_epi32(_mm512_add_epi32(c2, c3));
                co[3] = 0;
            } else {
                co[0] = 12 * _mm512_reduce_add_epi32(c0);
                co[1] = 12 * _mm512_reduce_add_epi32(c1);
                co[2] = 12 * _mm512_reduce_add_epi32(c2);
                co[3] = 12 * _mm512_reduce_add_epi32(c3);
            }
            /* scale of each 16: 2^(sb-127) * 2^-6 (MXINT8 unit) * 1/2 (doubled weights) */
            so[0] = so[1] = lofp_bits_f32(sbA >= 8 ? (sbA - 7) << 23 : 1u << (sbA + 15));
            so[2] = so[3] = lofp_bits_f32(sbB >= 8 ? (sbB - 7) << 23 : 1u << (sbB + 15));
        }
        /* the rest one block at a time: a full one, the partial last one (zero-padded, never
         * read past the row), and zeros past A's own padding */
        for (; e0 < kq; e0 += 32) {
            int8_t *qo = q + i * kq + e0;
            float *so = s16 + i * nh + e0 / 16;
            int32_t *co = corr16 + i * nh + e0 / 16;
            if (e0 >= kp) {
                memset(qo, 0, 32);
                so[0] = so[1] = 0.0f;
                co[0] = co[1] = 0;
                continue;
            }
            float t[32] = { 0 };
            for (size_t e = e0; e < k && e < e0 + 32; e++) t[e - e0] = lofp_load_f32(dt, row, e);
            __m512 x0 = _mm512_loadu_ps(t), x1 = _mm512_loadu_ps(t + 16);
            uint32_t am = _mm512_reduce_max_epu32(_mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x0), absm),
                                                                   _mm512_and_si512(_mm512_castps_si512(x1), absm)));
            if (am >= 0x7F800000u) {
                for (size_t e = e0; e < k && e < e0 + 32; e++)
                    if (!isfinite(lofp_load_f32(dt, row, e))) return i * k + e + 1;
                return i * k + e0 + 1;
            }
            uint32_t sb = am >> 23;
            __m512 mv = _mm512_set1_ps(lofp_bits_f32(sb == 254 ? 0x00400000u : (254u - sb) << 23));
            const __m512 s64 = _mm512_set1_ps(64.0f);
            __m512i c0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(x0, mv), s64));
            __m512i c1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(x1, mv), s64));
            c0 = _mm512_max_epi32(_mm512_min_epi32(c0, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
            c1 = _mm512_max_epi32(_mm512_min_epi32(c1, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
            _mm_storeu_si128((__m128i *)(void *)qo, _mm512_cvtepi32_epi8(c0));
            _mm_storeu_si128((__m128i *)(void *)(qo + 16), _mm512_cvtepi32_epi8(c1));
            if (halves == 1) {
                co[0] = 12 * _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
                co[1] = 0;
            } else {
                co[0] = 12 * _mm512_reduce_add_epi32(c0);
                co[1] = 12 * _mm512_reduce_add_epi32(c1);
            }
            so[0] = so[1] = lofp_bits_f32(sb >= 8 ? (sb - 7) << 23 : 1u << (sb + 15));
        }
    }
    return 0;
}

void lofp_gemm_kernels_avx512_i8(gemm_kernels *k)
{
    for (int w = 0; w < GEMM_W_KINDS_; w++) g_avx2_rows[w] = k->i8_rows[w];
    k->i8_x8[GEMM_W_E2M1_E8M0] = x8_i8_mx;
    k->i8_x8[GEMM_W_E2M1_UE4M3] = x8_i8_nv;
    if (g_avx2_rows[GEMM_W_E2M1_E8M0]) k->i8_rows[GEMM_W_E2M1_E8M0] = rows_i8_mx;
    if (g_avx2_rows[GEMM_W_E2M1_UE4M3]) k->i8_rows[GEMM_W_E2M1_UE4M3] = rows_i8_nv;
    k->quant_mxint8 = quant_mxint8;
}

#else
void lofp_gemm_kernels_avx512_i8(gemm_kernels *k) { (void)k; }
#endif

/* test_gemm.c -- block-scaled GEMV/GEMM (SPEC §4, docs/GEMM.md): every kernel of every ISA
 * table this CPU can run (side by side in one process through lofp_gemm_isa), against the fp64
 * reference on the same quantized operands; odd shapes, padded K, misaligned pointers, guard
 * pages, thread counts 1..3, the exact cases, the x8 packer, the MXINT8 activation quantizer
 * against lofp_quantize, special scales and bad arguments. */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/cpu_features.h"
#include "gemm/gemm_internal.h"
#include "lofp/gemm.h"
#include "test_util.h"

/* ------------------------------------------------------------------------------------------ */
/* Buffers: plain, misaligned by `off` bytes, or ending exactly at a PROT_NONE page            */
/* ------------------------------------------------------------------------------------------ */

enum { BUF_PLAIN = 0, BUF_GUARD_END = 1, BUF_GUARD_START = 2 };

typedef struct {
    void *map;
    size_t map_len;
    void *p;
    int mapped;
} tbuf;

static tbuf tb_alloc(size_t size, int mode, unsigned off)
{
    tbuf b;
    memset(&b, 0, sizeof b);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    if (size == 0) size = 1;
    if (mode == BUF_PLAIN) {
        b.map_len = size + 128;
        b.map = malloc(b.map_len);
        if (!b.map) { fprintf(stderr, "out of memory\n"); exit(2); }
        uintptr_t a = ((uintptr_t)b.map + 63) & ~(uintptr_t)63;
        b.p = (void *)(a + off);
        return b;
    }
    size_t body = (size + pg - 1) / pg * pg;
    b.map_len = body + 2 * pg;
    b.map = mmap(NULL, b.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b.map == MAP_FAILED) { fprintf(stderr, "mmap failed\n"); exit(2); }
    b.mapped = 1;
    uint8_t *base = b.map;
    mprotect(base, pg, PROT_NONE);                 /* a page before ... */
    mprotect(base + pg + body, pg, PROT_NONE);     /* ... and one after the body */
    b.p = mode == BUF_GUARD_END ? base + pg + body - size : base + pg;
    return b;
}

static void tb_free(tbuf *b)
{
    if (!b->map) return;
    if (b->mapped) munmap(b->map, b->map_len);
    else free(b->map);
    memset(b, 0, sizeof *b);
}

/* Copies src into a buffer of the given kind (the kernels then read it there). */
static tbuf tb_copy(const void *src, size_t size, int mode, unsigned off)
{
    tbuf b = tb_alloc(size, mode, off);
    memcpy(b.p, src, size);
    return b;
}

/* ------------------------------------------------------------------------------------------ */
/* Data                                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Normal values with a random power-of-two magnitude per 16 elements, so block scales vary. */
static void gen(float *x, size_t rows, size_t k, uint64_t seed, int spread)
{
    tu_rng r = { seed };
    for (size_t i = 0; i < rows; i++) {
        float mag = 1.0f;
        for (size_t e = 0; e < k; e++) {
            if (e % 16 == 0) mag = ldexpf(1.0f, spread ? (int)(tu_next(&r) % 9) - 4 : 0);
            x[i * k + e] = (float)tu_normal(&r) * mag;
        }
    }
}

/* Uniform block scales: every 16 starts with the same magnitude `top`, the rest is smaller, so
 * every MX block (FLOOR) and every NVFP4 block (its bmax is the tensor amax) gets the same scale. */
static void gen_uniform(float *x, size_t rows, size_t k, uint64_t seed, float top)
{
    tu_rng r = { seed };
    for (size_t i = 0; i < rows; i++)
        for (size_t e = 0; e < k; e++)
            x[i * k + e] = e % 16 == 0 ? ((tu_next(&r) & 1) ? top : -top)
                                       : (float)(2.0 * tu_uniform(&r) - 1.0) * top * 0.99f;
}

typedef struct {
    lofp_scheme s;
    uint8_t *codes, *scales;
    float global;
    size_t cb, sbytes;
} qmat;

static void q_make(qmat *q, const char *preset, uint32_t block, int pad, const float *x, size_t rows, size_t k)
{
    memset(q, 0, sizeof *q);
    CHECK_OK(lofp_scheme_preset(preset, &q->s));
    if (block) q->s.block = block;
    q->s.pad = pad;
    q->cb = lofp_codes_bytes(&q->s, rows, k);
    q->sbytes = lofp_scales_bytes(&q->s, rows, k);
    q->codes = malloc(q->cb ? q->cb : 1);
    q->scales = malloc(q->sbytes ? q->sbytes : 1);
    CHECK_OK(lofp_quantize(&q->s, LOFP_DTYPE_F32, x, rows, k, q->codes, q->scales, &q->global, NULL));
}

static void q_free(qmat *q)
{
    free(q->codes);
    free(q->scales);
}

/* ------------------------------------------------------------------------------------------ */
/* One case: weights scheme x layout x activation mode x shape, every ISA, threads 1..3        */
/* ------------------------------------------------------------------------------------------ */

typedef enum {
    AM_F32, AM_BF16, AM_F16,            /* dense, W4A16 */
    AM_FLY_MXINT8, AM_FLY_MXFP8, AM_FLY_NVFP4, /* dense, quantized inside lofp_gemm */
    AM_PRE_NVFP4, AM_PRE_MXINT8, AM_PRE_MXFP4  /* pre-quantized A */
} amode;

static const char *amode_name(amode a)
{
    static const char *n[] = { "f32", "bf16", "f16", "fly-mxint8", "fly-mxfp8", "fly-nvfp4",
                               "pre-nvfp4", "pre-mxint8", "pre-mxfp4" };
    return n[a];
}

typedef struct {
    const char *w;          /* weight preset */
    uint32_t wblock;        /* 0 = preset's */
    lofp_weight_layout layout;
    amode am;
    size_t m, n, k;
    int pad;
    int bufmode;            /* BUF_* for every operand */
    unsigned off;           /* misalignment of every operand (BUF_PLAIN) */
    int uniform;            /* uniform block scales: exactness checks */
    size_t lda_extra, ldc_extra;
} gcase;

static int g_have_avx2;
static int g_have_isa[4]; /* per lofp_gemm_isa_t */
static const char *const k_isa_names[4] = { "auto", "generic", "avx2", "avx512" };
static long g_cases;

static double rel_fro(const float *c, size_t ldc, const double *r, size_t m, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double d = (double)c[i * ldc + j] - r[i * n + j];
            num += d * d;
            den += r[i * n + j] * r[i * n + j];
        }
    if (den == 0) return sqrt(num);
    return sqrt(num / den);
}

/* |c - r| <= 0.5 ulp(c) (plus double rounding slack): c is r correctly rounded to fp32 */
static int within_half_ulp(float c, double r)
{
    if (c == 0.0f) return r == 0.0;
    int e;
    frexpf(c, &e);
    double ulp = ldexp(1.0, e - 24);
    return fabs((double)c - r) <= 0.5 * ulp * (1.0 + 1e-9);
}

static void run_case(const gcase *gc)
{
    g_cases++;
    size_t m = gc->m, n = gc->n, k = gc->k, lda = k + gc->lda_extra, ldc = n + gc->ldc_extra;
    uint64_t seed = 1000003u * m + 10007u * n + k + (uint64_t)gc->am * 7 + (uint64_t)gc->layout * 13;
    float *af = malloc(m * lda * sizeof(float)), *bf = malloc(n * k * sizeof(float));
    float *ac = malloc(m * k * sizeof(float));
    if (gc->uniform) {
        gen_uniform(ac, m, k, seed, 14.0f);
        gen_uniform(bf, n, k, seed ^ 0xABCD, 5.5f);
    } else {
        gen(ac, m, k, seed, 1);
        gen(bf, n, k, seed ^ 0xABCD, 1);
    }
    for (size_t i = 0; i < m; i++)
        for (size_t e = 0; e < lda; e++) af[i * lda + e] = e < k ? ac[i * k + e] : NAN; /* row padding poisoned */

    /* B */
    qmat B;
    q_make(&B, gc->w, gc->wblock, gc->pad, bf, n, k);
    size_t bbytes = lofp_weight_packed_bytes(&B.s, n, k, gc->layout);
    CHECK(bbytes > 0);
    uint8_t *bpack = malloc(bbytes ? bbytes : 1);
    CHECK_OK(lofp_weight_pack(&B.s, B.codes, B.scales, n, k, gc->layout, bpack));
    tbuf tbc = tb_copy(bpack, bbytes, gc->bufmode, gc->off);
    tbuf tbs = tb_copy(B.scales, B.sbytes, gc->bufmode, gc->off);

    /* A */
    lofp_scheme aqs;
    qmat Aq;
    memset(&Aq, 0, sizeof Aq);
    tbuf tba = { 0 }, tbac = { 0 }, tbas = { 0 };
    lofp_gemm_args a;
    lofp_gemm_args_init(&a);
    a.m = m;
    a.n = n;
    a.k = k;
    a.b.scheme = &B.s;
    a.b.layout = gc->layout;
    a.b.codes = tbc.p;
    a.b.scales = gc->layout == LOFP_WEIGHT_ROWS ? tbs.p : NULL;
    a.b.global = B.global;
    if (gc->am <= AM_FLY_NVFP4) {
        lofp_dtype dt = gc->am == AM_BF16 ? LOFP_DTYPE_BF16 : gc->am == AM_F16 ? LOFP_DTYPE_F16 : LOFP_DTYPE_F32;
        size_t es = dt == LOFP_DTYPE_F32 ? 4 : 2;
        uint8_t *dense = malloc(m * lda * es);
        for (size_t i = 0; i < m * lda; i++) {
            if (dt == LOFP_DTYPE_F32) ((float *)dense)[i] = af[i];
            else if (dt == LOFP_DTYPE_BF16) ((uint16_t *)dense)[i] = lofp_fp32_to_bf16(af[i]);
            else ((uint16_t *)dense)[i] = lofp_fp32_to_fp16(af[i]);
        }
        tba = tb_copy(dense, m * lda * es, gc->bufmode, gc->off - gc->off % (unsigned)es); /* element-aligned */
        free(dense);
        a.a = tba.p;
        a.a_dtype = dt;
        a.lda = lda;
        if (gc->am >= AM_FLY_MXINT8) {
            CHECK_OK(lofp_scheme_preset(gc->am == AM_FLY_MXINT8 ? "mxint8" : gc->am == AM_FLY_MXFP8 ? "mxfp8-e4m3" : "nvfp4", &aqs));
            aqs.pad = 1;
            a.a_quant = &aqs;
        }
    } else {
        q_make(&Aq, gc->am == AM_PRE_NVFP4 ? "nvfp4" : gc->am == AM_PRE_MXINT8 ? "mxint8" : "mxfp4", 0, 1, ac, m, k);
        tbac = tb_copy(Aq.codes, Aq.cb, gc->bufmode, gc->off);
        tbas = tb_copy(Aq.scales, Aq.sbytes, gc->bufmode, gc->off);
        a.aq.scheme = &Aq.s;
        a.aq.codes = tbac.p;
        a.aq.scales = tbas.p;
        a.aq.global = Aq.global;
    }
    a.ldc = ldc;

    double *ref = malloc(m * n * sizeof(double));
    CHECK_OK(lofp_gemm_ref(&a, ref, n));

    tbuf tcb = tb_alloc(m * ldc * sizeof(float), gc->bufmode, gc->off - gc->off % 4u);
    float *c = tcb.p, *first = malloc(m * ldc * sizeof(float));
    float *gen_out = malloc(m * ldc * sizeof(float)), *avx2_out = malloc(m * ldc * sizeof(float));
    int have_gen = 0, have_avx2 = 0;
    char what[200];
    snprintf(what, sizeof what, "w=%s/%u %s a=%s m=%zu n=%zu k=%zu pad=%d buf=%d off=%u%s", gc->w, gc->wblock,
             lofp_weight_layout_name(gc->layout), amode_name(gc->am), m, n, k, gc->pad, gc->bufmode, gc->off,
             gc->uniform ? " uniform" : "");
    for (int isa = LOFP_GEMM_ISA_GENERIC; isa <= LOFP_GEMM_ISA_AVX512; isa++) {
        if (!g_have_isa[isa]) continue;
        for (unsigned th = 1; th <= 3; th++) {
            for (size_t i = 0; i < m * ldc; i++) c[i] = -777.0f; /* C's row padding must survive */
            a.c = c;
            a.threads = th;
            lofp_status st = lofp_gemm_isa(&a, (lofp_gemm_isa_t)isa);
            CHECKF(st == LOFP_OK, "%s isa=%d: %s", what, isa, lofp_status_name(st));
            if (st != LOFP_OK) continue;
            int pad_ok = 1;
            for (size_t i = 0; i < m; i++)
                for (size_t j = n; j < ldc; j++) pad_ok &= c[i * ldc + j] == -777.0f;
            CHECKF(pad_ok, "%s isa=%d: wrote C's row padding", what, isa);
            if (th == 1) {
                memcpy(first, c, m * ldc * sizeof(float));
                double err = rel_fro(c, ldc, ref, m, n);
                CHECKF(err <= 1e-5, "%s isa=%d (%s): rel Frobenius error %.3g", what, isa,
                       lofp_gemm_isa_kernel_name(&a, (lofp_gemm_isa_t)isa), err);
                if (gc->uniform) {
                    /* docs/GEMM.md: integer paths with equal block scales are exact (MX x MX) or
                     * correctly rounded after the one epilogue multiply (NVFP4 globals) */
                    int nv = !strcmp(gc->w, "nvfp4") || gc->am == AM_FLY_NVFP4 || gc->am == AM_PRE_NVFP4;
                    size_t bad = 0;
                    for (size_t i = 0; i < m; i++)
                        for (size_t j = 0; j < n; j++) {
                            float v = c[i * ldc + j];
                            double r = ref[i * n + j];
                            if (nv ? !within_half_ulp(v, r) : (double)v != r) bad++;
                        }
                    CHECKF(bad == 0, "%s isa=%d (%s): %zu results not exact", what, isa,
                           lofp_gemm_isa_kernel_name(&a, (lofp_gemm_isa_t)isa), bad);
                }
                if (isa == LOFP_GEMM_ISA_AVX2) {
                    memcpy(avx2_out, c, m * ldc * sizeof(float));
                    have_avx2 = 1;
                } else if (isa == LOFP_GEMM_ISA_AVX512 && have_avx2) {
                    /* every 512-bit kernel computes its AVX2 counterpart's terms in its order */
                    CHECKF(memcmp(avx2_out, c, m * ldc * sizeof(float)) == 0, "%s: avx512 (%s) != avx2", what,
                           lofp_gemm_isa_kernel_name(&a, LOFP_GEMM_ISA_AVX512));
                }
                if (isa == LOFP_GEMM_ISA_GENERIC) {
                    memcpy(gen_out, c, m * ldc * sizeof(float));
                    have_gen = 1;
                } else if (have_gen && gc->layout == LOFP_WEIGHT_X8 &&
                           (gc->am == AM_FLY_MXINT8 || gc->am >= AM_FLY_NVFP4)) {
                    /* the x8 integer kernels compute the generic kernel's terms in its order */
                    CHECKF(memcmp(gen_out, c, m * ldc * sizeof(float)) == 0, "%s: %s x8 int8 != generic", what,
                           k_isa_names[isa]);
                }
            } else {
                CHECKF(memcmp(first, c, m * ldc * sizeof(float)) == 0, "%s isa=%d: threads=%u differs from 1",
                       what, isa, th);
            }
        }
    }
    free(first);
    free(gen_out);
    free(avx2_out);
    free(ref);
    free(af);
    free(ac);
    free(bf);
    free(bpack);
    q_free(&B);
    q_free(&Aq);
    tb_free(&tbc);
    tb_free(&tbs);
    tb_free(&tba);
    tb_free(&tbac);
    tb_free(&tbas);
    tb_free(&tcb);
}

/* ------------------------------------------------------------------------------------------ */
/* Sweeps                                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const char *w;
    uint32_t block;
    int x8;
} wspec;

static const wspec k_weights[] = {
    { "mxfp4", 0, 1 }, { "nvfp4", 0, 1 }, { "mxfp8-e4m3", 0, 0 }, { "mxfp4", 64, 1 },
};

static void test_shapes(void)
{
    /* M and N of 1, 3, 17, 129; K a multiple of the block but not of 256, and padded K */
    static const size_t shapes[][3] = {
        { 1, 1, 32 }, { 1, 129, 416 }, { 3, 17, 96 }, { 17, 3, 160 }, { 129, 17, 224 },
        { 17, 129, 96 }, { 3, 3, 1056 }, { 129, 1, 64 },
    };
    static const amode modes[] = { AM_F32, AM_BF16, AM_F16, AM_FLY_MXINT8, AM_FLY_MXFP8, AM_FLY_NVFP4,
                                   AM_PRE_NVFP4, AM_PRE_MXINT8, AM_PRE_MXFP4 };
    for (size_t wi = 0; wi < sizeof k_weights / sizeof k_weights[0]; wi++) {
        for (int x8 = 0; x8 <= k_weights[wi].x8; x8++) {
            for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
                for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                    /* the full activation matrix for the two slowest A modes would repeat the
                     * same kernels: keep one in three shapes for them */
                    if ((modes[mi] == AM_BF16 || modes[mi] == AM_F16) && si % 3 != 0) continue;
                    gcase gc;
                    memset(&gc, 0, sizeof gc);
                    gc.w = k_weights[wi].w;
                    gc.wblock = k_weights[wi].block;
                    gc.layout = x8 ? LOFP_WEIGHT_X8 : LOFP_WEIGHT_ROWS;
                    gc.am = modes[mi];
                    gc.m = shapes[si][0];
                    gc.n = shapes[si][1];
                    gc.k = shapes[si][2];
                    if (gc.k % (gc.wblock ? gc.wblock : 32) != 0) gc.pad = 1;
                    gc.bufmode = BUF_GUARD_END;
                    run_case(&gc);
                }
            }
        }
    }
}

/* K not a multiple of the block: scheme.pad (A and B), NVFP4 K = 16 mod 32, lda/ldc > k/n */
static void test_padded(void)
{
    static const size_t ks[] = { 48, 100, 17, 272, 5 };
    static const amode modes[] = { AM_F32, AM_FLY_MXINT8, AM_FLY_NVFP4, AM_PRE_NVFP4, AM_FLY_MXFP8 };
    for (size_t wi = 0; wi < sizeof k_weights / sizeof k_weights[0]; wi++)
        for (int x8 = 0; x8 <= k_weights[wi].x8; x8++)
            for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++)
                for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                    for (int mm = 0; mm < 2; mm++) {
                        gcase gc;
                        memset(&gc, 0, sizeof gc);
                        gc.w = k_weights[wi].w;
                        gc.wblock = k_weights[wi].block;
                        gc.layout = x8 ? LOFP_WEIGHT_X8 : LOFP_WEIGHT_ROWS;
                        gc.am = modes[mi];
                        gc.m = mm ? 17 : 1;
                        gc.n = 17;
                        gc.k = ks[ki];
                        gc.pad = 1;
                        gc.bufmode = (ki & 1) ? BUF_GUARD_START : BUF_GUARD_END;
                        gc.lda_extra = ki;
                        gc.ldc_extra = 3 * (ki & 1);
                        run_case(&gc);
                    }
}

/* every misalignment 1..63 of every byte operand (codes, scales) and every element-aligned one
 * (multiples of 4 or 2 bytes) of A and C, for each kernel family */
static void test_misaligned(void)
{
    static const struct { const char *w; int x8; amode am; size_t m; } fam[] = {
        { "mxfp4", 1, AM_FLY_MXINT8, 1 }, { "mxfp4", 0, AM_FLY_MXINT8, 3 }, { "nvfp4", 1, AM_PRE_NVFP4, 1 },
        { "nvfp4", 0, AM_F32, 3 }, { "mxfp4", 1, AM_F32, 2 }, { "mxfp8-e4m3", 0, AM_F32, 1 },
        { "mxfp4", 0, AM_F32, 9 }, { "nvfp4", 1, AM_FLY_MXINT8, 17 },
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++)
        for (unsigned off = 1; off < 64; off++) {
            gcase gc;
            memset(&gc, 0, sizeof gc);
            gc.w = fam[f].w;
            gc.layout = fam[f].x8 ? LOFP_WEIGHT_X8 : LOFP_WEIGHT_ROWS;
            gc.am = fam[f].am;
            gc.m = fam[f].m;
            gc.n = 11;
            gc.k = 96;
            gc.bufmode = BUF_PLAIN;
            gc.off = off;
            run_case(&gc);
        }
}

/* the exact cases of docs/GEMM.md: equal block scales, K up to 11008 */
static void test_exact(void)
{
    static const size_t ks[] = { 32, 416, 1024, 4096, 11008 };
    static const struct { const char *w; amode am; } pairs[] = {
        { "mxfp4", AM_FLY_MXINT8 }, { "mxfp4", AM_PRE_MXINT8 }, { "mxfp4", AM_PRE_MXFP4 },
        { "nvfp4", AM_FLY_MXINT8 }, { "nvfp4", AM_PRE_NVFP4 }, { "nvfp4", AM_FLY_NVFP4 },
    };
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int x8 = 0; x8 <= 1; x8++) {
                gcase gc;
                memset(&gc, 0, sizeof gc);
                gc.w = pairs[pi].w;
                gc.layout = x8 ? LOFP_WEIGHT_X8 : LOFP_WEIGHT_ROWS;
                gc.am = pairs[pi].am;
                gc.m = ki == 4 ? 2 : 3;
                gc.n = ki == 4 ? 9 : 17;
                gc.k = ks[ki];
                gc.uniform = 1;
                gc.bufmode = BUF_PLAIN;
                run_case(&gc);
            }
}

/* schemes without a dedicated kernel still go through lofp_gemm (the portable fp32 path) */
static void test_other_schemes(void)
{
    static const char *ws[] = { "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e5m2", "mxint8", "tilelang-mxfp8" };
    for (size_t w = 0; w < sizeof ws / sizeof ws[0]; w++)
        for (int am = 0; am < 3; am++) {
            gcase gc;
            memset(&gc, 0, sizeof gc);
            gc.w = ws[w];
            gc.layout = LOFP_WEIGHT_ROWS;
            gc.am = am == 0 ? AM_F32 : am == 1 ? AM_FLY_MXINT8 : AM_PRE_NVFP4;
            gc.m = am == 2 ? 9 : 3;
            gc.n = 5;
            gc.k = 256;
            gc.bufmode = BUF_GUARD_END;
            run_case(&gc);
        }
}

/* ------------------------------------------------------------------------------------------ */
/* Packing, quantizer, special values, errors                                                  */
/* ------------------------------------------------------------------------------------------ */

static void test_pack(void)
{
    static const struct { const char *w; uint32_t blk; size_t n, k; } cs[] = {
        { "mxfp4", 0, 1, 32 }, { "mxfp4", 0, 13, 96 }, { "mxfp4", 64, 9, 128 }, { "nvfp4", 0, 8, 16 },
        { "nvfp4", 0, 17, 48 }, { "nvfp4", 0, 3, 1024 }, { "mxfp4", 0, 129, 100 },
    };
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        size_t n = cs[ci].n, k = cs[ci].k;
        float *x = malloc(n * k * sizeof(float));
        gen(x, n, k, 77 + ci, 1);
        qmat q;
        q_make(&q, cs[ci].w, cs[ci].blk, 1, x, n, k);
        size_t pb = lofp_weight_packed_bytes(&q.s, n, k, LOFP_WEIGHT_X8);
        CHECK(pb > 0 && pb % 64 == 0);
        uint8_t *p1 = malloc(pb), *p2 = malloc(pb), *c2 = malloc(q.cb), *s2 = malloc(q.sbytes);
        memset(p1, 0xAA, pb);
        memset(p2, 0x55, pb);
        CHECK_OK(lofp_weight_pack(&q.s, q.codes, q.scales, n, k, LOFP_WEIGHT_X8, p1));
        CHECK_OK(lofp_weight_pack(&q.s, q.codes, q.scales, n, k, LOFP_WEIGHT_X8, p2));
        CHECKF(memcmp(p1, p2, pb) == 0, "pack writes every byte (case %zu)", ci);
        CHECK_OK(lofp_weight_unpack(&q.s, p1, n, k, LOFP_WEIGHT_X8, c2, s2));
        CHECKF(memcmp(c2, q.codes, q.cb) == 0 && memcmp(s2, q.scales, q.sbytes) == 0, "unpack(pack) (case %zu)", ci);
        /* the documented byte: row 8g+r, element 32sb+4c+i in the low nibble of
         * header + g*group + sb*128 + c*32 + r*4 + i */
        gemm_x8_geom g;
        CHECK(lofp_gemm_x8_geom(&q.s, n, k, &g));
        size_t kp = lofp_padded_k(&q.s, k);
        size_t row = n - 1, e = kp - 1, sb = e / 32, w = e % 32, c = (w % 16) / 4, i = w % 4;
        uint8_t byte = p1[g.header + (row / 8) * g.group_bytes + sb * 128 + c * 32 + (row % 8) * 4 + i];
        unsigned want = (q.codes[row * kp / 2 + e / 2] >> ((e & 1) * 4)) & 15;
        CHECK_EQ_U(w < 16 ? byte & 15 : byte >> 4, want);
        CHECK_EQ_U(p1[g.header + (row / 8) * g.group_bytes + g.kq * 4 + (kp / q.s.block - 1) * 8 + row % 8],
                   q.scales[row * (kp / q.s.block) + kp / q.s.block - 1]);
        CHECK_EQ_U(p1[0], 0); /* no special scale in group 0 */
        /* rows layout: a plain copy */
        uint8_t *r1 = malloc(q.cb);
        CHECK_EQ_U(lofp_weight_packed_bytes(&q.s, n, k, LOFP_WEIGHT_ROWS), q.cb);
        CHECK_OK(lofp_weight_pack(&q.s, q.codes, q.scales, n, k, LOFP_WEIGHT_ROWS, r1));
        CHECK(memcmp(r1, q.codes, q.cb) == 0);
        free(r1);
        free(p1);
        free(p2);
        free(c2);
        free(s2);
        free(x);
        q_free(&q);
    }
    lofp_scheme s;
    lofp_scheme_preset("mxfp8-e4m3", &s);
    CHECK_EQ_U(lofp_weight_packed_bytes(&s, 8, 32, LOFP_WEIGHT_X8), 0);
    uint8_t buf[256] = { 0 }, out[4096];
    CHECK(lofp_weight_pack(&s, buf, buf, 8, 32, LOFP_WEIGHT_X8, out) == LOFP_ERR_UNSUPPORTED);
    lofp_scheme_preset("ultraquant", &s);
    CHECK(lofp_weight_pack(&s, buf, buf, 8, 32, LOFP_WEIGHT_X8, out) == LOFP_ERR_UNSUPPORTED);
    lofp_scheme_preset("mxfp4", &s);
    CHECK(lofp_weight_pack(&s, buf, buf, 8, 33, LOFP_WEIGHT_X8, out) == LOFP_ERR_SHAPE);
    CHECK(lofp_weight_pack(&s, buf, NULL, 8, 32, LOFP_WEIGHT_X8, out) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_weight_pack(&s, buf, buf, 8, 32, (lofp_weight_layout)7, out) == LOFP_ERR_INVALID_ARG);
    lofp_weight_layout l;
    CHECK(lofp_weight_layout_from_name("x8", &l) == LOFP_OK && l == LOFP_WEIGHT_X8);
    CHECK(lofp_weight_layout_from_name("rows", &l) == LOFP_OK && l == LOFP_WEIGHT_ROWS);
    CHECK(lofp_weight_layout_from_name("x4", &l) == LOFP_ERR_NOT_FOUND);
    CHECK(strcmp(lofp_weight_layout_name(LOFP_WEIGHT_X8), "x8") == 0);
    CHECK(lofp_weight_layout_name(LOFP_WEIGHT_LAYOUT_COUNT_) == NULL);
}

/* The AVX2 MXINT8 quantizer against lofp_quantize, on ties, subnormals, powers of two and
 * their neighbours, huge and tiny blocks, zero blocks, and all three dtypes. */
static void test_quant_mxint8_isa(int isa)
{
    gemm_kernels K;
    memset(&K, 0, sizeof K);
    lofp_gemm_kernels_avx2_i8(&K);
    if (isa == LOFP_GEMM_ISA_AVX512) lofp_gemm_kernels_avx512_i8(&K);
    if (!g_have_isa[isa] || !K.quant_mxint8) { printf("  (no %s quantizer on this CPU)\n", k_isa_names[isa]); return; }
    printf("  MXINT8 activation quantizer: %s\n", k_isa_names[isa]);
    const size_t m = 64, k = 200, kq = 224;
    float *x = malloc(m * k * sizeof(float));
    for (int dti = 0; dti < 3; dti++) {
    tu_rng r = { 99 };
    for (size_t i = 0; i < m; i++) {
        for (size_t e = 0; e < k; e++) {
            int kind = (int)(tu_next(&r) % 12);
            /* block scales from 2^-130 to 2^110 (fp16: 2^-24 to 2^14) */
            int ex = dti == 2 ? (int)(i % 16) * 2 - 24 : (int)(i % 16) * 16 - 130;
            if (dti == 2 && (kind == 5 || kind == 6)) kind = 7;
            float v;
            switch (kind) {
            case 0: v = ldexpf((float)((int)(tu_next(&r) % 255) - 127) + 0.5f, ex - 6); break; /* ties */
            case 1: v = ldexpf(1.0f, ex); break;                               /* power of two */
            case 2: v = nextafterf(ldexpf(1.0f, ex), 0.0f); break;             /* just below */
            case 3: v = ldexpf(1.9999f, ex); break;
            case 4: v = -0.0f; break;
            case 5: v = ldexpf(1.0f, -140 - (int)(tu_next(&r) % 9)); break;    /* subnormal */
            case 6: v = i == 5 ? ldexpf(1.5f, 127) : 1.0f; break;             /* huge block */
            default: v = (float)tu_normal(&r) * ldexpf(1.0f, ex); break;
            }
            x[i * k + e] = i == 7 ? 0.0f : v; /* row 7: all zero */
        }
    }
        lofp_dtype dt = dti == 0 ? LOFP_DTYPE_F32 : dti == 1 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F16;
        size_t es = dt == LOFP_DTYPE_F32 ? 4 : 2;
        uint8_t *xin = malloc(m * k * es);
        for (size_t i = 0; i < m * k; i++) {
            if (dt == LOFP_DTYPE_F32) ((float *)xin)[i] = x[i];
            else if (dt == LOFP_DTYPE_BF16) ((uint16_t *)xin)[i] = lofp_fp32_to_bf16(x[i]);
            else ((uint16_t *)xin)[i] = lofp_fp32_to_fp16(x[i]);
        }
        tbuf tx = tb_copy(xin, m * k * es, BUF_GUARD_END, 0);
        lofp_scheme s;
        lofp_scheme_preset("mxint8", &s);
        s.pad = 1;
        size_t kp = lofp_padded_k(&s, k);
        uint8_t *codes = malloc(m * kp), *scales = malloc(m * kp / 32);
        CHECK_OK(lofp_quantize(&s, dt, tx.p, m, k, codes, scales, NULL, NULL));
        int8_t *q = malloc(m * kq);
        float *s16 = malloc(m * kq / 16 * sizeof(float));
        int32_t *c16 = malloc(m * kq / 16 * sizeof(int32_t));
        CHECK_EQ_U(K.quant_mxint8(dt, tx.p, k, m, k, kq, 32, 2, q, s16, c16), 0);
        size_t bad = 0;
        for (size_t i = 0; i < m; i++) {
            for (size_t e = 0; e < kq; e++) bad += q[i * kq + e] != (e < kp ? (int8_t)codes[i * kp + e] : 0);
            for (size_t h = 0; h < kq / 16; h++) {
                int32_t sum = 0;
                for (int t = 0; t < 16; t++) sum += q[i * kq + h * 16 + t];
                bad += c16[i * kq / 16 + h] != 12 * sum;
                float want = h * 16 < kp ? ldexpf(1.0f, (int)scales[i * kp / 32 + h / 2] - 134) : 0.0f;
                bad += s16[i * kq / 16 + h] != want;
            }
        }
        CHECKF(bad == 0, "quant_mxint8 dtype %d: %zu mismatches against lofp_quantize", dti, bad);
        /* non-finite input: reported with its flat index */
        if (dt == LOFP_DTYPE_F32) {
            ((float *)xin)[3 * k + 150] = NAN;
            ((float *)xin)[5 * k + 10] = INFINITY;
            CHECK_EQ_U(K.quant_mxint8(dt, xin, k, m, k, kq, 32, 2, q, s16, c16), 3 * k + 150 + 1);
            /* halves 1: the 32's correction in the even entry, 0 in the odd one */
            int32_t *c16b = malloc(m * kq / 16 * sizeof(int32_t));
            ((float *)xin)[3 * k + 150] = 1.0f;
            ((float *)xin)[5 * k + 10] = 2.0f;
            CHECK_EQ_U(K.quant_mxint8(dt, xin, k, m, k, kq, 32, 2, q, s16, c16), 0);
            CHECK_EQ_U(K.quant_mxint8(dt, xin, k, m, k, kq, 32, 1, q, s16, c16b), 0);
            size_t badc = 0;
            for (size_t h = 0; h < m * kq / 16; h += 2) badc += c16b[h] != c16[h] + c16[h + 1] || c16b[h + 1] != 0;
            CHECK_EQ_U(badc, 0);
            free(c16b);
        }
        tb_free(&tx);
        free(xin);
        free(codes);
        free(scales);
        free(q);
        free(s16);
        free(c16);
    }
    free(x);
}

/* NaN scales (E8M0 0xFF, UE4M3 0x7F), E8M0 0x00 and UE4M3 subnormal scales: every kernel agrees
 * with the reference (NaN rows stay NaN, others are exact-ish) */
static void test_special_scales(void)
{
    static const char *ws[] = { "mxfp4", "nvfp4", "mxfp8-e4m3" };
    for (size_t w = 0; w < 3; w++) {
        for (int am = 0; am < 2; am++) {
            size_t m = 2, n = 19, k = 128;
            float *bf = malloc(n * k * sizeof(float)), *af = malloc(m * k * sizeof(float));
            gen(bf, n, k, 5 + w, 1);
            gen(af, m, k, 6 + w, 1);
            for (size_t e = 0; e < k; e++) bf[2 * k + e] *= 1e-39f; /* row 2: tiny scales */
            qmat B;
            q_make(&B, ws[w], 0, 0, bf, n, k);
            size_t nsr = B.sbytes / n;
            B.scales[5 * nsr + 1] = w == 1 ? 0x7F : 0xFF; /* row 5: a NaN scale */
            if (w != 1) B.scales[9 * nsr + 2] = 0x00;   /* row 9: 2^-127 with live codes */
            if (w == 2) B.codes[11 * k + 7] = 0x7F;     /* row 11: an E4M3 NaN code */
            for (int x8 = 0; x8 <= (w < 2); x8++) {
                lofp_weight_layout l = x8 ? LOFP_WEIGHT_X8 : LOFP_WEIGHT_ROWS;
                size_t pb = lofp_weight_packed_bytes(&B.s, n, k, l);
                uint8_t *pk = malloc(pb);
                CHECK_OK(lofp_weight_pack(&B.s, B.codes, B.scales, n, k, l, pk));
                if (x8) CHECK_EQ_U(pk[0], GEMM_X8_FLAG_SPECIAL);
                lofp_scheme aqs;
                lofp_scheme_preset("mxint8", &aqs);
                lofp_gemm_args a;
                lofp_gemm_args_init(&a);
                a.m = m; a.n = n; a.k = k;
                a.a = af;
                a.a_quant = am ? &aqs : NULL;
                a.b.scheme = &B.s;
                a.b.layout = l;
                a.b.codes = pk;
                a.b.scales = B.scales;
                a.b.global = B.global;
                double ref[2 * 19];
                float c[2 * 19];
                CHECK_OK(lofp_gemm_ref(&a, ref, 0));
                for (int isa = 1; isa <= 3; isa++) {
                    if (!g_have_isa[isa]) continue;
                    a.c = c;
                    CHECK_OK(lofp_gemm_isa(&a, (lofp_gemm_isa_t)isa));
                    double num = 0, den = 0;
                    for (size_t i = 0; i < m * n; i++) {
                        if (isnan(ref[i])) {
                            CHECKF(isnan(c[i]), "w=%s x8=%d am=%d isa=%d: [%zu] ref NaN, got %g", ws[w], x8, am, isa, i, c[i]);
                        } else {
                            num += (c[i] - ref[i]) * (c[i] - ref[i]);
                            den += ref[i] * ref[i];
                        }
                    }
                    CHECKF(sqrt(num) <= 1e-5 * sqrt(den), "w=%s x8=%d am=%d isa=%d: rel Frobenius error %g", ws[w],
                           x8, am, isa, sqrt(num / den));
                }
                free(pk);
            }
            q_free(&B);
            free(bf);
            free(af);
        }
    }
}

/* Weights whose every block has the smallest scale (E8M0 0x00 = 2^-127 with live codes, UE4M3
 * subnormals) against activations near 2^100, so that the results are normal fp32 numbers and a
 * wrong decode of those scales shows. */
static void test_tiny_scales(void)
{
    static const char *ws[] = { "mxfp4", "nvfp4", "mxfp8-e4m3" };
    for (size_t w = 0; w < 3; w++) {
        size_t m = 3, n = 16, k = 96;
        float *bf = malloc(n * k * sizeof(float)), *af = malloc(m * k * sizeof(float));
        gen(bf, n, k, 11 + w, 1);
        gen(af, m, k, 12 + w, 0);
        for (size_t i = 0; i < m * k; i++) af[i] *= 0x1p100f;
        qmat B;
        q_make(&B, ws[w], 0, 0, bf, n, k);
        /* MX: every scale 0x00; NVFP4: subnormal UE4M3 scales 1..7 (global unchanged) */
        for (size_t i = 0; i < B.sbytes; i++) B.scales[i] = w == 1 ? (uint8_t)(1 + i % 7) : 0x00;
        for (int x8 = 0; x8 <= (w < 2); x8++) {
            lofp_weight_layout l = x8 ? LOFP_WEIGHT_X8 : LOFP_WEIGHT_ROWS;
            size_t pb = lofp_weight_packed_bytes(&B.s, n, k, l);
            uint8_t *pk = malloc(pb);
            CHECK_OK(lofp_weight_pack(&B.s, B.codes, B.scales, n, k, l, pk));
            for (int am = 0; am < 2; am++) {
                lofp_scheme aqs;
                lofp_scheme_preset("mxint8", &aqs);
                lofp_gemm_args a;
                lofp_gemm_args_init(&a);
                a.m = m; a.n = n; a.k = k;
                a.a = af;
                a.a_quant = am ? &aqs : NULL;
                a.b.scheme = &B.s;
                a.b.layout = l;
                a.b.codes = pk;
                a.b.scales = B.scales;
                a.b.global = B.global;
                double ref[3 * 16];
                float c[3 * 16];
                CHECK_OK(lofp_gemm_ref(&a, ref, 0));
                for (int isa = 1; isa <= 3; isa++) {
                    if (!g_have_isa[isa]) continue;
                    a.c = c;
                    for (int big = 0; big < 2; big++) { /* the GEMV and the blocked GEMM kernels */
                        a.m = big ? 3 : 1;
                        CHECK_OK(lofp_gemm_isa(&a, (lofp_gemm_isa_t)isa));
                        double err = rel_fro(c, n, ref, a.m, n);
                        CHECKF(err <= 1e-5, "tiny scales w=%s x8=%d am=%d isa=%d m=%zu: %g", ws[w], x8, am, isa, a.m, err);
                    }
                }
            }
            free(pk);
        }
        q_free(&B);
        free(bf);
        free(af);
    }
}

static void test_errors(void)
{
    float a[64] = { 0 }, c[4];
    uint8_t codes[64] = { 0 }, scales[8] = { 0x7F, 0x7F };
    lofp_scheme s, q8;
    lofp_scheme_preset("mxfp4", &s);
    lofp_scheme_preset("mxint8", &q8);
    lofp_gemm_args g;
    lofp_gemm_args_init(&g);
    g.m = 1; g.n = 2; g.k = 32;
    g.a = a;
    g.b.scheme = &s;
    g.b.codes = codes;
    g.b.scales = scales;
    g.c = c;
    CHECK_OK(lofp_gemm(&g));
    CHECK(c[0] == 0.0f && c[1] == 0.0f);
    CHECK(lofp_gemm(NULL) == LOFP_ERR_INVALID_ARG);
    lofp_gemm_args t = g;
    t.m = 0;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t = g; t.c = NULL;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t = g; t.k = 33;
    CHECK(lofp_gemm(&t) == LOFP_ERR_SHAPE);
    t = g; t.lda = 16;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t = g; t.ldc = 1;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t = g; t.a_dtype = (lofp_dtype)9;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t = g; t.b.scales = NULL;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t = g; t.a = NULL; /* and no aq */
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t = g; t.a = NULL; t.aq.scheme = &s; t.aq.codes = codes; t.aq.scales = scales; t.aq.layout = LOFP_WEIGHT_X8;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    lofp_scheme nv;
    lofp_scheme_preset("nvfp4", &nv);
    t = g; t.b.scheme = &nv; t.b.global = 0.0f;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    t.b.global = NAN;
    CHECK(lofp_gemm(&t) == LOFP_ERR_INVALID_ARG);
    /* workspace: too small, then enough at any alignment */
    t = g;
    t.a_quant = &q8;
    size_t wb = lofp_gemm_workspace_bytes(&t);
    CHECK(wb > 0);
    uint8_t *w = malloc(wb + 64);
    t.workspace = w + 3;
    t.workspace_bytes = wb - 1;
    CHECK(lofp_gemm(&t) == LOFP_ERR_BUFFER_TOO_SMALL);
    t.workspace_bytes = wb;
    CHECK_OK(lofp_gemm(&t));
    /* non-finite A quantized on the fly: an error on every path; W4A16: NaN out */
    a[7] = NAN;
    for (int isa = 1; isa <= 3; isa++) {
        if (!g_have_isa[isa]) continue;
        CHECK(lofp_gemm_isa(&t, (lofp_gemm_isa_t)isa) == LOFP_ERR_NONFINITE);
        scales[0] = 0x7F;
        codes[0] = 0x11;
        CHECK_OK(lofp_gemm_isa(&g, (lofp_gemm_isa_t)isa));
        CHECK(isnan(c[0]));
    }
    free(w);
    CHECK(strcmp(lofp_gemm_kernel_name(NULL), "invalid") == 0);
    CHECK_EQ_U(lofp_gemm_workspace_bytes(NULL), 0);
    double r[2];
    CHECK(lofp_gemm_ref(&g, NULL, 0) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gemm_ref(&g, r, 1) == LOFP_ERR_INVALID_ARG);
}

/* LOFP_DISABLE_CPU_FEATURES takes the AVX2 table away from lofp_gemm */
static void test_disable_features(void)
{
    float a[32] = { 0 }, c[8];
    uint8_t codes[128] = { 0 }, scales[8] = { 0x7F };
    lofp_scheme s;
    lofp_scheme_preset("mxfp4", &s);
    lofp_gemm_args g;
    lofp_gemm_args_init(&g);
    g.m = 1; g.n = 8; g.k = 32;
    g.a = a;
    g.b.scheme = &s;
    g.b.codes = codes;
    g.b.scales = scales;
    g.c = c;
    const char *before = lofp_gemm_kernel_name(&g);
    printf("  kernel for mxfp4 rows, fp32 A: %s\n", before);
    if (g_have_avx2) CHECK(strncmp(before, "avx2", 4) == 0);
    const char *env = getenv("LOFP_DISABLE_CPU_FEATURES");
    char *saved = env ? strdup(env) : NULL;
    setenv("LOFP_DISABLE_CPU_FEATURES", "avx2", 1);
    lofp_cpu_features_reset();
    CHECK(!lofp_gemm_isa_available(LOFP_GEMM_ISA_AVX2));
    CHECK(strncmp(lofp_gemm_kernel_name(&g), "generic", 7) == 0);
    CHECK(lofp_gemm_isa(&g, LOFP_GEMM_ISA_AVX2) == LOFP_ERR_UNSUPPORTED);
    CHECK_OK(lofp_gemm(&g));
    if (saved) setenv("LOFP_DISABLE_CPU_FEATURES", saved, 1);
    else unsetenv("LOFP_DISABLE_CPU_FEATURES");
    lofp_cpu_features_reset();
    CHECK(lofp_gemm_isa_available(LOFP_GEMM_ISA_AVX2) == g_have_avx2);
    /* without VNNI (or without AVX-512) lofp_gemm runs the AVX2 integer kernels */
    if (g_have_isa[LOFP_GEMM_ISA_AVX512]) {
        lofp_scheme q8;
        lofp_scheme_preset("mxint8", &q8);
        g.a_quant = &q8;
        CHECK(strncmp(lofp_gemm_kernel_name(&g), "avx2 rows", 9) == 0); /* m < 8, rows: AVX2 */
        g.b.layout = LOFP_WEIGHT_X8;
        CHECK(strcmp(lofp_gemm_kernel_name(&g), "avx512 x8 int8-dot") == 0);
        setenv("LOFP_DISABLE_CPU_FEATURES", "avx512vnni", 1);
        lofp_cpu_features_reset();
        CHECK(!lofp_gemm_isa_available(LOFP_GEMM_ISA_AVX512));
        CHECK(strcmp(lofp_gemm_kernel_name(&g), "avx2 x8 int8-dot") == 0);
        if (saved) setenv("LOFP_DISABLE_CPU_FEATURES", saved, 1);
        else unsetenv("LOFP_DISABLE_CPU_FEATURES");
        lofp_cpu_features_reset();
    }
    free(saved);
}

static void test_quant_mxint8(void)
{
    test_quant_mxint8_isa(LOFP_GEMM_ISA_AVX2);
    test_quant_mxint8_isa(LOFP_GEMM_ISA_AVX512);
}

int main(void)
{
    g_have_avx2 = lofp_gemm_isa_available(LOFP_GEMM_ISA_AVX2);
    for (int i = 1; i < 4; i++) g_have_isa[i] = lofp_gemm_isa_available((lofp_gemm_isa_t)i);
    printf("test_gemm: ISA tables run side by side:%s%s%s\n", g_have_isa[1] ? " generic" : "",
           g_have_isa[2] ? " avx2" : "", g_have_isa[3] ? " avx512 (VNNI)" : "");
    printf("test_gemm: AVX2 kernels %s\n", g_have_avx2 ? "available: generic and avx2 side by side"
                                                       : "unavailable (or disabled): generic only");
    test_pack();
    test_quant_mxint8();
    test_errors();
    test_special_scales();
    test_tiny_scales();
    test_exact();
    test_shapes();
    test_padded();
    test_misaligned();
    test_other_schemes();
    test_disable_features();
    printf("  %ld GEMM cases\n", g_cases);
    return tu_finish("test_gemm");
}

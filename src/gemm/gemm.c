/* gemm.c -- lofp_gemm: argument checks, the plan (weights resolved to a kernel kind,
 * activations prepared once), the kernel choice per ISA table and the fork/join over N (or M).
 * The arithmetic lives in gemm_generic.c and x86/gemm_*_avx2.c; docs/GEMM.md explains it. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "runtime/cpu_features.h"
#include "gemm_internal.h"

#define GEMM_M_PANEL 64  /* activation rows per integer-kernel call: the panel stays in L2 while
                            the weights of the thread's N range stream past it */

/* ------------------------------------------------------------------------------------------ */
/* Kernel tables: one per ISA, each pre-filled from the generic one, built once.               */
/* ------------------------------------------------------------------------------------------ */

static gemm_kernels g_tables[4];
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    lofp_gemm_kernels_generic(&g_tables[LOFP_GEMM_ISA_GENERIC]);
    g_tables[LOFP_GEMM_ISA_AVX2] = g_tables[LOFP_GEMM_ISA_GENERIC];
    lofp_gemm_kernels_avx2_i8(&g_tables[LOFP_GEMM_ISA_AVX2]);
    lofp_gemm_kernels_avx2_f32(&g_tables[LOFP_GEMM_ISA_AVX2]);
    g_tables[LOFP_GEMM_ISA_AVX2].isa = "avx2";
    g_tables[LOFP_GEMM_ISA_AVX512] = g_tables[LOFP_GEMM_ISA_AVX2];
    lofp_gemm_kernels_avx512_i8(&g_tables[LOFP_GEMM_ISA_AVX512]);
    lofp_gemm_kernels_avx512_f32(&g_tables[LOFP_GEMM_ISA_AVX512]);
    g_tables[LOFP_GEMM_ISA_AVX512].isa = "avx512";
}

int lofp_gemm_isa_available(lofp_gemm_isa_t isa)
{
    const uint32_t need = LOFP_CPU_AVX2 | LOFP_CPU_FMA | LOFP_CPU_F16C;
    switch (isa) {
    case LOFP_GEMM_ISA_AUTO:
    case LOFP_GEMM_ISA_GENERIC: return 1;
#if defined(__x86_64__) || defined(__i386__)
    case LOFP_GEMM_ISA_AVX2: return (lofp_cpu_features() & need) == need;
    case LOFP_GEMM_ISA_AVX512: {
        const uint32_t n512 = need | LOFP_CPU_AVX512_BASE | LOFP_CPU_AVX512VNNI;
        return (lofp_cpu_features() & n512) == n512;
    }
#endif
    default: return 0;
    }
}

/* The table for isa, or NULL when it cannot run here. AUTO follows lofp_cpu_features(), itself
 * computed once, so the choice is made once per process. */
static const gemm_kernels *get_table(lofp_gemm_isa_t isa)
{
    pthread_once(&g_tables_once, build_tables);
    if (isa == LOFP_GEMM_ISA_AUTO)
        isa = lofp_gemm_isa_available(LOFP_GEMM_ISA_AVX512) ? LOFP_GEMM_ISA_AVX512
              : lofp_gemm_isa_available(LOFP_GEMM_ISA_AVX2) ? LOFP_GEMM_ISA_AVX2
                                                             : LOFP_GEMM_ISA_GENERIC;
    if ((int)isa < 1 || (int)isa > 3 || !lofp_gemm_isa_available(isa)) return NULL;
    return &g_tables[isa];
}

/* ------------------------------------------------------------------------------------------ */
/* Checks and shape                                                                             */
/* ------------------------------------------------------------------------------------------ */

void lofp_gemm_args_init(lofp_gemm_args *args)
{
    memset(args, 0, sizeof *args);
    args->a_dtype = LOFP_DTYPE_F32;
    args->b.layout = LOFP_WEIGHT_ROWS;
    args->aq.layout = LOFP_WEIGHT_ROWS;
    args->aq.global = 1.0f;
    args->b.global = 1.0f;
    args->threads = 1;
}

static size_t dtype_size(lofp_dtype dt) { return dt == LOFP_DTYPE_F32 ? 4 : 2; }

static lofp_status check_scheme_k(const lofp_scheme *s, size_t k)
{
    if (!s || lofp_scheme_validate(s) != LOFP_OK) return LOFP_ERR_INVALID_ARG;
    if (k % s->block != 0 && !s->pad) return LOFP_ERR_SHAPE;
    if (!lofp_padded_k(s, k)) return LOFP_ERR_SIZE_OVERFLOW;
    return LOFP_OK;
}

static lofp_status check_qmatrix(const lofp_qmatrix *q, size_t rows, size_t k, int allow_x8)
{
    lofp_status st = check_scheme_k(q->scheme, k);
    if (st != LOFP_OK) return st;
    if (!q->codes) return LOFP_ERR_INVALID_ARG;
    if (q->layout == LOFP_WEIGHT_ROWS) {
        if (!q->scales) return LOFP_ERR_INVALID_ARG;
        if (!lofp_codes_bytes(q->scheme, rows, k) || !lofp_scales_bytes(q->scheme, rows, k))
            return LOFP_ERR_SIZE_OVERFLOW;
    } else if (q->layout == LOFP_WEIGHT_X8 && allow_x8) {
        if (q->scheme->id != LOFP_SCHEME_NVFP4 && q->scheme->id != LOFP_SCHEME_MXFP4)
            return LOFP_ERR_UNSUPPORTED;
        if (!lofp_weight_packed_bytes(q->scheme, rows, k, LOFP_WEIGHT_X8)) return LOFP_ERR_SIZE_OVERFLOW;
    } else {
        return LOFP_ERR_INVALID_ARG;
    }
    if (q->scheme->id == LOFP_SCHEME_NVFP4 && !(isfinite(q->global) && q->global > 0.0f))
        return LOFP_ERR_INVALID_ARG;
    return LOFP_OK;
}

lofp_status lofp_gemm_validate(const lofp_gemm_args *a)
{
    if (!a || a->m == 0 || a->n == 0 || a->k == 0) return LOFP_ERR_INVALID_ARG;
    lofp_status st = check_qmatrix(&a->b, a->n, a->k, 1);
    if (st != LOFP_OK) return st;
    if (a->a) {
        if (!lofp_dtype_is_dense(a->a_dtype)) return LOFP_ERR_INVALID_ARG;
        if (a->lda != 0 && a->lda < a->k) return LOFP_ERR_INVALID_ARG;
        if (a->a_quant && (st = check_scheme_k(a->a_quant, a->k)) != LOFP_OK) return st;
    } else {
        if ((st = check_qmatrix(&a->aq, a->m, a->k, 0)) != LOFP_OK) return st;
    }
    size_t t;
    if (a->ldc != 0 && a->ldc < a->n) return LOFP_ERR_INVALID_ARG;
    if (!lofp_mul_size(a->m, a->ldc ? a->ldc : a->n, &t)) return LOFP_ERR_SIZE_OVERFLOW;
    if (!lofp_mul_size(a->m, a->lda ? a->lda : a->k, &t)) return LOFP_ERR_SIZE_OVERFLOW;
    return LOFP_OK;
}

void lofp_gemm_luts(const lofp_scheme *s, float elut[256], float slut[256])
{
    unsigned ncodes = s->elem == LOFP_ELEM_E2M1 ? 16u : 256u;
    for (unsigned c = 0; c < 256; c++) {
        elut[c] = c < ncodes ? lofp_decode(s->elem, c) : 0.0f;
        slut[c] = lofp_decode(s->scale_elem, c);
    }
    if (s->id == LOFP_SCHEME_ULTRAQUANT) slut[0] = 0.0f;
}

static int weight_kind(const lofp_scheme *s)
{
    if (s->id == LOFP_SCHEME_NVFP4) return GEMM_W_E2M1_UE4M3;
    if (s->id == LOFP_SCHEME_MXFP4) return GEMM_W_E2M1_E8M0;
    if (s->elem == LOFP_ELEM_E4M3 && s->scale_elem == LOFP_ELEM_E8M0) return GEMM_W_E4M3_E8M0;
    return GEMM_W_ANY;
}

/* A schemes the integer kernels take: their values times 2 (E2M1) or as codes (MXINT8) are
 * int8 and their scales are exact fp32. */
static int a_int_capable(const lofp_scheme *s)
{
    return s && (s->id == LOFP_SCHEME_MXINT8 || s->id == LOFP_SCHEME_MXFP4 || s->id == LOFP_SCHEME_NVFP4);
}

/* What a call resolves to before any data is touched. */
typedef struct {
    int wkind, amode, halves;
    const lofp_scheme *as; /* A's scheme (quantized A or a_quant); NULL for dense A used as is */
    size_t kp_w, kp_a, kq, lda;
    int direct_f32;        /* dense fp32 A read in place */
    int quant_on_fly;      /* dense A quantized inside lofp_gemm */
    int fast_quant;        /* ... by the table's quant_mxint8 (when it has one) */
} gemm_shape;

static void make_shape(const lofp_gemm_args *a, gemm_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    sh->wkind = weight_kind(a->b.scheme);
    sh->kp_w = lofp_padded_k(a->b.scheme, a->k);
    sh->as = a->a ? a->a_quant : a->aq.scheme;
    sh->kp_a = sh->as ? lofp_padded_k(sh->as, a->k) : a->k;
    size_t kmax = sh->kp_w > sh->kp_a ? sh->kp_w : sh->kp_a;
    sh->kq = (kmax + 31) / 32 * 32;
    sh->lda = a->lda ? a->lda : a->k;
    int w_e2m1 = sh->wkind == GEMM_W_E2M1_E8M0 || sh->wkind == GEMM_W_E2M1_UE4M3;
    sh->amode = w_e2m1 && a_int_capable(sh->as) ? GEMM_A_I8 : GEMM_A_F32;
    sh->halves = sh->amode == GEMM_A_I8 && sh->wkind == GEMM_W_E2M1_E8M0 &&
                 sh->as->id != LOFP_SCHEME_NVFP4 ? 1 : 2;
    sh->quant_on_fly = a->a && a->a_quant;
    sh->direct_f32 = a->a && !a->a_quant && a->a_dtype == LOFP_DTYPE_F32 && a->k == sh->kq;
    const lofp_scheme *q = a->a_quant;
    sh->fast_quant = sh->quant_on_fly && sh->amode == GEMM_A_I8 && q->id == LOFP_SCHEME_MXINT8 &&
                     q->scale_rule == LOFP_SCALE_FLOOR && q->rounding == LOFP_RNE &&
                     q->block == 32 && !q->propagate_nonfinite && q->amax_floor == 0.0f;
}

/* Workspace regions, each at a 64-byte aligned offset from a 64-byte aligned base. */
typedef struct {
    size_t q, s16, c16, af, tdense, tcodes, tscales, total;
} ws_layout;

static int add_region(size_t *off, size_t bytes, size_t *at)
{
    size_t t;
    *at = *off;
    if (!lofp_add_size(*off, bytes, &t) || !lofp_add_size(t, 63, &t)) return 0;
    *off = t / 64 * 64;
    return 1;
}

static int ws_plan(const lofp_gemm_args *a, const gemm_shape *sh, ws_layout *w)
{
    memset(w, 0, sizeof *w);
    size_t off = 0, mk, nh, t;
    if (!lofp_mul_size(a->m, sh->kq, &mk)) return 0;
    nh = mk / 16;
    if (sh->amode == GEMM_A_I8) {
        if (!add_region(&off, mk, &w->q)) return 0;
        if (!lofp_mul_size(nh, 4, &t) || !add_region(&off, t, &w->s16) || !add_region(&off, t, &w->c16))
            return 0;
    } else if (!sh->direct_f32) {
        if (!lofp_mul_size(mk, 4, &t) || !add_region(&off, t, &w->af)) return 0;
    }
    if (sh->quant_on_fly) {
        /* lofp_quantize wants a contiguous A: a compacted copy when lda != k */
        if (sh->lda != a->k) {
            if (!lofp_mul_size(a->m, a->k, &t) || !lofp_mul_size(t, dtype_size(a->a_dtype), &t) ||
                !add_region(&off, t, &w->tdense))
                return 0;
        }
        if (!add_region(&off, lofp_codes_bytes(a->a_quant, a->m, a->k), &w->tcodes) ||
            !add_region(&off, lofp_scales_bytes(a->a_quant, a->m, a->k), &w->tscales))
            return 0;
    }
    if (off == 0) return 1;
    return lofp_add_size(off, 64, &w->total); /* room to align the caller's base */
}

size_t lofp_gemm_workspace_bytes(const lofp_gemm_args *args)
{
    lofp_gemm_args tmp;
    if (!args) return 0;
    /* sizes only: give the pointer checks something non-NULL */
    tmp = *args;
    static const uint8_t dummy[1];
    if (!tmp.c) tmp.c = (float *)(uintptr_t)dummy;
    if (!tmp.b.codes) tmp.b.codes = dummy;
    if (!tmp.b.scales) tmp.b.scales = dummy;
    if (!tmp.a && !tmp.aq.codes) tmp.aq.codes = dummy;
    if (!tmp.a && !tmp.aq.scales) tmp.aq.scales = dummy;
    if (lofp_gemm_validate(&tmp) != LOFP_OK) return 0;
    gemm_shape sh;
    ws_layout w;
    make_shape(&tmp, &sh);
    return ws_plan(&tmp, &sh, &w) ? w.total : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Activation preparation                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* int8 plan arrays from quantized A (MXINT8 codes, or E2M1 doubled), rows [0, m). The scale of
 * each 16 is the block scale times the element unit (MXINT8 2^-6, doubled E2M1 1/2) times 1/2
 * for the doubled E2M1 weights; all exact in fp32 (powers of two or UE4M3 values). */
static void prep_i8_from_codes(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                               size_t m, size_t k, size_t kq, int halves, int8_t *q, float *s16,
                               int32_t *c16)
{
    float elut[256], slut[256];
    lofp_gemm_luts(s, elut, slut);
    size_t kp = lofp_padded_k(s, k), nsr = kp / s->block, nh = kq / 16;
    size_t rb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    float unit = s->id == LOFP_SCHEME_MXINT8 ? 0x1p-7f : 0.25f;
    for (size_t i = 0; i < m; i++) {
        const uint8_t *rc = codes + i * rb;
        int8_t *qi = q + i * kq;
        for (size_t e = 0; e < kq; e++) {
            int v = 0;
            if (e < kp) {
                if (s->elem == LOFP_ELEM_E2M1) v = lofp_e2m1_x2((rc[e >> 1] >> ((e & 1) * 4)) & 15u);
                else v = (int8_t)rc[e];
            }
            qi[e] = (int8_t)v;
        }
        for (size_t h = 0; h < nh; h++) {
            int32_t sum = 0;
            for (size_t e = 0; e < 16; e++) sum += qi[h * 16 + e];
            c16[i * nh + h] = 12 * sum;
            s16[i * nh + h] = h * 16 < kp ? slut[scales[i * nsr + h * 16 / s->block]] * unit : 0.0f;
        }
        if (halves == 1)
            for (size_t h = 0; h < nh; h += 2) {
                c16[i * nh + h] += c16[i * nh + h + 1];
                c16[i * nh + h + 1] = 0;
            }
    }
}

/* fp32 A from quantized A: code * scale (exact), zero from k on; globals go to the epilogue. */
static void prep_f32_from_codes(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                                size_t m, size_t k, size_t kq, float *af)
{
    float elut[256], slut[256];
    lofp_gemm_luts(s, elut, slut);
    size_t kp = lofp_padded_k(s, k), nsr = kp / s->block;
    size_t rb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    for (size_t i = 0; i < m; i++) {
        const uint8_t *rc = codes + i * rb;
        for (size_t e = 0; e < kq; e++) {
            float v = 0.0f;
            if (e < k) {
                unsigned c = s->elem == LOFP_ELEM_E2M1 ? (rc[e >> 1] >> ((e & 1) * 4)) & 15u : rc[e];
                v = elut[c] * slut[scales[i * nsr + e / s->block]];
            }
            af[i * kq + e] = v;
        }
    }
}

static void prep_f32_dense(lofp_dtype dt, const void *a, size_t lda, size_t m, size_t k, size_t kq,
                           float *af)
{
    for (size_t i = 0; i < m; i++) {
        for (size_t e = 0; e < k; e++) af[i * kq + e] = lofp_load_f32(dt, a, i * lda + e);
        for (size_t e = k; e < kq; e++) af[i * kq + e] = 0.0f;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Kernel choice and the parallel run                                                           */
/* ------------------------------------------------------------------------------------------ */

typedef enum { RUN_ONCE = 0, RUN_PANELS = 1 } run_mode;

static gemm_kernel_fn pick(const gemm_kernels *K, const gemm_shape *sh, lofp_weight_layout l, size_t m,
                           run_mode *mode, const char **what)
{
    int w = sh->wkind, x8 = l == LOFP_WEIGHT_X8;
    gemm_kernel_fn f;
    *mode = RUN_ONCE;
    if (sh->amode == GEMM_A_I8) {
        f = x8 ? K->i8_x8[w] : K->i8_rows[w];
        *what = "int8-dot";
        if (m >= GEMM_BIG_M) *mode = RUN_PANELS;
        if (!f) f = x8 ? lofp_gemm_generic_i8_x8 : lofp_gemm_generic_i8_rows;
        return f;
    }
    if (m >= GEMM_BIG_M && K->f32_gemm) {
        *what = "fp32-gemm";
        return K->f32_gemm;
    }
    *what = "fp32-dot";
    f = x8 ? K->f32_x8[w] : K->f32_rows[w];
    if (!f) f = x8 ? lofp_gemm_generic_f32_x8 : lofp_gemm_generic_f32_rows;
    return f;
}

typedef struct {
    const gemm_plan *p;
    gemm_kernel_fn fn;
    run_mode mode;
} run_ctx;

/* Thread t's rectangle: a contiguous range of 8-row units of N (all of M), or, when there are
 * fewer units than threads and M is large, a range of M (all of N). Every output element is
 * computed by the same code whatever the rectangle, so the result is thread-count independent. */
static void run_part(void *v, unsigned t, unsigned nt)
{
    const run_ctx *rc = v;
    const gemm_plan *p = rc->p;
    size_t units = lofp_ceil_div(p->n, GEMM_X8_ROWS), i0 = 0, i1 = p->m, j0 = 0, j1 = p->n;
    if (units >= nt || p->m < GEMM_BIG_M) {
        size_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
        j0 = u0 * GEMM_X8_ROWS;
        j1 = u1 * GEMM_X8_ROWS < p->n ? u1 * GEMM_X8_ROWS : p->n;
    } else {
        i0 = p->m * t / nt;
        i1 = p->m * (t + 1) / nt;
    }
    if (i0 >= i1 || j0 >= j1) return;
    if (rc->mode == RUN_PANELS) {
        for (size_t i = i0; i < i1; i += GEMM_M_PANEL)
            rc->fn(p, i, i + GEMM_M_PANEL < i1 ? i + GEMM_M_PANEL : i1, j0, j1);
    } else {
        rc->fn(p, i0, i1, j0, j1);
    }
}

static void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

lofp_status lofp_gemm_isa(const lofp_gemm_args *a, lofp_gemm_isa_t isa)
{
    lofp_status st = lofp_gemm_validate(a);
    if (st != LOFP_OK) return st;
    if (!a->c) return LOFP_ERR_INVALID_ARG;
    const gemm_kernels *K = get_table(isa);
    if (!K) return LOFP_ERR_UNSUPPORTED;

    gemm_shape sh;
    ws_layout wl;
    make_shape(a, &sh);
    if (!ws_plan(a, &sh, &wl)) return LOFP_ERR_SIZE_OVERFLOW;
    void *owned = NULL;
    uint8_t *ws = NULL;
    if (wl.total) {
        if (a->workspace) {
            if (a->workspace_bytes < wl.total) return LOFP_ERR_BUFFER_TOO_SMALL;
            ws = align64(a->workspace);
        } else {
            owned = malloc(wl.total);
            if (!owned) return LOFP_ERR_NOMEM;
            ws = align64(owned);
        }
    }

    gemm_plan *p = malloc(sizeof *p); /* ~2 KiB of tables: keep them off small thread stacks */
    if (!p) { free(owned); return LOFP_ERR_NOMEM; }
    memset(p, 0, sizeof *p);
    const lofp_scheme *bs = a->b.scheme;
    p->wkind = sh.wkind;
    p->layout = a->b.layout;
    p->ws = bs;
    p->n = a->n;
    p->kp = sh.kp_w;
    p->kq = sh.kq;
    p->wblock = bs->block;
    lofp_gemm_luts(bs, p->elut, p->slut);
    if (p->layout == LOFP_WEIGHT_X8) {
        lofp_gemm_x8_geom(bs, a->n, a->k, &p->x8);
        p->wblock = p->x8.sblock;
        p->wpacked = a->b.codes;
    } else {
        p->wcodes = a->b.codes;
        p->wscales = a->b.scales;
        p->wrow_bytes = bs->elem == LOFP_ELEM_E2M1 ? sh.kp_w / 2 : sh.kp_w;
        p->wnsc = sh.kp_w / bs->block;
    }
    p->m = a->m;
    p->amode = sh.amode;
    p->halves = sh.halves;
    p->c = a->c;
    p->ldc = a->ldc ? a->ldc : a->n;
    double gdiv = bs->id == LOFP_SCHEME_NVFP4 ? (double)a->b.global : 1.0;

    /* A: quantize on the fly if asked, then bring it to the kernels' form */
    const uint8_t *acodes = a->aq.codes, *ascales = a->aq.scales;
    float aglobal = a->aq.global;
    if (sh.quant_on_fly && !(sh.fast_quant && K->quant_mxint8)) {
        const void *src = a->a;
        if (sh.lda != a->k) {
            size_t es = dtype_size(a->a_dtype);
            for (size_t i = 0; i < a->m; i++)
                memcpy(ws + wl.tdense + i * a->k * es, (const uint8_t *)a->a + i * sh.lda * es, a->k * es);
            src = ws + wl.tdense;
        }
        st = lofp_quantize(a->a_quant, a->a_dtype, src, a->m, a->k, ws + wl.tcodes, ws + wl.tscales,
                           &aglobal, NULL);
        if (st != LOFP_OK) goto out;
        acodes = ws + wl.tcodes;
        ascales = ws + wl.tscales;
    }
    if (sh.as && sh.as->id == LOFP_SCHEME_NVFP4) gdiv *= (double)aglobal;
    p->epi = gdiv == 1.0 ? 1.0 : 1.0 / gdiv;

    if (sh.amode == GEMM_A_I8) {
        p->aq = (const int8_t *)(ws + wl.q);
        p->as16 = (const float *)(ws + wl.s16);
        p->acorr16 = (const int32_t *)(ws + wl.c16);
        if (sh.quant_on_fly && sh.fast_quant && K->quant_mxint8) {
            size_t bad = K->quant_mxint8(a->a_dtype, a->a, sh.lda, a->m, a->k, sh.kq, a->a_quant->block,
                                         sh.halves, (int8_t *)(ws + wl.q), (float *)(ws + wl.s16),
                                         (int32_t *)(ws + wl.c16));
            if (bad) { st = LOFP_ERR_NONFINITE; goto out; }
        } else {
            prep_i8_from_codes(sh.as, acodes, ascales, a->m, a->k, sh.kq, sh.halves, (int8_t *)(ws + wl.q),
                               (float *)(ws + wl.s16), (int32_t *)(ws + wl.c16));
        }
    } else if (sh.direct_f32) {
        p->af = a->a;
        p->lda_f = sh.lda;
    } else {
        float *af = (float *)(ws + wl.af);
        if (sh.as) prep_f32_from_codes(sh.as, acodes, ascales, a->m, a->k, sh.kq, af);
        else prep_f32_dense(a->a_dtype, a->a, sh.lda, a->m, a->k, sh.kq, af);
        p->af = af;
        p->lda_f = sh.kq;
    }

    run_ctx rc;
    const char *what;
    rc.p = p;
    rc.fn = pick(K, &sh, p->layout, a->m, &rc.mode, &what);
    {
        unsigned nt = a->threads ? a->threads : 1;
        size_t units = lofp_ceil_div(p->n, GEMM_X8_ROWS);
        /* the unit run_part splits: 8-row groups of N, or rows of M when groups are scarce */
        lofp_gemm_parallel(nt, units >= nt || p->m < GEMM_BIG_M ? units : p->m, run_part, &rc);
    }
out:
    free(p);
    free(owned);
    return st;
}

lofp_status lofp_gemm(const lofp_gemm_args *args)
{
    return lofp_gemm_isa(args, LOFP_GEMM_ISA_AUTO);
}

const char *lofp_gemm_isa_kernel_name(const lofp_gemm_args *a, lofp_gemm_isa_t isa)
{
    static const char *const names[4][2][4] = {
        { { 0 } },
        { { "generic rows int8-dot", "generic rows fp32-dot", "generic rows fp32-gemm", 0 },
          { "generic x8 int8-dot", "generic x8 fp32-dot", "generic x8 fp32-gemm", 0 } },
        { { "avx2 rows int8-dot", "avx2 rows fp32-dot", "avx2 rows fp32-gemm", 0 },
          { "avx2 x8 int8-dot", "avx2 x8 fp32-dot", "avx2 x8 fp32-gemm", 0 } },
        { { "avx512 rows int8-dot", "avx512 rows fp32-dot", "avx512 rows fp32-gemm", 0 },
          { "avx512 x8 int8-dot", "avx512 x8 fp32-dot", "avx512 x8 fp32-gemm", 0 } },
    };
    if (!a || lofp_gemm_validate(a) != LOFP_OK) return "invalid";
    const gemm_kernels *K = get_table(isa);
    if (!K) return "invalid";
    gemm_shape sh;
    run_mode mode;
    const char *what;
    make_shape(a, &sh);
    gemm_kernel_fn f = pick(K, &sh, a->b.layout, a->m, &mode, &what);
    int generic = f == lofp_gemm_generic_i8_x8 || f == lofp_gemm_generic_i8_rows ||
                  f == lofp_gemm_generic_f32_x8 || f == lofp_gemm_generic_f32_rows;
    int t = generic ? LOFP_GEMM_ISA_GENERIC : (int)(K - g_tables);
    if (t == LOFP_GEMM_ISA_AVX512) { /* an entry the 512-bit file did not override runs AVX2 code */
        run_mode m2;
        const char *w2;
        if (f == pick(&g_tables[LOFP_GEMM_ISA_AVX2], &sh, a->b.layout, a->m, &m2, &w2)) t = LOFP_GEMM_ISA_AVX2;
        /* rows weights below GEMM_BIG_M: the 512-bit entry hands over to the AVX2 rows kernel */
        if (what[0] == 'i' && a->b.layout == LOFP_WEIGHT_ROWS && a->m < GEMM_BIG_M) t = LOFP_GEMM_ISA_AVX2;
    }
    int w = what[0] == 'i' ? 0 : strcmp(what, "fp32-dot") == 0 ? 1 : 2;
    return names[t][a->b.layout == LOFP_WEIGHT_X8][w];
}

const char *lofp_gemm_kernel_name(const lofp_gemm_args *args)
{
    return lofp_gemm_isa_kernel_name(args, LOFP_GEMM_ISA_AUTO);
}

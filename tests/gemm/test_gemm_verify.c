/* test_gemm_verify.c -- lofp_gemm_verify (lofp/gemm.h): a correct product passes; a product
 * computed with a known mistake (scales read in the wrong layout, FP4 nibbles swapped, the NVFP4
 * global forgotten) fails and is explained by that mistake; a corrupted kernel output (one element
 * wrong, NaN) fails and is explained by nothing; the report is the same for every thread count;
 * bad arguments are refused. Uses only the public headers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/gemm.h"
#include "test_util.h"

enum { M = 64, N = 32, K = 256 };

typedef struct {
    lofp_scheme s;
    size_t rows, cols;
    uint8_t *codes, *lin;   /* codes and linear scales as lofp_quantize wrote them */
    uint8_t *stored;        /* the scales in `layout` */
    size_t stored_bytes;
    lofp_layout layout;
    float global;
} qop;

static qop make(const char *scheme, size_t rows, lofp_layout layout, uint64_t seed)
{
    qop q;
    memset(&q, 0, sizeof q);
    CHECK_OK(lofp_scheme_preset(scheme, &q.s));
    q.rows = rows;
    q.cols = lofp_padded_k(&q.s, K) / q.s.block;
    q.layout = layout;
    float *x = malloc(rows * K * sizeof *x);
    tu_rng r = {seed};
    for (size_t i = 0; i < rows * K; i++) x[i] = (float)tu_normal(&r);
    q.codes = malloc(lofp_codes_bytes(&q.s, rows, K));
    q.lin = malloc(lofp_scales_bytes(&q.s, rows, K));
    q.global = 1;
    CHECK_OK(lofp_quantize(&q.s, LOFP_DTYPE_F32, x, rows, K, q.codes, q.lin, &q.global, NULL));
    q.stored_bytes = lofp_layout_required_bytes(rows, q.cols, 1, layout);
    q.stored = malloc(q.stored_bytes);
    CHECK_OK(lofp_layout_from_linear(q.lin, rows, q.cols, layout, -1, q.stored));
    free(x);
    return q;
}

static void drop(qop *q)
{
    free(q->codes); free(q->lin); free(q->stored);
}

static lofp_gemm_operand operand(const qop *q)
{
    lofp_gemm_operand o = {&q->s, q->rows, K, q->codes, q->stored, q->stored_bytes, q->layout, q->global};
    return o;
}

/* C = A·B^T in fp32 from the given codes / linear scales / globals of A and B (the fp64
 * reference rounded to fp32: what a correct kernel of another program returns). */
static void product(const qop *a, const uint8_t *acodes, const uint8_t *alin, float ag, const qop *b,
                    const uint8_t *bcodes, const uint8_t *blin, float bg, float *c)
{
    lofp_gemm_args g;
    lofp_gemm_args_init(&g);
    g.m = M; g.n = N; g.k = K;
    g.aq.scheme = &a->s; g.aq.codes = acodes; g.aq.scales = alin; g.aq.global = ag;
    g.b.scheme = &b->s; g.b.codes = bcodes; g.b.scales = blin; g.b.global = bg;
    double *ref = malloc(sizeof(double) * M * N);
    CHECK_OK(lofp_gemm_ref(&g, ref, 0));
    for (size_t i = 0; i < (size_t)M * N; i++) c[i] = (float)ref[i];
    free(ref);
}

static const char *closest(const lofp_gemm_verify_report *r)
{
    return r->closest >= 0 ? r->candidates[r->closest].desc : "none";
}

int main(void)
{
    qop a = make("nvfp4", M, LOFP_LAYOUT_SWIZZLE_128X4, 1), b = make("mxfp4", N, LOFP_LAYOUT_LINEAR, 2);
    lofp_gemm_operand oa = operand(&a), ob = operand(&b);
    float *c = malloc(sizeof(float) * M * N);
    lofp_gemm_verify_report *r = malloc(sizeof *r), *r4 = malloc(sizeof *r4);
    lofp_gemm_verify_options opt;
    lofp_gemm_verify_options_init(&opt);
    CHECK(opt.tol == 1e-2 && opt.threads == 1);

    /* a correct product passes and tries nothing */
    product(&a, a.codes, a.lin, a.global, &b, b.codes, b.lin, b.global, c);
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, NULL, r));
    CHECKF(r->ok && r->error < 1e-6 && r->ncandidates == 0 && r->closest == -1, "error %g", r->error);

    /* a corrupted kernel output: one element far off. It fails and no known mistake explains it. */
    c[5 * N + 7] += 1000.0f;
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, &opt, r));
    CHECKF(!r->ok && r->error > opt.tol, "error %g", r->error);
    CHECK(r->ncandidates > 0 && !r->explained);
    /* the same report on 4 threads */
    opt.threads = 4;
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, &opt, r4));
    CHECK(memcmp(r, r4, sizeof *r) == 0);
    opt.threads = 1;

    /* NaN in C never passes */
    product(&a, a.codes, a.lin, a.global, &b, b.codes, b.lin, b.global, c);
    c[0] = NAN;
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, &opt, r));
    CHECK(!r->ok && isinf(r->error));

    /* the consumer read A's swizzled scales as linear */
    uint8_t *wrong = malloc(M * a.cols);
    memcpy(wrong, a.stored, M * a.cols);
    product(&a, a.codes, wrong, a.global, &b, b.codes, b.lin, b.global, c);
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, &opt, r));
    CHECKF(!r->ok && r->explained && !strcmp(closest(r), "A scales (written swizzle-128x4) read as linear"),
           "closest: %s", closest(r));
    free(wrong);

    /* FP4 nibbles of B swapped */
    size_t bcb = lofp_codes_bytes(&b.s, N, K);
    uint8_t *sw = malloc(bcb);
    for (size_t i = 0; i < bcb; i++) sw[i] = (uint8_t)((b.codes[i] >> 4) | (b.codes[i] << 4));
    product(&a, a.codes, a.lin, a.global, &b, sw, b.lin, b.global, c);
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, &opt, r));
    CHECKF(!r->ok && r->explained && strstr(closest(r), "FP4 nibbles swapped"), "closest: %s", closest(r));
    free(sw);

    /* A's NVFP4 global never divided out */
    product(&a, a.codes, a.lin, 1.0f, &b, b.codes, b.lin, b.global, c);
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, &opt, r));
    CHECKF(!r->ok && r->explained && !strcmp(closest(r), "A per-tensor scale not applied"), "closest: %s", closest(r));

    /* a large tolerance lets the same product pass */
    opt.tol = 1e9;
    CHECK_OK(lofp_gemm_verify(&oa, &ob, c, &opt, r));
    CHECK(r->ok && r->tol == 1e9);
    opt.tol = 1e-2;

    /* bad arguments: the report is zeroed */
    lofp_gemm_operand bad = ob;
    bad.k = K / 2;
    CHECK(lofp_gemm_verify(&oa, &bad, c, &opt, r) == LOFP_ERR_SHAPE && r->ncandidates == 0 && !r->ok);
    bad = ob;
    bad.scales_bytes = 1;
    CHECK(lofp_gemm_verify(&oa, &bad, c, &opt, r) == LOFP_ERR_BUFFER_TOO_SMALL);
    bad = oa;
    bad.global = NAN;
    CHECK(lofp_gemm_verify(&bad, &ob, c, &opt, r) == LOFP_ERR_INVALID_ARG);
    bad = oa;
    bad.layout = LOFP_LAYOUT_COUNT_;
    CHECK(lofp_gemm_verify(&bad, &ob, c, &opt, r) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gemm_verify(&oa, &ob, NULL, &opt, r) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gemm_verify(NULL, &ob, c, &opt, r) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gemm_verify(&oa, &ob, c, &opt, NULL) == LOFP_ERR_INVALID_ARG);
    opt.tol = -1;
    CHECK(lofp_gemm_verify(&oa, &ob, c, &opt, r) == LOFP_ERR_INVALID_ARG);

    free(c); free(r); free(r4);
    drop(&a); drop(&b);
    return tu_finish("test_gemm_verify");
}

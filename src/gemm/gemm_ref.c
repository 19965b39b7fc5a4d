/* gemm_ref.c -- the fp64 reference GEMM (SPEC §4): both operands dequantized exactly (code *
 * scale, in double), a sequential double sum over the logical K, then one division by each
 * NVFP4 encode global. Obvious and slow on purpose: the tests and the benchmark compare every
 * fast kernel against it. */
#include <stdlib.h>

#include "gemm_internal.h"

/* Dequantizes rows-layout codes of scheme s to double, [rows][k] (logical k). */
static void deq_rows(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales, size_t rows,
                     size_t k, double *out)
{
    float elut[256], slut[256];
    lofp_gemm_luts(s, elut, slut);
    size_t kp = lofp_padded_k(s, k), nsr = kp / s->block;
    size_t rb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *rc = codes + r * rb;
        for (size_t e = 0; e < k; e++) {
            unsigned c = s->elem == LOFP_ELEM_E2M1 ? (rc[e >> 1] >> ((e & 1) * 4)) & 15u : rc[e];
            out[r * k + e] = (double)elut[c] * (double)slut[scales[r * nsr + e / s->block]];
        }
    }
}

lofp_status lofp_gemm_ref(const lofp_gemm_args *a, double *c, size_t ldc)
{
    lofp_status st = lofp_gemm_validate(a);
    if (st != LOFP_OK) return st;
    if (!c) return LOFP_ERR_INVALID_ARG;
    if (ldc == 0) ldc = a->n;
    if (ldc < a->n) return LOFP_ERR_INVALID_ARG;
    size_t m = a->m, n = a->n, k = a->k, lda = a->lda ? a->lda : k, t;
    if (!lofp_mul_size(m + n, k, &t) || !lofp_mul_size(t, sizeof(double), &t)) return LOFP_ERR_SIZE_OVERFLOW;
    double *A = malloc(m * k * sizeof(double)), *B = malloc(n * k * sizeof(double));
    uint8_t *tc = NULL, *ts = NULL;
    void *dense = NULL;
    double div = 1.0;
    st = LOFP_ERR_NOMEM;
    if (!A || !B) goto out;

    /* B */
    const lofp_scheme *bs = a->b.scheme;
    if (a->b.layout == LOFP_WEIGHT_X8) {
        tc = malloc(lofp_codes_bytes(bs, n, k));
        ts = malloc(lofp_scales_bytes(bs, n, k));
        if (!tc || !ts) goto out;
        if ((st = lofp_weight_unpack(bs, a->b.codes, n, k, LOFP_WEIGHT_X8, tc, ts)) != LOFP_OK) goto out;
        deq_rows(bs, tc, ts, n, k, B);
        free(tc);
        free(ts);
        tc = NULL;
        ts = NULL;
    } else {
        deq_rows(bs, a->b.codes, a->b.scales, n, k, B);
    }
    if (bs->id == LOFP_SCHEME_NVFP4) div = (double)a->b.global;

    /* A */
    double adiv = 1.0;
    if (a->a && !a->a_quant) {
        for (size_t i = 0; i < m; i++)
            for (size_t e = 0; e < k; e++) A[i * k + e] = (double)lofp_load_f32(a->a_dtype, a->a, i * lda + e);
    } else if (a->a) {
        size_t es = a->a_dtype == LOFP_DTYPE_F32 ? 4 : 2;
        const void *src = a->a;
        if (lda != k) {
            dense = malloc(m * k * es);
            if (!dense) goto out;
            for (size_t i = 0; i < m; i++)
                memcpy((uint8_t *)dense + i * k * es, (const uint8_t *)a->a + i * lda * es, k * es);
            src = dense;
        }
        tc = malloc(lofp_codes_bytes(a->a_quant, m, k));
        ts = malloc(lofp_scales_bytes(a->a_quant, m, k));
        if (!tc || !ts) { st = LOFP_ERR_NOMEM; goto out; }
        float g = 1.0f;
        if ((st = lofp_quantize(a->a_quant, a->a_dtype, src, m, k, tc, ts, &g, NULL)) != LOFP_OK) goto out;
        deq_rows(a->a_quant, tc, ts, m, k, A);
        if (a->a_quant->id == LOFP_SCHEME_NVFP4) adiv = (double)g;
    } else {
        deq_rows(a->aq.scheme, a->aq.codes, a->aq.scales, m, k, A);
        if (a->aq.scheme->id == LOFP_SCHEME_NVFP4) adiv = (double)a->aq.global;
    }

    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t e = 0; e < k; e++) s += A[i * k + e] * B[j * k + e];
            c[i * ldc + j] = s / adiv / div;
        }
    }
    st = LOFP_OK;
out:
    free(A);
    free(B);
    free(tc);
    free(ts);
    free(dense);
    return st;
}

/* gemm_generic.c -- the portable GEMM kernels: plain C, every weight kind and layout. They are
 * the fallback of every ISA table and the exact path the SIMD kernels hand special groups to.
 *
 * Integer path (E2M1 weights, int8 activations): per superblock of 32 (halves = 1) or per 16
 * (halves = 2) an exact int32 sum S of (2 * E2M1) * a, then acc += (float)S * (ws * as) with ws
 * the weight scale and as the prepared activation scale. In the fp32 normal range ws * as and
 * S * (ws * as) are exact, so each term is exact and only the running sum rounds; the AVX2
 * kernels compute the very same terms in the very same order per output, so their results agree
 * bit for bit with these (docs/GEMM.md).
 *
 * fp32 path: per weight scale block, part = sum of value * a (fp32, sequential), then
 * acc += part * scale. */
#include "gemm_internal.h"

/* code e of row j (rows layout) */
static inline unsigned rows_code(const gemm_plan *p, size_t j, size_t e)
{
    const uint8_t *rc = p->wcodes + j * p->wrow_bytes;
    if (p->ws->elem == LOFP_ELEM_E2M1) return (rc[e >> 1] >> ((e & 1) * 4)) & 15u;
    return rc[e];
}

static inline uint8_t rows_scale(const gemm_plan *p, size_t j, size_t e)
{
    return p->wscales[j * p->wnsc + e / p->wblock];
}

/* The integer dot of weight row j against activation row i, from a code accessor. */
#define I8_DOT(CODE, SCALE)                                                                        \
    do {                                                                                           \
        const int8_t *q = p->aq + i * p->kq;                                                       \
        const float *s16 = p->as16 + i * (p->kq / 16);                                             \
        float acc = 0.0f;                                                                          \
        size_t step = p->halves == 1 ? 32 : 16;                                                    \
        for (size_t e0 = 0; e0 < p->kp; e0 += step) {                                              \
            int32_t S = 0;                                                                         \
            for (size_t e = e0; e < e0 + step; e++) S += lofp_e2m1_x2(CODE) * q[e];               \
            float sc = p->slut[SCALE] * s16[e0 / 16];                                              \
            acc += (float)S * sc;                                                                  \
        }                                                                                          \
        lofp_gemm_store(p, i, j, acc);                                                             \
    } while (0)

void lofp_gemm_generic_i8_rows(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    for (size_t j = j0; j < j1; j++)
        for (size_t i = i0; i < i1; i++) I8_DOT(rows_code(p, j, e), rows_scale(p, j, e0));
}

void lofp_gemm_generic_i8_x8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    for (size_t j = j0; j < j1; j++) {
        size_t g = j / GEMM_X8_ROWS;
        unsigned r = (unsigned)(j % GEMM_X8_ROWS);
        for (size_t i = i0; i < i1; i++)
            I8_DOT(lofp_x8_code(&p->x8, p->wpacked, g, r, e),
                   lofp_x8_scale(&p->x8, p->wpacked, g, r, e0 / p->wblock));
    }
}

/* The fp32 dot of weight row j against activation row i. */
#define F32_DOT(CODE, SCALE)                                                                       \
    do {                                                                                           \
        const float *x = p->af + i * p->lda_f;                                                     \
        float acc = 0.0f;                                                                          \
        for (size_t e0 = 0; e0 < p->kp; e0 += p->wblock) {                                         \
            float part = 0.0f;                                                                     \
            for (size_t e = e0; e < e0 + p->wblock; e++) part += p->elut[CODE] * x[e];            \
            acc += part * p->slut[SCALE];                                                          \
        }                                                                                          \
        lofp_gemm_store(p, i, j, acc);                                                             \
    } while (0)

void lofp_gemm_generic_f32_rows(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    for (size_t j = j0; j < j1; j++)
        for (size_t i = i0; i < i1; i++) F32_DOT(rows_code(p, j, e), rows_scale(p, j, e0));
}

void lofp_gemm_generic_f32_x8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1)
{
    for (size_t j = j0; j < j1; j++) {
        size_t g = j / GEMM_X8_ROWS;
        unsigned r = (unsigned)(j % GEMM_X8_ROWS);
        for (size_t i = i0; i < i1; i++)
            F32_DOT(lofp_x8_code(&p->x8, p->wpacked, g, r, e),
                    lofp_x8_scale(&p->x8, p->wpacked, g, r, e0 / p->wblock));
    }
}

void lofp_gemm_kernels_generic(gemm_kernels *k)
{
    memset(k, 0, sizeof *k);
    k->isa = "generic";
    for (int w = 0; w < GEMM_W_KINDS_; w++) {
        k->i8_x8[w] = lofp_gemm_generic_i8_x8;
        k->i8_rows[w] = lofp_gemm_generic_i8_rows;
        k->f32_x8[w] = lofp_gemm_generic_f32_x8;
        k->f32_rows[w] = lofp_gemm_generic_f32_rows;
    }
}

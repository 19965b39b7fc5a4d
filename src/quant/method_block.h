/* method_block.h -- one format block quantized at a given scale code, as the reference quantizers
 * (quant_nvfp4.c, quant_mx.c) do it, for the methods of lofp/method.h that choose the scale
 * themselves (mse.c, gptq_quantize.c). The element encoders are kernel_util.h's integer forms of
 * the reference's, which tests/quant/test_kernels.c checks bit for bit. */
#ifndef LOFP_QUANT_METHOD_BLOCK_H
#define LOFP_QUANT_METHOD_BLOCK_H

#include "lofp/method.h"
#include "kernel_util.h"

typedef struct lofp_mblk {
    const lofp_scheme *s;
    int nvfp4;
    uint32_t block;
    uint32_t max_scale;  /* largest valid scale code: 0x7E (UE4M3) or 254 (E8M0) */
    float global;        /* NVFP4 encode multiplier (1 otherwise) */
    kq_mx mx;            /* MX element encoder and scale rule */
    int32_t thr[7];      /* NVFP4 E2M1 thresholds for s->rounding */
    float dec[256];      /* element code -> value */
} lofp_mblk;

/* Checks that the methods support scheme s (validated, LOFP profile, no stochastic rounding, not
 * UltraQuant) and the multiplier. Returns LOFP_OK, LOFP_ERR_UNSUPPORTED or LOFP_ERR_INVALID_ARG. */
LOFP_INTERNAL lofp_status lofp_mblk_check(const lofp_scheme *s, float global);
LOFP_INTERNAL void lofp_mblk_init(lofp_mblk *m, const lofp_scheme *s, float global);

/* The scale code the scheme's rule picks for block values x[0..block) (finite). */
LOFP_INTERNAL uint32_t lofp_mblk_rtn_scale(const lofp_mblk *m, const float *x);

/* Code of value v at scale code sc, and its dequantized value (what lofp_dequantize returns). */
static inline uint32_t lofp_mblk_code(const lofp_mblk *m, uint32_t sc, float v, float *deq)
{
    if (m->nvfp4) {
        float sf = kq_ue4m3_decode(sc);
        float bq = sf > 0.0f ? sf : 0x1p-9f; /* quant_nvfp4.c: a zero scale divides by 2^-9 */
        float e = (v * m->global) / bq;
        if (e < -6.0f) e = -6.0f;
        if (e > 6.0f) e = 6.0f;
        uint32_t c = kq_e2m1_code(m->thr, lofp_f32_bits(e));
        *deq = (m->dec[c] * sf) / m->global;
        return c;
    }
    float sf = sc ? lofp_bits_f32(sc << 23) : lofp_bits_f32(0x00400000u); /* 2^(sc-127) */
    uint32_t c = kq_mx_code(&m->mx, v / sf);
    *deq = m->dec[c] * sf;
    return c;
}

/* Weighted squared error of block x at scale code sc (w NULL = 1), in double, j increasing:
 * err += w_j * (d_j * d_j), d_j = (double)x_j - (double)deq_j. Writes the codes to code[] when it
 * is non-NULL. */
LOFP_INTERNAL double lofp_mblk_error(const lofp_mblk *m, uint32_t sc, const float *x,
                                     const float *w, uint32_t *code);

/* The MSE search of lofp_mse_quantize_rows over block x: returns the chosen scale code and its
 * error in *err. */
LOFP_INTERNAL uint32_t lofp_mblk_mse_scale(const lofp_mblk *m, const float *x, const float *w,
                                           unsigned window, double *err);

#endif

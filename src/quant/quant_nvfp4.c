/* quant_nvfp4.c -- NVFP4 (seed 000): E2M1 codes, UE4M3 scale per 16, fp32 per-tensor multiplier.
 * The op order is the contract (SPEC §2): g = x * global; bs = clamp(bmax / 6, 1e-12, 448);
 * bs_q = UE4M3(bs) (RNE); e = clamp(g / bs_q, -6, 6) (dividing by 2^-9 when bs_q is 0);
 * dequant (code * scale) / global. This file is built with -ffp-contract=off like all others. */
#include <math.h>

#include "reference.h"

static size_t nvfp4_quant_row(const lofp_scheme *s, float *x, size_t kp, float global,
                              uint64_t base, uint8_t *codes, uint8_t *scales)
{
    const uint32_t B = s->block;
    for (size_t b = 0; b < kp / B; b++) {
        float *g = x + b * B;
        float bmax = 0.0f;
        for (uint32_t i = 0; i < B; i++) {
            g[i] = g[i] * global;
            float a = fabsf(g[i]);
            if (a > bmax) bmax = a;
        }
        float bs = bmax / 6.0f;
        if (bs < 1e-12f) bs = 1e-12f;
        if (bs > 448.0f) bs = 448.0f;
        uint32_t sb = lofp_encode(LOFP_ELEM_UE4M3, bs, LOFP_RNE, LOFP_SATURATE, 0);
        float bq = lofp_decode(LOFP_ELEM_UE4M3, sb);
        if (!(bq > 0.0f)) bq = 0x1p-9f;
        scales[b] = (uint8_t)sb;
        for (uint32_t i = 0; i < B; i++) {
            float e = g[i] / bq;
            if (e < -6.0f) e = -6.0f;
            if (e > 6.0f) e = 6.0f;
            uint64_t idx = base + b * B + i;
            uint32_t rb = s->rounding == LOFP_STOCHASTIC ? lofp_stochastic_bits(s->seed, idx) : 0;
            lofp_put_code(s, codes, b * B + i, lofp_encode(LOFP_ELEM_E2M1, e, s->rounding, LOFP_SATURATE, rb));
        }
    }
    return 0;
}

static void nvfp4_dequant_row(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                              float global, size_t kp, float *out)
{
    const uint32_t B = s->block;
    for (size_t j = 0; j < kp; j++) {
        float v = lofp_decode(LOFP_ELEM_E2M1, lofp_get_code(s, codes, j));
        float sc = lofp_decode(LOFP_ELEM_UE4M3, scales[j / B]);
        out[j] = (v * sc) / global;
    }
}

const lofp_family_t lofp_family_nvfp4 = { nvfp4_quant_row, nvfp4_dequant_row };

/* generic_nvfp4.c -- portable NVFP4 row kernels: the reference's op order (quant_nvfp4.c) with
 * branch-free codecs. g = x * global; bmax = max |g| (integer max of the magnitude bits, which
 * orders non-negative floats as the float compare does); bs = bmax / 6 (a true division);
 * clamp; UE4M3 by the integer encoder; e = g / bq (a true division); E2M1 by thresholds. */
#include "generic_kernels.h"

void lofp_stochastic_codes(const lofp_scheme *s, const float *e, size_t n, uint64_t base,
                           uint8_t *codes, size_t at)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t rb = lofp_stochastic_bits(s->seed, base + i);
        lofp_put_code(s, codes, at + i, lofp_encode(s->elem, e[i], LOFP_STOCHASTIC, LOFP_SATURATE, rb));
    }
}

size_t lofp_nvfp4_quant_row_generic(const lofp_scheme *s, const float *x, size_t kp, float global,
                                    uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)scratch;
    int32_t thr[7];
    kq_e2m1_thresholds(s->rounding == LOFP_STOCHASTIC ? LOFP_RNE : s->rounding, thr);
    size_t bad = 0;
    for (size_t b = 0; b < kp / 16; b++) {
        const float *xb = x + b * 16;
        uint8_t *cb = codes + b * 8;
        float g[16];
        uint32_t mx = 0;
        for (int i = 0; i < 16; i++) {
            g[i] = xb[i] * global;
            uint32_t a = lofp_f32_bits(g[i]) & 0x7FFFFFFFu;
            mx = a > mx ? a : mx;
        }
        /* |g| = Inf also comes from finite x times a large given multiplier: only a non-finite
         * x makes the block bad (its outputs are then discarded by the driver) */
        if (LOFP_UNLIKELY(mx >= 0x7F800000u) && kq_first_nonfinite_f32(xb, 16) < 16) {
            scales[b] = 0;
            memset(cb, 0, 8);
            bad++;
            continue;
        }
        float bs = lofp_bits_f32(mx) / 6.0f;
        if (bs < 1e-12f) bs = 1e-12f;
        if (bs > 448.0f) bs = 448.0f;
        uint32_t sb = kq_ue4m3_encode(bs);
        float bq = kq_ue4m3_decode(sb);
        if (!(bq > 0.0f)) bq = 0x1p-9f;
        scales[b] = (uint8_t)sb;
        if (LOFP_UNLIKELY(s->rounding == LOFP_STOCHASTIC)) {
            float e[16];
            for (int i = 0; i < 16; i++) {
                e[i] = g[i] / bq;
                if (e[i] < -6.0f) e[i] = -6.0f;
                if (e[i] > 6.0f) e[i] = 6.0f;
            }
            lofp_stochastic_codes(s, e, 16, base + b * 16, codes, b * 16);
            continue;
        }
        /* the reference clamps e to [-6, 6] first; the threshold count saturates at 7 and the
         * sign bit is unchanged by the clamp, so the codes are the same without it */
        for (int i = 0; i < 16; i += 2) {
            uint32_t c0 = kq_e2m1_code(thr, lofp_f32_bits(g[i] / bq));
            uint32_t c1 = kq_e2m1_code(thr, lofp_f32_bits(g[i + 1] / bq));
            cb[i / 2] = (uint8_t)(c0 | (c1 << 4));
        }
    }
    return bad;
}

void lofp_nvfp4_dequant_row_generic(const lofp_scheme *s, const uint8_t *codes,
                                    const uint8_t *scales, float global, size_t kp, float *out,
                                    unsigned flags)
{
    (void)s;
    (void)flags; /* portable C has no non-temporal store */
    const float *e2m1 = lofp_decode_table(LOFP_ELEM_E2M1);
    const float *ue4m3 = lofp_decode_table(LOFP_ELEM_UE4M3);
    for (size_t b = 0; b < kp / 16; b++) {
        float sc = ue4m3[scales[b]];
        const uint8_t *cb = codes + b * 8;
        float *o = out + b * 16;
        for (int i = 0; i < 8; i++) {
            o[2 * i] = (e2m1[cb[i] & 0x0F] * sc) / global;
            o[2 * i + 1] = (e2m1[cb[i] >> 4] * sc) / global;
        }
    }
}

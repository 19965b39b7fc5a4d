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
    const int stochastic = s->rounding == LOFP_STOCHASTIC;
    const size_t nb = kp / 16;
    size_t bad = 0;
    float e32[32]; /* the element values of a pair of blocks, encoded together */
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * 16;
        float *e = e32 + (b & 1) * 16;
        float g[16];
        uint32_t mx = 0;
        for (int i = 0; i < 16; i++) {
            g[i] = xb[i] * global;
            uint32_t a = lofp_f32_bits(g[i]) & 0x7FFFFFFFu;
            mx = a > mx ? a : mx;
        }
        /* |g| = Inf also comes from finite x times a large given multiplier: only a non-finite
         * x makes the block bad (its outputs are then discarded by the driver: zero codes) */
        if (LOFP_UNLIKELY(mx >= 0x7F800000u) && kq_first_nonfinite_f32(xb, 16) < 16) {
            scales[b] = 0;
            memset(e, 0, 16 * sizeof(float));
            bad++;
        } else {
            float bs = lofp_bits_f32(mx) / 6.0f;
            if (bs < 1e-12f) bs = 1e-12f;
            if (bs > 448.0f) bs = 448.0f;
            uint32_t sb = kq_ue4m3_encode(bs);
            float bq = kq_ue4m3_decode(sb);
            if (!(bq > 0.0f)) bq = 0x1p-9f;
            scales[b] = (uint8_t)sb;
            for (int i = 0; i < 16; i++) e[i] = g[i] / bq;
        }
        if (LOFP_UNLIKELY(stochastic)) {
            for (int i = 0; i < 16; i++) { /* the reference clamps before this encode */
                if (e[i] < -6.0f) e[i] = -6.0f;
                if (e[i] > 6.0f) e[i] = 6.0f;
            }
            lofp_stochastic_codes(s, e, 16, base + b * 16, codes, b * 16);
            continue;
        }
        /* the reference clamps e to [-6, 6] first; the threshold count saturates at 7 and the
         * sign bit is unchanged by the clamp, so the codes are the same without it */
        if (b & 1) {
            kq_e2m1_pack32(thr, e32, codes + (b - 1) * 8);
        } else if (b + 1 == nb) { /* an odd last block: encode it with a zero half */
            uint8_t tmp[16];
            memset(e32 + 16, 0, 16 * sizeof(float));
            kq_e2m1_pack32(thr, e32, tmp);
            memcpy(codes + b * 8, tmp, 8);
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

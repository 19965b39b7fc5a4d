/* generic_mx.c -- portable MX row kernels (MXFP4/6/8, MXINT8, tilelang-mxfp8): the reference's
 * block amax, its scale rule rule for rule (kernel_util.h), elements v * 2^-s (the same value
 * as the reference's v / 2^s, see kq_e8m0_recip) and branch-free element encoders. */
#include "generic_kernels.h"

size_t lofp_mx_quant_row_generic(const lofp_scheme *s, const float *x, size_t kp, float global,
                                 uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)global;
    (void)scratch;
    kq_mx p;
    kq_mx_init(s, &p);
    const uint32_t B = s->block;
    const int fp4 = p.kind == KQ_MX_FP4;
    const size_t cbytes = fp4 ? B / 2 : B;
    size_t bad = 0;
    for (size_t b = 0; b < kp / B; b++) {
        const float *v = x + b * B;
        uint8_t *cb = codes + b * cbytes;
        uint32_t mx = 0;
        for (uint32_t i = 0; i < B; i++) {
            uint32_t a = lofp_f32_bits(v[i]) & 0x7FFFFFFFu;
            mx = a > mx ? a : mx;
        }
        if (LOFP_UNLIKELY(mx >= 0x7F800000u)) {
            /* a non-finite element: scale NaN, codes zero (propagation; else the driver errors) */
            scales[b] = 0xFF;
            memset(cb, 0, cbytes);
            bad++;
            continue;
        }
        uint8_t sb = kq_mx_scale_byte(&p, lofp_bits_f32(mx));
        scales[b] = sb;
        const float r = kq_e8m0_recip(sb);
        if (LOFP_UNLIKELY(p.rounding == LOFP_STOCHASTIC)) {
            float e[32];
            for (uint32_t i0 = 0; i0 < B; i0 += 32) {
                for (int i = 0; i < 32; i++) e[i] = v[i0 + i] * r;
                lofp_stochastic_codes(s, e, 32, base + b * B + i0, codes, b * B + i0);
            }
            continue;
        }
        if (fp4) {
            float e[32];
            for (uint32_t i0 = 0; i0 < B; i0 += 32) {
                for (int i = 0; i < 32; i++) e[i] = v[i0 + i] * r;
                kq_e2m1_pack32(p.thr, e, cb + i0 / 2);
            }
        } else {
            for (uint32_t i = 0; i < B; i++) cb[i] = (uint8_t)kq_mx_code(&p, v[i] * r);
        }
    }
    return bad;
}

void lofp_mx_dequant_row_generic(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                                 float global, size_t kp, float *out, unsigned flags)
{
    (void)global;
    (void)flags;
    const float *tab = lofp_decode_table(s->elem);
    const float *e8m0 = lofp_decode_table(LOFP_ELEM_E8M0);
    const uint32_t B = s->block;
    /* A 0xFF (NaN) scale makes the whole block the scale's NaN, also where the element code is
     * itself a NaN: with two NaN operands x86 returns the first, and the reference's compiled
     * v * scale puts the scale first (the tests pin this on NaN codes x NaN scales). */
    for (size_t b = 0; b < kp / B; b++)
        if (LOFP_UNLIKELY(scales[b] == 0xFF))
            for (uint32_t i = 0; i < B; i++) out[b * B + i] = e8m0[0xFF];
    if (s->elem == LOFP_ELEM_E2M1) {
        for (size_t b = 0; b < kp / B; b++) {
            if (LOFP_UNLIKELY(scales[b] == 0xFF)) continue;
            const float sc = e8m0[scales[b]];
            const uint8_t *cb = codes + b * (B / 2);
            float *o = out + b * B;
            for (uint32_t i = 0; i < B / 2; i++) {
                o[2 * i] = tab[cb[i] & 0x0F] * sc;
                o[2 * i + 1] = tab[cb[i] >> 4] * sc;
            }
        }
        return;
    }
    for (size_t b = 0; b < kp / B; b++) {
        if (LOFP_UNLIKELY(scales[b] == 0xFF)) continue;
        const float sc = e8m0[scales[b]];
        const uint8_t *cb = codes + b * B;
        float *o = out + b * B;
        for (uint32_t i = 0; i < B; i++) o[i] = tab[cb[i]] * sc;
    }
}

/* generic_uq.c -- portable UltraQuant row kernels: the rotation (the reference butterfly, or the
 * dense product eight outputs at a time with the reference's sequential sum), then per group of
 * 32 the reference's scale (log2 in double, once per group) and the snap by thresholds. */
#include <math.h>

#include "generic_kernels.h"

void lofp_hadamard_dense_generic(const float *x, float *y, size_t d)
{
    if (d < 8) { lofp_hadamard_dense(x, y, d); return; }
    const float h = (float)(1.0 / sqrt((double)d));
    /* H[i][j] = +-h with the sign of popcount(i & j); for i = i0 + l (i0 a multiple of 8) the
     * parity is parity(i0 & j) ^ parity(l & j & 7): a pattern row per j & 7, flipped by i0 & j */
    float pat[8][8];
    for (int jj = 0; jj < 8; jj++)
        for (int l = 0; l < 8; l++) pat[jj][l] = (__builtin_popcount((unsigned)(l & jj)) & 1) ? -h : h;
    for (size_t i0 = 0; i0 < d; i0 += 8) {
        float acc[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
        for (size_t j = 0; j < d; j++) {
            const float *pj = pat[j & 7];
            const float flip = (__builtin_popcountll((unsigned long long)(i0 & j)) & 1) ? -1.0f : 1.0f;
            const float xj = x[j];
            for (int l = 0; l < 8; l++) acc[l] = acc[l] + xj * (pj[l] * flip); /* +-h exactly */
        }
        memcpy(y + i0, acc, sizeof acc);
    }
}

size_t lofp_uq_groups_generic(const lofp_scheme *s, const float *v, size_t kp, uint8_t *codes,
                              uint8_t *scales)
{
    size_t bad = 0;
    for (size_t g = 0; g < kp / 32; g++) {
        const float *vg = v + g * 32;
        uint8_t *cg = codes + g * 16;
        uint32_t mx = 0;
        for (int i = 0; i < 32; i++) {
            uint32_t a = lofp_f32_bits(vg[i]) & 0x7FFFFFFFu;
            mx = a > mx ? a : mx;
        }
        int finite = mx < 0x7F800000u;
        float s_raw = lofp_bits_f32(mx) * s->c;
        if (!finite || !(s_raw > 0.0f) || !isfinite(s_raw)) {
            bad += !finite;
            scales[g] = 0;
            memset(cg, 0, 16);
            continue;
        }
        int e = kq_uq_exponent(s_raw); /* = floorf((float)log2((double)s_raw) + 0.5f) */
        if (e < -126) e = -126;
        if (e > 127) e = 127;
        scales[g] = (uint8_t)(e + 127);
        const float r = kq_e8m0_recip((uint32_t)(e + 127));
        uint32_t c[32]; /* fixed-length loops: vectorised with the baseline ISA */
        for (int i = 0; i < 32; i++) c[i] = kq_uq_code(lofp_f32_bits(vg[i] * r));
        for (int i = 0; i < 16; i++) cg[i] = (uint8_t)(c[2 * i] | (c[2 * i + 1] << 4));
    }
    return bad;
}

size_t lofp_uq_quant_row_generic(const lofp_scheme *s, const float *x, size_t kp, float global,
                                 uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)global;
    (void)base;
    const float *v = x;
    if (s->rotate) {
        if (s->hadamard == LOFP_HADAMARD_DENSE) {
            lofp_hadamard_dense_generic(x, scratch, kp);
        } else {
            memcpy(scratch, x, kp * sizeof(float));
            lofp_hadamard_inplace(scratch, kp, NULL);
        }
        v = scratch;
    }
    return lofp_uq_groups_generic(s, v, kp, codes, scales);
}

void lofp_uq_dequant_row_generic(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                                 float global, size_t kp, float *out, unsigned flags)
{
    (void)s;
    (void)flags;
    (void)global;
    const float *e2m1 = lofp_decode_table(LOFP_ELEM_E2M1);
    for (size_t g = 0; g < kp / 32; g++) {
        uint8_t b = scales[g];
        const float sc = b ? lofp_bits_f32((uint32_t)b << 23) : 0.0f;
        const uint8_t *cg = codes + g * 16;
        float *o = out + g * 32;
        for (int i = 0; i < 16; i++) {
            o[2 * i] = e2m1[cg[i] & 0x0F] * sc;
            o[2 * i + 1] = e2m1[cg[i] >> 4] * sc;
        }
    }
}

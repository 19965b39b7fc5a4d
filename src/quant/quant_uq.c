/* quant_uq.c -- UltraQuant (seed 003, vLLM ultraquant reference): E2M1 codes, E8M0 byte per 32
 * with byte 0 meaning a zero group, c folded into the scale, optional Hadamard rotation.
 * All fp32: s_raw = c * absmax; e = floor(fl(log2(s_raw)) + 0.5) clamped to [-126, 127];
 * idx = #{midpoints < x / 2^e}; code = idx < 7 ? 15 - idx : idx - 7 (ties toward -inf, never -0). */
#include <math.h>

#include "reference.h"

static const float uq_mid[14] = { -5.0f, -3.5f, -2.5f, -1.75f, -1.25f, -0.75f, -0.25f,
                                  0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f };

static uint32_t uq_snap(float y)
{
    uint32_t idx = 0;
    for (int j = 0; j < 14; j++) idx += y > uq_mid[j]; /* NaN counts nothing: never reached */
    return idx < 7 ? 15 - idx : idx - 7;
}

static size_t uq_quant_row(const lofp_scheme *s, float *x, size_t kp, float global,
                           uint64_t base, uint8_t *codes, uint8_t *scales)
{
    (void)global;
    (void)base;
    if (s->rotate) {
        if (s->hadamard == LOFP_HADAMARD_DENSE) {
            float *y = x + kp; /* the driver's scratch holds 2 * kp floats */
            lofp_hadamard_dense(x, y, kp);
            memcpy(x, y, kp * sizeof(float));
        } else {
            lofp_hadamard_inplace(x, kp, NULL);
        }
    }
    size_t bad = 0;
    for (size_t g = 0; g < kp / 32; g++) {
        const float *v = x + g * 32;
        float amax = 0.0f;
        int finite = 1;
        for (int i = 0; i < 32; i++) {
            float a = fabsf(v[i]);
            if (!isfinite(a)) finite = 0;
            else if (a > amax) amax = a;
        }
        float s_raw = amax * s->c;
        if (!finite || !(s_raw > 0.0f) || !isfinite(s_raw)) {
            bad += !finite;
            scales[g] = 0;
            for (int i = 0; i < 32; i++) lofp_put_code(s, codes, g * 32 + i, 0);
            continue;
        }
        float l = (float)log2((double)s_raw);
        int e = (int)floorf(l + 0.5f);
        if (e < -126) e = -126;
        if (e > 127) e = 127;
        scales[g] = (uint8_t)(e + 127);
        float sc = lofp_bits_f32((uint32_t)(e + 127) << 23);
        for (int i = 0; i < 32; i++) lofp_put_code(s, codes, g * 32 + i, uq_snap(v[i] / sc));
    }
    return bad;
}

static void uq_dequant_row(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                           float global, size_t kp, float *out)
{
    (void)global;
    for (size_t j = 0; j < kp; j++) {
        uint8_t b = scales[j / 32];
        float sc = b ? lofp_bits_f32((uint32_t)b << 23) : 0.0f;
        out[j] = lofp_decode(LOFP_ELEM_E2M1, lofp_get_code(s, codes, j)) * sc;
    }
}

const lofp_family_t lofp_family_uq = { uq_quant_row, uq_dequant_row };

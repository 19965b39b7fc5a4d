/* quant_mx.c -- the OCP MX family (MXFP4/6/8, MXINT8) and tilelang-mxfp8: one E8M0 scale per
 * `block` elements chosen by a scale rule, elements x / 2^e rounded and saturated.
 * Every exponent is taken from fp32 bits, never from log2f (which is one too high just below
 * powers of two). */
#include <math.h>

#include "reference.h"

/* floor(log2(a)) for finite a > 0, exact. */
static int floor_log2(float a)
{
    uint32_t u = lofp_f32_bits(a);
    int ex = (int)(u >> 23);
    if (ex) return ex - 127;
    return (31 - __builtin_clz(u & 0x7FFFFFu)) - 149;
}

static int is_pow2(float a)
{
    uint32_t u = lofp_f32_bits(a);
    if (u >> 23) return (u & 0x7FFFFFu) == 0;
    return (u & (u - 1)) == 0;
}

static uint8_t clamp_biased(int e) { return (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e); }

/* E8M0 byte for a finite block amax >= 0 under rule s->scale_rule. */
static uint8_t mx_scale_byte(const lofp_scheme *s, float amax)
{
    const lofp_elem_info *ei = lofp_elem_info_get(s->elem);
    if (amax < s->amax_floor) amax = s->amax_floor;
    switch (s->scale_rule) {
    case LOFP_SCALE_FLOOR:
    case LOFP_SCALE_CEIL:
    case LOFP_SCALE_EVEN: {
        if (amax == 0.0f) return 0; /* an all-zero block: 2^-127, codes all zero */
        if (s->scale_rule == LOFP_SCALE_EVEN) {
            /* round amax to the element's mantissa width (half up), carry into the exponent */
            uint32_t u = lofp_f32_bits(amax);
            if (u >> 23) {
                u += 1u << (22 - ei->mbits);
                u &= 0x7F800000u; /* a carry out of the top binade gives field 255, i.e. 2^128 */
                amax = lofp_bits_f32(u); /* +Inf: floor_log2 reads the field, 128 (torchao) */
            }
        }
        int e = floor_log2(amax);
        if (s->scale_rule == LOFP_SCALE_CEIL && !is_pow2(amax)) e += 1;
        return clamp_biased(e - ei->emax + 127);
    }
    case LOFP_SCALE_RCEIL: {
        float ratio = amax / (float)ei->max;
        uint32_t u = lofp_f32_bits(ratio);
        int ex = (int)(u >> 23);
        uint32_t m = u & 0x7FFFFFu;
        if (s->ceil_clamp) {
            /* DeepGEMM/TileLang ceil_to_ue8m0: exponent field + (mantissa != 0), in [1, 254] */
            int e = ex + (m != 0);
            return (uint8_t)(e < 1 ? 1 : e > 254 ? 254 : e);
        }
        if (ex == 0) return m > 0x400000u ? 1 : 0; /* 0x00 already means 2^-127 */
        return clamp_biased(ex + (m != 0));
    }
    default:
        return 0;
    }
}

static size_t mx_quant_row(const lofp_scheme *s, float *x, size_t kp, float global,
                           uint64_t base, uint8_t *codes, uint8_t *scales)
{
    (void)global;
    const uint32_t B = s->block;
    size_t bad = 0;
    for (size_t b = 0; b < kp / B; b++) {
        const float *v = x + b * B;
        float amax = 0.0f;
        int finite = 1;
        for (uint32_t i = 0; i < B; i++) {
            float a = fabsf(v[i]);
            if (!isfinite(a)) finite = 0;
            else if (a > amax) amax = a;
        }
        if (!finite) {
            /* propagation (the driver only gets here when the caller asked for it): the
             * block's scale is NaN and its codes are zero */
            scales[b] = 0xFF;
            for (uint32_t i = 0; i < B; i++) lofp_put_code(s, codes, b * B + i, 0);
            bad++;
            continue;
        }
        uint8_t sb = mx_scale_byte(s, amax);
        scales[b] = sb;
        float scale = lofp_decode(LOFP_ELEM_E8M0, sb);
        for (uint32_t i = 0; i < B; i++) {
            float e = v[i] / scale;
            uint64_t idx = base + b * B + i;
            uint32_t rb = s->rounding == LOFP_STOCHASTIC ? lofp_stochastic_bits(s->seed, idx) : 0;
            lofp_put_code(s, codes, b * B + i, lofp_encode(s->elem, e, s->rounding, LOFP_SATURATE, rb));
        }
    }
    return bad;
}

static void mx_dequant_row(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                           float global, size_t kp, float *out)
{
    (void)global;
    const uint32_t B = s->block;
    for (size_t j = 0; j < kp; j++) {
        uint8_t sb = scales[j / B];
        /* a 0xFF block is NaN whatever its codes: written explicitly, because NaN * NaN picks
         * an operand's payload in a compiler-dependent way */
        out[j] = sb == 0xFF ? lofp_bits_f32(0x7FC00000u)
                            : lofp_decode(s->elem, lofp_get_code(s, codes, j)) * lofp_decode(LOFP_ELEM_E8M0, sb);
    }
}

const lofp_family_t lofp_family_mx = { mx_quant_row, mx_dequant_row };

/* kernel_util.h -- portable, branch-free pieces shared by the generic and the ISA kernels: the
 * integer forms of the element encoders, the MX scale rules and the per-row parameters. Only
 * `static inline` code: each including file gets its own copy compiled with its own flags, so
 * nothing built with -mavx2 can be picked by the linker for a generic caller.
 *
 * Every formula here is the reference's (element.c, quant_*.c) rewritten without branches; the
 * comments say why each rewrite gives the same bits. */
#ifndef LOFP_KERNEL_UTIL_H
#define LOFP_KERNEL_UTIL_H

#include <math.h>

#include "core/traits.h"

/* ---- signed minifloat magnitude, non-stochastic (element.c minifloat_mag + saturation) ----
 * a = |x| bits (finite). With te = max(exponent, emin) the code is ((te - emin) << m) + q + up,
 * q the significand in target ulps and up decided on the dropped bits: up = (rem + bias) >> shift
 * with bias = half - 1 (ties to zero), half (ties away), half - 1 + (q & 1) (ties to even), which
 * is 1 exactly when rem > half, rem >= half, or rem > half || (rem == half && q odd). A shift past
 * 25 drops all 24 significand bits below half, so it is clamped to 25 (never rounds up there,
 * just as the reference's shift >= 64 case). `eminb` = emin + 127 = 128 - bias. */
typedef struct kq_mf {
    uint32_t m;     /* mantissa bits */
    uint32_t eminb; /* biased fp32 exponent of the target's smallest normal binade */
    uint32_t maxc;  /* magnitude code of +max (saturation) */
} kq_mf;

static inline uint32_t kq_round_bias(lofp_rounding mode, uint32_t half, uint32_t q)
{
    /* mode is never STOCHASTIC here */
    return mode == LOFP_TIES_AWAY ? half : half - 1u + (mode == LOFP_RNE ? (q & 1u) : 0u);
}

/* The magnitude code before saturation (may exceed p.maxc; at most ~(254 << m)). */
static inline uint32_t kq_mf_mag_raw(kq_mf p, uint32_t a, lofp_rounding mode)
{
    uint32_t ex = a >> 23;
    uint32_t sig = (a & 0x7FFFFFu) | (ex ? 0x800000u : 0u);
    uint32_t exu = ex ? ex : 1u;
    uint32_t teb = exu > p.eminb ? exu : p.eminb;
    uint32_t shift = 23u - p.m + (teb - exu);
    shift = shift > 25u ? 25u : shift;
    uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    uint32_t up = (rem + kq_round_bias(mode, half, q)) >> shift;
    return ((teb - p.eminb) << p.m) + q + up;
}

static inline uint32_t kq_mf_mag(kq_mf p, uint32_t a, lofp_rounding mode)
{
    uint32_t code = kq_mf_mag_raw(p, a, mode);
    return code > p.maxc ? p.maxc : code;
}

/* UE4M3 (the NVFP4 block scale, RNE, saturating at 0x7E = 448): bs is positive and finite here
 * (clamped to [1e-12, 448] by the caller). */
static inline uint32_t kq_ue4m3_encode(float bs)
{
    const kq_mf p = { 3, 121, 0x7E };
    return kq_mf_mag(p, lofp_f32_bits(bs), LOFP_RNE);
}

/* UE4M3 decode of a code 0..0x7E built from its fields (exact, as element.c decode_minifloat). */
static inline float kq_ue4m3_decode(uint32_t c)
{
    uint32_t e = c >> 3, m = c & 7u;
    if (e == 0) return (float)m * 0x1p-9f;
    return lofp_bits_f32(((e + 120u) << 23) | (m << 20));
}

/* MXINT8 (element.c encode_mxint8): k = |x| * 64 rounded to an integer, at most 127, then the
 * sign as two's complement (no -0). |x| >= 128 is saturated before the shift. */
static inline uint32_t kq_mxint8(uint32_t u, lofp_rounding mode)
{
    uint32_t a = u & 0x7FFFFFFFu, k;
    if (a >= 0x43000000u) {
        k = 127;
    } else {
        uint32_t ex = a >> 23;
        uint32_t sig = (a & 0x7FFFFFu) | (ex ? 0x800000u : 0u);
        uint32_t exu = ex ? ex : 1u;
        uint32_t shift = 144u - exu; /* a < 128.0 means exu <= 133, shift >= 11 */
        shift = shift > 25u ? 25u : shift;
        uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        k = q + ((rem + kq_round_bias(mode, half, q)) >> shift);
        k = k > 127u ? 127u : k;
    }
    return (u >> 31) ? ((0u - k) & 0xFFu) : k;
}

/* ---- E2M1 by thresholds ----
 * The E2M1 magnitude of |x| is the number of midpoints (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) that
 * |x| passes: strictly at a midpoint whose tie stays down, inclusively where it goes up. On fp32
 * bits of non-negative values "|x| >= m" is "bits > bits(m) - 1", so every test is one signed
 * integer compare against a per-mode threshold. Past 5 the count is 7 (saturation to 6). */
static inline void kq_e2m1_thresholds(lofp_rounding mode, int32_t thr[7])
{
    static const uint32_t mid[7] = { 0x3E800000u, 0x3F400000u, 0x3FA00000u, 0x3FE00000u,
                                     0x40200000u, 0x40600000u, 0x40A00000u };
    for (int i = 0; i < 7; i++) {
        /* the tie between codes i and i+1 goes up: always (away), never (to zero), when i+1 is
         * even (to even) */
        int up = mode == LOFP_TIES_AWAY || (mode == LOFP_RNE && (i & 1));
        thr[i] = (int32_t)(mid[i] - (uint32_t)up);
    }
}

static inline uint32_t kq_e2m1_code(const int32_t thr[7], uint32_t u)
{
    int32_t a = (int32_t)(u & 0x7FFFFFFFu);
    uint32_t c = 0;
    for (int i = 0; i < 7; i++) c += (uint32_t)(a > thr[i]);
    return c | ((u >> 28) & 8u); /* the sign bit even for -0 and values rounding to 0 */
}

/* ---- UltraQuant snap (quant_uq.c uq_snap) ----
 * idx = #{midpoints < y} over the 14 signed midpoints; code = idx < 7 ? 15 - idx : idx - 7.
 * For y >= 0 (and -0) that is c = #{p : |y| > p} over the 7 positive midpoints; for y < 0 it is
 * 8 + c with c = #{p : |y| >= p}, except c = 0 gives code 0 (never -0). "|y| >= p" is
 * "bits(|y|) + 1 > bits(p)", so negative lanes add 1 to their magnitude bits. */
static inline uint32_t kq_uq_code(uint32_t u)
{
    static const int32_t mid[7] = { 0x3E800000, 0x3F400000, 0x3FA00000, 0x3FE00000,
                                    0x40200000, 0x40600000, 0x40A00000 };
    uint32_t neg = (u >> 31) & (uint32_t)((u & 0x7FFFFFFFu) != 0); /* y < 0, not -0 */
    int32_t a = (int32_t)((u & 0x7FFFFFFFu) + neg);
    uint32_t c = 0;
    for (int i = 0; i < 7; i++) c += (uint32_t)(a > mid[i]);
    return c | ((neg & (uint32_t)(c != 0)) << 3);
}

/* ---- UltraQuant group exponent: floorf((float)log2((double)s) + 0.5f), s > 0 finite ----
 * In the binade [2^k, 2^(k+1)) of a normal s the result is k below one threshold and k + 1 from
 * it on; the threshold sits where fl(log2 s) reaches k + 0.5, i.e. near s = 2^k * sqrt(2), whose
 * mantissa field is 0x3504F3. Rounding log2 to fp32 moves it by at most ulp_f32(k + 0.5) in the
 * log domain: at most 31 mantissa ulps for k = 127, fewer elsewhere (checked exhaustively over
 * all 2^31 positive normal floats against glibc: monotone in every binade, maximum distance 31).
 * Outside a band of +-256 ulps the answer is therefore known from the bits; inside it, and for
 * subnormal s, the reference expression itself is evaluated. */
static inline int kq_uq_exponent(float s)
{
    uint32_t u = lofp_f32_bits(s);
    int ex = (int)(u >> 23);
    int32_t d = (int32_t)(u & 0x7FFFFFu) - 0x3504F3;
    if (LOFP_LIKELY(ex != 0)) {
        if (d > 256) return ex - 126;
        if (d < -256) return ex - 127;
    }
    float l = (float)log2((double)s);
    return (int)floorf(l + 0.5f);
}

/* ---- MX row parameters and scale rule (quant_mx.c mx_scale_byte, copied rule for rule) ---- */
typedef enum { KQ_MX_FP4, KQ_MX_MINIFLOAT, KQ_MX_INT8 } kq_mx_kind;

typedef struct kq_mx {
    kq_mx_kind kind;
    kq_mf mf;          /* FP6/FP8 magnitude parameters */
    uint32_t sign_bit; /* 0x20 FP6, 0x80 FP8 */
    int32_t thr[7];    /* E2M1 thresholds */
    lofp_rounding rounding;
    lofp_scale_rule rule;
    int emax;          /* element emax (OCP emax_elem) */
    unsigned mbits;    /* element mantissa bits (EVEN rule) */
    float max;         /* element max (RCEIL) */
    float amax_floor;
    int ceil_clamp;
} kq_mx;

static inline void kq_mx_init(const lofp_scheme *s, kq_mx *p)
{
    const lofp_elem_traits_t *tr = &lofp_elem_traits[s->elem];
    p->kind = s->elem == LOFP_ELEM_E2M1 ? KQ_MX_FP4 : s->elem == LOFP_ELEM_MXINT8 ? KQ_MX_INT8
                                                                                  : KQ_MX_MINIFLOAT;
    p->mf.m = tr->info.mbits;
    p->mf.eminb = (uint32_t)(128 - tr->info.bias);
    p->mf.maxc = tr->info.max_code;
    p->sign_bit = tr->sign_bit;
    kq_e2m1_thresholds(s->rounding == LOFP_STOCHASTIC ? LOFP_RNE : s->rounding, p->thr);
    p->rounding = s->rounding;
    p->rule = s->scale_rule;
    p->emax = tr->info.emax;
    p->mbits = tr->info.mbits;
    p->max = (float)tr->info.max;
    p->amax_floor = s->amax_floor;
    p->ceil_clamp = s->ceil_clamp;
}

static inline int kq_floor_log2(uint32_t u) /* u = bits of a finite positive float */
{
    int ex = (int)(u >> 23);
    if (ex) return ex - 127;
    return (31 - __builtin_clz(u & 0x7FFFFFu)) - 149;
}

static inline uint8_t kq_clamp_biased(int e) { return (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e); }

/* E8M0 byte for a finite block amax >= 0. */
static inline uint8_t kq_mx_scale_byte(const kq_mx *p, float amax)
{
    if (amax < p->amax_floor) amax = p->amax_floor;
    if (p->rule == LOFP_SCALE_RCEIL) {
        float ratio = amax / p->max;
        uint32_t u = lofp_f32_bits(ratio);
        int ex = (int)(u >> 23);
        uint32_t m = u & 0x7FFFFFu;
        if (p->ceil_clamp) {
            int e = ex + (m != 0);
            return (uint8_t)(e < 1 ? 1 : e > 254 ? 254 : e);
        }
        if (ex == 0) return m > 0x400000u ? 1 : 0;
        return kq_clamp_biased(ex + (m != 0));
    }
    if (amax == 0.0f) return 0;
    uint32_t u = lofp_f32_bits(amax);
    if (p->rule == LOFP_SCALE_EVEN && (u >> 23)) {
        u += 1u << (22 - p->mbits);
        u &= 0x7F800000u; /* a carry out of the top binade gives field 255: 2^128, as torchao */
    }
    int e = kq_floor_log2(u);
    if (p->rule == LOFP_SCALE_CEIL) {
        int pow2 = (u >> 23) ? (u & 0x7FFFFFu) == 0 : (u & (u - 1)) == 0;
        if (!pow2) e += 1;
    }
    return kq_clamp_biased(e - p->emax + 127);
}

/* 1 / 2^(byte - 127) for an E8M0 byte 0x00..0xFE: 2^(127 - byte), always an fp32 (2^-127 is the
 * subnormal 0x00400000). x * 2^-s and x / 2^s are the same real number, and IEEE rounds both
 * correctly, so the product equals the reference's quotient bit for bit (subnormal results and
 * overflow included). */
static inline float kq_e8m0_recip(uint32_t b)
{
    return b == 254u ? lofp_bits_f32(0x00400000u) : lofp_bits_f32((254u - b) << 23);
}

/* Non-stochastic MX element code of e = v / scale. */
static inline uint32_t kq_mx_code(const kq_mx *p, float e)
{
    uint32_t u = lofp_f32_bits(e);
    if (p->kind == KQ_MX_FP4) return kq_e2m1_code(p->thr, u);
    if (p->kind == KQ_MX_INT8) return kq_mxint8(u, p->rounding);
    return kq_mf_mag(p->mf, u & 0x7FFFFFFFu, p->rounding) | ((u >> 31) ? p->sign_bit : 0u);
}

/* Code bytes per row for kp elements. */
static inline size_t kq_code_row_bytes(const lofp_scheme *s, size_t kp)
{
    return s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
}

#endif

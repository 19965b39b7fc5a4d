/* element.c -- fp32 <-> narrow element codecs (SPEC §1, docs/FORMATS.md "Element types").
 *
 * Every signed minifloat (E2M1, E2M3, E3M2, E4M3, E5M2, bf16, fp16) goes through one integer
 * encoder driven by the traits table: the magnitude code of a sign-magnitude minifloat is
 * monotonic in its value, and ((te - emin) << mbits) + q, with q the significand in units of the
 * target ulp, is exactly that code for subnormals and normals alike (a carry out of the mantissa
 * bumps the exponent for free). Rounding is decided on the integer remainder, so no fp operation
 * can round twice. */
#include <math.h>

#include "core.h"
#include "traits.h"

const lofp_elem_info *lofp_elem_info_get(lofp_elem t)
{
    if ((int)t <= 0 || t >= LOFP_ELEM_COUNT_) return NULL;
    return &lofp_elem_traits[t].info;
}

lofp_status lofp_elem_from_name(const char *name, lofp_elem *out)
{
    if (!name || !out) return LOFP_ERR_INVALID_ARG;
    for (int t = 1; t < LOFP_ELEM_COUNT_; t++) {
        const lofp_elem_traits_t *tr = &lofp_elem_traits[t];
        if (strcmp(name, tr->info.name) == 0 || (tr->alias && strcmp(name, tr->alias) == 0)) {
            *out = (lofp_elem)t;
            return LOFP_OK;
        }
    }
    return LOFP_ERR_NOT_FOUND;
}

/* Decides whether to round the magnitude up, given the kept integer q, the dropped bits rem and
 * their count `shift` (rem < 2^shift, shift >= 1). */
static int round_up(lofp_rounding mode, uint64_t q, uint64_t rem, unsigned shift, uint32_t rbits)
{
    if (rem == 0) return 0;
    if (shift > 64) {
        /* Everything dropped and rem < 2^24 << 40: only the nearest-family "down" answers remain,
         * and stochastic rounds up only when rbits < rem * 2^(32-shift) < 1, i.e. rbits == 0. */
        return mode == LOFP_STOCHASTIC ? rbits == 0 : 0;
    }
    uint64_t half = (uint64_t)1 << (shift - 1);
    switch (mode) {
    case LOFP_RNE: return rem > half || (rem == half && (q & 1));
    case LOFP_TIES_TO_ZERO: return rem > half;
    case LOFP_TIES_AWAY: return rem >= half;
    case LOFP_STOCHASTIC:
        /* up iff rbits < rem / 2^shift * 2^32, compared exactly in integers */
        if (shift <= 32) return ((uint64_t)rbits << shift) < (rem << 32) ? 1 : 0;
        return ((uint64_t)rbits << (shift - 32)) < rem;
    }
    return 0;
}

/* Magnitude code of |x| (x finite, bits `a` without the sign) for a minifloat described by `tr`,
 * before overflow handling: may exceed tr->info.max_code (then it is max_code + 1 or more). */
static uint32_t minifloat_mag(const lofp_elem_traits_t *tr, uint32_t a, lofp_rounding mode,
                              uint32_t rbits)
{
    if (a == 0) return 0;
    int ex = (int)(a >> 23);
    uint64_t sig = a & 0x7FFFFFu;
    if (ex == 0) ex = 1; /* fp32 subnormal: value = sig * 2^(1-127-23) */
    else sig |= 0x800000u;
    ex -= 127;
    const int mbits = (int)tr->info.mbits;
    const int emin = 1 - tr->info.bias;
    /* Far above the largest binade: certainly an overflow; avoid huge shifts below. */
    if (ex > tr->emax_binade + 1) return tr->info.max_code + 1;
    int te = ex > emin ? ex : emin;
    /* value = sig * 2^(ex-23); target ulp = 2^(te-mbits); drop shift bits */
    unsigned shift = (unsigned)((te - mbits) - (ex - 23));
    uint64_t q, rem;
    if (shift >= 64) { q = 0; rem = sig; }
    else { q = sig >> shift; rem = sig & (((uint64_t)1 << shift) - 1); }
    q += (uint64_t)round_up(mode, q, rem, shift, rbits);
    uint64_t code = ((uint64_t)(te - emin) << mbits) + q;
    return code > 0xFFFFFFu ? 0xFFFFFFu : (uint32_t)code;
}

static uint32_t encode_minifloat(const lofp_elem_traits_t *tr, float x, lofp_rounding mode,
                                 lofp_overflow ovf, uint32_t rbits)
{
    uint32_t u = lofp_f32_bits(x);
    uint32_t sign = (u >> 31) ? tr->sign_bit : 0;
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return tr->nan_code ? (tr->nan_code | (tr->nan_keeps_sign ? sign : 0)) : 0;
    if (a == 0x7F800000u) {
        if (ovf == LOFP_IEEE && tr->overflow_code) return tr->overflow_code | sign;
        return tr->info.max_code | sign;
    }
    uint32_t mag = minifloat_mag(tr, a, mode, rbits);
    if (mag > tr->info.max_code) {
        if (ovf == LOFP_IEEE && tr->overflow_code) return tr->overflow_code | sign;
        mag = tr->info.max_code;
    }
    return mag | sign;
}

static uint32_t encode_ue4m3(const lofp_elem_traits_t *tr, float x, lofp_rounding mode,
                             lofp_overflow ovf, uint32_t rbits)
{
    uint32_t u = lofp_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7F;
    if (u >> 31) return 0; /* unsigned: the nearest representable value of a negative is +0 */
    return encode_minifloat(tr, x, mode, ovf, rbits);
}

/* E8M0: 2^(e-127), e = 0..254. Nearest in the linear domain: between 2^k and 2^(k+1) the
 * midpoint is 1.5 * 2^k, i.e. fp32 mantissa 0x400000 within the binade. */
static uint32_t encode_e8m0(const lofp_elem_traits_t *tr, float x, lofp_rounding mode,
                            lofp_overflow ovf, uint32_t rbits)
{
    (void)tr;
    uint32_t u = lofp_f32_bits(x);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0xFF;
    if ((u >> 31) || a == 0) return ovf == LOFP_IEEE ? 0xFF : 0x00; /* no zero, no sign */
    if (a == 0x7F800000u) return ovf == LOFP_IEEE ? 0xFF : 0xFE;
    int ex = (int)(a >> 23);
    uint64_t m = a & 0x7FFFFFu;
    uint32_t e;
    if (ex == 0) {
        /* fp32 subnormal: value m * 2^-149 < 2^-126. Neighbours 2^-127 (code 0) and 2^-126
         * (code 1) above 2^-127; below it the nearest is code 0 anyway (saturating low). */
        if (m <= 0x400000u) return 0x00;
        /* between 2^-127 (m = 2^22) and 2^-126 (m = 2^23): frac = (m - 2^22) / 2^22 */
        uint64_t rem = m - 0x400000u;
        return (uint32_t)round_up(mode, 0 /* code 0 is even */, rem, 22, rbits);
    }
    e = (uint32_t)ex; /* value in [2^(e-127), 2^(e-126)), frac = m / 2^23 */
    e += (uint32_t)round_up(mode, e, m, 23, rbits);
    if (e > 254) return ovf == LOFP_IEEE ? 0xFF : 0xFE;
    return e;
}

/* MXINT8: k * 2^-6, k in [-127, 127], stored as two's complement. Rounding applies to |x|*64
 * (exact: a power-of-two scaling), sign restored afterwards, so the modes are symmetric. */
static uint32_t encode_mxint8(const lofp_elem_traits_t *tr, float x, lofp_rounding mode,
                              lofp_overflow ovf, uint32_t rbits)
{
    (void)tr;
    (void)ovf;
    uint32_t u = lofp_f32_bits(x);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0;
    uint32_t k;
    if (a >= 0x43000000u) k = 127; /* |x| * 64 >= 128 (includes Inf) */
    else if (a == 0) k = 0;
    else {
        int ex = (int)(a >> 23);
        uint64_t sig = a & 0x7FFFFFu;
        if (ex == 0) ex = 1; else sig |= 0x800000u;
        /* |x|*64 = sig * 2^(ex-127-23+6); integer part drops shift = 144 - ex bits */
        unsigned shift = (unsigned)(144 - ex);
        uint64_t q, rem;
        if (shift >= 64) { q = 0; rem = sig; }
        else { q = sig >> shift; rem = sig & (((uint64_t)1 << shift) - 1); }
        q += (uint64_t)round_up(mode, q, rem, shift, rbits);
        k = q > 127 ? 127 : (uint32_t)q;
    }
    int v = (u >> 31) ? -(int)k : (int)k;
    return (uint32_t)(uint8_t)(int8_t)v;
}

uint32_t lofp_encode(lofp_elem t, float x, lofp_rounding mode, lofp_overflow ovf, uint32_t rbits)
{
    if ((int)t <= 0 || t >= LOFP_ELEM_COUNT_ || (unsigned)mode > LOFP_STOCHASTIC) return 0;
    const lofp_elem_traits_t *tr = &lofp_elem_traits[t];
    switch (tr->kind) {
    case LOFP_KIND_MINIFLOAT: return encode_minifloat(tr, x, mode, ovf, rbits);
    case LOFP_KIND_UMINIFLOAT: return encode_ue4m3(tr, x, mode, ovf, rbits);
    case LOFP_KIND_E8M0: return encode_e8m0(tr, x, mode, ovf, rbits);
    case LOFP_KIND_INT: return encode_mxint8(tr, x, mode, ovf, rbits);
    case LOFP_KIND_FP32: return lofp_f32_bits(x);
    }
    return 0;
}

/* Decoding builds the fp32 bits directly from the fields: exact for every code. */
static float decode_minifloat(const lofp_elem_traits_t *tr, uint32_t code)
{
    const unsigned mbits = tr->info.mbits;
    uint32_t sign = (code & tr->sign_bit) ? 0x80000000u : 0;
    uint32_t mag = code & (tr->sign_bit - 1);
    if (tr->nan_code && (mag == tr->nan_code || (tr->info.has_inf && mag > tr->overflow_code)))
        return lofp_bits_f32(sign | 0x7FC00000u);
    if (tr->info.has_inf && mag == tr->overflow_code) return lofp_bits_f32(sign | 0x7F800000u);
    uint32_t e = mag >> mbits, m = mag & ((1u << mbits) - 1);
    float v;
    if (e == 0) v = ldexpf((float)m, 1 - tr->info.bias - (int)mbits);
    else v = ldexpf((float)((1u << mbits) | m), (int)e - tr->info.bias - (int)mbits);
    return lofp_bits_f32(lofp_f32_bits(v) | sign);
}

float lofp_decode(lofp_elem t, uint32_t code)
{
    if ((int)t <= 0 || t >= LOFP_ELEM_COUNT_) return NAN;
    const lofp_elem_traits_t *tr = &lofp_elem_traits[t];
    switch (tr->kind) {
    case LOFP_KIND_MINIFLOAT:
        return decode_minifloat(tr, code & ((tr->sign_bit << 1) - 1));
    case LOFP_KIND_UMINIFLOAT:
        return decode_minifloat(tr, code & 0x7F);
    case LOFP_KIND_E8M0:
        code &= 0xFF;
        if (code == 0xFF) return NAN;
        if (code == 0) return lofp_bits_f32(0x00400000u); /* 2^-127, an fp32 subnormal */
        return lofp_bits_f32(code << 23);
    case LOFP_KIND_INT:
        return (float)(int8_t)(uint8_t)code * 0.015625f;
    case LOFP_KIND_FP32:
        return lofp_bits_f32(code);
    }
    return NAN;
}

lofp_status lofp_encode_u8(lofp_elem t, const float *x, size_t n, lofp_rounding mode,
                           lofp_overflow ovf, const uint32_t *rbits, uint8_t *codes)
{
    const lofp_elem_info *info = lofp_elem_info_get(t);
    if (!info || info->bits > 8 || (n && (!x || !codes)) || (unsigned)mode > LOFP_STOCHASTIC ||
        (mode == LOFP_STOCHASTIC && n && !rbits))
        return LOFP_ERR_INVALID_ARG;
    for (size_t i = 0; i < n; i++)
        codes[i] = (uint8_t)lofp_encode(t, x[i], mode, ovf, rbits ? rbits[i] : 0);
    return LOFP_OK;
}

lofp_status lofp_decode_u8(lofp_elem t, const uint8_t *codes, size_t n, float *out)
{
    const lofp_elem_info *info = lofp_elem_info_get(t);
    if (!info || info->bits > 8 || (n && (!codes || !out))) return LOFP_ERR_INVALID_ARG;
    for (size_t i = 0; i < n; i++) out[i] = lofp_decode(t, codes[i]);
    return LOFP_OK;
}

uint16_t lofp_fp32_to_bf16(float x)
{
    uint32_t u = lofp_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16 & 0x8000) | 0x7FC0); /* as lofp_encode */
    u += 0x7FFFu + ((u >> 16) & 1); /* RNE; overflow carries into Inf as IEEE wants */
    return (uint16_t)(u >> 16);
}

float lofp_bf16_to_fp32(uint16_t h) { return lofp_bits_f32((uint32_t)h << 16); }

uint16_t lofp_fp32_to_fp16(float x)
{
    return (uint16_t)encode_minifloat(&lofp_elem_traits[LOFP_ELEM_FP16], x, LOFP_RNE, LOFP_IEEE, 0);
}

float lofp_fp16_to_fp32(uint16_t h)
{
    return decode_minifloat(&lofp_elem_traits[LOFP_ELEM_FP16], h);
}

/* element.c -- fp32 <-> narrow element codecs (SPEC §1, docs/FORMATS.md "Element types"): the
 * public entry points over the arithmetic of element_codec.h, which the CUDA backend compiles
 * too. This file picks the codec by the type's kind and fills its row from the traits table. */
#include <math.h>

#include "core.h"
#include "element_codec.h"
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

/* The codec's row for a minifloat type, from the traits table (element_codec.h spells the same
 * rows out for device code, which cannot read this table). */
static lofp_ec_minifloat mf_row(const lofp_elem_traits_t *tr)
{
    return lofp_ec_minifloat_make((int)tr->info.mbits, tr->info.bias, tr->emax_binade,
                                  tr->info.max_code, tr->sign_bit, tr->overflow_code, tr->nan_code,
                                  tr->nan_keeps_sign, tr->info.has_inf);
}

uint32_t lofp_encode(lofp_elem t, float x, lofp_rounding mode, lofp_overflow ovf, uint32_t rbits)
{
    if ((int)t <= 0 || t >= LOFP_ELEM_COUNT_ || (unsigned)mode > LOFP_STOCHASTIC) return 0;
    const lofp_elem_traits_t *tr = &lofp_elem_traits[t];
    switch (tr->kind) {
    case LOFP_KIND_MINIFLOAT: {
        const lofp_ec_minifloat mf = mf_row(tr);
        return lofp_ec_encode_minifloat(&mf, x, (int)mode, (int)ovf, rbits);
    }
    case LOFP_KIND_UMINIFLOAT: {
        const lofp_ec_minifloat mf = mf_row(tr);
        return lofp_ec_encode_ue4m3(&mf, x, (int)mode, (int)ovf, rbits);
    }
    case LOFP_KIND_E8M0: return lofp_ec_encode_e8m0(x, (int)mode, (int)ovf, rbits);
    case LOFP_KIND_INT: return lofp_ec_encode_mxint8(x, (int)mode, rbits);
    case LOFP_KIND_FP32: return lofp_f32_bits(x);
    }
    return 0;
}

float lofp_decode(lofp_elem t, uint32_t code)
{
    if ((int)t <= 0 || t >= LOFP_ELEM_COUNT_) return NAN;
    const lofp_elem_traits_t *tr = &lofp_elem_traits[t];
    switch (tr->kind) {
    case LOFP_KIND_MINIFLOAT: {
        const lofp_ec_minifloat mf = mf_row(tr);
        return lofp_ec_decode_minifloat(&mf, code & ((tr->sign_bit << 1) - 1));
    }
    case LOFP_KIND_UMINIFLOAT: {
        const lofp_ec_minifloat mf = mf_row(tr);
        return lofp_ec_decode_minifloat(&mf, code & 0x7F);
    }
    case LOFP_KIND_E8M0: return lofp_ec_decode_e8m0(code);
    case LOFP_KIND_INT: return lofp_ec_decode_mxint8(code);
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

uint16_t lofp_fp32_to_bf16(float x) { return lofp_ec_fp32_to_bf16(x); }

float lofp_bf16_to_fp32(uint16_t h) { return lofp_bits_f32((uint32_t)h << 16); }

uint16_t lofp_fp32_to_fp16(float x)
{
    const lofp_ec_minifloat mf = mf_row(&lofp_elem_traits[LOFP_ELEM_FP16]);
    return (uint16_t)lofp_ec_encode_minifloat(&mf, x, LOFP_RNE, LOFP_IEEE, 0);
}

float lofp_fp16_to_fp32(uint16_t h)
{
    const lofp_ec_minifloat mf = mf_row(&lofp_elem_traits[LOFP_ELEM_FP16]);
    return lofp_ec_decode_minifloat(&mf, h);
}

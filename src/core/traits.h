/* traits.h -- the per-type and per-scheme tables every algorithm is written against. */
#ifndef LOFP_TRAITS_H
#define LOFP_TRAITS_H

#include "core.h"

typedef enum {
    LOFP_KIND_MINIFLOAT,  /* signed sign-magnitude float */
    LOFP_KIND_UMINIFLOAT, /* unsigned float (UE4M3) */
    LOFP_KIND_E8M0,       /* unsigned power of two */
    LOFP_KIND_INT,        /* MXINT8 */
    LOFP_KIND_FP32
} lofp_elem_kind;

typedef struct lofp_elem_traits_t {
    lofp_elem_info info;
    const char *alias;       /* second accepted name */
    lofp_elem_kind kind;
    uint32_t sign_bit;       /* code bit holding the sign (0 for unsigned) */
    int emax_binade;         /* fp32 exponent of the binade holding max */
    uint32_t overflow_code;  /* IEEE overflow result (Inf or NaN magnitude code), 0 = saturate */
    uint32_t nan_code;       /* magnitude code for NaN input, 0 = type has none (NaN -> +0) */
    int nan_keeps_sign;
} lofp_elem_traits_t;

LOFP_INTERNAL extern const lofp_elem_traits_t lofp_elem_traits[LOFP_ELEM_COUNT_];

/* The scheme families the quantizers are written for: one reference row-kernel pair and one
 * fast row-kernel pair each (src/quant). The scheme table names a scheme's family by this id, not
 * by a pointer, so that core does not depend on the quantizers that depend on it. */
typedef enum lofp_kfamily {
    LOFP_KFAM_NVFP4 = 0, /* E2M1 + UE4M3 per 16 + fp32 per-tensor */
    LOFP_KFAM_MX = 1,    /* every E8M0-scaled scheme: MXFP4/6/8, MXINT8, tilelang-mxfp8 */
    LOFP_KFAM_UQ = 2,    /* UltraQuant: optional Hadamard, E2M1 snap, E8M0 with byte 0 = zero */
    LOFP_KFAM_COUNT_ = 3
} lofp_kfamily;

/* One entry per scheme preset: its defaults and the native block of its family. */
typedef struct lofp_scheme_traits_t {
    const char *name;
    lofp_scheme defaults;
    uint32_t native_block;   /* granularity must be a positive multiple of this */
    int is_mx;               /* E8M0-scaled OCP MX family (incl. tilelang) */
    lofp_kfamily family;     /* which row kernels quantize it */
} lofp_scheme_traits_t;

LOFP_INTERNAL extern const lofp_scheme_traits_t lofp_scheme_traits[LOFP_SCHEME_COUNT_];

/* Packs / unpacks FP4 codes (element 2i in the low nibble). */
static inline void lofp_put_code(const lofp_scheme *s, uint8_t *codes, size_t i, uint32_t c)
{
    if (s->elem == LOFP_ELEM_E2M1) {
        uint8_t *b = &codes[i >> 1];
        *b = (i & 1) ? (uint8_t)((*b & 0x0F) | (c << 4)) : (uint8_t)((*b & 0xF0) | (c & 0x0F));
    } else {
        codes[i] = (uint8_t)c;
    }
}
static inline uint32_t lofp_get_code(const lofp_scheme *s, const uint8_t *codes, size_t i)
{
    if (s->elem == LOFP_ELEM_E2M1) return (codes[i >> 1] >> ((i & 1) * 4)) & 0x0F;
    return codes[i];
}

#endif

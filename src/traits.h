/* traits.h -- the per-type and per-scheme tables every algorithm is written against. */
#ifndef LOFP_TRAITS_H
#define LOFP_TRAITS_H

#include "internal.h"

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

/* One entry per scheme preset: its defaults and the native block of its family. */
typedef struct lofp_scheme_traits_t {
    const char *name;
    lofp_scheme defaults;
    uint32_t native_block;   /* granularity must be a positive multiple of this */
    int is_mx;               /* E8M0-scaled OCP MX family (incl. tilelang) */
    const struct lofp_family_t *family;
} lofp_scheme_traits_t;

LOFP_INTERNAL extern const lofp_scheme_traits_t lofp_scheme_traits[LOFP_SCHEME_COUNT_];

#endif

/* Family kernels, referenced from the scheme table. A row quantizer reads `kp` fp32 values (the
 * padded row, zero tail) and writes the row's codes (packed for FP4) and its linear scales. `x`
 * is scratch the kernel may overwrite, with room for 2 * kp floats (rotation scratch). `base` is the
 * flat index of the row's first element (for stochastic rounding bits). Returns the number of
 * blocks that held non-finite values (only non-zero in propagation mode). */
typedef size_t (*lofp_quant_row_fn)(const lofp_scheme *s, float *x, size_t kp, float global,
                                    uint64_t base, uint8_t *codes, uint8_t *scales);
/* A row dequantizer writes kp fp32 values from a row's codes and linear scales. */
typedef void (*lofp_dequant_row_fn)(const lofp_scheme *s, const uint8_t *codes,
                                    const uint8_t *scales, float global, size_t kp, float *out);

typedef struct lofp_family_t {
    lofp_quant_row_fn quant_row;
    lofp_dequant_row_fn dequant_row;
} lofp_family_t;

LOFP_INTERNAL extern const lofp_family_t lofp_family_nvfp4, lofp_family_mx, lofp_family_uq;

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

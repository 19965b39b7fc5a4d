/* reference.h -- the reference row quantizers (quant_nvfp4.c, quant_mx.c, quant_uq.c): the
 * oracle every fast kernel is compared against, one pair per scheme family (lofp_kfamily). */
#ifndef LOFP_QUANT_REFERENCE_H
#define LOFP_QUANT_REFERENCE_H

#include "core/traits.h"

/* Family kernels, indexed by lofp_kfamily. A row quantizer reads `kp` fp32 values (the
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

/* The reference pair of each family, indexed by lofp_kfamily. */
LOFP_INTERNAL extern const lofp_family_t *const lofp_reference_families[LOFP_KFAM_COUNT_];

#endif

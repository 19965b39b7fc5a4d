/* profile.h -- the producer profiles' reference code (profile.c), called by the quantize and
 * dequantize drivers for a scheme whose `profile` is not LOFP_PROFILE_LOFP. */
#ifndef LOFP_QUANT_PROFILE_H
#define LOFP_QUANT_PROFILE_H

#include "core/traits.h"

/* Quantizes like lofp_quantize / lofp_quantize_with_global (compute_global selects which) for a
 * validated scheme with a profile; `kp` is the padded K. The per-tensor scale is in the
 * profile's direction (lofp_profile_decode_direction). */
LOFP_INTERNAL lofp_status lofp_profile_quantize(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                                size_t rows, size_t k, size_t kp,
                                                int compute_global, float global_in,
                                                uint8_t *codes, uint8_t *scales,
                                                float *global_out, lofp_quant_report *rep);
LOFP_INTERNAL lofp_status lofp_profile_dequantize(const lofp_scheme *s, const uint8_t *codes,
                                                  const uint8_t *scales, float global, size_t rows,
                                                  size_t k, size_t kp, lofp_dtype out_dt,
                                                  void *out);

/* The per-tensor scales of two producers from a tensor's amax: ModelOpt's weight_scale_2 on a
 * CUDA device, amax * fl(1/2688); compressed-tensors' global scale fl(fl(1/amax) * 2688) (bf16
 * input: each op rounded to bf16). */
LOFP_INTERNAL float lofp_profile_modelopt_scale2(float amax);
LOFP_INTERNAL float lofp_profile_ct_global(lofp_dtype dt, float amax);

#endif

/*
 * lofp_cuda_ckpt.h -- checkpoint-layout entry points of the CUDA backend (docs/CUDA.md,
 * "Checkpoint layouts"). The weight layouts that ModelOpt, compressed-tensors and gpt-oss store
 * are lofp's own: codes [N, K/2] with element 2i in the low nibble (gpt-oss `*_blocks`
 * [E, N, K/32, 16] are the same bytes as [E*N, K/2]), linear UE4M3 or E8M0 scales [N, K/block].
 * They differ only in the direction of the NVFP4 per-tensor scale: compressed-tensors'
 * `weight_global_scale` is lofp's encode multiplier (pass it to lofp_cuda_dequantize /
 * lofp_cuda_w4_prepare as is), ModelOpt's `weight_scale_2` (and torchao's per_tensor_scale, GGUF's
 * `.scale`) is the decode multiplier amax / 2688. These two functions take either, so a loader
 * passes the checkpoint's tensors straight through. Same conventions as lofp_cuda.h.
 */
#ifndef LOFP_LOFP_CUDA_CKPT_H
#define LOFP_LOFP_CUDA_CKPT_H

#include "lofp/lofp_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Direction of the NVFP4 per-tensor scale given in d_global. */
typedef enum lofp_global_dir {
    LOFP_GLOBAL_ENCODE = 0, /* lofp / compressed-tensors: value = code * scale / global */
    LOFP_GLOBAL_DECODE = 1  /* ModelOpt weight_scale_2: value = code * fl(scale * global) */
} lofp_global_dir;

/* lofp_cuda_dequantize with the direction of *d_global stated. ENCODE is lofp_cuda_dequantize.
 * DECODE gives ModelOpt's dequantization bit for bit: bf16/f16/f32 of fl(e2m1 * fl(s * d)) with
 * s the UE4M3 scale and d = *d_global (NULL means 1.0). Ignored for schemes other than NVFP4. */
LOFP_API lofp_status lofp_cuda_dequantize_dir(const lofp_scheme *s, const uint8_t *d_codes,
                                              const uint8_t *d_scales, lofp_layout scale_layout,
                                              const float *d_global, lofp_global_dir dir,
                                              size_t rows, size_t k, lofp_dtype out_dt, void *d_out,
                                              lofp_cuda_stream stream);

/* lofp_cuda_w4_prepare with the direction of *d_global stated. With DECODE the epilogue factor is
 * 2^7 * d (exact) instead of 2^7 / global, so the product is code * scale * d accumulated in fp32. */
LOFP_API lofp_status lofp_cuda_w4_prepare_dir(const lofp_scheme *s, const uint8_t *d_codes,
                                              const uint8_t *d_scales, const float *d_global,
                                              lofp_global_dir dir, size_t n, size_t k,
                                              lofp_cuda_w4 *w, lofp_cuda_stream stream);

#ifdef __cplusplus
}
#endif

#endif

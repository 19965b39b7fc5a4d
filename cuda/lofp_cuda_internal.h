/* lofp_cuda_internal.h -- host-side helpers shared by the CUDA translation units. */
#ifndef LOFP_CUDA_INTERNAL_H
#define LOFP_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

#include "lofp/lofp.h"
#include "lofp/lofp_cuda.h"

namespace lofpcu {

/* Records a CUDA failure (text kept thread-locally for lofp_cuda_last_error). */
void record_cuda_error(cudaError_t e, const char *what, const char *file, int line);
void clear_cuda_error(void);

/* Number of SMs of the current device (cached per device). */
int sm_count(void);

/* UltraQuant exponent thresholds (see uq_exponent in lofp_cuda_device.cuh), computed once on the
 * host from the CPU library's own expression. */
struct UqThr { uint32_t t[254]; };
const UqThr &uq_thresholds(void);

inline size_t round_up_sz(size_t a, size_t m) { return (a + m - 1) / m * m; }

/* W4A16 GEMM on Hopper wgmma (gemm_wgmma.cu; GemmP is in gemm_common.cuh). Returns
 * LOFP_ERR_UNSUPPORTED, having enqueued nothing, when the device is not sm_90 (the caller then
 * uses the mma.sync kernel). */
struct GemmP;
lofp_status gemm_wgmma_launch(const GemmP &p, int nvfp4, cudaStream_t st);

} // namespace lofpcu

/* Every CUDA runtime call goes through this: on failure it records the error and returns
 * LOFP_CUDA_ERR_RUNTIME from the enclosing function. */
#define LOFP_CU(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            lofpcu::record_cuda_error(e_, #call, __FILE__, __LINE__);                          \
            return LOFP_CUDA_ERR_RUNTIME;                                                      \
        }                                                                                      \
    } while (0)

/* After a kernel launch: checks the launch status. */
#define LOFP_CU_LAUNCH() LOFP_CU(cudaGetLastError())

#endif

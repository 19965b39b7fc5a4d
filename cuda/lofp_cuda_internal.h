/* lofp_cuda_internal.h -- host-side helpers shared by the CUDA translation units. */
#ifndef LOFP_CUDA_INTERNAL_H
#define LOFP_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

#include "lofp/lofp.h"
#include "lofp/lofp_cuda.h"

/* W4A16 shape classes (docs/CUDA.md): m >= LOFP_CUDA_LARGE_M_MIN goes to the dequantize +
 * cuBLASLt path of gemm_large.cu where cuBLASLt can be opened; the wgmma kernel below that (and
 * as the fallback). The crossover comes from bench_cuda's w4a16_route_* timings on an H200
 * (the warp-specialised wgmma kernel), large / kernel, NVFP4 8192^2: M = 512 139.3 / 124.2 us, M = 1024
 * 221.4 / 238.4; 14336 x 4096: 134.7 / 131.8 and 194.9 / 276.0 (MXFP4 alike). Linear between the
 * two the 8192^2 times meet near M = 768 (the 14336 x 4096 ones below it), so the large path
 * from M = 768. */
#define LOFP_CUDA_LARGE_M_MIN 768

#ifdef __cplusplus
extern "C" {
#endif
/* Internal entry points for test_cuda and bench_cuda (not part of the public API). */
enum { LOFP_GEMM_ROUTE_AUTO = 0, LOFP_GEMM_ROUTE_LARGE = 1, LOFP_GEMM_ROUTE_KERNEL = 2,
       LOFP_GEMM_ROUTE_NO_WGMMA = 3 };
/* lofp_cuda_w4a16_gemm with the route forced: AUTO is the public function; LARGE only the
 * dequantize + cuBLASLt path (LOFP_ERR_UNSUPPORTED where it is unavailable or refuses);
 * KERNEL the dispatch without the large path (GEMV / wgmma / mma.sync); NO_WGMMA the dispatch of a
 * device without wgmma (large path, GEMV, mma.sync), so that one device tests both. */
lofp_status lofp_cuda_w4a16_gemm_route(const lofp_cuda_w4 *w, const void *d_a, size_t m,
                                       lofp_dtype out_dt, void *d_c, lofp_cuda_stream stream,
                                       int route);
/* Test hooks of the large path: cap_bytes (0 = default 256 MiB) bounds the transient bf16 weight
 * buffer (smaller -> more N chunks); lt_off != 0 makes cuBLASLt look absent. Process-wide
 * settings kept in atomics (no data race); a GEMM call running concurrently sees the old or the
 * new setting (tests and benchmark sweeps only). */
void lofp_cuda_large_test_config(size_t cap_bytes, int lt_off);
/* 1 when the large path can run (cuBLASLt opened and not switched off by the hook). */
int lofp_cuda_large_available(void);
/* Test / benchmark hook of the wgmma kernel (gemm_wgmma.cu): cfg 0..LOFP_WGMMA_NCFG-1 forces
 * that configuration for every later wgmma launch (0 (1,64) persistent with two K parities,
 * 1 (2,128) persistent, 2 (1,64) split K over 2, 3 (2,128) split K over 2), anything else
 * restores the automatic choice. A process-wide atomic setting, like the large path's (tests and
 * benchmark sweeps only). */
void lofp_cuda_wgmma_test_config(int cfg);
#define LOFP_WGMMA_NCFG 4
#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
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

/* W4A16 for large M (gemm_large.cu): dequantize to a transient bf16 buffer + one cuBLASLt GEMM
 * per chunk of rows of W. Returns LOFP_ERR_UNSUPPORTED when cuBLASLt is absent or refuses, or the
 * transient memory cannot be had; the caller then runs the kernels (its work overwrites all of C). */
bool gemm_large_available(void);
lofp_status gemm_large_launch(const lofp_cuda_w4 *w, const void *d_a, size_t m, int out_bf16, void *d_c,
                              cudaStream_t st);

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
#endif /* __cplusplus */

#endif

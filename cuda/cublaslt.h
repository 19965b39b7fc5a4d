/* cublaslt.h -- the cuBLASLt plumbing shared by the two large-M routes: gemm_large.cu (W4A16:
 * weights dequantized to bf16, one bf16 GEMM) and gemm_w4a8_large.cu (W4A8: weights cast to E4M3,
 * one FP8 GEMM with per-row and per-token fp32 scales).
 *
 * cuBLASLt is opened with dlopen at first use and never linked: without it (or when it refuses a
 * GEMM) a route returns LOFP_ERR_UNSUPPORTED and its caller runs lofp's own kernel. Per device, one
 * cuBLASLt handle (a handle belongs to the device current at its creation; cuBLAS(Lt) functions
 * may be called from several threads with one handle, and cublasLtMatmul takes its stream and
 * workspace per call, so nothing else of the handle changes), a device zero (beta in device
 * pointer mode) and a stream-ordered memory pool for the transient weight buffer and the cuBLASLt
 * workspace. The heuristic's algorithm is cached per GEMM description (and so is a refusal of
 * cublasLtMatmul itself, so that a refused description is refused before anything is enqueued on
 * later calls). Everything here is created once and lives until the process exits. */
#ifndef LOFP_CUBLASLT_H
#define LOFP_CUBLASLT_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stddef.h>

namespace lofpcu {

/* Default bound on the transient weight bytes of one chunk (lofp_cuda_large_test_config changes
 * it), and the cuBLASLt workspace (Hopper's recommended size). */
constexpr size_t LT_DEFAULT_CAP = (size_t)256 << 20;
constexpr size_t LT_WS_BYTES = (size_t)32 << 20;

struct LtDev {
    int dev;
    cublasLtHandle_t handle;
    float *d_zero;
    cudaMemPool_t pool;
};

/* Why a route did not run (the first obstacle met); LT_OK when it ran. */
enum LtWhy {
    LT_OK = 0,
    LT_NO_LIBRARY = 1,  /* cuBLASLt not found, switched off by the test hook, or its handle failed */
    LT_CAPTURING = 2,   /* the stream is being captured into a CUDA graph */
    LT_NO_MEMORY = 3,   /* the transient buffer could not be allocated */
    LT_NO_ALGO = 4,     /* a descriptor attribute or the heuristic refused the GEMM */
    LT_REFUSED = 5      /* cublasLtMatmul itself refused it (now, or on an earlier call) */
};

/* true when cuBLASLt is opened and not switched off by lofp_cuda_large_test_config. */
bool lt_available(void);

/* Rows per chunk of a weight of n rows, row_bytes transient bytes each: the fewest chunks within
 * the byte bound (LT_DEFAULT_CAP unless lofp_cuda_large_test_config changed it), all of one size
 * rounded up to whole 16-row tiles (so every chunk's output columns stay 32-byte aligned, and no
 * short last chunk runs its GEMM on a fraction of the SMs); n when one chunk holds it all. */
size_t lt_chunk_rows(size_t n, size_t row_bytes);

/* The current device's state if a large route may start on stream st: cuBLASLt available, the
 * device state created, st not capturing. nullptr otherwise, *why set (LT_NO_LIBRARY or
 * LT_CAPTURING). Enqueues nothing. */
const LtDev *lt_begin(cudaStream_t st, LtWhy *why);

/* One stream-ordered allocation of `bytes` from the device's pool (256-byte aligned); nullptr on
 * failure (the CUDA error is cleared: the caller falls back). Release with cudaFreeAsync on st. */
void *lt_alloc(const LtDev *ds, size_t bytes, cudaStream_t st);

/* One GEMM D[rows, m] (column-major, ld ldd) = alpha * (W [rows, k] row-major, op T) .
 * (A [m, k] row-major, op N): row-major C[m, n] = A . W^T with C's columns n0.. at d. */
struct LtGemm {
    cudaDataType_t ab;      /* CUDA_R_16BF or CUDA_R_8F_E4M3 (both operands) */
    const void *w;          /* rows x k, row-major, 256-byte aligned (a pool buffer) */
    const void *a;          /* m x k, row-major */
    void *d;                /* output, column-major rows x m with leading dimension ldd */
    size_t m, rows, k, ldd;
    int out_bf16;           /* D (and C) bf16, else fp32 */
    const float *alpha_dev; /* device alpha (pointer mode device, beta the device zero); nullptr:
                               alpha 1 and beta 0 from the host */
    const float *w_scale;   /* with a_scale: CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, rows fp32
                               scales of W (cuBLAS's A) and m of A (cuBLAS's B), device; nullptr:
                               no matrix scales */
    const float *a_scale;
    void *ws;               /* cuBLASLt workspace, ws_bytes */
    size_t ws_bytes;
};

/* Plans (plan_only: the heuristic, cached, nothing enqueued) or runs the GEMM on st. Returns
 * LT_OK, LT_NO_ALGO or LT_REFUSED; on failure nothing was enqueued. */
LtWhy lt_matmul(const LtDev *ds, const LtGemm &g, cudaStream_t st, bool plan_only);

} // namespace lofpcu

#endif

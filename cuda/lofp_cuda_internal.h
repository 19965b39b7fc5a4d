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
 * as the fallback). The crossover comes from bench_cuda gemm's w4a16_route_* timings on an H100
 * (the wgmma kernel with its (1,256) tiles, gemm_wgmma.cu), kernel / large, NVFP4 / MXFP4:
 * M = 1024, 8192^2 193.5 / 240.6 and 184.6 / 235.6 us, 14336 x 4096 204.6 / 208.3 and 197.2 /
 * 205.8; M = 2048, 8192^2 383.8 / 403.7 and 360.7 / 394.5, 14336 x 4096 363.2 / 357.6 and
 * 338.8 / 350.1 (three of four); M = 4096 the large path in all four (8192^2 823.6 / 744.6).
 * So the kernel through M = 2048, the large path from the next measured size on. */
#define LOFP_CUDA_LARGE_M_MIN 2049

/* W4A8 shape classes (docs/CUDA.md section 2b): lofp_cuda_w4a8_gemm sends m >= this with
 * rowwise-exact weights to the cuBLASLt FP8 route of gemm_w4a8_large.cu, everything else (and
 * every refusal of that route) to the w4a8 kernel of gemm_w4a8.cu. Set from bench_cuda's
 * w4a8_route_* rows (both routes forced, H100, 8192^2 / 14336 x 4096): the large route pays a
 * fixed ~40 us for the E4M3 weight cast, so the kernel is faster at M = 256 (70.8 against 86.0 us;
 * 75.7 / 80.1) and the large route at M = 1024 (168 against 263; 151 / 250); interpolating the
 * two puts the crossover near M = 360. */
#define LOFP_CUDA_W4A8_LARGE_M_MIN 384

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
/* Test hooks of the large paths (W4A16 and W4A8, cublaslt.cu): cap_bytes (0 = default 256 MiB)
 * bounds the transient weight buffer of one chunk (smaller -> more N chunks); lt_off != 0 makes
 * cuBLASLt look absent. Process-wide settings kept in atomics (no data race); a GEMM call running
 * concurrently sees the old or the new setting (tests and benchmark sweeps only). */
void lofp_cuda_large_test_config(size_t cap_bytes, int lt_off);
/* Benchmark hooks of the cuBLASLt plan (cublaslt.cu): lofp_cuda_large_test_algo(i) makes every
 * later plan take the heuristic's candidate i (0..7; 0, the default, is the production choice; a
 * plan with fewer candidates refuses: LOFP_ERR_UNSUPPORTED from the route) and forgets the cached
 * plans; lofp_cuda_large_algo_desc describes the last algorithm planned once the hook has been
 * called (candidate, tile id, stages, split-K, swizzle, cluster id, waves: cuBLASLt's own
 * attributes; empty before). Not synchronised with concurrent GEMM calls: tests and benchmarks
 * only. */
void lofp_cuda_large_test_algo(int index);
const char *lofp_cuda_large_algo_desc(void);
/* Benchmark hook: on != 0 makes later FP8 plans set CUBLASLT_MATMUL_DESC_FAST_ACCUM (the tensor
 * core's own accumulation, no periodic promotion to fp32: not the route's numerics, a measurement
 * of what the promotion costs) and forgets the cached plans. Tests and benchmarks only. */
void lofp_cuda_large_test_fast_accum(int on);
/* 1 when the large paths can run (cuBLASLt opened and not switched off by the hook). */
int lofp_cuda_large_available(void);

/* W4A8 test hooks (gemm_w4a8.cu). lofp_cuda_w4a8_test_config(route) forces lofp_cuda_w4a8_gemm's
 * route: LOFP_GEMM_ROUTE_LARGE (only the cuBLASLt route, at any m: LOFP_ERR_UNSUPPORTED, C
 * untouched, where it does not run), LOFP_GEMM_ROUTE_KERNEL (only the kernel), anything else the
 * automatic choice. lofp_cuda_w4a8_last_route returns what the last lofp_cuda_w4a8_gemm call in
 * the process ran (LOFP_W4A8_RAN_*; NONE after a forced large call that was refused) and, in
 * *why (may be NULL), why the large route did not run (LOFP_W4A8_WHY_*; OK when it ran).
 * Process-wide atomics: with concurrent calls "last" is any one of them (tests and benchmarks). */
enum { LOFP_W4A8_RAN_NONE = 0, LOFP_W4A8_RAN_KERNEL = 1, LOFP_W4A8_RAN_LARGE = 2 };
enum { LOFP_W4A8_WHY_OK = 0, LOFP_W4A8_WHY_NO_LIBRARY = 1, LOFP_W4A8_WHY_CAPTURING = 2,
       LOFP_W4A8_WHY_NO_MEMORY = 3, LOFP_W4A8_WHY_NO_ALGO = 4, LOFP_W4A8_WHY_REFUSED = 5,
       LOFP_W4A8_WHY_NOT_ROWWISE = 6, LOFP_W4A8_WHY_SMALL_M = 7, LOFP_W4A8_WHY_FORCED = 8 };
void lofp_cuda_w4a8_test_config(int route);
int lofp_cuda_w4a8_last_route(int *why);
/* A static text for a LOFP_W4A8_WHY_* value. */
const char *lofp_cuda_w4a8_why_name(int why);
/* lofp_cuda_w4a8_quantize_act writing the codes in plain K order (the large route's layout):
 * byte j of token t's row at codes + t k + j. Same arguments and checks. */
lofp_status lofp_cuda_w4a8_quantize_act_plain(const void *d_a, size_t m, size_t k, void *d_ws,
                                              size_t ws_bytes, lofp_cuda_stream stream);
/* The large route's weight cast alone: d_out (n * k bytes) receives the E4M3 weights [n, k]
 * row-major, d_row_scale (n floats) the per-row fp32 scales (gemm_w4a8_large.cu). Needs an MXFP4
 * w with w->d_row_exp (any w4a8_rowwise: rows beyond the exact range are cast clamped, as tests of
 * the flag want to see). Asynchronous on stream. */
lofp_status lofp_cuda_w4a8_cast_weights(const lofp_cuda_w4 *w, uint8_t *d_out, float *d_row_scale,
                                        lofp_cuda_stream stream);
/* Test / benchmark hook of the wgmma kernel (gemm_wgmma.cu): cfg 0..LOFP_WGMMA_NCFG-1 forces
 * that configuration for every later wgmma launch (0 (1,64) persistent with two K parities,
 * 1 (2,128) persistent, 2 (1,64) split K over 2, 3 (2,128) split K over 2, 4 (1,256) persistent,
 * 5 (1,256) split K over 2), anything else
 * restores the automatic choice. A process-wide atomic setting, like the large path's (tests and
 * benchmark sweeps only). */
void lofp_cuda_wgmma_test_config(int cfg);
#define LOFP_WGMMA_NCFG 6
/* The automatic choice among those configurations for an m x n x k W4A16 product on sms
 * multiprocessors: the configuration of least estimated time (gemm_wgmma.cu's cost table).
 * Pure host arithmetic, no device needed; thread-safe. */
int lofp_cuda_wgmma_pick(long long m, long long n, long long k, long long sms);
/* Benchmark hook of the GEMV (gemm.cu, m <= 16): cfg 1..LOFP_GEMV_NCFG-1 forces one of the sweep's
 * candidate configurations (listed in gemm.cu) where it fits N, 0 or anything else restores the
 * production rule. Process-wide and atomic, like the wgmma hook. */
void lofp_cuda_gemv_test_config(int cfg);
#define LOFP_GEMV_NCFG 6
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

/* W4A8 workspace: m fp32 token scales, then the codes from this byte offset (256-aligned). */
inline size_t w4a8_codes_offset(size_t m) { return round_up_sz(m * sizeof(float), 256); }
/* The activation quantizer (gemm_w4a8.cu) into a checked workspace: plain != 0 K order, else the
 * kernel's permuted order. */
lofp_status w4a8_act_quant(const void *d_a, size_t m, size_t k, void *d_ws, int plain, cudaStream_t st);
/* W4A8 for large M (gemm_w4a8_large.cu): activations to plain-order E4M3 in d_ws (skipped when
 * have_codes: d_ws holds them already), the weights cast
 * to E4M3 in a transient buffer, one cuBLASLt FP8 GEMM with per-row and per-token scales per chunk
 * of rows of W. Returns LOFP_ERR_UNSUPPORTED with *why (LOFP_W4A8_WHY_*) when it cannot run; then
 * C is untouched or (a refusal after the first chunk) partly written, and the caller's kernel
 * overwrites all of it. */
lofp_status w4a8_large_launch(const lofp_cuda_w4 *w, const void *d_a, size_t m, int out_bf16, void *d_c,
                              void *d_ws, bool have_codes, cudaStream_t st, int *why);
/* At lofp_cuda_w4_prepare of MXFP4 weights (gemm_w4a8_large.cu): allocates and fills w->d_row_exp
 * from the linear input codes and scales and sets w->w4a8_rowwise; synchronises st. */
lofp_status w4a8_prepare_rows(lofp_cuda_w4 *w, const uint8_t *d_codes, const uint8_t *d_scales, cudaStream_t st);

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

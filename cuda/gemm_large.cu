/* gemm_large.cu -- W4A16 for large M (m >= LARGE_M_MIN): dequantize the prepared weights to bf16
 * in a transient buffer, then one cuBLASLt bf16 GEMM (fp32 compute).
 *
 * Why: at large M the GEMM is tensor-core bound and the weight format matters only once per call;
 * dequantizing N x K to bf16 costs about one HBM pass over 2.5 bytes per weight (~50 us at 8192^2),
 * while cuBLAS's bf16 GEMM is faster than the wgmma kernel of gemm_wgmma.cu by more than that at
 * M >= 768 (H200, NVFP4 8192^2: M = 1024 221 us against the warp-specialised kernel's
 * 238, M = 4096 730 against 1154; cuBLAS bf16 173 and 682).
 *
 * Numerics: the dequantize kernel produces, with the same device helpers (fp4pair, bf16x2_mul,
 * nv_scale2, mx_scale1), the very bf16 values the GEMV and wgmma kernels feed the tensor cores
 * (e2m1 * UE4M3 * 2^-7 for NVFP4, e2m1 * 2^(e - emax_tensor) for MXFP4, exact in bf16). cuBLASLt
 * multiplies them exactly, accumulates in fp32 (CUBLAS_COMPUTE_32F) in its own order, and scales
 * by alpha = params[0] read from device memory: the other kernels' numerics class.
 *
 * Layout: C[m, n] = A[m, k] . W[n, k]^T row-major is, column-major, C^T (n x m, ld n) =
 * W^T^T . A^T: cuBLAS's A is the bf16 weights (k x n column-major, ld k, op T), its B the
 * activations (k x m, ld k, op N), its D the output (n x m, ld n). Weights larger than the cap go
 * in chunks of rows of W, each chunk writing its own output columns through ldd = n.
 *
 * cuBLASLt (opened with dlopen at first use, one handle and memory pool per device, cached
 * heuristic: cublaslt.cu, shared with the W4A8 route of gemm_w4a8_large.cu): where it is absent
 * or refuses, this path returns LOFP_ERR_UNSUPPORTED and the caller runs the wgmma kernel.
 *
 * Memory: the bf16 chunk and the cuBLASLt workspace are one stream-ordered allocation
 * (cudaMallocFromPoolAsync / cudaFreeAsync on the caller's stream) from a per-device pool that
 * keeps up to one chunk + workspace reserved between calls (release threshold), so repeated
 * calls do not map fresh memory after every synchronisation. Allocation failure -> unsupported
 * -> the wgmma kernel. So is a stream being captured into a CUDA graph.
 */
#include <stdio.h>
#include <string.h>

#include "cublaslt.h"
#include "gemm_common.cuh"
#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"

using namespace lofpcu;

namespace {

/* ---- dequantize: one thread per prepared 32-bit word (8 weights -> one 16-byte store) ---- */
/* Prepared word j (tile-major, gemm_common.cuh: 256 words per 16-row x 128-element block, row r16
 * of the block at words 16 r16 .. 16 r16 + 15) holds elements 8 (j % 16)..+7 of chunk ch of row
 * 16 t + r16 (block j / 256 = t nch + ch); its scale byte is byte j / 2 (NVFP4) or j / 4 (MXFP4)
 * of the tile-major scales (16 x 8 or 16 x 4 bytes per block, the same order). */
template <int NV>
__device__ __forceinline__ uint4 w4_word_bf16(uint32_t q, uint32_t sbyte, int sbias)
{
    uint32_t s;
    if (NV) {
        uint32_t s1;
        nv_scale2(sbyte, s, s1);
    } else {
        s = mx_scale1(sbyte, sbias);
    }
    uint4 v;
    v.x = bf16x2_mul(fp4pair(q, 0), s);
    v.y = bf16x2_mul(fp4pair(q, 1), s);
    v.z = bf16x2_mul(fp4pair(q, 2), s);
    v.w = bf16x2_mul(fp4pair(q, 3), s);
    return v;
}

/* Each thread takes U prepared words a grid-stride apart per step (all loads issued before the
 * stores: U 4-byte code loads in flight per thread; a warp reads 128 contiguous bytes of codes and
 * writes two runs of 256 bytes of the row-major bf16 [rows, k] output per instruction). */
template <int NV>
__global__ void __launch_bounds__(256) w4_to_bf16(const uint32_t *__restrict__ codes,
                                                  const uint8_t *__restrict__ scales,
                                                  const float *__restrict__ params,
                                                  uint4 *__restrict__ out, size_t words, uint32_t nch)
{
    const size_t kw = (size_t)nch * 16; /* words per row */
    constexpr int U = 4;
    const int sbias = NV ? 0 : (int)params[1];
    const size_t T = (size_t)gridDim.x * blockDim.x;
    for (size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i0 < words; i0 += U * T) {
        uint32_t q[U], sb[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * T;
            q[u] = i < words ? __ldg(codes + i) : 0u;
            sb[u] = i < words ? __ldg(scales + (NV ? i >> 1 : i >> 2)) : 0u;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * T;
            if (i < words) {
                const uint32_t b = (uint32_t)(i >> 8), t = b / nch, ch = b - t * nch, r16 = ((uint32_t)i >> 4) & 15;
                out[((size_t)t * 16 + r16) * kw + (size_t)ch * 16 + (i & 15)] = w4_word_bf16<NV>(q[u], sb[u], sbias);
            }
        }
    }
}

} // namespace

bool lofpcu::gemm_large_available(void) { return lt_available(); }

lofp_status lofpcu::gemm_large_launch(const lofp_cuda_w4 *w, const void *d_a, size_t m, int out_bf16,
                                      void *d_c, cudaStream_t st)
{
    LtWhy why;
    const LtDev *ds = lt_begin(st, &why);
    if (!ds) return LOFP_ERR_UNSUPPORTED;
    const size_t n = w->n, k = w->k;
    const bool nv = w->id == LOFP_SCHEME_NVFP4;
    const size_t rows = lt_chunk_rows(n, k * 2);
    const size_t wbytes = round_up_sz(rows * k * 2, 256);
    void *buf = lt_alloc(ds, wbytes + LT_WS_BYTES, st);
    if (!buf) return LOFP_ERR_UNSUPPORTED;
    uint16_t *wbf = (uint16_t *)buf;
    void *ws = (uint8_t *)buf + wbytes;
    const size_t esz = out_bf16 ? 2 : 4;
    const int sms = sm_count();
    lofp_status rc = LOFP_OK;
    for (size_t n0 = 0; n0 < n; n0 += rows) {
        const size_t nr = n - n0 < rows ? n - n0 : rows;
        const size_t words = nr * k / 8;
        /* n0 % 16 == 0: the chunk's rows are whole tiles, contiguous in the tile-major layout */
        const uint32_t *codes = (const uint32_t *)(w->d_codes + w4_code_off(n0, 0, 0, k / 128));
        const uint8_t *scales = w->d_scales + w4_scale_off(n0, 0, nv ? 8 : 4, k / 128);
        /* 8 CTAs of 256 per SM (full occupancy), a few waves' worth of steps each */
        size_t blocks = (words + 1023) / 1024;
        if (blocks > (size_t)sms * 32) blocks = (size_t)sms * 32;
        if (nv) w4_to_bf16<1><<<(unsigned)blocks, 256, 0, st>>>(codes, scales, w->d_params, (uint4 *)wbf, words, (uint32_t)(k / 128));
        else w4_to_bf16<0><<<(unsigned)blocks, 256, 0, st>>>(codes, scales, w->d_params, (uint4 *)wbf, words, (uint32_t)(k / 128));
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            record_cuda_error(e, "w4_to_bf16", __FILE__, __LINE__);
            rc = LOFP_CUDA_ERR_RUNTIME;
            break;
        }
        LtGemm g;
        memset(&g, 0, sizeof g);
        g.ab = CUDA_R_16BF;
        g.w = wbf;
        g.a = d_a;
        g.d = (uint8_t *)d_c + n0 * esz;
        g.m = m; g.rows = nr; g.k = k; g.ldd = n;
        g.out_bf16 = out_bf16;
        g.alpha_dev = w->d_params;
        g.ws = ws;
        g.ws_bytes = LT_WS_BYTES;
        if (lt_matmul(ds, g, st, false) != LT_OK) {
            /* cuBLASLt refused (possible only for the first chunk's shape or the last's): the
             * caller recomputes everything with the wgmma kernel */
            rc = LOFP_ERR_UNSUPPORTED;
            break;
        }
    }
    if (cudaFreeAsync(buf, st) != cudaSuccess && rc == LOFP_OK) {
        record_cuda_error(cudaGetLastError(), "cudaFreeAsync", __FILE__, __LINE__);
        rc = LOFP_CUDA_ERR_RUNTIME;
    }
    return rc;
}

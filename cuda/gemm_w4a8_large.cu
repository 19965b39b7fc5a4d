/* gemm_w4a8_large.cu -- W4A8 for large M: the prepared MXFP4 weights cast to E4M3 with one fp32
 * scale per weight row, the activations quantized per token to E4M3 in plain K order, and one
 * cuBLASLt FP8 GEMM (e4m3 x e4m3, fp32 compute) that applies both scale vectors in its epilogue
 * (CUBLASLT_MATMUL_DESC_{A,B}_SCALE_MODE = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS 12.9+).
 *
 * Why: at large M the W4A8 GEMM is tensor-core bound, and cuBLAS's FP8 GEMM runs near the FP8
 * rate where the w4a8 kernel (gemm_w4a8.cu) does not (H200 8192^2, M = 4096: kernel 998 us against
 * torch._scaled_mm rowwise 383). The cast costs one pass over the weights (read K/2 + K/32 bytes,
 * write K bytes per row), like gemm_large.cu's bf16 dequantize at 2/5 of its writes.
 *
 * Exactness of the cast. A prepared MXFP4 weight is w = s v 2^(e_j - 127): v an E2M1 magnitude in
 * {0, 0.5, 1, 1.5, 2, 3, 4, 6}, s its sign, e_j the E8M0 byte of its 32-element block. With E the
 * row's largest scale byte among blocks holding a nonzero code (w->d_row_exp) and d = E - e_j,
 *     w = s [v 2^(6 - d)] 2^(E - 133),
 * and the bracket is written as an E4M3 byte, 2^(E - 133) is the row's fp32 scale. Claim: for
 * 0 <= d <= 14 (W8_ROW_DMAX) v 2^(6 - d) is an E4M3 value for all 8 magnitudes. Proof: with
 * c = 2v in {0, 1, 2, 3, 4, 6, 8, 12}, v 2^(6 - d) = N 2^-9 with the integer N = c 2^(14 - d).
 * E4M3 (bias 7, 3 mantissa bits, largest finite 448) holds exactly the subnormals m 2^-9 (m = 0..7)
 * and the normals (8 + m) 2^(s - 9), s = 0..8, m = 0..7, up to 448: an integer multiple N of
 * 2^-9 is representable iff N <= 7, or N's binary significand has at most 4 bits and N 2^-9 <=
 * 448. c has at most 2 significant bits (3 = 11b, 6, 12), so N does too: N < 8 is a subnormal,
 * N >= 8 is (8 + m) 2^s with m in {0, 4}; the largest, d = 0 and c = 12, is 384 <= 448. At d = 15
 * v = 0.5 gives 2^-10, below the smallest subnormal 2^-9 (it would round to 0), so 14 is the bound
 * for any block that holds a 0.5, and the route requires d <= 14 for every block with a nonzero
 * code (blocks of zeros cast to 00 / 80 whatever their scale). The tables (w8_table,
 * w4a8_common.cuh) are the d <= 11 bytes of the kernel (exponent field minus d) and three
 * subnormal tables for d = 12..14; test_codec_host runs w8_word_plain on the CPU for every d and
 * every nibble against lofp_encode(E4M3) of the CPU-decoded value.
 *
 * Which weights: lofp_cuda_w4_prepare computes E per row and sets w->w4a8_rowwise when (a) no
 * scale byte is 0xFF (NaN: the kernel reproduces the CPU's NaN), (b) every nonzero block of a row
 * is within 14 binades of the row's E, and (c) every row with a nonzero code has E >= 7, so the
 * row scale 2^(E - 133) is an fp32 normal (no flush-to-zero question in cuBLAS's epilogue). One
 * stream synchronisation at load time. Weights without the flag always take the kernel.
 *
 * Numerics. The activation codes and token scales are the kernel's (act_quant_kernel, the same
 * arithmetic, plain order). Every E4M3 x E4M3 product is exact; cuBLAS sums them on the FP8 tensor
 * cores with its own promotion to fp32 (CUBLASLT_MATMUL_DESC_FAST_ACCUM left at 0: partial sums are
 * promoted periodically) and then D = sa_row sb_tok acc. sa_row is a power of two, so this is one
 * rounding (by sb_tok) of the exact scaled sum -- as the kernel's (acc 2^(e_max - 133)) scale_t.
 * When all sums are exact both routes give the same bits (test_cuda checks it); otherwise they
 * differ by summation order and the tensor core's accumulation, the kernel's error class.
 *
 * Layout: as gemm_large.cu -- cuBLAS's A is the E4M3 weights (k x rows column-major, op T), its B
 * the activation codes (k x m, op N), D the output (rows x m, ld n); the A scale vector has `rows`
 * entries, the B scale vector m. Hopper's FP8 GEMM needs exactly this TN form.
 *
 * Memory per call: the activation codes go to the caller's workspace (plain order: after this
 * route the workspace does not hold the kernel's permuted layout); from the pool of cublaslt.cu,
 * one stream-ordered allocation of min(n, R) k bytes of E4M3 weights (R = 256 MiB / k rows, a
 * multiple of 16; larger weights go in equal chunks of at most R rows, lt_chunk_rows), 4 R bytes
 * of row scales and the 32 MiB cuBLASLt workspace: 8192 x 8192 takes 64 MiB + 32 KiB + 32 MiB.
 *
 * Refusals (LOFP_ERR_UNSUPPORTED, *why set, the caller runs the kernel): weights not rowwise-exact;
 * cuBLASLt absent or switched off; the stream capturing; no memory; a descriptor attribute or the
 * heuristic refusing (an older cuBLASLt without OUTER_VEC_32F, or an architecture without it,
 * shows here) -- all before anything is enqueued. cublasLtMatmul refusing at run time (it may check
 * scale modes only then) is remembered per GEMM description, so later calls refuse at planning
 * time; on that first call the activation quantizer and the cast have run into the workspace and
 * the transient buffer, C is untouched (or partly written if a later chunk refused) and the
 * kernel then overwrites all of it.
 */
#include <string.h>

#include "cublaslt.h"
#include "gemm_common.cuh"
#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"
#include "w4a8_common.cuh"

using namespace lofpcu;

static_assert((int)LT_NO_LIBRARY == LOFP_W4A8_WHY_NO_LIBRARY && (int)LT_CAPTURING == LOFP_W4A8_WHY_CAPTURING &&
                  (int)LT_NO_MEMORY == LOFP_W4A8_WHY_NO_MEMORY && (int)LT_NO_ALGO == LOFP_W4A8_WHY_NO_ALGO &&
                  (int)LT_REFUSED == LOFP_W4A8_WHY_REFUSED,
              "the cuBLASLt reasons are reported as LOFP_W4A8_WHY_* values");

namespace {

/* ---- load time: per-row exponent and the rowwise-exact flag ---- */
/* One warp per row of the linear input (codes [n, k/2], 4-byte aligned; scales [n, k/32]): lane l
 * takes blocks l, l + 32, ...; the row's largest and smallest scale byte among blocks with a
 * nonzero magnitude (any nibble & 7), and whether any scale byte is 0xFF. *bad |= 1 when the row
 * breaks the rules of the header. */
__global__ void __launch_bounds__(256) w4_row_exp(const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales,
                                                  size_t n, size_t k, uint8_t *__restrict__ row_exp, unsigned *bad)
{
    const int lane = threadIdx.x & 31;
    const size_t nb = k / 32;
    const size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5; r < n; r += warps) {
        unsigned mx = 0, mn = 255, any = 0, ff = 0;
        for (size_t j = lane; j < nb; j += 32) {
            const unsigned s = scales[r * nb + j];
            const uint32_t *c = (const uint32_t *)(codes + r * (k / 2) + 16 * j);
            const uint32_t nz = (c[0] | c[1] | c[2] | c[3]) & 0x77777777u;
            ff |= s == 0xFFu;
            if (nz && s != 0xFFu) {
                any = 1;
                mx = max(mx, s);
                mn = min(mn, s);
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            mx = max(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
            mn = min(mn, __shfl_xor_sync(0xFFFFFFFFu, mn, o));
            any |= __shfl_xor_sync(0xFFFFFFFFu, any, o);
            ff |= __shfl_xor_sync(0xFFFFFFFFu, ff, o);
        }
        if (lane == 0) {
            row_exp[r] = (uint8_t)(any ? mx : 0);
            if (ff || (any && (mx - mn > (unsigned)W8_ROW_DMAX || mx < 7u))) atomicOr(bad, 1u);
        }
    }
}

/* ---- per call: the E4M3 weights ---- */
/* 2^(E - 133) as fp32 (a subnormal below E = 7, reached only by all-zero rows of flagged weights) */
__device__ __forceinline__ float row_scale_of(uint32_t E)
{
    return E >= 7u ? u2f((E - 6u) << 23) : u2f(1u << (E + 16u));
}

/* One thread-step per 32-element block of a weight row (4 prepared words, tile-major,
 * gemm_common.cuh; gemm_large.cu's w4_to_bf16 has the addressing): block i is words 4i..4i+3, in
 * tile i / 64 = t nch + ch, row 16 t + (i / 4) % 16, k offset 128 ch + 32 (i % 4); its scale byte
 * is byte i of the tile-major scales. One 16-byte load, one distance d (and table) for the 4
 * words, 32 E4M3 bytes in natural order as two 16-byte stores into the row-major [rows, k]
 * output; the thread of block 0 of a row also writes the row's scale. U blocks in flight. */
__global__ void __launch_bounds__(256) w4_to_e4m3(const uint4 *__restrict__ codes, const uint8_t *__restrict__ scales,
                                                  const uint8_t *__restrict__ row_exp, uint4 *__restrict__ out,
                                                  float *__restrict__ row_scale, size_t nblk, uint32_t nch)
{
    const size_t kq = (size_t)nch * 8; /* 16-byte output units per row */
    constexpr int U = 2;
    const size_t T = (size_t)gridDim.x * blockDim.x;
    for (size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i0 < nblk; i0 += U * T) {
        uint4 q[U];
        uint32_t sb[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * T;
            q[u] = i < nblk ? __ldg(codes + i) : make_uint4(0, 0, 0, 0);
            sb[u] = i < nblk ? __ldg(scales + i) : 0u;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * T;
            if (i < nblk) {
                const uint32_t b = (uint32_t)(i >> 6), t = b / nch, ch = b - t * nch, r16 = ((uint32_t)i >> 2) & 15;
                const size_t row = (size_t)t * 16 + r16;
                const uint32_t E = __ldg(row_exp + row);
                int d = (int)E - (int)sb[u];
                d = d < 0 ? 0 : d > W8_ROW_DMAX ? W8_ROW_DMAX : d; /* clamped only for blocks of zeros */
                uint32_t o[8];
                w8_word_plain(q[u].x, d, o[0], o[1]);
                w8_word_plain(q[u].y, d, o[2], o[3]);
                w8_word_plain(q[u].z, d, o[4], o[5]);
                w8_word_plain(q[u].w, d, o[6], o[7]);
                uint4 *dst = out + row * kq + (size_t)ch * 8 + 2 * (i & 3);
                dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
                dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
                if (ch == 0 && (i & 3) == 0) row_scale[row] = row_scale_of(E);
            }
        }
    }
}

lofp_status launch_cast(const lofp_cuda_w4 *w, size_t n0, size_t nr, uint8_t *out, float *rs, cudaStream_t st)
{
    const size_t k = w->k, nch = k / 128, nblk = nr * k / 32;
    /* n0 % 16 == 0: the chunk's rows are whole tiles, contiguous in the tile-major layout */
    const uint4 *codes = (const uint4 *)(w->d_codes + w4_code_off(n0, 0, 0, nch));
    const uint8_t *scales = w->d_scales + w4_scale_off(n0, 0, 4, nch);
    size_t blocks = (nblk + 511) / 512;
    if (blocks > (size_t)sm_count() * 32) blocks = (size_t)sm_count() * 32;
    w4_to_e4m3<<<(unsigned)blocks, 256, 0, st>>>(codes, scales, w->d_row_exp + n0, (uint4 *)out, rs, nblk,
                                                 (uint32_t)nch);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

} // namespace

lofp_status lofpcu::w4a8_prepare_rows(lofp_cuda_w4 *w, const uint8_t *d_codes, const uint8_t *d_scales, cudaStream_t st)
{
    w->w4a8_rowwise = 0;
    LOFP_CU(cudaMalloc((void **)&w->d_row_exp, w->n));
    unsigned *bad = (unsigned *)(w->d_params + 3); /* a free word of the prepared weights */
    LOFP_CU(cudaMemsetAsync(bad, 0, sizeof(unsigned), st));
    size_t blocks = (w->n + 7) / 8;
    if (blocks > (size_t)sm_count() * 8) blocks = (size_t)sm_count() * 8;
    w4_row_exp<<<(unsigned)blocks, 256, 0, st>>>(d_codes, d_scales, w->n, w->k, w->d_row_exp, bad);
    LOFP_CU_LAUNCH();
    unsigned h = 1;
    LOFP_CU(cudaMemcpyAsync(&h, bad, sizeof h, cudaMemcpyDeviceToHost, st));
    LOFP_CU(cudaStreamSynchronize(st));
    w->w4a8_rowwise = h == 0;
    return LOFP_OK;
}

lofp_status lofpcu::w4a8_large_launch(const lofp_cuda_w4 *w, const void *d_a, size_t m, int out_bf16, void *d_c,
                                      void *d_ws, bool have_codes, cudaStream_t st, int *why)
{
    if (!w->w4a8_rowwise || !w->d_row_exp) {
        *why = LOFP_W4A8_WHY_NOT_ROWWISE;
        return LOFP_ERR_UNSUPPORTED;
    }
    LtWhy lw;
    const LtDev *ds = lt_begin(st, &lw);
    if (!ds) {
        *why = (int)lw;
        return LOFP_ERR_UNSUPPORTED;
    }
    const size_t n = w->n, k = w->k;
    const size_t rows = lt_chunk_rows(n, k);
    const size_t wbytes = round_up_sz(rows * k, 256), sbytes = round_up_sz(rows * sizeof(float), 256);
    void *buf = lt_alloc(ds, wbytes + sbytes + LT_WS_BYTES, st);
    if (!buf) {
        *why = LOFP_W4A8_WHY_NO_MEMORY;
        return LOFP_ERR_UNSUPPORTED;
    }
    uint8_t *w8 = (uint8_t *)buf;
    float *rs = (float *)(w8 + wbytes);
    const size_t esz = out_bf16 ? 2 : 4;
    LtGemm g;
    memset(&g, 0, sizeof g);
    g.ab = CUDA_R_8F_E4M3;
    g.w = w8;
    g.a = (const uint8_t *)d_ws + w4a8_codes_offset(m);
    g.m = m; g.k = k; g.ldd = n;
    g.out_bf16 = out_bf16;
    g.w_scale = rs;
    g.a_scale = (const float *)d_ws;
    g.ws = (uint8_t *)rs + sbytes;
    g.ws_bytes = LT_WS_BYTES;
    /* every chunk's GEMM planned (heuristic, cached) before anything is enqueued */
    LtWhy plan = LT_OK;
    for (size_t n0 = 0; n0 < n && plan == LT_OK; n0 += rows) {
        g.rows = n - n0 < rows ? n - n0 : rows;
        g.d = (uint8_t *)d_c + n0 * esz;
        plan = lt_matmul(ds, g, st, true);
    }
    lofp_status rc = LOFP_OK;
    if (plan != LT_OK) {
        *why = (int)plan;
        rc = LOFP_ERR_UNSUPPORTED;
    } else {
        rc = have_codes ? LOFP_OK : w4a8_act_quant(d_a, m, k, d_ws, 1, st);
    }
    for (size_t n0 = 0; n0 < n && rc == LOFP_OK; n0 += rows) {
        g.rows = n - n0 < rows ? n - n0 : rows;
        g.d = (uint8_t *)d_c + n0 * esz;
        rc = launch_cast(w, n0, g.rows, w8, rs, st);
        if (rc != LOFP_OK) break;
        const LtWhy r = lt_matmul(ds, g, st, false);
        if (r != LT_OK) {
            *why = (int)r;
            rc = LOFP_ERR_UNSUPPORTED;
        }
    }
    if (cudaFreeAsync(buf, st) != cudaSuccess && rc == LOFP_OK) {
        record_cuda_error(cudaGetLastError(), "cudaFreeAsync", __FILE__, __LINE__);
        rc = LOFP_CUDA_ERR_RUNTIME;
    }
    if (rc == LOFP_OK) *why = LOFP_W4A8_WHY_OK;
    return rc;
}

extern "C" lofp_status lofp_cuda_w4a8_cast_weights(const lofp_cuda_w4 *w, uint8_t *d_out, float *d_row_scale,
                                                   lofp_cuda_stream stream)
{
    clear_cuda_error();
    if (!w || !w->d_codes || !w->d_row_exp || !d_out || !d_row_scale) return LOFP_ERR_INVALID_ARG;
    if (w->id != LOFP_SCHEME_MXFP4) return LOFP_ERR_UNSUPPORTED;
    return launch_cast(w, 0, w->n, d_out, d_row_scale, (cudaStream_t)stream);
}

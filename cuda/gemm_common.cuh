/* gemm_common.cuh -- pieces shared by the W4A16 kernels (gemm.cu: GEMV and mma.sync GEMM;
 * gemm_wgmma.cu: the sm_90a wgmma GEMM): the launch parameters, the Marlin-style FP4 -> bf16
 * dequantization helpers and cp.async wrappers. See the header comment of gemm.cu. */
#ifndef LOFP_GEMM_COMMON_CUH
#define LOFP_GEMM_COMMON_CUH

#include <stdint.h>

#include "lofp_cuda_device.cuh"

namespace lofpcu {

struct GemmP {
    const uint8_t *codes, *scales;
    const float *params;
    const uint16_t *a;
    void *c;
    int m, n, k, out_bf16;
};

/* The prepared weight layout (lofp_cuda_w4_prepare) is tile-major: for every 16-row tile of W
 * and every 128-element chunk of K, the tile's 16 rows x 64 code bytes are one contiguous 1 KiB
 * block (row-major inside it: 16-byte unit u of row r at 64 (r % 16) + 16 u), the chunks of a
 * tile consecutive, then the next tile; the scales likewise, 16 rows x SB bytes per (tile, chunk)
 * (SB = 8 NVFP4, 4 MXFP4). A GEMV warp's load of one 16-byte unit per lane for 8 rows is then 512
 * contiguous bytes and a warp's K range of one tile a single contiguous run, where the row-major
 * [N, K/2] layout gave eight 64-byte pieces a row apart. Every kernel that reads the prepared
 * weights addresses them through these two functions (nch = K / 128). Inside a tile the offsets
 * add: for r0 = 16 t + e and d = 16 j + f with e + f < 16, w4_code_off(r0 + d, ch, u) =
 * w4_code_off(r0, 0, u) + w4_code_off(d, ch, 0), and the same for w4_scale_off. */
__host__ __device__ __forceinline__ size_t w4_code_off(size_t row, size_t ch, unsigned unit, size_t nch)
{
    return (((row >> 4) * nch + ch) << 10) + ((row & 15) << 6) + ((size_t)unit << 4);
}
/* byte offset of row `row`'s SB scale bytes of chunk ch (SB = 8 NVFP4, 4 MXFP4) */
__host__ __device__ __forceinline__ size_t w4_scale_off(size_t row, size_t ch, size_t sb, size_t nch)
{
    return ((row >> 4) * nch + ch) * 16 * sb + (row & 15) * sb;
}

} // namespace lofpcu

namespace {

/* pair p (elements 2p, 2p+1) of a prepared word -> bf16x2 of e2m1 * 2^-126 */
__device__ __forceinline__ uint32_t fp4pair(uint32_t q, int p)
{
    const uint32_t t = q << (12 - 4 * p);
    return (t & 0x80008000u) | ((t & 0x70007000u) >> 6);
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b)
{
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}

/* NVFP4: two UE4M3 bytes (low, high of a 16-bit word) -> bf16 of scale * 2^119, as two splats. */
__device__ __forceinline__ void nv_scale2(uint32_t two, uint32_t &s0, uint32_t &s1)
{
    uint32_t h;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.rn.f16x2.e4m3x2 %0, t; }" : "=r"(h) : "h"((unsigned short)two));
    const uint32_t t = ((h >> 3) & 0x0FFF0FFFu) + 0x73807380u;
    s0 = __byte_perm(t, 0, 0x1010);
    s1 = __byte_perm(t, 0, 0x3232);
}

/* MXFP4: E8M0 byte -> bf16 splat of 2^(b + sbias - 127) (0 if it underflows, NaN for 0xFF). */
__device__ __forceinline__ uint32_t mx_scale1(uint32_t b, int sbias)
{
    if (b == 0xFF) return 0x7FC07FC0u;
    int f = (int)b + sbias;
    uint32_t v = f <= 0 ? 0u : (uint32_t)f << 7;
    return v | (v << 16);
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async8(void *smem, const void *gmem, int src_bytes)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(sa), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem, int src_bytes)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(sa), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

/* The lane exchange of store_quad: shfl.xor over the whole warp. (The host test,
 * tests/cuda/test_codec_host.cu, passes an emulation of it that runs 32 host threads in step.) */
struct WarpXor {
    __device__ __forceinline__ float operator()(float v, int mask) const { return __shfl_xor_sync(0xFFFFFFFFu, v, mask); }
    __device__ __forceinline__ uint32_t operator()(uint32_t v, int mask) const
    {
        return __shfl_xor_sync(0xFFFFFFFFu, v, mask);
    }
};

/* The stores of one wgmma accumulator quad: lane (g = lane / 4, c = lane % 4) holds v[2h + b] for
 * weight row row + 8h (row = the lane's first row, g modulo 8) and token tok + b (tok = the quad's
 * first token, 2c modulo 8), h, b in {0, 1}; C is [m, n] row-major, n a multiple of 16. With pack
 * (C 8-byte aligned for bf16, 16 for fp32) two lane exchanges give each lane four consecutive rows
 * of one token: with lane g ^ 1 (the even lane gets rows g, g + 1 of tok, the odd one rows g - 1,
 * g of tok + 1, for h = 0 and 1), then with lane g ^ 2 (the lower lane of the pair keeps the h = 0
 * rows and takes its partner's, the upper one the h = 1 rows): one 8-byte (bf16) or 16-byte (fp32)
 * store per four outputs, a warp's store 16 whole rows of 8 tokens (whole sectors). Without pack,
 * one store per output. Every lane of the warp must call it (the exchanges), with the same pack. */
#pragma nv_exec_check_disable
template <class X = WarpXor>
__host__ __device__ __forceinline__ void store_quad(void *c, int out_bf16, int pack, int m, int n, int g, int row,
                                                    int tok, const float v[4], X xchg = X())
{
    if (pack) {
        const int odd = g & 1, up = (g >> 1) & 1;
        float lo[2], hi[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float r = xchg(odd ? v[2 * h] : v[2 * h + 1], 4);
            lo[h] = odd ? r : v[2 * h];
            hi[h] = odd ? v[2 * h + 1] : r;
        }
        const int tk = tok + odd, rb = row - odd + 6 * up;
        const bool in = tk < m && rb < n;
        const size_t o = (size_t)tk * n + rb;
        if (out_bf16) {
            const uint32_t w0 = lofpcu::f32_to_bf16(lo[0]) | ((uint32_t)lofpcu::f32_to_bf16(hi[0]) << 16);
            const uint32_t w1 = lofpcu::f32_to_bf16(lo[1]) | ((uint32_t)lofpcu::f32_to_bf16(hi[1]) << 16);
            const uint32_t r = xchg(up ? w0 : w1, 8);
            if (in) *(uint2 *)((uint16_t *)c + o) = up ? make_uint2(r, w1) : make_uint2(w0, r);
        } else {
            const float r0 = xchg(up ? lo[0] : lo[1], 8);
            const float r1 = xchg(up ? hi[0] : hi[1], 8);
            if (in) *(float4 *)((float *)c + o) = up ? make_float4(r0, r1, lo[1], hi[1]) : make_float4(lo[0], hi[0], r0, r1);
        }
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int tk = tok + (e & 1), rw = row + 8 * (e >> 1);
            if (tk < m && rw < n) {
                const size_t o = (size_t)tk * n + rw;
                if (out_bf16) ((uint16_t *)c)[o] = lofpcu::f32_to_bf16(v[e]);
                else ((float *)c)[o] = v[e];
            }
        }
    }
}
/* the alignment store_quad's pack needs */
inline int store_quad_pack(const void *c, int out_bf16) { return ((uintptr_t)c % (out_bf16 ? 8 : 16)) == 0; }

} // namespace

#endif

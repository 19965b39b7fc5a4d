/* gemm.cu -- W4A16: C[m, n] = A[m, k] . W[n, k]^T with NVFP4 / MXFP4 weights dequantized in
 * registers and bf16 tensor-core mma.sync (m16n8k16, fp32 accumulation).
 *
 * Orientation: the weight tile is the mma's A operand (16 output features per m16 tile) and the
 * activations are the B operand (8 tokens per n8 tile), so M = 1 wastes 7/8 of an n8 tile rather
 * than 15/16 of an m16 one.
 *
 * K order. Within every 128-element chunk of K, mma step j (0..7) and thread (g = lane/4,
 * c = lane%4) use physical k = 32c + 4j + {0,1} for the fragment slots kk = 2c, 2c+1 and
 * 32c + 4j + {2,3} for kk = 2c+8, 2c+9. A dot product does not care how K is permuted as long as
 * both operands use the same permutation, and this one makes each thread's share of a weight row
 * 32 contiguous elements (one 16-byte load; one NVFP4 scale pair, one MXFP4 scale) and of an
 * activation row 32 contiguous bf16 (four 16-byte loads, in natural memory order).
 *
 * Prepared layout: tile-major codes and scales (16 rows x one 128-element chunk contiguous,
 * gemm_common.cuh w4_code_off / w4_scale_off), so the GEMV's weight stream is contiguous.
 *
 * Dequantization (Marlin's bit trick, docs/CUDA.md): lofp_cuda_w4_prepare de-interleaves the
 * nibbles of every 32-bit word (even elements in the low half-word); pair p of a word is then
 * t = q << (12 - 4p); bf16x2 = (t & 0x80008000) | ((t & 0x70007000) >> 6), i.e. e2m1 * 2^-126,
 * exact (0.5 becomes the bf16 subnormal 2^-127), and one bf16x2 fma by the block scale S
 * (NVFP4: UE4M3 * 2^119 built from the native e4m3x2 -> f16x2 convert; MXFP4: 2^(e - emax_tensor
 * + 126)) gives e2m1 * scale * 2^-7 (NVFP4) or e2m1 * 2^(e - emax_tensor) (MXFP4), exact in bf16.
 * The epilogue multiplies by alpha = 2^7 / global (NVFP4) or 2^(emax_tensor - 127) (MXFP4).
 *
 * Kernels: gemv_kernel (m <= 32, and m <= 64 where wgmma is unavailable: each warp streams MT
 * weight m16 tiles over a K range with the activations read from L1/L2; WK warps split K and
 * reduce in shared memory, deterministic) and gemm_kernel (m > 64 when wgmma is unavailable or
 * devices without wgmma (or the NO_WGMMA route): 128 x 128 CTA tiles, 3-stage cp.async pipeline, swizzled shared
 * memory; gemm_wgmma.cu is the default for m > 32).
 */
#include <atomic>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_common.cuh"
#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"

using namespace lofpcu;

namespace {

/* ---- prepare ---- */
/* Output word o of the tile-major codes (gemm_common.cuh: block o / 256 = tile t, chunk ch; row
 * 16 t + (o / 16) % 16; word o % 16 of that row's 64 chunk bytes) from the row-major input, with
 * the nibbles de-interleaved. Writes are contiguous; each 16 lanes read one 64-byte run. */
__global__ void w4_prep_codes(const uint8_t *codes, const uint8_t *scales, uint8_t *out, size_t n,
                              size_t k, int nvfp4)
{
    const size_t words = n * k / 8, nch = k / 128;
    for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < words;
         o += (size_t)gridDim.x * blockDim.x) {
        const size_t b = o >> 8, t = b / nch, ch = b - t * nch;
        const size_t r = t * 16 + ((o >> 4) & 15), col = ch * 128 + (o & 15) * 8;
        uint32_t x = ((const uint32_t *)codes)[r * (k / 8) + col / 8];
        if (nvfp4 && scales[r * (k / 16) + col / 16] == 0) x = 0;
        uint32_t v = 0;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            v |= ((x >> (8 * q)) & 0xFu) << (4 * q);            /* element 2q -> nibble q */
            v |= ((x >> (8 * q + 4)) & 0xFu) << (16 + 4 * q);   /* element 2q+1 -> nibble 4+q */
        }
        ((uint32_t *)out)[o] = v;
    }
}

/* Output byte o of the tile-major scales (sb = 8 NVFP4 / 4 MXFP4 bytes per row and chunk; block
 * o / (16 sb) = tile t, chunk ch; row 16 t + (o / sb) % 16, byte o % sb) from the linear input. */
__global__ void w4_prep_scales(const uint8_t *scales, uint8_t *out, size_t n, size_t k, int sb)
{
    const size_t bytes = n * (k / 128) * sb, nch = k / 128;
    for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < bytes;
         o += (size_t)gridDim.x * blockDim.x) {
        const size_t b = o / (16 * sb), t = b / nch, ch = b - t * nch;
        const size_t r = t * 16 + (o / sb) % 16;
        out[o] = scales[r * (nch * sb) + ch * sb + o % sb];
    }
}

__global__ void w4_scale_max(const uint8_t *s, size_t nbytes, unsigned int *mx)
{
    unsigned int m = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nbytes;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned int b = s[i];
        if (b != 0xFF && b > m) m = b;
    }
    for (int o = 16; o > 0; o >>= 1) {
        unsigned int t = __shfl_xor_sync(0xFFFFFFFFu, m, o);
        m = t > m ? t : m;
    }
    if ((threadIdx.x & 31) == 0) atomicMax(mx, m);
}

__global__ void w4_params(float *params, const float *global, const unsigned int *smax, int nvfp4, int dec)
{
    if (nvfp4) {
        const float g = global ? *global : 1.0f;
        params[0] = dec ? fmul(128.0f, g) : fdiv(128.0f, g);
        params[1] = 0.0f;
    } else {
        const int bmax = (int)*smax; /* 0..254 */
        params[0] = bmax - 127 >= -126 ? u2f((uint32_t)(bmax) << 23) : u2f(0x00400000u);
        params[1] = (float)(253 - bmax);
    }
}

/* ---- fragments ---- */
__device__ __forceinline__ void mma_bf16(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void store_out(const GemmP &p, int tok, int col, float v)
{
    if (tok >= p.m || col >= p.n) return;
    const size_t i = (size_t)tok * p.n + col;
    if (p.out_bf16) ((uint16_t *)p.c)[i] = f32_to_bf16(v);
    else ((float *)p.c)[i] = v;
}

/* Dequantizes the A fragments of one k16 step for a weight m16 tile: rows g (word qa) and g+8
 * (word qb), word-step half h (0/1), scale splats sa/sb. */
__device__ __forceinline__ void wfrag(uint32_t qa, uint32_t qb, int h, uint32_t sa, uint32_t sb,
                                      uint32_t &a0, uint32_t &a1, uint32_t &a2, uint32_t &a3)
{
    a0 = bf16x2_mul(fp4pair(qa, 2 * h), sa);
    a2 = bf16x2_mul(fp4pair(qa, 2 * h + 1), sa);
    a1 = bf16x2_mul(fp4pair(qb, 2 * h), sb);
    a3 = bf16x2_mul(fp4pair(qb, 2 * h + 1), sb);
}

/* ---- GEMV: m <= 8*NT ---- */
/* One 128-chunk of K for MT weight m16 tiles and NT token tiles. */
/* The lane's activations of one chunk: NT token tiles x 32 contiguous bf16 (zero past m). */
template <int NT>
__device__ __forceinline__ void gemv_loada(const GemmP &p, int ch, int g, int c, uint4 (&av)[NT][4])
{
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const int tok = nt * 8 + g;
#pragma unroll
        for (int w4 = 0; w4 < 4; w4++) {
            if (tok < p.m)
                av[nt][w4] = __ldg((const uint4 *)(p.a + (size_t)tok * p.k + (size_t)ch * 128 + 32 * c + 8 * w4));
            else av[nt][w4] = make_uint4(0, 0, 0, 0);
        }
    }
}

template <int MT, int NT, int NV>
__device__ __forceinline__ void gemv_chunk(const uint4 (&av)[NT][4], int sbias,
                                           const uint4 (&wq)[MT][2], const uint32_t (&ws)[MT][2],
                                           float (&acc)[MT][NT][4])
{
    uint32_t sc[MT][2][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if (NV) nv_scale2(ws[mt][h], sc[mt][h][0], sc[mt][h][1]);
            else sc[mt][h][0] = sc[mt][h][1] = mx_scale1(ws[mt][h], sbias);
        }
#pragma unroll
    for (int w4 = 0; w4 < 4; w4++) {
#pragma unroll
        for (int hs = 0; hs < 2; hs++) {
            uint32_t af[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const uint32_t qa = w4 == 0 ? wq[mt][0].x : w4 == 1 ? wq[mt][0].y : w4 == 2 ? wq[mt][0].z : wq[mt][0].w;
                const uint32_t qb = w4 == 0 ? wq[mt][1].x : w4 == 1 ? wq[mt][1].y : w4 == 2 ? wq[mt][1].z : wq[mt][1].w;
                wfrag(qa, qb, hs, sc[mt][0][w4 >> 1], sc[mt][1][w4 >> 1], af[mt][0], af[mt][1], af[mt][2], af[mt][3]);
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const uint32_t b0 = hs ? av[nt][w4].z : av[nt][w4].x;
                const uint32_t b1 = hs ? av[nt][w4].w : av[nt][w4].y;
#pragma unroll
                for (int mt = 0; mt < MT; mt++) mma_bf16(acc[mt][nt], af[mt][0], af[mt][1], af[mt][2], af[mt][3], b0, b1);
            }
        }
    }
}

/* The lane's weights of one chunk: rows g and g+8 of each tile, 16 code bytes and the scale pair
 * (NVFP4) / byte (MXFP4) each. wl / sl: the lane's unit of row g of tile 0 at chunk 0; rows g + 8h
 * of tile mt at chunk ch are w4_code_off(16 mt + 8 h, ch, 0) further (tile-major layout,
 * gemm_common.cuh), so the 8 rows of one load instruction are 512 contiguous bytes. */
template <int MT, int NV>
__device__ __forceinline__ void gemv_loadw(const uint8_t *wl, const uint8_t *sl, size_t nch, int ch,
                                           uint4 (&wq)[MT][2], uint32_t (&ws)[MT][2])
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            wq[mt][h] = __ldg((const uint4 *)(wl + w4_code_off(16 * mt + 8 * h, ch, 0, nch)));
            if (NV) ws[mt][h] = __ldg((const unsigned short *)(sl + w4_scale_off(16 * mt + 8 * h, ch, 8, nch)));
            else ws[mt][h] = __ldg(sl + w4_scale_off(16 * mt + 8 * h, ch, 4, nch));
        }
}

/* The GEMV kernel, configurable (per-warp cp.async rings in shared memory and a fully unrolled
 * register ring of up to six chunks measured 1-25 % slower, docs/CUDA.md): each warp walks its K range
 * STEP chunks per step with the next STEP chunks' weights already requested (STEP = 2: up to four
 * chunks of weights in flight; STEP = 1: two, for fewer registers); the activations of a chunk
 * are loaded when it is computed (L1/L2). A CTA is RW row groups x WK warps: the WK warps of a
 * group split K over the same MT tiles and are summed in shared memory in warp order (fixed:
 * deterministic); the RW groups take consecutive row blocks, so warps of the same K slice in
 * different groups read the same activations at about the same time. MINB is the CTAs per SM
 * asked of ptxas (the register bound: 65536 / (32 WK RW MINB)); 1 leaves the bound unset (0),
 * since an explicit minimum of one CTA changes ptxas's choice (m <= 8: 82 -> 104 registers). */
template <int MT, int NT, int NV, int WK, int RW, int MINB, int STEP>
__global__ void __launch_bounds__(32 * WK * RW, MINB > 1 ? MINB : 0) gemv_kernel(GemmP p)
{
    static_assert(STEP == 1 || STEP == 2, "one or two chunks per step");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int kw = RW == 1 ? warp : warp % WK, rw = RW == 1 ? 0 : warp / WK;
    const int g = lane >> 2, c = lane & 3;
    const int n0 = (blockIdx.x * RW + rw) * 16 * MT;
    const int chunks = p.k / 128;
    const int c_beg = (int)((long long)chunks * kw / WK);
    /* a row group past N (N / (16 MT) not a multiple of RW) streams nothing but still meets the
     * barrier of the reduction */
    const int c_end = RW == 1 || n0 < p.n ? (int)((long long)chunks * (kw + 1) / WK) : c_beg;
    const int sbias = NV ? 0 : (int)p.params[1];
    const size_t nch = (size_t)chunks;
    const uint8_t *const wl = p.codes + w4_code_off((size_t)(n0 + g), 0, (unsigned)c, nch);
    const uint8_t *const sl = p.scales + w4_scale_off((size_t)(n0 + g), 0, NV ? 8 : 4, nch) + (NV ? 2 : 1) * c;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int t = 0; t < 4; t++) acc[i][j][t] = 0.0f;

    if constexpr (STEP == 2) {
        /* two chunks per step, the next two prefetched: up to four chunks of weights in flight */
        uint4 wa[MT][2], wb[MT][2], na[MT][2], nb[MT][2];
        uint32_t sa[MT][2], sb[MT][2], nsa[MT][2], nsb[MT][2];
        uint4 aa[NT][4], ab[NT][4];
        if (c_beg < c_end) gemv_loadw<MT, NV>(wl, sl, nch, c_beg, wa, sa);
        if (c_beg + 1 < c_end) gemv_loadw<MT, NV>(wl, sl, nch, c_beg + 1, wb, sb);
        for (int ch = c_beg; ch < c_end; ch += 2) {
            if (ch + 2 < c_end) gemv_loadw<MT, NV>(wl, sl, nch, ch + 2, na, nsa);
            if (ch + 3 < c_end) gemv_loadw<MT, NV>(wl, sl, nch, ch + 3, nb, nsb);
            gemv_loada<NT>(p, ch, g, c, aa);
            gemv_chunk<MT, NT, NV>(aa, sbias, wa, sa, acc);
            if (ch + 1 < c_end) {
                gemv_loada<NT>(p, ch + 1, g, c, ab);
                gemv_chunk<MT, NT, NV>(ab, sbias, wb, sb, acc);
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    wa[mt][h] = na[mt][h]; sa[mt][h] = nsa[mt][h];
                    wb[mt][h] = nb[mt][h]; sb[mt][h] = nsb[mt][h];
                }
        }
    } else {
        /* one chunk per step, the next one prefetched: two chunks of weights in flight */
        uint4 wa[MT][2], na[MT][2];
        uint32_t sa[MT][2], nsa[MT][2];
        uint4 aa[NT][4];
        if (c_beg < c_end) gemv_loadw<MT, NV>(wl, sl, nch, c_beg, wa, sa);
        for (int ch = c_beg; ch < c_end; ch++) {
            if (ch + 1 < c_end) gemv_loadw<MT, NV>(wl, sl, nch, ch + 1, na, nsa);
            gemv_loada<NT>(p, ch, g, c, aa);
            gemv_chunk<MT, NT, NV>(aa, sbias, wa, sa, acc);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) { wa[mt][h] = na[mt][h]; sa[mt][h] = nsa[mt][h]; }
        }
    }

    /* deterministic cross-warp reduction, per row group in warp (= K) order */
    extern __shared__ float red[];
    constexpr int PER = MT * NT * 4;
    if (WK > 1) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int t = 0; t < 4; t++) red[((warp * PER) + (mt * NT + nt) * 4 + t) * 32 + lane] = acc[mt][nt][t];
        __syncthreads();
        if (kw != 0) return;
        const float *const rg = RW == 1 ? red : red + rw * WK * PER * 32;
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    float s = rg[((mt * NT + nt) * 4 + t) * 32 + lane];
                    for (int w = 1; w < WK; w++) s = fadd(s, rg[((w * PER) + (mt * NT + nt) * 4 + t) * 32 + lane]);
                    acc[mt][nt][t] = s;
                }
    }
    const float alpha = p.params[0];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int row = n0 + 16 * mt + g, tok = nt * 8 + 2 * c;
            store_out(p, tok, row, fmul(acc[mt][nt][0], alpha));
            store_out(p, tok + 1, row, fmul(acc[mt][nt][1], alpha));
            store_out(p, tok, row + 8, fmul(acc[mt][nt][2], alpha));
            store_out(p, tok + 1, row + 8, fmul(acc[mt][nt][3], alpha));
        }
}

/* ---- tiled GEMM: 128 weight rows x 128 tokens per CTA, K in 128-chunks, 3 stages ---- */
constexpr int GT_W = 128, GT_T = 128, GSTAGES = 3;
constexpr int G_ACT_BYTES = GT_T * 256;   /* 128 tokens x 128 bf16 */
constexpr int G_W_BYTES = GT_W * 64;      /* 128 rows x 64 bytes of codes */
constexpr int G_S_BYTES = GT_W * 8;       /* 128 rows x 8 scale bytes (NVFP4; MXFP4 uses 4) */
constexpr int G_STAGE = G_ACT_BYTES + G_W_BYTES + G_S_BYTES;

__device__ __forceinline__ int act_swz(int t, int s) { return s ^ (((s >> 3) & 1) << 1) ^ (t & 1); }

template <int NV>
__global__ void __launch_bounds__(256, 1) gemm_kernel(GemmP p)
{
    extern __shared__ __align__(128) uint8_t smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, c = lane & 3;
    const int w0 = blockIdx.x * GT_W, t0 = blockIdx.y * GT_T;
    const int wm = warp & 3, wt = warp >> 2; /* warp tile: 32 weight rows x 64 tokens */
    const int chunks = p.k / 128;
    const int sbias = NV ? 0 : (int)p.params[1];
    const size_t nch = (size_t)p.k / 128; /* tile-major prepared weights (gemm_common.cuh) */

    auto load_stage = [&](int st, int ch) {
        uint8_t *sa = smem + st * G_STAGE;
        uint8_t *sw = sa + G_ACT_BYTES;
        uint8_t *ss = sw + G_W_BYTES;
        /* activations: 128 tokens x 16 slots of 16 bytes */
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int idx = tid + 256 * i;
            const int t = idx >> 4, s = idx & 15;
            const int tok = t0 + t;
            const bool ok = tok < p.m;
            const uint16_t *src = p.a + (size_t)(ok ? tok : 0) * p.k + (size_t)ch * 128 + s * 8;
            cp_async16(sa + t * 256 + act_swz(t, s) * 16, src, ok ? 16 : 0);
        }
        /* weight codes: 128 rows x 4 slots */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int idx = tid + 256 * i;
            const int r = idx >> 2, s = idx & 3;
            const int row = w0 + r;
            const bool ok = row < p.n;
            cp_async16(sw + r * 64 + s * 16, p.codes + w4_code_off((size_t)(ok ? row : 0), (size_t)ch, (unsigned)s, nch), ok ? 16 : 0);
        }
        if (tid < 128) {
            const int row = w0 + tid;
            const bool ok = row < p.n;
            if (NV) cp_async8(ss + tid * 8, p.scales + w4_scale_off((size_t)(ok ? row : 0), (size_t)ch, 8, nch), ok ? 8 : 0);
            else cp_async4(ss + tid * 8, p.scales + w4_scale_off((size_t)(ok ? row : 0), (size_t)ch, 4, nch), ok ? 4 : 0);
        }
    };

    float acc[2][8][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int t = 0; t < 4; t++) acc[i][j][t] = 0.0f;

#pragma unroll
    for (int s = 0; s < GSTAGES - 1; s++) {
        if (s < chunks) load_stage(s, s);
        cp_commit();
    }
    for (int ch = 0; ch < chunks; ch++) {
        cp_wait<GSTAGES - 2>();
        __syncthreads();
        {
            const int nx = ch + GSTAGES - 1;
            if (nx < chunks) load_stage(nx % GSTAGES, nx);
            cp_commit();
        }
        const uint8_t *sa = smem + (ch % GSTAGES) * G_STAGE;
        const uint8_t *sw = sa + G_ACT_BYTES;
        const uint8_t *ss = sw + G_W_BYTES;
        uint4 wq[2][2];
        uint32_t sc[2][2][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = wm * 32 + mt * 16 + g + 8 * h;
                wq[mt][h] = *(const uint4 *)(sw + r * 64 + 16 * c);
                if (NV) nv_scale2(*(const unsigned short *)(ss + r * 8 + 2 * c), sc[mt][h][0], sc[mt][h][1]);
                else sc[mt][h][0] = sc[mt][h][1] = mx_scale1(ss[r * 8 + c], sbias);
            }
#pragma unroll
        for (int w4 = 0; w4 < 4; w4++) {
            uint4 av[8];
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                const int t = wt * 64 + nt * 8 + g;
                av[nt] = *(const uint4 *)(sa + t * 256 + act_swz(t, 4 * c + w4) * 16);
            }
#pragma unroll
            for (int hs = 0; hs < 2; hs++) {
                uint32_t af[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    const uint32_t qa = w4 == 0 ? wq[mt][0].x : w4 == 1 ? wq[mt][0].y : w4 == 2 ? wq[mt][0].z : wq[mt][0].w;
                    const uint32_t qb = w4 == 0 ? wq[mt][1].x : w4 == 1 ? wq[mt][1].y : w4 == 2 ? wq[mt][1].z : wq[mt][1].w;
                    wfrag(qa, qb, hs, sc[mt][0][w4 >> 1], sc[mt][1][w4 >> 1], af[mt][0], af[mt][1], af[mt][2], af[mt][3]);
                }
#pragma unroll
                for (int nt = 0; nt < 8; nt++) {
                    const uint32_t b0 = hs ? av[nt].z : av[nt].x;
                    const uint32_t b1 = hs ? av[nt].w : av[nt].y;
                    mma_bf16(acc[0][nt], af[0][0], af[0][1], af[0][2], af[0][3], b0, b1);
                    mma_bf16(acc[1][nt], af[1][0], af[1][1], af[1][2], af[1][3], b0, b1);
                }
            }
        }
    }
    cp_wait<0>();
    const float alpha = p.params[0];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            const int row = w0 + wm * 32 + mt * 16 + g, tok = t0 + wt * 64 + nt * 8 + 2 * c;
            store_out(p, tok, row, fmul(acc[mt][nt][0], alpha));
            store_out(p, tok + 1, row, fmul(acc[mt][nt][1], alpha));
            store_out(p, tok, row + 8, fmul(acc[mt][nt][2], alpha));
            store_out(p, tok + 1, row + 8, fmul(acc[mt][nt][3], alpha));
        }
}

} // namespace

/* ------------------------------------------------------------------------------------------ */

extern "C" lofp_status lofp_cuda_w4_prepare(const lofp_scheme *s, const uint8_t *d_codes,
                                            const uint8_t *d_scales, const float *d_global,
                                            size_t n, size_t k, lofp_cuda_w4 *w,
                                            lofp_cuda_stream stream)
{
    return lofp_cuda_w4_prepare_dir(s, d_codes, d_scales, d_global, LOFP_GLOBAL_ENCODE, n, k, w, stream);
}

extern "C" lofp_status lofp_cuda_w4_prepare_dir(const lofp_scheme *s, const uint8_t *d_codes,
                                                const uint8_t *d_scales, const float *d_global,
                                                lofp_global_dir dir, size_t n, size_t k,
                                                lofp_cuda_w4 *w, lofp_cuda_stream stream)
{
    clear_cuda_error();
    if (!s || !w || !d_codes || !d_scales) return LOFP_ERR_INVALID_ARG;
    if (lofp_scheme_validate(s) != LOFP_OK) return LOFP_ERR_INVALID_ARG;
    const bool nv = s->id == LOFP_SCHEME_NVFP4;
    if (!(nv && s->block == 16) && !(s->id == LOFP_SCHEME_MXFP4 && s->block == 32))
        return LOFP_ERR_UNSUPPORTED;
    if (n == 0 || k == 0 || k % 128 || n % 16) return LOFP_ERR_SHAPE;
    if (n > 0x7FFFFFFF || k > 0x7FFFFFFF || n * k / 2 > ((size_t)1 << 40)) return LOFP_ERR_SIZE_OVERFLOW;
    memset(w, 0, sizeof *w);
    cudaStream_t st = (cudaStream_t)stream;
    const size_t cb = n * k / 2, sb = n * k / s->block;
    LOFP_CU(cudaMalloc((void **)&w->d_codes, cb));
    if (cudaMalloc((void **)&w->d_scales, sb) != cudaSuccess ||
        cudaMalloc((void **)&w->d_params, 4 * sizeof(float)) != cudaSuccess) {
        lofp_cuda_w4_free(w);
        LOFP_CU(cudaErrorMemoryAllocation);
    }
    w->id = s->id;
    w->n = n;
    w->k = k;
    const int grid = sm_count() * 8;
    w4_prep_codes<<<grid, 256, 0, st>>>(d_codes, d_scales, w->d_codes, n, k, nv ? 1 : 0);
    LOFP_CU_LAUNCH();
    w4_prep_scales<<<grid, 256, 0, st>>>(d_scales, w->d_scales, n, k, nv ? 8 : 4);
    LOFP_CU_LAUNCH();
    unsigned int *smax = (unsigned int *)(w->d_params + 2);
    LOFP_CU(cudaMemsetAsync(smax, 0, sizeof(unsigned int), st));
    if (!nv) {
        w4_scale_max<<<grid, 256, 0, st>>>(d_scales, sb, smax);
        LOFP_CU_LAUNCH();
    }
    w4_params<<<1, 1, 0, st>>>(w->d_params, nv ? d_global : NULL, smax, nv ? 1 : 0, dir == LOFP_GLOBAL_DECODE);
    LOFP_CU_LAUNCH();
    if (!nv) {
        /* the W4A8 large route's per-row exponents and rowwise-exact flag (gemm_w4a8_large.cu);
         * synchronises the stream */
        const lofp_status r = w4a8_prepare_rows(w, d_codes, d_scales, st);
        if (r != LOFP_OK) {
            lofp_cuda_w4_free(w);
            return r;
        }
    }
    return LOFP_OK;
}

extern "C" void lofp_cuda_w4_free(lofp_cuda_w4 *w)
{
    if (!w) return;
    if (w->d_codes) cudaFree(w->d_codes);
    if (w->d_scales) cudaFree(w->d_scales);
    if (w->d_params) cudaFree(w->d_params);
    if (w->d_row_exp) cudaFree(w->d_row_exp);
    memset(w, 0, sizeof *w);
}

/* One GEMV configuration (gemv_kernel's template parameters); the grid covers N / (16 MT) row
 * blocks in groups of RW (the caller guarantees N / 16 % MT == 0). */
template <int MT, int NT, int NV, int WK, int RW, int MINB, int STEP>
static lofp_status gemv_launch(const GemmP &p, cudaStream_t st)
{
    const unsigned grid = (unsigned)((p.n / (16 * MT) + RW - 1) / RW);
    const size_t shm = (size_t)WK * RW * MT * NT * 4 * 32 * sizeof(float);
    if (shm > 48 * 1024)
        LOFP_CU(cudaFuncSetAttribute(gemv_kernel<MT, NT, NV, WK, RW, MINB, STEP>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
    gemv_kernel<MT, NT, NV, WK, RW, MINB, STEP><<<grid, 32 * WK * RW, shm, st>>>(p);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

/* The production GEMV configurations, one per shape class (measured on an H200: us for
 * 20 back-to-back calls, bf16 out; NVFP4 / MXFP4 at M = 1 and 16 of 8192^2 and 14336 x 4096):
 *  - m <= 8 (NT = 1): one tile per warp, a CTA of two row groups x 8 warps splitting K, <= 64
 *    registers (2 CTAs per SM), one chunk per step; it took every M = 1 column against the
 *    previous 4-warp two-chunk configuration: 15.9 / 16.6 / 14.8 / 15.3 against 18.8 / 18.4 /
 *    17.0 / 17.9. Any N / 16 (a row group past N idles through the reduction).
 *  - m = 9..16 (NT = 2), N / 16 even and >= 128: two tiles per warp, 8 warps splitting K, <= 128
 *    registers (2 CTAs per SM), one chunk per step; M = 16 8192^2: 21.4 / 21.1 against 24.6 /
 *    26.1. A four-tile 4-warp form (N / 16 = 0 mod 4, K <= 4096) was 2-3 % faster at 14336 x
 *    4096 on an H200 but slower on an H100 in the decode sweep (`bench_cuda decode`, NVFP4,
 *    M = 16: 24.0 against 23.0 at 14336 x 4096, 162.8 against 147.8 at 128256 x 4096, 15.6
 *    against 10.2 at 4096^2, where its 64 CTAs leave half the machine idle): dropped.
 *  - N / 16 < 128 at any m <= 16: one tile per warp, 16 warps splitting K, one CTA per row tile
 *    (decode sweep, H100, NVFP4 1024 x 4096: M = 1 5.3 against 6.4 for the two-row-group form,
 *    M = 16 6.7 against 14.4 for the four-tile form and 9.1 for the two-tile one).
 *  - m = 9..16 with N / 16 odd, and m = 17..64 (NT = 4, 8): MT = 2 where N / 16 is even, else 1;
 *    4 warps splitting K, two chunks per step (measured by sweeps over these classes). */
template <int MT, int NT, int NV>
static lofp_status gemv_4warp(const GemmP &p, cudaStream_t st)
{
    return gemv_launch<MT, NT, NV, 4, 1, 1, 2>(p, st);
}

/* configuration forced by lofp_cuda_gemv_test_config (benchmark sweeps); -1 = the rule below */
static std::atomic<int> g_gemv_force{-1};

extern "C" void lofp_cuda_gemv_test_config(int cfg)
{
    g_gemv_force.store(cfg >= 0 && cfg < LOFP_GEMV_NCFG ? cfg : -1);
}

/* The sweep's candidates (MT, NT, WK, RW, MINB, STEP) for m <= 8 and m = 9..16; 0 is the rule
 * below. A candidate whose tiles do not divide N / 16 falls back to the rule. */
template <int NV>
static lofp_status launch_gemv_forced(const GemmP &p, cudaStream_t st, int cf, bool &done)
{
    const int n16 = p.n / 16;
    done = true;
    if (p.m <= 8) {
        switch (cf) {
        case 1: return gemv_launch<1, 1, NV, 8, 1, 2, 1>(p, st);
        case 2: return gemv_launch<1, 1, NV, 16, 1, 1, 1>(p, st);
        case 3: return gemv_launch<1, 1, NV, 4, 1, 4, 1>(p, st);
        case 4: return gemv_launch<1, 1, NV, 4, 2, 2, 2>(p, st);
        case 5: if (n16 % 2 == 0) return gemv_launch<2, 1, NV, 8, 1, 2, 1>(p, st); break;
        }
    } else if (p.m <= 16) {
        switch (cf) {
        case 1: if (n16 % 2 == 0) return gemv_launch<2, 2, NV, 8, 1, 2, 1>(p, st); break;
        case 2: return gemv_launch<1, 2, NV, 8, 1, 2, 1>(p, st);
        case 3: return gemv_launch<1, 2, NV, 16, 1, 1, 1>(p, st);
        case 4: return gemv_launch<1, 2, NV, 8, 2, 2, 1>(p, st);
        case 5: if (n16 % 4 == 0) return gemv_launch<4, 2, NV, 4, 1, 1, 2>(p, st); break;
        }
    }
    done = false;
    return LOFP_OK;
}

template <int NV>
static lofp_status launch_gemv(const GemmP &p, cudaStream_t st)
{
    const int n16 = p.n / 16;
    const int cf = g_gemv_force.load(std::memory_order_relaxed);
    if (cf > 0) {
        bool done;
        const lofp_status r = launch_gemv_forced<NV>(p, st, cf, done);
        if (done) return r;
    }
    /* N / 16 < 128 (an 8B Llama's k/v projections, 1024 rows): one 16-warp CTA per row tile, so
     * the few tiles still reach 64+ multiprocessors with every warp's K slice short */
    const bool narrow = n16 < 128;
    if (p.m <= 8) return narrow ? gemv_launch<1, 1, NV, 16, 1, 1, 1>(p, st) : gemv_launch<1, 1, NV, 8, 2, 2, 1>(p, st);
    if (p.m <= 16) {
        if (narrow) return gemv_launch<1, 2, NV, 16, 1, 1, 1>(p, st);
        if (n16 % 2 == 0) return gemv_launch<2, 2, NV, 8, 1, 2, 1>(p, st);
        return gemv_4warp<1, 2, NV>(p, st);
    }
    if (p.m <= 32) return n16 % 2 ? gemv_4warp<1, 4, NV>(p, st) : gemv_4warp<2, 4, NV>(p, st);
    return n16 % 2 ? gemv_4warp<1, 8, NV>(p, st) : gemv_4warp<2, 8, NV>(p, st);
}

static lofp_status w4a16_gemm(const lofp_cuda_w4 *w, const void *d_a, size_t m, lofp_dtype out_dt,
                              void *d_c, lofp_cuda_stream stream, int route)
{
    clear_cuda_error();
    if (!w || !w->d_codes || !d_a || !d_c || m == 0) return LOFP_ERR_INVALID_ARG;
    if (out_dt != LOFP_DTYPE_F32 && out_dt != LOFP_DTYPE_BF16) return LOFP_ERR_INVALID_ARG;
    if (((uintptr_t)d_a & 15)) return LOFP_ERR_INVALID_ARG;
    if (m > 0x7FFFFFFF) return LOFP_ERR_SIZE_OVERFLOW;
    cudaStream_t st = (cudaStream_t)stream;
    /* large M: dequantize to bf16 + cuBLASLt (gemm_large.cu); the kernels below where cuBLASLt
     * is absent, refuses, or the transient buffer cannot be allocated */
    if (route == LOFP_GEMM_ROUTE_LARGE || ((route == LOFP_GEMM_ROUTE_AUTO || route == LOFP_GEMM_ROUTE_NO_WGMMA) && m >= LOFP_CUDA_LARGE_M_MIN)) {
        const lofp_status r = gemm_large_launch(w, d_a, m, out_dt == LOFP_DTYPE_BF16, d_c, st);
        if (r != LOFP_ERR_UNSUPPORTED || route == LOFP_GEMM_ROUTE_LARGE) return r;
    }
    GemmP p;
    p.codes = w->d_codes; p.scales = w->d_scales; p.params = w->d_params;
    p.a = (const uint16_t *)d_a; p.c = d_c;
    p.m = (int)m; p.n = (int)w->n; p.k = (int)w->k; p.out_bf16 = out_dt == LOFP_DTYPE_BF16;
    const bool nv = w->id == LOFP_SCHEME_NVFP4;
    /* m = 33..64 goes to the wgmma kernel (on an H200 at M = 64 it took 48.8 us against 64.7 for the
     * best GEMV configuration, NVFP4 8192^2; 46.8 against 65.6 at 14336 x 4096), back to the GEMV
     * where wgmma does not exist. The choice is made from M and the device alone; the NO_WGMMA
     * route (tests) takes the paths of devices without wgmma on any device. */
    const bool no_wgmma = route == LOFP_GEMM_ROUTE_NO_WGMMA;
    if (m > 32 && m <= 64 && !no_wgmma) {
        const lofp_status r = gemm_wgmma_launch(p, nv ? 1 : 0, st);
        if (r != LOFP_ERR_UNSUPPORTED) return r;
    }
    if (m <= 64) return nv ? launch_gemv<1>(p, st) : launch_gemv<0>(p, st);
    /* m > 64: the sm_90a wgmma kernel (gemm_wgmma.cu) unless the route is NO_WGMMA or the device
     * is not sm_90; then the mma.sync kernel below. */
    if (!no_wgmma) {
        const lofp_status r = gemm_wgmma_launch(p, nv ? 1 : 0, st);
        if (r != LOFP_ERR_UNSUPPORTED) return r;
    }
    const dim3 grid((unsigned)((p.n + GT_W - 1) / GT_W), (unsigned)((p.m + GT_T - 1) / GT_T));
    if (grid.y > 65535) return LOFP_ERR_UNSUPPORTED;
    const int shm = GSTAGES * G_STAGE;
    if (nv) {
        LOFP_CU(cudaFuncSetAttribute(gemm_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm));
        gemm_kernel<1><<<grid, 256, shm, st>>>(p);
    } else {
        LOFP_CU(cudaFuncSetAttribute(gemm_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm));
        gemm_kernel<0><<<grid, 256, shm, st>>>(p);
    }
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

extern "C" lofp_status lofp_cuda_w4a16_gemm(const lofp_cuda_w4 *w, const void *d_a, size_t m,
                                            lofp_dtype out_dt, void *d_c, lofp_cuda_stream stream)
{
    return w4a16_gemm(w, d_a, m, out_dt, d_c, stream, LOFP_GEMM_ROUTE_AUTO);
}

extern "C" lofp_status lofp_cuda_w4a16_gemm_route(const lofp_cuda_w4 *w, const void *d_a, size_t m,
                                                  lofp_dtype out_dt, void *d_c, lofp_cuda_stream stream,
                                                  int route)
{
    return w4a16_gemm(w, d_a, m, out_dt, d_c, stream, route);
}

/* gemm_wgmma.cu -- W4A16 GEMM for m = 33 .. LOFP_CUDA_LARGE_M_MIN - 1 on Hopper (sm_90a): a warp-specialised kernel with
 * the dequantized weights as the register A operand of wgmma.mma_async and the activations as the
 * shared-memory B operand.
 *
 * Orientation as in gemm.cu: C^T[n, m] = W[n, k] . A[m, k]^T, weight rows are wgmma's M (64 per
 * warpgroup per m-tile), tokens are wgmma's N (TN per CTA), fp32 accumulators in registers.
 *
 * Roles. A producer warpgroup (one elected thread) issues every load through the Tensor Memory
 * Accelerator into an S-stage ring of shared memory; RG x KP consumer warpgroups dequantize and
 * issue the wgmmas. full[s] completes when stage s has landed (one arrive carrying the byte count,
 * then the copies' complete_tx), empty[s] when the consumer warps that read it have seen their
 * wgmmas on it complete; nobody waits at a CTA-wide barrier inside the K loop, and the copies run
 * up to S - 1 chunks ahead. setmaxnreg hands the producer's registers to the consumers.
 *
 * A stage (one 128-chunk of K) holds
 *   - the activation tile, TN tokens x 128 bf16, K-major, 128-byte swizzle (two atoms of 64 k, each
 *     TN rows of 128 bytes, 16-byte unit u of row t at u ^ (t & 7)): two boxes of a 2-D tensor map
 *     over A [m, k], tokens past m read as zeros -- the layout the wgmma descriptor reads;
 *   - the codes of the CTA's ROWS weight rows: one box of a 3-D map over the tile-major prepared
 *     codes (64 bytes x 16 nch rows x n / 16 tiles, tile stride nch KiB; gemm_common.cuh) with the
 *     64-byte swizzle, which puts 16-byte unit u of CTA row r at u ^ ((r >> 1) & 3): the 8-row
 *     reads below are conflict-free;
 *   - the scales: one box of a 3-D map (16 SB bytes x nch x n / 16), row r's SB bytes at r SB.
 *
 * K order. B is in NATURAL k order (wgmma step j of a chunk = k 16j..16j+15 = prepared words 2j
 * and 2j+1 of a row); the wgmma A fragment of a warp is the mma.m16n8k16 A fragment (rows g, g+8
 * of the warp's 16; lane (g, c) holds k slots 2c, 2c+1 and 2c+8, 2c+9), so lane c needs nibble
 * pair c of word 2j and of word 2j+1: fp4pair(word >> 4c, 0), one shift. Each lane reads whole
 * 16-byte units of its rows (the four lanes of a quad read the same addresses: broadcast). Both
 * NVFP4 blocks (16 k) and MXFP4 blocks (32 k) of a step are one scale per row.
 *
 * Consumer loop per chunk: wait on full[s], then 2*MT groups of 4/MT k16 steps: dequantize a group
 * into one of two register buffers, fence, issue the group's wgmmas, commit, wait until at most
 * one group is in flight (so the dequantization of group i overlaps the tensor work of group
 * i - 1, also across chunks); after the first group's wait the previous chunk's wgmmas have all
 * completed and its stage goes back (empty).
 *
 * Tiles and splits. Unsplit launches (KS = 1) are persistent: one CTA per SM walks the tiles
 * n-block first (t, t + grid, ...), so the producer loads the next tile while the consumers store
 * the last one. With KP = 2 the consumer warpgroups of a row group alternate chunks (twice the
 * dequantizing warps per SM at the same rows per CTA) and the parity-1 partials are added to the
 * parity-0 ones once per tile in shared memory, in that order. Split launches (KS = 2) give a
 * cluster of KS CTAs one tile, each 1/KS of the chunks, and the partials are summed in rank order
 * through distributed shared memory. Every sum is in a fixed order: results are deterministic.
 * (A cp.async kernel with one __syncthreads per chunk and two warpgroups measured slower; it is in
 * git history.)
 */
#include <atomic>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "gemm_common.cuh"
#include "lofp_cuda_internal.h"
#include "wgmma.cuh"

using namespace lofpcu;

/* the compute_90 PTX pass compiles the kernel body out (no wgmma there): its helpers go unused */
#pragma nv_diag_suppress 177

namespace {

LOFP_WG_RS(Wgmma, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
           "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "1, 1, 0");
LOFP_WG_RS256(Wgmma, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "1, 1, 0");

/* fp4pair(w >> (12 - ls), 0) (gemm_common.cuh): nibble pair 3 - ls / 4 of each 16-bit half of w as
 * bf16x2 e2m1 * 2^-126, with one shift: w << ls and (w >> (12 - ls)) << 12 agree on bits 12-15
 * and 28-31, the only ones the masks keep */
__device__ __forceinline__ uint32_t fp4pair_sh(uint32_t w, uint32_t ls)
{
    const uint32_t t = w << ls;
    return (t & 0x80008000u) | ((t & 0x70007000u) >> 6);
}
/* mx_scale1 (gemm_common.cuh) of byte `unit` of w without branches: bf16 splat of 2^(b + sbias - 127),
 * 0 when b + sbias <= 0, NaN for b = 0xFF (the same bits) */
__device__ __forceinline__ uint32_t mx_scale_at(uint32_t w, int unit, int sbias)
{
    const uint32_t b = __byte_perm(w, 0, 0x4440 + unit);
    const uint32_t v = (uint32_t)max((int)b + sbias, 0) << 7;
    return b == 0xFFu ? 0x7FC07FC0u : v | (v << 16);
}

/* kernel parameters: the three tensor maps (64-byte aligned, in the parameter space) */
struct WsP {
    CUtensorMap ta, tc, ts;
    GemmP p;
    int pack; /* C is aligned for a store of four outputs (8 bytes bf16, 16 fp32) */
};

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint32_t a, uint32_t n)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t a, uint32_t parity)
{
    asm volatile("{\n.reg .pred P;\nLOFP_MW%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n"
                 "@!P bra LOFP_MW%=;\n}\n" ::"r"(a), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t a)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(a) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t a, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma2(uint32_t dst, const CUtensorMap *m, int c0, int c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"(m), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma3(uint32_t dst, const CUtensorMap *m, int c0, int c1, int c2, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                 ::"r"(dst), "l"(m), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}

/* RG consumer warpgroups side by side along the rows (64 MT rows each) times KP of them along K
 * (consumer warpgroup kp of a row group takes the chunks with it % KP == kp: KP = 2 doubles the
 * warps that dequantize per SM without more rows per CTA, which would raise the tile count to fill
 * the SMs); ROWS weight rows per CTA. */
template <int NV, int MT, int TN, int RG> struct WsShape {
    static constexpr int ROWS = 64 * MT * RG, ACT = TN * 256, WB = ROWS * 64, SBY = NV ? 8 : 4;
    static constexpr int SB = ROWS * SBY;                       /* bytes the scale copy writes */
    static constexpr int STAGE = ACT + WB + (SB + 1023) / 1024 * 1024;
    static constexpr int RED = MT * TN * 256 * RG;               /* KP = 2: the K-parity-1 partials */
};

/* Register budgets of the setmaxnreg hand-over. setmaxnreg.inc only takes registers the CTA
 * already holds (the producer's setmaxnreg.dec frees them): the launch gives every warp L
 * registers, L = a quarter of the register file over the NC + 1 warps each scheduler holds
 * (ptxas's own cap for the kernel: 168 at NC = 2, 96 at NC = 4), so the consumers can rise to
 * ((NC + 1) L - PROD) / NC. (Asking for more than that makes setmaxnreg wait forever: NC = 4
 * at 120 hung.) */
template <int NC> struct WsRegs {
    static constexpr int L = 16384 / (32 * (NC + 1)) / 8 * 8;
    static constexpr int PROD = NC > 2 ? 24 : 40;
    static constexpr int CONS = ((NC + 1) * L - PROD) / NC / 8 * 8;
    static_assert(PROD + NC * CONS <= (NC + 1) * L, "setmaxnreg budget");
};

template <int NV, int MT, int TN, int S, int KS, int RG, int KP>
__global__ void __launch_bounds__(128 * (RG * KP + 1), 1) ws_kernel(const __grid_constant__ WsP q)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using Sh = WsShape<NV, MT, TN, RG>;
    constexpr int NC = RG * KP;
    constexpr int ROWS = Sh::ROWS, ACT = Sh::ACT, WB = Sh::WB, SBY = Sh::SBY, STAGE = Sh::STAGE;
    constexpr int G = 4 / MT, NG = 8 / G, NR = TN / 2;
    constexpr uint32_t TX = (uint32_t)(ACT + WB + Sh::SB);
    static_assert(STAGE % 1024 == 0, "stage alignment");
    static_assert(KP == 1 || S % KP == 0, "a stage keeps its K parity");

    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t bars[2 * S]; /* full[0..S), empty[S..2S) */
    uint32_t smem_s;
    uint8_t *smem = smem_align1024(smem_raw, smem_s);
    const uint32_t full0 = smem_u32(&bars[0]), empty0 = smem_u32(&bars[S]);

    const GemmP &p = q.p;
    const int tid = threadIdx.x, wg = tid >> 7;
    uint32_t rank = 0;
    if (KS > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const int call = p.k / 128;
    const int cbeg = (int)(rank * call / KS);
    const int chunks = (int)((rank + 1) * call / KS) - cbeg;
    const int ntn = (p.n + ROWS - 1) / ROWS, ntiles = ntn * ((p.m + TN - 1) / TN);
    const int cid = (int)blockIdx.x / KS, ncl = (int)gridDim.x / KS;

    if (tid == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 4 * RG);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(WsRegs<NC>::PROD));
        if (tid == 0) {
            asm volatile("prefetch.tensormap [%0];" ::"l"(&q.ta) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"(&q.tc) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"(&q.ts) : "memory");
            uint32_t it = 0;
            for (int t = cid; t < ntiles; t += ncl) {
                const int n16 = (t % ntn) * (ROWS / 16), t0 = (t / ntn) * TN;
                for (int ch = 0; ch < chunks; ch++, it++) {
                    const uint32_t s = it % S, ph = (it / S) & 1u;
                    mbar_wait(empty0 + 8 * s, ph ^ 1u);
                    const uint32_t fb = full0 + 8 * s, sb = smem_s + s * STAGE;
                    mbar_expect(fb, TX);
                    const int kc = cbeg + ch;
                    tma2(sb, &q.ta, kc * 128, t0, fb);
                    tma2(sb + TN * 128, &q.ta, kc * 128 + 64, t0, fb);
                    tma3(sb + ACT, &q.tc, 0, kc * 16, n16, fb);
                    tma3(sb + ACT + WB, &q.ts, 0, kc, n16, fb);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(WsRegs<NC>::CONS));
        const int ct = tid - 128, cw = ct >> 7, rg = cw % RG, kp = cw / RG;
        const int wiw = (ct >> 5) & 3, lane = ct & 31, o = rg * 128 + (ct & 127);
        const int g = lane >> 2, c = lane & 3;
        const int sbias = NV ? 0 : (int)p.params[1];
        const uint32_t ls = 12u - 4u * (uint32_t)c;
        const float alpha = p.params[0];
        float *red = (float *)(smem + S * STAGE); /* KP = 2 only */
        uint32_t it = 0;
        for (int t = cid; t < ntiles; t += ncl) {
            const int n0 = (t % ntn) * ROWS, t0 = (t / ntn) * TN;
            float acc[MT][NR];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int i = 0; i < NR; i++) acc[mt][i] = 0.0f;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int i = 0; i < NR; i++) reg_fence(acc[mt][i]);
            uint32_t af[2][MT][G][4];
            int last = -1; /* stage of this warpgroup's previous chunk, not yet given back */
            for (int ch = 0; ch < chunks; ch++, it++) {
                if (KP > 1 && (int)(it % KP) != kp) continue;
                const uint32_t s = it % S;
                mbar_wait(full0 + 8 * s, (it / S) & 1u);
                const uint8_t *sw = smem + s * STAGE + ACT;
                const uint8_t *ss = sw + WB;
                const uint32_t sa_s = smem_s + s * STAGE;
                uint2 scw[MT][2];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = rg * 64 * MT + mt * 64 + 16 * wiw + g + 8 * h;
                        if (NV) scw[mt][h] = *(const uint2 *)(ss + r * SBY);
                        else scw[mt][h] = make_uint2(*(const uint32_t *)(ss + r * SBY), 0u);
                    }
#pragma unroll
                for (int gi = 0; gi < NG; gi++) {
                    const int b = gi & 1;
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            const int r = rg * 64 * MT + mt * 64 + 16 * wiw + g + 8 * h;
#pragma unroll
                            for (int u = 0; u < G / 2; u++) {
                                const int unit = gi * (G / 2) + u;
                                const uint4 qv = *(const uint4 *)(sw + r * 64 + ((unit ^ ((r >> 1) & 3)) << 4));
                                uint32_t su[2];
                                if (NV) {
                                    const uint32_t w = (unit < 2 ? scw[mt][h].x : scw[mt][h].y) >> (16 * (unit & 1));
                                    nv_scale2(w & 0xFFFFu, su[0], su[1]);
                                } else {
                                    su[0] = su[1] = mx_scale_at(scw[mt][h].x, unit, sbias);
                                }
#pragma unroll
                                for (int jj = 0; jj < 2; jj++) {
                                    const uint32_t sc = su[jj];
                                    const uint32_t w0 = jj ? qv.z : qv.x, w1 = jj ? qv.w : qv.y;
                                    af[b][mt][u * 2 + jj][h] = bf16x2_mul(fp4pair_sh(w0, ls), sc);
                                    af[b][mt][u * 2 + jj][h + 2] = bf16x2_mul(fp4pair_sh(w1, ls), sc);
                                }
                            }
                        }
                    }
                    wg_fence();
#pragma unroll
                    for (int jj = 0; jj < G; jj++) {
                        const int j = gi * G + jj;
                        const uint64_t desc = sw128_desc(sa_s + (j >> 2) * (TN * 128) + (j & 3) * 32);
#pragma unroll
                        for (int mt = 0; mt < MT; mt++)
                            Wgmma<TN>::mma(acc[mt], af[b][mt][jj][0], af[b][mt][jj][1], af[b][mt][jj][2], af[b][mt][jj][3], desc, 1);
                    }
                    wg_commit();
                    wg_wait<1>();
                    /* every wgmma of this warpgroup's previous chunk has completed: its stage
                     * goes back to the producer */
                    if (gi == 0 && last >= 0 && lane == 0) mbar_arrive(empty0 + 8 * last);
                }
                last = (int)s;
            }
            wg_wait<0>();
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int i = 0; i < NR; i++) reg_fence(acc[mt][i]);
            if (last >= 0 && lane == 0) mbar_arrive(empty0 + 8 * last);
            if (KP > 1) {
                /* the K-parity-1 warpgroups hand their partials to the parity-0 ones of the same
                 * rows, which add them in that fixed order (deterministic); the second barrier
                 * keeps the next tile's hand-over from overwriting the buffer before it is read */
                float4 *rb = (float4 *)red;
                if (kp == 1) {
#pragma unroll
                    for (int f = 0; f < MT * NR; f += 4)
                        rb[(f / 4) * (128 * RG) + o] = make_float4(acc[f / NR][f % NR], acc[f / NR][f % NR + 1], acc[f / NR][f % NR + 2], acc[f / NR][f % NR + 3]);
                }
                asm volatile("bar.sync 1, %0;" ::"n"(128 * NC) : "memory");
                if (kp == 0) {
#pragma unroll
                    for (int f = 0; f < MT * NR; f += 4) {
                        const float4 x = rb[(f / 4) * (128 * RG) + o];
                        acc[f / NR][f % NR] = fadd(acc[f / NR][f % NR], x.x);
                        acc[f / NR][f % NR + 1] = fadd(acc[f / NR][f % NR + 1], x.y);
                        acc[f / NR][f % NR + 2] = fadd(acc[f / NR][f % NR + 2], x.z);
                        acc[f / NR][f % NR + 3] = fadd(acc[f / NR][f % NR + 3], x.w);
                    }
                }
                asm volatile("bar.sync 2, %0;" ::"n"(128 * NC) : "memory");
            }
            if (KS > 1) {
                /* one tile per cluster (the launch makes it so): park the parts this CTA does not
                 * own in the stages (every copy has landed and every wgmma has completed once
                 * the consumers pass the named barrier), publish them with the cluster barrier
                 * (all threads of the CTA: the producer warpgroup joins below), sum the owned
                 * part over the ranks in rank order, and a second cluster barrier keeps each
                 * CTA's shared memory alive until its peers have read it */
                constexpr int PART = MT * NR / KS;
                static_assert(PART % 4 == 0, "reduction parts are float4 groups");
                asm volatile("bar.sync 1, %0;" ::"n"(128 * NC) : "memory");
                float4 *xb = (float4 *)smem;
                if (kp == 0) {
#pragma unroll
                    for (int f = 0; f < MT * NR; f += 4) {
                        const int mt = f / NR, i = f % NR;
                        if (f / PART != (int)rank) xb[(f / 4) * (128 * RG) + o] = make_float4(acc[mt][i], acc[mt][i + 1], acc[mt][i + 2], acc[mt][i + 3]);
                    }
                }
                asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
                if (kp == 0) {
#pragma unroll
                    for (int f = 0; f < MT * NR; f += 4) {
                        const int mt = f / NR, i = f % NR;
                        if (f / PART == (int)rank) {
                            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll
                            for (int r = 0; r < KS; r++) {
                                float x0, x1, x2, x3;
                                if (r == (int)rank) {
                                    x0 = acc[mt][i]; x1 = acc[mt][i + 1]; x2 = acc[mt][i + 2]; x3 = acc[mt][i + 3];
                                } else {
                                    uint32_t peer;
                                    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer) : "r"(smem_s), "r"((uint32_t)r));
                                    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                                                 : "=f"(x0), "=f"(x1), "=f"(x2), "=f"(x3)
                                                 : "r"(peer + (uint32_t)(((f / 4) * (128 * RG) + o) * 16)) : "memory");
                                }
                                if (r == 0) { s0 = x0; s1 = x1; s2 = x2; s3 = x3; }
                                else { s0 = fadd(s0, x0); s1 = fadd(s1, x1); s2 = fadd(s2, x2); s3 = fadd(s3, x3); }
                            }
                            acc[mt][i] = s0; acc[mt][i + 1] = s1; acc[mt][i + 2] = s2; acc[mt][i + 3] = s3;
                        }
                    }
                }
                asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
            }
            /* the stores (store_quad, gemm_common.cuh): with KS > 1 each CTA writes the part it
             * owns (PART = MT * NR / KS, a multiple of 4: a quad is in one part; with KS = 1 rank
             * is 0 and the test is always false) */
            if (kp == 0) {
                constexpr int PART = MT * NR / KS;
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const int row = n0 + rg * 64 * MT + mt * 64 + 16 * wiw + g;
#pragma unroll
                    for (int i = 0; i < TN / 8; i++) {
                        if ((mt * NR + 4 * i) / PART != (int)rank) continue;
                        float v[4];
#pragma unroll
                        for (int e = 0; e < 4; e++) v[e] = fmul(acc[mt][4 * i + e], alpha);
                        store_quad(p.c, p.out_bf16, q.pack, p.m, p.n, g, row, t0 + 8 * i + 2 * c, v);
                    }
                }
            }
        }
    }
    /* the producer warpgroup's side of the two cluster barriers of a split tile (the launch
     * gives each cluster exactly one tile, so there is one pair at most) */
    if (KS > 1 && wg == 0 && cid < ntiles) {
        __syncwarp();
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    }
#endif
}

/* cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda),
 * looked up once; NULL where the driver does not provide it */
PFN_cuTensorMapEncodeTiled_v12000 tmap_encode_fn()
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    static int tried = 0;
    if (!tried) {
        void *f = NULL;
        cudaDriverEntryPointQueryResult qr;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &qr) == cudaSuccess &&
            qr == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)f;
        (void)cudaGetLastError();
        tried = 1;
    }
    return fn;
}

template <int NV, int MT, int TN, int S, int KS, int RG, int KP>
lofp_status launch_ws(const GemmP &p, cudaStream_t st)
{
    using Sh = WsShape<NV, MT, TN, RG>;
    constexpr int NT = 128 * (RG * KP + 1);
    PFN_cuTensorMapEncodeTiled_v12000 enc = tmap_encode_fn();
    if (!enc) return LOFP_ERR_UNSUPPORTED;
    WsP q;
    memset(&q, 0, sizeof q);
    q.p = p;
    q.pack = store_quad_pack(p.c, p.out_bf16);
    const cuuint64_t nch = (cuuint64_t)p.k / 128, n16 = (cuuint64_t)p.n / 16;
    const cuuint32_t one[3] = {1, 1, 1};
    {
        const cuuint64_t dim[2] = {(cuuint64_t)p.k, (cuuint64_t)p.m}, str[1] = {(cuuint64_t)p.k * 2};
        const cuuint32_t box[2] = {64, TN};
        if (enc(&q.ta, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p.a, dim, str, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return LOFP_ERR_UNSUPPORTED;
    }
    {
        const cuuint64_t dim[3] = {64, 16 * nch, n16}, str[2] = {64, nch * 1024};
        const cuuint32_t box[3] = {64, 16, Sh::ROWS / 16};
        if (enc(&q.tc, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)p.codes, dim, str, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return LOFP_ERR_UNSUPPORTED;
    }
    {
        const cuuint64_t dim[3] = {16 * (cuuint64_t)Sh::SBY, nch, n16}, str[2] = {16 * (cuuint64_t)Sh::SBY, nch * 16 * Sh::SBY};
        const cuuint32_t box[3] = {16 * Sh::SBY, 1, Sh::ROWS / 16};
        if (enc(&q.ts, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)p.scales, dim, str, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return LOFP_ERR_UNSUPPORTED;
    }
    const long long ntiles = (long long)((p.n + Sh::ROWS - 1) / Sh::ROWS) * ((p.m + TN - 1) / TN);
    if (ntiles * KS > 0x7FFFFFFFLL) return LOFP_ERR_UNSUPPORTED;
    const int shm = S * Sh::STAGE + (KP > 1 ? Sh::RED : 0) + 1024;
    LOFP_CU(cudaFuncSetAttribute(ws_kernel<NV, MT, TN, S, KS, RG, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm));
    if (KS == 1) {
        const long long g = ntiles < sm_count() ? ntiles : sm_count();
        ws_kernel<NV, MT, TN, S, KS, RG, KP><<<(unsigned)g, NT, shm, st>>>(q);
    } else {
        cudaLaunchConfig_t cf = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = KS; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
        cf.gridDim = dim3((unsigned)(ntiles * KS)); cf.blockDim = dim3(NT); cf.dynamicSmemBytes = (size_t)shm; cf.stream = st;
        cf.attrs = at; cf.numAttrs = 1;
        LOFP_CU(cudaLaunchKernelEx(&cf, ws_kernel<NV, MT, TN, S, KS, RG, KP>, q));
    }
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

/* 1 if the current device runs sm_90a code (compute capability exactly 9.0), cached per device. */
int is_sm90(void)
{
    static int cache[64];  /* 0 unknown, 1 yes, 2 no */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 0;
    if (dev < 64 && cache[dev]) return cache[dev] == 1;
    int ma = 0, mi = 0;
    if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0;
    const int yes = ma == 9 && mi == 0;
    if (dev < 64) cache[dev] = yes ? 1 : 2;
    return yes;
}

} // namespace

/* configuration forced by lofp_cuda_wgmma_test_config (tests and benchmark sweeps); -1 = auto.
 * Atomic: a test may set it while another thread launches (no data race; that launch takes one
 * of the two settings). */
static std::atomic<int> g_force{-1};

/* The configurations (MT, TN, stages, K splits, row groups, K parities) and their cost: a CTA
 * round (one CTA per SM) of c 128-chunks takes c * us_per_chunk + us_per_round (the pipeline's
 * fill and drain and the tile's stores). Least-squares fits of the sweep `bench_cuda gemm` runs
 * (every configuration forced on NVFP4 and MXFP4, 8192^2 and 14336 x 4096, M = 64, 256, 512,
 * 1024; H100, BENCHMARKS.md), with which the estimate below picks the fastest measured
 * configuration at all sixteen points (tests/cuda/test_codec_host.cu holds them). The (1,256)
 * tiles, 128 rows x 256 tokens (m64n256 wgmmas; three stages of 73 KiB fill the shared memory),
 * share each dequantized weight among 256 tokens: the cheapest chunk (1.37 us for 128 x 256 x 128
 * against (2,128)'s 1.78 for 256 x 128 x 128) wherever the tiles fill the SMs; (1,64) wins where
 * the token tiles would be mostly empty (M = 64), and (2,128) is left for tile counts that round
 * badly. Persistent forms first: they win ties. (A stream-K form of the (1,256) tiles -- equal
 * chunk ranges per SM, partial tiles summed through global memory -- measured no faster at
 * 14336 x 4096, M = 1024, where the whole-tile rounds end 39 % full, and slower elsewhere: each of
 * its more numerous tile segments pays the per-round cost; it is in git history.) */
static const struct Cfg { int rows, tn, ks; double us_per_chunk, us_per_round; } k_cfg[LOFP_WGMMA_NCFG] = {
    {128, 64, 1, 0.77, 1.1},   /* 0: (1,64), 6 stages, two row groups x two K parities, persistent */
    {256, 128, 1, 1.78, 7.3},  /* 1: (2,128), 4 stages, persistent */
    {128, 64, 2, 0.79, 4.1},   /* 2: (1,64), 8 stages, K split over a cluster of 2 */
    {256, 128, 2, 1.78, 10.6}, /* 3: (2,128), 4 stages, K split over a cluster of 2 */
    {128, 256, 1, 1.37, 7.1},  /* 4: (1,256), 3 stages, persistent */
    {128, 256, 2, 1.38, 10.5}, /* 5: (1,256), 3 stages, K split over a cluster of 2 */
};

extern "C" void lofp_cuda_wgmma_test_config(int cfg)
{
    g_force.store(cfg >= 0 && cfg < LOFP_WGMMA_NCFG ? cfg : -1);
}

extern "C" int lofp_cuda_wgmma_pick(long long m, long long n, long long k, long long sms)
{
    /* estimated time: rounds of one CTA per SM (tiles x splits over the SMs), each the CTA's
     * chunks at the measured cost per chunk plus the cost per round */
    const long long chunks = k / 128;
    if (sms < 1) sms = 1;
    double best = 1e300;
    int sel = 0;
    for (int ci = 0; ci < LOFP_WGMMA_NCFG; ci++) {
        const Cfg &x = k_cfg[ci];
        const long long tiles = ((n + x.rows - 1) / x.rows) * ((m + x.tn - 1) / x.tn);
        const long long rounds = (tiles * x.ks + sms - 1) / sms;
        const double t = (double)rounds * ((double)((chunks + x.ks - 1) / x.ks) * x.us_per_chunk + x.us_per_round);
        if (t < best * 0.999) { best = t; sel = ci; }
    }
    return sel;
}

lofp_status lofpcu::gemm_wgmma_launch(const GemmP &p, int nvfp4, cudaStream_t st)
{
    if (!is_sm90()) return LOFP_ERR_UNSUPPORTED;
    int sel = g_force.load();
    if (sel < 0) sel = lofp_cuda_wgmma_pick(p.m, p.n, p.k, sm_count());
#define WSL(MTV, TNV, SV, KSV, RGV, KPV) return nvfp4 ? launch_ws<1, MTV, TNV, SV, KSV, RGV, KPV>(p, st) : launch_ws<0, MTV, TNV, SV, KSV, RGV, KPV>(p, st)
    switch (sel) {
    case 0: WSL(1, 64, 6, 1, 2, 2);
    case 1: WSL(2, 128, 4, 1, 2, 1);
    case 2: WSL(1, 64, 8, 2, 2, 1);
    case 3: WSL(2, 128, 4, 2, 2, 1);
    case 4: WSL(1, 256, 3, 1, 2, 1);
    default: WSL(1, 256, 3, 2, 2, 1);
    }
#undef WSL
}

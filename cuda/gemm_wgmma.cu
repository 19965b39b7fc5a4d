/* gemm_wgmma.cu -- W4A16 GEMM for m = 33..511 on Hopper (sm_90a): wgmma.mma_async with the
 * dequantized weights as the register A operand and the activations as the shared-memory B operand.
 *
 * Orientation as in gemm.cu: C^T[n, m] = W[n, k] . A[m, k]^T, weight rows are wgmma's M (64 per
 * warpgroup per m-tile), tokens are wgmma's N (TN per CTA), fp32 accumulators in registers.
 *
 * CTA: two warpgroups (256 threads), each owns MT m64 tiles (64*MT weight rows); the CTA covers
 * 128*MT weight rows x TN tokens. K runs in 128-chunks through an S-stage cp.async pipeline; a
 * stage holds the activation tile (TN tokens x 128 bf16, K-major, 128-byte swizzle: two swizzle
 * atoms of 64 k along K, each TN rows of 128 bytes, 16-byte unit u of row t stored at u ^ (t & 7)),
 * the raw prepared weight codes (64 bytes per row, 16-byte unit s of row r at s ^ ((r >> 1) & 3),
 * conflict-free for the 8-row reads below) and the scale bytes (8 per row).
 *
 * K order. Here B comes from shared memory in NATURAL k order (wgmma step j of a chunk = k
 * 16j..16j+15 = prepared words 2j and 2j+1 of a row); the wgmma A fragment of a warp is the
 * mma.m16n8k16 A fragment (rows g, g+8 of the warp's 16; lane (g, c) holds k slots 2c, 2c+1 and
 * 2c+8, 2c+9), so lane c needs nibble pair c of word 2j (slots 2c, 2c+1) and of word 2j+1 (slots
 * 2c+8, 2c+9): fp4pair(word >> 4c, 0), one shift more than gemm.cu's fixed pairs. Each lane reads
 * whole 16-byte units of its rows (the four lanes of a quad read the same addresses: broadcast).
 * Both NVFP4 blocks (16 k) and MXFP4 blocks (32 k) of a step are one scale per row.
 *
 * Pipeline per chunk: wait for its cp.async group, proxy fence, __syncthreads, issue the loads for
 * chunk + S - 2 (into the stage read by chunk - 2, whose wgmmas have completed in every warpgroup),
 * then 2*MT groups of 4/MT k16 steps: dequantize a group into one of two register buffers, fence,
 * issue MT * 4/MT wgmmas, commit, wait until at most one group is in flight. So the dequantization
 * of group i overlaps the tensor-core work of group i - 1, also across chunk boundaries.
 *
 * Split K (KS = 2, 4): a cluster of KS CTAs shares one output tile, each runs 1/KS of the chunks,
 * and the fp32 partials are summed in rank order through distributed shared memory (below).
 */
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

template <int NV, int MT, int TN, int S, int MINB, int KS>
__global__ void __launch_bounds__(256, MINB) wg_kernel(GemmP p)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int ROWS = 128 * MT;          /* weight rows per CTA */
    constexpr int ACT = TN * 256;           /* TN tokens x 128 bf16 */
    constexpr int WB = ROWS * 64;           /* codes */
    constexpr int SB = ROWS * 8;            /* scale bytes (NVFP4 8, MXFP4 4 used) */
    constexpr int STAGE = ACT + WB + SB;    /* multiple of 1024 */
    constexpr int G = 4 / MT;               /* k16 steps per group */
    constexpr int NG = 8 / G;               /* groups per chunk (even) */
    constexpr int NR = TN / 2;              /* accumulators per m-tile */
    static_assert(STAGE % 1024 == 0, "stage alignment");

    extern __shared__ uint8_t smem_raw[];
    uint32_t smem_s;
    uint8_t *smem = smem_align1024(smem_raw, smem_s);

    const int tid = threadIdx.x, wg = tid >> 7, wiw = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, c = lane & 3;
    /* KS > 1: clusters of KS CTAs along x share one output tile; rank r takes 128-chunks
     * [r*call/KS, (r+1)*call/KS) of K (possibly none when call < KS: its partial is zero), and
     * the partials are reduced at the end through DSMEM */
    uint32_t rank = 0;
    if (KS > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const int n0 = (int)(blockIdx.x / KS) * ROWS, t0 = blockIdx.y * TN;
    const int call = p.k / 128;
    const int cbeg = (int)(rank * call / KS);
    const int chunks = (int)((rank + 1) * call / KS) - cbeg;
    const int sbias = NV ? 0 : (int)p.params[1];
    const size_t nch = (size_t)p.k / 128; /* tile-major prepared weights (gemm_common.cuh) */
    const uint32_t ls = 12u - 4u * (uint32_t)c; /* lane c takes nibble pair c */

    /* Copy roles of this thread, fixed for the whole K loop (only the stage and the chunk vary,
     * so the loop adds a stage base and a chunk offset to these): activation copy i is token
     * a_t + 16 i, 16-byte unit a_s (the same swizzle for every i, 16 i = 0 mod 8: destination
     * + 2048 i); code copy i is row w_r + 64 i, unit w_s (the same swizzle, (32 i) & 3 = 0:
     * destination + 4096 i; source + 4 tiles = 4 nch KiB per i, tile-major, + 1 KiB per chunk);
     * the scale copy is row tid (ROWS = 128 or 256: one per thread below ROWS; + 16 SBY bytes per
     * chunk). Rows / tokens past the matrix copy 0 bytes from the matrix's first address. */
    constexpr int SBY = NV ? 8 : 4;
    const int a_t = tid >> 4, a_s = tid & 15;
    const uint32_t a_dst = (uint32_t)((a_s >> 3) * (TN * 128) + a_t * 128 + (((a_s & 7) ^ (a_t & 7)) << 4));
    const uint16_t *a_src = p.a + (size_t)(t0 + a_t) * p.k + a_s * 8;
    const size_t a_step = (size_t)16 * p.k;
    const int w_r = tid >> 2, w_s = tid & 3;
    const uint32_t w_dst = (uint32_t)(ACT + w_r * 64 + ((w_s ^ ((w_r >> 1) & 3)) << 4));
    const uint8_t *w_src = p.codes + w4_code_off((size_t)(n0 + w_r), 0, (unsigned)w_s, nch);
    const size_t w_step = nch * 4096;
    const bool s_ok = n0 + tid < p.n;
    const uint8_t *s_src = p.scales + w4_scale_off((size_t)(s_ok ? n0 + tid : 0), 0, SBY, nch);
    const uint32_t s_dst = (uint32_t)(ACT + WB + tid * 8);

    auto load_stage = [&](int st, int ch) {
        const uint32_t sb = smem_s + (uint32_t)(st * STAGE);
        const size_t aoff = (size_t)ch * 128;
#pragma unroll
        for (int i = 0; i < TN / 16; i++) {
            const bool ok = t0 + a_t + 16 * i < p.m;
            cp16s(sb + a_dst + 2048u * i, ok ? a_src + i * a_step + aoff : p.a, ok ? 16 : 0);
        }
        const size_t woff = (size_t)ch << 10;
#pragma unroll
        for (int i = 0; i < ROWS * 4 / 256; i++) {
            const bool ok = n0 + w_r + 64 * i < p.n;
            cp16s(sb + w_dst + 4096u * i, ok ? w_src + i * w_step + woff : p.codes, ok ? 16 : 0);
        }
        if (ROWS >= 256 || tid < ROWS) {
            const uint8_t *src = s_ok ? s_src + (size_t)ch * (16 * SBY) : p.scales;
            if (NV) asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(sb + s_dst), "l"(src), "r"(s_ok ? 8 : 0));
            else asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(sb + s_dst), "l"(src), "r"(s_ok ? 4 : 0));
        }
    };

    float acc[MT][NR];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < NR; i++) acc[mt][i] = 0.0f;
    /* keeps the zeroing out of the wgmma pipeline (else ptxas serializes the wgmmas, C7515) */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < NR; i++) reg_fence(acc[mt][i]);

#pragma unroll
    for (int s = 0; s < S - 2; s++) {
        if (s < chunks) load_stage(s, cbeg + s);
        cp_commit();
    }

    uint32_t af[2][MT][G][4];
    for (int ch = 0; ch < chunks; ch++) {
        cp_wait<S - 3>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        {
            const int nx = ch + S - 2;
            if (nx < chunks) load_stage(nx % S, cbeg + nx);
            cp_commit();
        }
        const int st = ch % S;
        const uint8_t *sw = smem + st * STAGE + ACT;
        const uint8_t *ss = sw + WB;
        const uint32_t sa_s = smem_s + st * STAGE;
        /* this lane's rows: r[mt][h] = wg*64*MT + mt*64 + 16*wiw + g + 8h */
        uint2 scw[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = wg * 64 * MT + mt * 64 + 16 * wiw + g + 8 * h;
                if (NV) scw[mt][h] = *(const uint2 *)(ss + r * 8);
                else scw[mt][h] = make_uint2(*(const uint32_t *)(ss + r * 8), 0u);
            }
#pragma unroll
        for (int gi = 0; gi < NG; gi++) {
            const int b = gi & 1;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = wg * 64 * MT + mt * 64 + 16 * wiw + g + 8 * h;
                    /* steps gi*G .. gi*G+G-1 use words 2*gi*G .. : G/2 16-byte units */
#pragma unroll
                    for (int u = 0; u < G / 2; u++) {
                        const int unit = gi * (G / 2) + u;  /* 0..3 */
                        const uint4 q = *(const uint4 *)(sw + r * 64 + ((unit ^ ((r >> 1) & 3)) << 4));
                        uint32_t su[2];
                        if (NV) {
                            const uint32_t w = (unit < 2 ? scw[mt][h].x : scw[mt][h].y) >> (16 * (unit & 1));
                            nv_scale2(w & 0xFFFFu, su[0], su[1]);   /* blocks 2*unit, 2*unit+1 */
                        } else {
                            su[0] = su[1] = mx_scale_at(scw[mt][h].x, unit, sbias);
                        }
#pragma unroll
                        for (int jj = 0; jj < 2; jj++) {
                            const uint32_t s = su[jj];
                            const uint32_t w0 = jj ? q.z : q.x, w1 = jj ? q.w : q.y;
                            af[b][mt][u * 2 + jj][h] = bf16x2_mul(fp4pair_sh(w0, ls), s);      /* slots 2c,2c+1 */
                            af[b][mt][u * 2 + jj][h + 2] = bf16x2_mul(fp4pair_sh(w1, ls), s);  /* slots 2c+8,+9 */
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
        }
    }
    wg_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < NR; i++) reg_fence(acc[mt][i]);
    cp_wait<0>();

    /* owner of accumulator (mt, i) under KS > 1: flat index mt*NR + i, part f / PART to rank
     * f / PART (so each rank stores 1/KS of the tile) */
    constexpr int PART = MT * NR / KS;
    static_assert(PART % 4 == 0, "reduction parts are float4 groups");
    if (KS > 1) {
        /* every wgmma and cp.async of this CTA is complete: the stages are free. Each CTA parks
         * the parts it does not own (float4 q of thread tid at q*256 + tid, MT*TN*512 bytes at
         * most, inside the stages), the cluster barrier publishes them, and each CTA sums its
         * own part over the ranks in rank order 0, 1, .., KS-1 (its own partial in its place):
         * the same fp32 additions in the same order whichever CTA owns the part, run to run. */
        __syncthreads();
        float4 *xb = (float4 *)smem;
#pragma unroll
        for (int f = 0; f < MT * NR; f += 4) {
            const int mt = f / NR, i = f % NR;
            if (f / PART != (int)rank) xb[(f / 4) * 256 + tid] = make_float4(acc[mt][i], acc[mt][i + 1], acc[mt][i + 2], acc[mt][i + 3]);
        }
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
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
                                     : "r"(peer + (uint32_t)(((f / 4) * 256 + tid) * 16)) : "memory");
                    }
                    if (r == 0) { s0 = x0; s1 = x1; s2 = x2; s3 = x3; }
                    else { s0 = fadd(s0, x0); s1 = fadd(s1, x1); s2 = fadd(s2, x2); s3 = fadd(s3, x3); }
                }
                acc[mt][i] = s0; acc[mt][i + 1] = s1; acc[mt][i + 2] = s2; acc[mt][i + 3] = s3;
            }
        }
        /* the peers may not exit while their shared memory is still being read */
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    }

    const float alpha = p.params[0];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const int row = n0 + wg * 64 * MT + mt * 64 + 16 * wiw + g;
#pragma unroll
        for (int i = 0; i < TN / 8; i++) {
            const int tok = t0 + 8 * i + 2 * c;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (KS > 1 && (mt * NR + 4 * i + e) / PART != (int)rank) continue;
                const int tk = tok + (e & 1), rw = row + 8 * (e >> 1);
                if (tk < p.m && rw < p.n) {
                    const float v = fmul(acc[mt][4 * i + e], alpha);
                    const size_t o = (size_t)tk * p.n + rw;
                    if (p.out_bf16) ((uint16_t *)p.c)[o] = f32_to_bf16(v);
                    else ((float *)p.c)[o] = v;
                }
            }
        }
    }
#endif
}

/* ---- Warp-specialised version (ws_kernel) ----
 *
 * The same tile, K order, dequantization and wgmma groups as wg_kernel above, but the loads are
 * issued by a producer warpgroup through the Tensor Memory Accelerator and handed to the two
 * consumer warpgroups through an S-stage ring of mbarriers, so the consumers never wait on a
 * __syncthreads and never issue a load, and the copies run S - 1 chunks ahead of the slowest
 * consumer:
 *   - activations: a 2-D tensor map over A [m, k] bf16, box 64 k x TN tokens, 128-byte swizzle
 *     (two boxes per chunk: exactly wg_kernel's two swizzle atoms; tokens past m read as zeros);
 *   - codes: a 3-D map over the tile-major prepared codes (64 bytes x 16 nch rows x n / 16 tiles,
 *     the tile stride nch KiB), box 64 x 16 x ROWS / 16, 64-byte swizzle (16-byte unit u of CTA
 *     row r lands at u ^ ((r >> 1) & 3): wg_kernel's conflict-free pattern, done by the copy);
 *   - scales: a 3-D map (16 SB bytes x nch x n / 16), box 16 SB x 1 x ROWS / 16: row r's SB bytes
 *     at r SB.
 * full[s] completes when the stage's bytes have landed (one arrive with the byte count, then the
 * copies' complete_tx); empty[s] when the 8 consumer warps have seen every wgmma that read the
 * stage complete. The producer warpgroup gives its registers to the consumers (setmaxnreg 40 /
 * 232). Unsplit (KS = 1) launches are persistent: one CTA per SM walks the tiles n-block first
 * (tile t, t + grid, ...), so the producer is already loading the next tile while the consumers
 * store the last one. Split launches (KS > 1) give each cluster one tile; the partials meet
 * through DSMEM as in wg_kernel (rank order: deterministic). */
struct WsP {
    CUtensorMap ta, tc, ts;
    GemmP p;
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
 * ((NC + 1) L - PROD) / NC. (Asking for more than that waits forever: device run 13c, NC = 4 at
 * 120 hung.) */
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
            if (KS == 1) {
                if (kp == 0) {
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        const int row = n0 + rg * 64 * MT + mt * 64 + 16 * wiw + g;
#pragma unroll
                        for (int i = 0; i < TN / 8; i++) {
                            const int tok = t0 + 8 * i + 2 * c;
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                const int tk = tok + (e & 1), rw = row + 8 * (e >> 1);
                                if (tk < p.m && rw < p.n) {
                                    const float v = fmul(acc[mt][4 * i + e], alpha);
                                    const size_t oo = (size_t)tk * p.n + rw;
                                    if (p.out_bf16) ((uint16_t *)p.c)[oo] = f32_to_bf16(v);
                                    else ((float *)p.c)[oo] = v;
                                }
                            }
                        }
                    }
                }
            } else {
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
                if (kp == 0) {
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        const int row = n0 + rg * 64 * MT + mt * 64 + 16 * wiw + g;
#pragma unroll
                        for (int i = 0; i < TN / 8; i++) {
                            const int tok = t0 + 8 * i + 2 * c;
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                if ((mt * NR + 4 * i + e) / PART != (int)rank) continue;
                                const int tk = tok + (e & 1), rw = row + 8 * (e >> 1);
                                if (tk < p.m && rw < p.n) {
                                    const float v = fmul(acc[mt][4 * i + e], alpha);
                                    const size_t oo = (size_t)tk * p.n + rw;
                                    if (p.out_bf16) ((uint16_t *)p.c)[oo] = f32_to_bf16(v);
                                    else ((float *)p.c)[oo] = v;
                                }
                            }
                        }
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

template <int MT, int TN, int S> constexpr int wg_shm() { return S * (TN * 256 + 128 * MT * 72) + 1024; }

template <int NV, int MT, int TN, int S, int MINB, int KS>
lofp_status launch_wg(const GemmP &p, cudaStream_t st)
{
    const dim3 grid((unsigned)(KS * ((p.n + 128 * MT - 1) / (128 * MT))), (unsigned)((p.m + TN - 1) / TN));
    if (grid.y > 65535) return LOFP_ERR_UNSUPPORTED;
    const int shm = wg_shm<MT, TN, S>();
    LOFP_CU(cudaFuncSetAttribute(wg_kernel<NV, MT, TN, S, MINB, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm));
    if (KS == 1) {
        wg_kernel<NV, MT, TN, S, MINB, KS><<<grid, 256, shm, st>>>(p);
    } else {
        cudaLaunchConfig_t cf = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = KS; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
        cf.gridDim = grid; cf.blockDim = dim3(256); cf.dynamicSmemBytes = (size_t)shm; cf.stream = st;
        cf.attrs = at; cf.numAttrs = 1;
        LOFP_CU(cudaLaunchKernelEx(&cf, wg_kernel<NV, MT, TN, S, MINB, KS>, p));
    }
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

/* CTAs of a split-K (cluster of KS) kernel that can run at once (KS x cudaOccupancyMaxActiveClusters:
 * GPCs whose free slots are not a multiple of KS lose some); cached per process (the first
 * device's answer), 0 if the query fails. */
template <int MT, int TN, int S, int MINB, int KS>
int split_slots()
{
    static int cache = -1;
    if (cache >= 0) return cache;
    int r = 0;
    const int shm = wg_shm<MT, TN, S>();
    if (cudaFuncSetAttribute(wg_kernel<1, MT, TN, S, MINB, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm) == cudaSuccess) {
        cudaLaunchConfig_t cf = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = KS; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
        cf.gridDim = dim3(KS); cf.blockDim = dim3(256); cf.dynamicSmemBytes = (size_t)shm;
        cf.attrs = at; cf.numAttrs = 1;
        int nc = 0;
        if (cudaOccupancyMaxActiveClusters(&nc, wg_kernel<1, MT, TN, S, MINB, KS>, &cf) == cudaSuccess) r = KS * nc;
    }
    (void)cudaGetLastError();
    cache = r;
    return r;
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

/* configuration forced by lofp_cuda_wgmma_test_config (tests and benchmark sweeps); -1 = auto */
static int g_force = -1;

/* Configurations (MT m64 tiles per warpgroup, TN tokens, KS K-splits over a cluster of KS CTAs
 * with a DSMEM reduction): 0 (2,128) 256x128 tiles, 4 stages, 1 CTA per SM; 1 (1,128) 128x128;
 * 2 (1,64) 128x64, 2 CTAs per SM; 3 (2,128,2); 4 (1,128,2); 5 (1,64,2); 6 (1,64,4). The split ones
 * are for small m, where the unsplit tiles leave SMs idle: at m <= 64 the 64-token tile does not
 * pad the tensor work to 128 tokens, and 4 K-splits give N = 8192 256 CTAs at 2 per SM (16 warps
 * per SM to hide the per-chunk latency) instead of 128 at 1. The default picks the one with the
 * smallest estimated time (waves x work of one resident slot / KS, small tiles and the reduction
 * penalised). */
static const struct Cfg { int mt, tn, occ, ks; double eff; } k_cfg[7] = {
    {2, 128, 1, 1, 1.0}, {1, 128, 1, 1, 0.9}, {1, 64, 2, 1, 0.75}, {2, 128, 1, 2, 0.95},
    {1, 128, 1, 2, 0.85}, {1, 64, 2, 2, 0.75 * 0.95}, {1, 64, 2, 4, 0.75 * 0.9}};

extern "C" void lofp_cuda_wgmma_test_config(int cfg) { g_force = cfg >= 0 && cfg < LOFP_WGMMA_NCFG ? cfg : -1; }

lofp_status lofpcu::gemm_wgmma_launch(const GemmP &p, int nvfp4, cudaStream_t st)
{
    if (!is_sm90()) return LOFP_ERR_UNSUPPORTED;
    const int sms = sm_count();
    const int chunks = p.k / 128;
    int sel = g_force;
    /* m <= 64: (1,64) with K split over 2 CTAs, whatever the estimate says -- device run 10 timed
     * every configuration at M = 64 and it was the fastest at both shapes and both schemes (NVFP4
     * 8192^2 35.1 us against 46.1 for 4 splits, the estimate's choice, and 47.9 for (1,128) split
     * 2; 14336 x 4096 32.3; MXFP4 36.6 / 35.6) */
    if (sel < 0 && p.m <= 64 && chunks >= 8 && split_slots<1, 64, 4, 2, 2>() > 0) sel = 5;
    if (sel < 0) {
        double best = 1e300;
        for (int ci = 0; ci < 7; ci++) {
            const Cfg &x = k_cfg[ci];
            long long slots = (long long)sms * x.occ;
            if (x.ks > 1) {
                if (chunks < 4 * x.ks) continue;
                slots = ci == 3 ? split_slots<2, 128, 4, 1, 2>() : ci == 4 ? split_slots<1, 128, 4, 1, 2>()
                      : ci == 5 ? split_slots<1, 64, 4, 2, 2>() : split_slots<1, 64, 4, 2, 4>();
                if (slots <= 0) continue;
            }
            const long long ctas = (long long)x.ks * ((p.n + 128 * x.mt - 1) / (128 * x.mt)) * ((p.m + x.tn - 1) / x.tn);
            /* time ~ waves x work of one CTA at its share of the SM; at 2 CTAs per SM a tail of
             * at most a tenth of the slots counts half a wave (its CTAs have an SM to themselves:
             * cluster slots lost to GPCs with an odd SM count can leave a few of the 256 CTAs of
             * (1,64,4) at M = 64, N = 8192 for a second round) */
            const long long full = ctas / slots, rem = ctas % slots;
            const double waves = (double)full + (rem == 0 ? 0.0 : (x.occ == 2 && rem * 10 <= slots) ? 0.5 : 1.0);
            const double t = waves * (128.0 * x.mt * x.tn) * x.occ / x.eff / x.ks;
            if (t < best * 0.999) { best = t; sel = ci; }
        }
    }
#define WSL(MTV, TNV, SV, KSV, RGV, KPV) return nvfp4 ? launch_ws<1, MTV, TNV, SV, KSV, RGV, KPV>(p, st) : launch_ws<0, MTV, TNV, SV, KSV, RGV, KPV>(p, st)
#define WGL(MTV, TNV, SV, MB, KSV) return nvfp4 ? launch_wg<1, MTV, TNV, SV, MB, KSV>(p, st) : launch_wg<0, MTV, TNV, SV, MB, KSV>(p, st)
    switch (sel) {
    case 1: WGL(1, 128, 4, 1, 1);
    case 2: WGL(1, 64, 4, 2, 1);
    case 3: WGL(2, 128, 4, 1, 2);
    case 4: WGL(1, 128, 4, 1, 2);
    case 5: WGL(1, 64, 4, 2, 2);
    case 6: WGL(1, 64, 4, 2, 4);
    case 7: WSL(1, 64, 8, 2, 2, 1);
    case 8: WSL(1, 64, 6, 2, 2, 2);
    case 9: WSL(2, 128, 4, 2, 2, 1);
    case 10: WSL(1, 128, 4, 2, 4, 1);
    case 11: WSL(2, 128, 4, 1, 2, 1);
    case 12: WSL(1, 64, 6, 1, 2, 2);
    default: WGL(2, 128, 4, 1, 1);
    }
#undef WGL
#undef WSL
}

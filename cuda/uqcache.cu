/* uqcache.cu -- the UltraQuant FP4 KV cache on the GPU: the store kernel (bit-identical to
 * lofp_quantize on every K and V row) and split-K decode attention.
 *
 * Store: D = 32..256 (uq_store16_kernel) D/16 lanes per (token, KV head), 16 elements each; K goes
 * through the butterfly (the same operations as the quantize kernel's), both through the
 * two-elements-at-a-time encoder uq_encode16. D = 512, 1024 (uq_store_kernel): one warp per row,
 * the quantize kernel's in-warp group encoder.
 *
 * Decode attention (docs/CUDA.md has the derivation):
 *   uq_qprep_kernel   q_rot = q @ H^T (dense, sequential fp32 sum as lofp_hadamard_dense), E4M3
 *                     (RNE, saturating), stored as fp16 (exact) in the workspace.
 *   uq_attn3_kernel   one CTA (4 warps) per (KV head, split, sequence), fed from a per-warp
 *                     cp.async ring in shared memory. QK on fp16 tensor cores (keys as A, the
 *                     G <= 8 query heads as n8, E8M0 key scales applied per 32-element group after
 *                     the MMA), base-2 online softmax, PV on bf16 tensor cores with P split into
 *                     hi + lo parts (see the comment at the kernel). (A kernel reading global
 *                     memory directly is gone since unaligned caches are refused; one that moved
 *                     the V scales into the A operand was exact only for V scales up to 2^49
 *                     for ~1 % speed. Both are in git history.)
 *   uq_merge_kernel   merges the splits and the sink logit (denominator only).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>

#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"
#include "lofp_cuda_kern.cuh"

using namespace lofpcu;

extern "C" size_t lofp_cuda_uq_slot_bytes(size_t d) { return d + 2 * (d / 32); }

namespace {

/* ---- store ---- */
struct StoreP {
    const void *k, *v;
    size_t tokens, hk, d, block_size, slot;
    const int64_t *slot_mapping;
    uint8_t *cache;
    float c;
    uint32_t rows, hk32, hk_m, hk_s; /* rows of this launch, hk, its division magic */
    uint32_t cap;                    /* UQ_PAIR_CAP */
    UqThr thr;
};

template <int DT, int E>
__global__ void __launch_bounds__(256) uq_store_kernel(StoreP p)
{
    const int lane = threadIdx.x & 31;
    const size_t w = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5; /* (token, head) */
    if (w >= p.tokens * p.hk) return; /* warp-uniform */
    const size_t t = w / p.hk, h = w % p.hk;
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0) return; /* warp-uniform: skipped token */
    const size_t blk = (size_t)slot / p.block_size, pos = (size_t)slot % p.block_size;
    uint8_t *base = p.cache + ((blk * p.block_size + pos) * p.hk + h) * p.slot;
    const size_t D = p.d;
    constexpr int GL = 32 / E;
#pragma unroll
    for (int kv = 0; kv < 2; kv++) {
        const void *src = kv ? p.v : p.k;
        float v[E];
        const size_t off = w * D + (size_t)lane * E;
        if (E % 8 == 0) {
#pragma unroll
            for (int i = 0; i < E; i += 8) load8<DT>(src, off + i, v + i);
        } else {
#pragma unroll
            for (int i = 0; i < E; i++) v[i] = load1<DT>(src, off + i);
        }
        if (kv == 0) butterfly_warp<E>(v, lane);
        uint32_t codes[E];
        int nf;
        const uint32_t sb = uq_group<E>(v, p.c, p.thr.t, codes, &nf);
        uint8_t *cb = base + (kv ? D / 2 + D / 32 : 0);
        store_codes<E>(cb, codes, lane, true);
        if (lane % GL == 0) cb[D / 2 + lane / GL] = (uint8_t)sb;
    }
}

/* Several rows per warp: rows of D <= 256 elements as LPR = D / 16 lanes of 16 elements each, 32 / LPR rows
 * (token, head) per warp: two 16-byte loads per lane and tensor (all four issued first), the
 * butterfly's first four stages inside the lane and log2(LPR) across lanes (the same operations
 * in the same order as the one-row-per-warp kernel), groups of 32 over two lanes, the codes from
 * uq_encode16 (two elements per 16x2 integer operation), 8 code
 * bytes per lane. Rows are 32-bit (the host launches at most 2^27 rows at a time), the
 * (token, head) split a multiply-high by the host's magic number. Rows of skipped tokens
 * (slot < 0) and past the end compute on row 0's data and store nothing. */
template <int DT, int LPR>
__global__ void __launch_bounds__(256) uq_store16_kernel(StoreP p)
{
    constexpr int E = 16, D = E * LPR;
    const int l = threadIdx.x % LPR;
    const uint32_t row = (blockIdx.x * 256u + threadIdx.x) / LPR; /* = warp * (32 / LPR) + lane / LPR */
    const bool inb = row < p.rows;
    const uint32_t rr = inb ? row : 0u;
    const uint32_t t = p.hk_s ? __umulhi(rr, p.hk_m) >> (p.hk_s - 1) : rr; /* rr / hk (hk_s = 0: hk = 1) */
    const uint32_t h = rr - t * p.hk32;
    const int64_t slot = __ldg(p.slot_mapping + t);
    const bool active = inb && slot >= 0;
    float v[2][E];
    const size_t off = (size_t)rr * D + (uint32_t)l * E;
#pragma unroll
    for (int kv = 0; kv < 2; kv++) {
        load8<DT>(kv ? p.v : p.k, off, v[kv]);
        load8<DT>(kv ? p.v : p.k, off + 8, v[kv] + 8);
    }
    butterfly_warp<E, LPR>(v[0], threadIdx.x & 31);
    uint32_t w[2][2], sb[2];
#pragma unroll
    for (int kv = 0; kv < 2; kv++) sb[kv] = uq_encode16(v[kv], p.c, p.thr.t, p.cap, w[kv]);
    if (!active) return;
    uint8_t *base = p.cache + ((size_t)slot * p.hk + h) * p.slot; /* (blk * bs + pos) = slot */
#pragma unroll
    for (int kv = 0; kv < 2; kv++) {
        uint8_t *cb = base + (kv ? D / 2 + D / 32 : 0);
        const uint32_t w0 = w[kv][0], w1 = w[kv][1];
        /* Slot bytes are D + 2 D / 32 and the V codes start D / 2 + D / 32 in: D >= 128 keeps
         * both 4-byte aligned, D = 64 (68-byte slots, V at +34) only 2-byte aligned, D = 32
         * (34-byte slots, V at +17) only byte aligned. */
        if (D >= 128) {
            uint32_t *q = (uint32_t *)(cb + l * 8);
            q[0] = w0;
            q[1] = w1;
        } else if (D == 64) {
            uint16_t *q = (uint16_t *)(cb + l * 8);
            q[0] = (uint16_t)w0; q[1] = (uint16_t)(w0 >> 16);
            q[2] = (uint16_t)w1; q[3] = (uint16_t)(w1 >> 16);
        } else {
            uint8_t *q = cb + l * 8;
#pragma unroll
            for (int i = 0; i < 4; i++) { q[i] = (uint8_t)(w0 >> (8 * i)); q[4 + i] = (uint8_t)(w1 >> (8 * i)); }
        }
        if ((l & 1) == 0) cb[D / 2 + l / 2] = (uint8_t)sb[kv];
    }
}

/* ---- attention ---- */
struct AttnP {
    const void *q;
    int q_bf16;
    const uint8_t *cache;
    const int32_t *block_tables;
    const int32_t *seq_lens;
    const float *sinks;
    float *out;
    uint16_t *qh;   /* workspace: [B, Hq, D] fp16 E4M3 values of q_rot */
    float *part;    /* workspace: [B, Hq, S, 2 + D] (m, l, acc) */
    int batch, hq, hk, d, block_size, max_blocks, splits, tokens_per_split, slot;
    float scale, hd;
    int bs_shift;   /* log2(block_size) when it is a power of two, else -1 */
    float scale2;   /* scale * log2 e * 2^14 (the 2^14 undoes the fp16 key codes' 2^-14) */
};

__global__ void uq_qprep_kernel(AttnP p)
{
    const int bh = blockIdx.x; /* b * hq + h */
    extern __shared__ float xq[];
    const int D = p.d;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        const size_t i = (size_t)bh * D + j;
        xq[j] = p.q_bf16 ? u2f((uint32_t)((const uint16_t *)p.q)[i] << 16) : ((const float *)p.q)[i];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < D; j++) {
            const float hij = (__popc(i & j) & 1) ? -p.hd : p.hd;
            acc = fadd(acc, fmul(xq[j], hij));
        }
        const uint32_t code = encode_mf(mf_of(T_E4M3), acc, R_RNE, false, 0);
        const float v = decode_mf(T_E4M3, code);
        p.qh[(size_t)bh * D + i] = __half_as_ushort(__float2half_rn(v)); /* exact */
    }
}

__device__ __forceinline__ uint32_t pair_f16(uint32_t w, int pidx)
{
    const uint32_t t = w << (12 - 4 * pidx);
    return (t & 0x80008000u) | ((t & 0x70007000u) >> 3);
}
__device__ __forceinline__ uint32_t pair_bf16(uint32_t w, int pidx)
{
    const uint32_t t = w << (12 - 4 * pidx);
    return (t & 0x80008000u) | ((t & 0x70007000u) >> 6);
}
__device__ __forceinline__ uint32_t bf2_fma0(uint32_t a, uint32_t b)
{
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}
__device__ __forceinline__ void mma_f16(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_bf16v(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* ---- attention: per-warp cp.async ring in shared memory (hides the cache's load latency) ----
 * One CTA (4 warps) per (KV head, split, sequence); grid x = KV head, so the CTAs of all KV heads
 * of a token range run side by side and share the DRAM sectors at the slot boundaries. Warp w
 * takes the 16-token sub-tiles w, w+4, w+8, ... of the split (splits are multiples of 64 tokens).
 * Each warp owns a ring of STAGES sub-tiles in shared memory, filled with cp.async STAGES-1
 * sub-tiles ahead of the one computed; a slot is 17 chunks of W = SLOT/17 bytes (4, 8, 16 for
 * D = 64, 128, 256), tokens past the end are zero-filled.
 *   FLAT (block_size % 16 == 0): a sub-tile lies in one block, so one block-table entry per
 *   sub-tile (all lanes read the same word, one sub-tile ahead); the 272 chunks are spread over
 *   the lanes token-major (step k: token 2k whole and chunks 0..14 of token 2k+1; a ninth step
 *   the tails of the odd tokens), so one warp-wide cp.async touches two consecutive slots (~5
 *   cache lines) instead of 16.
 *   !FLAT (any block size): two lanes per token, each lane loads its token's block-table entry
 *   one sub-tile ahead.
 * Arithmetic per sub-tile (16 tokens, the G <= 8 query heads of the KV head as n8):
 *   QK: fp16 MMA with the E2M1 key codes as A (Marlin's trick, code * 2^-14, exact), q_rot E4M3
 *   as B; one k16 pair per 32-element scale group, the group's scale 2^(byte-127) applied to the
 *   fp32 MMA result with one fma (byte 0 gives 0); the 2^14 is folded into scale2.
 *   softmax: online, base 2 (ex2.approx), scores pre-multiplied by scale * log2 e; the accumulator
 *   rescale is skipped when no running max of the warp changed.
 *   PV: bf16 MMA, out^T = V^T P^T. A = the V codes exactly (Marlin bf16 trick, one bf16x2 fma by
 *   2^126); B = p * 2^32 * 2^(e_token,group - 127) in fp32, split into bf16 hi + lo (two MMAs,
 *   ~16 significant bits per product). The 2^32 keeps B and its lo part normal down to the
 *   smallest E8M0 scale for p near 1; B overflows only for V scale exponents above +95; it is
 *   removed when the warps merge. With G <= 4 the hi and lo parts share one MMA (columns 0..3 and
 *   4..7 of the n8 tile, see PK below). */
template <int D> struct V3Cfg {
    static constexpr int SLOT = D + 2 * (D / 32);                     /* 68, 136, 272 = 17 W */
    static constexpr int W = D == 64 ? 4 : D == 128 ? 8 : 16;          /* cp.async width */
    static constexpr int SS = D == 64 ? 80 : D == 128 ? 144 : 272;     /* smem token stride: banks 4g+c distinct */
    static constexpr int STAGES = D == 256 ? 3 : 4;
    static constexpr int RING = 16 * SS;                               /* bytes of one stage of one warp */
    static constexpr int PIPE = 4 * STAGES * RING;
    static constexpr int MERGE = 4 * 8 * (D + 1) * 4;
    static constexpr int SMEM = PIPE > MERGE ? PIPE : MERGE;
    static constexpr int MINB = D == 256 ? 2 : 4;                      /* __launch_bounds__ min CTAs/SM */
    static_assert(SLOT == 17 * W, "slot = 17 chunks");
    static_assert(SS % 16 == 0 && SS >= SLOT, "stride");
};

template <int W>
__device__ __forceinline__ void cpa(uint32_t dst, const void *src, uint32_t nbytes)
{
    if (W == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(nbytes) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(W), "r"(nbytes) : "memory");
}
__device__ __forceinline__ void cpa_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cpa_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ float ex2a(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
/* bf16x2 of (lo, hi), round to nearest even */
__device__ __forceinline__ uint32_t bf2_rn(float lo, float hi)
{
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
/* 2^(byte q of w - 127) as fp32 bits (byte 0 -> +0.0) */
__device__ __forceinline__ float e8_at(uint32_t w, int q)
{
    const uint32_t t = q == 3 ? (w >> 1) : (w << (23 - 8 * q));
    return u2f(t & 0x7F800000u);
}

template <int D, bool FLAT>
__global__ void __launch_bounds__(128, V3Cfg<D>::MINB) uq_attn3_kernel(AttnP p)
{
    using C = V3Cfg<D>;
    constexpr int NG = D / 32;  /* scale groups */
    constexpr int NMT = D / 16; /* PV m16 tiles */
    constexpr int NW = (NG + 3) / 4;
    constexpr int ST = C::STAGES, SS = C::SS, CW = C::W;
    extern __shared__ __align__(16) uint8_t smem3[];
    __shared__ float sP[4][8][17];
    __shared__ float sM[4][8], sL[4][8];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, c = lane & 3;
    const int kvh = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
    const int G = p.hq / p.hk;
    const int h0 = kvh * G;
    const int seq = p.seq_lens[b];
    const int t_beg = split * p.tokens_per_split;
    const int t_end = min(seq, t_beg + p.tokens_per_split);

    /* G <= 4 (PK): the n8 columns 0..3 hold the heads with P's bf16 hi part and the columns 4..7
     * the same heads with the lo part, so PV is one MMA per m16 tile instead of two (hi, lo); the
     * two halves of the accumulator are added when the warps merge. QK and the softmax compute
     * the heads of columns 4..7 as duplicates of 0..3 (the same operands, the same bits). */
    const bool PK = G <= 4;
    const int hc = PK ? (2 * c) & 3 : 2 * c; /* head of this lane's C columns 2c, 2c + 1 */

    /* Q fragments (B operand of QK): head g (g & 3 when PK) */
    uint32_t qf[NG][2][2];
    {
        const int hg = PK ? (g & 3) : g;
        const bool hv = hg < G;
        const uint16_t *qrow = p.qh + ((size_t)b * p.hq + h0 + (hv ? hg : 0)) * D;
#pragma unroll
        for (int q = 0; q < NG; q++)
#pragma unroll
            for (int hs = 0; hs < 2; hs++) {
                const int d0 = 32 * q + 8 * c + 2 * hs;
                uint32_t x0 = qrow[d0], x4 = qrow[d0 + 4], x1 = qrow[d0 + 1], x5 = qrow[d0 + 5];
                qf[q][hs][0] = hv ? (x0 | (x4 << 16)) : 0u;
                qf[q][hs][1] = hv ? (x1 | (x5 << 16)) : 0u;
            }
    }

    float acc[NMT][4];
#pragma unroll
    for (int i = 0; i < NMT; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}; /* heads 2c, 2c+1, base 2 */

    const int nt = t_end > t_beg ? (t_end - t_beg + 15) / 16 : 0; /* 16-token sub-tiles of the split */
    const int nsub = nt > warp ? (nt - warp + 3) / 4 : 0;         /* this warp's: warp, warp+4, ... */
    uint8_t *ring = smem3 + warp * (ST * C::RING);
    const uint32_t ring_s = (uint32_t)__cvta_generic_to_shared(ring);

    const int32_t *bt = p.block_tables + (size_t)b * p.max_blocks;
    const int tok_stride = p.hk * C::SLOT; /* bytes between consecutive tokens of one KV head */
    const uint8_t *cache_h = p.cache + (size_t)kvh * C::SLOT;
    /* !FLAT: lane -> token lt of the sub-tile, chunks lh, lh+2, ...; FLAT: chunks lane + 32k */
    const int lt = lane >> 1, lh = lane & 1;
    /* FLAT: step k (0..7) copies token 2k whole (lanes 0..16, chunk = lane) and chunks 0..14 of
     * token 2k+1 (lanes 17..31); a ninth step copies chunks 15, 16 of the 8 odd tokens (lanes
     * 0..15). Each warp-wide cp.async covers ~256 contiguous bytes of two slots. */
    const int fhi = lane >= 17 ? 1 : 0, fch = fhi ? lane - 17 : lane;
    const int fs0 = fhi * tok_stride + fch * CW;                       /* source offset, step 0 */
    const uint32_t fd0 = (uint32_t)(fhi * SS + fch * CW);              /* shared offset, step 0 */
    const uint32_t st2 = 2u * (uint32_t)tok_stride;                     /* bytes of two tokens */
    const int fs9 = (2 * (lane >> 1) + 1) * tok_stride + (15 + (lane & 1)) * CW;
    const uint32_t fd9 = (uint32_t)((2 * (lane >> 1) + 1) * SS + (15 + (lane & 1)) * CW);
    auto blk_of = [&](int i) -> int {
        const int n = t_beg + (warp + 4 * i) * 16 + (FLAT ? 0 : lt);
        if (i >= nsub || n >= t_end) return -1;
        return p.bs_shift >= 0 ? __ldg(bt + (n >> p.bs_shift)) : __ldg(bt + n / p.block_size);
    };
    auto issue = [&](int i, int blk, int stage) {
        if (i < nsub) {
            const int tb = t_beg + (warp + 4 * i) * 16;
            const uint32_t dst0 = ring_s + stage * C::RING;
            if (FLAT) {
                const int pos = p.bs_shift >= 0 ? (tb & (p.block_size - 1)) : tb % p.block_size;
                const uint8_t *base = cache_h + ((size_t)blk * p.block_size + pos) * (size_t)tok_stride;
                /* this lane's chunk of step 0, advanced by two tokens per step (a 64-bit add of
                 * two instructions; base + a per-step int offset costs three) */
                const uint8_t *lp = base + fs0;
                const int nv = t_end - tb; /* valid tokens of the sub-tile (>= 1) */
                if (nv >= 16) {
#pragma unroll
                    for (int k = 0; k < 8; k++, lp += st2) cpa<CW>(dst0 + fd0 + k * 2 * SS, lp, CW);
                    if (lane < 16) cpa<CW>(dst0 + fd9, base + fs9, CW);
                } else { /* the last sub-tile of the sequence: zero-fill tokens >= nv */
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        const bool ok = 2 * k + fhi < nv;
                        cpa<CW>(dst0 + fd0 + k * 2 * SS, ok ? lp : base, ok ? CW : 0u);
                        lp += st2;
                    }
                    const bool ok = 2 * (lane >> 1) + 1 < nv;
                    if (lane < 16) cpa<CW>(dst0 + fd9, base + (ok ? fs9 : 0), ok ? CW : 0u);
                }
            } else {
                const int n = tb + lt;
                const int pos = p.bs_shift >= 0 ? (n & (p.block_size - 1)) : n % p.block_size;
                const uint8_t *src = blk >= 0 ? cache_h + ((size_t)blk * p.block_size + pos) * (size_t)tok_stride : p.cache;
                const uint32_t nb = blk >= 0 ? (uint32_t)CW : 0u; /* 0: zero-fill (past the end) */
                const uint32_t dst = dst0 + lt * SS;
#pragma unroll
                for (int j = 0; j < 17; j += 2)
                    if (j + lh < 17) cpa<CW>(dst + (j + lh) * CW, src + (j + lh) * CW, nb);
            }
        }
        cpa_commit(); /* always one group per step (possibly empty), so wait_group counts line up */
    };
    auto ld_scales = [&](const uint8_t *ptr, uint32_t *w) {
        if (NG == 2) w[0] = *(const uint16_t *)ptr;
        else if (NG == 4) w[0] = *(const uint32_t *)ptr;
        else { w[0] = ((const uint32_t *)ptr)[0]; w[1] = ((const uint32_t *)ptr)[1]; }
    };

    int nblk = blk_of(0);
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        issue(s, nblk, s);
        nblk = blk_of(s + 1);
    }
    int stage = 0, wstage = ST - 1;
    for (int i = 0; i < nsub; i++) {
        issue(i + ST - 1, nblk, wstage);
        nblk = blk_of(i + ST);
        wstage = wstage + 1 == ST ? 0 : wstage + 1;
        cpa_wait<ST - 1>(); /* this lane's copies of sub-tile i have landed */
        __syncwarp();       /* ... and every lane's are visible */
        const uint8_t *buf = ring + stage * C::RING;
        stage = stage + 1 == ST ? 0 : stage + 1;
        const int tb = t_beg + (warp + 4 * i) * 16;

        /* operands from shared memory: K of tokens g, g+8; V of 2c, 2c+1, 2c+8, 2c+9 */
        uint32_t kw0[NG], kw1[NG], ks0[NW], ks1[NW], vw[4][NG], vs[4][NW];
        {
            const uint8_t *k0 = buf + g * SS, *k1 = buf + (g + 8) * SS;
#pragma unroll
            for (int q = 0; q < NG; q++) {
                kw0[q] = *(const uint32_t *)(k0 + 16 * q + 4 * c);
                kw1[q] = *(const uint32_t *)(k1 + 16 * q + 4 * c);
            }
            ld_scales(k0 + D / 2, ks0);
            ld_scales(k1 + D / 2, ks1);
            const int vt[4] = {2 * c, 2 * c + 1, 2 * c + 8, 2 * c + 9};
#pragma unroll
            for (int t = 0; t < 4; t++) {
                const uint8_t *vp = buf + vt[t] * SS + D / 2 + NG;
#pragma unroll
                for (int q = 0; q < NG; q++) vw[t][q] = *(const uint16_t *)(vp + 16 * q + 2 * g);
                ld_scales(vp + D / 2, vs[t]);
            }
        }

        /* ---- QK ---- */
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* (tok g, head 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1) */
#pragma unroll
        for (int q = 0; q < NG; q++) {
            float a4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int hs = 0; hs < 2; hs++) {
                uint32_t a[4];
                a[0] = pair_f16(kw0[q], 2 * hs);
                a[1] = pair_f16(kw1[q], 2 * hs);
                a[2] = pair_f16(kw0[q], 2 * hs + 1);
                a[3] = pair_f16(kw1[q], 2 * hs + 1);
                mma_f16(a4, a, qf[q][hs][0], qf[q][hs][1]);
            }
            /* group scale 2^(byte - 127), exact; byte 0 (a zero group) gives 0 */
            const float f0 = e8_at(ks0[q >> 2], q & 3), f1 = e8_at(ks1[q >> 2], q & 3);
            s[0] = __fmaf_rn(a4[0], f0, s[0]);
            s[1] = __fmaf_rn(a4[1], f0, s[1]);
            s[2] = __fmaf_rn(a4[2], f1, s[2]);
            s[3] = __fmaf_rn(a4[3], f1, s[3]);
        }
        const bool v0 = tb + g < t_end, v1 = tb + g + 8 < t_end;
        s[0] = v0 ? fmul(s[0], p.scale2) : -INFINITY; /* scale2 = scale * log2 e * 2^14 */
        s[1] = v0 ? fmul(s[1], p.scale2) : -INFINITY;
        s[2] = v1 ? fmul(s[2], p.scale2) : -INFINITY;
        s[3] = v1 ? fmul(s[3], p.scale2) : -INFINITY;

        /* ---- online softmax in base 2 (heads 2c, 2c+1; tokens across g) ---- */
        float tm[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
            tm[0] = fmaxf(tm[0], __shfl_xor_sync(0xFFFFFFFFu, tm[0], o));
            tm[1] = fmaxf(tm[1], __shfl_xor_sync(0xFFFFFFFFu, tm[1], o));
        }
        /* Token 0 of a sub-tile is always valid, so the new max mn is finite (for finite
         * scores): ex2(-inf - mn) = +0 gives the masked tokens' p and, while m_run is still
         * -inf, alpha = 0 (acc and l are 0 then) without compares. */
        float pr[4], alpha[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const float mn = fmaxf(m_run[j], tm[j]);
            alpha[j] = ex2a(fsub(m_run[j], mn));
            pr[j] = ex2a(fsub(s[j], mn));
            pr[j + 2] = ex2a(fsub(s[j + 2], mn));
            m_run[j] = mn;
        }
        if (hc >= G) pr[0] = pr[2] = 0.0f; /* heads >= G are padding */
        if (hc + 1 >= G) pr[1] = pr[3] = 0.0f;
        /* the row sum is kept per lane (its two tokens; alpha is the same on all lanes of a
         * head) and summed over the 8 lanes of a column once, before the merge */
        l_run[0] = fadd(fmul(l_run[0], alpha[0]), fadd(pr[0], pr[2]));
        l_run[1] = fadd(fmul(l_run[1], alpha[1]), fadd(pr[1], pr[3]));
        if (__any_sync(0xFFFFFFFFu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int i2 = 0; i2 < NMT; i2++) {
                acc[i2][0] = fmul(acc[i2][0], alpha[0]);
                acc[i2][1] = fmul(acc[i2][1], alpha[1]);
                acc[i2][2] = fmul(acc[i2][2], alpha[0]);
                acc[i2][3] = fmul(acc[i2][3], alpha[1]);
            }
        }
        /* P (times 2^32) to shared memory as [head][token], read back as the B fragment */
        constexpr float P_OFF = 4294967296.0f; /* 2^32 */
        sP[warp][2 * c][g] = fmul(pr[0], P_OFF);
        sP[warp][2 * c + 1][g] = fmul(pr[1], P_OFF);
        sP[warp][2 * c][g + 8] = fmul(pr[2], P_OFF);
        sP[warp][2 * c + 1][g + 8] = fmul(pr[3], P_OFF);
        __syncwarp();
        const float pA = sP[warp][g][2 * c], pB = sP[warp][g][2 * c + 1];
        const float pC = sP[warp][g][2 * c + 8], pD = sP[warp][g][2 * c + 9];

        /* ---- PV ---- */
        {
        /* B = p * 2^32 * 2^(e - 127): p * 2^32 split into bf16 hi + lo once per sub-tile, each
         * part then multiplied by the bf16x2 power of two 2^(e - 127) of its two tokens (exponent
         * field e, built from the scale bytes with 2-3 integer ops per group) in one exact
         * fma.rn.bf16x2 (bf16 has fp32's exponent range; identical to rounding the fp32 product
         * while it is normal). A = the V codes exactly (Marlin bf16 value * 2^126). */
        constexpr uint32_t K126 = 0x7E807E80u; /* bf16x2 (2^126, 2^126) */
        const uint32_t hAB0 = bf2_rn(pA, pB), hCD0 = bf2_rn(pC, pD);
        const uint32_t lAB0 = bf2_rn(fsub(pA, u2f(hAB0 << 16)), fsub(pB, u2f(hAB0 & 0xFFFF0000u)));
        const uint32_t lCD0 = bf2_rn(fsub(pC, u2f(hCD0 << 16)), fsub(pD, u2f(hCD0 & 0xFFFF0000u)));
        /* PK: the lanes of columns 4..7 (g >= 4) carry the lo part, one MMA per tile */
        const uint32_t bAB0 = g >= 4 ? lAB0 : hAB0, bCD0 = g >= 4 ? lCD0 : hCD0;
        auto pv = [&](auto pk_tag) {
            constexpr bool pk = decltype(pk_tag)::value;
#pragma unroll
            for (int w = 0; w < NW; w++)
#pragma unroll
            for (int hq = 0; hq < 2; hq++) {
                /* scale bytes of groups 4w + 2hq, 4w + 2hq + 1: (A0, A1, B0, B1) and (C0, C1, D0, D1) */
                const uint32_t selq = hq ? 0x7632u : 0x5410u;
                const uint32_t iAB = __byte_perm(vs[0][w], vs[1][w], selq);
                const uint32_t iCD = __byte_perm(vs[2][w], vs[3][w], selq);
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const int q = 4 * w + 2 * hq + j;
                    if (q >= NG) break;
                    /* bf16x2 (2^(eA - 127), 2^(eB - 127)): exponent fields at bits 7..14, 23..30 */
                    const uint32_t mAB = j ? ((iAB >> 1) & 0x7F807F80u) : ((iAB << 7) & 0x7F807F80u);
                    const uint32_t mCD = j ? ((iCD >> 1) & 0x7F807F80u) : ((iCD << 7) & 0x7F807F80u);
                    const uint32_t hAB = bf2_fma0(pk ? bAB0 : hAB0, mAB), hCD = bf2_fma0(pk ? bCD0 : hCD0, mCD);
                    uint32_t lAB = 0, lCD = 0;
                    if (!pk) { lAB = bf2_fma0(lAB0, mAB); lCD = bf2_fma0(lCD0, mCD); }
                    const uint32_t qAB = vw[0][q] | (vw[1][q] << 16), qCD = vw[2][q] | (vw[3][q] << 16);
#pragma unroll
                    for (int sub = 0; sub < 2; sub++) {
                        uint32_t a[4]; /* the codes exactly: (code * 2^-126) * 2^126 */
                        a[0] = bf2_fma0(pair_bf16(qAB, 2 * sub), K126);
                        a[1] = bf2_fma0(pair_bf16(qAB, 2 * sub + 1), K126);
                        a[2] = bf2_fma0(pair_bf16(qCD, 2 * sub), K126);
                        a[3] = bf2_fma0(pair_bf16(qCD, 2 * sub + 1), K126);
                        mma_bf16v(acc[2 * q + sub], a, hAB, hCD);
                        if (!pk) mma_bf16v(acc[2 * q + sub], a, lAB, lCD);
                    }
                }
            }
        };
        if (PK) pv(std::true_type());
        else pv(std::false_type());
        }
        __syncwarp(); /* sP and this ring stage are free for the next step */
    }
    cpa_wait<0>();
    __syncthreads(); /* every warp is done with its ring: reuse it for the merge */

    /* ---- merge the 4 warps (base 2; acc carries 2^32) ---- */
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
        l_run[0] = fadd(l_run[0], __shfl_xor_sync(0xFFFFFFFFu, l_run[0], o));
        l_run[1] = fadd(l_run[1], __shfl_xor_sync(0xFFFFFFFFu, l_run[1], o));
    }
    if (PK) { /* columns 2c, 2c + 1 (c < 2, hi part) += columns 2c + 4, 2c + 5 (lo part) */
#pragma unroll
        for (int i = 0; i < NMT; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = fadd(acc[i][j], __shfl_xor_sync(0xFFFFFFFFu, acc[i][j], 2));
    }
    float *sAcc = (float *)smem3; /* [4][8][D + 1]; rows >= G are not read */
    if (g == 0) {
        sM[warp][2 * c] = m_run[0];
        sM[warp][2 * c + 1] = m_run[1];
        sL[warp][2 * c] = l_run[0];
        sL[warp][2 * c + 1] = l_run[1];
    }
    constexpr float P_INV = 2.3283064365386963e-10f; /* 2^-32 */
#pragma unroll
    for (int i = 0; i < NMT; i++) {
        const int q = i >> 1, sub = i & 1;
        const int d0 = 32 * q + 4 * g + 2 * sub;
        sAcc[(warp * 8 + 2 * c) * (D + 1) + d0] = fmul(acc[i][0], P_INV);
        sAcc[(warp * 8 + 2 * c + 1) * (D + 1) + d0] = fmul(acc[i][1], P_INV);
        sAcc[(warp * 8 + 2 * c) * (D + 1) + d0 + 1] = fmul(acc[i][2], P_INV);
        sAcc[(warp * 8 + 2 * c + 1) * (D + 1) + d0 + 1] = fmul(acc[i][3], P_INV);
    }
    __syncthreads();
    const int S = p.splits;
    for (int idx = threadIdx.x; idx < G * (D + 2); idx += blockDim.x) {
        const int hh = idx / (D + 2), j = idx % (D + 2);
        float M = -INFINITY;
        for (int w = 0; w < 4; w++) M = fmaxf(M, sM[w][hh]);
        float val = 0.0f;
        if (j == 0) val = M;
        else {
            for (int w = 0; w < 4; w++) {
                const float f = (sM[w][hh] == -INFINITY) ? 0.0f : exp2f(fsub(sM[w][hh], M));
                val = fadd(val, fmul(j == 1 ? sL[w][hh] : sAcc[(w * 8 + hh) * (D + 1) + j - 2], f));
            }
        }
        p.part[(((size_t)b * p.hq + h0 + hh) * S + split) * (D + 2) + j] = val;
    }
}

__global__ void uq_merge_kernel(AttnP p)
{
    const int bh = blockIdx.x;
    const int D = p.d, S = p.splits;
    const float *pp = p.part + (size_t)bh * S * (D + 2);
    const int h = bh % p.hq;
    /* the partials' m is in units of log2: the sink logit is converted once, exp is exp2 */
    const float sink = p.sinks ? fmul(p.sinks[h], 1.4426950408889634f) : -INFINITY;
    auto ex = [&](float x) { return exp2f(x); };
    float M = sink;
    for (int s = 0; s < S; s++) M = fmaxf(M, pp[(size_t)s * (D + 2)]);
    float L = (p.sinks && M != -INFINITY) ? ex(fsub(sink, M)) : 0.0f;
    for (int s = 0; s < S; s++) {
        const float ms = pp[(size_t)s * (D + 2)];
        if (ms != -INFINITY) L = fadd(L, fmul(pp[(size_t)s * (D + 2) + 1], ex(fsub(ms, M))));
    }
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < S; s++) {
            const float ms = pp[(size_t)s * (D + 2)];
            if (ms != -INFINITY) o = fadd(o, fmul(pp[(size_t)s * (D + 2) + 2 + d], ex(fsub(ms, M))));
        }
        p.out[(size_t)bh * D + d] = L > 0.0f ? fdiv(o, L) : 0.0f;
    }
}

/* dynamic shared memory per CTA, and the attribute that allows it past 48 KiB */
template <int D, bool FLAT> cudaError_t v3_prepare1()
{
    static volatile int done = 0; /* set once per process (benign race: the call is idempotent) */
    if (done) return cudaSuccess;
    const cudaError_t e = cudaFuncSetAttribute(uq_attn3_kernel<D, FLAT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               V3Cfg<D>::SMEM);
    if (e == cudaSuccess) done = 1;
    return e;
}
template <int D> int v3_occupancy()
{
    static int occ = 0; /* resident CTAs per SM (one device kind per process assumed) */
    if (occ == 0) {
        int n = 0;
        if (v3_prepare1<D, true>() != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, uq_attn3_kernel<D, true>, 128, V3Cfg<D>::SMEM) != cudaSuccess ||
            n < 1) {
            (void)cudaGetLastError();
            n = 4;
        }
        occ = n;
    }
    return occ;
}
/* split count of the attention kernel: about two resident waves of equal CTAs, at least 64 tokens each */
int occ_of(size_t d)
{
    return d == 64 ? v3_occupancy<64>() : d == 128 ? v3_occupancy<128>() : v3_occupancy<256>();
}
int auto_splits3(const lofp_cuda_uq_attention_args *a)
{
    if (a->num_splits > 0) return a->num_splits < 65535 ? a->num_splits : 65535; /* grid.y */
    const int occ = occ_of(a->head_dim);
    const size_t units = a->batch * a->hk;
    if (units == 0) return 1;
    const size_t slots = (size_t)sm_count() * occ;
    size_t s = 2 * slots / units;
    const size_t max_s = (a->max_seq_len + 63) / 64;
    if (s > max_s) s = max_s;
    if (s > 65535) s = 65535;
    if (s < 1) s = 1;
    return (int)s;
}

} // namespace

extern "C" lofp_status lofp_cuda_uq_store(const lofp_scheme *s, lofp_dtype dt, const void *d_k,
                                          const void *d_v, size_t tokens, size_t hk,
                                          size_t head_dim, const int64_t *d_slot_mapping,
                                          uint8_t *d_cache, size_t block_size,
                                          lofp_cuda_stream stream)
{
    clear_cuda_error();
    if (!s || s->id != LOFP_SCHEME_ULTRAQUANT || lofp_scheme_validate(s) != LOFP_OK)
        return LOFP_ERR_INVALID_ARG;
    if (dt != LOFP_DTYPE_F32 && dt != LOFP_DTYPE_BF16 && dt != LOFP_DTYPE_F16) return LOFP_ERR_INVALID_ARG;
    if (!d_k || !d_v || !d_slot_mapping || !d_cache || hk == 0 || block_size == 0) return LOFP_ERR_INVALID_ARG;
    if (head_dim < 32 || head_dim > 1024 || (head_dim & (head_dim - 1))) return LOFP_ERR_SHAPE;
    if (tokens == 0) return LOFP_OK;
    if ((((uintptr_t)d_k | (uintptr_t)d_v) & 15)) return LOFP_ERR_INVALID_ARG;
    StoreP p;
    p.k = d_k; p.v = d_v; p.tokens = tokens; p.hk = hk; p.d = head_dim; p.block_size = block_size;
    p.slot = lofp_cuda_uq_slot_bytes(head_dim);
    p.slot_mapping = d_slot_mapping; p.cache = d_cache; p.c = s->c;
    p.thr = uq_thresholds();
    const size_t warps = tokens * hk;
    const unsigned grid = (unsigned)((warps + 7) / 8);
    cudaStream_t st = (cudaStream_t)stream;
    if (head_dim >= 32 && head_dim <= 256) {
        if (hk > ((size_t)1 << 27)) return LOFP_ERR_SHAPE;
        /* 32-bit rows: at most 2^27 per launch (thread indices rows * D/16 < 2^31), whole
         * tokens; t = umulhi(row, m) >> (k - 1) with k = ceil(log2 hk), m = ceil(2^(31+k) / hk)
         * is row / hk for every row < 2^31 (the error row * (m - 2^(31+k)/hk) / 2^(31+k) is
         * < 2^-k <= 1/hk) */
        uint32_t k = 0;
        while (((size_t)1 << k) < hk) k++;
        p.hk32 = (uint32_t)hk;
        p.cap = UQ_PAIR_CAP;
        p.hk_s = k;
        p.hk_m = k ? (uint32_t)((((uint64_t)1 << (31 + k)) + hk - 1) / hk) : 0u;
        const size_t lpr = head_dim / 16, tmax = ((size_t)1 << 27) / hk;
        const size_t esz = dt == LOFP_DTYPE_F32 ? 4 : 2;
        for (size_t t0 = 0; t0 < tokens; t0 += tmax) {
            const size_t nt = tokens - t0 < tmax ? tokens - t0 : tmax;
            StoreP q = p;
            q.k = (const char *)d_k + t0 * hk * head_dim * esz;
            q.v = (const char *)d_v + t0 * hk * head_dim * esz;
            q.slot_mapping = d_slot_mapping + t0;
            q.rows = (uint32_t)(nt * hk);
            const unsigned g16 = (unsigned)((q.rows * lpr + 255) / 256);
#define S16(DT)                                                                                \
    switch (head_dim) {                                                                        \
    case 32: uq_store16_kernel<DT, 2><<<g16, 256, 0, st>>>(q); break;                          \
    case 64: uq_store16_kernel<DT, 4><<<g16, 256, 0, st>>>(q); break;                          \
    case 128: uq_store16_kernel<DT, 8><<<g16, 256, 0, st>>>(q); break;                         \
    default: uq_store16_kernel<DT, 16><<<g16, 256, 0, st>>>(q); break;                         \
    }
            if (dt == LOFP_DTYPE_F32) { S16(LOFP_DTYPE_F32) }
            else if (dt == LOFP_DTYPE_BF16) { S16(LOFP_DTYPE_BF16) }
            else { S16(LOFP_DTYPE_F16) }
#undef S16
            LOFP_CU_LAUNCH();
        }
        return LOFP_OK;
    }
#define ST(DT, E) uq_store_kernel<DT, E><<<grid, 256, 0, st>>>(p)
#define STE(DT)                                                                                \
    switch (head_dim) {                                                                        \
    case 32: ST(DT, 1); break;                                                                 \
    case 64: ST(DT, 2); break;                                                                 \
    case 128: ST(DT, 4); break;                                                                \
    case 256: ST(DT, 8); break;                                                                \
    case 512: ST(DT, 16); break;                                                               \
    default: ST(DT, 32); break;                                                                \
    }
    if (dt == LOFP_DTYPE_F32) { STE(LOFP_DTYPE_F32) }
    else if (dt == LOFP_DTYPE_BF16) { STE(LOFP_DTYPE_BF16) }
    else { STE(LOFP_DTYPE_F16) }
#undef STE
#undef ST
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

extern "C" size_t lofp_cuda_uq_attention_workspace_bytes(const lofp_cuda_uq_attention_args *a)
{
    if (!a) return 0;
    const size_t S = (size_t)auto_splits3(a);
    const size_t qh = a->batch * a->hq * a->head_dim * 2;
    return round_up_sz(qh, 256) + a->batch * a->hq * S * (a->head_dim + 2) * sizeof(float);
}

extern "C" lofp_status lofp_cuda_uq_decode_attention(const lofp_cuda_uq_attention_args *a,
                                                     lofp_cuda_stream stream)
{
    clear_cuda_error();
    if (!a || !a->d_q || !a->d_cache || !a->d_block_tables || !a->d_seq_lens || !a->d_out ||
        !a->d_workspace)
        return LOFP_ERR_INVALID_ARG;
    if (a->q_dtype != LOFP_DTYPE_F32 && a->q_dtype != LOFP_DTYPE_BF16) return LOFP_ERR_INVALID_ARG;
    if (a->batch == 0 || a->hk == 0 || a->hq % a->hk || a->hq / a->hk > 8 || a->block_size == 0 ||
        a->max_blocks_per_seq == 0)
        return LOFP_ERR_INVALID_ARG;
    if (a->head_dim != 64 && a->head_dim != 128 && a->head_dim != 256) return LOFP_ERR_SHAPE;
    if (a->batch > 65535 || a->hk > 65535) return LOFP_ERR_UNSUPPORTED;
    /* the kernel copies the cache with cp.async of 4/8/16 bytes (D = 64/128/256) */
    if (((uintptr_t)a->d_cache & 15) != 0) return LOFP_ERR_INVALID_ARG;
    AttnP p;
    p.q = a->d_q; p.q_bf16 = a->q_dtype == LOFP_DTYPE_BF16;
    p.cache = a->d_cache; p.block_tables = a->d_block_tables; p.seq_lens = a->d_seq_lens;
    p.sinks = a->d_sinks; p.out = a->d_out;
    p.batch = (int)a->batch; p.hq = (int)a->hq; p.hk = (int)a->hk; p.d = (int)a->head_dim;
    p.block_size = (int)a->block_size; p.max_blocks = (int)a->max_blocks_per_seq;
    p.splits = auto_splits3(a);
    const size_t msl = a->max_seq_len ? a->max_seq_len : 1;
    p.tokens_per_split = (int)((msl + p.splits - 1) / p.splits);
    p.tokens_per_split = (p.tokens_per_split + 15) / 16 * 16;
    if (p.tokens_per_split > 64) p.tokens_per_split = (p.tokens_per_split + 63) / 64 * 64;
    p.slot = (int)lofp_cuda_uq_slot_bytes(a->head_dim);
    p.scale = a->scale;
    p.hd = (float)(1.0 / sqrt((double)a->head_dim));
    p.bs_shift = -1;
    for (int k = 0; k < 31; k++)
        if ((size_t)1 << k == a->block_size) p.bs_shift = k;
    /* scale * log2 e, times the 2^14 of the fp16 key codes */
    p.scale2 = fmul((float)((double)a->scale * 1.4426950408889634), 16384.0f);
    p.qh = (uint16_t *)a->d_workspace;
    p.part = (float *)((uint8_t *)a->d_workspace + round_up_sz(a->batch * a->hq * a->head_dim * 2, 256));
    cudaStream_t st = (cudaStream_t)stream;
    uq_qprep_kernel<<<(unsigned)(a->batch * a->hq), 128, a->head_dim * sizeof(float), st>>>(p);
    LOFP_CU_LAUNCH();
    {
        const dim3 grid((unsigned)a->hk, (unsigned)p.splits, (unsigned)a->batch);
        const bool flat = a->block_size % 16 == 0;
#define V3L(DD, FL)                                                                            \
    do {                                                                                       \
        LOFP_CU((v3_prepare1<DD, FL>()));                                                      \
        uq_attn3_kernel<DD, FL><<<grid, 128, V3Cfg<DD>::SMEM, st>>>(p);                        \
    } while (0)
        if (a->head_dim == 64) { if (flat) V3L(64, true); else V3L(64, false); }
        else if (a->head_dim == 128) { if (flat) V3L(128, true); else V3L(128, false); }
        else { if (flat) V3L(256, true); else V3L(256, false); }
#undef V3L
    }
    LOFP_CU_LAUNCH();
    uq_merge_kernel<<<(unsigned)(a->batch * a->hq), 128, 0, st>>>(p);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

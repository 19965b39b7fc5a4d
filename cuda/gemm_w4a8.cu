/* gemm_w4a8.cu -- opt-in W4A8: MXFP4 weights x E4M3 activations on the Hopper FP8 tensor cores
 * (sm_90a wgmma .e4m3), block scales folded into the E4M3 weights per 128-chunk, fp32 promotion
 * once per chunk.
 *
 * Two kernels:
 *
 * 1. act_quant_kernel: bf16 A[m, k] -> E4M3 codes [m, k] plus one fp32 scale per token (row),
 *    written into the caller's workspace: scale = amax / 448 (fp32 division, RN; amax = 0 gives
 *    scale 1; a row holding Inf or NaN gets scale NaN, so its outputs come out NaN), code =
 *    cvt.rn.satfinite.e4m3(x / scale) (fp32 division RN, then E4M3 round-to-nearest-even,
 *    saturating at +-448). This is torch's per-token "rowwise" recipe (a.float() / (amax / 448))
 *    .to(float8_e4m3fn) bit for bit: for finite input |x / scale| <= 448 (1 + 2^-22), which
 *    rounds to 448, so saturation never changes a code. Inside every 32-element block the codes
 *    are stored in a permuted K order (below) that matches the weight fragments; test_cuda checks
 *    every byte and scale against lofp_encode(LOFP_ELEM_E4M3, ..., LOFP_RNE, LOFP_SATURATE).
 *
 * 2. w4a8_kernel: C^T[n, m] = W[n, k] . Aq[m, k]^T, oriented as gemm_wgmma.cu: weight rows are
 *    wgmma's M (64 per warpgroup), tokens its N (TN per CTA), the weights the register A operand,
 *    the E4M3 activations the shared-memory B operand (K-major, 128-byte swizzle: one 128-chunk of
 *    K is one swizzle atom row of 128 bytes per token, 16-byte unit u of token row t stored at
 *    u ^ (t & 7); k32 step j of the chunk starts at byte 32 j).
 *      - the lane's A fragment of wgmma.m64nNk32 .e4m3 is rows g and g+8 of its warp's 16 rows,
 *        k slots 4c..4c+3 (registers 0, 1) and 16+4c..16+4c+3 (registers 2, 3) of the step. The
 *        lane reads prepared word c of the block of both rows; nibble i of a word is element 2i
 *        (i < 4) or 2(i - 4) + 1 of the word's 8, so the low half-word gives slots 4c.. and the high
 *        half-word slots 16+4c.. (the activation quantizer stores byte 16h + 4c + b of a block as
 *        element 8c + 2b + h). Four nibbles -> four E4M3 bytes by two prmt (e4m3_word): the
 *        magnitude from an 8-byte table, the sign bits gathered by a byte permutation.
 *      - per-128 promotion: for each row and chunk, e_c = the largest of its 4 block scales; block
 *        j's table holds E4M3(v * 2^(6 - d)), d = e_c - e_j, exact for d <= 11 (W8_DMAX). The 4
 *        (KW = 1) or 2 (KW = 2) k32 steps chain in the tensor core into one fresh partial, then
 *        acc = fma(partial, 2^(e_c - e_max), acc) (e_max the tensor's largest scale; two factors
 *        per lane, one per row): one FMA per output per chunk. Two partials alternate: chunk ch's
 *        wgmmas are committed, then wait_group 1 waits for chunk ch - 1's only and its partial is
 *        promoted while chunk ch's run.
 *      - fallback: a chunk in which some row of the CTA spans more than 11 binades (decided per
 *        CTA and chunk at the barrier: wgmma is warpgroup-wide) runs as before this change: every
 *        block at d = 0, one fresh partial per k32 step, promoted with 2^(e_j - e_max).
 *      - blocks more than 2^126 below e_max flush to 0 (the factor underflows); a 0xFF scale gives
 *        NaN as on the CPU (a row whose chunk mixes 0xFF with finite scales spans > 11 binades
 *        and takes the fallback; four 0xFF scales give a NaN factor).
 *    Epilogue: C = (acc * 2^(e_max - 127 - 6)) * scale_token, to fp32 or bf16 (RNE), stored four
 *    outputs at a time (store_quad, gemm_common.cuh).
 *    CTA: two warpgroups (256 threads), S-stage cp.async pipeline of 128-chunks (E4M3 activation
 *    tile, raw prepared codes with 16-byte unit s of weight row r at s ^ ((r >> 1) & 3), 4 scale
 *    bytes per row). KW = 1: the warpgroups own 64 weight rows each (CTA 128 rows) and run all 4
 *    steps of a chunk; KW = 2: both own the same 64 rows and warpgroup w runs steps 2w, 2w+1 of
 *    every chunk (twice the CTAs for small m), reduced through shared memory at the end in a
 *    fixed order (deterministic).
 *
 * NVFP4 is not supported (LOFP_ERR_UNSUPPORTED): its 16-element blocks give two scales per row
 * inside one k32 step, so a step would take two wgmmas with half of A zeroed in each and two
 * promotions -- twice the tensor work and twice the promotion FMAs -- and the UE4M3 scale cannot
 * be folded into the E4M3 weight exactly (e2m1 x ue4m3 needs up to 5 mantissa bits).
 */

#include <atomic>

#include "gemm_common.cuh"
#include "lofp_cuda_internal.h"
#include "w4a8_common.cuh"
#include "wgmma.cuh"

using namespace lofpcu;

/* the compute_90 PTX pass compiles the GEMM body out (no wgmma there): its helpers go unused */
#pragma nv_diag_suppress 177

namespace {

struct W8P {
    const uint8_t *codes, *scales;
    const float *params;
    const uint8_t *a8;      /* E4M3 activations [m, k], permuted inside each 32-block */
    const float *ascale;    /* [m] per-token scales */
    void *c;
    int m, n, k, out_bf16;
    int pack; /* C aligned for store_quad's four-output stores */
};

/* ---- activation quantizer ---- */

/* one CTA of 256 threads per token row: pass 1 the row's amax (from the bf16 bit patterns, so that
 * NaN > Inf > every finite value), pass 2 the codes, one 32-element block per thread-step.
 * PERM = 1: each 32-element block stored in the kernel's fragment order (below); PERM = 0: in
 * plain K order (the cuBLASLt route, gemm_w4a8_large.cu). The same fp32 division and conversion
 * per element either way, so the codes are the same bytes, only placed differently. */
template <int PERM>
__global__ void __launch_bounds__(256) act_quant_kernel(const uint16_t *a, size_t k, uint8_t *q, float *ascale)
{
    const size_t row = blockIdx.x;
    const uint16_t *x = a + row * k;
    __shared__ uint32_t red[8];
    __shared__ float s_scale;
    uint32_t mx = 0;
    for (size_t i = (size_t)threadIdx.x * 8; i < k; i += 256 * 8) {
        const uint4 v = *(const uint4 *)(x + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const uint32_t lo = w[t] & 0x7FFFu, hi = (w[t] >> 16) & 0x7FFFu;
            mx = max(mx, max(lo, hi));
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = max(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t m = 0;
        for (int i = 0; i < 8; i++) m = max(m, red[i]);
        float s;
        if (m >= 0x7F80u) s = u2f(0x7FC00000u);           /* Inf or NaN in the row */
        else if (m == 0) s = 1.0f;                          /* all zeros */
        else s = fdiv(u2f(m << 16), 448.0f);
        s_scale = s;
        ascale[row] = s;
    }
    __syncthreads();
    const float s = s_scale;
    uint8_t *qr = q + row * k;
    for (size_t b = threadIdx.x; b < k / 32; b += 256) {
        const uint4 *src = (const uint4 *)(x + b * 32);
        uint32_t w[16];
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const uint4 v = src[t];
            w[4 * t] = v.x; w[4 * t + 1] = v.y; w[4 * t + 2] = v.z; w[4 * t + 3] = v.w;
        }
        /* e(i): element i of the block as fp32 divided by the scale */
        auto e = [&](int i) { return fdiv(u2f((i & 1 ? w[i >> 1] >> 16 : w[i >> 1] & 0xFFFFu) << 16), s); };
        uint32_t o[8];
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                /* PERM: output word 4h + c (bytes s = 16h + 4c + b) holds elements 8c + 2b + h;
                 * plain: word 4h + c holds elements 4 (4h + c) + b */
                const int w0 = PERM ? 8 * c + h : 4 * (4 * h + c), st = PERM ? 2 : 1;
                uint16_t lo, hi;
                /* cvt ... d, a, b: a goes to the upper byte, b to the lower */
                asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(e(w0 + st)), "f"(e(w0)));
                asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(e(w0 + 3 * st)), "f"(e(w0 + 2 * st)));
                o[4 * h + c] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
        uint4 *dst = (uint4 *)(qr + b * 32);
        dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
        dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
    }
}

/* ---- GEMM ---- */

/* D = A . B (accum = 0: a fresh accumulator) or D += A . B, A = 4 registers of E4M3, B = descriptor. */
LOFP_WG_RS(WgmmaF8, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3",
           "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", "1, 1");

/* cp.async of 4 bytes to a shared-window address (no generic-to-shared conversion per copy) */
__device__ __forceinline__ void cp4s(uint32_t sa, const void *g, int n)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(sa), "l"(g), "r"(n));
}

/* E8M0 byte -> fp32 2^(b - e_max) (sb = 127 - e_max; 0 below 2^-126, NaN for 0xFF) */
__device__ __forceinline__ float blockf(uint32_t b, int sb)
{
    const int x = (int)b + sb;
    const float f = x > 0 ? u2f((uint32_t)x << 23) : 0.0f;
    return b == 0xFFu ? u2f(0x7FC00000u) : f;
}

template <int TN, int KW, int S> constexpr int w8_stage() { return (TN * 128 + (128 / KW) * 68 + 1023) / 1024 * 1024; }
template <int TN, int KW, int S> constexpr int w8_shm() { return S * w8_stage<TN, KW, S>() + 1024; }

template <int TN, int KW, int S, int MINB>
__global__ void __launch_bounds__(256, MINB) w4a8_kernel(W8P p)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int ROWS = 128 / KW;          /* weight rows per CTA */
    constexpr int ACT = TN * 128;           /* TN tokens x 128 E4M3 */
    constexpr int WB = ROWS * 64;           /* codes */
    constexpr int STAGE = w8_stage<TN, KW, S>();
    constexpr int NR = TN / 2;              /* accumulators per thread */
    constexpr int NS = 4 / KW;              /* k32 steps per chunk per warpgroup */
    static_assert(ACT % 1024 == 0 && STAGE % 1024 == 0, "stage alignment");
    static_assert(S * STAGE >= 128 * NR * 4 || KW == 1, "reduction buffer");

    extern __shared__ uint8_t smem_raw[];
    uint32_t smem_s;
    uint8_t *smem = smem_align1024(smem_raw, smem_s);

    const int tid = threadIdx.x, wg = tid >> 7, wiw = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, c = lane & 3;
    const int n0 = blockIdx.x * ROWS, t0 = blockIdx.y * TN;
    const int chunks = p.k / 128;
    const int sb = (int)p.params[1] - 126;  /* params[1] = 253 - e_max */
    const size_t nch = (size_t)p.k / 128; /* tile-major prepared weights (gemm_common.cuh) */

    /* the loader's addresses are fixed per thread: computed once, each chunk only adds its
     * offset (the per-chunk 64-bit address arithmetic was a quarter of the loop's instructions) */
    constexpr int NA = TN * 8 / 256, NW = ROWS * 4 / 256;
    /* copy i of a thread: activation token row t = tid/8 + 32 i, unit u = tid % 8 (so t % 8 and
     * the swizzled unit are the same for every i: destination adst + 4096 i); weight row
     * r = tid/4 + 64 i, unit s = tid % 4 ((r >> 1) & 3 the same for every i: wdst + 4096 i);
     * in the tile-major prepared layout chunk ch of the same rows is w4_code_off(0, ch, 0) /
     * w4_scale_off(0, ch) further (gemm_common.cuh) */
    const uint8_t *asrc[NA], *wsrc[NW];
    int asz[NA], wsz[NW];
    const uint32_t adst = (uint32_t)((tid >> 3) * 128 + (((tid & 7) ^ ((tid >> 3) & 7)) << 4));
    const uint32_t wdst = (uint32_t)(ACT + (tid >> 2) * 64 + (((tid & 3) ^ ((tid >> 3) & 3)) << 4));
#pragma unroll
    for (int i = 0; i < NA; i++) {
        const int t = (tid >> 3) + 32 * i;
        const bool ok = t0 + t < p.m;
        asrc[i] = p.a8 + (size_t)(ok ? t0 + t : 0) * p.k + (tid & 7) * 16;
        asz[i] = ok ? 16 : 0;
    }
#pragma unroll
    for (int i = 0; i < NW; i++) {
        const int r = (tid >> 2) + 64 * i;
        const bool ok = n0 + r < p.n;
        wsrc[i] = p.codes + w4_code_off((size_t)(ok ? n0 + r : 0), 0, (unsigned)(tid & 3), nch);
        wsz[i] = ok ? 16 : 0;
    }
    const bool sok = tid < ROWS && n0 + tid < p.n;
    const uint8_t *ssrc = p.scales + w4_scale_off((size_t)(sok ? n0 + tid : 0), 0, 4, nch);
    const uint32_t sdst = (uint32_t)(ACT + WB + 4 * tid);

    auto load_stage = [&](int st, int ch) {
        const uint32_t base = smem_s + (uint32_t)(st * STAGE);
#pragma unroll
        for (int i = 0; i < NA; i++) cp16s(base + adst + 4096 * i, asrc[i] + (size_t)ch * 128, asz[i]);
#pragma unroll
        for (int i = 0; i < NW; i++) cp16s(base + wdst + 4096 * i, wsrc[i] + w4_code_off(0, (size_t)ch, 0, nch), wsz[i]);
        if (tid < ROWS) cp4s(base + sdst, ssrc + w4_scale_off(0, (size_t)ch, 4, nch), sok ? 4 : 0);
    };

    /* two partials: chunk ch's wgmmas run into pp[ch & 1] while the other one, chunk ch - 1's,
     * is promoted (its wgmmas were committed one chunk earlier; wait_group 1 waits for them only) */
    float acc[NR], pa[NR], pb[NR];
#pragma unroll
    for (int i = 0; i < NR; i++) { acc[i] = 0.0f; pa[i] = 0.0f; pb[i] = 0.0f; }
#pragma unroll
    for (int i = 0; i < NR; i++) { reg_fence(acc[i]); reg_fence(pa[i]); reg_fence(pb[i]); }

#pragma unroll
    for (int s = 0; s < S - 2; s++) {
        if (s < chunks) load_stage(s, s);
        cp_commit();
    }

    /* this lane's weight rows inside the CTA: rb and rb + 8 (same unit swizzle) */
    const int rb = (KW == 1 ? wg * 64 : 0) + 16 * wiw + g;
    const int rsw = (rb >> 1) & 3;
    /* factors of the partial the previous chunk left (pp[(ch - 1) & 1]); 0 where it left none
     * (before the first chunk, after a fallback chunk): the promotion then adds partial * 0 = +-0,
     * exact, as the partials are always finite (at most 128 x 448 x 384 in magnitude). Promoting
     * unconditionally keeps every wgmma wait out of divergent-looking code, where ptxas would
     * serialize the wgmmas. */
    float fp0 = 0.0f, fp1 = 0.0f;
    auto promote = [&](float (&pt)[NR], float g0, float g1) {
#pragma unroll
        for (int i = 0; i < NR; i++) reg_fence(pt[i]);
        /* accumulator i belongs to row rb + 8 * ((i >> 1) & 1) */
#pragma unroll
        for (int i = 0; i < NR; i++) acc[i] = ffma(pt[i], (i & 2) ? g1 : g0, acc[i]);
    };
    auto chunk = [&](int ch, float (&cur)[NR], float (&prv)[NR]) {
        cp_wait<S - 3>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        /* thread r < ROWS copied row r's 4 scale bytes of this chunk itself (visible to it after
         * its wait): the chunk takes the fallback for the whole CTA (a uniform branch: wgmma is
         * warpgroup-wide) if any row's scales span more than W8_DMAX binades */
        int span = 0;
        if (tid < ROWS) {
            const uint32_t sv = *(const uint32_t *)(smem + (ch % S) * STAGE + ACT + WB + 4 * tid);
            const uint32_t x0 = sv & 0xFFu, x1 = (sv >> 8) & 0xFFu, x2 = (sv >> 16) & 0xFFu, x3 = sv >> 24;
            span = (int)(max(max(x0, x1), max(x2, x3)) - min(min(x0, x1), min(x2, x3))) > W8_DMAX;
        }
        const int wide = __syncthreads_or(span);
        {
            /* the stage of chunk ch - 2: its wgmmas completed (wait_group 1 in chunk ch - 1, or a
             * wait 0) before the barrier above, in every warpgroup */
            const int nx = ch + S - 2;
            if (nx < chunks) load_stage(nx % S, nx);
            cp_commit();
        }
        const int st = ch % S;
        const uint8_t *sw = smem + st * STAGE + ACT;
        const uint8_t *ss = sw + WB;
        const uint32_t sa_s = smem_s + st * STAGE;
        /* the four block scale bytes (byte j = block j) of the lane's two rows */
        const uint32_t s0 = *(const uint32_t *)(ss + rb * 4), s1 = *(const uint32_t *)(ss + (rb + 8) * 4);
        if (!wide) {
            /* per-128 promotion: the weights of block j carry 2^(e_j - e_chunk), e_chunk the row's
             * largest scale of the chunk (table of d = e_chunk - e_j: base - d * C = (base - e_chunk
             * * C) + e_j * C, one IMAD per table word); the 4 (KW = 1) or 2 steps accumulate in the
             * tensor core into one partial, promoted once with 2^(e_chunk - e_max) */
            const uint32_t m0 = max(max(s0 & 0xFFu, (s0 >> 8) & 0xFFu), max((s0 >> 16) & 0xFFu, s0 >> 24));
            const uint32_t m1 = max(max(s1 & 0xFFu, (s1 >> 8) & 0xFFu), max((s1 >> 16) & 0xFFu, s1 >> 24));
            const uint32_t b00 = W8_T0 - m0 * W8_C0, b01 = W8_T1 - m0 * W8_C1;
            const uint32_t b10 = W8_T0 - m1 * W8_C0, b11 = W8_T1 - m1 * W8_C1;
            uint32_t fa[NS][4];
#pragma unroll
            for (int jj = 0; jj < NS; jj++) {
                const int j = KW == 1 ? jj : 2 * wg + jj;
                const uint32_t q0 = *(const uint32_t *)(sw + rb * 64 + ((j ^ rsw) << 4) + 4 * c);
                const uint32_t q1 = *(const uint32_t *)(sw + (rb + 8) * 64 + ((j ^ rsw) << 4) + 4 * c);
                const uint32_t e0 = (s0 >> (8 * j)) & 0xFFu, e1 = (s1 >> (8 * j)) & 0xFFu;
                const uint32_t t00 = b00 + e0 * W8_C0, t01 = b01 + e0 * W8_C1;
                const uint32_t t10 = b10 + e1 * W8_C0, t11 = b11 + e1 * W8_C1;
                e4m3_word(q0, t00, t01, fa[jj][0], fa[jj][2]);
                e4m3_word(q1, t10, t11, fa[jj][1], fa[jj][3]);
            }
            wg_fence();
#pragma unroll
            for (int jj = 0; jj < NS; jj++) {
                const int j = KW == 1 ? jj : 2 * wg + jj;
                WgmmaF8<TN>::mma(cur, fa[jj][0], fa[jj][1], fa[jj][2], fa[jj][3], sw128_desc(sa_s + 32 * j), jj);
            }
            wg_commit();
            wg_wait<1>();
            promote(prv, fp0, fp1);
            fp0 = blockf(m0, sb);
            fp1 = blockf(m1, sb);
        } else {
            /* some row of the CTA spans more than W8_DMAX binades in this chunk: every block at
             * d = 0 (weights e2m1 * 2^6), one fresh partial per k32 step, promoted with 2^(e_j - e_max) */
            wg_wait<0>();
            promote(prv, fp0, fp1);
            fp0 = 0.0f;
            fp1 = 0.0f;
#pragma unroll
            for (int jj = 0; jj < NS; jj++) {
                const int j = KW == 1 ? jj : 2 * wg + jj;
                const uint32_t q0 = *(const uint32_t *)(sw + rb * 64 + ((j ^ rsw) << 4) + 4 * c);
                const uint32_t q1 = *(const uint32_t *)(sw + (rb + 8) * 64 + ((j ^ rsw) << 4) + 4 * c);
                uint32_t a0, a1, a2, a3;
                e4m3_word(q0, W8_T0, W8_T1, a0, a2);
                e4m3_word(q1, W8_T0, W8_T1, a1, a3);
                const float f0 = blockf((s0 >> (8 * j)) & 0xFFu, sb), f1 = blockf((s1 >> (8 * j)) & 0xFFu, sb);
                wg_fence();
                WgmmaF8<TN>::mma(cur, a0, a1, a2, a3, sw128_desc(sa_s + 32 * j), 0);
                wg_commit();
                wg_wait<0>();
                promote(cur, f0, f1);
            }
        }
    };
    /* pairs of chunks, then the odd one (no path on which a wgmma writes a partial still in flight:
     * ptxas would serialize the wgmmas) */
    int ch = 0;
    for (; ch + 1 < chunks; ch += 2) {
        chunk(ch, pa, pb);
        chunk(ch + 1, pb, pa);
    }
    if (ch < chunks) {
        chunk(ch, pa, pb);
        wg_wait<0>();
        promote(pa, fp0, fp1);
    } else {
        wg_wait<0>();
        promote(pb, fp0, fp1);
    }
    cp_wait<0>();

    if (KW == 2) {
        /* warpgroup 1 parks its accumulators (float i of thread t at i * 128 + t), warpgroup 0
         * adds them to its own (one order: deterministic) and writes the tile */
        __syncthreads();
        float *xb = (float *)smem;
        if (wg == 1) {
#pragma unroll
            for (int i = 0; i < NR; i++) xb[i * 128 + (tid & 127)] = acc[i];
        }
        __syncthreads();
        if (wg == 1) return;
#pragma unroll
        for (int i = 0; i < NR; i++) acc[i] = fadd(acc[i], xb[i * 128 + tid]);
    }

    const float alpha = fmul(p.params[0], 0.015625f);  /* weights carry 2^6: 2^(e_max - 133) */
    const int row = n0 + rb;
#pragma unroll
    for (int i = 0; i < TN / 8; i++) {
        const int tok = t0 + 8 * i + 2 * c;
        /* the tokens' scales (none read past m: those outputs are not stored) */
        const float s0 = tok < p.m ? p.ascale[tok] : 0.0f, s1 = tok + 1 < p.m ? p.ascale[tok + 1] : 0.0f;
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = fmul(fmul(acc[4 * i + e], alpha), (e & 1) ? s1 : s0);
        store_quad(p.c, p.out_bf16, p.pack, p.m, p.n, g, row, tok, v); /* gemm_common.cuh */
    }
#endif
}

template <int TN, int KW, int S, int MINB>
lofp_status launch_w8(const W8P &p, cudaStream_t st)
{
    const dim3 grid((unsigned)((p.n + 128 / KW - 1) / (128 / KW)), (unsigned)((p.m + TN - 1) / TN));
    if (grid.y > 65535) return LOFP_ERR_UNSUPPORTED;
    const int shm = w8_shm<TN, KW, S>();
    LOFP_CU(cudaFuncSetAttribute(w4a8_kernel<TN, KW, S, MINB>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm));
    w4a8_kernel<TN, KW, S, MINB><<<grid, 256, shm, st>>>(p);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

/* 1 if the current device runs sm_90a code (compute capability exactly 9.0), cached per device */
bool is_sm90_dev(void)
{
    static int cache[64];  /* 0 unknown, 1 yes, 2 no */
    int dev = 0, ma = 0, mi = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return false;
    if (dev < 64 && cache[dev]) return cache[dev] == 1;
    if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    const bool yes = ma == 9 && mi == 0;
    if (dev < 64) cache[dev] = yes ? 1 : 2;
    return yes;
}

size_t scales_bytes(size_t m) { return w4a8_codes_offset(m); }

lofp_status check_ws(size_t m, size_t k, const void *d_ws, size_t ws_bytes)
{
    if (!d_ws || ((uintptr_t)d_ws & 255)) return LOFP_ERR_INVALID_ARG;
    if (ws_bytes < lofp_cuda_w4a8_workspace_bytes(m, k)) return LOFP_ERR_INVALID_ARG;
    return LOFP_OK;
}

lofp_status quantize_act_checked(const void *d_a, size_t m, size_t k, void *d_ws, size_t ws_bytes, int plain,
                                 cudaStream_t st)
{
    clear_cuda_error();
    if (!d_a || ((uintptr_t)d_a & 15)) return LOFP_ERR_INVALID_ARG;
    if (m == 0 || k == 0 || k % 128) return LOFP_ERR_SHAPE;
    if (m > 0x7FFFFFFF || k > 0x7FFFFFFF) return LOFP_ERR_SIZE_OVERFLOW;
    const lofp_status r = check_ws(m, k, d_ws, ws_bytes);
    if (r != LOFP_OK) return r;
    return w4a8_act_quant(d_a, m, k, d_ws, plain, st);
}

/* test hooks: the forced route (LOFP_GEMM_ROUTE_*) and the route / reason of the last call */
std::atomic<int> g_w8_force{LOFP_GEMM_ROUTE_AUTO};
std::atomic<int> g_w8_last{LOFP_W4A8_RAN_NONE};
std::atomic<int> g_w8_why{LOFP_W4A8_WHY_OK};

void w8_record(int ran, int why)
{
    g_w8_last.store(ran, std::memory_order_relaxed);
    g_w8_why.store(why, std::memory_order_relaxed);
}

} // namespace

lofp_status lofpcu::w4a8_act_quant(const void *d_a, size_t m, size_t k, void *d_ws, int plain, cudaStream_t st)
{
    float *sc = (float *)d_ws;
    uint8_t *q = (uint8_t *)d_ws + scales_bytes(m);
    if (plain) act_quant_kernel<0><<<(unsigned)m, 256, 0, st>>>((const uint16_t *)d_a, k, q, sc);
    else act_quant_kernel<1><<<(unsigned)m, 256, 0, st>>>((const uint16_t *)d_a, k, q, sc);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

extern "C" size_t lofp_cuda_w4a8_workspace_bytes(size_t m, size_t k)
{
    if (m == 0 || k == 0 || m > 0x7FFFFFFF || k > 0x7FFFFFFF) return 0;
    return scales_bytes(m) + m * k;
}

extern "C" lofp_status lofp_cuda_w4a8_quantize_act(const void *d_a, size_t m, size_t k, void *d_ws,
                                                   size_t ws_bytes, lofp_cuda_stream stream)
{
    return quantize_act_checked(d_a, m, k, d_ws, ws_bytes, 0, (cudaStream_t)stream);
}

extern "C" lofp_status lofp_cuda_w4a8_quantize_act_plain(const void *d_a, size_t m, size_t k, void *d_ws,
                                                         size_t ws_bytes, lofp_cuda_stream stream)
{
    return quantize_act_checked(d_a, m, k, d_ws, ws_bytes, 1, (cudaStream_t)stream);
}

extern "C" void lofp_cuda_w4a8_test_config(int route)
{
    g_w8_force.store(route == LOFP_GEMM_ROUTE_LARGE || route == LOFP_GEMM_ROUTE_KERNEL ? route : LOFP_GEMM_ROUTE_AUTO);
}

extern "C" int lofp_cuda_w4a8_last_route(int *why)
{
    if (why) *why = g_w8_why.load(std::memory_order_relaxed);
    return g_w8_last.load(std::memory_order_relaxed);
}

extern "C" const char *lofp_cuda_w4a8_why_name(int why)
{
    switch (why) {
    case LOFP_W4A8_WHY_OK: return "ok";
    case LOFP_W4A8_WHY_NO_LIBRARY: return "cuBLASLt unavailable";
    case LOFP_W4A8_WHY_CAPTURING: return "stream capturing";
    case LOFP_W4A8_WHY_NO_MEMORY: return "transient buffer not allocated";
    case LOFP_W4A8_WHY_NO_ALGO: return "cuBLASLt descriptor/heuristic refused (FP8 OUTER_VEC_32F)";
    case LOFP_W4A8_WHY_REFUSED: return "cublasLtMatmul refused (FP8 OUTER_VEC_32F)";
    case LOFP_W4A8_WHY_NOT_ROWWISE: return "weights not rowwise-exact in E4M3";
    case LOFP_W4A8_WHY_SMALL_M: return "m below LOFP_CUDA_W4A8_LARGE_M_MIN";
    case LOFP_W4A8_WHY_FORCED: return "kernel route forced";
    default: return "?";
    }
}

/* Configurations: m <= 64: 64 weight rows x 64 tokens per CTA (KW = 2), 8 stages (the weight
 * stream is the cost: 6 chunks in flight); m > 64: 128 tokens, 128 rows (KW = 1) or 64 rows
 * (KW = 2), whichever needs fewer CTA waves x work per CTA (ties to KW = 1, no reduction); a sweep
 * of all four (TN, KW) pairs on an H200 chose these at M = 64, 256 and 4096. */
extern "C" lofp_status lofp_cuda_w4a8_gemm_quantized(const lofp_cuda_w4 *w, size_t m, lofp_dtype out_dt,
                                                     void *d_c, const void *d_ws, size_t ws_bytes,
                                                     lofp_cuda_stream stream)
{
    clear_cuda_error();
    if (!w || !w->d_codes || !d_c) return LOFP_ERR_INVALID_ARG;
    if (out_dt != LOFP_DTYPE_F32 && out_dt != LOFP_DTYPE_BF16) return LOFP_ERR_INVALID_ARG;
    if (w->id != LOFP_SCHEME_MXFP4) return LOFP_ERR_UNSUPPORTED;
    if (m == 0) return LOFP_ERR_SHAPE;
    if (m > 0x7FFFFFFF) return LOFP_ERR_SIZE_OVERFLOW;
    const lofp_status r = check_ws(m, w->k, d_ws, ws_bytes);
    if (r != LOFP_OK) return r;
    if (!is_sm90_dev()) return LOFP_ERR_UNSUPPORTED;
    cudaStream_t st = (cudaStream_t)stream;
    W8P p;
    p.codes = w->d_codes; p.scales = w->d_scales; p.params = w->d_params;
    p.ascale = (const float *)d_ws;
    p.a8 = (const uint8_t *)d_ws + scales_bytes(m);
    p.c = d_c;
    p.m = (int)m; p.n = (int)w->n; p.k = (int)w->k; p.out_bf16 = out_dt == LOFP_DTYPE_BF16;
    p.pack = store_quad_pack(d_c, p.out_bf16);
    int tn = m <= 64 ? 64 : 128, kw = 2;
    if (tn == 128) {
        const long long sms = sm_count();
        const long long tiles_m = ((long long)m + 127) / 128;
        const long long c1 = (p.n + 127) / 128 * tiles_m, c2 = (p.n + 63) / 64 * tiles_m;
        const double t1 = (double)((c1 + sms - 1) / sms), t2 = 0.5 * (double)((c2 + sms - 1) / sms);
        kw = t1 <= t2 ? 1 : 2;
    }
    if (tn == 64) return launch_w8<64, 2, 8, 1>(p, st);
    return kw == 2 ? launch_w8<128, 2, 6, 1>(p, st) : launch_w8<128, 1, 5, 1>(p, st);
}

extern "C" lofp_status lofp_cuda_w4a8_gemm_reuse(const lofp_cuda_w4 *w, const void *d_a, size_t m, lofp_dtype out_dt,
                                                 void *d_c, void *d_ws, size_t ws_bytes, int *ws_state,
                                                 lofp_cuda_stream stream)
{
    clear_cuda_error();
    if (!ws_state) return LOFP_ERR_INVALID_ARG;
    const int held = *ws_state;
    if (held != LOFP_W4A8_WS_EMPTY && held != LOFP_W4A8_WS_KERNEL && held != LOFP_W4A8_WS_PLAIN)
        return LOFP_ERR_INVALID_ARG;
    if (!w || !w->d_codes || !d_a || !d_c) return LOFP_ERR_INVALID_ARG;
    if (out_dt != LOFP_DTYPE_F32 && out_dt != LOFP_DTYPE_BF16) return LOFP_ERR_INVALID_ARG;
    if (w->id != LOFP_SCHEME_MXFP4) return LOFP_ERR_UNSUPPORTED;
    if (m == 0) return LOFP_ERR_SHAPE;
    if (m > 0x7FFFFFFF) return LOFP_ERR_SIZE_OVERFLOW;
    if (((uintptr_t)d_a & 15)) return LOFP_ERR_INVALID_ARG;
    lofp_status r = check_ws(m, w->k, d_ws, ws_bytes);
    if (r != LOFP_OK) return r;
    if (!is_sm90_dev()) return LOFP_ERR_UNSUPPORTED;
    cudaStream_t st = (cudaStream_t)stream;
    /* from here the workspace may be rewritten: it holds nothing reusable unless a route ran */
    *ws_state = LOFP_W4A8_WS_EMPTY;
    /* large M: the cuBLASLt FP8 route (gemm_w4a8_large.cu) where the weights are rowwise-exact
     * and cuBLASLt takes the GEMM; the kernel below otherwise (the same product, both exact in
     * the weights and the per-token activation codes; the sums differ only in order). Either
     * quantizes the activations into the workspace in its own order unless it holds them so. */
    const int force = g_w8_force.load(std::memory_order_relaxed);
    int why = force == LOFP_GEMM_ROUTE_KERNEL ? LOFP_W4A8_WHY_FORCED : LOFP_W4A8_WHY_SMALL_M;
    const bool large = force == LOFP_GEMM_ROUTE_LARGE || (force == LOFP_GEMM_ROUTE_AUTO && m >= LOFP_CUDA_W4A8_LARGE_M_MIN);
    if (large) {
        r = w4a8_large_launch(w, d_a, m, out_dt == LOFP_DTYPE_BF16, d_c, d_ws, held == LOFP_W4A8_WS_PLAIN, st, &why);
        if (r == LOFP_OK) {
            w8_record(LOFP_W4A8_RAN_LARGE, LOFP_W4A8_WHY_OK);
            *ws_state = LOFP_W4A8_WS_PLAIN;
        }
        if (r != LOFP_ERR_UNSUPPORTED) return r;
        if (force == LOFP_GEMM_ROUTE_LARGE) {
            w8_record(LOFP_W4A8_RAN_NONE, why);
            return r;
        }
    }
    /* (after a refused large route the workspace may hold its plain codes: quantized again) */
    if (held != LOFP_W4A8_WS_KERNEL || large) {
        r = w4a8_act_quant(d_a, m, w->k, d_ws, 0, st);
        if (r != LOFP_OK) return r;
    }
    r = lofp_cuda_w4a8_gemm_quantized(w, m, out_dt, d_c, d_ws, ws_bytes, stream);
    if (r == LOFP_OK) {
        w8_record(LOFP_W4A8_RAN_KERNEL, why);
        *ws_state = LOFP_W4A8_WS_KERNEL;
    }
    return r;
}

extern "C" lofp_status lofp_cuda_w4a8_gemm(const lofp_cuda_w4 *w, const void *d_a, size_t m, lofp_dtype out_dt,
                                           void *d_c, void *d_ws, size_t ws_bytes, lofp_cuda_stream stream)
{
    int held = LOFP_W4A8_WS_EMPTY;
    return lofp_cuda_w4a8_gemm_reuse(w, d_a, m, out_dt, d_c, d_ws, ws_bytes, &held, stream);
}

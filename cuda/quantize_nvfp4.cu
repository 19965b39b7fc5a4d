/* quantize_nvfp4.cu -- NVFP4 quantize (one- and two-level), bit-identical to the CPU library.
 *
 * Kernels, one per shape class (quantize_nvfp4 below picks it):
 *   amax_kernel             tensor-wide max |x| (uint max of the bit patterns) for two-level NVFP4
 *                           without a given global, plus the first non-finite index; one atomicMax
 *                           per CTA. Runs first; the encoder then goes in reverse block order.
 *   nvfp4_bf16_flat_kernel  bf16 input, RNE, no padding, linear scales: coalesced 16-byte
 *                           cp.async copies (the next item in flight), two lanes per block.
 *   nvfp4_fast_kernel       RNE, no padding, aligned input (other dtypes and scale layouts): vector
 *                           loads, packed-integer block maxima, fp32-pipe E2M1 rounding.
 *   nvfp4_kernel            everything else (ties-to-zero, ties-away, stochastic; padded or
 *                           unaligned rows): one thread per 16-element block, E2M1 by midpoint
 *                           counting, Markstein's correctly rounded division.
 */
#include <stdint.h>
#include <string.h>

#include "quantize_common.cuh"

using namespace lofpcu;

namespace {

/* ---- tensor amax (two-level NVFP4) ---- */
template <int DT, bool VEC>
__global__ void __launch_bounds__(512) amax_kernel(const void *x, size_t n, DevWs *ws)
{
    uint32_t m = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (VEC) {
        const size_t nc = n / 8;
        for (size_t c = t; c < nc; c += 2 * stride) {
            float v[8], w[8];
            const bool two = c + stride < nc;
            load8<DT>(x, c * 8, v);
            if (two) load8<DT>(x, (c + stride) * 8, w);
            uint32_t mv = 0, mw = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                uint32_t a = f2u(v[i]) & 0x7FFFFFFFu;
                mv = a > mv ? a : mv;
                uint32_t b = two ? (f2u(w[i]) & 0x7FFFFFFFu) : 0u;
                mw = b > mw ? b : mw;
            }
            if (mv >= 0x7F800000u) note_nonfinite(ws, v, 8, n, 0, c * 8);
            if (mw >= 0x7F800000u) note_nonfinite(ws, w, 8, n, 0, (c + stride) * 8);
            m = mv > m ? mv : m;
            m = mw > m ? mw : m;
        }
    } else {
        for (size_t i = t; i < n; i += stride) {
            float v = load1<DT>(x, i);
            uint32_t a = f2u(v) & 0x7FFFFFFFu;
            if (a >= 0x7F800000u) atomicMin(&ws->first_bad, (unsigned long long)i);
            m = a > m ? a : m;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        uint32_t b = __shfl_xor_sync(0xFFFFFFFFu, m, o);
        m = b > m ? b : m;
    }
    __shared__ uint32_t sm[16];
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) sm[w] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t mm = 0;
        for (int i = 0; i < (int)(blockDim.x >> 5); i++) mm = sm[i] > mm ? sm[i] : mm;
        atomicMax(&ws->amax_bits, mm);
    }
}


/* ---- NVFP4: one thread per block of 16 ---- */
template <int DT, int MODE>
__global__ void __launch_bounds__(256) nvfp4_kernel(BQParams p, int vec)
{
    const size_t total = p.rows * p.nb;
    size_t gid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (gid >= total) return;
    if (p.reverse) gid = total - 1 - gid;
    const float global = p.amax_bits ? nvfp4_global_from_amax(u2f(*p.amax_bits)) : p.global;
    if (gid == total - 1 && p.global_out) *p.global_out = global;
    size_t r, b;
    split_gid(gid, p.nb, r, b);
    const size_t j0 = b * 16;

    float g[16];
    load_row16<DT>(p.x, p.k, r, j0, vec != 0, g);
    uint32_t bad = 0;
#pragma unroll
    for (int i = 0; i < 16; i++) bad |= (f2u(g[i]) & 0x7F800000u) == 0x7F800000u;
    if (bad) note_nonfinite(p.ws, g, 16, p.k, r, j0);
    float bmax = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        g[i] = fmul(g[i], global);
        const float a = fabs_(g[i]);
        if (a > bmax) bmax = a;
    }
    float bq;
    const uint32_t sb = nvfp4_scale(bmax, &bq);
    const float rcp = frcp(bq);
    uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const float a = fabs_(g[i]);
        const float q = is_finite_bits(f2u(a)) ? div_markstein(a, bq, rcp) : a;
        uint32_t c;
        if (MODE != R_STOCH) {
            c = (MODE == R_RNE ? e2m1_rne_fast(q) : e2m1_mag_fast(q, MODE)) | ((f2u(g[i]) >> 31) << 3);
        } else {
            float e = u2f(f2u(q) | (f2u(g[i]) & 0x80000000u));
            if (e < -6.0f) e = -6.0f;
            if (e > 6.0f) e = 6.0f;
            c = encode_mf(mf_of(T_E2M1), e, R_STOCH, false,
                          stochastic_bits(p.seed, (unsigned long long)(r * p.kp + j0 + i)));
        }
        w[i >> 3] |= c << (4 * (i & 7));
    }
    *(uint2 *)(p.codes + (r * p.kp + j0) / 2) = make_uint2(w[0], w[1]);
    p.scales[scale_off(p.L, r, b)] = (uint8_t)sb;
}


/* NVFP4, RNE, one thread per EPT/16 blocks of 16, vector loads. */
template <int DT, int EPT>
__global__ void __launch_bounds__(256) nvfp4_fast_kernel(BQParams p)
{
    constexpr int NB = EPT / 16;
    const size_t total = p.rows * (p.nb / NB);
    size_t gid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (gid >= total) return;
    if (p.reverse) gid = total - 1 - gid;
    const float global = p.amax_bits ? nvfp4_global_from_amax(u2f(*p.amax_bits)) : p.global;
    if (gid == total - 1 && p.global_out) *p.global_out = global;
    size_t r, bb;
    split_gid(gid, p.nb / NB, r, bb);
    const size_t j0 = bb * EPT;

    uint32_t raw[EPT / RawT<DT>::per_word];
    load_raw<DT, EPT>(p.x, r * p.k + j0, raw);
    uint32_t w[2 * NB];
#pragma unroll
    for (int s = 0; s < NB; s++) {
        const uint32_t mm = raw_magmax16<DT>(raw, 16 * s);
        uint32_t sb, lo = 0u, hi = 0u;
        if (mag_finite<DT>(mm)) {
            /* max |fl(x * global)| = fl(max|x| * global): rounding is monotone and global > 0 */
            float bq;
            sb = nvfp4_scale(fmul(mag_value<DT>(mm), global), &bq);
            const float rcp = frcp(bq);
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const float gi = fmul(raw_elem<DT>(raw, 16 * s + i), global);
                const float q = div_markstein(fabsf(gi), bq, rcp);
                /* code + 0x4A800000, the sign ORed in at bit 3 (bit 3 of the offset is clear),
                 * added into nibble i & 7 by mad.lo; the offsets (0x4A800000 << 4k, mod 2^32)
                 * are taken off once per word */
                const uint32_t c = with_sign<0, 3>(e2m1_rne_fma_bits(q), gi, p.pms);
                if (i < 8) lo = pack_mul<0, 4>(i & 7, c, p.pm[i & 7], lo);
                else hi = pack_mul<0, 4>(i & 7, c, p.pm[i & 7], hi);
            }
            lo -= 0x4A800000u * 0x11111111u;
            hi -= 0x4A800000u * 0x11111111u;
        } else { /* the general kernels' arithmetic, non-finite values included */
            note_nonfinite_raw<DT, 16>(p.ws, raw, 16 * s, p.k, r, j0);
            float g[16], bmax = 0.0f;
#pragma unroll
            for (int i = 0; i < 16; i++) {
                g[i] = fmul(raw_elem<DT>(raw, 16 * s + i), global);
                const float a = fabs_(g[i]);
                if (a > bmax) bmax = a;
            }
            float bq;
            sb = nvfp4_scale(bmax, &bq);
            const float rcp = frcp(bq);
            uint32_t ww[2] = {0u, 0u};
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const float a = fabs_(g[i]);
                const float q = is_finite_bits(f2u(a)) ? div_markstein(a, bq, rcp) : a;
                const uint32_t c = e2m1_rne_fast(q) | ((f2u(g[i]) >> 31) << 3);
                ww[i >> 3] |= c << (4 * (i & 7));
            }
            lo = ww[0];
            hi = ww[1];
        }
        w[2 * s] = lo;
        w[2 * s + 1] = hi;
        p.scales[scale_off(p.L, r, bb * NB + s)] = (uint8_t)sb;
    }
    if (NB == 2) *(uint4 *)(p.codes + (r * p.kp + j0) / 2) = make_uint4(w[0], w[1], w[2 % (2 * NB)], w[3 % (2 * NB)]);
    else *(uint2 *)(p.codes + (r * p.kp + j0) / 2) = make_uint2(w[0], w[1]);
}


/* ---- NVFP4 from bf16, RNE, flat ----
 * The warp's next item is copied by cp.async into one of two shared-memory stages
 * instead of 16 registers (80 -> 64 registers, 3 -> 4 CTAs of 256 per SM, no spill); 8 CTAs per
 * SM in the grid.
 * No padding: block g is 16-byte input words 2g, 2g+1, code words (4 bytes) 2g, 2g+1 and scale
 * byte g (linear scale layout only). A warp item is 64 blocks: load i of lane l is
 * input word 128 * item + 32 i + l (512 contiguous bytes per warp load), i.e. half l % 2 of block
 * 16 i + l / 2. The block
 * maxima come from one shuffle per two slots; lane l computes the scales of slots i with
 * i % 2 == l % 2 (two per lane) and hands them (byte, divisor, reciprocal) to its partner.
 * Per element: x * global, Markstein's division, the three E2M1 candidates and their minimum (the
 * same fp32 operations as nvfp4_fast_kernel), one mad.lo into the nibble. Per word of 8 elements
 * (per element the sign would cost two instructions and the cap at 7 one):
 * the codes 8 (q in [7, 9)) become 7 by e2m1_fix8_word, and the 8 signs come from the input's
 * high bytes by four byte permutes (nvfp4_signs8). q < 9 holds unless the block scale was clamped
 * at 448 (its byte is then 0x7E; those blocks, and non-finite ones, take the general
 * arithmetic, the pair of lanes sharing the block maximum by a two-lane shuffle). Addresses are a
 * base per item plus constant offsets, with the bounds tests only in a partial last item. Items
 * run in reverse order after the amax pass (the L2 holds the tensor's end). */

/* The sign bits of the 8 bf16 elements in w[0..3] (element 2t in bits 0..15 of w[t]) at bits
 * 4j + 3: gather the high bytes (even elements' in e, odd elements' in o, byte t each), then
 * bit 7 of byte t goes to bit 8t + 3 (even, >> 4) and stays at 8t + 7 (odd). */
__device__ __forceinline__ uint32_t nvfp4_signs8(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3)
{
    const uint32_t p01 = prmt(w0, w1, 0x7531u), p23 = prmt(w2, w3, 0x7531u);
    const uint32_t e = prmt(p01, p23, 0x6420u), o = prmt(p01, p23, 0x7531u);
    return ((e & 0x80808080u) >> 4) | (o & 0x80808080u);
}

/* cp.async of 16 bytes (src_bytes 0: zero fill), its group commit and wait; "memory" keeps the
 * shared-memory reads after the wait */
__device__ __forceinline__ void q_cp_async16(void *smem, const void *gmem, int src_bytes)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void q_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void q_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* fl(1/q) for q a UE4M3 value or 2^-9 (normal, far from both ends of the range): the hardware
 * approximation and one Newton step, which is the sequence __frcp_rn runs for such q, without its
 * exponent-range test and slow-path call (8 instructions and a branch per scale). */
__device__ __forceinline__ float rcp_ue4m3(float q)
{
    float r0;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(q));
    const float e = __fmaf_rn(q, r0, -1.0f);
    return __fmaf_rn(r0, -e, r0);
}

__global__ void __launch_bounds__(256, 4) nvfp4_bf16_flat_kernel(BQParams p)
{
    const size_t nblk = p.rows * p.nb, nw = nblk * 2, nitems = (nw + 127) / 128;
    const int lane = threadIdx.x & 31, h = lane & 1;
    const float global = p.amax_bits ? nvfp4_global_from_amax(u2f(*p.amax_bits)) : p.global;
    if (blockIdx.x == 0 && threadIdx.x == 0 && p.global_out) *p.global_out = global;
    const size_t nwarps = (size_t)gridDim.x * (blockDim.x >> 5);
    size_t it = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    /* item it's words from this lane's first one, copied asynchronously into stage st of the
     * warp's two in shared memory (the next item is in flight while the current one is encoded
     * without 16 registers holding it: 64 registers, 4 CTAs per SM); out of range words of a
     * partial last item are zero-filled (source size 0) */
    __shared__ uint4 stage[8][2][4][32];
    uint4 (&sw)[2][4][32] = stage[threadIdx.x >> 5];
    auto load = [&](size_t item, int st) {
        const size_t wb = (p.reverse ? nitems - 1 - item : item) * 128;
        const uint4 *xp = (const uint4 *)p.x + wb + lane;
        const int left = wb + 128 <= nw ? 128 : (int)(nw - wb) - lane;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool ok = 32 * i < left;
            q_cp_async16(&sw[st][i][lane], ok ? xp + 32 * i : (const uint4 *)p.x, ok ? 16 : 0);
        }
        q_cp_commit();
    };
    int st = 0;
    if (it < nitems) load(it, 0);
    for (; it < nitems; it += nwarps, st ^= 1) {
        const size_t wb = (p.reverse ? nitems - 1 - it : it) * 128;
        const int left = wb + 128 <= nw ? 128 : (int)(nw - wb) - lane;
        uint32_t *cp = (uint32_t *)p.codes + wb + lane;
        uint8_t *sp = p.scales + (wb >> 1) + (lane >> 1);
        /* the next item's copy is issued, then this item's (the older group) waited for; each
         * lane reads only the words it copied itself, and the stage it overwrites was read into
         * registers in the previous iteration */
        if (it + nwarps < nitems) {
            load(it + nwarps, st ^ 1);
            q_cp_wait<1>();
        } else {
            q_cp_wait<0>();
        }
        uint4 w[4];
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = sw[st][i][lane];
        /* block maxima of the |x| patterns, two slots per 32-bit shuffle */
        uint32_t mb[4];
#pragma unroll
        for (int t = 0; t < 2; t++) {
            uint32_t m[2];
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const uint4 &v = w[2 * t + u];
                const uint32_t m2 = vmax_u16x2(vmax_u16x2(v.x & 0x7FFF7FFFu, v.y & 0x7FFF7FFFu),
                                               vmax_u16x2(v.z & 0x7FFF7FFFu, v.w & 0x7FFF7FFFu));
                m[u] = max(m2 & 0xFFFFu, m2 >> 16);
            }
            uint32_t mq = m[0] | (m[1] << 16);
            mq = vmax_u16x2(mq, __shfl_xor_sync(0xFFFFFFFFu, mq, 1));
            mb[2 * t] = mq & 0xFFFFu;
            mb[2 * t + 1] = mq >> 16;
        }
        /* scales of slots h and h + 2 here, of the other two from the partner lane */
        uint32_t sb[4];
        float bq[4], rcp[4];
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int i = 2 * t;
            const uint32_t mm = h ? mb[i + 1] : mb[i];
            float q = 1.0f, r = 1.0f;
            uint32_t b = 0u;
            if (mm < 0x7F80u) { /* max |fl(x * global)| = fl(max|x| * global) (monotone rounding) */
                b = nvfp4_scale(fmul(u2f(mm << 16), global), &q);
                r = rcp_ue4m3(q);
            }
            const uint32_t ob = __shfl_xor_sync(0xFFFFFFFFu, b, 1);
            const float oq = __shfl_xor_sync(0xFFFFFFFFu, q, 1), orc = __shfl_xor_sync(0xFFFFFFFFu, r, 1);
            /* selects, not an index by h (that would put the arrays in local memory) */
            sb[i] = h ? ob : b; bq[i] = h ? oq : q; rcp[i] = h ? orc : r;
            sb[i + 1] = h ? b : ob; bq[i + 1] = h ? q : oq; rcp[i + 1] = h ? r : orc;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (32 * i >= left) break;
            const uint32_t raw[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
            uint32_t out = 0u, sbyte = sb[i];
            if (mb[i] < 0x7F80u && sb[i] != 0x7Eu) {
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float gj = fmul(raw_elem<LOFP_DTYPE_BF16>(raw, j), global);
                    const float q = div_markstein(fabsf(gj), bq[i], rcp[i]);
                    out = pack_mul<0, 4>(j, e2m1_rne_fma_bits8(q), p.pm[j], out);
                }
                out = e2m1_fix8_word(out - 0x4A800000u * 0x11111111u) |
                      nvfp4_signs8(raw[0], raw[1], raw[2], raw[3]);
            } else { /* the general kernels' arithmetic, non-finite values included */
                const size_t gid = wb + 32 * i + lane;
                note_nonfinite_raw<LOFP_DTYPE_BF16, 8>(p.ws, raw, 0, p.k, 0, gid * 8);
                float g[8], bmax = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    g[j] = fmul(raw_elem<LOFP_DTYPE_BF16>(raw, j), global);
                    const float a = fabs_(g[j]);
                    if (a > bmax) bmax = a; /* NaN never wins: the same max in any order */
                }
                /* both lanes of the block are here (same block maximum and scale byte) */
                const unsigned pair = 3u << (lane & ~1);
                const float ob = __shfl_xor_sync(pair, bmax, 1);
                if (ob > bmax) bmax = ob;
                float q;
                sbyte = nvfp4_scale(bmax, &q);
                const float r = frcp(q);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float a = fabs_(g[j]);
                    const float qq = is_finite_bits(f2u(a)) ? div_markstein(a, q, r) : a;
                    out |= (e2m1_rne_fast(qq) | ((f2u(g[j]) >> 31) << 3)) << (4 * j);
                }
            }
            cp[32 * i] = out;
            if (h == (i & 1)) sp[16 * i] = (uint8_t)sbyte;
        }
    }
}


} // namespace

lofp_status lofpcu::quantize_nvfp4(const lofp_scheme *s, lofp_dtype dt, BQParams &p,
                                   bool have_global, float global, int vec, cudaStream_t st)
{
    const int sms = sm_count();
    if (s->two_level && !have_global) {
        p.amax_bits = &p.ws->amax_bits;
        p.reverse = 1;
        const size_t n = p.rows * p.k;
        const bool av = (n % 8 == 0) && (((uintptr_t)p.x & 15) == 0);
        void (*amax)(const void *, size_t, DevWs *) = with_dtype(dt, [&](auto D) {
            constexpr int DT = decltype(D)::value;
            return av ? amax_kernel<DT, true> : amax_kernel<DT, false>;
        });
        amax<<<(unsigned)(sms * 4), 512, 0, st>>>(p.x, n, p.ws);
        LOFP_CU_LAUNCH();
    } else {
        p.global = have_global ? global : 1.0f;
    }
    const size_t total = p.rows * p.nb;
    const bool rne_vec = vec && s->rounding == LOFP_RNE;
    /* the linear scale layout only: for the swizzled and packed layouts the flat kernel's
     * per-slot scale addressing measured slower than nvfp4_fast_kernel (H200,
     * swizzle-128x4 two-level 8192^2: 107.5 us against 101.3), so they stay there */
    if (rne_vec && dt == LOFP_DTYPE_BF16 && p.L.layout == LOFP_LAYOUT_LINEAR) {
        /* warp items of 64 blocks; a grid of 8 CTAs per SM (two waves at the 4 resident CTAs
         * per SM) whose warps loop over the items, each copying its next item while it
         * encodes one. A sweep on an H200 of the CTAs per SM at 3 resident (two-level 8192^2,
         * us): one item per warp 97.4, 1: 106.1, 2: 91.4, 3 (one wave): 90.9, 4: 90.2,
         * 8: 88.7 -- more warps with an item in flight, later CTAs filling SMs whose
         * earlier ones finished first. */
        const size_t items = (total * 2 + 127) / 128;
        size_t g = (items + 7) / 8;
        if (g > (size_t)sms * 8) g = (size_t)sms * 8;
        nvfp4_bf16_flat_kernel<<<(unsigned)g, 256, 0, st>>>(p);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    if (rne_vec) {
        /* two blocks per thread when the row holds an even number of them */
        const bool two = p.nb % 2 == 0;
        void (*kern)(BQParams) = with_dtype(dt, [&](auto D) {
            constexpr int DT = decltype(D)::value;
            return two ? nvfp4_fast_kernel<DT, 32> : nvfp4_fast_kernel<DT, 16>;
        });
        const size_t threads = two ? total / 2 : total;
        kern<<<(unsigned)((threads + 255) / 256), 256, 0, st>>>(p);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    void (*kern)(BQParams, int) = with_dtype(dt, [&](auto D) {
        return with_rounding((int)s->rounding, [&](auto M) {
            return nvfp4_kernel<decltype(D)::value, decltype(M)::value>;
        });
    });
    kern<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(p, vec);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

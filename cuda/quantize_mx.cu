/* quantize_mx.cu -- the MX family (MXFP4/6/8, MXINT8, tilelang-mxfp8, any block that is a
 * multiple of 32), bit-identical to the CPU library.
 *
 * Kernels, one per shape class (quantize_mx below picks it):
 *   mx_generic_kernel       blocks other than 32/64/128/256 (up to 1024): one thread per block,
 *                           two passes.
 *   mxfp4_bf16_flat_kernel  MXFP4 (block 32) from bf16 under RNE, linear scales, no padding:
 *                           coalesced 16-byte loads, two elements per fma.rn.bf16x2 encoder step.
 *   mx_fast_kernel          RNE, no padding, aligned input: block/32 lanes x 32 elements, packed
 *                           integer block maxima, fp32-pipe rounding (mf_mag_rne_magic).
 *   mx_kernel               everything else (ties-to-zero, ties-away, stochastic; padded or
 *                           unaligned rows; E4M3/E5M2 when the native cvt differs from the
 *                           integer encoder on this device): block/16 lanes x 16 elements, the
 *                           E8M0 rule in integer code, elements x * 2^(127-e) (exact).
 */
#include <stdint.h>
#include <string.h>

#include "quantize_common.cuh"

using namespace lofpcu;

namespace {

/* ---- MX family: lg = block/16 lanes x 16 elements per block (block 32..256) ---- */
template <int DT, int ELEM, int MODE>
__global__ void __launch_bounds__(256) mx_kernel(BQParams p, int lg_log2, int vec)
{
    const int lg = 1 << lg_log2;
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t total = p.rows * p.nb;
    size_t gid = tid >> lg_log2;
    const int li = (int)(tid & (size_t)(lg - 1));
    const bool active = gid < total;
    if (!active) gid = 0;
    size_t r, b;
    split_gid(gid, p.nb, r, b);
    const size_t j0 = b * (size_t)(16 * lg) + (size_t)li * 16;

    float v[16];
    load_row16<DT>(p.x, p.k, r, j0, vec != 0, v);
    float amax = 0.0f;
    int fin = 1;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const float a = fabs_(v[i]);
        if (!is_finite_bits(f2u(a))) fin = 0;
        else if (a > amax) amax = a;
    }
    if (!fin && active) note_nonfinite(p.ws, v, 16, p.k, r, j0);
    for (int o = 1; o < lg; o <<= 1) {
        const float a = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
        const int f = __shfl_xor_sync(0xFFFFFFFFu, fin, o);
        amax = a > amax ? a : amax;
        fin &= f;
    }
    if (!active) return;
    uint32_t sb;
    uint32_t out[4] = {0u, 0u, 0u, 0u};
    if (!fin) {
        sb = 0xFF;
        if (li == 0) atomicAdd(&p.ws->nonfinite_blocks, 1ull);
    } else {
        sb = mx_scale_byte(ELEM, p.rule, p.amax_floor, p.ceil_clamp, amax);
        const float inv = e8m0_recip(sb);
        const unsigned long long base = (unsigned long long)(r * p.kp + j0);
        if (ELEM == T_E2M1) {
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const float e = fmul(v[i], inv);
                uint32_t c;
                if (MODE != R_STOCH) c = e2m1_code<MODE>(e);
                else c = encode_mf(mf_of(T_E2M1), e, R_STOCH, false, stochastic_bits(p.seed, base + i));
                out[i >> 3] |= c << (4 * (i & 7));
            }
        } else if ((ELEM == T_E4M3 || ELEM == T_E5M2) && MODE == R_RNE && !p.generic) {
#pragma unroll
            for (int i = 0; i < 16; i += 2) {
                const float e0 = fmul(v[i], inv), e1 = fmul(v[i + 1], inv);
                unsigned short h;
                if (ELEM == T_E4M3)
                    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(h) : "f"(e0), "f"(e1));
                else
                    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %2, %1;" : "=h"(h) : "f"(e0), "f"(e1));
                out[i >> 2] |= (uint32_t)h << (8 * (i & 3));
            }
        } else {
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const float e = fmul(v[i], inv);
                const uint32_t rb = MODE == R_STOCH ? stochastic_bits(p.seed, base + i) : 0u;
                out[i >> 2] |= (encode_elem(ELEM, e, MODE, rb) & 0xFFu) << (8 * (i & 3));
            }
        }
    }
    if (ELEM == T_E2M1) *(uint2 *)(p.codes + (r * p.kp + j0) / 2) = make_uint2(out[0], out[1]);
    else *(uint4 *)(p.codes + r * p.kp + j0) = make_uint4(out[0], out[1], out[2], out[3]);
    if (li == 0) p.scales[scale_off(p.L, r, b)] = (uint8_t)sb;
}


/* MX family, RNE: lg = block/32 lanes x 32 elements per block, vector loads. */
template <int DT, int ELEM>
__global__ void __launch_bounds__(256) mx_fast_kernel(BQParams p, int lg_log2)
{
    const int lg = 1 << lg_log2;
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t total = p.rows * p.nb;
    size_t gid = tid >> lg_log2;
    const int li = (int)(tid & (size_t)(lg - 1));
    const bool active = gid < total;
    if (!active) gid = 0;
    size_t r, b;
    split_gid(gid, p.nb, r, b);
    const size_t j0 = b * (size_t)(32 * lg) + (size_t)li * 32;

    uint32_t raw[32 / RawT<DT>::per_word];
    load_raw<DT, 32>(p.x, r * p.k + j0, raw);
    uint32_t mm = raw_magmax16<DT>(raw, 0), m1 = raw_magmax16<DT>(raw, 16);
    mm = m1 > mm ? m1 : mm;
    for (int o = 1; o < lg; o <<= 1) {
        const uint32_t t = __shfl_xor_sync(0xFFFFFFFFu, mm, o);
        mm = t > mm ? t : mm;
    }
    if (!active) return;
    const bool fin = mag_finite<DT>(mm);
    uint32_t sb;
    uint32_t out[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    if (!fin) {
        sb = 0xFF;
        note_nonfinite_raw<DT, 32>(p.ws, raw, 0, p.k, r, j0);
        if (li == 0) atomicAdd(&p.ws->nonfinite_blocks, 1ull);
    } else {
        sb = mx_scale_byte(ELEM, p.rule, p.amax_floor, p.ceil_clamp, mag_value<DT>(mm));
        const float inv = e8m0_recip(sb);
        if (ELEM == T_E2M1) {
#pragma unroll
            for (int i = 0; i < 32; i++) {
                const float e = fmul(raw_elem<DT>(raw, i), inv);
                const uint32_t c = with_sign<0, 3>(e2m1_rne_fma_bits(fabsf(e)), e, p.pms);
                out[i >> 3] = pack_mul<0, 4>(i & 7, c, p.pm[i & 7], out[i >> 3]);
            }
#pragma unroll
            for (int w = 0; w < 4; w++) out[w] -= 0x4A800000u * 0x11111111u;
        } else if (ELEM == T_E2M3 || ELEM == T_E3M2) {
            constexpr int emin = ELEM == T_E2M3 ? 0 : -2, mb = ELEM == T_E2M3 ? 3 : 2;
            constexpr float mx = ELEM == T_E2M3 ? 7.5f : 28.0f;
#pragma unroll
            for (int i = 0; i < 32; i++) {
                const float e = fmul(raw_elem<DT>(raw, i), inv);
                const uint32_t c = with_sign<23 - mb, 5>(mf_rne_magic_bits(e, emin, mb, mx), e, p.pms);
                out[i >> 2] = pack_mul<23 - mb, 8>(i & 3, c, p.pm[i & 3], out[i >> 2]);
            }
        } else if (ELEM == T_MXINT8) {
#pragma unroll
            for (int i = 0; i < 32; i++)
                out[i >> 2] |= mxint8_rne_magic(fmul(raw_elem<DT>(raw, i), inv)) << (8 * (i & 3));
        } else {
#pragma unroll
            for (int i = 0; i < 32; i += 2) {
                const float e0 = fmul(raw_elem<DT>(raw, i), inv), e1 = fmul(raw_elem<DT>(raw, i + 1), inv);
                unsigned short h;
                if (ELEM == T_E4M3)
                    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(h) : "f"(e0), "f"(e1));
                else
                    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %2, %1;" : "=h"(h) : "f"(e0), "f"(e1));
                out[i >> 2] |= (uint32_t)h << (8 * (i & 3));
            }
        }
    }
    if (ELEM == T_E2M1) {
        *(uint4 *)(p.codes + (r * p.kp + j0) / 2) = make_uint4(out[0], out[1], out[2], out[3]);
    } else {
        uint4 *dst = (uint4 *)(p.codes + r * p.kp + j0);
        dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
        dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
    if (li == 0) p.scales[scale_off(p.L, r, b)] = (uint8_t)sb;
}


/* ---- MXFP4 from bf16, RNE, flat ----
 * Linear scales, no padding, K a multiple of 32: block g is 16-byte input words 4g..4g+3, code
 * word g (16 bytes) and scale byte g, so there is no row/column split. A warp item is 32 blocks:
 * load i of lane l is input word 128 * item + 32 i + l (each load instruction of the warp reads 512
 * contiguous bytes), i.e. quarter l % 4 of block 8 i + l / 4; the block amax comes from two
 * shuffles across the four lanes of a quarter group (two slots per 32-bit shuffle), lane l
 * computes the scale of slot l % 4 of its group and two more shuffles hand the four bytes to all
 * four lanes. The elements are encoded two per word by e2m1x2_bf16_codes (three fma.rn.bf16x2 and
 * three 16x2 mins per pair, see lofp_cuda_device.cuh) after a byte permute that pairs element j
 * with j + 4, so that four code words combine into the 8-nibble output word by three IMADs.
 * Scale bytes outside 3..248 and non-finite blocks take the fp32 path (the fast RNE kernels' code). */

__global__ void __launch_bounds__(256) mxfp4_bf16_flat_kernel(BQParams p)
{
    const size_t nblk = p.rows * p.nb, nw = nblk * 4;
    const int lane = threadIdx.x & 31;
    const uint4 *x = (const uint4 *)p.x;
    uint32_t *codes = (uint32_t *)p.codes;
    const size_t nwarps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t wb = ((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5) * 128; wb < nw; wb += nwarps * 128) {
        uint32_t w[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const size_t gid = wb + 32 * i + lane;
            uint4 t = make_uint4(0u, 0u, 0u, 0u);
            if (gid < nw) t = __ldg(x + gid);
            /* pair element j with j + 4: word j = [e_j, e_(j+4)] */
            w[i][0] = prmt(t.x, t.z, 0x5410u);
            w[i][1] = prmt(t.x, t.z, 0x7632u);
            w[i][2] = prmt(t.y, t.w, 0x5410u);
            w[i][3] = prmt(t.y, t.w, 0x7632u);
        }
        /* quarter maxima of |x| patterns, two slots per word, then across the quarter group */
        uint32_t mq[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint32_t m[2];
#pragma unroll
            for (int t = 0; t < 2; t++) {
                const int i = 2 * h + t;
                uint32_t m2 = vmax_u16x2(w[i][0] & 0x7FFF7FFFu, w[i][1] & 0x7FFF7FFFu);
                m2 = vmax_u16x2(m2, vmax_u16x2(w[i][2] & 0x7FFF7FFFu, w[i][3] & 0x7FFF7FFFu));
                m[t] = max(m2 & 0xFFFFu, m2 >> 16);
            }
            mq[h] = m[0] | (m[1] << 16);
            mq[h] = vmax_u16x2(mq[h], __shfl_xor_sync(0xFFFFFFFFu, mq[h], 1));
            mq[h] = vmax_u16x2(mq[h], __shfl_xor_sync(0xFFFFFFFFu, mq[h], 2));
        }
        /* this lane's slot: l % 4 */
        const int my = lane & 3;
        const uint32_t mm = ((my & 2) ? mq[1] : mq[0]) >> ((my & 1) * 16) & 0xFFFFu;
        const size_t myblk = wb / 4 + 8 * my + lane / 4;
        uint32_t sb = 0xFFu;
        if (myblk < nblk) {
            if (mm < 0x7F80u) {
                sb = mx_scale_byte(T_E2M1, p.rule, p.amax_floor, p.ceil_clamp, u2f(mm << 16));
            } else { /* rare: the first non-finite element of the block, read again */
                uint32_t raw[16];
                load_raw<LOFP_DTYPE_BF16, 32>(p.x, myblk * 32, raw);
                note_nonfinite_raw<LOFP_DTYPE_BF16, 32>(p.ws, raw, 0, p.k, 0, myblk * 32);
                atomicAdd(&p.ws->nonfinite_blocks, 1ull);
            }
            p.scales[myblk] = (uint8_t)sb;
        }
        /* all four scale bytes of the group to each of its lanes: byte i = slot i */
        uint32_t t = __shfl_xor_sync(0xFFFFFFFFu, sb, 1);
        const uint32_t two = (lane & 1) ? (t | (sb << 8)) : (sb | (t << 8));
        t = __shfl_xor_sync(0xFFFFFFFFu, two, 2);
        const uint32_t four = (lane & 2) ? (t | (two << 16)) : (two | (t << 16));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const size_t gid = wb + 32 * i + lane;
            if (gid >= nw) break;
            const uint32_t sbi = (four >> (8 * i)) & 0xFFu;
            uint32_t out;
            if (sbi >= 3u && sbi <= 248u) {
                const uint32_t cb = ((sbi + 6u) << 7) * 0x10001u;
                uint32_t c[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    /* codes + bits(C) per half, the signs moved to bits 3 and 19 */
                    c[j] = e2m1x2_bf16_codes(w[i][j] & 0x7FFF7FFFu, cb) + ((w[i][j] & 0x80008000u) >> 12);
                }
                /* nibble j = element j (low halves), nibble j + 4 = element j + 4 (high halves) */
                out = (c[0] + c[1] * 16u) + (c[2] + c[3] * 16u) * 256u - cb * 0x1111u;
            } else if (sbi == 0xFFu) {
                out = 0u;
            } else { /* scale bytes 0..2 and 249..254: the fp32 encoder */
                const float inv = e8m0_recip(sbi);
                out = 0u;
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const float e = fmul(u2f(h ? (w[i][j] & 0xFFFF0000u) : (w[i][j] << 16)), inv);
                        const uint32_t cc = mf_mag_rne_magic(e, 0, 1, 6.0f) | ((f2u(e) >> 31) << 3);
                        out |= cc << (4 * (j + 4 * h));
                    }
            }
            codes[gid] = out;
        }
    }
}


/* ---- MX, any block (multiple of 32): one thread per block, two passes ---- */
template <int DT>
__global__ void __launch_bounds__(128) mx_generic_kernel(BQParams p, int B)
{
    const size_t gid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (gid >= p.rows * p.nb) return;
    const size_t r = gid / p.nb, b = gid % p.nb;
    float amax = 0.0f;
    int fin = 1;
    size_t firstbad = ~(size_t)0;
    for (int i = 0; i < B; i++) {
        size_t j = b * B + i;
        float v = j < p.k ? load1<DT>(p.x, r * p.k + j) : 0.0f;
        float a = fabs_(v);
        if (!is_finite_bits(f2u(a))) {
            if (fin) firstbad = r * p.k + j;
            fin = 0;
        } else if (a > amax) amax = a;
    }
    uint32_t sb = 0xFF;
    float inv = 0.0f;
    if (!fin) {
        atomicMin(&p.ws->first_bad, (unsigned long long)firstbad);
        atomicAdd(&p.ws->nonfinite_blocks, 1ull);
    } else {
        sb = mx_scale_byte(p.elem, p.rule, p.amax_floor, p.ceil_clamp, amax);
        inv = e8m0_recip(sb);
    }
    const bool fp4 = p.elem == T_E2M1;
    for (int i = 0; i < B; i += 2) {
        uint32_t c2[2];
        for (int t = 0; t < 2; t++) {
            size_t j = b * B + i + t;
            uint32_t c = 0;
            if (fin) {
                float v = j < p.k ? load1<DT>(p.x, r * p.k + j) : 0.0f;
                float e = fmul(v, inv);
                uint32_t rb = p.mode == R_STOCH ? stochastic_bits(p.seed, r * p.kp + j) : 0u;
                c = encode_elem(p.elem, e, p.mode, rb);
            }
            c2[t] = c;
        }
        size_t j = b * B + i;
        if (fp4) p.codes[(r * p.kp + j) / 2] = (uint8_t)((c2[0] & 0xF) | ((c2[1] & 0xF) << 4));
        else {
            p.codes[r * p.kp + j] = (uint8_t)c2[0];
            p.codes[r * p.kp + j + 1] = (uint8_t)c2[1];
        }
    }
    p.scales[scale_off(p.L, r, b)] = (uint8_t)sb;
}


} // namespace

lofp_status lofpcu::quantize_mx(const lofp_scheme *s, lofp_dtype dt, BQParams &p, int vec,
                                cudaStream_t st)
{
    const uint32_t B = s->block;
    const size_t total = p.rows * p.nb;
    if (!(B == 32 || B == 64 || B == 128 || B == 256)) {
        void (*kern)(BQParams, int) = with_dtype(dt, [](auto D) {
            return mx_generic_kernel<decltype(D)::value>;
        });
        kern<<<(unsigned)((total + 127) / 128), 128, 0, st>>>(p, (int)B);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    const int lgl = B == 32 ? 1 : B == 64 ? 2 : B == 128 ? 3 : 4; /* lanes = block / 16 */
    const bool rne_vec = vec && s->rounding == LOFP_RNE;
    if (rne_vec && dt == LOFP_DTYPE_BF16 && s->elem == LOFP_ELEM_E2M1 && B == 32 &&
        p.L.layout == LOFP_LAYOUT_LINEAR) {
        /* one warp item (32 blocks) per warp, all at once: the one-wave grid-stride variant of
         * the flat dequantize measured slower (uneven end of the wave) than a one-shot grid */
        const size_t items = (total + 31) / 32;
        size_t g = (items + 7) / 8;
        if (g > 0x40000000u) g = 0x40000000u; /* the kernel loops past it */
        mxfp4_bf16_flat_kernel<<<(unsigned)g, 256, 0, st>>>(p);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    if (rne_vec && !p.generic) {
        /* 32 elements per lane: block/32 lanes per block */
        void (*kern)(BQParams, int) = with_dtype(dt, [&](auto D) {
            return with_mx_elem(p.elem, [&](auto E) {
                return mx_fast_kernel<decltype(D)::value, decltype(E)::value>;
            });
        });
        kern<<<(unsigned)(((total << (lgl - 1)) + 255) / 256), 256, 0, st>>>(p, lgl - 1);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    void (*kern)(BQParams, int, int) = with_dtype(dt, [&](auto D) {
        return with_mx_elem(p.elem, [&](auto E) {
            return with_rounding((int)s->rounding, [&](auto M) {
                return mx_kernel<decltype(D)::value, decltype(E)::value, decltype(M)::value>;
            });
        });
    });
    kern<<<(unsigned)(((total << lgl) + 255) / 256), 256, 0, st>>>(p, lgl, vec);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

/* lofp_cuda_kern.cuh -- device-only building blocks shared by quantize.cu and uqcache.cu:
 * dense loads, the in-warp UltraQuant group encoder, the warp butterfly and code stores. */
#ifndef LOFP_CUDA_KERN_CUH
#define LOFP_CUDA_KERN_CUH

#include <cuda_fp16.h>

#include "lofp_cuda_device.cuh"
#include "lofp/lofp.h"

namespace lofpcu {

template <int DT> __device__ __forceinline__ float load1(const void *x, size_t i)
{
    if (DT == LOFP_DTYPE_F32) return ((const float *)x)[i];
    if (DT == LOFP_DTYPE_BF16) return u2f((uint32_t)((const uint16_t *)x)[i] << 16);
    return __half2float(((const __half *)x)[i]);
}

/* 8 consecutive elements starting at i (16-byte aligned for 16-bit types, 32 for fp32) */
template <int DT> __device__ __forceinline__ void load8(const void *x, size_t i, float v[8])
{
    if (DT == LOFP_DTYPE_F32) {
        const float4 *p = (const float4 *)((const float *)x + i);
        float4 a = __ldg(p), b = __ldg(p + 1);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
        uint4 w = __ldg((const uint4 *)((const uint16_t *)x + i));
        uint32_t ww[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int t = 0; t < 4; t++) {
            if (DT == LOFP_DTYPE_BF16) {
                v[2 * t] = u2f(ww[t] << 16);
                v[2 * t + 1] = u2f(ww[t] & 0xFFFF0000u);
            } else {
                v[2 * t] = __half2float(__ushort_as_half((unsigned short)(ww[t] & 0xFFFF)));
                v[2 * t + 1] = __half2float(__ushort_as_half((unsigned short)(ww[t] >> 16)));
            }
        }
    }
}

/* Encodes one group held by GL consecutive lanes, E elements per lane (E * GL == 32). Returns the
 * scale byte; codes[i] are the 4-bit codes of the lane's elements. */
template <int E>
__device__ __forceinline__ uint32_t uq_group(const float *v, float c, const uint32_t *thr,
                                             uint32_t *codes, int *nonfinite)
{
    constexpr int GL = 32 / E;
    /* the largest |v| as a bit pattern: non-negative floats order like their patterns, and a
     * pattern >= 0x7F800000 means some element is Inf or NaN (then the group encodes as zeros) */
    uint32_t mb = 0;
#pragma unroll
    for (int i = 0; i < E; i++) mb = max(mb, f2u(v[i]) & 0x7FFFFFFFu);
#pragma unroll
    for (int o = 1; o < GL; o <<= 1) mb = max(mb, (uint32_t)__shfl_xor_sync(0xFFFFFFFFu, mb, o));
    const int fin = mb < 0x7F800000u;
    const float amax = u2f(mb);
    const float s_raw = fmul(amax, c);
    *nonfinite = !fin;
    if (!fin || !(s_raw > 0.0f) || !is_finite_bits(f2u(s_raw))) {
#pragma unroll
        for (int i = 0; i < E; i++) codes[i] = 0;
        return 0;
    }
    const int e = uq_exponent(s_raw, thr);
    const float inv = pow2_neg(e);
#pragma unroll
    for (int i = 0; i < E; i++) codes[i] = uq_code(fmul(v[i], inv));
    return (uint32_t)(e + 127);
}

/* Encodes the 16 elements v[0..15] of a lane whose group of 32 is completed by lane ^ 1: the
 * same scale byte and codes as uq_group<16> (amax as a NaN-propagating float max: NaN or Inf
 * anywhere gives a non-finite s_raw, a zero group, as the bit-pattern max did), the codes from
 * uq_code_pair (lofp_cuda_device.cuh; cap = UQ_PAIR_CAP). w[0], w[1]: the codes of elements 0..7
 * and 8..15. */
__device__ __forceinline__ uint32_t uq_encode16(const float *v, float c, const uint32_t *thr, uint32_t cap,
                                                uint32_t w[2])
{
    float m[8];
#pragma unroll
    for (int i = 0; i < 8; i++) asm("max.NaN.f32 %0, %1, %2;" : "=f"(m[i]) : "f"(fabsf(v[i])), "f"(fabsf(v[i + 8])));
#pragma unroll
    for (int s = 4; s >= 1; s >>= 1)
#pragma unroll
        for (int i = 0; i < s; i++) asm("max.NaN.f32 %0, %1, %2;" : "=f"(m[i]) : "f"(m[i]), "f"(m[i + s]));
    const float o = __shfl_xor_sync(0xFFFFFFFFu, m[0], 1);
    float amax;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(amax) : "f"(m[0]), "f"(o));
    const float s_raw = fmul(amax, c);
    const bool ok = s_raw > 0.0f && f2u(s_raw) < 0x7F800000u; /* else a zero group */
    const int e = uq_exponent(ok ? s_raw : 1.0f, thr);
    const float inv = pow2_neg(e);
#pragma unroll
    for (int k = 0; k < 2; k++) {
        uint32_t p[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float a = v[8 * k + j], b = v[8 * k + j + 4];
            const float za = uq_nudge(a, inv), zb = uq_nudge(b, inv);
            p[j] = uq_code_pair(za, zb, uq_half_up(za), uq_half_up(zb), uq_negsign(a, inv), uq_negsign(b, inv), cap);
        }
        w[k] = ok ? uq_pack8(p[0], p[1], p[2], p[3]) : 0u;
    }
    return ok ? (uint32_t)(e + 127) : 0u;
}

/* In-warp butterfly over LPR*E elements held by LPR consecutive lanes (a power of two <= 32;
 * 32 / LPR independent rows per warp), lane l of a row holding [l*E, l*E+E). */
template <int E, int LPR = 32> __device__ __forceinline__ void butterfly_warp(float *v, int lane)
{
    const float rr = 0.70710678118654752f;
#pragma unroll
    for (int h = 1; h < E; h <<= 1) {
#pragma unroll
        for (int j = 0; j < E; j++) {
            if ((j & h) == 0) {
                float a = v[j], b = v[j + h];
                v[j] = fmul(fadd(a, b), rr);
                v[j + h] = fmul(fsub(a, b), rr);
            }
        }
    }
#pragma unroll
    for (int hl = 1; hl < LPR; hl <<= 1) { /* element stride hl * E */
        /* upper lane: o - v, lower lane: v + o, both as one fma o + s * v with s = -1 / +1 (s * v
         * is exact, so the single rounding gives the same bits as the subtraction or addition) */
        const float sg = (lane & hl) != 0 ? -1.0f : 1.0f;
#pragma unroll
        for (int j = 0; j < E; j++) {
            float o = __shfl_xor_sync(0xFFFFFFFFu, v[j], hl);
            v[j] = fmul(__fmaf_rn(v[j], sg, o), rr);
        }
    }
}

/* Stores E 4-bit codes of lane `lane` at byte offset base + lane*E/2 (E >= 2), or pairs lanes. */
template <int E>
__device__ __forceinline__ void store_codes(uint8_t *dst, const uint32_t *codes, int lane, bool active)
{
    if constexpr (E == 1) {
        uint32_t other = __shfl_down_sync(0xFFFFFFFFu, codes[0], 1);
        if (active && (lane & 1) == 0) dst[lane / 2] = (uint8_t)(codes[0] | (other << 4));
        return;
    } else {
    uint32_t w[E / 8 > 0 ? E / 8 : 1];
#pragma unroll
    for (int t = 0; t < (E / 8 > 0 ? E / 8 : 1); t++) w[t] = 0;
#pragma unroll
    for (int i = 0; i < E; i++) w[i / 8] |= codes[i] << (4 * (i % 8));
    if (!active) return;
    uint8_t *p = dst + (size_t)lane * E / 2;
    if (E == 2) *p = (uint8_t)w[0];
    else if (E == 4) *(uint16_t *)p = (uint16_t)w[0];
    else if (E == 8) *(uint32_t *)p = w[0];
    else if (E == 16) *(uint2 *)p = make_uint2(w[0], w[1]);
    else *(uint4 *)p = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

} // namespace lofpcu

#endif

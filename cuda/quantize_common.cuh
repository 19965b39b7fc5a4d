/* quantize_common.cuh -- what the quantize and dequantize kernels share (quantize.cu,
 * quantize_nvfp4.cu, quantize_mx.cu, quantize_uq.cu, dequantize.cu): the device workspace, the
 * scale layout addressing, block loads, the kernels' parameter blocks, the packing helpers of the
 * fast RNE kernels, the compile-time dispatch helpers and the one launcher per job. */
#ifndef LOFP_QUANTIZE_COMMON_CUH
#define LOFP_QUANTIZE_COMMON_CUH

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"
#include "lofp_cuda_kern.cuh"

namespace lofpcu {

struct DevWs {
    unsigned long long first_bad;        /* ~0 = none */
    unsigned long long nonfinite_blocks;
    unsigned long long logical_k, padded_k;
    unsigned int amax_bits;
    unsigned int propagate;              /* 1 if non-finite input is not an error */
};

struct LayoutP {
    int layout;
    size_t rows, cols, ma;
};

__device__ __forceinline__ size_t scale_off(const LayoutP &L, size_t r, size_t c)
{
    switch (L.layout) {
    case LOFP_LAYOUT_LINEAR: return r * L.cols + c;
    case LOFP_LAYOUT_SWIZZLE_128X4: {
        size_t ktiles = (L.cols + 3) / 4;
        return ((r / 128) * ktiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
    }
    default: return ((c / 4) * L.ma + r) * 4 + c % 4;
    }
}

/* Row r, elements j0..j0+7 of a [rows, k] tensor, zero past k. */
template <int DT, bool VEC>
__device__ __forceinline__ void load_row8(const void *x, size_t k, size_t r, size_t j0, float v[8])
{
    if (VEC) {
        load8<DT>(x, r * k + j0, v);
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = (j0 + i < k) ? load1<DT>(x, r * k + j0 + i) : 0.0f;
    }
}

/* Records the first non-finite element among v[0..n) (row r, columns j0..): atomicMin. */
__device__ __forceinline__ void note_nonfinite(DevWs *ws, const float *v, int n, size_t k, size_t r,
                                               size_t j0)
{
    for (int i = 0; i < n; i++) {
        if (!is_finite_bits(f2u(v[i])) && j0 + i < k) {
            atomicMin(&ws->first_bad, (unsigned long long)(r * k + j0 + i));
            return;
        }
    }
}

struct BQParams {
    const void *x;
    size_t rows, k, kp, nb; /* nb = blocks per row */
    uint8_t *codes, *scales;
    LayoutP L;
    int mode, elem, rule, ceil_clamp, propagate, generic, reverse;
    float amax_floor;
    unsigned long long seed;
    float global;                 /* when amax_bits == NULL */
    const unsigned int *amax_bits; /* two-level NVFP4: global from the device amax */
    float *global_out;
    DevWs *ws;
    /* fast kernels: pm[k] moves a code held at bit 23 - mbits to output slot k (a power of two
     * for mul.hi or mul.lo, see pack_mul); pms moves the input sign bit next to the code. They are
     * kernel parameters so that ptxas keeps the multiplies (FMA pipe) instead of turning them into
     * shifts (the integer pipe that bounds these kernels). */
    uint32_t pm[8], pms;
};

/* Block index -> (row, block): 32-bit division when the counts fit (they do below 2^32 blocks). */
__device__ __forceinline__ void split_gid(size_t gid, size_t nb, size_t &r, size_t &b)
{
    if ((gid | nb) < 0xFFFFFFFFull) {
        const uint32_t g32 = (uint32_t)gid, n32 = (uint32_t)nb;
        r = g32 / n32;
        b = g32 - (uint32_t)r * n32;
    } else {
        r = gid / nb;
        b = gid % nb;
    }
}

/* 16 elements of row r from column j0, zero past k; vec: two aligned 8-element loads. */
template <int DT>
__device__ __forceinline__ void load_row16(const void *x, size_t k, size_t r, size_t j0, bool vec, float v[16])
{
    if (vec) {
        load8<DT>(x, r * k + j0, v);
        load8<DT>(x, r * k + j0 + 8, v + 8);
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = (j0 + i < k) ? load1<DT>(x, r * k + j0 + i) : 0.0f;
    }
}

/* E2M1 code (sign in bit 3) of e under a compile-time rounding mode (not stochastic). */
template <int MODE> __device__ __forceinline__ uint32_t e2m1_code(float e)
{
    const float a = fabs_(e);
    const uint32_t m = MODE == R_RNE ? e2m1_rne_fast(a) : e2m1_mag_fast(a, MODE);
    return m | ((f2u(e) >> 31) << 3);
}

/* ---- Fast RNE kernels ----
 * The general kernels were bound by the integer/logic pipe (Nsight Compute: ALU 83 %, DRAM 33 %
 * for MXFP4 at 8192^2 bf16; 32.6 instructions per element). These keep their thread mapping and
 * bit-exact results but (1) take the block amax and the non-finite test from one packed
 * 16x2 integer max per two bf16/f16 elements (|x| orders like its magnitude bits, and a block is
 * finite iff its largest magnitude pattern is below the infinity pattern), and (2) encode with
 * the fp32-pipe rounding of mf_mag_rne_magic / mxint8_rne_magic. RNE only; the other modes, and
 * blocks holding a non-finite value, keep the general kernels' code. */

/* Output slot k (width W bits) of a code held at bit C: a right shift by C - W*k as the high half
 * of a multiply, or a left shift as the low half, added to acc. */
template <int C, int W>
__device__ __forceinline__ uint32_t pack_mul(int k, uint32_t code_word, uint32_t mul, uint32_t acc)
{
    uint32_t d;
    if (C - W * k > 0) /* k is a constant once the caller's loop is unrolled */ asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(code_word), "r"(mul), "r"(acc));
    else asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(code_word), "r"(mul), "r"(acc));
    return d;
}
inline uint32_t pack_mul_host(int C, int W, int K)
{
    const int sh = C - W * K;
    return sh > 0 ? 1u << (32 - sh) : 1u << (-sh);
}
/* The code word of e with e's sign as the bit above the code (bit C + SB): sign shifted by a
 * mul.hi (bit 31 -> C + SB) and merged. */
template <int C, int SB>
__device__ __forceinline__ uint32_t with_sign(uint32_t code_word, float e, uint32_t pms)
{
    uint32_t s;
    asm("mul.hi.u32 %0, %1, %2;" : "=r"(s) : "r"(f2u(e)), "r"(pms));
    return code_word | (s & (1u << (C + SB)));
}

/* NE consecutive input elements as raw words (16-byte loads): one word per fp32 element, one per
 * two 16-bit elements. Kept raw so that the block amax and the finiteness test come from packed
 * integer maxima, and converted to fp32 one element at a time as the encoder needs them. */
template <int DT> struct RawT { static constexpr int per_word = DT == LOFP_DTYPE_F32 ? 1 : 2; };

template <int DT, int NE>
__device__ __forceinline__ void load_raw(const void *x, size_t off, uint32_t (&w)[NE / RawT<DT>::per_word])
{
    const uint4 *q = DT == LOFP_DTYPE_F32 ? (const uint4 *)((const float *)x + off)
                                          : (const uint4 *)((const uint16_t *)x + off);
#pragma unroll
    for (int i = 0; i < NE / RawT<DT>::per_word / 4; i++) {
        const uint4 t = __ldg(q + i);
        w[4 * i] = t.x; w[4 * i + 1] = t.y; w[4 * i + 2] = t.z; w[4 * i + 3] = t.w;
    }
}

template <int DT> __device__ __forceinline__ float raw_elem(const uint32_t *w, int i)
{
    if (DT == LOFP_DTYPE_F32) return u2f(w[i]);
    const uint32_t x = w[i >> 1];
    if (DT == LOFP_DTYPE_BF16) return u2f((i & 1) ? (x & 0xFFFF0000u) : (x << 16));
    return __half2float(__ushort_as_half((unsigned short)((i & 1) ? (x >> 16) : (x & 0xFFFFu))));
}

/* Largest magnitude pattern of elements [i0, i0 + 16) (|x| orders like it). */
template <int DT> __device__ __forceinline__ uint32_t raw_magmax16(const uint32_t *w, int i0)
{
    if (DT == LOFP_DTYPE_F32) {
        uint32_t m = 0;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint32_t a = w[i0 + i] & 0x7FFFFFFFu;
            m = a > m ? a : m;
        }
        return m;
    }
    uint32_t m2 = 0;
#pragma unroll
    for (int t = 0; t < 8; t++) m2 = vmax_u16x2(m2, w[i0 / 2 + t] & 0x7FFF7FFFu);
    return (m2 & 0xFFFFu) > (m2 >> 16) ? (m2 & 0xFFFFu) : (m2 >> 16);
}
template <int DT> __device__ __forceinline__ bool mag_finite(uint32_t m)
{
    return DT == LOFP_DTYPE_F32 ? m < 0x7F800000u : DT == LOFP_DTYPE_BF16 ? m < 0x7F80u : m < 0x7C00u;
}
template <int DT> __device__ __forceinline__ float mag_value(uint32_t m)
{
    if (DT == LOFP_DTYPE_F32) return u2f(m);
    if (DT == LOFP_DTYPE_BF16) return u2f(m << 16);
    return __half2float(__ushort_as_half((unsigned short)m));
}
/* note_nonfinite over raw elements [i0, i0 + N) of a run starting at column j0 of row r (unrolled,
 * so that the raw words stay in registers) */
template <int DT, int N>
__device__ __forceinline__ void note_nonfinite_raw(DevWs *ws, const uint32_t *w, int i0, size_t k,
                                                   size_t r, size_t j0)
{
    int first = -1;
#pragma unroll
    for (int i = N - 1; i >= 0; i--)
        if (!is_finite_bits(f2u(raw_elem<DT>(w, i0 + i)))) first = i;
    if (first >= 0) atomicMin(&ws->first_bad, (unsigned long long)(r * k + j0 + i0 + first));
}


/* ---- UltraQuant ---- */
struct UQParams {
    const void *x;
    size_t rows, k, kp;
    uint8_t *codes, *scales;
    LayoutP L;
    float c;
    int rotate, dense;
    float hd; /* dense entry fl(1/sqrt(kp)) */
    DevWs *ws;
    UqThr thr;
};


/* ---- dequantize ---- */
struct DQParams {
    const uint8_t *codes, *scales;
    LayoutP L;
    size_t rows, k, kp;
    int fam; /* 0 nvfp4, 1 mx, 2 uq */
    int elem, block, out_dt;
    int dec; /* NVFP4: *global is a decode multiplier (lofp/lofp_cuda.h) */
    const float *global;
    void *out;
};


/* ---- compile-time dispatch ----
 * Each calls f with the run-time value as a std::integral_constant (so that f can name a kernel
 * template instantiation) and returns what f returns: the launchers below pick a kernel pointer
 * this way and launch it once. */
template <int V> using IntC = std::integral_constant<int, V>;

/* dt: F32, BF16 or F16 (validated by the caller) */
template <class F> auto with_dtype(lofp_dtype dt, F &&f) -> decltype(f(IntC<LOFP_DTYPE_F32>()))
{
    if (dt == LOFP_DTYPE_F32) return f(IntC<LOFP_DTYPE_F32>());
    if (dt == LOFP_DTYPE_BF16) return f(IntC<LOFP_DTYPE_BF16>());
    return f(IntC<LOFP_DTYPE_F16>());
}
/* mode: a lofp_rounding (R_*) */
template <class F> auto with_rounding(int mode, F &&f) -> decltype(f(IntC<R_RNE>()))
{
    switch (mode) {
    case R_RNE: return f(IntC<R_RNE>());
    case R_TTZ: return f(IntC<R_TTZ>());
    case R_TAWAY: return f(IntC<R_TAWAY>());
    default: return f(IntC<R_STOCH>());
    }
}
/* elem: an MX element type (T_E2M1 .. T_E5M2, else MXINT8) */
template <class F> auto with_mx_elem(int elem, F &&f) -> decltype(f(IntC<T_E2M1>()))
{
    switch (elem) {
    case T_E2M1: return f(IntC<T_E2M1>());
    case T_E2M3: return f(IntC<T_E2M3>());
    case T_E3M2: return f(IntC<T_E3M2>());
    case T_E4M3: return f(IntC<T_E4M3>());
    case T_E5M2: return f(IntC<T_E5M2>());
    default: return f(IntC<T_MXINT8>());
    }
}

/* ---- the jobs ----
 * Validates the arguments shared by quantize and dequantize, fills the padded K and the layout
 * descriptor (quantize.cu). */
lofp_status check_quant_args(const lofp_scheme *s, lofp_dtype dt, size_t rows, size_t k,
                             lofp_layout layout, size_t *kp_out, LayoutP *L);

/* One launcher per quantize job, called by quantize_impl (quantize.cu) once the workspace is
 * initialised and p is filled; each picks its kernel by shape (vec: no padding, K % 16 == 0 and
 * x 32-byte aligned) and launches it on st. */
lofp_status quantize_nvfp4(const lofp_scheme *s, lofp_dtype dt, BQParams &p, bool have_global,
                           float global, int vec, cudaStream_t st); /* quantize_nvfp4.cu */
lofp_status quantize_mx(const lofp_scheme *s, lofp_dtype dt, BQParams &p, int vec,
                        cudaStream_t st);                          /* quantize_mx.cu */
lofp_status quantize_uq(lofp_dtype dt, const UQParams &p, cudaStream_t st); /* quantize_uq.cu */

} // namespace lofpcu

#endif

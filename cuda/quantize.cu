/* quantize.cu -- block quantize / dequantize kernels (NVFP4 one- and two-level, the MX family,
 * tilelang-mxfp8, UltraQuant with the butterfly or dense Hadamard), bit-identical to the CPU
 * library. Built with -fmad=false; every fp32 step is an explicit _rn intrinsic (see
 * lofp_cuda_device.cuh). Scales are written straight into the requested layout.
 *
 * Kernels (docs/CUDA.md gives each one's route and the measurements behind it):
 *   amax_kernel      tensor-wide max |x| (uint max of the bit patterns) for two-level NVFP4, plus
 *                    the first non-finite index; one atomicMax per CTA.
 *   nvfp4_kernel     one thread per 16-element block (two 16-byte bf16 loads); the
 *                    per-element division g / bq is Markstein's correctly rounded iteration on the
 *                    block's reciprocal; E2M1 by midpoint counting. Runs in reverse block order
 *                    after the amax pass so that its first CTAs hit the L2 lines the amax pass
 *                    touched last.
 *   mx_kernel        block/16 lanes per block (block 32..256), 16 elements each; E8M0 rule in
 *                    integer code; elements x * 2^(127-e) (exact, equal to the CPU's division);
 *                    E4M3/E5M2 through the native cvt.rn.satfinite (probed against the integer
 *                    encoder once per device; the integer encoder where they differ), others
 *                    integer.
 *   mx_generic_kernel  one thread per block, any block that is a multiple of 32 (two passes).
 *   nvfp4_bf16_flat_kernel  NVFP4 from bf16 under RNE, no padding, linear scales:
 *                    coalesced 16-byte cp.async copies (the next item in flight), two lanes
 *                    per block, reverse item order, signs and the code cap once per 8-element word.
 *   mxfp4_bf16_flat_kernel  MXFP4 from bf16 under RNE with linear scales and no padding: coalesced
 *                    16-byte loads, two elements per fma.rn.bf16x2 encoder step.
 *   uq_warp_kernel   one warp per row, padded K = 32*E (32..1024): butterfly stages in registers
 *                    and across lanes (shfl_xor), group amax across 32/E lanes.
 *   uq_smem_kernel   one CTA per row in shared memory: larger K and the dense Hadamard.
 *   dequant_kernel   one thread per output element.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>
#include <mutex>

#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"
#include "lofp_cuda_kern.cuh"

using namespace lofpcu;

/* ------------------------------------------------------------------------------------------ */
/* Host bookkeeping: errors, device properties, the UltraQuant threshold table                 */
/* ------------------------------------------------------------------------------------------ */

static thread_local char t_err[512];

void lofpcu::record_cuda_error(cudaError_t e, const char *what, const char *file, int line)
{
    snprintf(t_err, sizeof t_err, "%s: %s (%s:%d: %s)", cudaGetErrorName(e), cudaGetErrorString(e),
             file, line, what);
}
void lofpcu::clear_cuda_error(void) { t_err[0] = 0; }

extern "C" const char *lofp_cuda_last_error(void) { return t_err; }

extern "C" const char *lofp_cuda_status_name(lofp_status s)
{
    if (s == LOFP_CUDA_ERR_RUNTIME) return "CUDA runtime error";
    return lofp_status_name(s);
}

extern "C" int lofp_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

int lofpcu::sm_count(void)
{
    static int cache[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
    if (!cache[dev]) {
        int n = 0;
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
            n = 132;
        cache[dev] = n;
    }
    return cache[dev];
}

/* The CPU's exponent rule, verbatim (quant_uq.c). */
static int uq_e_cpu(float s)
{
    volatile float l = (float)log2((double)s);
    volatile float t = l + 0.5f;
    return (int)floorf(t);
}
static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static UqThr g_uq_thr;
static std::once_flag g_uq_once;

static void uq_thresholds_init(void)
{
    for (int E = -126; E <= 127; E++) {
        const uint32_t base = (uint32_t)(E + 127) << 23;
        /* smallest mantissa m with e(s) == E + 1 (binary search; the rule is monotonic) */
        uint32_t lo = 0, hi = 0x800000u;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (uq_e_cpu(bits_f(base | mid)) >= E + 1) hi = mid;
            else lo = mid + 1;
        }
        g_uq_thr.t[E + 126] = lo;
        /* verify monotonicity and the value on both sides around the threshold */
        for (int64_t d = -4096; d <= 4096; d++) {
            int64_t m = (int64_t)lo + d;
            if (m < 0 || m >= 0x800000) continue;
            int want = E + (m >= (int64_t)lo ? 1 : 0);
            if (uq_e_cpu(bits_f(base | (uint32_t)m)) != want) {
                fprintf(stderr, "lofp_cuda: UltraQuant exponent rule not monotonic at E=%d m=%lld\n",
                        E, (long long)m);
                abort();
            }
        }
    }
}

const UqThr &lofpcu::uq_thresholds(void)
{
    std::call_once(g_uq_once, uq_thresholds_init);
    return g_uq_thr;
}

/* ------------------------------------------------------------------------------------------ */
/* Device-side shared pieces                                                                  */
/* ------------------------------------------------------------------------------------------ */

namespace {

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

__global__ void ws_init_kernel(DevWs *ws, unsigned long long lk, unsigned long long pk,
                               unsigned int propagate, float *global_out, int write_one)
{
    ws->first_bad = ~0ull;
    ws->nonfinite_blocks = 0;
    ws->logical_k = lk;
    ws->padded_k = pk;
    ws->amax_bits = 0;
    ws->propagate = propagate;
    if (global_out && write_one) *global_out = 1.0f;
}

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
static uint32_t pack_mul_host(int C, int W, int K)
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
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

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

template <int DT, int E>
__global__ void __launch_bounds__(256) uq_warp_kernel(UQParams p)
{
    const int lane = threadIdx.x & 31;
    size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    const bool active = r < p.rows;
    if (!active) r = 0;
    float v[E];
    const size_t j0 = (size_t)lane * E;
    if (p.k == p.kp && E % 8 == 0 && ((uintptr_t)p.x & 15) == 0) {
#pragma unroll
        for (int t = 0; t < E; t += 8) load8<DT>(p.x, r * p.k + j0 + t, v + t);
    } else {
#pragma unroll
        for (int i = 0; i < E; i++) v[i] = (j0 + i < p.k) ? load1<DT>(p.x, r * p.k + j0 + i) : 0.0f;
    }
    if (active) {
        uint32_t bad = 0;
#pragma unroll
        for (int i = 0; i < E; i++) bad |= !is_finite_bits(f2u(v[i]));
        if (bad) note_nonfinite(p.ws, v, E, p.k, r, j0);
    }
    if (p.rotate) butterfly_warp<E>(v, lane);
    uint32_t codes[E];
    int nf;
    const uint32_t sb = uq_group<E>(v, p.c, p.thr.t, codes, &nf);
    store_codes<E>(p.codes + r * p.kp / 2, codes, lane, active);
    constexpr int GL = 32 / E;
    if (active && lane % GL == 0) {
        p.scales[scale_off(p.L, r, (size_t)lane / GL)] = (uint8_t)sb;
        if (nf) atomicAdd(&p.ws->nonfinite_blocks, 1ull);
    }
}

template <int DT>
__global__ void __launch_bounds__(256) uq_smem_kernel(UQParams p)
{
    extern __shared__ float sbuf[];
    float *x = sbuf;
    const size_t r = blockIdx.x;
    const size_t kp = p.kp;
    for (size_t j = threadIdx.x; j < kp; j += blockDim.x) {
        float v = j < p.k ? load1<DT>(p.x, r * p.k + j) : 0.0f;
        if (!is_finite_bits(f2u(v))) atomicMin(&p.ws->first_bad, (unsigned long long)(r * p.k + j));
        x[j] = v;
    }
    __syncthreads();
    if (p.rotate && !p.dense) {
        const float rr = 0.70710678118654752f;
        for (size_t h = 1; h < kp; h <<= 1) {
            for (size_t q = threadIdx.x; q < kp / 2; q += blockDim.x) {
                size_t i = (q / h) * 2 * h + q % h;
                float a = x[i], b = x[i + h];
                x[i] = fmul(fadd(a, b), rr);
                x[i + h] = fmul(fsub(a, b), rr);
            }
            __syncthreads();
        }
    } else if (p.rotate) {
        float *y = sbuf + kp;
        for (size_t i = threadIdx.x; i < kp; i += blockDim.x) {
            float acc = 0.0f;
            for (size_t j = 0; j < kp; j++) {
                float hij = (__popcll((unsigned long long)(i & j)) & 1) ? -p.hd : p.hd;
                acc = fadd(acc, fmul(x[j], hij));
            }
            y[i] = acc;
        }
        __syncthreads();
        x = y;
    }
    for (size_t g = threadIdx.x; g < kp / 32; g += blockDim.x) {
        const float *v = x + g * 32;
        float amax = 0.0f;
        int fin = 1;
        for (int i = 0; i < 32; i++) {
            float a = fabs_(v[i]);
            if (!is_finite_bits(f2u(a))) fin = 0;
            else if (a > amax) amax = a;
        }
        const float s_raw = fmul(amax, p.c);
        uint32_t w[4] = {0, 0, 0, 0};
        uint32_t sb = 0;
        if (!fin) atomicAdd(&p.ws->nonfinite_blocks, 1ull);
        if (fin && s_raw > 0.0f && is_finite_bits(f2u(s_raw))) {
            const int e = uq_exponent(s_raw, p.thr.t);
            const float inv = pow2_neg(e);
            sb = (uint32_t)(e + 127);
            for (int i = 0; i < 32; i++) w[i / 8] |= uq_code(fmul(v[i], inv)) << (4 * (i % 8));
        }
        *(uint4 *)(p.codes + (r * kp + g * 32) / 2) = make_uint4(w[0], w[1], w[2], w[3]);
        p.scales[scale_off(p.L, r, g)] = (uint8_t)sb;
    }
}

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

/* NVFP4 value of one code: code * scale / global, or with a decode multiplier code * fl(scale * d) */
__device__ __forceinline__ float nvfp4_dq_one(uint32_t code, float sv, float global, int dec)
{
    return dec ? fmul(e2m1_value(code), fmul(sv, global)) : fdiv(fmul(e2m1_value(code), sv), global);
}

__global__ void dequant_kernel(DQParams p)
{
    const size_t n = p.rows * p.k;
    const float global = p.global ? *p.global : 1.0f;
    const bool fp4 = p.elem == T_E2M1;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
         idx += (size_t)gridDim.x * blockDim.x) {
        size_t r, j;
        if (n < 0xFFFFFFFFull) {
            const uint32_t i32 = (uint32_t)idx, k32 = (uint32_t)p.k;
            r = i32 / k32;
            j = i32 - (uint32_t)r * k32;
        } else {
            r = idx / p.k;
            j = idx % p.k;
        }
        const size_t f = r * p.kp + j;
        uint32_t code = fp4 ? (p.codes[f >> 1] >> ((f & 1) * 4)) & 0xFu : p.codes[f];
        uint32_t sb = p.scales[scale_off(p.L, r, j / p.block)];
        float y;
        if (p.fam == 0) {
            y = nvfp4_dq_one(code, decode_mf(T_UE4M3, sb), global, p.dec);
        } else if (p.fam == 1) {
            y = sb == 0xFF ? u2f(0x7FC00000u) : fmul(decode_elem(p.elem, code), e8m0_value(sb));
        } else {
            y = fmul(e2m1_value(code), sb ? u2f(sb << 23) : 0.0f);
        }
        if (p.out_dt == LOFP_DTYPE_F32) ((float *)p.out)[idx] = y;
        else if (p.out_dt == LOFP_DTYPE_BF16) ((uint16_t *)p.out)[idx] = f32_to_bf16(y);
        else ((uint16_t *)p.out)[idx] = f32_to_f16(y);
    }
}


/* Vectorised dequantize: one thread per 16 elements of a row (one scale), one 8- or 16-byte code
 * load, 16-byte stores; the same per-element arithmetic as dequant_kernel. FAM: 0 NVFP4, 1 MX
 * with E2M1 codes, 2 MX with byte codes, 3 UltraQuant. */
template <int OUT, int FAM>
__global__ void __launch_bounds__(256) dequant_fast_kernel(DQParams p)
{
    const size_t nch = p.k / 16, total = p.rows * nch;
    const size_t gid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (gid >= total) return;
    size_t r, c;
    split_gid(gid, nch, r, c);
    const size_t j0 = c * 16;
    const uint32_t sb = __ldg(p.scales + scale_off(p.L, r, j0 / (size_t)p.block));
    uint32_t cw[4];
    if (FAM != 2) {
        const uint2 t = __ldg((const uint2 *)(p.codes + (r * p.kp + j0) / 2));
        cw[0] = t.x; cw[1] = t.y; cw[2] = cw[3] = 0u;
    } else {
        const uint4 t = __ldg((const uint4 *)(p.codes + r * p.kp + j0));
        cw[0] = t.x; cw[1] = t.y; cw[2] = t.z; cw[3] = t.w;
    }
    float y[16];
    if (FAM == 0) {
        const float global = p.global ? *p.global : 1.0f;
        const float sv = decode_mf(T_UE4M3, sb);
        float b1, b3;
        bool ok;
        if (p.dec) {
            b1 = fmul(sv, global);
            b3 = fmul(1.5f, b1);
            const float a1 = fabsf(b1), a3 = fabsf(b3);
            ok = a1 >= 0x1p-125f && a1 < 0x1p125f && a3 >= 0x1p-125f && a3 < 0x1p125f;
        } else ok = nvfp4_dq_bases(sv, global, b1, b3);
        if (ok) {
#pragma unroll
            for (int i = 0; i < 16; i++) y[i] = nvfp4_dq_value((cw[i >> 3] >> (4 * (i & 7))) & 0xFu, b1, b3);
        } else {
#pragma unroll
            for (int i = 0; i < 16; i++) y[i] = nvfp4_dq_one((cw[i >> 3] >> (4 * (i & 7))) & 0xFu, sv, global, p.dec);
        }
    } else if (FAM == 1 || FAM == 3) {
        const float sv = FAM == 1 ? e8m0_value(sb) : (sb ? u2f(sb << 23) : 0.0f);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const float v = fmul(e2m1_value((cw[i >> 3] >> (4 * (i & 7))) & 0xFu), sv);
            y[i] = FAM == 1 && sb == 0xFF ? u2f(0x7FC00000u) : v;
        }
    } else {
        const float sv = e8m0_value(sb);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const float v = fmul(decode_elem(p.elem, (cw[i >> 2] >> (8 * (i & 3))) & 0xFFu), sv);
            y[i] = sb == 0xFF ? u2f(0x7FC00000u) : v;
        }
    }
    const size_t o = r * p.k + j0;
    if (OUT == LOFP_DTYPE_F32) {
        float4 *d = (float4 *)((float *)p.out + o);
#pragma unroll
        for (int i = 0; i < 4; i++) d[i] = make_float4(y[4 * i], y[4 * i + 1], y[4 * i + 2], y[4 * i + 3]);
    } else {
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t a = OUT == LOFP_DTYPE_BF16 ? f32_to_bf16(y[2 * i]) : f32_to_f16(y[2 * i]);
            const uint32_t b = OUT == LOFP_DTYPE_BF16 ? f32_to_bf16(y[2 * i + 1]) : f32_to_f16(y[2 * i + 1]);
            h[i] = a | (b << 16);
        }
        uint4 *d = (uint4 *)((uint16_t *)p.out + o);
        d[0] = make_uint4(h[0], h[1], h[2], h[3]);
        d[1] = make_uint4(h[4], h[5], h[6], h[7]);
    }
}

/* FP4 -> bf16 by byte lookup (fewer instructions per element than the per-element formula). For an E2M1 code with magnitude index m and a block whose
 * two bases b1, b3 (nvfp4_dq_bases; MX: 2^(e-127) and 1.5 * 2^(e-127)) keep every value normal,
 * the bf16 output is 2^j * bf16(b) with b = b3 for m = 3, 5, 7 and b1 otherwise (j = m/2 - 1,
 * m = 1 -> j = -1): the eight magnitudes of a block are bf16(b1), bf16(b3) with the exponent field
 * moved by -1..2 (integer adds, exact while normal), and one value is two bytes of an 8-entry
 * table. Per 4 elements: two PRMTs pick the low and the high bytes (selector = the four 3-bit
 * magnitude indices), two PRMTs interleave them into two bf16x2 words, and the code's sign bits are
 * moved to bits 15/31 by one multiply each and XORed in (the CPU XORs the sign too: -0 stays -0).
 * A block whose bases fail the range check (tiny or huge scales, scale byte 0, MX 0xFF) takes the
 * per-element CPU formula. One thread = 32 elements (one 16-byte code load, four 16-byte stores),
 * two of them per thread with both loads issued first. DEC: NVFP4 global given as a decode
 * multiplier (b1 = fl(sv * d), b3 = fl(1.5 * b1): ModelOpt's e2m1 * fl(s * s2)). */
struct DQLut { uint32_t la, lb, ha, hb; };

__device__ __forceinline__ DQLut dq_lut(uint32_t B1, uint32_t B3)
{
    const uint32_t p01 = (B1 & 0x8000u) | ((B1 - 0x80u) << 16);
    const uint32_t p23 = B1 | (B3 << 16);
    const uint32_t p45 = (B1 + 0x80u) | ((B3 + 0x80u) << 16);
    const uint32_t p67 = (B1 + 0x100u) | ((B3 + 0x100u) << 16);
    DQLut t;
    t.la = __byte_perm(p01, p23, 0x6420);
    t.ha = __byte_perm(p01, p23, 0x7531);
    t.lb = __byte_perm(p45, p67, 0x6420);
    t.hb = __byte_perm(p45, p67, 0x7531);
    return t;
}

/* 8 codes of one word -> 4 bf16x2 words */
__device__ __forceinline__ uint4 dq_word(uint32_t w, const DQLut &t)
{
    uint32_t o[4];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint32_t x = h ? w >> 16 : w;
        const uint32_t sel = x & 0x7777u, sg = x & 0x8888u;
        const uint32_t lo = __byte_perm(t.la, t.lb, sel), hi = __byte_perm(t.ha, t.hb, sel);
        o[2 * h] = __byte_perm(lo, hi, 0x5140) ^ ((sg * 0x01001000u) & 0x80008000u);
        o[2 * h + 1] = __byte_perm(lo, hi, 0x7362) ^ ((sg * 0x00010010u) & 0x80008000u);
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
}

template <int FAM, int DEC>
__device__ __noinline__ uint4 dq_slow_word(uint32_t w, uint32_t sb, float global)
{
    float y[8];
    for (int i = 0; i < 8; i++) {
        const uint32_t code = (w >> (4 * i)) & 0xFu;
        if (FAM == 0) {
            const float sv = decode_mf(T_UE4M3, sb);
            y[i] = nvfp4_dq_one(code, sv, global, DEC);
        } else {
            y[i] = sb == 0xFF ? u2f(0x7FC00000u) : fmul(e2m1_value(code), e8m0_value(sb));
        }
    }
    uint32_t o[4];
    for (int i = 0; i < 4; i++) o[i] = (uint32_t)f32_to_bf16(y[2 * i]) | ((uint32_t)f32_to_bf16(y[2 * i + 1]) << 16);
    return make_uint4(o[0], o[1], o[2], o[3]);
}

template <int FAM, int DEC>
__device__ __forceinline__ bool dq_bases_bf16(uint32_t sb, float global, uint32_t &B1, uint32_t &B3)
{
    float b1, b3;
    if (FAM == 0) {
        const float sv = decode_mf(T_UE4M3, sb);
        if (DEC) {
            b1 = fmul(sv, global);
            b3 = fmul(1.5f, b1);
            const float a1 = fabsf(b1), a3 = fabsf(b3);
            if (!(a1 >= 0x1p-125f && a1 < 0x1p125f && a3 >= 0x1p-125f && a3 < 0x1p125f)) return false;
        } else if (!nvfp4_dq_bases(sv, global, b1, b3)) return false;
    } else {
        if (sb < 2u || sb > 252u) return false;
        b1 = u2f(sb << 23);
        b3 = fmul(1.5f, b1);
    }
    B1 = f32_to_bf16(b1);
    B3 = f32_to_bf16(b3);
    return true;
}

/* One round = 8 consecutive elements (one 32-bit code word, one 16-byte store) per lane, lane-
 * contiguous across the warp (128 code bytes in, 512 bytes out per warp instruction); R rounds
 * per thread, all loads issued first. The pair (bf16(b1), bf16(b3)) depends only on the scale byte
 * (and the global), so each CTA first fills a 256-entry table in shared memory, one entry per
 * thread (0 = the block takes the per-element formula); per round a lane then needs one byte
 * load, one LDS and ~30 ALU instructions for the table and its 8 outputs. */
template <int FAM, int DEC, int FLAT>
__global__ void __launch_bounds__(256) dequant_lut_kernel(DQParams p)
{
    constexpr int R = FLAT ? 8 : 4;
    __shared__ uint32_t tab[256];
    const float global = FAM == 0 ? (p.global ? __ldg(p.global) : 1.0f) : 1.0f;
    {
        uint32_t B1, B3;
        tab[threadIdx.x] = dq_bases_bf16<FAM, DEC>(threadIdx.x, global, B1, B3) ? (B1 | (B3 << 16)) : 0u;
    }
    __syncthreads();
    const size_t n8 = p.k / 8, total = p.rows * n8; /* 8-element words */
    const int lane = threadIdx.x & 31;
    const size_t nwarps = (size_t)gridDim.x * (blockDim.x >> 5);
    if constexpr (FLAT != 0) {
        /* linear scales, no padding, K a multiple of the block: word g's codes are 32-bit word g
         * of the codes, its outputs are 16-byte word g of the output, and its scale byte is
         * g / 2 (NVFP4, two words per block) or g / 4 (MXFP4): no row/column split, fewer
         * registers, so 8 rounds of loads in flight per lane instead of 4. */
        const uint32_t *codes = (const uint32_t *)p.codes;
        uint4 *out = (uint4 *)p.out;
        for (size_t wbase = ((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5) * (32 * R); wbase < total;
             wbase += nwarps * (32 * R)) {
            uint32_t q[R], sb[R];
#pragma unroll
            for (int it = 0; it < R; it++) {
                const size_t gid = wbase + (size_t)it * 32 + lane;
                if (gid < total) {
                    q[it] = __ldg(codes + gid);
                    sb[it] = __ldg(p.scales + (gid >> (FAM == 0 ? 1 : 2)));
                }
            }
#pragma unroll
            for (int it = 0; it < R; it++) {
                const size_t gid = wbase + (size_t)it * 32 + lane;
                if (gid < total) {
                    const uint32_t e = tab[sb[it]];
                    uint4 o;
                    if (e != 0u) o = dq_word(q[it], dq_lut(e & 0xFFFFu, e >> 16));
                    else o = dq_slow_word<FAM, DEC>(q[it], sb[it], global);
                    __stcs(out + gid, o);
                }
            }
        }
    } else {
        /* grid-stride over warp items of 32 * R words, so the table is built once per CTA for many */
        for (size_t wbase = ((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5) * (32 * R); wbase < total;
             wbase += nwarps * (32 * R)) {
            uint32_t q[R], sb[R];
            size_t rr[R], cc[R];
            size_t r0, c0;
            split_gid(wbase + lane, n8, r0, c0);
#pragma unroll
            for (int it = 0; it < R; it++) {
                const size_t gid = wbase + (size_t)it * 32 + lane;
                if (gid >= total) break;
                rr[it] = r0; cc[it] = c0;
                c0 += 32;
                while (c0 >= n8) { c0 -= n8; r0++; }
                q[it] = __ldg((const uint32_t *)(p.codes + (rr[it] * p.kp + cc[it] * 8) / 2));
                sb[it] = __ldg(p.scales + scale_off(p.L, rr[it], FAM == 0 ? cc[it] / 2 : cc[it] / 4));
            }
#pragma unroll
            for (int it = 0; it < R; it++) {
                const size_t gid = wbase + (size_t)it * 32 + lane;
                if (gid >= total) break;
                const uint32_t e = tab[sb[it]];
                uint4 o;
                if (e != 0u) o = dq_word(q[it], dq_lut(e & 0xFFFFu, e >> 16));
                else o = dq_slow_word<FAM, DEC>(q[it], sb[it], global);
                __stcs((uint4 *)((uint16_t *)p.out + rr[it] * p.k + cc[it] * 8), o);
            }
        }
    }
}

/* ---- probe: the native e4m3x2 / e5m2x2 cvt against the integer encoder ---- */
__global__ void fp8_cvt_probe(unsigned long long *bad)
{
    unsigned long long nb = 0;
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (0x48000000u / 61u) + 65536u; i += stride) {
        uint32_t u;
        if (i < 0x48000000u / 61u) u = i * 61u; /* |x| < 131072: every 61st pattern */
        else {                                    /* +-64 ulps around every E4M3/E5M2 value */
            const uint32_t j = i - 0x48000000u / 61u, code = (j >> 7) & 0x7F, t = j >> 14;
            const float v = decode_mf((t & 1) ? T_E5M2 : T_E4M3, code);
            u = f2u(v) + (j & 127) - 64;
        }
        if (!is_finite_bits(u) || (u & 0x80000000u)) continue; /* NaN/Inf never reach the encoder */
        for (int sg = 0; sg < 2; sg++) {
            const float x = u2f(u | (sg ? 0x80000000u : 0u));
            unsigned short h4, h5;
            asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(h4) : "f"(x), "f"(x));
            asm("cvt.rn.satfinite.e5m2x2.f32 %0, %2, %1;" : "=h"(h5) : "f"(x), "f"(x));
            if ((h4 & 0xFF) != encode_elem(T_E4M3, x, R_RNE, 0)) nb++;
            if ((h5 & 0xFF) != encode_elem(T_E5M2, x, R_RNE, 0)) nb++;
        }
    }
    if (nb) atomicAdd(bad, nb);
}
} // namespace

/* ------------------------------------------------------------------------------------------ */
/* Host API                                                                                    */
/* ------------------------------------------------------------------------------------------ */

extern "C" size_t lofp_cuda_workspace_bytes(void) { return 64; }

static bool valid_dt(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_F32 || dt == LOFP_DTYPE_BF16 || dt == LOFP_DTYPE_F16;
}

/* Whether the native E4M3/E5M2 cvt equals the integer encoder on this device: probed once per
 * device (about 90 M conversions, well under a millisecond of GPU time, one synchronisation), and
 * the integer path is used if anything differs. */
static bool native_fp8_ok(void)
{
    static int state[64]; /* 0 unknown, 1 ok, 2 differs */
    static std::mutex mu;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    std::lock_guard<std::mutex> lk(mu);
    if (!state[dev]) {
        unsigned long long *d = NULL, h = 1;
        if (cudaMalloc(&d, 8) == cudaSuccess && cudaMemset(d, 0, 8) == cudaSuccess) {
            fp8_cvt_probe<<<sm_count() * 8, 256>>>(d);
            if (cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost) != cudaSuccess) h = 1;
        }
        if (d) cudaFree(d);
        (void)cudaGetLastError();
        state[dev] = h == 0 ? 1 : 2;
        if (h) fprintf(stderr, "lofp_cuda: native fp8 cvt differs from the encoder on %llu inputs; "
                               "using the integer path\n", h);
    }
    return state[dev] == 1;
}

/* Validates the common arguments and fills the padded K and the layout descriptor. */
static lofp_status check_q(const lofp_scheme *s, lofp_dtype dt, size_t rows, size_t k,
                           lofp_layout layout, size_t *kp_out, LayoutP *L)
{
    if (!s || lofp_scheme_validate(s) != LOFP_OK || !valid_dt(dt)) return LOFP_ERR_INVALID_ARG;
    if (rows == 0 || k == 0) return LOFP_ERR_INVALID_ARG;
    if ((int)layout < 0 || (int)layout >= LOFP_LAYOUT_COUNT_) return LOFP_ERR_INVALID_ARG;
    if (k % s->block != 0 && !s->pad) return LOFP_ERR_SHAPE;
    size_t kp = lofp_padded_k(s, k);
    if (!kp) return LOFP_ERR_SIZE_OVERFLOW;
    size_t n;
    if (__builtin_mul_overflow(rows, kp, &n) || n > ((size_t)1 << 60)) return LOFP_ERR_SIZE_OVERFLOW;
    if (s->id == LOFP_SCHEME_ULTRAQUANT && s->rotate && (kp & (kp - 1)) != 0) return LOFP_ERR_SHAPE;
    *kp_out = kp;
    L->layout = (int)layout;
    L->rows = rows;
    L->cols = kp / s->block;
    L->ma = layout == LOFP_LAYOUT_PACKED_U32_DG ? round_up_sz(rows, 4) : rows;
    return LOFP_OK;
}

static lofp_status quantize_impl(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows,
                                 size_t k, bool have_global, float global, lofp_layout layout,
                                 uint8_t *codes, uint8_t *scales, float *global_out, void *ws_v,
                                 cudaStream_t st)
{
    clear_cuda_error();
    size_t kp = 0;
    LayoutP L;
    lofp_status rc = check_q(s, dt, rows, k, layout, &kp, &L);
    if (rc != LOFP_OK) return rc;
    if (!x || !codes || !scales || !ws_v) return LOFP_ERR_INVALID_ARG;
    if (((uintptr_t)codes & 15) || ((uintptr_t)ws_v & 7)) return LOFP_ERR_INVALID_ARG;
    if (have_global && s->id == LOFP_SCHEME_NVFP4 && !(isfinite(global) && global > 0.0f))
        return LOFP_ERR_INVALID_ARG;
    const bool nv = s->id == LOFP_SCHEME_NVFP4;
    const bool uq = s->id == LOFP_SCHEME_ULTRAQUANT;
    if (!nv && !uq && s->block > 1024) return LOFP_ERR_UNSUPPORTED;
    if (uq && kp > 16384) return LOFP_ERR_UNSUPPORTED;
    DevWs *ws = (DevWs *)ws_v;
    const unsigned prop = (!nv && s->propagate_nonfinite) ? 1u : 0u;
    ws_init_kernel<<<1, 1, 0, st>>>(ws, k, kp, prop, global_out, nv ? 0 : 1);
    LOFP_CU_LAUNCH();

    /* padding bytes of the scale layout */
    const size_t lay_bytes = lofp_layout_required_bytes(rows, kp, s->block, layout);
    if (!lay_bytes) return LOFP_ERR_SIZE_OVERFLOW;
    if (layout == LOFP_LAYOUT_SWIZZLE_128X4 && (rows % 128 || L.cols % 4))
        LOFP_CU(cudaMemsetAsync(scales, 0, lay_bytes, st));
    if (layout == LOFP_LAYOUT_PACKED_U32 && L.cols % 4)
        LOFP_CU(cudaMemsetAsync(scales, 127, lay_bytes, st));
    if (layout == LOFP_LAYOUT_PACKED_U32_DG && (L.cols % 4 || rows % 4))
        LOFP_CU(cudaMemsetAsync(scales, 0, lay_bytes, st));

    const int vec = (k == kp) && (k % 16 == 0) && (((uintptr_t)x & 31) == 0);
    const bool use_fast = vec && s->rounding == LOFP_RNE;
    /* pack multipliers of the fast kernels: code bit C, slot width W, sign at C + SB */
    int pk_c = 0, pk_w = 4, pk_sb = 3; /* E2M1: e2m1_rne_fma_bits leaves the code at bit 0 */
    if (s->elem == LOFP_ELEM_E2M3) { pk_c = 20; pk_w = 8; pk_sb = 5; }
    if (s->elem == LOFP_ELEM_E3M2) { pk_c = 21; pk_w = 8; pk_sb = 5; }
    const int sms = sm_count();

    if (uq) {
        UQParams p;
        p.x = x; p.rows = rows; p.k = k; p.kp = kp; p.codes = codes; p.scales = scales; p.L = L;
        p.c = s->c; p.rotate = s->rotate; p.dense = s->hadamard == LOFP_HADAMARD_DENSE;
        p.hd = (float)(1.0 / sqrt((double)kp));
        p.ws = ws;
        p.thr = uq_thresholds();
        const bool warp = (kp & (kp - 1)) == 0 && kp >= 32 && kp <= 1024 && !(p.rotate && p.dense);
        if (warp) {
            const unsigned grid = (unsigned)((rows + 7) / 8);
#define UQW(DT, E) uq_warp_kernel<DT, E><<<grid, 256, 0, st>>>(p)
#define UQW_E(DT)                                                                              \
    switch (kp) {                                                                              \
    case 32: UQW(DT, 1); break;                                                                \
    case 64: UQW(DT, 2); break;                                                                \
    case 128: UQW(DT, 4); break;                                                               \
    case 256: UQW(DT, 8); break;                                                               \
    case 512: UQW(DT, 16); break;                                                              \
    default: UQW(DT, 32); break;                                                               \
    }
            if (dt == LOFP_DTYPE_F32) { UQW_E(LOFP_DTYPE_F32) }
            else if (dt == LOFP_DTYPE_BF16) { UQW_E(LOFP_DTYPE_BF16) }
            else { UQW_E(LOFP_DTYPE_F16) }
#undef UQW_E
#undef UQW
            LOFP_CU_LAUNCH();
            return LOFP_OK;
        }
        {
        const size_t smem = kp * sizeof(float) * ((p.rotate && p.dense) ? 2 : 1);
        if (rows > 0x7FFFFFFFu) return LOFP_ERR_UNSUPPORTED;
        const unsigned grid = (unsigned)rows;
#define UQS(DT)                                                                                \
    do {                                                                                       \
        if (smem > 48 * 1024)                                                                  \
            LOFP_CU(cudaFuncSetAttribute(uq_smem_kernel<DT>,                                   \
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)); \
        uq_smem_kernel<DT><<<grid, 256, smem, st>>>(p);                                        \
    } while (0)
        if (dt == LOFP_DTYPE_F32) UQS(LOFP_DTYPE_F32);
        else if (dt == LOFP_DTYPE_BF16) UQS(LOFP_DTYPE_BF16);
        else UQS(LOFP_DTYPE_F16);
#undef UQS
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    }

    BQParams p;
    memset(&p, 0, sizeof p);
    p.x = x; p.rows = rows; p.k = k; p.kp = kp; p.nb = kp / s->block;
    p.codes = codes; p.scales = scales; p.L = L;
    p.mode = (int)s->rounding; p.elem = (int)s->elem; p.rule = (int)s->scale_rule;
    p.ceil_clamp = s->ceil_clamp; p.propagate = s->propagate_nonfinite;
    p.generic = (s->elem == LOFP_ELEM_E4M3 || s->elem == LOFP_ELEM_E5M2) && s->rounding == LOFP_RNE &&
                !native_fp8_ok();
    p.amax_floor = s->amax_floor; p.seed = s->seed;
    p.ws = ws;
    for (int i = 0; i < 8; i++) p.pm[i] = pack_mul_host(pk_c, pk_w, i);
    p.pms = 1u << (pk_c + pk_sb + 1); /* mul.hi by 2^(C+SB+1): bit 31 -> bit C + SB */
    const size_t total = rows * p.nb;

    if (nv) {
        p.global_out = global_out;
        if (s->two_level && !have_global) {
            p.amax_bits = &ws->amax_bits;
            p.reverse = 1;
            const size_t n = rows * k;
            const unsigned grid = (unsigned)(sms * 4);
            const bool av = (n % 8 == 0) && (((uintptr_t)x & 15) == 0);
#define AMX(DT)                                                                                \
    do {                                                                                       \
        if (av) amax_kernel<DT, true><<<grid, 512, 0, st>>>(x, n, ws);                         \
        else amax_kernel<DT, false><<<grid, 512, 0, st>>>(x, n, ws);                           \
    } while (0)
            if (dt == LOFP_DTYPE_F32) AMX(LOFP_DTYPE_F32);
            else if (dt == LOFP_DTYPE_BF16) AMX(LOFP_DTYPE_BF16);
            else AMX(LOFP_DTYPE_F16);
#undef AMX
            LOFP_CU_LAUNCH();
        } else {
            p.global = have_global ? global : 1.0f;
        }
        const unsigned grid = (unsigned)((total + 255) / 256);
        /* the linear scale layout only: for the swizzled and packed layouts the flat kernel's
         * per-slot scale addressing measured slower than nvfp4_fast_kernel (H200,
         * swizzle-128x4 two-level 8192^2: 107.5 us against 101.3), so they stay there */
        if (use_fast && dt == LOFP_DTYPE_BF16 && layout == LOFP_LAYOUT_LINEAR) {
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
        if (use_fast) {
            /* two blocks per thread when the row holds an even number of them */
            const unsigned g32 = (unsigned)((total / 2 + 255) / 256);
            if (p.nb % 2 == 0) {
                if (dt == LOFP_DTYPE_F32) nvfp4_fast_kernel<LOFP_DTYPE_F32, 32><<<g32, 256, 0, st>>>(p);
                else if (dt == LOFP_DTYPE_BF16) nvfp4_fast_kernel<LOFP_DTYPE_BF16, 32><<<g32, 256, 0, st>>>(p);
                else nvfp4_fast_kernel<LOFP_DTYPE_F16, 32><<<g32, 256, 0, st>>>(p);
            } else {
                if (dt == LOFP_DTYPE_F32) nvfp4_fast_kernel<LOFP_DTYPE_F32, 16><<<grid, 256, 0, st>>>(p);
                else if (dt == LOFP_DTYPE_BF16) nvfp4_fast_kernel<LOFP_DTYPE_BF16, 16><<<grid, 256, 0, st>>>(p);
                else nvfp4_fast_kernel<LOFP_DTYPE_F16, 16><<<grid, 256, 0, st>>>(p);
            }
            LOFP_CU_LAUNCH();
            return LOFP_OK;
        }
#define NVK(DT)                                                                                \
    do {                                                                                       \
        switch (s->rounding) {                                                                 \
        case LOFP_RNE: nvfp4_kernel<DT, R_RNE><<<grid, 256, 0, st>>>(p, vec); break;           \
        case LOFP_TIES_TO_ZERO: nvfp4_kernel<DT, R_TTZ><<<grid, 256, 0, st>>>(p, vec); break;  \
        case LOFP_TIES_AWAY: nvfp4_kernel<DT, R_TAWAY><<<grid, 256, 0, st>>>(p, vec); break;   \
        default: nvfp4_kernel<DT, R_STOCH><<<grid, 256, 0, st>>>(p, vec); break;               \
        }                                                                                      \
    } while (0)
        if (dt == LOFP_DTYPE_F32) NVK(LOFP_DTYPE_F32);
        else if (dt == LOFP_DTYPE_BF16) NVK(LOFP_DTYPE_BF16);
        else NVK(LOFP_DTYPE_F16);
#undef NVK
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }

    /* MX family */
    const uint32_t B = s->block;
    const bool fast = B == 32 || B == 64 || B == 128 || B == 256;
    if (!fast) {
        const unsigned grid = (unsigned)((total + 127) / 128);
        if (dt == LOFP_DTYPE_F32) mx_generic_kernel<LOFP_DTYPE_F32><<<grid, 128, 0, st>>>(p, (int)B);
        else if (dt == LOFP_DTYPE_BF16) mx_generic_kernel<LOFP_DTYPE_BF16><<<grid, 128, 0, st>>>(p, (int)B);
        else mx_generic_kernel<LOFP_DTYPE_F16><<<grid, 128, 0, st>>>(p, (int)B);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    const int lgl = B == 32 ? 1 : B == 64 ? 2 : B == 128 ? 3 : 4; /* lanes = block / 16 */
    const size_t threads = total << lgl;
    const unsigned grid = (unsigned)((threads + 255) / 256);
    if (use_fast && dt == LOFP_DTYPE_BF16 && s->elem == LOFP_ELEM_E2M1 && B == 32 &&
        layout == LOFP_LAYOUT_LINEAR) {
        /* one warp item (32 blocks) per warp, all at once: the one-wave grid-stride variant of
         * the flat dequantize measured slower (uneven end of the wave) than a one-shot grid */
        const size_t items = (total + 31) / 32;
        size_t g = (items + 7) / 8;
        if (g > 0x40000000u) g = 0x40000000u; /* the kernel loops past it */
        mxfp4_bf16_flat_kernel<<<(unsigned)g, 256, 0, st>>>(p);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    if (use_fast && !p.generic) {
        /* 32 elements per lane: block/32 lanes per block */
        const unsigned gf = (unsigned)(((total << (lgl - 1)) + 255) / 256);
#define MXF(DT)                                                                                \
    switch (s->elem) {                                                                         \
    case LOFP_ELEM_E2M1: mx_fast_kernel<DT, T_E2M1><<<gf, 256, 0, st>>>(p, lgl - 1); break;    \
    case LOFP_ELEM_E2M3: mx_fast_kernel<DT, T_E2M3><<<gf, 256, 0, st>>>(p, lgl - 1); break;    \
    case LOFP_ELEM_E3M2: mx_fast_kernel<DT, T_E3M2><<<gf, 256, 0, st>>>(p, lgl - 1); break;    \
    case LOFP_ELEM_E4M3: mx_fast_kernel<DT, T_E4M3><<<gf, 256, 0, st>>>(p, lgl - 1); break;    \
    case LOFP_ELEM_E5M2: mx_fast_kernel<DT, T_E5M2><<<gf, 256, 0, st>>>(p, lgl - 1); break;    \
    default: mx_fast_kernel<DT, T_MXINT8><<<gf, 256, 0, st>>>(p, lgl - 1); break;              \
    }
        if (dt == LOFP_DTYPE_F32) { MXF(LOFP_DTYPE_F32) }
        else if (dt == LOFP_DTYPE_BF16) { MXF(LOFP_DTYPE_BF16) }
        else { MXF(LOFP_DTYPE_F16) }
#undef MXF
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
#define MXL(DT, EL, MD) mx_kernel<DT, EL, MD><<<grid, 256, 0, st>>>(p, lgl, vec)
#define MXM(DT, EL)                                                                            \
    switch (s->rounding) {                                                                     \
    case LOFP_RNE: MXL(DT, EL, R_RNE); break;                                                  \
    case LOFP_TIES_TO_ZERO: MXL(DT, EL, R_TTZ); break;                                         \
    case LOFP_TIES_AWAY: MXL(DT, EL, R_TAWAY); break;                                          \
    default: MXL(DT, EL, R_STOCH); break;                                                      \
    }
#define MXE(DT)                                                                                \
    switch (s->elem) {                                                                         \
    case LOFP_ELEM_E2M1: MXM(DT, T_E2M1) break;                                                \
    case LOFP_ELEM_E2M3: MXM(DT, T_E2M3) break;                                                \
    case LOFP_ELEM_E3M2: MXM(DT, T_E3M2) break;                                                \
    case LOFP_ELEM_E4M3: MXM(DT, T_E4M3) break;                                                \
    case LOFP_ELEM_E5M2: MXM(DT, T_E5M2) break;                                                \
    default: MXM(DT, T_MXINT8) break;                                                          \
    }
    if (dt == LOFP_DTYPE_F32) { MXE(LOFP_DTYPE_F32) }
    else if (dt == LOFP_DTYPE_BF16) { MXE(LOFP_DTYPE_BF16) }
    else { MXE(LOFP_DTYPE_F16) }
#undef MXE
#undef MXM
#undef MXL
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

extern "C" lofp_status lofp_cuda_quantize(const lofp_scheme *s, lofp_dtype dt, const void *d_x,
                                          size_t rows, size_t k, lofp_layout scale_layout,
                                          uint8_t *d_codes, uint8_t *d_scales, float *d_global_out,
                                          void *d_ws, lofp_cuda_stream stream)
{
    return quantize_impl(s, dt, d_x, rows, k, false, 1.0f, scale_layout, d_codes, d_scales,
                         d_global_out, d_ws, (cudaStream_t)stream);
}

extern "C" lofp_status lofp_cuda_quantize_with_global(const lofp_scheme *s, lofp_dtype dt,
                                                      const void *d_x, size_t rows, size_t k,
                                                      float global_scale, lofp_layout scale_layout,
                                                      uint8_t *d_codes, uint8_t *d_scales,
                                                      void *d_ws, lofp_cuda_stream stream)
{
    return quantize_impl(s, dt, d_x, rows, k, true, global_scale, scale_layout, d_codes, d_scales,
                         NULL, d_ws, (cudaStream_t)stream);
}

extern "C" lofp_status lofp_cuda_quant_report(const void *d_ws, lofp_cuda_stream stream,
                                              lofp_quant_report *rep)
{
    clear_cuda_error();
    if (!d_ws) return LOFP_ERR_INVALID_ARG;
    DevWs h;
    LOFP_CU(cudaStreamSynchronize((cudaStream_t)stream));
    LOFP_CU(cudaMemcpy(&h, d_ws, sizeof h, cudaMemcpyDeviceToHost));
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->logical_k = (size_t)h.logical_k;
        rep->padded_k = (size_t)h.padded_k;
        rep->nonfinite_blocks = (size_t)h.nonfinite_blocks;
        if (h.first_bad != ~0ull) rep->first_bad_index = (size_t)h.first_bad;
    }
    if (h.first_bad != ~0ull && !h.propagate) return LOFP_ERR_NONFINITE;
    return LOFP_OK;
}

extern "C" lofp_status lofp_cuda_dequantize(const lofp_scheme *s, const uint8_t *d_codes,
                                            const uint8_t *d_scales, lofp_layout scale_layout,
                                            const float *d_global, size_t rows, size_t k,
                                            lofp_dtype out_dt, void *d_out, lofp_cuda_stream stream)
{
    return lofp_cuda_dequantize_dir(s, d_codes, d_scales, scale_layout, d_global, LOFP_GLOBAL_ENCODE, rows, k,
                                    out_dt, d_out, stream);
}

extern "C" lofp_status lofp_cuda_dequantize_dir(const lofp_scheme *s, const uint8_t *d_codes,
                                                const uint8_t *d_scales, lofp_layout scale_layout,
                                                const float *d_global, lofp_global_dir dir, size_t rows,
                                                size_t k, lofp_dtype out_dt, void *d_out,
                                                lofp_cuda_stream stream)
{
    clear_cuda_error();
    size_t kp = 0;
    LayoutP L;
    lofp_status rc = check_q(s, out_dt, rows, k, scale_layout, &kp, &L);
    if (rc != LOFP_OK) return rc;
    if (!d_codes || !d_scales || !d_out) return LOFP_ERR_INVALID_ARG;
    DQParams p;
    p.codes = d_codes; p.scales = d_scales; p.L = L; p.rows = rows; p.k = k; p.kp = kp;
    p.fam = s->id == LOFP_SCHEME_NVFP4 ? 0 : s->id == LOFP_SCHEME_ULTRAQUANT ? 2 : 1;
    p.elem = (int)s->elem; p.block = (int)s->block; p.out_dt = (int)out_dt;
    p.global = s->id == LOFP_SCHEME_NVFP4 ? d_global : NULL;
    p.dec = s->id == LOFP_SCHEME_NVFP4 && dir == LOFP_GLOBAL_DECODE;
    p.out = d_out;
    const size_t n = rows * k;
    const bool fast = k == kp && k % 16 == 0 && ((uintptr_t)d_out & 15) == 0;
    /* bf16 from FP4 (NVFP4, MXFP4 with block 32): the byte-lookup kernel */
    if (fast && out_dt == LOFP_DTYPE_BF16 && k % 32 == 0 && ((p.fam == 0 && p.block == 16) || (p.fam == 1 && p.elem == T_E2M1 && p.block == 32)) &&
        ((uintptr_t)d_codes & 3) == 0) {
        /* flat: linear scales, one per block of each row (then word g's scale is g / (block / 8)) */
        const bool flat = L.layout == LOFP_LAYOUT_LINEAR && L.cols * (size_t)p.block == k;
        void (*kern)(DQParams);
        if (p.fam == 0 && p.dec) kern = flat ? dequant_lut_kernel<0, 1, 1> : dequant_lut_kernel<0, 1, 0>;
        else if (p.fam == 0) kern = flat ? dequant_lut_kernel<0, 0, 1> : dequant_lut_kernel<0, 0, 0>;
        else kern = flat ? dequant_lut_kernel<1, 0, 1> : dequant_lut_kernel<1, 0, 0>;
        /* one wave of CTAs (a grid-stride loop: each CTA fills its scale table once) */
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, 0) != cudaSuccess || per_sm < 1) per_sm = 4;
        size_t g = (n / 8 + 32 * 8 * 4 - 1) / (32 * 8 * 4);
        if (g > (size_t)sm_count() * per_sm) g = (size_t)sm_count() * per_sm;
        kern<<<(unsigned)g, 256, 0, (cudaStream_t)stream>>>(p);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    if (fast) {
        const int fam = p.fam == 0 ? 0 : p.fam == 2 ? 3 : p.elem == T_E2M1 ? 1 : 2;
        const unsigned g = (unsigned)((n / 16 + 255) / 256);
        cudaStream_t st = (cudaStream_t)stream;
#define DQF(OUT)                                                                               \
    switch (fam) {                                                                             \
    case 0: dequant_fast_kernel<OUT, 0><<<g, 256, 0, st>>>(p); break;                          \
    case 1: dequant_fast_kernel<OUT, 1><<<g, 256, 0, st>>>(p); break;                          \
    case 2: dequant_fast_kernel<OUT, 2><<<g, 256, 0, st>>>(p); break;                          \
    default: dequant_fast_kernel<OUT, 3><<<g, 256, 0, st>>>(p); break;                         \
    }
        if (out_dt == LOFP_DTYPE_F32) { DQF(LOFP_DTYPE_F32) }
        else if (out_dt == LOFP_DTYPE_BF16) { DQF(LOFP_DTYPE_BF16) }
        else { DQF(LOFP_DTYPE_F16) }
#undef DQF
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    size_t g = (n + 255) / 256;
    const size_t gmax = (size_t)sm_count() * 32;
    if (g > gmax) g = gmax;
    dequant_kernel<<<(unsigned)g, 256, 0, (cudaStream_t)stream>>>(p);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

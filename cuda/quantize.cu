/* quantize.cu -- the quantize entry points of the CUDA backend (lofp_cuda_quantize,
 * lofp_cuda_quantize_with_global, lofp_cuda_quant_report) and the backend's host bookkeeping
 * (errors, device properties, the UltraQuant threshold table, the fp8 cvt probe).
 *
 * quantize_impl validates, initialises the workspace, writes the scale layout's padding bytes,
 * fills the parameter block and hands it to the one launcher of the scheme's job; each job's file
 * holds its kernels, one per shape class, bit-identical to the CPU library:
 *   quantize_nvfp4.cu  NVFP4, one- and two-level
 *   quantize_mx.cu     the MX family (MXFP4/6/8, MXINT8, tilelang-mxfp8, any block of 32s)
 *   quantize_uq.cu     UltraQuant with the butterfly or dense Hadamard
 *   dequantize.cu      the dequantize entry points and their kernels
 * Built with -fmad=false; every fp32 step is an explicit _rn intrinsic (see lofp_cuda_device.cuh).
 * Scales are written straight into the requested layout. docs/CUDA.md "Design" gives each
 * kernel's shape class.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>

#include "quantize_common.cuh"

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

namespace {

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
lofp_status lofpcu::check_quant_args(const lofp_scheme *s, lofp_dtype dt, size_t rows, size_t k,
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
    lofp_status rc = check_quant_args(s, dt, rows, k, layout, &kp, &L);
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

    if (uq) {
        UQParams p;
        p.x = x; p.rows = rows; p.k = k; p.kp = kp; p.codes = codes; p.scales = scales; p.L = L;
        p.c = s->c; p.rotate = s->rotate; p.dense = s->hadamard == LOFP_HADAMARD_DENSE;
        p.hd = (float)(1.0 / sqrt((double)kp));
        p.ws = ws;
        p.thr = uq_thresholds();
        return quantize_uq(dt, p, st);
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
    /* pack multipliers of the fast kernels: code bit C, slot width W, sign at C + SB */
    int pk_c = 0, pk_w = 4, pk_sb = 3; /* E2M1: e2m1_rne_fma_bits leaves the code at bit 0 */
    if (s->elem == LOFP_ELEM_E2M3) { pk_c = 20; pk_w = 8; pk_sb = 5; }
    if (s->elem == LOFP_ELEM_E3M2) { pk_c = 21; pk_w = 8; pk_sb = 5; }
    for (int i = 0; i < 8; i++) p.pm[i] = pack_mul_host(pk_c, pk_w, i);
    p.pms = 1u << (pk_c + pk_sb + 1); /* mul.hi by 2^(C+SB+1): bit 31 -> bit C + SB */
    if (nv) {
        p.global_out = global_out;
        return quantize_nvfp4(s, dt, p, have_global, global, vec, st);
    }
    return quantize_mx(s, dt, p, vec, st);
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

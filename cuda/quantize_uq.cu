/* quantize_uq.cu -- UltraQuant quantize (butterfly or dense Hadamard, E2M1 snap, E8M0 scales
 * with byte 0 = zero), bit-identical to the CPU library.
 *
 * Kernels, one per shape class (quantize_uq below picks it):
 *   uq_warp_kernel   padded K a power of two in 32..1024, no dense Hadamard: one warp per row,
 *                    butterfly stages in registers and across lanes (shfl_xor), group amax across
 *                    32/E lanes.
 *   uq_smem_kernel   larger K and the dense Hadamard: one CTA per row in shared memory.
 */
#include <stdint.h>
#include <string.h>

#include "quantize_common.cuh"

using namespace lofpcu;

namespace {

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


} // namespace

lofp_status lofpcu::quantize_uq(lofp_dtype dt, const UQParams &p, cudaStream_t st)
{
    const size_t kp = p.kp;
    if ((kp & (kp - 1)) == 0 && kp >= 32 && kp <= 1024 && !(p.rotate && p.dense)) {
        void (*kern)(UQParams) = with_dtype(dt, [&](auto D) {
            constexpr int DT = decltype(D)::value;
            switch (kp) { /* E = kp / 32 elements per lane */
            case 32: return uq_warp_kernel<DT, 1>;
            case 64: return uq_warp_kernel<DT, 2>;
            case 128: return uq_warp_kernel<DT, 4>;
            case 256: return uq_warp_kernel<DT, 8>;
            case 512: return uq_warp_kernel<DT, 16>;
            default: return uq_warp_kernel<DT, 32>;
            }
        });
        kern<<<(unsigned)((p.rows + 7) / 8), 256, 0, st>>>(p);
        LOFP_CU_LAUNCH();
        return LOFP_OK;
    }
    const size_t smem = kp * sizeof(float) * ((p.rotate && p.dense) ? 2 : 1);
    if (p.rows > 0x7FFFFFFFu) return LOFP_ERR_UNSUPPORTED;
    void (*kern)(UQParams) = with_dtype(dt, [](auto D) { return uq_smem_kernel<decltype(D)::value>; });
    if (smem > 48 * 1024)
        LOFP_CU(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kern<<<(unsigned)p.rows, 256, smem, st>>>(p);
    LOFP_CU_LAUNCH();
    return LOFP_OK;
}

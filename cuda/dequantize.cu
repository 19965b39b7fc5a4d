/* dequantize.cu -- codes and scales back to f32 / bf16 / f16, bit-identical to the CPU library
 * (lofp_cuda_dequantize, lofp_cuda_dequantize_dir).
 *
 * Kernels, one per shape class (lofp_cuda_dequantize_dir below picks it):
 *   dequant_lut_kernel   bf16 from FP4 (NVFP4, MXFP4 with block 32), no padding, K % 32 == 0:
 *                        byte lookup of eight codes at a time, one wave of CTAs.
 *   dequant_fast_kernel  any other scheme or output type with no padding, K % 16 == 0 and a
 *                        16-byte aligned output: one thread per 16 elements (one scale).
 *   dequant_kernel       everything else: one thread per output element.
 */
#include <stdint.h>
#include <string.h>

#include "quantize_common.cuh"

using namespace lofpcu;

namespace {

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

} // namespace

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
    lofp_status rc = check_quant_args(s, out_dt, rows, k, scale_layout, &kp, &L);
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
        /* the kernel's family: 0 NVFP4, 1 MXFP4, 2 other MX elements, 3 UltraQuant */
        const int fam = p.fam == 0 ? 0 : p.fam == 2 ? 3 : p.elem == T_E2M1 ? 1 : 2;
        void (*kern)(DQParams) = with_dtype(out_dt, [&](auto D) {
            constexpr int OUT = decltype(D)::value;
            switch (fam) {
            case 0: return dequant_fast_kernel<OUT, 0>;
            case 1: return dequant_fast_kernel<OUT, 1>;
            case 2: return dequant_fast_kernel<OUT, 2>;
            default: return dequant_fast_kernel<OUT, 3>;
            }
        });
        kern<<<(unsigned)((n / 16 + 255) / 256), 256, 0, (cudaStream_t)stream>>>(p);
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

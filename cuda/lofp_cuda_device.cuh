/* lofp_cuda_device.cuh -- element codecs and per-block rules shared by the CUDA kernels.
 *
 * Everything here is __host__ __device__ so that the host-side unit test (tests/cuda/test_codec_host.cu,
 * which runs without a GPU) can check each helper against the CPU library on millions of inputs.
 * The per-element codecs are not ported: they are the C library's own, from
 * src/core/element_codec.h (compiled here as __host__ __device__), wrapped below under the names
 * the kernels use. What remains here is the per-block arithmetic of src/quant (quant_mx.c,
 * quant_nvfp4.c, quant_uq.c) and the kernels' faster formulations of some codecs (fewer or
 * 32-bit operations, fp32 or packed-half tricks): each says why it exists and that the shared
 * codec is its oracle, and tests/cuda/test_codec_host.cu checks it against lofp_encode. Every
 * fp32 operation is an explicit round-to-nearest intrinsic on the device (__fmul_rn, __fadd_rn,
 * __fdiv_rn, __fmaf_rn) and the files are built with -fmad=false, so no contraction can change a
 * bit. Narrow-type encodes are integer code (sm_90 has no FP4/E8M0 cvt).
 */
#ifndef LOFP_CUDA_DEVICE_CUH
#define LOFP_CUDA_DEVICE_CUH

#include <stdint.h>
#include <string.h>
#include <math.h>

#include "core/element_codec.h"

#if defined(__CUDACC__)
#define LHD __host__ __device__ __forceinline__
#else
#define LHD static inline
#endif

namespace lofpcu {

/* ---------------------------------------------------------------------------------------- */
/* fp32 primitives with one rounding each                                                    */
/* ---------------------------------------------------------------------------------------- */

/* the bit casts of the shared codec header (core/element_codec.h) */
LHD uint32_t f2u(float f) { return lofp_ec_f32_bits(f); }
LHD float u2f(uint32_t u) { return lofp_ec_bits_f32(u); }
#if defined(__CUDA_ARCH__)
LHD float fmul(float a, float b) { return __fmul_rn(a, b); }
LHD float fadd(float a, float b) { return __fadd_rn(a, b); }
LHD float fsub(float a, float b) { return __fsub_rn(a, b); }
LHD float fdiv(float a, float b) { return __fdiv_rn(a, b); }
LHD float ffma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
LHD float frcp(float a) { return __frcp_rn(a); }
#else
/* host: the host compiler is run with -ffp-contract=off (cuda/CMakeLists.txt) */
LHD float fmul(float a, float b) { volatile float r = a * b; return r; }
LHD float fadd(float a, float b) { volatile float r = a + b; return r; }
LHD float fsub(float a, float b) { volatile float r = a - b; return r; }
LHD float fdiv(float a, float b) { volatile float r = a / b; return r; }
LHD float ffma(float a, float b, float c) { return fmaf(a, b, c); }
LHD float frcp(float a) { volatile float r = 1.0f / a; return r; }
#endif
LHD float fabs_(float a) { return u2f(f2u(a) & 0x7FFFFFFFu); }
LHD bool is_finite_bits(uint32_t u) { return (u & 0x7F800000u) != 0x7F800000u; }

/* ---------------------------------------------------------------------------------------- */
/* Element codecs: the shared ones (src/core/element_codec.h), then the kernels' faster forms */
/* ---------------------------------------------------------------------------------------- */

/* the lofp_rounding and lofp_elem values, as plain ints for template arguments */
enum { R_RNE = (int)LOFP_RNE, R_TTZ = (int)LOFP_TIES_TO_ZERO, R_TAWAY = (int)LOFP_TIES_AWAY,
       R_STOCH = (int)LOFP_STOCHASTIC };
enum { T_E2M1 = (int)LOFP_ELEM_E2M1, T_E2M3 = (int)LOFP_ELEM_E2M3, T_E3M2 = (int)LOFP_ELEM_E3M2,
       T_E4M3 = (int)LOFP_ELEM_E4M3, T_E5M2 = (int)LOFP_ELEM_E5M2, T_E8M0 = (int)LOFP_ELEM_E8M0,
       T_UE4M3 = (int)LOFP_ELEM_UE4M3, T_MXINT8 = (int)LOFP_ELEM_MXINT8, T_BF16 = (int)LOFP_ELEM_BF16,
       T_FP16 = (int)LOFP_ELEM_FP16 };

/* The shared codec's minifloat row (src/core/element_codec.h); T_* equal the lofp_elem values. */
typedef lofp_ec_minifloat MF;
LHD MF mf_of(int t) { return lofp_ec_minifloat_of(t); }

/* The shared codecs under the names the kernels use. */
LHD int round_up(int mode, uint64_t q, uint64_t rem, unsigned shift, uint32_t rbits)
{
    return lofp_ec_round_up(mode, q, rem, shift, rbits);
}
LHD uint32_t minifloat_mag(const MF &tr, uint32_t a, int mode, uint32_t rbits)
{
    return lofp_ec_minifloat_mag(&tr, a, mode, rbits);
}
/* ieee: the LOFP_IEEE overflow policy, else LOFP_SATURATE */
LHD uint32_t encode_mf(const MF &tr, float x, int mode, bool ieee, uint32_t rbits)
{
    return lofp_ec_encode_minifloat(&tr, x, mode, ieee ? LOFP_IEEE : LOFP_SATURATE, rbits);
}

/* 32-bit version of minifloat_mag for the deterministic modes (RNE, ties-to-zero, ties-away):
 * the same result (when every dropped bit is below half an ulp, nothing rounds up). Kept beside
 * the shared codec because 64-bit shifts and compares cost the integer pipe two or more
 * instructions each on the GPU; the shared minifloat_mag is its oracle (test_codec_host). */
LHD uint32_t minifloat_mag32(const MF &tr, uint32_t a, int mode)
{
    if (a == 0) return 0;
    int ex = (int)(a >> 23);
    uint32_t sig = a & 0x7FFFFFu;
    if (ex == 0) ex = 1;
    else sig |= 0x800000u;
    ex -= 127;
    const int emin = 1 - tr.bias;
    if (ex > tr.emax_binade + 1) return tr.max_code + 1;
    const int te = ex > emin ? ex : emin;
    const int shift = (te - tr.mbits) - (ex - 23);
    if (shift > 24) return (uint32_t)(te - emin) << tr.mbits; /* sig < half an ulp */
    const uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
    uint32_t up;
    if (mode == R_RNE) up = rem > half || (rem == half && (q & 1u));
    else if (mode == R_TTZ) up = rem > half;
    else up = rem >= half && rem != 0;
    return ((uint32_t)(te - emin) << tr.mbits) + q + up;
}

/* encode_mf under SATURATE for the deterministic modes, over minifloat_mag32 */
LHD uint32_t encode_mf32(const MF &tr, float x, int mode)
{
    const uint32_t u = f2u(x);
    const uint32_t sign = (u >> 31) ? tr.sign_bit : 0;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return tr.nan_code ? (tr.nan_code | (tr.nan_keeps_sign ? sign : 0)) : 0;
    if (a == 0x7F800000u) return tr.max_code | sign;
    uint32_t mag = minifloat_mag32(tr, a, mode);
    if (mag > tr.max_code) mag = tr.max_code;
    return mag | sign;
}

/* 32-bit MXINT8 for the deterministic modes, for the same reason; oracle: encode_mxint8. */
LHD uint32_t encode_mxint8_32(float x, int mode)
{
    const uint32_t u = f2u(x), a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0;
    uint32_t k;
    if (a >= 0x43000000u) k = 127;
    else if (a == 0) k = 0;
    else {
        int ex = (int)(a >> 23);
        uint32_t sig = a & 0x7FFFFFu;
        if (ex == 0) ex = 1; else sig |= 0x800000u;
        const int shift = 144 - ex;
        if (shift > 24) k = 0;
        else {
            const uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
            uint32_t up;
            if (mode == R_RNE) up = rem > half || (rem == half && (q & 1u));
            else if (mode == R_TTZ) up = rem > half;
            else up = rem >= half && rem != 0;
            k = q + up;
            if (k > 127) k = 127;
        }
    }
    const int v = (u >> 31) ? -(int)k : (int)k;
    return (uint32_t)(uint8_t)(int8_t)v;
}

/* RNE magnitude code of a >= 0 (finite) in a minifloat with `mbits` mantissa bits, smallest normal
 * exponent emin and largest value maxv (saturating), in fp32 adds and multiplies -- the quantize
 * kernels are bound by the integer/logic pipe, and this moves the rounding to the FP32 pipe.
 * c = max(2^floor(log2 a), 2^emin) * 2^(23 - mbits) has an ulp equal to the format's spacing in a's
 * binade (and below 2^emin), and a + c stays in c's binade, so fl(fl(a + c) - c) is a rounded to
 * the format's grid, ties to the even multiple of the spacing, which is the even code. Scaling the
 * grid value by 2^(-126 - emin) (exact) lands the format's subnormals on fp32's, where the bits
 * from bit 23 - mbits up are the code (mf_rne_magic_bits returns that word; the sign of x is
 * ignored). For a huge a, c overflows and a + c - c is NaN, which fminf
 * (IEEE minNum) turns into maxv. tests/cuda/test_codec_host.cu checks it against the integer encoder. */
LHD uint32_t mf_rne_magic_bits(float x, int emin, int mbits, float maxv)
{
    const uint32_t lo = (uint32_t)(127 + emin) << 23;
    uint32_t p = f2u(x) & 0x7F800000u;
    p = p > lo ? p : lo;
    const float c = fmul(u2f(p), u2f((uint32_t)(127 + 23 - mbits) << 23));
    float r = fsub(fadd(fabsf(x), c), c);
    r = fminf(r, maxv);
    return f2u(fmul(r, u2f((uint32_t)(1 - emin) << 23)));
}
/* The magnitude code of |x| (the kernels keep it at bit 23 - mbits and pack with multiplies). */
LHD uint32_t mf_mag_rne_magic(float x, int emin, int mbits, float maxv)
{
    return mf_rne_magic_bits(x, emin, mbits, maxv) >> (23 - mbits);
}

/* MXINT8 code (two's complement byte) of x under RNE: fl(x * 64) is exact, the clamp keeps it in
 * [-127, 127], and adding 1.5 * 2^23 rounds to an integer (ties to even) whose low byte is the code
 * (the sum stays in [2^23, 2^24), where the ulp is 1). */
LHD uint32_t mxint8_rne_magic(float x)
{
    float r = fmul(x, 64.0f);
    r = fmaxf(fminf(r, 127.0f), -127.0f);
    return (f2u(fadd(r, 12582912.0f)) - 0x4B400000u) & 0xFFu;
}

/* E2M1 magnitude code of a >= 0 (not NaN) under RNE in three rints: spacing 0.5 below 2, 1 below
 * 4, 2 above; the integer's parity is the code's, so rint's ties-to-even is the code's. */
LHD uint32_t e2m1_rne_fast(float a)
{
    const bool lo = a < 2.0f, mid = a < 4.0f;
    const float sc = lo ? 2.0f : mid ? 1.0f : 0.5f;
    const float t = fmul(a, sc);
    uint32_t c;
#if defined(__CUDA_ARCH__)
    c = __float2uint_rn(fminf(t, 8.0f));
#else
    c = (uint32_t)rintf(fminf(t, 8.0f));
#endif
    c += lo ? 0u : mid ? 2u : 4u;
    return c > 7u ? 7u : c;
}

/* E2M1 code of q >= 0 (finite) under RNE, plus 0x4A800000: the same three-candidate rule as
 * e2m1x2_bf16_codes below in fp32, with C = 2^22 (ulp 0.5): bits(fl(q*k + C + j/2)) - bits(C) is
 * j + round(2kq) for 2kq < 2^22, and past it still >= 8 (the patterns are monotone), so the min
 * with 7 (e2m1_rne_fma_bits) saturates. Three fp32 fmas (one rounding each) and two integer
 * mins; the caller subtracts 0x4A800000 once per packed word. test_codec_host checks it against
 * lofp_encode.
 * The three candidates' minimum without the cap: for 0 <= q < 9 it is 0x4A800000 plus the E2M1
 * code, except 8 for q in [7, 9) (round(q/2) + 4 = 8 there) where the code is 7. A caller that
 * knows q < 9 packs these (a nibble holds 8) and maps 8 to 7 once per word (e2m1_fix8_word). */
LHD uint32_t e2m1_rne_fma_bits8(float q)
{
    const uint32_t r1 = f2u(ffma(q, 1.0f, 4194304.0f));  /* round(2q) */
    const uint32_t r2 = f2u(ffma(q, 0.5f, 4194305.0f));  /* round(q) + 2 */
    const uint32_t r4 = f2u(ffma(q, 0.25f, 4194306.0f)); /* round(q/2) + 4 */
    uint32_t m = r1 < r2 ? r1 : r2;
    return m < r4 ? m : r4;
}
/* eight packed magnitude codes 0..8 -> 0..7 (8 is the only one with bit 3 set; no borrows) */
LHD uint32_t e2m1_fix8_word(uint32_t w) { return w - ((w >> 3) & 0x11111111u); }
LHD uint32_t e2m1_rne_fma_bits(float q)
{
    const uint32_t m = e2m1_rne_fma_bits8(q);
    return m < 0x4A800007u ? m : 0x4A800007u;
}

/* ---- MXFP4 from bf16, two elements per 32-bit word ----
 * With the E8M0 scale 2^(sb-127) and e = x / scale (exact: a power of two, and a result below
 * fp32's normal range is < 0.25, code 0 either way), put C = 2^(sb-121) = 64 * scale, whose bf16
 * ulp u is scale / 2. For 0 <= a = |x| < 64 * scale, bits(fl_bf16(a * k + C + j*u)) - bits(C) is
 * j + round_half_even(a * k / u) (a * k + C + j*u stays in C's binade, and the mantissa's parity is
 * the integer's): with k = 1, 1/2, 1/4 and j = 0, 2, 4 that is round(2e), round(e) + 2 and
 * round(e/2) + 4, the E2M1 code of e if it lies in [0, 2), [2, 4) and [4, 8). Each of the three is
 * >= the right one outside its range (round is monotone: 2e <= e + 2 iff e <= 2, e + 2 <= e/2 + 4
 * iff e <= 4), so the code is min(the three, 7). One fma.rn.bf16x2 (one rounding) each gives them
 * for two elements at once, and the min is a 16x2 integer min on the patterns.
 * Valid for 3 <= sb <= 248: C and C + 4u are normal finite bf16, and every subnormal a is below
 * u / 2 (so a flush of subnormal inputs could not change the result). The callers keep the fp32
 * path for the other scale bytes. a2 holds |x| of two elements (bits 15 and 31 clear); returns
 * the two codes plus bf16 bits(C) in each half (the caller subtracts it once per packed word). */
LHD uint32_t bf16x2_fma_rn(uint32_t a, uint32_t b, uint32_t c)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    /* exact in double whenever the bf16 rounding depends on a * b (a * b >= 2^-45 c here),
     * else the double sum is within 2^-52 of c and rounds to c as the exact sum would */
    uint32_t d = 0;
    for (int h = 0; h < 2; h++) {
        const int s = 16 * h;
        const double r = (double)u2f(((a >> s) & 0xFFFFu) << 16) * (double)u2f(((b >> s) & 0xFFFFu) << 16) +
                         (double)u2f(((c >> s) & 0xFFFFu) << 16);
        int ex;
        const double m = frexp(r, &ex); /* r = m * 2^ex, m in [0.5, 1): 8 significant bits */
        const float q = (float)ldexp(rint(ldexp(m, 8)), ex - 8);
        d |= (f2u(q) >> 16) << s;
    }
    return d;
#endif
}
/* host emulation of min.u16x2 (larger = 0) and max.u16x2 (larger = 1): each 16-bit half of the
 * result is the smaller / larger of the two halves, unsigned */
LHD uint32_t u16x2_pick_host(uint32_t a, uint32_t b, int larger)
{
    uint32_t d = 0;
    for (int h = 0; h < 32; h += 16) {
        const uint32_t x = (a >> h) & 0xFFFFu, y = (b >> h) & 0xFFFFu;
        d |= ((x < y) == (larger != 0) ? y : x) << h;
    }
    return d;
}
LHD uint32_t vmin_u16x2(uint32_t a, uint32_t b)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("min.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    return u16x2_pick_host(a, b, 0);
#endif
}
LHD uint32_t vmax_u16x2(uint32_t a, uint32_t b)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    return u16x2_pick_host(a, b, 1);
#endif
}
/* cb = bits(C) in both halves ((sb + 6) << 7, times 0x10001) */
LHD uint32_t e2m1x2_bf16_codes(uint32_t a2, uint32_t cb)
{
    const uint32_t r1 = bf16x2_fma_rn(a2, 0x3F803F80u, cb);               /* k = 1 */
    const uint32_t r2 = bf16x2_fma_rn(a2, 0x3F003F00u, cb + 0x00020002u); /* k = 1/2, j = 2 */
    const uint32_t r4 = bf16x2_fma_rn(a2, 0x3E803E80u, cb + 0x00040004u); /* k = 1/4, j = 4 */
    return vmin_u16x2(vmin_u16x2(vmin_u16x2(r1, r2), r4), cb + 0x00070007u);
}

/* UE4M3 (RNE) of bs in [1e-12, 448] (the NVFP4 block scale after its clamp) and its value. */
LHD uint32_t ue4m3_rne_fast(float bs)
{
    const uint32_t u = f2u(bs);
    if (bs >= 0.015625f) { /* normal E4M3: keep 3 mantissa bits, RNE, carry into the exponent */
        const uint32_t r = u + 0x7FFFFu + ((u >> 20) & 1u);
        return (r >> 20) - 960u;
    }
#if defined(__CUDA_ARCH__)
    return __float2uint_rn(fmul(bs, 512.0f)); /* subnormal grid 2^-9, exact scaling */
#else
    return (uint32_t)rintf(fmul(bs, 512.0f));
#endif
}
LHD float ue4m3_value(uint32_t code)
{
    if (code >= 8u) return u2f((code + 960u) << 20);
    return fmul((float)code, 0x1p-9f);
}

/* UE4M3 under RNE, SATURATE (the shared codec) */
LHD uint32_t encode_ue4m3_rne(float x)
{
    const MF mf = mf_of(T_UE4M3);
    return lofp_ec_encode_ue4m3(&mf, x, LOFP_RNE, LOFP_SATURATE, 0);
}

/* MXINT8 (the shared codec) */
LHD uint32_t encode_mxint8(float x, int mode, uint32_t rbits)
{
    return lofp_ec_encode_mxint8(x, mode, rbits);
}

/* Block-element encode under SATURATE for every element type of the MX/NVFP4 families. */
LHD uint32_t encode_elem(int t, float x, int mode, uint32_t rbits)
{
    if (mode != R_STOCH) {
        if (t == T_MXINT8) return encode_mxint8_32(x, mode);
        return encode_mf32(mf_of(t), x, mode);
    }
    if (t == T_MXINT8) return encode_mxint8(x, mode, rbits);
    return encode_mf(mf_of(t), x, mode, false, rbits);
}

/* E2M1 magnitude code of a = |x| (a >= 0, not NaN) for the three deterministic modes: the number of
 * midpoints (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) below a, a tie counting as "below" when the mode
 * rounds it up (RNE: toward the even code; ties-to-zero: never; ties-away: always). Equal to
 * minifloat_mag(E2M1) saturated at 7 -- the host test checks it on every fp32 pattern class. */
LHD uint32_t e2m1_mag_fast(float a, int mode)
{
    uint32_t c;
    if (mode == R_RNE) {
        c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
            (a > 5.0f);
    } else if (mode == R_TTZ) {
        c = (a > 0.25f) + (a > 0.75f) + (a > 1.25f) + (a > 1.75f) + (a > 2.5f) + (a > 3.5f) +
            (a > 5.0f);
    } else {
        c = (a >= 0.25f) + (a >= 0.75f) + (a >= 1.25f) + (a >= 1.75f) + (a >= 2.5f) +
            (a >= 3.5f) + (a >= 5.0f);
    }
    return c;
}

/* ---------------------------------------------------------------------------------------- */
/* Decoding (exact)                                                                          */
/* ---------------------------------------------------------------------------------------- */


/* The shared minifloat decoder for the block element types and fp16 (code masked as lofp_decode
 * masks it) */
LHD float decode_mf(int t, uint32_t code)
{
    const MF tr = mf_of(t);
    if (t == T_UE4M3) code &= 0x7F;
    else code &= (tr.sign_bit << 1) - 1;
    return lofp_ec_decode_minifloat(&tr, code);
}

LHD float decode_elem(int t, uint32_t code)
{
    if (t == T_MXINT8) return lofp_ec_decode_mxint8(code);
    return decode_mf(t, code);
}

/* E2M1 value without a multiply: magnitude table {0,.5,1,1.5,2,3,4,6} */
LHD float e2m1_value(uint32_t code)
{
    const uint32_t mag = code & 7u;
    /* fp32 bits: mag 1 -> 0.5 (0x3F000000); mag >= 2: exponent 127 + (mag>>1) - 1, mantissa bit */
    uint32_t bits = mag == 0 ? 0u : mag == 1 ? 0x3F000000u
                              : (((126u + (mag >> 1)) << 23) | ((mag & 1u) << 22));
    return u2f(bits | ((code & 8u) << 28));
}

LHD float e8m0_value(uint32_t b) /* E8M0 as lofp_decode: 0 -> 2^-127, 0xFF -> NaN (b < 256) */
{
    return lofp_ec_decode_e8m0(b);
}

/* NVFP4 dequantize without a division per element: y = fl(fl(v * sv) / global) for an E2M1 value
 * v; v * sv is exact and v = 2^j * {1, 1.5}, so while the two quotients b1 = fl(sv / global) and
 * b3 = fl(1.5 sv / global) stay normal after the scaling by 2^j (j in -1..2), y = 2^j * b1 or
 * 2^j * b3 exactly. nvfp4_dq_bases returns false when that does not hold (the caller divides per
 * element); tests/cuda/test_codec_host.cu checks both against the CPU formula. */
LHD bool nvfp4_dq_bases(float sv, float global, float &b1, float &b3)
{
    b1 = fdiv(sv, global);
    b3 = fdiv(fmul(1.5f, sv), global);
    const float a1 = fabsf(b1), a3 = fabsf(b3);
    return a1 >= 0x1p-125f && a1 < 0x1p125f && a3 >= 0x1p-125f && a3 < 0x1p125f;
}
LHD float nvfp4_dq_value(uint32_t code, float b1, float b3)
{
    const uint32_t m = code & 7u;
    /* m: 0 -> 0, 1 -> 0.5 b1, 2/3 -> 1 b1/b3, 4/5 -> 2 b1/b3, 6/7 -> 4 b1/b3 */
    const float pw = m == 1u ? 0.5f : e2m1_value(code & 6u);
    const float v = fmul(pw, (m & 1u) && m > 1u ? b3 : b1);
    return u2f(f2u(v) ^ ((code & 8u) << 28));
}


/* lofp_fp32_to_bf16() (the shared codec) */
LHD uint16_t f32_to_bf16(float x) { return lofp_ec_fp32_to_bf16(x); }
LHD uint16_t f32_to_f16(float x) { return (uint16_t)encode_mf(mf_of(T_FP16), x, R_RNE, true, 0); }

/* ---------------------------------------------------------------------------------------- */
/* Stochastic rounding bits (src/internal.h)                                                 */
/* ---------------------------------------------------------------------------------------- */

LHD uint32_t stochastic_bits(uint64_t seed, uint64_t i)
{
    uint64_t s = seed ^ (i * 0xD1B54A32D192ED03ull);
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    return (uint32_t)(z >> 32);
}

/* ---------------------------------------------------------------------------------------- */
/* NVFP4                                                                                     */
/* ---------------------------------------------------------------------------------------- */

/* global = fl(fl(1/amax) * 2688), amax floored at 1e-12 (quantize.c) */
LHD float nvfp4_global_from_amax(float amax)
{
    if (amax < 1e-12f) amax = 1e-12f;
    return fmul(frcp(amax), 2688.0f);
}

/* fl(a / 6) for a >= 0 finite by Markstein's iteration (below): fl(1/6) is the correctly rounded
 * reciprocal and fl(a * fl(1/6)) is within one ulp of a / 6, so the corrected quotient is the
 * correctly rounded one wherever the remainder does not underflow (a >= 2^-100 or so; below it the
 * result is far under the 1e-12 clamp either way). 3 FP instructions instead of the __fdiv_rn
 * sequence with its range check and slow-path call. test_codec_host compares it with the division
 * over every mantissa of the binades that matter. a = inf gives NaN (the caller clamps it). */
LHD float div6_rn(float a)
{
    const float r = u2f(0x3E2AAAABu); /* fl(1/6) */
    const float q0 = fmul(a, r);
    const float rem = ffma(-q0, 6.0f, a);
    return ffma(rem, r, q0);
}

/* Block scale: bs = clamp(bmax / 6, 1e-12, 448); byte = UE4M3(bs) (RNE). *bq gets the divisor
 * (decoded scale, 2^-9 when the byte is 0). */
LHD uint32_t nvfp4_scale(float bmax, float *bq)
{
    float bs = div6_rn(bmax);
    if (bs < 1e-12f) bs = 1e-12f;
    if (!(bs <= 448.0f)) bs = 448.0f; /* NaN: bmax = inf, where bmax / 6 = inf clamps to 448 */
    uint32_t sb = ue4m3_rne_fast(bs);
    float q = ue4m3_value(sb);
    if (!(q > 0.0f)) q = 0x1p-9f;
    *bq = q;
    return sb;
}

/* Correctly rounded a / b for a >= 0 finite and b one of the NVFP4 divisors (a UE4M3 value or
 * 2^-9), given r = fl(1/b): Markstein's iteration q1 = fl(q0 + fl(a - q0*b)*r), which is the
 * correctly rounded quotient when r is the correctly rounded reciprocal and q0 is within one ulp
 * (no underflow of the remainder). The GPU test checks it against __fdiv_rn for every divisor and
 * every fp32 mantissa in the binades that can reach a midpoint; below them the code is 0 anyway. */
LHD float div_markstein(float a, float b, float r)
{
    float q0 = fmul(a, r);
    float rem = ffma(-q0, b, a);
    return ffma(rem, r, q0);
}

/* ---------------------------------------------------------------------------------------- */
/* MX scale rules (quant_mx.c mx_scale_byte)                                                 */
/* ---------------------------------------------------------------------------------------- */

struct MXInfo { int emax, mbits; float maxv; };
LHD MXInfo mx_info(int t)
{
    switch (t) {
    case T_E2M1: return MXInfo{2, 1, 6.0f};
    case T_E2M3: return MXInfo{2, 3, 7.5f};
    case T_E3M2: return MXInfo{4, 2, 28.0f};
    case T_E4M3: return MXInfo{8, 3, 448.0f};
    case T_E5M2: return MXInfo{15, 2, 57344.0f};
    default: return MXInfo{0, 6, 1.984375f}; /* MXINT8 */
    }
}

LHD int clz32(uint32_t x)
{
#if defined(__CUDA_ARCH__)
    return __clz((int)x);
#else
    return x ? __builtin_clz(x) : 32;
#endif
}

LHD int floor_log2_pos(float a)
{
    uint32_t u = f2u(a);
    int ex = (int)(u >> 23);
    if (ex) return ex - 127;
    return (31 - clz32(u & 0x7FFFFFu)) - 149;
}
LHD int is_pow2_pos(float a)
{
    uint32_t u = f2u(a);
    if (u >> 23) return (u & 0x7FFFFFu) == 0;
    return (u & (u - 1)) == 0;
}
LHD uint32_t clamp_biased(int e) { return (uint32_t)(e < 0 ? 0 : e > 254 ? 254 : e); }

enum { S_FLOOR = 0, S_CEIL = 1, S_EVEN = 2, S_RCEIL = 3 };

LHD uint32_t mx_scale_byte(int elem, int rule, float amax_floor, int ceil_clamp, float amax)
{
    const MXInfo ei = mx_info(elem);
    if (amax < amax_floor) amax = amax_floor;
    if (rule == S_RCEIL) {
        float ratio = fdiv(amax, ei.maxv);
        uint32_t u = f2u(ratio);
        int ex = (int)(u >> 23);
        uint32_t m = u & 0x7FFFFFu;
        if (ceil_clamp) {
            int e = ex + (m != 0);
            return (uint32_t)(e < 1 ? 1 : e > 254 ? 254 : e);
        }
        if (ex == 0) return m > 0x400000u ? 1 : 0;
        return clamp_biased(ex + (m != 0));
    }
    if (amax == 0.0f) return 0;
    if (rule == S_EVEN) {
        uint32_t u = f2u(amax);
        if (u >> 23) {
            u += 1u << (22 - ei.mbits);
            u &= 0x7F800000u; /* a carry out of the top binade gives field 255: floor_log2 128 */
            amax = u2f(u);
        }
    }
    int e = floor_log2_pos(amax);
    if (rule == S_CEIL && !is_pow2_pos(amax)) e += 1;
    return clamp_biased(e - ei.emax + 127);
}

/* 2^(127-b) for b in [0, 254]: the exact reciprocal of the E8M0 scale, so x * it == x / scale. */
LHD float e8m0_recip(uint32_t b)
{
    int e = 127 - (int)b; /* [-127, 127] */
    return e >= -126 ? u2f((uint32_t)(e + 127) << 23) : u2f(0x00400000u);
}

/* ---------------------------------------------------------------------------------------- */
/* UltraQuant                                                                                */
/* ---------------------------------------------------------------------------------------- */

/* e = clamp(floor(fl(log2(s)) + 0.5), -126, 127) for finite s > 0, via thresholds: for s normal
 * with exponent E, the result is E + (mantissa >= thr[E + 126]); thr is computed on the host from
 * the CPU library's own expression (cuda/quantize.cu uq_thresholds_init). */
LHD int uq_exponent(float s, const uint32_t *thr)
{
    uint32_t u = f2u(s);
    int ex = (int)(u >> 23);
    if (ex == 0) return -126; /* subnormal: floor(log2 s + 0.5) <= -126 */
    int E = ex - 127;
    int e = E + ((u & 0x7FFFFFu) >= thr[E + 126] ? 1 : 0);
    return e > 127 ? 127 : e;
}

/* UltraQuant element code of y = x / 2^e: for y > 0 the number of midpoints strictly below |y|,
 * else the number at or below |y| (sign bit set when nonzero). For non-negative floats the bit
 * patterns order like the values, and "m <= a" is "m < a + 1 ulp", so the count is over
 * ua = bits(|y|) + (y > 0 ? 0 : 1) (NaN never reaches here). From 1.0 on, the midpoints 1.25,
 * 1.75, 2.5, 3.5, 5 are the patterns 0x3FA00000 + k * 2^22 (k = 0..4), so there the count is
 * 2 + #{k : 0x3FA00000 + k 2^22 < ua} = ((ua + 0x1FFFFF) >> 22) - 252, capped at 7; below 1.0
 * it is two compares (0.25, 0.75). Equal to the seven-compare formula on all 2^32 patterns
 * (test_codec_host). */
LHD uint32_t uq_code(float y)
{
    const uint32_t neg = y > 0.0f ? 0u : 1u;
    const uint32_t ua = (f2u(y) & 0x7FFFFFFFu) + neg;
    const uint32_t hi = ((ua + 0x1FFFFFu) >> 22) - 252u;
    const bool nz = ua > 0x3E800000u; /* above the first midpoint: the code is not 0 */
    const uint32_t lo = (uint32_t)nz + (uint32_t)(ua > 0x3F400000u);
    const uint32_t n = ua >= 0x3F800000u ? (hi < 7u ? hi : 7u) : lo;
    return n | ((nz ? neg : 0u) << 3);
}

/* 2^-e for e in [-126, 127] (exact) */
LHD float pow2_neg(int e)
{
    int f = -e; /* [-127, 126] */
    return f >= -126 ? u2f((uint32_t)(f + 127) << 23) : u2f(0x00400000u);
}

/* ---- UltraQuant element codes, two per 32-bit word (the store kernel) ----
 * uq_code(y), y = v * inv (inv = 2^-e), in about seven instructions per element instead of ~20:
 *  1. z = rz(v * inv - 2^-149) (one fma.rz). For y a normal float this is the float below y when
 *     y > 0 and y itself when y < 0, so "m < |y|" (y > 0) and "m <= |y|" (y <= 0) are both
 *     "m <= |z|": n = #{m in 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 : m <= |z|}. (|y| below the normal
 *     range: |z| < 2^-125, n = 0 either way.)
 *  2. From 1.25 on the midpoints are the patterns 0x3FA00000 + k * 2^22, so there
 *     n = ((bits|z| + 0x200000) >> 22) - 252. Below 1.25 the same formula applied to
 *     w = rz(|z| / 2 + 1/2) (one fma.rz; its midpoints 0.625, 0.875 are |z| = 0.25, 0.75, and
 *     rounding toward zero keeps "w >= a representable t" exact) is n. Each formula is <= n
 *     everywhere (|z|'s counts 0.625, 0.875, 1.25.. midpoints at or above n's; w's counts 1.5, 2.5,
 *     4, 6, 9 for n's 1.25, 1.75, 2.5, 3.5, 5) and the formula is monotone, so n is the formula
 *     applied to max(bits|z|, bits w), capped at 7 (bits(5.0)).
 *  3. Only the top 16 bits of either pattern matter (every midpoint's low 16 bits are 0), so two
 *     elements go through one 16x2 integer max and one 16x2 add-min: the halves of
 *     min(max(|z|16, w16) + 0x120, 0x41C0) hold (256 + n) << 6 plus 6 low bits.
 *  4. The sign bit of the code (set iff y <= -0.25, i.e. y < 0 and n > 0): the sign of
 *     q = fma(v, inv, 0.25 - 2^-26), replicated over both bytes of a half by one prmt.
 * Result of uq_code_pair: the codes of the two elements in bits 6..9 and 22..25, the rest 0. */
LHD float uq_nudge(float v, float inv)
{
#if defined(__CUDA_ARCH__)
    float z;
    asm("fma.rz.f32 %0, %1, %2, 0f80000001;" : "=f"(z) : "f"(v), "f"(inv));
    return z;
#else
    /* the fma's result wherever v * inv is a normal float or zero (the kernel's inv is a power of
     * two, so v * inv is exact then); below the normal range both give code 0 */
    const float y = fmul(v, inv);
    if (y == 0.0f) return -0x1p-149f;
    if (y > 0.0f && y <= 3.40282347e38f) return nextafterf(y, 0.0f);
    return y;
#endif
}
LHD float uq_half_up(float z) /* rz(|z| * 0.5 + 0.5) */
{
#if defined(__CUDA_ARCH__)
    float w;
    asm("fma.rz.f32 %0, %1, 0f3F000000, 0f3F000000;" : "=f"(w) : "f"(fabsf(z)));
    return w;
#else
    /* exact for |z| < 2^28 (the double sum is exact); above, the caller caps the result anyway */
    const double r = 0.5 * (double)fabs_(z) + 0.5;
    float f = (float)r;
    if ((double)f > r) f = nextafterf(f, 0.0f);
    return f;
#endif
}
LHD float uq_negsign(float v, float inv) { return ffma(v, inv, 0x1.fffffep-3f); } /* < 0 iff v*inv <= -0.25 */
LHD uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
#else
    const uint64_t x = (uint64_t)a | ((uint64_t)b << 32);
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t s = (sel >> (4 * i)) & 0xFu;
        uint32_t byte = (uint32_t)(x >> (8 * (s & 7u))) & 0xFFu;
        if (s & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u; /* sign replication */
        d |= byte << (8 * i);
    }
    return d;
#endif
}
/* min(a + b, c) in each 16-bit half (the sums here never carry out of a half) */
LHD uint32_t viaddmin_u16x2(uint32_t a, uint32_t b, uint32_t c)
{
#if defined(__CUDA_ARCH__)
    return __viaddmin_u16x2(a, b, c);
#else
    uint32_t d = 0;
    for (int h = 0; h < 32; h += 16) {
        const uint32_t s = (((a >> h) & 0xFFFFu) + ((b >> h) & 0xFFFFu)) & 0xFFFFu, m = (c >> h) & 0xFFFFu;
        d |= (s < m ? s : m) << h;
    }
    return d;
#endif
}
/* cap: UQ_PAIR_CAP (a kernel passes it as a parameter, so that it sits in one register instead
 * of being re-materialized before every add-min) */
#define UQ_PAIR_CAP 0x41C041C0u
LHD uint32_t uq_code_pair(float za, float zb, float wa, float wb, float qa, float qb, uint32_t cap = UQ_PAIR_CAP)
{
    const uint32_t az = prmt(f2u(za), f2u(zb), 0x7632u) & 0x7FFF7FFFu; /* |z| >> 16, both */
    const uint32_t w = prmt(f2u(wa), f2u(wb), 0x7632u);
    const uint32_t n = viaddmin_u16x2(vmax_u16x2(az, w), 0x01200120u, cap);
    const uint32_t s = prmt(f2u(qa), f2u(qb), 0xFFBBu); /* 0xFFFF in a half whose q < 0 */
    return (n & 0x01C001C0u) | (s & 0x02000200u);
}
/* eight codes from uq_code_pair of elements (j, j + 4), j = 0..3, as one word (element i in bits
 * 4i..4i+3) */
LHD uint32_t uq_pack8(uint32_t p0, uint32_t p1, uint32_t p2, uint32_t p3)
{
    return (p0 >> 6) | (p1 >> 2) | (p2 << 2) | (p3 << 6);
}

} /* namespace lofpcu */

#endif

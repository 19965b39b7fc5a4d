/* w4a8_common.cuh -- the E2M1 -> E4M3 conversion shared by the W4A8 kernel (gemm_w4a8.cu, in
 * registers) and the weight cast of the large-M route (gemm_w4a8_large.cu, to memory). */
#ifndef LOFP_W4A8_COMMON_CUH
#define LOFP_W4A8_COMMON_CUH

#include <stdint.h>

namespace {

/* E2M1 -> E4M3 by table. The byte table (t0: magnitudes 0..3, t1: 4..7) holds E4M3(v * 2^(6 - d))
 * for the e2m1 magnitudes v = 0, 0.5, 1, 1.5, 2, 3, 4, 6: at d = 0 the bytes 00 60 68 6C 70 74 78 7C
 * (all normal: 0.5 * 2^6 = 2^5 has exponent field 12), and d binades lower is the same bytes minus
 * 8 d in each nonzero byte (the exponent field minus d) -- exact while 12 - d >= 1, i.e. d <= 11
 * (W8_DMAX; below, 0.5 * 2^(6 - d) would be an E4M3 subnormal, another encoding). */
constexpr uint32_t W8_T0 = 0x6C686000u, W8_T1 = 0x7C787470u;
constexpr uint32_t W8_C0 = 0x08080800u, W8_C1 = 0x08080808u;  /* 8 per nonzero byte */
constexpr int W8_DMAX = 11;

/* The whole exact range, subnormals included: every product v * 2^(6 - d) of the 8 magnitudes is
 * an E4M3 value for 0 <= d <= 14 (W8_ROW_DMAX; proof in gemm_w4a8_large.cu). Tables for d = 12..14
 * (the smallest magnitudes as subnormals m * 2^-9):
 *   d = 12: 0, 2^-7 (sub 4), 2^-6, 1.5 2^-6 | 2^-5, 1.5 2^-5, 2^-4, 1.5 2^-4 = 00 04 08 0C | 10 14 18 1C
 *   d = 13: 0, 2^-8 (sub 2), 2^-7 (sub 4), 1.5 2^-7 (sub 6) | 2^-6, 1.5 2^-6, 2^-5, 1.5 2^-5
 *           = 00 02 04 06 | 08 0C 10 14
 *   d = 14: 0, sub 1, sub 2, sub 3 | sub 4, sub 6, 2^-6, 1.5 2^-6 = 00 01 02 03 | 04 06 08 0C */
constexpr int W8_ROW_DMAX = 14;
__host__ __device__ __forceinline__ void w8_table(int d, uint32_t &t0, uint32_t &t1)
{
    if (d <= W8_DMAX) {
        t0 = W8_T0 - (uint32_t)d * W8_C0;
        t1 = W8_T1 - (uint32_t)d * W8_C1;
    } else if (d == 12) {
        t0 = 0x0C080400u; t1 = 0x1C181410u;
    } else if (d == 13) {
        t0 = 0x06040200u; t1 = 0x14100C08u;
    } else {
        t0 = 0x03020100u; t1 = 0x0C080604u;
    }
}

/* prmt.b32 in its default mode: output byte i is byte (sel >> 4i) & 7 of the pair b:a. Every
 * selector here has bit 3 of each nibble clear (set, it would replicate a sign bit instead); the
 * host version (test_codec_host runs the conversion below on the CPU) implements that case only. */
__host__ __device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
#else
    const uint64_t ba = ((uint64_t)b << 32) | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) d |= (uint32_t)((ba >> (8 * ((sel >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
    return d;
#endif
}
/* a prepared word q (nibble i: element 2i for i < 4, 2(i - 4) + 1 above) -> lo = E4M3 bytes of
 * nibbles 0..3, hi = of nibbles 4..7. Magnitude: prmt of the table with the nibbles' low 3 bits
 * as selector (bit 3, the sign, cleared: set it would select prmt's sign-replicating mode).
 * Sign: nibble i's sign bit is bit 4i + 3 of q (or of q << 4 = bit 4i + 7); a byte prmt of
 * (q, q << 4) puts, for each output byte, the source byte whose bit 7 is that sign. 9 operations
 * per word. */
__host__ __device__ __forceinline__ void e4m3_word(uint32_t q, uint32_t t0, uint32_t t1, uint32_t &lo, uint32_t &hi)
{
    const uint32_t qm = q & 0x77777777u, q4 = q << 4;
    lo = prmt(t0, t1, qm) | (prmt(q, q4, 0x1504u) & 0x80808080u);
    hi = prmt(t0, t1, qm >> 16) | (prmt(q, q4, 0x3726u) & 0x80808080u);
}

/* The large route's cast of one prepared word whose block lies d binades below its row's largest
 * (0 <= d <= W8_ROW_DMAX): its 8 weights as E4M3 bytes in natural element order, x = elements
 * 0..3, y = 4..7 (e4m3_word gives lo = elements 0, 2, 4, 6 and hi = 1, 3, 5, 7). */
__host__ __device__ __forceinline__ void w8_word_plain(uint32_t q, int d, uint32_t &x, uint32_t &y)
{
    uint32_t t0, t1, lo, hi;
    w8_table(d, t0, t1);
    e4m3_word(q, t0, t1, lo, hi);
    x = prmt(lo, hi, 0x5140u);
    y = prmt(lo, hi, 0x7362u);
}

} // namespace

#endif

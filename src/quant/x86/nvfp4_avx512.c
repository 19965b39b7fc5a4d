/* nvfp4_avx512.c -- NVFP4 row kernels at 512 bits. Quantize is nvfp4_avx2.c's batch on 16 blocks
 * (256 values) so that the per-block scale arithmetic is one zmm: block max of |x| (integer max
 * of magnitude bits, the 16 x 16 transpose-reduce) times global (= max |g| of g = x * global:
 * global > 0 and rounding is monotone), bs = bmax / 6
 * (divps, correctly rounded like the scalar division), clamp to [1e-12, 448] (max/min of finite
 * values), UE4M3 by the integer encoder, bq decoded from its fields (0 -> 2^-9), e = g / bq
 * (divps: a true division, as the reference), E2M1 codes of four blocks at a time by the byte-key
 * table lookup of simd_avx512.h (the reference's clamp of e to +-6 changes no code: the count
 * saturates at 7 and the sign is kept). Stochastic rounding: the same e, clamped, through the
 * reference's scalar encoder. Every rounding mode and both levels (the global is an argument)
 * run here; nothing falls back. The batches are software-pipelined (the scales of the next batch
 * before the codes of this one): one batch's scale chain is long (maxima, two divisions, the
 * encoder) and held the kernel to 1.37x the AVX2 speed; overlapped with the encodes, 1.7x.
 *
 * Dequantize: (E2M1(c) * UE4M3(sb)) / global for the 16 codes of a scale byte is one zmm row of a
 * table built once per global per thread (the reference expression on the same operands), and a
 * block is one vpermps of that row by its 16 codes.
 *
 * Needs AVX-512 F/BW/VL and VBMI (installed by kernels_avx512.c only then). */
#include <pthread.h>

#include "simd_avx512.h"
#include "quant/generic_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)

/* E2M1 code magnitude tables (simd_avx512.h), per tie rule. */
static uint8_t g_e2m1_lut[3][128] __attribute__((aligned(64)));

static void build_luts(void) { v512_e2m1_luts(g_e2m1_lut); }

/* Scale bytes of the 16 blocks at xb, their bq (bqs) and max |g| bits (returned). */
static inline __attribute__((always_inline)) __m512i
nvfp4_scales16(const v512_mf *ue4m3, const float *xb, __m512 vg, uint8_t *scales, float *bqs)
{
    /* max |g| = max |x| * global: global > 0 and rounding is monotone, so the product of the
     * largest |x| is the largest product (Inf when one overflows, NaN bits when x has a NaN) */
    __m512i m[16];
    for (int j = 0; j < 16; j++) m[j] = _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xb + 16 * j)), V16I(0x7FFFFFFF));
    const __m512i mx = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(v512_reduce16_max_u32(m)), vg));
    __m512 bs = _mm512_div_ps(_mm512_castsi512_ps(mx), _mm512_set1_ps(6.0f));
    bs = _mm512_max_ps(bs, _mm512_set1_ps(1e-12f));
    bs = _mm512_min_ps(bs, _mm512_set1_ps(448.0f));
    const __m512i sb = _mm512_min_epu32(v512_mf_mag_raw(ue4m3, _mm512_castps_si512(bs)), ue4m3->maxc);
    /* decode: e = 0 gives m * 2^-9 (then 0 -> 2^-9 as the reference's !(bq > 0)), else fields */
    const __m512i e = _mm512_srli_epi32(sb, 3), mant = _mm512_and_si512(sb, V16I(7));
    __m512 normal = _mm512_castsi512_ps(_mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(e, V16I(120)), 23),
                                                        _mm512_slli_epi32(mant, 20)));
    __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(mant), _mm512_set1_ps(0x1p-9f));
    __m512 bq = _mm512_mask_blend_ps(_mm512_testn_epi32_mask(e, e), normal, sub);
    bq = _mm512_mask_blend_ps(_mm512_testn_epi32_mask(sb, sb), bq, _mm512_set1_ps(0x1p-9f));
    _mm_storeu_si128((__m128i *)(void *)scales, _mm512_cvtepi32_epi8(sb));
    _mm512_storeu_ps(bqs, bq); /* broadcast from memory by the encodes: a load, not a shuffle */
    return mx;
}

/* Codes of the 16 blocks at xb given their bq; returns the non-finite block count (mx: max |g|
 * bits). `stochastic` is a compile-time constant in each caller. */
static inline __attribute__((always_inline)) size_t
nvfp4_codes16(const lofp_scheme *s, int stochastic, const uint8_t *lut, const float *xb, __m512 vg,
              const float *bqs, __m512i mx, uint64_t base, uint8_t *codes, uint8_t *scales)
{
    if (stochastic) {
        float e16[16];
        for (int j = 0; j < 16; j++) {
            __m512 v = _mm512_div_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * j), vg), _mm512_set1_ps(bqs[j]));
            /* the reference clamps e before the stochastic encode: max/min agree on finite e */
            _mm512_storeu_ps(e16, _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-6.0f)), _mm512_set1_ps(6.0f)));
            lofp_stochastic_codes(s, e16, 16, base + 16 * (uint64_t)j, codes, 16 * (size_t)j);
        }
    } else {
        for (int j = 0; j < 16; j += 4) {
            __m512 v[4];
            for (int i = 0; i < 4; i++) /* g = x * global, divided by its block's bq */
                v[i] = _mm512_div_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * (j + i)), vg), _mm512_set1_ps(bqs[j + i]));
            _mm256_storeu_si256((__m256i *)(void *)(codes + 8 * j), v512_e2m1_pack64(lut, v[0], v[1], v[2], v[3]));
        }
    }

    /* |g| >= Inf: a non-finite x, or finite x overflowing with a large given multiplier (that
     * block is already right: the vector ops are the reference's on Inf too) */
    __mmask16 inf = _mm512_cmpgt_epu32_mask(mx, V16I(0x7F7FFFFF));
    size_t bad = 0;
    while (LOFP_UNLIKELY(inf)) {
        int j = __builtin_ctz((unsigned)inf);
        inf &= (__mmask16)(inf - 1);
        if (kq_first_nonfinite_f32(xb + 16 * j, 16) < 16) {
            scales[j] = 0;
            memset(codes + 8 * j, 0, 8);
            bad++;
        }
    }
    return bad;
}

static inline __attribute__((always_inline)) size_t
nvfp4_row512(const lofp_scheme *s, int stochastic, const float *x, size_t kp, float global, uint64_t base,
             uint8_t *codes, uint8_t *scales)
{
    v512_mf ue4m3;
    const kq_mf p = { 3, 121, 0x7E };
    v512_mf_init(p, 0, LOFP_RNE, &ue4m3);
    const uint8_t *lut = g_e2m1_lut[v512_lut_index(stochastic ? LOFP_RNE : s->rounding)];
    const __m512 vg = _mm512_set1_ps(global);
    const size_t nb = kp / 16, nfull = nb / 16 * 16;
    size_t b = 0, bad = 0;
    /* software-pipelined: the scales of batch b + 16 are computed before the codes of batch b,
     * so the long dependency chain of one (maxima, two divisions, the encoder) overlaps the
     * independent encodes of the other */
    float bqs[2][16];
    __m512i mx = _mm512_setzero_si512();
    if (nfull) mx = nvfp4_scales16(&ue4m3, x, vg, scales, bqs[0]);
    for (; b < nfull; b += 16) {
        const int cur = (int)(b / 16) & 1;
        __m512i mx_next = mx;
        v_prefetch(x + b * 16, 256);
        if (b + 16 < nfull) mx_next = nvfp4_scales16(&ue4m3, x + (b + 16) * 16, vg, scales + b + 16, bqs[cur ^ 1]);
        bad += nvfp4_codes16(s, stochastic, lut, x + b * 16, vg, bqs[cur], mx, base + b * 16, codes + b * 8, scales + b);
        mx = mx_next;
    }
    if (b < nb) {
        /* the last 1..15 blocks go through the same code on a zero-padded copy */
        float tmp[256];
        uint8_t tc[128] = { 0 }, ts[16];
        size_t n = nb - b;
        memset(tmp, 0, sizeof tmp);
        memcpy(tmp, x + b * 16, n * 16 * sizeof(float));
        mx = nvfp4_scales16(&ue4m3, tmp, vg, ts, bqs[0]);
        bad += nvfp4_codes16(s, stochastic, lut, tmp, vg, bqs[0], mx, base + b * 16, tc, ts);
        memcpy(codes + b * 8, tc, n * 8);
        memcpy(scales + b, ts, n);
    }
    return bad;
}

static size_t nvfp4_quant_row_avx512(const lofp_scheme *s, const float *x, size_t kp, float global, uint64_t base,
                                     uint8_t *codes, uint8_t *scales, float *scratch)
{
    (void)scratch;
    if (LOFP_UNLIKELY(s->rounding == LOFP_STOCHASTIC)) return nvfp4_row512(s, 1, x, kp, global, base, codes, scales);
    return nvfp4_row512(s, 0, x, kp, global, base, codes, scales);
}

/* (E2M1(c) * UE4M3(sb)) / global for every sb & 0x7F and c, one 64-byte row per scale byte: the
 * reference expression on the same operands (the E2M1 value first: which NaN a NaN scale gives),
 * so a lookup is the reference result. Rebuilt when a call with another global (compared as
 * bits) reaches this thread. */
static _Thread_local struct {
    uint32_t global_bits;
    int valid;
    float v[128][16];
} dq_tab; /* unaligned loads: over-aligned TLS is not guaranteed in a dlopen()ed library */

/* Not inlined: inlined, the compiler re-derived the TLS address (a __tls_get_addr call in
 * PIC code) inside the caller's loop, block by block. */
static __attribute__((noinline)) const float (*nvfp4_table(float global))[16]
{
    uint32_t gb = lofp_f32_bits(global);
    if (!dq_tab.valid || dq_tab.global_bits != gb) {
        const float *ue4m3 = lofp_decode_table(LOFP_ELEM_UE4M3);
        const float *e2m1 = lofp_decode_table(LOFP_ELEM_E2M1);
        const __m512 ev = _mm512_loadu_ps(e2m1); /* codes 0..15 (code 8 is -0) */
        const __m512 vg = _mm512_set1_ps(global);
        for (int sb = 0; sb < 128; sb++)
            _mm512_storeu_ps(dq_tab.v[sb], _mm512_div_ps(_mm512_mul_ps(ev, _mm512_set1_ps(ue4m3[sb])), vg));
        dq_tab.global_bits = gb;
        dq_tab.valid = 1;
    }
    return (const float (*)[16])dq_tab.v;
}

static void nvfp4_dequant_row_avx512(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                                     float global, size_t kp, float *out, unsigned flags)
{
    (void)s;
    int st = v_stream_ok(flags, out);
    if (st == 2 && ((uintptr_t)out & 63) == 0) st = 3; /* then every 16-float block is aligned */
    const float (*tab)[16] = nvfp4_table(global);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const size_t nb = kp / 16;
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(codes + 8 * b)); /* blocks b, b + 1 */
        __m128i l = _mm_and_si128(v, m4), h = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        /* vpermps reads the low 4 bits of each index: the code is the row entry */
        __m512 v0 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(l, h)), _mm512_loadu_ps(tab[scales[b] & 0x7F]));
        __m512 v1 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(l, h)),
                                          _mm512_loadu_ps(tab[scales[b + 1] & 0x7F]));
        v512_store16(out + 16 * b, v0, st);
        v512_store16(out + 16 * b + 16, v1, st);
    }
    if (b < nb) {
        __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)(codes + 8 * b));
        __m128i l = _mm_and_si128(v, m4), h = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        v512_store16(out + 16 * b,
                     _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(l, h)), _mm512_loadu_ps(tab[scales[b] & 0x7F])),
                     st);
    }
    if (st) _mm_sfence();
}

void lofp_kernels_init_nvfp4_avx512(lofp_kernel_table *t)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_luts);
    t->quant[LOFP_KFAM_NVFP4] = (lofp_quant_kernels){ "avx512", nvfp4_quant_row_avx512, nvfp4_dequant_row_avx512 };
}

#else
void lofp_kernels_init_nvfp4_avx512(lofp_kernel_table *t) { (void)t; }
#endif

/* test_codec_host.cu -- runs WITHOUT a GPU: checks the __host__ __device__ helpers the kernels use
 * (lofp_cuda_device.cuh) against the CPU library, and emulates the per-block arithmetic of the
 * NVFP4, MX and UltraQuant kernels (including the butterfly's lane formula) on the host, comparing
 * with lofp_quantize byte for byte. This is the cheap half of the bit-exactness proof; the GPU test
 * (cuda_test.c) compares the kernels' own output. Part of the normal ctest suite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gemm_common.cuh"
#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"
#include "w4a8_common.cuh"

using namespace lofpcu;

static int failures = 0;
#define EXPECT(c, ...)                                                                         \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            if (failures++ < 30) {                                                             \
                fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                \
                fprintf(stderr, __VA_ARGS__);                                                  \
                fputc('\n', stderr);                                                           \
            }                                                                                  \
        }                                                                                      \
    } while (0)

static uint64_t rng_s = 0x1234567887654321ull;
static uint64_t rnd(void)
{
    uint64_t z = (rng_s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(void) { return (double)(rnd() >> 11) * 0x1p-53; }
static float bf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t fb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static const lofp_elem k_types[] = {LOFP_ELEM_E2M1, LOFP_ELEM_E2M3, LOFP_ELEM_E3M2, LOFP_ELEM_E4M3,
                                    LOFP_ELEM_E5M2, LOFP_ELEM_MXINT8};

static void test_encoders(void)
{
    /* every element type x mode against lofp_encode on random and near-boundary inputs */
    for (lofp_elem t : k_types) {
        for (int mode = 0; mode < 4; mode++) {
            for (int i = 0; i < 40000; i++) {
                uint32_t u;
                switch (i % 4) {
                case 0: u = (uint32_t)rnd(); break;
                case 1: u = fb((float)((unif() * 2 - 1) * 1000.0)); break;
                case 2: u = fb((float)((unif() * 2 - 1) * 8.0)); break;
                default: { /* a code value or midpoint, nudged by a few ulps */
                    float v = lofp_decode(t, (uint32_t)(rnd() & 0xFF));
                    float w = lofp_decode(t, (uint32_t)(rnd() & 0xFF));
                    float m = (float)(((double)v + (double)w) / 2);
                    u = fb(m) + (uint32_t)((int)(rnd() % 7) - 3);
                }
                }
                float x = bf(u);
                uint32_t rb = (uint32_t)rnd();
                uint32_t want = lofp_encode(t, x, (lofp_rounding)mode, LOFP_SATURATE, rb);
                uint32_t got = encode_elem((int)t, x, mode, rb);
                EXPECT(want == got, "encode type %d mode %d x=%08x: cpu %x gpu %x", (int)t, mode, u,
                       want, got);
            }
        }
    }
    /* UE4M3 RNE, fp16 IEEE, bf16 */
    for (int i = 0; i < 300000; i++) {
        uint32_t u = (i & 1) ? (uint32_t)rnd() : fb((float)(unif() * 500.0));
        float x = bf(u);
        EXPECT(lofp_encode(LOFP_ELEM_UE4M3, x, LOFP_RNE, LOFP_SATURATE, 0) == encode_ue4m3_rne(x),
               "ue4m3 %08x", u);
        EXPECT(lofp_fp32_to_fp16(x) == f32_to_f16(x), "fp16 %08x", u);
        EXPECT(lofp_fp32_to_bf16(x) == f32_to_bf16(x), "bf16 %08x", u);
    }
    /* decoders: every code */
    for (lofp_elem t : k_types)
        for (uint32_t c = 0; c < 256; c++) {
            float a = lofp_decode(t, c), b = decode_elem((int)t, c);
            EXPECT(fb(a) == fb(b) || (isnan(a) && isnan(b)), "decode %d %x", (int)t, c);
        }
    for (uint32_t c = 0; c < 256; c++) {
        float a = lofp_decode(LOFP_ELEM_UE4M3, c), b = decode_mf(T_UE4M3, c);
        EXPECT(fb(a) == fb(b) || (isnan(a) && isnan(b)), "decode ue4m3 %x", c);
        if (c < 16) EXPECT(fb(lofp_decode(LOFP_ELEM_E2M1, c)) == fb(e2m1_value(c)), "e2m1 value %x", c);
        a = lofp_decode(LOFP_ELEM_E8M0, c);
        b = e8m0_value(c);
        EXPECT(fb(a) == fb(b) || (isnan(a) && isnan(b)), "e8m0 %x", c);
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float a = lofp_fp16_to_fp32((uint16_t)h), b = decode_mf(T_FP16, h);
        EXPECT(fb(a) == fb(b) || (isnan(a) && isnan(b)), "fp16 decode %x", h);
    }
}

/* The device's minifloat rows (lofp_ec_minifloat_of in src/core/element_codec.h: device code
 * cannot read the traits table) against the CPU library's, which encodes and decodes through the
 * traits table: every code decoded, and random and overflowing inputs encoded under both
 * overflow policies and all four modes. */
static void test_minifloat_rows(void)
{
    static const lofp_elem mf_types[] = {LOFP_ELEM_E2M1, LOFP_ELEM_E2M3, LOFP_ELEM_E3M2,
                                         LOFP_ELEM_E4M3, LOFP_ELEM_E5M2, LOFP_ELEM_BF16,
                                         LOFP_ELEM_FP16};
    for (lofp_elem t : mf_types) {
        const lofp_elem_info *info = lofp_elem_info_get(t);
        const MF mf = mf_of((int)t);
        EXPECT(info && (unsigned)mf.mbits == info->mbits && mf.bias == info->bias &&
                   mf.max_code == info->max_code && (mf.has_inf != 0) == (info->has_inf != 0),
               "minifloat row %d", (int)t);
        const uint32_t ncodes = 1u << info->bits;
        for (uint32_t c = 0; c < ncodes; c++) {
            float a = lofp_decode(t, c), b = lofp_ec_decode_minifloat(&mf, c);
            EXPECT(fb(a) == fb(b) || (isnan(a) && isnan(b)), "row decode %d %x", (int)t, c);
        }
        for (int ovf = 0; ovf < 2; ovf++)
            for (int mode = 0; mode < 4; mode++)
                for (int i = 0; i < 20000; i++) {
                    const uint32_t u = (i & 1) ? (uint32_t)rnd() : fb((float)((unif() * 2 - 1) * 1e5));
                    const uint32_t rb = (uint32_t)rnd();
                    const uint32_t want = lofp_encode(t, bf(u), (lofp_rounding)mode, (lofp_overflow)ovf, rb);
                    const uint32_t got = encode_mf(mf, bf(u), mode, ovf == LOFP_IEEE, rb);
                    EXPECT(want == got, "row encode %d mode %d ovf %d x=%08x: cpu %x gpu %x",
                           (int)t, mode, ovf, u, want, got);
                }
    }
}

static void test_fast_paths(void)
{
    /* e2m1_rne_fast against the integer encoder */
    const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.0f, 2.5f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f};
    auto chk = [&](float a) {
        uint32_t want = lofp_encode(LOFP_ELEM_E2M1, a, LOFP_RNE, LOFP_SATURATE, 0) & 7;
        EXPECT(want == e2m1_rne_fast(a), "e2m1_rne_fast a=%.9g (%08x): %u vs %u", a, fb(a), want, e2m1_rne_fast(a));
    };
    for (float m : mids)
        for (int d = -4096; d <= 4096; d++) chk(bf(fb(m) + d));
    for (uint32_t u = 0; u < 0x42000000u; u += 331) chk(bf(u));
    for (int i = 0; i < 200000; i++) chk(bf((uint32_t)rnd() & 0x7F7FFFFFu));
    chk(INFINITY);
    /* UE4M3 fast encode / value on [1e-12, 448]: near every code value and midpoint, and a sweep */
    auto chk2 = [&](float bs) {
        if (!(bs >= 1e-12f && bs <= 448.0f)) return;
        uint32_t want = lofp_encode(LOFP_ELEM_UE4M3, bs, LOFP_RNE, LOFP_SATURATE, 0);
        uint32_t got = ue4m3_rne_fast(bs);
        EXPECT(want == got, "ue4m3 fast bs=%.9g (%08x): %u vs %u", bs, fb(bs), want, got);
    };
    for (uint32_t code = 0; code < 0x7F; code++) {
        float v = lofp_decode(LOFP_ELEM_UE4M3, code), w = lofp_decode(LOFP_ELEM_UE4M3, code + 1);
        EXPECT(fb(ue4m3_value(code)) == fb(v), "ue4m3_value %u", code);
        float m = (float)(((double)v + (double)w) / 2);
        for (int d = -2048; d <= 2048; d++) { chk2(bf(fb(v) + d)); chk2(bf(fb(m) + d)); }
    }
    for (uint32_t u = fb(1e-12f); u <= fb(448.0f); u += 97) chk2(bf(u));
}

static void test_e2m1_fast(void)
{
    /* the midpoint-counting E2M1 against the integer encoder: all floats within 4096 ulps of every
     * midpoint, a strided sweep of [0, 16], and random patterns */
    const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
    for (int mode = 0; mode < 3; mode++) {
        auto check = [&](float a) {
            uint32_t want = lofp_encode(LOFP_ELEM_E2M1, a, (lofp_rounding)mode, LOFP_SATURATE, 0) & 7;
            uint32_t got = e2m1_mag_fast(a, mode);
            EXPECT(want == got, "e2m1 fast mode %d a=%.9g (%08x): %u vs %u", mode, a, fb(a), want, got);
        };
        for (float m : mids)
            for (int d = -4096; d <= 4096; d++) check(bf(fb(m) + d));
        for (uint32_t u = 0; u < 0x41800000u; u += 997) check(bf(u));
        for (int i = 0; i < 200000; i++) check(bf((uint32_t)rnd() & 0x7F7FFFFFu));
        check(INFINITY);
    }
}

/* Emulates nvfp4_kernel on the host for a [rows, k] fp32 tensor (k % 16 == 0). */
static void nvfp4_host(const float *x, size_t rows, size_t k, float global, int mode, uint64_t seed,
                       uint8_t *codes, uint8_t *scales)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < k / 16; b++) {
            float g[16], bmax = 0;
            for (int i = 0; i < 16; i++) {
                g[i] = fmul(x[r * k + b * 16 + i], global);
                float a = fabs_(g[i]);
                if (a > bmax) bmax = a;
            }
            float bq;
            uint32_t sb = nvfp4_scale(bmax, &bq);
            float rcp = frcp(bq);
            scales[r * (k / 16) + b] = (uint8_t)sb;
            for (int i = 0; i < 16; i++) {
                float a = fabs_(g[i]);
                float q = is_finite_bits(f2u(a)) ? div_markstein(a, bq, rcp) : a;
                uint32_t c;
                if (mode != R_STOCH) c = e2m1_mag_fast(q, mode) | ((f2u(g[i]) >> 31) << 3);
                else {
                    float e = u2f(f2u(q) | (f2u(g[i]) & 0x80000000u));
                    if (e < -6.0f) e = -6.0f;
                    if (e > 6.0f) e = 6.0f;
                    c = encode_mf(mf_of(T_E2M1), e, R_STOCH, false,
                                  stochastic_bits(seed, r * k + b * 16 + i));
                }
                size_t j = r * k + b * 16 + i;
                if (j & 1) codes[j / 2] = (uint8_t)((codes[j / 2] & 0x0F) | (c << 4));
                else codes[j / 2] = (uint8_t)((codes[j / 2] & 0xF0) | c);
            }
        }
}

static std::vector<float> make_input(size_t n, int kind)
{
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) {
        double v;
        switch (kind) {
        case 0: v = (unif() * 2 - 1) * 3; break;
        case 1: { /* heavy tails and tiny blocks */
            double e = (unif() * 2 - 1) * 20;
            v = (unif() < 0.5 ? -1 : 1) * pow(2.0, e);
            break;
        }
        case 2: /* exact grid points (ties after scaling) */
            v = (double)lofp_decode(LOFP_ELEM_E2M1, (uint32_t)(rnd() & 15)) * ((rnd() & 1) ? 1 : 0.25);
            break;
        default: v = ((rnd() % 17) - 8) * 0.125; break;
        }
        x[i] = (float)v;
        if (kind == 1 && (i % 64) < 16) x[i] *= 1e-30f; /* some near-zero blocks */
    }
    return x;
}

static void test_nvfp4_emulation(void)
{
    for (int kind = 0; kind < 4; kind++)
        for (int mode = 0; mode < 4; mode++) {
            const size_t rows = 37, k = 256;
            auto x = make_input(rows * k, kind);
            lofp_scheme s;
            lofp_scheme_preset("nvfp4", &s);
            s.rounding = (lofp_rounding)mode;
            s.seed = 77;
            std::vector<uint8_t> c1(rows * k / 2), s1(rows * k / 16), c2(c1.size()), s2(s1.size());
            float global = 0;
            lofp_status st = lofp_quantize(&s, LOFP_DTYPE_F32, x.data(), rows, k, c1.data(),
                                           s1.data(), &global, NULL);
            EXPECT(st == LOFP_OK, "cpu nvfp4 failed");
            float amax = 0;
            for (float v : x) amax = fabsf(v) > amax ? fabsf(v) : amax;
            float g2 = nvfp4_global_from_amax(amax);
            EXPECT(fb(g2) == fb(global), "global %g vs %g", g2, global);
            nvfp4_host(x.data(), rows, k, g2, mode, 77, c2.data(), s2.data());
            EXPECT(c1 == c2, "nvfp4 codes kind %d mode %d", kind, mode);
            EXPECT(s1 == s2, "nvfp4 scales kind %d mode %d", kind, mode);
        }
}

static void test_markstein_sample(void)
{
    /* every UE4M3 divisor (and 2^-9) x every mantissa of [1,2) for a subset, random elsewhere */
    for (uint32_t sb = 0; sb < 0x7F; sb++) {
        float b = sb ? lofp_decode(LOFP_ELEM_UE4M3, sb) : 0x1p-9f;
        float r = frcp(b);
        const int full = sb == 0x33 || sb == 0x7E;
        for (uint32_t m = 0; m < 0x800000u; m += full ? 1 : 997) {
            for (int e = -3; e <= 3; e++) {
                float a = fmul(bf(0x3F800000u | m), ldexpf(1.0f, e) * b);
                float want = fdiv(a, b), got = div_markstein(a, b, r);
                EXPECT(fb(want) == fb(got), "markstein a=%08x b=%g", fb(a), b);
            }
        }
    }
}

static void test_mx_emulation(void)
{
    const char *presets[] = {"mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3", "mxfp8-e5m2",
                             "mxint8", "tilelang-mxfp8"};
    for (const char *pn : presets)
        for (int rule = 0; rule < 4; rule++)
            for (int mode = 0; mode < 4; mode++)
                for (int kind = 0; kind < 4; kind++) {
                    lofp_scheme s;
                    lofp_scheme_preset(pn, &s);
                    if (strcmp(pn, "tilelang-mxfp8") != 0) s.scale_rule = (lofp_scale_rule)rule;
                    else if (rule) continue;
                    s.rounding = (lofp_rounding)mode;
                    s.seed = 5;
                    const size_t rows = 9, k = 512, B = s.block, nb = k / B;
                    auto x = make_input(rows * k, kind);
                    const bool fp4 = s.elem == LOFP_ELEM_E2M1;
                    std::vector<uint8_t> c1(fp4 ? rows * k / 2 : rows * k), s1(rows * nb);
                    std::vector<uint8_t> c2(c1.size()), s2(s1.size());
                    EXPECT(lofp_quantize(&s, LOFP_DTYPE_F32, x.data(), rows, k, c1.data(), s1.data(),
                                         NULL, NULL) == LOFP_OK, "cpu mx");
                    for (size_t r = 0; r < rows; r++)
                        for (size_t b = 0; b < nb; b++) {
                            float amax = 0;
                            for (size_t i = 0; i < B; i++) {
                                float a = fabs_(x[r * k + b * B + i]);
                                if (a > amax) amax = a;
                            }
                            uint32_t sb = mx_scale_byte((int)s.elem, (int)s.scale_rule, s.amax_floor,
                                                        s.ceil_clamp, amax);
                            s2[r * nb + b] = (uint8_t)sb;
                            float inv = e8m0_recip(sb);
                            for (size_t i = 0; i < B; i++) {
                                size_t j = r * k + b * B + i;
                                float e = fmul(x[j], inv);
                                uint32_t c;
                                if (fp4 && mode != R_STOCH)
                                    c = e2m1_mag_fast(fabs_(e), mode) | ((f2u(e) >> 31) << 3);
                                else
                                    c = encode_elem((int)s.elem, e, mode,
                                                    mode == R_STOCH ? stochastic_bits(5, j) : 0);
                                if (fp4) {
                                    if (j & 1) c2[j / 2] = (uint8_t)((c2[j / 2] & 0x0F) | (c << 4));
                                    else c2[j / 2] = (uint8_t)((c2[j / 2] & 0xF0) | (c & 0xF));
                                } else c2[j] = (uint8_t)c;
                            }
                        }
                    EXPECT(c1 == c2, "mx codes %s rule %d mode %d kind %d", pn, rule, mode, kind);
                    EXPECT(s1 == s2, "mx scales %s rule %d mode %d kind %d", pn, rule, mode, kind);
                }
    /* scale rules on random amax bit patterns, one block each */
    for (int i = 0; i < 100000; i++) {
        float amax = bf((uint32_t)rnd() & 0x7F7FFFFFu);
        lofp_scheme s;
        lofp_scheme_preset((i & 1) ? "mxfp4" : "mxfp8-e4m3", &s);
        s.scale_rule = (lofp_scale_rule)(i % 4);
        float x[32] = {0};
        x[i % 32] = (i & 2) ? -amax : amax;
        uint8_t c[32], sc;
        lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 32, c, &sc, NULL, NULL);
        uint32_t got = mx_scale_byte((int)s.elem, (int)s.scale_rule, s.amax_floor, s.ceil_clamp, amax);
        EXPECT(got == sc, "mx rule %d amax %08x: cpu %u gpu %u", (int)s.scale_rule, fb(amax), sc, got);
    }
}

/* The warp butterfly's lane formula, simulated: 32 lanes x E elements. */
static void butterfly_sim(float *v, int kp)
{
    const int E = kp / 32;
    const float rr = 0.70710678118654752f;
    for (int h = 1; h < E; h <<= 1)
        for (int l = 0; l < 32; l++)
            for (int j = 0; j < E; j++)
                if ((j & h) == 0) {
                    float a = v[l * E + j], b = v[l * E + j + h];
                    v[l * E + j] = fmul(fadd(a, b), rr);
                    v[l * E + j + h] = fmul(fsub(a, b), rr);
                }
    for (int hl = 1; hl < 32; hl <<= 1) {
        std::vector<float> o(kp);
        for (int l = 0; l < 32; l++)
            for (int j = 0; j < E; j++) o[l * E + j] = v[(l ^ hl) * E + j];
        for (int l = 0; l < 32; l++)
            for (int j = 0; j < E; j++) {
                float me = v[l * E + j];
                v[l * E + j] = (l & hl) ? fmul(fsub(o[l * E + j], me), rr) : fmul(fadd(me, o[l * E + j]), rr);
            }
    }
}

static void test_uq_emulation(void)
{
    const UqThr &thr = uq_thresholds();
    /* the exponent rule against the CPU expression */
    for (int i = 0; i < 1000000; i++) {
        float s;
        if (i % 3 == 0) s = bf(((uint32_t)rnd() & 0x7F7FFFFFu) | 0x00800000u);
        else if (i % 3 == 1) s = bf((uint32_t)((rnd() % 254) + 1) << 23 | (0x3504F3u + (uint32_t)(rnd() % 512) - 256));
        else s = (float)(unif() * 10);
        if (!(s > 0)) continue;
        int e = (int)floorf((float)log2((double)s) + 0.5f);
        if (e < -126) e = -126;
        if (e > 127) e = 127;
        EXPECT(uq_exponent(s, thr.t) == e, "uq exponent s=%08x: %d vs %d", fb(s), e, uq_exponent(s, thr.t));
    }
    for (int kp : {32, 64, 128, 256, 512, 1024}) {
        for (int rot = 0; rot < 2; rot++)
            for (int kind = 0; kind < 4; kind++) {
                const size_t rows = 6;
                auto x = make_input(rows * kp, kind);
                lofp_scheme s;
                lofp_scheme_preset("ultraquant", &s);
                s.rotate = rot;
                std::vector<uint8_t> c1(rows * kp / 2), s1(rows * kp / 32), c2(c1.size()), s2(s1.size());
                EXPECT(lofp_quantize(&s, LOFP_DTYPE_F32, x.data(), rows, kp, c1.data(), s1.data(),
                                     NULL, NULL) == LOFP_OK, "cpu uq");
                for (size_t r = 0; r < rows; r++) {
                    std::vector<float> v(x.begin() + r * kp, x.begin() + (r + 1) * kp);
                    if (rot) butterfly_sim(v.data(), kp);
                    for (int g = 0; g < kp / 32; g++) {
                        float amax = 0;
                        for (int i = 0; i < 32; i++) {
                            float a = fabs_(v[g * 32 + i]);
                            if (a > amax) amax = a;
                        }
                        float sr = fmul(amax, s.c);
                        uint32_t sb = 0;
                        uint32_t w[4] = {0, 0, 0, 0};
                        if (sr > 0 && is_finite_bits(f2u(sr))) {
                            int e = uq_exponent(sr, thr.t);
                            sb = (uint32_t)(e + 127);
                            float inv = pow2_neg(e);
                            for (int i = 0; i < 32; i++) w[i / 8] |= uq_code(fmul(v[g * 32 + i], inv)) << (4 * (i % 8));
                            /* the store kernel's two-element path (uq_encode16) */
                            for (int k = 0; k < 4; k++) {
                                uint32_t pr[4];
                                for (int j = 0; j < 4; j++) {
                                    const float a = v[g * 32 + 8 * k + j], b = v[g * 32 + 8 * k + j + 4];
                                    const float za = uq_nudge(a, inv), zb = uq_nudge(b, inv);
                                    pr[j] = uq_code_pair(za, zb, uq_half_up(za), uq_half_up(zb), uq_negsign(a, inv),
                                                         uq_negsign(b, inv));
                                }
                                const uint32_t w7 = uq_pack8(pr[0], pr[1], pr[2], pr[3]);
                                EXPECT(w7 == w[k], "uq_code_pair kp %d rot %d kind %d: %08x vs %08x", kp, rot, kind, w7, w[k]);
                            }
                        }
                        s2[r * (kp / 32) + g] = (uint8_t)sb;
                        memcpy(&c2[(r * kp + g * 32) / 2], w, 16);
                    }
                }
                EXPECT(c1 == c2, "uq codes kp %d rot %d kind %d", kp, rot, kind);
                EXPECT(s1 == s2, "uq scales kp %d rot %d kind %d", kp, rot, kind);
            }
    }
}


/* The fp32-pipe RNE encoders of the fast quantize kernels (mf_mag_rne_magic, mxint8_rne_magic)
 * against the CPU library's integer encoder: every fp32 pattern within 4096 ulps of every code
 * value and midpoint, a stride-61 sweep of all finite magnitudes, and random patterns. */
static void test_magic_encoders(void)
{
    struct { lofp_elem e; int t; } ts[] = {{LOFP_ELEM_E2M1, T_E2M1}, {LOFP_ELEM_E2M3, T_E2M3},
                                           {LOFP_ELEM_E3M2, T_E3M2}};
    for (auto &t : ts) {
        const MF tr = mf_of(t.t);
        const MXInfo mi = mx_info(t.t);
        const int emin = 1 - tr.bias;
        long n = 0;
        auto chk = [&](float a) {
            if (!(a >= 0.0f) || isinf(a)) return;
            const uint32_t want = lofp_encode(t.e, a, LOFP_RNE, LOFP_SATURATE, 0) & tr.max_code;
            const uint32_t got = mf_mag_rne_magic(a, emin, tr.mbits, mi.maxv);
            const uint32_t gotn = mf_mag_rne_magic(-a, emin, tr.mbits, mi.maxv);
            const uint32_t bits = mf_rne_magic_bits(a, emin, tr.mbits, mi.maxv);
            n++;
            EXPECT(want == got && want == gotn && (bits & ((1u << (23 - tr.mbits)) - 1u)) == 0,
                   "mf_mag_rne_magic elem %d a=%.9g (%08x): want %u got %u / %u (bits %08x)", t.t, a,
                   fb(a), want, got, gotn, bits);
        };
        for (uint32_t code = 0; code <= tr.max_code; code++) {
            const float v = lofp_decode(t.e, code);
            const float w = code < tr.max_code ? lofp_decode(t.e, code + 1) : 2.0f * v;
            const float m = (float)(((double)v + (double)w) / 2);
            for (int d = -4096; d <= 4096; d++) {
                if ((int64_t)fb(v) + d >= 0) chk(bf(fb(v) + d));
                chk(bf(fb(m) + d));
            }
        }
        for (uint32_t u = 0; u < 0x7F800000u; u += 61) chk(bf(u));
        for (int i = 0; i < 1000000; i++) chk(bf((uint32_t)rnd() & 0x7FFFFFFFu));
        EXPECT(n > 30000000, "magic sweep too small (%ld)", n);
    }
    auto chk8 = [&](float x) {
        if (isnan(x) || isinf(x)) return;
        const uint32_t want = lofp_encode(LOFP_ELEM_MXINT8, x, LOFP_RNE, LOFP_SATURATE, 0) & 0xFFu;
        const uint32_t got = mxint8_rne_magic(x);
        EXPECT(want == got, "mxint8_rne_magic x=%.9g (%08x): want %u got %u", x, fb(x), want, got);
    };
    for (int k = -128; k <= 128; k++)
        for (int h = 0; h < 2; h++) {
            const float v = (float)((k + 0.5 * h) / 64.0);
            for (int d = -4096; d <= 4096; d++) chk8(bf(fb(v) + d));
        }
    for (uint32_t u = 0; u < 0xFF800000u; u += 127) chk8(bf(u));
}

/* The division-free NVFP4 dequantize (nvfp4_dq_bases / nvfp4_dq_value) against the CPU library's
 * lofp_dequantize formula fl(fl(v * sv) / global): every UE4M3 scale x every E2M1 code x globals
 * spanning the exponent range (powers of two, random mantissas, negative, huge and tiny), and the
 * per-element fallback whenever the bases leave the range. */
static void test_nvfp4_dequant_bases(void)
{
    std::vector<float> gs;
    for (int e = -140; e <= 140; e += 3) {
        gs.push_back(ldexpf(1.0f, e));
        gs.push_back(ldexpf(1.0f + (float)unif(), e));
        gs.push_back(-ldexpf(1.0f + (float)unif(), e));
    }
    gs.push_back(2688.0f / 3.7f);
    long fast = 0, slow = 0;
    for (float g : gs)
        for (uint32_t sc = 0; sc < 128; sc++) {
            const float sv = lofp_decode(LOFP_ELEM_UE4M3, sc);
            float b1, b3;
            const bool ok = nvfp4_dq_bases(sv, g, b1, b3);
            ok ? fast++ : slow++;
            for (uint32_t code = 0; code < 16; code++) {
                const float v = lofp_decode(LOFP_ELEM_E2M1, code);
                volatile float prod = v * sv;
                volatile float want = prod / g;
                const float got = ok ? nvfp4_dq_value(code, b1, b3) : fdiv(fmul(e2m1_value(code), sv), g);
                EXPECT(fb(got) == fb(want) || (isnan(got) && isnan(want)),
                       "nvfp4 dequant sv=%g g=%g code=%u: want %08x got %08x (fast %d)", sv, g, code,
                       fb(want), fb(got), ok);
            }
        }
    EXPECT(fast > 10000 && slow > 1000, "dequant bases: fast %ld slow %ld", fast, slow);
}

/* uq_code (bit-pattern arithmetic) against the compare-based formula of the CPU encoder, on every
 * fp32 pattern that is not NaN. */
static uint32_t uq_code_ref(float y)
{
    float a = fabs_(y);
    if (y > 0.0f)
        return (a > 0.25f) + (a > 0.75f) + (a > 1.25f) + (a > 1.75f) + (a > 2.5f) + (a > 3.5f) + (a > 5.0f);
    uint32_t n = (a >= 0.25f) + (a >= 0.75f) + (a >= 1.25f) + (a >= 1.75f) + (a >= 2.5f) + (a >= 3.5f) + (a >= 5.0f);
    return n ? 8u + n : 0u;
}
/* Runs fn(lo, hi) over [0, 2^32) in slices on every hardware thread (the exhaustive sweeps are
 * independent per pattern) and returns the sum of the mismatch counts. */
template <class F> static uint64_t sweep32(F fn)
{
    unsigned nt = std::thread::hardware_concurrency();
    if (nt == 0) nt = 1;
    if (nt > 64) nt = 64;
    std::vector<uint64_t> bad(nt, 0);
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; t++)
        th.emplace_back([&, t] { bad[t] = fn((1ull << 32) * t / nt, (1ull << 32) * (t + 1) / nt); });
    uint64_t sum = 0;
    for (unsigned t = 0; t < nt; t++) { th[t].join(); sum += bad[t]; }
    return sum;
}

static void test_uq_code_all(void)
{
    const uint64_t bad = sweep32([](uint64_t lo, uint64_t hi) {
        uint64_t b = 0;
        for (uint64_t i = lo; i < hi; i++) {
            const uint32_t u = (uint32_t)i;
            if ((u & 0x7FFFFFFFu) > 0x7F800000u) continue;
            const float y = u2f(u);
            if (uq_code(y) != uq_code_ref(y)) { if (b < 5) fprintf(stderr, "uq_code %08x: %u vs %u\n", u, uq_code(y), uq_code_ref(y)); b++; }
        }
        return b;
    });
    EXPECT(bad == 0, "uq_code: %llu of 2^32 patterns differ", (unsigned long long)bad);
    printf("  uq_code vs the compare formula, all 2^32 patterns: %s\n", bad ? "FAILED" : "ok");
}

/* uq_code_pair (the store kernel's two-element code path: fma.rz nudge, 16x2 max / add-min, sign
 * from a second fma) against uq_code on every fp32 pattern that is not NaN, in both halves (the
 * pair (y, -y)), with inv = 1; and on random patterns with random power-of-two inv, where y = v * inv
 * also leaves the normal range. */
static void test_uq_code_pair_all(void)
{
    uint64_t bad = sweep32([](uint64_t lo, uint64_t hi) {
        uint64_t b = 0;
        for (uint64_t i = lo; i < hi; i++) {
            const uint32_t u = (uint32_t)i;
            if ((u & 0x7FFFFFFFu) > 0x7F800000u) continue;
            const float y = u2f(u), ny = u2f(u ^ 0x80000000u);
            const float za = uq_nudge(y, 1.0f), zb = uq_nudge(ny, 1.0f);
            const uint32_t p = uq_code_pair(za, zb, uq_half_up(za), uq_half_up(zb), uq_negsign(y, 1.0f), uq_negsign(ny, 1.0f));
            const uint32_t ca = (p >> 6) & 15u, cb = (p >> 22) & 15u;
            if (ca != uq_code(y) || cb != uq_code(ny) || (p & ~0x03C003C0u)) {
                if (b < 5) fprintf(stderr, "uq_code_pair %08x: %u %u vs %u %u (%08x)\n", u, ca, cb, uq_code(y), uq_code(ny), p);
                b++;
            }
        }
        return b;
    });
    for (int i = 0; i < 20000000; i++) {
        uint32_t u = (uint32_t)rnd();
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) continue;
        const float v = u2f(u), inv = pow2_neg((int)(rnd() % 254) - 126);
        const float y = fmul(v, inv);
        if (!is_finite_bits(f2u(y))) continue;
        const float z = uq_nudge(v, inv);
        const uint32_t p = uq_code_pair(z, z, uq_half_up(z), uq_half_up(z), uq_negsign(v, inv), uq_negsign(v, inv));
        if (((p >> 6) & 15u) != uq_code(y) || ((p >> 22) & 15u) != uq_code(y)) {
            if (bad < 5) fprintf(stderr, "uq_code_pair v %08x inv %08x: %08x vs %u\n", u, f2u(inv), p, uq_code(y));
            bad++;
        }
    }
    EXPECT(bad == 0, "uq_code_pair: %llu mismatches", (unsigned long long)bad);
    printf("  uq_code_pair vs uq_code, all 2^32 patterns and 2e7 scaled: %s\n", bad ? "FAILED" : "ok");
}

/* The packed MXFP4-from-bf16 encoder (e2m1x2_bf16_codes, host emulation of fma.rn.bf16x2) for
 * every scale byte it is used for (3..248) and every finite bf16 magnitude, both halves of the
 * word, against lofp_encode of e = x * 2^(127 - sb) as the fp32 reference computes it. */
static void test_e2m1x2_bf16_all(void)
{
    long bad = 0;
    for (uint32_t sb = 3; sb <= 248; sb++) {
        const uint32_t cb = ((sb + 6) << 7) * 0x10001u;
        const float inv = e8m0_recip(sb);
        for (uint32_t p = 0; p < 0x7F80u; p++) {
            const uint32_t q = (p * 40503u + 7u) % 0x7F80u; /* another magnitude in the other half */
            const uint32_t r = e2m1x2_bf16_codes(p | (q << 16), cb) - cb;
            for (int h = 0; h < 2; h++) {
                const uint32_t m = h ? q : p;
                const uint32_t want = lofp_encode(LOFP_ELEM_E2M1, fmul(bf(m << 16), inv), LOFP_RNE, LOFP_SATURATE, 0) & 7u;
                const uint32_t got = (r >> (16 * h)) & 0xFFFFu;
                if (got != want && bad++ < 5)
                    fprintf(stderr, "e2m1x2 bf16: sb %u x %04x: got %u want %u\n", sb, m, got, want);
            }
        }
    }
    EXPECT(bad == 0, "e2m1x2_bf16_codes: %ld mismatches", bad);
}

/* e2m1_rne_fma_bits on every fp32 pattern in [2^-5, 16) and every 61st one elsewhere */
static void test_e2m1_fma_bits(void)
{
    long bad = 0;
    for (uint64_t u = 0; u < 0x7F800000u; u += (u >= 0x3D000000u && u < 0x41800000u) ? 1 : 61) {
        const float q = bf((uint32_t)u);
        const uint32_t want = lofp_encode(LOFP_ELEM_E2M1, q, LOFP_RNE, LOFP_SATURATE, 0) & 7u;
        const uint32_t got = e2m1_rne_fma_bits(q) - 0x4A800000u;
        if (got != want && bad++ < 5) fprintf(stderr, "e2m1_rne_fma_bits %08x: got %u want %u\n", (unsigned)u, got, want);
    }
    EXPECT(bad == 0, "e2m1_rne_fma_bits: %ld mismatches", bad);
}

/* e2m1_rne_fma_bits8 + e2m1_fix8_word (the NVFP4 flat kernel's encoder, which needs q < 9) on every
 * fp32 pattern in [2^-5, 9) and every 61st one below; e2m1_fix8_word on every nibble position and
 * value 0..8 among random other nibbles */
static void test_e2m1_fma_bits8(void)
{
    long bad = 0;
    for (uint64_t u = 0; u < 0x41100000u; u += u >= 0x3D000000u ? 1 : 61) {
        const float q = bf((uint32_t)u);
        const uint32_t want = lofp_encode(LOFP_ELEM_E2M1, q, LOFP_RNE, LOFP_SATURATE, 0) & 7u;
        const uint32_t raw = e2m1_rne_fma_bits8(q) - 0x4A800000u;
        const uint32_t got = raw <= 8u ? e2m1_fix8_word(raw) : 99u;
        if (got != want && bad++ < 5) fprintf(stderr, "e2m1_rne_fma_bits8 %08x: got %u want %u\n", (unsigned)u, got, want);
    }
    EXPECT(bad == 0, "e2m1_rne_fma_bits8: %ld mismatches", bad);
    for (int t = 0; t < 2000; t++)
        for (int j = 0; j < 8; j++)
            for (uint32_t c = 0; c <= 8; c++) {
                uint32_t w = 0, want = 0;
                for (int i = 0; i < 8; i++) {
                    const uint32_t ci = i == j ? c : (uint32_t)(rnd() % 9u);
                    w |= ci << (4 * i);
                    want |= (ci > 7u ? 7u : ci) << (4 * i);
                }
                EXPECT(e2m1_fix8_word(w) == want, "e2m1_fix8_word %08x", (unsigned)w);
            }
}

/* div6_rn (the NVFP4 block scale's bmax / 6) against the division: every mantissa of the binades
 * around 1, the 1e-12 clamp, 448 * 6 and the top, every 7th in the others from 2^-100 up (below
 * it, results under the 1e-12 clamp); zero; and nvfp4_scale of infinity (Markstein gives NaN
 * there) is the clamp 448 */
static void test_div6(void)
{
    long bad = 0;
    for (int e = -126; e <= 127; e++) {
        const bool all = (e >= -2 && e <= 2) || (e >= -42 && e <= -37) || (e >= 11 && e <= 12) || e >= 126;
        for (uint32_t m = 0; m < 0x800000u; m += all ? 1 : 7) {
            const float a = bf(((uint32_t)(e + 127) << 23) | m);
            if (e < -100) { /* the remainder may underflow: only both below the clamp matters */
                if (!(div6_rn(a) < 1e-12f) && bad++ < 5) fprintf(stderr, "div6_rn %08x\n", fb(a));
                continue;
            }
            if (fb(div6_rn(a)) != fb(fdiv(a, 6.0f)) && bad++ < 5)
                fprintf(stderr, "div6_rn %08x: got %08x want %08x\n", fb(a), fb(div6_rn(a)), fb(fdiv(a, 6.0f)));
        }
    }
    EXPECT(bad == 0, "div6_rn: %ld mismatches", bad);
    EXPECT(fb(div6_rn(0.0f)) == 0u, "div6_rn(0)");
    float bq = 0.0f;
    const uint32_t sb = nvfp4_scale(INFINITY, &bq);
    EXPECT(sb == lofp_encode(LOFP_ELEM_UE4M3, 448.0f, LOFP_RNE, LOFP_SATURATE, 0) && bq == 448.0f, "nvfp4_scale(inf)");
}

/* The W4A8 large route's weight cast (w8_word_plain, w4a8_common.cuh): a prepared word (nibble i =
 * element 2i for i < 4, 2(i - 4) + 1 above) at block distance d -> 8 E4M3 bytes in natural order.
 * For every d = 0..14 and every code of every element position, the byte must be
 * lofp_encode(E4M3, decode(E2M1, code) * 2^(6 - d)) and decode back to that value exactly (the
 * exactness claim of gemm_w4a8_large.cu); at d = 15 the value of code 0.5 is not an E4M3 value
 * (the bound is tight). Also the kernel's own range d <= 11 through the same tables. */
static void test_w8_cast(void)
{
    for (int d = 0; d <= W8_ROW_DMAX; d++)
        for (uint32_t c = 0; c < 16; c++)
            for (int pos = 0; pos < 8; pos++) {
                /* code c at element pos, the other elements get codes (c + 3 e) & 15 */
                uint32_t q = 0, want[8];
                for (int e = 0; e < 8; e++) {
                    const uint32_t ce = e == pos ? c : (c + 3u * (uint32_t)e) & 15u;
                    const int nib = e % 2 == 0 ? e / 2 : 4 + e / 2;
                    q |= ce << (4 * nib);
                    const float v = ldexpf(lofp_decode(LOFP_ELEM_E2M1, ce), 6 - d);
                    want[e] = lofp_encode(LOFP_ELEM_E4M3, v, LOFP_RNE, LOFP_SATURATE, 0);
                    EXPECT(lofp_decode(LOFP_ELEM_E4M3, want[e]) == v || (v == 0 && lofp_decode(LOFP_ELEM_E4M3, want[e]) == 0),
                           "w8 cast: e2m1 code %u at d = %d is not exact in E4M3", ce, d);
                }
                uint32_t x, y;
                w8_word_plain(q, d, x, y);
                for (int e = 0; e < 8; e++) {
                    const uint32_t got = ((e < 4 ? x : y) >> (8 * (e % 4))) & 0xFFu;
                    EXPECT(got == want[e], "w8 cast: d = %d word %08x element %d: %02x, want %02x", d, q, e, got, want[e]);
                }
            }
    const float half15 = ldexpf(0.5f, 6 - 15);
    EXPECT(lofp_decode(LOFP_ELEM_E4M3, lofp_encode(LOFP_ELEM_E4M3, half15, LOFP_RNE, LOFP_SATURATE, 0)) != half15,
           "w8 cast: 0.5 * 2^-9 should not be an E4M3 value");
}

/* The wgmma kernel's automatic configuration choice (lofp_cuda_wgmma_pick) against the sweep it was
 * fitted to: every configuration forced and timed on an H100 (132 SMs; BENCHMARKS.md, "W4A16
 * epilogue: four outputs per store (H100)"), us for configurations 0..5. The choice must be within
 * 3 % of the fastest. */
static void test_wgmma_pick(void)
{
    static const struct {
        int m, n, k;
        double us[6];
    } sweep[] = {
        {64, 8192, 8192, {53.2, 118.8, 31.6, 66.0, 107.9, 64.0}}, /* NVFP4 */
        {256, 8192, 8192, {103.7, 126.4, 118.3, 68.6, 91.5, 55.5}},
        {512, 8192, 8192, {219.4, 136.1, 259.0, 142.3, 95.7, 111.0}},
        {1024, 8192, 8192, {405.8, 247.2, 474.0, 270.4, 187.1, 218.1}},
        {64, 14336, 4096, {29.5, 65.4, 36.0, 40.2, 78.4, 72.8}},
        {256, 14336, 4096, {109.1, 68.9, 122.0, 80.7, 50.9, 69.3}},
        {512, 14336, 4096, {188.7, 137.0, 243.1, 159.2, 104.1, 129.9}},
        {1024, 14336, 4096, {360.2, 261.3, 474.5, 276.0, 200.3, 224.8}},
        {64, 8192, 8192, {51.5, 112.5, 30.2, 65.4, 108.4, 63.1}}, /* MXFP4 */
        {256, 8192, 8192, {99.5, 120.2, 114.0, 66.7, 88.8, 54.6}},
        {512, 8192, 8192, {203.8, 121.7, 231.3, 137.1, 94.9, 110.1}},
        {1024, 8192, 8192, {396.3, 234.5, 453.3, 266.7, 182.8, 211.9}},
        {64, 14336, 4096, {28.8, 61.5, 34.3, 39.3, 78.6, 100.0}},
        {256, 14336, 4096, {109.7, 64.7, 116.9, 79.4, 49.4, 67.0}},
        {512, 14336, 4096, {182.5, 128.8, 232.5, 156.4, 100.0, 127.0}},
        {1024, 14336, 4096, {357.9, 248.5, 453.9, 267.9, 193.7, 218.6}},
    };
    for (const auto &pt : sweep) {
        const int c = lofp_cuda_wgmma_pick(pt.m, pt.n, pt.k, 132);
        EXPECT(c >= 0 && c < LOFP_WGMMA_NCFG, "wgmma pick: m %d n %d k %d gave %d", pt.m, pt.n, pt.k, c);
        if (c < 0 || c >= LOFP_WGMMA_NCFG) continue;
        double best = 1e300;
        for (double u : pt.us) best = u < best ? u : best;
        EXPECT(pt.us[c] <= best * 1.03, "wgmma pick: m %d n %d k %d chose %d (%.1f us), fastest measured %.1f us", pt.m,
               pt.n, pt.k, c, pt.us[c], best);
    }
    /* degenerate inputs stay in range */
    EXPECT(lofp_cuda_wgmma_pick(33, 16, 128, 0) >= 0, "wgmma pick: 0 SMs");
    EXPECT(lofp_cuda_wgmma_pick(2048, 1LL << 20, 1LL << 20, 132) < LOFP_WGMMA_NCFG, "wgmma pick: huge shape");
}

/* store_quad (gemm_common.cuh), the epilogue of the wgmma kernels, run by 32 host threads in step
 * with an emulation of shfl.xor: lane (g, c) holds rows row0 + g (+ 8) of tokens tok0 + 2c (+ 1) as
 * a wgmma accumulator does. Both store forms (four outputs after the exchanges, one per store), both
 * output types, blocks cut by m and by n: every output of the block lands once with its value (bf16:
 * the fp32 value rounded by f32_to_bf16) and nothing else in C is written. */
struct HostWarp {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    unsigned gen = 0;
    uint32_t slot[32];
    void sync()
    {
        std::unique_lock<std::mutex> lk(mu);
        const unsigned g0 = gen;
        if (++arrived == 32) {
            arrived = 0;
            gen++;
            cv.notify_all();
        } else {
            cv.wait(lk, [&] { return gen != g0; });
        }
    }
};
struct HostXor {
    HostWarp *w;
    int lane;
    uint32_t operator()(uint32_t v, int mask) const
    {
        w->slot[lane] = v;
        w->sync();
        const uint32_t r = w->slot[lane ^ mask];
        w->sync(); /* every lane has read before the next exchange overwrites */
        return r;
    }
    float operator()(float v, int mask) const { return bf((*this)(fb(v), mask)); }
};

static void test_store_quad(void)
{
    struct Case { int m, n, row0, tok0; } cases[] = {
        {8, 32, 16, 0}, {5, 32, 16, 0}, {3, 32, 0, 0}, {12, 48, 32, 8}, {16, 16, 16, 8}, {9, 16, 0, 8},
    };
    auto val = [](int r, int t) { return (float)(r * 64 + t) + 0.25f; };
    for (const Case &k : cases)
        for (int bf16 = 0; bf16 < 2; bf16++)
            for (int pack = 0; pack < 2; pack++) {
                const int rows = k.m > k.tok0 + 8 ? k.m : k.tok0 + 8;
                const size_t total = (size_t)rows * k.n + 16;
                std::vector<float> buf(total); /* fp32 storage: 16-byte aligned for either type */
                const uint32_t sent = 0xA5A5A5A5u;
                memset(buf.data(), 0xA5, total * sizeof(float));
                HostWarp w;
                std::vector<std::thread> th;
                for (int lane = 0; lane < 32; lane++)
                    th.emplace_back([&, lane] {
                        const int g = lane >> 2, c = lane & 3, row = k.row0 + g, tok = k.tok0 + 2 * c;
                        float v[4];
                        for (int e = 0; e < 4; e++) v[e] = val(row + 8 * (e >> 1), tok + (e & 1));
                        store_quad(buf.data(), bf16, pack, k.m, k.n, g, row, tok, v, HostXor{&w, lane});
                    });
                for (auto &t : th) t.join();
                size_t bad = 0;
                for (int t = 0; t < rows; t++)
                    for (int r = 0; r < k.n; r++) {
                        const bool in = t < k.m && t >= k.tok0 && t < k.tok0 + 8 && r >= k.row0 && r < k.row0 + 16;
                        const size_t o = (size_t)t * k.n + r;
                        uint32_t got, want;
                        if (bf16) {
                            uint16_t h;
                            memcpy(&h, (const uint8_t *)buf.data() + 2 * o, 2);
                            got = h;
                            want = in ? f32_to_bf16(val(r, t)) : (sent & 0xFFFFu);
                        } else {
                            got = fb(buf[o]);
                            want = in ? fb(val(r, t)) : sent;
                        }
                        if (got != want && bad++ < 3)
                            EXPECT(0, "store_quad m=%d n=%d row0=%d tok0=%d bf16=%d pack=%d: C[%d][%d] = %08x, want %08x",
                                   k.m, k.n, k.row0, k.tok0, bf16, pack, t, r, got, want);
                    }
                const uint8_t *tail = (const uint8_t *)buf.data() + (size_t)rows * k.n * (bf16 ? 2 : 4);
                const uint8_t *end = (const uint8_t *)(buf.data() + total);
                for (; tail < end; tail++)
                    if (*tail != 0xA5u) { EXPECT(0, "store_quad wrote past C (m=%d n=%d)", k.m, k.n); break; }
            }
}

int main(void)
{
    test_store_quad();
    test_wgmma_pick();
    test_w8_cast();
    test_e2m1_fma_bits();
    test_e2m1_fma_bits8();
    test_div6();
    test_e2m1x2_bf16_all();
    test_magic_encoders();
    test_nvfp4_dequant_bases();
    test_encoders();
    test_minifloat_rows();
    test_e2m1_fast();
    test_fast_paths();
    test_nvfp4_emulation();
    test_markstein_sample();
    test_mx_emulation();
    test_uq_emulation();
    test_uq_code_all();
    test_uq_code_pair_all();
    if (failures) {
        fprintf(stderr, "test_codec_host: %d failures\n", failures);
        return 1;
    }
    printf("test_codec_host: all checks passed\n");
    return 0;
}

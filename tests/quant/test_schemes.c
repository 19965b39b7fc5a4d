/* test_schemes.c -- hand-computed golden cases for every block-scheme preset (SPEC §2).
 *
 * Every expected code, scale byte and global scale below was derived by hand from the SPEC rules
 * (the derivation sits beside each case); none was copied from the library's output. Where an
 * fp32 constant needs more than mental arithmetic (1/7 rounded, a butterfly product), the value
 * was worked out in exact rational arithmetic and is cross-checked here by a C expression that
 * follows the SPEC formula literally.
 *
 * Notation: E2M1 codes are 4-bit, sign in bit 3: magnitudes {0,.5,1,1.5,2,3,4,6} = codes 0..7.
 * UE4M3 byte = 0.EEEE.MMM (bias 7); E8M0 byte b means 2^(b-127). "X" is an MX block scale. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
/* Internal: the same driver over an explicit kernel table, so every case also runs on the
 * reference row kernels (src/quant/quant_*.c), the generic kernels and the AVX2 ones when present. */
#include "runtime/cpu_features.h"
#include "quant/dispatch.h"

/* ------------------------------------------------------------------------------------------ */
/* the variant under test                                                                      */
/* ------------------------------------------------------------------------------------------ */

static const lofp_kernel_table *g_kt; /* NULL: the public entry points (this CPU's table) */

static lofp_status Q(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows, size_t k,
                     uint8_t *codes, uint8_t *scales, float *global, lofp_quant_report *rep)
{
    if (!g_kt) return lofp_quantize(s, dt, x, rows, k, codes, scales, global, rep);
    return lofp_quantize_table(g_kt, s, dt, x, rows, k, 1, 1.0f, codes, scales, global, rep);
}

static lofp_status QG(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows, size_t k,
                      float global, uint8_t *codes, uint8_t *scales, lofp_quant_report *rep)
{
    if (!g_kt) return lofp_quantize_with_global(s, dt, x, rows, k, global, codes, scales, rep);
    return lofp_quantize_table(g_kt, s, dt, x, rows, k, 0, global, codes, scales, NULL, rep);
}

static lofp_status DQ(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                      float global, size_t rows, size_t k, lofp_dtype out_dt, void *out)
{
    if (!g_kt) return lofp_dequantize(s, codes, scales, global, rows, k, out_dt, out);
    return lofp_dequantize_table(g_kt, s, codes, scales, global, rows, k, out_dt, out);
}

/* ------------------------------------------------------------------------------------------ */
/* helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* E2M1 code -> value, written out from the SPEC table (not from the library's decoder). */
static const float E2M1[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

static lofp_scheme preset(const char *name)
{
    lofp_scheme s;
    memset(&s, 0, sizeof s);
    lofp_status st = lofp_scheme_preset(name, &s);
    CHECKF(st == LOFP_OK, "preset %s -> %s", name, lofp_status_name(st));
    return s;
}

static unsigned code_at(const lofp_scheme *s, const uint8_t *codes, size_t i)
{
    if (s->elem == LOFP_ELEM_E2M1) return (codes[i >> 1] >> ((i & 1) * 4)) & 0xFu;
    return codes[i];
}

typedef struct {
    lofp_status st;
    uint8_t *codes, *scales;
    size_t cb, sb;
    float global;
    lofp_quant_report rep;
} qres;

/* Quantizes with lofp_quantize into buffers sized by the helpers and poisoned with 0xA5, so a
 * byte the quantizer forgot to write shows up as a wrong code. */
static qres run_q(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows, size_t k)
{
    qres r;
    memset(&r, 0, sizeof r);
    r.cb = lofp_codes_bytes(s, rows, k);
    r.sb = lofp_scales_bytes(s, rows, k);
    r.codes = malloc(r.cb ? r.cb : 1);
    r.scales = malloc(r.sb ? r.sb : 1);
    memset(r.codes, 0xA5, r.cb ? r.cb : 1);
    memset(r.scales, 0xA5, r.sb ? r.sb : 1);
    r.global = -1.0f;
    r.st = Q(s, dt, x, rows, k, r.codes, r.scales, &r.global, &r.rep);
    return r;
}

static void free_q(qres *r)
{
    free(r->codes);
    free(r->scales);
    r->codes = r->scales = NULL;
}

/* Dequantizes to fp32; returns a malloc'ed [rows, k] buffer (NULL on error, with a failed check). */
static float *run_dq(const lofp_scheme *s, const qres *r, size_t rows, size_t k)
{
    float *out = malloc(rows * k * sizeof(float));
    lofp_status st = DQ(s, r->codes, r->scales, r->global, rows, k, LOFP_DTYPE_F32, out);
    CHECKF(st == LOFP_OK, "dequantize -> %s", lofp_status_name(st));
    if (st != LOFP_OK) { free(out); return NULL; }
    return out;
}

static void expect_codes(const char *what, const lofp_scheme *s, const uint8_t *codes, size_t off,
                         const uint8_t *exp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned got = code_at(s, codes, off + i);
        CHECKF(got == exp[i], "%s: code[%zu] = 0x%02X, expected 0x%02X", what, off + i, got, exp[i]);
    }
}

static void expect_zero_codes(const char *what, const lofp_scheme *s, const uint8_t *codes,
                              size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned got = code_at(s, codes, off + i);
        CHECKF(got == 0, "%s: code[%zu] = 0x%02X, expected 0x00", what, off + i, got);
    }
}

static void expect_bytes(const char *what, const uint8_t *got, const uint8_t *exp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECKF(got[i] == exp[i], "%s: byte[%zu] = 0x%02X, expected 0x%02X", what, i, got[i], exp[i]);
}

static void expect_f32(const char *what, size_t i, float got, float exp)
{
    CHECKF(f2u(got) == f2u(exp) || (got == exp && got == 0.0f),
           "%s: [%zu] = %.9g (0x%08X), expected %.9g (0x%08X)", what, i, (double)got, f2u(got),
           (double)exp, f2u(exp));
}

/* ------------------------------------------------------------------------------------------ */
/* presets                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static void test_presets(void)
{
    lofp_scheme s = preset("nvfp4");
    CHECK(s.id == LOFP_SCHEME_NVFP4 && s.elem == LOFP_ELEM_E2M1 && s.scale_elem == LOFP_ELEM_UE4M3);
    CHECK(s.block == 16 && s.two_level == 1 && s.rounding == LOFP_RNE && s.pad == 0);
    CHECK(s.scale_rule == LOFP_SCALE_UE4M3 && s.propagate_nonfinite == 0);

    static const struct { const char *name; lofp_elem elem; } mx[] = {
        { "mxfp4", LOFP_ELEM_E2M1 },      { "mxfp6-e2m3", LOFP_ELEM_E2M3 },
        { "mxfp6-e3m2", LOFP_ELEM_E3M2 }, { "mxfp8-e4m3", LOFP_ELEM_E4M3 },
        { "mxfp8-e5m2", LOFP_ELEM_E5M2 }, { "mxint8", LOFP_ELEM_MXINT8 },
    };
    for (size_t i = 0; i < sizeof mx / sizeof mx[0]; i++) {
        s = preset(mx[i].name);
        CHECKF(s.elem == mx[i].elem && s.scale_elem == LOFP_ELEM_E8M0 && s.block == 32, "%s", mx[i].name);
        CHECKF(s.scale_rule == LOFP_SCALE_FLOOR && s.rounding == LOFP_RNE, "%s", mx[i].name);
        CHECKF(s.ceil_clamp == 0 && s.amax_floor == 0.0f && s.pad == 0, "%s", mx[i].name);
        CHECKF(strcmp(lofp_scheme_name(s.id), mx[i].name) == 0, "%s", mx[i].name);
    }
    s = preset("tilelang-mxfp8");
    CHECK(s.elem == LOFP_ELEM_E4M3 && s.scale_elem == LOFP_ELEM_E8M0 && s.block == 128);
    CHECK(s.scale_rule == LOFP_SCALE_RCEIL && s.ceil_clamp == 1 && s.amax_floor == 1e-4f);
    CHECK(s.rounding == LOFP_RNE);
    s = preset("ultraquant");
    CHECK(s.elem == LOFP_ELEM_E2M1 && s.scale_elem == LOFP_ELEM_E8M0 && s.block == 32);
    CHECK(s.c == 0.156f && s.rotate == 1 && s.hadamard == LOFP_HADAMARD_BUTTERFLY);
    CHECK(s.scale_rule == LOFP_SCALE_UQ_ROUND);

    lofp_scheme t;
    CHECK(lofp_scheme_preset("mxfp5", &t) == LOFP_ERR_NOT_FOUND);
    CHECK(lofp_scheme_preset("NVFP4", &t) == LOFP_ERR_NOT_FOUND);
}

/* ------------------------------------------------------------------------------------------ */
/* NVFP4                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* The per-tensor multiplier global = fl(fl(1/amax) * 2688) (SPEC §2 step 1). */
static void test_nvfp4_global(void)
{
    /* amax = 6: fl(1/6) = 11184811 * 2^-26 (0x3E2AAAAB); * 2688 = 21 * 11184811 * 2^-19
     * = 234881031 * 2^-19 = (0xE00000 * 16 + 7) * 2^-19 -> the 7/16 rounds away -> 448.0 exactly
     * (0x43E00000), same as the true quotient 2688/6. */
    {
        volatile float one = 1.0f, amax = 6.0f, k = 2688.0f;
        volatile float r = one / amax;
        volatile float g = r * k;
        CHECK_EQ_U(f2u(r), 0x3E2AAAABu);
        CHECK_EQ_U(f2u(g), 0x43E00000u);
        float x[16] = { 1.0f, -6.0f, 2.0f };
        CHECK_EQ_U(f2u(lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, 16)), 0x43E00000u);
    }
    /* amax = 7: fl(1/7) = 9586981 * 2^-26 (0x3E124925, rounded up); * 2688 = 201326601 * 2^-19
     * = (0xC00000 * 16 + 9) * 2^-19 -> 9/16 rounds up -> 0xC00001 * 2^-15 = 384 + 2^-15
     * (0x43C00001). The true quotient 2688/7 = 384 (0x43C00000): this tensor is one where the
     * reciprocal-then-multiply order changes the last bit, so it pins the SPEC order. */
    {
        volatile float one = 1.0f, amax = 7.0f, k = 2688.0f;
        volatile float r = one / amax;
        volatile float g = r * k;
        CHECK_EQ_U(f2u(r), 0x3E124925u);
        CHECK_EQ_U(f2u(g), 0x43C00001u);
        CHECK_EQ_U(f2u(2688.0f / 7.0f), 0x43C00000u); /* the one-rounding value it must NOT be */
        float x[32] = { 0.5f, 1.0f, -7.0f, 3.0f };
        x[20] = 2.0f;
        CHECK_EQ_U(f2u(lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, 32)), 0x43C00001u);
        /* decode scale fl(7/2688) = fl(1/384) = fl(1/3) * 2^-7 = 0x3B2AAAAB */
        CHECK_EQ_U(f2u(lofp_nvfp4_decode_scale(LOFP_DTYPE_F32, x, 32)), 0x3B2AAAABu);
        lofp_scheme s = preset("nvfp4");
        qres r2 = run_q(&s, LOFP_DTYPE_F32, x, 1, 32);
        CHECK_OK(r2.st);
        CHECK_EQ_U(f2u(r2.global), 0x43C00001u);
        /* block 0 holds -7: g = -7 * (384 + 2^-15) = -(2688 + 7*2^-15) -> nearest fp32 (ulp 2^-12
         * in [2048, 4096)) is -(2688 + 2^-12); bs = 2688.000244/6 = 448.0000407 -> fp32
         * 448 + 2^-15 -> clamp 448 -> UE4M3 0x7E; e = g/448 -> clamp -6 -> code 0xF. */
        CHECK_EQ_U(r2.scales[0], 0x7E);
        CHECK_EQ_U(code_at(&s, r2.codes, 2), 0xF);
        /* block 1: bmax = 2 * global = 768 + 2^-14 (exact); /6 = 128 + (2/3) 2^-16 -> fp32
         * 128 + 2^-16 (ulp of 128 is 2^-16) -> UE4M3 (step 16 in [128, 256)) 128 = 0x70
         * (E=14, M=0); e = (768 + 2^-14)/128 = 6 + 2^-21 -> clamp 6 -> code 7. */
        CHECK_EQ_U(r2.scales[1], 0x70);
        CHECK_EQ_U(code_at(&s, r2.codes, 20), 0x7);
        /* dequant = (code * scale) / global in that order: (-6 * 448) / (384 + 2^-15)
         * = -7 (1 - 2^-15/384) = -(7 - 1.2 ulp(7)) -> -(7 - 2^-21) = 0xC0DFFFFF. Multiplying by a
         * rounded scale/global first (6 * fl(448/global)) would give -7 exactly. */
        float *d = run_dq(&s, &r2, 1, 32);
        if (d) {
            CHECK_EQ_U(f2u(d[2]), 0xC0DFFFFFu);
            volatile float g7 = u2f(0x43C00001u), p7 = 6.0f * 128.0f;
            volatile float want = p7 / g7;
            expect_f32("nvfp4 amax 7 dequant", 20, d[20], want);
        }
        free(d);
        /* quantize_with_global with the same multiplier reproduces the two-level result */
        uint8_t c2[16] = { 0 }, s2[2] = { 0 };
        CHECK_OK(QG(&s, LOFP_DTYPE_F32, x, 1, 32, u2f(0x43C00001u), c2, s2, NULL));
        CHECK(memcmp(c2, r2.codes, 16) == 0 && memcmp(s2, r2.scales, 2) == 0);
        free_q(&r2);
    }
    /* amax = 5 (and negative: |x| counts): fl(1/5) = 0x3E4CCCCD; * 2688 -> 0x44066667, while
     * fl(2688/5) = fl(537.6) = 0x44066666. */
    {
        volatile float one = 1.0f, amax = 5.0f, k = 2688.0f;
        volatile float r = one / amax;
        volatile float g = r * k;
        CHECK_EQ_U(f2u(g), 0x44066667u);
        CHECK_EQ_U(f2u(2688.0f / 5.0f), 0x44066666u);
        float x[16] = { -5.0f, 1.0f };
        CHECK_EQ_U(f2u(lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, 16)), 0x44066667u);
    }
    /* all-zero tensor: amax floored at 1e-12 (fp32 0x2B8CBCCC); fl(1/that) = 0x5368D4A5;
     * * 2688 -> 0x5918CB8C. Every block: g = 0, bs = clamp(0, 1e-12, 448) -> UE4M3 0;
     * codes 0; dequant 0. */
    {
        volatile float one = 1.0f, amax = 1e-12f, k = 2688.0f;
        volatile float r = one / amax;
        volatile float g = r * k;
        CHECK_EQ_U(f2u(amax), 0x2B8CBCCCu);
        CHECK_EQ_U(f2u(r), 0x5368D4A5u);
        CHECK_EQ_U(f2u(g), 0x5918CB8Cu);
        float x[32] = { 0 };
        lofp_scheme s = preset("nvfp4");
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 32);
        CHECK_OK(q.st);
        CHECK_EQ_U(f2u(q.global), 0x5918CB8Cu);
        CHECK_EQ_U(q.scales[0], 0);
        CHECK_EQ_U(q.scales[1], 0);
        expect_zero_codes("nvfp4 zero tensor", &s, q.codes, 0, 32);
        float *d = run_dq(&s, &q, 1, 32);
        for (size_t i = 0; d && i < 32; i++) CHECK(d[i] == 0.0f);
        free(d);
        free_q(&q);
    }
    /* the two directions are reciprocals: encode_from_decode(fl(1/384)) = fl(1/fl(1/384));
     * fl(1/384) = 384^-1 (1 + d), |d| < 2^-24, so the reciprocal is 384 (1 - d) -> rounds to 384. */
    CHECK_EQ_U(f2u(lofp_nvfp4_encode_from_decode(u2f(0x3B2AAAABu))), f2u(384.0f));
    CHECK_EQ_U(f2u(lofp_nvfp4_decode_from_encode(448.0f)), f2u(1.0f / 448.0f));
}

/* The main NVFP4 golden tensor: 1 row, K = 80 (5 blocks), amax 6 -> global 448. */
static void nvfp4_golden_input(float *x)
{
    /* block 0 (bmax 6): g = 448x, bs = 2688/6 = 448 -> UE4M3 0x7E (1.75 * 2^8: E=15, M=110);
     * e = 448x/448 = x exactly: the E2M1 ties sit on the grid midpoints. */
    static const float b0[16] = { 6.0f, 0.75f, 1.75f, 3.5f, 0.25f, 1.25f, 2.5f, 5.0f,
                                  -0.75f, -1.75f, -3.5f, -0.25f, -0.0f, 0.0f, -5.0f, -6.0f };
    /* block 1 (bmax 3): g max 1344, bs = 224 -> UE4M3 0x76 (1.75 * 2^7: E=14, M=110);
     * e = 448x/224 = 2x: x = 0.375 -> e = 0.75 etc.; 0.3f -> e = 0.6000000238 -> 0.5;
     * -2.9f -> e = -5.8000003 -> -6; -0.0625 -> e = -0.125 -> -0 (0x8). */
    static const float b1[16] = { 3.0f, 0.375f, 0.875f, 1.75f, 0.125f, 0.625f, 1.25f, 2.5f,
                                  -1.5f, -0.0625f, 0.0625f, 0.3f, -2.9f, 1.0f, 2.0f, -3.0f };
    memset(x, 0, 80 * sizeof(float));
    memcpy(x, b0, sizeof b0);
    memcpy(x + 16, b1, sizeof b1);
    /* block 2 (bmax 0.625): g = 280, 140, -56, 28; bs = fl(280/6) = 46.666668 -> UE4M3 between
     * 44 (1.375*32) and 48 (1.5*32), midpoint 46 -> 48 = 0x64 (E=12, M=100);
     * e = 280/48 = 5.83 -> 6; 140/48 = 2.92 -> 3; -56/48 = -1.17 -> -1; 28/48 = 0.58 -> 0.5. */
    x[32] = 0.625f;
    x[33] = 0.3125f;
    x[34] = -0.125f;
    x[35] = 0.0625f;
    /* block 3: the zero block, one -0.0: bmax 0 -> bs clamped to 1e-12 -> UE4M3 0 -> divide by
     * 2^-9: e = 0 / -0 -> codes 0x0 / 0x8. Dequant 0. */
    x[49] = -0.0f;
    /* block 4: tiny. g = 448 * 2^-17 = 7 * 2^-11 etc.; bs = 7*2^-11/6 = 5.7e-4 < 2^-10 (half of
     * the smallest UE4M3 2^-9) -> byte 0 -> divide by 2^-9: e = 7/4 = 1.75 (a tie), -7/8 = -0.875,
     * 7/16 = 0.4375, 7/64 = 0.109375 -> 2 | 1.5, -1, 0.5, 0. Dequant: scale 0 -> all 0. */
    x[64] = 0x1p-17f;
    x[65] = -0x1p-18f;
    x[66] = 0x1p-19f;
    x[67] = 0x1p-21f;
}

static void nvfp4_golden_codes(lofp_rounding mode, uint8_t *exp)
{
    static const uint8_t b0_rne[16] = { 7, 2, 4, 6, 0, 2, 4, 6, 0xA, 0xC, 0xE, 0x8, 0x8, 0x0, 0xE, 0xF };
    static const uint8_t b0_ttz[16] = { 7, 1, 3, 5, 0, 2, 4, 6, 0x9, 0xB, 0xD, 0x8, 0x8, 0x0, 0xE, 0xF };
    static const uint8_t b0_away[16] = { 7, 2, 4, 6, 1, 3, 5, 7, 0xA, 0xC, 0xE, 0x9, 0x8, 0x0, 0xF, 0xF };
    /* block 1 e = {6, .75, 1.75, 3.5, .25, 1.25, 2.5, 5, -3, -.125, .125, .6, -5.8, 2, 4, -6} */
    static const uint8_t b1_rne[16] = { 7, 2, 4, 6, 0, 2, 4, 6, 0xD, 0x8, 0x0, 1, 0xF, 4, 6, 0xF };
    static const uint8_t b1_ttz[16] = { 7, 1, 3, 5, 0, 2, 4, 6, 0xD, 0x8, 0x0, 1, 0xF, 4, 6, 0xF };
    static const uint8_t b1_away[16] = { 7, 2, 4, 6, 1, 3, 5, 7, 0xD, 0x8, 0x0, 1, 0xF, 4, 6, 0xF };
    memset(exp, 0, 80);
    memcpy(exp, mode == LOFP_RNE ? b0_rne : mode == LOFP_TIES_TO_ZERO ? b0_ttz : b0_away, 16);
    memcpy(exp + 16, mode == LOFP_RNE ? b1_rne : mode == LOFP_TIES_TO_ZERO ? b1_ttz : b1_away, 16);
    exp[32] = 7; exp[33] = 5; exp[34] = 0xA; exp[35] = 1; /* no ties in block 2 */
    exp[49] = 0x8;                                          /* -0.0 keeps its sign bit */
    exp[64] = mode == LOFP_TIES_TO_ZERO ? 3 : 4;            /* 1.75: RNE/away 2, ties-to-zero 1.5 */
    exp[65] = 0xA;
    exp[66] = 1;
    exp[67] = 0;
}

static void test_nvfp4_two_level_golden(void)
{
    float x[80];
    nvfp4_golden_input(x);
    static const uint8_t exp_scales[5] = { 0x7E, 0x76, 0x64, 0x00, 0x00 };
    static const float scale_val[5] = { 448.0f, 224.0f, 48.0f, 0.0f, 0.0f };
    static const lofp_rounding modes[3] = { LOFP_RNE, LOFP_TIES_TO_ZERO, LOFP_TIES_AWAY };
    static const char *const names[3] = { "nvfp4 rne", "nvfp4 ties-to-zero", "nvfp4 ties-away" };
    for (int m = 0; m < 3; m++) {
        lofp_scheme s = preset("nvfp4");
        s.rounding = modes[m];
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 80);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.cb, 40);
        CHECK_EQ_U(q.sb, 5);
        CHECK_EQ_U(f2u(q.global), 0x43E00000u); /* 448, see test_nvfp4_global */
        expect_bytes(names[m], q.scales, exp_scales, 5);
        uint8_t exp[80];
        nvfp4_golden_codes(modes[m], exp);
        expect_codes(names[m], &s, q.codes, 0, exp, 80);
        /* dequant = code_value * float(scale) / global, in that order, in fp32 */
        float *d = run_dq(&s, &q, 1, 80);
        for (size_t i = 0; d && i < 80; i++) {
            volatile float prod = E2M1[exp[i]] * scale_val[i / 16];
            volatile float want = prod / 448.0f;
            expect_f32(names[m], i, d[i], want);
        }
        /* spot values: 6 * 48 / 448 = 0.642857..., and the tiny block decodes to 0 */
        if (d) {
            CHECK(d[32] == (6.0f * 48.0f) / 448.0f);
            CHECK(d[0] == 6.0f && d[15] == -6.0f && d[64] == 0.0f);
        }
        free(d);
        free_q(&q);
    }
}

static void test_nvfp4_one_level_golden(void)
{
    float x[80];
    nvfp4_golden_input(x);
    /* global = 1, so g = x: block 0 bmax 6 -> bs 1 -> 0x38 (E=7, M=0), e = x;
     * block 1 bmax 3 -> bs 0.5 -> 0x30, e = 2x; block 2 bmax 0.625 -> bs = fl(0.625/6) =
     * 0.104166664 = 1.6667 * 2^-4 -> UE4M3 between 1.625 and 1.75 (midpoint 1.6875) -> 1.625 *
     * 2^-4 = 0.1015625 = 0x1D (E=3, M=101); e = 0.625/0.1015625 = 6.15 -> clamp 6 -> 7,
     * 3.08 -> 3 (5), -1.23 -> -1 (0xA), 0.615 -> 0.5 (1): the same codes as two-level.
     * block 4: bs = 2^-17/6 -> 0; e = x / 2^-9 = 2^-8, -2^-9, 2^-10, 2^-12 -> 0, -0 (0x8), 0, 0. */
    static const uint8_t exp_scales[5] = { 0x38, 0x30, 0x1D, 0x00, 0x00 };
    static const float scale_val[5] = { 1.0f, 0.5f, 0.1015625f, 0.0f, 0.0f };
    lofp_scheme s = preset("nvfp4");
    s.two_level = 0;
    qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 80);
    CHECK_OK(q.st);
    CHECK(q.global == 1.0f);
    expect_bytes("nvfp4 one-level", q.scales, exp_scales, 5);
    uint8_t exp[80];
    nvfp4_golden_codes(LOFP_RNE, exp);
    exp[64] = 0; exp[65] = 0x8; exp[66] = 0; exp[67] = 0;
    expect_codes("nvfp4 one-level", &s, q.codes, 0, exp, 80);
    float *d = run_dq(&s, &q, 1, 80);
    for (size_t i = 0; d && i < 80; i++) {
        volatile float prod = E2M1[exp[i]] * scale_val[i / 16];
        volatile float want = prod / 1.0f;
        expect_f32("nvfp4 one-level dequant", i, d[i], want);
    }
    free(d);
    free_q(&q);

    /* clamp to +-6 and saturating scales, one level (global 1), K = 32:
     * block A bmax 270 -> bs 45 -> UE4M3 (step 4 in [32,64)) 44 = 0x63 (E=12, M=011);
     *   e = 270/44 = 6.14 -> clamp 6 (7); -270 -> 0xF; 44/44 = 1 (2); 22/44 = 0.5 (1);
     *   11/44 = 0.25, a tie -> RNE 0 (0); 5.5/44 = 0.125 -> 0. Dequant 6*44 = 264.
     * block B bmax 3e38 -> bs 5e37 -> clamp 448 -> 0x7E; e = 1e6/448 = 2232 -> 6 (7);
     *   -3e38/448 -> -6 (0xF); 1000/448 = 2.23 -> 2 (4). Dequant 2688, -2688, 896. */
    float y[32] = { 270.0f, -270.0f, 44.0f, 22.0f, 11.0f, 5.5f };
    y[16] = 1e6f;
    y[17] = -3e38f;
    y[18] = 1000.0f;
    q = run_q(&s, LOFP_DTYPE_F32, y, 1, 32);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 0x63);
    CHECK_EQ_U(q.scales[1], 0x7E);
    static const uint8_t ea[6] = { 7, 0xF, 2, 1, 0, 0 };
    static const uint8_t eb[3] = { 7, 0xF, 4 };
    expect_codes("nvfp4 clamp A", &s, q.codes, 0, ea, 6);
    expect_codes("nvfp4 clamp B", &s, q.codes, 16, eb, 3);
    d = run_dq(&s, &q, 1, 32);
    if (d) {
        CHECK(d[0] == 264.0f && d[1] == -264.0f && d[2] == 44.0f && d[3] == 22.0f && d[4] == 0.0f);
        CHECK(d[16] == 2688.0f && d[17] == -2688.0f && d[18] == 896.0f);
    }
    free(d);
    free_q(&q);

    /* bs = bmax / 6 is a true division: bmax = 228 - 2^-16 -> bmax/6 = 38 - (2/3) 2^-18 ->
     * fp32 38 - 2^-18 (ulp of 38 is 2^-18) -> UE4M3 below the 36|40 midpoint 38 -> 36 = 0x61
     * (E=12, M=001). bmax * fl(1/6) = (bmax/6)(1 + 2^-25) would round to 38 exactly, a tie that
     * RNE sends to 40 (0x62). e = bmax/36 = 6.33 -> clamp -> 7; 18/36 = 0.5 -> 1. */
    float z[16] = { 228.0f - 0x1p-16f, 18.0f };
    q = run_q(&s, LOFP_DTYPE_F32, z, 1, 16);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 0x61);
    CHECK_EQ_U(code_at(&s, q.codes, 0), 7);
    CHECK_EQ_U(code_at(&s, q.codes, 1), 1);
    free_q(&q);
}

static void test_nvfp4_huge_two_level(void)
{
    /* amax 2^100: fl(2^-100) exact, global = 2688 * 2^-100 exact (0x13280000: 1.3125 * 2^-89).
     * g = 2688, -1344, 336 -> bs = 448 (0x7E) -> e = 6, -3, 0.75 -> codes 7, 0xD, RNE 2.
     * Dequant 6*448/global = 2^100, -3*448/global = -2^99, 448/global = fl(2^100/6). */
    float x[16] = { 0x1p100f, -0x1p99f, 0x1p97f };
    lofp_scheme s = preset("nvfp4");
    qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 16);
    CHECK_OK(q.st);
    CHECK_EQ_U(f2u(q.global), 0x13280000u);
    CHECK_EQ_U(q.scales[0], 0x7E);
    static const uint8_t e[4] = { 7, 0xD, 2, 0 };
    expect_codes("nvfp4 huge", &s, q.codes, 0, e, 4);
    float *d = run_dq(&s, &q, 1, 16);
    if (d) {
        CHECK(d[0] == 0x1p100f && d[1] == -0x1p99f);
        volatile float g = u2f(0x13280000u);
        volatile float want = 448.0f / g;
        expect_f32("nvfp4 huge dequant", 2, d[2], want);
    }
    free(d);
    free_q(&q);
}

static void test_nvfp4_signs_of_zero(void)
{
    /* one level, bmax 6 -> bs 1: -0.0 -> 0x8; -0.1 (nearest 0) -> 0x8; -0.25 (tie, RNE to 0) ->
     * 0x8; +0.1 -> 0x0; -0.2 under ties-away is still nearest 0 -> 0x8. */
    float x[16] = { 6.0f, -0.0f, -0.1f, -0.25f, 0.1f, -0.2f };
    lofp_scheme s = preset("nvfp4");
    s.two_level = 0;
    for (int m = 0; m < 3; m++) {
        s.rounding = (lofp_rounding)m;
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 16);
        CHECK_OK(q.st);
        /* -0.25 under ties-away -> -0.5 (0x9) */
        uint8_t e[6] = { 7, 0x8, 0x8, (uint8_t)(m == LOFP_TIES_AWAY ? 0x9 : 0x8), 0x0, 0x8 };
        expect_codes("nvfp4 signed zero", &s, q.codes, 0, e, 6);
        free_q(&q);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* MX family                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* One MXFP4 block [A, -A, 1, -0.0, 0 ...] under each rule; RNE. Expected byte, and the codes of
 * A, -A and 1 (1/X). -0.0 is always 0x8. */
typedef struct { float amax; lofp_scale_rule rule; uint8_t byte, c_a, c_neg, c_one; } mx4_case;

static void test_mxfp4_scale_rules(void)
{
    const float below8 = nextafterf(8.0f, 0.0f); /* 7.9999995: floor(log2) = 2, log2f rounds to 3 */
    const mx4_case cases[] = {
        /* FLOOR: X = 2^(floor(log2 A) - 2).
         * 3 -> X .5 (0x7E): 6 (7), -6 (F), 2 (4).      5 -> X 1 (0x7F): 5 tie -> 4 (6), 1 (2).
         * 6 -> X 1: 6 (7).                             7 -> X 1: 7 saturates to 6 (7).
         * 2.5 -> X .5: 5 -> 4 (6), 1/.5 = 2 (4).       3.5 -> X .5: 7 -> 6 (7).
         * 7.9999995 -> X 1 (not 2!): saturates (7).    8 -> X 2 (0x80): 4 (6), 0.5 (1). */
        { 3.0f, LOFP_SCALE_FLOOR, 0x7E, 7, 0xF, 4 }, { 5.0f, LOFP_SCALE_FLOOR, 0x7F, 6, 0xE, 2 },
        { 6.0f, LOFP_SCALE_FLOOR, 0x7F, 7, 0xF, 2 }, { 7.0f, LOFP_SCALE_FLOOR, 0x7F, 7, 0xF, 2 },
        { 2.5f, LOFP_SCALE_FLOOR, 0x7E, 6, 0xE, 4 }, { 3.5f, LOFP_SCALE_FLOOR, 0x7E, 7, 0xF, 4 },
        { below8, LOFP_SCALE_FLOOR, 0x7F, 7, 0xF, 2 }, { 8.0f, LOFP_SCALE_FLOOR, 0x80, 6, 0xE, 1 },
        /* CEIL: X = 2^(ceil(log2 A) - 2).
         * 3 -> X 1: 3 (5).     5 -> X 2: 2.5 tie -> 2 (4), 0.5 (1).   6 -> X 2: 3 (5).
         * 7 -> X 2: 3.5 tie -> 4 (6).   2.5 -> X 1: 2.5 -> 2 (4).  3.5 -> X 1: 3.5 -> 4 (6).
         * 7.9999995 -> X 2: 3.9999998 -> 4 (6).   8 (log2 exact 3) -> X 2: 4 (6). */
        { 3.0f, LOFP_SCALE_CEIL, 0x7F, 5, 0xD, 2 }, { 5.0f, LOFP_SCALE_CEIL, 0x80, 4, 0xC, 1 },
        { 6.0f, LOFP_SCALE_CEIL, 0x80, 5, 0xD, 1 }, { 7.0f, LOFP_SCALE_CEIL, 0x80, 6, 0xE, 1 },
        { 2.5f, LOFP_SCALE_CEIL, 0x7F, 4, 0xC, 2 }, { 3.5f, LOFP_SCALE_CEIL, 0x7F, 6, 0xE, 2 },
        { below8, LOFP_SCALE_CEIL, 0x80, 6, 0xE, 1 }, { 8.0f, LOFP_SCALE_CEIL, 0x80, 6, 0xE, 1 },
        /* EVEN: A rounded to 1 mantissa bit half-up (add 2^21 to the bits, mask the mantissa),
         * then FLOOR. 3 = 1.5*2 -> 2 -> X .5.  5 = 1.25*4 -> 4 -> X 1.  6 = 1.5*4 -> 4 -> X 1.
         * 7 = 1.75*4 -> 8 -> X 2: 3.5 -> 4 (6).  2.5 = 1.25*2 -> 2 -> X .5: 5 -> 4 (6).
         * 3.5 = 1.75*2 -> 4 -> X 1: 3.5 -> 4 (6).  7.9999995 -> 8 -> X 2.  8 -> X 2. */
        { 3.0f, LOFP_SCALE_EVEN, 0x7E, 7, 0xF, 4 }, { 5.0f, LOFP_SCALE_EVEN, 0x7F, 6, 0xE, 2 },
        { 6.0f, LOFP_SCALE_EVEN, 0x7F, 7, 0xF, 2 }, { 7.0f, LOFP_SCALE_EVEN, 0x80, 6, 0xE, 1 },
        { 2.5f, LOFP_SCALE_EVEN, 0x7E, 6, 0xE, 4 }, { 3.5f, LOFP_SCALE_EVEN, 0x7F, 6, 0xE, 2 },
        { below8, LOFP_SCALE_EVEN, 0x80, 6, 0xE, 1 }, { 8.0f, LOFP_SCALE_EVEN, 0x80, 6, 0xE, 1 },
        /* RCEIL: X = 2^ceil(log2(A/6)).  3/6 = .5 -> X .5.  5/6 -> X 1.  6/6 = 1 -> X 1.
         * 7/6 -> X 2.  2.5/6 = .4167 -> X .5 (differs from CEIL).  3.5/6 = .583 -> X 1.
         * 7.9999995/6 = 1.33 -> X 2.  8/6 -> X 2. */
        { 3.0f, LOFP_SCALE_RCEIL, 0x7E, 7, 0xF, 4 }, { 5.0f, LOFP_SCALE_RCEIL, 0x7F, 6, 0xE, 2 },
        { 6.0f, LOFP_SCALE_RCEIL, 0x7F, 7, 0xF, 2 }, { 7.0f, LOFP_SCALE_RCEIL, 0x80, 6, 0xE, 1 },
        { 2.5f, LOFP_SCALE_RCEIL, 0x7E, 6, 0xE, 4 }, { 3.5f, LOFP_SCALE_RCEIL, 0x7F, 6, 0xE, 2 },
        { below8, LOFP_SCALE_RCEIL, 0x80, 6, 0xE, 1 }, { 8.0f, LOFP_SCALE_RCEIL, 0x80, 6, 0xE, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mx4_case *c = &cases[i];
        lofp_scheme s = preset("mxfp4");
        s.scale_rule = c->rule;
        float x[64] = { c->amax, -c->amax, 1.0f, -0.0f };
        /* block 1: all zero -> byte 0x00 (2^-127), codes 0, dequant 0, for every rule */
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 64);
        CHECK_OK(q.st);
        CHECKF(q.sb == 2 && q.cb == 32, "sizes %zu %zu", q.sb, q.cb);
        CHECKF(q.scales[0] == c->byte, "mxfp4 %s amax %.9g: scale 0x%02X, expected 0x%02X",
               lofp_scale_rule_name(c->rule), (double)c->amax, q.scales[0], c->byte);
        CHECKF(q.scales[1] == 0x00, "mxfp4 %s zero block: scale 0x%02X", lofp_scale_rule_name(c->rule),
               q.scales[1]);
        uint8_t e[4] = { c->c_a, c->c_neg, c->c_one, 0x8 };
        char what[64];
        snprintf(what, sizeof what, "mxfp4 %s amax %.9g", lofp_scale_rule_name(c->rule), (double)c->amax);
        expect_codes(what, &s, q.codes, 0, e, 4);
        expect_zero_codes(what, &s, q.codes, 4, 60);
        float *d = run_dq(&s, &q, 1, 64);
        for (size_t j = 0; d && j < 64; j++) {
            float want = j < 4 ? E2M1[e[j]] * ldexpf(1.0f, (int)c->byte - 127) : 0.0f;
            expect_f32(what, j, d[j], want);
        }
        free(d);
        free_q(&q);
    }

    /* rounding modes at the ties: FLOOR A=5 -> 5 (RNE 4, ties-to-zero 4, away 6);
     * CEIL A=7 -> 3.5 (RNE 4, ttz 3, away 4); CEIL A=5 -> 2.5 (RNE 2, ttz 2, away 3). */
    static const struct { float a; lofp_scale_rule rule; lofp_rounding m; uint8_t ca, cn; } ties[] = {
        { 5.0f, LOFP_SCALE_FLOOR, LOFP_TIES_TO_ZERO, 6, 0xE }, { 5.0f, LOFP_SCALE_FLOOR, LOFP_TIES_AWAY, 7, 0xF },
        { 7.0f, LOFP_SCALE_CEIL, LOFP_TIES_TO_ZERO, 5, 0xD },  { 7.0f, LOFP_SCALE_CEIL, LOFP_TIES_AWAY, 6, 0xE },
        { 5.0f, LOFP_SCALE_CEIL, LOFP_TIES_TO_ZERO, 4, 0xC },  { 5.0f, LOFP_SCALE_CEIL, LOFP_TIES_AWAY, 5, 0xD },
    };
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
        lofp_scheme s = preset("mxfp4");
        s.scale_rule = ties[i].rule;
        s.rounding = ties[i].m;
        float x[32] = { ties[i].a, -ties[i].a };
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 32);
        CHECK_OK(q.st);
        uint8_t e[2] = { ties[i].ca, ties[i].cn };
        expect_codes("mxfp4 tie modes", &s, q.codes, 0, e, 2);
        free_q(&q);
    }
}

/* Runs one 32-element MX block and checks the scale byte, the first n codes and the dequantized
 * values of those n elements. */
static void mx_block(const char *what, const char *name, lofp_scale_rule rule, lofp_rounding mode,
                     const float *x, size_t n, uint8_t exp_scale, const uint8_t *exp_codes,
                     const float *exp_deq)
{
    lofp_scheme s = preset(name);
    s.scale_rule = rule;
    s.rounding = mode;
    float blk[32] = { 0 };
    memcpy(blk, x, n * sizeof(float));
    qres q = run_q(&s, LOFP_DTYPE_F32, blk, 1, 32);
    CHECKF(q.st == LOFP_OK, "%s: %s", what, lofp_status_name(q.st));
    if (q.st == LOFP_OK) {
        CHECKF(q.scales[0] == exp_scale, "%s: scale 0x%02X, expected 0x%02X", what, q.scales[0], exp_scale);
        expect_codes(what, &s, q.codes, 0, exp_codes, n);
        expect_zero_codes(what, &s, q.codes, n, 32 - n);
        float *d = exp_deq ? run_dq(&s, &q, 1, 32) : NULL;
        for (size_t i = 0; d && i < n; i++) expect_f32(what, i, d[i], exp_deq[i]);
        free(d);
    }
    free_q(&q);
}

static void test_mx_elements(void)
{
    const float below8 = nextafterf(8.0f, 0.0f);
    /* E4M3 (emax 8, max 448), FLOOR. amax 256 -> floor(log2) 8 -> X = 1 (0x7F).
     * 256 = 2^8 -> E=15, M=0 -> 0x78.  4.25: tie between 4 (0x48: E=9 M=000) and 4.5 (0x49) ->
     * RNE 0x48, ttz 0x48, away 0x49.  4.75: tie 4.5 (0x49) / 5 (0x4A) -> RNE 0x4A, ttz 0x49,
     * away 0x4A.  -0.0 -> 0x80.  2^-10: half the smallest subnormal 2^-9 -> RNE 0, ttz 0, away 0x01. */
    {
        const float x[5] = { 256.0f, 4.25f, 4.75f, -0.0f, 0x1p-10f };
        const float d_rne[5] = { 256.0f, 4.0f, 5.0f, -0.0f, 0.0f };
        const uint8_t rne[5] = { 0x78, 0x48, 0x4A, 0x80, 0x00 };
        const uint8_t ttz[5] = { 0x78, 0x48, 0x49, 0x80, 0x00 };
        const uint8_t away[5] = { 0x78, 0x49, 0x4A, 0x80, 0x01 };
        mx_block("e4m3 rne", "mxfp8-e4m3", LOFP_SCALE_FLOOR, LOFP_RNE, x, 5, 0x7F, rne, d_rne);
        mx_block("e4m3 ttz", "mxfp8-e4m3", LOFP_SCALE_FLOOR, LOFP_TIES_TO_ZERO, x, 5, 0x7F, ttz, NULL);
        mx_block("e4m3 away", "mxfp8-e4m3", LOFP_SCALE_FLOOR, LOFP_TIES_AWAY, x, 5, 0x7F, away, NULL);
    }
    /* E4M3 saturation under FLOOR: amax 4088 = 511 * 8 -> floor(log2) 11 -> X = 2^3 (0x82);
     * scaled 511, -511, 480, 464 all past 448 -> saturate 0x7E / 0xFE; 2400/8 = 300 -> nearest
     * of 288 (0x79) / 320 -> 288. Dequant 448*8 = 3584, 288*8 = 2304.
     * RCEIL on the same block: 4088/448 = 9.125 -> X = 16 (0x83): 255.5 -> 256 (0x78);
     * 3840/16 = 240 exact (0x77); 3712/16 = 232: tie between 224 (0x76) and 240 (0x77) -> RNE 0x76;
     * 150 -> 144 (0x71: E=14, M=001) | 160 -> 144. No saturation under RCEIL. */
    {
        const float x[5] = { 4088.0f, -4088.0f, 3840.0f, 3712.0f, 2400.0f };
        const uint8_t fl[5] = { 0x7E, 0xFE, 0x7E, 0x7E, 0x79 };
        const float dfl[5] = { 3584.0f, -3584.0f, 3584.0f, 3584.0f, 2304.0f };
        mx_block("e4m3 saturate floor", "mxfp8-e4m3", LOFP_SCALE_FLOOR, LOFP_RNE, x, 5, 0x82, fl, dfl);
        const uint8_t rc[5] = { 0x78, 0xF8, 0x77, 0x76, 0x71 };
        const float drc[5] = { 4096.0f, -4096.0f, 3840.0f, 3584.0f, 2304.0f };
        mx_block("e4m3 rceil", "mxfp8-e4m3", LOFP_SCALE_RCEIL, LOFP_RNE, x, 5, 0x83, rc, drc);
    }
    /* FLOOR just below a power of two on E4M3: 7.9999995 -> floor(log2) 2 -> X = 2^-6 (0x79);
     * scaled 511.99997 -> saturate 0x7E (with floorf(log2f()) it would be X = 2^-5 and 255.99998
     * -> 0x78). */
    {
        const float x[1] = { below8 };
        const uint8_t e[1] = { 0x7E };
        mx_block("e4m3 below 8", "mxfp8-e4m3", LOFP_SCALE_FLOOR, LOFP_RNE, x, 1, 0x79, e, NULL);
    }
    /* Tiny block under FLOOR: amax 2^-120 -> -120 - 8 = -128 -> clamped to 2^-127 (0x00);
     * scaled 2^7 = 128 -> E4M3 0x70 (E=14, M=0); dequant 128 * 2^-127 = 2^-120 exactly. */
    {
        const float x[1] = { 0x1p-120f };
        const uint8_t e[1] = { 0x70 };
        const float dq[1] = { 0x1p-120f };
        mx_block("e4m3 tiny floor", "mxfp8-e4m3", LOFP_SCALE_FLOOR, LOFP_RNE, x, 1, 0x00, e, dq);
    }
    /* RCEIL with an fp32-subnormal ratio (torchao/TE rule: round up only past 0x400000):
     * amax = 7 * 2^-121 = 448 * 2^-127 -> ratio = 2^-127 exactly (bits 0x00400000) -> byte 0x00
     * -> scaled 448 (0x7E).  amax = 7*2^-121 + 2^-133 -> ratio 0x00400092 -> byte 0x01 (2^-126)
     * -> scaled 224.0078 -> 224 (0x76). */
    {
        const float a0 = 7.0f * 0x1p-121f, a1 = 7.0f * 0x1p-121f + 0x1p-133f;
        const uint8_t e[1] = { 0x7E };
        mx_block("rceil subnormal exact", "mxfp8-e4m3", LOFP_SCALE_RCEIL, LOFP_RNE, &a0, 1, 0x00, e, NULL);
        const uint8_t e1[1] = { 0x76 };
        mx_block("rceil subnormal above", "mxfp8-e4m3", LOFP_SCALE_RCEIL, LOFP_RNE, &a1, 1, 0x01, e1, NULL);
    }
    /* E5M2 (emax 15, max 57344), FLOOR: amax 61440 = 1.875 * 2^15 -> X = 1 (0x7F); 61440 is the
     * midpoint of 57344 and 65536 (which would be Inf) -> saturate 0x7B. 4.5: tie 4 (0x44) / 5
     * (0x45) -> RNE 0x44, away 0x45. -0.0 -> 0x80. 3 -> 0x42 (E=16, M=10). */
    {
        const float x[4] = { 61440.0f, 4.5f, -0.0f, 3.0f };
        const uint8_t rne[4] = { 0x7B, 0x44, 0x80, 0x42 };
        const uint8_t away[4] = { 0x7B, 0x45, 0x80, 0x42 };
        const float d[4] = { 57344.0f, 4.0f, -0.0f, 3.0f };
        mx_block("e5m2 rne", "mxfp8-e5m2", LOFP_SCALE_FLOOR, LOFP_RNE, x, 4, 0x7F, rne, d);
        mx_block("e5m2 away", "mxfp8-e5m2", LOFP_SCALE_FLOOR, LOFP_TIES_AWAY, x, 4, 0x7F, away, NULL);
    }
    /* E2M3 (bias 1, 3 mantissa bits, max 7.5, emax 2), FLOOR: amax 7.75 -> X = 1 (0x7F);
     * 7.75 -> saturate 7.5 (0x1F).  1.0625: tie 1 (0x08) / 1.125 (0x09) -> RNE 0x08, ttz 0x08,
     * away 0x09.  1.1875: tie 1.125 (0x09) / 1.25 (0x0A) -> RNE 0x0A, ttz 0x09, away 0x0A.
     * 0.0625: tie 0 / 0.125 (0x01) -> RNE 0, ttz 0, away 1.  -1.0625 -> RNE 0x28. */
    {
        const float x[5] = { 7.75f, 1.0625f, 1.1875f, 0.0625f, -1.0625f };
        const uint8_t rne[5] = { 0x1F, 0x08, 0x0A, 0x00, 0x28 };
        const uint8_t ttz[5] = { 0x1F, 0x08, 0x09, 0x00, 0x28 };
        const uint8_t away[5] = { 0x1F, 0x09, 0x0A, 0x01, 0x29 };
        const float d[5] = { 7.5f, 1.0f, 1.25f, 0.0f, -1.0f };
        mx_block("e2m3 rne", "mxfp6-e2m3", LOFP_SCALE_FLOOR, LOFP_RNE, x, 5, 0x7F, rne, d);
        mx_block("e2m3 ttz", "mxfp6-e2m3", LOFP_SCALE_FLOOR, LOFP_TIES_TO_ZERO, x, 5, 0x7F, ttz, NULL);
        mx_block("e2m3 away", "mxfp6-e2m3", LOFP_SCALE_FLOOR, LOFP_TIES_AWAY, x, 5, 0x7F, away, NULL);
    }
    /* E3M2 (bias 3, 2 mantissa bits, max 28, emax 4), FLOOR: amax 31 -> X = 1; 31 -> 28 (0x1F).
     * 4.5: tie 4 (0x14) / 5 (0x15) -> RNE 0x14, ttz 0x14, away 0x15.  5.5: tie 5 / 6 (0x16) ->
     * RNE 0x16, ttz 0x15, away 0x16.  0.03125: tie 0 / 0.0625 -> RNE 0, away 1.
     * -4.5 -> RNE 0x34. */
    {
        const float x[5] = { 31.0f, 4.5f, 5.5f, 0.03125f, -4.5f };
        const uint8_t rne[5] = { 0x1F, 0x14, 0x16, 0x00, 0x34 };
        const uint8_t ttz[5] = { 0x1F, 0x14, 0x15, 0x00, 0x34 };
        const uint8_t away[5] = { 0x1F, 0x15, 0x16, 0x01, 0x35 };
        const float d[5] = { 28.0f, 4.0f, 6.0f, 0.0f, -4.0f };
        mx_block("e3m2 rne", "mxfp6-e3m2", LOFP_SCALE_FLOOR, LOFP_RNE, x, 5, 0x7F, rne, d);
        mx_block("e3m2 ttz", "mxfp6-e3m2", LOFP_SCALE_FLOOR, LOFP_TIES_TO_ZERO, x, 5, 0x7F, ttz, NULL);
        mx_block("e3m2 away", "mxfp6-e3m2", LOFP_SCALE_FLOOR, LOFP_TIES_AWAY, x, 5, 0x7F, away, NULL);
    }
    /* MXINT8 (int8 * 2^-6, emax 0), FLOOR: amax 1.5 -> X = 1 (0x7F). 1.5 * 64 = 96 (0x60);
     * -96 = 0xA0; 1/128 * 64 = 0.5: tie -> RNE 0, ttz 0, away 1; 3/128 * 64 = 1.5 -> RNE 2,
     * ttz 1, away 2; -3/128 -> RNE -2 (0xFE), ttz -1 (0xFF), away -2; -0.0 -> 0 (no -0). */
    {
        const float x[6] = { 1.5f, -1.5f, 1.0f / 128, 3.0f / 128, -3.0f / 128, -0.0f };
        const uint8_t rne[6] = { 0x60, 0xA0, 0x00, 0x02, 0xFE, 0x00 };
        const uint8_t ttz[6] = { 0x60, 0xA0, 0x00, 0x01, 0xFF, 0x00 };
        const uint8_t away[6] = { 0x60, 0xA0, 0x01, 0x02, 0xFE, 0x00 };
        const float d[6] = { 1.5f, -1.5f, 0.0f, 2.0f / 64, -2.0f / 64, 0.0f };
        mx_block("mxint8 rne", "mxint8", LOFP_SCALE_FLOOR, LOFP_RNE, x, 6, 0x7F, rne, d);
        mx_block("mxint8 ttz", "mxint8", LOFP_SCALE_FLOOR, LOFP_TIES_TO_ZERO, x, 6, 0x7F, ttz, NULL);
        mx_block("mxint8 away", "mxint8", LOFP_SCALE_FLOOR, LOFP_TIES_AWAY, x, 6, 0x7F, away, NULL);
    }
    /* MXINT8 clamp: amax 255/128 = 1.9921875 -> X = 1; *64 = 127.5 -> RNE 128 -> clamp 127
     * (0x7F); the negative -> -127 (0x81), never -128 (0x80). Dequant +-127/64. amax 3 -> X = 2
     * (0x80): 3/2 * 64 = 96. */
    {
        const float x[2] = { 1.9921875f, -1.9921875f };
        const uint8_t e[2] = { 0x7F, 0x81 };
        const float d[2] = { 127.0f / 64, -127.0f / 64 };
        mx_block("mxint8 clamp", "mxint8", LOFP_SCALE_FLOOR, LOFP_RNE, x, 2, 0x7F, e, d);
        mx_block("mxint8 clamp away", "mxint8", LOFP_SCALE_FLOOR, LOFP_TIES_AWAY, x, 2, 0x7F, e, d);
        const float y[2] = { 3.0f, -0.75f };
        const uint8_t f[2] = { 0x60, 0xE8 }; /* -0.75/2*64 = -24 = 0xE8 */
        const float dy[2] = { 3.0f, -0.75f };
        mx_block("mxint8 amax 3", "mxint8", LOFP_SCALE_FLOOR, LOFP_RNE, y, 2, 0x80, f, dy);
    }
    /* Scale rules in fp32's top binade. 3e38f = 0x7F61B1E6 = 1.7632 * 2^127.
     * FLOOR: 127 - 2 -> byte 252 (0xFC), scaled 7.05 -> saturates (7).
     * CEIL: 128 - 2 -> 253 (0xFD), scaled 3.53 -> 4 (6).  RCEIL: 3e38/6 = 0.588 * 2^126 -> 2^126
     * -> 253, code 6.  EVEN: mantissa 0x61B1E6 + 2^21 carries into the exponent field, which
     * becomes 255: the rounded amax is 2^128, FLOOR of it is 128 -> 128 - 2 + 127 = 253 (0xFD),
     * scaled 3.53 -> 6 (what torchao's bit arithmetic gives: exponent field 255 - 127 = 128).
     * E4M3 EVEN, 3.3e38f = 0x7F7843B0 = 1.9396 * 2^127: + 2^19 carries -> 2^128 -> 128 - 8 + 127
     * = 247 (0xF7), scaled 248.26 -> 256 (0x78); FLOOR gives 246 and 496.5 -> 448 (0x7E).
     * KNOWN FAILURE (reported, docs/SCHEMES.md "Known deviations"): the EVEN rule in
     * quant_mx.c / kernel_util.h clamps the carried amax to 2^127 and writes 0xFC / 0xF6. */
    {
        const float big = 3e38f, big8 = 3.3e38f;
        const uint8_t c7[1] = { 7 }, c6[1] = { 6 }, e78[1] = { 0x78 }, e7e[1] = { 0x7E };
        mx_block("e2m1 floor top binade", "mxfp4", LOFP_SCALE_FLOOR, LOFP_RNE, &big, 1, 0xFC, c7, NULL);
        mx_block("e2m1 ceil top binade", "mxfp4", LOFP_SCALE_CEIL, LOFP_RNE, &big, 1, 0xFD, c6, NULL);
        mx_block("e2m1 rceil top binade", "mxfp4", LOFP_SCALE_RCEIL, LOFP_RNE, &big, 1, 0xFD, c6, NULL);
        mx_block("e2m1 even top binade", "mxfp4", LOFP_SCALE_EVEN, LOFP_RNE, &big, 1, 0xFD, c6, NULL);
        mx_block("e4m3 floor top binade", "mxfp8-e4m3", LOFP_SCALE_FLOOR, LOFP_RNE, &big8, 1, 0xF6, e7e, NULL);
        mx_block("e4m3 even top binade", "mxfp8-e4m3", LOFP_SCALE_EVEN, LOFP_RNE, &big8, 1, 0xF7, e78, NULL);
    }
    /* Zero blocks of every MX element type and rule: scale 0x00, codes 0, dequant 0. */
    {
        static const char *const names[] = { "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3",
                                             "mxfp8-e5m2", "mxint8" };
        const float z[1] = { 0.0f };
        const uint8_t e[1] = { 0 };
        const float d[1] = { 0.0f };
        for (size_t i = 0; i < 6; i++)
            for (int r = 0; r <= LOFP_SCALE_RCEIL; r++)
                mx_block(names[i], names[i], (lofp_scale_rule)r, LOFP_RNE, z, 1, 0x00, e, d);
    }
}

static void test_mx_granularity(void)
{
    /* mxfp4 at block 64: elements 0..31 hold amax 6, 32..63 hold 0.75 and -0.375: one shared
     * X = 1 (0x7F) -> 0.75 -> RNE 1 (2), -0.375 -> -0.5 (0x9). Block 64..127: amax 0.5 ->
     * floor(log2) -1 -> X = 2^-3 (0x7C) -> 0.5/0.125 = 4 (6), 0.25 -> 2 (4).
     * At block 32 the second native block would get its own X = 2^-3 and 0.75 -> 6 (7). */
    float x[128] = { 0 };
    x[0] = 6.0f;
    x[32] = 0.75f;
    x[33] = -0.375f;
    x[64] = 0.5f;
    x[100] = 0.25f;
    lofp_scheme s = preset("mxfp4");
    s.block = 64;
    CHECK_OK(lofp_scheme_validate(&s));
    qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 128);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.sb, 2);
    CHECK_EQ_U(q.scales[0], 0x7F);
    CHECK_EQ_U(q.scales[1], 0x7C);
    CHECK_EQ_U(code_at(&s, q.codes, 0), 7);
    CHECK_EQ_U(code_at(&s, q.codes, 32), 2);
    CHECK_EQ_U(code_at(&s, q.codes, 33), 0x9);
    CHECK_EQ_U(code_at(&s, q.codes, 64), 6);
    CHECK_EQ_U(code_at(&s, q.codes, 100), 4);
    float *d = run_dq(&s, &q, 1, 128);
    if (d) CHECK(d[32] == 1.0f && d[33] == -0.5f && d[64] == 0.5f && d[100] == 0.25f);
    free(d);
    free_q(&q);
    s.block = 32;
    q = run_q(&s, LOFP_DTYPE_F32, x, 1, 128);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.sb, 4);
    CHECK_EQ_U(q.scales[1], 0x7C);
    CHECK_EQ_U(q.scales[3], 0x7B); /* amax 0.25 -> 2^(-2-2) */
    CHECK_EQ_U(code_at(&s, q.codes, 32), 7);
    free_q(&q);

    /* mxfp8-e4m3 at block 128 (row of 256, 2 scales): block 0 amax 1792 = 7 * 256 ->
     * floor(log2) 10 -> X = 2^2 (0x81): 1792/4 = 448 (0x7E), 1/4 = 2^-2 -> 0x28 (E=5, M=0);
     * block 1 amax 3 -> floor 1 -> X = 2^-7 (0x78): 3 * 128 = 384 (0x7C: E=15, M=100), -384 (0xFC). */
    float y[256] = { 0 };
    y[0] = 1792.0f;
    y[100] = 1.0f;
    y[128] = 3.0f;
    y[255] = -3.0f;
    s = preset("mxfp8-e4m3");
    s.block = 128;
    q = run_q(&s, LOFP_DTYPE_F32, y, 1, 256);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.sb, 2);
    CHECK_EQ_U(q.cb, 256);
    CHECK_EQ_U(q.scales[0], 0x81);
    CHECK_EQ_U(q.scales[1], 0x78);
    CHECK_EQ_U(q.codes[0], 0x7E);
    CHECK_EQ_U(q.codes[100], 0x28);
    CHECK_EQ_U(q.codes[128], 0x7C);
    CHECK_EQ_U(q.codes[255], 0xFC);
    CHECK_EQ_U(q.codes[1], 0x00);
    free_q(&q);
    /* K = 96 is not a multiple of 64 or 128 */
    s.block = 64;
    q = run_q(&s, LOFP_DTYPE_F32, y, 1, 96);
    CHECK(q.st == LOFP_ERR_SHAPE);
    free_q(&q);
}

/* ------------------------------------------------------------------------------------------ */
/* tilelang-mxfp8                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void test_tilelang(void)
{
    /* K = 512, 4 blocks of 128. RCEIL with ceil_to_ue8m0: byte = exponent field of fl(amax/448)
     * + (mantissa != 0), clamped to [1, 254]; amax floored at 1e-4.
     * block 0: amax 448 -> ratio 1.0 (0x3F800000) -> 127; scaled = x; 4.25 -> tie 0x48/0x49,
     *   4.75 -> tie 0x49/0x4A, -0.0 -> 0x80, 2^-10 -> tie 0/0x01.
     * block 1: all zero -> amax 1e-4 -> 1e-4f/448 = 0x346FACAD (field 104, mantissa != 0) -> 105
     *   (0x69), X = 2^-22; codes 0; dequant 0.
     * block 2: amax 1e-6 (floored to 1e-4) -> 105; 1e-6f * 2^22 = 4.194304 -> 4 (0x48);
     *   -5e-7f * 2^22 = -2.097152 -> -2 (0xC0).  Without the floor X would be 2^-28.
     * block 3: amax 449 -> ratio 1.0022 -> 128 (X = 2): 224.5 -> 224 (0x76); 3 -> 1.5 (0x3C). */
    float x[512] = { 0 };
    x[0] = 448.0f;
    x[1] = 4.25f;
    x[2] = 4.75f;
    x[3] = -0.0f;
    x[4] = 0x1p-10f;
    x[256] = 1e-6f;
    x[257] = -5e-7f;
    x[384] = 449.0f;
    x[385] = 3.0f;
    static const uint8_t exp_scales[4] = { 127, 105, 105, 128 };
    for (int m = 0; m < 3; m++) {
        lofp_scheme s = preset("tilelang-mxfp8");
        s.rounding = (lofp_rounding)m;
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 512);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.sb, 4);
        expect_bytes("tilelang scales", q.scales, exp_scales, 4);
        uint8_t e0[5] = { 0x7E, 0x48, 0x4A, 0x80, 0x00 };
        if (m == LOFP_TIES_TO_ZERO) e0[2] = 0x49; /* seed 004's round_to_codebook: lower on ties */
        if (m == LOFP_TIES_AWAY) { e0[1] = 0x49; e0[4] = 0x01; }
        expect_codes("tilelang block 0", &s, q.codes, 0, e0, 5);
        expect_zero_codes("tilelang block 0", &s, q.codes, 5, 123);
        expect_zero_codes("tilelang zero block", &s, q.codes, 128, 128);
        const uint8_t e2[2] = { 0x48, 0xC0 };
        expect_codes("tilelang tiny block", &s, q.codes, 256, e2, 2);
        const uint8_t e3[2] = { 0x76, 0x3C };
        expect_codes("tilelang block 3", &s, q.codes, 384, e3, 2);
        if (m == LOFP_RNE) {
            float *d = run_dq(&s, &q, 1, 512);
            if (d) {
                CHECK(d[0] == 448.0f && d[1] == 4.0f && d[2] == 5.0f);
                CHECK(d[128] == 0.0f && d[200] == 0.0f);
                CHECK(d[256] == 4.0f * 0x1p-22f && d[257] == -2.0f * 0x1p-22f);
                CHECK(d[384] == 448.0f && d[385] == 3.0f);
            }
            free(d);
        }
        free_q(&q);
    }
    /* Plain mxfp8-e4m3 + RCEIL (no clamp, no floor) writes 0x00 for the zero block and
     * ceil(log2(1e-6f/448)) = -28 -> 99 for the tiny one: tilelang's 105 is its own rule. */
    lofp_scheme s = preset("mxfp8-e4m3");
    s.scale_rule = LOFP_SCALE_RCEIL;
    s.block = 128;
    qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 512);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[1], 0x00);
    CHECK_EQ_U(q.scales[2], 99); /* 1e-6f/448 = 2.23e-9 in [2^-29, 2^-28) -> 2^-28 -> 127-28 */
    free_q(&q);
    /* ceil_clamp on its own (amax floor 0), where the [1, 254] clamp is reachable:
     * zero block -> ratio 0 -> field 0 + 0 -> clamped to 1 (0x01, never 0x00);
     * amax 7*2^-121 -> ratio 2^-127 = 0x00400000 -> field 0 + (mantissa != 0) = 1 -> 0x01
     * (the torchao rule without the clamp gives 0x00, see test_mx_elements) -> scaled 224 (0x76);
     * amax 448 -> ratio 1.0 -> 127, 449 -> 128. */
    s = preset("mxfp8-e4m3");
    s.scale_rule = LOFP_SCALE_RCEIL;
    s.ceil_clamp = 1;
    {
        float y[128] = { 0 };
        y[32] = 7.0f * 0x1p-121f;
        y[64] = 448.0f;
        y[96] = 449.0f;
        q = run_q(&s, LOFP_DTYPE_F32, y, 1, 128);
        CHECK_OK(q.st);
        static const uint8_t es[4] = { 0x01, 0x01, 127, 128 };
        expect_bytes("rceil ceil_clamp", q.scales, es, 4);
        CHECK_EQ_U(q.codes[32], 0x76);
        CHECK_EQ_U(q.codes[64], 0x7E);
        CHECK_EQ_U(q.codes[96], 0x76); /* 449/2 = 224.5 -> 224 */
        expect_zero_codes("rceil ceil_clamp zero block", &s, q.codes, 0, 32);
        free_q(&q);
    }
    /* tilelang needs K a multiple of 128 */
    s = preset("tilelang-mxfp8");
    q = run_q(&s, LOFP_DTYPE_F32, x, 1, 96);
    CHECK(q.st == LOFP_ERR_SHAPE);
    free_q(&q);
}

/* ------------------------------------------------------------------------------------------ */
/* UltraQuant                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void test_ultraquant_unrotated(void)
{
    lofp_scheme s = preset("ultraquant");
    s.rotate = 0;
    /* c = 0.156f = 0x3E1FBE77. Group 0: absmax 32 -> s_raw = 32c = 4.992 (exact: power-of-two
     * multiple) -> log2 = 2.3196 -> +0.5 = 2.82 -> floor 2 -> byte 129, scale 4.
     * y = x/4 and index = #midpoints < y, code = i < 7 ? 15 - i : i - 7:
     *  32 -> 8   -> i 14 -> 7          1 -> .25  -> i 7 -> 0 (tie toward -inf)
     *  -1 -> -.25 -> i 6 -> 9 (-0.5)   3 -> .75  -> i 8 -> 1 (0.5)
     *  -3 -> -.75 -> i 5 -> 0xA (-1)   5 -> 1.25 -> i 9 -> 2 (1)
     *  -5 -> -1.25 -> i 4 -> 0xB       10 -> 2.5 -> i 11 -> 4 (2)
     *  -10 -> -2.5 -> i 2 -> 0xD (-3)  20 -> 5   -> i 13 -> 6 (4)
     *  -20 -> -5 -> i 0 -> 0xF (-6)    0, -0.0, -0.4, 0.4 -> |y| < .25 -> i 7 -> 0 (never 0x8)
     *  6 -> 1.5 -> i 10 -> 3           7 -> 1.75 -> i 10 -> 3 (1.5)
     *  -7 -> -1.75 -> i 3 -> 0xC (-2)  14 -> 3.5 -> i 12 -> 5 (3)   -14 -> -3.5 -> i 1 -> 0xE (-4)
     * Group 1: all zero (and a -0.0) -> s_raw 0 -> byte 0, codes 0x0, dequant 0. */
    float x[64] = { 32.0f, 1.0f, -1.0f, 3.0f, -3.0f, 5.0f, -5.0f, 10.0f, -10.0f, 20.0f, -20.0f,
                    0.0f, -0.0f, -0.4f, 0.4f, 6.0f, 7.0f, -7.0f, 14.0f, -14.0f };
    x[40] = -0.0f;
    static const uint8_t e[20] = { 7, 0, 9, 1, 0xA, 2, 0xB, 4, 0xD, 6, 0xF,
                                   0, 0, 0, 0, 3, 3, 0xC, 5, 0xE };
    /* the snap is the format: the rounding field must not change it */
    for (int m = 0; m < 3; m++) {
        s.rounding = (lofp_rounding)m;
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 64);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.sb, 2);
        CHECK_EQ_U(q.cb, 32);
        CHECK_EQ_U(q.scales[0], 129);
        CHECK_EQ_U(q.scales[1], 0);
        expect_codes("uq c=0.156", &s, q.codes, 0, e, 20);
        expect_zero_codes("uq c=0.156", &s, q.codes, 20, 44);
        float *d = run_dq(&s, &q, 1, 64);
        for (size_t i = 0; d && i < 64; i++)
            expect_f32("uq dequant", i, d[i], i < 20 ? E2M1[e[i]] * 4.0f : 0.0f);
        free(d);
        free_q(&q);
    }

    /* another c: 0.25. absmax 45 -> s_raw 11.25 -> log2 3.4919 -> floor(3.99) = 3 -> byte 130;
     * absmax 46 -> s_raw 11.5 -> log2 3.5236 -> floor(4.02) = 4 -> byte 131 (2^3.5 = 11.31 is the
     * switch point). Group A [45, 4, -4]: y = 5.625, .5, -.5 -> 7, 1, 9.
     * Group B [46, 8, -8]: y = 2.875, .5, -.5 -> 5 (3.0), 1, 9.
     * With c = 0.156 both groups get byte 130 (s_raw 7.02 and 7.18, log2 2.81 and 2.84). */
    float y[64] = { 45.0f, 4.0f, -4.0f };
    y[32] = 46.0f;
    y[33] = 8.0f;
    y[34] = -8.0f;
    s.rounding = LOFP_RNE;
    s.c = 0.25f;
    qres q = run_q(&s, LOFP_DTYPE_F32, y, 1, 64);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 130);
    CHECK_EQ_U(q.scales[1], 131);
    static const uint8_t ea[3] = { 7, 1, 9 }, eb[3] = { 5, 1, 9 };
    expect_codes("uq c=0.25 A", &s, q.codes, 0, ea, 3);
    expect_codes("uq c=0.25 B", &s, q.codes, 32, eb, 3);
    free_q(&q);
    s.c = 0.156f;
    q = run_q(&s, LOFP_DTYPE_F32, y, 1, 64);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 130);
    CHECK_EQ_U(q.scales[1], 130);
    free_q(&q);

    /* the exponent rounding is round-half-up in fp32, floor(fl(log2 s_raw) + 0.5), c = 0.25:
     * A: absmax 0x40B504F3 (4 fl(sqrt 2)) -> s_raw = 0x3FB504F3 = sqrt2 (1 - 1.7e-8) -> log2 =
     *    0.5 - 2.5e-8 -> fp32 0.5 - 2^-25 (0x3EFFFFFF); + 0.5 = 1 - 2^-25, a tie between
     *    1 - 2^-24 and 1 -> 1.0 -> e = 1 -> byte 128; y = 2.83 -> i 12 -> 5 (3.0).
     *    (Rounding log2 to nearest-even, or adding 0.5 in double, would give e = 0 and code 7.)
     * B: absmax 0x3FB504F3 -> s_raw = 0x3EB504F3 -> log2 = -1.5 - 2.5e-8 -> fp32 -1.5 exactly
     *    (half an ulp there is 6e-8) -> floor(-1.0) = -1 -> byte 126 (rint(-1.5) would be -2);
     *    y = 2.83 -> 5. */
    float t[64] = { 0 };
    t[0] = u2f(0x40B504F3u);
    t[32] = u2f(0x3FB504F3u);
    s.c = 0.25f;
    q = run_q(&s, LOFP_DTYPE_F32, t, 1, 64);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 128);
    CHECK_EQ_U(q.scales[1], 126);
    CHECK_EQ_U(code_at(&s, q.codes, 0), 5);
    CHECK_EQ_U(code_at(&s, q.codes, 32), 5);
    free_q(&q);

    /* exponent clamps. c = 1, absmax FLT_MAX: log2 -> 128.0 in fp32 -> floor(128.5) = 128 ->
     * clamp 127 -> byte 254 (not 255); y = FLT_MAX/2^127 = 1.99999988 -> i 11 -> 4 (2.0);
     * -FLT_MAX -> -1.99999988 -> i 3 -> 0xC (-2).
     * c = 0.156, absmax 2^-130 -> log2(s_raw) = -132.68 -> -133 -> clamp -126 -> byte 1; y = 2^-4 -> 0. */
    float z[64] = { FLT_MAX, -FLT_MAX };
    z[32] = 0x1p-130f;
    s.c = 1.0f;
    q = run_q(&s, LOFP_DTYPE_F32, z, 1, 32);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 254);
    CHECK_EQ_U(code_at(&s, q.codes, 0), 4);
    CHECK_EQ_U(code_at(&s, q.codes, 1), 0xC);
    free_q(&q);
    s.c = 0.156f;
    q = run_q(&s, LOFP_DTYPE_F32, z + 32, 1, 32);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 1);
    CHECK_EQ_U(code_at(&s, q.codes, 0), 0);
    free_q(&q);
    /* s_raw not finite (c = 100, absmax 3e38 -> s_raw = Inf): a zero group, byte 0, codes 0 */
    float w[32] = { 3e38f, 1.0f, -5.0f };
    s.c = 100.0f;
    q = run_q(&s, LOFP_DTYPE_F32, w, 1, 32);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.scales[0], 0);
    expect_zero_codes("uq s_raw inf", &s, q.codes, 0, 32);
    free_q(&q);
}

/* h_i[j] = (-1)^popcount(i & j): row i of the unnormalised Sylvester Hadamard matrix. */
static float hsign(unsigned i, unsigned j) { return (__builtin_popcount(i & j) & 1) ? -1.0f : 1.0f; }

static void test_ultraquant_rotated(void)
{
    /* x = a * h_i with D = 64. The butterfly pairs (u, v) -> ((u+v) r, (u-v) r), r = fl(1/sqrt 2)
     * = 11863283 * 2^-24 (0x3F3504F3). For a row of H every pair is equal or opposite, so one
     * side is exactly +0 and the other is fl(2 v_k r): v_0 = 1,
     * v_1 = 2r = 0x3FB504F3, v_2 = fl(4r^2) = 2 - 2^-23 (0x3FFFFFFF), v_3 = 0x403504F2,
     * v_4 = 4 - 2^-21 (0x407FFFFE), v_5 = 0x40B504F2, v_6 = 8 - 2^-20 (0x40FFFFFE)
     * (exact rational arithmetic). Scaling by a = 1/4 is exact: y_i = 2 - 2^-22 (0x3FFFFFFE),
     * every other element +0. The dense reference (H entries fl(1/8) = 1/8 exactly) gives 2.0.
     * UltraQuant then: s_raw = c * (2 - 2^-22) = 0.312 -> log2 -1.68 -> floor(-1.18) = -2 ->
     * byte 125; y / 0.25 = 8 - 2^-20 -> i 14 -> code 7; the other group is all zero -> byte 0. */
    float v[64];
    for (unsigned j = 0; j < 64; j++) v[j] = 0.25f * hsign(37, j);
    float bf[64];
    memcpy(bf, v, sizeof v);
    CHECK_OK(lofp_hadamard_inplace(bf, 64, NULL));
    for (unsigned j = 0; j < 64; j++) {
        if (j == 37) CHECKF(f2u(bf[j]) == 0x3FFFFFFEu, "butterfly[37] = 0x%08X", f2u(bf[j]));
        else CHECKF(f2u(bf[j]) == 0u, "butterfly[%u] = 0x%08X, expected +0", j, f2u(bf[j]));
    }
    float dn[64];
    CHECK_OK(lofp_hadamard_dense(v, dn, 64));
    CHECK_EQ_U(f2u(dn[37]), 0x40000000u);
    /* the step chain itself, literally: v <- (v + v) * r six times */
    {
        volatile float t = 1.0f, r = u2f(0x3F3504F3u);
        for (int k = 0; k < 6; k++) { volatile float s2 = t + t; t = s2 * r; }
        CHECK_EQ_U(f2u(t), 0x40FFFFFEu);
    }

    /* two rows: row 0 = 0.25 h_37 (one-hot in group 1), row 1 = -0.25 h_5 (one-hot in group 0) */
    float x[128];
    for (unsigned j = 0; j < 64; j++) {
        x[j] = 0.25f * hsign(37, j);
        x[64 + j] = -0.25f * hsign(5, j);
    }
    for (int kind = 0; kind < 2; kind++) {
        lofp_scheme s = preset("ultraquant"); /* rotate = 1 */
        s.hadamard = kind ? LOFP_HADAMARD_DENSE : LOFP_HADAMARD_BUTTERFLY;
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 2, 64);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.sb, 4);
        static const uint8_t es[4] = { 0, 125, 125, 0 };
        expect_bytes(kind ? "uq dense scales" : "uq butterfly scales", q.scales, es, 4);
        for (unsigned j = 0; j < 128; j++) {
            unsigned want = j == 37 ? 7u : j == 64 + 5 ? 0xFu : 0u;
            CHECKF(code_at(&s, q.codes, j) == want, "uq rotated (%s) code[%u] = 0x%X, expected 0x%X",
                   kind ? "dense" : "butterfly", j, code_at(&s, q.codes, j), want);
        }
        float *d = run_dq(&s, &q, 2, 64);
        for (unsigned j = 0; d && j < 128; j++)
            expect_f32("uq rotated dequant", j, d[j], j == 37 ? 1.5f : j == 69 ? -1.5f : 0.0f);
        free(d);
        free_q(&q);
    }
    /* A case where the butterfly and the dense product give different codes: x = h_37 - 0.625 h_5
     * (entries +-1.625, +-0.375, exact). Worked out stage by stage in exact rational arithmetic
     * (every add and multiply rounded to fp32), the butterfly gives y_37 = 8 - 2^-20 (0x40FFFFFE)
     * and y_5 = -(5 - 2^-21) (0xC09FFFFF), +0 elsewhere; the dense product (entries +-1/8, exact
     * partial sums) gives exactly 8 and -5. Group 0: absmax ~5 -> s_raw 0.78 -> log2 -0.36 ->
     * floor(0.14) = 0 -> byte 127; y_5 = -4.9999995 is above the midpoint -5 -> i 1 -> 0xE (-4)
     * for the butterfly, while the dense -5.0 sits on it and goes toward -inf -> i 0 -> 0xF (-6).
     * Group 1: byte 127, y_37 -> 7 both ways. */
    {
        float in[64], yb[64], yd[64];
        for (unsigned j = 0; j < 64; j++) in[j] = hsign(37, j) - 0.625f * hsign(5, j);
        memcpy(yb, in, sizeof in);
        CHECK_OK(lofp_hadamard_inplace(yb, 64, NULL));
        CHECK_OK(lofp_hadamard_dense(in, yd, 64));
        for (unsigned j = 0; j < 64; j++) {
            uint32_t wb = j == 5 ? 0xC09FFFFFu : j == 37 ? 0x40FFFFFEu : 0u;
            uint32_t wd = j == 5 ? 0xC0A00000u : j == 37 ? 0x41000000u : 0u;
            CHECKF(f2u(yb[j]) == wb, "butterfly(h37 - .625 h5)[%u] = 0x%08X, expected 0x%08X", j, f2u(yb[j]), wb);
            CHECKF(f2u(yd[j]) == wd || (wd == 0 && yd[j] == 0.0f), "dense(h37 - .625 h5)[%u] = 0x%08X, expected 0x%08X",
                   j, f2u(yd[j]), wd);
        }
        for (int kind = 0; kind < 2; kind++) {
            lofp_scheme s = preset("ultraquant");
            s.hadamard = kind ? LOFP_HADAMARD_DENSE : LOFP_HADAMARD_BUTTERFLY;
            qres q = run_q(&s, LOFP_DTYPE_F32, in, 1, 64);
            CHECK_OK(q.st);
            CHECK_EQ_U(q.scales[0], 127);
            CHECK_EQ_U(q.scales[1], 127);
            for (unsigned j = 0; j < 64; j++) {
                unsigned want = j == 5 ? (kind ? 0xFu : 0xEu) : j == 37 ? 7u : 0u;
                CHECKF(code_at(&s, q.codes, j) == want, "uq h37-.625h5 (%s) code[%u] = 0x%X, expected 0x%X",
                       kind ? "dense" : "butterfly", j, code_at(&s, q.codes, j), want);
            }
            free_q(&q);
        }
    }
    /* the rotation needs a power-of-two row: K = 96 -> shape error */
    lofp_scheme s = preset("ultraquant");
    float y[96] = { 0 };
    qres q = run_q(&s, LOFP_DTYPE_F32, y, 1, 96);
    CHECK(q.st == LOFP_ERR_SHAPE);
    free_q(&q);
}

/* ------------------------------------------------------------------------------------------ */
/* shapes, padding, bad input                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void test_odd_shapes(void)
{
    /* rows = 3, K = 48 NVFP4: block (r, b) = v * 2^(r-b), v below (bmax 6).
     * one level: bs = 2^(r-b) -> UE4M3 0x38 + 8 (r-b); e = v.
     * two level: amax = 6 * 4 = 24 -> global = fl(fl(1/24) * 2688) = fl(1/3) * 2688 / 8 = 112
     * (896/8, exact as for amax 3); bs = 6*112*2^(r-b)/6 = 112 * 2^(r-b) = 1.75 * 2^(6+r-b) ->
     * 0x6E + 8 (r-b); e = v. Both: codes = RNE codes of v, dequant = code_value * 2^(r-b). */
    static const float v[16] = { 6.0f, 0.75f, -1.75f, 3.5f, 0.25f, 1.0f, -0.0f, 5.0f,
                                 -6.0f, 2.5f, -0.5f, 1.5f, 0.0f, -3.0f, 4.0f, 1.25f };
    static const uint8_t vc[16] = { 7, 2, 0xC, 6, 0, 2, 0x8, 6, 0xF, 4, 0x9, 3, 0, 0xD, 6, 2 };
    float x[3 * 48];
    for (int r = 0; r < 3; r++)
        for (int b = 0; b < 3; b++)
            for (int i = 0; i < 16; i++) x[r * 48 + b * 16 + i] = ldexpf(v[i], r - b);
    for (int two = 0; two < 2; two++) {
        lofp_scheme s = preset("nvfp4");
        s.two_level = two;
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 3, 48);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.cb, 72);
        CHECK_EQ_U(q.sb, 9);
        if (two) CHECK(q.global == 112.0f);
        float *d = run_dq(&s, &q, 3, 48);
        for (int r = 0; r < 3; r++)
            for (int b = 0; b < 3; b++) {
                unsigned want = (unsigned)((two ? 0x6E : 0x38) + 8 * (r - b));
                CHECKF(q.scales[r * 3 + b] == want, "nvfp4 3x48 (two=%d) scale[%d][%d] = 0x%02X, expected 0x%02X",
                       two, r, b, q.scales[r * 3 + b], want);
                expect_codes("nvfp4 3x48", &s, q.codes, (size_t)(r * 48 + b * 16), vc, 16);
                for (int i = 0; d && i < 16; i++)
                    expect_f32("nvfp4 3x48 dequant", (size_t)(r * 48 + b * 16 + i), d[r * 48 + b * 16 + i],
                               ldexpf(E2M1[vc[i]], r - b));
            }
        free(d);
        free_q(&q);
    }

    /* rows = 3, K = 96 MXFP6-E3M2, FLOOR: block (r, b) = w * 2^(r-b), amax 24 * 2^(r-b) ->
     * floor(log2) = 4 + r - b -> X = 2^(r-b) -> byte 127 + r - b. Codes of w: 24 = 1.5*16 ->
     * 0x1E; 4.5 tie -> 4 (0x14); -5.5 tie -> -6 (0x36); 1 -> 0x0C; -0.0 -> 0x20; 0.03125 tie -> 0. */
    static const float w[6] = { 24.0f, 4.5f, -5.5f, 1.0f, -0.0f, 0.03125f };
    static const uint8_t wc[6] = { 0x1E, 0x14, 0x36, 0x0C, 0x20, 0x00 };
    static const float wv[6] = { 24.0f, 4.0f, -6.0f, 1.0f, -0.0f, 0.0f };
    float y[3 * 96] = { 0 };
    for (int r = 0; r < 3; r++)
        for (int b = 0; b < 3; b++)
            for (int i = 0; i < 6; i++) y[r * 96 + b * 32 + i] = ldexpf(w[i], r - b);
    lofp_scheme s = preset("mxfp6-e3m2");
    qres q = run_q(&s, LOFP_DTYPE_F32, y, 3, 96);
    CHECK_OK(q.st);
    CHECK_EQ_U(q.cb, 288);
    CHECK_EQ_U(q.sb, 9);
    float *d = run_dq(&s, &q, 3, 96);
    for (int r = 0; r < 3; r++)
        for (int b = 0; b < 3; b++) {
            CHECK_EQ_U(q.scales[r * 3 + b], 127 + r - b);
            expect_codes("mxfp6-e3m2 3x96", &s, q.codes, (size_t)(r * 96 + b * 32), wc, 6);
            expect_zero_codes("mxfp6-e3m2 3x96", &s, q.codes, (size_t)(r * 96 + b * 32 + 6), 26);
            for (int i = 0; d && i < 6; i++)
                expect_f32("mxfp6-e3m2 3x96 dequant", (size_t)(r * 96 + b * 32 + i), d[r * 96 + b * 32 + i],
                           ldexpf(wv[i], r - b));
        }
    free(d);
    free_q(&q);
}

static void test_padding(void)
{
    const float sentinel = 12345.0f;
    /* NVFP4 (two level), rows 3, K = 40 -> padded 48 (3 blocks, 24 code bytes per row). Every row:
     * x[0] = 6, x[32] = 1.5, x[39] = -0.375. amax 6 -> global 448. Block 0: 0x7E, code 7.
     * Block 1 zero -> 0x00. Block 2 (8 real values + 8 pad zeros): g = 672, -168 -> bs = 112
     * (0x6E) -> e = 6 (7), -1.5 (0xB). Padded codes 40..47 are 0. */
    {
        float x[3 * 40] = { 0 };
        for (int r = 0; r < 3; r++) { x[r * 40] = 6.0f; x[r * 40 + 32] = 1.5f; x[r * 40 + 39] = -0.375f; }
        lofp_scheme s = preset("nvfp4");
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 3, 40);
        CHECK(q.st == LOFP_ERR_SHAPE);
        free_q(&q);
        CHECK_EQ_U(lofp_padded_k(&s, 40), 0);
        CHECK_EQ_U(lofp_codes_bytes(&s, 3, 40), 0);
        s.pad = 1;
        CHECK_EQ_U(lofp_padded_k(&s, 40), 48);
        q = run_q(&s, LOFP_DTYPE_F32, x, 3, 40);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.cb, 72);
        CHECK_EQ_U(q.sb, 9);
        CHECK_EQ_U(q.rep.logical_k, 40);
        CHECK_EQ_U(q.rep.padded_k, 48);
        CHECK_EQ_U(f2u(q.global), 0x43E00000u);
        for (int r = 0; r < 3; r++) {
            CHECK_EQ_U(q.scales[r * 3 + 0], 0x7E);
            CHECK_EQ_U(q.scales[r * 3 + 1], 0x00);
            CHECK_EQ_U(q.scales[r * 3 + 2], 0x6E);
            CHECK_EQ_U(code_at(&s, q.codes, (size_t)r * 48 + 0), 7);
            CHECK_EQ_U(code_at(&s, q.codes, (size_t)r * 48 + 32), 7);
            CHECK_EQ_U(code_at(&s, q.codes, (size_t)r * 48 + 39), 0xB);
            expect_zero_codes("nvfp4 pad tail", &s, q.codes, (size_t)r * 48 + 40, 8);
        }
        float out[3 * 40 + 8];
        for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) out[i] = sentinel;
        CHECK_OK(DQ(&s, q.codes, q.scales, q.global, 3, 40, LOFP_DTYPE_F32, out));
        for (int r = 0; r < 3; r++) {
            CHECK(out[r * 40] == 6.0f);
            CHECK(out[r * 40 + 32] == 1.5f);      /* 6 * 112 / 448 */
            CHECK(out[r * 40 + 39] == -0.375f);   /* -1.5 * 112 / 448 */
            CHECK(out[r * 40 + 38] == 0.0f);
        }
        for (int i = 0; i < 8; i++) CHECK(out[3 * 40 + i] == sentinel);
        free_q(&q);
    }
    /* MXFP4, rows 3, K = 40 -> padded 64 (32 code bytes, 2 scales per row). x[0] = 6 -> 0x7F.
     * Partial block (cols 32..39 real): row r has x[32] = 0.75 (r+1)... concretely
     * r=0: 0.75 -> floor(log2) -1 -> X 2^-3 (0x7C): 6 (7); x[39] = -0.25 -> -2 (0xC).
     * r=1: 1.5 -> X 2^-2 (0x7D): 6 (7); -0.25 -> -1 (0xA).
     * r=2: 2.25 -> X 2^-1 (0x7E): 4.5 -> 4 (6); -0.25 -> -0.5 (0x9). Padded codes 40..63 = 0. */
    {
        float x[3 * 40] = { 0 };
        static const float a[3] = { 0.75f, 1.5f, 2.25f };
        static const uint8_t sb[3] = { 0x7C, 0x7D, 0x7E }, ca[3] = { 7, 7, 6 }, cn[3] = { 0xC, 0xA, 0x9 };
        for (int r = 0; r < 3; r++) { x[r * 40] = 6.0f; x[r * 40 + 32] = a[r]; x[r * 40 + 39] = -0.25f; }
        lofp_scheme s = preset("mxfp4");
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 3, 40);
        CHECK(q.st == LOFP_ERR_SHAPE);
        free_q(&q);
        s.pad = 1;
        q = run_q(&s, LOFP_DTYPE_F32, x, 3, 40);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.cb, 96);
        CHECK_EQ_U(q.sb, 6);
        CHECK_EQ_U(q.rep.padded_k, 64);
        for (int r = 0; r < 3; r++) {
            CHECK_EQ_U(q.scales[r * 2], 0x7F);
            CHECK_EQ_U(q.scales[r * 2 + 1], sb[r]);
            CHECK_EQ_U(code_at(&s, q.codes, (size_t)r * 64 + 32), ca[r]);
            CHECK_EQ_U(code_at(&s, q.codes, (size_t)r * 64 + 39), cn[r]);
            expect_zero_codes("mxfp4 pad tail", &s, q.codes, (size_t)r * 64 + 40, 24);
        }
        float out[3 * 40 + 8];
        for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) out[i] = sentinel;
        CHECK_OK(DQ(&s, q.codes, q.scales, 1.0f, 3, 40, LOFP_DTYPE_F32, out));
        CHECK(out[0] == 6.0f && out[32] == 0.75f && out[39] == -0.25f);
        CHECK(out[40 + 32] == 1.5f && out[40 + 39] == -0.25f);
        CHECK(out[80 + 32] == 2.0f && out[80 + 39] == -0.25f);
        for (int i = 0; i < 8; i++) CHECK(out[3 * 40 + i] == sentinel);
        free_q(&q);
    }
    /* UltraQuant unrotated, rows 1, K = 40 -> padded 64: group 0 zero (byte 0); group 1 has the
     * 8 real values x[32] = 32, x[33] = -3 -> byte 129 (as above), codes 7, 0xA; pad codes 0. */
    {
        float x[40] = { 0 };
        x[32] = 32.0f;
        x[33] = -3.0f;
        lofp_scheme s = preset("ultraquant");
        s.rotate = 0;
        s.pad = 1;
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 40);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.cb, 32);
        CHECK_EQ_U(q.sb, 2);
        CHECK_EQ_U(q.scales[0], 0);
        CHECK_EQ_U(q.scales[1], 129);
        CHECK_EQ_U(code_at(&s, q.codes, 32), 7);
        CHECK_EQ_U(code_at(&s, q.codes, 33), 0xA);
        expect_zero_codes("uq pad", &s, q.codes, 34, 30);
        float out[48];
        for (int i = 0; i < 48; i++) out[i] = sentinel;
        CHECK_OK(DQ(&s, q.codes, q.scales, 1.0f, 1, 40, LOFP_DTYPE_F32, out));
        CHECK(out[32] == 24.0f && out[33] == -4.0f && out[0] == 0.0f);
        for (int i = 40; i < 48; i++) CHECK(out[i] == sentinel);
        free_q(&q);
    }
    /* shape errors without pad: UltraQuant K = 48, dequantize with a bad K too */
    {
        lofp_scheme s = preset("ultraquant");
        s.rotate = 0;
        float x[48] = { 0 };
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 48);
        CHECK(q.st == LOFP_ERR_SHAPE);
        free_q(&q);
        uint8_t c[32] = { 0 }, sc[2] = { 0 };
        float out[48];
        CHECK(DQ(&s, c, sc, 1.0f, 1, 48, LOFP_DTYPE_F32, out) == LOFP_ERR_SHAPE);
        lofp_scheme n = preset("nvfp4");
        CHECK(DQ(&n, c, sc, 1.0f, 1, 40, LOFP_DTYPE_F32, out) == LOFP_ERR_SHAPE);
    }
}

static void test_nonfinite(void)
{
    /* rows 3, K = 64 (2 blocks of 32 per row, and 4 NVFP4 blocks). NaN at (1, 5) = flat 69, +Inf
     * at (2, 40) = flat 168 and -Inf at (2, 45) = flat 173, in the same block: blocks 2 and 5 of
     * the 6 (row-major). Every block holds finite values up to 3 otherwise. */
    float x[3 * 64];
    for (int i = 0; i < 3 * 64; i++) x[i] = (float)((i % 7) - 3) * 0.5f * ((i % 32) == 0 ? 2.0f : 1.0f);
    for (int r = 0; r < 3; r++) for (int b = 0; b < 2; b++) x[r * 64 + b * 32 + 1] = 3.0f;
    float clean[3 * 64];
    memcpy(clean, x, sizeof x);
    x[69] = NAN;
    x[168] = INFINITY;
    x[173] = -INFINITY;
    static const char *const mx[] = { "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3",
                                      "mxfp8-e5m2", "mxint8", "ultraquant", "nvfp4" };
    for (size_t p = 0; p < sizeof mx / sizeof mx[0]; p++) {
        lofp_scheme s = preset(mx[p]);
        if (s.id == LOFP_SCHEME_ULTRAQUANT) s.rotate = 0;
        qres q = run_q(&s, LOFP_DTYPE_F32, x, 3, 64);
        CHECKF(q.st == LOFP_ERR_NONFINITE, "%s: %s", mx[p], lofp_status_name(q.st));
        CHECKF(q.rep.first_bad_index == 69, "%s: first_bad_index %zu", mx[p], q.rep.first_bad_index);
        free_q(&q);
        /* one-level NVFP4 goes through the same check */
        if (s.id == LOFP_SCHEME_NVFP4) {
            s.two_level = 0;
            q = run_q(&s, LOFP_DTYPE_F32, x, 3, 64);
            CHECK(q.st == LOFP_ERR_NONFINITE && q.rep.first_bad_index == 69);
            free_q(&q);
            s.two_level = 1;
        }
        s.propagate_nonfinite = 1;
        q = run_q(&s, LOFP_DTYPE_F32, x, 3, 64);
        if (s.id == LOFP_SCHEME_NVFP4) {
            /* NVFP4 has no propagation rule: still an error, both levels */
            CHECKF(q.st == LOFP_ERR_NONFINITE, "nvfp4 propagate: %s", lofp_status_name(q.st));
            CHECK_EQ_U(q.rep.first_bad_index, 69);
            free_q(&q);
            s.two_level = 0;
            q = run_q(&s, LOFP_DTYPE_F32, x, 3, 64);
            CHECK(q.st == LOFP_ERR_NONFINITE && q.rep.first_bad_index == 69);
            free_q(&q);
            continue;
        }
        CHECKF(q.st == LOFP_OK, "%s propagate: %s", mx[p], lofp_status_name(q.st));
        CHECKF(q.rep.nonfinite_blocks == 2, "%s propagate: nonfinite_blocks %zu", mx[p], q.rep.nonfinite_blocks);
        qres c = run_q(&s, LOFP_DTYPE_F32, clean, 3, 64);
        CHECK_OK(c.st);
        CHECK_EQ_U(c.rep.nonfinite_blocks, 0);
        float *d = run_dq(&s, &q, 3, 64);
        float *dc = run_dq(&s, &c, 3, 64);
        const uint8_t bad = s.id == LOFP_SCHEME_ULTRAQUANT ? 0x00 : 0xFF;
        for (int blk = 0; blk < 6; blk++) {
            int is_bad = blk == 2 || blk == 5; /* (1, 0) and (2, 1) */
            if (is_bad) CHECKF(q.scales[blk] == bad, "%s: bad block %d scale 0x%02X", mx[p], blk, q.scales[blk]);
            else CHECKF(q.scales[blk] == c.scales[blk], "%s: good block %d scale changed", mx[p], blk);
            for (int i = 0; d && dc && i < 32; i++) {
                float got = d[blk * 32 + i];
                if (!is_bad) expect_f32(mx[p], (size_t)(blk * 32 + i), got, dc[blk * 32 + i]);
                else if (s.id == LOFP_SCHEME_ULTRAQUANT) {
                    CHECKF(got == 0.0f, "%s: zero group [%d] = %g", mx[p], blk * 32 + i, (double)got);
                    CHECK_EQ_U(code_at(&s, q.codes, (size_t)(blk * 32 + i)), 0);
                } else CHECKF(isnan(got), "%s: NaN block [%d] = %g", mx[p], blk * 32 + i, (double)got);
            }
        }
        free(d);
        free(dc);
        free_q(&c);
        free_q(&q);
    }
    /* first index 0, and bf16 input: NaN at flat index 33 of a bf16 tensor */
    {
        lofp_scheme s = preset("mxfp8-e4m3");
        float y[64] = { NAN };
        qres q = run_q(&s, LOFP_DTYPE_F32, y, 2, 32);
        CHECK(q.st == LOFP_ERR_NONFINITE && q.rep.first_bad_index == 0);
        free_q(&q);
        uint16_t h[64] = { 0 };
        h[33] = 0x7FC0; /* bf16 NaN */
        h[40] = 0x7F80; /* bf16 Inf */
        q = run_q(&s, LOFP_DTYPE_BF16, h, 2, 32);
        CHECK(q.st == LOFP_ERR_NONFINITE && q.rep.first_bad_index == 33);
        free_q(&q);
        uint16_t f[64] = { 0 };
        f[50] = 0xFC00; /* fp16 -Inf */
        q = run_q(&s, LOFP_DTYPE_F16, f, 2, 32);
        CHECK(q.st == LOFP_ERR_NONFINITE && q.rep.first_bad_index == 50);
        free_q(&q);
    }
    /* rotated UltraQuant: the butterfly spreads a NaN over its whole row, so every group of that
     * row becomes a zero group (2 of them at D = 64); the other row is untouched. */
    {
        lofp_scheme s = preset("ultraquant");
        s.propagate_nonfinite = 1;
        float y[128];
        for (int i = 0; i < 128; i++) y[i] = (float)(i % 5) - 2.0f;
        y[10] = NAN;
        qres q = run_q(&s, LOFP_DTYPE_F32, y, 2, 64);
        CHECK_OK(q.st);
        CHECK_EQ_U(q.rep.nonfinite_blocks, 2);
        CHECK_EQ_U(q.scales[0], 0);
        CHECK_EQ_U(q.scales[1], 0);
        CHECK(q.scales[2] != 0 && q.scales[3] != 0);
        expect_zero_codes("uq rotated nan row", &s, q.codes, 0, 64);
        free_q(&q);
    }
}

static void test_invalid(void)
{
    float x[128] = { 1.0f };
    uint8_t c[128] = { 0 }, sc[16] = { 0 };
    float g;
    lofp_scheme s = preset("mxfp4");
    s.block = 48;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    CHECK(Q(&s, LOFP_DTYPE_F32, x, 1, 96, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    s.block = 16;
    CHECK(Q(&s, LOFP_DTYPE_F32, x, 1, 96, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    s.block = 0;
    CHECK(Q(&s, LOFP_DTYPE_F32, x, 1, 96, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    s = preset("mxfp4");
    s.scale_rule = LOFP_SCALE_UE4M3;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    s = preset("nvfp4");
    s.block = 32;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    CHECK(Q(&s, LOFP_DTYPE_F32, x, 1, 64, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(DQ(&s, c, sc, 1.0f, 1, 64, LOFP_DTYPE_F32, x) == LOFP_ERR_INVALID_ARG);
    s = preset("ultraquant");
    s.block = 64;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    s = preset("ultraquant");
    s.c = 0.0f;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    s = preset("mxfp8-e4m3");
    s.elem = LOFP_ELEM_E2M1; /* element type does not belong to the preset */
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    s = preset("mxfp4");
    CHECK(Q(&s, LOFP_DTYPE_F32, NULL, 1, 32, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(Q(&s, LOFP_DTYPE_F32, x, 0, 32, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(Q(&s, (lofp_dtype)99, x, 1, 32, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(Q(NULL, LOFP_DTYPE_F32, x, 1, 32, c, sc, &g, NULL) == LOFP_ERR_INVALID_ARG);
    /* NVFP4 with a caller-supplied multiplier that is not a positive finite number */
    s = preset("nvfp4");
    CHECK(QG(&s, LOFP_DTYPE_F32, x, 1, 16, 0.0f, c, sc, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(QG(&s, LOFP_DTYPE_F32, x, 1, 16, NAN, c, sc, NULL) == LOFP_ERR_INVALID_ARG);
}

static void test_size_overflow(void)
{
    static const char *const names[] = { "nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3",
                                         "mxfp8-e5m2", "mxint8", "tilelang-mxfp8", "ultraquant" };
    const size_t rows = SIZE_MAX / 2;
    uint8_t c[64] = { 0 }, sc[8] = { 0 };
    float x[8] = { 0 }, g = 0.0f, out[8];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        lofp_scheme s = preset(names[i]);
        const size_t k = s.block == 128 ? 128 : 64; /* a multiple of the block, so no shape error */
        /* rows * k overflows: the helpers return 0 for the codes; the scales (rows * k/block)
         * may or may not fit, and must then be the exact product */
        CHECKF(lofp_codes_bytes(&s, rows, k) == 0, "%s codes_bytes", names[i]);
        size_t sb = lofp_scales_bytes(&s, rows, k), want;
        if (__builtin_mul_overflow(rows, k / s.block, &want)) want = 0;
        CHECKF(sb == want, "%s scales_bytes %zu, expected %zu", names[i], sb, want);
        lofp_quant_report rep;
        lofp_status st = Q(&s, LOFP_DTYPE_F32, x, rows, k, c, sc, &g, &rep);
        CHECKF(st == LOFP_ERR_SIZE_OVERFLOW, "%s quantize -> %s", names[i], lofp_status_name(st));
        st = QG(&s, LOFP_DTYPE_F32, x, rows, k, 1.0f, c, sc, &rep);
        CHECKF(st == LOFP_ERR_SIZE_OVERFLOW, "%s quantize_with_global -> %s", names[i], lofp_status_name(st));
        st = DQ(&s, c, sc, 1.0f, rows, k, LOFP_DTYPE_F32, out);
        CHECKF(st == LOFP_ERR_SIZE_OVERFLOW, "%s dequantize -> %s", names[i], lofp_status_name(st));
        /* padding a K near SIZE_MAX overflows too */
        s.pad = 1;
        CHECK_EQ_U(lofp_padded_k(&s, SIZE_MAX), 0);
        CHECK_EQ_U(lofp_codes_bytes(&s, 1, SIZE_MAX), 0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* bf16 / fp16                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Independent narrowings (nearest by comparing both neighbours in double; ties to even). */
static uint16_t my_bf16(float v)
{
    uint32_t u = f2u(v);
    uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    double dv = fabs((double)v), dl = fabs((double)u2f(lo));
    double dh = ((hi & 0x7F800000u) == 0x7F800000u) ? 0x1p128 : fabs((double)u2f(hi));
    double el = dv - dl, eh = dh - dv;
    if (el < eh) return (uint16_t)(lo >> 16);
    if (eh < el) return (uint16_t)(hi >> 16);
    return (uint16_t)(((lo >> 16) & 1) ? hi >> 16 : lo >> 16);
}

static uint16_t my_fp16(float v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs((double)v);
    if (a == 0.0) return sign;
    if (a >= 65520.0) return sign | 0x7C00;
    int e2;
    frexp(a, &e2);
    int ex = e2 - 1; /* a in [2^ex, 2^(ex+1)) */
    if (ex < -14) {
        double q = nearbyint(ldexp(a, 24)); /* units of 2^-24; 1024 carries into the normal range */
        return sign | (uint16_t)q;
    }
    double q = nearbyint(ldexp(a, 10 - ex)); /* [1024, 2048] */
    if (q == 2048.0) { q = 1024.0; ex++; }
    if (ex > 15) return sign | 0x7C00;
    return sign | (uint16_t)(((ex + 15) << 10) | ((int)q - 1024));
}

static float my_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }
static float my_fp16_to_f32(uint16_t h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

static void test_half_inputs(void)
{
    static const char *const names[] = { "nvfp4", "nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2",
                                         "mxfp8-e4m3", "mxfp8-e5m2", "mxint8", "tilelang-mxfp8",
                                         "ultraquant", "ultraquant" };
    enum { R = 4, K = 128, N = R * K };
    uint16_t hb[N], hf[N];
    float xb[N], xf[N];
    tu_rng rng = { 0x5EED5EEDull };
    for (int i = 0; i < N; i++) {
        /* spread over several binades so blocks get different scales; a few exact zeros */
        double v = tu_normal(&rng) * ldexp(1.0, (int)(tu_next(&rng) % 9) - 4);
        if (i % 37 == 0) v = 0.0;
        hb[i] = my_bf16((float)v);
        hf[i] = my_fp16((float)v);
        xb[i] = my_bf16_to_f32(hb[i]);
        xf[i] = my_fp16_to_f32(hf[i]);
    }
    for (size_t p = 0; p < sizeof names / sizeof names[0]; p++) {
        lofp_scheme s = preset(names[p]);
        if (p == 1) s.two_level = 0;
        if (p == 10) s.rotate = 0;
        for (int h = 0; h < 2; h++) {
            const void *in16 = h ? (const void *)hf : (const void *)hb;
            const float *in32 = h ? xf : xb;
            lofp_dtype dt = h ? LOFP_DTYPE_F16 : LOFP_DTYPE_BF16;
            qres a = run_q(&s, dt, in16, R, K);
            qres b = run_q(&s, LOFP_DTYPE_F32, in32, R, K);
            CHECK_OK(a.st);
            CHECK_OK(b.st);
            CHECKF(a.cb == b.cb && memcmp(a.codes, b.codes, a.cb) == 0, "%s %s codes differ from fp32 widening",
                   names[p], h ? "fp16" : "bf16");
            CHECKF(a.sb == b.sb && memcmp(a.scales, b.scales, a.sb) == 0, "%s %s scales differ", names[p],
                   h ? "fp16" : "bf16");
            CHECKF(f2u(a.global) == f2u(b.global), "%s %s global differs", names[p], h ? "fp16" : "bf16");
            /* dequant to bf16 / fp16 = RNE narrowing of the fp32 dequant */
            float *d = run_dq(&s, &b, R, K);
            uint16_t ob[N], of[N];
            CHECK_OK(DQ(&s, b.codes, b.scales, b.global, R, K, LOFP_DTYPE_BF16, ob));
            CHECK_OK(DQ(&s, b.codes, b.scales, b.global, R, K, LOFP_DTYPE_F16, of));
            int bad_b = 0, bad_f = 0;
            for (int i = 0; d && i < N; i++) {
                bad_b += ob[i] != my_bf16(d[i]);
                bad_f += of[i] != my_fp16(d[i]);
            }
            CHECKF(bad_b == 0, "%s: %d bf16 outputs are not the RNE narrowing", names[p], bad_b);
            CHECKF(bad_f == 0, "%s: %d fp16 outputs are not the RNE narrowing", names[p], bad_f);
            free(d);
            free_q(&a);
            free_q(&b);
        }
    }
    /* Narrowing at exact ties, where truncation or round-half-up would differ from RNE. MX and
     * UltraQuant values have too few significant bits to tie, so craft NVFP4 dequant inputs:
     * codes 1.0 (0x22 per byte), scale 0x38 (1.0), global g chosen (exact rational search) so that
     * fl(1/g) is the tie T:
     *   g = 0x3F7F00FF -> T = 1 + 2^-8   -> bf16 tie -> 0x3F80 (even);  fp16 0x3C04
     *   g = 0x3F7D08E5 -> T = 1 + 3 2^-8 -> bf16 tie -> 0x3F82 (even);  fp16 0x3C0C
     *   g = 0x3F7FE003 -> T = 1 + 2^-11  -> fp16 tie -> 0x3C00 (even);  bf16 0x3F80
     *   g = 0x3F7FA023 -> T = 1 + 3 2^-11 -> fp16 tie -> 0x3C02 (even); bf16 0x3F80 */
    {
        static const struct { uint32_t g; float t; uint16_t b, h; } ties[] = {
            { 0x3F7F00FFu, 1.0f + 0x1p-8f, 0x3F80, 0x3C04 },
            { 0x3F7D08E5u, 1.0f + 3 * 0x1p-8f, 0x3F82, 0x3C0C },
            { 0x3F7FE003u, 1.0f + 0x1p-11f, 0x3F80, 0x3C00 },
            { 0x3F7FA023u, 1.0f + 3 * 0x1p-11f, 0x3F80, 0x3C02 },
        };
        lofp_scheme s = preset("nvfp4");
        uint8_t codes[8], sc[1] = { 0x38 };
        memset(codes, 0x22, sizeof codes);
        for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
            float o32[16];
            uint16_t ob[16], of[16];
            float g = u2f(ties[i].g);
            CHECK_OK(DQ(&s, codes, sc, g, 1, 16, LOFP_DTYPE_F32, o32));
            CHECK_OK(DQ(&s, codes, sc, g, 1, 16, LOFP_DTYPE_BF16, ob));
            CHECK_OK(DQ(&s, codes, sc, g, 1, 16, LOFP_DTYPE_F16, of));
            for (int j = 0; j < 16; j++) {
                CHECKF(o32[j] == ties[i].t, "tie %zu: fp32 %.9g", i, (double)o32[j]);
                CHECKF(ob[j] == ties[i].b, "tie %zu: bf16 0x%04X, expected 0x%04X", i, ob[j], ties[i].b);
                CHECKF(of[j] == ties[i].h, "tie %zu: fp16 0x%04X, expected 0x%04X", i, of[j], ties[i].h);
            }
        }
    }
    /* the independent narrowing helpers, on known values */
    CHECK_EQ_U(my_bf16(u2f(0x3F808000u)), 0x3F80); /* 1 + 2^-8: tie, even stays */
    CHECK_EQ_U(my_bf16(u2f(0x3F818000u)), 0x3F82); /* 1 + 3*2^-8: tie, odd rounds up */
    CHECK_EQ_U(my_fp16(1.0f + 0x1p-11f), 0x3C00);  /* tie to even */
    CHECK_EQ_U(my_fp16(1.0f + 0x1p-10f + 0x1p-11f), 0x3C02);
    CHECK_EQ_U(my_fp16(0x1p-25f), 0x0000);         /* half the smallest subnormal: tie to 0 */
    CHECK_EQ_U(my_fp16(65504.0f), 0x7BFF);
    CHECK_EQ_U(my_fp16(65520.0f), 0x7C00);
}

/* ------------------------------------------------------------------------------------------ */
/* stochastic rounding                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Each block: element 0 = top (sets the scale so that X = 1 or bs = 1), the rest = v,
 * strictly between the grid points lo and hi. Checks: every code is lo or hi, the same seed gives
 * the same codes, another seed changes many, and the mean of the dequantized v's is v to 0.5 %. */
static void sr_case(const char *name, int one_level, float top, float v, float lo, float hi)
{
    enum { R = 3125, K = 32, N = R * K }; /* 100 000 elements */
    lofp_scheme s = preset(name);
    const size_t B = s.block; /* 16 for NVFP4, 32 for MX: one `top` per block */
    float *x = malloc(N * sizeof(float));
    for (size_t i = 0; i < (size_t)N; i++) x[i] = (i % B == 0) ? top : v;
    if (one_level) s.two_level = 0;
    s.rounding = LOFP_STOCHASTIC;
    s.seed = 1234;
    qres a = run_q(&s, LOFP_DTYPE_F32, x, R, K);
    qres b = run_q(&s, LOFP_DTYPE_F32, x, R, K);
    s.seed = 1235;
    qres c = run_q(&s, LOFP_DTYPE_F32, x, R, K);
    CHECK_OK(a.st);
    CHECK_OK(b.st);
    CHECK_OK(c.st);
    CHECKF(memcmp(a.codes, b.codes, a.cb) == 0 && memcmp(a.scales, b.scales, a.sb) == 0,
           "%s: same seed, different output", name);
    size_t diff = 0;
    for (size_t i = 0; i < (size_t)N; i++) diff += code_at(&s, a.codes, i) != code_at(&s, c.codes, i);
    /* about 2 p (1 - p) of the ~95 000 rounded elements differ (p = 0.2..0.6 here): > 30 000 */
    CHECKF(diff > 20000, "%s: another seed changed only %zu codes", name, diff);
    s.seed = 1234;
    float *d = run_dq(&s, &a, R, K);
    double sum = 0.0;
    size_t n = 0, n_hi = 0, off_grid = 0;
    for (size_t i = 0; d && i < (size_t)N; i++) {
        if (i % B == 0) { off_grid += d[i] != top; continue; }
        sum += d[i];
        n++;
        n_hi += d[i] == hi;
        off_grid += !(d[i] == lo || d[i] == hi);
    }
    CHECKF(off_grid == 0, "%s: %zu values are not a neighbour of the input", name, off_grid);
    double mean = n ? sum / (double)n : 0.0;
    double p_want = ((double)v - lo) / (hi - lo);
    CHECKF(fabs(mean - v) <= 0.005 * fabs(v), "%s: mean %.6f, expected %.6f", name, mean, (double)v);
    CHECKF(n && fabs((double)n_hi / (double)n - p_want) < 0.01, "%s: P(up) %.4f, expected %.4f", name,
           n ? (double)n_hi / (double)n : 0.0, p_want);
    free(d);
    free(x);
    free_q(&a);
    free_q(&b);
    free_q(&c);
}

static void test_stochastic(void)
{
    /* mxfp4: top 6 -> X = 1; 2.6f lies between 2 and 3 (P(up) = 0.6) */
    sr_case("mxfp4", 0, 6.0f, 2.6f, 2.0f, 3.0f);
    /* nvfp4 one level: bmax 6 -> bs = 1 -> e = x: 4.4 between 4 and 6 (P(up) = 0.2) */
    sr_case("nvfp4", 1, 6.0f, 4.4f, 4.0f, 6.0f);
    /* mxfp8-e4m3: top 256 -> X = 1; 4.1 between 4 and 4.5 (P(up) = 0.2) */
    sr_case("mxfp8-e4m3", 0, 256.0f, 4.1f, 4.0f, 4.5f);
    /* mxint8: top 1.5 -> X = 1; 10.25/64 between 10/64 and 11/64 (P(up) = 0.25) */
    sr_case("mxint8", 0, 1.5f, 10.25f / 64, 10.0f / 64, 11.0f / 64);
    /* exact grid values are never moved by stochastic rounding */
    lofp_scheme s = preset("mxfp4");
    s.rounding = LOFP_STOCHASTIC;
    s.seed = 99;
    float x[32] = { 6.0f, 3.0f, -1.5f, 0.5f, -0.0f };
    qres q = run_q(&s, LOFP_DTYPE_F32, x, 1, 32);
    CHECK_OK(q.st);
    static const uint8_t e[5] = { 7, 5, 0xB, 1, 0x8 };
    expect_codes("stochastic exact", &s, q.codes, 0, e, 5);
    free_q(&q);
}

static void run_all(void)
{
    test_presets();
    test_nvfp4_global();
    test_nvfp4_two_level_golden();
    test_nvfp4_one_level_golden();
    test_nvfp4_huge_two_level();
    test_nvfp4_signs_of_zero();
    test_mxfp4_scale_rules();
    test_mx_elements();
    test_mx_granularity();
    test_tilelang();
    test_ultraquant_unrotated();
    test_ultraquant_rotated();
    test_odd_shapes();
    test_padding();
    test_nonfinite();
    test_invalid();
    test_size_overflow();
    test_half_inputs();
    test_stochastic();
}

int main(void)
{
    lofp_kernel_table generic, avx2;
    lofp_kernels_build(0, &generic);
    const uint32_t want = LOFP_CPU_AVX2 | LOFP_CPU_FMA | LOFP_CPU_F16C;
    const int has_avx2 = (lofp_cpu_features() & want) == want;
    if (has_avx2) lofp_kernels_build(want, &avx2);
    const struct { const char *name; const lofp_kernel_table *kt; } variants[] = {
        { "public", NULL },
        { "reference", lofp_kernels_reference() },
        { "generic", &generic },
        { "avx2", has_avx2 ? &avx2 : NULL },
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        if (v > 0 && !variants[v].kt) {
            printf("test_schemes: variant %s not available on this CPU, skipped\n", variants[v].name);
            continue;
        }
        g_kt = variants[v].kt;
        int before = tu_failures;
        run_all();
        if (tu_failures != before)
            fprintf(stderr, "test_schemes: variant %s: %d check(s) failed\n", variants[v].name,
                    tu_failures - before);
        else
            printf("test_schemes: variant %s passed\n", variants[v].name);
    }
    return tu_finish("test_schemes");
}

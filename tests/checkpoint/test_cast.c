/* test_cast.c -- exact casts (lofp/cast.h): MXFP4 -> NVFP4 is lossless on every block that fits
 * and names the others; ModelOpt <-> compressed-tensors <-> lofp per-tensor scales keep every
 * decoded value; MXFP4 <-> GGUF blocks round trip byte for byte; lofp_verify_tensor names the
 * producer of tensors each profile wrote and the mistake in deliberately broken ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/cast.h"
#include "lofp/checkpoint.h"
#include "test_util.h"

static void fill(tu_rng *r, float *x, size_t n, int spread)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)tu_normal(r) * ldexpf(1.0f, spread ? (int)(tu_next(r) % 12) - 6 : 0);
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static void test_mx_to_nv(void)
{
    tu_rng r = { 11 };
    const size_t rows = 24, k = 256, n = rows * k;
    float *x = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    uint8_t *c = malloc(n / 2), *e = malloc(n / 32), *nc = malloc(n / 2), *ns = malloc(n / 16);
    lofp_scheme mx, nv;
    lofp_scheme_preset("mxfp4", &mx);
    lofp_scheme_preset("nvfp4", &nv);
    for (int round = 0; round < 3; round++) {
        fill(&r, x, n, 1);
        for (size_t i = 0; i < 64; i++) x[i] = 0.0f; /* an all-zero block */
        if (round == 1) for (size_t i = 64; i < 96; i++) x[i] *= 1e-9f; /* 30 binades down: does not fit */
        CHECK_OK(lofp_quantize(&mx, LOFP_DTYPE_F32, x, rows, k, c, e, NULL, NULL));
        if (round == 2) e[5] = 0xFF; /* a NaN block */
        lofp_cast_report rep;
        float g = 0;
        CHECK_OK(lofp_cast_mxfp4_to_nvfp4(c, e, rows, k, nc, ns, &g, &rep));
        CHECK_EQ_U(rep.blocks, n / 32);
        CHECK_OK(lofp_dequantize(&mx, c, e, 1.0f, rows, k, LOFP_DTYPE_F32, a));
        CHECK_OK(lofp_dequantize(&nv, nc, ns, g, rows, k, LOFP_DTYPE_F32, b));
        size_t unfit_seen = 0;
        for (size_t blk = 0; blk < n / 32; blk++) {
            int unfit = 0;
            for (size_t i = 0; i < rep.n_first; i++) unfit |= rep.first_unfit[i] == blk;
            if (unfit) { unfit_seen++; continue; }
            CHECKF(same_bits(a + blk * 32, b + blk * 32, 32), "round %d block %zu decodes differently", round, blk);
        }
        if (round == 0) CHECK_EQ_U(rep.unfit_blocks, 0);
        if (round == 1) { CHECK_EQ_U(rep.unfit_blocks, 1); CHECK(rep.n_first == 1 && rep.first_unfit[0] == 2); }
        if (round == 2) { CHECK_EQ_U(rep.unfit_blocks, 1); CHECK(rep.n_first == 1 && rep.first_unfit[0] == 5); }
        CHECK_EQ_U(unfit_seen, rep.unfit_blocks);
        CHECK(memcmp(nc, c, 2 * 16) == 0); /* codes copied */
    }
    free(x); free(a); free(b); free(c); free(e); free(nc); free(ns);
}

static void dq(lofp_profile p, const uint8_t *c, const uint8_t *s, float g, size_t rows, size_t k, float *out)
{
    lofp_scheme sc;
    lofp_scheme_preset("nvfp4", &sc);
    sc.profile = p;
    CHECK_OK(lofp_dequantize(&sc, c, s, g, rows, k, LOFP_DTYPE_F32, out));
}

static void test_global(void)
{
    tu_rng r = { 12 };
    const size_t rows = 8, k = 64, n = rows * k;
    float *x = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4), *c2 = malloc(n * 4);
    uint8_t *c = malloc(n / 2), *s = malloc(n / 16);
    const lofp_profile ps[3] = { LOFP_PROFILE_MODELOPT, LOFP_PROFILE_COMPRESSED_TENSORS, LOFP_PROFILE_LOFP };
    size_t exact = 0, total = 0;
    for (int t = 0; t < 64; t++) {
        fill(&r, x, n, 0);
        float amp = ldexpf(1.0f + (float)tu_uniform(&r), (int)(tu_next(&r) % 40) - 20);
        for (size_t i = 0; i < n; i++) x[i] *= amp;
        for (int f = 0; f < 3; f++) {
            lofp_scheme sc;
            lofp_scheme_preset("nvfp4", &sc);
            sc.profile = ps[f];
            float g;
            CHECK_OK(lofp_quantize(&sc, LOFP_DTYPE_F32, x, rows, k, c, s, &g, NULL));
            dq(ps[f], c, s, g, rows, k, a);
            for (int to = 0; to < 3; to++) {
                if (to == f) continue;
                float g2, g3;
                lofp_cast_report rep;
                CHECK_OK(lofp_cast_nvfp4_global(ps[f], g, ps[to], s, n / 16, &g2, &rep));
                total++;
                if (rep.mismatched_scales) {
                    /* lossy: the differences are single roundings, in as many scale values as reported */
                    dq(ps[to], c, s, g2, rows, k, b);
                    for (size_t j = 0; j < n; j++) {
                        float d = fabsf(a[j] - b[j]), m = fabsf(a[j]);
                        CHECKF(d <= m * 0x1p-22f, "%s -> %s: %g vs %g", lofp_profile_name(ps[f]), lofp_profile_name(ps[to]), a[j], b[j]);
                    }
                    continue;
                }
                exact++;
                dq(ps[to], c, s, g2, rows, k, b);
                CHECKF(same_bits(a, b, n), "%s -> %s changed decoded values", lofp_profile_name(ps[f]), lofp_profile_name(ps[to]));
                /* and back */
                CHECK_OK(lofp_cast_nvfp4_global(ps[to], g2, ps[f], s, n / 16, &g3, &rep));
                CHECK_EQ_U(rep.mismatched_scales, 0);
                dq(ps[f], c, s, g3, rows, k, c2);
                CHECK(same_bits(a, c2, n));
            }
        }
    }
    printf("per-tensor scale casts: %zu of %zu exact (decoded values identical)\n", exact, total);
    CHECK(exact > 0);
    float o;
    CHECK(lofp_cast_nvfp4_global(LOFP_PROFILE_MODELOPT, 0.0f, LOFP_PROFILE_LOFP, s, 1, &o, NULL) == LOFP_ERR_INVALID_ARG);
    free(x); free(a); free(b); free(c2); free(c); free(s);
}

static void test_gguf(void)
{
    tu_rng r = { 13 };
    const size_t rows = 5, k = 96, n = rows * k;
    uint8_t *c = malloc(n / 2), *e = malloc(n / 32), *g = malloc(n / 32 * 17), *c2 = malloc(n / 2), *e2 = malloc(n / 32), *g2 = malloc(n / 32 * 17);
    for (size_t i = 0; i < n / 2; i++) c[i] = (uint8_t)tu_next(&r);
    for (size_t i = 0; i < n / 32; i++) e[i] = (uint8_t)tu_next(&r);
    CHECK_OK(lofp_mxfp4_to_gguf(c, e, rows, k, g));
    CHECK_OK(lofp_gguf_to_mxfp4(g, rows, k, c2, e2));
    CHECK(memcmp(c, c2, n / 2) == 0 && memcmp(e, e2, n / 32) == 0);
    CHECK_OK(lofp_mxfp4_to_gguf(c2, e2, rows, k, g2));
    CHECK(memcmp(g, g2, n / 32 * 17) == 0);
    /* element 0 = +6 (code 7), element 16 = -6 (code 0xF): qs[0] = 0xF7 (ggml's own probe) */
    memset(c, 0, 16);
    c[0] = 0x07;
    c[8] = 0x0F;
    e[0] = 127;
    CHECK_OK(lofp_mxfp4_to_gguf(c, e, 1, 32, g));
    CHECK_EQ_U(g[0], 127);
    CHECK_EQ_U(g[1], 0xF7);
    CHECK(lofp_mxfp4_to_gguf(c, e, 1, 48, g) == LOFP_ERR_SHAPE);
    free(c); free(e); free(g); free(c2); free(e2); free(g2);
}

static void test_verify(void)
{
    tu_rng r = { 14 };
    const size_t rows = 128, k = 256, n = rows * k;
    float *x = malloc(n * 4);
    fill(&r, x, n, 1);
    uint8_t *c = malloc(n), *s = malloc(n / 16), *t = malloc(n), *sw = malloc(n / 16);
    struct { const char *scheme; lofp_profile p; lofp_scale_rule rule; } cs[] = {
        { "nvfp4", LOFP_PROFILE_LOFP, LOFP_SCALE_UE4M3 },
        { "nvfp4", LOFP_PROFILE_MODELOPT, LOFP_SCALE_UE4M3 },
        { "nvfp4", LOFP_PROFILE_COMPRESSED_TENSORS, LOFP_SCALE_UE4M3 },
        { "nvfp4", LOFP_PROFILE_TORCHAO, LOFP_SCALE_UE4M3 },
        { "mxfp4", LOFP_PROFILE_GGML, LOFP_SCALE_FLOOR },
        { "mxfp4", LOFP_PROFILE_MODELOPT, LOFP_SCALE_FLOOR },
        { "mxfp4", LOFP_PROFILE_TORCHAO, LOFP_SCALE_EVEN },
        { "mxfp8-e4m3", LOFP_PROFILE_MODELOPT, LOFP_SCALE_FLOOR },
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        lofp_scheme sc;
        lofp_scheme_preset(cs[i].scheme, &sc);
        sc.profile = cs[i].p;
        if (sc.id != LOFP_SCHEME_NVFP4) sc.scale_rule = cs[i].rule;
        float g = 1.0f;
        CHECK_OK(lofp_quantize(&sc, LOFP_DTYPE_F32, x, rows, k, c, s, &g, NULL));
        size_t cb = lofp_codes_bytes(&sc, rows, k), sb = lofp_scales_bytes(&sc, rows, k);
        const float *gp = sc.id == LOFP_SCHEME_NVFP4 ? &g : NULL;
        const int dec = lofp_profile_decode_direction(cs[i].p);
        lofp_verify_result v;
        lofp_status st = lofp_verify_tensor(sc.id, sc.block, LOFP_DTYPE_F32, x, rows, k, c, s, gp, dec, &v);
        CHECKF(st == LOFP_OK && v.matched && v.code_diff == 0 && v.scale_diff == 0, "%s/%s: %s", cs[i].scheme, lofp_profile_name(cs[i].p), v.summary);
        /* a producer whose bytes another profile also writes on this input is fine; the named one
         * must reproduce it */
        if (v.profile != cs[i].p) printf("  %s by %s: named %s (identical bytes here)\n", cs[i].scheme, lofp_profile_name(cs[i].p), lofp_profile_name(v.profile));
        printf("  %-10s %-18s -> %s\n", cs[i].scheme, lofp_profile_name(cs[i].p), v.summary);
        if (sc.elem != LOFP_ELEM_E2M1) continue;
        /* swapped nibbles */
        for (size_t j = 0; j < cb; j++) t[j] = (uint8_t)((c[j] << 4) | (c[j] >> 4));
        st = lofp_verify_tensor(sc.id, sc.block, LOFP_DTYPE_F32, x, rows, k, t, s, gp, dec, &v);
        CHECKF(v.matched && v.nibbles == LOFP_VERIFY_NIBBLES_SWAPPED && strstr(v.summary, "nibbles swapped"), "%s", v.summary);
        /* swizzled scales stored under a linear name */
        CHECK_OK(lofp_layout_from_linear(s, rows, sb / rows, LOFP_LAYOUT_SWIZZLE_128X4, 0, sw));
        st = lofp_verify_tensor(sc.id, sc.block, LOFP_DTYPE_F32, x, rows, k, c, sw, gp, dec, &v);
        CHECKF(v.matched && v.scale_layout == LOFP_LAYOUT_SWIZZLE_128X4 && strstr(v.summary, "swizzle"), "%s", v.summary);
        /* a shard written 16 rows too low: stored row r holds the original's row r + 16 */
        memcpy(t, c + 16 * (cb / rows), cb - 16 * (cb / rows));
        memcpy(t + cb - 16 * (cb / rows), c, 16 * (cb / rows));
        memcpy(sw, s + 16 * (sb / rows), sb - 16 * (sb / rows));
        memcpy(sw + sb - 16 * (sb / rows), s, 16 * (sb / rows));
        st = lofp_verify_tensor(sc.id, sc.block, LOFP_DTYPE_F32, x, rows, k, t, sw, gp, dec, &v);
        CHECKF(v.row_shift == 16 && strstr(v.summary, "shifted"), "%s", v.summary);
        if (gp) {
            float inv = 1.0f / g;
            st = lofp_verify_tensor(sc.id, sc.block, LOFP_DTYPE_F32, x, rows, k, c, s, &inv, dec, &v);
            CHECKF(v.global_inverted && strstr(v.summary, "inverted"), "%s", v.summary);
        }
        if (i == 0) {
            /* garbage: nothing reproduces it */
            for (size_t j = 0; j < cb; j++) t[j] = (uint8_t)tu_next(&r);
            st = lofp_verify_tensor(sc.id, sc.block, LOFP_DTYPE_F32, x, rows, k, t, s, gp, dec, &v);
            CHECK(st == LOFP_ERR_MISMATCH && !v.matched && strstr(v.summary, "no producer"));
        }
    }
    free(x); free(c); free(s); free(t); free(sw);
}

#define CHECK_EQ_I(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
    CHECKF(a_ == b_, "%s = %lld, expected %lld", #a, a_, b_); } while (0)

/* A shared per-tensor scale (fused tensors) and a tensor cast in row chunks give the same bytes
 * as the whole-tensor cast where the scale agrees, and stay lossless on the blocks that fit. */
static void test_mx_to_nv_with_global(void)
{
    tu_rng r = { 23 };
    const size_t rows = 16, k = 128, n = rows * k;
    float *x = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    uint8_t *c = malloc(n / 2), *e = malloc(n / 32), *n1 = malloc(n / 2), *s1 = malloc(n / 16);
    uint8_t *n2 = malloc(n / 2), *s2 = malloc(n / 16);
    lofp_scheme mx, nv;
    lofp_scheme_preset("mxfp4", &mx);
    lofp_scheme_preset("nvfp4", &nv);
    fill(&r, x, n, 1);
    CHECK_OK(lofp_quantize(&mx, LOFP_DTYPE_F32, x, rows, k, c, e, NULL, NULL));
    int xmax = 0, x0 = 0, x1 = 0;
    CHECK_OK(lofp_cast_mxfp4_max_exponent(c, e, rows, k, &xmax));
    /* the maximum over row chunks is the whole tensor's */
    CHECK_OK(lofp_cast_mxfp4_max_exponent(c, e, rows / 2, k, &x0));
    CHECK_OK(lofp_cast_mxfp4_max_exponent(c + rows / 2 * k / 2, e + rows / 2 * k / 32, rows / 2, k, &x1));
    CHECK_EQ_I(xmax, x0 > x1 ? x0 : x1);
    float g = 0;
    lofp_cast_report rep;
    CHECK_OK(lofp_cast_mxfp4_to_nvfp4(c, e, rows, k, n1, s1, &g, &rep));
    CHECKF(g == ldexpf(1.0f, 8 - xmax), "G %g, largest exponent %d", (double)g, xmax);
    /* the same G in two chunks: the same bytes */
    CHECK_OK(lofp_cast_mxfp4_to_nvfp4_with_global(c, e, rows / 2, k, g, n2, s2, NULL));
    CHECK_OK(lofp_cast_mxfp4_to_nvfp4_with_global(c + rows / 2 * k / 2, e + rows / 2 * k / 32, rows / 2, k, g,
                                                  n2 + rows / 2 * k / 2, s2 + rows / 2 * k / 16, NULL));
    CHECK(memcmp(n1, n2, n / 2) == 0 && memcmp(s1, s2, n / 16) == 0);
    /* a group's smaller G (a sibling's larger exponent): still exact where blocks fit */
    float gs = g / 8;
    CHECK_OK(lofp_cast_mxfp4_to_nvfp4_with_global(c, e, rows, k, gs, n2, s2, &rep));
    CHECK_OK(lofp_dequantize(&mx, c, e, 1.0f, rows, k, LOFP_DTYPE_F32, a));
    CHECK_OK(lofp_dequantize(&nv, n2, s2, gs, rows, k, LOFP_DTYPE_F32, b));
    for (size_t blk = 0; blk < n / 32; blk++) {
        int unfit = 0;
        for (size_t i = 0; i < rep.n_first; i++) unfit |= rep.first_unfit[i] == blk;
        if (!unfit && rep.unfit_blocks <= rep.n_first)
            CHECKF(same_bits(a + blk * 32, b + blk * 32, 32), "block %zu decodes differently under G/8", blk);
    }
    /* G must be a power of two in fp32's normal range */
    CHECK_EQ_I(lofp_cast_mxfp4_to_nvfp4_with_global(c, e, rows, k, 3.0f, n2, s2, NULL), LOFP_ERR_INVALID_ARG);
    CHECK_EQ_I(lofp_cast_mxfp4_to_nvfp4_with_global(c, e, rows, k, 0.0f, n2, s2, NULL), LOFP_ERR_INVALID_ARG);
    CHECK_EQ_I(lofp_cast_mxfp4_to_nvfp4_with_global(c, e, rows, k, ldexpf(1.0f, -130), n2, s2, NULL), LOFP_ERR_INVALID_ARG);
    CHECK_EQ_I(lofp_cast_mxfp4_to_nvfp4_with_global(c, e, rows, 48, g, n2, s2, NULL), LOFP_ERR_SHAPE);
    /* all codes zero: no exponent */
    memset(n2, 0, n / 2);
    CHECK_OK(lofp_cast_mxfp4_max_exponent(n2, e, rows, k, &xmax));
    CHECK_EQ_I(xmax, INT32_MIN);
    free(x); free(a); free(b); free(c); free(e); free(n1); free(s1); free(n2); free(s2);
}

int main(void)
{
    test_mx_to_nv();
    test_mx_to_nv_with_global();
    test_global();
    test_gguf();
    test_verify();
    return tu_finish("test_cast");
}

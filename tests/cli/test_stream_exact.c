/* test_stream_exact.c -- the library calls the streaming CLI relies on:
 *   - lofp_quantize_rows over chunks of rows gives exactly lofp_quantize's bytes on the whole
 *     tensor (every preset, stochastic rounding included, odd chunk sizes, F32/BF16/F16 input),
 *     and the NVFP4 multiplier is the minimum of the chunks' lofp_nvfp4_global_scale;
 *   - non-finite indices count from the whole tensor's row 0;
 *   - finite input whose UltraQuant rotation overflows is LOFP_ERR_NONFINITE (not silently zero groups), also in
 *     the KV store; with propagation it is zero groups as before;
 *   - lofp_dequantize rejects an NVFP4 global scale that is 0, negative or not finite. */
#include "test_util.h"

#include "lofp/kvcache.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *presets[] = {"nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3",
                                "mxfp8-e5m2", "mxint8", "tilelang-mxfp8", "ultraquant"};

static void test_chunks_exact(void)
{
    const size_t rows = 37, k = 128;
    tu_rng rng = {11};
    float *x = malloc(rows * k * 4);
    uint16_t *h = malloc(rows * k * 2);
    for (size_t i = 0; i < rows * k; i++) x[i] = (float)(tu_normal(&rng) * exp(tu_normal(&rng)));
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        for (int stoch = 0; stoch < 2; stoch++) {
            for (int dti = 0; dti < 3; dti++) {
                lofp_dtype dt = dti == 0 ? LOFP_DTYPE_F32 : dti == 1 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F16;
                const void *in = x;
                if (dti) {
                    for (size_t i = 0; i < rows * k; i++) h[i] = dti == 1 ? lofp_fp32_to_bf16(x[i]) : lofp_fp32_to_fp16(x[i] * 1e-3f);
                    in = h;
                }
                size_t es = dti ? 2 : 4;
                lofp_scheme s;
                CHECK_OK(lofp_scheme_preset(presets[p], &s));
                if (stoch) { s.rounding = LOFP_STOCHASTIC; s.seed = 1234567; }
                s.threads = 2;
                size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
                uint8_t *c1 = malloc(cb), *s1 = malloc(sb), *c2 = malloc(cb), *s2 = malloc(sb);
                float g1 = 0;
                CHECK_OK(lofp_quantize(&s, dt, in, rows, k, c1, s1, &g1, NULL));
                const size_t crb = cb / rows, srb = sb / rows;
                for (size_t chunk = 1; chunk <= rows; chunk += 6) {
                    float g = 1.0f;
                    if (s.id == LOFP_SCHEME_NVFP4 && s.two_level) {
                        g = INFINITY;
                        for (size_t r0 = 0; r0 < rows; r0 += chunk) {
                            size_t n = rows - r0 < chunk ? rows - r0 : chunk;
                            float gc = lofp_nvfp4_global_scale(dt, (const uint8_t *)in + r0 * k * es, n * k);
                            if (gc < g) g = gc;
                        }
                        CHECKF(g == g1, "%s: min of chunk globals %.9g != whole %.9g", presets[p], (double)g, (double)g1);
                    }
                    memset(c2, 0xEE, cb);
                    memset(s2, 0xEE, sb);
                    for (size_t r0 = 0; r0 < rows; r0 += chunk) {
                        size_t n = rows - r0 < chunk ? rows - r0 : chunk;
                        CHECK_OK(lofp_quantize_rows(&s, dt, (const uint8_t *)in + r0 * k * es, r0, n, k, g,
                                                    c2 + r0 * crb, s2 + r0 * srb, NULL));
                    }
                    CHECKF(memcmp(c1, c2, cb) == 0 && memcmp(s1, s2, sb) == 0,
                           "%s stochastic=%d dtype=%d chunk=%zu: chunked bytes differ from lofp_quantize",
                           presets[p], stoch, dti, chunk);
                }
                free(c1); free(s1); free(c2); free(s2);
            }
        }
    }
    /* a NaN in the second chunk is reported at its index in the whole tensor */
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("mxfp8-e4m3", &s));
    x[20 * k + 77] = NAN;
    uint8_t codes[10 * 128], scales[10 * 4];
    lofp_quant_report rep;
    CHECK(lofp_quantize_rows(&s, LOFP_DTYPE_F32, x + 15 * k, 15, 10, k, 1.0f, codes, scales, &rep) == LOFP_ERR_NONFINITE);
    CHECK_EQ_U(rep.first_bad_index, 20 * k + 77);
    free(x);
    free(h);
}

static void test_uq_overflow(void)
{
    const size_t k = 64;
    float x[2 * 64];
    for (size_t i = 0; i < 2 * k; i++) x[i] = (float)i * 0.25f - 3.0f;
    for (size_t i = 0; i < k; i++) x[k + i] = 3e38f;        /* finite; the rotation's sum overflows */
    x[k + 9] = 3.3e38f;
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("ultraquant", &s));
    uint8_t codes[2 * 32], scales[2 * 2];
    lofp_quant_report rep;
    CHECK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 2, k, codes, scales, NULL, &rep) == LOFP_ERR_NONFINITE);
    CHECK_EQ_U(rep.first_bad_index, k + 9);                 /* the row's largest magnitude */
    s.propagate_nonfinite = 1;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 2, k, codes, scales, NULL, &rep));
    CHECK(rep.nonfinite_blocks == 2 && scales[2] == 0 && scales[3] == 0);
    s.propagate_nonfinite = 0;
    s.rotate = 0;                                           /* no rotation, no overflow */
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 2, k, codes, scales, NULL, &rep));

    /* the KV store: finite K whose rotation overflows is refused, nothing written */
    lofp_kv_cache_desc d;
    CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 64, 1, 16, 1));
    uint8_t *cache = malloc(lofp_kv_cache_bytes(&d));
    memset(cache, 0xA5, lofp_kv_cache_bytes(&d));
    int64_t slots[2] = {0, 1};
    lofp_kv_store_report kr;
    CHECK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, x, x, 2, slots, 0, &kr) == LOFP_ERR_NONFINITE);
    CHECK(kr.has_nonfinite && !kr.first_bad_in_v && kr.first_bad_index == k + 9);
    CHECK(cache[0] == 0xA5);
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, x, x, 2, slots, LOFP_KV_STORE_PROPAGATE_NONFINITE, &kr));
    CHECK(kr.zeroed_groups >= 2);
    /* large but harmless values still store */
    for (size_t i = 0; i < k; i++) x[k + i] = 1e30f;
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, x, x, 2, slots, 0, &kr));
    free(cache);
}

static void test_dequant_global(void)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("nvfp4", &s));
    uint8_t codes[8] = {0x21, 0x43, 0x65, 0x07, 0x21, 0x43, 0x65, 0x07}, scales[1] = {0x38};
    float out[16];
    const float bad[] = {0.0f, -0.0f, -1.0f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(lofp_dequantize(&s, codes, scales, bad[i], 1, 16, LOFP_DTYPE_F32, out) == LOFP_ERR_INVALID_ARG,
               "global %g accepted", (double)bad[i]);
    CHECK_OK(lofp_dequantize(&s, codes, scales, 2.0f, 1, 16, LOFP_DTYPE_F32, out));
    CHECK_OK(lofp_dequantize(&s, codes, scales, FLT_MIN, 1, 16, LOFP_DTYPE_F32, out));
}

int main(void)
{
    test_chunks_exact();
    test_uq_overflow();
    test_dequant_global();
    return tu_finish("test_stream_exact");
}

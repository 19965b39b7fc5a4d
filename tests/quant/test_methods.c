/* test_methods.c -- the quantization methods of lofp/method.h (MSE scale search, GPTQ) against
 * oracles written here from the public element codecs (lofp_encode / lofp_decode, the reference
 * codecs, not the kernels' integer encoders the methods use):
 *   - MSE: an exhaustive search over every scale code (all 127 UE4M3 codes, all 255 E8M0 bytes) on
 *     random and adversarial blocks; the method's choice must be the first minimum over its own
 *     candidate set, never worse than RTN, and the error it claims must be the error of what
 *     lofp_dequantize decodes from what it wrote. Prints how often the window holds the global
 *     optimum.
 *   - GPTQ: H = c*I gives RTN's bytes exactly; it lowers tr((W-Q) H (W-Q)^T) below RTN's on
 *     correlated inputs; bad inputs give clear statuses. (Bit-for-bit against an independent numpy
 *     GPTQ: tests/quant/script_gptq_oracle.sh.)
 *   - Both: the bytes do not depend on threads or row chunking. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/method.h"
#include "runtime/threadpool.h"
#include "test_util.h"

static const char *const schemes[] = { "nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2",
                                       "mxfp8-e4m3", "mxfp8-e5m2", "mxint8", "tilelang-mxfp8" };
#define NSCHEMES (sizeof schemes / sizeof schemes[0])

/* The preset, with tilelang-mxfp8's 128-element block narrowed to 32 so that it fits the shapes
 * here (any multiple of 32 is allowed; the identity test uses 128 with padding). */
static void preset(const char *name, lofp_scheme *s)
{
    CHECK_OK(lofp_scheme_preset(name, s));
    if (s->id == LOFP_SCHEME_TILELANG_MXFP8) s->block = 32;
}

/* ---- the oracle: one block at one scale code, from the public reference codecs ---- */

static float oracle_deq(const lofp_scheme *s, float global, uint32_t sc, float x)
{
    if (s->id == LOFP_SCHEME_NVFP4) {
        float sv = lofp_decode(LOFP_ELEM_UE4M3, sc);
        float bq = sv > 0.0f ? sv : 0x1p-9f;
        float e = (x * global) / bq;
        e = e < -6.0f ? -6.0f : e > 6.0f ? 6.0f : e;
        uint32_t c = lofp_encode(LOFP_ELEM_E2M1, e, s->rounding, LOFP_SATURATE, 0);
        return (lofp_decode(LOFP_ELEM_E2M1, c) * sv) / global;
    }
    float sv = lofp_decode(LOFP_ELEM_E8M0, sc);
    uint32_t c = lofp_encode(s->elem, x / sv, s->rounding, LOFP_SATURATE, 0);
    return lofp_decode(s->elem, c) * sv;
}

static double oracle_err(const lofp_scheme *s, float global, uint32_t sc, const float *x,
                         const float *w)
{
    double e = 0.0;
    for (uint32_t j = 0; j < s->block; j++) {
        double d = (double)x[j] - (double)oracle_deq(s, global, sc, x[j]);
        e += (w ? (double)w[j] : 1.0) * (d * d);
    }
    return e;
}

/* The candidate list of method.h, in order, built here from the RTN code and the block max. */
static size_t candidates(const lofp_scheme *s, float global, uint32_t rtn, const float *x,
                         unsigned W, uint32_t *out)
{
    size_t n = 0;
    uint32_t maxc = s->id == LOFP_SCHEME_NVFP4 ? 0x7E : 254;
    uint32_t seeds[2] = { rtn, 0 };
    int nseeds = 1;
    if (s->id == LOFP_SCHEME_NVFP4) {
        float bmax = 0.0f;
        for (uint32_t j = 0; j < s->block; j++) bmax = fmaxf(bmax, fabsf(x[j] * global));
        float bs = bmax / 4.0f;
        bs = bs < 1e-12f ? 1e-12f : bs > 448.0f ? 448.0f : bs;
        seeds[nseeds++] = lofp_encode(LOFP_ELEM_UE4M3, bs, LOFP_RNE, LOFP_SATURATE, 0);
    }
    for (int sd = 0; sd < nseeds; sd++) {
        out[n++] = seeds[sd];
        for (unsigned d = 1; d <= W; d++) {
            if (seeds[sd] >= d) out[n++] = seeds[sd] - d;
            if (seeds[sd] + d <= maxc) out[n++] = seeds[sd] + d;
        }
    }
    return n;
}

/* Rows of different kinds: normal, zeros, one outlier, subnormal range, huge, mixed. */
static void fill_block_row(tu_rng *r, float *x, size_t k, int kind, int mx)
{
    for (size_t i = 0; i < k; i++) {
        double g = tu_normal(r);
        switch (kind % 7) {
        case 0: x[i] = (float)g; break;
        case 1: x[i] = 0.0f; break;
        case 2: x[i] = (float)(0.01 * g) + (i % 16 == 3 ? 40.0f : 0.0f); break;
        case 3: x[i] = (float)(g * (mx ? 1e-39 : 1e-6)); break;
        case 4: x[i] = (float)(g * (mx ? 1e37 : 1e4)); break;
        case 5: x[i] = (i % 5 == 0) ? (float)g : 0.0f; break;
        default: x[i] = (float)(g * exp(4.0 * tu_uniform(r) - 2.0)); break;
        }
    }
}

static void test_mse_exhaustive(void)
{
    tu_rng r = { 0x5EED0001u };
    const size_t rows = 56, k = 64;
    float *x = malloc(rows * k * sizeof(float)), *w = malloc(k * sizeof(float));
    float *deq = malloc(rows * k * sizeof(float));
    uint8_t codes[56 * 64], scales[56 * 64], rcodes[56 * 64], rscales[56 * 64];
    for (size_t si = 0; si < NSCHEMES; si++) {
        for (int variant = 0; variant < 4; variant++) { /* weighted?, one-level nvfp4 / ties */
            lofp_scheme s;
            preset(schemes[si], &s);
            const int nv = s.id == LOFP_SCHEME_NVFP4;
            if (variant & 2) {
                if (nv) s.two_level = 0;
                else s.rounding = LOFP_TIES_AWAY;
            }
            const int weighted = variant & 1;
            for (size_t i = 0; i < rows; i++) fill_block_row(&r, x + i * k, k, (int)i, !nv);
            for (size_t i = 0; i < k; i++) w[i] = (float)(tu_uniform(&r) * 3.0) * (i % 9 != 4);
            const float *imp = weighted ? w : NULL;
            float global = nv && s.two_level ? lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, rows * k) : 1.0f;
            for (unsigned W = 0; W <= 4; W += 2) {
                double claimed = -1.0;
                CHECK_OK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, rows, k, global, imp, W,
                                                codes, scales, &claimed, NULL));
                CHECK_OK(lofp_quantize_with_global(&s, LOFP_DTYPE_F32, x, rows, k, global, rcodes,
                                                   rscales, NULL));
                /* what lofp_dequantize decodes from what was written has the claimed error */
                CHECK_OK(lofp_dequantize(&s, codes, scales, global, rows, k, LOFP_DTYPE_F32, deq));
                double total = 0.0;
                size_t nb = k / s.block, hits = 0, blocks = 0, mism = 0;
                for (size_t i = 0; i < rows; i++) {
                    double row = 0.0;
                    for (size_t b = 0; b < nb; b++) {
                        const float *xb = x + i * k + b * s.block;
                        const float *wb = imp ? imp + b * s.block : NULL;
                        double be = 0.0;
                        for (uint32_t j = 0; j < s.block; j++) {
                            double d = (double)xb[j] - (double)deq[i * k + b * s.block + j];
                            be += (wb ? (double)wb[j] : 1.0) * (d * d);
                        }
                        row += be;
                        /* (a) the first minimum over the method's candidate set */
                        uint32_t cand[32];
                        size_t nc = candidates(&s, global, rscales[i * nb + b], xb, W, cand);
                        uint32_t best = cand[0];
                        double best_e = oracle_err(&s, global, cand[0], xb, wb);
                        for (size_t c = 1; c < nc; c++) {
                            double e = oracle_err(&s, global, cand[c], xb, wb);
                            if (e < best_e) { best_e = e; best = cand[c]; }
                        }
                        if (scales[i * nb + b] != best || be != best_e) mism++;
                        /* (b) never worse than RTN */
                        double rtn_e = oracle_err(&s, global, rscales[i * nb + b], xb, wb);
                        CHECKF(be <= rtn_e, "%s block %zu/%zu: mse %g > rtn %g", schemes[si], i, b, be, rtn_e);
                        /* (c) the global optimum over every code */
                        double glob = INFINITY;
                        uint32_t maxc = nv ? 0x7E : 254;
                        for (uint32_t c = 0; c <= maxc; c++) {
                            double e = oracle_err(&s, global, c, xb, wb);
                            if (e < glob) glob = e;
                        }
                        CHECK(glob <= best_e);
                        hits += glob == best_e;
                        blocks++;
                    }
                    total += row;
                }
                CHECKF(mism == 0, "%s variant %d W %u: %zu blocks differ from the oracle's choice",
                       schemes[si], variant, W, mism);
                CHECKF(total == claimed, "%s: claimed %.17g, decoded %.17g", schemes[si], claimed, total);
                if (variant == 1)
                    printf("mse %-11s W=%u weighted: window holds the optimum in %zu/%zu blocks\n",
                           schemes[si], W, hits, blocks);
            }
        }
    }
    free(x);
    free(w);
    free(deq);
}

/* Thread counts and row chunks do not change the bytes; the global search is consistent. */
static void test_mse_determinism(void)
{
    tu_rng r = { 77 };
    const size_t rows = 37, k = 96;
    float x[37 * 96];
    for (size_t i = 0; i < rows * k; i++) x[i] = (float)tu_normal(&r);
    for (size_t si = 0; si < NSCHEMES; si++) {
        lofp_scheme s;
        preset(schemes[si], &s);
        float g = s.id == LOFP_SCHEME_NVFP4 ? lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, rows * k) : 1.0f;
        uint8_t c1[37 * 96], s1[37 * 96], c2[37 * 96], s2[37 * 96];
        size_t cb = lofp_codes_bytes(&s, 1, k), sb = lofp_scales_bytes(&s, 1, k);
        double e1, e2;
        s.threads = 1;
        CHECK_OK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, rows, k, g, NULL, 3, c1, s1, &e1, NULL));
        s.threads = 2;
        CHECK_OK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, rows, k, g, NULL, 3, c2, s2, &e2, NULL));
        CHECK(memcmp(c1, c2, rows * cb) == 0 && memcmp(s1, s2, rows * sb) == 0 && e1 == e2);
        memset(c2, 0, sizeof c2);
        CHECK_OK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 20, k, g, NULL, 3, c2, s2, NULL, NULL));
        CHECK_OK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x + 20 * k, 20, rows - 20, k, g, NULL, 3,
                                        c2 + 20 * cb, s2 + 20 * sb, NULL, NULL));
        CHECK(memcmp(c1, c2, rows * cb) == 0 && memcmp(s1, s2, rows * sb) == 0);
        if (s.id == LOFP_SCHEME_NVFP4) {
            float cand[8];
            double err[8] = { 0 };
            lofp_mse_nvfp4_global_candidates(g, 8, cand);
            CHECK(cand[0] == g);
            for (int i = 1; i < 8; i++) CHECK(cand[i] < cand[i - 1] && cand[i] > g * 0.89f);
            CHECK_OK(lofp_mse_nvfp4_global_error(&s, LOFP_DTYPE_F32, x, rows, k, NULL, 3, cand, 8, err));
            for (int i = 0; i < 8; i++) {
                double e;
                CHECK_OK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, rows, k, cand[i], NULL, 3,
                                                c2, s2, &e, NULL));
                CHECK(e == err[i]);
            }
            CHECK(lofp_mse_nvfp4_global_error(&s, LOFP_DTYPE_F32, x, rows, k, NULL, 3, cand, 0, err) == LOFP_ERR_INVALID_ARG);
        }
    }
}

/* ---- GPTQ ---- */


static void factor_alloc(lofp_gptq_factor *f, size_t k)
{
    f->k = k;
    f->u = malloc(k * k * sizeof(float));
    f->perm = malloc(k * sizeof(uint32_t));
    f->dead = malloc(k);
    f->hdiag = malloc(k * sizeof(float));
}

static void factor_free(lofp_gptq_factor *f)
{
    free(f->u);
    free(f->perm);
    free(f->dead);
    free(f->hdiag);
}

/* H = c*I (with a dead column): GPTQ has nothing to compensate and writes RTN's bytes. */
static void test_gptq_identity_is_rtn(void)
{
    tu_rng r = { 99 };
    const size_t rows = 21, k = 160;
    float *x = malloc(rows * k * sizeof(float)), *h = calloc(k * k, sizeof(float));
    const size_t kmax = 256; /* K padded to tilelang's 128-element block */
    uint8_t *c1 = malloc(rows * kmax), *s1 = malloc(rows * kmax), *c2 = malloc(rows * kmax), *s2 = malloc(rows * kmax);
    for (size_t i = 0; i < k; i++) h[i * k + i] = i == 37 ? 0.0f : 3.5f;
    for (size_t si = 0; si < NSCHEMES; si++) {
        for (int ao = 0; ao < 2; ao++) {
            lofp_scheme s;
            CHECK_OK(lofp_scheme_preset(schemes[si], &s));
            s.threads = 2;
            s.pad = 1; /* tilelang-mxfp8: K = 160 pads to 256 */
            for (size_t i = 0; i < rows * k; i++) x[i] = (float)tu_normal(&r);
            lofp_gptq_options o;
            lofp_gptq_options_init(&o);
            o.act_order = ao;
            o.lazy_block = 48; /* not a multiple of k nor of the format block */
            lofp_gptq_factor f;
            factor_alloc(&f, k);
            CHECK_OK(lofp_gptq_prepare(h, k, &o, &f));
            CHECK(f.dead[37] == 1 && f.dead[36] == 0);
            float g = s.id == LOFP_SCHEME_NVFP4 ? lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, rows * k) : 1.0f;
            CHECK_OK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, rows, k, g, &f, &o, c1, s1, NULL));
            for (size_t i = 0; i < rows; i++) x[i * k + 37] = 0.0f; /* the dead column */
            CHECK_OK(lofp_quantize_with_global(&s, LOFP_DTYPE_F32, x, rows, k, g, c2, s2, NULL));
            CHECKF(memcmp(c1, c2, lofp_codes_bytes(&s, rows, k)) == 0 &&
                   memcmp(s1, s2, lofp_scales_bytes(&s, rows, k)) == 0,
                   "%s act_order %d: GPTQ with H = cI differs from RTN", schemes[si], ao);
            factor_free(&f);
        }
    }
    free(x); free(h); free(c1); free(s1); free(c2); free(s2);
}

/* tr((W-Q) H (W-Q)^T) in double. */
static double hess_loss(const float *wm, const float *q, const double *H, size_t rows, size_t k)
{
    double tot = 0.0;
    double *d = malloc(k * sizeof(double));
    for (size_t i = 0; i < rows; i++) {
        for (size_t a = 0; a < k; a++) d[a] = (double)wm[i * k + a] - (double)q[i * k + a];
        for (size_t a = 0; a < k; a++) {
            double t = 0.0;
            for (size_t b = 0; b < k; b++) t += H[a * k + b] * d[b];
            tot += d[a] * t;
        }
    }
    free(d);
    return tot;
}

static void test_gptq_lowers_loss(void)
{
    tu_rng r = { 1234 };
    const size_t rows = 32, k = 128, n = 512;
    float *X = malloc(n * k * sizeof(float)), *h = malloc(k * k * sizeof(float));
    double *H = calloc(k * k, sizeof(double));
    float *wm = malloc(rows * k * sizeof(float)), *q = malloc(rows * k * sizeof(float));
    uint8_t *c = malloc(rows * k), *sc = malloc(rows * k);
    /* correlated inputs: x_t = z_t mixed with its neighbours, per-feature scales */
    for (size_t t = 0; t < n; t++) {
        double prev = 0.0;
        for (size_t a = 0; a < k; a++) {
            double z = tu_normal(&r);
            prev = 0.8 * prev + z;
            X[t * k + a] = (float)(prev * (1.0 + (a % 7)));
        }
    }
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double s = 0.0;
            for (size_t t = 0; t < n; t++) s += (double)X[t * k + a] * X[t * k + b];
            H[a * k + b] = s;
            h[a * k + b] = (float)s;
        }
    for (size_t i = 0; i < rows * k; i++) wm[i] = (float)tu_normal(&r);
    const char *names[] = { "nvfp4", "mxfp4", "mxfp8-e4m3" };
    for (int si = 0; si < 3; si++) {
        for (int ao = 0; ao < 2; ao++) {
            lofp_scheme s;
            CHECK_OK(lofp_scheme_preset(names[si], &s));
            float g = s.id == LOFP_SCHEME_NVFP4 ? lofp_nvfp4_global_scale(LOFP_DTYPE_F32, wm, rows * k) : 1.0f;
            lofp_gptq_options o;
            lofp_gptq_options_init(&o);
            o.act_order = ao;
            lofp_gptq_factor f;
            factor_alloc(&f, k);
            CHECK_OK(lofp_gptq_prepare(h, k, &o, &f));
            CHECK_OK(lofp_quantize_with_global(&s, LOFP_DTYPE_F32, wm, rows, k, g, c, sc, NULL));
            CHECK_OK(lofp_dequantize(&s, c, sc, g, rows, k, LOFP_DTYPE_F32, q));
            double l_rtn = hess_loss(wm, q, H, rows, k);
            CHECK_OK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, wm, 0, rows, k, g, &f, &o, c, sc, NULL));
            CHECK_OK(lofp_dequantize(&s, c, sc, g, rows, k, LOFP_DTYPE_F32, q));
            double l_gptq = hess_loss(wm, q, H, rows, k);
            o.mse_scales = 1;
            CHECK_OK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, wm, 0, rows, k, g, &f, &o, c, sc, NULL));
            CHECK_OK(lofp_dequantize(&s, c, sc, g, rows, k, LOFP_DTYPE_F32, q));
            double l_gm = hess_loss(wm, q, H, rows, k);
            printf("gptq %-10s act_order %d: H-weighted loss rtn %.4g gptq %.4g (%.2fx) gptq+mse %.4g\n",
                   names[si], ao, l_rtn, l_gptq, l_rtn / l_gptq, l_gm);
            CHECKF(l_gptq < 0.9 * l_rtn, "%s: GPTQ %g not below RTN %g", names[si], l_gptq, l_rtn);
            /* threads and chunks do not change the bytes */
            uint8_t *c2 = malloc(rows * k), *s2 = malloc(rows * k);
            size_t cb = lofp_codes_bytes(&s, 1, k), sb = lofp_scales_bytes(&s, 1, k);
            s.threads = 2;
            CHECK_OK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, wm, 0, 13, k, g, &f, &o, c2, s2, NULL));
            CHECK_OK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, wm + 13 * k, 13, rows - 13, k, g, &f, &o,
                                             c2 + 13 * cb, s2 + 13 * sb, NULL));
            CHECK(memcmp(c, c2, rows * cb) == 0 && memcmp(sc, s2, rows * sb) == 0);
            free(c2);
            free(s2);
            factor_free(&f);
        }
    }
    free(X); free(h); free(H); free(wm); free(q); free(c); free(sc);
}

static void test_bad_inputs(void)
{
    lofp_gptq_factor f;
    factor_alloc(&f, 2);
    float sing[4] = { 1, 1, 1, 1 }, indef[4] = { 1, 2, 2, 1 }, nan_h[4] = { 1, 0, 0, NAN };
    lofp_gptq_options o;
    lofp_gptq_options_init(&o);
    o.damp = 0.0;
    CHECK(lofp_gptq_prepare(sing, 2, &o, &f) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_prepare(indef, 2, NULL, &f) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_prepare(nan_h, 2, NULL, &f) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_prepare(NULL, 2, NULL, &f) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_prepare(sing, 2, NULL, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_prepare(sing, 3, NULL, &f) == LOFP_ERR_INVALID_ARG); /* k mismatch */
    o.damp = -1.0;
    CHECK(lofp_gptq_prepare(sing, 2, &o, &f) == LOFP_ERR_INVALID_ARG);
    CHECK_OK(lofp_gptq_prepare(sing, 2, NULL, &f)); /* damping makes it definite */
    factor_free(&f);

    const size_t k = 32;
    float h[32 * 32] = { 0 }, x[2 * 32];
    for (size_t i = 0; i < k; i++) h[i * k + i] = 1.0f;
    for (size_t i = 0; i < 2 * k; i++) x[i] = (float)i;
    factor_alloc(&f, k);
    CHECK_OK(lofp_gptq_prepare(h, k, NULL, &f));
    uint8_t c[64], sc[8];
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("mxfp8-e4m3", &s));
    CHECK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, 16, 1.0f, &f, NULL, c, sc, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, 1.0f, NULL, NULL, c, sc, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_quantize_rows(NULL, LOFP_DTYPE_F32, x, 0, 2, k, 1.0f, &f, NULL, c, sc, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_I8, x, 0, 2, k, 1.0f, &f, NULL, c, sc, NULL) == LOFP_ERR_INVALID_ARG);
    x[40] = NAN;
    lofp_quant_report rep;
    CHECK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, x, 5, 2, k, 1.0f, &f, NULL, c, sc, &rep) == LOFP_ERR_NONFINITE);
    CHECK_EQ_U(rep.first_bad_index, 5 * k + 40);
    CHECK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 5, 2, k, 1.0f, NULL, 2, c, sc, NULL, &rep) == LOFP_ERR_NONFINITE);
    CHECK_EQ_U(rep.first_bad_index, 5 * k + 40);
    x[40] = 1.0f;
    float imp[32];
    for (size_t i = 0; i < k; i++) imp[i] = 1.0f;
    imp[3] = -1.0f;
    CHECK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, 1.0f, imp, 2, c, sc, NULL, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, 30, 1.0f, NULL, 2, c, sc, NULL, NULL) == LOFP_ERR_SHAPE);
    s.rounding = LOFP_STOCHASTIC;
    CHECK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, 1.0f, NULL, 2, c, sc, NULL, NULL) == LOFP_ERR_UNSUPPORTED);
    CHECK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, 1.0f, &f, NULL, c, sc, NULL) == LOFP_ERR_UNSUPPORTED);
    CHECK_OK(lofp_scheme_preset("mxfp8-e4m3", &s));
    s.profile = LOFP_PROFILE_TORCHAO;
    CHECK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, 1.0f, NULL, 2, c, sc, NULL, NULL) == LOFP_ERR_UNSUPPORTED);
    CHECK_OK(lofp_scheme_preset("ultraquant", &s));
    CHECK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, 1.0f, NULL, 2, c, sc, NULL, NULL) == LOFP_ERR_UNSUPPORTED);
    CHECK_OK(lofp_scheme_preset("nvfp4", &s));
    CHECK(lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, 0.0f, NULL, 2, c, sc, NULL, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, x, 0, 2, k, NAN, &f, NULL, c, sc, NULL) == LOFP_ERR_INVALID_ARG);
    factor_free(&f);

    lofp_method m;
    CHECK(lofp_method_from_name("gptq", &m) == LOFP_OK && m == LOFP_METHOD_GPTQ);
    CHECK(lofp_method_from_name("mse", &m) == LOFP_OK && m == LOFP_METHOD_MSE);
    CHECK(lofp_method_from_name("awq", &m) == LOFP_ERR_NOT_FOUND);
    CHECK(strcmp(lofp_method_name(LOFP_METHOD_RTN), "rtn") == 0 && lofp_method_name(LOFP_METHOD_COUNT_) == NULL);
}

int main(void)
{
    lofp_parallel_min_elems = 1; /* split even the small shapes across threads */
    test_mse_exhaustive();
    test_mse_determinism();
    test_gptq_identity_is_rtn();
    test_gptq_lowers_loss();
    test_bad_inputs();
    return tu_finish("test_methods");
}

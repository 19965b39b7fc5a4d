/* test_hadamard.c -- the Walsh-Hadamard transforms against an fp64 Sylvester matrix built here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* Sylvester recursion H_2n = [[H, H], [H, -H]], unnormalised, in double. */
static double *sylvester(size_t d)
{
    double *h = malloc(d * d * sizeof(double));
    h[0] = 1.0;
    for (size_t n = 1; n < d; n *= 2)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double v = h[i * d + j];
                h[i * d + j + n] = v;
                h[(i + n) * d + j] = v;
                h[(i + n) * d + j + n] = -v;
            }
    return h;
}

int main(void)
{
    tu_rng rng = { 42 };
    /* One stage by hand: (a, b) -> ((a+b)*r, (a-b)*r) with r = 0x3F3504F3, each op rounded. */
    {
        float x[2] = { 1.0f, 0x1.000002p0f };
        float r; uint32_t rb = 0x3F3504F3u; memcpy(&r, &rb, 4);
        volatile float s = x[0] + x[1], t = x[0] - x[1];
        float want0 = s * r, want1 = t * r;
        CHECK_OK(lofp_hadamard_inplace(x, 2, NULL));
        CHECK(memcmp(&x[0], &want0, 4) == 0 && memcmp(&x[1], &want1, 4) == 0);
    }
    for (size_t d = 1; d <= 1024; d *= 2) {
        double *h = sylvester(d);
        double norm = 1.0 / sqrt((double)d);
        float *x = malloc(d * sizeof(float)), *y = malloc(d * sizeof(float)), *z = malloc(d * sizeof(float));
        float *sg = malloc(d * sizeof(float));
        double maxerr_b = 0, maxerr_d = 0, maxerr_s = 0, scale = 0;
        for (int trial = 0; trial < 4; trial++) {
            for (size_t i = 0; i < d; i++) x[i] = (float)tu_normal(&rng);
            memcpy(y, x, d * sizeof(float));
            CHECK_OK(lofp_hadamard_inplace(y, d, NULL));
            CHECK_OK(lofp_hadamard_dense(x, z, d));
            lofp_hadamard_signs(sg, d, 7 + trial);
            float *w = malloc(d * sizeof(float));
            memcpy(w, x, d * sizeof(float));
            CHECK_OK(lofp_hadamard_inplace(w, d, sg));
            for (size_t i = 0; i < d; i++) {
                double ref = 0, refs = 0;
                for (size_t j = 0; j < d; j++) {
                    ref += h[i * d + j] * norm * x[j];
                    refs += h[i * d + j] * norm * sg[j] * x[j];
                }
                maxerr_b = fmax(maxerr_b, fabs(y[i] - ref));
                maxerr_d = fmax(maxerr_d, fabs(z[i] - ref));
                maxerr_s = fmax(maxerr_s, fabs(w[i] - refs));
                scale = fmax(scale, fabs(ref));
            }
            free(w);
        }
        /* fp32 error grows like log2(d) roundings for the butterfly, d for the dense sum */
        CHECKF(maxerr_b <= 1e-6 * (1 + log2((double)d)) * fmax(scale, 1), "d=%zu butterfly err %g", d, maxerr_b);
        CHECKF(maxerr_d <= 2e-7 * d * fmax(scale, 1) + 1e-6, "d=%zu dense err %g", d, maxerr_d);
        CHECKF(maxerr_s <= 1e-6 * (1 + log2((double)d)) * fmax(scale, 1), "d=%zu signed err %g", d, maxerr_s);
        /* orthonormality: transforming e_i twice gives e_i back (H is symmetric and H H^T = I) */
        for (size_t i = 0; i < d; i += (d > 64 ? d / 64 : 1)) {
            memset(y, 0, d * sizeof(float));
            y[i] = 1.0f;
            lofp_hadamard_inplace(y, d, NULL);
            lofp_hadamard_inplace(y, d, NULL);
            for (size_t j = 0; j < d; j++)
                CHECKF(fabsf(y[j] - (j == i ? 1.0f : 0.0f)) < 1e-5f, "d=%zu HH e_%zu [%zu] = %g", d, i, j, y[j]);
        }
        int neg = 0;
        for (size_t i = 0; i < d; i++) { CHECK(sg[i] == 1.0f || sg[i] == -1.0f); neg += sg[i] < 0; }
        if (d >= 64) CHECKF(neg > (int)d / 4 && neg < (int)(3 * d / 4), "signs look biased: %d of %zu", neg, d);
        free(h); free(x); free(y); free(z); free(sg);
    }
    float buf[12] = { 0 };
    CHECK(lofp_hadamard_inplace(buf, 12, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_hadamard_inplace(buf, 0, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_hadamard_dense(buf, buf + 6, 6) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_hadamard_inplace(NULL, 8, NULL) == LOFP_ERR_INVALID_ARG);
    return tu_finish("test_hadamard");
}

/* bench_methods.c -- `lofp bench methods`: wall time of the quantization methods of lofp/method.h
 * on a 1536 x 1536 fp32 weight (SmolLM2-135M's largest linear is 576 x 1536, its widest input
 * 1536): RTN, MSE (window 2), GPTQ's per-layer prepare (H = X^T X of 256 random tokens) and its
 * row sweep, for 1..N threads, NVFP4 and MXFP4. Self-check: MSE's error is at most RTN's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "lofp/method.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int bench_group_methods(const bench_opts *o)
{
    const size_t n = o->quick ? 256 : 1536, k = o->quick ? 256 : 1536, tokens = 256;
    float *w = malloc(n * k * sizeof(float)), *x = malloc(tokens * k * sizeof(float));
    float *h = malloc(k * k * sizeof(float)), *deq = malloc(n * k * sizeof(float));
    uint8_t *codes = malloc(n * k), *scales = malloc(n * k);
    lofp_gptq_factor f = { k, malloc(k * k * sizeof(float)), malloc(k * sizeof(uint32_t)), malloc(k),
                           malloc(k * sizeof(float)) };
    int rc = 0;
    if (!w || !x || !h || !deq || !codes || !scales || !f.u || !f.perm || !f.dead || !f.hdiag) {
        fprintf(stderr, "bench methods: out of memory\n");
        rc = 1;
        goto out;
    }
    uint64_t st = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < n * k; i++) {
        st = st * 6364136223846793005u + 1442695040888963407u;
        w[i] = (float)((double)(st >> 11) * 0x1p-53 - 0.5);
    }
    for (size_t i = 0; i < tokens * k; i++) {
        st = st * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)((double)(st >> 11) * 0x1p-53 - 0.5);
    }
    for (size_t a = 0; a < k; a++)
        for (size_t b = a; b < k; b++) {
            double s = 0.0;
            for (size_t t = 0; t < tokens; t++) s += (double)x[t * k + a] * x[t * k + b];
            h[a * k + b] = h[b * k + a] = (float)s;
        }
    printf("methods: %zu x %zu fp32 weight, H = X^T X of %zu tokens; wall seconds\n", n, k, tokens);
    const char *names[] = { "nvfp4", "mxfp4" };
    for (int si = 0; si < 2; si++) {
        for (int th = 1; th <= o->threads_max; th++) {
            lofp_scheme s;
            lofp_scheme_preset(names[si], &s);
            s.threads = (unsigned)th;
            float g = s.id == LOFP_SCHEME_NVFP4 ? lofp_nvfp4_global_scale(LOFP_DTYPE_F32, w, n * k) : 1.0f;
            lofp_gptq_options go;
            lofp_gptq_options_init(&go);
            go.threads = (unsigned)th;
            double t0 = now_s();
            lofp_status s1 = lofp_quantize_with_global(&s, LOFP_DTYPE_F32, w, n, k, g, codes, scales, NULL);
            double t1 = now_s();
            double e_mse = 0.0;
            lofp_status s2 = lofp_mse_quantize_rows(&s, LOFP_DTYPE_F32, w, 0, n, k, g, NULL,
                                                    LOFP_MSE_WINDOW_DEFAULT, codes, scales, &e_mse, NULL);
            double t2 = now_s();
            lofp_status s3 = lofp_gptq_prepare(h, k, &go, &f);
            double t3 = now_s();
            lofp_status s4 = lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, w, 0, n, k, g, &f, &go, codes, scales, NULL);
            double t4 = now_s();
            if (s1 || s2 || s3 || s4) {
                fprintf(stderr, "bench methods: a call failed\n");
                rc = 1;
                goto out;
            }
            /* self-check: MSE never loses to RTN */
            lofp_quantize_with_global(&s, LOFP_DTYPE_F32, w, n, k, g, codes, scales, NULL);
            lofp_dequantize(&s, codes, scales, g, n, k, LOFP_DTYPE_F32, deq);
            double e_rtn = 0.0;
            for (size_t i = 0; i < n * k; i++) {
                double d = (double)w[i] - (double)deq[i];
                e_rtn += d * d;
            }
            if (!(e_mse <= e_rtn * (1 + 1e-12))) rc = 1;
            printf("%-6s %dT  rtn %7.3f  mse %7.3f  gptq prepare %7.3f  gptq rows %7.3f   "
                   "(mse/rtn squared error %.3f)\n",
                   names[si], th, t1 - t0, t2 - t1, t3 - t2, t4 - t3, e_mse / e_rtn);
        }
    }
    printf("\n");
out:
    free(w); free(x); free(h); free(deq); free(codes); free(scales);
    free(f.u); free(f.perm); free(f.dead); free(f.hdiag);
    return rc;
}

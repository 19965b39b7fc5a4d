/* test_uq_rotation.c -- UltraQuant's 512-bit butterfly (src/quant/x86/uq_avx512.c, through
 * shim_uq_avx512.c) against the reference rotation lofp_hadamard_inplace, bit for bit on every
 * rotated value: d = 32 .. 16384 (the in-register strides, the register blocks of 128 and the
 * two-stages-per-pass memory strides, even and odd stage counts), data at magnitudes from 2^-140
 * to FLT_MAX (subnormal products, overflow to Inf) and signed zeros. Skipped (passes with a
 * message) on a CPU without the AVX-512 level. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu_features.h"
#include "test_util.h"

void shim_butterfly_avx512(float *x, size_t d);

int main(void)
{
    const uint32_t need = LOFP_CPU_AVX2 | LOFP_CPU_FMA | LOFP_CPU_F16C | LOFP_CPU_AVX512_BASE | LOFP_CPU_AVX512VBMI;
    if ((lofp_cpu_features() & need) != need) {
        printf("test_uq_rotation: no AVX-512 (or masked by LOFP_DISABLE_CPU_FEATURES): skipped\n");
        return tu_finish("test_uq_rotation");
    }
    tu_rng g = { 2718 };
    size_t compared = 0;
    for (size_t d = 32; d <= 16384; d <<= 1) {
        float *a = malloc(d * sizeof(float)), *b = malloc(d * sizeof(float));
        for (int trial = 0; trial < 12; trial++) {
            for (size_t i = 0; i < d; i++) {
                int kind = trial % 4;
                double v = tu_normal(&g);
                if (kind == 1) v = ldexp(v, (int)(tu_next(&g) % 60) - 30);        /* mixed magnitudes */
                if (kind == 2) v = ldexp(v, tu_next(&g) & 1 ? -140 : 126);         /* subnormal / overflowing */
                if (kind == 3 && tu_next(&g) % 3 == 0) v = tu_next(&g) & 1 ? -0.0 : 0.0;
                float f = fabs(v) > 3.4028234e38 ? (v < 0 ? -3.4028235e38f : 3.4028235e38f) : (float)v;
                a[i] = b[i] = f;
            }
            shim_butterfly_avx512(a, d);
            CHECK_OK(lofp_hadamard_inplace(b, d, NULL));
            size_t i = 0;
            while (i < d && memcmp(a + i, b + i, 4) == 0) i++;
            CHECKF(i == d, "d=%zu trial %d: rotated value %zu is %a, reference %a", d, trial, i, i < d ? a[i] : 0.0f,
                   i < d ? b[i] : 0.0f);
            compared += d;
        }
        free(a);
        free(b);
    }
    printf("test_uq_rotation: %zu rotated values compared (avx512)\n", compared);
    return tu_finish("test_uq_rotation");
}

/* hadamard.c -- Walsh-Hadamard transforms. The butterfly reproduces vLLM's UltraQuant store
 * kernel bit for bit: ascending stride, (a+b)*r and (a-b)*r with r = fl(1/sqrt 2) = 0x3F3504F3,
 * each add and multiply rounded to fp32 (no contraction: the build uses -ffp-contract=off). */
#include <math.h>

#include "core.h"

static int is_pow2_size(size_t d) { return d != 0 && (d & (d - 1)) == 0; }

lofp_status lofp_hadamard_inplace(float *x, size_t d, const float *signs)
{
    if (!x || !is_pow2_size(d)) return LOFP_ERR_INVALID_ARG;
    const float r = 0.70710678118654752f;
    if (signs)
        for (size_t i = 0; i < d; i++) x[i] = x[i] * signs[i];
    for (size_t h = 1; h < d; h <<= 1) {
        for (size_t i = 0; i < d; i += 2 * h) {
            for (size_t j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                float s = a + b, t = a - b;
                x[j] = s * r;
                x[j + h] = t * r;
            }
        }
    }
    return LOFP_OK;
}

lofp_status lofp_hadamard_dense(const float *x, float *y, size_t d)
{
    if (!x || !y || !is_pow2_size(d)) return LOFP_ERR_INVALID_ARG;
    /* H[i][j] = (-1)^popcount(i & j) / sqrt(d): built in double, rounded to fp32 once */
    const float h = (float)(1.0 / sqrt((double)d));
    for (size_t i = 0; i < d; i++) {
        float acc = 0.0f;
        for (size_t j = 0; j < d; j++) {
            float hij = (__builtin_popcountll((unsigned long long)(i & j)) & 1) ? -h : h;
            acc = acc + x[j] * hij;
        }
        y[i] = acc;
    }
    return LOFP_OK;
}

void lofp_hadamard_signs(float *signs, size_t d, uint64_t seed)
{
    if (!signs) return;
    uint64_t st = seed;
    uint64_t bits = 0;
    for (size_t i = 0; i < d; i++) {
        if ((i & 63) == 0) bits = lofp_splitmix64(&st);
        signs[i] = (bits >> (i & 63)) & 1 ? -1.0f : 1.0f;
    }
}

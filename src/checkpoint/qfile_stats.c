/* qfile_stats.c -- what `lofp inspect --against` reports of a quantized tensor (qfile.h): its
 * error against the dense original in the original basis, and the histogram of its scale
 * exponents. */
#include "ck_internal.h"
#include "lofp/qfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

lofp_status lofp_qtensor_error_stats(const lofp_qtensor *q, const lofp_tensor_info *orig, lofp_error_stats *out)
{
    if (!q || !orig || !out || !lofp_dtype_is_float(orig->dtype)) return LOFP_ERR_INVALID_ARG;
    const size_t n = q->rows * q->k;
    if (orig->numel != n) return LOFP_ERR_SHAPE;
    float *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
    lofp_status st = x && y ? LOFP_OK : LOFP_ERR_NOMEM;
    if (st == LOFP_OK) st = lofp_dtype_to_f32(orig->dtype, orig->data, n, x);
    if (st == LOFP_OK) st = lofp_qtensor_dequantize(q, y);
    /* UltraQuant stores H·x: rotate back (H is its own inverse) to compare element for element */
    if (st == LOFP_OK && q->scheme.id == LOFP_SCHEME_ULTRAQUANT && q->scheme.rotate)
        for (size_t r = 0; r < q->rows && st == LOFP_OK; r++) st = lofp_hadamard_inplace(y + r * q->k, q->k, NULL);
    if (st == LOFP_OK) st = lofp_error_stats_compute(x, y, n, out);
    free(x);
    free(y);
    return st;
}

/* The binary exponent of scale byte b, or -1000 when it has none (below every bin). */
static int scale_exp(const lofp_qtensor *q, uint8_t b)
{
    if (q->scheme.scale_elem == LOFP_ELEM_UE4M3) {
        float v = lofp_decode(LOFP_ELEM_UE4M3, b);
        return v > 0 && isfinite(v) ? (int)floor(log2((double)v)) : -1000;
    }
    if (b == 0xFF || (q->scheme.id == LOFP_SCHEME_ULTRAQUANT && b == 0)) return -1000;
    return (int)b - 127;
}

lofp_status lofp_qtensor_scale_histogram(const lofp_qtensor *q, size_t *hist, size_t *none)
{
    if (!q || !hist || !q->scheme.block) return LOFP_ERR_INVALID_ARG;
    memset(hist, 0, LOFP_SCALE_EXP_BINS * sizeof *hist);
    if (none) *none = 0;
    size_t nb = q->rows * (q->kp / q->scheme.block);
    uint8_t *lin = malloc(nb ? nb : 1);
    if (!lin) return LOFP_ERR_NOMEM;
    lofp_status st = lofp_qtensor_linear_scales(q, lin);
    for (size_t i = 0; st == LOFP_OK && i < nb; i++) {
        int e = scale_exp(q, lin[i]) - LOFP_SCALE_EXP_MIN;
        if (e >= 0 && e < LOFP_SCALE_EXP_BINS) hist[e]++;
        else if (none) (*none)++;
    }
    free(lin);
    return st;
}

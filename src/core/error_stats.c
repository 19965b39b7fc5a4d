/* error_stats.c -- the error of an approximation against its original (lofp.h,
 * lofp_error_stats_compute): one definition of max error, RMSE, SNR and relative Frobenius error
 * for every front end that reports them. */
#include <math.h>

#include "core.h"

lofp_status lofp_error_stats_compute(const float *x, const float *y, size_t n, lofp_error_stats *out)
{
    if (!out || (n && (!x || !y))) return LOFP_ERR_INVALID_ARG;
    double se = 0, sx = 0, maxe = 0, maxx = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)y[i] - (double)x[i];
        se += e * e;
        sx += (double)x[i] * x[i];
        /* a NaN difference sticks: fmax alone would drop it */
        if (isnan(e) || isnan(maxe)) maxe = NAN;
        else if (fabs(e) > maxe) maxe = fabs(e);
        if (isnan(x[i]) || isnan(maxx)) maxx = NAN;
        else if (fabs((double)x[i]) > maxx) maxx = fabs((double)x[i]);
    }
    out->max_abs = maxe;
    out->rmse = n ? sqrt(se / (double)n) : 0.0;
    out->snr_db = se > 0 ? 10 * log10(sx / se) : INFINITY;
    out->rel_frobenius = sx > 0 ? sqrt(se / sx) : 0.0;
    out->x_max_abs = maxx;
    return LOFP_OK;
}

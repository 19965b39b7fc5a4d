/* method.c -- names of the quantization methods of lofp/method.h, and the one entry that runs a
 * tensor chunk by its plan (so pipelines hold no switch over methods). */
#include <string.h>

#include "lofp/method.h"

static const char *const method_names[LOFP_METHOD_COUNT_] = { "rtn", "mse", "gptq" };

const char *lofp_method_name(lofp_method m)
{
    return (unsigned)m < LOFP_METHOD_COUNT_ ? method_names[m] : NULL;
}

lofp_status lofp_method_from_name(const char *name, lofp_method *out)
{
    if (!name || !out) return LOFP_ERR_INVALID_ARG;
    for (unsigned i = 0; i < LOFP_METHOD_COUNT_; i++) {
        if (strcmp(name, method_names[i]) == 0) {
            *out = (lofp_method)i;
            return LOFP_OK;
        }
    }
    return LOFP_ERR_NOT_FOUND;
}

lofp_status lofp_method_quantize_rows(const lofp_scheme *s, const lofp_method_plan *p, lofp_dtype dt,
                                      const void *x, size_t row0, size_t rows, size_t k, float global_scale,
                                      uint8_t *codes, uint8_t *scales, lofp_quant_report *report)
{
    if (!p || p->method == LOFP_METHOD_RTN)
        return lofp_quantize_rows(s, dt, x, row0, rows, k, global_scale, codes, scales, report);
    if (p->method == LOFP_METHOD_MSE)
        return lofp_mse_quantize_rows(s, dt, x, row0, rows, k, global_scale, p->importance, p->window, codes,
                                      scales, NULL, report);
    if (p->method == LOFP_METHOD_GPTQ && p->factor)
        return lofp_gptq_quantize_rows(s, dt, x, row0, rows, k, global_scale, p->factor, p->gptq, codes, scales,
                                       report);
    return LOFP_ERR_INVALID_ARG;
}

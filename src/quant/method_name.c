/* method_name.c -- names of the quantization methods of lofp/method.h. */
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

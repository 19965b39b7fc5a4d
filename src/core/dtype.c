/* dtype.c -- the questions every component asks of a lofp_dtype before handing it to a
 * quantizer, and the one conversion of floating tensors to fp32 (the CLI, the file pipelines and
 * the checkpoint readers all read F32/BF16/F16/F64 through it). The dtype names, widths and .npy
 * descrs are the file layer's (src/io/io_util.c). */
#include <stdint.h>
#include <string.h>

#include "core.h"

int lofp_dtype_is_dense(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_F32 || dt == LOFP_DTYPE_BF16 || dt == LOFP_DTYPE_F16;
}

int lofp_dtype_is_float(lofp_dtype dt)
{
    return lofp_dtype_is_dense(dt) || dt == LOFP_DTYPE_F64;
}

lofp_status lofp_dtype_to_f32(lofp_dtype dt, const void *src, size_t n, float *dst)
{
    if (!lofp_dtype_is_float(dt) || (n && (!src || !dst))) return LOFP_ERR_INVALID_ARG;
    const unsigned char *p = src;
    /* one loop per type: the switch stays out of the element loop */
    switch (dt) {
    case LOFP_DTYPE_F32:
        if (n) memcpy(dst, p, n * sizeof(float));
        break;
    case LOFP_DTYPE_F64:
        for (size_t i = 0; i < n; i++) { double d; memcpy(&d, p + 8 * i, 8); dst[i] = (float)d; }
        break;
    case LOFP_DTYPE_F16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = lofp_fp16_to_fp32(h); }
        break;
    default: /* BF16 */
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = lofp_bf16_to_fp32(h); }
        break;
    }
    return LOFP_OK;
}

float lofp_dtype_load_f32(lofp_dtype dt, const void *src, size_t i)
{
    const unsigned char *p = src;
    float v = 0.0f;
    if (lofp_dtype_is_float(dt)) lofp_dtype_to_f32(dt, p + i * (dt == LOFP_DTYPE_F64 ? 8 : dt == LOFP_DTYPE_F32 ? 4 : 2), 1, &v);
    return v;
}

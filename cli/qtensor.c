/* qtensor.c -- the command line's conveniences around lofp tensor files (qtensor.h). */
#include "qtensor.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int qt_is_float(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_F32 || dt == LOFP_DTYPE_F16 || dt == LOFP_DTYPE_BF16 || dt == LOFP_DTYPE_F64;
}

float *qt_tensor_to_f32(const lofp_tensor_info *t)
{
    if (!qt_is_float(t->dtype)) return NULL;
    if (t->numel > SIZE_MAX / sizeof(float)) return NULL;
    float *out = malloc((t->numel ? t->numel : 1) * sizeof(float));
    if (!out) return NULL;
    const unsigned char *p = t->data;
    for (size_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case LOFP_DTYPE_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case LOFP_DTYPE_F64: { double d; memcpy(&d, p + 8 * i, 8); out[i] = (float)d; break; }
        case LOFP_DTYPE_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); out[i] = lofp_fp16_to_fp32(h); break; }
        default: { uint16_t h; memcpy(&h, p + 2 * i, 2); out[i] = lofp_bf16_to_fp32(h); break; }
        }
    }
    return out;
}

char *qt_meta_value(const lofp_qtensor *q)
{
    size_t n = lofp_qtensor_meta_format(q, NULL, 0);
    char *v = n ? malloc(n + 1) : NULL;
    if (v && lofp_qtensor_meta_format(q, v, n + 1) != n) { free(v); v = NULL; }
    return v;
}

const char **qt_list(const lofp_file *f, size_t *n, int *oom)
{
    size_t count = 0, nm = lofp_file_metadata_count(f);
    *n = 0;
    if (oom) *oom = 0;
    for (size_t i = 0; i < nm; i++) count += lofp_qfile_name_at(f, i) != NULL;
    if (!count) return NULL;
    const char **names = malloc(count * sizeof *names);
    if (!names) { if (oom) *oom = 1; return NULL; }
    for (size_t i = 0; i < nm; i++)
        if (lofp_qfile_name_at(f, i)) names[(*n)++] = lofp_qfile_name_at(f, i);
    return names;
}

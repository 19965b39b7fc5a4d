/* qtensor.c -- the command line's conveniences around lofp tensor files (qtensor.h). */
#include "qtensor.h"

#include <stdint.h>
#include <stdlib.h>

float *qt_tensor_to_f32(const lofp_tensor_info *t)
{
    if (!lofp_dtype_is_float(t->dtype) || t->numel > SIZE_MAX / sizeof(float)) return NULL;
    float *out = malloc((t->numel ? t->numel : 1) * sizeof(float));
    if (out && lofp_dtype_to_f32(t->dtype, t->data, t->numel, out) != LOFP_OK) { free(out); out = NULL; }
    return out;
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

/* qtensor.h -- the command line's conveniences around lofp tensor files. The convention itself
 * (the "lofp:T" metadata, T.codes / T.scales / T.global_scale, their checks) is the library's:
 * include/lofp/qfile.h. */
#ifndef LOFP_CLI_QTENSOR_H
#define LOFP_CLI_QTENSOR_H

#include "lofp/io.h"
#include "lofp/lofp.h"
#include "lofp/qfile.h"

/* q's "lofp:T" metadata value (lofp_qtensor_meta_format) in a new malloc'ed string; NULL when out
 * of memory or q is not describable. */
char *qt_meta_value(const lofp_qtensor *q);

/* Names of the quantized tensors in a file (lofp_qfile_name_at), in metadata order: a malloc'ed
 * array (caller frees; the strings are owned by the file) of *n entries. NULL with *n = 0 when
 * there are none or memory ran out (*oom = 1 then; oom may be NULL). */
const char **qt_list(const lofp_file *f, size_t *n, int *oom);

/* Converts any floating tensor (F32, F16, BF16, F64) to a malloc'ed fp32 array (caller frees).
 * F64 rounds to nearest. Returns NULL for other dtypes or on allocation failure. */
float *qt_tensor_to_f32(const lofp_tensor_info *t);

/* 1 for F32/F16/BF16/F64 tensors. */
int qt_is_float(lofp_dtype dt);

#endif

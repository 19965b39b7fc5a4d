/* qtensor.h -- the command line's conveniences around lofp tensor files. The convention itself
 * (the "lofp:T" metadata, T.codes / T.scales / T.global_scale, their checks) is the library's:
 * include/lofp/qfile.h. */
#ifndef LOFP_CLI_QTENSOR_H
#define LOFP_CLI_QTENSOR_H

#include "lofp/io.h"
#include "lofp/lofp.h"
#include "lofp/qfile.h"

/* Names of the quantized tensors in a file (lofp_qfile_name_at), in metadata order: a malloc'ed
 * array (caller frees; the strings are owned by the file) of *n entries. NULL with *n = 0 when
 * there are none or memory ran out (*oom = 1 then; oom may be NULL). */
const char **qt_list(const lofp_file *f, size_t *n, int *oom);

/* A floating tensor (lofp_dtype_is_float) as a malloc'ed fp32 array (caller frees), converted by
 * lofp_dtype_to_f32. Returns NULL for other dtypes or on allocation failure. */
float *qt_tensor_to_f32(const lofp_tensor_info *t);

#endif

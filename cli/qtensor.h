/* qtensor.h -- how a quantized tensor lives in a .safetensors file written by `lofp quantize`
 * (docs/CLI.md "File format"): T.codes, T.scales, T.global_scale and a "lofp:T" metadata entry
 * recording everything dequantize needs. */
#ifndef LOFP_CLI_QTENSOR_H
#define LOFP_CLI_QTENSOR_H

#include "lofp/io.h"
#include "lofp/lofp.h"

/* Most dimensions a quantized tensor may have: numpy's limit (NPY_MAXDIMS). Tensors with more
 * are reported and copied unchanged by quantize; metadata with more is an error. */
#define QT_MAX_DIMS 64

typedef struct {
    const char *name;              /* not owned: the file's metadata key (after "lofp:") or the
                                      input tensor's name */
    lofp_scheme s;
    lofp_layout layout;
    int pad_byte;                  /* packed-u32 pad byte as written */
    size_t ndim, shape[QT_MAX_DIMS];/* logical shape of the original tensor */
    size_t rows, k, kp;            /* rows = prod(shape[:-1]); k logical; kp padded */
    lofp_io_dtype src_dtype;       /* dtype of the original tensor */
    const lofp_tensor_info *codes_t, *scales_t, *global_t; /* the file's tensors (qt_load) */
    const uint8_t *codes;          /* points into a file mapping or an owned buffer */
    size_t codes_bytes;
    const uint8_t *scales;         /* in `layout` */
    size_t scales_bytes;
    float global;                  /* encode multiplier (1 unless two-level NVFP4) */
} qtensor;

/* Formats the metadata value for q into a new malloc'ed string (NULL when out of memory). */
char *qt_meta_format(const qtensor *q);

/* Parses a "lofp:T" metadata value into q (scheme, layout, shape...). Strict: every number is a
 * plain decimal in range, flags are 0 or 1, names are known, the shape is "[d0,...,dn]" of
 * positive dims whose product fits, and the whole is self-consistent. Returns LOFP_OK or
 * LOFP_ERR_FORMAT with a message in err. */
lofp_status qt_meta_parse(const char *value, qtensor *q, char *err, size_t errcap);

/* Fills q from an open file: metadata "lofp:<name>", tensors <name>.codes, <name>.scales and,
 * for two-level NVFP4, <name>.global_scale; checks dtypes, shapes and sizes against the scheme.
 * `name` must stay valid while q is used. */
lofp_status qt_load(const lofp_file *f, const char *path, const char *name, qtensor *q,
                    char *err, size_t errcap);

/* The dtypes and shapes `lofp quantize` writes for q's codes and scales (shape: up to
 * QT_MAX_DIMS entries; returns ndim). */
lofp_io_dtype qt_codes_dtype(const lofp_scheme *s);
lofp_io_dtype qt_scales_dtype(const lofp_scheme *s, lofp_layout l);
size_t qt_codes_shape(const qtensor *q, size_t *shape);
size_t qt_scales_shape(const qtensor *q, lofp_layout l, size_t *shape);

/* Linear scales [rows, kp/block] from q's layout, into out (rows * kp/block bytes). */
lofp_status qt_linear_scales(const qtensor *q, uint8_t *out);

/* Dequantizes q into out (rows * k fp32 values, logical K). */
lofp_status qt_dequantize(const qtensor *q, float *out);

/* Names of the quantized tensors in a file (from its "lofp:" metadata), in metadata order: a
 * malloc'ed array (caller frees; the strings are owned by the file) of *n entries. NULL with
 * *n = 0 when there are none or memory ran out (*oom = 1 then; oom may be NULL). */
const char **qt_list(const lofp_file *f, size_t *n, int *oom);

/* 1 when `name` is T.codes / T.scales / T.global_scale of a name in names[0..n). */
int qt_is_part(const char *name, const char **names, size_t n);

/* Converts any floating tensor (F32, F16, BF16, F64) to a malloc'ed fp32 array (caller frees).
 * F64 rounds to nearest. Returns NULL for other dtypes or on allocation failure. */
float *qt_tensor_to_f32(const lofp_tensor_info *t);

/* 1 for F32/F16/BF16/F64 tensors. */
int qt_is_float(lofp_io_dtype dt);

#endif

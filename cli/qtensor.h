/* qtensor.h -- how a quantized tensor lives in a .safetensors file written by `lofp quantize`
 * (docs/CLI.md "File format"): T.codes, T.scales, T.global_scale and a "lofp:T" metadata entry
 * recording everything dequantize needs. */
#ifndef LOFP_CLI_QTENSOR_H
#define LOFP_CLI_QTENSOR_H

#include "lofp/io.h"
#include "lofp/lofp.h"

#define QT_MAX_DIMS 8

typedef struct {
    char name[256];
    lofp_scheme s;
    lofp_layout layout;
    int pad_byte;                  /* packed-u32 pad byte as written */
    size_t ndim, shape[QT_MAX_DIMS];/* logical shape of the original tensor */
    size_t rows, k, kp;            /* rows = prod(shape[:-1]); k logical; kp padded */
    lofp_io_dtype src_dtype;       /* dtype of the original tensor */
    const uint8_t *codes;          /* points into a file mapping or an owned buffer */
    size_t codes_bytes;
    const uint8_t *scales;         /* in `layout` */
    size_t scales_bytes;
    float global;                  /* encode multiplier (1 unless two-level NVFP4) */
} qtensor;

/* Formats the metadata value for q into buf (cap bytes); returns 0 when it does not fit. */
int qt_meta_format(const qtensor *q, char *buf, size_t cap);

/* Parses a "lofp:T" metadata value into q (scheme, layout, shape...). Returns LOFP_OK or
 * LOFP_ERR_FORMAT with a message in err. */
lofp_status qt_meta_parse(const char *value, qtensor *q, char *err, size_t errcap);

/* Fills q from an open file: metadata "lofp:<name>", tensors <name>.codes, <name>.scales and,
 * for two-level NVFP4, <name>.global_scale; checks every size. */
lofp_status qt_load(const lofp_file *f, const char *path, const char *name, qtensor *q,
                    char *err, size_t errcap);

/* Linear scales [rows, kp/block] from q's layout, into out (rows * kp/block bytes). */
lofp_status qt_linear_scales(const qtensor *q, uint8_t *out);

/* Dequantizes q into out (rows * k fp32 values, logical K). */
lofp_status qt_dequantize(const qtensor *q, float *out);

/* Names of the quantized tensors in a file (from its "lofp:" metadata), in metadata order:
 * returns how many, writes up to max pointers owned by the file. */
size_t qt_list(const lofp_file *f, const char **names, size_t max);

/* Converts any floating tensor (F32, F16, BF16, F64) to a malloc'ed fp32 array (caller frees).
 * F64 rounds to nearest. Returns NULL for other dtypes or on allocation failure. */
float *qt_tensor_to_f32(const lofp_tensor_info *t);

/* 1 for F32/F16/BF16/F64 tensors. */
int qt_is_float(lofp_io_dtype dt);

#endif

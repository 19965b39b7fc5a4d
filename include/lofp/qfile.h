/*
 * qfile.h -- lofp's own tensor files: quantized tensors in a .safetensors file, described by a
 * "lofp:NAME" metadata entry, and the streaming pipelines that write and read whole files
 * (`lofp quantize`, `lofp dequantize`; lofp.save / lofp.load in Python use the same functions).
 *
 * A quantized tensor NAME of logical shape [..., K] (K padded to Kp, a whole number of blocks) is
 * stored as three tensors and one metadata entry:
 *
 *   NAME.codes         [..., Kp / 2] U8 (FP4, two codes a byte), [..., Kp] F8_E4M3 / F8_E5M2
 *                      (the FP8 schemes) or [..., Kp] U8 (FP6, MXINT8: one code a byte)
 *   NAME.scales        the block scales in the tensor's scale layout: linear [..., Kp / block]
 *                      (F8_E4M3 for UE4M3 scales, U8 for UltraQuant, else F8_E8M0), swizzle-128x4
 *                      [bytes] of the same dtype, packed-u32 / packed-u32:deepgemm [words, rows] U32
 *   NAME.global_scale  two-level NVFP4 only: one F32, the encode multiplier (a finite value > 0)
 *   "lofp:NAME"        "scheme=S;rounding=R;scale_rule=R;block=B;layout=L;pad_byte=P;shape=[d0,...];
 *                       padded_k=Kp;two_level=0|1;c=C;rotate=0|1;hadamard=butterfly|dense;seed=N;
 *                       source_dtype=F32|F16|BF16|F64;lofp_version=V[;profile=P]"
 *
 * This header is the only place that writes, parses and checks that convention (the lofp command,
 * the checkpoint reader and converter, and the Python package all call it; docs/IO.md "lofp tensor
 * files" lists the rules). Reading is strict: every field must parse, the description must be
 * self-consistent, and every stored tensor must have exactly the dtype, shape and byte size the
 * description implies, so that nothing sized from the metadata can read past a stored tensor.
 *
 * Conventions of lofp.h and io.h hold: errors come back as a status with a one-line message in an
 * optional lofp_io_error (naming the file and tensor); buffers are the caller's; everything here
 * is re-entrant and keeps no global state.
 */
#ifndef LOFP_QFILE_H
#define LOFP_QFILE_H

#include <stddef.h>
#include <stdint.h>

#include "lofp/io.h"
#include "lofp/lofp.h"
#include "lofp/method.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The metadata key of quantized tensor NAME is this prefix followed by NAME. */
#define LOFP_QFILE_KEY_PREFIX "lofp:"

/* Most dimensions a quantized tensor may have: numpy's limit (NPY_MAXDIMS). Metadata with more is
 * refused; `lofp quantize` copies a tensor with more unchanged. */

/* The description of one quantized tensor. Filled by lofp_qtensor_meta_parse() (the description
 * alone) or lofp_qtensor_load() (the description and the stored tensors); a writer fills the
 * description itself before lofp_qtensor_meta_format(). Plain data: copy it freely. */
typedef struct lofp_qtensor {
    const char *name;              /* not owned: the tensor's name (after "lofp:") */
    lofp_scheme scheme;            /* scheme, rounding, scale rule, block, two_level, pad, c,
                                      rotate, hadamard, seed, profile */
    lofp_layout layout;            /* the layout NAME.scales is stored in */
    int pad_byte;                  /* packed-u32 pad byte as written (0..254) */
    size_t ndim;                   /* 1..LOFP_MAX_NDIM */
    size_t shape[LOFP_MAX_NDIM]; /* logical shape of the original tensor, K last */
    size_t rows, k, kp;            /* rows = prod(shape[:-1]); k = shape[ndim-1]; kp padded */
    lofp_dtype src_dtype;       /* dtype of the original tensor (F32, F16, BF16 or F64) */
    /* set by lofp_qtensor_load (NULL / 0 otherwise); they point into the lofp_file */
    const lofp_tensor_info *codes_t, *scales_t, *global_t;
    const uint8_t *codes;          /* codes_bytes bytes */
    size_t codes_bytes;
    const uint8_t *scales;         /* scales_bytes bytes, in `layout` */
    size_t scales_bytes;
    float global;                  /* NVFP4 encode multiplier (1 unless two-level NVFP4) */
} lofp_qtensor;

/* ---- the metadata value ---------------------------------------------------------------------- */

/* Formats the "lofp:NAME" value of q's description (scheme, layout, pad_byte, shape, kp,
 * src_dtype; the stored tensors are not looked at). Writes it NUL-terminated into buf when
 * cap > its length, else writes nothing. Returns its length without the NUL (call with buf NULL,
 * cap 0 to size the buffer), or 0 when q names an unknown scheme, rounding, rule, layout, dtype or
 * profile, or has no dimensions or more than LOFP_MAX_NDIM. The bytes are fixed: files written by earlier versions carry the
 * same fields in the same order. Pure; thread-safe. */
LOFP_API size_t lofp_qtensor_meta_format(const lofp_qtensor *q, char *buf, size_t cap);

/* Parses a "lofp:NAME" value into q's description (name, stored tensors and global untouched).
 * Strict: the fields above are required (seed and profile optional) and given once; numbers are
 * plain decimals in range (no sign, no leading zeros); flags are 0 or 1; names are known; the
 * shape is "[d0,...,dn]" of 1..LOFP_MAX_NDIM positive dims whose product, and every buffer
 * sized from it (fp32 output, padded codes, scales), fits in size_t; padded_k is what the scheme
 * gives for K; the scheme validates. Returns LOFP_OK, or LOFP_ERR_FORMAT (LOFP_ERR_INVALID_ARG for
 * NULL pointers) with the reason in *err (may be NULL; the message does not name a file).
 * Thread-safe. */
LOFP_API lofp_status lofp_qtensor_meta_parse(const char *value, lofp_qtensor *q, lofp_io_error *err);

/* ---- the stored tensors ---------------------------------------------------------------------- */

/* The dtype NAME.codes has for scheme s. */
LOFP_API lofp_dtype lofp_qtensor_codes_dtype(const lofp_scheme *s);

/* The dtype NAME.scales has for scheme s in layout l. */
LOFP_API lofp_dtype lofp_qtensor_scales_dtype(const lofp_scheme *s, lofp_layout l);

/* The shape of NAME.codes for q's description, into shape[0..LOFP_MAX_NDIM); returns ndim. */
LOFP_API size_t lofp_qtensor_codes_shape(const lofp_qtensor *q, size_t *shape);

/* The shape of NAME.scales for q's description in layout l (l may differ from q->layout: a layout
 * conversion), into shape[0..LOFP_MAX_NDIM); returns ndim. */
LOFP_API size_t lofp_qtensor_scales_shape(const lofp_qtensor *q, lofp_layout l, size_t *shape);

/* Reads quantized tensor `name` of an open file: parses "lofp:<name>" and checks NAME.codes,
 * NAME.scales and (two-level NVFP4) NAME.global_scale against it -- dtype, shape and byte size
 * each (the codes' size is lofp_codes_bytes, the scales' lofp_layout_required_bytes of the padded
 * K), the global a finite F32 > 0 of 4 bytes. On LOFP_OK q holds the description, pointers to the
 * stored tensors (valid while f is open) and the global; `name` must stay valid while q is used.
 * Errors: LOFP_ERR_NOT_FOUND (no such metadata entry), LOFP_ERR_FORMAT (bad metadata, a missing
 * tensor, a wrong dtype, shape or size), LOFP_ERR_NOMEM, LOFP_ERR_INVALID_ARG; the message names
 * `path` (how the caller names the file in messages), the tensor and what disagrees.
 * Thread-safe (f is only read). */
LOFP_API lofp_status lofp_qtensor_load(const lofp_file *f, const char *path, const char *name,
                                       lofp_qtensor *q, lofp_io_error *err);

/* The linear scales [rows, kp / block] of a loaded tensor (from its layout) into out
 * (rows * kp / block bytes). Returns LOFP_OK or lofp_layout_to_linear's error. */
LOFP_API lofp_status lofp_qtensor_linear_scales(const lofp_qtensor *q, uint8_t *out);

/* Dequantizes a loaded tensor into out (rows * k fp32 values, logical K; UltraQuant stays in the
 * rotated basis). Allocates one tensor's linear scales. Returns LOFP_OK, LOFP_ERR_NOMEM or
 * lofp_dequantize's error. */
LOFP_API lofp_status lofp_qtensor_dequantize(const lofp_qtensor *q, float *out);

/* The error of a loaded tensor q against a dense original `orig` (a floating tensor,
 * lofp_dtype_is_float, of q->rows * q->k elements; its shape is not compared): q is dequantized and,
 * for UltraQuant with rotate, rotated back row by row (lofp_hadamard_inplace) so that both are in
 * the original basis; orig is read as fp32 (lofp_dtype_to_f32); *out gets
 * lofp_error_stats_compute(orig, q). Allocates two fp32 copies of the tensor, freed before
 * returning. Returns LOFP_OK; LOFP_ERR_SHAPE when the element counts differ; LOFP_ERR_INVALID_ARG
 * for a NULL argument or an orig that is not floating; LOFP_ERR_NOMEM; lofp_qtensor_dequantize's
 * error. Thread-safe (q and orig are only read). */
LOFP_API lofp_status lofp_qtensor_error_stats(const lofp_qtensor *q, const lofp_tensor_info *orig,
                                              lofp_error_stats *out);

/* Bins of lofp_qtensor_scale_histogram: binary exponents LOFP_SCALE_EXP_MIN and up. */
#define LOFP_SCALE_EXP_MIN (-150)
#define LOFP_SCALE_EXP_BINS 300

/* Histogram of a loaded tensor's block scales by binary exponent floor(log2(scale)):
 * hist[e - LOFP_SCALE_EXP_MIN] counts the scales of exponent e (an E8M0 byte b has e = b - 127;
 * a UE4M3 scale its value's exponent). *none (may be NULL) counts the scales that have none: E8M0
 * NaN (0xFF), UltraQuant zero groups (0x00), UE4M3 zero or NaN. hist (LOFP_SCALE_EXP_BINS entries,
 * caller-owned) is overwritten. Allocates one tensor's linear scales. Returns LOFP_OK,
 * LOFP_ERR_INVALID_ARG (NULL q or hist), LOFP_ERR_NOMEM or lofp_qtensor_linear_scales' error.
 * Thread-safe. */
LOFP_API lofp_status lofp_qtensor_scale_histogram(const lofp_qtensor *q, size_t *hist, size_t *none);

/* The quantized tensor that metadata entry i of f describes: its name (after "lofp:", owned by f)
 * when the entry's key starts with "lofp:", else NULL (also when i is out of range). Iterate i
 * over lofp_file_metadata_count(f) to list a file's quantized tensors in metadata order. */
LOFP_API const char *lofp_qfile_name_at(const lofp_file *f, size_t i);

/* The part a stored tensor name plays: 1 ".codes", 2 ".scales", 3 ".global_scale", else 0; with
 * *stem_len (may be NULL) the length of NAME before the suffix. Whether NAME is quantized is the
 * caller's lookup ("lofp:" + NAME in the metadata). Pure. */
LOFP_API int lofp_qfile_part(const char *tensor_name, size_t *stem_len);

/* ---- streaming pipelines --------------------------------------------------------------------- */

/* How a pipeline opens and closes its output writer. NULL members (or a NULL pointer to this
 * struct) mean lofp_writer_open / lofp_writer_finish / lofp_writer_abort. A caller that removes
 * the temporary output from a signal handler (lofp_writer_unlink_temp) passes its own, which
 * block the signals around each call and record the writer in flight -- the `lofp` command does.
 * Each gets `ctx` first and otherwise the arguments of the io.h function it replaces. */
typedef struct lofp_qfile_writer_ops {
    lofp_status (*open)(void *ctx, const char *path, lofp_file_format fmt,
                        const lofp_tensor_desc *tensors, size_t n,
                        const lofp_metadata_entry *metadata, size_t n_meta, unsigned flags,
                        lofp_writer **out, lofp_io_error *err);
    lofp_status (*finish)(void *ctx, lofp_writer *w, lofp_io_error *err);
    void (*abort)(void *ctx, lofp_writer *w);
    void *ctx;
} lofp_qfile_writer_ops;

/* Options of lofp_qfile_quantize(); start from lofp_qfile_quantize_options_init(). */
typedef struct lofp_qfile_quantize_options {
    lofp_scheme scheme;            /* validated by the caller (lofp_scheme_validate); threads
                                      inside; the default is nvfp4's preset */
    lofp_layout layout;            /* the scale layout written (default linear) */
    int pad_byte;                  /* packed-u32 pad byte 0..254; -1 (default): 127 for
                                      packed-u32, 0 otherwise */
    const char *const *include;    /* fnmatch globs: quantize only names matching one (each must
                                      match some tensor); n_include 0: every floating tensor */
    size_t n_include;
    const char *const *exclude;    /* never quantize names matching one of these */
    size_t n_exclude;
    size_t chunk_bytes;            /* input read per step (0: LOFP_IO_CHUNK_BYTES) */
    lofp_method method;            /* how codes and scales are chosen (lofp/method.h): RTN (0,
                                      default), MSE or GPTQ; others than RTN need the lofp profile */
    const char *calibration;       /* statistics file (lofp/calib.h) named by the input's tensor
                                      names: GPTQ needs lofp's Hessian file, MSE weighs by its
                                      diagonal (NULL: unweighted) */
    double damp;                   /* GPTQ damping relative to mean(diag H) (0: 0.01) */
    int act_order;                 /* GPTQ: columns by descending diag H */
    int mse_scales;                /* GPTQ: block scales by the weighted MSE search */
    unsigned write_flags;          /* lofp_writer_open flags (LOFP_WRITE_NO_SYNC) */
    const lofp_qfile_writer_ops *writer; /* NULL: io.h's writer functions */
    /* called before each input tensor is written (i of n; may be NULL) */
    void (*progress)(void *ctx, const char *tensor, size_t i, size_t n);
    /* one line for each thing worth telling that is not an error: a selected tensor that is
       copied unchanged (not floating, a scalar, more than LOFP_MAX_NDIM dims), blocks with
       non-finite values that were propagated (may be NULL) */
    void (*note)(void *ctx, const char *line);
    void *ctx;
} lofp_qfile_quantize_options;

/* Default options: nvfp4, linear scales, pad byte by layout, everything selected, 4 MiB chunks,
 * fsync on finish, io.h's writer, no callbacks. */
LOFP_API void lofp_qfile_quantize_options_init(lofp_qfile_quantize_options *o);

/* Quantizes every selected floating tensor (F32, F16, BF16, F64 of 1..LOFP_MAX_NDIM dims) of
 * `in` (.safetensors or .npy) into the lofp tensor file `out` (.safetensors; never `in` itself):
 * NAME.codes, NAME.scales, NAME.global_scale and "lofp:NAME" as above; other tensors and the
 * input's metadata are copied unchanged. Every output tensor is planned and checked before the
 * output is created; then the header is written first and each input tensor is read in chunks of
 * rows and its codes and scales appended as produced (lofp_qfile_quantize_tensor), so memory stays
 * near a few chunks plus one tensor's scales when the layout is not linear. A producer profile
 * (scheme.profile) reads each tensor whole. The output is atomic: on any failure it is removed
 * and an existing `out` is untouched. Returns LOFP_OK or the first error (LOFP_ERR_IO,
 * LOFP_ERR_FORMAT, LOFP_ERR_INVALID_ARG, LOFP_ERR_SHAPE, LOFP_ERR_NONFINITE, LOFP_ERR_NOMEM...), its message naming the file, tensor and flat index. Re-entrant. */
LOFP_API lofp_status lofp_qfile_quantize(const char *in, const char *out,
                                         const lofp_qfile_quantize_options *o, lofp_io_error *err);

/* Options of lofp_qfile_dequantize(); start from lofp_qfile_dequantize_options_init(). */
typedef struct lofp_qfile_dequantize_options {
    lofp_dtype dtype;           /* LOFP_DTYPE_F32 (default), LOFP_DTYPE_BF16 or LOFP_DTYPE_F16 (round to
                                      nearest even) */
    unsigned threads;              /* worker threads of lofp_dequantize (default 1) */
    size_t chunk_bytes;            /* output produced per step (0: 2 MiB) */
    unsigned write_flags;          /* lofp_writer_open flags */
    const lofp_qfile_writer_ops *writer; /* NULL: io.h's writer functions */
    void (*progress)(void *ctx, const char *tensor, size_t i, size_t n); /* may be NULL */
    void *ctx;
} lofp_qfile_dequantize_options;

/* Default options: F32, one thread, 2 MiB chunks, fsync on finish, io.h's writer. */
LOFP_API void lofp_qfile_dequantize_options_init(lofp_qfile_dequantize_options *o);

/* Dequantizes every quantized tensor of the lofp tensor file `in` to its logical shape in
 * `out` (.safetensors, or .npy when the result is exactly one tensor; never `in` itself); other
 * tensors and the metadata that is not "lofp:" are copied unchanged. Every quantized tensor is
 * loaded and checked (lofp_qtensor_load) before the output is created; each is then decoded in
 * chunks of rows (lofp_qfile_dequantize_tensor). Atomic like lofp_qfile_quantize. Returns LOFP_OK,
 * LOFP_ERR_NOT_FOUND (no quantized tensor), or the first error with its message. Re-entrant. */
LOFP_API lofp_status lofp_qfile_dequantize(const char *in, const char *out,
                                           const lofp_qfile_dequantize_options *o,
                                           lofp_io_error *err);

/* Rewrites the scales of every quantized tensor of the lofp tensor file `in` in `layout` (linear,
 * swizzle-128x4, packed-u32, packed-u32:deepgemm) into `out` (.safetensors; never `in` itself):
 * NAME.scales gets the layout's dtype and shape, "lofp:NAME" its layout and pad byte; the codes,
 * every other tensor and the other metadata are copied unchanged (in chunks). pad_byte fills
 * packed-u32 padding (0..254, or -1 for the layout's default: 127 TileLang, 0 DeepGEMM). Every
 * quantized tensor is loaded and checked (lofp_qtensor_load) before the output is created; memory
 * is one tensor's scales in both layouts plus a chunk. write_flags are lofp_writer_open's; writer
 * (may be NULL) replaces io.h's writer functions. Atomic like lofp_qfile_quantize. Returns
 * LOFP_OK; LOFP_ERR_NOT_FOUND (no quantized tensor); LOFP_ERR_INVALID_ARG (NULL, out is in, a bad
 * layout or pad byte); or the first error with its message. Re-entrant. */
LOFP_API lofp_status lofp_qfile_relayout(const char *in, const char *out, lofp_layout layout, int pad_byte,
                                         unsigned write_flags, const lofp_qfile_writer_ops *writer,
                                         lofp_io_error *err);

/* What lofp_qfile_quantize_tensor did beyond writing. */
typedef struct lofp_qfile_tensor_report {
    float global;                  /* the NVFP4 encode multiplier used (1 for other schemes) */
    size_t nonfinite_blocks;       /* blocks whose non-finite values were propagated */
} lofp_qfile_tensor_report;

/* The per-tensor core of lofp_qfile_quantize, for any pipeline that streams one tensor of an open
 * file into a writer (the checkpoint converter's quantizing path is one): reads tensor t of f
 * (`path` names f in messages) in chunks of about chunk_bytes (0: LOFP_IO_CHUNK_BYTES) and
 * quantizes it as q describes (q->scheme with its threads, q->layout, q->pad_byte, q->rows, k, kp;
 * t must be a floating tensor of q->rows * q->k values). Appends the codes to writer output
 * out_index[0] and the scales, in q->layout, to out_index[1]; for two-level NVFP4 the encode
 * multiplier goes to out_index[2] unless that is SIZE_MAX. `global` (may be NULL) fixes the
 * NVFP4 multiplier (a fused group's); else it is the tensor's own, found in a first pass over the
 * chunks. Memory: a few chunks, plus the tensor's linear scales when q->layout is not linear; a
 * producer profile reads the tensor whole. `plan` (may be NULL: round to nearest) chooses the
 * method (lofp/method.h) each chunk is quantized by; methods other than RTN are refused under a
 * producer profile. Returns LOFP_OK (report filled; may be NULL) or the
 * error with a message naming path, tensor and flat index (LOFP_ERR_NONFINITE, also for an F64
 * value outside the fp32 range; lofp_quantize's and the writer's errors). The writer is not aborted. */
LOFP_API lofp_status lofp_qfile_quantize_tensor(const lofp_file *f, const char *path,
                                                const lofp_tensor_info *t, const lofp_qtensor *q,
                                                const lofp_method_plan *plan,
                                                const float *global, size_t chunk_bytes,
                                                lofp_writer *w, const size_t out_index[3],
                                                lofp_qfile_tensor_report *report,
                                                lofp_io_error *err);

/* The per-tensor core of lofp_qfile_dequantize: decodes a loaded tensor q of f (threads from
 * q->scheme.threads) in chunks of about chunk_bytes (0: 2 MiB) of output in `dtype` (F32, BF16,
 * F16) and appends them to writer output `index` (rows * k values). Memory: a few chunks, plus
 * the tensor's linear scales when its layout is not linear. Returns LOFP_OK or the error with a
 * message naming the tensor. The writer is not aborted. */
LOFP_API lofp_status lofp_qfile_dequantize_tensor(const lofp_file *f, const lofp_qtensor *q,
                                                  lofp_dtype dtype, size_t chunk_bytes,
                                                  lofp_writer *w, size_t index, lofp_io_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_QFILE_H */

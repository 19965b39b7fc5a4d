/*
 * calib.h -- calibration statistics of a model's linear layers: what the activation-aware
 * quantization methods need to know about the inputs each weight sees. Two files are read:
 *
 *   - lofp's calibration file (written by `lofp calibrate`): one safetensors file with
 *     __metadata__ format "lofp-calibration", version "1", statistic "hessian" or "diag", and per
 *     linear weight W (named as its checkpoint names it) the tensors
 *         "<W>.xtx"    F32 [k, k]  sum over calibration tokens of x^T x   (statistic "hessian")
 *         "<W>.x2"     F32 [k]     sum over calibration tokens of x * x   (statistic "diag")
 *         "<W>.tokens" I64 [1]     how many tokens (rows x) were summed;
 *   - llama.cpp's importance matrix (llama-imatrix's GGUF output): general.type "imatrix",
 *     "<W>.in_sum2" F32 ggml ne [k] or [k, 1] and "<W>.counts" F32 ne [1] or [1, 1].
 *     Files of MoE experts ([k, n_mat] with n_mat > 1) are refused by lofp_calib_find
 *     (LOFP_ERR_UNSUPPORTED); the legacy imatrix.dat format is not read.
 *
 * docs/QUALITY.md "Calibration files" describes both layouts and every check.
 *
 * Normalisation. Whatever the file, lofp_calib_find hands out MEANS over the calibration tokens:
 * diag[i] = sum_t x_t[i]^2 / tokens (what llama.cpp's quantizer uses as the importance: in_sum2 /
 * counts) and hess[i*k + j] = sum_t x_t[i] x_t[j] / tokens; each value is the stored fp32 sum
 * divided by the token count in double and rounded once to float, so diag[i] == hess[i*k + i]
 * bit for bit for a Hessian file.
 *
 * Conventions of io.h hold: errors come back as a status plus a one-line message in a caller-owned
 * lofp_io_error naming the file, the tensor and, for a bad value, its index; outputs are the
 * caller's buffers.
 *
 * Memory: the file is mapped read-only; lofp_calib_find copies one layer's statistic into the
 * caller's buffers and touches nothing else, so memory stays bounded by one layer.
 *
 * Thread-safety: an open lofp_calib is immutable; any number of threads may call
 * lofp_calib_find and the queries on it at once. lofp_calib_close must not race them.
 */
#ifndef LOFP_CALIB_H
#define LOFP_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "lofp/io.h"
#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a calibration file holds (pinned). */
typedef enum lofp_calib_statistic {
    LOFP_CALIB_DIAG = 1,     /* the diagonal of X^T X only (mean of x^2 per input channel) */
    LOFP_CALIB_HESSIAN = 2   /* the full X^T X of every layer (its diagonal too) */
} lofp_calib_statistic;

/* Which file it is (pinned). */
typedef enum lofp_calib_source {
    LOFP_CALIB_SOURCE_LOFP = 1,     /* lofp's safetensors calibration file */
    LOFP_CALIB_SOURCE_IMATRIX = 2   /* llama.cpp's imatrix GGUF */
} lofp_calib_source;

typedef struct lofp_calib lofp_calib;

/* Opens `path`: a GGUF (by its magic) must be a llama.cpp imatrix (general.type "imatrix"),
 * anything else is read as lofp's safetensors calibration file (its metadata format, version and
 * statistic must be as above). The container is validated completely (io's safetensors checks,
 * the GGUF parser's) and the list of weights is gathered; each layer's values are checked when
 * lofp_calib_find reads them. On success returns LOFP_OK and a new handle in *out, released with
 * lofp_calib_close. On failure returns LOFP_ERR_IO / LOFP_ERR_NOT_FOUND (no such file),
 * LOFP_ERR_FORMAT (malformed container, wrong metadata, a tensor name without its partner, a
 * statistic of the wrong dtype), LOFP_ERR_UNSUPPORTED (another version), LOFP_ERR_NOMEM or
 * LOFP_ERR_INVALID_ARG, with *out NULL and *err filled. Re-entrant. */
LOFP_API lofp_status lofp_calib_open(const char *path, lofp_calib **out, lofp_io_error *err);

/* The same over `len` bytes at `buf` (tests and fuzzers). The handle points into buf: the caller
 * keeps it alive and unchanged until lofp_calib_close. `name` (may be NULL) names it in messages. */
LOFP_API lofp_status lofp_calib_open_memory(const void *buf, size_t len, const char *name,
                                            lofp_calib **out, lofp_io_error *err);

/* Releases the handle and its mapping. NULL is a no-op. */
LOFP_API void lofp_calib_close(lofp_calib *c);

/* Returns LOFP_CALIB_HESSIAN when the file holds full matrices, else LOFP_CALIB_DIAG. */
LOFP_API lofp_calib_statistic lofp_calib_kind(const lofp_calib *c);

/* Returns LOFP_CALIB_SOURCE_LOFP or LOFP_CALIB_SOURCE_IMATRIX. */
LOFP_API lofp_calib_source lofp_calib_source_of(const lofp_calib *c);

/* Returns the number of weights the file has statistics for. */
LOFP_API size_t lofp_calib_count(const lofp_calib *c);

/* Returns the name of weight i (0 <= i < count) in name order, owned by c, or NULL when out of
 * range. */
LOFP_API const char *lofp_calib_name(const lofp_calib *c, size_t i);

/* Returns the value of a file-level entry, owned by c, or NULL when absent: lofp files: their
 * __metadata__ ("model", "samples", "tokens", ...); imatrix files: the string or number KV pairs
 * "imatrix.chunk_count", "imatrix.chunk_size" (as decimal text) and "imatrix.datasets" (the
 * first dataset). */
LOFP_API const char *lofp_calib_meta(const lofp_calib *c, const char *key);

/* The statistics of the weight named `weight` (exactly as the file names it), whose input
 * dimension is `k`:
 *   diag     caller buffer of k floats, or NULL: the mean of x^2 per input channel;
 *   hess     caller buffer of k*k floats (row-major), or NULL: the mean of x^T x (Hessian files
 *            only: LOFP_ERR_UNSUPPORTED for a diagonal file or an imatrix);
 *   tokens   may be NULL: the number of calibration tokens the sums are over.
 * Returns LOFP_OK; LOFP_ERR_NOT_FOUND when the file has no statistics for `weight` (the message
 * names it); LOFP_ERR_MISMATCH when the stored statistic's length is not k (the message names both
 * shapes: a file of another model); LOFP_ERR_FORMAT for a bad value (a NaN or infinity anywhere,
 * a negative diagonal entry, a token count that is not a whole number >= 1; the message names
 * the file, the tensor and the flat index); LOFP_ERR_SIZE_OVERFLOW when k*k overflows;
 * LOFP_ERR_UNSUPPORTED for an imatrix entry of several matrices (MoE experts);
 * LOFP_ERR_INVALID_ARG for NULL c / weight, or k == 0. On failure the buffers' contents are
 * unspecified. Thread-safe on one handle. */
LOFP_API lofp_status lofp_calib_find(const lofp_calib *c, const char *weight, size_t k,
                                     float *diag, float *hess, uint64_t *tokens,
                                     lofp_io_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_CALIB_H */

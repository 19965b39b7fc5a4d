/*
 * io.h -- tensor files: .npy and .safetensors, read through mmap and written atomically.
 *
 * This header extends lofp.h (whose conventions hold here) with one deliberate exception:
 * reading a file yields an opaque handle, lofp_file, that owns the file's mapping and the parsed
 * table of tensors. lofp_file_open*() create it and lofp_file_close() releases it, like FILE*.
 * Every pointer a handle hands out (tensor names, shapes, data, metadata strings) points into
 * memory the handle owns and stays valid until lofp_file_close().
 *
 * Errors. Every function that can fail takes an optional `lofp_io_error *err` (NULL = not
 * interested). On failure it returns the status and also stores it in err->status together with a
 * one-line, NUL-terminated message naming the file, the tensor (when there is one) and what is
 * wrong, e.g.
 *     model.safetensors: tensor 'w.scales': data_offsets [0, 20] span 20 bytes but shape [4, 6] x U8 needs 24
 * On success err->status is LOFP_OK and err->message is "". The struct is owned by the caller and
 * written only by the call it is passed to, so the design is re-entrant: no global or thread-local
 * "last error" exists.
 *
 * Status codes used here:
 *   LOFP_ERR_IO          the file could not be opened, mapped, written, synced or renamed
 *                        (the message carries strerror(errno)).
 *   LOFP_ERR_FORMAT      the bytes are malformed: bad magic, header length past the end, JSON or
 *                        Python-literal syntax errors, duplicate names or keys, unknown dtypes,
 *                        offsets out of range / overlapping / leaving gaps, shape x dtype not equal
 *                        to the byte length, sizes that overflow 64 bits, trailing bytes.
 *   LOFP_ERR_UNSUPPORTED a well-formed file lofp does not read: .npy in Fortran order, object
 *                        (pickled) or structured arrays, big-endian data, dtypes outside the list
 *                        below, .npy format versions other than 1.0 / 2.0 / 3.0; or a write request
 *                        the format cannot hold (BF16 or FP8 into .npy, metadata into .npy).
 *   LOFP_ERR_INVALID_ARG NULL pointers, unknown enums, a write whose shape x dtype differs from
 *                        the byte length given, duplicate or invalid (non-UTF-8) names.
 *   LOFP_ERR_SIZE_OVERFLOW a size computation of a write request would overflow size_t.
 *   LOFP_ERR_NOMEM       an allocation failed.
 *   LOFP_ERR_BUFFER_TOO_SMALL lofp_file_encode() got a buffer smaller than the encoding.
 *
 * Thread-safety: an open lofp_file is immutable; any number of threads may query it at once.
 * lofp_file_close() must not race with queries of the same handle. Different handles and writes
 * of different paths are independent.
 *
 * docs/IO.md describes every validation rule, the F4 logical-shape rule and the atomic-write
 * procedure.
 */
#ifndef LOFP_IO_H
#define LOFP_IO_H

#include <stddef.h>
#include <stdint.h>

#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                      */
/* ------------------------------------------------------------------------------------------ */

#define LOFP_IO_MESSAGE_CAP 512

/* Filled by the function it is passed to; see the top of this header. */
typedef struct lofp_io_error {
    lofp_status status;
    char message[LOFP_IO_MESSAGE_CAP];
} lofp_io_error;

/* ------------------------------------------------------------------------------------------ */
/* Tensor dtypes of files (pinned, append-only)                                                */
/* ------------------------------------------------------------------------------------------ */

/* The element types a tensor in a file can have. The safetensors names are in comments; .npy
 * holds the ones with a numpy descr. */
typedef enum lofp_io_dtype {
    LOFP_IO_BOOL = 1,         /* "BOOL"        .npy '|b1'  one byte, 0 or 1 */
    LOFP_IO_U8 = 2,           /* "U8"          .npy '|u1' */
    LOFP_IO_I8 = 3,           /* "I8"          .npy '|i1' */
    LOFP_IO_U16 = 4,          /* "U16"         .npy '<u2' */
    LOFP_IO_I16 = 5,          /* "I16"         .npy '<i2' */
    LOFP_IO_U32 = 6,          /* "U32"         .npy '<u4' (packed-u32 scale words) */
    LOFP_IO_I32 = 7,          /* "I32"         .npy '<i4' */
    LOFP_IO_U64 = 8,          /* "U64"         .npy '<u8' */
    LOFP_IO_I64 = 9,          /* "I64"         .npy '<i8' */
    LOFP_IO_F16 = 10,         /* "F16"         .npy '<f2' */
    LOFP_IO_BF16 = 11,        /* "BF16"        safetensors only */
    LOFP_IO_F32 = 12,         /* "F32"         .npy '<f4' */
    LOFP_IO_F64 = 13,         /* "F64"         .npy '<f8' */
    LOFP_IO_F8_E4M3 = 14,     /* "F8_E4M3"     torch float8_e4m3fn, ml_dtypes float8_e4m3fn */
    LOFP_IO_F8_E5M2 = 15,     /* "F8_E5M2" */
    LOFP_IO_F8_E8M0 = 16,     /* "F8_E8M0"     torch float8_e8m0fnu */
    LOFP_IO_F4 = 17,          /* "F4"          E2M1, two per byte, LOGICAL shape (see below) */
    LOFP_IO_F6_E2M3 = 18,     /* "F6_E2M3"     6 bits, packed; shape is the logical count */
    LOFP_IO_F6_E3M2 = 19,     /* "F6_E3M2" */
    LOFP_IO_F8_E4M3FNUZ = 20, /* "F8_E4M3FNUZ" */
    LOFP_IO_F8_E5M2FNUZ = 21, /* "F8_E5M2FNUZ" */
    LOFP_IO_C64 = 22,         /* "C64"         .npy '<c8' */
    LOFP_IO_DTYPE_COUNT_ = 23
} lofp_io_dtype;

/* Returns the safetensors name of dt ("F32", "F4", ...), a static string, or NULL if unknown. */
LOFP_API const char *lofp_io_dtype_name(lofp_io_dtype dt);

/* Looks a dtype up by its safetensors name (exact, case-sensitive). Returns LOFP_OK and sets
 * *out, or LOFP_ERR_NOT_FOUND. */
LOFP_API lofp_status lofp_io_dtype_from_name(const char *name, lofp_io_dtype *out);

/* Returns the storage width of one element in bits (4 for F4, 6 for F6, 8, 16, 32 or 64), or 0
 * for an unknown dtype. */
LOFP_API unsigned lofp_io_dtype_bits(lofp_io_dtype dt);

/* Bytes a tensor of `dt` with the (logical) shape[0..ndim) occupies: prod(shape) * bits / 8.
 * F4 tensors hold two elements per byte, so prod(shape) must be even (F6: a multiple of 4).
 * Writes *nbytes and returns LOFP_OK; LOFP_ERR_SIZE_OVERFLOW when the product overflows size_t;
 * LOFP_ERR_SHAPE when the element count does not fill whole bytes; LOFP_ERR_INVALID_ARG for an
 * unknown dtype or NULL pointers (shape may be NULL when ndim is 0). Pure function. */
LOFP_API lofp_status lofp_io_tensor_bytes(lofp_io_dtype dt, const size_t *shape, size_t ndim,
                                          size_t *nbytes);

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum lofp_file_format {
    LOFP_FORMAT_AUTO = 0,        /* reading: by content (the .npy magic, else safetensors);
                                    writing: by the path's extension (.npy / .safetensors) */
    LOFP_FORMAT_NPY = 1,
    LOFP_FORMAT_SAFETENSORS = 2
} lofp_file_format;

/* One tensor of an open file. Owned by the lofp_file; valid until lofp_file_close(). */
typedef struct lofp_tensor_info {
    const char *name;     /* NUL-terminated UTF-8; a .npy's single tensor is named after the
                             file's stem ("w.npy" -> "w") */
    lofp_io_dtype dtype;
    size_t ndim;          /* 0 for a scalar */
    const size_t *shape;  /* ndim dims; LOGICAL elements (an F4 [4, 32] tensor has 64 bytes) */
    size_t numel;         /* product of the shape (1 for a scalar) */
    size_t offset;        /* byte offset of the data from the start of the file */
    size_t nbytes;        /* byte length of the data */
    const void *data;     /* start of the data inside the read-only mapping; aligned only as the
                             file lays it out (files lofp writes align every tensor to its
                             element size), so copy with memcpy or check alignment first */
} lofp_tensor_info;

/* One __metadata__ entry (safetensors); both strings NUL-terminated UTF-8. */
typedef struct lofp_metadata_entry {
    const char *key;
    const char *value;
} lofp_metadata_entry;

typedef struct lofp_file lofp_file;

/* Opens `path` read-only, maps it with mmap and validates it completely (docs/IO.md lists every
 * check). `fmt` is LOFP_FORMAT_AUTO, NPY or SAFETENSORS. On success returns LOFP_OK and stores a
 * new handle in *out, which the caller releases with lofp_file_close(). On failure returns
 * LOFP_ERR_IO (open, stat, not a regular file, mmap), LOFP_ERR_FORMAT, LOFP_ERR_UNSUPPORTED,
 * LOFP_ERR_NOMEM or LOFP_ERR_INVALID_ARG, sets *out to NULL and fills *err (may be NULL). The file
 * is never written. Truncating the file while it is open is undefined (SIGBUS), as for every
 * mmap reader. Re-entrant. */
LOFP_API lofp_status lofp_file_open(const char *path, lofp_file_format fmt, lofp_file **out,
                                    lofp_io_error *err);

/* Same as lofp_file_open() over the `len` bytes at `buf` (the in-memory entry point the file
 * reader itself uses; fuzzers and tests call it directly). The handle points into buf without
 * copying it: the caller keeps buf alive and unchanged until lofp_file_close(). `name` (may be
 * NULL) is used in messages and gives a .npy tensor its name (its stem; "array" when NULL). */
LOFP_API lofp_status lofp_file_open_memory(const void *buf, size_t len, lofp_file_format fmt,
                                           const char *name, lofp_file **out, lofp_io_error *err);

/* Unmaps and frees everything the handle owns. NULL is a no-op. */
LOFP_API void lofp_file_close(lofp_file *f);

/* Returns the format of an open file (LOFP_FORMAT_NPY or LOFP_FORMAT_SAFETENSORS). */
LOFP_API lofp_file_format lofp_file_format_of(const lofp_file *f);

/* Returns the number of tensors (1 for .npy). */
LOFP_API size_t lofp_file_count(const lofp_file *f);

/* Returns tensor i (0 <= i < count) in data order (ascending offset), or NULL when i is out of
 * range. The struct is owned by the handle. */
LOFP_API const lofp_tensor_info *lofp_file_tensor(const lofp_file *f, size_t i);

/* Returns the tensor called `name` (exact byte match), or NULL. O(log n). */
LOFP_API const lofp_tensor_info *lofp_file_find(const lofp_file *f, const char *name);

/* Returns the number of __metadata__ entries (0 for .npy and when absent). */
LOFP_API size_t lofp_file_metadata_count(const lofp_file *f);

/* Returns metadata entry i in file order, or NULL when out of range. Owned by the handle. */
LOFP_API const lofp_metadata_entry *lofp_file_metadata(const lofp_file *f, size_t i);

/* Returns the metadata value for `key`, or NULL when absent. Owned by the handle. */
LOFP_API const char *lofp_file_metadata_get(const lofp_file *f, const char *key);

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* A tensor to write. Nothing is retained after the call. */
typedef struct lofp_tensor_desc {
    const char *name;     /* UTF-8, unique, not "__metadata__"; ignored (may be NULL) for .npy */
    lofp_io_dtype dtype;
    size_t ndim;
    const size_t *shape;  /* LOGICAL shape: an F4 tensor of K codes per row has last dim K, even */
    const void *data;     /* nbytes bytes, little-endian; may be NULL when nbytes == 0 */
    size_t nbytes;        /* must equal lofp_io_tensor_bytes(dtype, shape, ndim) */
} lofp_tensor_desc;

/* Serialises tensors[0..n) and metadata[0..n_meta) into the caller's buffer `out` of `cap`
 * bytes, byte-for-byte what lofp_file_write() would put in the file. `fmt` must be NPY or
 * SAFETENSORS. With out == NULL only the size is computed. Writes the encoded size to *out_len
 * and returns LOFP_OK, or LOFP_ERR_BUFFER_TOO_SMALL (out != NULL, cap < size; *out_len still set),
 * or the validation errors of lofp_file_write(). Re-entrant; inputs are only read.
 *
 * safetensors: tensors are laid out as the safetensors package does (descending element width,
 * then by name), contiguously, after a JSON header padded with spaces to a multiple of 8 bytes;
 * metadata keys are written sorted. The result is byte-identical to safetensors' serialize() for
 * the same tensors (and at most one metadata entry).
 * .npy: n must be 1 and n_meta 0; version 1.0 (2.0 when the header needs more than 65535 bytes),
 * C order, byte-identical to numpy.save(). */
LOFP_API lofp_status lofp_file_encode(lofp_file_format fmt, const lofp_tensor_desc *tensors,
                                      size_t n, const lofp_metadata_entry *metadata,
                                      size_t n_meta, void *out, size_t cap, size_t *out_len,
                                      lofp_io_error *err);

/* Writes a file atomically. `fmt` LOFP_FORMAT_AUTO picks the format from the extension of `path`
 * (".npy" or ".safetensors", else LOFP_ERR_INVALID_ARG). The procedure: validate every input;
 * create a hidden temporary file in the destination directory (O_EXCL, mode 0666 & ~umask);
 * write everything; fsync; close; rename() over `path`; fsync the directory (best effort).
 * On any failure the temporary file is removed and an existing `path` is left untouched, so a
 * reader sees either the old file or the complete new one. Returns LOFP_OK or LOFP_ERR_IO /
 * LOFP_ERR_INVALID_ARG / LOFP_ERR_UNSUPPORTED / LOFP_ERR_SIZE_OVERFLOW / LOFP_ERR_NOMEM with *err
 * filled. Re-entrant; concurrent writers of the same path leave one complete winner. */
LOFP_API lofp_status lofp_file_write(const char *path, lofp_file_format fmt,
                                     const lofp_tensor_desc *tensors, size_t n,
                                     const lofp_metadata_entry *metadata, size_t n_meta,
                                     lofp_io_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_IO_H */

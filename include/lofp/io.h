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

/* The most dimensions a tensor may have: numpy's limit (NPY_MAXDIMS, 64 since numpy 2). Files
 * whose tensors have more are refused when read (LOFP_ERR_UNSUPPORTED, naming the file and the
 * tensor) and such tensors are refused when written; so every shape the library hands out fits
 * an array of LOFP_MAX_NDIM entries (lofp_ckpt_tensor.shape is one). */
#define LOFP_MAX_NDIM 64

/* ------------------------------------------------------------------------------------------ */
/* Tensor dtypes of files (pinned, append-only)                                                */
/* ------------------------------------------------------------------------------------------ */

/* The element type of a tensor in a file is a lofp_dtype (lofp/lofp.h): the one dtype enum, whose
 * F32, BF16 and F16 are also what the quantizers take and return. */

/* Returns the safetensors name of dt ("F32", "F4", ...), a static string, or NULL if unknown. */
LOFP_API const char *lofp_dtype_name(lofp_dtype dt);

/* Looks a dtype up by its safetensors name (exact, case-sensitive). Returns LOFP_OK and sets
 * *out, or LOFP_ERR_NOT_FOUND. */
LOFP_API lofp_status lofp_dtype_from_name(const char *name, lofp_dtype *out);

/* Returns the storage width of one element in bits (4 for F4, 6 for F6, 8, 16, 32 or 64), or 0
 * for an unknown dtype. */
LOFP_API unsigned lofp_dtype_bits(lofp_dtype dt);

/* Bytes a tensor of `dt` with the (logical) shape[0..ndim) occupies: prod(shape) * bits / 8.
 * F4 tensors hold two elements per byte, so prod(shape) must be even (F6: a multiple of 4).
 * Writes *nbytes and returns LOFP_OK; LOFP_ERR_SIZE_OVERFLOW when the product overflows size_t;
 * LOFP_ERR_SHAPE when the element count does not fill whole bytes; LOFP_ERR_INVALID_ARG for an
 * unknown dtype or NULL pointers (shape may be NULL when ndim is 0). Pure function. */
LOFP_API lofp_status lofp_io_tensor_bytes(lofp_dtype dt, const size_t *shape, size_t ndim,
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
    lofp_dtype dtype;
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

/* 1 when paths a and b name the same existing file (device and inode; symlinks followed), else 0
 * (also when either does not exist). The writers use it to refuse an output that is one of the
 * inputs before anything is truncated. Thread-safe. */
LOFP_API int lofp_same_file(const char *a, const char *b);

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
    lofp_dtype dtype;
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


/* ------------------------------------------------------------------------------------------ */
/* Streaming: reading a tensor in chunks of rows                                               */
/* ------------------------------------------------------------------------------------------ */

/* A row reader hands out one tensor of an open file as consecutive chunks of whole rows, so that
 * a pipeline (quantize, dequantize, convert) touches a bounded amount of memory however large the
 * tensor is. A row is the last dimension: a tensor of shape [..., K] has numel / K rows of K
 * elements (a scalar is one row of one element; a tensor with a 0 anywhere in its shape has no
 * rows). The elements are handed out as the file stores them -- F32, BF16, F16 or any other dtype,
 * little-endian, never widened or converted -- so a chunk can go straight to lofp_quantize().
 *
 * Memory. For a file opened with lofp_file_open() a chunk points into the file's mapping: nothing
 * is copied. Each lofp_row_reader_next() first releases the pages of the previous chunk from the
 * process (madvise MADV_DONTNEED on the read-only mapping; the data stay in the page cache and any
 * pointer into the mapping stays valid: it faults the page back in if read again), asks the
 * kernel to read the following chunk ahead, and maps the new chunk's pages in one call, so the
 * resident set stays near one or two chunks. A file opened with lofp_file_open_memory() is
 * handed out in place and never released (the memory is the caller's).
 *
 * Alignment. chunk.data is aligned to the element size (for the sub-byte dtypes F4/F6: 1). When
 * the file places the tensor at an offset that is not (files from other writers may), each chunk
 * is copied into a buffer the reader owns instead, so the caller never needs to check.
 *
 * Ownership and threads: the reader borrows `f`, which must stay open until the reader is closed;
 * chunk.data is valid until the next call on the same reader. A reader is used by one thread at a
 * time; several readers of the same file may run in parallel. */

typedef struct lofp_row_reader lofp_row_reader;

/* One chunk: rows [row0, row0 + rows) of the tensor, row-major, rows * row_bytes bytes. */
typedef struct lofp_row_chunk {
    size_t row0;          /* index of the chunk's first row */
    size_t rows;          /* rows in this chunk; 0 when the tensor is exhausted */
    size_t row_bytes;     /* bytes of one row (K * bits / 8) */
    const void *data;     /* the rows as stored in the file; aligned to the element size */
} lofp_row_chunk;

/* Default chunk size of lofp_row_reader_open() when chunk_rows is 0: about 4 MiB of rows. */
#define LOFP_IO_CHUNK_BYTES ((size_t)4 << 20)

/* Opens a reader over tensor `t`, which must be one of f's tensors (from lofp_file_tensor() or
 * lofp_file_find()). Chunks hold `chunk_rows` rows (the last one fewer); 0 picks about
 * LOFP_IO_CHUNK_BYTES of rows (at least one row). Returns LOFP_OK and a new reader in *out, or
 * LOFP_ERR_INVALID_ARG (NULL pointers, `t` not a tensor of `f`), LOFP_ERR_SHAPE (a row of a
 * sub-byte dtype that does not fill whole bytes, e.g. an F4 row of odd length) or LOFP_ERR_NOMEM,
 * with *out NULL and *err filled (the message names the file and the tensor). */
LOFP_API lofp_status lofp_row_reader_open(const lofp_file *f, const lofp_tensor_info *t,
                                          size_t chunk_rows, lofp_row_reader **out,
                                          lofp_io_error *err);

/* Rows per chunk the reader hands out (after choosing the default). */
LOFP_API size_t lofp_row_reader_chunk_rows(const lofp_row_reader *r);

/* Hands out the next chunk in *chunk (chunk->rows == 0 at the end, which is not an error).
 * Releases the previous chunk (its pointer must not be used afterwards unless the caller knows it
 * points into the file's mapping). Returns LOFP_OK, or LOFP_ERR_INVALID_ARG for NULL pointers. */
LOFP_API lofp_status lofp_row_reader_next(lofp_row_reader *r, lofp_row_chunk *chunk,
                                          lofp_io_error *err);

/* Starts again at row 0 (a second pass, e.g. NVFP4's amax pass before the quantize pass). */
LOFP_API void lofp_row_reader_rewind(lofp_row_reader *r);

/* Releases the last chunk and frees the reader. NULL is a no-op. The file stays open. */
LOFP_API void lofp_row_reader_close(lofp_row_reader *r);

/* ------------------------------------------------------------------------------------------ */
/* Streaming: writing a file as its tensors are produced                                       */
/* ------------------------------------------------------------------------------------------ */

/* A writer creates a file whose tensors are known up front (names, dtypes, shapes, hence sizes)
 * but whose data arrive piece by piece, so that nothing has to hold a whole output in memory.
 *
 *   open:   validates the tensor list exactly as lofp_file_write() does (the tensors' `data`
 *           pointers are ignored and may be NULL), creates the temporary file next to `path`,
 *           and writes the complete header at once, since every size is known;
 *   append: appends bytes to tensor i (the index into the `tensors` array given to open). The
 *           bytes of one tensor arrive in order; different tensors may be written in any order
 *           and interleaved. Each piece goes to its final place in the file (pwrite at the offset
 *           the header already records) as soon as it is appended: the writer keeps no data;
 *   finish: checks that every tensor received exactly its size, then completes the atomic write
 *           (fsync the file, close, rename over `path`, fsync the directory);
 *   abort:  removes the temporary file; `path` is untouched.
 *
 * The resulting file is byte-for-byte what lofp_file_write() writes for the same tensors and
 * metadata (the same canonical safetensors layout; .npy as numpy.save), whatever order the data
 * were appended in.
 *
 * Files on disk. The temporary file is ".<name>.tmp-<random>" in the destination's directory
 * (opened once, relative names are used from then on, and the name is shortened to fit NAME_MAX,
 * so a `path` close to PATH_MAX works), created with O_EXCL and mode 0666 & ~umask; when `path`
 * is an existing regular file the new file takes that file's permission bits. A symlink at `path`
 * is replaced, not followed.
 *
 * fsync policy. By default finish() fsyncs the file before the rename and the directory after it,
 * so a completed write survives a crash. LOFP_WRITE_NO_SYNC skips both (the rename still makes the
 * write atomic for readers, but after a power loss the file may be empty or partial); use it for
 * scratch outputs and benchmarks only.
 *
 * Ownership and threads: the writer copies names, shapes and metadata at open; one thread at a
 * time uses a writer; writers of different paths are independent. */

typedef struct lofp_writer lofp_writer;

/* Flags of lofp_writer_open(). */
#define LOFP_WRITE_NO_SYNC 1u   /* do not fsync the file and its directory at finish */

/* Opens a writer for `path` (`fmt` LOFP_FORMAT_AUTO: by extension, as lofp_file_write()). On
 * success returns LOFP_OK with the writer in *out and the header already written; on failure the
 * errors of lofp_file_write() (nothing is left on disk) with *out NULL. */
LOFP_API lofp_status lofp_writer_open(const char *path, lofp_file_format fmt,
                                      const lofp_tensor_desc *tensors, size_t n,
                                      const lofp_metadata_entry *metadata, size_t n_meta,
                                      unsigned flags, lofp_writer **out, lofp_io_error *err);

/* Appends `nbytes` bytes at `data` to tensor i. Returns LOFP_OK; LOFP_ERR_INVALID_ARG when i is
 * out of range or the tensor would exceed its size; LOFP_ERR_IO when the write fails (ENOSPC,
 * EFBIG, EIO...; the message carries strerror). After an error the writer can only be aborted
 * (finish then fails and removes the temporary file). */
LOFP_API lofp_status lofp_writer_append(lofp_writer *w, size_t i, const void *data, size_t nbytes,
                                        lofp_io_error *err);

/* Completes the file (see above) and frees the writer, also on failure (the temporary file is
 * then removed and `path` untouched). Returns LOFP_OK, LOFP_ERR_INVALID_ARG (a tensor is
 * incomplete, naming it, or an earlier append failed) or LOFP_ERR_IO. */
LOFP_API lofp_status lofp_writer_finish(lofp_writer *w, lofp_io_error *err);

/* Removes the temporary file and frees the writer. NULL is a no-op. */
LOFP_API void lofp_writer_abort(lofp_writer *w);

/* Removes the writer's temporary file and nothing else: one unlinkat() call on names stored at
 * open, async-signal-safe, so a signal handler may call it for a writer in flight (the `lofp`
 * command does this on SIGINT, SIGTERM and SIGHUP). The writer must still be aborted or
 * abandoned afterwards; NULL is a no-op. */
LOFP_API void lofp_writer_unlink_temp(const lofp_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_IO_H */

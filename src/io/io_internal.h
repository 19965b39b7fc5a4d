/* io_internal.h -- declarations shared by the src/io/ files (the file layer). Not installed. */
#ifndef LOFP_IO_INTERNAL_H
#define LOFP_IO_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "lofp/io.h"
#include "json.h"
#include "sbuf.h"

/* Largest safetensors header accepted or written: the limit of the safetensors package. */
#define LOFP_ST_MAX_HEADER 100000000u

/* ---- error reporting ---------------------------------------------------------------------- */

/* Sets err (if non-NULL) to status and the message "<file>: <formatted text>" and returns status.
 * `file` may be NULL. */
LOFP_INTERNAL lofp_status lofp_io_fail(lofp_io_error *err, lofp_status status, const char *file,
                                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Marks err (if non-NULL) as a success. */
LOFP_INTERNAL void lofp_io_ok(lofp_io_error *err);
/* Writes a printable, quoted and possibly shortened form of the `len` bytes at s to buf (for
 * names in messages). Returns buf. */
LOFP_INTERNAL const char *lofp_io_quote(char *buf, size_t cap, const char *s, size_t len);
/* Formats a shape as "[2, 3]" (shortened after 8 dims) into buf. Returns buf. */
LOFP_INTERNAL const char *lofp_io_shape_str(char *buf, size_t cap, const size_t *shape,
                                            size_t ndim);

/* ---- dtypes ------------------------------------------------------------------------------- */

/* Rank of a dtype in the safetensors Dtype enum (ascending alignment); writers order tensors by
 * descending rank, then name. Returns -1 for an unknown dtype. */
LOFP_INTERNAL int lofp_dtype_rank(lofp_dtype dt);
/* Looks a dtype up by the first len bytes of name. Returns 0 if unknown. */
LOFP_INTERNAL lofp_dtype lofp_dtype_lookup(const char *name, size_t len);
/* numpy descr (e.g. "<f4", "|u1") of a dtype, or NULL when .npy cannot hold it. */
LOFP_INTERNAL const char *lofp_io_npy_descr(lofp_dtype dt);

/* Returns 1 if the len bytes at s are valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
LOFP_INTERNAL int lofp_io_utf8_valid(const uint8_t *s, size_t len);

/* ---- JSON: io/json.h ---- */

/* ---- growable byte buffer: io/sbuf.h ---- */

/* ---- the open-file handle ------------------------------------------------------------------ */

struct lofp_file {
    lofp_file_format format;
    const uint8_t *base;        /* the bytes (mapping or caller buffer) */
    size_t size;
    void *map;                  /* non-NULL when lofp_file_open() mapped the file */
    size_t map_len;
    char *display;              /* file name used in messages */
    int anonymous;              /* opened from memory without a name: a .npy tensor is "array" */
    lofp_tensor_info *tensors;  /* in data order */
    size_t n_tensors;
    const lofp_tensor_info **by_name; /* the tensors sorted by name */
    lofp_metadata_entry *meta;
    size_t n_meta;
    size_t *dims;               /* storage of every shape */
    char *names;                /* storage of names the parsers make (the .npy stem) */
    lofp_json_doc json;         /* safetensors: names and metadata point into json.strings */
};

/* The format parsers: fill f->tensors / n_tensors / meta / dims / names from f->base, f->size.
 * They report errors with f->display. */
LOFP_INTERNAL lofp_status lofp_npy_parse(lofp_file *f, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_st_parse(lofp_file *f, lofp_io_error *err);
/* Builds f->by_name and rejects duplicate names (safetensors JSON already does). */
LOFP_INTERNAL lofp_status lofp_file_index(lofp_file *f, lofp_io_error *err);

/* The encoders. They validate the request (messages name `file`, which may be NULL), then append
 * the header (everything before the first tensor's data) to *hdr and write into order[0..n) the
 * order in which tensors' data follow it. *total receives the size of the whole encoding. */
LOFP_INTERNAL lofp_status lofp_npy_header(const lofp_tensor_desc *t, size_t n, size_t n_meta,
                                          const char *file, lofp_sbuf *hdr, size_t *total,
                                          lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_st_header(const lofp_tensor_desc *t, size_t n,
                                         const lofp_metadata_entry *meta, size_t n_meta,
                                         const char *file, lofp_sbuf *hdr, size_t *order,
                                         size_t *total, lofp_io_error *err);
/* Validates a write request (tensor data are not looked at) and builds the header; order gets
 * the n tensors in file order; *total the file size. */
LOFP_INTERNAL lofp_status lofp_io_prepare(lofp_file_format fmt, const lofp_tensor_desc *tensors,
                                          size_t n, const lofp_metadata_entry *meta, size_t n_meta,
                                          const char *file, lofp_sbuf *hdr, size_t *order,
                                          size_t *total, lofp_io_error *err);
/* Resolves LOFP_FORMAT_AUTO from the path's extension; rejects empty paths and "dir/". */
LOFP_INTERNAL lofp_status lofp_io_format_for_path(const char *path, lofp_file_format *fmt,
                                                  lofp_io_error *err);
/* Checks one tensor description (name only when check_name; not its data pointer). */
LOFP_INTERNAL lofp_status lofp_io_check_desc(const lofp_tensor_desc *t, size_t i, int check_name,
                                             const char *file, lofp_io_error *err);

#endif

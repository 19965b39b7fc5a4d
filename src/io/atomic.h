/* atomic.h -- io's atomic file replacement (src/io/io_atomic.c): a hidden temporary file beside
 * the destination, written, fsynced and renamed over it, so a reader sees the old file or the new
 * one and never a part. The tensor writer (lofp_writer) is built on it, and so are the checkpoint
 * layer's config, index, copy and GGUF writers. An interface header of io: components allowed to
 * use io may include it (tests/arch/layering.py). docs/IO.md "Atomic writes" has the procedure.
 *
 * Not thread-safe per lofp_atomic_file; different files are independent. */
#ifndef LOFP_IO_ATOMIC_H
#define LOFP_IO_ATOMIC_H

#include <stddef.h>

#include "core/core.h"
#include "lofp/io.h"

/* One file being replaced. Zero it (or let lofp_atomic_open fill it); fd is the temporary file,
 * open for writing, until commit or abort. The other fields are io's business. */
typedef struct lofp_atomic_file {
    int fd;             /* the temporary file; -1 when none is open */
    int dirfd;          /* the destination's directory; -1 when none */
    char *path;         /* the destination as given (messages) */
    char *base;         /* its last component, relative to dirfd */
    char *tmp;          /* the temporary file's name, relative to dirfd */
} lofp_atomic_file;

/* Creates the temporary file ".<base>.tmp-<48 random bits>" in path's directory (the base cut to
 * fit NAME_MAX) with the mode of an existing regular destination. Refuses a destination that is a
 * directory. Returns LOFP_OK with *a ready to write, or LOFP_ERR_IO / NOMEM / INVALID_ARG with a
 * message naming path (and *a empty: nothing to abort). */
LOFP_INTERNAL lofp_status lofp_atomic_open(lofp_atomic_file *a, const char *path,
                                           lofp_io_error *err);
/* Appends n bytes at data to the temporary file (retrying short writes and EINTR). */
LOFP_INTERNAL lofp_status lofp_atomic_write(lofp_atomic_file *a, const void *data, size_t n,
                                            lofp_io_error *err);
/* Writes n bytes at data at file offset off (the tensor writer fills tensors out of order).
 * Returns 0, or -1 with errno set. */
LOFP_INTERNAL int lofp_atomic_pwrite(lofp_atomic_file *a, const void *data, size_t n, size_t off);
/* fsync (unless flags has LOFP_WRITE_NO_SYNC), close, rename over the destination, fsync the
 * directory (best effort). On failure the temporary file is removed. Either way *a is released. */
LOFP_INTERNAL lofp_status lofp_atomic_commit(lofp_atomic_file *a, unsigned flags,
                                             lofp_io_error *err);
/* Closes and removes the temporary file and releases *a. Safe on a zeroed or released *a. */
LOFP_INTERNAL void lofp_atomic_abort(lofp_atomic_file *a);
/* Removes the temporary file without releasing anything: async-signal-safe (unlinkat only), for
 * a signal handler that must not leave it behind. */
LOFP_INTERNAL void lofp_atomic_unlink_temp(const lofp_atomic_file *a);

/* Replaces path with the n bytes at data atomically (open, write, commit). */
LOFP_INTERNAL lofp_status lofp_write_bytes_atomic(const char *path, const void *data, size_t n,
                                                  lofp_io_error *err);

#endif

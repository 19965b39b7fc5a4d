/* io_writer.c -- the streaming writer (lofp_writer_*): the header first, every tensor's data at
 * the offset the header records as it arrives, then fsync and an atomic rename. lofp_file_write()
 * is this writer fed with whole tensors. */
#include "atomic.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


struct lofp_writer {
    lofp_atomic_file at; /* the temporary file beside the destination (atomic.h) */
    char *path;          /* the destination as given (messages) */
    unsigned flags;
    int failed;          /* an append failed: finish refuses */
    size_t n;
    size_t *start;       /* file offset of tensor i's data (the caller's index) */
    size_t *size;        /* its byte size */
    size_t *fill;        /* bytes appended so far */
    size_t *order;       /* the tensors in file order */
    char **names;        /* copies, for messages (NULL for a .npy tensor) */
    size_t total;        /* file size */
};

static const char *errstr(int e, char *buf, size_t cap)
{
    if (strerror_r(e, buf, cap) != 0) snprintf(buf, cap, "error %d", e);
    return buf;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static void writer_free(lofp_writer *w)
{
    if (!w) return;
    lofp_atomic_abort(&w->at);
    if (w->names)
        for (size_t i = 0; i < w->n; i++) free(w->names[i]);
    free(w->names);
    free(w->path);
    free(w->start);
    free(w->size);
    free(w->fill);
    free(w->order);
    free(w);
}

void lofp_writer_unlink_temp(const lofp_writer *w)
{
    if (w) lofp_atomic_unlink_temp(&w->at);
}

void lofp_writer_abort(lofp_writer *w)
{
    writer_free(w);   /* lofp_atomic_abort removes the temporary file */
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* Validates the request and builds the header and the file order (order: n entries). */
lofp_status lofp_io_prepare(lofp_file_format fmt, const lofp_tensor_desc *tensors, size_t n,
                            const lofp_metadata_entry *meta, size_t n_meta, const char *file,
                            lofp_sbuf *hdr, size_t *order, size_t *total, lofp_io_error *err)
{
    if ((n && !tensors) || (n_meta && !meta) || !order)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "NULL tensor or metadata array");
    if (fmt == LOFP_FORMAT_NPY) {
        lofp_status st = lofp_npy_header(tensors, n, n_meta, file, hdr, total, err);
        if (!st) order[0] = 0;
        return st;
    }
    if (fmt != LOFP_FORMAT_SAFETENSORS)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "unknown file format %d", (int)fmt);
    return lofp_st_header(tensors, n, meta, n_meta, file, hdr, order, total, err);
}

lofp_status lofp_io_format_for_path(const char *path, lofp_file_format *fmt, lofp_io_error *err)
{
    if (!path || !*path) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "empty or NULL path");
    if (path[strlen(path) - 1] == '/')
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path, "the path names a directory");
    if (*fmt == LOFP_FORMAT_AUTO) {
        if (ends_with(path, ".npy")) *fmt = LOFP_FORMAT_NPY;
        else if (ends_with(path, ".safetensors")) *fmt = LOFP_FORMAT_SAFETENSORS;
        else
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path,
                                "cannot tell the format from the name (use .npy or .safetensors, "
                                "or pass the format)");
    }
    return LOFP_OK;
}

lofp_status lofp_writer_open(const char *path, lofp_file_format fmt,
                             const lofp_tensor_desc *tensors, size_t n,
                             const lofp_metadata_entry *metadata, size_t n_meta, unsigned flags,
                             lofp_writer **out, lofp_io_error *err)
{
    char e[128];
    if (out) *out = NULL;
    if (!out) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path, "NULL output pointer");
    lofp_status st = lofp_io_format_for_path(path, &fmt, err);
    if (st) return st;
    lofp_sbuf hdr = {0};
    lofp_writer *w = calloc(1, sizeof *w);
    if (!w) return lofp_io_fail(err, LOFP_ERR_NOMEM, path, "out of memory");
    w->at.fd = w->at.dirfd = -1;
    w->flags = flags;
    w->n = n;
    size_t m = n ? n : 1;
    w->start = calloc(m, sizeof *w->start);
    w->size = calloc(m, sizeof *w->size);
    w->fill = calloc(m, sizeof *w->fill);
    w->order = calloc(m, sizeof *w->order);
    w->names = calloc(m, sizeof *w->names);
    w->path = dup_str(path);
    if (!w->start || !w->size || !w->fill || !w->order || !w->names || !w->path) {
        st = lofp_io_fail(err, LOFP_ERR_NOMEM, path, "out of memory");
        goto fail;
    }
    st = lofp_io_prepare(fmt, tensors, n, metadata, n_meta, path, &hdr, w->order, &w->total, err);
    if (st) goto fail;
    {
        size_t at = hdr.len;
        for (size_t k = 0; k < n; k++) {
            size_t i = w->order[k];
            w->start[i] = at;
            w->size[i] = tensors[i].nbytes;
            at += tensors[i].nbytes;
            if (tensors[i].name && !(w->names[i] = dup_str(tensors[i].name))) {
                st = lofp_io_fail(err, LOFP_ERR_NOMEM, path, "out of memory");
                goto fail;
            }
        }
    }

    /* the temporary file lives next to the destination so that rename() is atomic */
    if ((st = lofp_atomic_open(&w->at, path, err))) goto fail;
    if (lofp_atomic_pwrite(&w->at, hdr.p, hdr.len, 0) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "writing %zu bytes failed: %s", w->total,
                          errstr(errno, e, sizeof e));
        goto fail;
    }
    lofp_sbuf_free(&hdr);
    lofp_io_ok(err);
    *out = w;
    return LOFP_OK;
fail:
    lofp_sbuf_free(&hdr);
    lofp_writer_abort(w);
    return st;
}

static const char *tensor_label(const lofp_writer *w, size_t i, char *buf, size_t cap)
{
    char q[128];
    if (w->names[i])
        snprintf(buf, cap, "tensor %s", lofp_io_quote(q, sizeof q, w->names[i], strlen(w->names[i])));
    else
        snprintf(buf, cap, "tensor %zu", i);
    return buf;
}

lofp_status lofp_writer_append(lofp_writer *w, size_t i, const void *data, size_t nbytes,
                               lofp_io_error *err)
{
    char e[128], who[160];
    if (!w) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "NULL writer");
    if (i >= w->n)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, w->path, "tensor index %zu out of range (%zu tensors)",
                            i, w->n);
    if (nbytes && !data)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, w->path, "%s: NULL data",
                            tensor_label(w, i, who, sizeof who));
    if (nbytes > w->size[i] - w->fill[i]) {
        w->failed = 1;
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, w->path,
                            "%s: appending %zu bytes to %zu of %zu would overrun the tensor",
                            tensor_label(w, i, who, sizeof who), nbytes, w->fill[i], w->size[i]);
    }
    if (w->failed)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, w->path, "an earlier write failed");
    if (nbytes && lofp_atomic_pwrite(&w->at, data, nbytes, w->start[i] + w->fill[i]) != 0) {
        w->failed = 1;
        return lofp_io_fail(err, LOFP_ERR_IO, w->path, "writing %zu bytes failed: %s", w->total,
                            errstr(errno, e, sizeof e));
    }
    w->fill[i] += nbytes;
    lofp_io_ok(err);
    return LOFP_OK;
}

lofp_status lofp_writer_finish(lofp_writer *w, lofp_io_error *err)
{
    char who[160];
    lofp_status st;
    if (!w) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "NULL writer");
    if (w->failed) {
        st = lofp_io_fail(err, LOFP_ERR_INVALID_ARG, w->path, "an earlier write failed");
        goto fail;
    }
    for (size_t i = 0; i < w->n; i++) {
        if (w->fill[i] != w->size[i]) {
            st = lofp_io_fail(err, LOFP_ERR_INVALID_ARG, w->path, "%s: %zu of its %zu bytes were written",
                              tensor_label(w, i, who, sizeof who), w->fill[i], w->size[i]);
            goto fail;
        }
    }
    st = lofp_atomic_commit(&w->at, w->flags, err);
    writer_free(w);
    return st;
fail:
    lofp_writer_abort(w);
    return st;
}

lofp_status lofp_file_write(const char *path, lofp_file_format fmt,
                            const lofp_tensor_desc *tensors, size_t n,
                            const lofp_metadata_entry *metadata, size_t n_meta,
                            lofp_io_error *err)
{
    for (size_t i = 0; tensors && i < n; i++) {
        if (tensors[i].nbytes && !tensors[i].data) {
            char q[128];
            if (tensors[i].name)
                return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path, "tensor %s: NULL data",
                                    lofp_io_quote(q, sizeof q, tensors[i].name, strlen(tensors[i].name)));
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path, "tensor %zu: NULL data", i);
        }
    }
    lofp_writer *w;
    lofp_status st = lofp_writer_open(path, fmt, tensors, n, metadata, n_meta, 0, &w, err);
    if (st) return st;
    for (size_t k = 0; k < n; k++) {
        size_t i = w->order[k];
        if ((st = lofp_writer_append(w, i, tensors[i].data, tensors[i].nbytes, err))) {
            lofp_writer_abort(w);
            return st;
        }
    }
    return lofp_writer_finish(w, err);
}

/* io_writer.c -- the streaming writer (lofp_writer_*): the header first, every tensor's data at
 * the offset the header records as it arrives, then fsync and an atomic rename. lofp_file_write()
 * is this writer fed with whole tensors. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef NAME_MAX
#define NAME_MAX 255
#endif

struct lofp_writer {
    int fd;              /* the temporary file; -1 once closed */
    int dirfd;           /* the destination's directory */
    char *path;          /* the destination as given (messages) */
    char *base;          /* its last component, relative to dirfd */
    char *tmp;           /* the temporary file's name, relative to dirfd */
    unsigned flags;
    int failed;          /* an append failed: finish refuses */
    int keep_mode;       /* the destination existed as a regular file: take its mode */
    mode_t mode;
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

static int pwrite_all(int fd, const void *p, size_t n, size_t off)
{
    const uint8_t *b = p;
    while (n) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = pwrite(fd, b, chunk, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { errno = ENOSPC; return -1; }
        b += w;
        n -= (size_t)w;
        off += (size_t)w;
    }
    return 0;
}

static void writer_free(lofp_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->dirfd >= 0) close(w->dirfd);
    if (w->names)
        for (size_t i = 0; i < w->n; i++) free(w->names[i]);
    free(w->names);
    free(w->path);
    free(w->base);
    free(w->tmp);
    free(w->start);
    free(w->size);
    free(w->fill);
    free(w->order);
    free(w);
}

void lofp_writer_unlink_temp(const lofp_writer *w)
{
    if (w && w->dirfd >= 0 && w->tmp) (void)unlinkat(w->dirfd, w->tmp, 0);
}

void lofp_writer_abort(lofp_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) { close(w->fd); w->fd = -1; }
    lofp_writer_unlink_temp(w);
    writer_free(w);
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

/* Creates the temporary file: ".<base>.tmp-<48 random bits>", the base cut so that the name fits
 * NAME_MAX. Returns the fd (-1 with errno set). */
static int create_temp(lofp_writer *w)
{
    size_t bl = strlen(w->base);
    const size_t extra = 1 + 5 + 12;            /* "." + ".tmp-" + 12 hex digits */
    long name_max = fpathconf(w->dirfd, _PC_NAME_MAX);
    if (name_max <= 0 || name_max > 4096) name_max = NAME_MAX;
    size_t keep = bl;
    if (keep + extra > (size_t)name_max) keep = (size_t)name_max > extra ? (size_t)name_max - extra : 0;
    w->tmp = malloc(keep + extra + 1);
    if (!w->tmp) { errno = ENOMEM; return -1; }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 16 ^
                    (uint64_t)(uintptr_t)&ts ^ (uint64_t)(uintptr_t)w;
    int fd = -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t r = lofp_splitmix64(&seed);
        snprintf(w->tmp, keep + extra + 1, ".%.*s.tmp-%012llx", (int)keep, w->base,
                 (unsigned long long)(r & 0xFFFFFFFFFFFFull));
        fd = openat(w->dirfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        free(w->tmp);
        w->tmp = NULL;
        errno = e;
    }
    return fd;
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
    w->fd = w->dirfd = -1;
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

    /* the temporary file lives next to the destination so that rename() is atomic; everything
     * after this point is relative to the directory's fd (no path grows past PATH_MAX) */
    {
        const char *slash = strrchr(path, '/');
        size_t dlen = slash ? (size_t)(slash - path) : 0;
        char *dir = malloc(dlen + 2);
        w->base = dup_str(slash ? slash + 1 : path);
        if (!dir || !w->base) {
            free(dir);
            st = lofp_io_fail(err, LOFP_ERR_NOMEM, path, "out of memory");
            goto fail;
        }
        if (slash) {
            memcpy(dir, path, dlen ? dlen : 1);       /* "/x" -> dir "/" */
            dir[dlen ? dlen : 1] = '\0';
        } else {
            strcpy(dir, ".");
        }
        w->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (w->dirfd < 0) {
            st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot create a temporary file in '%s': %s",
                              dir, errstr(errno, e, sizeof e));
            free(dir);
            goto fail;
        }
        struct stat sb;
        if (fstatat(w->dirfd, w->base, &sb, 0) == 0) {
            if (S_ISDIR(sb.st_mode)) {
                free(dir);
                st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot replace a directory");
                goto fail;
            }
            if (S_ISREG(sb.st_mode)) {
                w->keep_mode = 1;
                w->mode = sb.st_mode & 07777;
            }
        }
        w->fd = create_temp(w);
        if (w->fd < 0) {
            st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot create a temporary file in '%s': %s",
                              dir, errstr(errno, e, sizeof e));
            free(dir);
            goto fail;
        }
        free(dir);
    }
    if (w->keep_mode && fchmod(w->fd, w->mode) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot set the mode of the temporary file: %s",
                          errstr(errno, e, sizeof e));
        goto fail;
    }
    if (pwrite_all(w->fd, hdr.p, hdr.len, 0) != 0) {
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
    if (nbytes && pwrite_all(w->fd, data, nbytes, w->start[i] + w->fill[i]) != 0) {
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
    char e[128], who[160];
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
    if (!(w->flags & LOFP_WRITE_NO_SYNC) && fsync(w->fd) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, w->path, "fsync of the temporary file failed: %s",
                          errstr(errno, e, sizeof e));
        goto fail;
    }
    {
        int rc = close(w->fd);
        w->fd = -1;
        if (rc != 0) {
            st = lofp_io_fail(err, LOFP_ERR_IO, w->path, "closing the temporary file failed: %s",
                              errstr(errno, e, sizeof e));
            goto fail;
        }
    }
    if (renameat(w->dirfd, w->tmp, w->dirfd, w->base) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, w->path, "cannot rename the temporary file into place: %s",
                          errstr(errno, e, sizeof e));
        goto fail;
    }
    /* make the rename durable; best effort (some file systems refuse directory fsync) */
    if (!(w->flags & LOFP_WRITE_NO_SYNC)) (void)fsync(w->dirfd);
    writer_free(w);
    lofp_io_ok(err);
    return LOFP_OK;
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

/* io_file.c -- the file layer's public entry points: opening (mmap) and querying files, encoding
 * into memory, and the atomic write (temporary file, fsync, rename). */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *errstr(int e, char *buf, size_t cap)
{
    if (strerror_r(e, buf, cap) != 0) snprintf(buf, cap, "error %d", e);
    return buf;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* ---- checks shared by the encoders -------------------------------------------------------- */

lofp_status lofp_io_check_desc(const lofp_tensor_desc *t, size_t i, int check_name,
                               const char *file, lofp_io_error *err)
{
    char who[160], q[128], shp[160];
    if (check_name && t->name)
        snprintf(who, sizeof who, "tensor %s", lofp_io_quote(q, sizeof q, t->name, strlen(t->name)));
    else
        snprintf(who, sizeof who, "tensor %zu", i);
    if (check_name) {
        if (!t->name) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "%s: NULL name", who);
        if (!lofp_io_utf8_valid((const uint8_t *)t->name, strlen(t->name)))
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "%s: the name is not valid UTF-8", who);
        if (strcmp(t->name, "__metadata__") == 0)
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                                "%s: the name is reserved for the metadata", who);
    }
    if (!lofp_io_dtype_name(t->dtype))
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "%s: unknown dtype %d", who, (int)t->dtype);
    if (t->ndim && !t->shape)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "%s: NULL shape", who);
    size_t need;
    lofp_status st = lofp_io_tensor_bytes(t->dtype, t->shape, t->ndim, &need);
    if (st == LOFP_ERR_SIZE_OVERFLOW)
        return lofp_io_fail(err, LOFP_ERR_SIZE_OVERFLOW, file, "%s: shape %s x %s overflows size_t",
                            who, lofp_io_shape_str(shp, sizeof shp, t->shape, t->ndim),
                            lofp_io_dtype_name(t->dtype));
    if (st == LOFP_ERR_SHAPE ||
        (t->dtype == LOFP_IO_F4 && (t->ndim == 0 || t->shape[t->ndim - 1] % 2)))
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                            "%s: shape %s does not fill whole bytes of %s (F4 needs an even last "
                            "dimension: the shape counts elements, two per byte; F6 a multiple "
                            "of 4 elements)", who, lofp_io_shape_str(shp, sizeof shp, t->shape, t->ndim),
                            lofp_io_dtype_name(t->dtype));
    if (st) return lofp_io_fail(err, st, file, "%s: invalid shape", who);
    if (need != t->nbytes)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                            "%s: shape %s x %s needs %zu bytes but %zu were given", who,
                            lofp_io_shape_str(shp, sizeof shp, t->shape, t->ndim),
                            lofp_io_dtype_name(t->dtype), need, t->nbytes);
    if (t->nbytes && !t->data)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "%s: NULL data", who);
    return LOFP_OK;
}

/* ---- reading ------------------------------------------------------------------------------ */

static int name_cmp(const void *a, const void *b)
{
    return strcmp((*(const lofp_tensor_info *const *)a)->name,
                  (*(const lofp_tensor_info *const *)b)->name);
}

lofp_status lofp_file_index(lofp_file *f, lofp_io_error *err)
{
    size_t n = f->n_tensors;
    f->by_name = malloc((n ? n : 1) * sizeof *f->by_name);
    if (!f->by_name) return lofp_io_fail(err, LOFP_ERR_NOMEM, f->display, "out of memory");
    for (size_t i = 0; i < n; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, n, sizeof *f->by_name, name_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            char q[128];
            const char *nm = f->by_name[i]->name;
            return lofp_io_fail(err, LOFP_ERR_FORMAT, f->display, "tensor %s: duplicate name",
                                lofp_io_quote(q, sizeof q, nm, strlen(nm)));
        }
    }
    return LOFP_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static lofp_status open_common(lofp_file *f, lofp_file_format fmt, lofp_file **out,
                               lofp_io_error *err)
{
    if (fmt == LOFP_FORMAT_AUTO) {
        if (f->size >= 6 && memcmp(f->base, "\x93NUMPY", 6) == 0) fmt = LOFP_FORMAT_NPY;
        else if (ends_with(f->display, ".npy")) fmt = LOFP_FORMAT_NPY;
        else fmt = LOFP_FORMAT_SAFETENSORS;
    }
    f->format = fmt;
    lofp_status st;
    if (fmt == LOFP_FORMAT_NPY) st = lofp_npy_parse(f, err);
    else if (fmt == LOFP_FORMAT_SAFETENSORS) st = lofp_st_parse(f, err);
    else st = lofp_io_fail(err, LOFP_ERR_INVALID_ARG, f->display, "unknown file format %d", (int)fmt);
    if (!st) st = lofp_file_index(f, err);
    if (st) {
        lofp_file_close(f);
        return st;
    }
    lofp_io_ok(err);
    *out = f;
    return LOFP_OK;
}

lofp_status lofp_file_open_memory(const void *buf, size_t len, lofp_file_format fmt,
                                  const char *name, lofp_file **out, lofp_io_error *err)
{
    if (out) *out = NULL;
    if (!out || (!buf && len))
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, name, "NULL buffer or output pointer");
    lofp_file *f = calloc(1, sizeof *f);
    if (!f) return lofp_io_fail(err, LOFP_ERR_NOMEM, name, "out of memory");
    f->display = dup_str(name ? name : "<memory>");
    if (!f->display) { free(f); return lofp_io_fail(err, LOFP_ERR_NOMEM, name, "out of memory"); }
    f->anonymous = !name;
    f->base = buf ? buf : (const uint8_t *)"";
    f->size = len;
    return open_common(f, fmt, out, err);
}

lofp_status lofp_file_open(const char *path, lofp_file_format fmt, lofp_file **out,
                           lofp_io_error *err)
{
    char e[128];
    if (out) *out = NULL;
    if (!path || !out) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path, "NULL path or output pointer");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return lofp_io_fail(err, LOFP_ERR_IO, path, "cannot open: %s", errstr(errno, e, sizeof e));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int en = errno;
        close(fd);
        return lofp_io_fail(err, LOFP_ERR_IO, path, "cannot stat: %s", errstr(en, e, sizeof e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return lofp_io_fail(err, LOFP_ERR_IO, path, "not a regular file");
    }
    if (sb.st_size < 0 || (uintmax_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return lofp_io_fail(err, LOFP_ERR_IO, path, "file too large to map");
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int en = errno;
            close(fd);
            return lofp_io_fail(err, LOFP_ERR_IO, path, "cannot mmap %zu bytes: %s", size,
                                errstr(en, e, sizeof e));
        }
    }
    close(fd);
    lofp_file *f = calloc(1, sizeof *f);
    char *display = dup_str(path);
    if (!f || !display) {
        free(f);
        free(display);
        if (map) munmap(map, size);
        return lofp_io_fail(err, LOFP_ERR_NOMEM, path, "out of memory");
    }
    f->display = display;
    f->map = map;
    f->map_len = size;
    f->base = map ? map : (const uint8_t *)"";
    f->size = size;
    return open_common(f, fmt, out, err);
}

void lofp_file_close(lofp_file *f)
{
    if (!f) return;
    if (f->map) munmap(f->map, f->map_len);
    free(f->display);
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f->dims);
    free(f->names);
    lofp_json_free(&f->json);
    free(f);
}

lofp_file_format lofp_file_format_of(const lofp_file *f) { return f ? f->format : LOFP_FORMAT_AUTO; }

size_t lofp_file_count(const lofp_file *f) { return f ? f->n_tensors : 0; }

const lofp_tensor_info *lofp_file_tensor(const lofp_file *f, size_t i)
{
    return f && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const lofp_tensor_info *lofp_file_find(const lofp_file *f, const char *name)
{
    if (!f || !name) return NULL;
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

size_t lofp_file_metadata_count(const lofp_file *f) { return f ? f->n_meta : 0; }

const lofp_metadata_entry *lofp_file_metadata(const lofp_file *f, size_t i)
{
    return f && i < f->n_meta ? &f->meta[i] : NULL;
}

const char *lofp_file_metadata_get(const lofp_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

/* ---- encoding ----------------------------------------------------------------------------- */

/* Validates the request and builds the header and the data order (order has n entries). */
static lofp_status prepare(lofp_file_format fmt, const lofp_tensor_desc *tensors, size_t n,
                           const lofp_metadata_entry *meta, size_t n_meta, const char *file,
                           lofp_sbuf *hdr, size_t **order, size_t *total, lofp_io_error *err)
{
    *order = NULL;
    if ((n && !tensors) || (n_meta && !meta))
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "NULL tensor or metadata array");
    if (fmt == LOFP_FORMAT_NPY) {
        lofp_status st = lofp_npy_header(tensors, n, n_meta, file, hdr, total, err);
        if (st) return st;
        *order = malloc(sizeof **order);
        if (!*order) return lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory");
        (*order)[0] = 0;
        return LOFP_OK;
    }
    if (fmt != LOFP_FORMAT_SAFETENSORS)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "unknown file format %d", (int)fmt);
    *order = malloc((n ? n : 1) * sizeof **order);
    if (!*order) return lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory");
    lofp_status st = lofp_st_header(tensors, n, meta, n_meta, file, hdr, *order, total, err);
    if (st) { free(*order); *order = NULL; }
    return st;
}

lofp_status lofp_file_encode(lofp_file_format fmt, const lofp_tensor_desc *tensors, size_t n,
                             const lofp_metadata_entry *metadata, size_t n_meta, void *out,
                             size_t cap, size_t *out_len, lofp_io_error *err)
{
    if (!out_len) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "NULL out_len");
    lofp_sbuf hdr = {0};
    size_t *order, total;
    lofp_status st = prepare(fmt, tensors, n, metadata, n_meta, NULL, &hdr, &order, &total, err);
    if (st) { lofp_sbuf_free(&hdr); return st; }
    *out_len = total;
    if (out && cap < total) {
        st = lofp_io_fail(err, LOFP_ERR_BUFFER_TOO_SMALL, NULL,
                          "the encoding needs %zu bytes, the buffer holds %zu", total, cap);
    } else if (out) {
        uint8_t *o = out;
        memcpy(o, hdr.p, hdr.len);
        size_t at = hdr.len;
        for (size_t i = 0; i < n; i++) {
            const lofp_tensor_desc *t = &tensors[order[i]];
            if (t->nbytes) memcpy(o + at, t->data, t->nbytes);
            at += t->nbytes;
        }
        lofp_io_ok(err);
    } else {
        lofp_io_ok(err);
    }
    free(order);
    lofp_sbuf_free(&hdr);
    return st;
}

/* ---- atomic write ------------------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(fd, b, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { errno = ENOSPC; return -1; }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

lofp_status lofp_file_write(const char *path, lofp_file_format fmt,
                            const lofp_tensor_desc *tensors, size_t n,
                            const lofp_metadata_entry *metadata, size_t n_meta,
                            lofp_io_error *err)
{
    char e[128];
    if (!path || !*path) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "empty or NULL path");
    if (path[strlen(path) - 1] == '/')
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path, "the path names a directory");
    if (fmt == LOFP_FORMAT_AUTO) {
        if (ends_with(path, ".npy")) fmt = LOFP_FORMAT_NPY;
        else if (ends_with(path, ".safetensors")) fmt = LOFP_FORMAT_SAFETENSORS;
        else
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path,
                                "cannot tell the format from the name (use .npy or .safetensors, "
                                "or pass the format)");
    }
    lofp_sbuf hdr = {0};
    size_t *order = NULL, total;
    lofp_status st = prepare(fmt, tensors, n, metadata, n_meta, path, &hdr, &order, &total, err);
    if (st) { lofp_sbuf_free(&hdr); return st; }

    /* the temporary file lives next to the destination so that rename() is atomic */
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    const char *base = slash ? slash + 1 : path;
    char *dir = malloc(dlen + 2);
    char *tmp = malloc(strlen(path) + 64);
    int fd = -1;
    if (!dir || !tmp) { st = lofp_io_fail(err, LOFP_ERR_NOMEM, path, "out of memory"); goto done; }
    if (slash) {
        memcpy(dir, path, dlen ? dlen : 1);       /* "/x" -> dir "/" */
        dir[dlen ? dlen : 1] = '\0';
    } else {
        strcpy(dir, ".");
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot replace a directory");
        goto done;
    }
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 16 ^
                        (uint64_t)(uintptr_t)&ts;
        for (int attempt = 0; attempt < 100; attempt++) {
            uint64_t r = lofp_splitmix64(&seed);
            snprintf(tmp, strlen(path) + 64, "%.*s.%s.tmp-%012llx", (int)(slash ? dlen + 1 : 0),
                     path, base, (unsigned long long)(r & 0xFFFFFFFFFFFFull));
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd >= 0 || errno != EEXIST) break;
        }
    }
    if (fd < 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot create a temporary file in '%s': %s", dir,
                          errstr(errno, e, sizeof e));
        goto done;
    }
    if (write_all(fd, hdr.p, hdr.len) != 0) goto write_error;
    for (size_t i = 0; i < n; i++) {
        const lofp_tensor_desc *t = &tensors[order[i]];
        if (t->nbytes && write_all(fd, t->data, t->nbytes) != 0) goto write_error;
    }
    if (fsync(fd) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "fsync of the temporary file failed: %s",
                          errstr(errno, e, sizeof e));
        goto remove_tmp;
    }
    {
        int rc = close(fd);
        fd = -1;
        if (rc != 0) {
            st = lofp_io_fail(err, LOFP_ERR_IO, path, "closing the temporary file failed: %s",
                              errstr(errno, e, sizeof e));
            goto remove_tmp;
        }
    }
    if (rename(tmp, path) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot rename the temporary file into place: %s",
                          errstr(errno, e, sizeof e));
        goto remove_tmp;
    }
    {   /* make the rename durable; best effort (some file systems refuse directory fsync) */
        int dfd = open(dir, O_RDONLY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    lofp_io_ok(err);
    st = LOFP_OK;
    goto done;

write_error:
    st = lofp_io_fail(err, LOFP_ERR_IO, path, "writing %zu bytes failed: %s", total,
                      errstr(errno, e, sizeof e));
remove_tmp:
    if (fd >= 0) close(fd);
    fd = -1;
    unlink(tmp);
done:
    if (fd >= 0) close(fd);
    free(dir);
    free(tmp);
    free(order);
    lofp_sbuf_free(&hdr);
    return st;
}

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
    if (!lofp_dtype_name(t->dtype))
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "%s: unknown dtype %d", who, (int)t->dtype);
    if (t->ndim && !t->shape)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "%s: NULL shape", who);
    if (t->ndim > LOFP_MAX_NDIM)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                            "%s: %zu dimensions; a tensor has at most %d dimensions (numpy's limit)", who,
                            t->ndim, LOFP_MAX_NDIM);
    size_t need;
    lofp_status st = lofp_io_tensor_bytes(t->dtype, t->shape, t->ndim, &need);
    if (st == LOFP_ERR_SIZE_OVERFLOW)
        return lofp_io_fail(err, LOFP_ERR_SIZE_OVERFLOW, file, "%s: shape %s x %s overflows size_t",
                            who, lofp_io_shape_str(shp, sizeof shp, t->shape, t->ndim),
                            lofp_dtype_name(t->dtype));
    if (st == LOFP_ERR_SHAPE ||
        (t->dtype == LOFP_DTYPE_F4 && (t->ndim == 0 || t->shape[t->ndim - 1] % 2)))
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                            "%s: shape %s does not fill whole bytes of %s (F4 needs an even last "
                            "dimension: the shape counts elements, two per byte; F6 a multiple "
                            "of 4 elements)", who, lofp_io_shape_str(shp, sizeof shp, t->shape, t->ndim),
                            lofp_dtype_name(t->dtype));
    if (st) return lofp_io_fail(err, st, file, "%s: invalid shape", who);
    if (need != t->nbytes)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                            "%s: shape %s x %s needs %zu bytes but %zu were given", who,
                            lofp_io_shape_str(shp, sizeof shp, t->shape, t->ndim),
                            lofp_dtype_name(t->dtype), need, t->nbytes);
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

lofp_status lofp_file_encode(lofp_file_format fmt, const lofp_tensor_desc *tensors, size_t n,
                             const lofp_metadata_entry *metadata, size_t n_meta, void *out,
                             size_t cap, size_t *out_len, lofp_io_error *err)
{
    if (!out_len) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "NULL out_len");
    for (size_t i = 0; tensors && i < n; i++) {
        if (tensors[i].nbytes && !tensors[i].data) {
            char q[128];
            if (tensors[i].name)
                return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "tensor %s: NULL data",
                                    lofp_io_quote(q, sizeof q, tensors[i].name, strlen(tensors[i].name)));
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "tensor %zu: NULL data", i);
        }
    }
    lofp_sbuf hdr = {0};
    size_t total;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return lofp_io_fail(err, LOFP_ERR_NOMEM, NULL, "out of memory");
    lofp_status st = lofp_io_prepare(fmt, tensors, n, metadata, n_meta, NULL, &hdr, order, &total, err);
    if (st) { free(order); lofp_sbuf_free(&hdr); return st; }
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

int lofp_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

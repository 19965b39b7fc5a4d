/* ck_writer.c -- the shard writer: a safetensors file whose header is written first from the
 * tensor descriptions, then each tensor's bytes at its offset (in any order), then fsync and
 * rename. Only one converted tensor is in memory at a time, whatever the shard's size.
 * Layout: tensors ordered by descending element width (then as given), so every tensor is
 * aligned to its element size, as the safetensors package lays files out. */
#include "ck_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct st_writer {
    char *path;
    char *tmp;
    int fd;
    size_t n;
    size_t *off;     /* absolute file offset of tensor i's data */
    size_t *len;
    size_t *filled;  /* bytes put so far for tensor i */
    size_t total;
};

static int dtype_width(lofp_io_dtype dt)
{
    unsigned b = lofp_io_dtype_bits(dt);
    return b >= 8 ? (int)b : 8;
}

lofp_status st_writer_open(const char *path, const lofp_tensor_desc *t, size_t n,
                           const lofp_metadata_entry *meta, size_t n_meta, st_writer **out,
                           lofp_io_error *err)
{
    *out = NULL;
    st_writer *w = calloc(1, sizeof *w);
    size_t *order = malloc((n + 1) * sizeof *order);
    if (!w || !order) { free(w); free(order); return ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path); }
    w->fd = -1;
    w->n = n;
    w->path = ck_strdup(path);
    w->off = calloc(n + 1, sizeof *w->off);
    w->len = calloc(n + 1, sizeof *w->len);
    w->filled = calloc(n + 1, sizeof *w->filled);
    if (!w->path || !w->off || !w->len || !w->filled) {
        free(order);
        st_writer_abort(w);
        return ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path);
    }
    /* stable order by descending width */
    size_t k = 0;
    for (int width = 64; width >= 8; width /= 2)
        for (size_t i = 0; i < n; i++)
            if (dtype_width(t[i].dtype) == width) order[k++] = i;
    if (k != n) {
        free(order);
        st_writer_abort(w);
        return ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: a tensor has an unknown dtype", path);
    }
    size_t rel = 0;
    size_t *relo = calloc(n + 1, sizeof *relo);
    for (size_t j = 0; relo && j < n; j++) {
        size_t i = order[j], nb;
        if (lofp_io_tensor_bytes(t[i].dtype, t[i].shape, t[i].ndim, &nb) != LOFP_OK) {
            free(relo);
            free(order);
            st_writer_abort(w);
            return ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor '%s': bad shape", path, t[i].name);
        }
        w->len[i] = nb;
        relo[i] = rel;
        rel += nb;
    }
    free(order);
    if (!relo) { st_writer_abort(w); return ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path); }
    ck_buf h = { 0 };
    ck_buf_putc(&h, '{');
    int first = 1;
    if (n_meta) {
        ck_buf_puts(&h, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            ckj *kv = ckj_new_str(meta[i].key), *vv = ckj_new_str(meta[i].value);
            if (i) ck_buf_putc(&h, ',');
            if (kv && vv) { ckj_dump(&h, kv, -1); ck_buf_putc(&h, ':'); ckj_dump(&h, vv, -1); }
            else h.failed = 1;
            ckj_free(kv);
            ckj_free(vv);
        }
        ck_buf_putc(&h, '}');
        first = 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!first) ck_buf_putc(&h, ',');
        first = 0;
        ckj *nm = ckj_new_str(t[i].name);
        if (nm) ckj_dump(&h, nm, -1);
        else h.failed = 1;
        ckj_free(nm);
        ck_buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", lofp_io_dtype_name(t[i].dtype));
        for (size_t d = 0; d < t[i].ndim; d++) ck_buf_printf(&h, "%s%zu", d ? "," : "", t[i].shape[d]);
        ck_buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", relo[i], relo[i] + w->len[i]);
    }
    ck_buf_putc(&h, '}');
    while ((h.len + 8) % 8) ck_buf_putc(&h, ' ');
    if (h.failed) {
        free(relo);
        ck_buf_free(&h);
        st_writer_abort(w);
        return ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < n; i++) w->off[i] = 8 + h.len + relo[i];
    w->total = 8 + h.len + rel;
    free(relo);
    w->fd = ck_tmp_open(path, &w->tmp);
    if (w->fd < 0) {
        ck_buf_free(&h);
        lofp_status s = ck_fail(err, LOFP_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        st_writer_abort(w);
        return s;
    }
    uint8_t len8[8];
    uint64_t hl = h.len;
    for (int b = 0; b < 8; b++) len8[b] = (uint8_t)(hl >> (8 * b));
    int ok = ck_write_all(w->fd, len8, 8) && ck_write_all(w->fd, h.p, h.len);
    ck_buf_free(&h);
    if (ok && w->total > 8 + hl && ftruncate(w->fd, (off_t)w->total) != 0) ok = 0;
    if (!ok) {
        lofp_status s = ck_fail(err, LOFP_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        st_writer_abort(w);
        return s;
    }
    *out = w;
    return LOFP_OK;
}

lofp_status st_writer_put_at(st_writer *w, size_t i, const void *data, size_t n, lofp_io_error *err)
{
    if (i >= w->n || w->filled[i] + n > w->len[i])
        return ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor %zu: more bytes than its shape holds", w->path, i);
    const char *p = data;
    size_t pos = w->off[i] + w->filled[i];
    size_t left = n;
    while (left) {
        ssize_t r = pwrite(w->fd, p, left > (1u << 30) ? (1u << 30) : left, (off_t)pos);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return ck_fail(err, LOFP_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
        p += r;
        pos += (size_t)r;
        left -= (size_t)r;
    }
    w->filled[i] += n;
    return LOFP_OK;
}

lofp_status st_writer_finish(st_writer *w, lofp_io_error *err)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->filled[i] != w->len[i]) {
            lofp_status s = ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor %zu got %zu of %zu bytes", w->path, i,
                                    w->filled[i], w->len[i]);
            st_writer_abort(w);
            return s;
        }
    lofp_status s = ck_commit(w->fd, w->tmp, w->path, err);
    w->fd = -1;
    w->tmp = NULL;
    st_writer_abort(w);
    return s;
}

void st_writer_abort(st_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) { unlink(w->tmp); free(w->tmp); }
    free(w->path);
    free(w->off);
    free(w->len);
    free(w->filled);
    free(w);
}

/* io_reader.c -- the row reader (lofp_row_reader_*): one tensor of an open file as chunks of whole
 * rows, straight from the file's mapping. Pages of chunks already consumed are released from the
 * process, so the resident set stays near one chunk however large the file. */
#define _DEFAULT_SOURCE /* madvise flags */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22   /* Linux 5.14; older kernels answer EINVAL, which is harmless */
#endif

struct lofp_row_reader {
    const lofp_file *f;
    const lofp_tensor_info *t;
    size_t rows;          /* rows of the tensor */
    size_t row_bytes;
    size_t chunk_rows;
    size_t next_row;      /* first row of the next chunk */
    int copy;             /* the tensor is misaligned in the file: chunks are copied to buf */
    uint8_t *buf;
    size_t page;
    int held;             /* a chunk of the mapping is out: [held_lo, held_hi) file offsets */
    size_t held_lo, held_hi;
};

/* madvise over the whole pages of file bytes [lo, hi) of f's mapping (only for real mappings). */
static void advise(const lofp_row_reader *r, size_t lo, size_t hi, int advice, int outward)
{
    const lofp_file *f = r->f;
    if (!f->map || hi <= lo) return;
    size_t a = lo / r->page * r->page;
    size_t b = outward ? (hi + r->page - 1) / r->page * r->page : hi / r->page * r->page;
    if (b > f->map_len) b = (f->map_len + r->page - 1) / r->page * r->page;
    if (b <= a) return;
    (void)madvise((uint8_t *)f->map + a, b - a, advice);
}

static void release_held(lofp_row_reader *r)
{
    if (!r->held) return;
    /* only this process's mapping of pages it no longer needs: the page cache keeps them, and a
     * read-only private mapping refaults the same bytes if anyone reads there again */
    advise(r, r->held_lo, r->held_hi, MADV_DONTNEED, 0);
    r->held = 0;
}

lofp_status lofp_row_reader_open(const lofp_file *f, const lofp_tensor_info *t, size_t chunk_rows,
                                 lofp_row_reader **out, lofp_io_error *err)
{
    if (out) *out = NULL;
    if (!f || !t || !out)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, f ? f->display : NULL, "NULL argument");
    if (t < f->tensors || t >= f->tensors + f->n_tensors)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, f->display,
                            "the tensor given to the row reader is not one of this file's");
    char q[128];
    unsigned bits = lofp_dtype_bits(t->dtype);
    size_t k = t->ndim ? t->shape[t->ndim - 1] : 1;
    size_t rows = k ? t->numel / k : 0;
    size_t row_bits = k * bits;   /* cannot overflow: numel * bits fits (checked at open) */
    if (rows && row_bits % 8)
        return lofp_io_fail(err, LOFP_ERR_SHAPE, f->display,
                            "tensor %s: a row of %zu %s elements does not fill whole bytes",
                            lofp_io_quote(q, sizeof q, t->name, strlen(t->name)), k,
                            lofp_dtype_name(t->dtype));
    lofp_row_reader *r = calloc(1, sizeof *r);
    if (!r) return lofp_io_fail(err, LOFP_ERR_NOMEM, f->display, "out of memory");
    r->f = f;
    r->t = t;
    r->rows = rows;
    r->row_bytes = row_bits / 8;
    long pg = sysconf(_SC_PAGESIZE);
    r->page = pg > 0 ? (size_t)pg : 4096;
    if (!chunk_rows) chunk_rows = r->row_bytes ? LOFP_IO_CHUNK_BYTES / r->row_bytes : rows;
    if (!chunk_rows) chunk_rows = 1;
    if (chunk_rows > rows && rows) chunk_rows = rows;
    r->chunk_rows = chunk_rows;
    size_t esize = bits >= 8 ? bits / 8 : 1;
    r->copy = rows && ((uintptr_t)t->data % esize) != 0;
    if (r->copy) {
        r->buf = aligned_alloc(64, (chunk_rows * r->row_bytes + 63) / 64 * 64);
        if (!r->buf) {
            free(r);
            return lofp_io_fail(err, LOFP_ERR_NOMEM, f->display, "out of memory");
        }
    }
    lofp_io_ok(err);
    *out = r;
    return LOFP_OK;
}

size_t lofp_row_reader_chunk_rows(const lofp_row_reader *r) { return r ? r->chunk_rows : 0; }

lofp_status lofp_row_reader_next(lofp_row_reader *r, lofp_row_chunk *c, lofp_io_error *err)
{
    if (!r || !c) return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "NULL row reader or chunk");
    release_held(r);
    memset(c, 0, sizeof *c);
    c->row_bytes = r->row_bytes;
    c->row0 = r->next_row;
    if (r->next_row >= r->rows) {
        c->data = r->t->data;
        lofp_io_ok(err);
        return LOFP_OK;
    }
    size_t n = r->rows - r->next_row;
    if (n > r->chunk_rows) n = r->chunk_rows;
    size_t lo = r->t->offset + r->next_row * r->row_bytes, bytes = n * r->row_bytes;
    const uint8_t *src = (const uint8_t *)r->t->data + r->next_row * r->row_bytes;
    /* read the following chunk ahead (cold files), map this one in a single call */
    if (r->next_row + n < r->rows) {
        size_t m = r->rows - r->next_row - n;
        if (m > r->chunk_rows) m = r->chunk_rows;
        advise(r, lo + bytes, lo + bytes + m * r->row_bytes, MADV_WILLNEED, 1);
    }
    advise(r, lo, lo + bytes, MADV_POPULATE_READ, 1);
    if (r->copy) {
        memcpy(r->buf, src, bytes);
        c->data = r->buf;
    } else {
        c->data = src;
    }
    r->held = 1;
    r->held_lo = lo;
    r->held_hi = lo + bytes;
    c->rows = n;
    r->next_row += n;
    lofp_io_ok(err);
    return LOFP_OK;
}

void lofp_row_reader_rewind(lofp_row_reader *r)
{
    if (!r) return;
    release_held(r);
    r->next_row = 0;
}

void lofp_row_reader_close(lofp_row_reader *r)
{
    if (!r) return;
    release_held(r);
    free(r->buf);
    free(r);
}

/* fuzz_check.h -- the property every input must satisfy, shared by the libFuzzer harnesses
 * (fuzz/fuzz_*.c) and the corpus regression test (tests/io/test_io_corpus.c).
 *
 * For any bytes: lofp_file_open_memory() returns without crashing; on failure the status is
 * FORMAT or UNSUPPORTED with a NUL-terminated message naming the input; on success every tensor
 * lies inside the buffer, is found by name, has nbytes == lofp_io_tensor_bytes(shape), and
 * encoding the parsed tensors and metadata again and parsing the result gives the same tensors,
 * metadata and bytes. Returns NULL, or a description of the violated property. */
#ifndef LOFP_FUZZ_CHECK_H
#define LOFP_FUZZ_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/io.h"

static const char *lofp_fuzz_compare(const lofp_file *a, const lofp_file *b)
{
    if (lofp_file_count(a) != lofp_file_count(b)) return "re-parsed tensor count differs";
    for (size_t i = 0; i < lofp_file_count(a); i++) {
        const lofp_tensor_info *x = lofp_file_tensor(a, i);
        const lofp_tensor_info *y = lofp_file_format_of(b) == LOFP_FORMAT_NPY ? lofp_file_tensor(b, 0)
                                                                               : lofp_file_find(b, x->name);
        if (!y) return "re-parsed file lacks a tensor";
        if (x->dtype != y->dtype || x->ndim != y->ndim || x->nbytes != y->nbytes || x->numel != y->numel)
            return "re-parsed tensor differs in dtype, shape or size";
        for (size_t k = 0; k < x->ndim; k++)
            if (x->shape[k] != y->shape[k]) return "re-parsed shape differs";
        if (x->nbytes && memcmp(x->data, y->data, x->nbytes) != 0) return "re-parsed data differ";
    }
    if (lofp_file_metadata_count(a) != lofp_file_metadata_count(b)) return "re-parsed metadata count differs";
    for (size_t i = 0; i < lofp_file_metadata_count(a); i++) {
        const lofp_metadata_entry *m = lofp_file_metadata(a, i);
        const char *v = lofp_file_metadata_get(b, m->key);
        if (!v || strcmp(v, m->value) != 0) return "re-parsed metadata differ";
    }
    return NULL;
}

static const char *lofp_fuzz_check(const uint8_t *data, size_t size, lofp_file_format fmt,
                                   const char *name)
{
    lofp_file *f = NULL;
    lofp_io_error err;
    lofp_status st = lofp_file_open_memory(data, size, fmt, name, &f, &err);
    if (st != LOFP_OK) {
        if (f) return "failed open left a handle";
        if (err.status != st) return "err.status differs from the return value";
        if (!memchr(err.message, 0, sizeof err.message)) return "message not terminated";
        if (strncmp(err.message, name, strlen(name)) != 0) return "message does not name the input";
        if (st != LOFP_ERR_FORMAT && st != LOFP_ERR_UNSUPPORTED && st != LOFP_ERR_NOMEM)
            return "unexpected status for malformed input";
        return NULL;
    }
    const char *bad = NULL;
    size_t n = lofp_file_count(f), n_meta = lofp_file_metadata_count(f);
    lofp_tensor_desc *d = calloc(n ? n : 1, sizeof *d);
    lofp_metadata_entry *m = calloc(n_meta ? n_meta : 1, sizeof *m);
    uint8_t *enc = NULL;
    if (!d || !m) { bad = NULL; goto out; }
    volatile uint8_t sink = 0;
    size_t prev_end = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        size_t nb = 0;
        if ((const uint8_t *)t->data != data + t->offset) bad = "data pointer != base + offset";
        else if (t->offset > size || t->nbytes > size - t->offset) bad = "tensor outside the buffer";
        else if (t->offset < prev_end) bad = "tensors not in data order or overlapping";
        else if (lofp_file_find(f, t->name) != t) bad = "tensor not found by its name";
        else if (lofp_io_tensor_bytes(t->dtype, t->shape, t->ndim, &nb) != LOFP_OK || nb != t->nbytes)
            bad = "nbytes != shape x dtype";
        if (bad) break;
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        prev_end = t->offset + t->nbytes;
        d[i] = (lofp_tensor_desc){t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes};
    }
    (void)sink;
    for (size_t i = 0; i < n_meta && !bad; i++) m[i] = *lofp_file_metadata(f, i);
    if (bad) goto out;
    /* encode what was read and read it back */
    lofp_file_format out_fmt = lofp_file_format_of(f);
    size_t len = 0;
    st = lofp_file_encode(out_fmt, d, n, m, n_meta, NULL, 0, &len, &err);
    if (st == LOFP_ERR_INVALID_ARG && out_fmt == LOFP_FORMAT_SAFETENSORS) {
        /* the one thing the reader accepts and the writer refuses: F4 with an odd last dim */
        int odd_f4 = 0;
        for (size_t i = 0; i < n; i++)
            if (d[i].dtype == LOFP_DTYPE_F4 && d[i].ndim && d[i].shape[d[i].ndim - 1] % 2) odd_f4 = 1;
        if (!odd_f4) bad = "re-encoding a parsed file failed";
        goto out;
    }
    if (st != LOFP_OK) {
        if (st != LOFP_ERR_NOMEM) bad = "re-encoding a parsed file failed";
        goto out;
    }
    enc = malloc(len ? len : 1);
    if (!enc) goto out;
    size_t len2 = 0;
    if (lofp_file_encode(out_fmt, d, n, m, n_meta, enc, len, &len2, &err) != LOFP_OK || len2 != len) {
        bad = "second encode differs";
        goto out;
    }
    lofp_file *g = NULL;
    st = lofp_file_open_memory(enc, len, out_fmt, name, &g, &err);
    if (st != LOFP_OK) {
        bad = "the re-encoded file does not parse";
        goto out;
    }
    bad = lofp_fuzz_compare(f, g);
    lofp_file_close(g);
out:
    free(enc);
    free(d);
    free(m);
    lofp_file_close(f);
    return bad;
}

#endif

/* io_safetensors.c -- the .safetensors format: u64 little-endian header length N, N bytes of JSON
 * {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}, ...},
 * then the data region, which the tensors must cover exactly, without gaps or overlaps.
 * Validation follows the safetensors package (safetensors/src/tensor.rs) and is stricter where
 * that is cheap: duplicate keys, unknown fields and trailing garbage are errors. */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const lofp_json_doc *d, uint32_t node) { return d->strings + d->nodes[node].first; }

/* A non-negative integer node as size_t. */
static int juint(const lofp_json_doc *d, uint32_t node, size_t *out)
{
    const lofp_json_node *n = &d->nodes[node];
    if (n->type != LOFP_JSON_INT || n->negative) return 0;
    if (n->num > SIZE_MAX) return 0;
    *out = (size_t)n->num;
    return 1;
}

static const char *jtype_name(uint8_t t)
{
    switch (t) {
    case LOFP_JSON_NULL: return "null";
    case LOFP_JSON_FALSE: case LOFP_JSON_TRUE: return "a boolean";
    case LOFP_JSON_INT: return "a number";
    case LOFP_JSON_STRING: return "a string";
    case LOFP_JSON_ARRAY: return "an array";
    default: return "an object";
    }
}

typedef struct {
    lofp_tensor_info *t;
    size_t begin, end;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

lofp_status lofp_st_parse(lofp_file *f, lofp_io_error *err)
{
    const char *file = f->display;
    const uint8_t *b = f->base;
    size_t size = f->size;
    char q[128], shp[160], msg[256];
    if (size < 8)
        return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                            "not a safetensors file: %zu bytes, shorter than the 8-byte header length",
                            size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    if (n > LOFP_ST_MAX_HEADER)
        return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                            "header length %llu exceeds the safetensors limit of %u bytes",
                            (unsigned long long)n, LOFP_ST_MAX_HEADER);
    if (n > size - 8)
        return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                            "header length %llu runs past the end of the file (%zu bytes)",
                            (unsigned long long)n, size);
    size_t hlen = (size_t)n, data_start = 8 + hlen, data_len = size - data_start;

    lofp_status st = lofp_json_parse((const char *)b + 8, hlen, &f->json, msg, sizeof msg);
    if (st) return lofp_io_fail(err, st, file, "header: %s", msg);
    const lofp_json_doc *d = &f->json;
    const lofp_json_node *root = &d->nodes[0];
    if (root->type != LOFP_JSON_OBJECT)
        return lofp_io_fail(err, LOFP_ERR_FORMAT, file, "header: the JSON value is %s, not an object",
                            jtype_name(root->type));

    /* count tensors, metadata entries and dims first: one allocation each */
    size_t n_t = 0, n_dims = 0, n_meta = 0;
    uint32_t meta_node = 0;
    for (uint32_t c = root->first; c; c = d->nodes[c].next) {
        const lofp_json_node *m = &d->nodes[c];
        const char *key = d->strings + m->key;
        lofp_io_quote(q, sizeof q, key, m->key_len);
        if (m->key_len == 12 && memcmp(key, "__metadata__", 12) == 0) {
            if (m->type != LOFP_JSON_OBJECT)
                return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                                    "__metadata__ is %s, not an object of strings", jtype_name(m->type));
            for (uint32_t e = m->first; e; e = d->nodes[e].next) {
                const lofp_json_node *en = &d->nodes[e];
                lofp_io_quote(q, sizeof q, d->strings + en->key, en->key_len);
                if (en->type != LOFP_JSON_STRING)
                    return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                                        "__metadata__ entry %s is %s, not a string", q,
                                        jtype_name(en->type));
                if (memchr(d->strings + en->key, 0, en->key_len) ||
                    memchr(jstr(d, e), 0, en->count))
                    return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                                        "__metadata__ entry %s contains a NUL character", q);
                n_meta++;
            }
            meta_node = c;
            continue;
        }
        if (memchr(key, 0, m->key_len))
            return lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: the name contains a NUL character", q);
        if (m->type != LOFP_JSON_OBJECT)
            return lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: the entry is %s, not an object",
                                q, jtype_name(m->type));
        uint32_t sh = lofp_json_get(d, c, "shape");
        if (sh && d->nodes[sh].type == LOFP_JSON_ARRAY) n_dims += d->nodes[sh].count;
        n_t++;
    }

    f->tensors = calloc(n_t ? n_t : 1, sizeof *f->tensors);
    f->dims = malloc((n_dims ? n_dims : 1) * sizeof *f->dims);
    f->meta = calloc(n_meta ? n_meta : 1, sizeof *f->meta);
    span *spans = malloc((n_t ? n_t : 1) * sizeof *spans);
    if (!f->tensors || !f->dims || !f->meta || !spans) {
        free(spans);
        return lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory");
    }
    if (meta_node) {
        for (uint32_t e = d->nodes[meta_node].first; e; e = d->nodes[e].next) {
            f->meta[f->n_meta].key = d->strings + d->nodes[e].key;
            f->meta[f->n_meta].value = jstr(d, e);
            f->n_meta++;
        }
    }

    size_t k = 0, used_dims = 0;
    for (uint32_t c = root->first; c; c = d->nodes[c].next) {
        if (c == meta_node) continue;
        const lofp_json_node *m = &d->nodes[c];
        const char *name = d->strings + m->key;
        lofp_io_quote(q, sizeof q, name, m->key_len);
        uint32_t dt_n = 0, sh_n = 0, off_n = 0;
        for (uint32_t e = m->first; e; e = d->nodes[e].next) {
            const lofp_json_node *en = &d->nodes[e];
            const char *fk = d->strings + en->key;
            if (en->key_len == 5 && memcmp(fk, "dtype", 5) == 0) dt_n = e;
            else if (en->key_len == 5 && memcmp(fk, "shape", 5) == 0) sh_n = e;
            else if (en->key_len == 12 && memcmp(fk, "data_offsets", 12) == 0) off_n = e;
            else {
                char fq[80];
                st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                                  "tensor %s: unknown field %s (expected dtype, shape, data_offsets)",
                                  q, lofp_io_quote(fq, sizeof fq, fk, en->key_len));
                goto out;
            }
        }
        if (!dt_n || !sh_n || !off_n) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: missing field '%s'", q,
                              !dt_n ? "dtype" : !sh_n ? "shape" : "data_offsets");
            goto out;
        }
        /* dtype */
        if (d->nodes[dt_n].type != LOFP_JSON_STRING) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: dtype is %s, not a string", q,
                              jtype_name(d->nodes[dt_n].type));
            goto out;
        }
        lofp_dtype dt = lofp_dtype_lookup(jstr(d, dt_n), d->nodes[dt_n].count);
        if (!dt) {
            char dq[64];
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: unknown dtype %s", q,
                              lofp_io_quote(dq, sizeof dq, jstr(d, dt_n), d->nodes[dt_n].count));
            goto out;
        }
        /* shape */
        if (d->nodes[sh_n].type != LOFP_JSON_ARRAY) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: shape is %s, not an array", q,
                              jtype_name(d->nodes[sh_n].type));
            goto out;
        }
        size_t *dims = f->dims + used_dims, ndim = 0, numel = 1;
        int overflow = 0;
        for (uint32_t e = d->nodes[sh_n].first; e; e = d->nodes[e].next) {
            const lofp_json_node *en = &d->nodes[e];
            if (en->type != LOFP_JSON_INT || en->negative) {
                st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: shape element %zu is %s%s",
                                  q, ndim, en->type == LOFP_JSON_INT ? "negative" : jtype_name(en->type),
                                  en->type == LOFP_JSON_INT ? "" : ", not a non-negative integer");
                goto out;
            }
            if (!juint(d, e, &dims[ndim])) { dims[ndim] = SIZE_MAX; overflow = 1; }
            else if (!lofp_mul_size(numel, dims[ndim], &numel)) overflow = 1;
            ndim++;
        }
        used_dims += ndim;
        if (ndim > LOFP_MAX_NDIM) {
            st = lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file,
                              "tensor %s: shape has %zu dimensions; lofp reads at most %d dimensions (numpy's limit)",
                              q, ndim, LOFP_MAX_NDIM);
            goto out;
        }
        if (overflow) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: shape %s has more elements than fit in 64 bits", q,
                              lofp_io_shape_str(shp, sizeof shp, dims, ndim));
            goto out;
        }
        size_t nbytes;
        lofp_status bs = lofp_io_tensor_bytes(dt, dims, ndim, &nbytes);
        if (bs == LOFP_ERR_SHAPE) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: %zu %s elements do not fill whole bytes (%s packs %s)",
                              q, numel, lofp_dtype_name(dt), lofp_dtype_name(dt),
                              dt == LOFP_DTYPE_F4 ? "two per byte" : "four per three bytes");
            goto out;
        } else if (bs) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: shape %s x %s overflows 64 bits", q,
                              lofp_io_shape_str(shp, sizeof shp, dims, ndim), lofp_dtype_name(dt));
            goto out;
        }
        /* data_offsets */
        const lofp_json_node *on = &d->nodes[off_n];
        if (on->type != LOFP_JSON_ARRAY || on->count != 2) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: data_offsets must be an array [begin, end]", q);
            goto out;
        }
        uint32_t b_n = on->first, e_n = d->nodes[b_n].next;
        size_t begin, end;
        for (int w = 0; w < 2; w++) {
            uint32_t x = w ? e_n : b_n;
            if (d->nodes[x].type != LOFP_JSON_INT || d->nodes[x].negative) {
                int isint = d->nodes[x].type == LOFP_JSON_INT;
                st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "tensor %s: data_offsets %s is %s%s", q,
                                  w ? "end" : "begin", isint ? "negative" : jtype_name(d->nodes[x].type),
                                  isint ? "" : ", not a non-negative integer");
                goto out;
            }
        }
        if (!juint(d, b_n, &begin) || !juint(d, e_n, &end) || begin > data_len || end > data_len) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: data_offsets [%llu, %llu] out of range: the data region "
                              "has %zu bytes", q, (unsigned long long)d->nodes[b_n].num,
                              (unsigned long long)d->nodes[e_n].num, data_len);
            goto out;
        }
        if (end < begin) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: data_offsets [%zu, %zu] end before they begin", q, begin, end);
            goto out;
        }
        if (end - begin != nbytes) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: data_offsets [%zu, %zu] span %zu bytes but shape %s x %s "
                              "needs %zu", q, begin, end, end - begin,
                              lofp_io_shape_str(shp, sizeof shp, dims, ndim), lofp_dtype_name(dt),
                              nbytes);
            goto out;
        }
        lofp_tensor_info *t = &f->tensors[k];
        t->name = name;
        t->dtype = dt;
        t->ndim = ndim;
        t->shape = dims;
        t->numel = numel;
        t->offset = data_start + begin;
        t->nbytes = nbytes;
        t->data = b + data_start + begin;
        spans[k].t = t;
        spans[k].begin = begin;
        spans[k].end = end;
        k++;
    }

    /* the tensors must tile the data region exactly */
    qsort(spans, n_t, sizeof *spans, span_cmp);
    size_t at = 0;
    for (size_t i = 0; i < n_t; i++) {
        if (spans[i].begin > at) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "bytes [%zu, %zu) of the data region belong to no tensor (gap before "
                              "tensor %s)", at, spans[i].begin,
                              lofp_io_quote(q, sizeof q, spans[i].t->name, strlen(spans[i].t->name)));
            goto out;
        }
        if (spans[i].begin < at) {
            char q2[128];
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "tensor %s: data_offsets [%zu, %zu] overlap tensor %s [%zu, %zu]",
                              lofp_io_quote(q, sizeof q, spans[i].t->name, strlen(spans[i].t->name)),
                              spans[i].begin, spans[i].end,
                              lofp_io_quote(q2, sizeof q2, spans[i - 1].t->name,
                                            strlen(spans[i - 1].t->name)),
                              spans[i - 1].begin, spans[i - 1].end);
            goto out;
        }
        at = spans[i].end;
    }
    if (at != data_len) {
        st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                          "%zu trailing bytes after the last tensor: the tensors cover %zu of the "
                          "%zu-byte data region", data_len - at, at, data_len);
        goto out;
    }
    /* present the tensors in data order */
    {
        lofp_tensor_info *sorted = malloc((n_t ? n_t : 1) * sizeof *sorted);
        if (!sorted) { st = lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory"); goto out; }
        for (size_t i = 0; i < n_t; i++) sorted[i] = *spans[i].t;
        free(f->tensors);
        f->tensors = sorted;
        f->n_tensors = n_t;
    }
    st = LOFP_OK;
out:
    free(spans);
    return st;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct {
    const lofp_tensor_desc *t;
    size_t i;
    int rank;
} order_item;

static int order_cmp(const void *a, const void *b)
{
    const order_item *x = a, *y = b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;   /* descending alignment */
    int c = strcmp(x->t->name, y->t->name);                    /* bytewise, like Rust's Ord */
    if (c) return c;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int str_ptr_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int meta_cmp(const void *a, const void *b)
{
    return strcmp((*(const lofp_metadata_entry *const *)a)->key,
                  (*(const lofp_metadata_entry *const *)b)->key);
}

lofp_status lofp_st_header(const lofp_tensor_desc *t, size_t n, const lofp_metadata_entry *meta,
                           size_t n_meta, const char *file, lofp_sbuf *hdr, size_t *order,
                           size_t *total, lofp_io_error *err)
{
    char q[128];
    lofp_status st;
    if ((n && !t) || (n_meta && !meta) || !order)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "NULL tensor or metadata array");
    for (size_t i = 0; i < n; i++)
        if ((st = lofp_io_check_desc(&t[i], i, 1, file, err))) return st;
    for (size_t i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "metadata entry %zu: NULL key or value", i);
        if (!lofp_io_utf8_valid((const uint8_t *)meta[i].key, strlen(meta[i].key)) ||
            !lofp_io_utf8_valid((const uint8_t *)meta[i].value, strlen(meta[i].value)))
            return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                                "metadata entry %s: key or value is not valid UTF-8",
                                lofp_io_quote(q, sizeof q, meta[i].key, strlen(meta[i].key)));
    }

    order_item *items = malloc((n ? n : 1) * sizeof *items);
    const char **names = malloc((n ? n : 1) * sizeof *names);
    const lofp_metadata_entry **ms = malloc((n_meta ? n_meta : 1) * sizeof *ms);
    if (!items || !names || !ms) {
        st = lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) names[i] = t[i].name;
    qsort(names, n, sizeof *names, str_ptr_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            st = lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "tensor %s: duplicate name",
                              lofp_io_quote(q, sizeof q, names[i], strlen(names[i])));
            goto out;
        }
    }
    for (size_t i = 0; i < n_meta; i++) ms[i] = &meta[i];
    qsort(ms, n_meta, sizeof *ms, meta_cmp);
    for (size_t i = 1; i < n_meta; i++) {
        if (strcmp(ms[i - 1]->key, ms[i]->key) == 0) {
            st = lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file, "metadata key %s given twice",
                              lofp_io_quote(q, sizeof q, ms[i]->key, strlen(ms[i]->key)));
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        items[i].t = &t[i];
        items[i].i = i;
        items[i].rank = lofp_dtype_rank(t[i].dtype);
    }
    qsort(items, n, sizeof *items, order_cmp);

    /* the JSON, exactly as serde_json prints safetensors' Metadata */
    lofp_sbuf j = {0};
    lofp_sbuf_put(&j, "{", 1);
    if (n_meta) {
        lofp_sbuf_puts(&j, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) lofp_sbuf_put(&j, ",", 1);
            lofp_sbuf_json_string(&j, ms[i]->key, strlen(ms[i]->key));
            lofp_sbuf_put(&j, ":", 1);
            lofp_sbuf_json_string(&j, ms[i]->value, strlen(ms[i]->value));
        }
        lofp_sbuf_put(&j, "}", 1);
    }
    size_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        const lofp_tensor_desc *d = items[i].t;
        if (i || n_meta) lofp_sbuf_put(&j, ",", 1);
        lofp_sbuf_json_string(&j, d->name, strlen(d->name));
        lofp_sbuf_printf(&j, ":{\"dtype\":\"%s\",\"shape\":[", lofp_dtype_name(d->dtype));
        for (size_t k = 0; k < d->ndim; k++) lofp_sbuf_printf(&j, k ? ",%zu" : "%zu", d->shape[k]);
        size_t end;
        if (!lofp_add_size(offset, d->nbytes, &end)) {
            lofp_sbuf_free(&j);
            st = lofp_io_fail(err, LOFP_ERR_SIZE_OVERFLOW, file, "total data size overflows size_t");
            goto out;
        }
        lofp_sbuf_printf(&j, "],\"data_offsets\":[%zu,%zu]}", offset, end);
        offset = end;
        order[i] = items[i].i;
    }
    lofp_sbuf_put(&j, "}", 1);
    while (!j.failed && j.len % 8) lofp_sbuf_put(&j, " ", 1);
    if (j.failed) {
        lofp_sbuf_free(&j);
        st = lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory");
        goto out;
    }
    if (j.len > LOFP_ST_MAX_HEADER) {
        size_t jl = j.len;
        lofp_sbuf_free(&j);
        st = lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                          "the header would be %zu bytes, over the safetensors limit of %u", jl,
                          LOFP_ST_MAX_HEADER);
        goto out;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)j.len >> (8 * i));
    size_t start = hdr->len;
    lofp_sbuf_put(hdr, len8, 8);
    lofp_sbuf_put(hdr, j.p, j.len);
    lofp_sbuf_free(&j);
    if (hdr->failed) { st = lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory"); goto out; }
    if (!lofp_add_size(hdr->len - start, offset, total)) {
        st = lofp_io_fail(err, LOFP_ERR_SIZE_OVERFLOW, file, "file size overflows size_t");
        goto out;
    }
    st = LOFP_OK;
out:
    free(items);
    free(names);
    free(ms);
    return st;
}

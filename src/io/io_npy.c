/* io_npy.c -- the .npy format (numpy's NEP 1): versions 1.0, 2.0 and 3.0 read, 1.0 (2.0 when the
 * header is too long) written, byte-identical to numpy.save(). C order, little-endian only. */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *s;
    size_t len, pos;
    int allow_long;         /* versions 1.0 and 2.0 may carry Python 2 "3L" integers */
    const char *file;
    lofp_io_error *err;
} lit;

static lofp_status lit_fail(lit *p, lofp_status st, const char *what)
{
    return lofp_io_fail(p->err, st, p->file, "bad .npy header at byte %zu of the header: %s",
                        p->pos, what);
}

static void lit_ws(lit *p)
{
    while (p->pos < p->len) {
        uint8_t c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') break;
        p->pos++;
    }
}

static int lit_peek(lit *p) { return p->pos < p->len ? p->s[p->pos] : -1; }

/* A quoted Python string without escapes; returns its span. */
static lofp_status lit_string(lit *p, const uint8_t **str, size_t *slen)
{
    uint8_t q = p->s[p->pos];
    size_t start = ++p->pos;
    while (p->pos < p->len && p->s[p->pos] != q) {
        if (p->s[p->pos] == '\\') return lit_fail(p, LOFP_ERR_FORMAT, "escape sequences are not supported");
        if (p->s[p->pos] == '\n') return lit_fail(p, LOFP_ERR_FORMAT, "newline inside a string");
        p->pos++;
    }
    if (p->pos >= p->len) return lit_fail(p, LOFP_ERR_FORMAT, "unterminated string");
    *str = p->s + start;
    *slen = p->pos - start;
    p->pos++;
    return LOFP_OK;
}

static lofp_status lit_int(lit *p, size_t *out)
{
    int c = lit_peek(p);
    if (c == '-') return lit_fail(p, LOFP_ERR_FORMAT, "negative dimension in shape");
    if (c < '0' || c > '9') return lit_fail(p, LOFP_ERR_FORMAT, "shape must hold integers");
    size_t v = 0;
    if (c == '0' && p->pos + 1 < p->len && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')
        return lit_fail(p, LOFP_ERR_FORMAT, "integer with a leading zero");
    while ((c = lit_peek(p)) >= '0' && c <= '9') {
        if (!lofp_mul_size(v, 10, &v) || !lofp_add_size(v, (size_t)(c - '0'), &v))
            return lit_fail(p, LOFP_ERR_FORMAT, "dimension overflows 64 bits");
        p->pos++;
    }
    if (p->allow_long && (lit_peek(p) == 'L' || lit_peek(p) == 'l')) p->pos++;
    c = lit_peek(p);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.')
        return lit_fail(p, LOFP_ERR_FORMAT, "shape must hold plain decimal integers");
    *out = v;
    return LOFP_OK;
}

/* The shape tuple: "()", "(3,)", "(2, 3)", "(2, 3,)". Dims go to a growable array. */
static lofp_status lit_shape(lit *p, size_t **dims, size_t *ndim)
{
    size_t cap = 0, n = 0;
    int trailing_comma = 0;
    *dims = NULL;
    p->pos++;                                      /* ( */
    for (;;) {
        lit_ws(p);
        if (lit_peek(p) == ')') { p->pos++; break; }
        size_t v = 0;
        lofp_status st = lit_int(p, &v);
        if (st) { free(*dims); *dims = NULL; return st; }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            size_t *d = realloc(*dims, nc * sizeof *d);
            if (!d) {
                free(*dims); *dims = NULL;
                return lofp_io_fail(p->err, LOFP_ERR_NOMEM, p->file, "out of memory");
            }
            *dims = d;
            cap = nc;
        }
        (*dims)[n++] = v;
        trailing_comma = 0;
        lit_ws(p);
        if (lit_peek(p) == ',') { p->pos++; trailing_comma = 1; continue; }
        if (lit_peek(p) == ')') { p->pos++; break; }
        free(*dims); *dims = NULL;
        return lit_fail(p, LOFP_ERR_FORMAT, "expected ',' or ')' in shape");
    }
    if (n == 1 && !trailing_comma) {
        free(*dims); *dims = NULL;
        return lit_fail(p, LOFP_ERR_FORMAT, "shape is not a tuple (one element needs a trailing comma)");
    }
    *ndim = n;
    return LOFP_OK;
}

/* Maps a numpy descr to a dtype, or explains why not. */
static lofp_status npy_descr(lit *p, const uint8_t *d, size_t n, lofp_dtype *dt)
{
    char shown[64];
    lofp_io_quote(shown, sizeof shown, (const char *)d, n);
    char order = '=';
    if (n && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=' || d[0] == '!')) {
        order = (char)d[0];
        d++;
        n--;
    }
    if (n >= 1 && d[0] == 'O')
        return lofp_io_fail(p->err, LOFP_ERR_UNSUPPORTED, p->file,
                            "object arrays (descr %s) are stored with pickle, which lofp does not read",
                            shown);
    static const struct { const char *code; lofp_dtype dt; } map[] = {
        {"b1", LOFP_DTYPE_BOOL}, {"?", LOFP_DTYPE_BOOL}, {"u1", LOFP_DTYPE_U8}, {"i1", LOFP_DTYPE_I8},
        {"u2", LOFP_DTYPE_U16}, {"i2", LOFP_DTYPE_I16}, {"u4", LOFP_DTYPE_U32}, {"i4", LOFP_DTYPE_I32},
        {"u8", LOFP_DTYPE_U64}, {"i8", LOFP_DTYPE_I64}, {"f2", LOFP_DTYPE_F16}, {"f4", LOFP_DTYPE_F32},
        {"f8", LOFP_DTYPE_F64}, {"c8", LOFP_DTYPE_C64},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strlen(map[i].code) == n && memcmp(map[i].code, d, n) == 0) {
            if ((order == '>' || order == '!') && lofp_dtype_bits(map[i].dt) > 8)
                return lofp_io_fail(p->err, LOFP_ERR_UNSUPPORTED, p->file,
                                    "big-endian data (descr %s) is not supported; "
                                    "save with a little-endian dtype", shown);
            *dt = map[i].dt;
            return LOFP_OK;
        }
    }
    return lofp_io_fail(p->err, LOFP_ERR_UNSUPPORTED, p->file,
                        "dtype %s is not supported (f2, f4, f8, i1, u1, b1, i2, u2, i4, u4, i8, "
                        "u8, c8 are)", shown);
}

static char *npy_stem(const char *display, int anonymous)
{
    if (anonymous) display = NULL;
    const char *b = display ? strrchr(display, '/') : NULL;
    b = b ? b + 1 : display;
    size_t n = b ? strlen(b) : 0;
    if (!b || !n) { b = "array"; n = 5; }
    const char *dot = memchr(b, '.', n) ? strrchr(b, '.') : NULL;
    if (dot && dot != b) n = (size_t)(dot - b);
    char *s = malloc(n + 1);
    if (s) { memcpy(s, b, n); s[n] = '\0'; }
    return s;
}

lofp_status lofp_npy_parse(lofp_file *f, lofp_io_error *err)
{
    const char *file = f->display;
    const uint8_t *b = f->base;
    size_t size = f->size;
    if (size < 10 || memcmp(b, NPY_MAGIC, 6) != 0)
        return lofp_io_fail(err, LOFP_ERR_FORMAT, file, "not an .npy file (%s)",
                            size < 10 ? "shorter than the 10-byte preamble" : "bad magic");
    unsigned major = b[6], minor = b[7];
    size_t pre, hlen;
    if (major == 1 && minor == 0) {
        pre = 10;
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (size < 12)
            return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                                "truncated: a version %u.0 preamble needs 12 bytes", major);
        pre = 12;
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    } else {
        return lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file,
                            ".npy format version %u.%u is not supported (1.0, 2.0, 3.0 are)",
                            major, minor);
    }
    if (hlen > size - pre)
        return lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                            "header length %zu runs past the end of the file (%zu bytes)", hlen,
                            size);

    lit p = {b + pre, hlen, 0, major <= 2, file, err};
    lofp_status st;
    lit_ws(&p);
    if (lit_peek(&p) != '{') return lit_fail(&p, LOFP_ERR_FORMAT, "the header is not a dict");
    p.pos++;
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
    const uint8_t *descr = NULL;
    size_t descr_len = 0, ndim = 0;
    size_t *dims = NULL;
    for (;;) {
        lit_ws(&p);
        int c = lit_peek(&p);
        if (c == '}') { p.pos++; break; }
        if (c != '\'' && c != '"') { st = lit_fail(&p, LOFP_ERR_FORMAT, "expected a quoted key or '}'"); goto fail; }
        const uint8_t *key;
        size_t klen;
        if ((st = lit_string(&p, &key, &klen))) goto fail;
        lit_ws(&p);
        if (lit_peek(&p) != ':') { st = lit_fail(&p, LOFP_ERR_FORMAT, "expected ':' after a key"); goto fail; }
        p.pos++;
        lit_ws(&p);
        c = lit_peek(&p);
        if (klen == 5 && memcmp(key, "descr", 5) == 0) {
            if (have_descr) { st = lit_fail(&p, LOFP_ERR_FORMAT, "duplicate key 'descr'"); goto fail; }
            have_descr = 1;
            if (c == '[') {
                st = lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file,
                                  "structured dtypes (a list descr) are not supported");
                goto fail;
            }
            if (c != '\'' && c != '"') { st = lit_fail(&p, LOFP_ERR_FORMAT, "descr is not a string"); goto fail; }
            if ((st = lit_string(&p, &descr, &descr_len))) goto fail;
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
            if (have_fortran) { st = lit_fail(&p, LOFP_ERR_FORMAT, "duplicate key 'fortran_order'"); goto fail; }
            have_fortran = 1;
            if (p.len - p.pos >= 4 && memcmp(p.s + p.pos, "True", 4) == 0) { fortran = 1; p.pos += 4; }
            else if (p.len - p.pos >= 5 && memcmp(p.s + p.pos, "False", 5) == 0) { fortran = 0; p.pos += 5; }
            else { st = lit_fail(&p, LOFP_ERR_FORMAT, "fortran_order is not True or False"); goto fail; }
            c = lit_peek(&p);
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') {
                st = lit_fail(&p, LOFP_ERR_FORMAT, "fortran_order is not True or False");
                goto fail;
            }
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
            if (have_shape) { st = lit_fail(&p, LOFP_ERR_FORMAT, "duplicate key 'shape'"); goto fail; }
            have_shape = 1;
            if (c != '(') { st = lit_fail(&p, LOFP_ERR_FORMAT, "shape is not a tuple"); goto fail; }
            if ((st = lit_shape(&p, &dims, &ndim))) goto fail;
        } else {
            char q[80];
            lofp_io_quote(q, sizeof q, (const char *)key, klen);
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                              "bad .npy header: unexpected key %s (only descr, fortran_order, "
                              "shape are allowed)", q);
            goto fail;
        }
        lit_ws(&p);
        c = lit_peek(&p);
        if (c == ',') { p.pos++; continue; }
        if (c == '}') { p.pos++; break; }
        st = lit_fail(&p, LOFP_ERR_FORMAT, "expected ',' or '}'");
        goto fail;
    }
    lit_ws(&p);
    if (p.pos != p.len) { st = lit_fail(&p, LOFP_ERR_FORMAT, "trailing characters after the dict"); goto fail; }
    if (!have_descr || !have_fortran || !have_shape) {
        st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "bad .npy header: missing key '%s'",
                          !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
        goto fail;
    }
    lofp_dtype dt = (lofp_dtype)0;
    if ((st = npy_descr(&p, descr, descr_len, &dt))) goto fail;
    if (fortran) {
        st = lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file,
                          "Fortran-order arrays are not supported; save a C-contiguous array "
                          "(numpy.ascontiguousarray)");
        goto fail;
    }
    if (ndim > LOFP_MAX_NDIM) {
        st = lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file,
                          "shape has %zu dimensions; lofp reads at most %d dimensions (numpy's limit)", ndim,
                          LOFP_MAX_NDIM);
        goto fail;
    }
    size_t numel = 1, nbytes;
    char shp[160];
    for (size_t i = 0; i < ndim; i++) {
        if (!lofp_mul_size(numel, dims[i], &numel)) {
            st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "shape %s overflows 64 bits",
                              lofp_io_shape_str(shp, sizeof shp, dims, ndim));
            goto fail;
        }
    }
    if (!lofp_mul_size(numel, lofp_dtype_bits(dt) / 8, &nbytes)) {
        st = lofp_io_fail(err, LOFP_ERR_FORMAT, file, "shape %s x %s overflows 64 bits",
                          lofp_io_shape_str(shp, sizeof shp, dims, ndim), lofp_dtype_name(dt));
        goto fail;
    }
    size_t off = pre + hlen, avail = size - off;
    if (avail != nbytes) {
        st = lofp_io_fail(err, LOFP_ERR_FORMAT, file,
                          avail < nbytes ? "data truncated: shape %s x %s needs %zu bytes but %zu follow the header"
                                         : "shape %s x %s needs %zu bytes but %zu follow the header (trailing bytes)",
                          lofp_io_shape_str(shp, sizeof shp, dims, ndim), lofp_dtype_name(dt),
                          nbytes, avail);
        goto fail;
    }
    f->names = npy_stem(file, f->anonymous);
    f->tensors = calloc(1, sizeof *f->tensors);
    if (!f->names || !f->tensors) {
        st = lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory");
        goto fail;
    }
    f->dims = dims;
    f->n_tensors = 1;
    lofp_tensor_info *t = &f->tensors[0];
    t->name = f->names;
    t->dtype = dt;
    t->ndim = ndim;
    t->shape = dims;
    t->numel = numel;
    t->offset = off;
    t->nbytes = nbytes;
    t->data = b + off;
    return LOFP_OK;
fail:
    free(dims);
    return st;
}

/* ---- writing ------------------------------------------------------------------------------ */

lofp_status lofp_npy_header(const lofp_tensor_desc *t, size_t n, size_t n_meta, const char *file,
                            lofp_sbuf *hdr, size_t *total, lofp_io_error *err)
{
    if (n != 1)
        return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, file,
                            "an .npy file holds exactly one tensor (%zu given)", n);
    if (n_meta)
        return lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file,
                            ".npy files cannot hold metadata; use .safetensors");
    lofp_status st = lofp_io_check_desc(t, 0, 0, file, err);
    if (st) return st;
    const char *descr = lofp_io_npy_descr(t->dtype);
    if (!descr)
        return lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file,
                            "numpy has no dtype for %s; write it to a .safetensors file",
                            lofp_dtype_name(t->dtype));

    lofp_sbuf h = {0};
    lofp_sbuf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (size_t i = 0; i < t->ndim; i++) lofp_sbuf_printf(&h, i ? ", %zu" : "%zu", t->shape[i]);
    lofp_sbuf_puts(&h, t->ndim == 1 ? ",), }" : "), }");
    if (t->ndim) {
        char d0[32];
        int k = snprintf(d0, sizeof d0, "%zu", t->shape[0]);
        for (int i = k; i < NPY_GROWTH_DIGITS; i++) lofp_sbuf_put(&h, " ", 1);
    }
    if (h.failed) { lofp_sbuf_free(&h); return lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory"); }
    /* numpy's _wrap_header: pad with spaces and a final newline to a multiple of 64 */
    size_t hl = h.len + 1, pre = 10;
    size_t pad = NPY_ALIGN - (pre + hl) % NPY_ALIGN;
    unsigned major = 1;
    if (hl + pad > 0xFFFF) {
        pre = 12;
        major = 2;
        pad = NPY_ALIGN - (pre + hl) % NPY_ALIGN;
        if (hl + pad > 0xFFFFFFFFu) {
            lofp_sbuf_free(&h);
            return lofp_io_fail(err, LOFP_ERR_UNSUPPORTED, file, "shape too long for an .npy header");
        }
    }
    size_t field = hl + pad;
    uint8_t preamble[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (uint8_t)major, 0,
                            (uint8_t)field, (uint8_t)(field >> 8),
                            (uint8_t)(field >> 16), (uint8_t)(field >> 24)};
    size_t start = hdr->len;
    lofp_sbuf_put(hdr, preamble, pre);
    lofp_sbuf_put(hdr, h.p, h.len);
    lofp_sbuf_free(&h);
    for (size_t i = 0; i < pad; i++) lofp_sbuf_put(hdr, " ", 1);
    lofp_sbuf_put(hdr, "\n", 1);
    if (hdr->failed) return lofp_io_fail(err, LOFP_ERR_NOMEM, file, "out of memory");
    if (!lofp_add_size(hdr->len - start, t->nbytes, total))
        return lofp_io_fail(err, LOFP_ERR_SIZE_OVERFLOW, file, "file size overflows size_t");
    return LOFP_OK;
}

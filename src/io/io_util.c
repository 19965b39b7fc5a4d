/* io_util.c -- file layer helpers: error messages, the dtype table, UTF-8, a byte buffer. */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------------- */

lofp_status lofp_io_fail(lofp_io_error *err, lofp_status status, const char *file,
                         const char *fmt, ...)
{
    if (!err) return status;
    err->status = status;
    size_t used = 0;
    if (file) {
        /* a very long path would leave no room for the reason: keep its last 200 bytes */
        size_t fl = strlen(file);
        int k = fl > 200 ? snprintf(err->message, sizeof err->message, "...%s: ", file + fl - 197)
                         : snprintf(err->message, sizeof err->message, "%s: ", file);
        used = k < 0 ? 0 : (size_t)k;
        if (used >= sizeof err->message) used = sizeof err->message - 1;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + used, sizeof err->message - used, fmt, ap);
    va_end(ap);
    return status;
}

void lofp_io_ok(lofp_io_error *err)
{
    if (!err) return;
    err->status = LOFP_OK;
    err->message[0] = '\0';
}

const char *lofp_io_quote(char *buf, size_t cap, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap < 16) { if (cap) buf[0] = '\0'; return buf; }
    /* valid UTF-8 passes through (never cut inside a sequence); other bytes >= 0x80 are escaped */
    int utf8 = lofp_io_utf8_valid((const uint8_t *)s, len);
    buf[o++] = '\'';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int cont = utf8 && c >= 0x80 && c < 0xC0;
        if ((!cont && (o + 12 >= cap || i >= 96)) || o + 6 >= cap) {  /* keep room for "...'" */
            buf[o++] = '.'; buf[o++] = '.'; buf[o++] = '.';
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            buf[o++] = (char)c;
        } else if (c >= 0x80 && utf8) {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\'; buf[o++] = 'x'; buf[o++] = hex[c >> 4]; buf[o++] = hex[c & 15];
        }
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

const char *lofp_io_shape_str(char *buf, size_t cap, const size_t *shape, size_t ndim)
{
    size_t o = 0;
    if (cap < 32) { if (cap) buf[0] = '\0'; return buf; }
    buf[o++] = '[';
    for (size_t i = 0; i < ndim; i++) {
        if (i == 8 || o + 26 >= cap) {
            int k = snprintf(buf + o, cap - o, ", ... (%zu dims)", ndim);
            o += k > 0 ? (size_t)k : 0;
            if (o >= cap - 1) o = cap - 2;
            break;
        }
        int k = snprintf(buf + o, cap - o, "%s%zu", i ? ", " : "", shape[i]);
        o += k > 0 ? (size_t)k : 0;
    }
    buf[o++] = ']';
    buf[o] = '\0';
    return buf;
}

/* ---- dtypes ------------------------------------------------------------------------------- */

typedef struct {
    const char *name;   /* safetensors */
    unsigned bits;
    int rank;           /* position in safetensors' Dtype enum (ascending alignment) */
    const char *descr;  /* numpy, NULL when not expressible */
} dtype_row;

static const dtype_row dtype_table[LOFP_DTYPE_COUNT_] = {
    [LOFP_DTYPE_BOOL] = {"BOOL", 8, 0, "|b1"},
    [LOFP_DTYPE_F4] = {"F4", 4, 1, NULL},
    [LOFP_DTYPE_F6_E2M3] = {"F6_E2M3", 6, 2, NULL},
    [LOFP_DTYPE_F6_E3M2] = {"F6_E3M2", 6, 3, NULL},
    [LOFP_DTYPE_U8] = {"U8", 8, 4, "|u1"},
    [LOFP_DTYPE_I8] = {"I8", 8, 5, "|i1"},
    [LOFP_DTYPE_F8_E5M2] = {"F8_E5M2", 8, 6, NULL},
    [LOFP_DTYPE_F8_E4M3] = {"F8_E4M3", 8, 7, NULL},
    [LOFP_DTYPE_F8_E8M0] = {"F8_E8M0", 8, 8, NULL},
    [LOFP_DTYPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, 9, NULL},
    [LOFP_DTYPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, 10, NULL},
    [LOFP_DTYPE_I16] = {"I16", 16, 11, "<i2"},
    [LOFP_DTYPE_U16] = {"U16", 16, 12, "<u2"},
    [LOFP_DTYPE_F16] = {"F16", 16, 13, "<f2"},
    [LOFP_DTYPE_BF16] = {"BF16", 16, 14, NULL},
    [LOFP_DTYPE_I32] = {"I32", 32, 15, "<i4"},
    [LOFP_DTYPE_U32] = {"U32", 32, 16, "<u4"},
    [LOFP_DTYPE_F32] = {"F32", 32, 17, "<f4"},
    [LOFP_DTYPE_C64] = {"C64", 64, 18, "<c8"},
    [LOFP_DTYPE_F64] = {"F64", 64, 19, "<f8"},
    [LOFP_DTYPE_I64] = {"I64", 64, 20, "<i8"},
    [LOFP_DTYPE_U64] = {"U64", 64, 21, "<u8"},
};

static const dtype_row *dtype_row_of(lofp_dtype dt)
{
    if ((int)dt <= 0 || (int)dt >= LOFP_DTYPE_COUNT_) return NULL;
    return dtype_table[dt].name ? &dtype_table[dt] : NULL;
}

const char *lofp_dtype_name(lofp_dtype dt)
{
    const dtype_row *r = dtype_row_of(dt);
    return r ? r->name : NULL;
}

unsigned lofp_dtype_bits(lofp_dtype dt)
{
    const dtype_row *r = dtype_row_of(dt);
    return r ? r->bits : 0;
}

int lofp_dtype_rank(lofp_dtype dt)
{
    const dtype_row *r = dtype_row_of(dt);
    return r ? r->rank : -1;
}

const char *lofp_io_npy_descr(lofp_dtype dt)
{
    const dtype_row *r = dtype_row_of(dt);
    return r ? r->descr : NULL;
}

lofp_dtype lofp_dtype_lookup(const char *name, size_t len)
{
    for (int i = 1; i < LOFP_DTYPE_COUNT_; i++) {
        const char *n = dtype_table[i].name;
        if (n && strlen(n) == len && memcmp(n, name, len) == 0) return (lofp_dtype)i;
    }
    return (lofp_dtype)0;
}

lofp_status lofp_dtype_from_name(const char *name, lofp_dtype *out)
{
    if (!name || !out) return LOFP_ERR_NOT_FOUND;
    lofp_dtype dt = lofp_dtype_lookup(name, strlen(name));
    if (!dt) return LOFP_ERR_NOT_FOUND;
    *out = dt;
    return LOFP_OK;
}

lofp_status lofp_io_tensor_bytes(lofp_dtype dt, const size_t *shape, size_t ndim,
                                 size_t *nbytes)
{
    unsigned bits = lofp_dtype_bits(dt);
    if (!bits || !nbytes || (ndim && !shape)) return LOFP_ERR_INVALID_ARG;
    size_t numel = 1;
    for (size_t i = 0; i < ndim; i++)
        if (!lofp_mul_size(numel, shape[i], &numel)) return LOFP_ERR_SIZE_OVERFLOW;
    if (bits % 8 == 0) {
        if (!lofp_mul_size(numel, bits / 8, nbytes)) return LOFP_ERR_SIZE_OVERFLOW;
        return LOFP_OK;
    }
    /* sub-byte: numel * bits must be a whole number of bytes; compute without overflowing */
    if (bits == 4) {                          /* F4: two elements per byte */
        if (numel % 2) return LOFP_ERR_SHAPE;
        *nbytes = numel / 2;
    } else {                                  /* F6: four elements per three bytes */
        if (numel % 4) return LOFP_ERR_SHAPE;
        if (!lofp_mul_size(numel / 4, 3, nbytes)) return LOFP_ERR_SIZE_OVERFLOW;
    }
    return LOFP_OK;
}

/* ---- UTF-8 -------------------------------------------------------------------------------- */

int lofp_io_utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t n;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07; }
        else return 0;
        if (len - i <= n) return 0;
        for (size_t k = 1; k <= n; k++) {
            uint8_t d = s[i + k];
            if ((d & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (d & 0x3F);
        }
        if (n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
        if (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
        i += n + 1;
    }
    return 1;
}

/* ---- byte buffer --------------------------------------------------------------------------- */

static int sbuf_reserve(lofp_sbuf *b, size_t extra)
{
    if (b->failed) return 0;
    size_t need;
    if (!lofp_add_size(b->len, extra, &need) || !lofp_add_size(need, 1, &need)) {
        b->failed = 1;
        return 0;
    }
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) { cap = need; break; }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) { b->failed = 1; return 0; }
    b->p = p;
    b->cap = cap;
    return 1;
}

void lofp_sbuf_put(lofp_sbuf *b, const void *s, size_t n)
{
    if (!sbuf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void lofp_sbuf_putc(lofp_sbuf *b, char c) { lofp_sbuf_put(b, &c, 1); }
void lofp_sbuf_puts(lofp_sbuf *b, const char *s) { lofp_sbuf_put(b, s, strlen(s)); }

void lofp_sbuf_printf(lofp_sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof tmp) { b->failed = 1; return; }  /* callers print numbers */
    lofp_sbuf_put(b, tmp, (size_t)k);
}

void lofp_sbuf_json_string(lofp_sbuf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    lofp_sbuf_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20) {
            u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0'; u[4] = hex[c >> 4]; u[5] = hex[c & 15];
            u[6] = '\0';
            esc = u;
        }
        if (esc) {
            lofp_sbuf_put(b, s + i - run, run);
            run = 0;
            lofp_sbuf_puts(b, esc);
        } else {
            run++;
        }
    }
    lofp_sbuf_put(b, s + len - run, run);
    lofp_sbuf_put(b, "\"", 1);
}

void lofp_sbuf_free(lofp_sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

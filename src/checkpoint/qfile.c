/* qfile.c -- lofp's tensor-file convention (include/lofp/qfile.h): the "lofp:NAME" metadata value
 * (format and strict parse), the stored tensors' dtypes and shapes, and loading a described
 * tensor with every size checked against the description. The one owner of the convention: the
 * lofp command, the checkpoint reader and converter, the Python package and the metadata fuzzer
 * all come here. */
#include "ck_internal.h"
#include "lofp/qfile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- formatting ------------------------------------------------------------------------------ */

/* Appends to buf[0..cap) while it fits and counts the whole length either way (so one function
 * both sizes and writes). */
typedef struct {
    char *buf;
    size_t cap, len;
    int bad;
} qf_out;

static void put(qf_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(qf_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = o->buf && o->len < o->cap ? o->buf + o->len : NULL;
    int n = vsnprintf(dst, dst ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) o->bad = 1;
    else o->len += (size_t)n;
}

size_t lofp_qtensor_meta_format(const lofp_qtensor *q, char *buf, size_t cap)
{
    if (!q || q->ndim == 0 || q->ndim > LOFP_MAX_NDIM) return 0;
    const lofp_scheme *s = &q->scheme;
    const char *sn = lofp_scheme_name(s->id), *rn = lofp_rounding_name(s->rounding);
    const char *un = lofp_scale_rule_name(s->scale_rule), *ln = lofp_layout_name(q->layout);
    const char *dn = lofp_dtype_name(q->src_dtype), *pn = lofp_profile_name(s->profile);
    if (!sn || !rn || !un || !ln || !dn || !pn) return 0;
    /* written into a scratch copy first: the caller's buffer receives nothing unless all fits */
    qf_out o = { NULL, 0, 0, 0 };
    for (int pass = 0; pass < 2; pass++) {
        o.len = 0;
        put(&o, "scheme=%s;rounding=%s;scale_rule=%s;block=%u;layout=%s;pad_byte=%d;shape=[", sn, rn, un, s->block, ln,
            q->pad_byte);
        for (size_t i = 0; i < q->ndim; i++) put(&o, "%s%zu", i ? "," : "", q->shape[i]);
        put(&o, "];padded_k=%zu;two_level=%d;c=%.9g;rotate=%d;hadamard=%s;seed=%llu;source_dtype=%s;lofp_version=%s",
            q->kp, s->two_level, (double)s->c, s->rotate, s->hadamard == LOFP_HADAMARD_DENSE ? "dense" : "butterfly",
            (unsigned long long)s->seed, dn, lofp_version());
        if (s->profile != LOFP_PROFILE_LOFP) put(&o, ";profile=%s", pn);
        if (o.bad) return 0;
        if (pass == 0) {
            if (!buf || cap <= o.len) return o.len;
            o.buf = buf;
            o.cap = cap;
        }
    }
    return o.len;
}

/* ---- strict parsing -------------------------------------------------------------------------- */

/* The value of `key` in "k1=v1;k2=v2;..." as [*v, *v + *len). Returns 1 when present once,
 * 0 when absent, -1 when given twice. */
static int field(const char *value, const char *key, const char **v, size_t *len)
{
    size_t kl = strlen(key);
    int found = 0;
    const char *p = value;
    while (p) {
        const char *end = strchr(p, ';');
        size_t seg = end ? (size_t)(end - p) : strlen(p);
        if (seg > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            if (found) return -1;
            found = 1;
            *v = p + kl + 1;
            *len = seg - kl - 1;
        }
        p = end ? end + 1 : NULL;
    }
    return found;
}

/* A plain decimal (no sign, no spaces, no leading zeros except "0") in [lo, hi]. */
static int parse_dec(const char *s, size_t len, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (len == 0 || len > 20 || (len > 1 && s[0] == '0')) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

lofp_status lofp_qtensor_meta_parse(const char *value, lofp_qtensor *q, lofp_io_error *err)
{
    if (!value || !q) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_qtensor_meta_parse: NULL argument");
    const char *v = NULL;
    size_t len = 0;
    char word[64];
    uint64_t u;
#define FAIL(...) return lofp_ck_fail(err, LOFP_ERR_FORMAT, __VA_ARGS__)
#define CLIP(n) (int)(len > (n) ? (n) : len)
#define NEED(key) do { int r_ = field(value, key, &v, &len); \
        if (r_ == 0) FAIL("metadata lacks '%s'", key); \
        if (r_ < 0) FAIL("metadata gives '%s' twice", key); } while (0)
#define WORD(key) do { NEED(key); if (len >= sizeof word) FAIL("metadata '%s' is too long", key); \
        memcpy(word, v, len); word[len] = 0; } while (0)
    lofp_scheme *s = &q->scheme;
    WORD("scheme");
    if (lofp_scheme_preset(word, s) != LOFP_OK) FAIL("unknown scheme '%s'", word);
    WORD("rounding");
    if (lofp_rounding_from_name(word, &s->rounding) != LOFP_OK) FAIL("unknown rounding '%s'", word);
    WORD("scale_rule");
    if (lofp_scale_rule_from_name(word, &s->scale_rule) != LOFP_OK) FAIL("unknown scale rule '%s'", word);
    NEED("block");
    if (!parse_dec(v, len, 1, UINT32_MAX, &u)) FAIL("block '%.*s' is not a number in 1..%u", CLIP(40), v, UINT32_MAX);
    s->block = (uint32_t)u;
    WORD("layout");
    if (lofp_layout_from_name(word, &q->layout) != LOFP_OK) FAIL("unknown layout '%s'", word);
    NEED("pad_byte");
    if (!parse_dec(v, len, 0, 254, &u)) FAIL("pad_byte '%.*s' is not a number in 0..254", CLIP(40), v);
    q->pad_byte = (int)u;
    NEED("two_level");
    if (!parse_dec(v, len, 0, 1, &u)) FAIL("two_level '%.*s' is not 0 or 1", CLIP(40), v);
    s->two_level = (int)u;
    WORD("c");
    {
        char *end;
        errno = 0;
        float c = strtof(word, &end);
        if (end == word || *end || !isfinite(c) || !(c > 0)) FAIL("c '%s' is not a positive finite number", word);
        s->c = c;
    }
    NEED("rotate");
    if (!parse_dec(v, len, 0, 1, &u)) FAIL("rotate '%.*s' is not 0 or 1", CLIP(40), v);
    s->rotate = (int)u;
    WORD("hadamard");
    if (!strcmp(word, "dense")) s->hadamard = LOFP_HADAMARD_DENSE;
    else if (!strcmp(word, "butterfly")) s->hadamard = LOFP_HADAMARD_BUTTERFLY;
    else FAIL("hadamard '%s' is not dense or butterfly", word);
    int r = field(value, "seed", &v, &len);
    if (r < 0) FAIL("metadata gives 'seed' twice");
    if (r > 0) {
        if (!parse_dec(v, len, 0, UINT64_MAX, &u)) FAIL("seed '%.*s' is not a number", CLIP(40), v);
        s->seed = u;
    }
    r = field(value, "profile", &v, &len);
    if (r < 0) FAIL("metadata gives 'profile' twice");
    if (r > 0) {
        if (len >= sizeof word) FAIL("metadata 'profile' is too long");
        memcpy(word, v, len);
        word[len] = 0;
        if (lofp_profile_from_name(word, &s->profile) != LOFP_OK) FAIL("unknown profile '%s'", word);
    }
    WORD("source_dtype");
    if (lofp_dtype_from_name(word, &q->src_dtype) != LOFP_OK || !lofp_dtype_is_float(q->src_dtype))
        FAIL("source_dtype '%s' is not F32, F16, BF16 or F64", word);
    NEED("padded_k");
    if (!parse_dec(v, len, 1, SIZE_MAX, &u)) FAIL("padded_k '%.*s' is not a positive number", CLIP(40), v);
    q->kp = (size_t)u;
    NEED("shape");
    /* "[d0,d1,...]": positive decimal dims, at most LOFP_MAX_NDIM */
    if (len < 3 || v[0] != '[' || v[len - 1] != ']') FAIL("shape '%.*s' is not [d0,d1,...]", CLIP(60), v);
    q->ndim = 0;
    {
        const char *p = v + 1, *e = v + len - 1;
        while (p <= e) {
            const char *c = p;
            while (c < e && *c != ',') c++;
            if (q->ndim == LOFP_MAX_NDIM) FAIL("shape has more than %d dimensions", LOFP_MAX_NDIM);
            if (!parse_dec(p, (size_t)(c - p), 1, SIZE_MAX, &u))
                FAIL("shape '%.*s': dimension %zu is not a positive number", CLIP(60), v, q->ndim);
            q->shape[q->ndim++] = (size_t)u;
            p = c + 1;
            if (c == e) break;
            if (p == e) FAIL("shape '%.*s' ends with a comma", CLIP(60), v);
        }
    }
#undef NEED
#undef WORD
#undef CLIP
    q->k = q->shape[q->ndim - 1];
    q->rows = 1;
    size_t n = 1;
    for (size_t i = 0; i < q->ndim; i++) {
        if (q->shape[i] > SIZE_MAX / n) FAIL("shape: the product of the dimensions overflows");
        n *= q->shape[i];
        if (i + 1 < q->ndim) q->rows *= q->shape[i];
    }
    /* every buffer a reader sizes from the shape must be addressable: fp32 output, padded codes */
    if (n > SIZE_MAX / sizeof(float) || q->rows > SIZE_MAX / q->kp || q->rows * q->kp > SIZE_MAX / sizeof(float))
        FAIL("shape: the tensor's size overflows");
    s->pad = q->kp != q->k;
    if (lofp_scheme_validate(s) != LOFP_OK) FAIL("the scheme's parameters are inconsistent (block %u)", s->block);
    if (lofp_padded_k(s, q->k) != q->kp) FAIL("padded_k %zu does not fit K %zu and block %u", q->kp, q->k, s->block);
    if (s->id == LOFP_SCHEME_ULTRAQUANT && s->rotate && (q->kp & (q->kp - 1)))
        FAIL("rotated UltraQuant needs a power-of-two K, not %zu", q->kp);
    if (lofp_codes_bytes(s, q->rows, q->k) == 0 || lofp_scales_bytes(s, q->rows, q->k) == 0 ||
        lofp_layout_required_bytes(q->rows, q->kp, s->block, q->layout) == 0)
        FAIL("shape: the codes' or scales' size overflows");
#undef FAIL
    lofp_ck_ok(err);
    return LOFP_OK;
}

/* ---- the stored tensors ---------------------------------------------------------------------- */

lofp_dtype lofp_qtensor_codes_dtype(const lofp_scheme *s)
{
    if (s->elem == LOFP_ELEM_E4M3) return LOFP_DTYPE_F8_E4M3;
    if (s->elem == LOFP_ELEM_E5M2) return LOFP_DTYPE_F8_E5M2;
    return LOFP_DTYPE_U8;
}

lofp_dtype lofp_qtensor_scales_dtype(const lofp_scheme *s, lofp_layout l)
{
    if (l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG) return LOFP_DTYPE_U32;
    if (s->scale_elem == LOFP_ELEM_UE4M3) return LOFP_DTYPE_F8_E4M3;
    if (s->id == LOFP_SCHEME_ULTRAQUANT) return LOFP_DTYPE_U8; /* byte 0 means zero, not 2^-127 */
    return LOFP_DTYPE_F8_E8M0;
}

size_t lofp_qtensor_codes_shape(const lofp_qtensor *q, size_t *shape)
{
    memcpy(shape, q->shape, q->ndim * sizeof(size_t));
    shape[q->ndim - 1] = q->scheme.elem == LOFP_ELEM_E2M1 ? q->kp / 2 : q->kp;
    return q->ndim;
}

size_t lofp_qtensor_scales_shape(const lofp_qtensor *q, lofp_layout l, size_t *shape)
{
    size_t lb = lofp_layout_required_bytes(q->rows, q->kp, q->scheme.block, l);
    if (l == LOFP_LAYOUT_LINEAR) {
        memcpy(shape, q->shape, q->ndim * sizeof(size_t));
        shape[q->ndim - 1] = q->kp / q->scheme.block;
        return q->ndim;
    }
    if (l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG) {
        size_t ma = l == LOFP_LAYOUT_PACKED_U32 ? q->rows : (q->rows + 3) / 4 * 4;
        shape[0] = ma ? lb / 4 / ma : 0;
        shape[1] = ma;
        return 2;
    }
    shape[0] = lb;
    return 1;
}

static int same_shape(const lofp_tensor_info *t, const size_t *shape, size_t ndim)
{
    return t->ndim == ndim && memcmp(t->shape, shape, ndim * sizeof(size_t)) == 0;
}

static void shape_text(char *buf, size_t cap, const size_t *shape, size_t ndim)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < ndim && o + 24 < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%zu", i ? ", " : "", shape[i]);
    if (o + 24 >= cap && ndim) o += (size_t)snprintf(buf + o, cap - o, ", ...");
    snprintf(buf + o, cap - o, "]");
}

/* f's tensor "<name><suffix>" (NULL when absent or when the name does not fit). */
static const lofp_tensor_info *find_part(const lofp_file *f, const char *name, const char *suffix, char *key, size_t cap)
{
    size_t n = strlen(name), k = strlen(suffix);
    if (n + k + 1 > cap) return NULL;
    memcpy(key, name, n);
    memcpy(key + n, suffix, k + 1);
    return lofp_file_find(f, key);
}

lofp_status lofp_qtensor_load(const lofp_file *f, const char *path, const char *name, lofp_qtensor *q,
                              lofp_io_error *err)
{
    if (!f || !name || !q) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_qtensor_load: NULL argument");
    if (!path) path = "(file)";
    memset(q, 0, sizeof *q);
    q->name = name;
    size_t nl = strlen(name), cap = nl + 32;
    char *key = malloc(cap);
    if (!key) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: tensor '%s': out of memory", path, name);
    lofp_status st = LOFP_ERR_FORMAT;
    char want[160], got[160];
    snprintf(key, cap, LOFP_QFILE_KEY_PREFIX "%s", name);
    const char *meta = lofp_file_metadata_get(f, key);
    if (!meta) {
        st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: tensor '%s': no metadata 'lofp:%s' (not written by lofp quantize?)", path, name, name);
        goto out;
    }
    lofp_io_error perr;
    if (lofp_qtensor_meta_parse(meta, q, &perr) != LOFP_OK) {
        lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': metadata: %s", path, name, perr.message);
        goto out;
    }
    const lofp_scheme *s = &q->scheme;
    const lofp_tensor_info *c = find_part(f, name, ".codes", key, cap);
    if (!c) { lofp_ck_fail(err, st, "%s: tensor '%s': missing %s", path, name, key); goto out; }
    const lofp_tensor_info *sc = find_part(f, name, ".scales", key, cap);
    if (!sc) { lofp_ck_fail(err, st, "%s: tensor '%s': missing %s", path, name, key); goto out; }
    size_t shape[LOFP_MAX_NDIM];
    size_t nd = lofp_qtensor_codes_shape(q, shape);
    lofp_dtype cd = lofp_qtensor_codes_dtype(s), sd = lofp_qtensor_scales_dtype(s, q->layout);
    if (c->dtype != cd) {
        lofp_ck_fail(err, st, "%s: tensor '%s': dtype %s, but %s codes are %s", path, c->name, lofp_dtype_name(c->dtype),
                lofp_scheme_name(s->id), lofp_dtype_name(cd));
        goto out;
    }
    if (!same_shape(c, shape, nd)) {
        shape_text(want, sizeof want, shape, nd);
        shape_text(got, sizeof got, c->shape, c->ndim);
        lofp_ck_fail(err, st, "%s: tensor '%s': shape %s, but the metadata's scheme and shape need %s", path, c->name, got, want);
        goto out;
    }
    if (sc->dtype != sd) {
        lofp_ck_fail(err, st, "%s: tensor '%s': dtype %s, but %s scales in layout %s are %s", path, sc->name,
                lofp_dtype_name(sc->dtype), lofp_scheme_name(s->id), lofp_layout_name(q->layout), lofp_dtype_name(sd));
        goto out;
    }
    size_t want_c = lofp_codes_bytes(s, q->rows, q->k);
    size_t want_s = lofp_layout_required_bytes(q->rows, q->kp, s->block, q->layout);
    if (c->nbytes != want_c) {
        lofp_ck_fail(err, st, "%s: tensor '%s': %zu bytes, scheme and shape need %zu", path, c->name, c->nbytes, want_c);
        goto out;
    }
    if (sc->nbytes != want_s || want_s == 0) {
        lofp_ck_fail(err, st, "%s: tensor '%s': %zu bytes, layout %s needs %zu", path, sc->name, sc->nbytes,
                lofp_layout_name(q->layout), want_s);
        goto out;
    }
    nd = lofp_qtensor_scales_shape(q, q->layout, shape);
    if (!same_shape(sc, shape, nd)) {
        shape_text(want, sizeof want, shape, nd);
        shape_text(got, sizeof got, sc->shape, sc->ndim);
        lofp_ck_fail(err, st, "%s: tensor '%s': shape %s, but layout %s needs %s", path, sc->name, got, lofp_layout_name(q->layout), want);
        goto out;
    }
    q->codes_t = c;
    q->scales_t = sc;
    q->codes = c->data;
    q->codes_bytes = c->nbytes;
    q->scales = sc->data;
    q->scales_bytes = sc->nbytes;
    q->global = 1.0f;
    if (s->id == LOFP_SCHEME_NVFP4 && s->two_level) {
        const lofp_tensor_info *g = find_part(f, name, ".global_scale", key, cap);
        if (!g) {
            lofp_ck_fail(err, st, "%s: tensor '%s': two-level NVFP4 needs an F32 scalar '%s', which is missing", path, name, key);
            goto out;
        }
        if (g->dtype != LOFP_DTYPE_F32 || g->nbytes != 4) {
            lofp_ck_fail(err, st, "%s: tensor '%s': %s of %zu bytes, but two-level NVFP4 needs one F32 value", path, g->name,
                    lofp_dtype_name(g->dtype), g->nbytes);
            goto out;
        }
        memcpy(&q->global, g->data, 4);
        q->global_t = g;
        if (!(isfinite(q->global) && q->global > 0)) {
            lofp_ck_fail(err, st, "%s: tensor '%s': %.9g is not a positive finite number", path, g->name, (double)q->global);
            goto out;
        }
    }
    st = LOFP_OK;
    lofp_ck_ok(err);
out:
    free(key);
    if (st != LOFP_OK) {
        /* nothing half-loaded escapes: a caller that ignores the status finds no tensors */
        q->codes_t = q->scales_t = q->global_t = NULL;
        q->codes = q->scales = NULL;
        q->codes_bytes = q->scales_bytes = 0;
    }
    return st;
}

lofp_status lofp_qtensor_linear_scales(const lofp_qtensor *q, uint8_t *out)
{
    if (!q || !q->scales || !out) return LOFP_ERR_INVALID_ARG;
    return lofp_layout_to_linear(q->scales, q->rows, q->kp / q->scheme.block, q->layout, out);
}

lofp_status lofp_qtensor_dequantize(const lofp_qtensor *q, float *out)
{
    if (!q || !q->codes || !q->scales || !out) return LOFP_ERR_INVALID_ARG;
    size_t nb = q->rows * (q->kp / q->scheme.block);
    uint8_t *lin = malloc(nb ? nb : 1);
    if (!lin) return LOFP_ERR_NOMEM;
    lofp_status st = lofp_qtensor_linear_scales(q, lin);
    if (st == LOFP_OK) st = lofp_dequantize(&q->scheme, q->codes, lin, q->global, q->rows, q->k, LOFP_DTYPE_F32, out);
    free(lin);
    return st;
}

const char *lofp_qfile_name_at(const lofp_file *f, size_t i)
{
    const lofp_metadata_entry *e = f ? lofp_file_metadata(f, i) : NULL;
    const size_t pl = sizeof LOFP_QFILE_KEY_PREFIX - 1;
    return e && strncmp(e->key, LOFP_QFILE_KEY_PREFIX, pl) == 0 ? e->key + pl : NULL;
}

int lofp_qfile_part(const char *name, size_t *stem_len)
{
    static const char *const suffix[] = { ".codes", ".scales", ".global_scale" };
    size_t l = name ? strlen(name) : 0;
    for (int s = 0; s < 3; s++) {
        size_t k = strlen(suffix[s]);
        if (l > k && strcmp(name + l - k, suffix[s]) == 0) {
            if (stem_len) *stem_len = l - k;
            return s + 1;
        }
    }
    return 0;
}

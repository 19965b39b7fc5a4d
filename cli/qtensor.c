/* qtensor.c -- reading and writing the quantized-tensor convention of `lofp quantize`. */
#include "qtensor.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int qt_is_float(lofp_io_dtype dt)
{
    return dt == LOFP_IO_F32 || dt == LOFP_IO_F16 || dt == LOFP_IO_BF16 || dt == LOFP_IO_F64;
}

float *qt_tensor_to_f32(const lofp_tensor_info *t)
{
    if (!qt_is_float(t->dtype)) return NULL;
    if (t->numel > SIZE_MAX / sizeof(float)) return NULL;
    float *out = malloc((t->numel ? t->numel : 1) * sizeof(float));
    if (!out) return NULL;
    const unsigned char *p = t->data;
    for (size_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case LOFP_IO_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case LOFP_IO_F64: { double d; memcpy(&d, p + 8 * i, 8); out[i] = (float)d; break; }
        case LOFP_IO_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); out[i] = lofp_fp16_to_fp32(h); break; }
        default: { uint16_t h; memcpy(&h, p + 2 * i, 2); out[i] = lofp_bf16_to_fp32(h); break; }
        }
    }
    return out;
}

char *qt_meta_format(const qtensor *q)
{
    size_t cap = 512 + 21 * q->ndim;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t o = 0;
    int n = snprintf(buf, cap, "scheme=%s;rounding=%s;scale_rule=%s;block=%u;layout=%s;pad_byte=%d;shape=[",
                     lofp_scheme_name(q->s.id), lofp_rounding_name(q->s.rounding),
                     lofp_scale_rule_name(q->s.scale_rule), q->s.block, lofp_layout_name(q->layout),
                     q->pad_byte);
    o = (size_t)n;
    for (size_t i = 0; i < q->ndim; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%zu", i ? "," : "", q->shape[i]);
    n = snprintf(buf + o, cap - o,
                 "];padded_k=%zu;two_level=%d;c=%.9g;rotate=%d;hadamard=%s;"
                 "seed=%llu;source_dtype=%s;lofp_version=%s",
                 q->kp, q->s.two_level, (double)q->s.c, q->s.rotate,
                 q->s.hadamard == LOFP_HADAMARD_DENSE ? "dense" : "butterfly",
                 (unsigned long long)q->s.seed, lofp_io_dtype_name(q->src_dtype), lofp_version());
    if (n < 0 || (size_t)n >= cap - o) { free(buf); return NULL; }
    o += (size_t)n;
    if (q->s.profile != LOFP_PROFILE_LOFP) {
        n = snprintf(buf + o, cap - o, ";profile=%s", lofp_profile_name(q->s.profile));
        if (n < 0 || (size_t)n >= cap - o) { free(buf); return NULL; }
    }
    return buf;
}

/* ---- strict parsing of the metadata value ---------------------------------------------------- */

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


lofp_status qt_meta_parse(const char *value, qtensor *q, char *err, size_t errcap)
{
    const char *v;
    size_t len;
    char word[64];
    uint64_t u;
#define FAIL(...) do { snprintf(err, errcap, __VA_ARGS__); return LOFP_ERR_FORMAT; } while (0)
#define NEED(key) do { int r_ = field(value, key, &v, &len); \
        if (r_ == 0) FAIL("metadata lacks '%s'", key); \
        if (r_ < 0) FAIL("metadata gives '%s' twice", key); } while (0)
#define WORD(key) do { NEED(key); if (len >= sizeof word) FAIL("metadata '%s' is too long", key); \
        memcpy(word, v, len); word[len] = 0; } while (0)
    WORD("scheme");
    if (lofp_scheme_preset(word, &q->s) != LOFP_OK) FAIL("unknown scheme '%s'", word);
    WORD("rounding");
    if (lofp_rounding_from_name(word, &q->s.rounding) != LOFP_OK) FAIL("unknown rounding '%s'", word);
    WORD("scale_rule");
    if (lofp_scale_rule_from_name(word, &q->s.scale_rule) != LOFP_OK) FAIL("unknown scale rule '%s'", word);
    NEED("block");
    if (!parse_dec(v, len, 1, UINT32_MAX, &u)) FAIL("block '%.*s' is not a number in 1..%u", (int)(len > 40 ? 40 : len), v, UINT32_MAX);
    q->s.block = (uint32_t)u;
    WORD("layout");
    if (lofp_layout_from_name(word, &q->layout) != LOFP_OK) FAIL("unknown layout '%s'", word);
    NEED("pad_byte");
    if (!parse_dec(v, len, 0, 254, &u)) FAIL("pad_byte '%.*s' is not a number in 0..254", (int)(len > 40 ? 40 : len), v);
    q->pad_byte = (int)u;
    NEED("two_level");
    if (!parse_dec(v, len, 0, 1, &u)) FAIL("two_level '%.*s' is not 0 or 1", (int)(len > 40 ? 40 : len), v);
    q->s.two_level = (int)u;
    WORD("c");
    {
        char *end;
        errno = 0;
        float c = strtof(word, &end);
        if (end == word || *end || !isfinite(c) || !(c > 0)) FAIL("c '%s' is not a positive finite number", word);
        q->s.c = c;
    }
    NEED("rotate");
    if (!parse_dec(v, len, 0, 1, &u)) FAIL("rotate '%.*s' is not 0 or 1", (int)(len > 40 ? 40 : len), v);
    q->s.rotate = (int)u;
    WORD("hadamard");
    if (!strcmp(word, "dense")) q->s.hadamard = LOFP_HADAMARD_DENSE;
    else if (!strcmp(word, "butterfly")) q->s.hadamard = LOFP_HADAMARD_BUTTERFLY;
    else FAIL("hadamard '%s' is not dense or butterfly", word);
    int r = field(value, "seed", &v, &len);
    if (r < 0) FAIL("metadata gives 'seed' twice");
    if (r > 0) {
        if (!parse_dec(v, len, 0, UINT64_MAX, &u)) FAIL("seed '%.*s' is not a number", (int)(len > 40 ? 40 : len), v);
        q->s.seed = u;
    }
    r = field(value, "profile", &v, &len);
    if (r < 0) FAIL("metadata gives 'profile' twice");
    if (r > 0) {
        if (len >= sizeof word) FAIL("metadata 'profile' is too long");
        memcpy(word, v, len);
        word[len] = 0;
        if (lofp_profile_from_name(word, &q->s.profile) != LOFP_OK) FAIL("unknown profile '%s'", word);
    }
    WORD("source_dtype");
    if (lofp_io_dtype_from_name(word, &q->src_dtype) != LOFP_OK || !qt_is_float(q->src_dtype))
        FAIL("source_dtype '%s' is not F32, F16, BF16 or F64", word);
    NEED("padded_k");
    if (!parse_dec(v, len, 1, SIZE_MAX, &u)) FAIL("padded_k '%.*s' is not a positive number", (int)(len > 40 ? 40 : len), v);
    q->kp = (size_t)u;
    NEED("shape");
    /* "[d0,d1,...]": positive decimal dims, at most QT_MAX_DIMS */
    if (len < 3 || v[0] != '[' || v[len - 1] != ']') FAIL("shape '%.*s' is not [d0,d1,...]", (int)(len > 60 ? 60 : len), v);
    q->ndim = 0;
    {
        const char *p = v + 1, *e = v + len - 1;
        while (p <= e) {
            const char *c = p;
            while (c < e && *c != ',') c++;
            if (q->ndim == QT_MAX_DIMS) FAIL("shape has more than %d dimensions", QT_MAX_DIMS);
            if (!parse_dec(p, (size_t)(c - p), 1, SIZE_MAX, &u))
                FAIL("shape '%.*s': dimension %zu is not a positive number", (int)(len > 60 ? 60 : len), v, q->ndim);
            q->shape[q->ndim++] = (size_t)u;
            p = c + 1;
            if (c == e) break;
            if (p == e) FAIL("shape '%.*s' ends with a comma", (int)(len > 60 ? 60 : len), v);
        }
    }
#undef NEED
#undef WORD
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
    q->s.pad = q->kp != q->k;
    if (lofp_scheme_validate(&q->s) != LOFP_OK) FAIL("the scheme's parameters are inconsistent (block %u)", q->s.block);
    if (lofp_padded_k(&q->s, q->k) != q->kp) FAIL("padded_k %zu does not fit K %zu and block %u", q->kp, q->k, q->s.block);
    if (q->s.id == LOFP_SCHEME_ULTRAQUANT && q->s.rotate && (q->kp & (q->kp - 1)))
        FAIL("rotated UltraQuant needs a power-of-two K, not %zu", q->kp);
    if (lofp_codes_bytes(&q->s, q->rows, q->k) == 0 || lofp_scales_bytes(&q->s, q->rows, q->k) == 0)
        FAIL("shape: the codes' size overflows");
#undef FAIL
    return LOFP_OK;
}

lofp_io_dtype qt_codes_dtype(const lofp_scheme *s)
{
    if (s->elem == LOFP_ELEM_E4M3) return LOFP_IO_F8_E4M3;
    if (s->elem == LOFP_ELEM_E5M2) return LOFP_IO_F8_E5M2;
    return LOFP_IO_U8;
}

lofp_io_dtype qt_scales_dtype(const lofp_scheme *s, lofp_layout l)
{
    if (l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG) return LOFP_IO_U32;
    if (s->scale_elem == LOFP_ELEM_UE4M3) return LOFP_IO_F8_E4M3;
    if (s->id == LOFP_SCHEME_ULTRAQUANT) return LOFP_IO_U8; /* byte 0 means zero, not 2^-127 */
    return LOFP_IO_F8_E8M0;
}

size_t qt_codes_shape(const qtensor *q, size_t *shape)
{
    memcpy(shape, q->shape, q->ndim * sizeof(size_t));
    shape[q->ndim - 1] = q->s.elem == LOFP_ELEM_E2M1 ? q->kp / 2 : q->kp;
    return q->ndim;
}

size_t qt_scales_shape(const qtensor *q, lofp_layout l, size_t *shape)
{
    size_t lb = lofp_layout_required_bytes(q->rows, q->kp, q->s.block, l);
    if (l == LOFP_LAYOUT_LINEAR) {
        memcpy(shape, q->shape, q->ndim * sizeof(size_t));
        shape[q->ndim - 1] = q->kp / q->s.block;
        return q->ndim;
    }
    if (l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG) {
        size_t ma = l == LOFP_LAYOUT_PACKED_U32 ? q->rows : (q->rows + 3) / 4 * 4;
        shape[0] = lb / 4 / ma;
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

static char *part_name(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    char *p = malloc(n + k + 1);
    if (p) { memcpy(p, name, n); memcpy(p + n, suffix, k + 1); }
    return p;
}

lofp_status qt_load(const lofp_file *f, const char *path, const char *name, qtensor *q,
                    char *err, size_t errcap)
{
    memset(q, 0, sizeof *q);
    q->name = name;
    char *key = part_name("lofp:", name), *kc = part_name(name, ".codes"), *ks = part_name(name, ".scales");
    char *kg = part_name(name, ".global_scale");
    lofp_status st = LOFP_ERR_FORMAT;
    char want[160], got[160];
    if (!key || !kc || !ks || !kg) { snprintf(err, errcap, "out of memory"); st = LOFP_ERR_NOMEM; goto out; }
    const char *meta = lofp_file_metadata_get(f, key);
    if (!meta) { snprintf(err, errcap, "%s: tensor '%s': no metadata 'lofp:%s' (not written by lofp quantize?)", path, name, name); st = LOFP_ERR_NOT_FOUND; goto out; }
    char perr[300];
    if (qt_meta_parse(meta, q, perr, sizeof perr) != LOFP_OK) { snprintf(err, errcap, "%s: tensor '%s': metadata: %s", path, name, perr); goto out; }
    const lofp_tensor_info *c = lofp_file_find(f, kc), *s = lofp_file_find(f, ks);
    if (!c || !s) { snprintf(err, errcap, "%s: tensor '%s': missing %s", path, name, !c ? kc : ks); goto out; }
    size_t shape[QT_MAX_DIMS];
    size_t nd = qt_codes_shape(q, shape);
    lofp_io_dtype cd = qt_codes_dtype(&q->s), sd = qt_scales_dtype(&q->s, q->layout);
    if (c->dtype != cd) { snprintf(err, errcap, "%s: tensor '%s': dtype %s, but %s codes are %s", path, kc, lofp_io_dtype_name(c->dtype), lofp_scheme_name(q->s.id), lofp_io_dtype_name(cd)); goto out; }
    if (!same_shape(c, shape, nd)) {
        shape_text(want, sizeof want, shape, nd);
        shape_text(got, sizeof got, c->shape, c->ndim);
        snprintf(err, errcap, "%s: tensor '%s': shape %s, but the metadata's scheme and shape need %s", path, kc, got, want);
        goto out;
    }
    if (s->dtype != sd) { snprintf(err, errcap, "%s: tensor '%s': dtype %s, but %s scales in layout %s are %s", path, ks, lofp_io_dtype_name(s->dtype), lofp_scheme_name(q->s.id), lofp_layout_name(q->layout), lofp_io_dtype_name(sd)); goto out; }
    size_t want_c = lofp_codes_bytes(&q->s, q->rows, q->k);
    size_t want_s = lofp_layout_required_bytes(q->rows, q->kp, q->s.block, q->layout);
    if (c->nbytes != want_c) { snprintf(err, errcap, "%s: tensor '%s': %zu bytes, scheme and shape need %zu", path, kc, c->nbytes, want_c); goto out; }
    if (s->nbytes != want_s || want_s == 0) { snprintf(err, errcap, "%s: tensor '%s': %zu bytes, layout %s needs %zu", path, ks, s->nbytes, lofp_layout_name(q->layout), want_s); goto out; }
    nd = qt_scales_shape(q, q->layout, shape);
    if (!same_shape(s, shape, nd)) {
        shape_text(want, sizeof want, shape, nd);
        shape_text(got, sizeof got, s->shape, s->ndim);
        snprintf(err, errcap, "%s: tensor '%s': shape %s, but layout %s needs %s", path, ks, got, lofp_layout_name(q->layout), want);
        goto out;
    }
    q->codes_t = c;
    q->scales_t = s;
    q->codes = c->data;
    q->codes_bytes = c->nbytes;
    q->scales = s->data;
    q->scales_bytes = s->nbytes;
    q->global = 1.0f;
    if (q->s.id == LOFP_SCHEME_NVFP4 && q->s.two_level) {
        const lofp_tensor_info *g = lofp_file_find(f, kg);
        if (!g || g->dtype != LOFP_IO_F32 || g->nbytes != 4) { snprintf(err, errcap, "%s: tensor '%s': two-level NVFP4 needs an F32 scalar '%s'", path, name, kg); goto out; }
        memcpy(&q->global, g->data, 4);
        q->global_t = g;
        if (!(isfinite(q->global) && q->global > 0)) { snprintf(err, errcap, "%s: tensor '%s': %.9g is not a positive finite number", path, kg, (double)q->global); goto out; }
    }
    st = LOFP_OK;
out:
    free(key); free(kc); free(ks); free(kg);
    return st;
}

lofp_status qt_linear_scales(const qtensor *q, uint8_t *out)
{
    return lofp_layout_to_linear(q->scales, q->rows, q->kp / q->s.block, q->layout, out);
}

lofp_status qt_dequantize(const qtensor *q, float *out)
{
    size_t nb = q->rows * (q->kp / q->s.block);
    uint8_t *lin = malloc(nb ? nb : 1);
    if (!lin) return LOFP_ERR_NOMEM;
    lofp_status st = qt_linear_scales(q, lin);
    if (st == LOFP_OK) st = lofp_dequantize(&q->s, q->codes, lin, q->global, q->rows, q->k, LOFP_DTYPE_F32, out);
    free(lin);
    return st;
}

const char **qt_list(const lofp_file *f, size_t *n, int *oom)
{
    size_t count = 0, nm = lofp_file_metadata_count(f);
    *n = 0;
    if (oom) *oom = 0;
    for (size_t i = 0; i < nm; i++)
        if (strncmp(lofp_file_metadata(f, i)->key, "lofp:", 5) == 0) count++;
    if (!count) return NULL;
    const char **names = malloc(count * sizeof *names);
    if (!names) { if (oom) *oom = 1; return NULL; }
    for (size_t i = 0; i < nm; i++) {
        const lofp_metadata_entry *e = lofp_file_metadata(f, i);
        if (strncmp(e->key, "lofp:", 5) == 0) names[(*n)++] = e->key + 5;
    }
    return names;
}

static int strp_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int qt_is_part(const char *name, const char **sorted, size_t n)
{
    static const char *const suffix[] = {".codes", ".scales", ".global_scale"};
    size_t l = strlen(name);
    for (int s = 0; s < 3; s++) {
        size_t k = strlen(suffix[s]);
        if (l <= k || strcmp(name + l - k, suffix[s]) != 0) continue;
        char *stem = malloc(l - k + 1);
        if (!stem) return 0;
        memcpy(stem, name, l - k);
        stem[l - k] = 0;
        const char *key = stem;
        int found = bsearch(&key, sorted, n, sizeof *sorted, strp_cmp) != NULL;
        free(stem);
        if (found) return 1;
    }
    return 0;
}

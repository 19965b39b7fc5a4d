/* qtensor.c -- reading and writing the quantized-tensor convention of `lofp quantize`. */
#include "qtensor.h"

#include <math.h>
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

int qt_meta_format(const qtensor *q, char *buf, size_t cap)
{
    char shape[256];
    size_t o = 0;
    shape[o++] = '[';
    for (size_t i = 0; i < q->ndim && o + 24 < sizeof shape; i++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%zu", i ? "," : "", q->shape[i]);
    shape[o++] = ']';
    shape[o] = 0;
    int n = snprintf(buf, cap,
                     "scheme=%s;rounding=%s;scale_rule=%s;block=%u;layout=%s;pad_byte=%d;"
                     "shape=%s;padded_k=%zu;two_level=%d;c=%.9g;rotate=%d;hadamard=%s;"
                     "seed=%llu;source_dtype=%s;lofp_version=%s",
                     lofp_scheme_name(q->s.id), lofp_rounding_name(q->s.rounding),
                     lofp_scale_rule_name(q->s.scale_rule), q->s.block, lofp_layout_name(q->layout),
                     q->pad_byte, shape, q->kp, q->s.two_level, (double)q->s.c, q->s.rotate,
                     q->s.hadamard == LOFP_HADAMARD_DENSE ? "dense" : "butterfly",
                     (unsigned long long)q->s.seed, lofp_io_dtype_name(q->src_dtype), lofp_version());
    if (n > 0 && (size_t)n < cap && q->s.profile != LOFP_PROFILE_LOFP)
        n += snprintf(buf + n, cap - (size_t)n, ";profile=%s", lofp_profile_name(q->s.profile));
    return n > 0 && (size_t)n < cap;
}

static const char *field(const char *value, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    const char *p = value;
    while (p && *p) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1, *e = strchr(v, ';');
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= cap) return NULL;
            memcpy(out, v, n);
            out[n] = 0;
            return out;
        }
        p = strchr(p, ';');
        if (p) p++;
    }
    return NULL;
}

lofp_status qt_meta_parse(const char *value, qtensor *q, char *err, size_t errcap)
{
    char v[256];
#define NEED(key) if (!field(value, key, v, sizeof v)) { snprintf(err, errcap, "metadata lacks '%s'", key); return LOFP_ERR_FORMAT; }
    NEED("scheme");
    if (lofp_scheme_preset(v, &q->s) != LOFP_OK) { snprintf(err, errcap, "unknown scheme '%s'", v); return LOFP_ERR_FORMAT; }
    NEED("rounding");
    if (lofp_rounding_from_name(v, &q->s.rounding) != LOFP_OK) { snprintf(err, errcap, "unknown rounding '%s'", v); return LOFP_ERR_FORMAT; }
    NEED("scale_rule");
    if (lofp_scale_rule_from_name(v, &q->s.scale_rule) != LOFP_OK) { snprintf(err, errcap, "unknown scale rule '%s'", v); return LOFP_ERR_FORMAT; }
    NEED("block");
    q->s.block = (uint32_t)strtoul(v, NULL, 10);
    NEED("layout");
    if (lofp_layout_from_name(v, &q->layout) != LOFP_OK) { snprintf(err, errcap, "unknown layout '%s'", v); return LOFP_ERR_FORMAT; }
    NEED("pad_byte");
    q->pad_byte = atoi(v);
    NEED("two_level");
    q->s.two_level = atoi(v);
    NEED("c");
    q->s.c = strtof(v, NULL);
    NEED("rotate");
    q->s.rotate = atoi(v);
    NEED("hadamard");
    q->s.hadamard = strcmp(v, "dense") == 0 ? LOFP_HADAMARD_DENSE : LOFP_HADAMARD_BUTTERFLY;
    if (field(value, "seed", v, sizeof v)) q->s.seed = strtoull(v, NULL, 10);
    if (field(value, "profile", v, sizeof v) && lofp_profile_from_name(v, &q->s.profile) != LOFP_OK) { snprintf(err, errcap, "unknown profile '%s'", v); return LOFP_ERR_FORMAT; }
    NEED("source_dtype");
    if (lofp_io_dtype_from_name(v, &q->src_dtype) != LOFP_OK) q->src_dtype = LOFP_IO_F32;
    NEED("padded_k");
    q->kp = (size_t)strtoull(v, NULL, 10);
    NEED("shape");
#undef NEED
    q->ndim = 0;
    const char *p = v + (v[0] == '[');
    while (*p && *p != ']') {
        char *end;
        unsigned long long d = strtoull(p, &end, 10);
        if (end == p || q->ndim == QT_MAX_DIMS) { snprintf(err, errcap, "bad shape in metadata"); return LOFP_ERR_FORMAT; }
        q->shape[q->ndim++] = (size_t)d;
        p = end + (*end == ',');
    }
    if (q->ndim == 0) { snprintf(err, errcap, "empty shape in metadata"); return LOFP_ERR_FORMAT; }
    q->k = q->shape[q->ndim - 1];
    q->rows = 1;
    for (size_t i = 0; i + 1 < q->ndim; i++) {
        if (q->shape[i] && q->rows > (size_t)-1 / q->shape[i]) { snprintf(err, errcap, "shape overflows"); return LOFP_ERR_FORMAT; }
        q->rows *= q->shape[i];
    }
    q->s.pad = q->kp != q->k;
    if (lofp_scheme_validate(&q->s) != LOFP_OK || lofp_padded_k(&q->s, q->k) != q->kp || q->rows == 0) {
        snprintf(err, errcap, "inconsistent scheme/shape in metadata");
        return LOFP_ERR_FORMAT;
    }
    return LOFP_OK;
}

lofp_status qt_load(const lofp_file *f, const char *path, const char *name, qtensor *q,
                    char *err, size_t errcap)
{
    memset(q, 0, sizeof *q);
    snprintf(q->name, sizeof q->name, "%s", name);
    char key[300];
    snprintf(key, sizeof key, "lofp:%s", name);
    const char *meta = lofp_file_metadata_get(f, key);
    if (!meta) { snprintf(err, errcap, "%s: no metadata '%s' (not written by lofp quantize?)", path, key); return LOFP_ERR_NOT_FOUND; }
    char perr[200];
    lofp_status st = qt_meta_parse(meta, q, perr, sizeof perr);
    if (st != LOFP_OK) { snprintf(err, errcap, "%s: tensor '%s': %s", path, name, perr); return st; }
    snprintf(key, sizeof key, "%s.codes", name);
    const lofp_tensor_info *c = lofp_file_find(f, key);
    snprintf(key, sizeof key, "%s.scales", name);
    const lofp_tensor_info *s = lofp_file_find(f, key);
    if (!c || !s) { snprintf(err, errcap, "%s: tensor '%s': missing %s.codes or %s.scales", path, name, name, name); return LOFP_ERR_FORMAT; }
    size_t want_c = lofp_codes_bytes(&q->s, q->rows, q->k);
    size_t want_s = lofp_layout_required_bytes(q->rows, q->kp, q->s.block, q->layout);
    if (c->nbytes != want_c) { snprintf(err, errcap, "%s: tensor '%s.codes': %zu bytes, scheme and shape need %zu", path, name, c->nbytes, want_c); return LOFP_ERR_FORMAT; }
    if (s->nbytes != want_s) { snprintf(err, errcap, "%s: tensor '%s.scales': %zu bytes, layout %s needs %zu", path, name, s->nbytes, lofp_layout_name(q->layout), want_s); return LOFP_ERR_FORMAT; }
    q->codes = c->data;
    q->codes_bytes = c->nbytes;
    q->scales = s->data;
    q->scales_bytes = s->nbytes;
    q->global = 1.0f;
    if (q->s.id == LOFP_SCHEME_NVFP4 && q->s.two_level) {
        snprintf(key, sizeof key, "%s.global_scale", name);
        const lofp_tensor_info *g = lofp_file_find(f, key);
        if (!g || g->dtype != LOFP_IO_F32 || g->nbytes != 4) { snprintf(err, errcap, "%s: tensor '%s': two-level NVFP4 needs an F32 scalar '%s'", path, name, key); return LOFP_ERR_FORMAT; }
        memcpy(&q->global, g->data, 4);
        if (!(isfinite(q->global) && q->global > 0)) { snprintf(err, errcap, "%s: '%s' is not a positive finite number", path, key); return LOFP_ERR_FORMAT; }
    }
    return LOFP_OK;
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

size_t qt_list(const lofp_file *f, const char **names, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < lofp_file_metadata_count(f); i++) {
        const lofp_metadata_entry *e = lofp_file_metadata(f, i);
        if (strncmp(e->key, "lofp:", 5) == 0 && n < max) names[n++] = e->key + 5;
    }
    return n;
}

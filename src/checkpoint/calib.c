/* calib.c -- the calibration-file reader (lofp/calib.h): lofp's safetensors file of per-layer
 * X^T X sums and llama.cpp's imatrix GGUF, both handed out as means over the calibration tokens.
 * The containers are parsed by io (safetensors) and ck_gguf.c; everything this file takes from
 * them -- names, dtypes, shapes, counts, every value it hands out -- is checked here, since a
 * calibration file steers how a whole model is quantized and a NaN in it would go unnoticed
 * until the model's output is garbage. */
#include "ck_internal.h"
#include "lofp/calib.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lofp_calib {
    lofp_calib_source source;
    lofp_calib_statistic stat;
    char *display;          /* the path or name used in messages */
    lofp_file *f;           /* lofp files */
    gg_file g;              /* imatrix files */
    int have_g;
    char **names;           /* weights, sorted */
    size_t n;
    char *meta_chunk_count, *meta_chunk_size, *meta_dataset; /* imatrix KV pairs as text */
};

static const char *const SUF_XTX = ".xtx", *const SUF_X2 = ".x2", *const SUF_TOK = ".tokens";
static const char *const SUF_SUM2 = ".in_sum2", *const SUF_COUNTS = ".counts";

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a > b && strcmp(s + a - b, suf) == 0;
}

static char *strip(const char *s, const char *suf)
{
    size_t n = strlen(s) - strlen(suf);
    char *d = malloc(n + 1);
    if (d) { memcpy(d, s, n); d[n] = 0; }
    return d;
}

static char *cdup(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static char *join(const char *a, const char *b)
{
    size_t x = strlen(a), y = strlen(b);
    char *d = malloc(x + y + 1);
    if (d) { memcpy(d, a, x); memcpy(d + x, b, y + 1); }
    return d;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static lofp_status add_name(lofp_calib *c, size_t cap, const char *full, const char *suf, lofp_io_error *err)
{
    if (c->n >= cap) return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: too many statistics", c->display);
    char *s = strip(full, suf);
    if (!s) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display);
    c->names[c->n++] = s;
    return LOFP_OK;
}

void lofp_calib_close(lofp_calib *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->names[i]);
    free(c->names);
    lofp_file_close(c->f);
    if (c->have_g) lofp_gg_close(&c->g);
    free(c->meta_chunk_count);
    free(c->meta_chunk_size);
    free(c->meta_dataset);
    free(c->display);
    free(c);
}

/* ---- lofp's safetensors file ------------------------------------------------------------ */

static lofp_status open_lofp(lofp_calib *c, lofp_io_error *err)
{
    const lofp_file *f = c->f;
    const char *fmt = lofp_file_metadata_get(f, "format");
    if (!fmt || strcmp(fmt, "lofp-calibration") != 0)
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: not a calibration file: __metadata__ 'format' is %s%s%s, "
                            "expected 'lofp-calibration' (lofp calibrate writes it; llama.cpp imatrix files are GGUF)",
                            c->display, fmt ? "'" : "", fmt ? fmt : "absent", fmt ? "'" : "");
    const char *ver = lofp_file_metadata_get(f, "version");
    if (!ver || strcmp(ver, "1") != 0)
        return lofp_ck_fail(err, ver ? LOFP_ERR_UNSUPPORTED : LOFP_ERR_FORMAT,
                            "%s: calibration file version %s%s%s: this lofp reads version '1'", c->display,
                            ver ? "'" : "", ver ? ver : "absent", ver ? "'" : "");
    const char *stat = lofp_file_metadata_get(f, "statistic");
    if (stat && strcmp(stat, "hessian") == 0) c->stat = LOFP_CALIB_HESSIAN;
    else if (stat && strcmp(stat, "diag") == 0) c->stat = LOFP_CALIB_DIAG;
    else
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: __metadata__ 'statistic' is %s%s%s, expected 'hessian' or 'diag'",
                            c->display, stat ? "'" : "", stat ? stat : "absent", stat ? "'" : "");
    const char *want = c->stat == LOFP_CALIB_HESSIAN ? SUF_XTX : SUF_X2;
    size_t nt = lofp_file_count(f);
    c->names = calloc(nt + 1, sizeof *c->names);
    if (!c->names) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display);
    for (size_t i = 0; i < nt; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        if (has_suffix(t->name, want)) {
            if (t->dtype != LOFP_DTYPE_F32 || t->ndim != (c->stat == LOFP_CALIB_HESSIAN ? 2u : 1u))
                return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' must be F32 %s (it is %s with %zu dimensions)",
                                    c->display, t->name, c->stat == LOFP_CALIB_HESSIAN ? "[k, k]" : "[k]",
                                    lofp_dtype_name(t->dtype) ? lofp_dtype_name(t->dtype) : "?", t->ndim);
            lofp_status s = add_name(c, nt, t->name, want, err);
            if (s) return s;
            char *base = c->names[c->n - 1], *tk = join(base, SUF_TOK);
            if (!tk) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display);
            const lofp_tensor_info *tt = lofp_file_find(f, tk);
            free(tk);
            if (!tt)
                return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' has no '%s%s' beside it", c->display,
                                    t->name, base, SUF_TOK);
        } else if (has_suffix(t->name, SUF_TOK)) {
            if (t->dtype != LOFP_DTYPE_I64 || t->numel != 1)
                return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' must be I64 [1] (it is %s of %zu elements)",
                                    c->display, t->name, lofp_dtype_name(t->dtype) ? lofp_dtype_name(t->dtype) : "?",
                                    t->numel);
            char *base = strip(t->name, SUF_TOK), *st = base ? join(base, want) : NULL;
            free(base);
            if (!st) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display);
            int ok = lofp_file_find(f, st) != NULL;
            if (!ok) {
                lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' has no '%s' beside it (statistic '%s')", c->display,
                             t->name, st, stat);
                free(st);
                return LOFP_ERR_FORMAT;
            }
            free(st);
        } else {
            return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' is not a statistic of a '%s' file "
                                "(<weight>%s and <weight>%s)", c->display, t->name, stat, want, SUF_TOK);
        }
    }
    return LOFP_OK;
}

/* ---- llama.cpp's imatrix GGUF ------------------------------------------------------------- */

static char *kv_text(const gg_file *g, const char *key)
{
    const gg_kv *kv = lofp_gg_find_kv(g, key);
    if (!kv) return NULL;
    double d;
    const char *s;
    size_t n;
    if (lofp_gg_kv_num(kv, &d)) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", d);
        return cdup(buf);
    }
    if (lofp_gg_kv_str(kv, &s, &n)) {
        char *o = malloc(n + 1);
        if (o) { memcpy(o, s, n); o[n] = 0; }
        return o;
    }
    /* an array of strings: its first (raw: element type u32, count u64, then length-prefixed
     * strings, all validated by the parser) */
    if (kv->type == GGV_ARRAY && kv->arr_type == GGV_STRING && kv->arr_n > 0 && kv->raw_len >= 20) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)kv->raw[12 + i] << (8 * i);
        if (len > kv->raw_len - 20) return NULL;
        char *o = malloc((size_t)len + 1);
        if (o) { memcpy(o, kv->raw + 20, (size_t)len); o[len] = 0; }
        return o;
    }
    return NULL;
}

static lofp_status open_imatrix(lofp_calib *c, lofp_io_error *err)
{
    const gg_file *g = &c->g;
    const gg_kv *kt = lofp_gg_find_kv(g, "general.type");
    const char *ts = NULL;
    size_t tl = 0;
    if (!kt || !lofp_gg_kv_str(kt, &ts, &tl) || tl != 7 || memcmp(ts, "imatrix", 7) != 0)
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: a GGUF but not an importance matrix: general.type is %s%.*s%s, "
                            "expected 'imatrix' (llama-imatrix's output)", c->display, ts ? "'" : "",
                            ts ? (int)(tl > 64 ? 64 : tl) : 6, ts ? ts : "absent", ts ? "'" : "");
    c->stat = LOFP_CALIB_DIAG;
    c->names = calloc(g->n_t + 1, sizeof *c->names);
    if (!c->names) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display);
    for (size_t i = 0; i < g->n_t; i++) {
        const gg_tensor *t = &g->t[i];
        const char *other = NULL;
        if (has_suffix(t->name, SUF_SUM2)) other = SUF_COUNTS;
        else if (has_suffix(t->name, SUF_COUNTS)) other = SUF_SUM2;
        else continue; /* llama.cpp ignores other tensors too */
        if (t->type != GG_F32)
            return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' is %s, expected F32", c->display, t->name,
                                lofp_gg_type_name(t->type) ? lofp_gg_type_name(t->type) : "of an unknown type");
        const char *suf = other == SUF_COUNTS ? SUF_SUM2 : SUF_COUNTS;
        char *base = strip(t->name, suf), *o = base ? join(base, other) : NULL;
        if (!o) { free(base); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display); }
        int found = lofp_gg_find_tensor(g, o) != NULL;
        if (!found) {
            lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' has no '%s' beside it", c->display, t->name, o);
            free(base);
            free(o);
            return LOFP_ERR_FORMAT;
        }
        free(o);
        if (suf == SUF_SUM2) c->names[c->n++] = base;
        else free(base);
    }
    c->meta_chunk_count = kv_text(g, "imatrix.chunk_count");
    c->meta_chunk_size = kv_text(g, "imatrix.chunk_size");
    c->meta_dataset = kv_text(g, "imatrix.datasets");
    return LOFP_OK;
}

/* ---- opening ------------------------------------------------------------------------------ */

static lofp_status finish_open(lofp_calib *c, lofp_status s, lofp_calib **out, lofp_io_error *err)
{
    if (s == LOFP_OK) {
        qsort(c->names, c->n, sizeof *c->names, cmp_str);
        for (size_t i = 1; i < c->n; i++)
            if (strcmp(c->names[i - 1], c->names[i]) == 0) {
                s = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: weight '%s' has two statistics", c->display, c->names[i]);
                break;
            }
    }
    if (s != LOFP_OK) { lofp_calib_close(c); return s; }
    *out = c;
    lofp_ck_ok(err);
    return LOFP_OK;
}

static lofp_calib *new_calib(const char *name, lofp_io_error *err)
{
    lofp_calib *c = calloc(1, sizeof *c);
    if (c) c->display = cdup(name);
    if (!c || !c->display) {
        free(c);
        lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", name);
        return NULL;
    }
    return c;
}

lofp_status lofp_calib_open(const char *path, lofp_calib **out, lofp_io_error *err)
{
    if (out) *out = NULL;
    if (!path || !out) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_calib_open: NULL argument");
    int fd = lofp_ck_open_regular(path, err);
    if (fd < 0) return err ? err->status : LOFP_ERR_IO;
    unsigned char magic[4] = {0};
    ssize_t got = read(fd, magic, 4);
    close(fd);
    lofp_calib *c = new_calib(path, err);
    if (!c) return LOFP_ERR_NOMEM;
    lofp_status s;
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0) {
        c->source = LOFP_CALIB_SOURCE_IMATRIX;
        s = lofp_gg_open(path, &c->g, err);
        if (s == LOFP_OK) { c->have_g = 1; s = open_imatrix(c, err); }
    } else {
        c->source = LOFP_CALIB_SOURCE_LOFP;
        s = lofp_file_open(path, LOFP_FORMAT_SAFETENSORS, &c->f, err);
        if (s == LOFP_OK) s = open_lofp(c, err);
    }
    return finish_open(c, s, out, err);
}

lofp_status lofp_calib_open_memory(const void *buf, size_t len, const char *name, lofp_calib **out,
                                   lofp_io_error *err)
{
    if (out) *out = NULL;
    if ((!buf && len) || !out) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_calib_open_memory: NULL argument");
    if (!name) name = "calibration";
    lofp_calib *c = new_calib(name, err);
    if (!c) return LOFP_ERR_NOMEM;
    lofp_status s;
    if (len >= 4 && memcmp(buf, "GGUF", 4) == 0) {
        c->source = LOFP_CALIB_SOURCE_IMATRIX;
        s = lofp_gg_parse(buf, len, name, &c->g, err);
        if (s == LOFP_OK) { c->have_g = 1; s = open_imatrix(c, err); }
    } else {
        c->source = LOFP_CALIB_SOURCE_LOFP;
        s = lofp_file_open_memory(buf ? buf : "", len, LOFP_FORMAT_SAFETENSORS, name, &c->f, err);
        if (s == LOFP_OK) s = open_lofp(c, err);
    }
    return finish_open(c, s, out, err);
}

lofp_calib_statistic lofp_calib_kind(const lofp_calib *c) { return c ? c->stat : LOFP_CALIB_DIAG; }
lofp_calib_source lofp_calib_source_of(const lofp_calib *c) { return c ? c->source : LOFP_CALIB_SOURCE_LOFP; }
size_t lofp_calib_count(const lofp_calib *c) { return c ? c->n : 0; }
const char *lofp_calib_name(const lofp_calib *c, size_t i) { return c && i < c->n ? c->names[i] : NULL; }

const char *lofp_calib_meta(const lofp_calib *c, const char *key)
{
    if (!c || !key) return NULL;
    if (c->f) return lofp_file_metadata_get(c->f, key);
    if (strcmp(key, "imatrix.chunk_count") == 0) return c->meta_chunk_count;
    if (strcmp(key, "imatrix.chunk_size") == 0) return c->meta_chunk_size;
    if (strcmp(key, "imatrix.datasets") == 0) return c->meta_dataset;
    return NULL;
}

/* ---- one layer's statistics ---------------------------------------------------------------- */

static float load_f32(const void *base, size_t i)
{
    float v;
    memcpy(&v, (const unsigned char *)base + i * 4, 4);
    return v;
}

/* sum / tokens, in double, rounded once */
static float mean_of(float sum, double tokens) { return (float)((double)sum / tokens); }

static lofp_status bad_value(const lofp_calib *c, const char *tensor, size_t index, float v, const char *what,
                             lofp_io_error *err)
{
    return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' [%zu]: %s %g", c->display, tensor, index, what, (double)v);
}

static lofp_status k_mismatch(const lofp_calib *c, const char *tensor, const char *shape, size_t k, int square,
                              lofp_io_error *err)
{
    if (square)
        return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s' has shape %s but the weight's input dimension "
                            "is k = %zu (expected [%zu, %zu]): a calibration file of another model?", c->display, tensor,
                            shape, k, k, k);
    return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s' has shape %s but the weight's input dimension is "
                        "k = %zu (expected [%zu]): a calibration file of another model?", c->display, tensor, shape, k, k);
}

static lofp_status find_lofp(const lofp_calib *c, const char *weight, size_t k, float *diag, float *hess,
                             uint64_t *tokens, lofp_io_error *err)
{
    const int full = c->stat == LOFP_CALIB_HESSIAN;
    char *sn = join(weight, full ? SUF_XTX : SUF_X2), *tn = join(weight, SUF_TOK);
    lofp_status s = LOFP_OK;
    if (!sn || !tn) { s = lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display); goto done; }
    const lofp_tensor_info *st = lofp_file_find(c->f, sn), *tt = lofp_file_find(c->f, tn);
    if (!st || !tt) {
        s = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no statistics for weight '%s' (no tensor '%s')", c->display,
                         weight, st ? tn : sn);
        goto done;
    }
    int64_t nt;
    memcpy(&nt, tt->data, 8);
    if (nt <= 0) {
        s = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' [0]: token count %lld is not positive", c->display, tn,
                         (long long)nt);
        goto done;
    }
    const double ntd = (double)nt;
    if (tokens) *tokens = (uint64_t)nt;
    if (full) {
        if (st->shape[0] != k || st->shape[1] != k) {
            char sh[64];
            snprintf(sh, sizeof sh, "[%zu, %zu]", st->shape[0], st->shape[1]);
            s = k_mismatch(c, sn, sh, k, 1, err);
            goto done;
        }
        if (k > SIZE_MAX / k || k * k > SIZE_MAX / 4) {
            s = lofp_ck_fail(err, LOFP_ERR_SIZE_OVERFLOW, "%s: tensor '%s': k * k overflows (k = %zu)", c->display, sn, k);
            goto done;
        }
        if (hess) {
            for (size_t i = 0; i < k; i++) {
                float *row = hess + i * k;
                memcpy(row, (const unsigned char *)st->data + i * k * 4, k * 4);
                for (size_t j = 0; j < k; j++) {
                    float v = row[j];
                    if (!isfinite(v)) { s = bad_value(c, sn, i * k + j, v, "not finite:", err); goto done; }
                    if (i == j && v < 0) { s = bad_value(c, sn, i * k + j, v, "negative diagonal entry", err); goto done; }
                    row[j] = mean_of(v, ntd);
                }
            }
        }
        for (size_t i = 0; i < k; i++) {
            float v = load_f32(st->data, i * k + i);
            if (!isfinite(v)) { s = bad_value(c, sn, i * k + i, v, "not finite:", err); goto done; }
            if (v < 0) { s = bad_value(c, sn, i * k + i, v, "negative diagonal entry", err); goto done; }
            if (diag) diag[i] = mean_of(v, ntd);
        }
    } else {
        if (hess) {
            s = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: holds only the diagonal of X^T X (statistic 'diag'); "
                             "GPTQ needs the full matrix: run lofp calibrate without --diag", c->display);
            goto done;
        }
        if (st->shape[0] != k) {
            char sh[32];
            snprintf(sh, sizeof sh, "[%zu]", st->shape[0]);
            s = k_mismatch(c, sn, sh, k, 0, err);
            goto done;
        }
        for (size_t i = 0; i < k; i++) {
            float v = load_f32(st->data, i);
            if (!isfinite(v)) { s = bad_value(c, sn, i, v, "not finite:", err); goto done; }
            if (v < 0) { s = bad_value(c, sn, i, v, "negative sum of squares", err); goto done; }
            if (diag) diag[i] = mean_of(v, ntd);
        }
    }
done:
    free(sn);
    free(tn);
    return s;
}

static lofp_status find_imatrix(const lofp_calib *c, const char *weight, size_t k, float *diag, float *hess,
                                uint64_t *tokens, lofp_io_error *err)
{
    char *sn = join(weight, SUF_SUM2), *cn = join(weight, SUF_COUNTS);
    lofp_status s = LOFP_OK;
    if (!sn || !cn) { s = lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", c->display); goto done; }
    const gg_tensor *st = lofp_gg_find_tensor(&c->g, sn), *ct = lofp_gg_find_tensor(&c->g, cn);
    if (!st || !ct) {
        s = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no statistics for weight '%s' (no tensor '%s')", c->display,
                         weight, st ? cn : sn);
        goto done;
    }
    if (hess) {
        s = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: an importance matrix holds only the diagonal of X^T X; "
                         "GPTQ needs the full matrix (lofp calibrate writes it)", c->display);
        goto done;
    }
    uint64_t n_mat = 1, n_cnt = 1;
    for (uint32_t d = 1; d < st->n_dims; d++) n_mat *= st->ne[d]; /* the parser bounds the product unless a dim is 0 */
    for (uint32_t d = 0; d < ct->n_dims; d++) n_cnt *= ct->ne[d];
    if (st->n_dims == 0 || st->ne[0] != k || n_mat == 0) {
        char sh[96];
        int m = snprintf(sh, sizeof sh, "ne [");
        for (uint32_t d = 0; d < st->n_dims && m > 0 && (size_t)m < sizeof sh; d++)
            m += snprintf(sh + m, sizeof sh - (size_t)m, "%s%llu", d ? ", " : "", (unsigned long long)st->ne[d]);
        if (m > 0 && (size_t)m < sizeof sh) snprintf(sh + m, sizeof sh - (size_t)m, "]");
        s = k_mismatch(c, sn, sh, k, 0, err);
        goto done;
    }
    if (n_mat != 1) {
        s = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' holds %llu matrices (MoE experts): lofp reads "
                         "imatrix entries of one matrix", c->display, sn, (unsigned long long)n_mat);
        goto done;
    }
    if (n_cnt != 1) {
        s = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' has %llu values for 1 matrix", c->display, cn,
                         (unsigned long long)n_cnt);
        goto done;
    }
    float cnt = load_f32(ct->data, 0);
    /* llama.cpp counts tokens in an integer and stores it as a float: a whole number >= 1 */
    if (!(cnt >= 1) || !isfinite(cnt) || cnt >= 18446744073709551616.0f || floorf(cnt) != cnt) {
        s = bad_value(c, cn, 0, cnt, "token count is not a positive whole number:", err);
        goto done;
    }
    if (tokens) *tokens = (uint64_t)cnt;
    for (size_t i = 0; i < k; i++) {
        float v = load_f32(st->data, i);
        if (!isfinite(v)) { s = bad_value(c, sn, i, v, "not finite:", err); goto done; }
        if (v < 0) { s = bad_value(c, sn, i, v, "negative sum of squares", err); goto done; }
        if (diag) diag[i] = mean_of(v, (double)cnt);
    }
done:
    free(sn);
    free(cn);
    return s;
}

lofp_status lofp_calib_find(const lofp_calib *c, const char *weight, size_t k, float *diag, float *hess,
                            uint64_t *tokens, lofp_io_error *err)
{
    if (!c || !weight || k == 0)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_calib_find: %s", !c || !weight ? "NULL argument" : "k is 0");
    lofp_status s = c->f ? find_lofp(c, weight, k, diag, hess, tokens, err)
                         : find_imatrix(c, weight, k, diag, hess, tokens, err);
    if (s == LOFP_OK) lofp_ck_ok(err);
    return s;
}

/* qfile_stream.c -- the streaming file pipelines of include/lofp/qfile.h: lofp_qfile_quantize
 * (a dense .safetensors / .npy into a lofp tensor file) and lofp_qfile_dequantize (back), with
 * their per-tensor cores. Every output tensor is known from the input's header, so the writer puts
 * the header down first; each tensor is then read in chunks of rows (lofp_row_reader: F32, BF16
 * and F16 handed to the quantizer as stored) and its results appended as produced
 * (lofp_writer). Memory: a few chunks, plus one tensor's linear scales when the scale layout is
 * not linear (they are re-laid out once the tensor is done). */
#include "ck_internal.h"
#include "ck_method.h"
#include "lofp/qfile.h"
#include "qfile_internal.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void note(void (*fn)(void *, const char *), void *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(void (*fn)(void *, const char *), void *ctx, const char *fmt, ...)
{
    if (!fn) return;
    char line[LOFP_IO_MESSAGE_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(ctx, line);
}

static lofp_dtype lib_dtype(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_BF16 ? LOFP_DTYPE_BF16 : dt == LOFP_DTYPE_F16 ? LOFP_DTYPE_F16 : LOFP_DTYPE_F32;
}

/* ---- the writer, through the caller's hooks when given ------------------------------------- */

lofp_status lofp_qfile_w_open(const lofp_qfile_writer_ops *ops, const char *path, lofp_file_format fmt,
                          const lofp_tensor_desc *t, size_t n, const lofp_metadata_entry *meta, size_t nm,
                          unsigned flags, lofp_writer **out, lofp_io_error *err)
{
    if (ops && ops->open) return ops->open(ops->ctx, path, fmt, t, n, meta, nm, flags, out, err);
    return lofp_writer_open(path, fmt, t, n, meta, nm, flags, out, err);
}

lofp_status lofp_qfile_w_finish(const lofp_qfile_writer_ops *ops, lofp_writer *w, lofp_io_error *err)
{
    if (ops && ops->finish) return ops->finish(ops->ctx, w, err);
    return lofp_writer_finish(w, err);
}

void lofp_qfile_w_abort(const lofp_qfile_writer_ops *ops, lofp_writer *w)
{
    if (ops && ops->abort) ops->abort(ops->ctx, w);
    else lofp_writer_abort(w);
}

/* Tensor t of f appended to output i of w in chunks of about chunk_bytes. */
lofp_status lofp_qfile_copy_tensor(const lofp_file *f, const lofp_tensor_info *t, lofp_writer *w, size_t i,
                               size_t chunk_bytes, lofp_io_error *err)
{
    lofp_row_reader *r;
    size_t k = t->ndim ? t->shape[t->ndim - 1] : 1;
    size_t rb = (k * lofp_dtype_bits(t->dtype) + 7) / 8;
    size_t cr = chunk_bytes / (rb ? rb : 1);
    if (lofp_row_reader_open(f, t, cr ? cr : 1, &r, NULL) != LOFP_OK)
        /* rows that do not fill whole bytes (an odd F4 row): the tensor in one piece */
        return lofp_writer_append(w, i, t->data, t->nbytes, err);
    lofp_row_chunk ch;
    lofp_status st = LOFP_OK;
    while (!st && (st = lofp_row_reader_next(r, &ch, err)) == LOFP_OK && ch.rows)
        st = lofp_writer_append(w, i, ch.data, ch.rows * ch.row_bytes, err);
    lofp_row_reader_close(r);
    return st;
}

/* ---- quantizing one tensor ------------------------------------------------------------------- */

/* F64 rows into fp32, refusing finite values outside the fp32 range. Returns 0, or 1 with the
 * flat index (from the chunk's start) of the first such value. */
static int f64_to_f32(const void *src, size_t n, float *dst, size_t *bad)
{
    const unsigned char *p = src;
    for (size_t i = 0; i < n; i++) {
        double d;
        memcpy(&d, p + 8 * i, 8);
        float v = (float)d;
        if (isinf(v) && isfinite(d)) { *bad = i; return 1; }
        dst[i] = v;
    }
    return 0;
}

/* The first non-finite value of n elements of dtype dt (F32, BF16, F16; flat index), or SIZE_MAX. */
static size_t first_nonfinite(lofp_dtype dt, const void *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(lofp_dtype_load_f32(dt, x, i))) return i;
    return SIZE_MAX;
}

/* Element i as a double: F64 exactly (its value may lie outside the fp32 range), else as fp32. */
static double value_at(lofp_dtype dt, const void *x, size_t i)
{
    if (dt == LOFP_DTYPE_F64) { double d; memcpy(&d, (const unsigned char *)x + 8 * i, 8); return d; }
    return lofp_dtype_load_f32(dt, x, i);
}

lofp_status lofp_qfile_quantize_tensor(const lofp_file *f, const char *path, const lofp_tensor_info *t,
                                       const lofp_qtensor *q, const lofp_method_plan *plan, const float *given,
                                       size_t chunk_bytes, lofp_writer *w,
                                       const size_t out_index[3], lofp_qfile_tensor_report *report, lofp_io_error *err)
{
    if (!f || !t || !q || !w || !out_index) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_qfile_quantize_tensor: NULL argument");
    if (!path) path = "(file)";
    const lofp_scheme *s = &q->scheme;
    if (!lofp_dtype_is_float(t->dtype) || t->ndim == 0 || q->k == 0 || q->rows == 0 || t->shape[t->ndim - 1] != q->k ||
        t->numel != q->rows * q->k || lofp_padded_k(s, q->k) != q->kp)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor '%s': does not match the description to quantize it by", path, t->name);
    const size_t k = q->k, rows = q->rows, kp = q->kp, nb = kp / s->block;
    const size_t crb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;   /* code bytes per row */
    const size_t in_row = k * (lofp_dtype_bits(t->dtype) / 8);
    const int two = s->id == LOFP_SCHEME_NVFP4 && s->two_level;
    /* a producer profile is defined on whole tensors (and may compute in the input's bf16) */
    const int whole = s->profile != LOFP_PROFILE_LOFP;
    if (whole && plan && plan->method != LOFP_METHOD_RTN)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s': method %s is not defined under the %s profile (its "
                            "producer rounds to nearest)", path, t->name, lofp_method_name(plan->method),
                            lofp_profile_name(s->profile));
    if (!chunk_bytes) chunk_bytes = LOFP_IO_CHUNK_BYTES;
    size_t chunk_rows = whole ? rows : chunk_bytes / (in_row ? in_row : 1);
    if (chunk_rows < 1) chunk_rows = 1;
    if (chunk_rows > rows) chunk_rows = rows;
    lofp_row_reader *r = NULL;
    lofp_status st = LOFP_OK;
    const int linear = q->layout == LOFP_LAYOUT_LINEAR;
    uint8_t *codes = malloc(chunk_rows * crb), *lin = NULL, *all_scales = NULL;
    float *conv = NULL;
    if (linear) lin = malloc(chunk_rows * nb);
    else lin = all_scales = malloc(rows * nb);
    const int need_conv = t->dtype == LOFP_DTYPE_F64 || (whole && t->dtype == LOFP_DTYPE_F16);
    if (need_conv) conv = malloc(chunk_rows * k * sizeof(float));
    lofp_row_chunk ch;
    size_t bad = 0;
    if (!codes || !lin || (need_conv && !conv)) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory on tensor '%s'", t->name); goto out; }
    if ((st = lofp_row_reader_open(f, t, chunk_rows, &r, err)) != LOFP_OK) goto out;
    lofp_dtype dt = lib_dtype(t->dtype);

    /* two-level NVFP4: the tensor's multiplier first (the minimum over chunks is exact) */
    float global = given ? *given : 1.0f;
    if (two && !given && !whole) {
        global = INFINITY;
        while (lofp_row_reader_next(r, &ch, err) == LOFP_OK && ch.rows) {
            const void *x = ch.data;
            if (t->dtype == LOFP_DTYPE_F64) {
                if (f64_to_f32(ch.data, ch.rows * k, conv, &bad)) goto range;
                x = conv;
            }
            float g = lofp_nvfp4_global_scale(dt, x, ch.rows * k);
            if (isnan(g)) {
                size_t i = first_nonfinite(conv ? LOFP_DTYPE_F32 : t->dtype, x, ch.rows * k);
                double v = value_at(conv ? LOFP_DTYPE_F32 : t->dtype, x, i);
                size_t at = ch.row0 * k + i;
                st = lofp_ck_fail(err, LOFP_ERR_NONFINITE, "%s: tensor '%s' holds %s at flat index %zu (row %zu, column %zu)", path,
                             t->name, v != v ? "NaN" : v > 0 ? "+Inf" : "-Inf", at, at / k, at % k);
                goto out;
            }
            if (g < global) global = g;
        }
        lofp_row_reader_rewind(r);
    }
    size_t nonfinite_blocks = 0;
    while (lofp_row_reader_next(r, &ch, err) == LOFP_OK && ch.rows) {
        const void *x = ch.data;
        if (t->dtype == LOFP_DTYPE_F64) {
            if (f64_to_f32(ch.data, ch.rows * k, conv, &bad)) goto range;
            x = conv;
        }
        lofp_quant_report rep;
        memset(&rep, 0, sizeof rep);
        uint8_t *sc = linear ? lin : all_scales + ch.row0 * nb;
        lofp_status qs;
        if (whole) {
            lofp_dtype d2 = dt;
            if (t->dtype == LOFP_DTYPE_F16) {
                lofp_dtype_to_f32(LOFP_DTYPE_F16, ch.data, ch.rows * k, conv);
                x = conv;
                d2 = LOFP_DTYPE_F32;
            } else if (t->dtype == LOFP_DTYPE_F64) {
                d2 = LOFP_DTYPE_F32;
            }
            qs = given ? lofp_quantize_with_global(s, d2, x, ch.rows, k, global, codes, sc, &rep)
                       : lofp_quantize(s, d2, x, ch.rows, k, codes, sc, &global, &rep);
        } else {
            qs = lofp_method_quantize_rows(s, plan, dt, x, ch.row0, ch.rows, k, global, codes, sc, &rep);
        }
        if (qs == LOFP_ERR_NONFINITE) {
            size_t i = rep.first_bad_index;
            double v = value_at(t->dtype, ch.data, i - ch.row0 * k);
            if (isfinite(v))
                st = lofp_ck_fail(err, qs, "%s: tensor '%s': the Hadamard rotation of row %zu overflows fp32 "
                             "(finite input up to |x| = %g, at flat index %zu); such rows cannot be "
                             "quantized (--propagate-nonfinite writes them as zero groups)",
                             path, t->name, i / k, fabs(v), i);
            else
                st = lofp_ck_fail(err, qs, "%s: tensor '%s' holds %s at flat index %zu (row %zu, column %zu); MX and UltraQuant "
                             "schemes can store such blocks as zero groups (propagate_nonfinite)",
                             path, t->name, v != v ? "NaN" : v > 0 ? "+Inf" : "-Inf", i, i / k, i % k);
            goto out;
        }
        if (qs != LOFP_OK) { st = lofp_ck_fail(err, qs, "%s: tensor '%s': %s", path, t->name, lofp_status_name(qs)); goto out; }
        nonfinite_blocks += rep.nonfinite_blocks;
        if ((st = lofp_writer_append(w, out_index[0], codes, ch.rows * crb, err)) != LOFP_OK ||
            (linear && (st = lofp_writer_append(w, out_index[1], lin, ch.rows * nb, err)) != LOFP_OK))
            goto out;
    }
    if (!linear) {
        size_t lb = lofp_layout_required_bytes(rows, kp, s->block, q->layout);
        uint8_t *lay = malloc(lb ? lb : 1);
        if (!lay) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory on tensor '%s'", t->name); goto out; }
        if (lofp_layout_from_linear(all_scales, rows, nb, q->layout, q->pad_byte, lay) != LOFP_OK)
            st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "tensor '%s': cannot write layout %s", t->name, lofp_layout_name(q->layout));
        else
            st = lofp_writer_append(w, out_index[1], lay, lb, err);
        free(lay);
        if (st) goto out;
    }
    if (two && out_index[2] != SIZE_MAX && (st = lofp_writer_append(w, out_index[2], &global, 4, err)) != LOFP_OK) goto out;
    if (report) {
        report->global = two ? global : 1.0f;
        report->nonfinite_blocks = nonfinite_blocks;
    }
    goto out;
range:
    st = lofp_ck_fail(err, LOFP_ERR_NONFINITE, "%s: tensor '%s': F64 value %g at flat index %zu is outside the fp32 range", path, t->name,
                 value_at(LOFP_DTYPE_F64, ch.data, bad), ch.row0 * k + bad);
out:
    lofp_row_reader_close(r);
    free(codes);
    free(lin == all_scales ? NULL : lin);
    free(all_scales);
    free(conv);
    return st;
}

/* ---- the quantize pipeline ------------------------------------------------------------------- */

void lofp_qfile_quantize_options_init(lofp_qfile_quantize_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    lofp_scheme_preset("nvfp4", &o->scheme);
    o->layout = LOFP_LAYOUT_LINEAR;
    o->pad_byte = -1;
}

static int matches(const char *name, const char *const *pats, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fnmatch(pats[i], name, 0) == 0) return 1;
    return 0;
}

static char *cat(const char *a, const char *b)
{
    size_t x = strlen(a), y = strlen(b);
    char *p = malloc(x + y + 1);
    if (p) { memcpy(p, a, x); memcpy(p + x, b, y + 1); }
    return p;
}

/* One input tensor's fate. */
typedef struct {
    const lofp_tensor_info *t;
    int quantize;
    lofp_qtensor q;
    size_t out[3], d_copy;    /* indices into the output tensor list (codes, scales, global) */
    size_t codes_shape[LOFP_MAX_NDIM], scales_shape[LOFP_MAX_NDIM];
    char *n_codes, *n_scales, *n_global, *key, *val;
} qplan;

/* Plans input tensor t as quantized tensor p (descriptions and names); LOFP_OK or the error. */
static lofp_status plan_one(const char *in, const lofp_qfile_quantize_options *o, int pad_byte, qplan *p, lofp_io_error *err)
{
    const lofp_tensor_info *t = p->t;
    const lofp_scheme *s = &o->scheme;
    lofp_qtensor *q = &p->q;
    q->name = t->name;
    q->scheme = *s;
    q->layout = o->layout;
    q->ndim = t->ndim;
    memcpy(q->shape, t->shape, t->ndim * sizeof(size_t));
    q->k = t->shape[t->ndim - 1];
    q->rows = q->k ? t->numel / q->k : 0;
    q->src_dtype = t->dtype;
    q->pad_byte = pad_byte;
    if (q->k == 0 || q->rows == 0) return lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s' is empty", in, t->name);
    if (s->pad && s->block > (q->k + 31) / 32 * 32)
        return lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s': block %u is longer than its rows (K = %zu); padding would store %u codes per row",
                       in, t->name, s->block, q->k, s->block);
    q->kp = lofp_padded_k(s, q->k);
    if (!q->kp)
        return lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s': last dimension %zu is not a multiple of the block %u (use --pad)", in,
                       t->name, q->k, s->block);
    if (s->id == LOFP_SCHEME_ULTRAQUANT && s->rotate && (q->kp & (q->kp - 1)))
        return lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s': UltraQuant's Hadamard rotation needs K to be a power of two, not %zu "
                       "(--no-rotate quantizes without it)", in, t->name, q->kp);
    size_t cb = lofp_codes_bytes(s, q->rows, q->k), lb = lofp_layout_required_bytes(q->rows, q->kp, s->block, o->layout);
    if (!cb || !lb || q->rows > SIZE_MAX / q->kp) return lofp_ck_fail(err, LOFP_ERR_SIZE_OVERFLOW, "%s: tensor '%s': too large", in, t->name);
    p->quantize = 1;
    p->n_codes = cat(t->name, ".codes");
    p->n_scales = cat(t->name, ".scales");
    p->key = cat(LOFP_QFILE_KEY_PREFIX, t->name);
    size_t vl = lofp_qtensor_meta_format(q, NULL, 0);
    p->val = vl ? malloc(vl + 1) : NULL;
    if (p->val) lofp_qtensor_meta_format(q, p->val, vl + 1);
    if (s->id == LOFP_SCHEME_NVFP4 && s->two_level) p->n_global = cat(t->name, ".global_scale");
    if (!p->n_codes || !p->n_scales || !p->key || !p->val || (s->id == LOFP_SCHEME_NVFP4 && s->two_level && !p->n_global))
        return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    return LOFP_OK;
}

lofp_status lofp_qfile_quantize(const char *in, const char *outp, const lofp_qfile_quantize_options *o, lofp_io_error *err)
{
    if (!in || !outp || !o) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_qfile_quantize: NULL argument");
    const lofp_scheme *s = &o->scheme;
    if (lofp_scheme_validate(s) != LOFP_OK)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "invalid option combination for %s (block %u, scale rule %s, profile %s)",
                       lofp_scheme_name(s->id) ? lofp_scheme_name(s->id) : "?", s->block,
                       lofp_scale_rule_name(s->scale_rule) ? lofp_scale_rule_name(s->scale_rule) : "?",
                       lofp_profile_name(s->profile) ? lofp_profile_name(s->profile) : "?");
    if (!lofp_layout_name(o->layout)) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "unknown scale layout %d", (int)o->layout);
    if (o->pad_byte > 254) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "pad byte %d is not in 0..254", o->pad_byte);
    size_t ol = strlen(outp);
    if (ol < 12 || strcmp(outp + ol - 12, ".safetensors") != 0)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "output must be a .safetensors file: %s", outp);
    if (lofp_same_file(outp, in))
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "the output %s is the input %s (the same file); write to another path", outp, in);
    const size_t chunk = o->chunk_bytes ? o->chunk_bytes : LOFP_IO_CHUNK_BYTES;
    const int pad_byte = o->pad_byte >= 0 ? o->pad_byte : o->layout == LOFP_LAYOUT_PACKED_U32 ? 127 : 0;

    ck_method cm;
    memset(&cm, 0, sizeof cm);
    lofp_file *f = NULL;
    lofp_status st = lofp_file_open(in, LOFP_FORMAT_AUTO, &f, err);
    if (st) return st;
    size_t nt = lofp_file_count(f), nmeta_in = lofp_file_metadata_count(f);
    qplan *pl = calloc(nt ? nt : 1, sizeof *pl);
    lofp_tensor_desc *descs = calloc(3 * nt + 1, sizeof *descs);
    lofp_metadata_entry *meta = calloc(nt + nmeta_in + 1, sizeof *meta);
    size_t nd = 0, nm = 0;
    lofp_writer *w = NULL;
    if (!pl || !descs || !meta) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
    for (size_t i = 0; i < nmeta_in; i++) meta[nm++] = *lofp_file_metadata(f, i);

    /* the plan: every output tensor and metadata entry, before anything is written */
    for (size_t ti = 0; ti < nt && !st; ti++) {
        qplan *p = &pl[ti];
        const lofp_tensor_info *t = lofp_file_tensor(f, ti);
        p->t = t;
        int wanted = !matches(t->name, o->exclude, o->n_exclude) && (o->n_include == 0 || matches(t->name, o->include, o->n_include));
        const char *why = NULL;
        if (wanted) {
            if (!lofp_dtype_is_float(t->dtype)) why = "is not floating point";
            else if (t->ndim == 0) why = "is a scalar";
            else if (t->ndim > LOFP_MAX_NDIM) why = "has more than 64 dimensions";
        }
        if (!wanted || why) {
            if (why) note(o->note, o->ctx, "tensor '%s' (%s, %zu dims) %s: copied unchanged", t->name, lofp_dtype_name(t->dtype), t->ndim, why);
            p->d_copy = nd;
            descs[nd++] = (lofp_tensor_desc){t->name, t->dtype, t->ndim, t->shape, NULL, t->nbytes};
            continue;
        }
        if ((st = plan_one(in, o, pad_byte, p, err)) != LOFP_OK) break;
        lofp_qtensor *q = &p->q;
        p->out[0] = nd;
        descs[nd++] = (lofp_tensor_desc){p->n_codes, lofp_qtensor_codes_dtype(s), lofp_qtensor_codes_shape(q, p->codes_shape),
                                         p->codes_shape, NULL, lofp_codes_bytes(s, q->rows, q->k)};
        p->out[1] = nd;
        descs[nd++] = (lofp_tensor_desc){p->n_scales, lofp_qtensor_scales_dtype(s, o->layout),
                                         lofp_qtensor_scales_shape(q, o->layout, p->scales_shape), p->scales_shape, NULL,
                                         lofp_layout_required_bytes(q->rows, q->kp, s->block, o->layout)};
        p->out[2] = SIZE_MAX;
        if (p->n_global) {
            p->out[2] = nd;
            descs[nd++] = (lofp_tensor_desc){p->n_global, LOFP_DTYPE_F32, 0, p->codes_shape, NULL, 4};
        }
        meta[nm].key = p->key;
        meta[nm].value = p->val;
        nm++;
    }
    for (size_t i = 0; i < o->n_include && !st; i++) {
        int any = 0;
        for (size_t ti = 0; ti < nt && !any; ti++) any = fnmatch(o->include[i], lofp_file_tensor(f, ti)->name, 0) == 0;
        if (!any) st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "--include '%s' matches no tensor of %s", o->include[i], in);
    }
    if (st) goto done;
    /* the statistics file is checked before anything is written */
    if ((st = lofp_ck_method_open(&cm, o->method, o->calibration, o->damp, o->act_order, o->mse_scales, s->profile,
                                  s->threads, err)) != LOFP_OK)
        goto done;
    if ((st = lofp_qfile_w_open(o->writer, outp, LOFP_FORMAT_SAFETENSORS, descs, nd, meta, nm, o->write_flags, &w, err)) != LOFP_OK) goto done;
    for (size_t ti = 0; ti < nt && !st; ti++) {
        qplan *p = &pl[ti];
        if (o->progress) o->progress(o->ctx, p->t->name, ti, nt);
        if (!p->quantize) {
            st = lofp_qfile_copy_tensor(f, p->t, w, p->d_copy, chunk, err);
            continue;
        }
        lofp_qfile_tensor_report rep;
        ck_plan plan;
        if ((st = lofp_ck_method_plan(&cm, p->t->name, p->q.k, &plan, err)) != LOFP_OK) break;
        st = lofp_qfile_quantize_tensor(f, in, p->t, &p->q, &plan.p, NULL, chunk, w, p->out, &rep, err);
        lofp_ck_plan_release(&plan);
        if (!st && rep.nonfinite_blocks)
            note(o->note, o->ctx, "tensor '%s': %zu block(s) held non-finite values (propagated)", p->t->name, rep.nonfinite_blocks);
    }
    if (st) lofp_qfile_w_abort(o->writer, w);
    else st = lofp_qfile_w_finish(o->writer, w, err);
done:
    for (size_t i = 0; pl && i < nt; i++) {
        free(pl[i].n_codes); free(pl[i].n_scales); free(pl[i].n_global); free(pl[i].key); free(pl[i].val);
    }
    free(pl); free(descs); free(meta);
    lofp_file_close(f);
    lofp_ck_method_close(&cm);
    return st;
}

/* ---- dequantizing ---------------------------------------------------------------------------- */

lofp_status lofp_qfile_dequantize_tensor(const lofp_file *f, const lofp_qtensor *q0, lofp_dtype odt, size_t chunk_bytes,
                                         lofp_writer *w, size_t di, lofp_io_error *err)
{
    if (!f || !q0 || !w || !q0->codes_t || !q0->scales_t)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_qfile_dequantize_tensor: NULL argument or a tensor not loaded");
    if (odt != LOFP_DTYPE_F32 && odt != LOFP_DTYPE_BF16 && odt != LOFP_DTYPE_F16)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "tensor '%s': output dtype %s is not F32, BF16 or F16", q0->name,
                       lofp_dtype_name(odt) ? lofp_dtype_name(odt) : "?");
    const lofp_qtensor *q = q0;
    if (!chunk_bytes) chunk_bytes = (size_t)2 << 20;
    const size_t k = q->k, rows = q->rows, nb = q->kp / q->scheme.block, es = odt == LOFP_DTYPE_F32 ? 4 : 2;
    size_t cr = chunk_bytes / (k * es);
    if (cr < 1) cr = 1;
    if (cr > rows) cr = rows;
    lofp_row_reader *rc = NULL, *rs = NULL;
    uint8_t *lin = NULL, *out = malloc(cr * k * es);
    lofp_status st = LOFP_OK;
    const int linear = q->layout == LOFP_LAYOUT_LINEAR;
    if (!out) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory on '%s'", q->name); goto done; }
    if (!linear) {
        lin = malloc(rows * nb > 0 ? rows * nb : 1);
        if (!lin || lofp_qtensor_linear_scales(q, lin) != LOFP_OK) {
            st = lofp_ck_fail(err, lin ? LOFP_ERR_FORMAT : LOFP_ERR_NOMEM, "tensor '%s': cannot read its %s scales", q->name, lofp_layout_name(q->layout));
            goto done;
        }
    }
    if ((st = lofp_row_reader_open(f, q->codes_t, cr, &rc, err)) != LOFP_OK ||
        (linear && (st = lofp_row_reader_open(f, q->scales_t, cr, &rs, err)) != LOFP_OK))
        goto done;
    lofp_dtype dt = odt == LOFP_DTYPE_F32 ? LOFP_DTYPE_F32 : odt == LOFP_DTYPE_BF16 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F16;
    lofp_row_chunk cc, sc;
    while (lofp_row_reader_next(rc, &cc, err) == LOFP_OK && cc.rows) {
        const uint8_t *scales;
        if (linear) {
            if (lofp_row_reader_next(rs, &sc, err) != LOFP_OK || sc.rows != cc.rows) {
                st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "tensor '%s': scales and codes disagree", q->name);
                goto done;
            }
            scales = sc.data;
        } else {
            scales = lin + cc.row0 * nb;
        }
        lofp_status ds = lofp_dequantize(&q->scheme, cc.data, scales, q->global, cc.rows, k, dt, out);
        if (ds != LOFP_OK) { st = lofp_ck_fail(err, ds, "tensor '%s': %s", q->name, lofp_status_name(ds)); goto done; }
        if ((st = lofp_writer_append(w, di, out, cc.rows * k * es, err)) != LOFP_OK) goto done;
    }
done:
    lofp_row_reader_close(rc);
    lofp_row_reader_close(rs);
    free(lin);
    free(out);
    return st;
}

void lofp_qfile_dequantize_options_init(lofp_qfile_dequantize_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->dtype = LOFP_DTYPE_F32;
    o->threads = 1;
}

static int strp_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 when stored tensor `name` is NAME.codes / .scales / .global_scale of a NAME in sorted[0..n). */
static int is_part(const char *name, const char **sorted, size_t n)
{
    size_t stem;
    if (!lofp_qfile_part(name, &stem)) return 0;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strncmp(name, sorted[mid], stem);
        if (c == 0 && sorted[mid][stem]) c = -1;   /* the stem is a proper prefix: it sorts first */
        if (c == 0) return 1;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return 0;
}

lofp_status lofp_qfile_dequantize(const char *in, const char *outp, const lofp_qfile_dequantize_options *o, lofp_io_error *err)
{
    if (!in || !outp || !o) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_qfile_dequantize: NULL argument");
    const lofp_dtype odt = o->dtype;
    if (odt != LOFP_DTYPE_F32 && odt != LOFP_DTYPE_BF16 && odt != LOFP_DTYPE_F16)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "output dtype %s is not F32, BF16 or F16", lofp_dtype_name(odt) ? lofp_dtype_name(odt) : "?");
    if (lofp_same_file(outp, in))
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "the output %s is the input %s (the same file); write to another path", outp, in);
    lofp_file *f = NULL;
    lofp_status st = lofp_file_open(in, LOFP_FORMAT_AUTO, &f, err);
    if (st) return st;
    size_t nt = lofp_file_count(f), nmeta = lofp_file_metadata_count(f), nq = 0;
    for (size_t i = 0; i < nmeta; i++) nq += lofp_qfile_name_at(f, i) != NULL;
    const char **qnames = NULL, **sorted = NULL;
    lofp_tensor_desc *descs = NULL;
    lofp_qtensor *qs = NULL;
    const lofp_tensor_info **src = NULL;
    lofp_metadata_entry *meta = NULL;
    lofp_writer *w = NULL;
    size_t nd = 0, nm = 0;
    if (nq == 0) { st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no tensors written by lofp quantize (no 'lofp:' metadata)", in); goto done; }
    qnames = malloc(nq * sizeof *qnames);
    sorted = malloc(nq * sizeof *sorted);
    descs = calloc(nt + nq, sizeof *descs);
    qs = calloc(nq, sizeof *qs);
    src = calloc(nt + nq, sizeof *src);
    meta = calloc(nmeta + 1, sizeof *meta);
    if (!qnames || !sorted || !descs || !qs || !src || !meta) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
    nq = 0;
    for (size_t i = 0; i < nmeta; i++)
        if (lofp_qfile_name_at(f, i)) qnames[nq++] = lofp_qfile_name_at(f, i);
    memcpy(sorted, qnames, nq * sizeof *sorted);
    qsort(sorted, nq, sizeof *sorted, strp_cmp);
    const size_t es = odt == LOFP_DTYPE_F32 ? 4 : 2;
    /* every quantized tensor is checked before anything is written */
    for (size_t i = 0; i < nq; i++) {
        lofp_qtensor *q = &qs[i];
        if ((st = lofp_qtensor_load(f, in, qnames[i], q, err)) != LOFP_OK) goto done;
        q->scheme.threads = o->threads;
        descs[nd++] = (lofp_tensor_desc){q->name, odt, q->ndim, q->shape, NULL, q->rows * q->k * es};
    }
    for (size_t i = 0; i < nt; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        if (is_part(t->name, sorted, nq)) continue;
        src[nd] = t;
        descs[nd++] = (lofp_tensor_desc){t->name, t->dtype, t->ndim, t->shape, NULL, t->nbytes};
    }
    for (size_t i = 0; i < nmeta; i++)
        if (!lofp_qfile_name_at(f, i)) meta[nm++] = *lofp_file_metadata(f, i);
    size_t ol = strlen(outp);
    int npy = ol >= 4 && !strcmp(outp + ol - 4, ".npy");
    if (npy && nd != 1) { st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s holds %zu tensors; write a .safetensors instead of %s", in, nd, outp); goto done; }
    if ((st = lofp_qfile_w_open(o->writer, outp, LOFP_FORMAT_AUTO, descs, nd, npy ? NULL : meta, npy ? 0 : nm, o->write_flags, &w, err)) != LOFP_OK)
        goto done;
    const size_t chunk = o->chunk_bytes ? o->chunk_bytes : (size_t)2 << 20;
    for (size_t i = 0; i < nd && !st; i++) {
        if (o->progress) o->progress(o->ctx, descs[i].name, i, nd);
        st = i < nq ? lofp_qfile_dequantize_tensor(f, &qs[i], odt, chunk, w, i, err) : lofp_qfile_copy_tensor(f, src[i], w, i, chunk, err);
    }
    if (st) lofp_qfile_w_abort(o->writer, w);
    else st = lofp_qfile_w_finish(o->writer, w, err);
done:
    free(qnames); free(sorted); free(descs); free(qs); free(src); free(meta);
    lofp_file_close(f);
    return st;
}

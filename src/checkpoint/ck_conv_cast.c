/* ck_conv_cast.c -- an input that is already quantized takes the exact casts of lofp/cast.h
 * (docs/CHECKPOINTS.md "Exact casts"): codes and block scales copied under the target's names, the
 * NVFP4 per-tensor scale converted, MXFP4 -> NVFP4 by the closed form. Planned here, scaled here
 * before anything is written, and written through the shard writer of ck_conv_write.c. */
#include "ck_conv.h"
#include "lofp/qfile.h"
#include "lofp/cast.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lofp_profile lofp_conv_profile_of(lofp_ckpt_format f)
{
    return f == LOFP_CKPT_MODELOPT ? LOFP_PROFILE_MODELOPT
         : f == LOFP_CKPT_COMPRESSED_TENSORS ? LOFP_PROFILE_COMPRESSED_TENSORS : LOFP_PROFILE_LOFP;
}

/* Schemes each target holds (the first is the default when the input's own is not among them). */
int lofp_conv_format_holds(lofp_ckpt_format f, lofp_scheme_id id)
{
    switch (f) {
    case LOFP_CKPT_MODELOPT: return id == LOFP_SCHEME_NVFP4 || id == LOFP_SCHEME_MXFP8_E4M3;
    case LOFP_CKPT_COMPRESSED_TENSORS: return id == LOFP_SCHEME_NVFP4 || id == LOFP_SCHEME_MXFP4;
    case LOFP_CKPT_GPT_OSS: return id == LOFP_SCHEME_MXFP4;
    case LOFP_CKPT_LOFP: return id == LOFP_SCHEME_NVFP4 || id == LOFP_SCHEME_MXFP4 || id == LOFP_SCHEME_MXFP8_E4M3;
    default: return 0;
    }
}

/* The way back for a pair with no exact path. */
static lofp_status no_exact_path(ck_conv *c, const char *in, const char *tensor, const char *from_s, const char *to_s,
                                 const char *why, lofp_io_error *err)
{
    return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                   "%s: tensor '%s': %s %s -> %s %s has no exact path (%s). lofp convert never requantizes a "
                   "quantized checkpoint silently; to requantize, dequantize first: lofp import %s DENSE_DIR, then "
                   "lofp convert --to %s DENSE_DIR OUT",
                   in, tensor, lofp_ckpt_format_name(c->from), from_s, lofp_ckpt_format_name(c->to), to_s, why, in,
                   lofp_ckpt_format_name(c->to));
}

/* The "lofp:<name>" metadata value of a lofp file (lofp/qfile.h owns the convention), for a cast
 * tensor of logical shape shape[0..nd) stored with kp columns and linear scales. */
static char *lofp_meta_value(const lofp_scheme *s, const size_t *shape, size_t nd, size_t kp, int two_level)
{
    if (nd == 0 || nd > LOFP_MAX_NDIM) return NULL;
    lofp_qtensor q;
    memset(&q, 0, sizeof q);
    q.scheme = *s;
    q.scheme.two_level = two_level;
    q.layout = LOFP_LAYOUT_LINEAR;
    q.ndim = nd;
    memcpy(q.shape, shape, nd * sizeof *shape);
    q.kp = kp;
    q.src_dtype = LOFP_DTYPE_BF16;
    size_t n = lofp_qtensor_meta_format(&q, NULL, 0);
    char *v = n ? malloc(n + 1) : NULL;
    if (v) lofp_qtensor_meta_format(&q, v, n + 1);
    return v;
}

/* Output tensors of a cast item (t->k, t->kp, t->module and the logical shape known). */
static lofp_status plan_cast_outputs(ck_conv *c, ck_item *t, const char *name, const size_t *shape, size_t nd,
                                     lofp_scheme_id tid, lofp_io_error *err)
{
    size_t sh[LOFP_MAX_NDIM];
    memcpy(sh, shape, nd * sizeof *sh);
    const int nv = tid == LOFP_SCHEME_NVFP4, mx8 = tid == LOFP_SCHEME_MXFP8_E4M3;
    const size_t blk = nv ? 16 : 32;
    size_t one = 1;
    char *n0 = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL;
    if (c->to == LOFP_CKPT_GPT_OSS) {
        size_t b4[4] = { shape[0], shape[1], t->kp / 32, 16 };
        n0 = lofp_conv_strcat2(name, "_blocks");
        n1 = lofp_conv_strcat2(name, "_scales");
        lofp_conv_set_out(t, 0, n0, LOFP_DTYPE_U8, b4, 4);
        lofp_conv_set_out(t, 1, n1, LOFP_DTYPE_U8, b4, 3);
    } else if (c->to == LOFP_CKPT_LOFP) {
        /* a lofp tensor file describes tensors of positive dimensions only (lofp/qfile.h) */
        for (size_t d = 0; d < nd; d++)
            if (!shape[d])
                return lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s' has no elements (dimension %zu is 0): a lofp tensor "
                               "file cannot describe it; convert to another format or drop the tensor",
                               t->src ? c->m.shards[t->src->shard].name : "input",
                               name, d);
        n0 = lofp_conv_strcat2(name, ".codes");
        n1 = lofp_conv_strcat2(name, ".scales");
        n2 = lofp_conv_strcat2(name, ".global_scale");
        sh[nd - 1] = mx8 ? t->kp : t->kp / 2;
        lofp_conv_set_out(t, 0, n0, mx8 ? LOFP_DTYPE_F8_E4M3 : LOFP_DTYPE_U8, sh, nd);
        sh[nd - 1] = t->kp / blk;
        lofp_conv_set_out(t, 1, n1, nv ? LOFP_DTYPE_F8_E4M3 : LOFP_DTYPE_F8_E8M0, sh, nd);
        if (nv) lofp_conv_set_out(t, 2, n2, LOFP_DTYPE_F32, &one, 0);
        lofp_scheme ls;
        lofp_scheme_preset(lofp_scheme_name(tid), &ls);
        t->lofp_key = lofp_conv_strcat2(LOFP_QFILE_KEY_PREFIX, name);
        t->lofp_meta = lofp_meta_value(&ls, shape, nd, t->kp, nv);
        if (!t->lofp_key || !t->lofp_meta) { free(n0); free(n1); free(n2); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    } else {
        const int mo = c->to == LOFP_CKPT_MODELOPT;
        n0 = lofp_conv_strcat2(t->module, mo ? ".weight" : ".weight_packed");
        n1 = lofp_conv_strcat2(t->module, ".weight_scale");
        n2 = lofp_conv_strcat2(t->module, mo ? ".weight_scale_2" : ".weight_global_scale");
        n3 = lofp_conv_strcat2(t->module, mo ? ".input_scale" : ".input_global_scale");
        sh[nd - 1] = mx8 ? t->kp : t->kp / 2;
        lofp_conv_set_out(t, 0, n0, mx8 ? LOFP_DTYPE_F8_E4M3 : LOFP_DTYPE_U8, sh, nd);
        sh[nd - 1] = t->kp / blk;
        lofp_conv_set_out(t, 1, n1, nv ? LOFP_DTYPE_F8_E4M3 : LOFP_DTYPE_U8, sh, nd);
        if (nv) {
            lofp_conv_set_out(t, 2, n2, LOFP_DTYPE_F32, &one, mo ? 0 : 1);
            if (t->have_act) lofp_conv_set_out(t, 3, n3, LOFP_DTYPE_F32, &one, mo ? 0 : 1);
        }
    }
    free(n0); free(n1); free(n2); free(n3);
    return LOFP_OK;
}

/* A pass over the rows of a cast item's codes and scales, `rows` logical rows at a time, through
 * row readers (memory bounded by the chunk; the readers release the pages they handed out). */
static void note_line(ck_conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_line(ck_conv *c, const char *fmt, ...)
{
    if (!c->o->note) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->o->note(c->o->ctx, line);
}

typedef lofp_status (*cast_chunk_fn)(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                                     const uint8_t *scales, void *ctx, lofp_io_error *err);

static lofp_status cast_pass(ck_conv *c, ck_item *t, cast_chunk_fn fn, void *ctx, lofp_io_error *err)
{
    size_t cbr = t->kp / 2;
    size_t R = LOFP_IO_CHUNK_BYTES / (cbr ? cbr : 1);
    if (R == 0) R = 1;
    lofp_row_reader *rc = NULL, *rs = NULL;
    lofp_status st = lofp_row_reader_open(c->m.shards[t->src->shard].f, t->src->ti, R * t->c_ratio, &rc, err);
    if (!st) st = lofp_row_reader_open(c->m.shards[t->src_scales->shard].f, t->src_scales->ti, R * t->s_ratio, &rs, err);
    lofp_row_chunk a, b;
    while (!st && !(st = lofp_row_reader_next(rc, &a, err)) && a.rows) {
        st = lofp_row_reader_next(rs, &b, err);
        if (st) break;
        size_t rows = a.rows / t->c_ratio;
        if (b.rows != rows * t->s_ratio || a.rows % t->c_ratio) {
            st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensors '%s' and '%s' disagree in rows", c->m.shards[t->src->shard].name,
                         t->src->name, t->src_scales->name);
            break;
        }
        st = fn(c, t, a.row0 / t->c_ratio, rows, a.data, b.data, ctx, err);
    }
    lofp_row_reader_close(rc);
    lofp_row_reader_close(rs);
    return st;
}

static lofp_status xmax_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                              const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)row0; (void)ctx;
    int x;
    lofp_status st = lofp_cast_mxfp4_max_exponent(codes, scales, rows, t->kp, &x);
    if (st) return lofp_ck_fail(err, st, "%s: tensor '%s': %s", c->m.shards[t->src->shard].name, t->src->name, lofp_status_name(st));
    if (x > t->xmax) t->xmax = x;
    return LOFP_OK;
}

/* The blocks the cast under t->G will not carry over exactly, by lofp_cast_mxfp4_to_nvfp4_with_global's
 * rule (non-zero codes and a NaN scale or an exponent outside UE4M3's 2^-9 .. 2^8 after the shift),
 * counted without casting. */
static lofp_status unfit_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                               const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)c; (void)ctx; (void)err;
    const size_t nb = t->kp / 32, cb = t->kp / 2;
    const int g = ilogbf(t->G);
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            uint8_t e = scales[r * nb + b];
            int x = (int)e - 127 + g;
            if (e != 0xFF && x >= -9 && x <= 8) continue;
            const uint8_t *q = codes + r * cb + b * 16;
            int nz = 0;
            for (int i = 0; i < 16; i++) nz |= (q[i] & 0x77) != 0;
            if (!nz) continue;
            if (t->n_first < 8) t->first_unfit[t->n_first++] = (row0 + r) * nb + b;
            t->unfit++;
        }
    return LOFP_OK;
}

static lofp_status used_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                              const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)c; (void)row0; (void)codes; (void)err;
    uint8_t *used = ctx;
    for (size_t i = 0; i < rows * (t->kp / 16); i++) used[scales[i] & 0x7F] = 1;
    return LOFP_OK;
}

/* Why a block of an MX -> NV cast does not fit, from its scale byte and the tensor's largest
 * exponent. */
static const char *unfit_why(uint8_t e, int xmax, char *buf, size_t cap)
{
    if (e == 0xFF) snprintf(buf, cap, "its scale is 0xFF (NaN)");
    else snprintf(buf, cap, "its scale 2^%d is %d binades below the tensor's largest 2^%d (UE4M3 spans 17)", (int)e - 127,
                  xmax - ((int)e - 127), xmax);
    return buf;
}

lofp_status lofp_conv_plan_cast(ck_conv *c, const char *in, lofp_io_error *err)
{
    const lofp_ckpt_options *o = c->o;
    size_t n = lofp_ckpt_count(c->rd);
    c->it = calloc(n ? n : 1, sizeof *c->it);
    if (!c->it) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    c->n_it = n;
    const lofp_scheme_id tid = c->s.id;
    for (size_t i = 0; i < n; i++) {
        ck_item *t = &c->it[i];
        lofp_ckpt_tensor q;
        lofp_status st = lofp_ckpt_get(c->rd, i, &q, err);
        if (st) return st;
        t->ri = i;
        t->group = -1;
        const ck_tref *r = lofp_ck_model_find(&c->m, q.quantized ? q.stored_codes : q.name);
        if (!r) { lofp_ckpt_tensor_release(&q); return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: tensor '%s' not found", in, q.name); }
        t->src = r;
        t->shard = r->shard;
        t->in_bytes = r->ti->nbytes;
        if (!q.quantized) {
            /* norms, embeddings, lm_head, routers, biases: unchanged */
            t->action = A_COPY;
            lofp_conv_set_out(t, 0, r->ti->name, r->ti->dtype, r->ti->shape, r->ti->ndim);
            lofp_ckpt_tensor_release(&q);
            continue;
        }
        char sname[64];
        snprintf(sname, sizeof sname, "%s", lofp_scheme_name(q.scheme.id));
        const lofp_scheme_id sid = q.scheme.id;
        const unsigned sblock = q.scheme.block;
        t->src_scales = lofp_ck_model_find(&c->m, q.stored_scales);
        t->k = q.k;
        t->kp = q.kp;
        t->rows = q.rows;
        const size_t nd = q.ndim;
        size_t shape[LOFP_MAX_NDIM];
        memcpy(shape, q.shape, nd * sizeof *shape);
        const int transposed = q.transposed;
        const float stored = q.stored_scale;
        const lofp_ckpt_direction dir = q.direction;
        const int two = q.scheme.two_level && dir != LOFP_CKPT_SCALE_NONE;
        char *name = lofp_ck_strdup(q.name);
        lofp_ckpt_tensor_release(&q);
        if (!name || !t->src_scales) { free(name); return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: the scales of '%s' are missing", in, t->src->name); }
        /* rows of the stored tensors per logical row */
        size_t cr = t->src->ti->numel / (t->src->ti->shape[t->src->ti->ndim - 1] ? t->src->ti->shape[t->src->ti->ndim - 1] : 1);
        size_t sr = t->src_scales->ti->numel / (t->src_scales->ti->shape[t->src_scales->ti->ndim - 1] ? t->src_scales->ti->shape[t->src_scales->ti->ndim - 1] : 1);
        t->c_ratio = t->rows ? cr / t->rows : 1;
        t->s_ratio = t->rows ? sr / t->rows : 1;
        if (!t->c_ratio || !t->s_ratio || t->c_ratio * t->rows != cr || t->s_ratio * t->rows != sr) {
            lofp_status e2 = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': codes and scales do not have whole rows", in, name);
            free(name);
            return e2;
        }
        lofp_status st2 = LOFP_OK;
        if (nd < 2 || nd > 5)
            st2 = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions (a quantized checkpoint tensor has 2 to 5)", in, name, nd);
        else if (sblock != (sid == LOFP_SCHEME_NVFP4 ? 16u : 32u))
            st2 = no_exact_path(c, in, name, sname, c->scheme_name, "its block is not the format's (16 for NVFP4, 32 for MX)", err);
        else if (sid == tid) t->action = A_CAST_COPY;
        else if (sid == LOFP_SCHEME_MXFP4 && tid == LOFP_SCHEME_NVFP4) t->action = A_CAST_MX2NV;
        else
            st2 = no_exact_path(c, in, name, sname, c->scheme_name,
                                sid == LOFP_SCHEME_NVFP4 && tid == LOFP_SCHEME_MXFP4
                                    ? "NVFP4 block scales are not powers of two: every block would be requantized"
                                    : "the element types differ",
                                err);
        /* the target's layout of the tensor */
        if (!st2 && c->to == LOFP_CKPT_GPT_OSS &&
            (nd != 3 || t->k != t->kp || !(lofp_ck_ends_with(name, ".experts.gate_up_proj") || lofp_ck_ends_with(name, ".experts.down_proj"))))
            st2 = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                          "%s: tensor '%s': gpt-oss holds MXFP4 only as the fused MoE experts <p>.experts.gate_up_proj / "
                          "down_proj [E, N, K] (unpadded); this %zu-D tensor has no place there (convert to lofp or "
                          "compressed-tensors instead)", in, name, nd);
        if (!st2 && (c->to == LOFP_CKPT_MODELOPT || c->to == LOFP_CKPT_COMPRESSED_TENSORS) &&
            (transposed || !lofp_ck_ends_with(name, ".weight")))
            st2 = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                          "%s: tensor '%s': %s names quantized linears <m>.weight; %s (convert to lofp, which keeps "
                          "the tensor as it is, or import to dense and convert from there)",
                          in, name, lofp_ckpt_format_name(c->to),
                          transposed ? "gpt-oss's fused expert tensors have no layout pinned in that format"
                                     : "this tensor is not one");
        if (st2) { free(name); return st2; }
        t->module = lofp_ck_strdup(name);
        t->lname = lofp_ck_strdup(name);
        if (lofp_ck_ends_with(t->module, ".weight")) t->module[strlen(t->module) - 7] = 0;
        if (lofp_ck_globs_match(o->exclude, o->n_exclude, name))
            note_line(c, "%s: --exclude does not apply to a tensor that is already quantized (it is carried over)", name);
        if (sid == LOFP_SCHEME_NVFP4) {
            t->from_p = lofp_conv_profile_of(c->from);
            /* one-level NVFP4 (a lofp file without a per-tensor scale) is G = 1 under lofp's formula */
            t->in_val = two ? stored : 1.0f;
            if (!two) t->from_p = LOFP_PROFILE_LOFP;
        }
        /* activation scales: ModelOpt input_scale (decode) <-> compressed-tensors input_global_scale (encode) */
        if (tid == LOFP_SCHEME_NVFP4 && (c->from == LOFP_CKPT_MODELOPT || c->from == LOFP_CKPT_COMPRESSED_TENSORS)) {
            char *an = lofp_conv_strcat2(t->module, c->from == LOFP_CKPT_MODELOPT ? ".input_scale" : ".input_global_scale");
            t->src_act = an ? lofp_ck_model_find(&c->m, an) : NULL;
            free(an);
            if (t->src_act && (t->src_act->ti->numel != 1 || !lofp_dtype_is_float(t->src_act->ti->dtype))) {
                lofp_status e2 = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: '%s' is not one floating value", in, t->src_act->name);
                free(name);
                return e2;
            }
            if (t->src_act && c->to == LOFP_CKPT_LOFP)
                note_line(c, "%s: activation scale '%s' dropped (lofp files hold weights only)", name, t->src_act->name);
            else if (t->src_act) {
                float v = lofp_dtype_load_f32(t->src_act->ti->dtype, t->src_act->ti->data, 0);
                volatile float one = 1.0f;
                int flip = c->from != c->to;
                if (!(v > 0.0f) || !isfinite(v)) {
                    lofp_status e2 = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: activation scale '%s' = %g is not a finite positive number", in,
                                             t->src_act->name, (double)v);
                    free(name);
                    return e2;
                }
                t->act_val = flip ? one / v : v;
                t->have_act = 1;
                c->have_act = 1;
            }
        }
        st2 = plan_cast_outputs(c, t, name, shape, nd, tid, err);
        free(name);
        if (st2) return st2;
    }
    /* fused groups share one per-tensor scale in NVFP4 outputs (vLLM reads one weight_scale_2 per fused
     * linear): for MX -> NV the fused siblings' largest exponent */
    if (tid == LOFP_SCHEME_NVFP4 && !o->no_fuse_scales) {
        long next = 0;
        for (size_t i = 0; i < c->n_it; i++) {
            ck_item *t = &c->it[i];
            if (t->action != A_CAST_MX2NV || t->group >= 0) continue;
            int gid = lofp_conv_fused_group_id(lofp_conv_leaf_of(t->module));
            if (gid < 0) continue;
            size_t plen = (size_t)(lofp_conv_leaf_of(t->module) - t->module);
            for (size_t j = i; j < c->n_it; j++) {
                ck_item *u = &c->it[j];
                if (u->action != A_CAST_MX2NV || u->group >= 0) continue;
                if (strncmp(u->module, t->module, plen) != 0 || strchr(u->module + plen, '.')) continue;
                if (lofp_conv_fused_group_id(lofp_conv_leaf_of(u->module)) != gid) continue;
                u->group = next;
            }
            next++;
        }
    }
    return LOFP_OK;
}

/* Before anything is written: the per-tensor scale of every NVFP4 output and, for MX -> NV, the
 * blocks that do not fit (a refusal unless --requantize-unfit). */
lofp_status lofp_conv_cast_scales(ck_conv *c, const char *in, lofp_io_error *err)
{
    lofp_status st = LOFP_OK;
    /* MX -> NV: largest exponent per tensor, then per fused group */
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_MX2NV) continue;
        t->xmax = INT32_MIN;
        st = cast_pass(c, t, xmax_chunk, NULL, err);
    }
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_MX2NV) continue;
        int x = t->xmax;
        if (t->group >= 0)
            for (size_t j = 0; j < c->n_it; j++) {
                ck_item *u = &c->it[j];
                if (u->action == A_CAST_MX2NV && u->group == t->group && u->xmax > x) x = u->xmax;
            }
        int g = x == INT32_MIN ? 0 : 8 - x;
        if (g > 127) g = 127;
        if (g < -126) g = -126;
        t->G = ldexpf(1.0f, g);
        t->have_G = 1;
        t->gx = x; /* kept apart: a later sibling still needs its own xmax */
    }
    /* MX -> NV: the blocks that do not fit under that scale */
    size_t total_unfit = 0, tensors_unfit = 0;
    ck_item *first = NULL;
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_MX2NV || !lofp_conv_shard_in_slice(c, t->shard)) continue;
        st = cast_pass(c, t, unfit_chunk, NULL, err);
        if (st || !t->unfit) continue;
        total_unfit += t->unfit;
        tensors_unfit++;
        if (!first) first = t;
        /* the report: tensor, block indices and why (the scale bytes say) */
        lofp_sbuf b = { 0 };
        lofp_ckpt_tensor q;
        if (lofp_ckpt_get(c->rd, t->ri, &q, NULL) == LOFP_OK) {
            lofp_sbuf_printf(&b, "%s: %zu of %zu blocks do not fit NVFP4 under per-tensor scale 2^%d:", q.name, t->unfit,
                          t->rows * (t->kp / 32), ilogbf(t->G));
            for (size_t j = 0; j < t->n_first; j++) {
                char why[128];
                size_t bi = t->first_unfit[j], nb = t->kp / 32;
                lofp_sbuf_printf(&b, "%s block %zu (row %zu, columns %zu..%zu): %s", j ? ";" : "", bi, bi / nb, bi % nb * 32,
                              bi % nb * 32 + 31, unfit_why(q.scales[bi], t->gx, why, sizeof why));
            }
            if (t->unfit > t->n_first) lofp_sbuf_printf(&b, "; and %zu more", t->unfit - t->n_first);
            lofp_ckpt_tensor_release(&q);
        }
        if (b.p) note_line(c, "%s", b.p);
        lofp_sbuf_free(&b);
    }
    if (!st && total_unfit && !c->o->requantize_unfit) {
        lofp_ckpt_tensor q;
        char why[128] = "";
        const char *nm = "?";
        size_t bi = first->first_unfit[0];
        if (lofp_ckpt_get(c->rd, first->ri, &q, NULL) == LOFP_OK) {
            nm = q.name;
            unfit_why(q.scales[bi], first->gx, why, sizeof why);
        }
        st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                     "%s: %zu MXFP4 block(s) in %zu tensor(s) do not fit NVFP4 exactly; the first: tensor '%s' block %zu "
                     "(row %zu): %s. Nothing written. --requantize-unfit requantizes those blocks alone from their "
                     "decoded values (every other block stays exact; the notes list them)",
                     in, total_unfit, tensors_unfit, nm, bi, bi / (first->kp / 32), why);
        if (nm[0] != '?') lofp_ckpt_tensor_release(&q);
    }
    /* NV -> NV: one output value per distinct input value (fused siblings share theirs), chosen over
     * every block scale the tensors holding it use, so equal scales stay equal */
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_COPY || c->s.id != LOFP_SCHEME_NVFP4 || t->have_G) continue;
        uint8_t used[128] = { 0 };
        for (size_t j = i; !st && j < c->n_it; j++) {
            ck_item *u = &c->it[j];
            if (u->action == A_CAST_COPY && !u->have_G && lofp_f32_bits(u->in_val) == lofp_f32_bits(t->in_val) && u->from_p == t->from_p)
                st = cast_pass(c, u, used_chunk, used, err);
        }
        if (st) break;
        uint8_t vals[128];
        size_t nv = 0;
        for (int v = 0; v < 128; v++) if (used[v]) vals[nv++] = (uint8_t)v;
        float out = 0;
        lofp_cast_report rep;
        lofp_profile to_p = lofp_conv_profile_of(c->to);
        lofp_status cs = lofp_cast_nvfp4_global(t->from_p, t->in_val, to_p, vals, nv, &out, &rep);
        if (cs) { st = lofp_ck_fail(err, cs, "%s: tensor '%s': per-tensor scale %g cannot be cast", in, t->src->name, (double)t->in_val); break; }
        float ov = t->in_val;
        lofp_profile fp = t->from_p;
        for (size_t j = i; j < c->n_it; j++) {
            ck_item *u = &c->it[j];
            if (u->action == A_CAST_COPY && !u->have_G && lofp_f32_bits(u->in_val) == lofp_f32_bits(ov) && u->from_p == fp) {
                u->G = out;
                u->have_G = 1;
                u->mismatched = rep.mismatched_scales;
                if (rep.mismatched_scales)
                    note_line(c, "%s: per-tensor scale %.9g -> %.9g: %zu block-scale value(s) decode differently (scale products "
                              "one rounding apart; no value within 16 ulps of the plain conversion keeps them all)", u->lname, (double)ov, (double)out,
                              rep.mismatched_scales);
            }
        }
    }
    return st;
}

lofp_status lofp_conv_copy_tensor(ck_conv *c, const ck_tref *r, st_writer *w, size_t idx, lofp_io_error *err)
{
    if (r->ti->nbytes == 0) return LOFP_OK;
    if (r->ti->ndim == 0) return lofp_st_writer_put_at(w, idx, r->ti->data, r->ti->nbytes, err);
    lofp_row_reader *rr = NULL;
    lofp_status st = lofp_row_reader_open(c->m.shards[r->shard].f, r->ti, 0, &rr, err);
    lofp_row_chunk ch;
    while (!st && !(st = lofp_row_reader_next(rr, &ch, err)) && ch.rows) st = lofp_st_writer_put_at(w, idx, ch.data, ch.rows * ch.row_bytes, err);
    lofp_row_reader_close(rr);
    return st;
}

typedef struct { st_writer *w; size_t base; uint8_t *nc, *ns; } mx2nv_ctx;

static lofp_status mx2nv_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                               const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)row0;
    mx2nv_ctx *m = ctx;
    lofp_status st = lofp_cast_mxfp4_to_nvfp4_with_global(codes, scales, rows, t->kp, t->G, m->nc, m->ns, NULL);
    if (st) return lofp_ck_fail(err, st, "%s: tensor '%s': cast failed (%s)", c->m.shards[t->src->shard].name, t->src->name, lofp_status_name(st));
    st = lofp_st_writer_put_at(m->w, m->base, m->nc, rows * t->kp / 2, err);
    if (!st) st = lofp_st_writer_put_at(m->w, m->base + 1, m->ns, rows * t->kp / 16, err);
    return st;
}

lofp_status lofp_conv_cast_item(ck_conv *c, ck_item *t, st_writer *w, size_t base, lofp_io_error *err)
{
    lofp_status st = LOFP_OK;
    if (t->action == A_CAST_COPY) {
        st = lofp_conv_copy_tensor(c, t->src, w, base, err);
        if (!st) st = lofp_conv_copy_tensor(c, t->src_scales, w, base + 1, err);
    } else {
        size_t R = LOFP_IO_CHUNK_BYTES / (t->kp / 2 ? t->kp / 2 : 1);
        if (R == 0) R = 1;
        if (R > t->rows) R = t->rows;
        mx2nv_ctx m = { w, base, malloc(R * t->kp / 2 + 1), malloc(R * t->kp / 16 + 1) };
        if (!m.nc || !m.ns) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        if (!st) st = cast_pass(c, t, mx2nv_chunk, &m, err);
        free(m.nc);
        free(m.ns);
    }
    if (!st && c->s.id == LOFP_SCHEME_NVFP4) {
        /* the cast's value is already in the target's convention; the MX -> NV G is lofp's encode
         * multiplier, a power of two whose reciprocal (ModelOpt's decode scale) is exact */
        volatile float one = 1.0f;
        float v = t->action == A_CAST_MX2NV && c->to == LOFP_CKPT_MODELOPT ? one / t->G : t->G;
        st = lofp_st_writer_put_at(w, base + 2, &v, 4, err);
        if (!st && t->have_act && c->to != LOFP_CKPT_LOFP) st = lofp_st_writer_put_at(w, base + 3, &t->act_val, 4, err);
    }
    return st;
}

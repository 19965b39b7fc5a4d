/* ck_conv_write.c -- the shards of a conversion: the NVFP4 per-tensor scale of each fused group
 * in a first pass over the groups' tensors wherever they are, then shard by shard (jobs in
 * parallel) each output shard streamed tensor by tensor through the shard writer (ck_writer.c):
 * copies, quantized weights, gpt-oss experts and the cast items of ck_conv_cast.c. */
#include "ck_conv.h"
#include "lofp/qfile.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensor's data as something lofp_quantize reads: the mapping itself when its dtype and
 * alignment allow, else an fp32 copy (*owned set). */
static const void *quant_input(const lofp_tensor_info *ti, lofp_dtype *dt, float **owned)
{
    *owned = NULL;
    size_t w = lofp_dtype_bits(ti->dtype) / 8;
    if (((uintptr_t)ti->data % w) == 0 && lofp_dtype_is_dense(ti->dtype)) {
        *dt = ti->dtype;
        return ti->data;
    }
    float *f = malloc((ti->numel ? ti->numel : 1) * sizeof *f);
    if (!f) return NULL;
    for (size_t i = 0; i < ti->numel; i++) f[i] = lofp_dtype_load_f32(ti->dtype, ti->data, i);
    *owned = f;
    *dt = LOFP_DTYPE_F32;
    return f;
}

/* A chunk of rows as lofp_quantize input: in place for F32/BF16/F16 (the row reader aligns it),
 * widened to fp32 for F64 (into *tmp, grown as needed). */
static const void *chunk_input(lofp_dtype dt, const lofp_row_chunk *ch, size_t k, lofp_dtype *ldt, float **tmp,
                               size_t *tmp_cap)
{
    if (lofp_dtype_is_dense(dt)) {
        *ldt = dt;
        return ch->data;
    }
    size_t n = ch->rows * k;
    if (n > *tmp_cap) {
        float *nb = realloc(*tmp, n * sizeof *nb);
        if (!nb) return NULL;
        *tmp = nb;
        *tmp_cap = n;
    }
    for (size_t i = 0; i < n; i++) (*tmp)[i] = lofp_dtype_load_f32(dt, ch->data, i);
    *ldt = LOFP_DTYPE_F32;
    return *tmp;
}

/* The message of a NaN or infinite input value: the tensor, the value, its flat index and its row
 * and column in the tensor's [rows, K] view (the index a user can look up with numpy). */
static lofp_status nonfinite(ck_conv *c, const ck_tref *r, size_t flat, lofp_io_error *err)
{
    const lofp_tensor_info *ti = r->ti;
    size_t k = ti->ndim ? ti->shape[ti->ndim - 1] : 1;
    if (!k) k = 1;
    float v = flat < ti->numel ? lofp_dtype_load_f32(ti->dtype, ti->data, flat) : NAN;
    return lofp_ck_fail(err, LOFP_ERR_NONFINITE, "%s: tensor '%s' holds %s at flat index %zu (row %zu, column %zu)",
                   c->m.shards[r->shard].name, r->name, v != v ? "NaN" : v > 0 ? "+Inf" : "-Inf", flat, flat / k, flat % k);
}

/* The first non-finite value of n values at x (a chunk as the quantizer read it). */
static size_t first_nonfinite(lofp_dtype dt, const void *x, size_t n)
{
    lofp_dtype idt = dt == LOFP_DTYPE_BF16 ? LOFP_DTYPE_BF16 : dt == LOFP_DTYPE_F16 ? LOFP_DTYPE_F16 : LOFP_DTYPE_F32;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(lofp_dtype_load_f32(idt, x, i))) return i;
    return n;
}

/* NVFP4 per-tensor multiplier of a whole tensor, streamed in row chunks: G falls as amax grows,
 * so the tensor's G is the smallest chunk's G (exactly: G depends on amax alone). Under a producer
 * profile: the profile's scale of the whole tensor's amax, in the profile's direction. */
static lofp_status tensor_global(ck_conv *c, const ck_tref *r, float *G, lofp_io_error *err)
{
    lofp_row_reader *rr = NULL;
    lofp_status st = lofp_row_reader_open(c->m.shards[r->shard].f, r->ti, 0, &rr, err);
    if (st) return st;
    size_t k = r->ti->shape[r->ti->ndim - 1], cap = 0;
    float *tmp = NULL, g = INFINITY, amax = 0.0f;
    const int prof = c->s.profile != LOFP_PROFILE_LOFP;
    /* F64 (not dense) is read as F32: chunk_input widens it */
    lofp_dtype ldt = lofp_dtype_is_dense(r->ti->dtype) ? r->ti->dtype : LOFP_DTYPE_F32;
    lofp_row_chunk ch;
    while (!st && !(st = lofp_row_reader_next(rr, &ch, err)) && ch.rows) {
        const void *x = chunk_input(r->ti->dtype, &ch, k, &ldt, &tmp, &cap);
        if (!x) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
        float cg = prof ? lofp_ck_amax(ldt, x, ch.rows * k, NULL) : lofp_nvfp4_global_scale(ldt, x, ch.rows * k);
        if (!(cg == cg)) {
            st = nonfinite(c, r, ch.row0 * k + first_nonfinite(ldt, x, ch.rows * k), err);
            break;
        }
        if (prof && cg > amax) amax = cg;
        if (!prof && cg < g) g = cg;
    }
    lofp_row_reader_close(rr);
    free(tmp);
    *G = prof ? lofp_profile_nvfp4_global(&c->s, ldt, amax) : g;
    return st;
}

/* First pass: the per-tensor scale of every NVFP4 tensor of a fused group that a converted
 * shard needs, wherever the group's tensors are. */
lofp_status lofp_conv_group_scales(ck_conv *c, lofp_io_error *err)
{
    if (!c->nvfp4) return LOFP_OK;
    long ng = -1;
    for (size_t i = 0; i < c->n_it; i++) if (c->it[i].group > ng) ng = c->it[i].group;
    if (ng < 0) return LOFP_OK;
    int *need = calloc((size_t)ng + 1, sizeof *need);
    float *gmin = malloc(((size_t)ng + 1) * sizeof *gmin);
    if (!need || !gmin) { free(need); free(gmin); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    for (size_t i = 0; i < c->n_it; i++)
        if (c->it[i].group >= 0 && lofp_conv_shard_in_slice(c, c->it[i].shard)) need[c->it[i].group] = 1;
    /* the group's scale is the one of its largest amax: the smallest encode multiplier, or the
     * largest decode scale under a decode-direction profile (ModelOpt) */
    const int dec = lofp_profile_decode_direction(c->s.profile);
    for (long g = 0; g <= ng; g++) gmin[g] = dec ? -INFINITY : INFINITY;
    lofp_status st = LOFP_OK;
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->group < 0 || !need[t->group]) continue;
        float G;
        st = tensor_global(c, t->src, &G, err);
        if (st) break;
        if (dec ? G > gmin[t->group] : G < gmin[t->group]) gmin[t->group] = G; /* G = fl(fl(1/amax)*2688) falls as amax grows */
    }
    for (size_t i = 0; !st && i < c->n_it; i++)
        if (c->it[i].group >= 0 && need[c->it[i].group]) {
            c->it[i].G = gmin[c->it[i].group];
            c->it[i].have_G = 1;
        }
    free(need);
    free(gmin);
    return st;
}

static lofp_status quantize_rows(ck_conv *c, const ck_tref *r, lofp_dtype dt, const void *x, size_t rows, size_t k,
                                 int have_G, float G, uint8_t *codes, uint8_t *scales, float *g_out, lofp_io_error *err)
{
    lofp_quant_report rep;
    memset(&rep, 0, sizeof rep);
    lofp_status st = have_G ? lofp_quantize_with_global(&c->s, dt, x, rows, k, G, codes, scales, &rep)
                            : lofp_quantize(&c->s, dt, x, rows, k, codes, scales, g_out, &rep);
    if (have_G && g_out) *g_out = G;
    if (st == LOFP_ERR_NONFINITE)
        return nonfinite(c, r, rep.first_bad_index, err);
    if (st) return lofp_ck_fail(err, st, "%s: tensor '%s': quantize failed (%s)", c->m.shards[r->shard].name, r->name,
                           lofp_status_name(st));
    return LOFP_OK;
}

static lofp_status put(st_writer *w, size_t idx, const void *d, size_t n, lofp_io_error *err)
{
    return lofp_st_writer_put_at(w, idx, d, n, err);
}

static lofp_status convert_item(ck_conv *c, ck_item *t, st_writer *w, size_t base, lofp_io_error *err)
{
    lofp_status st = LOFP_OK;
    if (t->action == A_CAST_COPY || t->action == A_CAST_MX2NV) return lofp_conv_cast_item(c, t, w, base, err);
    if (t->action == A_QUANT) {
        /* the lofp tensor-file pipeline's per-tensor core (lofp/qfile.h): row chunks in, codes and
           linear scales appended as produced; the per-tensor scale is written below in the
           target's convention. st_writer is io's lofp_writer (ck_writer.c). */
        const ck_tref *r = t->src;
        const lofp_tensor_info *ti = r->ti;
        if (ti->ndim == 0 || ti->ndim > LOFP_MAX_NDIM)
            return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions", c->m.shards[r->shard].name, r->name, ti->ndim);
        lofp_qtensor q;
        memset(&q, 0, sizeof q);
        q.name = r->name;
        q.scheme = c->s;
        q.layout = LOFP_LAYOUT_LINEAR;
        q.ndim = ti->ndim;
        memcpy(q.shape, ti->shape, ti->ndim * sizeof *ti->shape);
        q.rows = t->rows;
        q.k = t->k;
        q.kp = t->kp;
        q.src_dtype = ti->dtype;
        const size_t idx[3] = { base + 0, base + 1, SIZE_MAX };
        lofp_qfile_tensor_report rep;
        ck_plan plan;
        st = lofp_ck_method_plan(&c->meth, r->name, t->k, &plan, err);
        if (st) return st;
        st = lofp_qfile_quantize_tensor(c->m.shards[r->shard].f, c->m.shards[r->shard].name, ti, &q, &plan.p,
                                        c->nvfp4 && t->have_G ? &t->G : NULL, 0, (lofp_writer *)w, idx, &rep, err);
        lofp_ck_plan_release(&plan);
        if (!st && c->nvfp4) {
            float G = rep.global;
            /* a profile's G is already in its format's direction (lofp_ck_profile_scheme pairs them) */
            const int own = c->s.profile != LOFP_PROFILE_LOFP;
            float v = c->to == LOFP_CKPT_MODELOPT && !own ? lofp_nvfp4_decode_from_encode(G) : G;
            st = put(w, base + 2, &v, 4, err);
            if (!st && c->act) {
                float a = t->in_amax;
                float iv = own ? lofp_profile_nvfp4_global(&c->s, LOFP_DTYPE_F32, a)
                         : c->to == LOFP_CKPT_MODELOPT ? lofp_nvfp4_decode_scale(LOFP_DTYPE_F32, &a, 1)
                                                       : lofp_nvfp4_global_scale(LOFP_DTYPE_F32, &a, 1);
                st = put(w, base + 3, &iv, 4, err);
            }
        }
        return st;
    }
    /* one chunk of rows at a time: the row reader releases the pages it has handed out */
    if (t->action == A_COPY) return lofp_conv_copy_tensor(c, t->src, w, base, err);
    /* gpt-oss MXFP4 experts: per expert, rows of codes [N, K/2] and scales [N, K/32] */
    size_t N = t->N, K = t->K, rb = K / 2, rs = K / 32;
    uint8_t *codes = malloc(N * rb), *scales = malloc(N * rs);
    size_t sub_rows = t->action == A_MOE_SPLIT ? N / t->per_expert : N;
    uint8_t *sc = malloc(sub_rows * rb), *ss = malloc(sub_rows * rs);
    float *tr = t->action == A_MOE_FUSED ? malloc(N * K * sizeof *tr) : NULL;
    if (!codes || !scales || !sc || !ss || (t->action == A_MOE_FUSED && !tr)) {
        st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        goto moe_done;
    }
    for (size_t e = 0; !st && e < t->E; e++) {
        if (t->action == A_MOE_SPLIT) {
            for (size_t p = 0; !st && p < t->per_expert; p++) {
                const ck_tref *r = t->members[e * t->per_expert + p];
                lofp_dtype dt;
                float *owned;
                const void *x = quant_input(r->ti, &dt, &owned);
                if (!x) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
                st = quantize_rows(c, r, dt, x, sub_rows, K, 0, 0, sc, ss, NULL, err);
                free(owned);
                /* interleave: gate row i -> 2i, up row i -> 2i+1 (gpt-oss swiglu reads x[..., ::2]) */
                for (size_t i = 0; !st && i < sub_rows; i++) {
                    size_t orow = i * t->per_expert + p;
                    memcpy(codes + orow * rb, sc + i * rb, rb);
                    memcpy(scales + orow * rs, ss + i * rs, rs);
                }
            }
        } else {
            const lofp_tensor_info *ti = t->src->ti;
            /* stored [E, K, N]: transpose expert e to [N, K] */
            for (size_t kk = 0; kk < K; kk++)
                for (size_t n = 0; n < N; n++) tr[n * K + kk] = lofp_dtype_load_f32(ti->dtype, ti->data, (e * K + kk) * N + n);
            /* a bad value is reported at its index in the stored [E, K, N] tensor, not the transposed copy */
            size_t bad = first_nonfinite(LOFP_DTYPE_F32, tr, N * K);
            if (bad < N * K) { st = nonfinite(c, t->src, (e * K + bad % K) * N + bad / K, err); break; }
            st = quantize_rows(c, t->src, LOFP_DTYPE_F32, tr, N, K, 0, 0, codes, scales, NULL, err);
        }
        if (!st) st = put(w, base + 0, codes, N * rb, err);
        if (!st) st = put(w, base + 1, scales, N * rs, err);
    }
moe_done:
    free(codes);
    free(scales);
    free(sc);
    free(ss);
    free(tr);
    return st;
}

static lofp_status convert_shard(ck_conv *c, size_t s, lofp_io_error *err)
{
    size_t n = 0, total_in = 0;
    for (size_t i = 0; i < c->n_it; i++)
        if (c->it[i].shard == s && c->it[i].action != A_SKIP) { n += c->it[i].n_out; total_in += c->it[i].in_bytes; }
    lofp_tensor_desc *d = calloc(n ? n : 1, sizeof *d);
    size_t *base = calloc(c->n_it, sizeof *base);
    if (!d || !base) { free(d); free(base); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    size_t k = 0;
    lofp_sbuf padded = { 0 };
    for (size_t i = 0; i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->shard != s || t->action == A_SKIP) continue;
        base[i] = k;
        for (size_t j = 0; j < t->n_out; j++) d[k++] = t->out[j];
        if ((t->action == A_QUANT || t->action == A_CAST_COPY || t->action == A_CAST_MX2NV) && t->kp != t->k &&
            c->to != LOFP_CKPT_LOFP)
            lofp_sbuf_printf(&padded, "%s\"%s\": %zu", padded.len ? ", " : "{", t->module, t->k);
    }
    if (padded.len) lofp_sbuf_putc(&padded, '}');
    /* --to lofp: one "lofp:<name>" entry per quantized tensor, as `lofp quantize` writes them */
    size_t nmeta = 0;
    for (size_t i = 0; i < c->n_it; i++) nmeta += c->it[i].shard == s && c->it[i].lofp_key != NULL;
    lofp_metadata_entry *meta = calloc(nmeta + 2, sizeof *meta);
    size_t nm = 0;
    if (meta) {
        meta[nm++] = (lofp_metadata_entry){ "format", "pt" };
        if (padded.len) meta[nm++] = (lofp_metadata_entry){ "lofp.logical_k", padded.p };
        for (size_t i = 0; i < c->n_it; i++)
            if (c->it[i].shard == s && c->it[i].lofp_key) meta[nm++] = (lofp_metadata_entry){ c->it[i].lofp_key, c->it[i].lofp_meta };
    }
    char *path = lofp_ck_path(c->out_dir, c->m.shards[s].name);
    st_writer *w = NULL;
    lofp_status st = path && meta ? lofp_st_writer_open(path, d, n, meta, nm, &w, err)
                                  : lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    size_t done = 0;
    const lofp_ckpt_options *o = c->o;
    if (!st && o->progress) o->progress(o->ctx, c->m.shards[s].name, s, c->m.n_shards, 0, total_in);
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->shard != s || t->action == A_SKIP) continue;
        pthread_mutex_lock(&c->mu);
        int stop = c->st != LOFP_OK;
        pthread_mutex_unlock(&c->mu);
        if (stop) { st = LOFP_ERR_IO; lofp_ck_fail(err, st, "stopped"); break; }
        st = convert_item(c, t, w, base[i], err);
        done += t->in_bytes;
        if (!st && o->progress) o->progress(o->ctx, c->m.shards[s].name, s, c->m.n_shards, done, total_in);
    }
    if (!st) st = lofp_st_writer_finish(w, err);
    else lofp_st_writer_abort(w);
    lofp_sbuf_free(&padded);
    free(meta);
    free(path);
    free(d);
    free(base);
    return st;
}

static void *worker(void *arg)
{
    ck_conv *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        size_t j = c->next++;
        int stop = c->st != LOFP_OK || j >= c->n_shard_list;
        pthread_mutex_unlock(&c->mu);
        if (stop) break;
        lofp_io_error e;
        lofp_ck_ok(&e);
        lofp_status st = convert_shard(c, c->shard_list[j], &e);
        if (st) {
            pthread_mutex_lock(&c->mu);
            if (!c->st) { c->st = st; c->err = e; }
            pthread_mutex_unlock(&c->mu);
        }
    }
    return NULL;
}

lofp_status lofp_conv_run_shards(ck_conv *c, lofp_io_error *err)
{
    c->shard_list = malloc((c->m.n_shards + 1) * sizeof *c->shard_list);
    if (!c->shard_list) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < c->m.n_shards; s++)
        if (lofp_conv_shard_in_slice(c, s)) c->shard_list[c->n_shard_list++] = s;
    unsigned jobs = c->o->jobs > 1 ? c->o->jobs : 1;
    if (jobs > c->n_shard_list) jobs = (unsigned)(c->n_shard_list ? c->n_shard_list : 1);
    pthread_mutex_init(&c->mu, NULL);
    pthread_t *th = calloc(jobs, sizeof *th);
    unsigned started = 0;
    for (unsigned j = 1; th && j < jobs; j++)
        if (pthread_create(&th[j], NULL, worker, c) == 0) started++;
        else break;
    worker(c);
    for (unsigned j = 1; j <= started; j++) pthread_join(th[j], NULL);
    free(th);
    pthread_mutex_destroy(&c->mu);
    if (c->st) {
        if (err) *err = c->err;
        return c->st;
    }
    return LOFP_OK;
}

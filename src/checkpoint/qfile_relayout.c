/* qfile_relayout.c -- `lofp layout convert` (qfile.h, lofp_qfile_relayout): the scales of every
 * quantized tensor of a lofp tensor file rewritten in another layout, everything else copied. */
#include "ck_internal.h"
#include "lofp/qfile.h"
#include "qfile_internal.h"

#include <stdlib.h>
#include <string.h>

/* The output's plan: per input tensor its descriptor, and for a scales tensor the index of its
 * quantized tensor + 1 (0: copied unchanged). */
typedef struct {
    size_t nt, nq, nmeta;
    const char **qnames;
    lofp_qtensor *qs;
    lofp_tensor_desc *d;
    lofp_metadata_entry *m;
    size_t *conv;
    size_t (*shapes)[LOFP_MAX_NDIM];
    char **vals;
} relayout_plan;

static void plan_free(relayout_plan *p)
{
    for (size_t i = 0; p->vals && i < p->nq; i++) free(p->vals[i]);
    free(p->vals); free(p->qnames); free(p->qs); free(p->d); free(p->m); free(p->conv); free(p->shapes);
}

/* "lofp:NAME" of q's description, malloc'ed. */
static char *meta_value(const lofp_qtensor *q)
{
    size_t n = lofp_qtensor_meta_format(q, NULL, 0);
    char *v = n ? malloc(n + 1) : NULL;
    if (v && lofp_qtensor_meta_format(q, v, n + 1) != n) { free(v); v = NULL; }
    return v;
}

static lofp_status plan(const lofp_file *f, const char *in, lofp_layout L, int pad_byte, relayout_plan *p,
                        lofp_io_error *err)
{
    p->nt = lofp_file_count(f);
    p->nmeta = lofp_file_metadata_count(f);
    for (size_t i = 0; i < p->nmeta; i++) p->nq += lofp_qfile_name_at(f, i) != NULL;
    if (p->nq == 0) return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no tensors written by lofp quantize (no 'lofp:' metadata)", in);
    p->qnames = calloc(p->nq, sizeof *p->qnames);
    p->qs = calloc(p->nq, sizeof *p->qs);
    p->d = calloc(p->nt ? p->nt : 1, sizeof *p->d);
    p->m = calloc(p->nmeta + 1, sizeof *p->m);
    p->conv = calloc(p->nt ? p->nt : 1, sizeof *p->conv);
    p->shapes = calloc(p->nq, sizeof *p->shapes);
    p->vals = calloc(p->nq, sizeof *p->vals);
    if (!p->qnames || !p->qs || !p->d || !p->m || !p->conv || !p->shapes || !p->vals)
        return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    size_t nq = 0;
    for (size_t i = 0; i < p->nmeta; i++)
        if (lofp_qfile_name_at(f, i)) p->qnames[nq++] = lofp_qfile_name_at(f, i);
    const lofp_tensor_info *t0 = lofp_file_tensor(f, 0);
    for (size_t i = 0; i < p->nt; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        p->d[i] = (lofp_tensor_desc){t->name, t->dtype, t->ndim, t->shape, NULL, t->nbytes};
    }
    for (size_t i = 0; i < p->nmeta; i++) p->m[i] = *lofp_file_metadata(f, i);
    /* the new scales' dtype, shape and metadata for every quantized tensor, before writing */
    const size_t pl = sizeof LOFP_QFILE_KEY_PREFIX - 1;
    for (size_t qi = 0; qi < p->nq; qi++) {
        lofp_qtensor *q = &p->qs[qi];
        lofp_status st = lofp_qtensor_load(f, in, p->qnames[qi], q, err);
        if (st) return st;
        size_t i = (size_t)(q->scales_t - t0);
        p->conv[i] = qi + 1;
        p->d[i].dtype = lofp_qtensor_scales_dtype(&q->scheme, L);
        p->d[i].nbytes = lofp_layout_required_bytes(q->rows, q->kp, q->scheme.block, L);
        p->d[i].ndim = lofp_qtensor_scales_shape(q, L, p->shapes[qi]);
        p->d[i].shape = p->shapes[qi];
        lofp_qtensor nq_ = *q;
        nq_.layout = L;
        nq_.pad_byte = pad_byte >= 0 ? pad_byte : (L == LOFP_LAYOUT_PACKED_U32 ? 127 : 0);
        if (!(p->vals[qi] = meta_value(&nq_))) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        for (size_t e = 0; e < p->nmeta; e++)
            if (!strncmp(p->m[e].key, LOFP_QFILE_KEY_PREFIX, pl) && !strcmp(p->m[e].key + pl, q->name))
                p->m[e].value = p->vals[qi];
    }
    return LOFP_OK;
}

/* The scales of q in layout L appended to output i of w. */
static lofp_status write_scales(const lofp_qtensor *q, lofp_layout L, int pad_byte, size_t nbytes, lofp_writer *w,
                                size_t i, lofp_io_error *err)
{
    size_t cols = q->kp / q->scheme.block, nb = q->rows * cols;
    uint8_t *lin = malloc(nb ? nb : 1), *out = malloc(nbytes ? nbytes : 1);
    lofp_status st = lin && out ? LOFP_OK : LOFP_ERR_NOMEM;
    if (st == LOFP_OK) st = lofp_qtensor_linear_scales(q, lin);
    if (st == LOFP_OK) st = lofp_layout_from_linear(lin, q->rows, cols, L, pad_byte, out);
    if (st != LOFP_OK) st = lofp_ck_fail(err, st, "tensor '%s': conversion failed (%s)", q->name, lofp_status_name(st));
    else st = lofp_writer_append(w, i, out, nbytes, err);
    free(lin);
    free(out);
    return st;
}

lofp_status lofp_qfile_relayout(const char *in, const char *outp, lofp_layout layout, int pad_byte,
                                unsigned write_flags, const lofp_qfile_writer_ops *writer, lofp_io_error *err)
{
    if (!in || !outp) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_qfile_relayout: NULL argument");
    if (!lofp_layout_name(layout)) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "unknown layout %d", (int)layout);
    if (pad_byte < -1 || pad_byte > 254) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "pad byte %d is not -1 or 0..254", pad_byte);
    if (lofp_same_file(outp, in))
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "the output %s is the input %s (the same file); write to another path", outp, in);
    lofp_file *f = NULL;
    lofp_status st = lofp_file_open(in, LOFP_FORMAT_AUTO, &f, err);
    if (st) return st;
    relayout_plan p;
    memset(&p, 0, sizeof p);
    lofp_writer *w = NULL;
    if ((st = plan(f, in, layout, pad_byte, &p, err)) == LOFP_OK &&
        (st = lofp_qfile_w_open(writer, outp, LOFP_FORMAT_SAFETENSORS, p.d, p.nt, p.m, p.nmeta, write_flags, &w, err)) == LOFP_OK) {
        for (size_t i = 0; i < p.nt && !st; i++)
            st = p.conv[i] ? write_scales(&p.qs[p.conv[i] - 1], layout, pad_byte, p.d[i].nbytes, w, i, err)
                           : lofp_qfile_copy_tensor(f, lofp_file_tensor(f, i), w, i, LOFP_IO_CHUNK_BYTES, err);
        if (st) lofp_qfile_w_abort(writer, w);
        else st = lofp_qfile_w_finish(writer, w, err);
    }
    plan_free(&p);
    lofp_file_close(f);
    return st;
}

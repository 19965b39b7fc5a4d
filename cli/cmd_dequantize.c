/* cmd_dequantize.c -- `lofp dequantize Q.safetensors OUT.(npy|safetensors)`: the metadata of
 * `lofp quantize` says everything, so no flags are needed beyond the output dtype.
 *
 * Streaming: every output tensor's size is known from the metadata, so the writer puts the header
 * down first; each quantized tensor is then decoded in chunks of rows (codes and linear scales
 * read straight from the file, the output chunk written as soon as it is decoded), and the other
 * tensors are copied through in chunks. Memory: a few chunks, plus one tensor's linear scales when
 * they are stored in another layout. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qtensor.h"

static void dequantize_usage(FILE *f)
{
    fprintf(f, "usage: lofp dequantize [--dtype f32|bf16|f16] [--threads N] Q.safetensors OUT.(npy|safetensors)\n\n"
               "Dequantizes every tensor `lofp quantize` wrote (scheme, layout and shape come from the\n"
               "file's metadata) to its logical shape; other tensors are copied unchanged. A .npy\n"
               "output needs exactly one tensor. --dtype selects the output type (default f32;\n"
               "bf16/f16 round to nearest even). UltraQuant tensors stay in the rotated basis.\n"
               "OUT must not be Q.\n");
}

static int strp_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct {
    lofp_file *f;
    lofp_writer *w;
    lofp_io_dtype odt;
    size_t chunk_bytes;
    unsigned threads;
} dctx;

static int dequantize_one(dctx *c, const qtensor *q0, size_t di)
{
    qtensor q = *q0;
    q.s.threads = c->threads;
    const size_t k = q.k, rows = q.rows, nb = q.kp / q.s.block, es = c->odt == LOFP_IO_F32 ? 4 : 2;
    size_t cr = c->chunk_bytes / (k * es);
    if (cr < 1) cr = 1;
    if (cr > rows) cr = rows;
    lofp_io_error err;
    lofp_row_reader *rc_ = NULL, *rs = NULL;
    uint8_t *lin = NULL, *out = malloc(cr * k * es);
    int rc = 0;
    const int linear = q.layout == LOFP_LAYOUT_LINEAR;
    if (!out) { rc = cli_error("dequantize", "out of memory on '%s'", q.name); goto done; }
    if (!linear) {
        lin = malloc(rows * nb);
        if (!lin || qt_linear_scales(&q, lin) != LOFP_OK) { rc = cli_error("dequantize", "tensor '%s': cannot read its %s scales", q.name, lofp_layout_name(q.layout)); goto done; }
    }
    if (lofp_row_reader_open(c->f, q.codes_t, cr, &rc_, &err) != LOFP_OK ||
        (linear && lofp_row_reader_open(c->f, q.scales_t, cr, &rs, &err) != LOFP_OK)) {
        rc = cli_error("dequantize", "%s", err.message);
        goto done;
    }
    lofp_dtype dt = c->odt == LOFP_IO_F32 ? LOFP_DTYPE_F32 : c->odt == LOFP_IO_BF16 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F16;
    lofp_row_chunk cc, sc;
    while (lofp_row_reader_next(rc_, &cc, &err) == LOFP_OK && cc.rows) {
        const uint8_t *scales;
        if (linear) {
            if (lofp_row_reader_next(rs, &sc, &err) != LOFP_OK || sc.rows != cc.rows) { rc = cli_error("dequantize", "tensor '%s': scales and codes disagree", q.name); goto done; }
            scales = sc.data;
        } else {
            scales = lin + cc.row0 * nb;
        }
        lofp_status st = lofp_dequantize(&q.s, cc.data, scales, q.global, cc.rows, k, dt, out);
        if (st != LOFP_OK) { rc = cli_error("dequantize", "tensor '%s': %s", q.name, lofp_status_name(st)); goto done; }
        if (lofp_writer_append(c->w, di, out, cc.rows * k * es, &err) != LOFP_OK) { rc = cli_error("dequantize", "%s", err.message); goto done; }
    }
done:
    lofp_row_reader_close(rc_);
    lofp_row_reader_close(rs);
    free(lin);
    free(out);
    return rc;
}


int lofp_cmd_dequantize(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0;
    long threads = 1, chunk_mib = 2;
    lofp_io_dtype odt = LOFP_IO_F32;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { dequantize_usage(stdout); return 0; }
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "f32") || !strcmp(d, "fp32")) odt = LOFP_IO_F32;
            else if (!strcmp(d, "bf16")) odt = LOFP_IO_BF16;
            else if (!strcmp(d, "f16") || !strcmp(d, "fp16")) odt = LOFP_IO_F16;
            else return cli_error("dequantize", "unknown --dtype '%s' (f32, bf16, f16)", d);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (cli_parse_long("dequantize", "--threads", argv[++i], 1, 256, &threads)) return 1;
        } else if (!strcmp(argv[i], "--chunk-mib") && i + 1 < argc) {
            if (cli_parse_long("dequantize", "--chunk-mib", argv[++i], 1, 4096, &chunk_mib)) return 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            dequantize_usage(stderr);
            return cli_error("dequantize", "unknown option '%s'", argv[i]);
        } else if (npos < 2) pos[npos++] = argv[i];
        else return cli_error("dequantize", "too many arguments");
    }
    if (npos != 2) { dequantize_usage(stderr); return cli_error("dequantize", "need Q.safetensors and OUT"); }
    if (cli_refuse_same("dequantize", pos[1], &pos[0], 1)) return 1;
    lofp_io_error err;
    lofp_file *f = NULL;
    if (lofp_file_open(pos[0], LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) return cli_error("dequantize", "%s", err.message);
    size_t nq = 0;
    int oom = 0;
    const char **qnames = qt_list(f, &nq, &oom);
    const char **sorted = NULL;
    size_t nt = lofp_file_count(f), nmeta = lofp_file_metadata_count(f);
    lofp_tensor_desc *descs = NULL;
    qtensor *qs = NULL;
    const lofp_tensor_info **src = NULL;
    lofp_metadata_entry *meta = NULL;
    lofp_writer *w = NULL;
    size_t nd = 0, nm = 0;
    int rc = 0;
    if (oom) { rc = cli_error("dequantize", "out of memory"); goto done; }
    if (nq == 0) { rc = cli_error("dequantize", "%s: no tensors written by lofp quantize (no 'lofp:' metadata)", pos[0]); goto done; }
    sorted = malloc(nq * sizeof *sorted);
    descs = calloc(nt + nq, sizeof *descs);
    qs = calloc(nq, sizeof *qs);
    src = calloc(nt + nq, sizeof *src);
    meta = calloc(nmeta + 1, sizeof *meta);
    if (!sorted || !descs || !qs || !src || !meta) { rc = cli_error("dequantize", "out of memory"); goto done; }
    memcpy(sorted, qnames, nq * sizeof *sorted);
    qsort(sorted, nq, sizeof *sorted, strp_cmp);
    const size_t es = odt == LOFP_IO_F32 ? 4 : 2;
    /* every quantized tensor is checked before anything is written */
    for (size_t i = 0; i < nq; i++) {
        char msg[1024];
        qtensor *q = &qs[i];
        if (qt_load(f, pos[0], qnames[i], q, msg, sizeof msg) != LOFP_OK) { rc = cli_error("dequantize", "%s", msg); goto done; }
        descs[nd++] = (lofp_tensor_desc){q->name, odt, q->ndim, q->shape, NULL, q->rows * q->k * es};
    }
    for (size_t i = 0; i < nt; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        if (qt_is_part(t->name, sorted, nq)) continue;
        src[nd] = t;
        descs[nd++] = (lofp_tensor_desc){t->name, t->dtype, t->ndim, t->shape, NULL, t->nbytes};
    }
    for (size_t i = 0; i < nmeta; i++) {
        const lofp_metadata_entry *e = lofp_file_metadata(f, i);
        if (strncmp(e->key, "lofp:", 5) != 0) meta[nm++] = *e;
    }
    size_t ol = strlen(pos[1]);
    int npy = ol >= 4 && !strcmp(pos[1] + ol - 4, ".npy");
    if (npy && nd != 1) { rc = cli_error("dequantize", "%s holds %zu tensors; write a .safetensors instead of %s", pos[0], nd, pos[1]); goto done; }
    if (cli_writer_open(pos[1], LOFP_FORMAT_AUTO, descs, nd, npy ? NULL : meta, npy ? 0 : nm, &w, &err) != LOFP_OK) {
        rc = cli_error("dequantize", "%s", err.message);
        goto done;
    }
    dctx c = {f, w, odt, (size_t)chunk_mib << 20, (unsigned)threads};
    for (size_t i = 0; i < nd && !rc; i++)
        rc = i < nq ? dequantize_one(&c, &qs[i], i) : cli_copy_tensor("dequantize", f, src[i], w, i, c.chunk_bytes);
    if (rc) cli_writer_abort(w);
    else if (cli_writer_finish(w, &err) != LOFP_OK) rc = cli_error("dequantize", "%s", err.message);
done:
    free(qnames); free(sorted); free(descs); free(qs); free(src); free(meta);
    lofp_file_close(f);
    return rc;
}

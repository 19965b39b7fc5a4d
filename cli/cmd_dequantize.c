/* cmd_dequantize.c -- `lofp dequantize Q.safetensors OUT.(npy|safetensors)`: the metadata of
 * `lofp quantize` says everything, so no flags are needed beyond the output dtype. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qtensor.h"

static void dequantize_usage(FILE *f)
{
    fprintf(f, "usage: lofp dequantize [--dtype f32|bf16|f16] Q.safetensors OUT.(npy|safetensors)\n\n"
               "Dequantizes every tensor `lofp quantize` wrote (scheme, layout and shape come from the\n"
               "file's metadata) to its logical shape; other tensors are copied unchanged. A .npy\n"
               "output needs exactly one tensor. --dtype selects the output type (default f32;\n"
               "bf16/f16 round to nearest even). UltraQuant tensors stay in the rotated basis.\n");
}

/* 1 when `name` is T.codes / T.scales / T.global_scale of a quantized T. */
static int is_part(const char *name, const char **qnames, size_t nq)
{
    for (size_t i = 0; i < nq; i++) {
        size_t l = strlen(qnames[i]);
        if (strncmp(name, qnames[i], l) == 0 &&
            (!strcmp(name + l, ".codes") || !strcmp(name + l, ".scales") || !strcmp(name + l, ".global_scale")))
            return 1;
    }
    return 0;
}

int lofp_cmd_dequantize(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0;
    lofp_io_dtype odt = LOFP_IO_F32;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { dequantize_usage(stdout); return 0; }
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "f32") || !strcmp(d, "fp32")) odt = LOFP_IO_F32;
            else if (!strcmp(d, "bf16")) odt = LOFP_IO_BF16;
            else if (!strcmp(d, "f16") || !strcmp(d, "fp16")) odt = LOFP_IO_F16;
            else return cli_error("dequantize", "unknown --dtype '%s' (f32, bf16, f16)", d);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            dequantize_usage(stderr);
            return cli_error("dequantize", "unknown option '%s'", argv[i]);
        } else if (npos < 2) pos[npos++] = argv[i];
        else return cli_error("dequantize", "too many arguments");
    }
    if (npos != 2) { dequantize_usage(stderr); return cli_error("dequantize", "need Q.safetensors and OUT"); }
    lofp_io_error err;
    lofp_file *f = NULL;
    if (lofp_file_open(pos[0], LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) return cli_error("dequantize", "%s", err.message);
    const char *qnames[4096];
    size_t nq = qt_list(f, qnames, 4096);
    if (nq == 0) { lofp_file_close(f); return cli_error("dequantize", "%s: no tensors written by lofp quantize (no 'lofp:' metadata)", pos[0]); }
    size_t nt = lofp_file_count(f);
    lofp_tensor_desc *descs = calloc(nt + nq, sizeof *descs);
    void **owned = calloc(nq, sizeof *owned);
    lofp_metadata_entry *meta = calloc(lofp_file_metadata_count(f) + 1, sizeof *meta);
    size_t nd = 0, nm = 0;
    int rc = 0;
    static qtensor qs[4096];
    for (size_t i = 0; i < nq && !rc; i++) {
        char msg[600];
        qtensor *q = &qs[i];
        if (qt_load(f, pos[0], qnames[i], q, msg, sizeof msg) != LOFP_OK) { rc = cli_error("dequantize", "%s", msg); break; }
        size_t n = q->rows * q->k;
        float *x = malloc(n * sizeof(float));
        if (!x) { rc = cli_error("dequantize", "out of memory on '%s'", q->name); break; }
        lofp_status st = qt_dequantize(q, x);
        if (st != LOFP_OK) { free(x); rc = cli_error("dequantize", "%s: tensor '%s': %s", pos[0], q->name, lofp_status_name(st)); break; }
        void *data = x;
        size_t nbytes = n * 4;
        if (odt != LOFP_IO_F32) {
            uint16_t *h = malloc(n * 2);
            if (!h) { free(x); rc = cli_error("dequantize", "out of memory"); break; }
            for (size_t j = 0; j < n; j++) h[j] = odt == LOFP_IO_BF16 ? lofp_fp32_to_bf16(x[j]) : lofp_fp32_to_fp16(x[j]);
            free(x);
            data = h;
            nbytes = n * 2;
        }
        owned[i] = data;
        lofp_tensor_desc *d = &descs[nd++];
        d->name = q->name; d->dtype = odt; d->ndim = q->ndim; d->shape = q->shape; d->data = data; d->nbytes = nbytes;
    }
    for (size_t i = 0; i < nt && !rc; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        if (is_part(t->name, qnames, nq)) continue;
        lofp_tensor_desc *d = &descs[nd++];
        d->name = t->name; d->dtype = t->dtype; d->ndim = t->ndim; d->shape = t->shape; d->data = t->data; d->nbytes = t->nbytes;
    }
    for (size_t i = 0; i < lofp_file_metadata_count(f); i++) {
        const lofp_metadata_entry *e = lofp_file_metadata(f, i);
        if (strncmp(e->key, "lofp:", 5) != 0) meta[nm++] = *e;
    }
    if (!rc) {
        size_t ol = strlen(pos[1]);
        int npy = ol >= 4 && !strcmp(pos[1] + ol - 4, ".npy");
        if (npy && nd != 1) rc = cli_error("dequantize", "%s holds %zu tensors; write a .safetensors instead of %s", pos[0], nd, pos[1]);
        else if (lofp_file_write(pos[1], LOFP_FORMAT_AUTO, descs, nd, npy ? NULL : meta, npy ? 0 : nm, &err) != LOFP_OK)
            rc = cli_error("dequantize", "%s", err.message);
    }
    for (size_t i = 0; i < nq; i++) free(owned[i]);
    free(descs); free(owned); free(meta);
    lofp_file_close(f);
    return rc;
}

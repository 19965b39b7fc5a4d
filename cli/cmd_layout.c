/* cmd_layout.c -- `lofp layout convert` (re-lay the scales of a quantized file) and
 * `lofp layout diagnose` (name the layout, byte order and granularity of a scale buffer). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qtensor.h"

static void layout_usage(FILE *f)
{
    fprintf(f,
        "usage: lofp layout convert --to LAYOUT [--pad-byte B] Q.safetensors OUT.safetensors\n"
        "       lofp layout diagnose SCALES.(npy|safetensors)[:NAME] --tensor X.(npy|safetensors)[:NAME]\n"
        "                            --scheme S [--block B] [--alt-block A] [--scale-rule R]\n\n"
        "convert: rewrites the scales of every quantized tensor of Q in LAYOUT (linear,\n"
        "  swizzle-128x4, packed-u32, packed-u32:deepgemm) and updates the metadata.\n"
        "diagnose: quantizes X (rows = all leading dims, K = last dim) with scheme S at\n"
        "  granularity B (and A, e.g. --block 128 --alt-block 32) to get the scales it should have,\n"
        "  then says which layout, byte order and granularity the raw bytes of SCALES were\n"
        "  written in (reversed bytes, row-major words, 32 written / 128 read, ...), with the\n"
        "  evidence. Exit status 0 when a candidate matches, 1 when none does.\n");
}

/* "file.safetensors:name" -> opens the file and finds the tensor (first one without a name). */
static const lofp_tensor_info *open_tensor(const char *spec, lofp_file **f, char **pathp)
{
    char *path = *pathp = strdup(spec);
    if (!path) { cli_error("layout", "out of memory"); return NULL; }
    char *colon = strrchr(path, ':');
    const char *name = NULL;
    if (colon && colon != path && strchr(colon, '/') == NULL) { *colon = 0; name = colon + 1; }
    lofp_io_error err;
    if (lofp_file_open(path, LOFP_FORMAT_AUTO, f, &err) != LOFP_OK) {
        cli_error("layout", "%s", err.message);
        return NULL;
    }
    const lofp_tensor_info *t = name ? lofp_file_find(*f, name) : lofp_file_tensor(*f, 0);
    if (!t) cli_error("layout", "%s: no tensor '%s'", path, name ? name : "(any)");
    return t;
}

static int diagnose(int argc, char **argv)
{
    const char *scales_spec = NULL, *tensor_spec = NULL, *scheme_name = NULL, *rule = NULL;
    long block = 0, alt = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) { layout_usage(stdout); return 0; }
        else if (!strcmp(a, "--tensor") && more) tensor_spec = argv[++i];
        else if (!strcmp(a, "--scheme") && more) scheme_name = argv[++i];
        else if (!strcmp(a, "--block") && more) { if (cli_parse_long("layout", "--block", argv[++i], 1, 1L << 30, &block)) return 1; }
        else if (!strcmp(a, "--alt-block") && more) { if (cli_parse_long("layout", "--alt-block", argv[++i], 1, 1L << 30, &alt)) return 1; }
        else if (!strcmp(a, "--scale-rule") && more) rule = argv[++i];
        else if (a[0] == '-') return cli_error("layout", "unknown option '%s'", a);
        else scales_spec = a;
    }
    if (!scales_spec || !tensor_spec || !scheme_name) { layout_usage(stderr); return cli_error("layout", "diagnose needs SCALES, --tensor and --scheme"); }
    lofp_scheme s;
    if (lofp_scheme_preset(scheme_name, &s) != LOFP_OK) return cli_error("layout", "unknown scheme '%s'", scheme_name);
    if (rule && lofp_scale_rule_from_name(rule, &s.scale_rule) != LOFP_OK) return cli_error("layout", "unknown scale rule '%s'", rule);
    if (block) s.block = (uint32_t)block;
    s.pad = 1;
    lofp_file *fs = NULL, *fx = NULL;
    char *ps = NULL, *px = NULL;
    const lofp_tensor_info *ts = open_tensor(scales_spec, &fs, &ps);
    const lofp_tensor_info *tx = ts ? open_tensor(tensor_spec, &fx, &px) : NULL;
    int rc = 1;
    if (!ts || !tx) goto out;
    if (!qt_is_float(tx->dtype) || tx->ndim < 1) { cli_error("layout", "%s: tensor '%s' is not floating point", px, tx->name); goto out; }
    size_t k = tx->shape[tx->ndim - 1], rows = tx->numel / (k ? k : 1);
    float *x = qt_tensor_to_f32(tx);
    lofp_scheme s2 = s;
    s2.block = (uint32_t)(alt ? alt : s.block);
    if (lofp_scheme_validate(&s) != LOFP_OK || lofp_scheme_validate(&s2) != LOFP_OK) { free(x); cli_error("layout", "invalid block for %s", scheme_name); goto out; }
    size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
    size_t cb2 = lofp_codes_bytes(&s2, rows, k), sb2 = lofp_scales_bytes(&s2, rows, k);
    uint8_t *c1 = malloc(cb), *e1 = malloc(sb), *c2 = malloc(cb2), *e2 = malloc(sb2);
    float g;
    lofp_status st = lofp_quantize(&s, LOFP_DTYPE_F32, x, rows, k, c1, e1, &g, NULL);
    if (st == LOFP_OK && alt) st = lofp_quantize(&s2, LOFP_DTYPE_F32, x, rows, k, c2, e2, &g, NULL);
    if (st != LOFP_OK) { cli_error("layout", "quantizing %s: %s", tx->name, lofp_status_name(st)); }
    else {
        lofp_layout_diagnosis d;
        st = lofp_layout_diagnose(ts->data, ts->nbytes, rows, k, s.block, e1, alt ? (uint32_t)alt : 0, alt ? e2 : NULL, &d);
        printf("scale buffer %s '%s' (%zu bytes) for tensor '%s' [%zu rows, K=%zu], %s:\n", ps, ts->name, ts->nbytes, tx->name, rows, k, scheme_name);
        printf("%s\n", d.evidence);
        printf("verdict: %s%s%s, granularity %u%s\n", d.matches ? "" : "NO MATCH; closest is ", lofp_layout_name(d.layout),
               d.reversed_bytes ? ", bytes reversed (MSB-first)" : "", d.block, d.row_major_words ? ", row-major words" : "");
        rc = d.matches ? 0 : 1;
    }
    free(x); free(c1); free(e1); free(c2); free(e2);
out:
    free(ps);
    free(px);
    lofp_file_close(fs);
    lofp_file_close(fx);
    return rc;
}

static int convert(int argc, char **argv)
{
    const char *to = NULL, *pos[2];
    int npos = 0;
    long pad_byte = -1;
    for (int i = 2; i < argc; i++) {
        if (cli_is_help(argv[i])) { layout_usage(stdout); return 0; }
        if (!strcmp(argv[i], "--to") && i + 1 < argc) to = argv[++i];
        else if (!strcmp(argv[i], "--pad-byte") && i + 1 < argc) { if (cli_parse_long("layout", "--pad-byte", argv[++i], 0, 254, &pad_byte)) return 1; }
        else if (argv[i][0] == '-') return cli_error("layout", "unknown option '%s'", argv[i]);
        else if (npos < 2) pos[npos++] = argv[i];
        else return cli_error("layout", "too many arguments ('%s')", argv[i]);
    }
    lofp_layout L;
    if (!to || npos != 2) { layout_usage(stderr); return cli_error("layout", "convert needs --to, Q and OUT"); }
    if (lofp_layout_from_name(to, &L) != LOFP_OK) return cli_error("layout", "unknown layout '%s'", to);
    if (cli_refuse_same("layout", pos[1], &pos[0], 1)) return 1;
    lofp_io_error err;
    lofp_file *f = NULL;
    if (lofp_file_open(pos[0], LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) return cli_error("layout", "%s", err.message);
    size_t nq = 0, nt = lofp_file_count(f), nmeta = lofp_file_metadata_count(f);
    int oom = 0, rc = 0;
    const char **qn = qt_list(f, &nq, &oom);
    lofp_tensor_desc *d = calloc(nt ? nt : 1, sizeof *d);
    lofp_metadata_entry *m = calloc(nmeta + 1, sizeof *m);
    lofp_qtensor *qs = calloc(nq ? nq : 1, sizeof *qs);
    size_t *conv = calloc(nt ? nt : 1, sizeof *conv);       /* 1 + index into qs, or 0 */
    size_t (*shapes)[2] = calloc(nq ? nq : 1, sizeof *shapes);
    char **vals = calloc(nq ? nq : 1, sizeof *vals);
    lofp_writer *w = NULL;
    if (oom || !d || !m || !qs || !conv || !shapes || !vals) { rc = cli_error("layout", "out of memory"); goto done; }
    if (nq == 0) { rc = cli_error("layout", "%s: no tensors written by lofp quantize (no 'lofp:' metadata)", pos[0]); goto done; }
    const lofp_tensor_info *t0 = lofp_file_tensor(f, 0);
    for (size_t i = 0; i < nt; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        d[i] = (lofp_tensor_desc){t->name, t->dtype, t->ndim, t->shape, NULL, t->nbytes};
    }
    for (size_t i = 0; i < nmeta; i++) m[i] = *lofp_file_metadata(f, i);
    /* the new scales' dtype, shape and metadata for every quantized tensor, before writing */
    for (size_t qi = 0; qi < nq; qi++) {
        lofp_qtensor *q = &qs[qi];
        lofp_io_error qerr;
        if (lofp_qtensor_load(f, pos[0], qn[qi], q, &qerr) != LOFP_OK) { rc = cli_error("layout", "%s", qerr.message); goto done; }
        size_t i = (size_t)(q->scales_t - t0);
        conv[i] = qi + 1;
        d[i].dtype = lofp_qtensor_scales_dtype(&q->scheme, L);
        d[i].nbytes = lofp_layout_required_bytes(q->rows, q->kp, q->scheme.block, L);
        if (L == LOFP_LAYOUT_LINEAR) {
            d[i].ndim = q->ndim;                 /* the original shape with K -> K/block: */
            d[i].shape = q->codes_t->shape;      /* borrowed below, replaced by a copy */
        }
        lofp_qtensor nq_ = *q;
        nq_.layout = L;
        nq_.pad_byte = pad_byte >= 0 ? (int)pad_byte : (L == LOFP_LAYOUT_PACKED_U32 ? 127 : 0);
        if (!(vals[qi] = qt_meta_value(&nq_))) { rc = cli_error("layout", "out of memory"); goto done; }
        for (size_t e = 0; e < nmeta; e++)
            if (!strncmp(m[e].key, LOFP_QFILE_KEY_PREFIX, sizeof LOFP_QFILE_KEY_PREFIX - 1) && !strcmp(m[e].key + sizeof LOFP_QFILE_KEY_PREFIX - 1, q->name)) m[e].value = vals[qi];
    }
    /* linear scales have the tensor's own rank: keep their shapes in one allocation per tensor */
    size_t **lin_shapes = calloc(nq, sizeof *lin_shapes);
    if (!lin_shapes) { rc = cli_error("layout", "out of memory"); goto done; }
    for (size_t i = 0; i < nt && !rc; i++) {
        if (!conv[i]) continue;
        lofp_qtensor *q = &qs[conv[i] - 1];
        size_t tmp[LOFP_MAX_NDIM];
        size_t nd = lofp_qtensor_scales_shape(q, L, tmp);
        size_t *sh = L == LOFP_LAYOUT_LINEAR ? (lin_shapes[conv[i] - 1] = malloc(nd * sizeof(size_t))) : shapes[conv[i] - 1];
        if (!sh) { rc = cli_error("layout", "out of memory"); break; }
        memcpy(sh, tmp, nd * sizeof(size_t));
        d[i].ndim = nd;
        d[i].shape = sh;
    }
    if (!rc && cli_writer_open(pos[1], LOFP_FORMAT_SAFETENSORS, d, nt, m, nmeta, &w, &err) != LOFP_OK)
        rc = cli_error("layout", "%s", err.message);
    for (size_t i = 0; i < nt && !rc; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        if (!conv[i]) { rc = cli_copy_tensor("layout", f, t, w, i, (size_t)4 << 20); continue; }
        lofp_qtensor *q = &qs[conv[i] - 1];
        size_t cols = q->kp / q->scheme.block, nb = q->rows * cols;
        uint8_t *lin = malloc(nb ? nb : 1), *out = malloc(d[i].nbytes ? d[i].nbytes : 1);
        if (!lin || !out || lofp_qtensor_linear_scales(q, lin) != LOFP_OK ||
            lofp_layout_from_linear(lin, q->rows, cols, L, (int)pad_byte, out) != LOFP_OK)
            rc = cli_error("layout", "tensor '%s': conversion failed", q->name);
        else if (lofp_writer_append(w, i, out, d[i].nbytes, &err) != LOFP_OK)
            rc = cli_error("layout", "%s", err.message);
        free(lin);
        free(out);
    }
    if (w) {
        if (rc) cli_writer_abort(w);
        else if (cli_writer_finish(w, &err) != LOFP_OK) rc = cli_error("layout", "%s", err.message);
    }
    for (size_t i = 0; i < nq; i++) free(lin_shapes[i]);
    free(lin_shapes);
done:
    for (size_t i = 0; vals && i < nq; i++) free(vals[i]);
    free(vals); free(qn); free(d); free(m); free(qs); free(conv); free(shapes);
    lofp_file_close(f);
    return rc;
}

int lofp_cmd_layout(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) { layout_usage(argc < 2 ? stderr : stdout); return argc < 2; }
    if (!strcmp(argv[1], "convert")) return convert(argc, argv);
    if (!strcmp(argv[1], "diagnose")) return diagnose(argc, argv);
    layout_usage(stderr);
    return cli_error("layout", "unknown action '%s' (convert, diagnose)", argv[1]);
}

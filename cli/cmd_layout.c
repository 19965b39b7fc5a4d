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
static const lofp_tensor_info *open_tensor(const char *spec, lofp_file **f, char *path, size_t cap)
{
    snprintf(path, cap, "%s", spec);
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
        else if (!strcmp(a, "--block") && more) block = atol(argv[++i]);
        else if (!strcmp(a, "--alt-block") && more) alt = atol(argv[++i]);
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
    char ps[1024], px[1024];
    const lofp_tensor_info *ts = open_tensor(scales_spec, &fs, ps, sizeof ps);
    const lofp_tensor_info *tx = ts ? open_tensor(tensor_spec, &fx, px, sizeof px) : NULL;
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
        else if (!strcmp(argv[i], "--pad-byte") && i + 1 < argc) pad_byte = atol(argv[++i]);
        else if (argv[i][0] == '-') return cli_error("layout", "unknown option '%s'", argv[i]);
        else if (npos < 2) pos[npos++] = argv[i];
    }
    lofp_layout L;
    if (!to || npos != 2) { layout_usage(stderr); return cli_error("layout", "convert needs --to, Q and OUT"); }
    if (lofp_layout_from_name(to, &L) != LOFP_OK) return cli_error("layout", "unknown layout '%s'", to);
    if (pad_byte < -1 || pad_byte > 254) return cli_error("layout", "--pad-byte must be 0..254");
    lofp_io_error err;
    lofp_file *f = NULL;
    if (lofp_file_open(pos[0], LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) return cli_error("layout", "%s", err.message);
    const char *qn[4096];
    size_t nq = qt_list(f, qn, 4096), nt = lofp_file_count(f), nmeta = lofp_file_metadata_count(f);
    lofp_tensor_desc *d = calloc(nt, sizeof *d);
    lofp_metadata_entry *m = calloc(nmeta + 1, sizeof *m);
    void **owned = calloc(3 * nq + 1, sizeof *owned);
    size_t (*shapes)[QT_MAX_DIMS] = calloc(nq + 1, sizeof *shapes);
    size_t no = 0;
    int rc = 0;
    for (size_t i = 0; i < nt; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        d[i].name = t->name; d[i].dtype = t->dtype; d[i].ndim = t->ndim; d[i].shape = t->shape; d[i].data = t->data; d[i].nbytes = t->nbytes;
    }
    for (size_t i = 0; i < nmeta; i++) m[i] = *lofp_file_metadata(f, i);
    for (size_t qi = 0; qi < nq && !rc; qi++) {
        qtensor q;
        char msg[600];
        if (qt_load(f, pos[0], qn[qi], &q, msg, sizeof msg) != LOFP_OK) { rc = cli_error("layout", "%s", msg); break; }
        size_t cols = q.kp / q.s.block, nb = q.rows * cols, lb = lofp_layout_required_bytes(q.rows, q.kp, q.s.block, L);
        uint8_t *lin = malloc(nb), *out = malloc(lb);
        owned[no++] = lin; owned[no++] = out;
        if (!lin || !out || qt_linear_scales(&q, lin) != LOFP_OK || lofp_layout_from_linear(lin, q.rows, cols, L, (int)pad_byte, out) != LOFP_OK) {
            rc = cli_error("layout", "tensor '%s': conversion failed", q.name);
            break;
        }
        char sname[300];
        snprintf(sname, sizeof sname, "%s.scales", q.name);
        for (size_t i = 0; i < nt; i++) {
            if (strcmp(d[i].name, sname) != 0) continue;
            d[i].data = out;
            d[i].nbytes = lb;
            if (L == LOFP_LAYOUT_PACKED_U32 || L == LOFP_LAYOUT_PACKED_U32_DG) {
                size_t ma = L == LOFP_LAYOUT_PACKED_U32 ? q.rows : (q.rows + 3) / 4 * 4;
                shapes[qi][0] = lb / 4 / ma; shapes[qi][1] = ma;
                d[i].dtype = LOFP_IO_U32; d[i].ndim = 2; d[i].shape = shapes[qi];
            } else {
                d[i].dtype = q.s.scale_elem == LOFP_ELEM_UE4M3 ? LOFP_IO_F8_E4M3 : q.s.id == LOFP_SCHEME_ULTRAQUANT ? LOFP_IO_U8 : LOFP_IO_F8_E8M0;
                if (L == LOFP_LAYOUT_LINEAR) {
                    memcpy(shapes[qi], q.shape, q.ndim * sizeof(size_t));
                    shapes[qi][q.ndim - 1] = cols;
                    d[i].ndim = q.ndim;
                } else {
                    shapes[qi][0] = lb;
                    d[i].ndim = 1;
                }
                d[i].shape = shapes[qi];
            }
        }
        q.layout = L;
        q.pad_byte = pad_byte >= 0 ? (int)pad_byte : (L == LOFP_LAYOUT_PACKED_U32 ? 127 : 0);
        char *val = malloc(1024);
        if (!qt_meta_format(&q, val, 1024)) { free(val); rc = cli_error("layout", "metadata too long"); break; }
        for (size_t i = 0; i < nmeta; i++)
            if (!strncmp(m[i].key, "lofp:", 5) && !strcmp(m[i].key + 5, q.name)) m[i].value = val;
        owned[no++] = val;
    }
    if (!rc && lofp_file_write(pos[1], LOFP_FORMAT_SAFETENSORS, d, nt, m, nmeta, &err) != LOFP_OK)
        rc = cli_error("layout", "%s", err.message);
    for (size_t i = 0; i < no; i++) free(owned[i]);
    free(d); free(m); free(owned); free(shapes);
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

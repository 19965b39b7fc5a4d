/* cmd_layout.c -- `lofp layout convert` (re-lay the scales of a quantized file: the library's
 * lofp_qfile_relayout) and `lofp layout diagnose` (name the layout, byte order and granularity of a
 * scale buffer: lofp_layout_diagnose). Arguments and printing only. */
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
    if (!lofp_dtype_is_float(tx->dtype) || tx->ndim < 1) { cli_error("layout", "%s: tensor '%s' is not floating point", px, tx->name); goto out; }
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
    lofp_io_error err;
    if (lofp_qfile_relayout(pos[0], pos[1], L, (int)pad_byte, cli_write_flags(), cli_writer_ops(), &err) != LOFP_OK)
        return cli_error("layout", "%s", err.message);
    return 0;
}

int lofp_cmd_layout(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) { layout_usage(argc < 2 ? stderr : stdout); return argc < 2; }
    if (!strcmp(argv[1], "convert")) return convert(argc, argv);
    if (!strcmp(argv[1], "diagnose")) return diagnose(argc, argv);
    layout_usage(stderr);
    return cli_error("layout", "unknown action '%s' (convert, diagnose)", argv[1]);
}

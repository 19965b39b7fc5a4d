/* cmd_quantize.c -- `lofp quantize --scheme S IN OUT.safetensors`: every floating tensor of IN
 * (selected by --include/--exclude) becomes T.codes, T.scales and (two-level NVFP4)
 * T.global_scale plus a "lofp:T" metadata entry; other tensors are copied through. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "qtensor.h"

static void quantize_usage(FILE *f)
{
    fprintf(f,
        "usage: lofp quantize --scheme S [options] IN.(npy|safetensors) OUT.safetensors\n\n"
        "Quantizes every floating tensor of IN (F32, F16, BF16, F64; a .npy is one tensor named\n"
        "after its file stem) and writes T.codes, T.scales, T.global_scale (two-level NVFP4) and\n"
        "metadata that `lofp dequantize` reads. Non-selected tensors are copied unchanged.\n\n"
        "  --scheme S           nvfp4 mxfp4 mxfp6-e2m3 mxfp6-e3m2 mxfp8-e4m3 mxfp8-e5m2 mxint8\n"
        "                       tilelang-mxfp8 ultraquant\n"
        "  --rounding R         rne (default) ties-to-zero ties-away stochastic\n"
        "  --scale-rule R       MX: floor (default) ceil even rceil\n"
        "  --block N            MX granularity, a multiple of 32\n"
        "  --one-level          NVFP4 without the per-tensor scale\n"
        "  --no-rotate          UltraQuant without the Hadamard rotation (V)\n"
        "  --dense-hadamard     UltraQuant: the reference's dense matmul instead of the butterfly\n"
        "  --c X                UltraQuant constant (default 0.156)\n"
        "  --scale-layout L     linear (default) swizzle-128x4 packed-u32 packed-u32:deepgemm\n"
        "  --pad-byte B         pad byte of packed-u32 layouts (default 127 / 0 for deepgemm)\n"
        "  --pad                zero-pad K to a whole block instead of failing\n"
        "  --propagate-nonfinite  MX: NaN/Inf blocks get scale 0xFF; UltraQuant: zero groups\n"
        "  --profile P          whose numerics, bit for bit: lofp (default) modelopt\n"
        "                       compressed-tensors torchao ggml (docs/CHECKPOINTS.md)\n"
        "  --seed N             random bits for stochastic rounding\n"
        "  --include GLOB       quantize only matching tensor names (repeatable)\n"
        "  --exclude GLOB       never quantize matching names (repeatable)\n"
        "  --threads N          worker threads (results do not depend on it)\n");
}

typedef struct {
    lofp_tensor_desc d;
    size_t shape[QT_MAX_DIMS + 1];
    void *owned;
    char *name;
} out_tensor;

static int selected(const char *name, char **inc, int ninc, char **exc, int nexc)
{
    for (int i = 0; i < nexc; i++) if (fnmatch(exc[i], name, 0) == 0) return 0;
    if (ninc == 0) return 1;
    for (int i = 0; i < ninc; i++) if (fnmatch(inc[i], name, 0) == 0) return 1;
    return 0;
}

static lofp_io_dtype codes_dtype(const lofp_scheme *s)
{
    if (s->elem == LOFP_ELEM_E4M3) return LOFP_IO_F8_E4M3;
    if (s->elem == LOFP_ELEM_E5M2) return LOFP_IO_F8_E5M2;
    return LOFP_IO_U8;
}

static lofp_io_dtype scales_dtype(const lofp_scheme *s, lofp_layout l)
{
    if (l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG) return LOFP_IO_U32;
    if (s->scale_elem == LOFP_ELEM_UE4M3) return LOFP_IO_F8_E4M3;
    if (s->id == LOFP_SCHEME_ULTRAQUANT) return LOFP_IO_U8; /* byte 0 means zero, not 2^-127 */
    return LOFP_IO_F8_E8M0;
}

int lofp_cmd_quantize(int argc, char **argv)
{
    const char *scheme_name = NULL, *rounding = NULL, *rule = NULL, *layout_name = "linear", *profile = NULL;
    long block = 0, threads = 1, pad_byte = -1;
    int one_level = 0, no_rotate = 0, pad = 0, propagate = 0, dense = 0, have_c = 0, have_seed = 0;
    float c = 0.156f;
    unsigned long long seed = 0;
    char *inc[64], *exc[64];
    int ninc = 0, nexc = 0;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) { quantize_usage(stdout); return 0; }
        else if (!strcmp(a, "--scheme") && more) scheme_name = argv[++i];
        else if (!strcmp(a, "--rounding") && more) rounding = argv[++i];
        else if (!strcmp(a, "--scale-rule") && more) rule = argv[++i];
        else if (!strcmp(a, "--block") && more) block = atol(argv[++i]);
        else if (!strcmp(a, "--one-level")) one_level = 1;
        else if (!strcmp(a, "--no-rotate")) no_rotate = 1;
        else if (!strcmp(a, "--dense-hadamard")) dense = 1;
        else if (!strcmp(a, "--c") && more) { c = strtof(argv[++i], NULL); have_c = 1; }
        else if (!strcmp(a, "--scale-layout") && more) layout_name = argv[++i];
        else if (!strcmp(a, "--pad-byte") && more) pad_byte = atol(argv[++i]);
        else if (!strcmp(a, "--pad")) pad = 1;
        else if (!strcmp(a, "--propagate-nonfinite")) propagate = 1;
        else if (!strcmp(a, "--profile") && more) profile = argv[++i];
        else if (!strcmp(a, "--seed") && more) { seed = strtoull(argv[++i], NULL, 0); have_seed = 1; }
        else if (!strcmp(a, "--include") && more && ninc < 64) inc[ninc++] = argv[++i];
        else if (!strcmp(a, "--exclude") && more && nexc < 64) exc[nexc++] = argv[++i];
        else if (!strcmp(a, "--threads") && more) threads = atol(argv[++i]);
        else if (a[0] == '-' && a[1]) { quantize_usage(stderr); return cli_error("quantize", "unknown or incomplete option '%s'", a); }
        else if (npos < 2) pos[npos++] = a;
        else return cli_error("quantize", "too many arguments ('%s')", a);
    }
    if (!scheme_name || npos != 2) { quantize_usage(stderr); return cli_error("quantize", "need --scheme, IN and OUT"); }
    lofp_scheme s;
    if (lofp_scheme_preset(scheme_name, &s) != LOFP_OK) return cli_error("quantize", "unknown scheme '%s'", scheme_name);
    if (rounding && lofp_rounding_from_name(rounding, &s.rounding) != LOFP_OK) return cli_error("quantize", "unknown rounding '%s'", rounding);
    if (rule && lofp_scale_rule_from_name(rule, &s.scale_rule) != LOFP_OK) return cli_error("quantize", "unknown scale rule '%s'", rule);
    if (profile && lofp_profile_from_name(profile, &s.profile) != LOFP_OK) return cli_error("quantize", "unknown profile '%s'", profile);
    if (block) s.block = (uint32_t)block;
    if (one_level) s.two_level = 0;
    if (no_rotate) s.rotate = 0;
    if (dense) s.hadamard = LOFP_HADAMARD_DENSE;
    if (have_c) s.c = c;
    if (have_seed) s.seed = seed;
    s.pad = pad;
    s.propagate_nonfinite = propagate;
    s.threads = threads > 0 ? (unsigned)threads : 1;
    if (lofp_scheme_validate(&s) != LOFP_OK)
        return cli_error("quantize", "invalid option combination for %s (block %u, scale rule %s, profile %s)", scheme_name, s.block, lofp_scale_rule_name(s.scale_rule), lofp_profile_name(s.profile));
    lofp_layout layout;
    if (lofp_layout_from_name(layout_name, &layout) != LOFP_OK) return cli_error("quantize", "unknown scale layout '%s'", layout_name);
    if (pad_byte == 0xFF || pad_byte < -1 || pad_byte > 255) return cli_error("quantize", "--pad-byte must be 0..254");
    const char *in = pos[0], *outp = pos[1];
    size_t ol = strlen(outp);
    if (ol < 12 || strcmp(outp + ol - 12, ".safetensors") != 0) return cli_error("quantize", "output must be a .safetensors file: %s", outp);

    lofp_io_error err;
    lofp_file *f = NULL;
    if (lofp_file_open(in, LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) return cli_error("quantize", "%s", err.message);
    size_t nt = lofp_file_count(f);
    out_tensor *outs = calloc(3 * nt + 1, sizeof *outs);
    lofp_metadata_entry *meta = calloc(nt + lofp_file_metadata_count(f) + 2, sizeof *meta);
    char **meta_owned = calloc(2 * nt + 2, sizeof *meta_owned);
    size_t no = 0, nm = 0, nmo = 0;
    int rc = 0, tty = isatty(2);
    double t0 = cli_now();
    for (size_t i = 0; i < lofp_file_metadata_count(f); i++) meta[nm++] = *lofp_file_metadata(f, i);
    for (size_t ti = 0; ti < nt && !rc; ti++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, ti);
        if (!qt_is_float(t->dtype) || t->ndim == 0 || t->ndim > QT_MAX_DIMS ||
            !selected(t->name, inc, ninc, exc, nexc)) {
            out_tensor *o = &outs[no++];
            o->d.name = t->name; o->d.dtype = t->dtype; o->d.ndim = t->ndim; o->d.shape = t->shape;
            o->d.data = t->data; o->d.nbytes = t->nbytes;
            continue;
        }
        if (tty) fprintf(stderr, "\rlofp quantize: %zu/%zu %s ...", ti + 1, nt, t->name);
        qtensor q;
        memset(&q, 0, sizeof q);
        snprintf(q.name, sizeof q.name, "%s", t->name);
        q.s = s;
        q.layout = layout;
        q.ndim = t->ndim;
        memcpy(q.shape, t->shape, t->ndim * sizeof(size_t));
        q.k = t->shape[t->ndim - 1];
        q.rows = t->numel / (q.k ? q.k : 1);
        q.src_dtype = t->dtype;
        q.kp = lofp_padded_k(&s, q.k);
        if (q.k == 0 || q.rows == 0) { rc = cli_error("quantize", "%s: tensor '%s' is empty", in, t->name); break; }
        if (!q.kp) { rc = cli_error("quantize", "%s: tensor '%s': last dimension %zu is not a multiple of the block %u (use --pad)", in, t->name, q.k, s.block); break; }
        float *x = qt_tensor_to_f32(t);
        size_t cb = lofp_codes_bytes(&s, q.rows, q.k), sb = lofp_scales_bytes(&s, q.rows, q.k);
        size_t lb = lofp_layout_required_bytes(q.rows, q.kp, s.block, layout);
        uint8_t *codes = malloc(cb ? cb : 1), *lin = malloc(sb ? sb : 1), *lay = malloc(lb ? lb : 1);
        float *glob = malloc(sizeof(float));
        if (!x || !codes || !lin || !lay || !glob) { rc = cli_error("quantize", "out of memory on tensor '%s'", t->name); free(x); free(codes); free(lin); free(lay); free(glob); break; }
        lofp_quant_report rep;
        lofp_status st = LOFP_ERR_NOMEM;
        if (s.profile != LOFP_PROFILE_LOFP && t->dtype == LOFP_IO_BF16) {
            /* a producer may compute in bf16 (compressed-tensors' global scale): give it the bf16 */
            uint16_t *h = malloc(t->nbytes ? t->nbytes : 1);
            if (h) { memcpy(h, t->data, t->nbytes); st = lofp_quantize(&s, LOFP_DTYPE_BF16, h, q.rows, q.k, codes, lin, glob, &rep); }
            free(h);
        } else {
            st = lofp_quantize(&s, LOFP_DTYPE_F32, x, q.rows, q.k, codes, lin, glob, &rep);
        }
        free(x);
        if (st == LOFP_ERR_NONFINITE) {
            rc = cli_error("quantize", "%s: tensor '%s': non-finite value at flat index %zu (use --propagate-nonfinite for MX/UltraQuant)", in, t->name, rep.first_bad_index);
        } else if (st != LOFP_OK) {
            rc = cli_error("quantize", "%s: tensor '%s': %s", in, t->name, lofp_status_name(st));
        } else if (lofp_layout_from_linear(lin, q.rows, q.kp / s.block, layout, (int)pad_byte, lay) != LOFP_OK) {
            rc = cli_error("quantize", "tensor '%s': cannot write layout %s", t->name, layout_name);
        }
        if (!rc && rep.nonfinite_blocks)
            fprintf(stderr, "lofp quantize: tensor '%s': %zu block(s) held non-finite values (propagated)\n", t->name, rep.nonfinite_blocks);
        free(lin);
        if (rc) { free(codes); free(lay); free(glob); break; }
        q.pad_byte = pad_byte >= 0 ? (int)pad_byte : (layout == LOFP_LAYOUT_PACKED_U32 ? 127 : 0);
        /* T.codes */
        out_tensor *o = &outs[no++];
        size_t nl = strlen(t->name) + 16;
        o->name = malloc(nl); snprintf(o->name, nl, "%s.codes", t->name);
        memcpy(o->shape, t->shape, t->ndim * sizeof(size_t));
        o->shape[t->ndim - 1] = s.elem == LOFP_ELEM_E2M1 ? q.kp / 2 : q.kp;
        o->d.name = o->name; o->d.dtype = codes_dtype(&s); o->d.ndim = t->ndim; o->d.shape = o->shape;
        o->d.data = codes; o->d.nbytes = cb; o->owned = codes;
        /* T.scales */
        o = &outs[no++];
        o->name = malloc(nl); snprintf(o->name, nl, "%s.scales", t->name);
        o->d.dtype = scales_dtype(&s, layout);
        if (layout == LOFP_LAYOUT_LINEAR) {
            memcpy(o->shape, t->shape, t->ndim * sizeof(size_t));
            o->shape[t->ndim - 1] = q.kp / s.block;
            o->d.ndim = t->ndim;
        } else if (o->d.dtype == LOFP_IO_U32) {
            size_t ma = layout == LOFP_LAYOUT_PACKED_U32 ? q.rows : (q.rows + 3) / 4 * 4;
            o->shape[0] = lb / 4 / ma; o->shape[1] = ma; o->d.ndim = 2;
        } else {
            o->shape[0] = lb; o->d.ndim = 1;
        }
        o->d.name = o->name; o->d.shape = o->shape; o->d.data = lay; o->d.nbytes = lb; o->owned = lay;
        if (s.id == LOFP_SCHEME_NVFP4 && s.two_level) {
            o = &outs[no++];
            o->name = malloc(nl + 8); snprintf(o->name, nl + 8, "%s.global_scale", t->name);
            o->d.name = o->name; o->d.dtype = LOFP_IO_F32; o->d.ndim = 0; o->d.shape = o->shape;
            o->d.data = glob; o->d.nbytes = 4; o->owned = glob;
        } else {
            free(glob);
        }
        char *key = malloc(strlen(t->name) + 8), *val = malloc(1024);
        sprintf(key, "lofp:%s", t->name);
        q.global = 1.0f;
        if (!qt_meta_format(&q, val, 1024)) { rc = cli_error("quantize", "tensor '%s': metadata too long", t->name); free(key); free(val); break; }
        meta_owned[nmo++] = key; meta_owned[nmo++] = val;
        meta[nm].key = key; meta[nm].value = val; nm++;
    }
    if (tty) fprintf(stderr, "\r\033[K");
    if (!rc) {
        lofp_tensor_desc *descs = calloc(no + 1, sizeof *descs);
        for (size_t i = 0; i < no; i++) descs[i] = outs[i].d;
        if (lofp_file_write(outp, LOFP_FORMAT_SAFETENSORS, descs, no, meta, nm, &err) != LOFP_OK)
            rc = cli_error("quantize", "%s", err.message);
        free(descs);
        if (!rc && tty) fprintf(stderr, "lofp quantize: wrote %s in %.2f s\n", outp, cli_now() - t0);
    }
    for (size_t i = 0; i < no; i++) { free(outs[i].owned); free(outs[i].name); }
    for (size_t i = 0; i < nmo; i++) free(meta_owned[i]);
    free(outs); free(meta); free(meta_owned);
    lofp_file_close(f);
    return rc;
}

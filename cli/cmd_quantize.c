/* cmd_quantize.c -- `lofp quantize --scheme S IN OUT.safetensors`: every floating tensor of IN
 * (selected by --include/--exclude) becomes T.codes, T.scales and (two-level NVFP4)
 * T.global_scale plus a "lofp:T" metadata entry; other tensors are copied through.
 *
 * Streaming (docs/CLI.md): the output's tensors are all known from the input's header, so the
 * writer puts the header down first; then each input tensor is read in chunks of rows straight
 * from the file (F32/BF16/F16 handed to the library as they are) and its codes and scales are
 * appended as they are produced. Memory: a few chunks, plus the linear scales of one tensor when
 * the scale layout is not linear (they are re-laid out once the tensor is done). */
#include <fnmatch.h>
#include <math.h>
#include <float.h>
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
        "metadata that `lofp dequantize` reads. Other tensors are copied unchanged (and named on\n"
        "stderr when they were selected but cannot be quantized). OUT must not be IN.\n\n"
        "  --scheme S           nvfp4 mxfp4 mxfp6-e2m3 mxfp6-e3m2 mxfp8-e4m3 mxfp8-e5m2 mxint8\n"
        "                       tilelang-mxfp8 ultraquant\n"
        "  --rounding R         rne (default) ties-to-zero ties-away stochastic\n"
        "  --scale-rule R       MX: floor (default) ceil even rceil\n"
        "  --block N            MX granularity, a multiple of 32, at most K rounded up to 32\n"
        "  --one-level          NVFP4 without the per-tensor scale\n"
        "  --no-rotate          UltraQuant without the Hadamard rotation (V)\n"
        "  --dense-hadamard     UltraQuant: the reference's dense matmul instead of the butterfly\n"
        "  --c X                UltraQuant constant (default 0.156)\n"
        "  --scale-layout L     linear (default) swizzle-128x4 packed-u32 packed-u32:deepgemm\n"
        "  --pad-byte B         pad byte of packed-u32 layouts (default 127 / 0 for deepgemm)\n"
        "  --pad                zero-pad K to a whole block instead of failing\n"
        "  --propagate-nonfinite  MX: NaN/Inf blocks get scale 0xFF; UltraQuant: zero groups\n"
        "  --profile P          whose numerics, bit for bit: lofp (default) modelopt\n"
        "                       compressed-tensors torchao ggml (docs/CHECKPOINTS.md); a\n"
        "                       producer profile reads each tensor whole (no chunking)\n"
        "  --seed N             random bits for stochastic rounding\n"
        "  --include GLOB       quantize only matching tensor names (repeatable; each must match)\n"
        "  --exclude GLOB       never quantize matching names (repeatable)\n"
        "  --threads N          worker threads (results do not depend on it)\n"
        "  --chunk-mib N        input read per step (default 4)\n");
}

static int matches(const char *name, char **pats, int n)
{
    for (int i = 0; i < n; i++)
        if (fnmatch(pats[i], name, 0) == 0) return 1;
    return 0;
}

static lofp_dtype lib_dtype(lofp_io_dtype dt)
{
    return dt == LOFP_IO_BF16 ? LOFP_DTYPE_BF16 : dt == LOFP_IO_F16 ? LOFP_DTYPE_F16 : LOFP_DTYPE_F32;
}

/* One input tensor's fate. */
typedef struct {
    const lofp_tensor_info *t;
    int quantize;
    qtensor q;
    size_t d_codes, d_scales, d_global, d_copy;   /* indices into the output tensor list */
    size_t codes_shape[QT_MAX_DIMS], scales_shape[QT_MAX_DIMS];
    char *n_codes, *n_scales, *n_global, *key, *val;
} plan;

static char *cat(const char *a, const char *b)
{
    size_t x = strlen(a), y = strlen(b);
    char *p = malloc(x + y + 1);
    if (p) { memcpy(p, a, x); memcpy(p + x, b, y + 1); }
    return p;
}

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

typedef struct {
    const char *in;
    const lofp_scheme *s;
    lofp_layout layout;
    int pad_byte;
    size_t chunk_bytes;
    lofp_writer *w;
    lofp_file *f;
} ctx;

/* The first non-finite value of n elements of dtype dt (flat index), or SIZE_MAX. */
static size_t first_nonfinite(lofp_io_dtype dt, const void *x, size_t n)
{
    const unsigned char *p = x;
    for (size_t i = 0; i < n; i++) {
        float v;
        if (dt == LOFP_IO_F32) memcpy(&v, p + 4 * i, 4);
        else { uint16_t h; memcpy(&h, p + 2 * i, 2); v = dt == LOFP_IO_BF16 ? lofp_bf16_to_fp32(h) : lofp_fp16_to_fp32(h); }
        if (!isfinite(v)) return i;
    }
    return SIZE_MAX;
}

static double value_at(lofp_io_dtype dt, const void *x, size_t i)
{
    const unsigned char *p = x;
    float v;
    if (dt == LOFP_IO_F64) { double d; memcpy(&d, p + 8 * i, 8); return d; }
    if (dt == LOFP_IO_F32) memcpy(&v, p + 4 * i, 4);
    else { uint16_t h; memcpy(&h, p + 2 * i, 2); v = dt == LOFP_IO_BF16 ? lofp_bf16_to_fp32(h) : lofp_fp16_to_fp32(h); }
    return v;
}

static int quantize_one(ctx *c, plan *p)
{
    const lofp_tensor_info *t = p->t;
    const qtensor *q = &p->q;
    const lofp_scheme *s = c->s;
    const size_t k = q->k, rows = q->rows, kp = q->kp, nb = kp / s->block;
    const size_t crb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;   /* code bytes per row */
    const size_t in_row = k * (lofp_io_dtype_bits(t->dtype) / 8);
    /* a producer profile is defined on whole tensors (and may compute in the input's bf16) */
    const int whole = s->profile != LOFP_PROFILE_LOFP;
    size_t chunk_rows = whole ? rows : c->chunk_bytes / (in_row ? in_row : 1);
    if (chunk_rows < 1) chunk_rows = 1;
    if (chunk_rows > rows) chunk_rows = rows;
    lofp_io_error err;
    lofp_row_reader *r = NULL;
    int rc = 0;
    uint8_t *codes = malloc(chunk_rows * crb), *lin = NULL, *all_scales = NULL;
    float *conv = NULL;
    const int linear = c->layout == LOFP_LAYOUT_LINEAR;
    if (linear) lin = malloc(chunk_rows * nb);
    else lin = all_scales = malloc(rows * nb);
    const int need_conv = t->dtype == LOFP_IO_F64 || (whole && t->dtype == LOFP_IO_F16);
    if (need_conv) conv = malloc(chunk_rows * k * sizeof(float));
    if (!codes || !lin || (need_conv && !conv)) { rc = cli_error("quantize", "out of memory on tensor '%s'", t->name); goto out; }
    if (lofp_row_reader_open(c->f, t, chunk_rows, &r, &err) != LOFP_OK) { rc = cli_error("quantize", "%s", err.message); goto out; }
    lofp_dtype dt = lib_dtype(t->dtype);
    lofp_row_chunk ch;
    size_t bad;

    /* two-level NVFP4: the tensor's multiplier first (the minimum over chunks is exact) */
    float global = 1.0f;
    if (s->id == LOFP_SCHEME_NVFP4 && s->two_level && !whole) {
        global = INFINITY;
        while (lofp_row_reader_next(r, &ch, &err) == LOFP_OK && ch.rows) {
            const void *x = ch.data;
            if (t->dtype == LOFP_IO_F64) {
                if (f64_to_f32(ch.data, ch.rows * k, conv, &bad)) goto range;
                x = conv;
            }
            float g = lofp_nvfp4_global_scale(dt, x, ch.rows * k);
            if (isnan(g)) {
                size_t i = first_nonfinite(conv ? LOFP_IO_F32 : t->dtype, x, ch.rows * k);
                rc = cli_error("quantize", "%s: tensor '%s': non-finite value at flat index %zu", c->in, t->name, ch.row0 * k + i);
                goto out;
            }
            if (g < global) global = g;
        }
        lofp_row_reader_rewind(r);
    }
    size_t nonfinite_blocks = 0;
    while (lofp_row_reader_next(r, &ch, &err) == LOFP_OK && ch.rows) {
        const void *x = ch.data;
        if (t->dtype == LOFP_IO_F64) {
            if (f64_to_f32(ch.data, ch.rows * k, conv, &bad)) goto range;
            x = conv;
        }
        lofp_quant_report rep;
        uint8_t *sc = linear ? lin : all_scales + ch.row0 * nb;
        lofp_status st;
        if (whole) {
            lofp_dtype d2 = dt;
            if (t->dtype == LOFP_IO_F16) {
                for (size_t i = 0; i < ch.rows * k; i++) {
                    uint16_t h;
                    memcpy(&h, (const uint8_t *)ch.data + 2 * i, 2);
                    conv[i] = lofp_fp16_to_fp32(h);
                }
                x = conv;
                d2 = LOFP_DTYPE_F32;
            } else if (t->dtype == LOFP_IO_F64) {
                d2 = LOFP_DTYPE_F32;
            }
            st = lofp_quantize(s, d2, x, ch.rows, k, codes, sc, &global, &rep);
        } else {
            st = lofp_quantize_rows(s, dt, x, ch.row0, ch.rows, k, global, codes, sc, &rep);
        }
        if (st == LOFP_ERR_NONFINITE) {
            size_t i = rep.first_bad_index;
            double v = value_at(t->dtype, ch.data, i - ch.row0 * k);
            if (isfinite(v))
                rc = cli_error("quantize", "%s: tensor '%s': the Hadamard rotation of row %zu overflows fp32 "
                               "(finite input up to |x| = %g, at flat index %zu); such rows cannot be "
                               "quantized (--propagate-nonfinite writes them as zero groups)",
                               c->in, t->name, i / k, fabs(v), i);
            else
                rc = cli_error("quantize", "%s: tensor '%s': non-finite value at flat index %zu (use --propagate-nonfinite for MX/UltraQuant)",
                               c->in, t->name, i);
            goto out;
        }
        if (st != LOFP_OK) { rc = cli_error("quantize", "%s: tensor '%s': %s", c->in, t->name, lofp_status_name(st)); goto out; }
        nonfinite_blocks += rep.nonfinite_blocks;
        if (lofp_writer_append(c->w, p->d_codes, codes, ch.rows * crb, &err) != LOFP_OK ||
            (linear && lofp_writer_append(c->w, p->d_scales, lin, ch.rows * nb, &err) != LOFP_OK)) {
            rc = cli_error("quantize", "%s", err.message);
            goto out;
        }
    }
    if (!linear) {
        size_t lb = lofp_layout_required_bytes(rows, kp, s->block, c->layout);
        uint8_t *lay = malloc(lb ? lb : 1);
        if (!lay) { rc = cli_error("quantize", "out of memory on tensor '%s'", t->name); goto out; }
        if (lofp_layout_from_linear(all_scales, rows, nb, c->layout, c->pad_byte, lay) != LOFP_OK)
            rc = cli_error("quantize", "tensor '%s': cannot write layout %s", t->name, lofp_layout_name(c->layout));
        else if (lofp_writer_append(c->w, p->d_scales, lay, lb, &err) != LOFP_OK)
            rc = cli_error("quantize", "%s", err.message);
        free(lay);
        if (rc) goto out;
    }
    if (s->id == LOFP_SCHEME_NVFP4 && s->two_level &&
        lofp_writer_append(c->w, p->d_global, &global, 4, &err) != LOFP_OK) {
        rc = cli_error("quantize", "%s", err.message);
        goto out;
    }
    if (nonfinite_blocks)
        fprintf(stderr, "lofp quantize: tensor '%s': %zu block(s) held non-finite values (propagated)\n", t->name, nonfinite_blocks);
    goto out;
range:
    rc = cli_error("quantize", "%s: tensor '%s': F64 value %g at flat index %zu is outside the fp32 range", c->in, t->name,
                   value_at(LOFP_IO_F64, ch.data, bad), ch.row0 * k + bad);
out:
    lofp_row_reader_close(r);
    free(codes);
    free(lin == all_scales ? NULL : lin);
    free(all_scales);
    free(conv);
    return rc;
}


int lofp_cmd_quantize(int argc, char **argv)
{
    const char *scheme_name = NULL, *rounding = NULL, *rule = NULL, *layout_name = "linear", *profile = NULL;
    long block = 0, threads = 1, pad_byte = -1, chunk_mib = 4;
    int one_level = 0, no_rotate = 0, pad = 0, propagate = 0, dense = 0, have_c = 0, have_seed = 0;
    double c = 0.156;
    uint64_t seed = 0;
    int argn = argc > 0 ? argc : 1;
    char **inc = calloc((size_t)argn, sizeof *inc), **exc = calloc((size_t)argn, sizeof *exc);
    int ninc = 0, nexc = 0;
    const char *pos[2];
    int npos = 0, rc = 0;
    if (!inc || !exc) { free(inc); free(exc); return cli_error("quantize", "out of memory"); }
#define OPTFAIL(x) do { if (x) { rc = 1; goto done_args; } } while (0)
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) { quantize_usage(stdout); goto done_args; }
        else if (!strcmp(a, "--scheme") && more) scheme_name = argv[++i];
        else if (!strcmp(a, "--rounding") && more) rounding = argv[++i];
        else if (!strcmp(a, "--scale-rule") && more) rule = argv[++i];
        else if (!strcmp(a, "--block") && more) OPTFAIL(cli_parse_long("quantize", "--block", argv[++i], 1, 1L << 30, &block));
        else if (!strcmp(a, "--one-level")) one_level = 1;
        else if (!strcmp(a, "--no-rotate")) no_rotate = 1;
        else if (!strcmp(a, "--dense-hadamard")) dense = 1;
        else if (!strcmp(a, "--c") && more) { OPTFAIL(cli_parse_float("quantize", "--c", argv[++i], 1, &c)); have_c = 1; }
        else if (!strcmp(a, "--scale-layout") && more) layout_name = argv[++i];
        else if (!strcmp(a, "--pad-byte") && more) OPTFAIL(cli_parse_long("quantize", "--pad-byte", argv[++i], 0, 254, &pad_byte));
        else if (!strcmp(a, "--pad")) pad = 1;
        else if (!strcmp(a, "--propagate-nonfinite")) propagate = 1;
        else if (!strcmp(a, "--profile") && more) profile = argv[++i];
        else if (!strcmp(a, "--seed") && more) { OPTFAIL(cli_parse_u64("quantize", "--seed", argv[++i], 0, UINT64_MAX, &seed)); have_seed = 1; }
        else if (!strcmp(a, "--include") && more) inc[ninc++] = argv[++i];
        else if (!strcmp(a, "--exclude") && more) exc[nexc++] = argv[++i];
        else if (!strcmp(a, "--threads") && more) OPTFAIL(cli_parse_long("quantize", "--threads", argv[++i], 1, 256, &threads));
        else if (!strcmp(a, "--chunk-mib") && more) OPTFAIL(cli_parse_long("quantize", "--chunk-mib", argv[++i], 1, 4096, &chunk_mib));
        else if (a[0] == '-' && a[1]) { quantize_usage(stderr); rc = cli_error("quantize", "unknown or incomplete option '%s'", a); goto done_args; }
        else if (npos < 2) pos[npos++] = a;
        else { rc = cli_error("quantize", "too many arguments ('%s')", a); goto done_args; }
    }
#undef OPTFAIL
    if (!scheme_name || npos != 2) { quantize_usage(stderr); rc = cli_error("quantize", "need --scheme, IN and OUT"); goto done_args; }
    lofp_scheme s;
    if (lofp_scheme_preset(scheme_name, &s) != LOFP_OK) { rc = cli_error("quantize", "unknown scheme '%s'", scheme_name); goto done_args; }
    if (rounding && lofp_rounding_from_name(rounding, &s.rounding) != LOFP_OK) { rc = cli_error("quantize", "unknown rounding '%s'", rounding); goto done_args; }
    if (rule && lofp_scale_rule_from_name(rule, &s.scale_rule) != LOFP_OK) { rc = cli_error("quantize", "unknown scale rule '%s'", rule); goto done_args; }
    if (profile && lofp_profile_from_name(profile, &s.profile) != LOFP_OK) { rc = cli_error("quantize", "unknown profile '%s'", profile); goto done_args; }
    if (block) s.block = (uint32_t)block;
    if (one_level) s.two_level = 0;
    if (no_rotate) s.rotate = 0;
    if (dense) s.hadamard = LOFP_HADAMARD_DENSE;
    if (have_c) {
        s.c = (float)c;
        if (!(isfinite(s.c) && s.c > 0)) { rc = cli_error("quantize", "--c: %g is outside the fp32 range", c); goto done_args; }
    }
    if (have_seed) s.seed = seed;
    s.pad = pad;
    s.propagate_nonfinite = propagate;
    s.threads = (unsigned)threads;
    if (lofp_scheme_validate(&s) != LOFP_OK) {
        rc = cli_error("quantize", "invalid option combination for %s (block %u, scale rule %s, profile %s)", scheme_name, s.block, lofp_scale_rule_name(s.scale_rule), lofp_profile_name(s.profile));
        goto done_args;
    }
    lofp_layout layout;
    if (lofp_layout_from_name(layout_name, &layout) != LOFP_OK) { rc = cli_error("quantize", "unknown scale layout '%s'", layout_name); goto done_args; }
    const char *in = pos[0], *outp = pos[1];
    size_t ol = strlen(outp);
    if (ol < 12 || strcmp(outp + ol - 12, ".safetensors") != 0) { rc = cli_error("quantize", "output must be a .safetensors file: %s", outp); goto done_args; }
    if (cli_refuse_same("quantize", outp, &in, 1)) { rc = 1; goto done_args; }

    lofp_io_error err;
    lofp_file *f = NULL;
    if (lofp_file_open(in, LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) { rc = cli_error("quantize", "%s", err.message); goto done_args; }
    size_t nt = lofp_file_count(f), nmeta_in = lofp_file_metadata_count(f);
    plan *pl = calloc(nt ? nt : 1, sizeof *pl);
    lofp_tensor_desc *descs = calloc(3 * nt + 1, sizeof *descs);
    lofp_metadata_entry *meta = calloc(nt + nmeta_in + 1, sizeof *meta);
    size_t nd = 0, nm = 0;
    int tty = isatty(2);
    double t0 = cli_now();
    lofp_writer *w = NULL;
    if (!pl || !descs || !meta) { rc = cli_error("quantize", "out of memory"); goto done; }
    for (size_t i = 0; i < nmeta_in; i++) meta[nm++] = *lofp_file_metadata(f, i);

    /* the plan: every output tensor and metadata entry, before anything is written */
    const int pad_default = layout == LOFP_LAYOUT_PACKED_U32 ? 127 : 0;
    for (size_t ti = 0; ti < nt && !rc; ti++) {
        plan *p = &pl[ti];
        const lofp_tensor_info *t = lofp_file_tensor(f, ti);
        p->t = t;
        int excluded = matches(t->name, exc, nexc);
        int included = matches(t->name, inc, ninc);
        int wanted = !excluded && (ninc == 0 || included);
        const char *why = NULL;
        if (wanted) {
            if (!qt_is_float(t->dtype)) why = "is not floating point";
            else if (t->ndim == 0) why = "is a scalar";
            else if (t->ndim > QT_MAX_DIMS) why = "has more than 64 dimensions";
        }
        if (!wanted || why) {
            if (why) {
                fprintf(stderr, "lofp quantize: tensor '%s' (%s, %zu dims) %s: copied unchanged\n", t->name,
                        lofp_io_dtype_name(t->dtype), t->ndim, why);
            }
            p->d_copy = nd;
            descs[nd++] = (lofp_tensor_desc){t->name, t->dtype, t->ndim, t->shape, NULL, t->nbytes};
            continue;
        }
        qtensor *q = &p->q;
        q->name = t->name;
        q->s = s;
        q->layout = layout;
        q->ndim = t->ndim;
        memcpy(q->shape, t->shape, t->ndim * sizeof(size_t));
        q->k = t->shape[t->ndim - 1];
        q->rows = q->k ? t->numel / q->k : 0;
        q->src_dtype = t->dtype;
        q->pad_byte = pad_byte >= 0 ? (int)pad_byte : pad_default;
        if (q->k == 0 || q->rows == 0) { rc = cli_error("quantize", "%s: tensor '%s' is empty", in, t->name); break; }
        if (pad && s.block > (q->k + 31) / 32 * 32) {
            rc = cli_error("quantize", "%s: tensor '%s': block %u is longer than its rows (K = %zu); padding would store %u codes per row",
                           in, t->name, s.block, q->k, s.block);
            break;
        }
        q->kp = lofp_padded_k(&s, q->k);
        if (!q->kp) { rc = cli_error("quantize", "%s: tensor '%s': last dimension %zu is not a multiple of the block %u (use --pad)", in, t->name, q->k, s.block); break; }
        if (s.id == LOFP_SCHEME_ULTRAQUANT && s.rotate && (q->kp & (q->kp - 1))) {
            rc = cli_error("quantize", "%s: tensor '%s': UltraQuant's Hadamard rotation needs K to be a power of two, not %zu (--no-rotate quantizes without it)",
                           in, t->name, q->kp);
            break;
        }
        size_t cb = lofp_codes_bytes(&s, q->rows, q->k), lb = lofp_layout_required_bytes(q->rows, q->kp, s.block, layout);
        if (!cb || !lb || q->rows > SIZE_MAX / q->kp) { rc = cli_error("quantize", "%s: tensor '%s': too large", in, t->name); break; }
        p->quantize = 1;
        p->n_codes = cat(t->name, ".codes");
        p->n_scales = cat(t->name, ".scales");
        p->key = cat("lofp:", t->name);
        p->val = qt_meta_format(q);
        if (!p->n_codes || !p->n_scales || !p->key || !p->val) { rc = cli_error("quantize", "out of memory"); break; }
        p->d_codes = nd;
        descs[nd++] = (lofp_tensor_desc){p->n_codes, qt_codes_dtype(&s), qt_codes_shape(q, p->codes_shape), p->codes_shape, NULL, cb};
        p->d_scales = nd;
        descs[nd++] = (lofp_tensor_desc){p->n_scales, qt_scales_dtype(&s, layout), qt_scales_shape(q, layout, p->scales_shape), p->scales_shape, NULL, lb};
        if (s.id == LOFP_SCHEME_NVFP4 && s.two_level) {
            p->n_global = cat(t->name, ".global_scale");
            if (!p->n_global) { rc = cli_error("quantize", "out of memory"); break; }
            p->d_global = nd;
            descs[nd++] = (lofp_tensor_desc){p->n_global, LOFP_IO_F32, 0, p->codes_shape, NULL, 4};
        }
        meta[nm].key = p->key;
        meta[nm].value = p->val;
        nm++;
    }
    for (int i = 0; i < ninc && !rc; i++) {
        int any = 0;
        for (size_t ti = 0; ti < nt && !any; ti++) any = fnmatch(inc[i], lofp_file_tensor(f, ti)->name, 0) == 0;
        if (!any) rc = cli_error("quantize", "--include '%s' matches no tensor of %s", inc[i], in);
    }
    if (rc) goto done;
    if (cli_writer_open(outp, LOFP_FORMAT_SAFETENSORS, descs, nd, meta, nm, &w, &err) != LOFP_OK) {
        rc = cli_error("quantize", "%s", err.message);
        goto done;
    }
    ctx cx = {in, &s, layout, (int)(pad_byte >= 0 ? pad_byte : pad_default), (size_t)chunk_mib << 20, w, f};
    for (size_t ti = 0; ti < nt && !rc; ti++) {
        if (tty) fprintf(stderr, "\rlofp quantize: %zu/%zu %s ...", ti + 1, nt, pl[ti].t->name);
        rc = pl[ti].quantize ? quantize_one(&cx, &pl[ti]) : cli_copy_tensor("quantize", f, pl[ti].t, w, pl[ti].d_copy, cx.chunk_bytes);
    }
    if (tty) fprintf(stderr, "\r\033[K");
    if (rc) {
        cli_writer_abort(w);
    } else if (cli_writer_finish(w, &err) != LOFP_OK) {
        rc = cli_error("quantize", "%s", err.message);
    } else if (tty) {
        fprintf(stderr, "lofp quantize: wrote %s in %.2f s\n", outp, cli_now() - t0);
    }
done:
    for (size_t i = 0; pl && i < nt; i++) {
        free(pl[i].n_codes); free(pl[i].n_scales); free(pl[i].n_global); free(pl[i].key); free(pl[i].val);
    }
    free(pl); free(descs); free(meta);
    lofp_file_close(f);
done_args:
    free(inc); free(exc);
    return rc;
}

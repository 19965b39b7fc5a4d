/* cmd_quantize.c -- `lofp quantize --scheme S IN OUT.safetensors`: argument parsing and printing
 * over the library's streaming pipeline, lofp_qfile_quantize (include/lofp/qfile.h): every
 * floating tensor of IN (selected by --include/--exclude) becomes T.codes, T.scales and
 * (two-level NVFP4) T.global_scale plus a "lofp:T" metadata entry; other tensors are copied
 * through. Memory is bounded by the chunk (docs/CLI.md "Streaming"); the output is written
 * through the command's tracked writer, so a signal removes the temporary file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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
        "  --method M           rtn (default) | mse (per-block scale search) | gptq (needs\n"
        "                       --calibration); docs/QUALITY.md\n"
        "  --calibration F      statistics named by IN's tensor names (lofp calibrate, or\n"
        "                       llama.cpp's imatrix.gguf for mse); --imatrix F is the same\n"
        "  --damp X             gptq damping (default 0.01)\n"
        "  --act-order          gptq: columns by descending diag H\n"
        "  --mse-scales         gptq: block scales by the weighted MSE search\n"
        "  --threads N          worker threads (results do not depend on it)\n"
        "  --chunk-mib N        input read per step (default 4)\n");
}

static void print_note(void *ctx, const char *line)
{
    fprintf(stderr, "lofp quantize: %s\n", line);
}

static void print_progress(void *ctx, const char *tensor, size_t i, size_t n)
{
    fprintf(stderr, "\rlofp quantize: %zu/%zu %s ...", i + 1, n, tensor);
}

int lofp_cmd_quantize(int argc, char **argv)
{
    const char *scheme_name = NULL, *rounding = NULL, *rule = NULL, *layout_name = "linear", *profile = NULL;
    long block = 0, threads = 1, pad_byte = -1, chunk_mib = 4;
    int one_level = 0, no_rotate = 0, pad = 0, propagate = 0, dense = 0, have_c = 0, have_seed = 0;
    double c = 0.156, damp = 0;
    const char *method_name = "rtn", *calibration = NULL;
    int act_order = 0, mse_scales = 0;
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
        else if (!strcmp(a, "--method") && more) method_name = argv[++i];
        else if ((!strcmp(a, "--calibration") || !strcmp(a, "--imatrix")) && more) {
            if (calibration) { rc = cli_error("quantize", "give one statistics file (--calibration or --imatrix)"); goto done_args; }
            calibration = argv[++i];
        }
        else if (!strcmp(a, "--damp") && more) OPTFAIL(cli_parse_float("quantize", "--damp", argv[++i], 1, &damp));
        else if (!strcmp(a, "--act-order")) act_order = 1;
        else if (!strcmp(a, "--mse-scales")) mse_scales = 1;
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
    /* the output's extension and that it is not IN are the pipeline's checks */
    const char *in = pos[0], *outp = pos[1];

    lofp_qfile_quantize_options o;
    lofp_qfile_quantize_options_init(&o);
    o.scheme = s;
    o.layout = layout;
    o.pad_byte = (int)pad_byte;
    o.include = (const char *const *)inc;
    o.n_include = (size_t)ninc;
    o.exclude = (const char *const *)exc;
    o.n_exclude = (size_t)nexc;
    o.chunk_bytes = (size_t)chunk_mib << 20;
    if (lofp_method_from_name(method_name, &o.method) != LOFP_OK) {
        rc = cli_error("quantize", "unknown method '%s' (rtn, mse, gptq)", method_name);
        goto done_args;
    }
    o.calibration = calibration;
    o.damp = damp;
    o.act_order = act_order;
    o.mse_scales = mse_scales;
    o.write_flags = cli_write_flags();
    o.writer = cli_writer_ops();
    o.note = print_note;
    int tty = isatty(2);
    if (tty) o.progress = print_progress;
    double t0 = cli_now();
    lofp_io_error err;
    lofp_status st = lofp_qfile_quantize(in, outp, &o, &err);
    if (tty) fprintf(stderr, "\r\033[K");
    if (st != LOFP_OK) rc = cli_error("quantize", "%s", err.message);
    else if (tty) fprintf(stderr, "lofp quantize: wrote %s in %.2f s\n", outp, cli_now() - t0);
done_args:
    free(inc); free(exc);
    return rc;
}

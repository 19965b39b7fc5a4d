/* cmd_import.c -- `lofp import [--dtype bf16|f16|f32] IN OUT`: any checkpoint lofp reads back to a
 * dense safetensors model directory (lofp_ckpt_import, include/lofp/checkpoint.h). */
#include <stdlib.h>
#include <string.h>

#include "ckpt_progress.h"
#include "cli.h"
#include "lofp/checkpoint.h"

static void import_usage(FILE *f)
{
    fprintf(f,
            "usage: lofp import [--dtype bf16|f16|f32] [--quiet] IN OUT\n\n"
            "IN: a ModelOpt (NVFP4, W4A16_NVFP4, MXFP8), compressed-tensors (nvfp4/mxfp4-pack-quantized)\n"
            "or gpt-oss MXFP4 model directory or file, a GGUF file (MXFP4/NVFP4 and the types lofp\n"
            "decodes), or a file of `lofp quantize`. OUT: a new directory of dense safetensors (shards\n"
            "keep their names, the index is rewritten, config.json loses quantization_config, other\n"
            "files are copied). Every per-tensor scale is read in its format's direction and checked:\n"
            "a missing or inverted one is an error naming the file and tensor, and nothing is written.\n");
}

/* an option that takes a value, given last: say so rather than "unknown option" */
static int needs_value(const char *a)
{
    static const char *const v[] = { "--dtype" };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        if (!strcmp(a, v[k])) return 1;
    return 0;
}

int lofp_cmd_import(int argc, char **argv)
{
    lofp_ckpt_options o;
    lofp_ckpt_options_init(&o);
    const char *in = NULL, *out = NULL;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 == argc && needs_value(a)) { return cli_error("import", "%s needs a value", a); }
        if (cli_is_help(a)) { import_usage(stdout); return 0; }
        if (!strcmp(a, "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "bf16")) o.import_dtype = LOFP_DTYPE_BF16;
            else if (!strcmp(d, "f16")) o.import_dtype = LOFP_DTYPE_F16;
            else if (!strcmp(d, "f32")) o.import_dtype = LOFP_DTYPE_F32;
            else return cli_error("import", "--dtype must be bf16, f16 or f32, got '%s'", d);
        } else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (a[0] == '-' && a[1]) { import_usage(stderr); return cli_error("import", "unknown option '%s'", a); }
        else if (!in) in = a;
        else if (!out) out = a;
        else return cli_error("import", "too many arguments");
    }
    if (!in || !out) { import_usage(stderr); return cli_error("import", "need IN and OUT"); }
    return cli_ckpt_run("import", lofp_ckpt_import, in, out, &o, quiet);
}

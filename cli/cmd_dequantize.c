/* cmd_dequantize.c -- `lofp dequantize Q.safetensors OUT.(npy|safetensors)`: argument parsing
 * over the library's streaming pipeline, lofp_qfile_dequantize (include/lofp/qfile.h). The
 * metadata of `lofp quantize` says everything, so no flags are needed beyond the output dtype;
 * every quantized tensor is checked against its metadata before anything is written, then decoded
 * in chunks of rows (memory: a few chunks, plus one tensor's linear scales when they are stored in
 * another layout). The output goes through the command's tracked writer (signals remove it). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void dequantize_usage(FILE *f)
{
    fprintf(f, "usage: lofp dequantize [--dtype f32|bf16|f16] [--threads N] Q.safetensors OUT.(npy|safetensors)\n\n"
               "Dequantizes every tensor `lofp quantize` wrote (scheme, layout and shape come from the\n"
               "file's metadata) to its logical shape; other tensors are copied unchanged. A .npy\n"
               "output needs exactly one tensor. --dtype selects the output type (default f32;\n"
               "bf16/f16 round to nearest even). UltraQuant tensors stay in the rotated basis.\n"
               "OUT must not be Q.\n");
}

int lofp_cmd_dequantize(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0;
    long threads = 1, chunk_mib = 2;
    lofp_dtype odt = LOFP_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { dequantize_usage(stdout); return 0; }
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "f32") || !strcmp(d, "fp32")) odt = LOFP_DTYPE_F32;
            else if (!strcmp(d, "bf16")) odt = LOFP_DTYPE_BF16;
            else if (!strcmp(d, "f16") || !strcmp(d, "fp16")) odt = LOFP_DTYPE_F16;
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
    lofp_qfile_dequantize_options o;
    lofp_qfile_dequantize_options_init(&o);
    o.dtype = odt;
    o.threads = (unsigned)threads;
    o.chunk_bytes = (size_t)chunk_mib << 20;
    o.write_flags = cli_write_flags();
    o.writer = cli_writer_ops();
    lofp_io_error err;
    if (lofp_qfile_dequantize(pos[0], pos[1], &o, &err) != LOFP_OK) return cli_error("dequantize", "%s", err.message);
    return 0;
}

/* main.c -- the lofp command: subcommand dispatch, --help, --version. */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const lofp_cli_cmd commands[] = {
    { "demo", "quantize a built-in transformer-like layer under every preset and print a table", lofp_cmd_demo },
    { "quantize", "quantize the floating tensors of a .npy/.safetensors file", lofp_cmd_quantize },
    { "dequantize", "dequantize a file written by `lofp quantize`", lofp_cmd_dequantize },
    { "convert", "convert a model directory / GGUF to ModelOpt, compressed-tensors, gpt-oss or GGUF", lofp_cmd_convert },
    { "import", "any checkpoint lofp reads back to a dense safetensors model directory", lofp_cmd_import },
    { "inspect", "what a file holds; error statistics against an original", lofp_cmd_inspect },
    { "layout", "convert scale layouts; diagnose which layout a scale buffer uses", lofp_cmd_layout },
    { "verify", "check a GEMM result against the fp64 reference; name the layout mistake", lofp_cmd_verify },
    { "verify-checkpoint", "which producer, scale direction, layout and nibble order reproduce a checkpoint from its original", lofp_cmd_verify_checkpoint },
    { "attention", "decode attention over an UltraQuant (or fp32/bf16) paged KV cache built from .npy files", lofp_cmd_attention },
    { "eval", "what each format does to a real model: perplexity, KL, top-1, cosine (Python package)", lofp_cmd_eval },
    { "vectors", "write the conformance suite: bit-exact vectors for every codec, scheme, profile and layout", lofp_cmd_vectors },
    { "calibrate", "per-layer input statistics (X^T X) over calibration text, for GPTQ and imatrix methods (Python package)", lofp_cmd_calibrate },
    { "bench", "benchmarks: quantize/dequantize, GEMV/GEMM, attention, against measured bandwidth", lofp_cmd_bench },
};
#define NCMD (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: lofp <command> [options]\n\n"
               "Block-scaled low-precision numbers: NVFP4, OCP MX (MXFP4/6/8, MXINT8), UltraQuant.\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCMD; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'lofp <command> --help' describes a command. 'lofp --version' prints the version.\n");
}

const char *lofp_cli_argv0;

int main(int argc, char **argv)
{
    lofp_cli_argv0 = argv[0];
    if (argc < 2) { usage(stderr); return 2; }
    if (cli_is_help(argv[1])) { usage(stdout); return 0; }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("lofp %s\n", lofp_version());
        return 0;
    }
    for (size_t i = 0; i < NCMD; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        for (int a = 2; a < argc; a++)
            if (strcmp(argv[a], "--version") == 0) { printf("lofp %s\n", lofp_version()); return 0; }
        return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "lofp: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

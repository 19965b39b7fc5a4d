/* cmd_verify_checkpoint.c -- `lofp verify-checkpoint ORIGINAL QUANTIZED`: re-quantizes every
 * quantized tensor's original under each producer profile and says, per tensor, which producer,
 * scale direction, scale layout and nibble order reproduce the file bit for bit, or where and how
 * it differs (lofp_ckpt_verify, docs/CHECKPOINTS.md). */
#include <string.h>

#include "cli.h"
#include "lofp/checkpoint.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: lofp verify-checkpoint [--quiet] ORIGINAL QUANTIZED\n\n"
        "ORIGINAL is the dense model (directory or .safetensors, bf16/fp16/fp32) the checkpoint was\n"
        "made from; QUANTIZED any checkpoint lofp reads (ModelOpt, compressed-tensors, gpt-oss, GGUF,\n"
        "lofp files). Each quantized tensor is re-quantized from the original under every producer\n"
        "profile (lofp, modelopt, compressed-tensors, torchao, ggml) and compared byte for byte under\n"
        "each way of storing it: nibble order, linear or swizzled scales, direction of the per-tensor\n"
        "scale, rows shifted. One line per tensor; exit status 0 when every tensor is reproduced as the\n"
        "format stores it, 1 otherwise.\n");
}

int lofp_cmd_verify_checkpoint(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { usage(stdout); return 0; }
        if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (argv[i][0] == '-' && argv[i][1]) { usage(stderr); return cli_error("verify-checkpoint", "unknown option '%s'", argv[i]); }
        else if (npos < 2) pos[npos++] = argv[i];
        else return cli_error("verify-checkpoint", "too many arguments");
    }
    if (npos != 2) { usage(stderr); return cli_error("verify-checkpoint", "need ORIGINAL and QUANTIZED"); }
    /* The check is the library's (lofp_ckpt_verify, shared with lofp.verify_checkpoint); this
     * command only prints its report. */
    lofp_io_error err;
    lofp_ckpt_verify_report r;
    if (lofp_ckpt_verify(pos[0], pos[1], quiet, &r, &err) != LOFP_OK) return cli_error("verify-checkpoint", "%s", err.message);
    printf("%s: %s\n", pos[1], r.description);
    for (size_t i = 0; i < r.n_lines; i++) printf("  %s\n", r.lines[i]);
    printf("%zu quantized tensors: %zu reproduced bit for bit, %zu not\n", r.n_quantized, r.n_ok, r.n_bad);
    int rc = r.n_bad ? 1 : 0;
    lofp_ckpt_verify_report_release(&r);
    return rc;
}

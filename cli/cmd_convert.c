/* cmd_convert.c -- `lofp convert --to FORMAT [options] IN OUT`: a thin front end over
 * lofp_ckpt_convert (include/lofp/checkpoint.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_progress.h"
#include "cli.h"
#include "lofp/checkpoint.h"

static void convert_usage(FILE *f)
{
    fprintf(f,
            "usage: lofp convert --to FORMAT [options] IN OUT\n"
            "       lofp convert --to FORMAT [options] --shard I/N IN OUT     (one slice of the shards)\n"
            "       lofp convert --to FORMAT [options] --merge-index IN OUT   (after all slices)\n\n"
            "IN is a model directory (config.json, model.safetensors or shards + index, tokenizer\n"
            "files) or one .safetensors file; for --to gguf a .gguf file. OUT is a new directory\n"
            "(a .gguf file for --to gguf). docs/CHECKPOINTS.md describes each format.\n\n"
            "An already-quantized IN (modelopt, compressed-tensors, gpt-oss, lofp files) is cast exactly,\n"
            "never requantized: codes and block scales copied under the target's names, the NVFP4\n"
            "per-tensor scale converted to the target's convention, MXFP4 -> NVFP4 by the closed form;\n"
            "pairs with no exact path are refused (docs/CHECKPOINTS.md \"Exact casts\").\n\n"
            "  --to F              modelopt | compressed-tensors | gpt-oss | gguf | lofp (quantized IN only)\n"
            "  --scheme S          modelopt: nvfp4 (default), mxfp8; compressed-tensors: nvfp4 (default),\n"
            "                      mxfp4; gpt-oss: mxfp4; gguf: mxfp4 (default, type 39), nvfp4 (type 40)\n"
            "  --profile P         whose numerics quantize: lofp (default); modelopt with --to modelopt,\n"
            "                      compressed-tensors with --to compressed-tensors (nvfp4), ggml with --to\n"
            "                      gguf (llama.cpp's quantizer; nvfp4 one-level, no .scale)\n"
            "  --include GLOB      quantize matching tensors even when a default leaves them out (repeatable)\n"
            "  --exclude GLOB      never quantize matching tensors (repeatable; wins over --include)\n"
            "  --no-fuse-scales    NVFP4: one per-tensor scale per tensor instead of per fused group\n"
            "                      (q/k/v, gate/up, w1/w3 share one by default)\n"
            "  --pad               zero-pad K to a whole block instead of refusing the tensor\n"
            "  --input-scales F    NVFP4: JSON {\"module\": activation amax}; gives quant_algo NVFP4 with\n"
            "                      input scales (default: weight-only, W4A16_NVFP4 / NVFP4A16)\n"
            "  --method M          how codes and scales are chosen (docs/QUALITY.md): rtn (default, round\n"
            "                      to nearest), mse (per-block scale search, least squared error), gptq\n"
            "                      (GPTQ over each layer's input Hessian; needs --calibration)\n"
            "  --calibration F     statistics from lofp calibrate (X^T X per layer; gptq needs it, mse\n"
            "                      weighs errors by its diagonal); names as IN names its tensors\n"
            "  --imatrix F         mse: importance per input channel from llama.cpp's imatrix.gguf or\n"
            "                      lofp calibrate --diag (same as --calibration)\n"
            "  --damp X            gptq: damping relative to mean(diag H) (default 0.01)\n"
            "  --act-order         gptq: visit columns by descending diag H\n"
            "  --mse-scales        gptq: each block's scale by the MSE search (weighted by diag H)\n"
            "                      when the sweep fixes it, instead of the scale rule\n"
            "  --requantize-unfit  MXFP4 -> NVFP4: requantize the blocks that do not fit exactly (listed\n"
            "                      in the notes) instead of refusing the input\n"
            "  --jobs N            convert N shards at once (1..256)\n"
            "  --threads N         quantize threads per shard (1..256)\n"
            "  --shard I/N         convert only slice I (1..N) of the shard list, shard files only;\n"
            "                      N at most the number of shards (every slice holds one or more)\n"
            "  --merge-index       write config files, copied files and the index after the slices\n"
            "  --quiet             no progress or notes (warning: lines are still printed)\n");
}

static int parse_ckpt_common(const char *cmd, int argc, char **argv, int *i, lofp_ckpt_options *o, const char **inc,
                             size_t *ni, const char **exc, size_t *ne, int *quiet)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--include") && *i + 1 < argc) { inc[(*ni)++] = argv[++*i]; return 1; }
    if (!strcmp(a, "--exclude") && *i + 1 < argc) { exc[(*ne)++] = argv[++*i]; return 1; }
    uint64_t v;
    if (!strcmp(a, "--jobs") && *i + 1 < argc) {
        if (cli_parse_u64(cmd, "--jobs", argv[++*i], 1, LOFP_CKPT_MAX_JOBS, &v)) return -1;
        o->jobs = (unsigned)v;
        return 1;
    }
    if (!strcmp(a, "--threads") && *i + 1 < argc) {
        if (cli_parse_u64(cmd, "--threads", argv[++*i], 1, LOFP_CKPT_MAX_THREADS, &v)) return -1;
        o->threads = (unsigned)v;
        return 1;
    }
    if (!strcmp(a, "--quiet")) { *quiet = 1; return 1; }
    return 0;
}

/* --shard I/N: two decimal numbers and nothing else, 1 <= I <= N (the library checks N against the
 * shard count once the model is open). */
static int parse_shard(const char *s, unsigned *si, unsigned *sn)
{
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1]) goto bad;
    for (const char *p = s; *p; p++)
        if (p != slash && (*p < '0' || *p > '9')) goto bad;
    char first[32];
    if ((size_t)(slash - s) >= sizeof first) goto range;
    memcpy(first, s, (size_t)(slash - s));
    first[slash - s] = 0;
    uint64_t i, n;
    if (cli_parse_u64("convert", "--shard N", slash + 1, 1, UINT32_MAX, &n)) return 1;
    if (cli_parse_u64("convert", "--shard I", first, 1, n, &i)) return 1;
    *si = (unsigned)i;
    *sn = (unsigned)n;
    return 0;
bad:
    return cli_error("convert", "--shard wants I/N (two decimal numbers, 1 <= I <= N), got '%s'", s);
range:
    return cli_error("convert", "--shard %s: I is out of range", s);
}

/* an option that takes a value, given last: say so rather than "unknown option" */
static int needs_value(const char *a)
{
    static const char *const v[] = { "--to", "--scheme", "--include", "--exclude", "--jobs", "--threads", "--input-scales", "--shard",
                                     "--method", "--calibration", "--imatrix", "--damp" };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        if (!strcmp(a, v[k])) return 1;
    return 0;
}

int lofp_cmd_convert(int argc, char **argv)
{
    lofp_ckpt_options o;
    lofp_ckpt_options_init(&o);
    const char *in = NULL, *out = NULL, *to = NULL;
    const char **inc = calloc((size_t)argc, sizeof *inc), **exc = calloc((size_t)argc, sizeof *exc);
    size_t ni = 0, ne = 0;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 == argc && needs_value(a)) { free(inc); free(exc); return cli_error("convert", "%s needs a value", a); }
        if (cli_is_help(a)) { convert_usage(stdout); free(inc); free(exc); return 0; }
        int pc = parse_ckpt_common("convert", argc, argv, &i, &o, inc, &ni, exc, &ne, &quiet);
        if (pc < 0) { free(inc); free(exc); return 1; }
        if (pc) continue;
        if (!strcmp(a, "--to") && i + 1 < argc) to = argv[++i];
        else if (!strcmp(a, "--scheme") && i + 1 < argc) o.scheme = argv[++i];
        else if (!strcmp(a, "--profile") && i + 1 < argc) {
            if (lofp_profile_from_name(argv[++i], &o.profile) != LOFP_OK) {
                free(inc); free(exc);
                return cli_error("convert", "unknown profile '%s' (lofp, modelopt, compressed-tensors, ggml)", argv[i]);
            }
        }
        else if (!strcmp(a, "--no-fuse-scales")) o.no_fuse_scales = 1;
        else if (!strcmp(a, "--pad")) o.pad = 1;
        else if (!strcmp(a, "--input-scales") && i + 1 < argc) o.input_scales = argv[++i];
        else if (!strcmp(a, "--merge-index")) o.merge_index = 1;
        else if (!strcmp(a, "--requantize-unfit")) o.requantize_unfit = 1;
        else if (!strcmp(a, "--method") && i + 1 < argc) {
            if (lofp_method_from_name(argv[++i], &o.method) != LOFP_OK) {
                free(inc); free(exc);
                return cli_error("convert", "unknown method '%s' (rtn, mse, gptq)", argv[i]);
            }
        }
        else if ((!strcmp(a, "--calibration") || !strcmp(a, "--imatrix")) && i + 1 < argc) {
            if (o.calibration) { free(inc); free(exc); return cli_error("convert", "give one statistics file (--calibration or --imatrix)"); }
            o.calibration = argv[++i];
        }
        else if (!strcmp(a, "--damp") && i + 1 < argc) {
            if (cli_parse_float("convert", "--damp", argv[++i], 1, &o.damp)) { free(inc); free(exc); return 1; }
        }
        else if (!strcmp(a, "--act-order")) o.act_order = 1;
        else if (!strcmp(a, "--mse-scales")) o.mse_scales = 1;
        else if (!strcmp(a, "--shard") && i + 1 < argc) {
            unsigned si = 0, sn = 0;
            if (parse_shard(argv[++i], &si, &sn)) { free(inc); free(exc); return 1; }
            o.shard_index = si - 1;
            o.shard_count = sn;
        } else if (a[0] == '-' && a[1]) { convert_usage(stderr); free(inc); free(exc); return cli_error("convert", "unknown option '%s'", a); }
        else if (!in) in = a;
        else if (!out) out = a;
        else { free(inc); free(exc); return cli_error("convert", "too many arguments"); }
    }
    if (!to || !in || !out) { convert_usage(stderr); free(inc); free(exc); return cli_error("convert", "need --to FORMAT, IN and OUT"); }
    if (lofp_ckpt_format_from_name(to, &o.to) != LOFP_OK) {
        free(inc); free(exc);
        return cli_error("convert", "unknown format '%s' (modelopt, compressed-tensors, gpt-oss, gguf, lofp)", to);
    }
    o.include = inc;
    o.n_include = ni;
    o.exclude = exc;
    o.n_exclude = ne;
    int rc = cli_ckpt_run("convert", lofp_ckpt_convert, in, out, &o, quiet);
    free(inc);
    free(exc);
    return rc;
}

/* cmd_verify_checkpoint.c -- `lofp verify-checkpoint ORIGINAL QUANTIZED`: re-quantizes every
 * quantized tensor's original under each producer profile and says, per tensor, which producer,
 * scale direction, scale layout and nibble order reproduce the file bit for bit, or where and how
 * it differs (lofp_verify_tensor, docs/CHECKPOINTS.md). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lofp/cast.h"
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

static lofp_dtype dense_dtype(lofp_io_dtype d, int *ok)
{
    lofp_dtype t = LOFP_DTYPE_F32;
    *ok = lofp_io_dtype_to_lofp(d, &t) == LOFP_OK;
    return t;
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
    lofp_io_error err;
    lofp_ckpt *orig = NULL, *q = NULL;
    if (lofp_ckpt_open(pos[0], &orig, &err) != LOFP_OK) return cli_error("verify-checkpoint", "%s", err.message);
    if (lofp_ckpt_open(pos[1], &q, &err) != LOFP_OK) { lofp_ckpt_close(orig); return cli_error("verify-checkpoint", "%s", err.message); }
    printf("%s: %s\n", pos[1], lofp_ckpt_describe(q));
    size_t n_ok = 0, n_bad = 0, n_q = 0;
    for (size_t i = 0; i < lofp_ckpt_count(q); i++) {
        lofp_ckpt_tensor t;
        lofp_status st = lofp_ckpt_get(q, i, &t, &err);
        if (st != LOFP_OK) {
            /* the reader's own checks (missing scales, an inverted per-tensor scale) */
            printf("  FAIL %s\n", err.message);
            n_bad++;
            continue;
        }
        if (!t.quantized) { lofp_ckpt_tensor_release(&t); continue; }
        n_q++;
        /* the original tensor of the same name */
        lofp_ckpt_tensor o;
        int found = 0;
        for (size_t j = 0; j < lofp_ckpt_count(orig) && !found; j++) {
            if (lofp_ckpt_get(orig, j, &o, &err) != LOFP_OK) continue;
            if (!o.quantized && !strcmp(o.name, t.name)) found = 1;
            else lofp_ckpt_tensor_release(&o);
        }
        if (!found) {
            printf("  FAIL %s: no tensor of that name in %s\n", t.name, pos[0]);
            n_bad++;
            lofp_ckpt_tensor_release(&t);
            continue;
        }
        int ok;
        lofp_dtype dt = dense_dtype(o.dtype, &ok);
        size_t es = dt == LOFP_DTYPE_F32 ? 4 : 2, numel = t.rows * t.k;
        if (!ok || o.nbytes != numel * es || t.kp != t.k) {
            printf("  FAIL %s: original is %s with %zu bytes, the quantized tensor needs %zu values%s\n", t.name,
                   lofp_io_dtype_name(o.dtype), o.nbytes, numel, t.kp != t.k ? " (padded K is not checked)" : "");
            n_bad++;
            lofp_ckpt_tensor_release(&o);
            lofp_ckpt_tensor_release(&t);
            continue;
        }
        uint8_t *x = malloc(numel * es);
        if (!x) { lofp_ckpt_tensor_release(&o); lofp_ckpt_tensor_release(&t); break; }
        if (t.transposed && t.ndim == 3) {
            /* gpt-oss: the dense tensor is [E, K, N], the quantized one [E, N, K] */
            size_t E = t.shape[0], N = t.shape[1], K = t.shape[2];
            const uint8_t *src = o.data;
            for (size_t e = 0; e < E; e++)
                for (size_t a = 0; a < K; a++)
                    for (size_t b = 0; b < N; b++)
                        memcpy(x + ((e * N + b) * K + a) * es, src + ((e * K + a) * N + b) * es, es);
        } else {
            memcpy(x, o.data, numel * es);
        }
        const float *gp = t.direction == LOFP_CKPT_SCALE_NONE ? NULL : &t.stored_scale;
        lofp_verify_result v;
        st = lofp_verify_tensor(t.scheme.id, t.scheme.block, dt, x, t.rows, t.k, t.codes, t.scales, gp,
                                t.direction == LOFP_CKPT_SCALE_DECODE, &v);
        int clean = st == LOFP_OK && v.nibbles == LOFP_VERIFY_NIBBLES_STANDARD &&
                    v.scale_layout == LOFP_LAYOUT_LINEAR && !v.global_inverted && v.row_shift == 0;
        if (st != LOFP_OK && st != LOFP_ERR_MISMATCH)
            printf("  FAIL %s: %s\n", t.name, lofp_status_name(st));
        else if (!clean || !quiet)
            printf("  %s %s (%s): %s\n", clean ? "ok  " : "FAIL", t.name, lofp_scheme_name(t.scheme.id), v.summary);
        if (clean) n_ok++;
        else n_bad++;
        free(x);
        lofp_ckpt_tensor_release(&o);
        lofp_ckpt_tensor_release(&t);
    }
    printf("%zu quantized tensors: %zu reproduced bit for bit, %zu not\n", n_q, n_ok, n_bad);
    lofp_ckpt_close(q);
    lofp_ckpt_close(orig);
    return n_bad ? 1 : 0;
}

/* cmd_inspect.c -- `lofp inspect FILE [--against ORIGINAL]`: what a file holds, and per-tensor
 * error statistics of its quantized tensors against the original. */
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "cli.h"
#include "lofp/checkpoint.h"
#include "qtensor.h"

static void inspect_usage(FILE *f)
{
    fprintf(f, "usage: lofp inspect FILE.(npy|safetensors) [--against ORIGINAL.(npy|safetensors)]\n"
               "       lofp inspect MODEL_DIR|MODEL.gguf [--against DENSE_MODEL]\n\n"
               "Model directories and GGUF files (ModelOpt, compressed-tensors, gpt-oss, GGUF, lofp) print\n"
               "per tensor the scheme, bits per value and the per-tensor scale with its direction; with\n"
               "--against, error statistics against the dense model's tensor of the same name.\n\n"
               "Lists tensors (name, dtype, shape, bytes) and, for tensors written by lofp quantize,\n"
               "scheme, rounding, scale rule, block, scale layout and bits per value. With --against,\n"
               "dequantizes each and prints max abs error, RMSE, SNR (dB), relative Frobenius error\n"
               "and the histogram of scale exponents. UltraQuant tensors are compared after undoing\n"
               "the Hadamard rotation.\n");
}

static void shape_str(const size_t *shape, size_t ndim, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < ndim && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%zu", i ? ", " : "", shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* One line of error statistics, "vs NAME" first when name is given. */
static void print_stats(const char *name, const lofp_error_stats *e)
{
    printf("    ");
    if (name) printf("vs %-20s ", name);
    printf("max|err| %.6g  RMSE %.6g  SNR %.2f dB  rel.Frobenius %.6g\n", e->max_abs, e->rmse,
           e->snr_db, e->rel_frobenius);
}

/* The error of q against orig and the histogram of q's scale exponents (the library computes
 * both; this prints them). */
static void compare(const lofp_qtensor *q, const lofp_tensor_info *orig)
{
    lofp_error_stats e;
    lofp_status st = lofp_qtensor_error_stats(q, orig, &e);
    if (st == LOFP_ERR_SHAPE) {
        printf("    (cannot compare: original '%s' has %zu elements, quantized %zu)\n", orig->name, orig->numel, q->rows * q->k);
        return;
    }
    if (st == LOFP_ERR_INVALID_ARG) {
        printf("    (cannot compare: original '%s' is %s, not floating point)\n", orig->name,
               lofp_dtype_name(orig->dtype) ? lofp_dtype_name(orig->dtype) : "?");
        return;
    }
    if (st != LOFP_OK) { printf("    (dequantize failed: %s)\n", lofp_status_name(st)); return; }
    print_stats(orig->name, &e);
    size_t hist[LOFP_SCALE_EXP_BINS], none = 0;
    if (lofp_qtensor_scale_histogram(q, hist, &none) == LOFP_OK) {
        printf("    scale exponents (log2 scale: count):");
        for (int b = 0; b < LOFP_SCALE_EXP_BINS; b++) if (hist[b]) printf(" %d:%zu", b + LOFP_SCALE_EXP_MIN, hist[b]);
        if (none) printf(" zero/NaN:%zu", none);
        printf("\n");
    }
}

/* A checkpoint directory / GGUF / ModelOpt, compressed-tensors or gpt-oss file: per tensor the
 * scheme, bits per value, the per-tensor scale and its direction; with --against a dense model
 * (directory or file), error statistics of lofp_ckpt_dequantize against it. */
static int inspect_ckpt(lofp_ckpt *c, const char *path, const char *against)
{
    lofp_io_error err;
    lofp_ckpt *o = NULL;
    if (against && lofp_ckpt_open(against, &o, &err) != LOFP_OK) return cli_error("inspect", "%s", err.message);
    printf("%s: %s\n", path, lofp_ckpt_describe(c));
    int rc = 0;
    char sh[256];
    for (size_t i = 0; i < lofp_ckpt_count(c); i++) {
        lofp_ckpt_tensor t;
        if (lofp_ckpt_get(c, i, &t, &err) != LOFP_OK) { rc = cli_error("inspect", "%s", err.message); continue; }
        shape_str(t.shape, t.ndim, sh, sizeof sh);
        if (!t.quantized) {
            /* a GGUF type lofp decodes to F32 is named as stored (Q8_0, Q4_1, ...) */
            if (t.stored_type && strcmp(t.stored_type, lofp_dtype_name(t.dtype)))
                printf("  %-52s %-8s %s (decoded to %s)\n", t.name, t.stored_type, sh, lofp_dtype_name(t.dtype));
            else
                printf("  %-52s %-8s %s\n", t.name, t.stored_type ? t.stored_type : lofp_dtype_name(t.dtype), sh);
            lofp_ckpt_tensor_release(&t);
            continue;
        }
        size_t n = t.rows * t.k;
        int has_g = t.direction != LOFP_CKPT_SCALE_NONE;
        double bits = 8.0 * (double)(t.codes_bytes + t.scales_bytes + (has_g ? 4 : 0)) / (double)(n ? n : 1);
        printf("  %-52s %-10s %s, %.3f bits/value", t.name, lofp_scheme_name(t.scheme.id), sh, bits);
        if (has_g)
            printf(", per-tensor %.9g (%s; encode %.9g)", (double)t.stored_scale,
                   t.direction == LOFP_CKPT_SCALE_DECODE ? "decode" : "encode", (double)t.global_scale);
        if (t.kp != t.k) printf(", K padded %zu -> %zu", t.k, t.kp);
        if (t.gguf_split_nibbles) printf(", GGUF blocks");
        if (t.transposed) printf(", dense layout [E, K, N]");
        printf("\n");
        if (o) {
            /* by name: one lookup and one decode of the dense tensor per quantized tensor (a GGUF
             * original is decoded by lofp_ckpt_get, so scanning it would decode every tensor) */
            lofp_ckpt_tensor r;
            int found = 0;
            size_t j;
            if (lofp_ckpt_find(o, t.name, &j) == LOFP_OK && lofp_ckpt_get(o, j, &r, &err) == LOFP_OK) {
                if (!r.quantized) found = 1;
                else lofp_ckpt_tensor_release(&r);
            }
            float *x = found ? malloc(n * sizeof *x) : NULL, *y = found ? malloc(n * sizeof *y) : NULL;
            size_t rn = 1;
            if (found) for (size_t d = 0; d < r.ndim; d++) rn *= r.shape[d];
            if (!found) printf("    (no dense '%s' in %s)\n", t.name, against);
            else if (rn != n || !x || !y) printf("    (cannot compare: %zu vs %zu elements)\n", rn, n);
            else if (lofp_ckpt_dequantize(&t, LOFP_DTYPE_F32, y, &err) || lofp_ckpt_dequantize(&r, LOFP_DTYPE_F32, x, &err))
                printf("    (%s)\n", err.message);
            else {
                lofp_error_stats e;
                lofp_error_stats_compute(x, y, n, &e);
                print_stats(NULL, &e);
            }
            if (found) lofp_ckpt_tensor_release(&r);
            free(x);
            free(y);
        }
        lofp_ckpt_tensor_release(&t);
    }
    lofp_ckpt_close(o);
    return rc;
}

int lofp_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL, *against = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { inspect_usage(stdout); return 0; }
        if (!strcmp(argv[i], "--against") && i + 1 < argc) against = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) { inspect_usage(stderr); return cli_error("inspect", "unknown option '%s'", argv[i]); }
        else if (!path) path = argv[i];
        else return cli_error("inspect", "too many arguments");
    }
    if (!path) { inspect_usage(stderr); return cli_error("inspect", "need a FILE"); }
    lofp_io_error err;
    {
        struct stat sb;
        int is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
        lofp_ckpt *c = NULL;
        lofp_status cs = lofp_ckpt_open(path, &c, &err);
        if ((is_dir || lofp_ckpt_is_gguf(path)) && cs) return cli_error("inspect", "%s", err.message);
        if (!cs) {
            lofp_ckpt_format f = lofp_ckpt_format_of(c);
            if (is_dir || (f != LOFP_CKPT_LOFP && f != LOFP_CKPT_DENSE)) {
                int rc = inspect_ckpt(c, path, against);
                lofp_ckpt_close(c);
                return rc;
            }
            lofp_ckpt_close(c);
        }
    }
    lofp_file *f = NULL, *o = NULL;
    if (lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) return cli_error("inspect", "%s", err.message);
    if (against && lofp_file_open(against, LOFP_FORMAT_AUTO, &o, &err) != LOFP_OK) { lofp_file_close(f); return cli_error("inspect", "%s", err.message); }
    printf("%s: %s, %zu tensor(s)\n", path, lofp_file_format_of(f) == LOFP_FORMAT_NPY ? "npy" : "safetensors", lofp_file_count(f));
    char sh[1400];
    for (size_t i = 0; i < lofp_file_count(f); i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        shape_str(t->shape, t->ndim, sh, sizeof sh);
        printf("  %-40s %-8s %-14s %zu bytes\n", t->name, lofp_dtype_name(t->dtype), sh, t->nbytes);
    }
    size_t nq = 0;
    int oom = 0;
    const char **qn = qt_list(f, &nq, &oom);
    int rc = oom ? cli_error("inspect", "out of memory") : 0;
    if (nq) printf("quantized tensors:\n");
    for (size_t i = 0; i < nq; i++) {
        lofp_qtensor q;
        lofp_io_error qerr;
        if (lofp_qtensor_load(f, path, qn[i], &q, &qerr) != LOFP_OK) { rc = cli_error("inspect", "%s", qerr.message); continue; }
        size_t n = q.rows * q.k;
        double bits = 8.0 * (double)(q.codes_bytes + q.scales_bytes + (q.global != 1.0f || q.scheme.two_level ? 4 : 0)) / (double)n;
        shape_str(q.shape, q.ndim, sh, sizeof sh);
        int mx_rule = q.scheme.scale_rule <= LOFP_SCALE_RCEIL;
        printf("  %s %s: %s, rounding %s, scale %s%s%s per %u, layout %s, %.3f bits/value", q.name, sh,
               lofp_scheme_name(q.scheme.id), q.scheme.id == LOFP_SCHEME_ULTRAQUANT ? "vllm (ties to -inf)" : lofp_rounding_name(q.scheme.rounding),
               lofp_elem_info_get(q.scheme.scale_elem)->name, mx_rule ? " " : "", mx_rule ? lofp_scale_rule_name(q.scheme.scale_rule) : "",
               q.scheme.block, lofp_layout_name(q.layout), bits);
        if (q.scheme.id == LOFP_SCHEME_NVFP4 && q.scheme.two_level) printf(", global %.9g (decode %.9g)", (double)q.global, (double)lofp_nvfp4_decode_from_encode(q.global));
        if (q.scheme.id == LOFP_SCHEME_ULTRAQUANT) printf(", c %.4g, rotate %d", (double)q.scheme.c, q.scheme.rotate);
        if (q.kp != q.k) printf(", K padded %zu -> %zu", q.k, q.kp);
        printf("\n");
        if (o) {
            const lofp_tensor_info *t = lofp_file_find(o, q.name);
            if (!t && lofp_file_count(o) == 1) t = lofp_file_tensor(o, 0);
            if (!t) printf("    (no tensor '%s' in %s)\n", q.name, against);
            else compare(&q, t);
        }
    }
    free(qn);
    lofp_file_close(f);
    lofp_file_close(o);
    return rc;
}

/* cmd_inspect.c -- `lofp inspect FILE [--against ORIGINAL]`: what a file holds, and per-tensor
 * error statistics of its quantized tensors against the original. */
#include <math.h>
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

/* log2 of each scale; INT_MIN for UltraQuant zero groups and NaN scales. */
static int scale_exp(const lofp_qtensor *q, uint8_t b)
{
    if (q->scheme.scale_elem == LOFP_ELEM_UE4M3) {
        float v = lofp_decode(LOFP_ELEM_UE4M3, b);
        return v > 0 && isfinite(v) ? (int)floor(log2((double)v)) : -1000;
    }
    if (b == 0xFF || (q->scheme.id == LOFP_SCHEME_ULTRAQUANT && b == 0)) return -1000;
    return (int)b - 127;
}

static void compare(const lofp_qtensor *q, const lofp_tensor_info *orig)
{
    size_t n = q->rows * q->k;
    float *x = qt_tensor_to_f32(orig), *y = malloc(n * sizeof(float));
    if (!x || !y || orig->numel != n) {
        printf("    (cannot compare: original '%s' has %zu elements, quantized %zu)\n", orig->name, orig->numel, n);
        free(x); free(y);
        return;
    }
    if (lofp_qtensor_dequantize(q, y) != LOFP_OK) { printf("    (dequantize failed)\n"); free(x); free(y); return; }
    if (q->scheme.id == LOFP_SCHEME_ULTRAQUANT && q->scheme.rotate)
        for (size_t r = 0; r < q->rows; r++) lofp_hadamard_inplace(y + r * q->k, q->k, NULL);
    double se = 0, sx = 0, maxe = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)y[i] - (double)x[i];
        se += e * e;
        sx += (double)x[i] * x[i];
        if (fabs(e) > maxe || isnan(e)) maxe = isnan(e) ? NAN : fmax(maxe, fabs(e));
    }
    printf("    vs %-20s max|err| %.6g  RMSE %.6g  SNR %.2f dB  rel.Frobenius %.6g\n", orig->name, maxe,
           sqrt(se / (double)n), se > 0 ? 10 * log10(sx / se) : INFINITY, sx > 0 ? sqrt(se / sx) : 0.0);
    size_t nb = q->rows * (q->kp / q->scheme.block);
    uint8_t *lin = malloc(nb);
    if (lin && lofp_qtensor_linear_scales(q, lin) == LOFP_OK) {
        size_t hist[300] = { 0 }, zero = 0;
        for (size_t i = 0; i < nb; i++) {
            int e = scale_exp(q, lin[i]);
            if (e <= -1000) zero++;
            else hist[e + 150]++;
        }
        printf("    scale exponents (log2 scale: count):");
        for (int e = 0; e < 300; e++) if (hist[e]) printf(" %d:%zu", e - 150, hist[e]);
        if (zero) printf(" zero/NaN:%zu", zero);
        printf("\n");
    }
    free(lin); free(x); free(y);
}

/* Whether the file starts with the GGUF magic: its parse error is then the one to report (the
 * safetensors reader's "bad header" says nothing about a GGUF). */
static int is_gguf(const char *path)
{
    struct stat sb;
    /* regular files only: opening a FIFO to peek at its magic would block (the readers refuse it) */
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char m[4] = { 0 };
    size_t n = fread(m, 1, 4, f);
    fclose(f);
    return n == 4 && memcmp(m, "GGUF", 4) == 0;
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
                double se = 0, sx = 0, maxe = 0;
                for (size_t k = 0; k < n; k++) {
                    double e = (double)y[k] - (double)x[k];
                    se += e * e;
                    sx += (double)x[k] * x[k];
                    if (fabs(e) > maxe) maxe = fabs(e);
                }
                printf("    max|err| %.6g  RMSE %.6g  SNR %.2f dB  rel.Frobenius %.6g\n", maxe, sqrt(se / (double)n),
                       se > 0 ? 10 * log10(sx / se) : INFINITY, sx > 0 ? sqrt(se / sx) : 0.0);
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
        if ((is_dir || is_gguf(path)) && cs) return cli_error("inspect", "%s", err.message);
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

/* cmd_verify.c -- `lofp verify A.safetensors B.safetensors C`: checks a GEMM result C[M,N]
 * produced by any program against the fp64 reference deq(A)·deq(B)^T on the same quantized
 * operands, and when the error is large, names the layout mistake that explains it (seed 000's
 * verify_nvfp4_gemm as a tool; SPEC §4). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qtensor.h"

static void verify_usage(FILE *f)
{
    fprintf(f,
        "usage: lofp verify A.safetensors B.safetensors C.(npy|safetensors) [--a NAME] [--b NAME]\n"
        "                   [--c NAME] [--tol X]\n\n"
        "A [M,K] and B [N,K] are quantized files written by lofp quantize (any scheme pair); C [M,N]\n"
        "is a GEMM result C = A·B^T from any program (f32, f16, bf16 or f64). Prints the relative\n"
        "Frobenius error of C against the fp64 reference on the same quantized operands. When it\n"
        "exceeds --tol (default 1e-2), tries the usual mistakes — scales read in another layout,\n"
        "packed words byte-reversed or row-major, MX scales written at 32 and read at 128, FP4\n"
        "nibbles in the other order, a per-tensor scale applied in the wrong direction or not at\n"
        "all — and names the one that reproduces C. Exit status: 0 within tolerance, 1 otherwise.\n");
}

typedef struct {
    const lofp_qtensor *q;
    size_t cols;      /* scale columns */
    uint8_t *lin;     /* correct linear scales */
} operand;

/* Dequantizes q with the given linear scales and codes into fp64 out [rows, k]; divides by
 * `global` (the consumer's view of the per-tensor scale). */
static int deq(const lofp_qtensor *q, const uint8_t *lin, const uint8_t *codes, float global, double *out)
{
    float *tmp = malloc(q->rows * q->k * sizeof(float));
    if (!tmp) return 0;
    int ok = lofp_dequantize(&q->scheme, codes, lin, global, q->rows, q->k, LOFP_DTYPE_F32, tmp) == LOFP_OK;
    for (size_t i = 0; ok && i < q->rows * q->k; i++) out[i] = tmp[i];
    free(tmp);
    return ok;
}

static void gemm64(const double *a, const double *b, size_t M, size_t N, size_t K, double *c)
{
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0;
            for (size_t k = 0; k < K; k++) s += a[m * K + k] * b[n * K + k];
            c[m * N + n] = s;
        }
}

static double rel_err(const double *ref, const double *c, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = c[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (isnan(num)) return INFINITY;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Linear scales as a consumer would read q's stored scale bytes if it assumed layout `as`
 * (with optional byte reversal / row-major words for packed layouts). Returns 0 if impossible. */
static int misread(const lofp_qtensor *q, lofp_layout as, int reversed, int rowmajor, size_t cols, uint8_t *out)
{
    size_t need = lofp_layout_required_bytes(q->rows, cols, 1, as);
    if (!need || need > q->scales_bytes) return 0;
    uint8_t *buf = malloc(need);
    memcpy(buf, q->scales, need);
    int packed = as == LOFP_LAYOUT_PACKED_U32 || as == LOFP_LAYOUT_PACKED_U32_DG;
    if (packed && reversed)
        for (size_t w = 0; w + 4 <= need; w += 4) {
            uint8_t t0 = buf[w], t1 = buf[w + 1];
            buf[w] = buf[w + 3]; buf[w + 1] = buf[w + 2]; buf[w + 2] = t1; buf[w + 3] = t0;
        }
    if (packed && rowmajor) {
        size_t ma = as == LOFP_LAYOUT_PACKED_U32 ? q->rows : (q->rows + 3) / 4 * 4, G = (cols + 3) / 4;
        uint8_t *t = malloc(need);
        /* the consumer reads word (g, m) at m*G + g: re-index into group-major for to_linear */
        for (size_t g = 0; g < G; g++)
            for (size_t m = 0; m < ma; m++) memcpy(t + 4 * (g * ma + m), buf + 4 * (m * G + g), 4);
        free(buf);
        buf = t;
    }
    int ok = lofp_layout_to_linear(buf, q->rows, cols, as, out) == LOFP_OK;
    free(buf);
    return ok;
}

int lofp_cmd_verify(int argc, char **argv)
{
    const char *pos[3], *an = NULL, *bn = NULL, *cn = NULL;
    int npos = 0;
    double tol = 1e-2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) { verify_usage(stdout); return 0; }
        else if (!strcmp(a, "--a") && more) an = argv[++i];
        else if (!strcmp(a, "--b") && more) bn = argv[++i];
        else if (!strcmp(a, "--c") && more) cn = argv[++i];
        else if (!strcmp(a, "--tol") && more) { if (cli_parse_float("verify", "--tol", argv[++i], 0, &tol)) return 1; if (tol < 0) return cli_error("verify", "--tol must not be negative"); }
        else if (a[0] == '-') { verify_usage(stderr); return cli_error("verify", "unknown option '%s'", a); }
        else if (npos < 3) pos[npos++] = a;
    }
    if (npos != 3) { verify_usage(stderr); return cli_error("verify", "need A, B and C"); }
    lofp_io_error err;
    lofp_file *fa = NULL, *fb = NULL, *fc = NULL;
    int rc = 1;
    lofp_qtensor qa, qb;
    lofp_io_error qerr;
    double *A = NULL, *B = NULL, *R = NULL, *C = NULL, *X = NULL, *Y = NULL, *T = NULL;
    float *cf = NULL;
    uint8_t *la = NULL, *lb = NULL, *tmp = NULL, *codes = NULL;
    if (lofp_file_open(pos[0], LOFP_FORMAT_AUTO, &fa, &err) || lofp_file_open(pos[1], LOFP_FORMAT_AUTO, &fb, &err) ||
        lofp_file_open(pos[2], LOFP_FORMAT_AUTO, &fc, &err)) { cli_error("verify", "%s", err.message); goto out; }
    size_t nn = 0;
    const char **names = NULL;
    if (!an) { names = qt_list(fa, &nn, NULL); an = nn ? names[0] : NULL; free(names); if (!an) { cli_error("verify", "%s: no quantized tensor", pos[0]); goto out; } }
    if (lofp_qtensor_load(fa, pos[0], an, &qa, &qerr)) { cli_error("verify", "%s", qerr.message); goto out; }
    if (!bn) { names = qt_list(fb, &nn, NULL); bn = nn ? names[0] : NULL; free(names); if (!bn) { cli_error("verify", "%s: no quantized tensor", pos[1]); goto out; } }
    if (lofp_qtensor_load(fb, pos[1], bn, &qb, &qerr)) { cli_error("verify", "%s", qerr.message); goto out; }
    const lofp_tensor_info *tc = cn ? lofp_file_find(fc, cn) : lofp_file_tensor(fc, 0);
    if (!tc) { cli_error("verify", "%s: no tensor '%s'", pos[2], cn ? cn : ""); goto out; }
    size_t M = qa.rows, N = qb.rows, K = qa.k;
    if (qb.k != K) { cli_error("verify", "A has K=%zu but B has K=%zu", K, qb.k); goto out; }
    if (tc->numel != M * N) { cli_error("verify", "%s: '%s' has %zu elements, expected M*N = %zu*%zu", pos[2], tc->name, tc->numel, M, N); goto out; }
    if (!(cf = qt_tensor_to_f32(tc))) { cli_error("verify", "%s: '%s' is not floating point", pos[2], tc->name); goto out; }
    A = malloc(M * K * 8); B = malloc(N * K * 8); R = malloc(M * N * 8); C = malloc(M * N * 8);
    X = malloc((M > N ? M : N) * K * 8); T = malloc(M * N * 8);
    size_t ca = qa.kp / qa.scheme.block, cb = qb.kp / qb.scheme.block;
    la = malloc(M * ca); lb = malloc(N * cb); tmp = malloc((M > N ? M : N) * (ca > cb ? ca : cb) * 4 + 16);
    codes = malloc((qa.codes_bytes > qb.codes_bytes ? qa.codes_bytes : qb.codes_bytes) + 16);
    if (!A || !B || !R || !C || !X || !T || !la || !lb || !tmp || !codes) { cli_error("verify", "out of memory"); goto out; }
    for (size_t i = 0; i < M * N; i++) C[i] = cf[i];
    if (lofp_qtensor_linear_scales(&qa, la) || lofp_qtensor_linear_scales(&qb, lb) || !deq(&qa, la, qa.codes, qa.global, A) || !deq(&qb, lb, qb.codes, qb.global, B)) {
        cli_error("verify", "cannot dequantize the operands"); goto out;
    }
    gemm64(A, B, M, N, K, R);
    double e = rel_err(R, C, M * N);
    printf("verify: C[%zu,%zu] = A·B^T, K=%zu; A %s (%s scales), B %s (%s scales)\n", M, N, K,
           lofp_scheme_name(qa.scheme.id), lofp_layout_name(qa.layout), lofp_scheme_name(qb.scheme.id), lofp_layout_name(qb.layout));
    printf("relative Frobenius error vs the fp64 reference: %.3e (tolerance %.1e)\n", e, tol);
    if (e <= tol) { printf("OK\n"); rc = 0; goto out; }
    printf("error is large; trying the usual mistakes:\n");
    double best = INFINITY;
    char best_desc[256] = "none";
    for (int side = 0; side < 2; side++) {
        const lofp_qtensor *q = side ? &qb : &qa;
        const uint8_t *lin = side ? lb : la;
        size_t cols = side ? cb : ca;
        const double *other = side ? A : B;
        char desc[256];
#define TRY(...) do { \
        if (side) gemm64(A, X, M, N, K, T); else gemm64(X, B, M, N, K, T); \
        double ee = rel_err(T, C, M * N); \
        snprintf(desc, sizeof desc, __VA_ARGS__); \
        printf("  %-72s -> %.3e\n", desc, ee); \
        if (ee < best) { best = ee; snprintf(best_desc, sizeof best_desc, "%s", desc); } } while (0)
        (void)other;
        for (int l = 0; l < LOFP_LAYOUT_COUNT_; l++)
            for (int rev = 0; rev < 2; rev++)
                for (int rm = 0; rm < 2; rm++) {
                    int packed = l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG;
                    if ((rev || rm) && !packed) continue;
                    if (l == (int)q->layout && !rev && !rm) continue;
                    if (!misread(q, (lofp_layout)l, rev, rm, cols, tmp)) continue;
                    if (!deq(q, tmp, q->codes, q->global, X)) continue;
                    TRY("%s scales (written %s) read as %s%s%s", side ? "B" : "A", lofp_layout_name(q->layout),
                        lofp_layout_name((lofp_layout)l), rev ? ", bytes reversed" : "", rm ? ", row-major words" : "");
                }
        if (q->scheme.scale_elem == LOFP_ELEM_E8M0 && q->scheme.block == 32 && qa.kp % 128 == 0) {
            /* produced at granularity 32, consumed at 128: the consumer takes the first
             * rows*K/128 scale bytes of the same layout as if each covered 128 elements */
            size_t c4 = cols / 4;
            if (misread(q, q->layout, 0, 0, cols, tmp)) {
                for (size_t r = 0; r < q->rows; r++)
                    for (size_t j = 0; j < cols; j++) tmp[q->rows * cols + r * cols + j] = 0;
                uint8_t *consumer = tmp + q->rows * cols;
                /* consumer's [rows, c4] scales are the first rows*c4 linear bytes, reshaped */
                for (size_t r = 0; r < q->rows; r++)
                    for (size_t j = 0; j < cols; j++) consumer[r * cols + j] = tmp[(r * c4 + j / 4) % (q->rows * cols)];
                if (deq(q, consumer, q->codes, q->global, X)) TRY("%s scales written at granularity 32, read at 128", side ? "B" : "A");
            }
        }
        if (q->scheme.elem == LOFP_ELEM_E2M1) {
            uint32_t blk = q->scheme.id == LOFP_SCHEME_NVFP4 ? 16 : 32;
            if (lofp_fp4_repack(q->codes, codes, q->rows, q->kp, blk, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD) == LOFP_OK &&
                deq(q, lin, codes, q->global, X))
                TRY("%s FP4 codes read in GGUF split nibble order", side ? "B" : "A");
            for (size_t i = 0; i < q->codes_bytes; i++) codes[i] = (uint8_t)((q->codes[i] >> 4) | (q->codes[i] << 4));
            if (deq(q, lin, codes, q->global, X)) TRY("%s FP4 nibbles swapped (element 2i in the high nibble)", side ? "B" : "A");
        }
        if (q->scheme.id == LOFP_SCHEME_NVFP4 && q->scheme.two_level) {
            if (deq(q, lin, q->codes, 1.0f, X)) TRY("%s per-tensor scale not applied", side ? "B" : "A");
            if (deq(q, lin, q->codes, 1.0f / q->global, X)) TRY("%s per-tensor scale applied in the wrong direction (x global instead of / global)", side ? "B" : "A");
        }
#undef TRY
    }
    if (best <= tol) printf("explained: %s (error %.3e)\n", best_desc, best);
    else printf("no single known mistake explains it (closest: %s, %.3e)\n", best_desc, best);
out:
    free(A); free(B); free(R); free(C); free(X); free(Y); free(T); free(cf); free(la); free(lb); free(tmp); free(codes);
    lofp_file_close(fa); lofp_file_close(fb); lofp_file_close(fc);
    return rc;
}

/* gemm_verify.c -- lofp_gemm_verify (lofp/gemm.h): checks a GEMM result from another program
 * against the fp64 product of the dequantized operands and, when it is off, names the layout or
 * encoding mistake that reproduces it. The command line's `lofp verify` and Python's
 * lofp.verify_gemm only parse arguments and print this report. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/gemm.h"
#include "runtime/threadpool.h"

void lofp_gemm_verify_options_init(lofp_gemm_verify_options *o)
{
    o->tol = 1e-2;
    o->threads = 1;
}

/* ---- fp64 product, split by rows so that the result does not depend on the thread count ---- */

typedef struct {
    const double *a, *b;
    double *c;
    size_t m, n, k, ntasks;
} gemm64_job;

static void gemm64_task(void *arg, size_t t)
{
    const gemm64_job *j = arg;
    size_t r0 = j->m * t / j->ntasks, r1 = j->m * (t + 1) / j->ntasks;
    for (size_t r = r0; r < r1; r++)
        for (size_t n = 0; n < j->n; n++) {
            double s = 0;
            for (size_t k = 0; k < j->k; k++) s += j->a[r * j->k + k] * j->b[n * j->k + k];
            j->c[r * j->n + n] = s;
        }
}

static void gemm64(const double *a, const double *b, size_t m, size_t n, size_t k, unsigned threads, double *c)
{
    size_t nt = lofp_parallel_threads(threads, m, m * n * k);
    gemm64_job j = {a, b, c, m, n, k, lofp_parallel_tasks(nt, m)};
    if (j.ntasks < 1) j.ntasks = 1;
    lofp_parallel_run_tasks(j.ntasks, nt, gemm64_task, &j);
}

/* Relative Frobenius error of c against ref; infinity when c (or ref) holds NaN, so that a NaN
 * result never passes. */
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

/* ---- one operand and the ways it can be misread ---- */

typedef struct {
    const lofp_gemm_operand *op;
    lofp_scheme s;      /* the caller's scheme with the requested thread count */
    size_t kp, cols;    /* padded K, scale columns */
    uint8_t *lin;       /* the correct linear scales [rows, cols] */
} side_t;

/* Dequantizes the operand with the given linear scales, codes and global into fp64 out [rows, k]
 * through fp32 (what lofp_dequantize gives, which is exact for every scheme). */
static int deq(const side_t *sd, const uint8_t *lin, const uint8_t *codes, float global, float *tmp, double *out)
{
    size_t n = sd->op->rows * sd->op->k;
    if (lofp_dequantize(&sd->s, codes, lin, global, sd->op->rows, sd->op->k, LOFP_DTYPE_F32, tmp) != LOFP_OK) return 0;
    for (size_t i = 0; i < n; i++) out[i] = tmp[i];
    return 1;
}

static int is_packed(lofp_layout l)
{
    return l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG;
}

/* The linear scales a consumer gets when it reads the stored scale bytes as layout `as`, packed
 * words optionally byte-reversed or indexed row-major (m * G + g instead of g * Ma + m). buf holds
 * scales_bytes scratch bytes, out rows * cols. Returns 0 when `as` cannot be read from the bytes
 * stored (too few, or refused by lofp_layout_to_linear). */
static int misread(const side_t *sd, lofp_layout as, int reversed, int rowmajor, uint8_t *buf, uint8_t *buf2,
                   uint8_t *out)
{
    const lofp_gemm_operand *q = sd->op;
    size_t need = lofp_layout_required_bytes(q->rows, sd->cols, 1, as);
    if (!need || need > q->scales_bytes) return 0;
    memcpy(buf, q->scales, need);
    if (is_packed(as) && reversed)
        for (size_t w = 0; w + 4 <= need; w += 4) {
            uint8_t t0 = buf[w], t1 = buf[w + 1];
            buf[w] = buf[w + 3]; buf[w + 1] = buf[w + 2]; buf[w + 2] = t1; buf[w + 3] = t0;
        }
    if (is_packed(as) && rowmajor) {
        size_t ma = as == LOFP_LAYOUT_PACKED_U32 ? q->rows : (q->rows + 3) / 4 * 4, G = (sd->cols + 3) / 4;
        /* the writer put word (m, g) at m * G + g; re-index it group-major for to_linear */
        for (size_t g = 0; g < G; g++)
            for (size_t m = 0; m < ma; m++) memcpy(buf2 + 4 * (g * ma + m), buf + 4 * (m * G + g), 4);
        memcpy(buf, buf2, need);
    }
    return lofp_layout_to_linear(buf, q->rows, sd->cols, as, out) == LOFP_OK;
}

/* ---- the report ---- */

typedef struct {
    const double *A, *B, *C;
    double *T;
    size_t m, n, k;
    unsigned threads;
    lofp_gemm_verify_report *r;
} ctx_t;

/* Records the error of C against the product with operand `side` replaced by X. */
static void attempt(ctx_t *x, int side, const double *X, const char *fmt, ...)
{
    lofp_gemm_verify_report *r = x->r;
    if (r->ncandidates >= LOFP_GEMM_VERIFY_MAX_CANDIDATES) return;
    gemm64(side ? x->A : X, side ? X : x->B, x->m, x->n, x->k, x->threads, x->T);
    lofp_gemm_verify_candidate *cd = &r->candidates[r->ncandidates];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cd->desc, sizeof cd->desc, fmt, ap);
    va_end(ap);
    cd->error = rel_err(x->T, x->C, x->m * x->n);
    /* the first smallest wins, so that the report does not depend on ties' order of discovery */
    if (r->closest < 0 || cd->error < r->candidates[r->closest].error) r->closest = (int)r->ncandidates;
    r->ncandidates++;
}

static lofp_status check_operand(const lofp_gemm_operand *q, unsigned threads, side_t *sd)
{
    if (!q || !q->scheme || !q->codes || !q->scales || !q->rows || !q->k) return LOFP_ERR_INVALID_ARG;
    if ((unsigned)q->layout >= LOFP_LAYOUT_COUNT_) return LOFP_ERR_INVALID_ARG;
    if (q->scheme->id == LOFP_SCHEME_NVFP4 && !(isfinite(q->global) && q->global > 0)) return LOFP_ERR_INVALID_ARG;
    sd->op = q;
    sd->s = *q->scheme;
    sd->s.threads = threads;
    sd->kp = lofp_padded_k(q->scheme, q->k);
    if (!sd->kp || !q->scheme->block) return LOFP_ERR_SHAPE;
    sd->cols = sd->kp / q->scheme->block;
    size_t need = lofp_layout_required_bytes(q->rows, sd->cols, 1, q->layout);
    if (!need) return LOFP_ERR_SIZE_OVERFLOW;
    if (q->scales_bytes < need) return LOFP_ERR_BUFFER_TOO_SMALL;
    if (q->rows > SIZE_MAX / sd->cols) return LOFP_ERR_SIZE_OVERFLOW;
    return LOFP_OK;
}

static void *alloc(size_t n, size_t size, int *fail)
{
    if (*fail || (size && n > SIZE_MAX / size)) { *fail = 1; return NULL; }
    void *p = malloc(n * size > 0 ? n * size : 1);
    if (!p) *fail = 1;
    return p;
}

lofp_status lofp_gemm_verify(const lofp_gemm_operand *a, const lofp_gemm_operand *b, const float *c,
                             const lofp_gemm_verify_options *opt, lofp_gemm_verify_report *report)
{
    if (!report) return LOFP_ERR_INVALID_ARG;
    memset(report, 0, sizeof *report);
    report->closest = -1;
    lofp_gemm_verify_options def;
    lofp_gemm_verify_options_init(&def);
    if (!opt) opt = &def;
    if (!c || !(opt->tol >= 0)) return LOFP_ERR_INVALID_ARG;
    side_t sd[2];
    lofp_status st = check_operand(a, opt->threads, &sd[0]);
    if (st == LOFP_OK) st = check_operand(b, opt->threads, &sd[1]);
    if (st == LOFP_OK && a->k != b->k) st = LOFP_ERR_SHAPE;
    if (st != LOFP_OK) { memset(report, 0, sizeof *report); report->closest = -1; return st; }
    size_t M = a->rows, N = b->rows, K = a->k, big = M > N ? M : N;
    if (M > SIZE_MAX / N || big > SIZE_MAX / K) return LOFP_ERR_SIZE_OVERFLOW;
    size_t sbytes = a->scales_bytes > b->scales_bytes ? a->scales_bytes : b->scales_bytes;
    size_t lbytes = M * sd[0].cols > N * sd[1].cols ? M * sd[0].cols : N * sd[1].cols;
    size_t cb0 = lofp_codes_bytes(&sd[0].s, M, K), cb1 = lofp_codes_bytes(&sd[1].s, N, K);
    if (!cb0 || !cb1) return LOFP_ERR_SIZE_OVERFLOW;
    int fail = 0;
    double *A = alloc(M * K, sizeof(double), &fail), *B = alloc(N * K, sizeof(double), &fail);
    double *C = alloc(M * N, sizeof(double), &fail), *R = alloc(M * N, sizeof(double), &fail);
    double *X = alloc(big * K, sizeof(double), &fail);
    float *ftmp = alloc(big * K, sizeof(float), &fail);
    uint8_t *buf = alloc(sbytes, 1, &fail), *buf2 = alloc(sbytes, 1, &fail);
    uint8_t *lin = alloc(lbytes, 2, &fail); /* a misread [rows, cols], then a consumer's copy */
    uint8_t *codes = alloc(cb0 > cb1 ? cb0 : cb1, 1, &fail);
    sd[0].lin = alloc(M * sd[0].cols, 1, &fail);
    sd[1].lin = alloc(N * sd[1].cols, 1, &fail);
    st = fail ? LOFP_ERR_NOMEM : LOFP_OK;
    for (int i = 0; st == LOFP_OK && i < 2; i++)
        st = lofp_layout_to_linear(sd[i].op->scales, sd[i].op->rows, sd[i].cols, sd[i].op->layout, sd[i].lin);
    if (st == LOFP_OK && (!deq(&sd[0], sd[0].lin, a->codes, a->global, ftmp, A) ||
                          !deq(&sd[1], sd[1].lin, b->codes, b->global, ftmp, B)))
        st = LOFP_ERR_INVALID_ARG;
    if (st != LOFP_OK) goto out;
    for (size_t i = 0; i < M * N; i++) C[i] = c[i];
    gemm64(A, B, M, N, K, opt->threads, R);
    report->error = rel_err(R, C, M * N);
    report->tol = opt->tol;
    report->ok = report->error <= opt->tol;
    if (report->ok) goto out;
    ctx_t x = {A, B, C, R, M, N, K, opt->threads, report};
    for (int side = 0; side < 2; side++) {
        const side_t *s = &sd[side];
        const lofp_gemm_operand *q = s->op;
        const char *who = side ? "B" : "A";
        for (int l = 0; l < LOFP_LAYOUT_COUNT_; l++)
            for (int rev = 0; rev < 2; rev++)
                for (int rm = 0; rm < 2; rm++) {
                    if ((rev || rm) && !is_packed((lofp_layout)l)) continue;
                    if (l == (int)q->layout && !rev && !rm) continue;
                    if (!misread(s, (lofp_layout)l, rev, rm, buf, buf2, lin)) continue;
                    if (!deq(s, lin, q->codes, q->global, ftmp, X)) continue;
                    attempt(&x, side, X, "%s scales (written %s) read as %s%s%s", who, lofp_layout_name(q->layout),
                            lofp_layout_name((lofp_layout)l), rev ? ", bytes reversed" : "", rm ? ", row-major words" : "");
                }
        if (q->scheme->scale_elem == LOFP_ELEM_E8M0 && q->scheme->block == 32 && s->kp % 128 == 0 &&
            misread(s, q->layout, 0, 0, buf, buf2, lin)) {
            /* produced at granularity 32, consumed at 128: the consumer takes the first
             * rows * cols / 4 scale bytes as if each covered 128 elements */
            size_t rc = q->rows * s->cols, c4 = s->cols / 4;
            uint8_t *consumer = lin + rc;
            for (size_t r = 0; r < q->rows; r++)
                for (size_t j = 0; j < s->cols; j++) consumer[r * s->cols + j] = lin[(r * c4 + j / 4) % rc];
            if (deq(s, consumer, q->codes, q->global, ftmp, X))
                attempt(&x, side, X, "%s scales written at granularity 32, read at 128", who);
        }
        if (q->scheme->elem == LOFP_ELEM_E2M1) {
            size_t nb = side ? cb1 : cb0;
            uint32_t blk = q->scheme->id == LOFP_SCHEME_NVFP4 ? 16 : 32;
            if (lofp_fp4_repack(q->codes, codes, q->rows, s->kp, blk, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD) == LOFP_OK &&
                deq(s, s->lin, codes, q->global, ftmp, X))
                attempt(&x, side, X, "%s FP4 codes read in GGUF split nibble order", who);
            for (size_t i = 0; i < nb; i++) codes[i] = (uint8_t)((q->codes[i] >> 4) | (q->codes[i] << 4));
            if (deq(s, s->lin, codes, q->global, ftmp, X))
                attempt(&x, side, X, "%s FP4 nibbles swapped (element 2i in the high nibble)", who);
        }
        if (q->scheme->id == LOFP_SCHEME_NVFP4 && q->scheme->two_level) {
            if (deq(s, s->lin, q->codes, 1.0f, ftmp, X)) attempt(&x, side, X, "%s per-tensor scale not applied", who);
            if (deq(s, s->lin, q->codes, 1.0f / q->global, ftmp, X))
                attempt(&x, side, X, "%s per-tensor scale applied in the wrong direction (x global instead of / global)", who);
        }
    }
    report->explained = report->closest >= 0 && report->candidates[report->closest].error <= opt->tol;
out:
    free(A); free(B); free(C); free(R); free(X); free(ftmp); free(buf); free(buf2); free(lin); free(codes);
    free(sd[0].lin); free(sd[1].lin);
    if (st != LOFP_OK) { memset(report, 0, sizeof *report); report->closest = -1; }
    return st;
}

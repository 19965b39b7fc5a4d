/* mse.c -- LOFP_METHOD_MSE (lofp/method.h): per block, the scale code among a window of
 * candidates around the scale rule's (and, for NVFP4, around Four over Six's "scale to 4") that
 * minimizes the weighted squared error of what lofp_dequantize will return. Rows are independent
 * and each row's error is kept separately and summed in row order, so the results do not depend
 * on the number of threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "method_block.h"
#include "runtime/threadpool.h"

typedef struct {
    const lofp_scheme *s;
    lofp_dtype dt;
    const uint8_t *x;
    size_t rows, k, kp, nt, code_row_bytes, nb;
    const float *importance; /* NULL or kp floats (padded with zeros) */
    unsigned window;
    float global;
    uint8_t *codes, *scales; /* NULL: error only */
    double *row_err;
    size_t bad_row[LOFP_MAX_TASKS], bad_col[LOFP_MAX_TASKS];
    int bad[LOFP_MAX_TASKS], nomem[LOFP_MAX_TASKS];
} mse_job;

static size_t dtype_size(lofp_dtype dt) { return dt == LOFP_DTYPE_F32 ? 4 : 2; }

static void mse_task(void *arg, size_t t)
{
    mse_job *j = arg;
    size_t r0 = j->rows * t / j->nt, r1 = j->rows * (t + 1) / j->nt;
    j->bad[t] = j->nomem[t] = 0;
    if (r1 == r0) return;
    lofp_mblk m;
    lofp_mblk_init(&m, j->s, j->global);
    float *row = malloc(j->kp * sizeof(float));
    uint32_t *code = malloc(m.block * sizeof(uint32_t));
    if (!row || !code) {
        j->nomem[t] = 1;
        free(row);
        free(code);
        return;
    }
    const size_t es = dtype_size(j->dt);
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *xr = j->x + r * j->k * es;
        for (size_t i = 0; i < j->k; i++) {
            row[i] = lofp_load_f32(j->dt, xr, i);
            if (!isfinite(row[i])) {
                j->bad[t] = 1;
                j->bad_row[t] = r;
                j->bad_col[t] = i;
                goto out;
            }
        }
        memset(row + j->k, 0, (j->kp - j->k) * sizeof(float));
        double err = 0.0;
        for (size_t b = 0; b < j->nb; b++) {
            const float *xb = row + b * m.block;
            const float *wb = j->importance ? j->importance + b * m.block : NULL;
            double e;
            uint32_t sc = lofp_mblk_mse_scale(&m, xb, wb, j->window, &e);
            err += e;
            if (j->codes) {
                lofp_mblk_error(&m, sc, xb, wb, code);
                j->scales[r * j->nb + b] = (uint8_t)sc;
                uint8_t *cr = j->codes + r * j->code_row_bytes;
                for (uint32_t i = 0; i < m.block; i++) lofp_put_code(j->s, cr, b * m.block + i, code[i]);
            }
        }
        j->row_err[r] = err;
    }
out:
    free(row);
    free(code);
}

/* Shared by lofp_mse_quantize_rows and the global-scale search: checks, then one pass. */
static lofp_status mse_run(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t row0,
                           size_t rows, size_t k, float global, const float *importance,
                           unsigned window, uint8_t *codes, uint8_t *scales, double *sq_error,
                           lofp_quant_report *rep)
{
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->logical_k = k;
    }
    if (!s || !x || rows == 0 || k == 0 || !lofp_dtype_is_dense(dt)) return LOFP_ERR_INVALID_ARG;
    lofp_status st = lofp_mblk_check(s, global);
    if (st != LOFP_OK) return st;
    if (k % s->block != 0 && !s->pad) return LOFP_ERR_SHAPE;
    size_t kp = lofp_padded_k(s, k), n;
    if (!kp || !lofp_mul_size(rows, kp, &n) || !lofp_mul_size(n, sizeof(double), &n))
        return LOFP_ERR_SIZE_OVERFLOW;
    if (rep) rep->padded_k = kp;
    float *imp = NULL;
    if (importance) {
        imp = calloc(kp, sizeof(float));
        if (!imp) return LOFP_ERR_NOMEM;
        for (size_t i = 0; i < k; i++) {
            if (!(importance[i] >= 0.0f) || isinf(importance[i])) {
                free(imp);
                return LOFP_ERR_INVALID_ARG;
            }
            imp[i] = importance[i];
        }
    }
    mse_job *j = malloc(sizeof *j);
    double *row_err = malloc(rows * sizeof(double));
    if (!j || !row_err) {
        free(imp);
        free(j);
        free(row_err);
        return LOFP_ERR_NOMEM;
    }
    j->s = s;
    j->dt = dt;
    j->x = x;
    j->rows = rows;
    j->k = k;
    j->kp = kp;
    j->code_row_bytes = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    j->nb = kp / s->block;
    j->importance = imp;
    j->window = window;
    j->global = global;
    j->codes = codes;
    j->scales = scales;
    j->row_err = row_err;
    /* a search costs ~ (candidates) quantizations per element: split even small tensors */
    size_t th = lofp_parallel_threads(s->threads, rows, rows * kp * 8);
    j->nt = lofp_parallel_tasks(th, rows);
    lofp_parallel_run_tasks(j->nt, th, mse_task, j);
    st = LOFP_OK;
    for (size_t t = 0; t < j->nt; t++) {
        if (j->nomem[t]) st = LOFP_ERR_NOMEM;
    }
    for (size_t t = 0; st == LOFP_OK && t < j->nt; t++) {
        if (j->bad[t]) { /* tasks are in row order: the first one found is the first bad index */
            if (rep) rep->first_bad_index = (row0 + j->bad_row[t]) * k + j->bad_col[t];
            st = LOFP_ERR_NONFINITE;
        }
    }
    if (st == LOFP_OK && sq_error) {
        double e = 0.0;
        for (size_t r = 0; r < rows; r++) e += row_err[r];
        *sq_error = e;
    }
    free(imp);
    free(j);
    free(row_err);
    return st;
}

lofp_status lofp_mse_quantize_rows(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t row0,
                                   size_t rows, size_t k, float global_scale,
                                   const float *importance, unsigned window, uint8_t *codes,
                                   uint8_t *scales, double *sq_error, lofp_quant_report *report)
{
    if (!codes || !scales) return LOFP_ERR_INVALID_ARG;
    return mse_run(s, dt, x, row0, rows, k, global_scale, importance, window, codes, scales,
                   sq_error, report);
}

void lofp_mse_nvfp4_global_candidates(float global, size_t n, float *out)
{
    for (size_t i = 0; out && i < n; i++) out[i] = (float)((double)global * exp2(-(double)i / 64.0));
}

lofp_status lofp_mse_nvfp4_global_error(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                        size_t rows, size_t k, const float *importance,
                                        unsigned window, const float *candidates, size_t ncand,
                                        double *err)
{
    if (!s || s->id != LOFP_SCHEME_NVFP4 || !candidates || !err || ncand == 0)
        return LOFP_ERR_INVALID_ARG;
    for (size_t c = 0; c < ncand; c++) {
        double e = 0.0;
        lofp_status st = mse_run(s, dt, x, 0, rows, k, candidates[c], importance, window, NULL,
                                 NULL, &e, NULL);
        if (st != LOFP_OK) return st;
        err[c] += e;
    }
    return LOFP_OK;
}

/* gptq_quantize.c -- lofp_gptq_quantize_rows (lofp/method.h): the GPTQ column sweep with lazy
 * block updates, in fp32, over a chunk of rows. Each row is independent; a task takes a few rows
 * at a time (a tile) only so that every row of U it streams is reused from cache by the tile's
 * rows: the per-row arithmetic and its order are the same whatever the tiling and the threads.
 *
 * Per row, with w the working values in sweep order (w[t] = weight of column perm[t], 0 for a
 * dead column) and the lazy blocks [i1, i2) of o->lazy_block positions:
 *   for t in [i1, i2):
 *     c = perm[t]; if c's format block has no scale yet: fix it from the block's current working
 *       values (the scheme's rule, or the MSE search weighted by hdiag); padded columns are 0;
 *     q = code of w[t] at that scale; deq its value (lofp_dequantize's);
 *     err[t] = (w[t] - deq) / U[t][t];
 *     for j in (t, i2): w[j] = w[j] - err[t] * U[t][j];
 *   for j in [i2, k): s = +0; for t in [i1, i2): s = s + err[t] * U[t][j]; w[j] = w[j] - s.
 * Every operation is one fp32 operation, rounded (no FMA: the library builds with
 * -ffp-contract=off). Columns beyond the current lazy block lack its pending update until it
 * ends, so a format block that straddles lazy blocks (act order, or a lazy block that is not a
 * multiple of the format block) fixes its scale from values that lack it, as GPTQ's reference
 * code does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "method_block.h"
#include "runtime/threadpool.h"

#define GPTQ_TILE 8 /* rows swept together */

typedef struct {
    const lofp_scheme *s;
    const lofp_gptq_factor *f;
    const lofp_gptq_options *o;
    lofp_dtype dt;
    const uint8_t *x;
    const uint32_t *pos; /* column -> sweep position */
    size_t rows, k, kp, nt, code_row_bytes, nb;
    float global;
    uint8_t *codes, *scales;
    size_t bad_row[LOFP_MAX_TASKS], bad_col[LOFP_MAX_TASKS];
    int bad[LOFP_MAX_TASKS], nomem[LOFP_MAX_TASKS];
} gptq_job;

static size_t dtype_size(lofp_dtype dt) { return dt == LOFP_DTYPE_F32 ? 4 : 2; }

/* Fixes the scale of format block b of one row from its current working values w. */
static uint8_t fix_scale(const gptq_job *j, const lofp_mblk *m, const float *w, size_t b,
                         float *vals, float *wts)
{
    const uint32_t B = m->block;
    for (uint32_t i = 0; i < B; i++) {
        size_t c = b * B + i;
        vals[i] = c < j->k ? w[j->pos[c]] : 0.0f;
        wts[i] = c < j->k ? j->f->hdiag[c] : 0.0f;
    }
    if (j->o->mse_scales) {
        double e;
        return (uint8_t)lofp_mblk_mse_scale(m, vals, wts, j->o->mse_window, &e);
    }
    return (uint8_t)lofp_mblk_rtn_scale(m, vals);
}

static void gptq_task(void *arg, size_t t)
{
    gptq_job *j = arg;
    size_t r0 = j->rows * t / j->nt, r1 = j->rows * (t + 1) / j->nt;
    j->bad[t] = j->nomem[t] = 0;
    if (r1 == r0) return;
    const size_t k = j->k, L = j->o->lazy_block, nb = j->nb;
    const float *U = j->f->u;
    const uint32_t *perm = j->f->perm;
    lofp_mblk m;
    lofp_mblk_init(&m, j->s, j->global);
    float *w = malloc(GPTQ_TILE * k * sizeof(float));
    float *sacc = malloc(GPTQ_TILE * k * sizeof(float));
    float *err = malloc(GPTQ_TILE * L * sizeof(float));
    uint8_t *fixed = malloc(GPTQ_TILE * nb);
    float *vals = malloc(2 * m.block * sizeof(float));
    if (!w || !sacc || !err || !fixed || !vals) {
        j->nomem[t] = 1;
        goto out;
    }
    const size_t es = dtype_size(j->dt);
    for (size_t rt = r0; rt < r1; rt += GPTQ_TILE) {
        const size_t R = r1 - rt < GPTQ_TILE ? r1 - rt : GPTQ_TILE;
        for (size_t r = 0; r < R; r++) {
            const uint8_t *xr = j->x + (rt + r) * k * es;
            for (size_t c = 0; c < k; c++) {
                float v = lofp_load_f32(j->dt, xr, c);
                if (!isfinite(v)) {
                    j->bad[t] = 1;
                    j->bad_row[t] = rt + r;
                    j->bad_col[t] = c;
                    goto out;
                }
            }
            for (size_t p = 0; p < k; p++)
                w[r * k + p] = j->f->dead[perm[p]] ? 0.0f : lofp_load_f32(j->dt, xr, perm[p]);
            memset(j->codes + (rt + r) * j->code_row_bytes, 0, j->code_row_bytes);
        }
        memset(fixed, 0, R * nb);
        for (size_t i1 = 0; i1 < k; i1 += L) {
            const size_t i2 = i1 + L < k ? i1 + L : k;
            for (size_t p = i1; p < i2; p++) {
                const size_t c = perm[p], b = c / m.block;
                const float *up = U + p * k;
                const float d = up[p];
                for (size_t r = 0; r < R; r++) {
                    float *wr = w + r * k;
                    uint8_t *sc = j->scales + (rt + r) * nb;
                    if (!fixed[r * nb + b]) {
                        sc[b] = fix_scale(j, &m, wr, b, vals, vals + m.block);
                        fixed[r * nb + b] = 1;
                    }
                    float deq;
                    uint32_t q = lofp_mblk_code(&m, sc[b], wr[p], &deq);
                    lofp_put_code(j->s, j->codes + (rt + r) * j->code_row_bytes, c, q);
                    const float e = (wr[p] - deq) / d;
                    err[r * L + (p - i1)] = e;
                    for (size_t q2 = p + 1; q2 < i2; q2++) wr[q2] = wr[q2] - e * up[q2];
                }
            }
            if (i2 == k) break;
            /* the lazy block's update of every later column, summed in increasing t */
            for (size_t r = 0; r < R; r++) memset(sacc + r * k + i2, 0, (k - i2) * sizeof(float));
            for (size_t p = i1; p < i2; p++) {
                const float *up = U + p * k;
                for (size_t r = 0; r < R; r++) {
                    const float e = err[r * L + (p - i1)];
                    float *sr = sacc + r * k;
                    for (size_t q2 = i2; q2 < k; q2++) sr[q2] = sr[q2] + e * up[q2];
                }
            }
            for (size_t r = 0; r < R; r++) {
                float *wr = w + r * k;
                const float *sr = sacc + r * k;
                for (size_t q2 = i2; q2 < k; q2++) wr[q2] = wr[q2] - sr[q2];
            }
        }
        /* blocks made only of padding (none when pad is off) are never entered by the sweep */
        for (size_t r = 0; r < R; r++)
            for (size_t b = 0; b < nb; b++)
                if (!fixed[r * nb + b])
                    j->scales[(rt + r) * nb + b] = fix_scale(j, &m, w + r * k, b, vals, vals + m.block);
    }
out:
    free(w);
    free(sacc);
    free(err);
    free(fixed);
    free(vals);
}

lofp_status lofp_gptq_quantize_rows(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                    size_t row0, size_t rows, size_t k, float global_scale,
                                    const lofp_gptq_factor *f, const lofp_gptq_options *o,
                                    uint8_t *codes, uint8_t *scales, lofp_quant_report *rep)
{
    lofp_gptq_options def;
    if (!o) {
        lofp_gptq_options_init(&def);
        o = &def;
    }
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->logical_k = k;
    }
    if (!s || !x || !f || !codes || !scales || rows == 0 || k == 0 || f->k != k ||
        !lofp_dtype_is_dense(dt) || !f->u || !f->perm || !f->dead || !f->hdiag ||
        o->lazy_block == 0)
        return LOFP_ERR_INVALID_ARG;
    lofp_status st = lofp_mblk_check(s, global_scale);
    if (st != LOFP_OK) return st;
    if (k % s->block != 0 && !s->pad) return LOFP_ERR_SHAPE;
    size_t kp = lofp_padded_k(s, k), n;
    if (!kp || !lofp_mul_size(k, GPTQ_TILE * sizeof(float), &n) ||
        !lofp_mul_size(o->lazy_block, GPTQ_TILE * sizeof(float), &n))
        return LOFP_ERR_SIZE_OVERFLOW;
    if (rep) rep->padded_k = kp;
    for (size_t p = 0; p < k; p++)
        if (f->perm[p] >= k) return LOFP_ERR_INVALID_ARG;
    gptq_job *j = malloc(sizeof *j);
    uint32_t *pos = malloc(k * sizeof(uint32_t));
    if (!j || !pos) {
        free(j);
        free(pos);
        return LOFP_ERR_NOMEM;
    }
    for (size_t p = 0; p < k; p++) pos[f->perm[p]] = (uint32_t)p;
    j->s = s;
    j->f = f;
    j->o = o;
    j->dt = dt;
    j->x = x;
    j->pos = pos;
    j->rows = rows;
    j->k = k;
    j->kp = kp;
    j->code_row_bytes = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    j->nb = kp / s->block;
    j->global = s->id == LOFP_SCHEME_NVFP4 ? global_scale : 1.0f;
    j->codes = codes;
    j->scales = scales;
    /* a row costs ~k^2 operations: split by rows of GPTQ_TILE */
    size_t units = (rows + GPTQ_TILE - 1) / GPTQ_TILE;
    size_t th = lofp_parallel_threads(s->threads, units, rows * k * (k / 16 + 1));
    j->nt = lofp_parallel_tasks(th, units);
    lofp_parallel_run_tasks(j->nt, th, gptq_task, j);
    st = LOFP_OK;
    for (size_t t = 0; t < j->nt; t++)
        if (j->nomem[t]) st = LOFP_ERR_NOMEM;
    for (size_t t = 0; st == LOFP_OK && t < j->nt; t++) {
        if (j->bad[t]) {
            if (rep) rep->first_bad_index = (row0 + j->bad_row[t]) * k + j->bad_col[t];
            st = LOFP_ERR_NONFINITE;
        }
    }
    free(j);
    free(pos);
    return st;
}

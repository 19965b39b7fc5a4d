/* gptq_prepare.c -- lofp_gptq_prepare and lofp_gptq_options_init (lofp/method.h): the per-layer
 * linear algebra of GPTQ, in double, in the operation order docs/QUALITY.md fixes so that an
 * independent implementation with the same loops (tests/quant/gptq_oracle.py) gets the same bits.
 *
 * GPTQ needs U, the upper Cholesky factor of H^-1 (H^-1 = U^T U). The reference computes it as
 * Cholesky(H) -> inverse -> Cholesky(inverse). The same matrix comes from one factorization and
 * one triangular inverse: factor H = V V^T with V upper triangular (Cholesky run from the last
 * column to the first); then H^-1 = V^-T V^-1 = (V^-1)^T (V^-1) with V^-1 upper and a positive
 * diagonal, which is the unique upper Cholesky factor of H^-1. Half the work, and it never forms
 * H^-1 (whose condition number is that of H squared in the second factorization). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/method.h"
#include "core/core.h"
#include "runtime/threadpool.h"

void lofp_gptq_options_init(lofp_gptq_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->damp = 0.01;
    o->act_order = 0;
    o->lazy_block = 128;
    o->mse_scales = 0;
    o->mse_window = LOFP_MSE_WINDOW_DEFAULT;
    o->threads = 1;
}

/* Stable sort of positions by descending d[] (insertion into a merge sort would do; k is at most a
 * few tens of thousands, and a bottom-up merge sort keeps it O(k log k) and stable). */
static int perm_sort(uint32_t *perm, const double *d, size_t k)
{
    uint32_t *tmp = malloc(k * sizeof *tmp);
    if (!tmp) return 0;
    for (size_t w = 1; w < k; w *= 2) {
        for (size_t lo = 0; lo < k; lo += 2 * w) {
            size_t mid = lo + w < k ? lo + w : k, hi = lo + 2 * w < k ? lo + 2 * w : k;
            size_t a = lo, b = mid, o = lo;
            /* take from the right run only when strictly larger: ties keep index order */
            while (a < mid && b < hi) tmp[o++] = d[perm[b]] > d[perm[a]] ? perm[b++] : perm[a++];
            while (a < mid) tmp[o++] = perm[a++];
            while (b < hi) tmp[o++] = perm[b++];
        }
        memcpy(perm, tmp, k * sizeof *tmp);
    }
    free(tmp);
    return 1;
}

/* ---- the two O(k^3) steps, blocked by panels of PANEL columns (rows) for the cache and split
 * over threads; neither blocking nor threads change any entry's operation order ---- */

#define PANEL 32

typedef struct {
    double *a;
    const double *vp; /* PANEL columns of V, each k long: vp[(j - jl) * k + i] = V[i][j] */
    size_t k, jl, j0, nt;
} trail_job;

/* Rows i = t, t + nt, ... of [0, jl): a[i][l] -= V[i][j] * V[l][j] for l in [i, jl), j from
 * j0 - 1 down to jl. */
static void trail_task(void *arg, size_t t)
{
    trail_job *j = arg;
    for (size_t i = t; i < j->jl; i += j->nt) {
        double *ai = j->a + i * j->k;
        for (size_t jj = j->j0; jj-- > j->jl;) {
            const double *v = j->vp + (jj - j->jl) * j->k;
            const double vi = v[i];
            for (size_t l = i; l < j->jl; l++) ai[l] = ai[l] - vi * v[l];
        }
    }
}

/* H = V V^T with V upper, right-looking from the last column: at step j the pivot is a[j][j]
 * (it must be > 0), V[j][j] = sqrt(pivot), V[i][j] = a[i][j] / V[j][j] for i < j, and every
 * a[i][l] with i <= l < j becomes a[i][l] - V[i][j] * V[l][j]. So each entry receives its
 * products in decreasing j, each product and difference rounded. V overwrites the upper
 * triangle of a (row-major, k x k). */
static lofp_status factor_upper(double *a, size_t k, unsigned threads)
{
    double *vp = malloc(PANEL * k * sizeof(double));
    if (!vp) return LOFP_ERR_NOMEM;
    lofp_status st = LOFP_OK;
    for (size_t j0 = k; j0 > 0;) {
        const size_t jl = j0 > PANEL ? j0 - PANEL : 0;
        /* the panel's columns, with the updates from inside the panel applied to the panel */
        for (size_t jj = j0; jj-- > jl;) {
            const double piv = a[jj * k + jj];
            if (!(piv > 0.0) || !isfinite(piv)) {
                st = LOFP_ERR_INVALID_ARG; /* not positive definite */
                goto out;
            }
            const double r = sqrt(piv);
            double *v = vp + (jj - jl) * k;
            a[jj * k + jj] = r;
            v[jj] = r;
            for (size_t i = 0; i < jj; i++) {
                v[i] = a[i * k + jj] / r;
                a[i * k + jj] = v[i];
            }
            for (size_t i = 0; i < jj; i++) {
                double *ai = a + i * k;
                for (size_t l = i > jl ? i : jl; l < jj; l++) ai[l] = ai[l] - v[i] * v[l];
            }
        }
        /* the columns left of the panel */
        if (jl > 0) {
            trail_job tj = { a, vp, k, jl, j0, 1 };
            size_t th = lofp_parallel_threads(threads, jl, jl * jl * PANEL / 2);
            tj.nt = lofp_parallel_tasks(th, jl);
            lofp_parallel_run_tasks(tj.nt, th, trail_task, &tj);
        }
        j0 = jl;
    }
out:
    free(vp);
    return st;
}

typedef struct {
    const double *a;
    double *acc; /* PANEL rows, each k long */
    size_t k, il, i0, nt;
} inv_job;

#define INV_CHUNK 64 /* columns per piece of a task */

/* Columns in chunks t, t + nt, ...: acc_r[c] += V[r][p] * U[p][c] for p from k - 1 down to i0,
 * c >= p, for the panel's rows r. */
static void inv_task(void *arg, size_t t)
{
    inv_job *j = arg;
    const size_t k = j->k;
    for (size_t c0 = j->i0 + t * INV_CHUNK; c0 < k; c0 += j->nt * INV_CHUNK) {
        const size_t c1 = c0 + INV_CHUNK < k ? c0 + INV_CHUNK : k;
        for (size_t p = c1; p-- > j->i0;) {
            const double *up = j->a + p * k;
            const size_t cs = p > c0 ? p : c0;
            for (size_t r = j->il; r < j->i0; r++) {
                const double vrp = j->a[r * k + p];
                double *acc = j->acc + (r - j->il) * k;
                for (size_t c = cs; c < c1; c++) acc[c] = acc[c] + vrp * up[c];
            }
        }
    }
}

/* U = V^-1 (upper), by rows from the last: U[i][i] = 1 / V[i][i] and, for c > i,
 * U[i][c] = (-acc) / V[i][i] with acc = +0 + V[i][p] * U[p][c] summed over p from c down to i + 1
 * (decreasing p). Rows of U replace rows of V: row i of V is read only for row i of U. */
static lofp_status invert_upper(double *a, size_t k, unsigned threads)
{
    double *accs = malloc(PANEL * k * sizeof(double));
    if (!accs) return LOFP_ERR_NOMEM;
    for (size_t i0 = k; i0 > 0;) {
        const size_t il = i0 > PANEL ? i0 - PANEL : 0;
        for (size_t r = il; r < i0; r++)
            for (size_t c = r; c < k; c++) accs[(r - il) * k + c] = 0.0;
        /* the rows of U below the panel, p from k - 1 down to i0 */
        if (i0 < k) {
            inv_job ij = { a, accs, k, il, i0, 1 };
            size_t chunks = (k - i0 + INV_CHUNK - 1) / INV_CHUNK;
            size_t th = lofp_parallel_threads(threads, chunks, (k - i0) * (k - i0) * (i0 - il) / 2);
            ij.nt = lofp_parallel_tasks(th, chunks);
            lofp_parallel_run_tasks(ij.nt, th, inv_task, &ij);
        }
        /* then the panel's own rows, from the last: p from i0 - 1 down to r + 1 */
        for (size_t r = i0; r-- > il;) {
            double *acc = accs + (r - il) * k;
            double *ar = a + r * k;
            for (size_t p = i0; p-- > r + 1;) {
                const double vrp = ar[p];
                const double *up = a + p * k;
                for (size_t c = p; c < k; c++) acc[c] = acc[c] + vrp * up[c];
            }
            const double vii = ar[r];
            ar[r] = 1.0 / vii;
            for (size_t c = r + 1; c < k; c++) ar[c] = (-acc[c]) / vii;
        }
        i0 = il;
    }
    free(accs);
    return LOFP_OK;
}

lofp_status lofp_gptq_prepare(const float *h, size_t k, const lofp_gptq_options *o,
                              lofp_gptq_factor *f)
{
    lofp_gptq_options def;
    if (!o) {
        lofp_gptq_options_init(&def);
        o = &def;
    }
    if (!h || !f || k == 0 || f->k != k || !f->u || !f->perm || !f->dead || !f->hdiag)
        return LOFP_ERR_INVALID_ARG;
    if (!(o->damp >= 0.0) || !isfinite(o->damp) || k > UINT32_MAX) return LOFP_ERR_INVALID_ARG;
    size_t kk;
    if (!lofp_mul_size(k, k, &kk) || !lofp_mul_size(kk, sizeof(double), &kk))
        return LOFP_ERR_SIZE_OVERFLOW;
    for (size_t i = 0; i < k * k; i++)
        if (!isfinite(h[i])) return LOFP_ERR_INVALID_ARG;

    double *a = malloc(kk);
    double *d = malloc(k * sizeof(double));
    if (!a || !d) {
        free(a);
        free(d);
        return LOFP_ERR_NOMEM;
    }
    lofp_status st = LOFP_OK;

    /* 1. dead columns: H_ii == 0 -> 1 (their weights are zeroed by the sweep) */
    for (size_t i = 0; i < k; i++) {
        d[i] = (double)h[i * k + i];
        f->dead[i] = d[i] == 0.0;
        if (f->dead[i]) d[i] = 1.0;
        f->hdiag[i] = (float)d[i];
    }
    /* 2. act order: positions by descending diag, ties in column order */
    for (size_t i = 0; i < k; i++) f->perm[i] = (uint32_t)i;
    if (o->act_order && !perm_sort(f->perm, d, k)) {
        st = LOFP_ERR_NOMEM;
        goto done;
    }
    /* 3. damping: mean of the diag summed in column order, before the permutation */
    double sum = 0.0;
    for (size_t i = 0; i < k; i++) sum += d[i];
    const double add = o->damp * (sum / (double)k);
    /* the permuted, damped upper triangle: a[i][j] = H[perm i][perm j], i <= j */
    for (size_t i = 0; i < k; i++) {
        const size_t pi = f->perm[i];
        a[i * k + i] = d[pi] + add;
        for (size_t j = i + 1; j < k; j++) a[i * k + j] = (double)h[pi * k + f->perm[j]];
    }
    /* 4. H = V V^T, V upper (step 4 of docs/QUALITY.md); 5. U = V^-1 (step 5) */
    st = factor_upper(a, k, o->threads);
    if (st == LOFP_OK) st = invert_upper(a, k, o->threads);
    if (st != LOFP_OK) goto done;
    for (size_t i = 0; i < k; i++) {
        for (size_t c = 0; c < k; c++) f->u[i * k + c] = c < i ? 0.0f : (float)a[i * k + c];
        if (!(f->u[i * k + i] > 0.0f) || !isfinite(f->u[i * k + i])) st = LOFP_ERR_INVALID_ARG;
    }
done:
    free(a);
    free(d);
    return st;
}

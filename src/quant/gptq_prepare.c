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

void lofp_gptq_options_init(lofp_gptq_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->damp = 0.01;
    o->act_order = 0;
    o->lazy_block = 128;
    o->mse_scales = 0;
    o->mse_window = LOFP_MSE_WINDOW_DEFAULT;
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
    double *v = malloc(k * sizeof(double));
    if (!a || !d || !v) {
        free(a);
        free(d);
        free(v);
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
    /* 4. H = V V^T, V upper, right-looking from the last column: at step j, column j of V is
     * a[0..j][j] / sqrt(pivot) and every a[i][l] (i <= l < j) loses v_i * v_l. Each entry thus
     * receives its products in decreasing j, each product and difference rounded. V overwrites
     * the upper triangle of a. */
    for (size_t jj = k; jj-- > 0;) {
        const double piv = a[jj * k + jj];
        if (!(piv > 0.0) || !isfinite(piv)) {
            st = LOFP_ERR_INVALID_ARG; /* not positive definite after damping */
            goto done;
        }
        const double r = sqrt(piv);
        a[jj * k + jj] = r;
        for (size_t i = 0; i < jj; i++) {
            v[i] = a[i * k + jj] / r;
            a[i * k + jj] = v[i];
        }
        for (size_t i = 0; i < jj; i++) {
            const double vi = v[i];
            double *ai = a + i * k;
            for (size_t l = i; l < jj; l++) ai[l] = ai[l] - vi * v[l];
        }
    }
    /* 5. U = V^-1, row by row from the last: U[i][c] = (delta_ic - sum_{p=i+1..c} V[i][p] U[p][c])
     * / V[i][i], the sum accumulated from +0 in increasing p (all c at once), then the row of U
     * replaces the row of V (rows below i of V are no longer needed). */
    for (size_t i = k; i-- > 0;) {
        for (size_t c = i; c < k; c++) v[c] = 0.0;
        const double *ai = a + i * k;
        for (size_t p = i + 1; p < k; p++) {
            const double vip = ai[p];
            const double *up = a + p * k;
            for (size_t c = p; c < k; c++) v[c] = v[c] + vip * up[c];
        }
        const double vii = ai[i];
        double *ui = a + i * k;
        ui[i] = 1.0 / vii;
        for (size_t c = i + 1; c < k; c++) ui[c] = (-v[c]) / vii;
    }
    for (size_t i = 0; i < k; i++) {
        for (size_t c = 0; c < k; c++) f->u[i * k + c] = c < i ? 0.0f : (float)a[i * k + c];
        if (!(f->u[i * k + i] > 0.0f) || !isfinite(f->u[i * k + i])) st = LOFP_ERR_INVALID_ARG;
    }
done:
    free(a);
    free(d);
    free(v);
    return st;
}

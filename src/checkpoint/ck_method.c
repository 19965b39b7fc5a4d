/* ck_method.c -- a pipeline's quantization method and its statistics file, per tensor
 * (ck_method.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ck_method.h"

lofp_status lofp_ck_method_open(ck_method *m, lofp_method method, const char *calibration, double damp,
                                int act_order, int mse_scales, lofp_profile profile, unsigned threads,
                                lofp_io_error *err)
{
    memset(m, 0, sizeof *m);
    const char *name = lofp_method_name(method);
    if (!name) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "unknown quantization method %d", (int)method);
    m->method = method;
    m->path = calibration;
    lofp_gptq_options_init(&m->gptq);
    if (damp > 0) m->gptq.damp = damp;
    m->gptq.act_order = act_order;
    m->gptq.mse_scales = mse_scales;
    m->gptq.threads = threads ? threads : 1;
    if (method != LOFP_METHOD_GPTQ && (damp > 0 || act_order || mse_scales))
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "--damp, --act-order and --mse-scales apply to --method gptq, not %s",
                            name);
    if (method == LOFP_METHOD_RTN) {
        if (calibration)
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: a statistics file is read by --method mse or gptq, not "
                                "by rtn", calibration);
        return LOFP_OK;
    }
    if (profile != LOFP_PROFILE_LOFP)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "--method %s is not defined under the %s profile (its producer "
                            "rounds to nearest); use the lofp profile", name, lofp_profile_name(profile));
    if (method == LOFP_METHOD_GPTQ && !calibration)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "--method gptq needs --calibration FILE (lofp calibrate)");
    if (!calibration) return LOFP_OK;
    lofp_status st = lofp_calib_open(calibration, &m->calib, err);
    if (st) return st;
    if (method == LOFP_METHOD_GPTQ && lofp_calib_kind(m->calib) != LOFP_CALIB_HESSIAN) {
        lofp_ck_method_close(m);
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: --method gptq needs the full X^T X of every layer; this file "
                            "holds only the diagonal (lofp calibrate without --diag writes it)", calibration);
    }
    return LOFP_OK;
}

void lofp_ck_method_close(ck_method *m)
{
    lofp_calib_close(m->calib);
    m->calib = NULL;
}

void lofp_ck_plan_release(ck_plan *p)
{
    free(p->importance);
    free(p->f.u);
    free(p->f.perm);
    free(p->f.dead);
    free(p->f.hdiag);
    memset(p, 0, sizeof *p);
}

static lofp_status gptq_plan(const ck_method *m, const char *tensor, size_t k, ck_plan *out, lofp_io_error *err)
{
    size_t kk;
    if (!lofp_mul_size(k, k, &kk) || !lofp_mul_size(kk, sizeof(float), &kk))
        return lofp_ck_fail(err, LOFP_ERR_SIZE_OVERFLOW, "tensor '%s': its Hessian (%zu x %zu) is not addressable", tensor, k, k);
    float *h = malloc(kk);
    out->f.k = k;
    out->f.u = malloc(kk);
    out->f.perm = malloc(k * sizeof *out->f.perm);
    out->f.dead = malloc(k);
    out->f.hdiag = malloc(k * sizeof *out->f.hdiag);
    if (!h || !out->f.u || !out->f.perm || !out->f.dead || !out->f.hdiag) {
        free(h);
        return lofp_ck_fail(err, LOFP_ERR_NOMEM, "tensor '%s': out of memory for its %zu x %zu Hessian", tensor, k, k);
    }
    lofp_status st = lofp_calib_find(m->calib, tensor, k, NULL, h, NULL, err);
    if (!st) {
        st = lofp_gptq_prepare(h, k, &m->gptq, &out->f);
        if (st == LOFP_ERR_INVALID_ARG)
            st = lofp_ck_fail(err, st, "%s: tensor '%s': its damped Hessian is not positive definite (GPTQ cannot use "
                              "it; a larger --damp may help)", m->path, tensor);
        else if (st)
            st = lofp_ck_fail(err, st, "%s: tensor '%s': GPTQ preparation failed (%s)", m->path, tensor,
                              lofp_status_name(st));
    }
    free(h);
    if (!st) {
        out->p.factor = &out->f;
        out->p.gptq = &m->gptq;
    }
    return st;
}

lofp_status lofp_ck_method_plan(const ck_method *m, const char *tensor, size_t k, ck_plan *out, lofp_io_error *err)
{
    memset(out, 0, sizeof *out);
    out->p.method = m->method;
    out->p.window = LOFP_MSE_WINDOW_DEFAULT;
    lofp_status st = LOFP_OK;
    if (m->method == LOFP_METHOD_GPTQ) {
        st = gptq_plan(m, tensor, k, out, err);
    } else if (m->method == LOFP_METHOD_MSE && m->calib) {
        out->importance = malloc(k * sizeof *out->importance);
        if (!out->importance) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "tensor '%s': out of memory", tensor);
        st = lofp_calib_find(m->calib, tensor, k, out->importance, NULL, NULL, err);
        out->p.importance = out->importance;
    }
    if (st) lofp_ck_plan_release(out);
    return st;
}

lofp_status lofp_ck_quantize_whole(const lofp_scheme *s, const lofp_method_plan *p, const float *x, size_t rows, size_t k,
                                   uint8_t *codes, uint8_t *scales, float *G, lofp_quant_report *rep)
{
    size_t n;
    if (!lofp_mul_size(rows, k, &n)) return LOFP_ERR_SIZE_OVERFLOW;
    float g = 1.0f;
    if (s->id == LOFP_SCHEME_NVFP4 && s->two_level) g = lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, n);
    if (!p || p->method == LOFP_METHOD_RTN || isnan(g)) return lofp_quantize(s, LOFP_DTYPE_F32, x, rows, k, codes, scales, G, rep);
    *G = g;
    return lofp_method_quantize_rows(s, p, LOFP_DTYPE_F32, x, 0, rows, k, g, codes, scales, rep);
}

/* method_block.c -- scale rules, block error and the candidate search shared by the MSE and GPTQ
 * methods (method_block.h). */
#include <math.h>

#include "dispatch.h"
#include "method_block.h"

lofp_status lofp_mblk_check(const lofp_scheme *s, float global)
{
    if (!s || lofp_scheme_validate(s) != LOFP_OK) return LOFP_ERR_INVALID_ARG;
    if (s->profile != LOFP_PROFILE_LOFP || s->rounding == LOFP_STOCHASTIC ||
        s->id == LOFP_SCHEME_ULTRAQUANT || lofp_kfamily_of(s->id) == LOFP_KFAM_UQ)
        return LOFP_ERR_UNSUPPORTED;
    if (s->id == LOFP_SCHEME_NVFP4 && !(isfinite(global) && global > 0.0f))
        return LOFP_ERR_INVALID_ARG;
    return LOFP_OK;
}

void lofp_mblk_init(lofp_mblk *m, const lofp_scheme *s, float global)
{
    m->s = s;
    m->nvfp4 = s->id == LOFP_SCHEME_NVFP4;
    m->block = s->block;
    m->global = m->nvfp4 ? global : 1.0f;
    m->max_scale = m->nvfp4 ? 0x7Eu : 254u;
    if (m->nvfp4) kq_e2m1_thresholds(s->rounding, m->thr);
    else kq_mx_init(s, &m->mx);
    const lofp_elem_info *ei = lofp_elem_info_get(s->elem);
    uint32_t ncodes = 1u << ei->bits;
    for (uint32_t c = 0; c < 256; c++) m->dec[c] = c < ncodes ? lofp_decode(s->elem, c) : 0.0f;
}

/* UE4M3 code of bmax / div as quant_nvfp4.c computes it: clamp to [1e-12, 448], RNE. */
static uint32_t nvfp4_scale_code(float bmax, float div)
{
    float bs = bmax / div;
    if (bs < 1e-12f) bs = 1e-12f;
    if (bs > 448.0f) bs = 448.0f;
    return kq_ue4m3_encode(bs);
}

static float block_amax(const lofp_mblk *m, const float *x)
{
    float a = 0.0f;
    for (uint32_t i = 0; i < m->block; i++) {
        float v = m->nvfp4 ? fabsf(x[i] * m->global) : fabsf(x[i]);
        if (v > a) a = v;
    }
    return a;
}

uint32_t lofp_mblk_rtn_scale(const lofp_mblk *m, const float *x)
{
    float a = block_amax(m, x);
    return m->nvfp4 ? nvfp4_scale_code(a, 6.0f) : kq_mx_scale_byte(&m->mx, a);
}

double lofp_mblk_error(const lofp_mblk *m, uint32_t sc, const float *x, const float *w,
                       uint32_t *code)
{
    double err = 0.0;
    for (uint32_t j = 0; j < m->block; j++) {
        float deq;
        uint32_t c = lofp_mblk_code(m, sc, x[j], &deq);
        if (code) code[j] = c;
        double d = (double)x[j] - (double)deq;
        double t = d * d;
        err += w ? (double)w[j] * t : t;
    }
    return err;
}

/* Tries seed, seed-1, seed+1, ..., seed-window, seed+window (valid codes only). */
static void try_window(const lofp_mblk *m, uint32_t seed, const float *x, const float *w,
                       unsigned window, uint32_t *best, double *best_err)
{
    for (unsigned d = 0; d <= window; d++) {
        for (int sgn = -1; sgn <= 1; sgn += 2) {
            if (d == 0 && sgn > 0) break;
            long c = (long)seed + sgn * (long)d;
            if (c < 0 || c > (long)m->max_scale) continue;
            double e = lofp_mblk_error(m, (uint32_t)c, x, w, NULL);
            if (e < *best_err) {
                *best_err = e;
                *best = (uint32_t)c;
            }
        }
    }
}

uint32_t lofp_mblk_mse_scale(const lofp_mblk *m, const float *x, const float *w, unsigned window,
                             double *err)
{
    float a = block_amax(m, x);
    uint32_t rtn = m->nvfp4 ? nvfp4_scale_code(a, 6.0f) : kq_mx_scale_byte(&m->mx, a);
    uint32_t best = rtn;
    double best_err = lofp_mblk_error(m, rtn, x, w, NULL);
    try_window(m, rtn, x, w, window, &best, &best_err);
    if (m->nvfp4) try_window(m, nvfp4_scale_code(a, 4.0f), x, w, window, &best, &best_err);
    *err = best_err;
    return best;
}

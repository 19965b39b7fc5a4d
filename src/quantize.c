/* quantize.c -- the shape/padding/non-finite driver shared by every scheme. The arithmetic of
 * each family lives in quant_nvfp4.c, quant_mx.c and quant_uq.c, reached through the scheme
 * table; nothing here knows a scheme by name. */
#include <math.h>
#include <stdlib.h>

#include "traits.h"

static const lofp_family_t *family_of(const lofp_scheme *s)
{
    return lofp_scheme_traits[s->id].family;
}

static int valid_dtype(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_F32 || dt == LOFP_DTYPE_BF16 || dt == LOFP_DTYPE_F16;
}

/* Returns 1 and sets *first when some element is NaN or Inf. */
static int find_nonfinite(lofp_dtype dt, const void *x, size_t n, size_t *first)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(lofp_load_f32(dt, x, i))) { *first = i; return 1; }
    }
    return 0;
}

static float tensor_amax(lofp_dtype dt, const void *x, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(lofp_load_f32(dt, x, i));
        if (!(a <= amax)) amax = a; /* propagates NaN like torch.amax */
    }
    return amax;
}

float lofp_nvfp4_decode_scale(lofp_dtype dt, const void *x, size_t n)
{
    float amax = tensor_amax(dt, x, n);
    if (!isfinite(amax)) return NAN;
    if (amax < 1e-12f) amax = 1e-12f;
    return amax / 2688.0f;
}

float lofp_nvfp4_global_scale(lofp_dtype dt, const void *x, size_t n)
{
    float amax = tensor_amax(dt, x, n);
    if (!isfinite(amax)) return NAN;
    if (amax < 1e-12f) amax = 1e-12f;
    /* PyTorch evaluates 448 * 6 / amax as amax.reciprocal() * 2688: two roundings. */
    volatile float r = 1.0f / amax;
    return r * 2688.0f;
}

float lofp_nvfp4_encode_from_decode(float decode_scale) { return 1.0f / decode_scale; }
float lofp_nvfp4_decode_from_encode(float encode_scale) { return 1.0f / encode_scale; }

static lofp_status check_common(const lofp_scheme *s, lofp_dtype dt, const void *p, size_t rows,
                                size_t k, const uint8_t *codes, const uint8_t *scales,
                                size_t *kp_out, size_t *n_out)
{
    if (lofp_scheme_validate(s) != LOFP_OK || !valid_dtype(dt)) return LOFP_ERR_INVALID_ARG;
    if (rows == 0 || k == 0) return LOFP_ERR_INVALID_ARG;
    if (!p || !codes || !scales) return LOFP_ERR_INVALID_ARG;
    if (k % s->block != 0 && !s->pad) return LOFP_ERR_SHAPE;
    size_t kp = lofp_padded_k(s, k), n, np;
    if (!kp || !lofp_mul_size(rows, k, &n) || !lofp_mul_size(rows, kp, &np) ||
        !lofp_mul_size(np, 2 * sizeof(float), &np))
        return LOFP_ERR_SIZE_OVERFLOW;
    if (s->id == LOFP_SCHEME_ULTRAQUANT && s->rotate && (kp & (kp - 1)) != 0)
        return LOFP_ERR_SHAPE; /* the Hadamard needs a power-of-two head dim */
    *kp_out = kp;
    *n_out = n;
    return LOFP_OK;
}

static lofp_status quantize_impl(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows,
                                 size_t k, size_t kp, size_t n, float global, uint8_t *codes,
                                 uint8_t *scales, lofp_quant_report *rep)
{
    float *row = malloc(2 * kp * sizeof(float)); /* the row, and scratch for the rotation */
    if (!row) return LOFP_ERR_NOMEM;
    const lofp_family_t *fam = family_of(s);
    size_t code_row_bytes = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    size_t nb = kp / s->block, bad_blocks = 0;
    (void)n;
    for (size_t r = 0; r < rows; r++) {
        for (size_t j = 0; j < k; j++) row[j] = lofp_load_f32(dt, x, r * k + j);
        for (size_t j = k; j < kp; j++) row[j] = 0.0f;
        bad_blocks += fam->quant_row(s, row, kp, global, (uint64_t)r * kp, codes + r * code_row_bytes,
                                     scales + r * nb);
    }
    free(row);
    if (rep) rep->nonfinite_blocks = bad_blocks;
    return LOFP_OK;
}

lofp_status lofp_quantize_with_global(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                      size_t rows, size_t k, float global_scale, uint8_t *codes,
                                      uint8_t *scales, lofp_quant_report *rep)
{
    size_t kp = 0, n = 0;
    lofp_status st = check_common(s, dt, x, rows, k, codes, scales, &kp, &n);
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->logical_k = k;
        rep->padded_k = kp;
    }
    if (st != LOFP_OK) return st;
    if (s->id == LOFP_SCHEME_NVFP4 && !(isfinite(global_scale) && global_scale > 0.0f))
        return LOFP_ERR_INVALID_ARG;
    size_t first = 0;
    if (find_nonfinite(dt, x, n, &first)) {
        if (rep) rep->first_bad_index = first;
        if (!s->propagate_nonfinite || s->id == LOFP_SCHEME_NVFP4) return LOFP_ERR_NONFINITE;
    }
    return quantize_impl(s, dt, x, rows, k, kp, n, global_scale, codes, scales, rep);
}

lofp_status lofp_quantize(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows,
                          size_t k, uint8_t *codes, uint8_t *scales, float *global_scale,
                          lofp_quant_report *rep)
{
    size_t kp = 0, n = 0;
    lofp_status st = check_common(s, dt, x, rows, k, codes, scales, &kp, &n);
    if (st != LOFP_OK) {
        if (rep) { memset(rep, 0, sizeof *rep); rep->logical_k = k; rep->padded_k = kp; }
        return st;
    }
    float global = 1.0f;
    if (s->id == LOFP_SCHEME_NVFP4 && s->two_level) {
        size_t first;
        if (find_nonfinite(dt, x, n, &first)) {
            if (rep) { memset(rep, 0, sizeof *rep); rep->logical_k = k; rep->padded_k = kp;
                       rep->first_bad_index = first; }
            return LOFP_ERR_NONFINITE;
        }
        global = lofp_nvfp4_global_scale(dt, x, n);
    }
    if (global_scale) *global_scale = global;
    return lofp_quantize_with_global(s, dt, x, rows, k, global, codes, scales, rep);
}

lofp_status lofp_dequantize(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                            float global_scale, size_t rows, size_t k, lofp_dtype out_dt, void *out)
{
    size_t kp = 0, n = 0;
    lofp_status st = check_common(s, out_dt, out, rows, k, codes, scales, &kp, &n);
    if (st != LOFP_OK) return st;
    float *row = malloc(kp * sizeof(float));
    if (!row) return LOFP_ERR_NOMEM;
    const lofp_family_t *fam = family_of(s);
    size_t code_row_bytes = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    size_t nb = kp / s->block;
    for (size_t r = 0; r < rows; r++) {
        fam->dequant_row(s, codes + r * code_row_bytes, scales + r * nb, global_scale, kp, row);
        for (size_t j = 0; j < k; j++) lofp_store_f32(out_dt, out, r * k + j, row[j]);
    }
    free(row);
    return LOFP_OK;
}

/*
 * method.h -- quantization methods beyond round-to-nearest: error-minimizing scale search (MSE,
 * optionally importance-weighted) and GPTQ. docs/QUALITY.md explains each method, its candidate
 * sets, its operation order (which an independent implementation must follow to reproduce it bit
 * for bit), its cost and what "deterministic" means here.
 *
 * Every method writes ordinary codes and linear scales of the scheme (the same buffers, sizes and
 * decode formula as lofp_quantize: lofp_codes_bytes / lofp_scales_bytes), so what it writes loads
 * in the same engines and decodes with lofp_dequantize. Only the choice of codes and scales
 * differs from round-to-nearest (RTN). Elements are encoded exactly as lofp_quantize encodes them
 * for the chosen block scale (the scheme's reference op order and element rounding).
 *
 * Every function works on a chunk of rows of a larger tensor, so a converter can stream a tensor
 * in chunks: the NVFP4 per-tensor multiplier (`global_scale`, the encode direction of
 * lofp_nvfp4_global_scale / lofp_profile_nvfp4_global) is given by the caller and never computed
 * here. For one-level NVFP4 and every other scheme pass 1.
 *
 * Supported: NVFP4 (one- and two-level), MXFP4, MXFP6-*, MXFP8-*, MXINT8, tilelang-mxfp8, under
 * LOFP_PROFILE_LOFP, with a non-stochastic element rounding. Everything else returns
 * LOFP_ERR_UNSUPPORTED: producer profiles (their numerics are defined on whole tensors by their
 * producer and have no search), UltraQuant (its per-group scale is a KV-cache store rule, not a
 * weight format), and LOFP_STOCHASTIC rounding (a search over random roundings is not defined).
 * Non-finite input is LOFP_ERR_NONFINITE (report->first_bad_index counts from row 0 of the whole
 * tensor); there is no propagation mode.
 *
 * Conventions of lofp.h hold: caller-owned buffers (the functions allocate only scratch they free
 * before returning: LOFP_ERR_NOMEM if that fails), re-entrant, deterministic (results never
 * depend on s->threads or on how a tensor is cut into row chunks), inputs never modified.
 */
#ifndef LOFP_METHOD_H
#define LOFP_METHOD_H

#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which method chooses the codes and scales (append-only). */
typedef enum lofp_method {
    LOFP_METHOD_RTN = 0,  /* lofp_quantize: the scale rule, then round to nearest */
    LOFP_METHOD_MSE = 1,  /* per block, the scale among the candidates the format allows that
                             minimizes the (importance-weighted) squared error */
    LOFP_METHOD_GPTQ = 2, /* GPTQ over the input Hessian, lofp's quantizer as the grid */
    LOFP_METHOD_COUNT_ = 3
} lofp_method;

/* Name <-> enum: "rtn", "mse", "gptq". The name function returns a static string or NULL; the
 * parse function returns LOFP_OK or LOFP_ERR_NOT_FOUND (LOFP_ERR_INVALID_ARG for NULL). */
LOFP_API const char *lofp_method_name(lofp_method m);
LOFP_API lofp_status lofp_method_from_name(const char *name, lofp_method *out);

/* ------------------------------------------------------------------------------------------ */
/* MSE: per-block scale search                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* The default search window: scale codes within +-2 of each seed (see lofp_mse_quantize_rows). */
#define LOFP_MSE_WINDOW_DEFAULT 2u

/* Quantizes rows [row0, row0 + rows) of a row-major [*, k] tensor (x points at row row0) of
 * dtype dt (F32, BF16, F16), choosing each block's scale code to minimize
 *     sum_j w_j * (x_j - deq_j)^2     (in double, j increasing within the block)
 * where deq_j is exactly what lofp_dequantize returns for the written code and scale, and
 * w = importance[column] (k floats >= 0, e.g. an imatrix diagonal; NULL = all 1; padded columns
 * weigh 0). The candidates, tried in this order, are:
 *   NVFP4: the code RTN picks (UE4M3(bmax/6)), then RTN-1, RTN+1, RTN-2, RTN+2, ... up to
 *          +-window; then the "scale to 4" code UE4M3(bmax/4) (Four over Six) and its +-window
 *          neighbours in the same order; codes outside 0..0x7E are skipped;
 *   MX:    the E8M0 byte the scheme's scale rule picks, then its +-1 ... +-window neighbours, in
 *          0..254.
 * The first candidate with the smallest error wins (strictly smaller replaces), so RTN wins ties
 * and the result's error is never above RTN's. window = 0 tries only the seeds.
 * Writes codes and linear scales laid out as lofp_quantize_rows writes them for these rows, and,
 * when sq_error is non-NULL, *sq_error = the chunk's total weighted error (row sums in row order).
 * `global_scale` is the NVFP4 encode multiplier (1 for one-level NVFP4 and other schemes).
 * `report` may be NULL. Errors: LOFP_ERR_INVALID_ARG (NULL, zero rows or k, negative or NaN
 * importance, NVFP4 global not finite and > 0), LOFP_ERR_SHAPE, LOFP_ERR_UNSUPPORTED (see the
 * file comment), LOFP_ERR_NONFINITE, LOFP_ERR_NOMEM. Threads over rows (s->threads). */
LOFP_API lofp_status lofp_mse_quantize_rows(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                            size_t row0, size_t rows, size_t k,
                                            float global_scale, const float *importance,
                                            unsigned window, uint8_t *codes, uint8_t *scales,
                                            double *sq_error, lofp_quant_report *report);

/* NVFP4 per-tensor scale search, step 1: candidate encode multipliers around `global` (the
 * amax-derived one): out[i] = fl((double)global * 2^(-i/64)) for i in [0, n), so out[0] = global
 * and the set spans a little less than one UE4M3 step below it (a smaller multiplier keeps the
 * largest block clear of UE4M3 saturation and shifts every block's scale grid). Pure. */
LOFP_API void lofp_mse_nvfp4_global_candidates(float global, size_t n, float *out);

/* NVFP4 per-tensor scale search, step 2: for each of `ncand` candidate multipliers, adds to
 * err[c] the total weighted error lofp_mse_quantize_rows reports for these rows with that
 * multiplier (same arguments as there; nothing else is written). Call it once per row chunk of
 * the whole tensor with err zeroed first, then pick the candidate of least error (the first on a
 * tie, so the amax-derived out[0] wins ties) and quantize every chunk with it: memory stays
 * bounded by one chunk, cost is ncand MSE passes. Sums are in a fixed order (chunk by chunk as
 * the caller calls, rows in order), so the choice is deterministic for a given chunking.
 * Errors as lofp_mse_quantize_rows, and LOFP_ERR_INVALID_ARG for a non-NVFP4 scheme, NULL err or
 * candidates, or a candidate not finite and > 0. */
LOFP_API lofp_status lofp_mse_nvfp4_global_error(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                                 size_t rows, size_t k, const float *importance,
                                                 unsigned window, const float *candidates,
                                                 size_t ncand, double *err);

/* ------------------------------------------------------------------------------------------ */
/* GPTQ                                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* GPTQ settings. Fill with lofp_gptq_options_init, then adjust. */
typedef struct lofp_gptq_options {
    double damp;          /* H += damp * mean(diag H) * I (default 0.01) */
    int act_order;        /* visit columns by descending diag H (stable), default 0 */
    uint32_t lazy_block;  /* columns per lazy update block (default 128, >= 1) */
    int mse_scales;       /* 0 (default): block scales by the scheme's rule; 1: by the MSE search,
                             weighted by diag H, over the block's values when it is fixed */
    unsigned mse_window;  /* window of that search (default LOFP_MSE_WINDOW_DEFAULT) */
    unsigned threads;     /* worker threads of lofp_gptq_prepare (default 1; the sweep uses
                             s->threads). Results never depend on it. */
} lofp_gptq_options;

/* Fills *o with the defaults above. */
LOFP_API void lofp_gptq_options_init(lofp_gptq_options *o);

/* What lofp_gptq_prepare computes once per tensor (or per group of tensors sharing one input,
 * like fused q/k/v) and every lofp_gptq_quantize_rows call reads. The caller allocates the four
 * arrays (k*k floats for u, k of the others) and sets k; prepare fills them. */
typedef struct lofp_gptq_factor {
    size_t k;
    float *u;        /* [k * k] row-major, in sweep order: the upper Cholesky factor of the
                        damped, permuted H^-1 rounded to fp32 (zeros below the diagonal) */
    uint32_t *perm;  /* [k] sweep position -> column (identity without act_order) */
    uint8_t *dead;   /* [k] per column: 1 where H_ii == 0 (those weights are zeroed) */
    float *hdiag;    /* [k] per column: diag H with dead columns set to 1, before damping (the
                        MSE weights of mse_scales) */
} lofp_gptq_factor;

/* Prepares GPTQ for a layer whose input Hessian is h ([k, k] row-major fp32, H = X^T X,
 * symmetric; the entries h[perm[a]][perm[b]] with a <= b are read off the diagonal) with options
 * o (NULL = defaults). In double, plain loops in the order docs/QUALITY.md fixes: dead columns
 * get H_ii = 1; act-order permutation; damping; H = V V^T with V upper triangular (a Cholesky
 * factorization run from the last column to the first); U = V^-1, which is the upper Cholesky
 * factor of H^-1 (H^-1 = U^T U) that GPTQ uses; f->u = fp32(U).
 * Returns LOFP_OK; LOFP_ERR_INVALID_ARG for NULL pointers, k == 0 or f->k != k, a non-finite
 * entry of h, a negative or non-finite damp, or an H that is not positive definite after damping
 * (a pivot <= 0, or a factor that over- or underflows fp32; the caller names the layer);
 * LOFP_ERR_SIZE_OVERFLOW when k * k doubles are not addressable; LOFP_ERR_NOMEM when its scratch
 * (k * k doubles) cannot be allocated. On error f's arrays may be partly written. Threads:
 * o->threads (results never depend on it); re-entrant. */
LOFP_API lofp_status lofp_gptq_prepare(const float *h, size_t k, const lofp_gptq_options *o,
                                       lofp_gptq_factor *f);

/* GPTQ-quantizes rows [row0, row0 + rows) of a weight [*, k] (x points at row row0; rows are
 * output features, k input features) with the factor f of its input Hessian and options o (NULL
 * = defaults; act_order and damp were used by prepare and are not read here). Per row, in fp32:
 * columns are visited in sweep order; a format block's scale is fixed, by the scheme's rule (or
 * the MSE search when o->mse_scales), from the block's current working values when the sweep
 * first enters it; each weight is encoded with lofp's element encoder at its block's scale, its
 * error err = (w - deq) / U_tt is spread over the later columns of the lazy block at once
 * (w_j -= err * U_tj) and over the columns after the lazy block when it ends (w_j -= sum_t
 * err_t * U_tj, summed in increasing t). Writes codes and linear scales exactly as
 * lofp_quantize_rows lays them out. `global_scale` as for lofp_mse_quantize_rows. `report` may be
 * NULL. Errors: LOFP_ERR_INVALID_ARG (NULL, f->k != k, lazy_block 0, bad global), LOFP_ERR_SHAPE,
 * LOFP_ERR_UNSUPPORTED (see the file comment), LOFP_ERR_NONFINITE, LOFP_ERR_NOMEM. Threads over
 * rows (s->threads); rows are independent, so results do not depend on threads or chunking. */
LOFP_API lofp_status lofp_gptq_quantize_rows(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                             size_t row0, size_t rows, size_t k,
                                             float global_scale, const lofp_gptq_factor *f,
                                             const lofp_gptq_options *o, uint8_t *codes,
                                             uint8_t *scales, lofp_quant_report *report);

/* ------------------------------------------------------------------------------------------ */
/* One entry for pipelines                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* A tensor's method and what it reads, for pipelines that quantize tensors in row chunks
 * whatever the method (lofp convert, lofp quantize). The pointed-to arrays are the caller's and
 * must outlive the calls that use the plan. */
typedef struct lofp_method_plan {
    lofp_method method;              /* LOFP_METHOD_RTN, _MSE or _GPTQ */
    const float *importance;         /* MSE: k weights >= 0 (an imatrix diagonal) or NULL */
    unsigned window;                 /* MSE search window (LOFP_MSE_WINDOW_DEFAULT) */
    const lofp_gptq_factor *factor;  /* GPTQ: the tensor's lofp_gptq_prepare result */
    const lofp_gptq_options *gptq;   /* GPTQ options (NULL = defaults) */
} lofp_method_plan;

/* Quantizes rows [row0, row0 + rows) of a [*, k] tensor by plan p: RTN (p NULL or method RTN)
 * is lofp_quantize_rows, MSE lofp_mse_quantize_rows, GPTQ lofp_gptq_quantize_rows, with the same
 * arguments, outputs and errors as those (LOFP_ERR_INVALID_ARG for an unknown method or a GPTQ
 * plan without a factor). Re-entrant. */
LOFP_API lofp_status lofp_method_quantize_rows(const lofp_scheme *s, const lofp_method_plan *p,
                                               lofp_dtype dt, const void *x, size_t row0,
                                               size_t rows, size_t k, float global_scale,
                                               uint8_t *codes, uint8_t *scales,
                                               lofp_quant_report *report);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_METHOD_H */

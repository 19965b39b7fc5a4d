/* ck_method.h -- the quantization method of a checkpoint pipeline (lofp/method.h) and the
 * statistics file it reads (lofp/calib.h), turned into one tensor's lofp_method_plan. Shared by
 * every quantizing path of src/checkpoint (convert to the safetensors formats and to GGUF, and
 * lofp's tensor files), so none of them holds a switch over methods. Internal. */
#ifndef LOFP_CK_METHOD_H
#define LOFP_CK_METHOD_H

#include "ck_internal.h"
#include "lofp/calib.h"
#include "lofp/method.h"

/* The pipeline's method: opened once, read by every tensor (immutable after open, so the
 * converter's threads share it). */
typedef struct ck_method {
    lofp_method method;
    lofp_calib *calib;          /* NULL: no statistics (RTN, or MSE unweighted) */
    const char *path;           /* the statistics file, for messages */
    lofp_gptq_options gptq;
} ck_method;

/* One tensor's plan and the arrays it points at (owned; lofp_ck_plan_release frees them). */
typedef struct ck_plan {
    lofp_method_plan p;
    float *importance;
    lofp_gptq_factor f;
} ck_plan;

/* Opens the method: `calibration` (may be NULL) is lofp's calibration file or llama.cpp's
 * imatrix. GPTQ needs lofp's Hessian file; MSE reads the diagonal of either as importance. A
 * method other than RTN under a producer profile, GPTQ without a Hessian file, and a file given
 * with RTN are refused (LOFP_ERR_INVALID_ARG / LOFP_ERR_UNSUPPORTED) with a message. */
LOFP_INTERNAL lofp_status lofp_ck_method_open(ck_method *m, lofp_method method, const char *calibration,
                                              double damp, int act_order, int mse_scales, lofp_profile profile,
                                              unsigned threads, lofp_io_error *err);
LOFP_INTERNAL void lofp_ck_method_close(ck_method *m);

/* The plan of weight `tensor` (its checkpoint name) with `k` input features: RTN needs nothing;
 * MSE reads the tensor's importance when a file is open; GPTQ reads its Hessian and prepares the
 * factor (k*k floats). A missing layer, a file of another model (k differs), bad values and a
 * singular Hessian are errors naming the file and the tensor. Thread-safe on one ck_method. */
LOFP_INTERNAL lofp_status lofp_ck_method_plan(const ck_method *m, const char *tensor, size_t k, ck_plan *out,
                                              lofp_io_error *err);
LOFP_INTERNAL void lofp_ck_plan_release(ck_plan *p);

/* Quantizes a whole fp32 tensor [rows, k] by plan p (the GGUF writers hold tensors whole): RTN
 * is lofp_quantize; the other methods first take the NVFP4 per-tensor multiplier lofp_quantize
 * would compute (two-level), then run over every row. *G receives the multiplier (1 for other
 * schemes). Input with NaN or Inf goes to lofp_quantize, whose report names the first bad index.
 * Statuses as lofp_quantize. */
LOFP_INTERNAL lofp_status lofp_ck_quantize_whole(const lofp_scheme *s, const lofp_method_plan *p, const float *x,
                                                 size_t rows, size_t k, uint8_t *codes, uint8_t *scales, float *G,
                                                 lofp_quant_report *rep);

#endif

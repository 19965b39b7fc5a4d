/* generic_kernels.h -- the portable kernels (no intrinsics) that fill every kernel-table entry
 * before an ISA overrides it, and the few portable helpers ISA kernels call for cold paths. */
#ifndef LOFP_GENERIC_KERNELS_H
#define LOFP_GENERIC_KERNELS_H

#include "dispatch.h"
#include "kernel_util.h"

/* 256-entry table of lofp_decode(t, code) for an element type of <= 8 bits (thread-safe). */
LOFP_INTERNAL const float *lofp_decode_table(lofp_elem t);

LOFP_INTERNAL size_t lofp_nvfp4_quant_row_generic(const lofp_scheme *s, const float *x, size_t kp,
                                                  float global, uint64_t base, uint8_t *codes,
                                                  uint8_t *scales, float *scratch);
LOFP_INTERNAL void lofp_nvfp4_dequant_row_generic(const lofp_scheme *s, const uint8_t *codes,
                                                  const uint8_t *scales, float global, size_t kp,
                                                  float *out, unsigned flags);
LOFP_INTERNAL size_t lofp_mx_quant_row_generic(const lofp_scheme *s, const float *x, size_t kp,
                                               float global, uint64_t base, uint8_t *codes,
                                               uint8_t *scales, float *scratch);
LOFP_INTERNAL void lofp_mx_dequant_row_generic(const lofp_scheme *s, const uint8_t *codes,
                                               const uint8_t *scales, float global, size_t kp,
                                               float *out, unsigned flags);
LOFP_INTERNAL size_t lofp_uq_quant_row_generic(const lofp_scheme *s, const float *x, size_t kp,
                                               float global, uint64_t base, uint8_t *codes,
                                               uint8_t *scales, float *scratch);
LOFP_INTERNAL void lofp_uq_dequant_row_generic(const lofp_scheme *s, const uint8_t *codes,
                                               const uint8_t *scales, float global, size_t kp,
                                               float *out, unsigned flags);

/* UltraQuant group quantizer over an already rotated row (shared by every variant's cold path). */
LOFP_INTERNAL size_t lofp_uq_groups_generic(const lofp_scheme *s, const float *v, size_t kp,
                                            uint8_t *codes, uint8_t *scales);

/* The reference's dense Hadamard y = x @ H^T (sequential fp32 sum over j, no FMA), computed for
 * eight outputs at a time with the same operations in the same order. x and y must not overlap. */
LOFP_INTERNAL void lofp_hadamard_dense_generic(const float *x, float *y, size_t d);

/* Stochastic element coding, the reference's scalar path: codes for n values e[i] with flat
 * indices base + i, written at element offset `at` of a code row. */
LOFP_INTERNAL void lofp_stochastic_codes(const lofp_scheme *s, const float *e, size_t n,
                                         uint64_t base, uint8_t *codes, size_t at);

LOFP_INTERNAL int lofp_scan_generic(lofp_dtype dt, const void *x, size_t n, float *amax,
                                    size_t *first_bad);
LOFP_INTERNAL void lofp_load_row_generic(lofp_dtype dt, const void *x, size_t n, float *out);
LOFP_INTERNAL void lofp_store_row_generic(lofp_dtype dt, const float *x, size_t n, void *out);

/* E2M1 codes of 32 values e[i] (kq_e2m1_code), packed into 16 bytes. Written as two fixed-length
 * loops over local arrays so that compilers vectorise them with the baseline ISA (SSE2, NEON). */
static inline void kq_e2m1_pack32(const int32_t thr[7], const float e[32], uint8_t dst[16])
{
    uint32_t c[32];
    for (int i = 0; i < 32; i++) {
        uint32_t u = lofp_f32_bits(e[i]);
        int32_t a = (int32_t)(u & 0x7FFFFFFFu);
        c[i] = (uint32_t)(a > thr[0]) + (uint32_t)(a > thr[1]) + (uint32_t)(a > thr[2]) +
               (uint32_t)(a > thr[3]) + (uint32_t)(a > thr[4]) + (uint32_t)(a > thr[5]) +
               (uint32_t)(a > thr[6]) + ((u >> 28) & 8u);
    }
    for (int i = 0; i < 16; i++) dst[i] = (uint8_t)(c[2 * i] | (c[2 * i + 1] << 4));
}

/* Index of the first non-finite among n fp32 values, or n. */
static inline size_t kq_first_nonfinite_f32(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((lofp_f32_bits(x[i]) & 0x7FFFFFFFu) >= 0x7F800000u) return i;
    return n;
}

#endif

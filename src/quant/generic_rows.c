/* generic_rows.c -- portable tensor-wide helpers: the fused amax + non-finite scan and the
 * dtype <-> fp32 row conversions (bit-identical to lofp_load_f32 / lofp_store_f32), plus the
 * generic kernel table. */
#include "generic_kernels.h"

/* max |x| by the magnitude bits: for sign-magnitude floats (fp32, bf16, fp16) the integer order
 * of the magnitudes is the float order and NaN/Inf sort above every finite value, so one integer
 * max both finds amax and says whether a non-finite value exists; chunks of 256 keep the exit
 * test out of the inner loop. */
#define SCAN_CHUNK 256

int lofp_scan_generic(lofp_dtype dt, const void *x, size_t n, float *amax, size_t *first_bad)
{
    if (dt == LOFP_DTYPE_F32) {
        const float *p = x;
        uint32_t mx = 0;
        for (size_t i0 = 0; i0 < n; i0 += SCAN_CHUNK) {
            size_t m = n - i0 < SCAN_CHUNK ? n - i0 : SCAN_CHUNK;
            uint32_t cm = 0;
            for (size_t i = 0; i < m; i++) {
                uint32_t a = lofp_f32_bits(p[i0 + i]) & 0x7FFFFFFFu;
                cm = a > cm ? a : cm;
            }
            if (LOFP_UNLIKELY(cm >= 0x7F800000u)) {
                *first_bad = i0 + kq_first_nonfinite_f32(p + i0, m);
                return 1;
            }
            mx = cm > mx ? cm : mx;
        }
        *amax = lofp_bits_f32(mx);
        return 0;
    }
    const uint16_t *h = x;
    const uint16_t inf = dt == LOFP_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
    uint16_t mx = 0;
    for (size_t i0 = 0; i0 < n; i0 += SCAN_CHUNK) {
        size_t m = n - i0 < SCAN_CHUNK ? n - i0 : SCAN_CHUNK;
        uint16_t cm = 0;
        for (size_t i = 0; i < m; i++) {
            uint16_t a = h[i0 + i] & 0x7FFFu;
            cm = a > cm ? a : cm;
        }
        if (LOFP_UNLIKELY(cm >= inf)) {
            for (size_t i = 0; i < m; i++)
                if ((h[i0 + i] & 0x7FFFu) >= inf) { *first_bad = i0 + i; return 1; }
        }
        mx = cm > mx ? cm : mx;
    }
    *amax = dt == LOFP_DTYPE_BF16 ? lofp_bits_f32((uint32_t)mx << 16) : lofp_fp16_to_fp32(mx);
    return 0;
}

/* fp16 -> fp32: the fp16 fields placed in an fp32 and scaled by 2^112 (exact, subnormals
 * included); Inf keeps its bits, NaN becomes sign | 0x7FC00000 as lofp_fp16_to_fp32 writes. */
static inline float fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7FFFu;
    uint32_t fin = lofp_f32_bits(lofp_bits_f32(em << 13) * 0x1p112f);
    uint32_t bits = em < 0x7C00u ? fin : em == 0x7C00u ? 0x7F800000u : 0x7FC00000u;
    return lofp_bits_f32(bits | sign);
}

/* fp32 -> fp16, RNE with IEEE overflow (lofp_fp32_to_fp16): every raw code past 0x7BFF means
 * the value rounded beyond 65504, i.e. Inf. */
static inline uint16_t f32_to_fp16(float f)
{
    const kq_mf p = { 10, 113, 0x7BFF };
    uint32_t u = lofp_f32_bits(f), a = u & 0x7FFFFFFFu, sign = (u >> 16) & 0x8000u;
    if (a > 0x7F800000u) return (uint16_t)(0x7E00u | sign);
    uint32_t mag = kq_mf_mag_raw(p, a, LOFP_RNE);
    return (uint16_t)((mag > 0x7C00u ? 0x7C00u : mag) | sign);
}

void lofp_load_row_generic(lofp_dtype dt, const void *x, size_t n, float *out)
{
    if (dt == LOFP_DTYPE_F32) { memcpy(out, x, n * sizeof(float)); return; }
    const uint16_t *h = x;
    if (dt == LOFP_DTYPE_BF16)
        for (size_t i = 0; i < n; i++) out[i] = lofp_bits_f32((uint32_t)h[i] << 16);
    else
        for (size_t i = 0; i < n; i++) out[i] = fp16_to_f32(h[i]);
}

void lofp_store_row_generic(lofp_dtype dt, const float *x, size_t n, void *out)
{
    if (dt == LOFP_DTYPE_F32) { memcpy(out, x, n * sizeof(float)); return; }
    uint16_t *h = out;
    if (dt == LOFP_DTYPE_BF16)
        for (size_t i = 0; i < n; i++) h[i] = lofp_fp32_to_bf16(x[i]);
    else
        for (size_t i = 0; i < n; i++) h[i] = f32_to_fp16(x[i]);
}

void lofp_kernels_init_generic(lofp_kernel_table *t)
{
    t->isa = "generic";
    t->quant[LOFP_KFAM_NVFP4] = (lofp_quant_kernels){ "generic", lofp_nvfp4_quant_row_generic,
                                                      lofp_nvfp4_dequant_row_generic };
    t->quant[LOFP_KFAM_MX] = (lofp_quant_kernels){ "generic", lofp_mx_quant_row_generic,
                                                   lofp_mx_dequant_row_generic };
    t->quant[LOFP_KFAM_UQ] = (lofp_quant_kernels){ "generic", lofp_uq_quant_row_generic,
                                                   lofp_uq_dequant_row_generic };
    t->scan = lofp_scan_generic;
    t->load_row = lofp_load_row_generic;
    t->store_row = lofp_store_row_generic;
}

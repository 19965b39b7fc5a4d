/* dispatch.h -- the CPU kernel table: one struct of function pointers per instruction set, filled
 * from the portable "generic" kernels and then overridden entry by entry by the ISA files
 * (src/quant/x86/<name>_avx2.c) the CPU supports. Resolved once; docs/QUANT.md describes the contracts.
 *
 * Adding kernels (e.g. GEMV/GEMM): append fields at the end of lofp_kernel_table (never reorder),
 * fill them in an init function of your own for each ISA, and call it from lofp_kernels_build()
 * in dispatch.c next to the quantize ones. Every entry must be non-NULL after the generic init. */
#ifndef LOFP_DISPATCH_H
#define LOFP_DISPATCH_H

#include "core/traits.h"

/* Which family a scheme id belongs to. */
LOFP_INTERNAL lofp_kfamily lofp_kfamily_of(lofp_scheme_id id);

/* Quantizes one row. `x` holds kp fp32 values (the padded row, zero tail) and is read-only: for
 * fp32 input without padding it points into the caller's tensor, which may be misaligned.
 * `scratch` holds 2 * kp floats the kernel may use (the UltraQuant rotation). `base` is the flat
 * index of x[0] in the padded tensor (stochastic rounding bits). Writes the row's codes (packed
 * for FP4) and linear scales, bit-identical to the reference row kernel of the family.
 * Returns the number of blocks counted as non-finite: blocks holding a non-finite input value
 * (NVFP4 blocks too, whose outputs are then unspecified: the driver reports an error), and for
 * UltraQuant with rotation the groups that are non-finite after the rotation (which includes
 * every group of a row with a non-finite input, and groups an overflowing rotation made Inf). */
typedef size_t (*lofp_kquant_row_fn)(const lofp_scheme *s, const float *x, size_t kp, float global,
                                     uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch);

/* Dequantizes one row of kp values to fp32 (out may be misaligned). Bit-identical to the
 * reference row kernel on every code and scale byte. `flags` are LOFP_KFLAG_* hints. */
typedef void (*lofp_kdequant_row_fn)(const lofp_scheme *s, const uint8_t *codes,
                                     const uint8_t *scales, float global, size_t kp, float *out,
                                     unsigned flags);

/* The output will not be read again soon (it is larger than the caches): a kernel may write it
 * with non-temporal stores, which skip reading each line before overwriting it. The kernel then
 * ends with a store fence, so the data are visible like ordinary stores once it returns. */
#define LOFP_KFLAG_STREAM 1u

/* fp32 dequantize outputs larger than this many bytes get LOFP_KFLAG_STREAM (tests move it). */
LOFP_INTERNAL extern size_t lofp_dequant_stream_bytes;

/* Fused tensor scan: max |x| over n elements of dtype dt (what PyTorch's amax gives for finite
 * data) and the index of the first NaN/Inf. Returns 1 when a non-finite value exists (then
 * *first_bad is its index and *amax is unspecified), else 0 with *amax set. */
typedef int (*lofp_kscan_fn)(lofp_dtype dt, const void *x, size_t n, float *amax, size_t *first_bad);

/* dtype <-> fp32 row conversions, bit-identical to lofp_load_f32 / lofp_store_f32 (NaN: the
 * canonical quiet NaN with the input's sign, as lofp_fp16_to_fp32 / lofp_fp32_to_fp16 write). */
typedef void (*lofp_kload_row_fn)(lofp_dtype dt, const void *x, size_t n, float *out);
typedef void (*lofp_kstore_row_fn)(lofp_dtype dt, const float *x, size_t n, void *out);

typedef struct lofp_quant_kernels {
    const char *name; /* variant name reported by lofp_kernel_name(): "reference", "generic", "avx2" */
    lofp_kquant_row_fn quant_row;
    lofp_kdequant_row_fn dequant_row;
} lofp_quant_kernels;

typedef struct lofp_kernel_table {
    const char *isa; /* the best ISA this table was built for: "reference", "generic", "avx2" */
    lofp_quant_kernels quant[LOFP_KFAM_COUNT_];
    lofp_kscan_fn scan;
    lofp_kload_row_fn load_row;
    lofp_kstore_row_fn store_row;
    /* ---- entries added by other kernel groups go below this line ---- */
} lofp_kernel_table;

/* The table for this CPU (lofp_cpu_features(), so LOFP_DISABLE_CPU_FEATURES applies), built on
 * first use and then immutable. Thread-safe. */
LOFP_INTERNAL const lofp_kernel_table *lofp_kernels(void);

/* Fills *t as the table for a CPU with exactly `features` (LOFP_CPU_* bits): the generic kernels,
 * overridden by every ISA variant those features allow. Tests use it to run each variant side by
 * side; features = 0 gives the generic table. */
LOFP_INTERNAL void lofp_kernels_build(uint32_t features, lofp_kernel_table *t);

/* The table of the reference row kernels (src/quant/quant_*.c, the oracle) behind the same driver:
 * scalar scan and conversions. Immutable, static. */
LOFP_INTERNAL const lofp_kernel_table *lofp_kernels_reference(void);

/* Per-ISA initialisers: generic fills every entry; the others override what they implement. */
LOFP_INTERNAL void lofp_kernels_init_generic(lofp_kernel_table *t);
#if defined(__x86_64__) || defined(__i386__)
LOFP_INTERNAL void lofp_kernels_init_avx2(lofp_kernel_table *t);
/* x86/kernels_avx512.c: overrides entries of an AVX2 table with 512-bit kernels. */
LOFP_INTERNAL void lofp_kernels_init_avx512(lofp_kernel_table *t);
#endif

/* The quantize / dequantize drivers with an explicit table (the public functions pass
 * lofp_kernels()). `global_in` < 0 means "compute" (two-level NVFP4 via the fused scan, 1.0
 * otherwise, as lofp_quantize does); otherwise it is the given multiplier as in
 * lofp_quantize_with_global. Same statuses, report and outputs as the public functions. */
LOFP_INTERNAL lofp_status lofp_quantize_table(const lofp_kernel_table *kt, const lofp_scheme *s,
                                              lofp_dtype dt, const void *x, size_t rows, size_t k,
                                              int compute_global, float global_in, uint8_t *codes,
                                              uint8_t *scales, float *global_out,
                                              lofp_quant_report *rep);
LOFP_INTERNAL lofp_status lofp_dequantize_table(const lofp_kernel_table *kt, const lofp_scheme *s,
                                                const uint8_t *codes, const uint8_t *scales,
                                                float global, size_t rows, size_t k,
                                                lofp_dtype out_dt, void *out);

#endif

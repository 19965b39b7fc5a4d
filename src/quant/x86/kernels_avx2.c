/* kernels_avx2.c -- installs the AVX2 variants into a kernel table. Called by dispatch.c only
 * after lofp_cpu_features() reported AVX2, FMA and F16C: every function reachable from here,
 * this one included, may contain AVX2 instructions. */
#include "quant/dispatch.h"

LOFP_INTERNAL void lofp_kernels_init_nvfp4_avx2(lofp_kernel_table *t);
LOFP_INTERNAL void lofp_kernels_init_mx_avx2(lofp_kernel_table *t);
LOFP_INTERNAL void lofp_kernels_init_uq_avx2(lofp_kernel_table *t);
LOFP_INTERNAL void lofp_kernels_init_rows_avx2(lofp_kernel_table *t);

void lofp_kernels_init_avx2(lofp_kernel_table *t)
{
    t->isa = "avx2";
    lofp_kernels_init_nvfp4_avx2(t);
    lofp_kernels_init_mx_avx2(t);
    lofp_kernels_init_uq_avx2(t);
    lofp_kernels_init_rows_avx2(t);
}

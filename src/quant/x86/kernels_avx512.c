/* kernels_avx512.c -- installs the 512-bit variants over the AVX2 ones in a kernel table. Called
 * by dispatch.c only after lofp_cpu_features() reported the AVX2 level and AVX-512 F/BW/VL +
 * VBMI: every function reachable from here may contain those instructions. */
#include "quant/dispatch.h"

LOFP_INTERNAL void lofp_kernels_init_nvfp4_avx512(lofp_kernel_table *t);
LOFP_INTERNAL void lofp_kernels_init_mx_avx512(lofp_kernel_table *t);
LOFP_INTERNAL void lofp_kernels_init_uq_avx512(lofp_kernel_table *t);

void lofp_kernels_init_avx512(lofp_kernel_table *t)
{
    t->isa = "avx512";
    lofp_kernels_init_nvfp4_avx512(t);
    lofp_kernels_init_mx_avx512(t);
    lofp_kernels_init_uq_avx512(t);
}

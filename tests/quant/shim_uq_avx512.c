/* shim_uq_avx512.c -- part of test_uq_rotation: compiles src/quant/x86/uq_avx512.c into the test
 * (with the library's AVX-512 flags) so that its static butterfly can be compared with the
 * reference rotation value by value. The kernel's quantize only exposes 4-bit codes, which an
 * ulp-level difference in a rotated value almost never changes. Call only on a CPU with the
 * AVX-512 level of src/quant/dispatch.c. */
#include <stddef.h>

/* the kernel file's one external symbol, renamed so that it cannot clash with the library's */
#define lofp_kernels_init_uq_avx512 shim_kernels_init_uq_avx512
#include "quant/x86/uq_avx512.c"

void shim_butterfly_avx512(float *x, size_t d);
void shim_kernels_init_uq_avx512(lofp_kernel_table *t);

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)
void shim_butterfly_avx512(float *x, size_t d) { butterfly_avx512(x, d); }
#else
void shim_butterfly_avx512(float *x, size_t d) { (void)x; (void)d; }
#endif

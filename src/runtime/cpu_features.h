/* cpu_features.h -- run-time CPU feature detection, read once, maskable for tests.
 * LOFP_DISABLE_CPU_FEATURES="avx2,fma,f16c" (or "all") hides features so that every kernel
 * variant can be tested on one machine (libdeflate's LIBDEFLATE_DISABLE_CPU_FEATURES). */
#ifndef LOFP_CPU_FEATURES_H
#define LOFP_CPU_FEATURES_H

#include "core/core.h"

#define LOFP_CPU_AVX2 (1u << 0)
#define LOFP_CPU_FMA (1u << 1)
#define LOFP_CPU_F16C (1u << 2)
#define LOFP_CPU_AVX512F (1u << 3)
#define LOFP_CPU_AVX512BW (1u << 4)
#define LOFP_CPU_AVX512VL (1u << 5)
#define LOFP_CPU_AVX512VNNI (1u << 6) /* vpdpbusd */
#define LOFP_CPU_AVX512BF16 (1u << 7) /* vdpbf16ps */
#define LOFP_CPU_AVX512VBMI (1u << 8) /* vpermb */

/* The AVX-512 level the 512-bit kernels are written for (and compiled with, *_avx512.c):
 * F + BW + VL. VNNI / BF16 / VBMI kernels check their own bit on top. */
#define LOFP_CPU_AVX512_BASE (LOFP_CPU_AVX512F | LOFP_CPU_AVX512BW | LOFP_CPU_AVX512VL)

/* Returns the usable feature bits (CPUID and the OS's XSAVE support, minus those masked by
 * LOFP_DISABLE_CPU_FEATURES). Computed once; thread-safe (every thread stores the same value). */
LOFP_INTERNAL uint32_t lofp_cpu_features(void);

/* Re-reads the environment (tests only: call before any kernel is resolved). */
LOFP_INTERNAL void lofp_cpu_features_reset(void);

#endif

/* cpu_features.c -- CPUID + XGETBV (the OS must save YMM/ZMM state), then the environment mask. */
#include "cpu_features.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static uint32_t detect(void)
{
    uint32_t a, b, c, d, f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx) return 0;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 6) != 6) return 0; /* XMM and YMM state */
    if (fma) f |= LOFP_CPU_FMA;
    if (f16c) f |= LOFP_CPU_F16C;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if ((b >> 5) & 1) f |= LOFP_CPU_AVX2;
        if ((xcr0 & 0xE0) == 0xE0) { /* opmask, ZMM_Hi256, Hi16_ZMM */
            if ((b >> 16) & 1) f |= LOFP_CPU_AVX512F;
            if ((b >> 30) & 1) f |= LOFP_CPU_AVX512BW;
            if ((b >> 31) & 1) f |= LOFP_CPU_AVX512VL;
            if ((c >> 11) & 1) f |= LOFP_CPU_AVX512VNNI;
            if ((c >> 1) & 1) f |= LOFP_CPU_AVX512VBMI;
            uint32_t a1, b1, c1, d1;
            if (a >= 1) { /* leaf 7 sub-leaf 1: EAX bit 5 = AVX512_BF16 */
                __cpuid_count(7, 1, a1, b1, c1, d1);
                if ((a1 >> 5) & 1) f |= LOFP_CPU_AVX512BF16;
            }
        }
    }
    return f;
}
#else
static uint32_t detect(void) { return 0; }
#endif

static uint32_t mask_from_env(void)
{
    const char *e = getenv("LOFP_DISABLE_CPU_FEATURES");
    if (!e || !*e) return 0;
    static const struct { const char *name; uint32_t bit; } names[] = {
        { "avx2", LOFP_CPU_AVX2 }, { "fma", LOFP_CPU_FMA }, { "f16c", LOFP_CPU_F16C },
        { "avx512f", LOFP_CPU_AVX512F }, { "avx512bw", LOFP_CPU_AVX512BW },
        { "avx512vl", LOFP_CPU_AVX512VL }, { "avx512vnni", LOFP_CPU_AVX512VNNI },
        { "avx512bf16", LOFP_CPU_AVX512BF16 }, { "avx512vbmi", LOFP_CPU_AVX512VBMI },
        /* every AVX-512 bit: the AVX2 kernels run */
        { "avx512", LOFP_CPU_AVX512F | LOFP_CPU_AVX512BW | LOFP_CPU_AVX512VL | LOFP_CPU_AVX512VNNI |
                        LOFP_CPU_AVX512BF16 | LOFP_CPU_AVX512VBMI },
        { "all", 0xFFFFFFFFu },
    };
    uint32_t m = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *p = e;
        size_t n = strlen(names[i].name);
        while ((p = strstr(p, names[i].name)) != NULL) {
            int start = p == e || p[-1] == ',' || p[-1] == ' ';
            int end = p[n] == 0 || p[n] == ',' || p[n] == ' ';
            if (start && end) m |= names[i].bit;
            p += n;
        }
    }
    return m;
}

static volatile uint32_t cached; /* bit 31 set once computed */

uint32_t lofp_cpu_features(void)
{
    uint32_t v = cached;
    if (v & 0x80000000u) return v & 0x7FFFFFFFu;
    v = detect() & ~mask_from_env() & 0x7FFFFFFFu;
    cached = v | 0x80000000u;
    return v;
}

void lofp_cpu_features_reset(void) { cached = 0; }

/* dispatch.c -- builds and resolves the kernel table (dispatch.h), wraps the reference row
 * kernels as a table of their own (the oracle the tests and benchmarks compare against), and
 * answers lofp_kernel_name(). */
#include <math.h>
#include <pthread.h>

#include "runtime/cpu_features.h"
#include "dispatch.h"
#include "generic_kernels.h"
#include "reference.h"

lofp_kfamily lofp_kfamily_of(lofp_scheme_id id) { return lofp_scheme_traits[id].family; }

/* The x86 variants need all three: AVX2 integer ops, F16C conversions; FMA is part of the set
 * every AVX2 CPU has and is required so that one mask names the level (no kernel contracts). */
#define LOFP_AVX2_LEVEL (LOFP_CPU_AVX2 | LOFP_CPU_FMA | LOFP_CPU_F16C)
/* The 512-bit variants (on top of the AVX2 ones): AVX-512 F/BW/VL and VBMI (vpermb/vpermi2b). */
#define LOFP_AVX512_LEVEL (LOFP_CPU_AVX512_BASE | LOFP_CPU_AVX512VBMI)

void lofp_kernels_build(uint32_t features, lofp_kernel_table *t)
{
    memset(t, 0, sizeof *t);
    lofp_kernels_init_generic(t);
#if defined(__x86_64__) || defined(__i386__)
    if ((features & LOFP_AVX2_LEVEL) == LOFP_AVX2_LEVEL) {
        lofp_kernels_init_avx2(t);
        if ((features & LOFP_AVX512_LEVEL) == LOFP_AVX512_LEVEL) lofp_kernels_init_avx512(t);
    }
#else
    (void)features;
#endif
}

static lofp_kernel_table resolved;
static pthread_once_t resolved_once = PTHREAD_ONCE_INIT;

static void resolve(void) { lofp_kernels_build(lofp_cpu_features(), &resolved); }

const lofp_kernel_table *lofp_kernels(void)
{
    pthread_once(&resolved_once, resolve);
    return &resolved;
}

const char *lofp_kernel_name(lofp_scheme_id id, lofp_kernel_op op)
{
    if ((int)id <= 0 || id >= LOFP_SCHEME_COUNT_) return NULL;
    if (op != LOFP_KERNEL_QUANTIZE && op != LOFP_KERNEL_DEQUANTIZE) return NULL;
    const char *name = lofp_kernels()->quant[lofp_kfamily_of(id)].name;
    /* the 512-bit MX kernels serve quantize of MXFP4, MXFP6, MXFP8 and MXINT8 (RNE), not
     * stochastic, and every dequantize, for any block of 32 * n; they hand everything else to
     * the AVX2 kernels (x86/mx_avx512.c): name the one that runs for the preset's defaults */
    if (lofp_kfamily_of(id) == LOFP_KFAM_MX && strcmp(name, "avx512") == 0) {
        const lofp_scheme *d = &lofp_scheme_traits[id].defaults;
        const int int8 = d->elem == LOFP_ELEM_MXINT8;
        int fast = d->block % 32 == 0 && (op == LOFP_KERNEL_DEQUANTIZE ||
                                          (d->rounding != LOFP_STOCHASTIC && (!int8 || d->rounding == LOFP_RNE)));
        if (!fast) name = "avx2";
    }
    return name;
}

/* ---- the reference table: src/quant/quant_*.c row kernels behind the fast-kernel contract ---- */

const lofp_family_t *const lofp_reference_families[LOFP_KFAM_COUNT_] = {
    [LOFP_KFAM_NVFP4] = &lofp_family_nvfp4, [LOFP_KFAM_MX] = &lofp_family_mx, [LOFP_KFAM_UQ] = &lofp_family_uq,
};

static const lofp_family_t *ref_family(const lofp_scheme *s)
{
    return lofp_reference_families[lofp_kfamily_of(s->id)];
}

/* The reference kernels overwrite their input and use x + kp as rotation scratch, so the row is
 * copied into the 2 * kp scratch first. */
static size_t ref_quant_row(const lofp_scheme *s, const float *x, size_t kp, float global,
                            uint64_t base, uint8_t *codes, uint8_t *scales, float *scratch)
{
    size_t bad_nvfp4 = 0;
    if (s->id == LOFP_SCHEME_NVFP4) /* the reference kernel never sees NaN: count as the contract says */
        for (size_t b = 0; b < kp / 16; b++) bad_nvfp4 += kq_first_nonfinite_f32(x + b * 16, 16) < 16;
    memcpy(scratch, x, kp * sizeof(float));
    size_t bad = ref_family(s)->quant_row(s, scratch, kp, global, base, codes, scales);
    return s->id == LOFP_SCHEME_NVFP4 ? bad_nvfp4 : bad;
}

static void ref_dequant_row(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                            float global, size_t kp, float *out, unsigned flags)
{
    (void)flags;
    ref_family(s)->dequant_row(s, codes, scales, global, kp, out);
}

/* The old driver's two passes, element by element through lofp_load_f32. */
static int ref_scan(lofp_dtype dt, const void *x, size_t n, float *amax, size_t *first_bad)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(lofp_load_f32(dt, x, i))) { *first_bad = i; return 1; }
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(lofp_load_f32(dt, x, i));
        if (!(a <= m)) m = a;
    }
    *amax = m;
    return 0;
}

static void ref_load_row(lofp_dtype dt, const void *x, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = lofp_load_f32(dt, x, i);
}

static void ref_store_row(lofp_dtype dt, const float *x, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++) lofp_store_f32(dt, out, i, x[i]);
}

static const lofp_kernel_table reference_table = {
    .isa = "reference",
    .quant = { { "reference", ref_quant_row, ref_dequant_row },
               { "reference", ref_quant_row, ref_dequant_row },
               { "reference", ref_quant_row, ref_dequant_row } },
    .scan = ref_scan,
    .load_row = ref_load_row,
    .store_row = ref_store_row,
};

const lofp_kernel_table *lofp_kernels_reference(void) { return &reference_table; }

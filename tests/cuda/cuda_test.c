/* cuda_test.c (the test_cuda program) -- GPU correctness test of liblofp_cuda through its public C API (`make gpu-test`).
 * Exits 0 with a message when no CUDA device is present (CI compiles and links it only).
 *
 *   1. Markstein's division (NVFP4 kernel) vs __fdiv_rn, exhaustive over the divisors and the
 *      mantissas of the binades that reach E2M1 midpoints; bf16/fp16 subnormal operand support.
 *   2. Quantize: every preset x input dtype x rounding mode x scale layout x shape (padding, rows not
 *      a multiple of 128, MX granularities) x input kind (normal, heavy-tailed with tiny blocks,
 *      exact ties, zeros): codes, scales (in the layout) and the NVFP4 global compared byte for
 *      byte with lofp_quantize on the same input, twice with different poison in the outputs.
 *      Dequantize to f32/bf16/f16 compared bit for bit with lofp_dequantize. Non-finite input:
 *      the same status and first index, and the same bytes under propagation. 8192 x 8192 cases.
 *   3. W4A16 GEMV/GEMM (NVFP4, MXFP4; fp32 and bf16 output) against an fp64 product of the
 *      CPU-dequantized weights: relative Frobenius error. The large-M path (dequantize +
 *      cuBLASLt) through the public API at m >= LOFP_CUDA_LARGE_M_MIN, forced at small shapes,
 *      in N chunks (small cap), and the fallback to the kernels where cuBLASLt is absent.
 *   3b. W4A8 (opt-in, MXFP4 x E4M3): the activation quantizer byte for byte against lofp_encode
 *      (permuted and plain K order), the GEMM against the fp64 product (rounding-error bound, and
 *      an exactness case whose only error is the summation), every kernel configuration (by shape,
 *      kernel route forced), per-128 promotion and the per-k32 fallback for wide block-scale spans
 *      in one matrix, argument errors. The large-M cuBLASLt route: the weight cast, row scales and
 *      rowwise-exact flag byte for byte against the CPU (spans of exactly 14 binades, 15, zero
 *      blocks, NaN scales), both routes bit for bit on data whose sums are exact (fp32 and bf16
 *      out, in chunks), random cases with the route asserted, non-finite activation rows, and the
 *      refusals (cuBLASLt absent, stream capture).
 *   4. UltraQuant store vs lofp_quantize per K row (rotated) and V row; skipped slots untouched.
 *   5. Decode attention vs an fp64 CPU reference over the same cache (SPEC §5 tolerance 1e-4), with
 *      GQA ratios 1..8 (packed and unpacked PV), sinks, empty and one-token sequences, partial
 *      sub-tiles, block sizes with and without the 16-token alignment, several split counts and
 *      head dims; an unaligned cache refused; and the vLLM golden case.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "lofp/lofp.h"
#include "lofp/lofp_cuda.h"
#include "cuda_check.h"
#include "lofp_cuda_internal.h"
#include "test_util.h"

int lofp_test_division(unsigned long long *nbad, unsigned long long *first);
int lofp_test_subnormals(uint32_t out[3]);


static void *dalloc(size_t n)
{
    void *p = NULL;
    CU(cudaMalloc(&p, n ? n : 16));
    return p;
}
static void *halloc(size_t n)
{
    void *p = malloc(n ? n : 16);
    if (!p) { fprintf(stderr, "out of host memory\n"); exit(1); }
    return p;
}
static void h2d(void *d, const void *h, size_t n) { CU(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)); }
static void d2h(void *h, const void *d, size_t n) { CU(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)); }
static unsigned ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (unsigned)n;
}
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static tu_rng g_rng = {0xC0FFEE1234ull};
static int g_cases = 0;

/* ---- inputs ---- */
static void gen(float *x, size_t rows, size_t k, int kind)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < k; j++) {
            size_t i = r * k + j;
            double v;
            switch (kind) {
            case 0: v = tu_normal(&g_rng) * 3.0; break;
            case 1: { /* heavy tails, some tiny and some zero blocks */
                double e = (tu_uniform(&g_rng) * 2 - 1) * 24;
                v = (tu_uniform(&g_rng) < 0.5 ? -1 : 1) * pow(2.0, e);
                if ((j / 16) % 7 == 3) v *= 1e-35;
                if ((j / 32) % 11 == 5) v = 0;
                break;
            }
            case 2: /* exact E2M1 grid points times powers of two: ties after scaling */
                v = (double)lofp_decode(LOFP_ELEM_E2M1, (uint32_t)(tu_next(&g_rng) & 15)) *
                    ldexp(1.0, (int)(tu_next(&g_rng) % 5) - 2);
                break;
            case 4: { /* every scale byte: block (16 elements) i has magnitudes 2^(E-5)..2^(E+1)
                       * with E sweeping -140..126 over the blocks (subnormal to the top binade),
                       * random mantissas, signs, some zeros and exact E2M1 midpoints */
                const int E = -140 + (int)((i / 16 * 37) % 267);
                const uint64_t t = tu_next(&g_rng);
                if (t % 13 == 0) v = 0.0;
                else if (t % 13 == 1) v = (0.25 + 0.5 * (double)((t >> 8) % 4)) * ldexp(1.0, E - 1);
                else v = (1.0 + tu_uniform(&g_rng)) * ldexp(1.0, E - (int)((t >> 8) % 6));
                if ((t >> 20) & 1) v = -v;
                break;
            }
            default: /* zeros and small integers */
                v = (tu_next(&g_rng) % 3 == 0) ? 0.0 : (double)((int)(tu_next(&g_rng) % 17) - 8) * 0.125;
                break;
            }
            x[i] = (float)v;
        }
}

static size_t dt_size(lofp_dtype dt) { return dt == LOFP_DTYPE_F32 ? 4 : 2; }
static void *to_dtype(const float *x, size_t n, lofp_dtype dt)
{
    void *o = halloc(n * dt_size(dt));
    for (size_t i = 0; i < n; i++) {
        if (dt == LOFP_DTYPE_F32) ((float *)o)[i] = x[i];
        else if (dt == LOFP_DTYPE_BF16) ((uint16_t *)o)[i] = lofp_fp32_to_bf16(x[i]);
        else ((uint16_t *)o)[i] = lofp_fp32_to_fp16(x[i]);
    }
    return o;
}

static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return n;
}

/* ---- 2. quantize ---- */
typedef struct {
    const char *preset;
    lofp_rounding rounding;
    int rule;       /* -1 = preset default */
    uint32_t block; /* 0 = preset default */
    int one_level, pad, propagate, dense, norotate, with_global;
} qopts;

static void qcase(const qopts *o, lofp_dtype dt, size_t rows, size_t k, int kind, lofp_layout L,
                  int nan_at /* -1 = none */)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset(o->preset, &s));
    s.rounding = o->rounding;
    if (o->rule >= 0) s.scale_rule = (lofp_scale_rule)o->rule;
    if (o->block) s.block = o->block;
    if (o->one_level) s.two_level = 0;
    s.pad = o->pad;
    s.propagate_nonfinite = o->propagate;
    if (o->dense) s.hadamard = LOFP_HADAMARD_DENSE;
    if (o->norotate) s.rotate = 0;
    s.seed = 0x5EED;
    s.threads = ncpu();
    g_cases++;
    const size_t n = rows * k;
    float *xf = halloc(n * sizeof(float));
    gen(xf, rows, k, kind);
    if (nan_at >= 0 && (size_t)nan_at < n) xf[nan_at] = (nan_at & 1) ? NAN : -INFINITY;
    void *xd = to_dtype(xf, n, dt);
    const size_t kp = lofp_padded_k(&s, k), cols = kp / s.block;
    const size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
    const size_t lb = lofp_layout_required_bytes(rows, kp, s.block, L);
    uint8_t *c_cpu = halloc(cb), *s_cpu = halloc(sb), *l_cpu = halloc(lb);
    uint8_t *c_gpu = halloc(cb), *l_gpu = halloc(lb);
    float g_cpu = 1.0f, g_gpu = 0.0f;
    const float given = 1234.5f;
    lofp_quant_report rc, rg;
    lofp_status st_cpu = o->with_global
                             ? lofp_quantize_with_global(&s, dt, xd, rows, k, given, c_cpu, s_cpu, &rc)
                             : lofp_quantize(&s, dt, xd, rows, k, c_cpu, s_cpu, &g_cpu, &rc);
    if (o->with_global) g_cpu = given;
    if (st_cpu == LOFP_OK) CHECK_OK(lofp_layout_from_linear(s_cpu, rows, cols, L, -1, l_cpu));

    void *dx = dalloc(n * dt_size(dt));
    uint8_t *dc = dalloc(cb), *ds = dalloc(lb);
    float *dg = dalloc(sizeof(float));
    void *dws = dalloc(lofp_cuda_workspace_bytes());
    h2d(dx, xd, n * dt_size(dt));
    for (int pass = 0; pass < 2; pass++) {
        const int poison = pass ? 0x5A : 0xA5;
        CU(cudaMemset(dc, poison, cb));
        CU(cudaMemset(ds, poison, lb));
        CU(cudaMemset(dg, poison, sizeof(float)));
        lofp_status st = o->with_global
                             ? lofp_cuda_quantize_with_global(&s, dt, dx, rows, k, given, L, dc, ds, dws, NULL)
                             : lofp_cuda_quantize(&s, dt, dx, rows, k, L, dc, ds, dg, dws, NULL);
        if (st_cpu != LOFP_OK && st_cpu != LOFP_ERR_NONFINITE) { /* argument/shape errors: same status */
            CHECKF(st == st_cpu, "%s: launch -> %s, cpu %s", o->preset, lofp_cuda_status_name(st), lofp_status_name(st_cpu));
            break;
        }
        CHECKF(st == LOFP_OK, "%s: launch -> %s (%s)", o->preset, lofp_cuda_status_name(st), lofp_cuda_last_error());
        lofp_status st_gpu = lofp_cuda_quant_report(dws, NULL, &rg);
        CHECKF(st_gpu == st_cpu, "%s dt=%d rows=%zu k=%zu kind=%d: status cpu %s gpu %s", o->preset, (int)dt,
               rows, k, kind, lofp_status_name(st_cpu), lofp_cuda_status_name(st_gpu));
        if (st_cpu == LOFP_ERR_NONFINITE) {
            CHECKF(rg.first_bad_index == rc.first_bad_index, "%s: first bad %zu vs %zu", o->preset,
                   rg.first_bad_index, rc.first_bad_index);
            break;
        }
        if (st_cpu != LOFP_OK) break;
        d2h(c_gpu, dc, cb);
        d2h(l_gpu, ds, lb);
        if (!o->with_global) d2h(&g_gpu, dg, sizeof(float));
        else g_gpu = given;
        size_t dc_i = first_diff(c_cpu, c_gpu, cb), dl_i = first_diff(l_cpu, l_gpu, lb);
        CHECKF(dc_i == cb, "%s dt=%d rnd=%d rule=%d blk=%u rows=%zu k=%zu kind=%d layout=%d: codes differ at byte %zu (cpu %02x gpu %02x)",
               o->preset, (int)dt, (int)s.rounding, (int)s.scale_rule, s.block, rows, k, kind, (int)L, dc_i,
               dc_i < cb ? c_cpu[dc_i] : 0, dc_i < cb ? c_gpu[dc_i] : 0);
        CHECKF(dl_i == lb, "%s dt=%d rnd=%d rule=%d blk=%u rows=%zu k=%zu kind=%d layout=%d: scales differ at byte %zu (cpu %02x gpu %02x)",
               o->preset, (int)dt, (int)s.rounding, (int)s.scale_rule, s.block, rows, k, kind, (int)L, dl_i,
               dl_i < lb ? l_cpu[dl_i] : 0, dl_i < lb ? l_gpu[dl_i] : 0);
        CHECKF(fbits(g_cpu) == fbits(g_gpu), "%s: global %.9g vs %.9g", o->preset, g_cpu, g_gpu);
        CHECK_EQ_U(rg.nonfinite_blocks, rc.nonfinite_blocks);
        CHECK_EQ_U(rg.padded_k, kp);
    }

    /* dequantize, every output dtype */
    if (st_cpu == LOFP_OK && nan_at < 0 && rows * k <= (1u << 22)) {
        for (int odt = 1; odt <= 3; odt++) {
            const size_t ob = n * dt_size((lofp_dtype)odt);
            uint8_t *ocpu = halloc(ob), *ogpu = halloc(ob);
            uint8_t *dout = dalloc(ob);
            CHECK_OK(lofp_dequantize(&s, c_cpu, s_cpu, g_cpu, rows, k, (lofp_dtype)odt, ocpu));
            CU(cudaMemset(dout, 0xA5, ob));
            h2d(dg, &g_cpu, sizeof(float));
            CHECK_OK(lofp_cuda_dequantize(&s, dc, ds, L, dg, rows, k, (lofp_dtype)odt, dout, NULL));
            CU(cudaDeviceSynchronize());
            d2h(ogpu, dout, ob);
            size_t bad = 0, firstb = ob;
            for (size_t i = 0; i < n; i++) {
                int eq;
                if (odt == LOFP_DTYPE_F32) {
                    float a, b;
                    memcpy(&a, ocpu + 4 * i, 4);
                    memcpy(&b, ogpu + 4 * i, 4);
                    eq = fbits(a) == fbits(b) || (isnan(a) && isnan(b));
                } else {
                    eq = memcmp(ocpu + 2 * i, ogpu + 2 * i, 2) == 0;
                }
                if (!eq) { if (!bad) firstb = i; bad++; }
            }
            CHECKF(bad == 0, "%s dequant odt=%d: %zu elements differ, first %zu", o->preset, odt, bad, firstb);
            free(ocpu); free(ogpu);
            CU(cudaFree(dout));
        }
    }
    free(xf); free(xd); free(c_cpu); free(s_cpu); free(l_cpu); free(c_gpu); free(l_gpu);
    CU(cudaFree(dx)); CU(cudaFree(dc)); CU(cudaFree(ds)); CU(cudaFree(dg)); CU(cudaFree(dws));
}

/* Dequantize to bf16 over every scale byte: codes random, the scale of block (r, c) is byte
 * (r * 7 + c) & 0xFF, so every row holds all 256 scale values, with globals from tiny to huge
 * (every NVFP4 base range check, MX bytes 0, 1, 253..255 take the per-element fallback), compared
 * bit for bit with lofp_dequantize. */
static void test_dequant_scales(void)
{
    const size_t rows = 64, k = 8192;
    const float globals[] = {1.0f, 1234.5f, 2688.0f / 1e-3f, 1e-30f, 3e30f, 0.37f, 0x1p-120f, 0x1p100f};
    const char *ps[] = {"nvfp4", "mxfp4"};
    uint8_t *codes = halloc(rows * k / 2);
    uint32_t h = 12345;
    for (size_t i = 0; i < rows * k / 2; i++) { h = h * 1664525u + 1013904223u; codes[i] = (uint8_t)(h >> 24); }
    for (int p = 0; p < 2; p++) {
        lofp_scheme s;
        lofp_scheme_preset(ps[p], &s);
        const size_t nb = k / s.block;
        uint8_t *sc = halloc(rows * nb);
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < nb; c++) sc[r * nb + c] = (uint8_t)((r * 7 + c) & 0xFF);
        uint8_t *dc = dalloc(rows * k / 2), *ds = dalloc(rows * nb);
        float *dg = dalloc(sizeof(float));
        uint16_t *dout = dalloc(rows * k * 2);
        uint16_t *ocpu = halloc(rows * k * 2), *ogpu = halloc(rows * k * 2);
        h2d(dc, codes, rows * k / 2);
        h2d(ds, sc, rows * nb);
        for (size_t gi = 0; gi < (p == 0 ? sizeof globals / sizeof *globals : 1); gi++) {
            g_cases++;
            const float g = globals[gi];
            h2d(dg, &g, sizeof g);
            CHECK_OK(lofp_dequantize(&s, codes, sc, g, rows, k, LOFP_DTYPE_BF16, ocpu));
            CU(cudaMemset(dout, 0xA5, rows * k * 2));
            CHECK_OK(lofp_cuda_dequantize(&s, dc, ds, LOFP_LAYOUT_LINEAR, dg, rows, k, LOFP_DTYPE_BF16, dout, NULL));
            CU(cudaDeviceSynchronize());
            d2h(ogpu, dout, rows * k * 2);
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < rows * k; i++)
                if (ocpu[i] != ogpu[i]) { if (!bad) first = i; bad++; }
            CHECKF(bad == 0, "%s dequant bf16 all scales, global %g: %zu differ, first %zu (cpu %04x gpu %04x)", ps[p],
                   (double)g, bad, first, bad ? ocpu[first] : 0, bad ? ogpu[first] : 0);
        }
        free(sc); free(ocpu); free(ogpu);
        CU(cudaFree(dc)); CU(cudaFree(ds)); CU(cudaFree(dg)); CU(cudaFree(dout));
    }
    free(codes);
}

/* Checkpoint entry points (lofp/lofp_cuda.h): NVFP4 dequantize with a decode-direction global
 * (ModelOpt weight_scale_2) against fl(e2m1 * fl(s * d)) computed here, every scale byte, every
 * output dtype path that bf16 takes; and W4A16 prepared with d = fl(1/G) in the decode direction
 * against the same weights prepared with G. */
static void test_ckpt(void)
{
    const int f0 = tu_failures;
    const size_t rows = 64, k = 4096, nb = k / 16;
    const float decs[] = {1.0f, 1.0f / 1234.5f, 1e-3f / 2688.0f, 1e30f, 1e-30f, 0x1p-120f, 0x1p100f};
    lofp_scheme s;
    lofp_scheme_preset("nvfp4", &s);
    uint8_t *codes = halloc(rows * k / 2), *sc = halloc(rows * nb);
    uint32_t h = 777;
    for (size_t i = 0; i < rows * k / 2; i++) { h = h * 1664525u + 1013904223u; codes[i] = (uint8_t)(h >> 24); }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < nb; c++) sc[r * nb + c] = (uint8_t)((r * 5 + c) & 0xFF);
    uint8_t *dc = dalloc(rows * k / 2), *ds = dalloc(rows * nb);
    float *dg = dalloc(sizeof(float));
    uint16_t *dout = dalloc(rows * k * 2), *ogpu = halloc(rows * k * 2);
    h2d(dc, codes, rows * k / 2);
    h2d(ds, sc, rows * nb);
    for (size_t gi = 0; gi < sizeof decs / sizeof *decs; gi++) {
        g_cases++;
        const float d = decs[gi];
        h2d(dg, &d, sizeof d);
        CU(cudaMemset(dout, 0xA5, rows * k * 2));
        CHECK_OK(lofp_cuda_dequantize_dir(&s, dc, ds, LOFP_LAYOUT_LINEAR, dg, LOFP_GLOBAL_DECODE, rows, k, LOFP_DTYPE_BF16, dout, NULL));
        CU(cudaDeviceSynchronize());
        d2h(ogpu, dout, rows * k * 2);
        size_t bad = 0, first = 0;
        uint16_t want0 = 0;
        for (size_t i = 0; i < rows * k; i++) {
            const uint32_t code = (codes[i / 2] >> (4 * (i & 1))) & 0xF;
            const float sv = lofp_decode(LOFP_ELEM_UE4M3, sc[(i / k) * nb + (i % k) / 16]);
            const float sd = sv * d;
            const float y = lofp_decode(LOFP_ELEM_E2M1, code) * sd;
            const uint16_t want = lofp_fp32_to_bf16(y);
            if (want != ogpu[i]) { if (!bad) { first = i; want0 = want; } bad++; }
        }
        CHECKF(bad == 0, "nvfp4 dequant decode-direction d=%g: %zu differ, first %zu (want %04x gpu %04x)", (double)d, bad,
               first, want0, bad ? ogpu[first] : 0);
    }
    /* W4A16 with the decode direction */
    {
        const size_t n = 512, kk = 1024, m = 3;
        float *wf = halloc(n * kk * sizeof(float)), *af = halloc(m * kk * sizeof(float));
        for (size_t i = 0; i < n * kk; i++) { h = h * 1664525u + 1013904223u; wf[i] = ((float)(h >> 8) / 16777216.0f - 0.5f) * 0.1f; }
        uint16_t *ab = halloc(m * kk * 2);
        for (size_t i = 0; i < m * kk; i++) { h = h * 1664525u + 1013904223u; ab[i] = lofp_fp32_to_bf16((float)(h >> 8) / 16777216.0f - 0.5f); }
        uint8_t *wc = halloc(n * kk / 2), *ws = halloc(n * kk / 16);
        float G = 0;
        CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, wf, n, kk, wc, ws, &G, NULL));
        const float D = 1.0f / G;
        uint8_t *dwc = dalloc(n * kk / 2), *dws = dalloc(n * kk / 16);
        float *dG = dalloc(4), *dD = dalloc(4), *c1 = dalloc(m * n * 4), *c2 = dalloc(m * n * 4);
        uint16_t *da = dalloc(m * kk * 2);
        h2d(dwc, wc, n * kk / 2); h2d(dws, ws, n * kk / 16); h2d(dG, &G, 4); h2d(dD, &D, 4); h2d(da, ab, m * kk * 2);
        lofp_cuda_w4 W1, W2;
        CHECK_OK(lofp_cuda_w4_prepare(&s, dwc, dws, dG, n, kk, &W1, NULL));
        CHECK_OK(lofp_cuda_w4_prepare_dir(&s, dwc, dws, dD, LOFP_GLOBAL_DECODE, n, kk, &W2, NULL));
        CHECK_OK(lofp_cuda_w4a16_gemm(&W1, da, m, LOFP_DTYPE_F32, c1, NULL));
        CHECK_OK(lofp_cuda_w4a16_gemm(&W2, da, m, LOFP_DTYPE_F32, c2, NULL));
        CU(cudaDeviceSynchronize());
        float *h1 = halloc(m * n * 4), *h2 = halloc(m * n * 4);
        d2h(h1, c1, m * n * 4); d2h(h2, c2, m * n * 4);
        double num = 0, den = 0;
        for (size_t i = 0; i < m * n; i++) { num += ((double)h1[i] - h2[i]) * ((double)h1[i] - h2[i]); den += (double)h1[i] * h1[i]; }
        g_cases++;
        CHECKF(den > 0 && sqrt(num / den) <= 1e-6, "w4 prepare decode direction: rel diff %.3g", den > 0 ? sqrt(num / den) : -1.0);
        printf("    w4a16 decode-direction global vs encode: rel diff %.2g\n", den > 0 ? sqrt(num / den) : -1.0);
        lofp_cuda_w4_free(&W1); lofp_cuda_w4_free(&W2);
        free(wf); free(af); free(ab); free(wc); free(ws); free(h1); free(h2);
        CU(cudaFree(dwc)); CU(cudaFree(dws)); CU(cudaFree(dG)); CU(cudaFree(dD)); CU(cudaFree(c1)); CU(cudaFree(c2)); CU(cudaFree(da));
    }
    free(codes); free(sc); free(ogpu);
    CU(cudaFree(dc)); CU(cudaFree(ds)); CU(cudaFree(dg)); CU(cudaFree(dout));
    printf("  checkpoint entry points (decode-direction global): %s\n", tu_failures == f0 ? "ok" : "FAILED");
}

static void test_quantize(void)
{
    const char *presets[] = {"nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3",
                             "mxfp8-e5m2", "mxint8", "tilelang-mxfp8", "ultraquant"};
    const lofp_dtype dts[] = {LOFP_DTYPE_F32, LOFP_DTYPE_BF16, LOFP_DTYPE_F16};
    const int f0 = tu_failures;
    /* every preset x dtype x rounding x kind, linear, a shape that is no multiple of 128 rows */
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++)
        for (int d = 0; d < 3; d++)
            for (int r = 0; r < 4; r++)
                for (int kind = 0; kind < 5; kind++) {
                    qopts o = {presets[p], (lofp_rounding)r, -1, 0, 0, 0, 0, 0, 0, 0};
                    qcase(&o, dts[d], 37, 512, kind, LOFP_LAYOUT_LINEAR, -1);
                }
    printf("  quantize presets x dtypes x roundings x kinds: %s\n", tu_failures == f0 ? "ok" : "FAILED");
    /* layouts x presets (rows 200: swizzle padding) */
    int f1 = tu_failures;
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++)
        for (int L = 0; L < LOFP_LAYOUT_COUNT_; L++)
            for (int kind = 0; kind < 2; kind++) {
                qopts o = {presets[p], LOFP_RNE, -1, 0, 0, 0, 0, 0, 0, 0};
                qcase(&o, LOFP_DTYPE_BF16, 200, 384, kind, (lofp_layout)L, -1);
                qcase(&o, LOFP_DTYPE_F32, 131, 256, kind, (lofp_layout)L, -1);
            }
    printf("  scale layouts: %s\n", tu_failures == f1 ? "ok" : "FAILED");
    /* MX scale rules and granularities (fast and generic kernels) */
    f1 = tu_failures;
    const char *mx[] = {"mxfp4", "mxfp6-e3m2", "mxfp8-e4m3", "mxfp8-e5m2", "mxint8"};
    const uint32_t blocks[] = {32, 64, 96, 128, 256, 512};
    for (int p = 0; p < 5; p++)
        for (int rule = 0; rule < 4; rule++)
            for (int b = 0; b < 6; b++)
                for (int kind = 0; kind < 3; kind++) {
                    qopts o = {mx[p], LOFP_RNE, rule, blocks[b], 0, 0, 0, 0, 0, 0};
                    qcase(&o, (kind & 1) ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F32, 19, 1536, kind,
                          (b & 1) ? LOFP_LAYOUT_PACKED_U32 : LOFP_LAYOUT_LINEAR, -1);
                }
    printf("  MX rules x granularities: %s\n", tu_failures == f1 ? "ok" : "FAILED");
    /* MXFP4 from bf16, RNE, linear (the flat kernel): every rule, shapes whose block count is no
     * multiple of a warp item (32 blocks), one block per row, every scale byte (kind 4: the packed
     * encoder for bytes 3..248 and the fp32 one for the rest), zero and non-finite blocks */
    f1 = tu_failures;
    for (int rule = 0; rule < 4; rule++)
        for (int kind = 0; kind < 5; kind++) {
            qopts o = {"mxfp4", LOFP_RNE, rule, 0, 0, 0, 0, 0, 0, 0};
            qcase(&o, LOFP_DTYPE_BF16, 33, 32, kind, LOFP_LAYOUT_LINEAR, -1);
            qcase(&o, LOFP_DTYPE_BF16, 7, 96, kind, LOFP_LAYOUT_LINEAR, -1);
            qcase(&o, LOFP_DTYPE_BF16, 67, 4096, kind, LOFP_LAYOUT_LINEAR, -1);
            o.propagate = kind & 1;
            qcase(&o, LOFP_DTYPE_BF16, 5, 160, kind, LOFP_LAYOUT_LINEAR, 5 * 160 - 1 - 37 * kind);
        }
    printf("  MXFP4 bf16 flat kernel (rules, tails, every scale byte): %s\n", tu_failures == f1 ? "ok" : "FAILED");
    /* NVFP4 from bf16, RNE, linear (the flat kernel): two-level (reverse order), one-level and a
     * given global; one block per row, block counts that are no multiple of a warp item (64
     * blocks), every scale byte range (kind 4), and a 4096 x 4096 tensor (fits in the L2) */
    f1 = tu_failures;
    for (int kind = 0; kind < 5; kind++)
        for (int v = 0; v < 3; v++) {
            qopts o = {"nvfp4", LOFP_RNE, -1, 0, v == 1, 0, 0, 0, 0, v == 2};
            qcase(&o, LOFP_DTYPE_BF16, 3, 16, kind, LOFP_LAYOUT_LINEAR, -1);
            qcase(&o, LOFP_DTYPE_BF16, 5, 48, kind, LOFP_LAYOUT_LINEAR, -1);
            qcase(&o, LOFP_DTYPE_BF16, 61, 1024, kind, LOFP_LAYOUT_LINEAR, -1);
            qcase(&o, LOFP_DTYPE_BF16, 9, 160, kind, LOFP_LAYOUT_LINEAR, 9 * 160 - 1 - 37 * kind);
        }
    {
        qopts o = {"nvfp4", LOFP_RNE, -1, 0, 0, 0, 0, 0, 0, 0};
        qcase(&o, LOFP_DTYPE_BF16, 4096, 4096, 1, LOFP_LAYOUT_LINEAR, -1);
    }
    /* its grid (8 CTAs of 8 warps per SM): warps that loop over more than one item, their next
     * one loaded ahead, with a partial last item (4099 x 4112: 16460.05 items, more than the
     * 8 x 8 warps x SMs of any GPU with up to 257 SMs), through the bench's public call */
    for (int v = 0; v < 3; v++) {
        qopts o = {"nvfp4", LOFP_RNE, -1, 0, v == 1, 0, 0, 0, 0, v == 2};
        qcase(&o, LOFP_DTYPE_BF16, 4099, 4112, 1, LOFP_LAYOUT_LINEAR, -1);
    }
    {
        qopts o = {"nvfp4", LOFP_RNE, -1, 0, 0, 0, 0, 0, 0, 0};
        qcase(&o, LOFP_DTYPE_BF16, 4099, 4112, 2, LOFP_LAYOUT_LINEAR, -1);
        qcase(&o, LOFP_DTYPE_BF16, 4099, 4112, 4, LOFP_LAYOUT_LINEAR, -1);
        /* a non-finite element in a warp's later item (the general path's pair shuffle) */
        qcase(&o, LOFP_DTYPE_BF16, 4099, 4112, 0, LOFP_LAYOUT_LINEAR, 4099 * 4112 / 3 + 5);
        qcase(&o, LOFP_DTYPE_BF16, 4099, 4112, 4, LOFP_LAYOUT_SWIZZLE_128X4, -1);
        qcase(&o, LOFP_DTYPE_BF16, 4099, 4112, 1, LOFP_LAYOUT_PACKED_U32, -1);
    }
    /* the same kernel writing the other scale layouts: every layout x kind x variant; one block
     * per row (the (row, block) step wraps rows 16 times), 3 blocks per row, rows that are no
     * multiple of 128 or 4 (padding), a partial last item, and the bench's swizzle shape class */
    for (int L = 1; L < LOFP_LAYOUT_COUNT_; L++)
        for (int kind = 0; kind < 5; kind++)
            for (int v = 0; v < 3; v++) {
                qopts o = {"nvfp4", LOFP_RNE, -1, 0, v == 1, 0, 0, 0, 0, v == 2};
                qcase(&o, LOFP_DTYPE_BF16, 37, 16, kind, (lofp_layout)L, -1);
                qcase(&o, LOFP_DTYPE_BF16, 131, 48, kind, (lofp_layout)L, -1);
                qcase(&o, LOFP_DTYPE_BF16, 256, 1024, kind, (lofp_layout)L, -1);
                qcase(&o, LOFP_DTYPE_BF16, 9, 160, kind, (lofp_layout)L, 9 * 160 - 1 - 37 * kind);
            }
    {
        qopts o = {"nvfp4", LOFP_RNE, -1, 0, 0, 0, 0, 0, 0, 0};
        qcase(&o, LOFP_DTYPE_BF16, 4096, 4096, 1, LOFP_LAYOUT_SWIZZLE_128X4, -1);
    }
    printf("  NVFP4 bf16 flat kernel (two-level, one-level, given global, tails, grids, layouts): %s\n", tu_failures == f1 ? "ok" : "FAILED");
    /* NVFP4 one-level and with_global; UltraQuant unrotated, dense, D sizes; padding */
    f1 = tu_failures;
    for (int kind = 0; kind < 4; kind++) {
        qopts a = {"nvfp4", LOFP_RNE, -1, 0, 1, 0, 0, 0, 0, 0};
        qcase(&a, LOFP_DTYPE_BF16, 64, 1024, kind, LOFP_LAYOUT_SWIZZLE_128X4, -1);
        qopts b = {"nvfp4", LOFP_TIES_TO_ZERO, -1, 0, 0, 0, 0, 0, 0, 1};
        qcase(&b, LOFP_DTYPE_F32, 64, 1024, kind, LOFP_LAYOUT_LINEAR, -1);
        for (size_t kk = 32; kk <= 4096; kk *= 2) {
            qopts u = {"ultraquant", LOFP_TIES_TO_ZERO, -1, 0, 0, 0, 0, 0, kind & 1, 0};
            qcase(&u, LOFP_DTYPE_BF16, 9, kk, kind, LOFP_LAYOUT_LINEAR, -1);
        }
        qopts ud = {"ultraquant", LOFP_TIES_TO_ZERO, -1, 0, 0, 0, 0, 1, 0, 0};
        qcase(&ud, LOFP_DTYPE_F32, 7, 256, kind, LOFP_LAYOUT_LINEAR, -1);
        qopts un = {"ultraquant", LOFP_TIES_TO_ZERO, -1, 0, 0, 1, 0, 0, 1, 0};
        qcase(&un, LOFP_DTYPE_F16, 7, 200, kind, LOFP_LAYOUT_LINEAR, -1); /* unrotated, padded to 224 */
        for (size_t p = 0; p < 8; p++) {
            qopts o = {presets[p], LOFP_RNE, -1, 0, 0, 1, 0, 0, 0, 0};
            qcase(&o, LOFP_DTYPE_BF16, 13, 200, kind, LOFP_LAYOUT_SWIZZLE_128X4, -1); /* K padded */
            qcase(&o, LOFP_DTYPE_F32, 5, 37, kind, LOFP_LAYOUT_LINEAR, -1);
        }
    }
    printf("  one-level / given global / UltraQuant sizes, dense, unrotated / padding: %s\n",
           tu_failures == f1 ? "ok" : "FAILED");
    /* non-finite input: status + first index, and propagation */
    f1 = tu_failures;
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++)
        for (int prop = 0; prop < 2; prop++) {
            qopts o = {presets[p], LOFP_RNE, -1, 0, 0, 0, prop, 0, 0, 0};
            qcase(&o, LOFP_DTYPE_F32, 33, 256, 0, LOFP_LAYOUT_LINEAR, 33 * 256 / 3 + 5);
            qcase(&o, LOFP_DTYPE_BF16, 33, 256, 0, LOFP_LAYOUT_LINEAR, 1000);
        }
    printf("  non-finite input: %s\n", tu_failures == f1 ? "ok" : "FAILED");
    /* the benchmark size */
    f1 = tu_failures;
    const char *big[] = {"nvfp4", "mxfp4", "mxfp8-e4m3", "tilelang-mxfp8", "ultraquant"};
    for (int p = 0; p < 5; p++) {
        qopts o = {big[p], LOFP_RNE, -1, 0, 0, 0, 0, 0, 0, 0};
        if (p == 4) o.rounding = LOFP_TIES_TO_ZERO;
        qcase(&o, LOFP_DTYPE_BF16, 8192, 8192, 0, p == 0 ? LOFP_LAYOUT_SWIZZLE_128X4 : p == 3 ? LOFP_LAYOUT_PACKED_U32 : LOFP_LAYOUT_LINEAR, -1);
    }
    printf("  8192 x 8192 bf16 (nvfp4 swizzle, mxfp4, mxfp8, tilelang packed, ultraquant): %s\n",
           tu_failures == f1 ? "ok" : "FAILED");
}

/* ---- 3. W4A16 ---- */
/* -1: the public lofp_cuda_w4a16_gemm; else the LOFP_GEMM_ROUTE_* of the internal entry point */
static int g_route = -1;
/* LOFP_TEST_GEMM_NO_WGMMA=1: the public-API cases take the NO_WGMMA route instead (the paths of
 * devices without wgmma, tested on one that has it). Read once in main; the library itself reads
 * no environment variable to choose a route. */
static int g_no_wgmma = 0;

/* gemm_case runs the product a second time and wants the same bytes (kernels whose sums have a
 * fixed order whatever the CTAs' timing) */
static int g_gemm_repeat = 0, g_gemm_c_off = 0;
static void gemm_run(const lofp_cuda_w4 *W, const void *da, size_t m, int out_bf16, void *dc)
{
    const lofp_dtype od = out_bf16 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F32;
    if (g_route < 0 && g_no_wgmma) LC(lofp_cuda_w4a16_gemm_route(W, da, m, od, dc, NULL, LOFP_GEMM_ROUTE_NO_WGMMA));
    else if (g_route < 0) LC(lofp_cuda_w4a16_gemm(W, da, m, od, dc, NULL));
    else LC(lofp_cuda_w4a16_gemm_route(W, da, m, od, dc, NULL, g_route));
    CU(cudaDeviceSynchronize());
}

static double gemm_case(const char *preset, size_t m, size_t n, size_t k, int out_bf16, int print)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset(preset, &s));
    s.threads = ncpu();
    float *w = halloc(n * k * sizeof(float));
    gen(w, n, k, 0);
    for (size_t i = 0; i < n * k; i += 97) w[i] *= 8.0f; /* some outliers */
    uint8_t *codes = halloc(n * k / 2), *scales = halloc(n * k / s.block);
    float global = 1.0f;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, w, n, k, codes, scales, &global, NULL));
    float *wd = halloc(n * k * sizeof(float));
    CHECK_OK(lofp_dequantize(&s, codes, scales, global, n, k, LOFP_DTYPE_F32, wd));
    uint16_t *a = halloc(m * k * 2);
    for (size_t i = 0; i < m * k; i++) a[i] = lofp_fp32_to_bf16((float)tu_normal(&g_rng));
    uint8_t *dcodes = dalloc(n * k / 2), *dscales = dalloc(n * k / s.block);
    float *dglobal = dalloc(4);
    uint16_t *da = dalloc(m * k * 2);
    const size_t ob = m * n * (out_bf16 ? 2 : 4);
    /* g_gemm_c_off: C one element past an aligned address (the kernels' one-value stores) */
    const size_t coff = g_gemm_c_off ? (out_bf16 ? 2 : 4) : 0;
    void *dc0 = dalloc(ob + coff), *dc = (uint8_t *)dc0 + coff;
    h2d(dcodes, codes, n * k / 2);
    h2d(dscales, scales, n * k / s.block);
    h2d(dglobal, &global, 4);
    h2d(da, a, m * k * 2);
    lofp_cuda_w4 W;
    LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, dglobal, n, k, &W, NULL));
    CU(cudaMemset(dc, 0xFF, ob)); /* NaN poison */
    gemm_run(&W, da, m, out_bf16, dc);
    void *hc = halloc(ob);
    d2h(hc, dc, ob);
    if (g_gemm_repeat) {
        void *h2 = halloc(ob);
        CU(cudaMemset(dc, 0xFF, ob));
        gemm_run(&W, da, m, out_bf16, dc);
        d2h(h2, dc, ob);
        CHECKF(memcmp(hc, h2, ob) == 0, "%s gemm m=%zu n=%zu k=%zu: a second run gave other bytes", preset, m, n, k);
        free(h2);
    }
    double num = 0, den = 0;
    size_t nonfinite = 0;
    double *arow = halloc(k * sizeof(double));
    for (size_t i = 0; i < m; i++) {
        for (size_t kk = 0; kk < k; kk++) arow[kk] = lofp_bf16_to_fp32(a[i * k + kk]);
        for (size_t j = 0; j < n; j++) {
            double ref = 0;
            const float *wr = wd + j * k;
            for (size_t kk = 0; kk < k; kk++) ref += arow[kk] * wr[kk];
            double got = out_bf16 ? lofp_bf16_to_fp32(((uint16_t *)hc)[i * n + j]) : ((float *)hc)[i * n + j];
            if (!isfinite(got)) nonfinite++;
            num += (got - ref) * (got - ref);
            den += ref * ref;
        }
    }
    double err = sqrt(num / den);
    const double tol = out_bf16 ? 4e-3 : 1e-5;
    CHECKF(nonfinite == 0, "%s gemm m=%zu n=%zu k=%zu: %zu outputs not written/finite", preset, m, n, k, nonfinite);
    CHECKF(err <= tol, "%s gemm m=%zu n=%zu k=%zu out=%s: rel Frobenius error %.3g > %.1g", preset, m, n,
           k, out_bf16 ? "bf16" : "f32", err, tol);
    if (print)
        printf("    %-6s m=%-5zu n=%-5zu k=%-5zu out=%s  rel.err %.2e\n", preset, m, n, k, out_bf16 ? "bf16" : "f32 ", err);
    lofp_cuda_w4_free(&W);
    free(w); free(codes); free(scales); free(wd); free(a); free(hc); free(arow);
    CU(cudaFree(dcodes)); CU(cudaFree(dscales)); CU(cudaFree(dglobal)); CU(cudaFree(da)); CU(cudaFree(dc0));
    g_cases++;
    return err;
}

/* With cuBLASLt switched off (test hook), the forced large route must refuse without touching C,
 * and the public API must still compute (the kernels). */
static void gemm_large_off_case(const char *preset)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset(preset, &s));
    const size_t n = 32, k = 128, m = 4;
    uint8_t *dcodes = dalloc(n * k / 2), *dscales = dalloc(n * k / s.block);
    uint16_t *da = dalloc(m * k * 2);
    float *dc = dalloc(m * n * 4);
    CU(cudaMemset(dcodes, 0x22, n * k / 2));
    CU(cudaMemset(dscales, 0x38, n * k / s.block)); /* UE4M3 1.0 / E8M0 2^-71: finite */
    CU(cudaMemset(da, 0, m * k * 2));
    CU(cudaMemset(dc, 0xFF, m * n * 4));
    lofp_cuda_w4 W;
    LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, NULL, n, k, &W, NULL));
    const lofp_status r = lofp_cuda_w4a16_gemm_route(&W, da, m, LOFP_DTYPE_F32, dc, NULL, LOFP_GEMM_ROUTE_LARGE);
    CHECKF(r == LOFP_ERR_UNSUPPORTED, "%s: forced large route without cuBLASLt returned %s", preset, lofp_status_name(r));
    CU(cudaDeviceSynchronize());
    uint32_t *hc = halloc(m * n * 4);
    d2h(hc, dc, m * n * 4);
    size_t touched = 0;
    for (size_t i = 0; i < m * n; i++) touched += hc[i] != 0xFFFFFFFFu;
    CHECKF(touched == 0, "%s: refused large route wrote %zu outputs", preset, touched);
    lofp_cuda_w4_free(&W);
    free(hc);
    CU(cudaFree(dcodes)); CU(cudaFree(dscales)); CU(cudaFree(da)); CU(cudaFree(dc));
    g_cases++;
}

/* The large-M path (gemm_large.cu): dequantize to bf16 + cuBLASLt. Same tolerance as the kernels
 * (exact products, fp32 accumulation in another order). */
static void test_gemm_large(void)
{
    const int f0 = tu_failures;
    const int lt = lofp_cuda_large_available();
    printf("  large-M path (m >= %d): cuBLASLt %s\n", LOFP_CUDA_LARGE_M_MIN,
           lt ? "available" : "NOT AVAILABLE -- the public cases below run the kernels, the forced ones are skipped");
    const char *ps[] = {"nvfp4", "mxfp4"};
    for (int p = 0; p < 2; p++) {
        /* through the public API: m at and past the threshold, N an odd multiple of 16 */
        gemm_case(ps[p], LOFP_CUDA_LARGE_M_MIN, 528, 1024, 0, 1);
        gemm_case(ps[p], LOFP_CUDA_LARGE_M_MIN + 37, 272, 1152, 1, 1);
        /* just below it: the wgmma kernel's automatic choice past 511 tokens (6 m-tiles of 128) */
        gemm_case(ps[p], LOFP_CUDA_LARGE_M_MIN - 1, 528, 1152, p, 1);
        if (lt) {
            /* forced at small shapes */
            g_route = LOFP_GEMM_ROUTE_LARGE;
            gemm_case(ps[p], 1, 272, 1152, 0, 1);
            gemm_case(ps[p], 37, 528, 1024, 1, 1);
            gemm_case(ps[p], 130, 272, 1152, 0, 1);
            /* N in chunks: 64 rows per chunk (272 = 4 x 64 + 16), then the 16-row minimum */
            lofp_cuda_large_test_config((size_t)64 * 1152 * 2, 0);
            gemm_case(ps[p], 77, 272, 1152, 0, 1);
            gemm_case(ps[p], 77, 272, 1152, 1, 1);
            lofp_cuda_large_test_config(1, 0);
            gemm_case(ps[p], 40, 80, 1024, 1, 1);
            lofp_cuda_large_test_config(0, 0);
            g_route = -1;
        }
        /* the kernels forced at large M: the wgmma kernel's automatic choice over many token
         * tiles (2048 = 8 of the (1,256) tiles; 1100 leaves a partial one) */
        g_route = LOFP_GEMM_ROUTE_KERNEL;
        gemm_case(ps[p], 2048, 272, 1152, p, 1);
        gemm_case(ps[p], 1100, 528, 1024, 1 - p, 1);
        g_route = -1;
        /* cuBLASLt "absent": the public API falls back to the kernels, the forced route refuses */
        lofp_cuda_large_test_config(0, 1);
        CHECK(lofp_cuda_large_available() == 0);
        gemm_case(ps[p], LOFP_CUDA_LARGE_M_MIN, 272, 1024, 0, 1);
        gemm_large_off_case(ps[p]);
        lofp_cuda_large_test_config(0, 0);
    }
    printf("  W4A16 large-M path: %s\n", tu_failures == f0 ? "ok" : "FAILED");
}

/* The prepared layout byte for byte (docs/CUDA.md "W4A16 weight layout"): tile-major codes with
 * the nibbles of every word de-interleaved (zero for NVFP4 blocks whose scale byte is 0) and
 * tile-major scales. The GEMM cases above check it only through the kernels that read it; this
 * tells a layout fault from a kernel fault. */
static void prep_layout_case(const char *preset, size_t n, size_t k)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset(preset, &s));
    s.threads = ncpu();
    float *w = halloc(n * k * sizeof(float));
    gen(w, n, k, 0);
    const size_t cb = n * k / 2, sbytes = n * k / s.block, sb = s.block == 16 ? 8 : 4, nch = k / 128;
    uint8_t *codes = halloc(cb), *scales = halloc(sbytes), *pc = halloc(cb), *ps = halloc(sbytes);
    float global = 1.0f;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, w, n, k, codes, scales, &global, NULL));
    /* one NVFP4 block per row gets scale byte 0 (its codes must come out zeroed) */
    if (s.block == 16)
        for (size_t r = 0; r < n; r++) scales[r * (k / 16) + (r * 5) % (k / 16)] = 0;
    uint8_t *dcodes = dalloc(cb), *dscales = dalloc(sbytes);
    h2d(dcodes, codes, cb);
    h2d(dscales, scales, sbytes);
    lofp_cuda_w4 W;
    LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, NULL, n, k, &W, NULL));
    CU(cudaDeviceSynchronize());
    d2h(pc, W.d_codes, cb);
    d2h(ps, W.d_scales, sbytes);
    size_t bad_c = 0, bad_s = 0, zeroed = 0;
    for (size_t r = 0; r < n; r++)
        for (size_t ch = 0; ch < nch; ch++) {
            const size_t blk = (r / 16) * nch + ch;
            for (size_t j = 0; j < sb; j++)
                bad_s += ps[blk * 16 * sb + (r % 16) * sb + j] != scales[r * (k / s.block) + ch * sb + j];
            for (size_t wd = 0; wd < 16; wd++) {
                uint32_t x, got, want = 0;
                memcpy(&x, codes + r * (k / 2) + ch * 64 + 4 * wd, 4);
                memcpy(&got, pc + blk * 1024 + (r % 16) * 64 + 4 * wd, 4);
                if (s.block == 16 && scales[r * (k / 16) + ch * 8 + wd / 2] == 0) {
                    x = 0;
                    zeroed++;
                }
                for (int q = 0; q < 4; q++)
                    want |= (((x >> (8 * q)) & 0xFu) << (4 * q)) | (((x >> (8 * q + 4)) & 0xFu) << (16 + 4 * q));
                bad_c += got != want;
            }
        }
    CHECKF(bad_c == 0 && bad_s == 0, "%s prepare n=%zu k=%zu: %zu code words, %zu scale bytes off the tile-major layout",
           preset, n, k, bad_c, bad_s);
    if (s.block == 16) CHECKF(zeroed >= 2 * n, "%s prepare: %zu zero-scale words, want at least %zu", preset, zeroed, 2 * n);
    lofp_cuda_w4_free(&W);
    free(w); free(codes); free(scales); free(pc); free(ps);
    CU(cudaFree(dcodes)); CU(cudaFree(dscales));
    g_cases++;
}

/* Every GEMV configuration the dispatch chooses (gemm.cu launch_gemv), through the public call:
 * m = 1..17 (N / 16 < 128: one tile per warp, 16 K warps; else m <= 8: one tile per warp, two row
 * groups x 8 K warps; m = 9..16: two tiles x 8 K warps at N / 16 even, one tile x 4 warps at N / 16
 * odd; m = 17: the 32-token form), N / 16 odd (17: the two-row-group
 * CTA's second group idle), 2 mod 4 and 0 mod 4, K of 1, 3, 5, 9 and 17 chunks (K slices of 0, 1
 * and 2+ chunks per warp at 8 warps, odd counts: the two-chunk step's tail), 33 (K > 4096 below
 * 8192) and 64; both output types and schemes. Three passes, so each m meets every N class. */
static void test_gemv_dispatch(void)
{
    const int f0 = tu_failures;
    const char *ps[] = {"nvfp4", "mxfp4"};
    const size_t gn[] = {272, 288, 320}, gk[] = {128, 384, 640, 1152, 2176, 4224, 8192};
    for (int p = 0; p < 2; p++) {
        for (size_t r = 0; r < 3; r++)
            for (size_t m = 1; m <= 17; m++)
                gemm_case(ps[p], m, gn[(m + r) % 3], gk[(m + p + 2 * r) % 7], (int)((m + p + r) % 2), 0);
        /* the shapes of the sweep's classes at full width: K = 8192 at N / 16 = 0, 2 mod 4
         * and odd for m = 9..16, K = 4096 with N / 16 = 0 mod 4 and 2 mod 4, many CTAs at m <= 8 */
        gemm_case(ps[p], 1, 2048, 8192, 0, 0);
        gemm_case(ps[p], 8, 1040, 8192, 1, 0);
        gemm_case(ps[p], 16, 1024, 8192, 1, 0);
        gemm_case(ps[p], 12, 1056, 8192, 0, 0);
        gemm_case(ps[p], 13, 1040, 8192, 1, 0);
        gemm_case(ps[p], 10, 1024, 4096, 0, 0);
        gemm_case(ps[p], 15, 1056, 4096, 1, 0);
        gemm_case(ps[p], 9, 14336, 512, 0, 0);
        /* the narrow class's edge (N / 16 = 127 and 128) and the wide one with N / 16 odd / even */
        gemm_case(ps[p], 4, 2032, 1152, 1, 0);
        gemm_case(ps[p], 3, 2064, 640, 0, 0);
        gemm_case(ps[p], 14, 2032, 2176, 0, 0);
        gemm_case(ps[p], 12, 2064, 1152, 1, 0);
        gemm_case(ps[p], 16, 2048, 4096, 0, 0);
        /* the benchmark sweep's candidates (lofp_cuda_gemv_test_config): each forced at m = 1,
         * 5, 12 and 16 on N / 16 odd, 2 mod 4 and 0 mod 4, so a timing of one is a timing of a
         * kernel that computes the product */
        for (int cf = 1; cf < LOFP_GEMV_NCFG; cf++) {
            lofp_cuda_gemv_test_config(cf);
            gemm_case(ps[p], 1, 272, 1152, (cf + p) % 2, 0);
            gemm_case(ps[p], 5, 288, 4224, (cf + p + 1) % 2, 0);
            gemm_case(ps[p], 12, 320, 2176, (cf + p) % 2, 0);
            gemm_case(ps[p], 16, 1024, 4096, (cf + p + 1) % 2, 0);
            lofp_cuda_gemv_test_config(-1);
        }
    }
    printf("  GEMV shape classes (m <= 17) and the sweep's forced configurations: %s\n", tu_failures == f0 ? "ok" : "FAILED");
}

static void test_gemm(void)
{
    const int f0 = tu_failures;
    const char *ps[] = {"nvfp4", "mxfp4"};
    for (int p = 0; p < 2; p++) {
        prep_layout_case(ps[p], 48, 384);
        prep_layout_case(ps[p], 16, 128);
        const size_t ms[] = {1, 3, 8, 16, 17, 33, 64, 65, 130, 256};
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) gemm_case(ps[p], ms[i], 512, 1024, 0, 1);
        gemm_case(ps[p], 1, 8192, 8192, 0, 1);
        gemm_case(ps[p], 16, 4096, 8192, 0, 1);
        gemm_case(ps[p], 256, 1024, 2048, 1, 1);
        gemm_case(ps[p], 300, 272, 1024, 0, 1); /* n not a multiple of 128 */
        gemm_case(ps[p], 5, 272, 1152, 1, 1);   /* GEMV: partial row blocks, 9 chunks */
        gemm_case(ps[p], 16, 272, 1152, 0, 1);
        /* every GEMV token count m = 1..32 (NT = 1, 2, 4 token tiles; lanes past m load zeros),
         * with N / 16 odd, 2 mod 4 and 0 mod 4 (MT = 1, 2, 4 tiles per warp at m = 9..16), K of 1
         * chunk (three of the four warps idle), 3, 5, 9 and 17 chunks (uneven splits, odd chunk
         * counts per warp: the two-chunk step's tail) and 64 chunks; both output types */
        /* m <= 8 with a grid of more than 4 CTAs per SM (N / 16 = 896) */
        gemm_case(ps[p], 1, 14336, 640, 0, 1);
        gemm_case(ps[p], 7, 14336, 384, 1, 1);
        const size_t gn[] = {272, 288, 320, 528}, gk[] = {128, 384, 640, 1152, 2176, 8192};
        for (size_t m = 1; m <= 32; m++) {
            const size_t kk = gk[m % 6] == 8192 && m > 12 ? 1152 : gk[m % 6]; /* 8192 at m = 5, 11 */
            gemm_case(ps[p], m, gn[(m + p) % 4], kk, (int)((m + p) % 2), m <= 2 || m == 16 || m == 32);
        }
    }
    /* every wgmma tile configuration forced (the automatic choice takes only some of them at
     * these sizes): odd m, N / 16 odd, K of 1 chunk (split ranks with no chunk), 3, 5 and 9
     * chunks (uneven K splits) and 64; both schemes and output types */
    for (int c = 0; c < LOFP_WGMMA_NCFG; c++) {
        lofp_cuda_wgmma_test_config(c);
        printf("    wgmma configuration %d forced\n", c);
        for (int p = 0; p < 2; p++) {
            gemm_case(ps[p], 33, 272, 1152, c & 1, 1);
            gemm_case(ps[p], 65, 528, 128, (c + 1) & 1, 1);
            gemm_case(ps[p], 35, 272, 8192, c & 1, 1);
            gemm_case(ps[p], 300, 272, 640, (c + 1) & 1, 1);
            gemm_case(ps[p], 511, 144, 384, c & 1, 1);
            /* the persistent (unsplit warp-specialised) configurations with more tiles than an
             * H200 has SMs (136, 135 and 136 > 132), so CTAs walk a second tile */
            if (c == 1 || c == 4) gemm_case(ps[p], 511, 8704, 128, p, 1);
            if (c == 0) gemm_case(ps[p], 129, 5760, 128, p, 1);
            /* C misaligned for the four-value stores: the one-value ones */
            g_gemm_c_off = 1;
            gemm_case(ps[p], 300, 272, 640, c & 1, 1);
            g_gemm_c_off = 0;
            /* the K split's partials meet in rank order: two runs give the same bytes */
            if (c == 5) {
                g_gemm_repeat = 1;
                gemm_case(ps[p], 700, 2176, 1152, p ^ 1, 1);
                g_gemm_repeat = 0;
            }
        }
    }
    lofp_cuda_wgmma_test_config(-1);
    /* the automatic choice where the 4-way split qualifies (32 chunks) */
    for (int p = 0; p < 2; p++) gemm_case(ps[p], 64, 1024, 4096, p, 1);
    printf("  W4A16 GEMV/GEMM: %s\n", tu_failures == f0 ? "ok" : "FAILED");
    test_gemv_dispatch();
    test_gemm_large();
}

/* ---- 3b. W4A8 (MXFP4 weights x E4M3 activations, opt-in) ---- */
/* position of element e (0..31) of a block inside the permuted workspace block (lofp_cuda.h) */
static int w8_pos(int e)
{
    /* byte 16 h + 4 c + b holds element 8 c + 2 b + h */
    const int c = e / 8, r = e % 8;
    return 16 * (r & 1) + 4 * c + (r >> 1);
}

/* The activation quantizer, byte for byte and scale for scale, against the CPU: scale = amax / 448
 * in fp32 (1 for a zero row, NaN for a row with Inf/NaN), code = lofp_encode(E4M3, x / scale, RNE,
 * SATURATE). Rows: normal, heavy-tailed (kind 1: tiny and zero blocks, E4M3 subnormals), E2M1 grid
 * ties, small integers, all zeros, scaled by 2^-100, and one with an Inf and one with a NaN. */
static void w8_quant_case(size_t m, size_t k, int plain)
{
    float *x = halloc(m * k * sizeof(float));
    for (size_t r = 0; r < m; r++) gen(x + r * k, 1, k, (int)(r % 4));
    if (m > 4) for (size_t j = 0; j < k; j++) x[4 * k + j] = 0.0f;
    if (m > 5) for (size_t j = 0; j < k; j++) x[5 * k + j] = ldexpf(x[5 * k + j] + 1.0f, -100);
    if (m > 6) x[6 * k + 7] = INFINITY;
    if (m > 7) x[7 * k + k - 1] = NAN;
    uint16_t *a = to_dtype(x, m * k, LOFP_DTYPE_BF16);
    const size_t wsb = lofp_cuda_w4a8_workspace_bytes(m, k);
    CHECKF(wsb >= m * k + m * 4, "w4a8 workspace bytes %zu for m=%zu k=%zu", wsb, m, k);
    uint8_t *dws = dalloc(wsb);
    uint16_t *da = dalloc(m * k * 2);
    h2d(da, a, m * k * 2);
    CU(cudaMemset(dws, 0x5A, wsb));
    if (plain) LC(lofp_cuda_w4a8_quantize_act_plain(da, m, k, dws, wsb, NULL));
    else LC(lofp_cuda_w4a8_quantize_act(da, m, k, dws, wsb, NULL));
    CU(cudaDeviceSynchronize());
    uint8_t *ws = halloc(wsb);
    d2h(ws, dws, wsb);
    const size_t soff = (m * 4 + 255) / 256 * 256;
    size_t bad_s = 0, bad_c = 0, first = (size_t)-1;
    for (size_t r = 0; r < m; r++) {
        uint32_t mx = 0;
        for (size_t j = 0; j < k; j++) {
            const uint32_t v = a[r * k + j] & 0x7FFFu;
            if (v > mx) mx = v;
        }
        float sc;
        if (mx >= 0x7F80u) sc = NAN;
        else if (mx == 0) sc = 1.0f;
        else sc = lofp_bf16_to_fp32((uint16_t)mx) / 448.0f;
        float got;
        memcpy(&got, ws + 4 * r, 4);
        if (isnan(sc) ? !isnan(got) : fbits(got) != fbits(sc)) bad_s++;
        if (isnan(sc)) continue;
        for (size_t j = 0; j < k; j++) {
            const uint8_t want = (uint8_t)lofp_encode(LOFP_ELEM_E4M3, lofp_bf16_to_fp32(a[r * k + j]) / sc, LOFP_RNE, LOFP_SATURATE, 0);
            const uint8_t g = ws[soff + r * k + (plain ? j : (j / 32) * 32 + (size_t)w8_pos((int)(j % 32)))];
            if (g != want) {
                if (!bad_c) first = r * k + j;
                bad_c++;
            }
        }
    }
    CHECKF(bad_s == 0 && bad_c == 0, "w4a8 activation quantize (%s order) m=%zu k=%zu: %zu scales, %zu codes differ (first code at %zu)",
           plain ? "plain" : "permuted", m, k, bad_s, bad_c, first);
    printf("    w4a8 quantize (%-8s) m=%-4zu k=%-5zu: %zu scale / %zu code mismatches\n", plain ? "plain" : "permuted", m, k, bad_s, bad_c);
    free(x); free(a); free(ws);
    CU(cudaFree(dws)); CU(cudaFree(da));
    g_cases++;
}

/* W4A8 GEMM against the fp64 product C64 = A (bf16 values) . W (CPU-dequantized MXFP4).
 * exact = 0: A ~ N(0, 1). The error comes from rounding the activations to E4M3: 3 mantissa bits,
 *   unit roundoff u = 2^-4; for values spread over a binade the rounding error is about uniform
 *   on +-half a spacing, so its rms relative to the value is about u / sqrt(3) * (2/3 on average
 *   over the binade) ~ 0.024 (values near amax/448 * 2^-6, in E4M3's subnormal range, are too
 *   rare in a Gaussian row to matter). The errors of the K terms are independent, so the relative
 *   Frobenius error of C is about the same ~ 0.02-0.03; the products and the sums add < 1e-3.
 *   Asserted: <= 0.05 (the bound) and >= 0.005 (the test sees the rounding: with bf16 activations
 *   it would be ~1e-7 -- W4A16 on the same data is run and required <= 1e-5 and 100x smaller).
 * exact = 1: every row is integers in [-7, 7] (one of them +-7) times 2^q, q per row in -8..8:
 *   scale = 7 * 2^q / 448 = 2^(q-6) exactly and x / scale = integer * 64 is exact in E4M3, and the
 *   weights are exact E4M3 values, so every product is exact and the only errors are the sums:
 *   the tensor core's sum of the 128 products of a chunk (4 chained k32 steps; Hopper's FP8 MMA
 *   keeps about 13-14 mantissa bits and truncates, so this is not the fp32 sum) -- asserted within
 *   2^-9 of the chunk's sum |a w| (a few 2^-13 truncations, with margin; a wrong scale or code
 *   would be off by the size of the terms) -- then the K/32 (at most) fp32 promotions and 2
 *   epilogue products, 2^-24 each: |C - C64| <= (2^-9 + (K/32 + 3) 2^-24) sum_k |a_k w_k|.
 * spans = 1: the block scales are replaced (the codes kept) so that inside a 128-chunk a row's
 *   scales differ by small amounts (per-128 promotion), by exactly 11 binades (chunks ch % 3 == 0,
 *   rows r % 7 == 2: the largest span the folded E4M3 weights represent exactly), or by 12 and 40
 *   binades (chunks ch % 3 == 1, rows 3, 5 and 40 only: those chunks take the per-k32 fallback in
 *   the CTAs holding those rows and the per-128 path in every other CTA). */
/* lofp_cuda_w4a8_gemm's route in the cases below: LOFP_GEMM_ROUTE_AUTO (the public choice),
 * _KERNEL or _LARGE (forced through lofp_cuda_w4a8_test_config) */
static int g_w8_route = LOFP_GEMM_ROUTE_AUTO;

static const char *w8_ran_name(int r)
{
    return r == LOFP_W4A8_RAN_LARGE ? "large" : r == LOFP_W4A8_RAN_KERNEL ? "kernel" : "none";
}

/* The route lofp_cuda_w4a8_gemm must have taken for weights W at m under g_w8_route: the cuBLASLt
 * route where it applies (m >= LOFP_CUDA_W4A8_LARGE_M_MIN or forced, rowwise-exact weights,
 * cuBLASLt present), else the kernel (nothing when the large route was forced). So a refusal by
 * cuBLASLt itself (FP8 with OUTER_VEC_32F scales not supported) fails the check, with its reason. */
static int w8_check_route(const lofp_cuda_w4 *W, size_t m, const char *what)
{
    int want = LOFP_W4A8_RAN_KERNEL;
    if (g_w8_route != LOFP_GEMM_ROUTE_KERNEL &&
        (g_w8_route == LOFP_GEMM_ROUTE_LARGE || m >= LOFP_CUDA_W4A8_LARGE_M_MIN)) {
        if (W->w4a8_rowwise && lofp_cuda_large_available()) want = LOFP_W4A8_RAN_LARGE;
        else if (g_w8_route == LOFP_GEMM_ROUTE_LARGE) want = LOFP_W4A8_RAN_NONE;
    }
    int why = 0;
    const int ran = lofp_cuda_w4a8_last_route(&why);
    CHECKF(ran == want, "%s: w4a8 ran the %s route (large route: %s), want %s", what, w8_ran_name(ran),
           lofp_cuda_w4a8_why_name(why), w8_ran_name(want));
    return ran;
}

/* lofp_cuda_w4a8_gemm under g_w8_route; the route taken (LOFP_W4A8_RAN_*), checked */
static int w8_run(const lofp_cuda_w4 *W, const void *da, size_t m, int out_bf16, void *dc, void *dws, size_t wsb,
                  lofp_cuda_stream st, const char *what)
{
    lofp_cuda_w4a8_test_config(g_w8_route);
    const lofp_status r = lofp_cuda_w4a8_gemm(W, da, m, out_bf16 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F32, dc, dws, wsb, st);
    lofp_cuda_w4a8_test_config(LOFP_GEMM_ROUTE_AUTO);
    CHECKF(r == LOFP_OK || (r == LOFP_ERR_UNSUPPORTED && g_w8_route == LOFP_GEMM_ROUTE_LARGE),
           "%s: lofp_cuda_w4a8_gemm -> %s (%s)", what, lofp_cuda_status_name(r), lofp_cuda_last_error());
    return w8_check_route(W, m, what);
}

static double w8_gemm_case(size_t m, size_t n, size_t k, int exact, int out_bf16, int spans)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("mxfp4", &s));
    s.threads = ncpu();
    float *w = halloc(n * k * sizeof(float));
    gen(w, n, k, 0);
    for (size_t i = 0; i < n * k; i += 97) w[i] *= 8.0f;
    uint8_t *codes = halloc(n * k / 2), *scales = halloc(n * k / 32);
    float global = 1.0f;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, w, n, k, codes, scales, &global, NULL));
    if (spans == 1) {
        for (size_t r = 0; r < n; r++)
            for (size_t ch = 0; ch < k / 128; ch++) {
                int d[4];
                for (int j = 0; j < 4; j++) d[j] = (int)((r + ch + 2 * (size_t)j) % 4);
                if (ch % 3 == 0 && r % 7 == 2) { d[0] = 11; d[1] = 0; d[2] = 5; d[3] = 11; }
                if (ch % 3 == 1 && (r == 3 || r == 40)) { d[0] = 0; d[1] = 12; d[2] = 3; d[3] = 1; }
                if (ch % 3 == 1 && r == 5) { d[0] = 40; d[1] = 0; d[2] = 2; d[3] = 5; }
                for (int j = 0; j < 4; j++) scales[r * (k / 32) + 4 * ch + (size_t)j] = (uint8_t)(124 + (int)((r + ch) % 5) - d[j]);
            }
    }
    if (spans >= 2) {
        /* on the quantizer's own scales (a few binades per row), row 5's block 1 (given a nonzero
         * code) moved to exactly 14 (spans = 2: rowwise-exact, the large route) or 15 (spans = 3:
         * not, the kernel) binades below the row's other blocks. (The spans = 1 rewrite is not
         * applied here: its 40-binade block in row 5 alone makes a tensor not rowwise-exact.) */
        const size_t nb = k / 32;
        int mx = 0;
        for (size_t j = 0; j < nb; j++)
            if (j != 1 && scales[5 * nb + j] > mx) mx = scales[5 * nb + j];
        codes[5 * (k / 2) + 16] |= 0x02;
        scales[5 * nb + 1] = (uint8_t)(mx - (spans == 2 ? 14 : 15));
    }
    float *wd = halloc(n * k * sizeof(float));
    CHECK_OK(lofp_dequantize(&s, codes, scales, global, n, k, LOFP_DTYPE_F32, wd));
    uint16_t *a = halloc(m * k * 2);
    for (size_t i = 0; i < m; i++) {
        const int q = (int)(tu_next(&g_rng) % 17) - 8;
        for (size_t j = 0; j < k; j++) {
            float v;
            if (!exact) v = (float)tu_normal(&g_rng);
            else v = ldexpf((float)((int)(tu_next(&g_rng) % 15) - 7), q);
            a[i * k + j] = lofp_fp32_to_bf16(v);
        }
        if (exact) a[i * k + (size_t)(tu_next(&g_rng) % k)] = lofp_fp32_to_bf16(ldexpf(tu_next(&g_rng) & 1 ? 7.0f : -7.0f, q));
    }
    uint8_t *dcodes = dalloc(n * k / 2), *dscales = dalloc(n * k / 32);
    uint16_t *da = dalloc(m * k * 2);
    const size_t wsb = lofp_cuda_w4a8_workspace_bytes(m, k);
    void *dws = dalloc(wsb);
    const size_t ob = m * n * (out_bf16 ? 2 : 4);
    const size_t coff = g_gemm_c_off ? (out_bf16 ? 2 : 4) : 0; /* C one element off: one-value stores */
    void *dc0 = dalloc(ob + coff), *dc = (uint8_t *)dc0 + coff;
    float *dc16 = dalloc(m * n * 4);
    h2d(dcodes, codes, n * k / 2);
    h2d(dscales, scales, n * k / 32);
    h2d(da, a, m * k * 2);
    lofp_cuda_w4 W;
    LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, NULL, n, k, &W, NULL));
    if (spans == 2) CHECKF(W.w4a8_rowwise == 1, "w4a8: a row spanning exactly 14 binades must stay rowwise-exact");
    if (spans == 1 || spans == 3) CHECKF(W.w4a8_rowwise == 0, "w4a8: spans=%d must not be rowwise-exact", spans);
    CU(cudaMemset(dc, 0xFF, ob)); /* NaN poison */
    char what[96];
    snprintf(what, sizeof what, "w4a8 m=%zu n=%zu k=%zu spans=%d", m, n, k, spans);
    const int ran = w8_run(&W, da, m, out_bf16, dc, dws, wsb, NULL, what);
    LC(lofp_cuda_w4a16_gemm(&W, da, m, LOFP_DTYPE_F32, dc16, NULL));
    CU(cudaDeviceSynchronize());
    void *hc = halloc(ob);
    float *hc16 = halloc(m * n * 4);
    d2h(hc, dc, ob);
    d2h(hc16, dc16, m * n * 4);
    double num = 0, num16 = 0, den = 0, worst = 0;
    size_t nonfinite = 0, over = 0;
    double *arow = halloc(k * sizeof(double));
    /* the cuBLASLt route: cuBLAS's FP8 GEMM promotes its tensor-core partials to fp32 at an
     * interval it does not document; 2^-7 of sum|a w| covers up to 64 k32 steps of 2^-13
     * truncation per promotion */
    const double tol = ldexp(1.0, ran == LOFP_W4A8_RAN_LARGE ? -7 : -9) + ((double)(k / 32) + 3.0) * ldexp(1.0, -24);
    for (size_t i = 0; i < m; i++) {
        for (size_t kk = 0; kk < k; kk++) arow[kk] = lofp_bf16_to_fp32(a[i * k + kk]);
        for (size_t j = 0; j < n; j++) {
            double ref = 0, sabs = 0;
            const float *wr = wd + j * k;
            for (size_t kk = 0; kk < k; kk++) {
                ref += arow[kk] * wr[kk];
                sabs += fabs(arow[kk] * wr[kk]);
            }
            const double got = out_bf16 ? lofp_bf16_to_fp32(((uint16_t *)hc)[i * n + j]) : ((float *)hc)[i * n + j];
            const double g16 = hc16[i * n + j];
            if (!isfinite(got)) nonfinite++;
            num += (got - ref) * (got - ref);
            num16 += (g16 - ref) * (g16 - ref);
            den += ref * ref;
            if (exact && !out_bf16) {
                if (fabs(got - ref) > tol * sabs) over++;
                if (sabs > 0 && fabs(got - ref) / sabs > worst) worst = fabs(got - ref) / sabs;
            }
        }
    }
    const double err = sqrt(num / den), err16 = sqrt(num16 / den);
    CHECKF(nonfinite == 0, "w4a8 m=%zu n=%zu k=%zu: %zu outputs not written/finite", m, n, k, nonfinite);
    if (exact) {
        CHECKF(over == 0, "w4a8 exact m=%zu n=%zu k=%zu spans=%d: %zu outputs beyond the summation bound (worst |d|/sum|aw| %.3g)",
               m, n, k, spans, over, worst);
        if (out_bf16) CHECKF(err <= 4e-3, "w4a8 exact bf16 m=%zu: rel err %.3g", m, err);
    } else {
        CHECKF(err <= 0.05 && err >= 0.005, "w4a8 m=%zu n=%zu k=%zu spans=%d: rel Frobenius error %.3g outside [0.005, 0.05]",
               m, n, k, spans, err);
        CHECKF(err16 <= 1e-5 && err16 * 100 <= err, "w4a16 on the w4a8 data: rel err %.3g (w4a8 %.3g)", err16, err);
    }
    printf("    w4a8 %s m=%-4zu n=%-5zu k=%-5zu out=%s spans=%d route=%-6s rel.err %.2e (w4a16 %.2e)\n", exact ? "exact " : "normal", m, n, k,
           out_bf16 ? "bf16" : "f32 ", spans, w8_ran_name(ran), err, err16);
    if (exact && !out_bf16) printf("      worst |C - C64| / sum|a w| = %.2e (bound 2^-%d + (K/32 + 3) 2^-24 = %.2e)\n", worst,
                                   ran == LOFP_W4A8_RAN_LARGE ? 7 : 9, tol);
    lofp_cuda_w4_free(&W);
    free(w); free(codes); free(scales); free(wd); free(a); free(hc); free(hc16); free(arow);
    CU(cudaFree(dcodes)); CU(cudaFree(dscales)); CU(cudaFree(da)); CU(cudaFree(dws)); CU(cudaFree(dc0)); CU(cudaFree(dc16));
    g_cases++;
    return err;
}

/* ---- the large-M route's pieces (gemm_w4a8_large.cu) against CPU oracles ---- */

/* E2M1 code of element j of a row of linear MXFP4 codes (element 2i low nibble of byte i) */
static uint32_t e2m1_at(const uint8_t *row, size_t j) { return (row[j / 2] >> (4 * (j & 1))) & 15u; }

/* Builds MXFP4 weights [n, k] (linear codes and scales) whose rows exercise the cast: kind 0 all
 * rows rowwise-exact -- row r % 8 == 0 with a nonzero block exactly 14 binades below the row's
 * largest, == 1 with zero blocks (codes 0 and -0) whose scales are 0 and far above the row's, == 2
 * all zeros, == 3 with the smallest allowed row maximum (scale byte 7), the others spans 0..14;
 * kind 1: as 0 with one nonzero block of row 9 15 binades down; kind 2: a row whose largest
 * scale byte is 6; kind 3: one 0xFF scale. */
static void w8_cast_weights(size_t n, size_t k, int kind, uint8_t *codes, uint8_t *scales)
{
    const size_t nb = k / 32;
    for (size_t i = 0; i < n * k / 2; i++) codes[i] = (uint8_t)tu_next(&g_rng);
    for (size_t r = 0; r < n; r++) {
        const int E = 100 + (int)(tu_next(&g_rng) % 40);
        uint8_t *cr = codes + r * (k / 2), *sr = scales + r * nb;
        for (size_t j = 0; j < nb; j++) sr[j] = (uint8_t)(E - (int)(tu_next(&g_rng) % 15));
        sr[tu_next(&g_rng) % nb] = (uint8_t)E;
        switch (r % 8) {
        case 0: {
            const size_t j0 = (r / 8) % nb, j1 = (j0 + 1) % nb;
            sr[j1] = (uint8_t)E;
            cr[16 * j1] |= 0x01;
            sr[j0] = (uint8_t)(E - 14);
            cr[16 * j0] |= 0x01;
            break;
        }
        case 1:
            memset(cr + 16 * 1, 0x00, 16); sr[1] = 0;
            memset(cr + 16 * 2, 0x88, 16); sr[2] = 250; /* -0 codes, scale above the row's */
            memset(cr + 16 * 3, 0x80, 16); sr[3] = (uint8_t)(E - 40);
            break;
        case 2: memset(cr, 0, k / 2); break;
        case 3: for (size_t j = 0; j < nb; j++) sr[j] = (uint8_t)(7 - (int)(j % 8)); break;
        default: break;
        }
    }
    if (kind == 1) {
        for (size_t j = 0; j < nb; j++)
            if (j != 4) scales[9 * nb + j] = scales[9 * nb];
        scales[9 * nb + 4] = (uint8_t)(scales[9 * nb] - 15);
        codes[9 * (k / 2) + 64] |= 0x10; /* block 4 holds a nonzero code */
    }
    if (kind == 2) for (size_t j = 0; j < nb; j++) scales[11 * nb + j] = (uint8_t)(6 - (int)(j % 4));
    if (kind == 3) scales[13 * nb + 2] = 0xFF;
}

/* The weight cast and the load-time row pass, byte for byte against the CPU: per row
 * E = max{ scale byte of blocks with a nonzero code } (0 for a zero row) = W.d_row_exp; each
 * weight's E4M3 byte = lofp_encode(E4M3, decode(E2M1, code) * 2^(6 - d), RNE, SATURATE) with
 * d = E - e_j clamped to 0..14 (only blocks of zeros or flag-off rows reach the clamp); the row
 * scale 2^(E - 133) bit for bit; W.w4a8_rowwise as the rules say; and, for flagged weights, every
 * decoded E4M3 byte times its row scale equal to lofp_dequantize's value (the exactness claim). */
static void w8_cast_case(size_t n, size_t k, int kind)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("mxfp4", &s));
    const size_t nb = k / 32, cb = n * k / 2;
    uint8_t *codes = halloc(cb), *scales = halloc(n * nb);
    w8_cast_weights(n, k, kind, codes, scales);
    float *wd = halloc(n * k * sizeof(float));
    CHECK_OK(lofp_dequantize(&s, codes, scales, 1.0f, n, k, LOFP_DTYPE_F32, wd));
    uint8_t *dcodes = dalloc(cb), *dscales = dalloc(n * nb), *dout = dalloc(n * k);
    float *drs = dalloc(n * 4);
    h2d(dcodes, codes, cb);
    h2d(dscales, scales, n * nb);
    lofp_cuda_w4 W;
    LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, NULL, n, k, &W, NULL));
    CU(cudaMemset(dout, 0x5A, n * k));
    CU(cudaMemset(drs, 0x5A, n * 4));
    LC(lofp_cuda_w4a8_cast_weights(&W, dout, drs, NULL));
    CU(cudaDeviceSynchronize());
    uint8_t *out = halloc(n * k), *rexp = halloc(n);
    float *rs = halloc(n * 4);
    d2h(out, dout, n * k);
    d2h(rs, drs, n * 4);
    d2h(rexp, W.d_row_exp, n);
    size_t bad_e = 0, bad_b = 0, bad_s = 0, bad_x = 0, first = (size_t)-1;
    int want_flag = 1;
    for (size_t r = 0; r < n; r++) {
        const uint8_t *cr = codes + r * (k / 2), *sr = scales + r * nb;
        int E = 0, mn = 255, any = 0;
        for (size_t j = 0; j < nb; j++) {
            int nz = 0;
            for (size_t t = 0; t < 32; t++) nz |= (e2m1_at(cr, 32 * j + t) & 7u) != 0;
            if (sr[j] == 0xFF) want_flag = 0;
            else if (nz) {
                any = 1;
                if (sr[j] > E) E = sr[j];
                if (sr[j] < mn) mn = sr[j];
            }
        }
        if (any && (E - mn > 14 || E < 7)) want_flag = 0;
        bad_e += rexp[r] != (uint8_t)E;
        const float want_s = ldexpf(1.0f, E - 133);
        bad_s += fbits(rs[r]) != fbits(want_s);
        for (size_t j = 0; j < k; j++) {
            int d = E - (int)sr[j / 32];
            d = d < 0 ? 0 : d > 14 ? 14 : d;
            const float v = ldexpf(lofp_decode(LOFP_ELEM_E2M1, e2m1_at(cr, j)), 6 - d);
            const uint8_t want = (uint8_t)lofp_encode(LOFP_ELEM_E4M3, v, LOFP_RNE, LOFP_SATURATE, 0);
            if (out[r * k + j] != want) {
                if (bad_b++ == 0) first = r * k + j;
            }
            if (W.w4a8_rowwise && (double)lofp_decode(LOFP_ELEM_E4M3, out[r * k + j]) * (double)rs[r] != (double)wd[r * k + j])
                bad_x++;
        }
    }
    CHECKF(W.w4a8_rowwise == want_flag, "w4a8 cast kind %d: w4a8_rowwise %d, want %d", kind, W.w4a8_rowwise, want_flag);
    CHECKF(bad_e == 0 && bad_b == 0 && bad_s == 0 && bad_x == 0,
           "w4a8 cast n=%zu k=%zu kind %d: %zu row exponents, %zu bytes (first at %zu), %zu row scales off the CPU oracle; %zu values != lofp_dequantize",
           n, k, kind, bad_e, bad_b, first, bad_s, bad_x);
    printf("    w4a8 weight cast n=%-4zu k=%-5zu kind %d: rowwise-exact %d (want %d), %zu exponent / %zu byte / %zu scale / %zu value mismatches\n",
           n, k, kind, W.w4a8_rowwise, want_flag, bad_e, bad_b, bad_s, bad_x);
    lofp_cuda_w4_free(&W);
    free(codes); free(scales); free(wd); free(out); free(rexp); free(rs);
    CU(cudaFree(dcodes)); CU(cudaFree(dscales)); CU(cudaFree(dout)); CU(cudaFree(drs));
    g_cases++;
}

/* Both routes bit for bit against the CPU on data whose every product and partial sum is exact in
 * fp32 -- and in the FP8 tensor core's narrower accumulator: activations a 2^q with a integers
 * (one +-7 per row, so scale = 7 2^q / 448 = 2^(q-6) exactly and the codes a * 64 are exact), mostly
 * 0 and +-1; weights 0, +-0.5, +-1 with block scales 0..2 binades below the row's. In units of the
 * smallest product every product is an integer and sum |a w| < 2^11 (checked), so any order of
 * summation gives the exact sum; the epilogues multiply it by powers of two and 2^(q-6): the
 * fp32 output is exactly the CPU's fp64 sum and bf16 its RNE. Zeros compare equal whatever sign.
 * cap (bytes, 0 = default) splits the large route into chunks of rows. */
static void w8_bits_case(size_t m, size_t n, size_t k, size_t cap)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("mxfp4", &s));
    const size_t nb = k / 32, cb = n * k / 2;
    static const uint8_t wc[8] = {0, 0, 0, 1, 2, 9, 10, 0};
    uint8_t *codes = halloc(cb), *scales = halloc(n * nb);
    for (size_t i = 0; i < cb; i++) codes[i] = (uint8_t)(wc[tu_next(&g_rng) % 8] | (wc[tu_next(&g_rng) % 8] << 4));
    for (size_t r = 0; r < n; r++)
        for (size_t j = 0; j < nb; j++) scales[r * nb + j] = (uint8_t)(118 + (int)(r % 9) - (int)(tu_next(&g_rng) % 3));
    float *wd = halloc(n * k * sizeof(float));
    CHECK_OK(lofp_dequantize(&s, codes, scales, 1.0f, n, k, LOFP_DTYPE_F32, wd));
    uint16_t *a = halloc(m * k * 2);
    int *q = halloc(m * sizeof(int));
    for (size_t i = 0; i < m; i++) {
        q[i] = (int)(tu_next(&g_rng) % 17) - 8;
        for (size_t j = 0; j < k; j++) {
            const uint64_t t = tu_next(&g_rng) % 8;
            a[i * k + j] = lofp_fp32_to_bf16(ldexpf(t == 0 ? 1.0f : t == 1 ? -1.0f : 0.0f, q[i]));
        }
        a[i * k + (size_t)(tu_next(&g_rng) % k)] = lofp_fp32_to_bf16(ldexpf(tu_next(&g_rng) & 1 ? 7.0f : -7.0f, q[i]));
    }
    /* the oracle: fp64 sums (exact), and the bound in units of a 2^q * 2^(e_min - 128) */
    float *ref = halloc(m * n * sizeof(float));
    double worst_units = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t r = 0; r < n; r++) {
            double acc = 0, sabs = 0, umin = INFINITY;
            for (size_t j = 0; j < k; j++) {
                const double av = lofp_bf16_to_fp32(a[i * k + j]), p = av * wd[r * k + j];
                acc += p;
                sabs += fabs(p);
            }
            for (size_t j = 0; j < nb; j++) {
                const double u = ldexp(1.0, q[i] + (int)scales[r * nb + j] - 128);
                if (u < umin) umin = u;
            }
            ref[i * n + r] = (float)acc;
            CHECK((double)ref[i * n + r] == acc);
            if (sabs / umin > worst_units) worst_units = sabs / umin;
        }
    CHECKF(worst_units < 2048.0, "w4a8 bits case: sum|a w| reaches %.0f units (the design wants < 2^11)", worst_units);
    uint8_t *dcodes = dalloc(cb), *dscales = dalloc(n * nb);
    uint16_t *da = dalloc(m * k * 2);
    const size_t wsb = lofp_cuda_w4a8_workspace_bytes(m, k);
    void *dws = dalloc(wsb), *dc = dalloc(m * n * 4);
    h2d(dcodes, codes, cb);
    h2d(dscales, scales, n * nb);
    h2d(da, a, m * k * 2);
    lofp_cuda_w4 W;
    LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, NULL, n, k, &W, NULL));
    CHECKF(W.w4a8_rowwise == 1, "w4a8 bits case: weights not rowwise-exact");
    uint32_t *hc = halloc(m * n * 4);
    const int routes[2] = {LOFP_GEMM_ROUTE_KERNEL, LOFP_GEMM_ROUTE_AUTO};
    if (cap) lofp_cuda_large_test_config(cap, 0);
    for (int ri = 0; ri < 2; ri++)
        for (int ob = 0; ob < 2; ob++) {
            g_w8_route = routes[ri];
            CU(cudaMemset(dc, 0xFF, m * n * 4));
            char what[96];
            snprintf(what, sizeof what, "w4a8 bits m=%zu n=%zu k=%zu cap=%zu", m, n, k, cap);
            const int ran = w8_run(&W, da, m, ob, dc, dws, wsb, NULL, what);
            CU(cudaDeviceSynchronize());
            d2h(hc, dc, m * n * (ob ? 2 : 4));
            size_t bad = 0, firstb = (size_t)-1;
            for (size_t i = 0; i < m * n; i++) {
                const float want = ref[i];
                uint32_t g, w;
                if (ob) { g = ((uint16_t *)hc)[i]; w = lofp_fp32_to_bf16(want); }
                else { g = hc[i]; w = fbits(want); }
                const int both_zero = ob ? ((g & 0x7FFFu) == 0 && (w & 0x7FFFu) == 0) : ((g & 0x7FFFFFFFu) == 0 && (w & 0x7FFFFFFFu) == 0);
                if (g != w && !both_zero) {
                    if (bad++ == 0) firstb = i;
                }
            }
            CHECKF(bad == 0, "%s out=%s route=%s: %zu outputs differ from the exact CPU result (first at %zu)", what,
                   ob ? "bf16" : "f32", w8_ran_name(ran), bad, firstb);
            printf("    w4a8 bit-exact m=%-4zu n=%-5zu k=%-5zu cap=%-8zu out=%s route=%-6s: %zu mismatches (max sum|a w| %.0f units)\n",
                   m, n, k, cap, ob ? "bf16" : "f32 ", w8_ran_name(ran), bad, worst_units);
        }
    g_w8_route = LOFP_GEMM_ROUTE_AUTO;
    if (cap) lofp_cuda_large_test_config(0, 0);
    lofp_cuda_w4_free(&W);
    free(codes); free(scales); free(wd); free(a); free(q); free(ref); free(hc);
    CU(cudaFree(dcodes)); CU(cudaFree(dscales)); CU(cudaFree(da)); CU(cudaFree(dws)); CU(cudaFree(dc));
    g_cases++;
}

/* Prepared MXFP4 weights [n, k] of gen(kind 0) data quantized by the CPU library (lofp_quantize,
 * the "mxfp4" preset): the W4A8 cases' weights when their exact values do not matter. Consumes
 * the same random numbers, at the same point, as generating them inline. */
static void w8_gauss_weights(size_t n, size_t k, lofp_cuda_w4 *W)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("mxfp4", &s));
    s.threads = ncpu();
    float *w = halloc(n * k * sizeof(float));
    gen(w, n, k, 0);
    uint8_t *codes = halloc(n * k / 2), *scales = halloc(n * k / 32);
    float global = 1.0f;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, w, n, k, codes, scales, &global, NULL));
    uint8_t *dcodes = dalloc(n * k / 2), *dscales = dalloc(n * k / 32);
    h2d(dcodes, codes, n * k / 2);
    h2d(dscales, scales, n * k / 32);
    LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, NULL, n, k, W, NULL));
    CU(cudaDeviceSynchronize());
    CU(cudaFree(dcodes)); CU(cudaFree(dscales));
    free(w); free(codes); free(scales);
}

/* Rows of activations holding NaN, +Inf or -Inf give all-NaN output rows (token scale NaN), the
 * other rows finite, on both routes and both output types. */
static void w8_nan_case(size_t m, size_t n, size_t k)
{
    lofp_cuda_w4 W;
    w8_gauss_weights(n, k, &W);
    uint16_t *a = halloc(m * k * 2);
    for (size_t i = 0; i < m * k; i++) a[i] = lofp_fp32_to_bf16((float)tu_normal(&g_rng));
    a[1 * k + 5] = lofp_fp32_to_bf16(NAN);
    a[3 * k + k - 1] = lofp_fp32_to_bf16(INFINITY);
    a[5 * k] = lofp_fp32_to_bf16(-INFINITY);
    uint16_t *da = dalloc(m * k * 2);
    const size_t wsb = lofp_cuda_w4a8_workspace_bytes(m, k);
    void *dws = dalloc(wsb), *dc = dalloc(m * n * 4);
    h2d(da, a, m * k * 2);
    float *hc = halloc(m * n * 4);
    const int routes[2] = {LOFP_GEMM_ROUTE_KERNEL, LOFP_GEMM_ROUTE_AUTO};
    for (int ri = 0; ri < 2; ri++)
        for (int ob = 0; ob < 2; ob++) {
            g_w8_route = routes[ri];
            CU(cudaMemset(dc, 0, m * n * 4));
            char what[64];
            snprintf(what, sizeof what, "w4a8 non-finite m=%zu n=%zu k=%zu", m, n, k);
            const int ran = w8_run(&W, da, m, ob, dc, dws, wsb, NULL, what);
            CU(cudaDeviceSynchronize());
            d2h(hc, dc, m * n * (ob ? 2 : 4));
            size_t bad = 0;
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    const float v = ob ? lofp_bf16_to_fp32(((uint16_t *)hc)[i * n + j]) : hc[i * n + j];
                    bad += (i == 1 || i == 3 || i == 5) ? !isnan(v) : !isfinite(v);
                }
            CHECKF(bad == 0, "%s out=%s route=%s: %zu outputs wrong (want NaN rows 1, 3, 5, finite elsewhere)", what,
                   ob ? "bf16" : "f32", w8_ran_name(ran), bad);
            printf("    w4a8 non-finite rows m=%-4zu n=%-5zu k=%-5zu out=%s route=%-6s: %zu wrong\n", m, n, k, ob ? "bf16" : "f32 ",
                   w8_ran_name(ran), bad);
        }
    g_w8_route = LOFP_GEMM_ROUTE_AUTO;
    lofp_cuda_w4_free(&W);
    free(a); free(hc);
    CU(cudaFree(da)); CU(cudaFree(dws)); CU(cudaFree(dc));
    g_cases++;
}

/* 1 when the device buffers dc and dref hold the same bytes (after the device's work so far) */
static int w8_same_out(const void *dc, const void *dref, size_t bytes)
{
    CU(cudaDeviceSynchronize());
    uint8_t *h = halloc(2 * bytes);
    d2h(h, dc, bytes);
    d2h(h + bytes, dref, bytes);
    const int same = memcmp(h, h + bytes, bytes) == 0;
    free(h);
    return same;
}

/* lofp_cuda_w4a8_gemm_reuse: two weights (n = 272 and 528, the same k) on one activation, as a
 * model's q and k projections. The second call, given the state the first returned, equals
 * lofp_cuda_w4a8_gemm bit for bit; that it skipped the quantize is shown by changing d_a between
 * the calls: the output is still the old activation's. A workspace quantized by
 * lofp_cuda_w4a8_quantize_act (kernel order) serves the kernel route and is quantized again for
 * the large one. The states returned, and the argument checks. */
static void w8_reuse_case(size_t m, size_t k)
{
    const int f0 = tu_failures;
    const size_t n1 = 272, n2 = 528;
    lofp_cuda_w4 W1, W2;
    w8_gauss_weights(n1, k, &W1);
    w8_gauss_weights(n2, k, &W2);
    uint16_t *a = halloc(m * k * 2), *b = halloc(m * k * 2);
    for (size_t i = 0; i < m * k; i++) {
        a[i] = lofp_fp32_to_bf16((float)tu_normal(&g_rng));
        b[i] = lofp_fp32_to_bf16((float)tu_normal(&g_rng));
    }
    uint16_t *da = dalloc(m * k * 2);
    const size_t wsb = lofp_cuda_w4a8_workspace_bytes(m, k);
    void *dws = dalloc(wsb), *dws2 = dalloc(wsb), *dc = dalloc(m * n2 * 4), *dref = dalloc(m * n2 * 4);
    h2d(da, a, m * k * 2);
    const int large = m >= LOFP_CUDA_W4A8_LARGE_M_MIN && W1.w4a8_rowwise && W2.w4a8_rowwise && lofp_cuda_large_available();
    const int want = large ? LOFP_W4A8_WS_PLAIN : LOFP_W4A8_WS_KERNEL;
    char what[64];
    snprintf(what, sizeof what, "w4a8 reuse m=%zu k=%zu", m, k);
    LC(lofp_cuda_w4a8_gemm(&W2, da, m, LOFP_DTYPE_F32, dref, dws2, wsb, NULL)); /* the reference, a */
    int st = LOFP_W4A8_WS_EMPTY;
    LC(lofp_cuda_w4a8_gemm_reuse(&W1, da, m, LOFP_DTYPE_F32, dc, dws, wsb, &st, NULL));
    CHECKF(st == want, "%s: state %d after the first call, want %d", what, st, want);
    h2d(da, b, m * k * 2); /* a changed behind the workspace: a reusing call must not see it */
    LC(lofp_cuda_w4a8_gemm_reuse(&W2, da, m, LOFP_DTYPE_F32, dc, dws, wsb, &st, NULL));
    CHECKF(st == want, "%s: state %d after the second call, want %d", what, st, want);
    CHECKF(w8_same_out(dc, dref, m * n2 * 4), "%s: the reusing call differs from lofp_cuda_w4a8_gemm on a", what);
    /* the same call without the state quantizes b: a different product */
    st = LOFP_W4A8_WS_EMPTY;
    LC(lofp_cuda_w4a8_gemm_reuse(&W2, da, m, LOFP_DTYPE_F32, dc, dws, wsb, &st, NULL));
    CHECKF(!w8_same_out(dc, dref, m * n2 * 4), "%s: a call without the state did not quantize the new activation", what);
    /* kernel-order codes from lofp_cuda_w4a8_quantize_act (of b): reused by the kernel route,
     * quantized again (same values, plain order) by the large one -- either way b's product */
    LC(lofp_cuda_w4a8_gemm(&W2, da, m, LOFP_DTYPE_F32, dref, dws2, wsb, NULL));
    LC(lofp_cuda_w4a8_quantize_act(da, m, k, dws, wsb, NULL));
    st = LOFP_W4A8_WS_KERNEL;
    LC(lofp_cuda_w4a8_gemm_reuse(&W2, da, m, LOFP_DTYPE_F32, dc, dws, wsb, &st, NULL));
    CHECKF(st == want, "%s: state %d after a call on quantize_act's codes, want %d", what, st, want);
    CHECKF(w8_same_out(dc, dref, m * n2 * 4), "%s: the call on quantize_act's codes differs", what);
    /* argument checks leave a NULL or unknown state refused, nothing enqueued */
    CHECK(lofp_cuda_w4a8_gemm_reuse(&W2, da, m, LOFP_DTYPE_F32, dc, dws, wsb, NULL, NULL) == LOFP_ERR_INVALID_ARG);
    st = 3;
    CHECK(lofp_cuda_w4a8_gemm_reuse(&W2, da, m, LOFP_DTYPE_F32, dc, dws, wsb, &st, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(st == 3);
    st = LOFP_W4A8_WS_PLAIN;
    CHECK(lofp_cuda_w4a8_gemm_reuse(&W2, da, m, LOFP_DTYPE_F16, dc, dws, wsb, &st, NULL) == LOFP_ERR_INVALID_ARG);
    printf("    w4a8 reuse m=%-4zu k=%-5zu (%s route): %s\n", m, k, large ? "large" : "kernel",
           tu_failures == f0 ? "ok" : "FAILED");
    lofp_cuda_w4_free(&W1);
    lofp_cuda_w4_free(&W2);
    free(a); free(b);
    CU(cudaFree(da)); CU(cudaFree(dws)); CU(cudaFree(dws2)); CU(cudaFree(dc)); CU(cudaFree(dref));
    g_cases++;
}

/* The refusals: cuBLASLt "absent" (test hook) -> the public call runs the kernel, the forced large
 * route returns LOFP_ERR_UNSUPPORTED with C untouched; a stream being captured into a CUDA graph
 * -> the kernel is captured (reason "stream capturing") and the replay equals the kernel's result
 * bit for bit. */
static void w8_refusal_case(void)
{
    /* an m that takes the large route when nothing refuses it */
    const size_t m = LOFP_CUDA_W4A8_LARGE_M_MIN + 16, n = 272, k = 1152;
    lofp_cuda_w4 W;
    w8_gauss_weights(n, k, &W);
    uint16_t *a = halloc(m * k * 2);
    for (size_t i = 0; i < m * k; i++) a[i] = lofp_fp32_to_bf16((float)tu_normal(&g_rng));
    uint16_t *da = dalloc(m * k * 2);
    const size_t wsb = lofp_cuda_w4a8_workspace_bytes(m, k);
    void *dws = dalloc(wsb), *dc = dalloc(m * n * 4), *dk = dalloc(m * n * 4);
    h2d(da, a, m * k * 2);
    uint32_t *h1 = halloc(m * n * 4), *h2 = halloc(m * n * 4);
    int why = 0;
    /* the kernel's result, the reference for the captured graph */
    g_w8_route = LOFP_GEMM_ROUTE_KERNEL;
    w8_run(&W, da, m, 0, dk, dws, wsb, NULL, "w4a8 refusals: kernel");
    /* cuBLASLt switched off */
    lofp_cuda_large_test_config(0, 1);
    g_w8_route = LOFP_GEMM_ROUTE_AUTO;
    CU(cudaMemset(dc, 0xFF, m * n * 4));
    w8_run(&W, da, m, 0, dc, dws, wsb, NULL, "w4a8 refusals: cuBLASLt off, public call");
    CHECK(lofp_cuda_w4a8_last_route(&why) == LOFP_W4A8_RAN_KERNEL && why == LOFP_W4A8_WHY_NO_LIBRARY);
    g_w8_route = LOFP_GEMM_ROUTE_LARGE;
    CU(cudaMemset(dc, 0xFF, m * n * 4));
    w8_run(&W, da, m, 0, dc, dws, wsb, NULL, "w4a8 refusals: cuBLASLt off, forced large");
    CU(cudaDeviceSynchronize());
    d2h(h1, dc, m * n * 4);
    size_t touched = 0;
    for (size_t i = 0; i < m * n; i++) touched += h1[i] != 0xFFFFFFFFu;
    CHECKF(touched == 0, "w4a8: refused large route wrote %zu outputs", touched);
    lofp_cuda_large_test_config(0, 0);
    /* stream capture */
    g_w8_route = LOFP_GEMM_ROUTE_AUTO;
    cudaStream_t cs;
    CU(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CU(cudaMemset(dc, 0xFF, m * n * 4));
    CU(cudaDeviceSynchronize());
    CU(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    lofp_cuda_w4a8_test_config(LOFP_GEMM_ROUTE_AUTO);
    const lofp_status rc = lofp_cuda_w4a8_gemm(&W, da, m, LOFP_DTYPE_F32, dc, dws, wsb, (lofp_cuda_stream)cs);
    CU(cudaStreamEndCapture(cs, &graph));
    CHECKF(rc == LOFP_OK, "w4a8 under stream capture -> %s", lofp_cuda_status_name(rc));
    const int ran = lofp_cuda_w4a8_last_route(&why);
    CHECKF(ran == LOFP_W4A8_RAN_KERNEL && why == LOFP_W4A8_WHY_CAPTURING, "w4a8 under capture ran %s (%s)", w8_ran_name(ran),
           lofp_cuda_w4a8_why_name(why));
    CU(cudaGraphInstantiate(&exec, graph, 0));
    CU(cudaGraphLaunch(exec, cs));
    CU(cudaStreamSynchronize(cs));
    d2h(h1, dc, m * n * 4);
    d2h(h2, dk, m * n * 4);
    CHECKF(memcmp(h1, h2, m * n * 4) == 0, "w4a8: the captured kernel differs from the kernel run directly");
    CU(cudaGraphExecDestroy(exec));
    CU(cudaGraphDestroy(graph));
    CU(cudaStreamDestroy(cs));
    printf("    w4a8 refusals (cuBLASLt off, stream capture): %s\n", touched == 0 && ran == LOFP_W4A8_RAN_KERNEL ? "ok" : "FAILED");
    lofp_cuda_w4_free(&W);
    free(a); free(h1); free(h2);
    CU(cudaFree(da)); CU(cudaFree(dws)); CU(cudaFree(dc)); CU(cudaFree(dk));
    g_cases++;
}

static void test_w4a8(void)
{
    const int f0 = tu_failures;
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    w8_quant_case(9, 256, 0);
    w8_quant_case(33, 1152, 0);
    w8_quant_case(300, 8192, 0);
    /* the plain K order of the large route */
    w8_quant_case(9, 256, 1);
    w8_quant_case(300, 1152, 1);
    /* the large route's weight cast and the load-time rowwise-exact flag (any device) */
    for (int kind = 0; kind < 4; kind++) w8_cast_case(64, 512, kind);
    w8_cast_case(16, 128, 0);
    /* argument checks (nothing is enqueued) */
    {
        lofp_scheme s;
        CHECK_OK(lofp_scheme_preset("mxfp4", &s));
        const size_t n = 128, k = 256, m = 4;
        uint8_t *dcodes = dalloc(n * k / 2), *dscales = dalloc(n * k / 16);
        CU(cudaMemset(dcodes, 0, n * k / 2));
        CU(cudaMemset(dscales, 127, n * k / 16));
        uint16_t *da = dalloc(m * k * 2);
        const size_t wsb = lofp_cuda_w4a8_workspace_bytes(m, k);
        uint8_t *dws = dalloc(wsb + 256);
        float *dc = dalloc(m * n * 4);
        lofp_cuda_w4 W, V;
        LC(lofp_cuda_w4_prepare(&s, dcodes, dscales, NULL, n, k, &W, NULL));
        lofp_scheme nv;
        CHECK_OK(lofp_scheme_preset("nvfp4", &nv));
        LC(lofp_cuda_w4_prepare(&nv, dcodes, dscales, NULL, n, k, &V, NULL));
        CHECK(lofp_cuda_w4a8_workspace_bytes(0, k) == 0);
        CHECK(lofp_cuda_w4a8_gemm(&W, da, m, LOFP_DTYPE_F32, dc, dws, wsb - 1, NULL) == LOFP_ERR_INVALID_ARG);
        CHECK(lofp_cuda_w4a8_gemm(&W, da, m, LOFP_DTYPE_F32, dc, dws + 16, wsb, NULL) == LOFP_ERR_INVALID_ARG);
        CHECK(lofp_cuda_w4a8_gemm(&W, da, 0, LOFP_DTYPE_F32, dc, dws, wsb, NULL) == LOFP_ERR_SHAPE);
        CHECK(lofp_cuda_w4a8_gemm(&W, da, m, LOFP_DTYPE_F16, dc, dws, wsb, NULL) == LOFP_ERR_INVALID_ARG);
        CHECK(lofp_cuda_w4a8_gemm(&V, da, m, LOFP_DTYPE_F32, dc, dws, wsb, NULL) == LOFP_ERR_UNSUPPORTED);
        CHECK(lofp_cuda_w4a8_gemm(&W, NULL, m, LOFP_DTYPE_F32, dc, dws, wsb, NULL) == LOFP_ERR_INVALID_ARG);
        CHECK(lofp_cuda_w4a8_quantize_act(da, m, 200, dws, wsb, NULL) == LOFP_ERR_SHAPE);
        CHECK(lofp_cuda_w4a8_quantize_act(da, m, k, dws, wsb - 1, NULL) == LOFP_ERR_INVALID_ARG);
        CHECK(lofp_cuda_w4a8_gemm_quantized(&W, m, LOFP_DTYPE_F32, dc, dws, wsb - 1, NULL) == LOFP_ERR_INVALID_ARG);
        CHECK(lofp_cuda_w4a8_gemm_quantized(&V, m, LOFP_DTYPE_F32, dc, dws, wsb, NULL) == LOFP_ERR_UNSUPPORTED);
        lofp_cuda_w4_free(&W);
        lofp_cuda_w4_free(&V);
        CU(cudaFree(dcodes)); CU(cudaFree(dscales)); CU(cudaFree(da)); CU(cudaFree(dws)); CU(cudaFree(dc));
        printf("    w4a8 argument checks: %s\n", tu_failures == f0 ? "ok" : "FAILED");
    }
    if (!(prop.major == 9 && prop.minor == 0)) {
        printf("  W4A8: GEMM skipped (needs compute capability 9.0)\n");
        return;
    }
    /* the kernel, forced at every m (the public call sends m >= LOFP_CUDA_W4A8_LARGE_M_MIN with
     * rowwise-exact weights to the cuBLASLt route, tested below) */
    g_w8_route = LOFP_GEMM_ROUTE_KERNEL;
    /* kernel configuration by shape (gemm_w4a8.cu): m <= 64 TN = 64 KW = 2; m > 64 TN = 128 with
     * KW = 2 at these small n (fewer CTA waves) and KW = 1 at n = 8192, m = 130 (2 x 64 CTAs) */
    const size_t ms[] = {1, 16, 64, 65, 130, 256};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) w8_gemm_case(ms[i], 512, 1152, 0, 0, 0);
    w8_gemm_case(256, 1024, 2048, 0, 1, 0);
    w8_gemm_case(16, 4096, 8192, 0, 0, 0);
    w8_gemm_case(130, 8192, 1024, 0, 0, 0);
    /* partial row and token tiles, the summation bound */
    w8_gemm_case(70, 272, 1152, 1, 0, 0);
    w8_gemm_case(200, 400, 4096, 1, 0, 0);
    w8_gemm_case(5, 512, 1024, 1, 0, 0);
    w8_gemm_case(33, 512, 1024, 1, 1, 0);
    /* C one element off an aligned address: the kernel's one-value stores (both output types) */
    g_gemm_c_off = 1;
    w8_gemm_case(70, 272, 1152, 1, 0, 0);
    w8_gemm_case(33, 512, 1024, 1, 1, 0);
    g_gemm_c_off = 0;
    /* per-128 promotion at spans up to 11 binades and the per-k32 fallback, in one matrix, in
     * every configuration */
    w8_gemm_case(40, 512, 1152, 1, 0, 1);
    w8_gemm_case(200, 400, 4096, 1, 0, 1);
    w8_gemm_case(130, 8192, 1024, 1, 0, 1);
    w8_gemm_case(64, 528, 1152, 0, 0, 1);
    w8_gemm_case(256, 1024, 1152, 0, 1, 1);
    g_w8_route = LOFP_GEMM_ROUTE_AUTO;
    printf("  W4A8 kernel: %s\n", tu_failures == f0 ? "ok" : "FAILED");

    /* the public call: the cuBLASLt FP8 route from m = LOFP_CUDA_W4A8_LARGE_M_MIN (rowwise-exact
     * weights), the kernel below it and for other weights */
    const int f1 = tu_failures;
    printf("  W4A8 large-M route (m >= %d): cuBLASLt %s\n", LOFP_CUDA_W4A8_LARGE_M_MIN,
           lofp_cuda_large_available() ? "available" : "NOT AVAILABLE -- every case below must run the kernel");
    /* bit for bit against the CPU where every sum is exact: both routes, both output types, one
     * chunk and several (64 rows per chunk: 272 = 4 x 64 + 16) */
    w8_bits_case(64, 272, 512, 0);
    w8_bits_case(200, 528, 1152, 0);
    w8_bits_case(77, 272, 1152, (size_t)64 * 1152);
    /* random data: the relative Frobenius error band of the kernel (activation rounding) */
    w8_gemm_case(64, 528, 1152, 0, 0, 0);
    w8_gemm_case(100, 272, 2048, 0, 1, 0);
    w8_gemm_case(256, 1040, 640, 0, 0, 0);
    w8_gemm_case(1000, 272, 1152, 0, 1, 0);
    w8_gemm_case(LOFP_CUDA_W4A8_LARGE_M_MIN - 1, 272, 1152, 0, 0, 0);
    /* a row spanning exactly 14 binades (large route) and 15 (kernel), one over 40 (kernel), at
     * an m where only the flag decides */
    w8_gemm_case(LOFP_CUDA_W4A8_LARGE_M_MIN + 16, 272, 1152, 0, 0, 2);
    w8_gemm_case(LOFP_CUDA_W4A8_LARGE_M_MIN + 16, 272, 1152, 0, 0, 3);
    w8_gemm_case(LOFP_CUDA_W4A8_LARGE_M_MIN + 16, 272, 1152, 0, 0, 1);
    /* the summation bound of the exact cases (looser on the large route) */
    w8_gemm_case(70, 272, 1152, 1, 0, 0);
    w8_gemm_case(200, 400, 4096, 1, 0, 0);
    w8_gemm_case(LOFP_CUDA_W4A8_LARGE_M_MIN + 16, 272, 1152, 1, 0, 2);
    w8_nan_case(70, 272, 1152);
    w8_reuse_case(70, 1152);
    w8_reuse_case(LOFP_CUDA_W4A8_LARGE_M_MIN + 16, 1152);
    w8_refusal_case();
    printf("  W4A8 large-M route: %s\n", tu_failures == f1 ? "ok" : "FAILED");
}

/* ---- 4 and 5. UltraQuant cache ---- */
typedef struct {
    size_t B, hq, hk, D, bs, nblocks, maxb;
    int32_t *seq, *bt;   /* host */
    uint8_t *dcache;     /* device */
    size_t slot, cache_bytes;
    float *k, *v;        /* host [tokens, hk, D] fp32 (bf16 values) */
    size_t tokens;
    int64_t *map;        /* host slot mapping per token */
} uqcache;

/* Stores K/V of all tokens of all sequences; checks the bytes against lofp_quantize. */
static void build_cache(uqcache *c, int check, const float *kin, const float *vin, lofp_dtype dt)
{
    lofp_scheme s;
    lofp_scheme_preset("ultraquant", &s);
    c->slot = lofp_cuda_uq_slot_bytes(c->D);
    size_t total = 0;
    c->maxb = 1;
    for (size_t b = 0; b < c->B; b++) {
        total += (size_t)c->seq[b];
        size_t nb = ((size_t)c->seq[b] + c->bs - 1) / c->bs;
        if (nb > c->maxb) c->maxb = nb;
    }
    c->tokens = total;
    c->nblocks = c->B * c->maxb + 3;
    c->cache_bytes = c->nblocks * c->bs * c->hk * c->slot;
    /* block tables: a random permutation of physical blocks */
    int32_t *perm = halloc(c->nblocks * sizeof(int32_t));
    for (size_t i = 0; i < c->nblocks; i++) perm[i] = (int32_t)i;
    for (size_t i = c->nblocks - 1; i > 0; i--) {
        size_t j = tu_next(&g_rng) % (i + 1);
        int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    c->bt = halloc(c->B * c->maxb * sizeof(int32_t));
    for (size_t i = 0; i < c->B * c->maxb; i++) c->bt[i] = perm[i];
    c->map = halloc((total + 1) * sizeof(int64_t));
    size_t t = 0;
    for (size_t b = 0; b < c->B; b++)
        for (int n = 0; n < c->seq[b]; n++, t++)
            c->map[t] = (int64_t)c->bt[b * c->maxb + n / c->bs] * (int64_t)c->bs + n % c->bs;
    const size_t ne = total * c->hk * c->D;
    c->k = halloc((ne + 1) * sizeof(float));
    c->v = halloc((ne + 1) * sizeof(float));
    for (size_t i = 0; i < ne; i++) {
        float kv = kin ? kin[i] : (float)(tu_normal(&g_rng) * ((i % 977) == 3 ? 40.0 : 2.0));
        float vv = vin ? vin[i] : (float)(tu_normal(&g_rng) * 0.5);
        c->k[i] = lofp_bf16_to_fp32(lofp_fp32_to_bf16(kv));
        c->v[i] = lofp_bf16_to_fp32(lofp_fp32_to_bf16(vv));
        if (kin) { c->k[i] = kv; c->v[i] = vv; }
    }
    /* skip one token (slot mapping -1) in the check run */
    int64_t *map_dev = halloc((total + 1) * sizeof(int64_t));
    memcpy(map_dev, c->map, total * sizeof(int64_t));
    if (check && total > 3) map_dev[2] = -1;
    void *kd = to_dtype(c->k, ne, dt), *vd = to_dtype(c->v, ne, dt);
    void *dk = dalloc(ne * dt_size(dt) + 16), *dv = dalloc(ne * dt_size(dt) + 16);
    int64_t *dmap = dalloc((total + 1) * sizeof(int64_t));
    c->dcache = dalloc(c->cache_bytes);
    h2d(dk, kd, ne * dt_size(dt));
    h2d(dv, vd, ne * dt_size(dt));
    h2d(dmap, map_dev, total * sizeof(int64_t));
    CU(cudaMemset(c->dcache, 0xA5, c->cache_bytes));
    LC(lofp_cuda_uq_store(&s, dt, dk, dv, total, c->hk, c->D, dmap, c->dcache, c->bs, NULL));
    CU(cudaDeviceSynchronize());
    if (check) {
        uint8_t *hc = halloc(c->cache_bytes);
        d2h(hc, c->dcache, c->cache_bytes);
        const size_t D = c->D;
        uint8_t *code = halloc(D), sc[64];
        size_t bad = 0;
        for (size_t tt = 0; tt < total; tt++)
            for (size_t h = 0; h < c->hk; h++) {
                const uint8_t *slot = hc + ((size_t)c->map[tt] * c->hk + h) * c->slot;
                if (map_dev[tt] < 0) {
                    for (size_t i = 0; i < c->slot; i++) bad += slot[i] != 0xA5;
                    continue;
                }
                for (int kv = 0; kv < 2; kv++) {
                    lofp_scheme q = s;
                    q.rotate = kv == 0;
                    /* the CPU cache store's setting (src/kv/kvcache.c): a group with NaN or Inf
                     * (after the rotation, for K) is stored as a zero group */
                    q.propagate_nonfinite = 1;
                    const uint8_t *src = (const uint8_t *)(kv ? vd : kd) + (tt * c->hk + h) * D * dt_size(dt);
                    CHECK_OK(lofp_quantize(&q, dt, src, 1, D, code, sc, NULL, NULL));
                    const uint8_t *dst = slot + (kv ? D / 2 + D / 32 : 0);
                    bad += memcmp(dst, code, D / 2) != 0;
                    bad += memcmp(dst + D / 2, sc, D / 32) != 0;
                }
            }
        CHECKF(bad == 0, "uq store D=%zu dt=%d: %zu slot regions differ", c->D, (int)dt, bad);
        free(hc); free(code);
        g_cases++;
    }
    free(perm); free(map_dev); free(kd); free(vd);
    CU(cudaFree(dk)); CU(cudaFree(dv)); CU(cudaFree(dmap));
}

static void free_cache(uqcache *c)
{
    CU(cudaFree(c->dcache));
    free(c->bt); free(c->map); free(c->k); free(c->v);
}

/* fp64 reference over the dequantized cache bytes. q [B, hq, D] fp32. */
static void attn_ref(const uqcache *c, const uint8_t *hc, const float *q, const float *sinks,
                     float scale, double *out)
{
    const size_t D = c->D, G = c->hq / c->hk;
    float *qr = halloc(D * sizeof(float));
    double *kd = halloc(D * sizeof(double)), *vd = halloc(D * sizeof(double));
    for (size_t b = 0; b < c->B; b++)
        for (size_t h = 0; h < c->hq; h++) {
            lofp_hadamard_dense(q + (b * c->hq + h) * D, qr, D);
            for (size_t d = 0; d < D; d++)
                qr[d] = lofp_decode(LOFP_ELEM_E4M3, lofp_encode(LOFP_ELEM_E4M3, qr[d], LOFP_RNE, LOFP_SATURATE, 0));
            const int n = c->seq[b];
            double *s = halloc(((size_t)n + 1) * sizeof(double));
            double mx = sinks ? sinks[h] : -INFINITY;
            for (int t = 0; t < n; t++) {
                const int32_t blk = c->bt[b * c->maxb + t / c->bs];
                const uint8_t *slot = hc + (((size_t)blk * c->bs + t % c->bs) * c->hk + h / G) * c->slot;
                double dot = 0;
                for (size_t d = 0; d < D; d++) {
                    uint32_t code = (slot[d / 2] >> ((d & 1) * 4)) & 15;
                    uint8_t sb = slot[D / 2 + d / 32];
                    double kv = sb ? (double)lofp_decode(LOFP_ELEM_E2M1, code) * ldexp(1.0, sb - 127) : 0.0;
                    dot += (double)qr[d] * kv;
                }
                s[t] = dot * scale;
                if (s[t] > mx) mx = s[t];
            }
            double den = sinks ? exp(sinks[h] - mx) : 0.0;
            for (size_t d = 0; d < D; d++) vd[d] = 0;
            for (int t = 0; t < n; t++) {
                const double p = exp(s[t] - mx);
                den += p;
                const int32_t blk = c->bt[b * c->maxb + t / c->bs];
                const uint8_t *slot = hc + (((size_t)blk * c->bs + t % c->bs) * c->hk + h / G) * c->slot;
                const uint8_t *vs = slot + D / 2 + D / 32;
                for (size_t d = 0; d < D; d++) {
                    uint32_t code = (vs[d / 2] >> ((d & 1) * 4)) & 15;
                    uint8_t sb = vs[D / 2 + d / 32];
                    double vv = sb ? (double)lofp_decode(LOFP_ELEM_E2M1, code) * ldexp(1.0, sb - 127) : 0.0;
                    vd[d] += p * vv;
                }
            }
            for (size_t d = 0; d < D; d++) out[(b * c->hq + h) * D + d] = den > 0 ? vd[d] / den : 0.0;
            free(s);
        }
    free(qr); free(kd); free(vd);
}

static double attn_run(const uqcache *c, const float *q, const float *sinks, float scale, int splits,
                       lofp_dtype qdt, const double *ref, size_t max_seq)
{
    const size_t nq = c->B * c->hq * c->D;
    void *qd = to_dtype(q, nq, qdt);
    void *dq = dalloc(nq * 4);
    float *dout = dalloc(nq * 4), *dsink = NULL;
    int32_t *dbt = dalloc(c->B * c->maxb * 4), *dseq = dalloc(c->B * 4);
    h2d(dq, qd, nq * dt_size(qdt));
    h2d(dbt, c->bt, c->B * c->maxb * 4);
    h2d(dseq, c->seq, c->B * 4);
    if (sinks) { dsink = dalloc(c->hq * 4); h2d(dsink, sinks, c->hq * 4); }
    lofp_cuda_uq_attention_args a;
    memset(&a, 0, sizeof a);
    a.d_q = dq; a.q_dtype = qdt; a.d_cache = c->dcache; a.d_block_tables = dbt;
    a.max_blocks_per_seq = c->maxb; a.d_seq_lens = dseq; a.max_seq_len = max_seq;
    a.batch = c->B; a.hq = c->hq; a.hk = c->hk; a.head_dim = c->D; a.block_size = c->bs;
    a.scale = scale; a.d_sinks = dsink; a.num_splits = splits; a.d_out = dout;
    const size_t wb = lofp_cuda_uq_attention_workspace_bytes(&a);
    a.d_workspace = dalloc(wb);
    CU(cudaMemset(a.d_workspace, 0xFF, wb));
    CU(cudaMemset(dout, 0xFF, nq * 4));
    { /* the kernel copies with cp.async: a cache that is not 16-byte aligned is refused */
        lofp_cuda_uq_attention_args u = a;
        u.d_cache = c->dcache + 8;
        CHECKF(lofp_cuda_uq_decode_attention(&u, NULL) == LOFP_ERR_INVALID_ARG,
               "attention: unaligned cache not refused");
    }
    LC(lofp_cuda_uq_decode_attention(&a, NULL));
    CU(cudaDeviceSynchronize());
    float *out = halloc(nq * 4);
    d2h(out, dout, nq * 4);
    double maxref = 0, maxdiff = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < nq; i++) {
        if (!isfinite(out[i])) nonfinite++;
        if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
        double d = fabs(out[i] - ref[i]);
        if (!(d <= maxdiff)) maxdiff = d;
    }
    CHECKF(nonfinite == 0, "attention: %zu outputs not finite / not written", nonfinite);
    free(qd); free(out);
    CU(cudaFree(dq)); CU(cudaFree(dout)); CU(cudaFree(dbt)); CU(cudaFree(dseq)); CU(cudaFree(a.d_workspace));
    if (dsink) CU(cudaFree(dsink));
    g_cases++;
    return maxref > 0 ? maxdiff / maxref : maxdiff;
}

/* Store inputs that reach every branch of the store kernel's element code (uq_code_pair), one
 * kind per 32-element group: the midpoints and levels of the E2M1 grid times the group's own
 * scale 2^E (ties, both signs) and their neighbours one bf16 / f16 / f32 ulp away, +-0, zero
 * groups, Inf and NaN, subnormal and huge groups, tiny elements next to a large one (codes 0 of
 * both signs), and plain random groups. */
static float uq_special(size_t i, size_t D)
{
    static const float grid[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f,
                                 3.0f, 3.5f, 4.0f, 5.0f, 6.0f};
    const size_t g = i / 32, p = i % 32;
    const uint64_t hg = (uint64_t)g * 0x9E3779B97F4A7C15ull;
    const int kind = (int)((hg >> 40) % 8);
    const int E = (int)((hg >> 20) % 61) - 30;
    const float sg = (tu_next(&g_rng) & 1) ? -1.0f : 1.0f;
    (void)D;
    switch (kind) {
    case 0: return (float)(tu_normal(&g_rng) * ldexp(1.0, E / 3));
    case 1:
    case 2: { /* grid values times 2^E, the group max 6 * 2^E (so the scale is 2^E), neighbours */
        if (p == 0) return sg * ldexpf(6.0f, E);
        float x = sg * ldexpf(grid[tu_next(&g_rng) % 15], E);
        const int nb = (int)(tu_next(&g_rng) % 6);
        if (nb == 1) x *= 1.0f + 0x1p-7f;
        else if (nb == 2) x *= 1.0f - 0x1p-8f;
        else if (nb == 3) x *= 1.0f + 0x1p-10f;
        else if (nb == 4) x = nextafterf(x, (tu_next(&g_rng) & 1) ? INFINITY : -INFINITY);
        return x;
    }
    case 3: return (tu_next(&g_rng) & 1) ? -0.0f : 0.0f;
    case 4: /* one non-finite element */
        if (p == 5) { const int t = (int)((hg >> 8) % 3); return t == 0 ? INFINITY : t == 1 ? -INFINITY : NAN; }
        return (float)tu_normal(&g_rng);
    case 5: /* subnormal and near the bottom of the normal range (scale exponent -126) */
        return sg * ldexpf((float)(tu_next(&g_rng) % 255), -133 - (int)(tu_next(&g_rng) % 3));
    case 6: /* huge */
        return sg * ldexpf(1.0f + (float)(tu_next(&g_rng) % 128) / 128.0f, 120 + (int)(tu_next(&g_rng) % 7));
    default: /* one large element, the rest near and below -0.25 / +0.25 of its scale, and tiny */
        if (p == 0) return ldexpf(6.0f, E);
        if (p < 12) return sg * ldexpf(0.25f, E) * (1.0f + (float)((int)(tu_next(&g_rng) % 5) - 2) * 0x1p-9f);
        return sg * ldexpf((float)tu_normal(&g_rng), E - 30);
    }
}

static void test_uq(void)
{
    const int f0 = tu_failures;
    /* store, special values: every head dim, dtype and a few head counts (the kernel's row split
     * divides by Hk: 1, 3, 5, 8) */
    for (int d = 0; d < 3; d++) {
        const lofp_dtype dts[] = {LOFP_DTYPE_F32, LOFP_DTYPE_BF16, LOFP_DTYPE_F16};
        const size_t hks[] = {1, 3, 5, 8};
        for (size_t D = 32, j = 0; D <= 512; D *= 2, j++) {
            int32_t seq[2] = {150, 77};
            const size_t hk = hks[(j + d) % 4], ne = (150 + 77) * hk * D;
            float *kin = halloc(ne * sizeof(float)), *vin = halloc(ne * sizeof(float));
            for (size_t i = 0; i < ne; i++) { kin[i] = uq_special(i, D); vin[i] = uq_special(i + 7 * 32, D); }
            uqcache c = {2, hk, hk, D, 16, 0, 0, seq, NULL, NULL, 0, 0, NULL, NULL, 0, NULL};
            build_cache(&c, 1, kin, vin, dts[d]);
            free_cache(&c);
            free(kin); free(vin);
        }
    }
    printf("  UltraQuant store, special values (ties, +-0, zero / Inf / NaN / subnormal / huge groups, Hk = 1, 3, 5, 8): %s\n",
           tu_failures == f0 ? "ok" : "FAILED");
    /* store: dtypes and head dims */
    for (int d = 0; d < 3; d++) {
        const lofp_dtype dts[] = {LOFP_DTYPE_F32, LOFP_DTYPE_BF16, LOFP_DTYPE_F16};
        for (size_t D = 32; D <= 1024; D *= 2) {
            int32_t seq[2] = {37, 20};
            uqcache c = {2, 4, 2, D, 16, 0, 0, seq, NULL, NULL, 0, 0, NULL, NULL, 0, NULL};
            build_cache(&c, 1, NULL, NULL, dts[d]);
            free_cache(&c);
        }
    }
    printf("  UltraQuant store (f32/bf16/f16, D = 32..1024, skipped slot): %s\n", tu_failures == f0 ? "ok" : "FAILED");
    /* attention */
    int f1 = tu_failures;
    struct { size_t B, hq, hk, D, bs; int seq[4]; int sinks; int splits; } cs[] = {
        {2, 8, 2, 128, 16, {150, 1000}, 1, 0},
        {2, 8, 2, 128, 16, {150, 1000}, 0, 1},
        {3, 32, 8, 128, 64, {5000, 0, 77}, 1, 0},
        {3, 32, 8, 128, 64, {5000, 0, 77}, 0, 7},
        {2, 6, 1, 64, 32, {333, 4096}, 1, 0},
        {2, 16, 2, 256, 16, {900, 17}, 1, 3},
        {1, 4, 4, 128, 16, {1}, 0, 0},
        /* G <= 4 packs P's hi and lo parts into one n8 tile: G = 1..4, padding heads, each D */
        {2, 9, 3, 128, 16, {33, 4097}, 1, 0},
        {1, 8, 4, 256, 16, {300}, 0, 0},
        {2, 12, 4, 64, 32, {1, 2000}, 1, 5},
        /* block sizes that are not multiples of 16 (the per-token loader), packed and not */
        {2, 8, 2, 128, 5, {150, 1000}, 1, 0},
        {3, 4, 2, 64, 24, {17, 700, 1}, 0, 3},
        {2, 16, 2, 256, 40, {900, 65}, 1, 0},
        {2, 6, 1, 64, 24, {333, 95}, 1, 2},
        {1, 7, 1, 128, 48, {2049}, 1, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        int32_t seq[4];
        size_t maxs = 1;
        for (size_t b = 0; b < cs[i].B; b++) { seq[b] = cs[i].seq[b]; if ((size_t)seq[b] > maxs) maxs = seq[b]; }
        uqcache c = {cs[i].B, cs[i].hq, cs[i].hk, cs[i].D, cs[i].bs, 0, 0, seq, NULL, NULL, 0, 0, NULL, NULL, 0, NULL};
        build_cache(&c, 0, NULL, NULL, LOFP_DTYPE_BF16);
        const size_t nq = c.B * c.hq * c.D;
        float *q = halloc(nq * 4), *sinks = halloc(c.hq * 4);
        for (size_t j = 0; j < nq; j++) q[j] = lofp_bf16_to_fp32(lofp_fp32_to_bf16((float)(tu_normal(&g_rng) * 2)));
        for (size_t j = 0; j < c.hq; j++) sinks[j] = (float)(tu_normal(&g_rng) * 2);
        uint8_t *hc = halloc(c.cache_bytes);
        d2h(hc, c.dcache, c.cache_bytes);
        double *ref = halloc(nq * sizeof(double));
        const float scale = (float)(1.0 / sqrt((double)c.D));
        attn_ref(&c, hc, q, cs[i].sinks ? sinks : NULL, scale, ref);
        double err = attn_run(&c, q, cs[i].sinks ? sinks : NULL, scale, cs[i].splits,
                              (i & 1) ? LOFP_DTYPE_F32 : LOFP_DTYPE_BF16, ref, maxs);
        printf("    B=%zu Hq=%zu Hk=%zu D=%zu block=%zu sinks=%d splits=%d: max|diff|/max|ref| = %.2e\n",
               c.B, c.hq, c.hk, c.D, c.bs, cs[i].sinks, cs[i].splits, err);
        CHECKF(err <= 1e-4, "attention case %zu: error %.3g > 1e-4", i, err);
        free(q); free(sinks); free(hc); free(ref);
        free_cache(&c);
    }
    /* the vLLM golden case (its reference rotates K with a dense matmul: rare code differences) */
    {
        const char *dir = "ultraquant_attention/B2_Hq8_Hk2_D128_N150_sinks/";
        char path[256];
#define GLD(name) (snprintf(path, sizeof path, "%s%s", dir, name), tu_load_golden(path))
        tu_npy gq = GLD("q.npy"), gk = GLD("k.npy"), gv = GLD("v.npy"), gs = GLD("sinks.npy");
        tu_npy gsc = GLD("scale.npy"), go = GLD("out_fp32.npy");
#undef GLD
        int32_t seq[2] = {150, 150};
        uqcache c = {2, 8, 2, 128, 16, 0, 0, seq, NULL, NULL, 0, 0, NULL, NULL, 0, NULL};
        /* golden k, v are [B, N, Hk, D]: token-major as the store wants */
        build_cache(&c, 0, (const float *)gk.data, (const float *)gv.data, LOFP_DTYPE_F32);
        double *ref = halloc(gq.count * sizeof(double));
        for (size_t i = 0; i < go.count; i++) ref[i] = ((const float *)go.data)[i];
        float scale;
        if (strcmp(gsc.descr, "<f8") == 0) scale = (float)*(const double *)gsc.data;
        else scale = *(const float *)gsc.data;
        double err = attn_run(&c, (const float *)gq.data, (const float *)gs.data, scale, 0, LOFP_DTYPE_F32, ref, 150);
        printf("    vLLM golden B2_Hq8_Hk2_D128_N150_sinks: max|diff|/max|ref| = %.2e\n", err);
        CHECKF(err <= 1e-3, "golden attention error %.3g", err);
        tu_npy_free(&gq); tu_npy_free(&gk); tu_npy_free(&gv); tu_npy_free(&gs); tu_npy_free(&gsc); tu_npy_free(&go);
        free(ref);
        free_cache(&c);
    }
    printf("  UltraQuant decode attention: %s\n", tu_failures == f1 ? "ok" : "FAILED");
}

int main(int argc, char **argv)
{
    (void)argc; (void)argv;
    if (lofp_cuda_device_count() == 0) {
        printf("test_cuda: no CUDA device available -- skipped (GPU tests need a device)\n");
        return 0;
    }
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("test_cuda on %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    const char *only = getenv("LOFP_TEST_ONLY");
    const char *nw = getenv("LOFP_TEST_GEMM_NO_WGMMA");
    g_no_wgmma = nw && strcmp(nw, "1") == 0;

    uint32_t sub[3];
    CU(lofp_test_subnormals(sub) ? cudaErrorUnknown : cudaSuccess);
    printf("  bf16x2 fma subnormal: %08x (want 3f003f00); fp16 mma subnormal: %08x (want 38000000); bf16 mma subnormal: %08x (want 00400000)\n",
           sub[0], sub[1], sub[2]);
    CHECK(sub[0] == 0x3F003F00u);
    CHECK(sub[1] == 0x38000000u);

    if (!only || strstr(only, "div")) {
        unsigned long long nbad = 0, first = 0;
        CU(lofp_test_division(&nbad, &first) ? cudaErrorUnknown : cudaSuccess);
        printf("  Markstein division vs __fdiv_rn (127 divisors x 7 binades x 2^23 x 3): %llu mismatches\n", nbad);
        CHECKF(nbad == 0, "first mismatch divisor byte %llu a=%08llx", first >> 32, first & 0xFFFFFFFFull);
    }
    if (!only || strstr(only, "quant")) test_quantize();
    if (!only || strstr(only, "quant")) test_dequant_scales();
    if (!only || strstr(only, "quant") || strstr(only, "gemm")) test_ckpt();
    if (!only || strstr(only, "gemm")) test_gemm();
    if (!only || strstr(only, "w4a8")) test_w4a8();
    if (!only || strstr(only, "uq")) test_uq();
    printf("test_cuda: %d cases\n", g_cases);
    return tu_finish("test_cuda");
}

/* bench_gemm.c -- `lofp bench gemm`: block-scaled GEMV (M=1) and GEMM (M=512) for two
 * Llama-sized shapes (N x K = 4096 x 4096 and 11008 x 4096), MXFP4 and NVFP4 weights in the x8 and rows
 * layouts, W4A8 (MXINT8 activations quantized inside the call) and W4A16 (fp32 activations),
 * 1..threads_max threads. GEMV runs cold (a new weight copy each call, the copies together
 * larger than the L3) and hot (one copy). Prints ms, GB/s of weight bytes, GFLOP/s (2MNK), the
 * fraction of the read-bandwidth floor measured in the same run, and the speedup over the
 * portable kernels of the same call. Every configuration's output is checked on sampled
 * elements against the fp64 reference (lofp_gemm_ref); a failure makes the run fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "gemm/gemm_internal.h"
#include "lofp/gemm.h"

typedef struct {
    lofp_gemm_args a;
    lofp_gemm_isa_t isa;
    uint8_t **copies;  /* weight copies: codes (then scales, rows layout) */
    size_t ncopies, next, scale_off;
    lofp_status st;
} run_t;

static void run_once(void *v)
{
    run_t *r = v;
    const uint8_t *w = r->copies[r->next];
    r->next = (r->next + 1) % r->ncopies;
    r->a.b.codes = w;
    if (r->a.b.layout == LOFP_WEIGHT_ROWS) r->a.b.scales = w + r->scale_off;
    lofp_status st = lofp_gemm_isa(&r->a, r->isa);
    if (st != LOFP_OK) r->st = st;
}

static size_t l3_bytes(void)
{
#ifdef _SC_LEVEL3_CACHE_SIZE
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v > 0) return (size_t)v;
#endif
    return 32u << 20;
}

/* Relative Frobenius error of `c` against the fp64 reference on sampled (i, j). */
static double verify(const lofp_gemm_args *a0, const uint8_t *rows_codes, const uint8_t *rows_scales,
                     size_t row_bytes, size_t row_scales, const float *c, size_t ldc, int samples)
{
    double num = 0, den = 0;
    uint64_t s = 12345;
    for (int t = 0; t < samples; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = (size_t)(s >> 33) % a0->m, j = (size_t)(s >> 13) % a0->n;
        lofp_gemm_args a = *a0;
        a.m = 1;
        a.n = 1;
        a.a = (const float *)a0->a + i * a0->k;
        a.b.layout = LOFP_WEIGHT_ROWS;
        a.b.codes = rows_codes + j * row_bytes;
        a.b.scales = rows_scales + j * row_scales;
        double r;
        if (lofp_gemm_ref(&a, &r, 1) != LOFP_OK) return INFINITY;
        double d = (double)c[i * ldc + j] - r;
        num += d * d;
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct {
    size_t n, k;
    const char *wname;
    lofp_scheme ws;
    uint8_t *codes, *scales; /* rows layout, quantized once */
    float global;
    size_t cb, sb;
} wset;

/* Weight copies of one layout: copies[0] is the hot one; cold runs rotate through all. */
typedef struct {
    lofp_weight_layout layout;
    uint8_t **copies;
    size_t ncopies, bytes;
} wcopies;

static int make_copies(const wset *W, lofp_weight_layout layout, int cold, wcopies *wc)
{
    size_t n = W->n, k = W->k;
    memset(wc, 0, sizeof *wc);
    wc->layout = layout;
    wc->bytes = layout == LOFP_WEIGHT_X8 ? lofp_weight_packed_bytes(&W->ws, n, k, layout) : W->cb + W->sb;
    size_t want = cold ? (size_t)(1.25 * (double)l3_bytes()) : 0;
    if (cold && want < (64u << 20)) want = 64u << 20;
    if (want > (768u << 20)) want = 768u << 20;
    wc->ncopies = cold ? want / wc->bytes + 2 : 1;
    wc->copies = calloc(wc->ncopies, sizeof *wc->copies);
    if (!wc->copies) return 1;
    for (size_t c = 0; c < wc->ncopies; c++) {
        /* 64-byte aligned, as a model loader would map them: x8 groups are 64-byte multiples, so
         * every 32-byte load of the kernels then stays within one cache line */
        wc->copies[c] = aligned_alloc(64, (wc->bytes + 63) / 64 * 64);
        if (!wc->copies[c]) { wc->ncopies = c; return c == 0; }
        if (c == 0) {
            if (layout == LOFP_WEIGHT_X8) lofp_weight_pack(&W->ws, W->codes, W->scales, n, k, layout, wc->copies[0]);
            else { memcpy(wc->copies[0], W->codes, W->cb); memcpy(wc->copies[0] + W->cb, W->scales, W->sb); }
        } else {
            memcpy(wc->copies[c], wc->copies[0], wc->bytes);
        }
    }
    return 0;
}

static void free_copies(wcopies *wc)
{
    for (size_t c = 0; c < wc->ncopies; c++) free(wc->copies[c]);
    free(wc->copies);
    memset(wc, 0, sizeof *wc);
}

/* One row of the table: (weights, layout, activations, m, threads, cold/hot). *generic_ms is
 * measured on first use (the portable kernels, hot; GEMM at m = 16, scaled per flop). Returns 1
 * when the sampled verification failed. */
static int bench_one(const bench_opts *o, const wset *W, const wcopies *wc, int w4a8, size_t m, int threads,
                     int cold, const float *act, double *generic_ms)
{
    size_t n = W->n, k = W->k;
    int fail = 0;
    lofp_scheme q8;
    lofp_scheme_preset("mxint8", &q8);
    run_t r;
    memset(&r, 0, sizeof r);
    lofp_gemm_args_init(&r.a);
    r.a.m = m;
    r.a.n = n;
    r.a.k = k;
    r.a.a = act;
    r.a.a_quant = w4a8 ? &q8 : NULL;
    r.a.b.scheme = &W->ws;
    r.a.b.layout = wc->layout;
    r.a.b.global = W->global;
    r.a.threads = (unsigned)threads;
    float *c = malloc(m * n * sizeof(float));
    if (!c) return 1;
    r.a.c = c;
    size_t wsb = lofp_gemm_workspace_bytes(&r.a);
    void *wsp = wsb ? malloc(wsb) : NULL;
    r.a.workspace = wsp;
    r.a.workspace_bytes = wsb;
    r.copies = wc->copies;
    r.ncopies = cold ? wc->ncopies : 1;
    r.scale_off = W->cb;
    r.isa = LOFP_GEMM_ISA_AUTO;
    r.a.b.codes = wc->copies[0];
    r.a.b.scales = wc->copies[0] + W->cb;
    const char *kname = lofp_gemm_kernel_name(&r.a);

    double t = bench_time(o, run_once, &r);
    double err = verify(&r.a, W->codes, W->scales, W->cb / n, W->sb / n, c, n, o->quick ? 16 : 64);
    if (!(err <= 1e-5) || r.st != LOFP_OK) fail = 1;

    if (*generic_ms <= 0) {
        run_t g = r;
        g.isa = LOFP_GEMM_ISA_GENERIC;
        g.ncopies = 1;
        g.next = 0;
        size_t gm = m > 16 ? 16 : m;
        g.a.m = gm;
        bench_opts go = *o;
        go.min_time = 0.05;
        double tg = bench_time(&go, run_once, &g);
        *generic_ms = tg * 1e3 * (double)m / (double)gm;
        if (g.st != LOFP_OK) fail = 1;
    }

    double flops = 2.0 * (double)m * (double)n * (double)k;
    double gbs = (double)wc->bytes / t / 1e9;
    double floor_frac = o->read_bw[threads] > 0 ? gbs / o->read_bw[threads] : 0;
    printf("%5zux%-5zu %-6s %-4s %-5s %4zu %2d  %-4s %8.3f %7.2f %8.1f %6.0f%% %8.1fx  %.1e %s%s\n", n, k,
           W->wname, lofp_weight_layout_name(wc->layout), w4a8 ? "w4a8" : "w4a16", m, threads,
           m == 1 ? (cold ? "cold" : "hot") : "-", t * 1e3, gbs, flops / t / 1e9, 100.0 * floor_frac,
           *generic_ms / (t * 1e3), err, kname, fail ? "  VERIFY FAILED" : "");
    fflush(stdout);
    free(c);
    free(wsp);
    return fail;
}

static int make_weights(wset *W, const char *name, size_t n, size_t k)
{
    memset(W, 0, sizeof *W);
    W->n = n;
    W->k = k;
    W->wname = name;
    lofp_scheme_preset(name, &W->ws);
    W->cb = lofp_codes_bytes(&W->ws, n, k);
    W->sb = lofp_scales_bytes(&W->ws, n, k);
    float *x = malloc(n * k * sizeof(float));
    W->codes = malloc(W->cb);
    W->scales = malloc(W->sb);
    if (!x || !W->codes || !W->scales) { free(x); return 1; }
    uint64_t s = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n * k; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        /* a sum of uniforms ~ normal; weights of a real layer have this spread */
        double u = (double)(s & 0xFFFF) + (double)((s >> 16) & 0xFFFF) + (double)((s >> 32) & 0xFFFF) - 98302.5;
        x[i] = (float)(u / 32768.0 * 0.02);
    }
    lofp_status st = lofp_quantize(&W->ws, LOFP_DTYPE_F32, x, n, k, W->codes, W->scales, &W->global, NULL);
    free(x);
    return st != LOFP_OK;
}

int bench_group_gemm(const bench_opts *o)
{
    static const size_t shapes[2][2] = { { 4096, 4096 }, { 11008, 4096 } };
    static const char *wnames[2] = { "mxfp4", "nvfp4" };
    int fail = 0, nshapes = o->quick ? 1 : 2;
    double la[3] = { 0 };
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1; fclose(f); }
    printf("== gemm: C = A . B^T, block-scaled weights (load average %.2f %.2f %.2f; L3 %zu MiB; cold = "
           "weight copies totalling > 1.25 x L3) ==\n", la[0], la[1], la[2], l3_bytes() >> 20);
    printf("%-11s %-6s %-4s %-5s %4s %3s %-4s %8s %7s %8s %7s %9s  %-7s %s\n", "NxK", "wts", "lay", "act",
           "M", "thr", "mode", "ms", "W GB/s", "GFLOP/s", "floor", "vs gen", "err", "kernel");
    for (int si = 0; si < nshapes; si++) {
        size_t n = o->quick ? 1024 : shapes[si][0], k = o->quick ? 1024 : shapes[si][1];
        size_t mbig = o->quick ? 64 : 512;
        float *act = malloc(mbig * k * sizeof(float));
        uint64_t s = 77;
        for (size_t i = 0; i < mbig * k; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            act[i] = (float)(((double)(s >> 11) * 0x1p-53 - 0.5) * 4.0);
        }
        for (int wi = 0; wi < 2; wi++) {
            wset W;
            if (make_weights(&W, wnames[wi], n, k)) { printf("(weights: allocation failed)\n"); fail = 1; continue; }
            for (int li = 0; li < 2; li++) {
                lofp_weight_layout l = li == 0 ? LOFP_WEIGHT_X8 : LOFP_WEIGHT_ROWS;
                wcopies wc;
                if (make_copies(&W, l, 1, &wc)) { printf("(weight copies: allocation failed)\n"); fail = 1; continue; }
                for (int w4a8 = 1; w4a8 >= 0; w4a8--) /* GEMV, cold then hot */
                    for (int th = 1; th <= o->threads_max; th++) {
                        double gms = 0;
                        fail |= bench_one(o, &W, &wc, w4a8, 1, th, 1, act, &gms);
                        fail |= bench_one(o, &W, &wc, w4a8, 1, th, 0, act, &gms);
                    }
                /* GEMM: x8 for both activation kinds; rows (repacked on the fly) for W4A8 on the
                 * first shape, to show what the packed layout buys there */
                for (int w4a8 = 1; w4a8 >= 0; w4a8--) {
                    if (li == 1 && (si > 0 || !w4a8)) continue;
                    for (int th = 1; th <= o->threads_max; th++) {
                        double gms = 0;
                        fail |= bench_one(o, &W, &wc, w4a8, mbig, th, 0, act, &gms);
                    }
                }
                free_copies(&wc);
            }
            free(W.codes);
            free(W.scales);
        }
        free(act);
    }
    printf("(floor = weight GB/s / read bandwidth of the same thread count; vs gen = the portable "
           "kernels of the same call, hot%s)\n\n", o->quick ? "" : ", GEMM measured at M=16 and scaled");
    return fail;
}

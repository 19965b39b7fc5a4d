/* bench_pool.c -- `lofp bench pool`: does a 2-thread call get its second core? A cold
 * MXFP4 4096^2 W4A8 GEMV (x8, the shortest call that matters) and a 64 x 4096 MXFP4 quantize,
 * called with an idle gap of 0, 1, 5 and 20 ms before every call (the caller sleeps; the pool's
 * worker has been idle that long), under the pool's settings side by side, interleaved in runs
 * of 10 calls so that machine drift hits every setting alike:
 *   1 thread          the baseline the 2-thread call must beat
 *   static            2 threads, one share each, worker sleeps at once, no move off the caller's
 *                     CPU (the pool as it was: every share waits for its thread)
 *   tasks             + a few tasks per thread claimed by whoever is free (a late worker takes
 *                     fewer)
 *   tasks+move        + every worker keeps its affinity off the caller's CPU
 *   default           + the worker spins 200 us for the next call before sleeping
 * Prints the median, the 10th and 90th percentile of the per-call times, and how many calls
 * finished faster than 0.75 x the 1-thread median ("got the 2nd core"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cli.h"
#include "lofp/gemm.h"
#include "lofp/lofp.h"
#include "runtime/threadpool.h"

typedef struct {
    const char *name;
    int threads;
    unsigned split, spin_us;
    int migrate;
} pool_cfg;

static const pool_cfg k_cfgs[] = {
    { "1 thread", 1, 4, 200, 1 },
    { "static", 2, 1, 0, 0 },
    { "tasks", 2, 4, 0, 0 },
    { "tasks+move", 2, 4, 0, 1 },
    { "default", 2, 4, 200, 1 },
};
#define NCFG (sizeof k_cfgs / sizeof k_cfgs[0])
#define BLOCK 10 /* calls in a row under one setting */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void idle_ms(double ms)
{
    if (ms <= 0) return;
    struct timespec t = { (time_t)(ms / 1000), (long)((ms - 1000 * (double)(time_t)(ms / 1000)) * 1e6) };
    nanosleep(&t, NULL);
}

typedef struct {
    /* gemv */
    lofp_gemm_args g;
    uint8_t **copies;
    size_t ncopies, next;
    /* quantize */
    lofp_scheme qs;
    const float *qx;
    uint8_t *qcodes, *qscales;
    int which; /* 0 gemv, 1 quantize */
} job_t;

static int call(job_t *j, int threads)
{
    if (j->which == 0) {
        j->g.b.codes = j->copies[j->next];
        j->next = (j->next + 1) % j->ncopies;
        j->g.threads = (unsigned)threads;
        return lofp_gemm(&j->g) != LOFP_OK;
    }
    j->qs.threads = (unsigned)threads;
    return lofp_quantize(&j->qs, LOFP_DTYPE_F32, j->qx, 64, 4096, j->qcodes, j->qscales, NULL, NULL) != LOFP_OK;
}

int bench_group_pool(const bench_opts *o)
{
    const size_t n = 4096, k = 4096;
    const int calls = o->quick ? 8 : 60;
    static const double gaps[] = { 0, 1, 5, 20 };
    int fail = 0;
    double la[3] = { 0 };
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1; fclose(f); }
    printf("== pool: 2-thread calls after an idle gap (load average %.2f %.2f %.2f; %d calls per cell, "
           "interleaved) ==\n", la[0], la[1], la[2], calls);

    job_t j;
    memset(&j, 0, sizeof j);
    lofp_scheme w, q8;
    lofp_scheme_preset("mxfp4", &w);
    lofp_scheme_preset("mxint8", &q8);
    float *x = malloc(n * k * sizeof(float)), *act = malloc(k * sizeof(float)), *y = malloc(n * sizeof(float));
    uint8_t *codes = malloc(lofp_codes_bytes(&w, n, k)), *scales = malloc(lofp_scales_bytes(&w, n, k));
    if (!x || !act || !y || !codes || !scales) { printf("(allocation failed)\n"); return 1; }
    uint64_t s = 99;
    for (size_t i = 0; i < n * k; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
    }
    for (size_t i = 0; i < k; i++) act[i] = x[i * 7];
    float gl;
    if (lofp_quantize(&w, LOFP_DTYPE_F32, x, n, k, codes, scales, &gl, NULL) != LOFP_OK) return 1;
    size_t pb = lofp_weight_packed_bytes(&w, n, k, LOFP_WEIGHT_X8);
    j.ncopies = (96u << 20) / pb + 2; /* cold: the copies together exceed the L3 */
    if (o->quick) j.ncopies = 2;
    j.copies = calloc(j.ncopies, sizeof *j.copies);
    for (size_t c = 0; c < j.ncopies; c++) {
        j.copies[c] = aligned_alloc(64, (pb + 63) / 64 * 64);
        if (!j.copies[c]) { printf("(allocation failed)\n"); return 1; }
        lofp_weight_pack(&w, codes, scales, n, k, LOFP_WEIGHT_X8, j.copies[c]);
    }
    lofp_gemm_args_init(&j.g);
    j.g.m = 1;
    j.g.n = n;
    j.g.k = k;
    j.g.a = act;
    j.g.a_quant = &q8;
    j.g.b.scheme = &w;
    j.g.b.layout = LOFP_WEIGHT_X8;
    j.g.c = y;
    j.qs = w;
    j.qx = x;
    j.qcodes = codes;
    j.qscales = scales;

    const unsigned spin0 = lofp_parallel_spin_us, split0 = lofp_parallel_split;
    const int mig0 = lofp_parallel_migrate;
    double *t = malloc(NCFG * calls * sizeof(double));
    for (int which = 0; which < 2; which++) {
        j.which = which;
        printf("%s\n", which == 0 ? "GEMV cold MXFP4 4096x4096 W4A8 x8 (ms per call)"
                                  : "quantize fp32 -> MXFP4 64x4096 (ms per call)");
        printf("%-7s %-11s %8s %8s %8s %9s\n", "gap ms", "setting", "median", "p10", "p90", "fast/all");
        for (size_t gi = 0; gi < sizeof gaps / sizeof gaps[0]; gi++) {
            for (int c = 0; c < 3; c++) fail |= call(&j, 2); /* warm */
            /* settings take turns in runs of BLOCK calls (the order rotated every round): a
             * switch of setting changes the worker's affinity, which costs the first call after
             * it a migration, so switching on every call would measure the switch */
            for (int b = 0; b < calls; b += BLOCK)
                for (size_t ci = 0; ci < NCFG; ci++) {
                    const size_t cfg = (ci + (size_t)(b / BLOCK)) % NCFG; /* rotate the order */
                    const pool_cfg *pc = &k_cfgs[cfg];
                    lofp_parallel_split = pc->split;
                    lofp_parallel_spin_us = pc->spin_us;
                    lofp_parallel_migrate = pc->migrate;
                    /* one untimed call under the new setting: the worker sees a new spin setting
                     * after its current spin ends, and a new affinity rule at its next job */
                    fail |= call(&j, pc->threads);
                    for (int r = b; r < b + BLOCK && r < calls; r++) {
                        idle_ms(gaps[gi]);
                        double t0 = cli_now();
                        fail |= call(&j, pc->threads);
                        t[cfg * calls + r] = cli_now() - t0;
                    }
                }
            double med1 = 0;
            for (size_t ci = 0; ci < NCFG; ci++) {
                double *v = t + ci * calls;
                qsort(v, (size_t)calls, sizeof *v, cmp_double);
                double med = v[calls / 2];
                if (ci == 0) med1 = med;
                int fast = 0;
                for (int r = 0; r < calls; r++) fast += v[r] < 0.75 * med1;
                printf("%-7.0f %-11s %8.3f %8.3f %8.3f %5d/%d\n", gaps[gi], k_cfgs[ci].name, med * 1e3,
                       v[calls / 10] * 1e3, v[calls - 1 - calls / 10] * 1e3, fast, calls);
            }
            fflush(stdout);
        }
    }
    lofp_parallel_split = split0;
    lofp_parallel_spin_us = spin0;
    lofp_parallel_migrate = mig0;
    printf("(fast = calls under 0.75 x the 1-thread median of the same gap)\n\n");
    free(t);
    for (size_t c = 0; c < j.ncopies; c++) free(j.copies[c]);
    free(j.copies);
    free(x); free(act); free(y); free(codes); free(scales);
    return fail;
}

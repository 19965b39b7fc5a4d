/* bench_quant.c -- `lofp bench quant`: quantize / dequantize throughput of the kernel table this
 * CPU resolves to, against the read-bandwidth floor measured in the same run and against lofp's
 * scalar reference row kernels. Every benchmark checks a sample of its output rows (and the
 * NVFP4 global scale) against the reference and fails the run on any difference.
 *
 * "cold" cycles through enough copies of the input that the data streamed per pass exceeds
 * 512 MiB (more than the last-level cache), "hot" reuses one copy. GB/s counts the fp32 side:
 * input bytes for quantize, output bytes for dequantize. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "quant/dispatch.h"
#include "runtime/threadpool.h"

typedef enum { JOB_QUANT, JOB_DEQUANT } job_kind;

typedef struct {
    lofp_scheme s;
    job_kind kind;
    size_t rows, k, copies, next;
    float **x;        /* copies of the fp32 input */
    uint8_t **codes;  /* per copy (quantize output, dequantize input) */
    uint8_t **scales;
    float **out;      /* dequantize output per copy */
    float *global;    /* per copy (NVFP4's multiplier depends on the data) */
    lofp_status st;
} qbench;

static void run_once(void *arg)
{
    qbench *b = arg;
    size_t c = b->next++ % b->copies;
    if (b->kind == JOB_QUANT)
        b->st |= lofp_quantize(&b->s, LOFP_DTYPE_F32, b->x[c], b->rows, b->k, b->codes[c], b->scales[c],
                               &b->global[c], NULL);
    else
        b->st |= lofp_dequantize(&b->s, b->codes[c], b->scales[c], b->global[c], b->rows, b->k,
                                 LOFP_DTYPE_F32, b->out[c]);
}

/* A weight-like tensor: per-row scale spread over 2^-4..2^4, Gaussian-ish values. */
static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t a = (uint32_t)(s >> 40), b = (uint32_t)(s >> 16) & 0xFFFFFF;
        float u = ((float)a + (float)b - 16777215.0f) / 8388608.0f; /* triangle in (-2, 2) */
        x[i] = u * (float)(1u << ((i / 4096) % 9)) * 0.0625f;
    }
}

/* Reference outputs for sample rows: compare every 97th row and the last one. Returns the number
 * of differing rows. */
static size_t verify(qbench *b, size_t copy)
{
    const lofp_kernel_table *ref = lofp_kernels_reference();
    lofp_scheme s1 = b->s;
    s1.threads = 1;
    size_t kp = lofp_padded_k(&s1, b->k);
    size_t crb = lofp_codes_bytes(&s1, 1, b->k), nb = lofp_scales_bytes(&s1, 1, b->k), bad = 0;
    uint8_t *c = malloc(crb), *sc = malloc(nb);
    float *o = malloc(kp * sizeof(float));
    for (size_t r = 0; r < b->rows; r += (r + 97 < b->rows || r == b->rows - 1) ? 97 : b->rows - 1 - r) {
        if (b->kind == JOB_QUANT) {
            /* the row alone through the reference, with the tensor's global and its flat base */
            lofp_status st = lofp_quantize_table(ref, &s1, LOFP_DTYPE_F32, b->x[copy] + r * b->k, 1, b->k, 0,
                                                 b->global[copy], c, sc, NULL, NULL);
            int same = st == LOFP_OK && memcmp(c, b->codes[copy] + r * crb, crb) == 0 &&
                       memcmp(sc, b->scales[copy] + r * nb, nb) == 0;
            bad += !same;
        } else {
            lofp_status st = lofp_dequantize_table(ref, &s1, b->codes[copy] + r * crb, b->scales[copy] + r * nb,
                                                   b->global[copy], 1, b->k, LOFP_DTYPE_F32, o);
            bad += st != LOFP_OK || memcmp(o, b->out[copy] + r * b->k, b->k * sizeof(float)) != 0;
        }
        if (r == b->rows - 1) break;
    }
    free(c);
    free(sc);
    free(o);
    return bad;
}

/* NVFP4's tensor-wide global: the reference's two scalar passes. */
static int verify_global(const qbench *b, size_t copy)
{
    float amax = 0;
    size_t first;
    if (lofp_kernels_reference()->scan(LOFP_DTYPE_F32, b->x[copy], b->rows * b->k, &amax, &first)) return 0;
    if (amax < 1e-12f) amax = 1e-12f;
    volatile float r = 1.0f / amax;
    float g = r * 2688.0f;
    return memcmp(&g, &b->global[copy], 4) == 0;
}

/* Seconds per element of the reference row kernels (one thread, 64 rows). */
static double reference_time(const bench_opts *o, const qbench *b)
{
    size_t rows = b->rows < 64 ? b->rows : 64;
    lofp_scheme s1 = b->s;
    s1.threads = 1;
    const lofp_kernel_table *ref = lofp_kernels_reference();
    double t0 = cli_now();
    int reps = 0;
    do {
        if (b->kind == JOB_QUANT) {
            int two = s1.id == LOFP_SCHEME_NVFP4 && s1.two_level;
            float g;
            /* the reference pipeline: scans plus rows (for NVFP4 two-level the scan is part of it) */
            lofp_quantize_table(ref, &s1, LOFP_DTYPE_F32, b->x[0], rows, b->k, two ? 1 : 0, b->global[0],
                                b->codes[0], b->scales[0], &g, NULL);
        } else {
            lofp_dequantize_table(ref, &s1, b->codes[0], b->scales[0], b->global[0], rows, b->k,
                                  LOFP_DTYPE_F32, b->out[0]);
        }
        reps++;
    } while (cli_now() - t0 < (o->quick ? 0.05 : 0.2));
    return (cli_now() - t0) / reps / (double)(rows * b->k);
}

static int bench_one(const bench_opts *o, const char *preset, job_kind kind, size_t rows, size_t k,
                     int cold, int threads, double *ref_per_elem)
{
    qbench b;
    memset(&b, 0, sizeof b);
    if (lofp_scheme_preset(preset, &b.s) != LOFP_OK) return 1;
    b.s.threads = (unsigned)threads;
    b.kind = kind;
    b.rows = rows;
    b.k = k;
    size_t in_bytes = rows * k * sizeof(float);
    size_t stream = in_bytes + (kind == JOB_DEQUANT ? in_bytes : 0);
    b.copies = cold ? (size_t)((512u << 20) / stream) + 1 : 1;
    size_t cb = lofp_codes_bytes(&b.s, rows, k), sb = lofp_scales_bytes(&b.s, rows, k);
    b.x = calloc(b.copies, sizeof *b.x);
    b.codes = calloc(b.copies, sizeof *b.codes);
    b.scales = calloc(b.copies, sizeof *b.scales);
    b.out = calloc(b.copies, sizeof *b.out);
    b.global = calloc(b.copies, sizeof *b.global);
    int fail = 0;
    for (size_t c = 0; c < b.copies; c++) {
        b.x[c] = malloc(in_bytes);
        b.codes[c] = malloc(cb);
        b.scales[c] = malloc(sb);
        if (kind == JOB_DEQUANT) b.out[c] = malloc(in_bytes);
        if (!b.x[c] || !b.codes[c] || !b.scales[c] || (kind == JOB_DEQUANT && !b.out[c])) {
            fprintf(stderr, "bench quant: out of memory\n");
            fail = 1;
            b.copies = c + 1;
            goto done;
        }
        fill(b.x[c], rows * k, 1000 + c);
        /* every copy quantized once (the dequantize input, and pages touched) */
        b.st |= lofp_quantize(&b.s, LOFP_DTYPE_F32, b.x[c], rows, k, b.codes[c], b.scales[c], &b.global[c], NULL);
        if (kind == JOB_DEQUANT) memset(b.out[c], 0, in_bytes);
    }
    if (!*ref_per_elem) *ref_per_elem = reference_time(o, &b);
    double t = bench_time(o, run_once, &b);
    /* check the last copy written by the timed runs, and copy 0 */
    size_t last = (b.next + b.copies - 1) % b.copies;
    size_t bad = verify(&b, last) + verify(&b, 0);
    int gok = !(b.s.id == LOFP_SCHEME_NVFP4 && b.s.two_level) || verify_global(&b, last);
    fail = b.st != LOFP_OK || bad || !gok;
    double gbs = (double)in_bytes / t / 1e9;
    double bw = o->read_bw[threads] > 0 ? o->read_bw[threads] : 0;
    printf("%-15s %-8s %5zux%-5zu %-4s %dT %-7s %9.3f ms %7.2f GB/s %5.0f%% bw %7.1fx ref %s\n", preset,
           kind == JOB_QUANT ? "quant" : "dequant", rows, k, cold ? "cold" : "hot", threads,
           lofp_kernel_name(b.s.id, kind == JOB_QUANT ? LOFP_KERNEL_QUANTIZE : LOFP_KERNEL_DEQUANTIZE),
           t * 1e3, gbs, bw > 0 ? 100.0 * gbs / bw : 0.0,
           *ref_per_elem / (t / (double)(rows * k)), fail ? "CHECK FAILED" : "ok");
    fflush(stdout);
done:
    for (size_t c = 0; c < b.copies; c++) {
        free(b.x[c]);
        free(b.codes[c]);
        free(b.scales[c]);
        free(b.out[c]);
    }
    free(b.x);
    free(b.codes);
    free(b.scales);
    free(b.out);
    free(b.global);
    return fail;
}

/* The pool against a fork/join of fresh threads on a small call, where the hand-off matters. */
static void bench_pool(const bench_opts *o)
{
    if (o->threads_max < 2) return;
    const size_t rows = 64, k = 4096;
    for (int fj = 0; fj <= 1; fj++) {
        qbench b;
        memset(&b, 0, sizeof b);
        lofp_scheme_preset("mxfp4", &b.s);
        b.s.threads = 2;
        b.kind = JOB_QUANT;
        b.rows = rows;
        b.k = k;
        b.copies = 1;
        float *x = malloc(rows * k * sizeof(float));
        uint8_t *c = malloc(lofp_codes_bytes(&b.s, rows, k)), *sc = malloc(lofp_scales_bytes(&b.s, rows, k));
        fill(x, rows * k, 7);
        float g = 1.0f;
        b.x = &x;
        b.codes = &c;
        b.scales = &sc;
        b.global = &g;
        lofp_parallel_fork_join = fj;
        double t = bench_time(o, run_once, &b);
        printf("threading: mxfp4 quant %zux%zu 2T, %-26s %8.1f us per call\n", rows, k,
               fj ? "fork/join (pthread_create)" : "persistent pool", t * 1e6);
        free(x);
        free(c);
        free(sc);
    }
    lofp_parallel_fork_join = 0;
}

int bench_group_quant(const bench_opts *o)
{
    static const size_t shapes[2][2] = { { 4096, 4096 }, { 11008, 4096 } };
    int tmax = o->threads_max < 2 ? o->threads_max : 2;
    int fail = 0;
    printf("quant: kernels %s (LOFP_DISABLE_CPU_FEATURES=all for generic); GB/s of fp32 data, "
           "%% of the read bandwidth measured above, speedup over the reference row kernels\n",
           lofp_kernels()->isa);
    const size_t nshapes = o->quick ? 1 : 2;
    for (size_t si = 0; si < nshapes; si++) {
        size_t rows = o->quick ? 512 : shapes[si][0], k = shapes[si][1];
        static const struct { const char *preset; job_kind kind; } main_jobs[] = {
            { "mxfp4", JOB_QUANT }, { "nvfp4", JOB_QUANT }, { "mxfp4", JOB_DEQUANT },
        };
        for (size_t j = 0; j < 3; j++) {
            double ref = 0;
            for (int cold = 1; cold >= 0; cold--)
                for (int t = 1; t <= tmax; t++)
                    fail |= bench_one(o, main_jobs[j].preset, main_jobs[j].kind, rows, k, cold, t, &ref);
        }
    }
    /* the other presets, briefly: hot, 4096 x 4096 (512 x 4096 with --quick) */
    static const struct { const char *preset; job_kind kind; } others[] = {
        { "nvfp4", JOB_DEQUANT }, { "mxfp6-e2m3", JOB_QUANT }, { "mxfp8-e4m3", JOB_QUANT },
        { "mxfp8-e4m3", JOB_DEQUANT }, { "mxint8", JOB_QUANT }, { "tilelang-mxfp8", JOB_QUANT },
        { "ultraquant", JOB_QUANT }, { "ultraquant", JOB_DEQUANT },
    };
    for (size_t j = 0; j < sizeof others / sizeof others[0]; j++) {
        double ref = 0;
        for (int t = 1; t <= tmax; t++)
            fail |= bench_one(o, others[j].preset, others[j].kind, o->quick ? 512 : 4096, 4096, 0, t, &ref);
    }
    bench_pool(o);
    printf("\n");
    return fail;
}

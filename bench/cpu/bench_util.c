/* bench_util.c -- timing and the bandwidth ceiling every benchmark ratio is taken against. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_time(const bench_opts *o, void (*fn)(void *), void *arg)
{
    double t[64];
    int n = 0;
    double start = cli_now(), budget = o->min_time > 0 ? o->min_time : 0.3;
    fn(arg); /* warm-up */
    do {
        double t0 = cli_now();
        fn(arg);
        t[n++] = cli_now() - t0;
    } while (n < 64 && (n < 3 || cli_now() - start < budget));
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_arg;

static void *bw_worker(void *v)
{
    bw_arg *a = v;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= a->n; i += 4) {
        s0 += a->p[i]; s1 += a->p[i + 1]; s2 += a->p[i + 2]; s3 += a->p[i + 3];
    }
    a->sum = s0 + s1 + s2 + s3;
    return NULL;
}

double bench_read_bandwidth(size_t bytes, int threads)
{
    if (threads < 1) threads = 1;
    if (threads > 8) threads = 8;
    size_t n = bytes / 8;
    uint64_t *buf = malloc(n * 8);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i; /* touch every page */
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t th[8];
        bw_arg args[8];
        size_t chunk = n / (size_t)threads;
        double t0 = cli_now();
        for (int t = 0; t < threads; t++) {
            args[t].p = buf + (size_t)t * chunk;
            args[t].n = chunk;
            pthread_create(&th[t], NULL, bw_worker, &args[t]);
        }
        uint64_t total = 0;
        for (int t = 0; t < threads; t++) { pthread_join(th[t], NULL); total += args[t].sum; }
        double el = cli_now() - t0;
        if (total == 42) el += 1e-9; /* keep the sum alive */
        if (el < best) best = el;
    }
    free(buf);
    return (double)bytes / best / 1e9;
}

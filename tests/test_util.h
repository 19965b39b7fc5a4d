/* test_util.h -- a tiny harness: checks that count failures, a seeded RNG, and .npy loading. */
#ifndef LOFP_TEST_UTIL_H
#define LOFP_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include "lofp/lofp.h"

extern int tu_failures;

#define CHECK(cond) do { if (!(cond)) { tu_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { if (!(cond)) { tu_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_EQ_U(a, b) CHECKF((uint64_t)(a) == (uint64_t)(b), "%llu != %llu", \
    (unsigned long long)(a), (unsigned long long)(b))
#define CHECK_OK(expr) do { lofp_status st_ = (expr); CHECKF(st_ == LOFP_OK, "%s -> %s", #expr, \
    lofp_status_name(st_)); } while (0)

/* Prints a summary and returns the process exit code (0 when no check failed). */
int tu_finish(const char *name);

/* xoshiro-ish RNG for tests: deterministic from the seed. */
typedef struct { uint64_t s; } tu_rng;
uint64_t tu_next(tu_rng *r);
double tu_uniform(tu_rng *r);          /* [0, 1) */
double tu_normal(tu_rng *r);           /* standard normal */

/* A loaded .npy array: data is malloc'ed and owned by the caller (tu_npy_free). */
typedef struct {
    char descr[8];      /* e.g. "<f4", "|u1", "<u4", "<f8" */
    size_t shape[8];
    int ndim;
    size_t count;       /* number of elements */
    size_t itemsize;
    void *data;
} tu_npy;

/* Loads LOFP_GOLDEN_DIR/<rel>; aborts the test with a message when the file is missing. */
tu_npy tu_load_golden(const char *rel);
void tu_npy_free(tu_npy *a);

/* Number of worker threads for sweeps (2 unless LOFP_TEST_THREADS says otherwise). */
int tu_threads(void);
/* Stride for exhaustive sweeps: 1 unless LOFP_EXHAUSTIVE_STRIDE is set (sanitizer runs). */
uint32_t tu_exhaustive_stride(void);

#endif

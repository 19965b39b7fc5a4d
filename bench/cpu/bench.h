/* bench.h -- `lofp bench` building blocks: each benchmark group is one function. */
#ifndef LOFP_BENCH_H
#define LOFP_BENCH_H

#include <stddef.h>

typedef struct {
    int threads_max;   /* --threads N: run 1..N threads (default 2) */
    int quick;         /* --quick: smaller sizes and fewer repetitions (used by tests) */
    double min_time;   /* seconds per measurement (default 0.3) */
    double read_bw[9]; /* measured read bandwidth in GB/s for 1..8 threads (0 = not measured) */
} bench_opts;

/* Median-of-repetitions wall time of fn(arg) in seconds, running it for at least o->min_time. */
double bench_time(const bench_opts *o, void (*fn)(void *), void *arg);

/* STREAM-like read bandwidth (sum of a buffer much larger than the L3) with `threads` threads,
 * in GB/s. */
double bench_read_bandwidth(size_t bytes, int threads);

/* Benchmark groups; each prints its own table rows and returns non-zero when a self-check of
 * its outputs fails. */
int bench_group_quant(const bench_opts *o);
int bench_group_gemm(const bench_opts *o);
int bench_group_attention(const bench_opts *o);
int bench_group_pool(const bench_opts *o);
/* `lofp bench methods`: MSE and GPTQ wall times (bench_methods.c); not part of `all`. */
int bench_group_methods(const bench_opts *o);
/* `lofp bench io`: quantize/dequantize end to end against read()/write() (bench_io.c). */
int bench_io(int argc, char **argv);

#endif

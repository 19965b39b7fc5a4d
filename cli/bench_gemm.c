/* bench_gemm.c -- placeholder until the gemm kernels land. */
#include <stdio.h>
#include "bench.h"
int bench_group_gemm(const bench_opts *o) { (void)o; printf("(gemm: no benchmarks yet)\n"); return 0; }

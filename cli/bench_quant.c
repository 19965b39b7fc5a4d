/* bench_quant.c -- placeholder until the quant kernels land. */
#include <stdio.h>
#include "bench.h"
int bench_group_quant(const bench_opts *o) { (void)o; printf("(quant: no benchmarks yet)\n"); return 0; }

/* bench_attention.c -- placeholder until the attention kernels land. */
#include <stdio.h>
#include "bench.h"
int bench_group_attention(const bench_opts *o) { (void)o; printf("(attention: no benchmarks yet)\n"); return 0; }

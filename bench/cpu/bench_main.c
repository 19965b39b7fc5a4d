/* bench_main.c -- the lofp-bench program (`lofp bench` runs it): measures the read-bandwidth
 * ceiling in the same run, then each group's kernels, printing ratios against it. It is a program
 * of its own, built with LOFP_BUILD_BENCH, because the benchmarks time the library's internal
 * kernels (src/ headers), which the lofp command may not include. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: lofp-bench [quant|gemm|attention|pool|methods|all] [--threads N] [--quick] [--min-time S]\n"
               "       lofp-bench io [options]   (the file pipeline against read()/write(); --help)\n\n"
               "Measures the machine's read bandwidth (STREAM-like, 512 MiB) for 1..N threads, then\n"
               "runs the chosen benchmark group(s) and prints time, GB/s, GFLOP/s, the ratio to the\n"
               "bandwidth floor and the speedup over lofp's scalar path. Every benchmark checks its\n"
               "own outputs; a failed check makes the exit status non-zero. `lofp bench ...` runs this\n"
               "program when it is installed beside the lofp command.\n");
}

int main(int argc, char **argv)
{
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.threads_max = 2;
    o.min_time = 0.3;
    const char *group = "all";
    if (argc > 1 && !strcmp(argv[1], "io")) return bench_io(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { bench_usage(stdout); return 0; }
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) o.threads_max = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0) o.quick = 1;
        else if (strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) o.min_time = atof(argv[++i]);
        else if (argv[i][0] != '-') group = argv[i];
        else { bench_usage(stderr); return cli_error("bench", "unknown option '%s'", argv[i]); }
    }
    if (o.threads_max < 1 || o.threads_max > 8) return cli_error("bench", "--threads must be 1..8");
    size_t bw_bytes = o.quick ? (64u << 20) : (512u << 20);
    printf("read bandwidth (STREAM-like sum over %zu MiB):", bw_bytes >> 20);
    for (int t = 1; t <= o.threads_max; t++) {
        o.read_bw[t] = bench_read_bandwidth(bw_bytes, t);
        printf("  %d thread%s %.1f GB/s", t, t > 1 ? "s" : "", o.read_bw[t]);
    }
    printf("\n\n");
    int rc = 0, ran = 0;
    if (!strcmp(group, "quant") || !strcmp(group, "all")) { rc |= bench_group_quant(&o); ran = 1; }
    if (!strcmp(group, "gemm") || !strcmp(group, "all")) { rc |= bench_group_gemm(&o); ran = 1; }
    if (!strcmp(group, "attention") || !strcmp(group, "all")) { rc |= bench_group_attention(&o); ran = 1; }
    if (!strcmp(group, "pool") || !strcmp(group, "all")) { rc |= bench_group_pool(&o); ran = 1; }
    if (!strcmp(group, "methods")) { rc |= bench_group_methods(&o); ran = 1; }
    if (!ran) return cli_error("bench", "unknown group '%s' (quant, gemm, attention, pool, methods, all)", group);
    if (rc) fprintf(stderr, "lofp-bench: a benchmark's self-check FAILED\n");
    return rc;
}

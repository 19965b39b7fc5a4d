/* cmd_bench.c -- `lofp bench ...`: runs the lofp-bench program installed beside the lofp command
 * with the same arguments. The benchmarks live in bench/cpu/ (built with LOFP_BUILD_BENCH) because
 * they time the library's internal kernels; the lofp command itself uses public headers only. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The directory of the running lofp binary (/proc/self/exe, else argv[0] when it names a path),
 * written to dir; 0 when found. */
static int self_dir(char *dir, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
    if (n <= 0 && lofp_cli_argv0 && strchr(lofp_cli_argv0, '/')) {
        n = (ssize_t)strlen(lofp_cli_argv0);
        if ((size_t)n >= cap) return -1;
        memcpy(dir, lofp_cli_argv0, (size_t)n);
    }
    if (n <= 0) return -1;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    *slash = '\0';
    return 0;
}

int lofp_cmd_bench(int argc, char **argv)
{
    char dir[PATH_MAX], exe[PATH_MAX + 16];
    if (self_dir(dir, sizeof dir) != 0) return cli_error("bench", "cannot find the lofp command's directory");
    snprintf(exe, sizeof exe, "%s/lofp-bench", dir);
    if (access(exe, X_OK) != 0)
        return cli_error("bench", "%s: not found; the benchmarks are the lofp-bench program, built with "
                         "-DLOFP_BUILD_BENCH=ON (make bench)", exe);
    argv[0] = exe;
    fflush(NULL);
    execv(exe, argv);
    return cli_error("bench", "cannot run %s: %s", exe, strerror(errno));
}

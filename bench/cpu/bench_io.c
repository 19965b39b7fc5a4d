/* bench_io.c -- `lofp bench io`: the file pipeline end to end against the kernel's own copy rate.
 *
 * In one run, on the same file in the same directory: read() of the input into an 8 MiB buffer
 * (the ceiling for anything that reads the file), `lofp quantize` of it as a child process (wall
 * time and peak RSS from wait4), write() of as many bytes as the dequantized output into a new
 * file, and `lofp dequantize` back. Prints each rate, the ratio to read()/write(), the peak RSS
 * against the bound 0.5 x input + 64 MiB, and the fsync cost separately (the pipeline runs with
 * LOFP_WRITE_NO_SYNC=1, then once more with fsync). Rates are the best of --reps runs, each
 * measured right after its read()/write() reference, so that the ratio compares like with like
 * on a noisy machine. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: lofp bench io [--rows R] [--cols K] [--tensors N] [--dtype f32|bf16|f16]\n"
        "                     [--scheme S] [--threads 1,2] [--reps N] [--dir D] [--keep]\n\n"
        "Writes an input of N tensors [R, K] (default one 8192 x 4096 f32 tensor, a .npy; N > 1:\n"
        ".safetensors) into D (default $TMPDIR or /tmp), then measures in the same run: read() of\n"
        "it, `lofp quantize --scheme S` (default mxfp4) for each thread count, write() of the\n"
        "dequantized size, and `lofp dequantize` back to f32. Prints GB/s, the ratio to\n"
        "read()/write(), peak RSS against 0.5 x input + 64 MiB, and the cost of fsync.\n");
}

static uint64_t sm(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Input: N tensors of [rows, cols], values roughly normal with per-row scales. */
static int make_input(const char *path, size_t n, size_t rows, size_t cols, lofp_dtype dt)
{
    lofp_tensor_desc *d = calloc(n, sizeof *d);
    char (*names)[32] = calloc(n, sizeof *names);
    size_t shape[2] = {rows, cols}, es = lofp_dtype_bits(dt) / 8;
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "layer%zu.weight", i);
        d[i] = (lofp_tensor_desc){names[i], dt, 2, shape, NULL, rows * cols * es};
    }
    lofp_io_error err;
    lofp_writer *w;
    if (lofp_writer_open(path, LOFP_FORMAT_AUTO, d, n, NULL, 0, LOFP_WRITE_NO_SYNC, &w, &err) != LOFP_OK) {
        free(d); free(names);
        return cli_error("bench", "%s", err.message);
    }
    uint8_t *row = malloc(cols * es);
    uint64_t seed = 42;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        for (size_t r = 0; r < rows && !rc; r++) {
            float scale = (float)(1 + (sm(&seed) & 15));
            for (size_t j = 0; j < cols; j++) {
                uint64_t u = sm(&seed);
                /* sum of 4 uniforms: close enough to normal for scales and codes to vary */
                float v = ((float)(u & 0xFFFF) + (float)((u >> 16) & 0xFFFF) + (float)((u >> 32) & 0xFFFF) +
                           (float)(u >> 48) - 131070.0f) / 37837.0f * scale;
                if (dt == LOFP_DTYPE_F32) memcpy(row + 4 * j, &v, 4);
                else {
                    uint16_t h = dt == LOFP_DTYPE_BF16 ? lofp_fp32_to_bf16(v) : lofp_fp32_to_fp16(v);
                    memcpy(row + 2 * j, &h, 2);
                }
            }
            if (lofp_writer_append(w, i, row, cols * es, &err) != LOFP_OK) rc = cli_error("bench", "%s", err.message);
        }
    free(row); free(d); free(names);
    if (rc) { lofp_writer_abort(w); return rc; }
    if (lofp_writer_finish(w, &err) != LOFP_OK) return cli_error("bench", "%s", err.message);
    return 0;
}

/* read() of the whole file into an 8 MiB buffer: GB/s. */
static double read_rate(const char *path, uint8_t *buf)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    double t0 = cli_now();
    size_t total = 0;
    ssize_t k;
    while ((k = read(fd, buf, 8u << 20)) > 0) total += (size_t)k;
    double t = cli_now() - t0;
    close(fd);
    return (double)total / t / 1e9;
}

/* write() of `bytes` from an 8 MiB buffer into a new file (no fsync): GB/s. */
static double write_rate(const char *path, uint8_t *buf, size_t bytes)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return 0;
    double t0 = cli_now();
    size_t left = bytes;
    while (left) {
        size_t n = left < (8u << 20) ? left : (8u << 20);
        ssize_t k = write(fd, buf, n);
        if (k <= 0) { if (errno == EINTR) continue; break; }
        left -= (size_t)k;
    }
    close(fd);
    double t = cli_now() - t0;
    unlink(path);
    return (double)bytes / t / 1e9;
}

/* Runs `self args...` with LOFP_WRITE_NO_SYNC set or not; returns wall seconds (< 0 on failure)
 * and the child's peak RSS in bytes. */
static double run_child(const char *self, char *const *args, int no_sync, size_t *maxrss)
{
    double t0 = cli_now();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (no_sync) setenv("LOFP_WRITE_NO_SYNC", "1", 1);
        else unsetenv("LOFP_WRITE_NO_SYNC");
        execv(self, args);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) return -1;
    double t = cli_now() - t0;
    *maxrss = (size_t)ru.ru_maxrss * 1024;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return t;
}

int bench_io(int argc, char **argv)
{
    long rows = 8192, cols = 4096, ntens = 1, reps = 3;
    const char *scheme = "mxfp4", *dir = NULL, *threads_arg = "1,2", *dtname = "f32";
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) { usage(stdout); return 0; }
        else if (!strcmp(a, "--rows") && more) { if (cli_parse_long("bench", "--rows", argv[++i], 1, 1L << 40, &rows)) return 1; }
        else if (!strcmp(a, "--cols") && more) { if (cli_parse_long("bench", "--cols", argv[++i], 1, 1L << 30, &cols)) return 1; }
        else if (!strcmp(a, "--tensors") && more) { if (cli_parse_long("bench", "--tensors", argv[++i], 1, 100000, &ntens)) return 1; }
        else if (!strcmp(a, "--reps") && more) { if (cli_parse_long("bench", "--reps", argv[++i], 1, 100, &reps)) return 1; }
        else if (!strcmp(a, "--scheme") && more) scheme = argv[++i];
        else if (!strcmp(a, "--threads") && more) threads_arg = argv[++i];
        else if (!strcmp(a, "--dtype") && more) dtname = argv[++i];
        else if (!strcmp(a, "--dir") && more) dir = argv[++i];
        else if (!strcmp(a, "--keep")) keep = 1;
        else { usage(stderr); return cli_error("bench", "unknown or incomplete option '%s'", a); }
    }
    lofp_dtype dt = !strcmp(dtname, "f32") ? LOFP_DTYPE_F32 : !strcmp(dtname, "bf16") ? LOFP_DTYPE_BF16 :
                       !strcmp(dtname, "f16") ? LOFP_DTYPE_F16 : (lofp_dtype)0;
    if (!dt) return cli_error("bench", "--dtype must be f32, bf16 or f16");
    if (!dir) dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) return cli_error("bench", "cannot find the lofp executable (/proc/self/exe)");
    self[sl] = 0;
    size_t plen = strlen(dir) + 64;
    char *in = malloc(plen), *q = malloc(plen), *out = malloc(plen), *wf = malloc(plen);
    const int st_in = ntens > 1 || dt == LOFP_DTYPE_BF16;   /* .npy cannot hold bf16 */
    snprintf(in, plen, "%s/lofp_bench_io_in.%s", dir, st_in ? "safetensors" : "npy");
    snprintf(q, plen, "%s/lofp_bench_io_q.safetensors", dir);
    snprintf(out, plen, "%s/lofp_bench_io_out.%s", dir, st_in ? "safetensors" : "npy");
    snprintf(wf, plen, "%s/lofp_bench_io_write.bin", dir);
    size_t es = lofp_dtype_bits(dt) / 8;
    size_t in_bytes = (size_t)ntens * (size_t)rows * (size_t)cols * es;
    size_t out_bytes = (size_t)ntens * (size_t)rows * (size_t)cols * 4;
    printf("lofp bench io: %ld tensor(s) [%ld, %ld] %s = %.1f MiB in %s, scheme %s\n", ntens, rows, cols,
           dtname, (double)in_bytes / 1048576.0, dir, scheme);
    fflush(stdout);
    int rc = make_input(in, (size_t)ntens, (size_t)rows, (size_t)cols, dt);
    uint8_t *buf = aligned_alloc(4096, 8u << 20);
    if (rc || !buf) { free(buf); return rc ? rc : cli_error("bench", "out of memory"); }
    memset(buf, 0x3c, 8u << 20);
    (void)read_rate(in, buf);                  /* into the page cache */
    double bound = 0.5 * (double)in_bytes + 64.0 * 1048576.0;
    /* the library alone on one resident tensor: what the pipeline would reach with free I/O */
    double lib_q[3] = {0}, lib_d[3] = {0};
    {
        lofp_scheme s;
        size_t tb = (size_t)rows * (size_t)cols * es;
        void *x = lofp_scheme_preset(scheme, &s) == LOFP_OK ? malloc(tb) : NULL;
        float *y = x ? malloc((size_t)rows * (size_t)cols * 4) : NULL;
        size_t cb = lofp_codes_bytes(&s, (size_t)rows, (size_t)cols), sb = lofp_scales_bytes(&s, (size_t)rows, (size_t)cols);
        uint8_t *codes = y ? malloc(cb) : NULL, *scales = codes ? malloc(sb) : NULL;
        int fd = open(in, O_RDONLY | O_CLOEXEC);
        off_t off = 0;
        lofp_file *lf = NULL;
        if (lofp_file_open(in, LOFP_FORMAT_AUTO, &lf, NULL) == LOFP_OK) off = (off_t)lofp_file_tensor(lf, 0)->offset;
        lofp_file_close(lf);
        if (scales && fd >= 0 && pread(fd, x, tb, off) == (ssize_t)tb) {
            lofp_dtype ldt = lofp_dtype_is_dense(dt) ? dt : LOFP_DTYPE_F32;
            memset(y, 0, (size_t)rows * (size_t)cols * 4);
            for (unsigned th = 1; th <= 2; th++) {
                s.threads = th;
                s.propagate_nonfinite = 1;
                for (long rep = 0; rep < reps; rep++) {
                    float g;
                    double t0 = cli_now();
                    lofp_quantize(&s, ldt, x, (size_t)rows, (size_t)cols, codes, scales, &g, NULL);
                    double t1 = cli_now();
                    lofp_dequantize(&s, codes, scales, g, (size_t)rows, (size_t)cols, LOFP_DTYPE_F32, y);
                    double t2 = cli_now();
                    if ((double)tb / (t1 - t0) / 1e9 > lib_q[th]) lib_q[th] = (double)tb / (t1 - t0) / 1e9;
                    if ((double)rows * (double)cols * 4 / (t2 - t1) / 1e9 > lib_d[th]) lib_d[th] = (double)rows * (double)cols * 4 / (t2 - t1) / 1e9;
                }
            }
        }
        if (fd >= 0) close(fd);
        free(x); free(y); free(codes); free(scales);
    }
    printf("%-37s %9s %9s %7s %10s %8s\n", "step", "GB/s", "ref GB/s", "ratio", "peak RSS", "bound");
    char thr_list[64];
    snprintf(thr_list, sizeof thr_list, "%s", threads_arg);
    for (char *tok = strtok(thr_list, ","); tok; tok = strtok(NULL, ",")) {
        long th;
        if (cli_parse_long("bench", "--threads", tok, 1, 256, &th)) { rc = 1; break; }
        char ths[16];
        snprintf(ths, sizeof ths, "%ld", th);
        char *qargs[] = {self, "quantize", "--scheme", (char *)scheme, "--threads", ths, in, q, NULL};
        char *dargs[] = {self, "dequantize", "--threads", ths, q, out, NULL};
        double best_q = 0, ref_q = 0, best_d = 0, ref_d = 0;
        size_t rss_q = 0, rss_d = 0, r;
        for (long rep = 0; rep < reps; rep++) {
            double rr = read_rate(in, buf);
            double t = run_child(self, qargs, 1, &r);
            if (t < 0) { rc = cli_error("bench", "quantize failed"); break; }
            if (r > rss_q) rss_q = r;
            if ((double)in_bytes / t / 1e9 > best_q) { best_q = (double)in_bytes / t / 1e9; ref_q = rr; }
            double wr = write_rate(wf, buf, out_bytes);
            t = run_child(self, dargs, 1, &r);
            if (t < 0) { rc = cli_error("bench", "dequantize failed"); break; }
            if (r > rss_d) rss_d = r;
            if ((double)out_bytes / t / 1e9 > best_d) { best_d = (double)out_bytes / t / 1e9; ref_d = wr; }
        }
        if (rc) break;
        char label[64];
        if (th <= 2 && lib_q[th] > 0) {
            double rr = read_rate(in, buf), wr = write_rate(wf, buf, out_bytes);
            snprintf(label, sizeof label, "  library lofp_quantize, in memory");
            printf("%-37s %9.2f %9.2f %6.0f%%\n", label, lib_q[th], rr, 100 * lib_q[th] / rr);
            snprintf(label, sizeof label, "  library lofp_dequantize, in memory");
            printf("%-37s %9.2f %9.2f %6.0f%%\n", label, lib_d[th], wr, 100 * lib_d[th] / wr);
        }
        snprintf(label, sizeof label, "quantize %s, %ld thread%s", scheme, th, th > 1 ? "s" : "");
        printf("%-37s %9.2f %9.2f %6.0f%% %7.0f MiB %4.0f MiB%s\n", label, best_q, ref_q, 100 * best_q / ref_q,
               (double)rss_q / 1048576.0, bound / 1048576.0, (double)rss_q <= bound ? "" : "  OVER");
        snprintf(label, sizeof label, "dequantize f32, %ld thread%s", th, th > 1 ? "s" : "");
        printf("%-37s %9.2f %9.2f %6.0f%% %7.0f MiB %4.0f MiB%s\n", label, best_d, ref_d, 100 * best_d / ref_d,
               (double)rss_d / 1048576.0, bound / 1048576.0, (double)rss_d <= bound ? "" : "  OVER");
        fflush(stdout);
    }
    if (!rc) {
        /* the same two steps with the default fsync of the file and its directory */
        size_t r;
        char *qargs[] = {self, "quantize", "--scheme", (char *)scheme, in, q, NULL};
        char *dargs[] = {self, "dequantize", q, out, NULL};
        double a = run_child(self, qargs, 1, &r), b = run_child(self, qargs, 0, &r);
        double c = run_child(self, dargs, 1, &r), d = run_child(self, dargs, 0, &r);
        printf("fsync cost (1 thread): quantize %.3f s -> %.3f s, dequantize %.3f s -> %.3f s\n", a, b, c, d);
    }
    if (!keep) { unlink(in); unlink(q); unlink(out); }
    free(buf); free(in); free(q); free(out); free(wf);
    return rc;
}

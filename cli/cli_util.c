/* cli_util.c -- helpers every file command shares: strict number parsing of options, refusing
 * an output that is one of the inputs, and removing the temporary output on SIGINT/SIGTERM/SIGHUP. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "lofp %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi,
                  uint64_t *out)
{
    const char *p = s;
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) { base = 16; p += 2; }
    if (!*p) goto bad;
    uint64_t v = 0;
    for (; *p; p++) {
        unsigned d;
        if (*p >= '0' && *p <= '9') d = (unsigned)(*p - '0');
        else if (base == 16 && *p >= 'a' && *p <= 'f') d = (unsigned)(*p - 'a' + 10);
        else if (base == 16 && *p >= 'A' && *p <= 'F') d = (unsigned)(*p - 'A' + 10);
        else goto bad;
        if (v > (UINT64_MAX - d) / (unsigned)base) goto range;
        v = v * (unsigned)base + d;
    }
    if (v < lo || v > hi) goto range;
    *out = v;
    return 0;
bad:
    return cli_error(cmd, "%s: '%s' is not a non-negative integer", opt, s);
range:
    return cli_error(cmd, "%s: %s is out of range (%llu..%llu)", opt, s, (unsigned long long)lo,
                     (unsigned long long)hi);
}

int cli_parse_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
    uint64_t v;
    if (s[0] == '-' && lo >= 0)
        return cli_error(cmd, "%s: %s is out of range (%ld..%ld)", opt, s, lo, hi);
    if (cli_parse_u64(cmd, opt, s, (uint64_t)lo, (uint64_t)hi, &v)) return 1;
    *out = (long)v;
    return 0;
}

int cli_parse_float(const char *cmd, const char *opt, const char *s, int positive, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end) return cli_error(cmd, "%s: '%s' is not a number", opt, s);
    if (!isfinite(v)) return cli_error(cmd, "%s: %s is not a finite number", opt, s);
    if (positive && !(v > 0)) return cli_error(cmd, "%s: %s must be positive", opt, s);
    *out = v;
    return 0;
}

int cli_refuse_same(const char *cmd, const char *out, const char *const *ins, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ins[i] && lofp_same_file(out, ins[i]))
            return cli_error(cmd, "the output %s is the input %s (the same file); write to another path",
                             out, ins[i]);
    return 0;
}

unsigned cli_write_flags(void)
{
    const char *e = getenv("LOFP_WRITE_NO_SYNC");
    return e && *e && strcmp(e, "0") != 0 ? LOFP_WRITE_NO_SYNC : 0;
}

/* ---- the temporary output and signals ---- */

static lofp_writer *volatile active_writer;
static volatile sig_atomic_t handlers_installed;

static void on_signal(int sig)
{
    lofp_writer *w = active_writer;
    if (w) lofp_writer_unlink_temp(w);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* finish and abort free the writer: the handler must not see it half-freed, so the signals wait
 * (a signal arriving meanwhile is delivered right after, with the output complete or removed) */
static void block_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, old);
}

void cli_track_writer(lofp_writer *w)
{
    if (!handlers_installed) {
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
            struct sigaction sa, old;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            sigemptyset(&sa.sa_mask);
            /* keep a signal the caller chose to ignore (nohup) ignored */
            if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
            sigaction(sigs[i], &sa, NULL);
        }
        handlers_installed = 1;
    }
    active_writer = w;
}

static lofp_status open_tracked(const char *path, lofp_file_format fmt, const lofp_tensor_desc *t,
                                size_t n, const lofp_metadata_entry *meta, size_t n_meta, unsigned flags,
                                lofp_writer **out, lofp_io_error *err)
{
    /* the temporary file appears inside lofp_writer_open: a signal waits until it is tracked */
    cli_track_writer(NULL);
    sigset_t old;
    block_signals(&old);
    lofp_status st = lofp_writer_open(path, fmt, t, n, meta, n_meta, flags, out, err);
    if (st == LOFP_OK) active_writer = *out;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return st;
}

lofp_status cli_writer_open(const char *path, lofp_file_format fmt, const lofp_tensor_desc *t,
                            size_t n, const lofp_metadata_entry *meta, size_t n_meta,
                            lofp_writer **out, lofp_io_error *err)
{
    return open_tracked(path, fmt, t, n, meta, n_meta, cli_write_flags(), out, err);
}

lofp_status cli_writer_finish(lofp_writer *w, lofp_io_error *err)
{
    sigset_t old;
    block_signals(&old);
    lofp_status st = lofp_writer_finish(w, err);
    active_writer = NULL;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return st;
}

void cli_writer_abort(lofp_writer *w)
{
    sigset_t old;
    block_signals(&old);
    lofp_writer_abort(w);
    active_writer = NULL;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static lofp_status ops_open(void *ctx, const char *path, lofp_file_format fmt, const lofp_tensor_desc *t,
                            size_t n, const lofp_metadata_entry *meta, size_t n_meta, unsigned flags,
                            lofp_writer **out, lofp_io_error *err)
{
    return open_tracked(path, fmt, t, n, meta, n_meta, flags, out, err);
}

static lofp_status ops_finish(void *ctx, lofp_writer *w, lofp_io_error *err) { return cli_writer_finish(w, err); }
static void ops_abort(void *ctx, lofp_writer *w) { cli_writer_abort(w); }

const lofp_qfile_writer_ops *cli_writer_ops(void)
{
    static const lofp_qfile_writer_ops ops = { ops_open, ops_finish, ops_abort, NULL };
    return &ops;
}

lofp_status cli_write_file(const char *path, lofp_file_format fmt, const lofp_tensor_desc *t,
                           size_t n, const lofp_metadata_entry *meta, size_t n_meta,
                           lofp_io_error *err)
{
    lofp_writer *w;
    lofp_status st = cli_writer_open(path, fmt, t, n, meta, n_meta, &w, err);
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        if ((st = lofp_writer_append(w, i, t[i].data, t[i].nbytes, err))) {
            cli_writer_abort(w);
            return st;
        }
    }
    return cli_writer_finish(w, err);
}

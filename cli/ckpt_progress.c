/* ckpt_progress.c -- one progress line per shard on a terminal, nothing otherwise. */
#include "ckpt_progress.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lofp/checkpoint.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void cli_progress_init(cli_progress *p, int quiet)
{
    memset(p, 0, sizeof *p);
    p->tty = isatty(2);
    p->quiet = quiet;
    p->t0 = cli_now();
    p->last_pct = -1;
    p->last_shard = (size_t)-1;
}

void cli_progress_cb(void *ctx, const char *shard, size_t shard_index, size_t n_shards, size_t done, size_t total)
{
    cli_progress *p = ctx;
    if (!p->tty || p->quiet) return;
    int pct = total ? (int)(100.0 * (double)done / (double)total) : 100;
    pthread_mutex_lock(&mu);
    if (pct != p->last_pct || shard_index != p->last_shard) {
        int w = 30, fill = pct * w / 100;
        char bar[40];
        for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
        bar[w] = 0;
        fprintf(stderr, "\r  [%zu/%zu] %-40.40s [%s] %3d%%", shard_index + 1, n_shards, shard, bar, pct);
        if (done == total) fputc('\n', stderr);
        fflush(stderr);
        p->last_pct = pct;
        p->last_shard = shard_index;
    }
    pthread_mutex_unlock(&mu);
}

void cli_note_cb(void *ctx, const char *line)
{
    cli_progress *p = ctx;
    if (p->quiet && strncmp(line, "warning:", 8) != 0) return;
    pthread_mutex_lock(&mu);
    fprintf(stderr, "%s\n", line);
    pthread_mutex_unlock(&mu);
}

/* ---- signals ---- */

static sigset_t guarded;
static pthread_t waiter;
static int waiting;              /* a waiter thread runs */
static int finished;             /* set by the main thread under mu: the waiter returns */

/* Removes the temporaries and ends the process by `sig` (blocked in every thread but this one
 * from here on, and never returns). */
static void die_of(int sig)
{
    lofp_ckpt_remove_temps();
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig); /* to this thread, unblocked, default action: the process ends by the signal */
    _exit(128 + sig);
}

static void *signal_waiter(void *arg)
{
    (void)arg;
    /* an ordinary thread, not a handler: listing directories and taking locks are allowed. It
     * polls `finished` so that cli_ckpt_signals_end() can stop it without a race */
    const struct timespec tick = { 0, 20 * 1000 * 1000 };
    for (;;) {
        int sig = sigtimedwait(&guarded, NULL, &tick);
        if (sig > 0) die_of(sig);
        pthread_mutex_lock(&mu);
        int f = finished;
        pthread_mutex_unlock(&mu);
        if (f) return NULL;
    }
}

void cli_ckpt_guard_signals(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    sigemptyset(&guarded);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* keep a signal the caller chose to ignore (nohup) ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaddset(&guarded, sigs[i]);
    }
    if (pthread_sigmask(SIG_BLOCK, &guarded, NULL) != 0) return;
    if (pthread_create(&waiter, NULL, signal_waiter, NULL) == 0) waiting = 1;
    else pthread_sigmask(SIG_UNBLOCK, &guarded, NULL);
}

void cli_ckpt_signals_end(void)
{
    if (!waiting) return;
    pthread_mutex_lock(&mu);
    finished = 1;
    pthread_mutex_unlock(&mu);
    pthread_join(waiter, NULL); /* never returns if the waiter took a signal: it ends the process */
    waiting = 0;
    /* a signal that came after the waiter's last look is still pending: this thread takes it */
    const struct timespec zero = { 0, 0 };
    int sig = sigtimedwait(&guarded, NULL, &zero);
    if (sig > 0) die_of(sig);
    pthread_sigmask(SIG_UNBLOCK, &guarded, NULL);
}

int cli_ckpt_run(const char *cmd, lofp_status (*fn)(const char *, const char *, const lofp_ckpt_options *, lofp_io_error *),
                 const char *in, const char *out, lofp_ckpt_options *o, int quiet)
{
    cli_progress p;
    cli_progress_init(&p, quiet);
    o->progress = cli_progress_cb;
    o->note = cli_note_cb;
    o->ctx = &p;
    lofp_io_error err;
    double t0 = cli_now();
    cli_ckpt_guard_signals();
    lofp_status st = fn(in, out, o, &err);
    cli_ckpt_signals_end();
    if (st != LOFP_OK) return cli_error(cmd, "%s", err.message);
    if (!quiet) fprintf(stderr, "lofp %s: wrote %s in %.2f s\n", cmd, out, cli_now() - t0);
    return 0;
}

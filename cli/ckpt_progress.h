/* ckpt_progress.h -- the progress bar and notes of `lofp convert` / `lofp import` (stderr). */
#ifndef LOFP_CLI_CKPT_PROGRESS_H
#define LOFP_CLI_CKPT_PROGRESS_H

#include <stddef.h>

#include "lofp/checkpoint.h"

typedef struct {
    int tty;
    int quiet;
    double t0;
    int last_pct;
    size_t last_shard;
} cli_progress;

void cli_progress_init(cli_progress *p, int quiet);
void cli_progress_cb(void *ctx, const char *shard, size_t shard_index, size_t n_shards, size_t done, size_t total);
/* Lines of the converter (what was left unquantized, the casts' reports) on stderr, unless
 * --quiet; lines that start with "warning:" are printed even with --quiet. */
void cli_note_cb(void *ctx, const char *line);
/* SIGINT, SIGTERM and SIGHUP during a conversion or an import: blocks them in this thread and
 * every thread started later (the converter's workers), and starts a thread that waits for one,
 * removes the conversion's temporaries (lofp_ckpt_remove_temps) and ends the process by that
 * signal. A signal ignored at start (nohup) stays ignored. Call once, before converting. */
void cli_ckpt_guard_signals(void);
/* After the conversion returned, before reporting: a signal that arrived meanwhile ends the
 * process by that signal (temporaries removed), whatever the conversion's result; otherwise the
 * signals are unblocked again. */
void cli_ckpt_signals_end(void);

/* `lofp convert` / `lofp import` after their arguments: runs fn (lofp_ckpt_convert or
 * lofp_ckpt_import) on in and out with o's progress and notes on stderr (o->progress, note and ctx
 * are set here) under the signal guard above, then prints "lofp CMD: wrote OUT in T s" unless
 * quiet. Returns the exit status: 0, or 1 with the error printed. */
int cli_ckpt_run(const char *cmd, lofp_status (*fn)(const char *, const char *, const lofp_ckpt_options *, lofp_io_error *),
                 const char *in, const char *out, lofp_ckpt_options *o, int quiet);

#endif

/* ckpt_progress.h -- the progress bar and notes of `lofp convert` / `lofp import` (stderr). */
#ifndef LOFP_CLI_CKPT_PROGRESS_H
#define LOFP_CLI_CKPT_PROGRESS_H

#include <stddef.h>

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

#endif

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
void cli_note_cb(void *ctx, const char *line);

#endif

/* cli.h -- shared pieces of the lofp command: subcommand table and small helpers. */
#ifndef LOFP_CLI_H
#define LOFP_CLI_H

#include <stdint.h>
#include <stdio.h>
#include "lofp/io.h"
#include "lofp/lofp.h"
#include "lofp/qfile.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} lofp_cli_cmd;

int lofp_cmd_demo(int argc, char **argv);
int lofp_cmd_bench(int argc, char **argv);
int lofp_cmd_quantize(int argc, char **argv);
int lofp_cmd_dequantize(int argc, char **argv);
int lofp_cmd_inspect(int argc, char **argv);
int lofp_cmd_layout(int argc, char **argv);
int lofp_cmd_verify(int argc, char **argv);
int lofp_cmd_attention(int argc, char **argv);
int lofp_cmd_convert(int argc, char **argv);
int lofp_cmd_import(int argc, char **argv);
/* The command as invoked (main's argv[0]): `lofp eval` looks for the Python installed beside it. */
extern const char *lofp_cli_argv0;
int lofp_cmd_eval(int argc, char **argv);
int lofp_cmd_calibrate(int argc, char **argv);
int lofp_cmd_verify_checkpoint(int argc, char **argv);
int lofp_cmd_vectors(int argc, char **argv);

/* Wall-clock seconds from a monotonic clock. */
double cli_now(void);
/* 1 when argv[i] is "--help" or "-h". */
int cli_is_help(const char *a);
/* Prints "lofp <cmd>: " and the message to stderr; returns 1 (the exit status for errors). */
int cli_error(const char *cmd, const char *fmt, ...);

/* Strict option numbers (cli_util.c): the whole string must be the number; out-of-range values
 * and junk are errors printed as "lofp <cmd>: <opt>: ...". Return 0 on success, 1 after printing
 * the error. u64 accepts decimal or 0x-hex; long takes lo..hi (a '-' is refused when lo >= 0);
 * float must be finite (and > 0 with positive). */
int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int cli_parse_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int cli_parse_float(const char *cmd, const char *opt, const char *s, int positive, double *out);

/* Prints an error and returns 1 when `out` is the same file as one of ins[0..n) (NULL skipped). */
int cli_refuse_same(const char *cmd, const char *out, const char *const *ins, size_t n);

/* Writer flags: LOFP_WRITE_NO_SYNC when the environment has LOFP_WRITE_NO_SYNC=1 (benchmarks and
 * scratch outputs; docs/CLI.md), else 0 (fsync the file and its directory). */
unsigned cli_write_flags(void);

/* The writer in flight: its temporary file is removed on SIGINT, SIGTERM and SIGHUP (the handlers
 * are installed on first use; a signal ignored at start stays ignored). finish/abort through these
 * wrappers so the handler never sees a freed writer. */
void cli_track_writer(lofp_writer *w);
/* lofp_writer_open with cli_write_flags(), tracked from the moment its temporary file exists. */
lofp_status cli_writer_open(const char *path, lofp_file_format fmt, const lofp_tensor_desc *t,
                            size_t n, const lofp_metadata_entry *meta, size_t n_meta,
                            lofp_writer **out, lofp_io_error *err);
lofp_status cli_writer_finish(lofp_writer *w, lofp_io_error *err);
void cli_writer_abort(lofp_writer *w);
/* The tracked writer as writer hooks of the library's file pipelines (lofp/qfile.h): what
 * `lofp quantize` and `lofp dequantize` pass, so that a signal removes their temporary output. */
const lofp_qfile_writer_ops *cli_writer_ops(void);
/* lofp_file_write through a tracked writer (signals clean up). */
lofp_status cli_write_file(const char *path, lofp_file_format fmt, const lofp_tensor_desc *t,
                           size_t n, const lofp_metadata_entry *meta, size_t n_meta,
                           lofp_io_error *err);

#endif

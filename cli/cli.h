/* cli.h -- shared pieces of the lofp command: subcommand table and small helpers. */
#ifndef LOFP_CLI_H
#define LOFP_CLI_H

#include <stdio.h>
#include "lofp/lofp.h"

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
int lofp_cmd_eval(int argc, char **argv);
int lofp_cmd_verify_checkpoint(int argc, char **argv);

/* Wall-clock seconds from a monotonic clock. */
double cli_now(void);
/* 1 when argv[i] is "--help" or "-h". */
int cli_is_help(const char *a);
/* Prints "lofp <cmd>: " and the message to stderr; returns 1 (the exit status for errors). */
int cli_error(const char *cmd, const char *fmt, ...);

#endif

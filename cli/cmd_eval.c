/* cmd_eval.c -- `lofp eval`: runs `python -m lofp eval ...` (the lofp Python package's lofp.eval,
 * docs/EVAL.md), which quantizes a real model's weights (and KV cache) under lofp's formats and
 * measures perplexity, KL, top-1 agreement, embedding cosine and per-layer error. The interpreter
 * is $LOFP_PYTHON, else python3 on PATH. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int lofp_cmd_eval(int argc, char **argv)
{
    const char *py = getenv("LOFP_PYTHON");
    if (!py || !*py) py = "python3";
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) return cli_error("eval", "out of memory");
    args[0] = (char *)py;
    args[1] = "-m";
    args[2] = "lofp";
    args[3] = "eval";
    for (int i = 1; i < argc; i++) args[3 + i] = argv[i];
    args[argc + 3] = NULL;
    fflush(stdout);
    execvp(py, args);
    int e = errno;
    free(args);
    return cli_error("eval", "cannot run %s (%s): `lofp eval` runs the lofp Python package "
                     "(pip install lofp, or set LOFP_PYTHON to an interpreter that has it; "
                     "docs/EVAL.md)", py, strerror(e));
}

/* cmd_eval.c -- the commands written in Python: `lofp eval` runs `python -m lofp eval ...` (the
 * lofp Python package's lofp.eval, docs/EVAL.md), which quantizes a real model's weights (and KV
 * cache) under lofp's formats and measures perplexity, KL, top-1 agreement, embedding cosine and
 * per-layer error; `lofp calibrate` runs `python -m lofp calibrate ...` (lofp.calibrate,
 * docs/QUALITY.md), which runs a model over calibration text and writes its layers' input
 * statistics. Both need a model's forward pass, which lives in the Python package.
 *
 * The interpreter is the one lofp was installed with, so that `venv/bin/lofp eval` uses the venv's
 * package rather than whatever python3 PATH finds first: $LOFP_PYTHON, else python3 / python in
 * the directory of the command as invoked (a venv's bin/, possibly through a symbolic link), else
 * in the directory of /proc/self/exe (the binary's real location), else python3 on PATH. The
 * Python side handles `eval` and `calibrate` itself and never calls back into this command, so there
 * is no loop. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* python3 or python in dir (the part of path before its last '/'), into out; 0 when found. */
static int python_beside(const char *path, char *out, size_t cap)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash) return -1;
    static const char *names[] = {"python3", "python"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int n = snprintf(out, cap, "%.*s/%s", (int)(slash - path), path, names[i]);
        if (n > 0 && (size_t)n < cap && access(out, X_OK) == 0) return 0;
    }
    return -1;
}

/* Replaces the process with `PYTHON -m lofp <cmd> argv[1..]`; returns only on failure. */
static int run_package(const char *cmd, int argc, char **argv)
{
    static char found[PATH_MAX + 16];
    const char *py = getenv("LOFP_PYTHON");
    if (!py || !*py) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) self[n] = '\0';
        if (python_beside(lofp_cli_argv0, found, sizeof found) == 0 || (n > 0 && python_beside(self, found, sizeof found) == 0))
            py = found;
        else
            py = "python3";
    }
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) return cli_error(cmd, "out of memory");
    args[0] = (char *)py;
    args[1] = "-m";
    args[2] = "lofp";
    args[3] = (char *)cmd;
    for (int i = 1; i < argc; i++) args[3 + i] = argv[i];
    args[argc + 3] = NULL;
    fflush(stdout);
    execvp(py, args);
    int e = errno;
    free(args);
    return cli_error(cmd, "cannot run %s (%s): `lofp %s` runs the lofp Python package "
                     "(pip install lofp, or set LOFP_PYTHON to an interpreter that has it; "
                     "docs/EVAL.md)", py, strerror(e), cmd);
}

int lofp_cmd_eval(int argc, char **argv) { return run_package("eval", argc, argv); }

int lofp_cmd_calibrate(int argc, char **argv) { return run_package("calibrate", argc, argv); }

/* ck_stage.c -- a model directory is written into a hidden sibling of OUT and renamed over it at
 * the end, so OUT is either absent or complete (convert and import). */
#include "ck_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* out must not exist or be an empty directory; returns the staging directory beside it. */
lofp_status lofp_ck_stage_dir(const char *out, char **stage, lofp_io_error *err)
{
    if (lofp_ck_exists(out)) {
        if (!lofp_ck_is_dir(out)) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s exists and is not a directory", out);
        char *d = NULL;
        /* empty? */
        int empty = rmdir(out) == 0;
        if (empty) mkdir(out, 0777);
        free(d);
        if (!empty) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s exists and is not empty (lofp never overwrites a model directory)", out);
    }
    size_t n = strlen(out) + 64;
    char *s = malloc(n);
    if (!s) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    char *o = lofp_ck_strdup(out);
    while (strlen(o) > 1 && o[strlen(o) - 1] == '/') o[strlen(o) - 1] = 0;
    const char *slash = strrchr(o, '/');
    snprintf(s, n, "%.*s.%.200s.lofp-tmp-%ld", slash ? (int)(slash - o + 1) : 0, o, slash ? slash + 1 : o, (long)getpid()); /* 200: NAME_MAX */
    free(o);
    lofp_ck_rmtree(s);
    if (lofp_ck_create_tmp(s, 1) != 0) {
        lofp_status st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: cannot create: %s", s, strerror(errno));
        free(s);
        return st;
    }
    *stage = s;
    return LOFP_OK;
}

lofp_status lofp_ck_stage_commit(char *stage, const char *out, lofp_io_error *err)
{
    if (lofp_ck_is_dir(out)) rmdir(out);
    if (rename(stage, out) != 0) {
        lofp_status st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: cannot rename %s: %s", out, stage, strerror(errno));
        lofp_ck_rmtree(stage);
        return st;
    }
    return LOFP_OK;
}

/* ck_util.c -- errors, paths, whole-file and directory helpers, globs and the options' defaults of the
 * checkpoint component (the files every other checkpoint file may call; it calls none of them). */
#include "ck_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

lofp_status lofp_ck_fail(lofp_io_error *err, lofp_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

void lofp_ck_ok(lofp_io_error *err)
{
    if (err) { err->status = LOFP_OK; err->message[0] = 0; }
}

char *lofp_ck_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *lofp_ck_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

int lofp_ck_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int lofp_ck_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int lofp_ckpt_is_gguf(const char *path)
{
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char m[4] = { 0 };
    size_t n = fread(m, 1, 4, f);
    fclose(f);
    return n == 4 && memcmp(m, "GGUF", 4) == 0;
}

int lofp_ck_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- reading regular files only (the rules of docs/CHECKPOINTS.md "Directory reading rules") --- */

const char *lofp_ck_kind_of(unsigned mode)
{
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISDIR(mode)) return "a directory";
    return "not a regular file";
}

int lofp_ck_open_regular(const char *path, lofp_io_error *err)
{
    struct stat sb;
    /* stat first: opening a FIFO for reading blocks until a writer comes, even before fstat */
    if (stat(path, &sb) != 0) {
        lofp_ck_fail(err, errno == ENOENT ? LOFP_ERR_NOT_FOUND : LOFP_ERR_IO, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        lofp_ck_fail(err, LOFP_ERR_IO, "%s is %s: lofp reads only regular files (or links to them)", path,
                lofp_ck_kind_of(sb.st_mode));
        return -1;
    }
    /* O_NONBLOCK: a FIFO swapped in after the stat still cannot block the open */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        lofp_ck_fail(err, errno == ENOENT ? LOFP_ERR_NOT_FOUND : LOFP_ERR_IO, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        lofp_ck_fail(err, LOFP_ERR_IO, "%s is %s: lofp reads only regular files (or links to them)", path,
                lofp_ck_kind_of(sb.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

lofp_status lofp_ck_read_file(const char *path, char **out, size_t *len, lofp_io_error *err)
{
    *out = NULL;
    int fd = lofp_ck_open_regular(path, err);
    if (fd < 0) return err ? err->status : LOFP_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lofp_ck_fail(err, LOFP_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *b = malloc(n + 1);
    if (!b) { close(fd); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path); }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { free(b); close(fd); return lofp_ck_fail(err, LOFP_ERR_IO, "%s: read failed", path); }
        got += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    *out = b;
    if (len) *len = n;
    return LOFP_OK;
}

lofp_status lofp_ck_mkdirs(const char *path, lofp_io_error *err)
{
    char *p = lofp_ck_strdup(path);
    if (!p) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                lofp_status st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
                free(p);
                return st;
            }
            *s = c;
            if (!c) break;
        }
    }
    free(p);
    return LOFP_OK;
}

void lofp_ck_rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) { unlink(path); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = lofp_ck_path(path, e->d_name);
        if (!p) continue;
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) lofp_ck_rmtree(p);
        else unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(path);
}

int lofp_ck_glob_match(const char *pattern, const char *name) { return fnmatch(pattern, name, 0) == 0; }

int lofp_ck_globs_match(const char *const *globs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (globs[i] && lofp_ck_glob_match(globs[i], name)) return 1;
    return 0;
}

/* ---- options --------------------------------------------------------------------------- */

void lofp_ckpt_options_init(lofp_ckpt_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->import_dtype = LOFP_DTYPE_BF16;
}

/* ck_util.c -- errors, buffers, paths and whole-file helpers of the checkpoint component. */
#include "ck_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

lofp_status ck_fail(lofp_io_error *err, lofp_status st, const char *fmt, ...)
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

void ck_ok(lofp_io_error *err)
{
    if (err) { err->status = LOFP_OK; err->message[0] = 0; }
}

char *ck_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *ck_path(const char *dir, const char *name)
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

int ck_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int ck_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ck_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

lofp_status ck_read_file(const char *path, char **out, size_t *len, lofp_io_error *err)
{
    *out = NULL;
    int fd = lofp_ck_open_regular(path, err);
    if (fd < 0) return err ? err->status : LOFP_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ck_fail(err, LOFP_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *b = malloc(n + 1);
    if (!b) { close(fd); return ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path); }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { free(b); close(fd); return ck_fail(err, LOFP_ERR_IO, "%s: read failed", path); }
        got += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    *out = b;
    if (len) *len = n;
    return LOFP_OK;
}

/* A temporary name beside `path`: dir/.name.lofp-tmp-PID-N */
static char *tmp_name(const char *path)
{
    static unsigned counter;
    unsigned c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path + 1) : 0;
    size_t n = strlen(path) + 64;
    char *t = malloc(n);
    if (!t) return NULL;
    snprintf(t, n, "%.*s.%.200s.lofp-tmp-%ld-%u", (int)dl, path, slash ? slash + 1 : path, (long)getpid(), c); /* 200: NAME_MAX */
    return t;
}

int ck_tmp_open(const char *path, char **tmp_out)
{
    char *t = tmp_name(path);
    if (!t) return -1;
    int fd = lofp_ck_create_tmp(t, 0);
    if (fd < 0) { free(t); return -1; }
    *tmp_out = t;
    return fd;
}

int ck_write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

lofp_status ck_commit(int fd, char *tmp, const char *path, lofp_io_error *err)
{
    int ok = fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return ck_fail(err, LOFP_ERR_IO, "%s: %s", path, strerror(e));
    }
    free(tmp);
    return LOFP_OK;
}

lofp_status ck_write_file(const char *path, const void *data, size_t len, lofp_io_error *err)
{
    char *tmp = NULL;
    int fd = ck_tmp_open(path, &tmp);
    if (fd < 0) return ck_fail(err, LOFP_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (!ck_write_all(fd, data, len)) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return ck_fail(err, LOFP_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return ck_commit(fd, tmp, path, err);
}

lofp_status ck_mkdirs(const char *path, lofp_io_error *err)
{
    char *p = ck_strdup(path);
    if (!p) return ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                lofp_status st = ck_fail(err, LOFP_ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
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

void ck_rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) { unlink(path); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = ck_path(path, e->d_name);
        if (!p) continue;
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) ck_rmtree(p);
        else unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(path);
}

lofp_status ck_copy_tree(const char *src, const char *dst, lofp_io_error *err)
{
    struct stat st;
    if (stat(src, &st) != 0) return ck_fail(err, LOFP_ERR_IO, "%s: %s", src, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        lofp_status s = ck_mkdirs(dst, err);
        if (s) return s;
        DIR *d = opendir(src);
        if (!d) return ck_fail(err, LOFP_ERR_IO, "%s: %s", src, strerror(errno));
        struct dirent *e;
        lofp_status r = LOFP_OK;
        while (!r && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *a = ck_path(src, e->d_name), *b = ck_path(dst, e->d_name);
            r = a && b ? ck_copy_tree(a, b, err) : ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            free(a);
            free(b);
        }
        closedir(d);
        return r;
    }
    int in = open(src, O_RDONLY);
    if (in < 0) return ck_fail(err, LOFP_ERR_IO, "%s: %s", src, strerror(errno));
    char *tmp = NULL;
    int fd = ck_tmp_open(dst, &tmp);
    if (fd < 0) { close(in); return ck_fail(err, LOFP_ERR_IO, "%s: cannot create: %s", dst, strerror(errno)); }
    static const size_t CH = 1 << 20;
    char *b = malloc(CH);
    int ok = b != NULL;
    for (;;) {
        if (!ok) break;
        ssize_t r = read(in, b, CH);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { ok = 0; break; }
        if (r == 0) break;
        ok = ck_write_all(fd, b, (size_t)r);
    }
    free(b);
    close(in);
    if (!ok) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return ck_fail(err, LOFP_ERR_IO, "%s: copy to %s failed", src, dst);
    }
    return ck_commit(fd, tmp, dst, err);
}

int ck_glob_match(const char *pattern, const char *name) { return fnmatch(pattern, name, 0) == 0; }

int ck_globs_match(const char *const *globs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (globs[i] && ck_glob_match(globs[i], name)) return 1;
    return 0;
}

int ck_is_float(lofp_io_dtype dt)
{
    return dt == LOFP_IO_F32 || dt == LOFP_IO_F16 || dt == LOFP_IO_BF16 || dt == LOFP_IO_F64;
}

float ck_load(lofp_io_dtype dt, const void *p, size_t i)
{
    const unsigned char *b = p;
    switch (dt) {
    case LOFP_IO_F32: { float f; memcpy(&f, b + 4 * i, 4); return f; }
    case LOFP_IO_F64: { double d; memcpy(&d, b + 8 * i, 8); return (float)d; }
    case LOFP_IO_F16: { uint16_t h; memcpy(&h, b + 2 * i, 2); return lofp_fp16_to_fp32(h); }
    case LOFP_IO_BF16: { uint16_t h; memcpy(&h, b + 2 * i, 2); return lofp_bf16_to_fp32(h); }
    default: return 0.0f;
    }
}

ckj *ckj_read(const char *path, lofp_io_error *err)
{
    char *text;
    size_t len;
    if (ck_read_file(path, &text, &len, err)) return NULL;
    char msg[200];
    ckj *j = ckj_parse(text, len, msg, sizeof msg);
    free(text);
    if (!j) ck_fail(err, LOFP_ERR_FORMAT, "%s: %s", path, msg);
    return j;
}

lofp_status ckj_write(const char *path, const ckj *j, lofp_io_error *err)
{
    lofp_sbuf b = { 0 };
    ckj_dump(&b, j, 2);
    lofp_sbuf_putc(&b, '\n');
    if (b.failed) { lofp_sbuf_free(&b); return ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path); }
    lofp_status s = ck_write_file(path, b.p, b.len, err);
    lofp_sbuf_free(&b);
    return s;
}

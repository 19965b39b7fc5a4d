/* io_atomic.c -- atomic replacement of one file (atomic.h): the temporary file beside the
 * destination, then fsync and rename. Every path after the open is relative to the directory's fd,
 * so no path grows past PATH_MAX and a renamed directory cannot redirect the rename. */
#include "atomic.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef NAME_MAX
#define NAME_MAX 255
#endif

static const char *errstr(int e, char *buf, size_t cap)
{
    if (strerror_r(e, buf, cap) != 0) snprintf(buf, cap, "error %d", e);
    return buf;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* Creates the temporary file: ".<base>.tmp-<48 random bits>", the base cut so that the name fits
 * NAME_MAX. Returns the fd (-1 with errno set). */
static int create_temp(lofp_atomic_file *a)
{
    size_t bl = strlen(a->base);
    const size_t extra = 1 + 5 + 12;            /* "." + ".tmp-" + 12 hex digits */
    long name_max = fpathconf(a->dirfd, _PC_NAME_MAX);
    if (name_max <= 0 || name_max > 4096) name_max = NAME_MAX;
    size_t keep = bl;
    if (keep + extra > (size_t)name_max) keep = (size_t)name_max > extra ? (size_t)name_max - extra : 0;
    a->tmp = malloc(keep + extra + 1);
    if (!a->tmp) { errno = ENOMEM; return -1; }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 16 ^
                    (uint64_t)(uintptr_t)&ts ^ (uint64_t)(uintptr_t)a;
    int fd = -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t r = lofp_splitmix64(&seed);
        snprintf(a->tmp, keep + extra + 1, ".%.*s.tmp-%012llx", (int)keep, a->base,
                 (unsigned long long)(r & 0xFFFFFFFFFFFFull));
        fd = openat(a->dirfd, a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        free(a->tmp);
        a->tmp = NULL;
        errno = e;
    }
    return fd;
}

static void release(lofp_atomic_file *a)
{
    if (a->fd >= 0) close(a->fd);
    if (a->dirfd >= 0) close(a->dirfd);
    free(a->path);
    free(a->base);
    free(a->tmp);
    a->fd = a->dirfd = -1;
    a->path = a->base = a->tmp = NULL;
}

void lofp_atomic_unlink_temp(const lofp_atomic_file *a)
{
    if (a && a->dirfd >= 0 && a->tmp) (void)unlinkat(a->dirfd, a->tmp, 0);
}

void lofp_atomic_abort(lofp_atomic_file *a)
{
    if (!a) return;
    /* a zeroed struct has fd 0 and dirfd 0 but no path: it owns nothing */
    if (!a->path) { a->fd = a->dirfd = -1; return; }
    if (a->fd >= 0) { close(a->fd); a->fd = -1; }
    lofp_atomic_unlink_temp(a);
    release(a);
}

lofp_status lofp_atomic_open(lofp_atomic_file *a, const char *path, lofp_io_error *err)
{
    char e[128];
    lofp_status st;
    a->fd = a->dirfd = -1;
    a->base = a->tmp = NULL;
    if (!path || !*path) { a->path = NULL; return lofp_io_fail(err, LOFP_ERR_INVALID_ARG, NULL, "empty or NULL path"); }
    a->path = dup_str(path);
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    char *dir = malloc(dlen + 2);
    a->base = dup_str(slash ? slash + 1 : path);
    if (!dir || !a->base || !a->path) {
        free(dir);
        st = lofp_io_fail(err, LOFP_ERR_NOMEM, path, "out of memory");
        goto fail;
    }
    if (!*a->base) {
        free(dir);
        st = lofp_io_fail(err, LOFP_ERR_INVALID_ARG, path, "the path names a directory");
        goto fail;
    }
    if (slash) {
        memcpy(dir, path, dlen ? dlen : 1);       /* "/x" -> dir "/" */
        dir[dlen ? dlen : 1] = '\0';
    } else {
        strcpy(dir, ".");
    }
    a->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a->dirfd < 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot create a temporary file in '%s': %s", dir,
                          errstr(errno, e, sizeof e));
        free(dir);
        goto fail;
    }
    int keep_mode = 0;
    mode_t mode = 0;
    struct stat sb;
    if (fstatat(a->dirfd, a->base, &sb, 0) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            free(dir);
            st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot replace a directory");
            goto fail;
        }
        if (S_ISREG(sb.st_mode)) {
            keep_mode = 1;
            mode = sb.st_mode & 07777;
        }
    }
    a->fd = create_temp(a);
    if (a->fd < 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot create a temporary file in '%s': %s", dir,
                          errstr(errno, e, sizeof e));
        free(dir);
        goto fail;
    }
    free(dir);
    if (keep_mode && fchmod(a->fd, mode) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, path, "cannot set the mode of the temporary file: %s",
                          errstr(errno, e, sizeof e));
        goto fail;
    }
    lofp_io_ok(err);
    return LOFP_OK;
fail:
    lofp_atomic_abort(a);
    return st;
}

int lofp_atomic_pwrite(lofp_atomic_file *a, const void *data, size_t n, size_t off)
{
    const uint8_t *b = data;
    while (n) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = pwrite(a->fd, b, chunk, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { errno = ENOSPC; return -1; }
        b += w;
        n -= (size_t)w;
        off += (size_t)w;
    }
    return 0;
}

lofp_status lofp_atomic_write(lofp_atomic_file *a, const void *data, size_t n, lofp_io_error *err)
{
    char e[128];
    const uint8_t *b = data;
    while (n) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(a->fd, b, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return lofp_io_fail(err, LOFP_ERR_IO, a->path, "writing the temporary file failed: %s",
                                errstr(errno, e, sizeof e));
        }
        b += w;
        n -= (size_t)w;
    }
    return LOFP_OK;
}

lofp_status lofp_atomic_commit(lofp_atomic_file *a, unsigned flags, lofp_io_error *err)
{
    char e[128];
    lofp_status st;
    if (!(flags & LOFP_WRITE_NO_SYNC) && fsync(a->fd) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, a->path, "fsync of the temporary file failed: %s",
                          errstr(errno, e, sizeof e));
        goto fail;
    }
    {
        int rc = close(a->fd);
        a->fd = -1;
        if (rc != 0) {
            st = lofp_io_fail(err, LOFP_ERR_IO, a->path, "closing the temporary file failed: %s",
                              errstr(errno, e, sizeof e));
            goto fail;
        }
    }
    if (renameat(a->dirfd, a->tmp, a->dirfd, a->base) != 0) {
        st = lofp_io_fail(err, LOFP_ERR_IO, a->path, "cannot rename the temporary file into place: %s",
                          errstr(errno, e, sizeof e));
        goto fail;
    }
    /* make the rename durable; best effort (some file systems refuse directory fsync) */
    if (!(flags & LOFP_WRITE_NO_SYNC)) (void)fsync(a->dirfd);
    release(a);
    lofp_io_ok(err);
    return LOFP_OK;
fail:
    lofp_atomic_abort(a);
    return st;
}

lofp_status lofp_write_bytes_atomic(const char *path, const void *data, size_t n, lofp_io_error *err)
{
    lofp_atomic_file a;
    lofp_status st = lofp_atomic_open(&a, path, err);
    if (st) return st;
    if ((st = lofp_atomic_write(&a, data, n, err))) { lofp_atomic_abort(&a); return st; }
    return lofp_atomic_commit(&a, 0, err);
}

/* ck_paths.c -- what a conversion may read and where it may write, and the removal of its
 * temporaries when the process is stopped by a signal (docs/CHECKPOINTS.md "Directory reading
 * rules", docs/CLI.md "Signals").
 *
 * Reading: only regular files are read, whether named directly or reached through a symbolic
 * link (Hugging Face's hub cache makes every file of a snapshot a link into ../../blobs/, so a
 * link to a regular file is followed wherever it points). FIFOs, devices and sockets are refused
 * before they are opened (a FIFO would block forever, /dev/zero would fill the disk), and the
 * open itself is non-blocking and checked again with fstat. A link to a directory is refused:
 * copying it would copy whatever tree it names, loops included.
 *
 * Writing: OUT must not be the input or lie inside it, nor contain it (compared by device and
 * inode after resolving links, so hard links and other spellings of a path are caught), and OUT
 * must not be a symbolic link (the atomic rename that publishes OUT would replace the link itself
 * and leave its target untouched).
 *
 * Signals: the directories a conversion writes its temporaries in are remembered here, with the
 * safetensors writers in flight; lofp_ckpt_remove_temps() deletes this process's temporaries in
 * them. */
#define _DEFAULT_SOURCE /* realpath */
#include "ck_internal.h"
#include "io/atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading ------------------------------------------------------------------------------- */

lofp_status lofp_ck_check_input(const char *path, lofp_io_error *err)
{
    if (!path || !*path) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "the input path is empty");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return lofp_ck_fail(err, errno == ENOENT ? LOFP_ERR_NOT_FOUND : LOFP_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
        return lofp_ck_fail(err, LOFP_ERR_IO, "%s is %s: the input must be a model directory or a regular file", path,
                       lofp_ck_kind_of(sb.st_mode));
    return LOFP_OK;
}

/* Copies one regular file's bytes (st_size of them, measured once: a file that grows while it
 * is read is copied as it was) to dst through a temporary beside it. */
static lofp_status copy_file(const char *src, const char *dst, lofp_io_error *err)
{
    int in = lofp_ck_open_regular(src, err);
    if (in < 0) return err ? err->status : LOFP_ERR_IO;
    struct stat sb;
    if (fstat(in, &sb) != 0) { close(in); return lofp_ck_fail(err, LOFP_ERR_IO, "%s: %s", src, strerror(errno)); }
    lofp_atomic_file at;
    lofp_status st = lofp_ck_atomic_open(&at, dst, err);
    if (st) { close(in); return st; }
    static const size_t CH = 1 << 20;
    char *b = malloc(CH);
    if (!b) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", dst);
    size_t left = (size_t)sb.st_size;
    while (!st && left) {
        ssize_t r = read(in, b, left < CH ? left : CH);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: copy to %s failed%s", src, dst, r == 0 ? " (the file shrank while read)" : "");
            break;
        }
        st = lofp_atomic_write(&at, b, (size_t)r, err);
        left -= (size_t)r;
    }
    free(b);
    close(in);
    if (st) { lofp_ck_atomic_abort(&at); return st; }
    return lofp_ck_atomic_commit(&at, err);
}

/* dst NULL: only checks the entry (and a folder's contents) against the rules, copying nothing */
static lofp_status copy_entry(const char *src, const char *dst, int depth, lofp_io_error *err)
{
    struct stat ls;
    if (lstat(src, &ls) != 0) return lofp_ck_fail(err, LOFP_ERR_IO, "%s: %s", src, strerror(errno));
    if (S_ISLNK(ls.st_mode)) {
        struct stat ts;
        char target[PATH_MAX];
        ssize_t tl = readlink(src, target, sizeof target - 1);
        target[tl > 0 ? tl : 0] = 0;
        if (stat(src, &ts) != 0)
            return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s is a symbolic link to '%s', which does not resolve (%s)", src,
                           target, strerror(errno));
        if (S_ISDIR(ts.st_mode))
            return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                           "%s is a symbolic link to the directory '%s': lofp follows links to regular files only "
                           "(a linked tree could hold anything, loops included); copy the folder in or remove the link",
                           src, target);
        if (!S_ISREG(ts.st_mode))
            return lofp_ck_fail(err, LOFP_ERR_IO, "%s is a symbolic link to '%s', which is %s: lofp copies only regular files",
                           src, target, lofp_ck_kind_of(ts.st_mode));
        return dst ? copy_file(src, dst, err) : LOFP_OK;
    }
    if (S_ISDIR(ls.st_mode)) {
        if (depth >= 64) return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: folders nested deeper than 64 levels", src);
        lofp_status s = dst ? lofp_ck_mkdirs(dst, err) : LOFP_OK;
        if (s) return s;
        DIR *d = opendir(src);
        if (!d) return lofp_ck_fail(err, LOFP_ERR_IO, "%s: %s", src, strerror(errno));
        struct dirent *e;
        lofp_status r = LOFP_OK;
        while (!r && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *a = lofp_ck_path(src, e->d_name), *b = dst ? lofp_ck_path(dst, e->d_name) : NULL;
            r = a && (b || !dst) ? copy_entry(a, b, depth + 1, err) : lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            free(a);
            free(b);
        }
        closedir(d);
        return r;
    }
    if (!S_ISREG(ls.st_mode))
        return lofp_ck_fail(err, LOFP_ERR_IO, "%s is %s: lofp copies only regular files (remove it from the model directory)",
                       src, lofp_ck_kind_of(ls.st_mode));
    return dst ? copy_file(src, dst, err) : LOFP_OK;
}

lofp_status lofp_ck_copy_other(const char *src, const char *dst, lofp_io_error *err)
{
    return copy_entry(src, dst, 0, err);
}

/* ---- where a conversion may write ----------------------------------------------------------- */

static int same_node(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* 1 when the resolved path `real` or one of its ancestors is the node `t`. */
static int at_or_under(const char *real, const struct stat *t)
{
    char *p = lofp_ck_strdup(real);
    if (!p) return 0;
    int hit = 0;
    for (;;) {
        struct stat sb;
        if (stat(p, &sb) == 0 && same_node(&sb, t)) { hit = 1; break; }
        char *slash = strrchr(p, '/');
        if (!slash || (slash == p && !p[1])) break;
        if (slash == p) p[1] = 0;
        else *slash = 0;
    }
    free(p);
    return hit;
}

/* The resolved path of `path`'s deepest existing ancestor (itself when it exists), malloc'ed. */
static char *real_existing(const char *path)
{
    char *p = lofp_ck_strdup(path);
    if (!p) return NULL;
    for (;;) {
        char *r = realpath(p, NULL);
        if (r) { free(p); return r; }
        if (errno != ENOENT && errno != ENOTDIR) break;
        if (!strcmp(p, ".") || !strcmp(p, "/")) break; /* nothing above to try */
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/') p[--n] = 0;
        char *slash = strrchr(p, '/');
        if (!slash) { strcpy(p, "."); continue; }
        if (slash == p) { p[1] = 0; continue; }
        *slash = 0;
    }
    free(p);
    return NULL;
}

/* ---- temporaries and signals ---------------------------------------------------------------- */

enum { MAX_SWEEP = 16, MAX_WRITERS = 1024 };
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static char *sweep_dirs[MAX_SWEEP];
static size_t n_sweep, next_sweep;
static lofp_writer *writers[MAX_WRITERS];

static void remember_dir(const char *dir)
{
    /* OUT of --shard may not exist yet (it is created later): kept as spelled */
    char *r = realpath(dir, NULL);
    if (!r) r = lofp_ck_strdup(dir);
    if (!r) return;
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < n_sweep; i++)
        if (!strcmp(sweep_dirs[i], r)) { pthread_mutex_unlock(&reg_mu); free(r); return; }
    /* a long-lived process converting many models: the oldest directory gives way */
    size_t k = n_sweep < MAX_SWEEP ? n_sweep++ : next_sweep++ % MAX_SWEEP;
    free(sweep_dirs[k]);
    sweep_dirs[k] = r;
    pthread_mutex_unlock(&reg_mu);
}

static void remember_out(const char *out)
{
    remember_dir(out);
    char *p = lofp_ck_strdup(out);
    if (!p) return;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    char *slash = strrchr(p, '/');
    if (!slash) remember_dir(".");
    else {
        slash[slash == p] = 0;
        remember_dir(p);
    }
    free(p);
}

/* Writers: a slot is claimed and cleared with atomics; finish and abort run under the read
 * side of fin_lock (any number at once), the sweep under the write side, so the sweep never
 * sees a writer that finish or abort has freed. */
static pthread_rwlock_t fin_lock = PTHREAD_RWLOCK_INITIALIZER;

static void clear_slot(lofp_writer *w)
{
    for (size_t i = 0; i < MAX_WRITERS; i++) {
        lofp_writer *cur = w;
        if (__atomic_compare_exchange_n(&writers[i], &cur, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
    }
}

/* Set once lofp_ckpt_remove_temps() has begun: writers opened or finished from then on remove
 * their temporary themselves and fail, so that a conversion stops instead of publishing. */
static int dying;

lofp_status lofp_ck_open_writer(const char *path, const lofp_tensor_desc *t, size_t n, const lofp_metadata_entry *meta,
                                size_t n_meta, lofp_writer **out, lofp_io_error *err)
{
    /* the temporary appears inside lofp_writer_open: the sweep waits until it is in a slot */
    pthread_rwlock_rdlock(&fin_lock);
    lofp_status st = lofp_writer_open(path, LOFP_FORMAT_SAFETENSORS, t, n, meta, n_meta, 0, out, err);
    if (st == LOFP_OK) {
        if (__atomic_load_n(&dying, __ATOMIC_SEQ_CST)) {
            lofp_writer_abort(*out);
            *out = NULL;
            st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: interrupted by a signal: nothing written", path);
        } else {
            size_t i;
            for (i = 0; i < MAX_WRITERS; i++) {
                lofp_writer *cur = NULL;
                if (__atomic_compare_exchange_n(&writers[i], &cur, *out, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) break;
            }
            if (i == MAX_WRITERS) {
                lofp_writer_abort(*out);
                *out = NULL;
                st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: more than %d shard writers at once", path, MAX_WRITERS);
            }
        }
    }
    pthread_rwlock_unlock(&fin_lock);
    return st;
}

int lofp_ck_create_tmp(const char *path, int dir)
{
    pthread_rwlock_rdlock(&fin_lock);
    int r = dir ? mkdir(path, 0777) : open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (r >= 0 && __atomic_load_n(&dying, __ATOMIC_SEQ_CST)) {
        if (dir) rmdir(path);
        else {
            close(r);
            unlink(path);
        }
        r = -1;
        errno = EINTR;
    }
    pthread_rwlock_unlock(&fin_lock);
    return r;
}

lofp_status lofp_ck_finish_writer(lofp_writer *w, lofp_io_error *err)
{
    pthread_rwlock_rdlock(&fin_lock);
    lofp_status st;
    if (__atomic_load_n(&dying, __ATOMIC_SEQ_CST)) {
        lofp_writer_abort(w);
        st = lofp_ck_fail(err, LOFP_ERR_IO, "interrupted by a signal: nothing written");
    } else
        st = lofp_writer_finish(w, err);
    clear_slot(w);
    pthread_rwlock_unlock(&fin_lock);
    return st;
}

void lofp_ck_abort_writer(lofp_writer *w)
{
    pthread_rwlock_rdlock(&fin_lock);
    lofp_writer_abort(w);
    clear_slot(w);
    pthread_rwlock_unlock(&fin_lock);
}

/* io's atomic files of the checkpoint layer (GGUF outputs, copied files) in flight: their
 * temporaries are named by io without the process id, so the sweep cannot recognise them by name
 * and unlinks them from here instead. Guarded by fin_lock like the writers. */
static lofp_atomic_file *atomics[MAX_WRITERS];

static void clear_atomic(lofp_atomic_file *a)
{
    for (size_t i = 0; i < MAX_WRITERS; i++) {
        lofp_atomic_file *cur = a;
        if (__atomic_compare_exchange_n(&atomics[i], &cur, NULL, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return;
    }
}

lofp_status lofp_ck_atomic_open(lofp_atomic_file *a, const char *path, lofp_io_error *err)
{
    pthread_rwlock_rdlock(&fin_lock);
    lofp_status st = lofp_atomic_open(a, path, err);
    if (st == LOFP_OK) {
        size_t i = MAX_WRITERS;
        if (!__atomic_load_n(&dying, __ATOMIC_SEQ_CST))
            for (i = 0; i < MAX_WRITERS; i++) {
                lofp_atomic_file *cur = NULL;
                if (__atomic_compare_exchange_n(&atomics[i], &cur, a, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) break;
            }
        if (i == MAX_WRITERS) {
            lofp_atomic_abort(a);
            st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: %s", path,
                         __atomic_load_n(&dying, __ATOMIC_SEQ_CST) ? "interrupted by a signal: nothing written"
                                                                   : "too many files being written at once");
        }
    }
    pthread_rwlock_unlock(&fin_lock);
    return st;
}

lofp_status lofp_ck_atomic_commit(lofp_atomic_file *a, lofp_io_error *err)
{
    pthread_rwlock_rdlock(&fin_lock);
    clear_atomic(a);
    lofp_status st;
    if (__atomic_load_n(&dying, __ATOMIC_SEQ_CST)) {
        lofp_atomic_abort(a);
        st = lofp_ck_fail(err, LOFP_ERR_IO, "interrupted by a signal: nothing written");
    } else
        st = lofp_atomic_commit(a, 0, err);
    pthread_rwlock_unlock(&fin_lock);
    return st;
}

void lofp_ck_atomic_abort(lofp_atomic_file *a)
{
    pthread_rwlock_rdlock(&fin_lock);
    clear_atomic(a);
    lofp_atomic_abort(a);
    pthread_rwlock_unlock(&fin_lock);
}

/* 1 when `name` is one of this process's staging directories: ".X.lofp-tmp-PID" (files are
 * io's atomic temporaries, unlinked through the writers and atomics registered above). */
static int ours(const char *name, const char *pid)
{
    if (name[0] != '.') return 0;
    for (const char *s = strstr(name, ".lofp-tmp-"); s; s = strstr(s + 1, ".lofp-tmp-")) {
        const char *p = s + 10;
        size_t n = strlen(pid);
        if (!strncmp(p, pid, n) && (p[n] == 0 || p[n] == '-')) return 1;
    }
    return 0;
}

void lofp_ckpt_remove_temps(void)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    __atomic_store_n(&dying, 1, __ATOMIC_SEQ_CST);
    pthread_rwlock_wrlock(&fin_lock);
    for (size_t i = 0; i < MAX_WRITERS; i++) {
        lofp_writer *w = __atomic_load_n(&writers[i], __ATOMIC_SEQ_CST);
        if (w) lofp_writer_unlink_temp(w);
        lofp_atomic_file *a = __atomic_load_n(&atomics[i], __ATOMIC_SEQ_CST);
        if (a) lofp_atomic_unlink_temp(a);
    }
    /* still under the write side: no temporary is being created meanwhile (lofp_ck_create_tmp,
     * lofp_ck_open_writer), and those created later see `dying` and remove themselves */
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < n_sweep; i++) {
        DIR *d = opendir(sweep_dirs[i]);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!ours(e->d_name, pid)) continue;
            char *p = lofp_ck_path(sweep_dirs[i], e->d_name);
            if (!p) continue;
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
                /* out of the writers' way first: what they create under the old name fails */
                char *q = lofp_ck_path(sweep_dirs[i], ".lofp-removing");
                size_t ql = q ? strlen(q) + 40 : 0;
                char *r = q ? malloc(ql) : NULL;
                if (r) {
                    snprintf(r, ql, "%s-%s", q, pid);
                    if (rename(p, r) == 0) lofp_ck_rmtree(r);
                    else lofp_ck_rmtree(p);
                } else lofp_ck_rmtree(p);
                free(q);
                free(r);
            } else
                unlink(p);
            free(p);
        }
        closedir(d);
    }
    pthread_mutex_unlock(&reg_mu);
    pthread_rwlock_unlock(&fin_lock);
}

/* ---- the checks before a conversion or an import ------------------------------------------- */

lofp_status lofp_ck_preflight(const char *in, const char *out, const lofp_ckpt_options *o, int import,
                              lofp_io_error *err)
{
    if (!out || !*out)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "the output path is empty (give the directory%s to write)",
                       import ? "" : " or .gguf file");
    lofp_status st = lofp_ck_check_input(in, err);
    if (st) return st;
    if (o) {
        if (o->jobs > LOFP_CKPT_MAX_JOBS)
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "jobs %u is out of range (1..%d)", o->jobs, LOFP_CKPT_MAX_JOBS);
        if (o->threads > LOFP_CKPT_MAX_THREADS)
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "threads %u is out of range (1..%d)", o->threads,
                           LOFP_CKPT_MAX_THREADS);
        if (!import && o->shard_count && o->shard_index >= o->shard_count)
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "--shard %u/%u: the slice must be 1..%u", o->shard_index + 1,
                           o->shard_count, o->shard_count);
        if (!import && o->shard_count && o->merge_index)
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                           "--shard and --merge-index are separate steps: convert every slice with --shard I/N, then "
                           "run --merge-index once");
        if (!import && o->to == LOFP_CKPT_GGUF && (o->shard_count || o->merge_index))
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                           "convert --to gguf: %s slices the shards of a safetensors directory; a GGUF is written whole",
                           o->shard_count ? "--shard" : "--merge-index");
    }
    struct stat si, so, lo;
    if (stat(in, &si) != 0) return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: %s", in, strerror(errno));
    char *rin = realpath(in, NULL);
    if (!rin) return lofp_ck_fail(err, LOFP_ERR_IO, "%s: %s", in, strerror(errno));
    /* "link/" would make lstat follow the link: the last component without its slashes */
    char *bare = lofp_ck_strdup(out);
    if (!bare) { free(rin); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    for (size_t n = strlen(bare); n > 1 && bare[n - 1] == '/';) bare[--n] = 0;
    int is_link = lstat(bare, &lo) == 0 && S_ISLNK(lo.st_mode);
    free(bare);
    if (is_link) {
        char *t = realpath(out, NULL);
        st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                     "the output %s is a symbolic link%s%s: lofp publishes OUT by renaming a finished temporary over "
                     "it, which would replace the link, not its target; give the target's path or remove the link",
                     out, t ? " to " : "", t ? t : "");
        free(t);
        free(rin);
        return st;
    }
    char *rout = real_existing(out);
    if (!rout) { free(rin); return lofp_ck_fail(err, LOFP_ERR_IO, "%s: cannot resolve the path: %s", out, strerror(errno)); }
    int out_exists = stat(out, &so) == 0;
    if (out_exists && same_node(&si, &so))
        st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                     "the output %s is the input %s (the same %s, also through a hard link or another spelling of "
                     "the path); lofp never overwrites its input: write to another path",
                     out, in, S_ISDIR(si.st_mode) ? "directory" : "file");
    else if (S_ISDIR(si.st_mode) && at_or_under(rout, &si))
        st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                     "the output %s lies inside the input directory %s (%s); write outside the model directory",
                     out, in, rin);
    else if (out_exists && S_ISDIR(so.st_mode) && at_or_under(rin, &so))
        st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                     "the input %s lies inside the output directory %s; the output would overwrite or mix with it: "
                     "write to another path", in, out);
    free(rin);
    free(rout);
    if (st) return st;
    remember_out(out);
    return LOFP_OK;
}

static int has_suffix_tensor(const ck_model *m, const char *suffix)
{
    for (size_t i = 0; i < m->n_t; i++)
        if (lofp_ck_ends_with(m->t[i].name, suffix)) return 1;
    return 0;
}

/* What config.json / hf_quant_config.json claim against what the shards hold: a quantization
 * method lofp does not read (its packed tensors would pass for dense weights, and a conversion
 * would write a config that contradicts them), or a method lofp reads with no quantized tensor
 * at all (a stale config over dense weights: which one is right is the user's call). */
static lofp_status check_claims(const ck_model *m, lofp_io_error *err)
{
    const ckj *qc = lofp_ckj_get(m->config, "quantization_config");
    const ckj *hq = lofp_ckj_get(m->hf_quant, "quantization");
    if (!qc && !hq) return LOFP_OK;
    const char *qm = lofp_ckj_str(lofp_ckj_get(qc, "quant_method"));
    int known = hq || (qm && (!strncmp(qm, "modelopt", 8) || !strcmp(qm, "compressed-tensors") || !strcmp(qm, "mxfp4")));
    const char *where = hq ? "hf_quant_config.json" : "config.json";
    if (!known)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                       "%s: config.json's quantization_config says quant_method '%s', a format lofp does not read "
                       "(lofp reads dense models, modelopt, compressed-tensors, gpt-oss mxfp4 and lofp files): its "
                       "tensors would be taken for dense weights. If the weights are dense, remove quantization_config",
                       m->path, qm ? qm : "(none)");
    if (has_suffix_tensor(m, ".weight_packed") || has_suffix_tensor(m, ".weight_scale") ||
        has_suffix_tensor(m, "_blocks"))
        return LOFP_OK;
    return lofp_ck_fail(err, LOFP_ERR_FORMAT,
                   "%s: %s says the model is quantized (%s%s) but no shard holds a quantized tensor (no *.weight_packed, "
                   "*.weight_scale or *_blocks): the config and the weights disagree. If the weights are dense, remove "
                   "quantization_config from config.json%s and run again",
                   m->path, where, hq ? "a \"quantization\" section" : "quant_method ", hq ? "" : qm,
                   m->hf_quant ? " and hf_quant_config.json" : "");
}

lofp_status lofp_ck_model_checks(const ck_model *m, const lofp_ckpt_options *o, int import, lofp_io_error *err)
{
    lofp_status cs = check_claims(m, err);
    if (cs) return cs;
    if (!import && o && o->shard_count && o->shard_count > m->n_shards)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                       "--shard %u/%u: %s has %zu shard file(s), so N must be at most %zu (every slice holds at least "
                       "one shard)", o->shard_index + 1, o->shard_count, m->path, m->n_shards, m->n_shards);
    /* the files to carry over, checked before hours of converting rather than at the end */
    for (size_t i = 0; i < m->n_others; i++) {
        char *p = lofp_ck_path(m->dir, m->others[i]);
        lofp_status st = p ? copy_entry(p, NULL, 0, err) : lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        free(p);
        if (st) return st;
    }
    if (o && o->note)
        for (size_t i = 0; i < m->n_unlisted; i++) {
            char line[1024];
            snprintf(line, sizeof line,
                     "warning: %s/%s is not listed in %s: transformers and llama.cpp read only the shards the index "
                     "lists, so it is copied unchanged, not %s",
                     m->dir, m->unlisted[i], m->index_name ? m->index_name : "the index", import ? "imported" : "converted");
            o->note(o->ctx, line);
        }
    return LOFP_OK;
}

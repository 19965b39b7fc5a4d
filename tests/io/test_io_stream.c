/* test_io_stream.c -- the streaming file layer: the row reader (chunks cover the tensor, the
 * file's bytes handed out as they are, misaligned tensors copied aligned, the resident set stays
 * near a chunk) and the writer (byte-identical to lofp_file_write whatever order the data come in,
 * incomplete or overrun tensors refused, abort leaves nothing, the replaced file's mode kept,
 * paths near PATH_MAX). */
#define _GNU_SOURCE
#include "test_util.h"

#include "lofp/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[512];

static void rm_rf(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                size_t n = strlen(path) + strlen(e->d_name) + 2;
                char *sub = malloc(n);
                snprintf(sub, n, "%s/%s", path, e->d_name);
                rm_rf(sub);
                free(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

/* Number of entries in a directory other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131u + seed * 17u + (i >> 8));
}

/* ---- writer --------------------------------------------------------------------------------- */

static void test_writer_matches_file_write(void)
{
    /* tensors of several dtypes; canonical layout interleaves them differently from this order */
    size_t sh_a[2] = {7, 5}, sh_b[1] = {13}, sh_c[2] = {3, 8}, sh_d[1] = {0}, sh_e[3] = {2, 3, 4};
    uint8_t a[7 * 5 * 4], b[13], c[3 * 8 / 2], e[2 * 3 * 4 * 2];
    fill(a, sizeof a, 1); fill(b, sizeof b, 2); fill(c, sizeof c, 3); fill(e, sizeof e, 5);
    lofp_tensor_desc t[5] = {
        {"w.codes", LOFP_DTYPE_U8, 1, sh_b, b, sizeof b},
        {"w", LOFP_DTYPE_F32, 2, sh_a, a, sizeof a},
        {"z.f4", LOFP_DTYPE_F4, 2, sh_c, c, sizeof c},
        {"empty", LOFP_DTYPE_F16, 1, sh_d, NULL, 0},
        {"h", LOFP_DTYPE_BF16, 3, sh_e, e, sizeof e},
    };
    lofp_metadata_entry meta[2] = {{"k2", "v2"}, {"k1", "v1"}};
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/whole.safetensors", root);
    snprintf(p2, sizeof p2, "%s/stream.safetensors", root);
    lofp_io_error err;
    CHECK_OK(lofp_file_write(p1, LOFP_FORMAT_AUTO, t, 5, meta, 2, &err));

    /* data pointers are ignored by the writer */
    lofp_tensor_desc nodata[5];
    memcpy(nodata, t, sizeof t);
    for (int i = 0; i < 5; i++) nodata[i].data = NULL;
    lofp_writer *w = NULL;
    CHECK_OK(lofp_writer_open(p2, LOFP_FORMAT_AUTO, nodata, 5, meta, 2, LOFP_WRITE_NO_SYNC, &w, &err));
    /* nothing at the destination until finish */
    CHECK(access(p2, F_OK) != 0);
    /* interleaved pieces: 3 bytes at a time, round robin, in reverse tensor order */
    size_t done[5] = {0};
    for (int more = 1; more;) {
        more = 0;
        for (int i = 4; i >= 0; i--) {
            size_t left = t[i].nbytes - done[i], n = left < 3 ? left : 3;
            if (!n) continue;
            CHECK_OK(lofp_writer_append(w, (size_t)i, (const uint8_t *)t[i].data + done[i], n, &err));
            done[i] += n;
            more = 1;
        }
    }
    CHECK_OK(lofp_writer_finish(w, &err));
    size_t l1, l2;
    uint8_t *b1 = slurp(p1, &l1), *b2 = slurp(p2, &l2);
    CHECK(b1 && b2 && l1 == l2 && memcmp(b1, b2, l1) == 0);
    free(b1);
    free(b2);

    /* .npy through the writer, in two pieces */
    char p3[600], p4[600];
    snprintf(p3, sizeof p3, "%s/whole.npy", root);
    snprintf(p4, sizeof p4, "%s/stream.npy", root);
    CHECK_OK(lofp_file_write(p3, LOFP_FORMAT_AUTO, &t[1], 1, NULL, 0, &err));
    CHECK_OK(lofp_writer_open(p4, LOFP_FORMAT_AUTO, &nodata[1], 1, NULL, 0, 0, &w, &err));
    CHECK_OK(lofp_writer_append(w, 0, a, 20, &err));
    CHECK_OK(lofp_writer_append(w, 0, a + 20, sizeof a - 20, &err));
    CHECK_OK(lofp_writer_finish(w, &err));
    b1 = slurp(p3, &l1);
    b2 = slurp(p4, &l2);
    CHECK(b1 && b2 && l1 == l2 && memcmp(b1, b2, l1) == 0);
    free(b1);
    free(b2);
}

static void test_writer_errors(void)
{
    char dir[600], p[700];
    snprintf(dir, sizeof dir, "%s/errs", root);
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/out.safetensors", dir);
    size_t sh[1] = {16};
    uint8_t d[16] = {0};
    lofp_tensor_desc t[2] = {{"a", LOFP_DTYPE_U8, 1, sh, NULL, 16}, {"b", LOFP_DTYPE_U8, 1, sh, NULL, 16}};
    lofp_io_error err;
    lofp_writer *w;

    /* an incomplete tensor: finish refuses, names it, and leaves nothing behind */
    CHECK_OK(lofp_writer_open(p, LOFP_FORMAT_AUTO, t, 2, NULL, 0, 0, &w, &err));
    CHECK_OK(lofp_writer_append(w, 0, d, 16, &err));
    CHECK_OK(lofp_writer_append(w, 1, d, 10, &err));
    CHECK(lofp_writer_finish(w, &err) == LOFP_ERR_INVALID_ARG);
    CHECKF(strstr(err.message, "'b'") && strstr(err.message, "10 of its 16"), "%s", err.message);
    CHECK(dir_entries(dir) == 0);

    /* overrunning a tensor is an error; the writer is then unusable */
    CHECK_OK(lofp_writer_open(p, LOFP_FORMAT_AUTO, t, 2, NULL, 0, 0, &w, &err));
    CHECK_OK(lofp_writer_append(w, 0, d, 16, &err));
    CHECK(lofp_writer_append(w, 0, d, 1, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "overrun") != NULL);
    CHECK(lofp_writer_append(w, 2, d, 1, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_writer_append(w, 1, d, 16, &err) != LOFP_OK);   /* unusable after an error */
    CHECK(lofp_writer_finish(w, &err) != LOFP_OK);
    CHECK(dir_entries(dir) == 0);

    /* abort keeps an existing destination as it was */
    FILE *f = fopen(p, "wb");
    fputs("old", f);
    fclose(f);
    CHECK_OK(lofp_writer_open(p, LOFP_FORMAT_AUTO, t, 2, NULL, 0, 0, &w, &err));
    CHECK(dir_entries(dir) == 2);      /* the output and the temporary file */
    lofp_writer_unlink_temp(w);        /* what a signal handler does */
    CHECK(dir_entries(dir) == 1);
    lofp_writer_abort(w);
    size_t l;
    uint8_t *b = slurp(p, &l);
    CHECK(b && l == 3 && memcmp(b, "old", 3) == 0);
    free(b);

    /* validation happens before anything is created */
    lofp_tensor_desc bad = {"a", LOFP_DTYPE_U8, 1, sh, NULL, 15};
    CHECK(lofp_writer_open(p, LOFP_FORMAT_AUTO, &bad, 1, NULL, 0, 0, &w, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(w == NULL && dir_entries(dir) == 1);
    CHECK(lofp_writer_open(dir, LOFP_FORMAT_SAFETENSORS, t, 2, NULL, 0, 0, &w, &err) == LOFP_ERR_IO);
    CHECK(strstr(err.message, "directory") != NULL);
    /* lofp_file_write still insists on data */
    CHECK(lofp_file_write(p, LOFP_FORMAT_AUTO, t, 2, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "NULL data") != NULL);
}

/* Replacing a file keeps its permission bits (the temporary file is not left at the umask's). */
static void test_writer_keeps_mode(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/mode.safetensors", root);
    size_t sh[1] = {4};
    uint8_t d[4] = {1, 2, 3, 4};
    lofp_tensor_desc t = {"a", LOFP_DTYPE_U8, 1, sh, d, 4};
    lofp_io_error err;
    CHECK_OK(lofp_file_write(p, LOFP_FORMAT_AUTO, &t, 1, NULL, 0, &err));
    CHECK(chmod(p, 0640) == 0);
    CHECK_OK(lofp_file_write(p, LOFP_FORMAT_AUTO, &t, 1, NULL, 0, &err));
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 07777) == 0640);
    CHECK(chmod(p, 0604) == 0);
    lofp_writer *w;
    CHECK_OK(lofp_writer_open(p, LOFP_FORMAT_AUTO, &t, 1, NULL, 0, 0, &w, &err));
    CHECK_OK(lofp_writer_append(w, 0, d, 4, &err));
    CHECK_OK(lofp_writer_finish(w, &err));
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 07777) == 0604);
}

/* An output path close to PATH_MAX with a long last component: the temporary name must
 * not add length past what the directory allows. */
static void test_writer_long_path(void)
{
    char *path = malloc(PATH_MAX + 64);
    size_t o = (size_t)snprintf(path, PATH_MAX, "%s", root);
    char comp[201];
    memset(comp, 'd', 200);
    comp[200] = 0;
    /* directories of 200 bytes until a 250-byte name brings the path to PATH_MAX - 10 */
    while (o + 1 + 200 + 1 + 250 < PATH_MAX - 10) {
        o += (size_t)snprintf(path + o, PATH_MAX - o, "/%s", comp);
        if (mkdir(path, 0755) != 0 && errno != EEXIST) { CHECKF(0, "mkdir: %s", strerror(errno)); break; }
    }
    size_t name_len = PATH_MAX - 10 - o - 1;        /* the whole path is PATH_MAX - 10 bytes */
    if (name_len > 250) name_len = 250;
    path[o++] = '/';
    memset(path + o, 'n', name_len - 12);
    memcpy(path + o + name_len - 12, ".safetensors", 13);
    size_t sh[1] = {3};
    uint8_t d[3] = {7, 8, 9};
    lofp_tensor_desc t = {"x", LOFP_DTYPE_U8, 1, sh, d, 3};
    lofp_io_error err;
    CHECKF(lofp_file_write(path, LOFP_FORMAT_AUTO, &t, 1, NULL, 0, &err) == LOFP_OK, "%s", err.message);
    CHECKF(lofp_file_write(path, LOFP_FORMAT_AUTO, &t, 1, NULL, 0, &err) == LOFP_OK, "%s", err.message);
    lofp_file *f = NULL;
    CHECKF(lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err) == LOFP_OK, "%s", err.message);
    CHECK(f && lofp_file_count(f) == 1);
    lofp_file_close(f);
    *strrchr(path, '/') = 0;
    CHECK(dir_entries(path) == 1);     /* no temporary file left behind */
    free(path);
}

/* ---- reader --------------------------------------------------------------------------------- */

static void test_reader_chunks(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/r.safetensors", root);
    size_t sh_a[3] = {5, 7, 6}, sh_s[1] = {0}, sh_f[2] = {9, 10}, sh_z[2] = {4, 0}, sh_o[2] = {3, 5};
    static uint8_t a[5 * 7 * 6 * 2], f4[9 * 10 / 2];
    float scalar = 3.5f;
    fill(a, sizeof a, 7);
    fill(f4, sizeof f4, 8);
    uint8_t odd[15] = {0};
    lofp_tensor_desc t[5] = {
        {"a", LOFP_DTYPE_BF16, 3, sh_a, a, sizeof a},
        {"s", LOFP_DTYPE_F32, 0, sh_s, &scalar, 4},
        {"f4", LOFP_DTYPE_F4, 2, sh_f, f4, sizeof f4},
        {"z", LOFP_DTYPE_F32, 2, sh_z, NULL, 0},
        {"odd", LOFP_DTYPE_U8, 2, sh_o, odd, 15},
    };
    lofp_io_error err;
    CHECK_OK(lofp_file_write(p, LOFP_FORMAT_AUTO, t, 5, NULL, 0, &err));
    lofp_file *f;
    CHECK_OK(lofp_file_open(p, LOFP_FORMAT_AUTO, &f, &err));

    for (size_t cr = 0; cr <= 36; cr += 4) {
        lofp_row_reader *r;
        CHECK_OK(lofp_row_reader_open(f, lofp_file_find(f, "a"), cr, &r, &err));
        size_t want_cr = cr ? cr : 35;
        if (want_cr > 35) want_cr = 35;
        CHECK_EQ_U(lofp_row_reader_chunk_rows(r), want_cr);
        for (int pass = 0; pass < 2; pass++) {
            size_t next = 0;
            lofp_row_chunk c;
            for (;;) {
                CHECK_OK(lofp_row_reader_next(r, &c, &err));
                if (!c.rows) break;
                CHECK_EQ_U(c.row0, next);
                CHECK_EQ_U(c.row_bytes, 12);
                CHECK(c.rows <= want_cr);
                CHECK((uintptr_t)c.data % 2 == 0);
                CHECK(memcmp(c.data, a + next * 12, c.rows * 12) == 0);
                next += c.rows;
            }
            CHECK_EQ_U(next, 35);
            lofp_row_reader_rewind(r);
        }
        lofp_row_reader_close(r);
    }
    /* a scalar is one row of one element; a shape with a 0 has no rows */
    lofp_row_reader *r;
    lofp_row_chunk c;
    CHECK_OK(lofp_row_reader_open(f, lofp_file_find(f, "s"), 0, &r, &err));
    CHECK_OK(lofp_row_reader_next(r, &c, &err));
    CHECK(c.rows == 1 && c.row_bytes == 4 && memcmp(c.data, &scalar, 4) == 0);
    CHECK_OK(lofp_row_reader_next(r, &c, &err));
    CHECK(c.rows == 0);
    lofp_row_reader_close(r);
    CHECK_OK(lofp_row_reader_open(f, lofp_file_find(f, "z"), 0, &r, &err));
    CHECK_OK(lofp_row_reader_next(r, &c, &err));
    CHECK(c.rows == 0);
    lofp_row_reader_close(r);
    /* F4 rows of 10 elements are 5 bytes */
    CHECK_OK(lofp_row_reader_open(f, lofp_file_find(f, "f4"), 4, &r, &err));
    CHECK_OK(lofp_row_reader_next(r, &c, &err));
    CHECK(c.rows == 4 && c.row_bytes == 5 && memcmp(c.data, f4, 20) == 0);
    lofp_row_reader_close(r);
    /* a tensor of another file is refused */
    lofp_file *g;
    CHECK_OK(lofp_file_open(p, LOFP_FORMAT_AUTO, &g, &err));
    CHECK(lofp_row_reader_open(f, lofp_file_tensor(g, 0), 0, &r, &err) == LOFP_ERR_INVALID_ARG && !r);
    lofp_file_close(g);
    lofp_file_close(f);

    /* F4 rows of odd length do not fill whole bytes */
    {
        static const char hdr[] = "{\"q\":{\"dtype\":\"F4\",\"shape\":[2,3],\"data_offsets\":[0,3]}}";
        uint8_t buf[8 + 64 + 3];
        size_t hl = strlen(hdr), hp = (hl + 7) / 8 * 8;
        memset(buf, ' ', sizeof buf);
        for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hp >> (8 * i));
        memcpy(buf + 8, hdr, hl);
        CHECK_OK(lofp_file_open_memory(buf, 8 + hp + 3, LOFP_FORMAT_SAFETENSORS, "odd.safetensors", &g, &err));
        CHECK(lofp_row_reader_open(g, lofp_file_tensor(g, 0), 0, &r, &err) == LOFP_ERR_SHAPE);
        CHECKF(strstr(err.message, "'q'") != NULL, "%s", err.message);
        lofp_file_close(g);
    }
}

/* A file from another writer may put an F32 tensor at an odd offset: chunks come aligned. */
static void test_reader_misaligned(void)
{
    static const char hdr[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                              "\"b\":{\"dtype\":\"F32\",\"shape\":[4,3],\"data_offsets\":[1,49]}}";
    size_t hl = strlen(hdr), hp = (hl + 7) / 8 * 8;
    uint8_t *buf = malloc(8 + hp + 49);
    memset(buf, ' ', 8 + hp);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hp >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)i * 1.25f - 3.0f;
    buf[8 + hp] = 0x55;
    memcpy(buf + 8 + hp + 1, v, 48);
    char p[600];
    snprintf(p, sizeof p, "%s/misaligned.safetensors", root);
    FILE *fp = fopen(p, "wb");
    fwrite(buf, 1, 8 + hp + 49, fp);
    fclose(fp);
    free(buf);
    lofp_io_error err;
    lofp_file *f;
    CHECK_OK(lofp_file_open(p, LOFP_FORMAT_AUTO, &f, &err));
    const lofp_tensor_info *t = lofp_file_find(f, "b");
    CHECK(t && (uintptr_t)t->data % 4 != 0);
    lofp_row_reader *r;
    CHECK_OK(lofp_row_reader_open(f, t, 3, &r, &err));
    lofp_row_chunk c;
    size_t next = 0;
    for (;;) {
        CHECK_OK(lofp_row_reader_next(r, &c, &err));
        if (!c.rows) break;
        CHECK((uintptr_t)c.data % 4 == 0);
        CHECK(memcmp(c.data, v + next * 3, c.rows * 12) == 0);
        next += c.rows;
    }
    CHECK(next == 4);
    lofp_row_reader_close(r);
    lofp_file_close(f);
}

static size_t rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = (size_t)strtoull(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib;
}

/* The resident set does not grow with the tensor: reading 32 MiB in 1 MiB chunks keeps it within
 * a few MiB (the pages of consumed chunks are released). */
static void test_reader_bounded_rss(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/big.npy", root);
    const size_t rows = 8192, k = 1024;   /* 32 MiB of F32 */
    size_t sh[2] = {rows, k};
    lofp_io_error err;
    lofp_writer *w;
    lofp_tensor_desc t = {NULL, LOFP_DTYPE_F32, 2, sh, NULL, rows * k * 4};
    CHECK_OK(lofp_writer_open(p, LOFP_FORMAT_AUTO, &t, 1, NULL, 0, LOFP_WRITE_NO_SYNC, &w, &err));
    float *row = malloc(k * 4);
    for (size_t r = 0; r < rows && w; r++) {
        for (size_t j = 0; j < k; j++) row[j] = (float)(r * k + j);
        CHECK_OK(lofp_writer_append(w, 0, row, k * 4, &err));
    }
    free(row);
    CHECK_OK(lofp_writer_finish(w, &err));
    lofp_file *f;
    CHECK_OK(lofp_file_open(p, LOFP_FORMAT_AUTO, &f, &err));
    lofp_row_reader *r;
    CHECK_OK(lofp_row_reader_open(f, lofp_file_tensor(f, 0), 256, &r, &err));
    size_t base = rss_kib(), peak = base, next = 0;
    int ok = 1;
    lofp_row_chunk c;
    for (;;) {
        CHECK_OK(lofp_row_reader_next(r, &c, &err));
        if (!c.rows) break;
        const float *x = c.data;
        double sum = 0;
        for (size_t i = 0; i < c.rows * k; i++) sum += x[i];
        /* rows r0..r0+n-1 of values r*k+j: sum known in closed form */
        double n = (double)(c.rows * k), first = (double)(c.row0 * k);
        if (sum != n * first + n * (n - 1) / 2) ok = 0;
        next += c.rows;
        size_t now = rss_kib();
        if (now > peak) peak = now;
    }
    CHECK(ok && next == rows);
    CHECKF(peak - base < 8 * 1024, "RSS grew by %zu KiB reading a 32 MiB tensor in 1 MiB chunks",
           peak - base);
    lofp_row_reader_close(r);
    lofp_file_close(f);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/lofp_test_io_stream_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(root)) { perror("mkdtemp"); return 2; }
    test_writer_matches_file_write();
    test_writer_errors();
    test_writer_keeps_mode();
    test_writer_long_path();
    test_reader_chunks();
    test_reader_misaligned();
    test_reader_bounded_rss();
    rm_rf(root);
    return tu_finish("test_io_stream");
}

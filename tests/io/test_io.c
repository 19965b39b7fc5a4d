/* test_io.c -- the file layer: round trips of every dtype through .npy and .safetensors, a corpus
 * of malformed files generated here (each a clean error with the right status), the atomic write,
 * and the JSON parser.
 *
 * Interop mode (driven by tests/io/script_io_interop.sh):
 *   LOFP_IO_INTEROP_WRITE=DIR  write lofp files and DIR/manifest.txt for the Python side to check;
 *   LOFP_IO_INTEROP_READ=DIR   read the files the Python side wrote (DIR/manifest.txt) and check
 *                              every value against the float64 expectations it saved. */
#include "test_util.h"

#include "io/io_internal.h"
#include "lofp/io.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static uint8_t pat_byte(unsigned seed, size_t j, lofp_dtype dt)
{
    if (dt == LOFP_DTYPE_BOOL) return (uint8_t)((j + seed) & 1);
    return (uint8_t)(j * 29u + seed * 71u + 5u);
}

static void expect_error(const uint8_t *buf, size_t len, lofp_file_format fmt, lofp_status status,
                         const char *want, const char *label);

static void fill_pattern(uint8_t *p, size_t n, unsigned seed, lofp_dtype dt)
{
    for (size_t j = 0; j < n; j++) p[j] = pat_byte(seed, j, dt);
}

static char tmp_root[512];

static void make_tmp_root(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/lofp_test_io_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp_root)) { perror("mkdtemp"); exit(2); }
}

static void rm_rf(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_rf(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    *len = n > 0 ? (size_t)n : 0;
    return b;
}

static int write_raw(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static const void *mem_find(const void *hay, size_t n, const void *needle, size_t k)
{
    const uint8_t *h = hay;
    if (k == 0) return hay;
    for (size_t i = 0; i + k <= n; i++)
        if (h[i] == *(const uint8_t *)needle && memcmp(h + i, needle, k) == 0) return h + i;
    return NULL;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static const char *sname(lofp_status s)
{
    static const char *names[] = {"ok", "invalid_arg", "shape", "nonfinite", "size_overflow",
                                  "unsupported", "buffer_too_small", "nomem", "io", "format",
                                  "not_found", "mismatch"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* ---- every dtype -------------------------------------------------------------------------- */

typedef struct {
    lofp_dtype dt;
    size_t ndim;
    size_t shape[4];
} tcase;

/* A shape per dtype (sub-byte types need whole bytes). */
static const tcase cases[] = {
    {LOFP_DTYPE_BOOL, 2, {3, 5}},      {LOFP_DTYPE_U8, 2, {4, 7}},       {LOFP_DTYPE_I8, 1, {9}},
    {LOFP_DTYPE_U16, 2, {2, 3}},       {LOFP_DTYPE_I16, 3, {2, 1, 3}},   {LOFP_DTYPE_U32, 2, {3, 4}},
    {LOFP_DTYPE_I32, 1, {5}},          {LOFP_DTYPE_U64, 2, {2, 2}},      {LOFP_DTYPE_I64, 0, {0}},
    {LOFP_DTYPE_F16, 2, {3, 3}},       {LOFP_DTYPE_BF16, 2, {4, 8}},     {LOFP_DTYPE_F32, 2, {6, 5}},
    {LOFP_DTYPE_F64, 3, {2, 2, 2}},    {LOFP_DTYPE_F8_E4M3, 2, {4, 32}}, {LOFP_DTYPE_F8_E5M2, 1, {7}},
    {LOFP_DTYPE_F8_E8M0, 2, {4, 1}},   {LOFP_DTYPE_F4, 2, {4, 32}},      {LOFP_DTYPE_F6_E2M3, 2, {2, 4}},
    {LOFP_DTYPE_F6_E3M2, 1, {8}},      {LOFP_DTYPE_F8_E4M3FNUZ, 1, {3}}, {LOFP_DTYPE_F8_E5M2FNUZ, 1, {2}},
    {LOFP_DTYPE_C64, 1, {3}},
};
#define NCASES (sizeof cases / sizeof cases[0])

static size_t case_bytes(const tcase *c)
{
    size_t n = 0;
    CHECK(lofp_io_tensor_bytes(c->dt, c->shape, c->ndim, &n) == LOFP_OK);
    return n;
}

static void test_dtypes(void)
{
    for (int i = 1; i < LOFP_DTYPE_COUNT_; i++) {
        const char *n = lofp_dtype_name((lofp_dtype)i);
        CHECKF(n != NULL, "dtype %d has no name", i);
        lofp_dtype back;
        CHECK(lofp_dtype_from_name(n, &back) == LOFP_OK && back == (lofp_dtype)i);
    }
    lofp_dtype x;
    CHECK(lofp_dtype_from_name("f32", &x) == LOFP_ERR_NOT_FOUND);
    CHECK(lofp_dtype_name((lofp_dtype)0) == NULL);
    CHECK(lofp_dtype_name(LOFP_DTYPE_COUNT_) == NULL);
    CHECK(lofp_dtype_bits(LOFP_DTYPE_F4) == 4 && lofp_dtype_bits(LOFP_DTYPE_BF16) == 16);
    /* the dense dtypes (what the quantizers take) are F32, BF16 and F16, nothing else; quantize
     * refuses every other dtype of the one enum, and values outside it */
    for (int i = -1; i <= LOFP_DTYPE_COUNT_; i++) {
        int want = i == LOFP_DTYPE_F32 || i == LOFP_DTYPE_BF16 || i == LOFP_DTYPE_F16;
        CHECKF(lofp_dtype_is_dense((lofp_dtype)i) == want, "lofp_dtype_is_dense(%d)", i);
        lofp_scheme s;
        CHECK(lofp_scheme_init(&s, LOFP_SCHEME_MXFP4) == LOFP_OK);
        uint64_t xb[16] = {0}; /* 32 elements of any width up to 32 bits: zeros */
        uint8_t codes[16], scales[1];
        float g = 0.0f;
        lofp_status st = lofp_quantize(&s, (lofp_dtype)i, xb, 1, 32, codes, scales, &g, NULL);
        CHECKF(want ? st == LOFP_OK : st == LOFP_ERR_INVALID_ARG, "lofp_quantize(dtype %d) -> %d", i, (int)st);
    }
    size_t nb, sh[3] = {3, 5, 0};
    CHECK(lofp_io_tensor_bytes(LOFP_DTYPE_F4, sh, 2, &nb) == LOFP_ERR_SHAPE);
    sh[1] = 6;
    CHECK(lofp_io_tensor_bytes(LOFP_DTYPE_F4, sh, 2, &nb) == LOFP_OK && nb == 9);
    CHECK(lofp_io_tensor_bytes(LOFP_DTYPE_F6_E2M3, sh, 2, &nb) == LOFP_ERR_SHAPE);
    size_t big[2] = {(size_t)1 << 40, (size_t)1 << 40};
    CHECK(lofp_io_tensor_bytes(LOFP_DTYPE_U8, big, 2, &nb) == LOFP_ERR_SIZE_OVERFLOW);
    size_t big2[1] = {SIZE_MAX / 2};
    CHECK(lofp_io_tensor_bytes(LOFP_DTYPE_F32, big2, 1, &nb) == LOFP_ERR_SIZE_OVERFLOW);
    CHECK(lofp_io_tensor_bytes(LOFP_DTYPE_F32, NULL, 0, &nb) == LOFP_OK && nb == 4);
    CHECK(lofp_io_tensor_bytes((lofp_dtype)99, NULL, 0, &nb) == LOFP_ERR_INVALID_ARG);
    sh[0] = 0;
    CHECK(lofp_io_tensor_bytes(LOFP_DTYPE_F4, sh, 2, &nb) == LOFP_OK && nb == 0);
}

/* lofp_dtype_to_f32 / _load_f32 against values fixed by the formats' definitions (IEEE binary16,
 * bfloat16 = the top half of binary32, and C's own double -> float conversion for F64). */
static void test_to_f32(void)
{
    const uint16_t h[6] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00, 0x3555}; /* 1, -2, 65504, 2^-24, +Inf, ~1/3 */
    const float hw[6] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, INFINITY, 0x1.554p-2f};
    const uint16_t b[4] = {0x3F80, 0xC0A0, 0x0001, 0x7F80};                   /* 1, -5, 2^-133, +Inf */
    const float bw[4] = {1.0f, -5.0f, 0x1p-133f, INFINITY};
    const double d[4] = {0.1, 1.0 + 0x1p-30, -1e300, 3.0};
    const float f[3] = {1.5f, -0.0f, 0x1p-149f};
    float out[6];
    unsigned char mis[1 + sizeof h]; /* an odd address: any alignment is allowed */
    memcpy(mis + 1, h, sizeof h);
    CHECK_OK(lofp_dtype_to_f32(LOFP_DTYPE_F16, mis + 1, 6, out));
    for (int i = 0; i < 6; i++) CHECKF(out[i] == hw[i], "f16 %04x -> %a", h[i], (double)out[i]);
    CHECK_OK(lofp_dtype_to_f32(LOFP_DTYPE_BF16, b, 4, out));
    for (int i = 0; i < 4; i++) CHECKF(out[i] == bw[i], "bf16 %04x -> %a", b[i], (double)out[i]);
    CHECK_OK(lofp_dtype_to_f32(LOFP_DTYPE_F64, d, 4, out));
    for (int i = 0; i < 4; i++) CHECKF(out[i] == (float)d[i], "f64 %a -> %a", d[i], (double)out[i]);
    CHECK(out[2] == -INFINITY);
    CHECK_OK(lofp_dtype_to_f32(LOFP_DTYPE_F32, f, 3, out));
    CHECK(memcmp(out, f, sizeof f) == 0);
    CHECK(lofp_dtype_load_f32(LOFP_DTYPE_F16, h, 2) == 65504.0f && lofp_dtype_load_f32(LOFP_DTYPE_F64, d, 3) == 3.0f);
    CHECK(lofp_dtype_load_f32(LOFP_DTYPE_BF16, b, 1) == -5.0f && lofp_dtype_load_f32(LOFP_DTYPE_F32, f, 2) == 0x1p-149f);
    CHECK(lofp_dtype_load_f32(LOFP_DTYPE_I32, f, 0) == 0.0f);
    /* the floating types are these four, nothing else of the enum */
    for (int i = -1; i <= LOFP_DTYPE_COUNT_; i++) {
        int want = i == LOFP_DTYPE_F32 || i == LOFP_DTYPE_BF16 || i == LOFP_DTYPE_F16 || i == LOFP_DTYPE_F64;
        CHECKF(lofp_dtype_is_float((lofp_dtype)i) == want, "lofp_dtype_is_float(%d)", i);
        out[0] = 7.0f;
        lofp_status st = lofp_dtype_to_f32((lofp_dtype)i, d, 1, out);
        CHECKF(want ? st == LOFP_OK : st == LOFP_ERR_INVALID_ARG && out[0] == 7.0f, "lofp_dtype_to_f32(%d) -> %d", i, (int)st);
    }
    CHECK(lofp_dtype_to_f32(LOFP_DTYPE_F32, NULL, 1, out) == LOFP_ERR_INVALID_ARG);
    CHECK_OK(lofp_dtype_to_f32(LOFP_DTYPE_F32, NULL, 0, NULL));
}

/* lofp_error_stats_compute on values whose statistics are worked out by hand. */
static void test_error_stats(void)
{
    const float x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, 6}; /* one error of 2: se 4, sum x^2 30 */
    lofp_error_stats e;
    CHECK_OK(lofp_error_stats_compute(x, y, 4, &e));
    CHECK(e.max_abs == 2.0 && e.rmse == 1.0 && e.x_max_abs == 4.0);
    CHECK(fabs(e.snr_db - 10 * log10(30.0 / 4.0)) < 1e-12 && fabs(e.rel_frobenius - sqrt(4.0 / 30.0)) < 1e-15);
    CHECK_OK(lofp_error_stats_compute(x, x, 4, &e));
    CHECK(e.max_abs == 0 && e.rmse == 0 && isinf(e.snr_db) && e.snr_db > 0 && e.rel_frobenius == 0);
    const float yn[4] = {NAN, 2, 3, 9};
    CHECK_OK(lofp_error_stats_compute(x, yn, 4, &e));
    CHECK(isnan(e.max_abs)); /* a NaN difference is not hidden by a larger finite one after it */
    CHECK(e.x_max_abs == 4.0);
    const float xn[4] = {1, NAN, 3, 4};
    CHECK_OK(lofp_error_stats_compute(xn, x, 4, &e));
    CHECK(isnan(e.x_max_abs) && isnan(e.max_abs));
    const float z[2] = {0, 0}, zy[2] = {0, 1};
    CHECK_OK(lofp_error_stats_compute(z, zy, 2, &e));
    CHECK(e.rel_frobenius == 0 && e.snr_db == -INFINITY && e.max_abs == 1.0);
    CHECK_OK(lofp_error_stats_compute(NULL, NULL, 0, &e));
    CHECK(e.rmse == 0 && e.max_abs == 0);
    CHECK(lofp_error_stats_compute(x, NULL, 4, &e) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_error_stats_compute(x, y, 4, NULL) == LOFP_ERR_INVALID_ARG);
}

/* Checks that an open file holds tensor `name` = case c with pattern `seed`. */
static void expect_tensor(const lofp_file *f, const char *name, const tcase *c, unsigned seed)
{
    const lofp_tensor_info *t = lofp_file_find(f, name);
    CHECKF(t != NULL, "tensor %s missing", name);
    if (!t) return;
    CHECKF(t->dtype == c->dt, "%s: dtype %d != %d", name, (int)t->dtype, (int)c->dt);
    CHECK_EQ_U(t->ndim, c->ndim);
    for (size_t k = 0; k < c->ndim && k < t->ndim; k++) CHECK_EQ_U(t->shape[k], c->shape[k]);
    size_t nb = case_bytes(c);
    CHECK_EQ_U(t->nbytes, nb);
    size_t numel = 1;
    for (size_t k = 0; k < c->ndim; k++) numel *= c->shape[k];
    CHECK_EQ_U(t->numel, numel);
    int same = t->nbytes == nb;
    for (size_t j = 0; same && j < nb; j++)
        same = ((const uint8_t *)t->data)[j] == pat_byte(seed, j, c->dt);
    CHECKF(same, "%s: data differ", name);
}

static void test_roundtrip_safetensors(void)
{
    lofp_tensor_desc d[NCASES];
    uint8_t *bufs[NCASES];
    char names[NCASES][32];
    for (size_t i = 0; i < NCASES; i++) {
        size_t nb = case_bytes(&cases[i]);
        bufs[i] = malloc(nb + 1);
        fill_pattern(bufs[i], nb, (unsigned)i, cases[i].dt);
        snprintf(names[i], sizeof names[i], "t%02zu.%s", NCASES - i, lofp_dtype_name(cases[i].dt));
        d[i] = (lofp_tensor_desc){names[i], cases[i].dt, cases[i].ndim, cases[i].shape, bufs[i], nb};
    }
    lofp_metadata_entry meta[] = {{"scheme", "nvfp4"}, {"a \"quoted\"\nkey\x1f", "v\\al\tue \xc3\xa9"},
                                  {"format", "pt"}};
    char path[600];
    snprintf(path, sizeof path, "%s/all.safetensors", tmp_root);
    lofp_io_error err;
    lofp_status st = lofp_file_write(path, LOFP_FORMAT_AUTO, d, NCASES, meta, 3, &err);
    CHECKF(st == LOFP_OK, "write: %s", err.message);
    CHECK(err.status == LOFP_OK && err.message[0] == '\0');

    /* the file equals the in-memory encoding */
    size_t need = 0, flen = 0;
    CHECK(lofp_file_encode(LOFP_FORMAT_SAFETENSORS, d, NCASES, meta, 3, NULL, 0, &need, &err) == LOFP_OK);
    uint8_t *enc = malloc(need);
    size_t got = 0;
    CHECK(lofp_file_encode(LOFP_FORMAT_SAFETENSORS, d, NCASES, meta, 3, enc, need - 1, &got, &err) ==
          LOFP_ERR_BUFFER_TOO_SMALL && got == need && err.status == LOFP_ERR_BUFFER_TOO_SMALL);
    CHECK(lofp_file_encode(LOFP_FORMAT_SAFETENSORS, d, NCASES, meta, 3, enc, need, &got, &err) == LOFP_OK);
    uint8_t *file = read_all(path, &flen);
    CHECK(file && flen == need && memcmp(file, enc, need) == 0);

    /* layout: header padded with spaces to 8, serde-style escapes, tensors contiguous, aligned */
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | file[i];
    CHECK(hn % 8 == 0 && 8 + hn <= flen);
    CHECK(file[8] == '{');
    const char *hdr = (const char *)file + 8;
    CHECK(mem_find(hdr, hn, "\"__metadata__\":{\"a \\\"quoted\\\"\\nkey\\u001f\":\"v\\\\al\\tue \xc3\xa9\"",
                 strlen("\"__metadata__\":{\"a \\\"quoted\\\"\\nkey\\u001f\":\"v\\\\al\\tue \xc3\xa9\"")) != NULL);
    size_t k = (size_t)hn;
    while (k > 0 && hdr[k - 1] == ' ') k--;
    CHECK(hdr[k - 1] == '}');

    lofp_file *f = NULL;
    st = lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err);
    CHECKF(st == LOFP_OK, "open: %s", err.message);
    if (f) {
        CHECK(lofp_file_format_of(f) == LOFP_FORMAT_SAFETENSORS);
        CHECK_EQ_U(lofp_file_count(f), NCASES);
        for (size_t i = 0; i < NCASES; i++) expect_tensor(f, names[i], &cases[i], (unsigned)i);
        size_t at = 8 + (size_t)hn;
        int prev_rank = 1 << 30;
        const char *prev_name = "";
        for (size_t i = 0; i < lofp_file_count(f); i++) {
            const lofp_tensor_info *t = lofp_file_tensor(f, i);
            CHECK_EQ_U(t->offset, at);                         /* data order, contiguous */
            CHECK((const uint8_t *)t->data == (const uint8_t *)lofp_file_tensor(f, 0)->data + (at - lofp_file_tensor(f, 0)->offset));
            unsigned bits = lofp_dtype_bits(t->dtype);
            if (bits >= 8) CHECKF(t->offset % (bits / 8) == 0, "%s misaligned", t->name);
            int rank = lofp_dtype_rank(t->dtype);
            CHECK(rank < prev_rank || (rank == prev_rank && strcmp(prev_name, t->name) < 0));
            prev_rank = rank;
            prev_name = t->name;
            at += t->nbytes;
        }
        CHECK_EQ_U(at, flen);
        CHECK(lofp_file_tensor(f, NCASES) == NULL);
        CHECK(lofp_file_find(f, "nope") == NULL);
        CHECK_EQ_U(lofp_file_metadata_count(f), 3);
        CHECK(lofp_file_metadata_get(f, "scheme") && !strcmp(lofp_file_metadata_get(f, "scheme"), "nvfp4"));
        CHECK(lofp_file_metadata_get(f, "a \"quoted\"\nkey\x1f") &&
              !strcmp(lofp_file_metadata_get(f, "a \"quoted\"\nkey\x1f"), "v\\al\tue \xc3\xa9"));
        CHECK(lofp_file_metadata_get(f, "missing") == NULL);
        CHECK(lofp_file_metadata(f, 3) == NULL);
        /* metadata keys are written sorted */
        CHECK(!strcmp(lofp_file_metadata(f, 0)->key, "a \"quoted\"\nkey\x1f"));
        CHECK(!strcmp(lofp_file_metadata(f, 1)->key, "format"));
        lofp_file_close(f);
    }
    /* the same through the in-memory entry point */
    f = NULL;
    st = lofp_file_open_memory(enc, need, LOFP_FORMAT_SAFETENSORS, "mem.safetensors", &f, &err);
    CHECKF(st == LOFP_OK, "open_memory: %s", err.message);
    if (f) {
        for (size_t i = 0; i < NCASES; i++) expect_tensor(f, names[i], &cases[i], (unsigned)i);
        lofp_file_close(f);
    }
    /* the input file was not modified by reading */
    size_t flen2 = 0;
    uint8_t *file2 = read_all(path, &flen2);
    CHECK(file2 && flen2 == flen && memcmp(file, file2, flen) == 0);
    free(file2);

    /* no tensors, no metadata: "{}" padded */
    size_t elen = 0;
    uint8_t ebuf[64];
    CHECK(lofp_file_encode(LOFP_FORMAT_SAFETENSORS, NULL, 0, NULL, 0, ebuf, sizeof ebuf, &elen, &err) == LOFP_OK);
    CHECK(elen == 16 && memcmp(ebuf + 8, "{}      ", 8) == 0 && ebuf[0] == 8);
    f = NULL;
    CHECK(lofp_file_open_memory(ebuf, elen, LOFP_FORMAT_AUTO, NULL, &f, &err) == LOFP_OK);
    CHECK(f && lofp_file_count(f) == 0);
    lofp_file_close(f);

    free(enc);
    free(file);
    for (size_t i = 0; i < NCASES; i++) free(bufs[i]);
}

static void test_roundtrip_npy(void)
{
    lofp_io_error err;
    char path[600];
    for (size_t i = 0; i < NCASES; i++) {
        const tcase *c = &cases[i];
        size_t nb = case_bytes(c);
        uint8_t *buf = malloc(nb + 1);
        fill_pattern(buf, nb, (unsigned)i + 100, c->dt);
        lofp_tensor_desc d = {NULL, c->dt, c->ndim, c->shape, buf, nb};
        snprintf(path, sizeof path, "%s/arr_%s.npy", tmp_root, lofp_dtype_name(c->dt));
        lofp_status st = lofp_file_write(path, LOFP_FORMAT_AUTO, &d, 1, NULL, 0, &err);
        if (!lofp_io_npy_descr(c->dt)) {
            CHECKF(st == LOFP_ERR_UNSUPPORTED, "%s into .npy: %s", lofp_dtype_name(c->dt), sname(st));
            CHECK(strstr(err.message, lofp_dtype_name(c->dt)) != NULL);
            CHECK(access(path, F_OK) != 0);
            free(buf);
            continue;
        }
        CHECKF(st == LOFP_OK, "write %s: %s", path, err.message);
        size_t flen = 0;
        uint8_t *file = read_all(path, &flen);
        CHECK(file && flen >= 64 && (flen - nb) % 64 == 0 && file[6] == 1 && file[flen - nb - 1] == '\n');
        free(file);
        lofp_file *f = NULL;
        st = lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err);
        CHECKF(st == LOFP_OK, "open %s: %s", path, err.message);
        if (f) {
            char stem[64];
            snprintf(stem, sizeof stem, "arr_%s", lofp_dtype_name(c->dt));
            CHECK(lofp_file_format_of(f) == LOFP_FORMAT_NPY && lofp_file_count(f) == 1);
            CHECK(!strcmp(lofp_file_tensor(f, 0)->name, stem));
            CHECK(lofp_file_tensor(f, 0)->offset % 64 == 0);
            expect_tensor(f, stem, c, (unsigned)i + 100);
            lofp_file_close(f);
        }
        free(buf);
    }
    /* npy: exactly one tensor, no metadata */
    size_t sh[1] = {2};
    float v[2] = {1, 2};
    lofp_tensor_desc d2[2] = {{"a", LOFP_DTYPE_F32, 1, sh, v, 8}, {"b", LOFP_DTYPE_F32, 1, sh, v, 8}};
    lofp_metadata_entry m = {"k", "v"};
    size_t len;
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, d2, 2, NULL, 0, NULL, 0, &len, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, d2, 1, &m, 1, NULL, 0, &len, &err) == LOFP_ERR_UNSUPPORTED);
    /* LOFP_MAX_NDIM (numpy's 64) bounds every shape: 64 dimensions are written and read back,
     * 65 are refused by the encoder and by the reader, naming the count */
    size_t nd = LOFP_MAX_NDIM + 1;
    size_t many[LOFP_MAX_NDIM + 1];
    for (size_t i = 0; i < nd; i++) many[i] = 1;
    many[0] = 3;
    uint16_t h3[3] = {1, 2, 3};
    lofp_tensor_desc dv2 = {NULL, LOFP_DTYPE_F16, nd, many, h3, 6};
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, &dv2, 1, NULL, 0, NULL, 0, &len, &err) == LOFP_ERR_INVALID_ARG &&
          strstr(err.message, "65 dimensions") && strstr(err.message, "at most 64"));
    dv2.ndim = LOFP_MAX_NDIM;
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, &dv2, 1, NULL, 0, NULL, 0, &len, &err) == LOFP_OK);
    uint8_t *e = malloc(len + 8);
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, &dv2, 1, NULL, 0, e, len, &len, &err) == LOFP_OK);
    lofp_file *f = NULL;
    CHECK(lofp_file_open_memory(e, len, LOFP_FORMAT_AUTO, NULL, &f, &err) == LOFP_OK);
    if (f) {
        const lofp_tensor_info *t = lofp_file_tensor(f, 0);
        CHECK(t->ndim == LOFP_MAX_NDIM && t->shape[0] == 3 && t->numel == 3 && memcmp(t->data, h3, 6) == 0);
        lofp_file_close(f);
    }
    free(e);
    {
        /* a 65-D header, as only a hand can write it */
        char hdr[512];
        int hl = snprintf(hdr, sizeof hdr, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,");
        for (int i = 1; i < LOFP_MAX_NDIM + 1; i++) hl += snprintf(hdr + hl, sizeof hdr - (size_t)hl, " 1,");
        hl += snprintf(hdr + hl, sizeof hdr - (size_t)hl, "), }");
        while ((10 + hl + 1) % 64) hdr[hl++] = ' ';
        hdr[hl++] = '\n';
        uint8_t raw65[600];
        memcpy(raw65, "\x93NUMPY\x01\x00", 8);
        raw65[8] = (uint8_t)(hl & 0xFF);
        raw65[9] = (uint8_t)(hl >> 8);
        memcpy(raw65 + 10, hdr, (size_t)hl);
        memcpy(raw65 + 10 + hl, h3, 6);
        expect_error(raw65, 10 + (size_t)hl + 6, LOFP_FORMAT_NPY, LOFP_ERR_UNSUPPORTED, "65 dimensions", "npy 65-D");
    }
    /* version 2.0 (a 4-byte header length) is read: numpy writes it for headers over 65535 bytes,
     * which no shape of at most 64 dimensions makes, so this one is padded by hand */
    {
        const char dict[] = "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }";
        size_t hl = 70000;
        while ((12 + hl) % 64) hl++;
        uint8_t *v2 = malloc(12 + hl + 6);
        memcpy(v2, "\x93NUMPY\x02\x00", 8);
        for (int i = 0; i < 4; i++) v2[8 + i] = (uint8_t)(hl >> (8 * i));
        memset(v2 + 12, ' ', hl);
        memcpy(v2 + 12, dict, sizeof dict - 1);
        v2[12 + hl - 1] = '\n';
        memcpy(v2 + 12 + hl, h3, 6);
        CHECK(lofp_file_open_memory(v2, 12 + hl + 6, LOFP_FORMAT_AUTO, NULL, &f, &err) == LOFP_OK);
        if (f) {
            const lofp_tensor_info *t = lofp_file_tensor(f, 0);
            CHECK(t->ndim == 1 && t->shape[0] == 3 && memcmp(t->data, h3, 6) == 0);
            lofp_file_close(f);
        }
        free(v2);
    }
    /* the exact bytes numpy writes for np.arange(3, dtype='<f4') (version 1.0, 64-byte aligned) */
    float a3[3] = {0, 1, 2};
    size_t s3[1] = {3};
    lofp_tensor_desc d3 = {NULL, LOFP_DTYPE_F32, 1, s3, a3, 12};
    uint8_t out[256];
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, &d3, 1, NULL, 0, out, sizeof out, &len, &err) == LOFP_OK);
    const char *want = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    CHECK(len == 128 + 12 && memcmp(out, want, 10 + 57) == 0 && out[127] == '\n');
    for (size_t i = 67; i < 127; i++) CHECK(out[i] == ' ');
    /* scalar: shape () */
    lofp_tensor_desc d0 = {NULL, LOFP_DTYPE_F64, 0, NULL, (double[]){3.5}, 8};
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, &d0, 1, NULL, 0, out, sizeof out, &len, &err) == LOFP_OK);
    CHECK(mem_find(out, len, "'shape': (), }", 14) != NULL && len == 128 + 8);
}

/* ---- malformed files ---------------------------------------------------------------------- */

/* Builds a safetensors buffer: header (padded with spaces to 8) + data_len pattern bytes. */
static uint8_t *st_build(const char *json, size_t jlen, size_t data_len, size_t *len)
{
    size_t h = (jlen + 7) / 8 * 8;
    *len = 8 + h + data_len;
    uint8_t *b = malloc(*len ? *len : 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, json, jlen);
    memset(b + 8 + jlen, ' ', h - jlen);
    fill_pattern(b + 8 + h, data_len, 1, LOFP_DTYPE_U8);
    return b;
}

/* Opens buf[0..len) from memory (copied into an exact-size allocation, so ASan sees overreads)
 * and checks the status and that the message names the file and contains `want`. */
static void expect_error(const uint8_t *buf, size_t len, lofp_file_format fmt, lofp_status status,
                         const char *want, const char *label)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, buf, len);
    lofp_file *f = (lofp_file *)(uintptr_t)1;
    lofp_io_error err;
    memset(&err, 0x55, sizeof err);
    const char *name = fmt == LOFP_FORMAT_NPY ? "bad.npy" : "bad.safetensors";
    lofp_status st = lofp_file_open_memory(copy, len, fmt, name, &f, &err);
    CHECKF(st == status, "%s: status %s, want %s (%s)", label, sname(st), sname(status),
           st ? err.message : "opened");
    CHECK(f == NULL || st == LOFP_OK);
    if (st != LOFP_OK) {
        CHECKF(err.status == st, "%s: err.status", label);
        CHECKF(memchr(err.message, 0, sizeof err.message) != NULL, "%s: unterminated message", label);
        CHECKF(strncmp(err.message, name, strlen(name)) == 0, "%s: message does not name the file: %s",
               label, err.message);
        CHECKF(!want || strstr(err.message, want), "%s: message '%s' lacks '%s'", label, err.message, want);
    }
    lofp_file_close(st == LOFP_OK ? f : NULL);
    free(copy);
}

typedef struct {
    const char *json;
    size_t data_len;
    lofp_status status;
    const char *want;
} st_case;

#define T1(dt, shape, off) "{\"a\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" off "}}"
#define TA "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static const st_case st_cases[] = {
    {T1("F32", "[2]", "[0,8]"), 8, LOFP_OK, NULL},
    {"{" TA ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, LOFP_ERR_FORMAT, "overlap tensor 'a'"},
    {"{" TA ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, LOFP_ERR_FORMAT, "overlap"},
    {"{" TA ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20, LOFP_ERR_FORMAT, "belong to no tensor"},
    {"{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, LOFP_ERR_FORMAT, "bytes [0, 4)"},
    {T1("F32", "[2]", "[0,8]"), 12, LOFP_ERR_FORMAT, "4 trailing bytes"},
    {T1("F32", "[4]", "[0,16]"), 8, LOFP_ERR_FORMAT, "out of range"},
    {T1("F32", "[0]", "[8,0]"), 8, LOFP_ERR_FORMAT, "end before"},
    {T1("F32", "[3]", "[0,8]"), 8, LOFP_ERR_FORMAT, "span 8 bytes but shape [3] x F32 needs 12"},
    {T1("U8", "[1099511627776,1099511627776]", "[0,8]"), 8, LOFP_ERR_FORMAT, "more elements than fit in 64 bits"},
    {T1("F32", "[4611686018427387904]", "[0,8]"), 8, LOFP_ERR_FORMAT, "overflows 64 bits"},
    {T1("U8", "[0,1099511627776,1099511627776]", "[0,0]"), 0, LOFP_OK, NULL},
    {T1("F32", "[-2]", "[0,8]"), 8, LOFP_ERR_FORMAT, "shape element 0 is negative"},
    {T1("F32", "[2]", "[-8,0]"), 8, LOFP_ERR_FORMAT, "begin is negative"},
    {T1("F32", "[2]", "[0,18446744073709551616]"), 8, LOFP_ERR_FORMAT, "overflows 64 bits"},
    {T1("F32", "[2]", "[18446744073709551607,18446744073709551615]"), 8, LOFP_ERR_FORMAT, "out of range"},
    {T1("F32", "[2.0]", "[0,8]"), 8, LOFP_ERR_FORMAT, "non-integer"},
    {T1("F32", "[2e0]", "[0,8]"), 8, LOFP_ERR_FORMAT, "non-integer"},
    {T1("F32", "[02]", "[0,8]"), 8, LOFP_ERR_FORMAT, "leading zero"},
    {T1("F32", "[+2]", "[0,8]"), 8, LOFP_ERR_FORMAT, "unexpected character"},
    {T1("F32", "[-]", "[0,8]"), 8, LOFP_ERR_FORMAT, "invalid number"},
    {T1("F32", "[\"2\"]", "[0,8]"), 8, LOFP_ERR_FORMAT, "is a string"},
    {T1("F3", "[2]", "[0,8]"), 8, LOFP_ERR_FORMAT, "unknown dtype 'F3'"},
    {T1("f32", "[2]", "[0,8]"), 8, LOFP_ERR_FORMAT, "unknown dtype 'f32'"},
    {"{" TA "," TA "}", 8, LOFP_ERR_FORMAT, "duplicate key 'a'"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, LOFP_ERR_FORMAT, "duplicate key 'dtype'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, LOFP_ERR_FORMAT, "unknown field 'x'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, LOFP_ERR_FORMAT, "missing field 'data_offsets'"},
    {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, LOFP_ERR_FORMAT, "missing field 'dtype'"},
    {T1("F32", "[2]", "[0,4,8]"), 8, LOFP_ERR_FORMAT, "data_offsets must be an array"},
    {T1("F32", "[2]", "{}"), 8, LOFP_ERR_FORMAT, "data_offsets must be an array"},
    {T1("F32", "2", "[0,8]"), 8, LOFP_ERR_FORMAT, "shape is a number"},
    {"{\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, LOFP_ERR_FORMAT, "dtype is a number"},
    {"{\"__metadata__\":{\"k\":1}}", 0, LOFP_ERR_FORMAT, "entry 'k' is a number"},
    {"{\"__metadata__\":[]}", 0, LOFP_ERR_FORMAT, "__metadata__ is an array"},
    {"{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, LOFP_ERR_FORMAT, "duplicate key 'k'"},
    {"{\"__metadata__\":{\"k\":\"v\\u0000\"}}", 0, LOFP_ERR_FORMAT, "NUL"},
    {"{\"__metadata__\":{\"k\":\"v\"}}", 0, LOFP_OK, NULL},
    {"[]", 0, LOFP_ERR_FORMAT, "not an object"},
    {"{\"a\":5}", 0, LOFP_ERR_FORMAT, "tensor 'a': the entry is a number"},
    {T1("F4", "[3]", "[0,1]"), 1, LOFP_ERR_FORMAT, "do not fill whole bytes"},
    {T1("F4", "[4]", "[0,4]"), 4, LOFP_ERR_FORMAT, "needs 2"},
    {T1("F4", "[2,3]", "[0,3]"), 3, LOFP_OK, NULL},
    {T1("F6_E2M3", "[2]", "[0,2]"), 2, LOFP_ERR_FORMAT, "do not fill whole bytes"},
    {"{", 0, LOFP_ERR_FORMAT, "JSON error at byte 8: unterminated object"},
    {"{\"a\":}", 0, LOFP_ERR_FORMAT, "unexpected character"},
    {"{\"a\" 1}", 0, LOFP_ERR_FORMAT, "expected ':'"},
    {"{} x", 0, LOFP_ERR_FORMAT, "trailing characters"},
    {"{}}", 0, LOFP_ERR_FORMAT, "trailing characters"},
    {"{'a':1}", 0, LOFP_ERR_FORMAT, "expected a string key"},
    {"{\"a\x01\":1}", 0, LOFP_ERR_FORMAT, "control character"},
    {"{\"\\q\":1}", 0, LOFP_ERR_FORMAT, "invalid escape"},
    {"{\"\\ud800\":1}", 0, LOFP_ERR_FORMAT, "lone high surrogate"},
    {"{\"\\ud800\\u0041\":1}", 0, LOFP_ERR_FORMAT, "not followed by a low"},
    {"{\"\\udc00\":1}", 0, LOFP_ERR_FORMAT, "lone low surrogate"},
    {"{\"\\u12\":1}", 0, LOFP_ERR_FORMAT, "hex digit"},
    {"{\"\xff\":1}", 0, LOFP_ERR_FORMAT, "invalid UTF-8"},
    {"{\"\xc0\x80\":1}", 0, LOFP_ERR_FORMAT, "invalid UTF-8"},
    {"{\"\xed\xa0\x80\":1}", 0, LOFP_ERR_FORMAT, "invalid UTF-8"},
    {"{\"\xe2\x82\":1}", 0, LOFP_ERR_FORMAT, "invalid UTF-8"},
    {"{\"a\":tru}", 0, LOFP_ERR_FORMAT, "invalid literal"},
    {"{\"a\":1,}", 0, LOFP_ERR_FORMAT, "expected a string key"},
    {"{\"a\":[1,]}", 0, LOFP_ERR_FORMAT, "unexpected character"},
    {"{\"a\":[1 2]}", 0, LOFP_ERR_FORMAT, "expected ',' or ']'"},
    {"{\"a\":\"x", 0, LOFP_ERR_FORMAT, "unterminated string"},
    {"", 0, LOFP_ERR_FORMAT, "unexpected end of input"},
    {"{\"a\\u0000b\":{}}", 0, LOFP_ERR_FORMAT, "NUL"},
    {"{\"\\u00e9\\ud83d\\ude00\\n\\\"\\\\\\/\":" "{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1, LOFP_OK, NULL},
    {"\t\r\n {  \"a\" : { \"dtype\" : \"U8\" , \"shape\" : [ 1 ] , \"data_offsets\" : [ 0 , 1 ] } } \n", 1, LOFP_OK, NULL},
};

static void test_malformed_safetensors(void)
{
    for (size_t i = 0; i < sizeof st_cases / sizeof st_cases[0]; i++) {
        const st_case *c = &st_cases[i];
        size_t len;
        uint8_t *b = st_build(c->json, strlen(c->json), c->data_len, &len);
        char label[64];
        snprintf(label, sizeof label, "st case %zu", i);
        expect_error(b, len, LOFP_FORMAT_SAFETENSORS, c->status, c->want, label);
        free(b);
    }
    /* the escaped name decodes to UTF-8 */
    {
        const char *j = "{\"\\u00e9\\ud83d\\ude00\\n\\\"\\\\\\/\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}";
        size_t len;
        uint8_t *b = st_build(j, strlen(j), 1, &len);
        lofp_file *f = NULL;
        CHECK(lofp_file_open_memory(b, len, LOFP_FORMAT_AUTO, NULL, &f, NULL) == LOFP_OK);
        CHECK(f && lofp_file_find(f, "\xc3\xa9\xf0\x9f\x98\x80\n\"\\/") != NULL);
        lofp_file_close(f);
        free(b);
    }
    /* nesting: 64 levels parse (then fail the schema), 65 do not */
    for (int depth = 62; depth <= 66; depth++) {
        char j[512];
        size_t o = 0;
        o += (size_t)snprintf(j + o, sizeof j - o, "{\"a\":");
        for (int i = 0; i < depth; i++) j[o++] = '[';
        for (int i = 0; i < depth; i++) j[o++] = ']';
        j[o++] = '}';
        j[o] = '\0';
        size_t len;
        uint8_t *b = st_build(j, o, 0, &len);
        expect_error(b, len, LOFP_FORMAT_SAFETENSORS, LOFP_ERR_FORMAT,
                     depth > LOFP_JSON_MAX_DEPTH ? "nesting too deep" : "the entry is an array",
                     "depth");
        free(b);
    }
    /* raw framing errors */
    uint8_t raw[64];
    memset(raw, 0, sizeof raw);
    expect_error(raw, 0, LOFP_FORMAT_SAFETENSORS, LOFP_ERR_FORMAT, "shorter than the 8-byte", "empty");
    expect_error(raw, 7, LOFP_FORMAT_SAFETENSORS, LOFP_ERR_FORMAT, "shorter than the 8-byte", "7 bytes");
    expect_error(raw, 8, LOFP_FORMAT_SAFETENSORS, LOFP_ERR_FORMAT, "unexpected end of input", "n = 0");
    const uint64_t lies[] = {9, 56, 57, 100000001ull, 1ull << 63, UINT64_MAX, UINT64_MAX - 7};
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        for (int k = 0; k < 8; k++) raw[k] = (uint8_t)(lies[i] >> (8 * k));
        memcpy(raw + 8, "{}      ", 8);
        expect_error(raw, 64, LOFP_FORMAT_SAFETENSORS, LOFP_ERR_FORMAT,
                     lies[i] > 100000000u ? "exceeds the safetensors limit" :
                     lies[i] > 56 ? "runs past the end of the file (64 bytes)" : NULL, "lying length");
    }
    /* a length that cuts the JSON short */
    {
        const char *j = T1("F32", "[2]", "[0,8]");
        size_t len;
        uint8_t *b = st_build(j, strlen(j), 8, &len);
        b[0] = 16;
        expect_error(b, len, LOFP_FORMAT_SAFETENSORS, LOFP_ERR_FORMAT, "JSON error", "short length");
        /* NUL padding instead of spaces */
        uint8_t *b2 = st_build("{}", 2, 0, &len);
        memset(b2 + 10, 0, 6);
        expect_error(b2, len, LOFP_FORMAT_SAFETENSORS, LOFP_ERR_FORMAT, "trailing characters", "NUL pad");
        free(b);
        free(b2);
    }
}

/* Truncates a valid file at every length and mutates every byte: never a crash; truncations are
 * FORMAT errors; mutations either open (and then every tensor lies inside the buffer) or fail with
 * a message. */
static void torture(const uint8_t *valid, size_t n, lofp_file_format fmt, const char *label)
{
    for (size_t len = 0; len < n; len++) {
        char l[64];
        snprintf(l, sizeof l, "%s truncated to %zu", label, len);
        expect_error(valid, len, fmt, LOFP_ERR_FORMAT, NULL, l);
    }
    expect_error(valid, n, fmt, LOFP_OK, NULL, label);
    uint8_t *longer = malloc(n + 1);
    memcpy(longer, valid, n);
    longer[n] = 0;
    expect_error(longer, n + 1, fmt, LOFP_ERR_FORMAT, "trailing", "one extra byte");
    free(longer);
    static const uint8_t vals[] = {0x00, 0xFF, '"', '{', '}', '[', ']', ',', ':', '9', '-', ' ',
                                   '\\', 0x80, '\'', '(', ')', 'T', 'L', '0', 0x7F};
    uint8_t *m = malloc(n);
    for (size_t i = 0; i < n; i++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(m, valid, n);
            if (m[i] == vals[v]) continue;
            m[i] = vals[v];
            lofp_file *f = NULL;
            lofp_io_error err;
            lofp_status st = lofp_file_open_memory(m, n, fmt, label, &f, &err);
            if (st == LOFP_OK) {
                for (size_t t = 0; t < lofp_file_count(f); t++) {
                    const lofp_tensor_info *ti = lofp_file_tensor(f, t);
                    CHECK((const uint8_t *)ti->data >= m && ti->offset + ti->nbytes <= n &&
                          (const uint8_t *)ti->data == m + ti->offset);
                    CHECK(lofp_file_find(f, ti->name) != NULL);
                }
                lofp_file_close(f);
            } else {
                CHECK(f == NULL && err.status == st && err.message[0] != '\0');
                CHECK(st == LOFP_ERR_FORMAT || st == LOFP_ERR_UNSUPPORTED);
            }
        }
    }
    free(m);
}

static void test_torture(void)
{
    size_t sh_a[2] = {2, 3}, sh_b[1] = {4}, sh_c[2] = {2, 4};
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint8_t bq[4] = {1, 2, 3, 4}, c4[4] = {0x12, 0x34, 0x56, 0x78};
    lofp_tensor_desc d[3] = {{"w", LOFP_DTYPE_F32, 2, sh_a, a, 24},
                             {"w.scales", LOFP_DTYPE_F8_E8M0, 1, sh_b, bq, 4},
                             {"w.codes", LOFP_DTYPE_F4, 2, sh_c, c4, 4}};
    lofp_metadata_entry meta[1] = {{"scheme", "mxfp4"}};
    size_t len;
    uint8_t buf[512];
    CHECK(lofp_file_encode(LOFP_FORMAT_SAFETENSORS, d, 3, meta, 1, buf, sizeof buf, &len, NULL) == LOFP_OK);
    torture(buf, len, LOFP_FORMAT_SAFETENSORS, "small.safetensors");
    CHECK(lofp_file_encode(LOFP_FORMAT_NPY, d, 1, NULL, 0, buf, sizeof buf, &len, NULL) == LOFP_OK);
    torture(buf, len, LOFP_FORMAT_NPY, "small.npy");
}

/* Builds an .npy: preamble for version (major), the dict text padded to 64 with spaces + '\n',
 * then data_len pattern bytes. */
static uint8_t *npy_build(unsigned major, unsigned minor, const char *dict, size_t data_len, size_t *len)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hl = dl + 1;
    size_t pad = 64 - (pre + hl) % 64;
    size_t field = hl + pad;
    *len = pre + field + data_len;
    uint8_t *b = malloc(*len);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = (uint8_t)minor;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (uint8_t)(field >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', pad);
    b[pre + field - 1] = '\n';
    fill_pattern(b + pre + field, data_len, 3, LOFP_DTYPE_U8);
    return b;
}

typedef struct {
    unsigned major, minor;
    const char *dict;
    size_t data_len;
    lofp_status status;
    const char *want;
} npy_case;

#define D(descr, fo, shape) "{'descr': '" descr "', 'fortran_order': " fo ", 'shape': " shape ", }"

static const npy_case npy_cases[] = {
    {1, 0, D("<f4", "False", "(2, 3)"), 24, LOFP_OK, NULL},
    {2, 0, D("<f4", "False", "(2, 3)"), 24, LOFP_OK, NULL},
    {3, 0, D("<f4", "False", "(2, 3)"), 24, LOFP_OK, NULL},
    {1, 0, "{\"descr\": \"|u1\", \"fortran_order\": False, \"shape\": (5,)}", 5, LOFP_OK, NULL},
    {1, 0, "{'shape':(2,3),'descr':'<f2','fortran_order':False}", 12, LOFP_OK, NULL},
    {1, 0, D("<f4", "False", "(2L, 3L)"), 24, LOFP_OK, NULL},
    {3, 0, D("<f4", "False", "(2L, 3L)"), 24, LOFP_ERR_FORMAT, "plain decimal"},
    {1, 0, D(">u1", "False", "(4,)"), 4, LOFP_OK, NULL},
    {1, 0, D("|b1", "False", "()"), 1, LOFP_OK, NULL},
    {1, 0, D("<u4", "False", "(0, 7)"), 0, LOFP_OK, NULL},
    {1, 0, D("<f4", "True", "(2, 3)"), 24, LOFP_ERR_UNSUPPORTED, "Fortran-order"},
    {1, 0, D("|O", "False", "(2,)"), 16, LOFP_ERR_UNSUPPORTED, "pickle"},
    {1, 0, D(">f4", "False", "(2,)"), 8, LOFP_ERR_UNSUPPORTED, "big-endian"},
    {1, 0, D("!f8", "False", "(2,)"), 16, LOFP_ERR_UNSUPPORTED, "big-endian"},
    {1, 0, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, LOFP_ERR_UNSUPPORTED, "structured"},
    {1, 0, D("<c16", "False", "(2,)"), 32, LOFP_ERR_UNSUPPORTED, "dtype '<c16' is not supported"},
    {1, 0, D("<U3", "False", "(2,)"), 24, LOFP_ERR_UNSUPPORTED, "not supported"},
    {1, 0, D("<V2", "False", "(2,)"), 4, LOFP_ERR_UNSUPPORTED, "not supported"},
    {4, 0, D("<f4", "False", "(2,)"), 8, LOFP_ERR_UNSUPPORTED, "version 4.0"},
    {1, 1, D("<f4", "False", "(2,)"), 8, LOFP_ERR_UNSUPPORTED, "version 1.1"},
    {1, 0, "{'descr': '<f4', 'fortran_order': False, }", 8, LOFP_ERR_FORMAT, "missing key 'shape'"},
    {1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, LOFP_ERR_FORMAT, "unexpected key 'x'"},
    {1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, LOFP_ERR_FORMAT, "duplicate key 'descr'"},
    {1, 0, D("<f4", "False", "(2)"), 8, LOFP_ERR_FORMAT, "not a tuple"},
    {1, 0, D("<f4", "False", "[2]"), 8, LOFP_ERR_FORMAT, "shape is not a tuple"},
    {1, 0, D("<f4", "False", "(-1,)"), 0, LOFP_ERR_FORMAT, "negative"},
    {1, 0, D("<f4", "False", "(2.0,)"), 8, LOFP_ERR_FORMAT, "plain decimal"},
    {1, 0, D("<f4", "False", "(02,)"), 8, LOFP_ERR_FORMAT, "leading zero"},
    {1, 0, D("|u1", "False", "(1099511627776, 1099511627776)"), 8, LOFP_ERR_FORMAT, "overflows 64 bits"},
    {1, 0, D("<f4", "False", "(4611686018427387904,)"), 8, LOFP_ERR_FORMAT, "overflows 64 bits"},
    {1, 0, D("<f4", "False", "(99999999999999999999999,)"), 8, LOFP_ERR_FORMAT, "overflows 64 bits"},
    {1, 0, D("<f4", "False", "(2, 3)"), 20, LOFP_ERR_FORMAT, "data truncated"},
    {1, 0, D("<f4", "False", "(2, 3)"), 28, LOFP_ERR_FORMAT, "trailing bytes"},
    {1, 0, D("<f4", "Yes", "(2,)"), 8, LOFP_ERR_FORMAT, "fortran_order is not True or False"},
    {1, 0, D("<f4", "Falsey", "(2,)"), 8, LOFP_ERR_FORMAT, "fortran_order is not True or False"},
    {1, 0, D("<f4", "False", "(2,)") " x", 8, LOFP_ERR_FORMAT, "trailing characters"},
    {1, 0, "[1, 2]", 8, LOFP_ERR_FORMAT, "not a dict"},
    {1, 0, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}", 8, LOFP_ERR_FORMAT, "escape"},
    {1, 0, "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", 8, LOFP_ERR_FORMAT, NULL},
    {1, 0, "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", 8, LOFP_ERR_FORMAT, "expected ',' or '}'"},
    {1, 0, "{'descr': 4, 'fortran_order': False, 'shape': (2,)}", 8, LOFP_ERR_FORMAT, "descr is not a string"},
    {1, 0, "{'descr' '<f4'}", 8, LOFP_ERR_FORMAT, "expected ':'"},
    {1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8, LOFP_ERR_FORMAT, NULL},
};

static void test_malformed_npy(void)
{
    for (size_t i = 0; i < sizeof npy_cases / sizeof npy_cases[0]; i++) {
        const npy_case *c = &npy_cases[i];
        size_t len;
        uint8_t *b = npy_build(c->major, c->minor, c->dict, c->data_len, &len);
        char label[64];
        snprintf(label, sizeof label, "npy case %zu", i);
        expect_error(b, len, LOFP_FORMAT_NPY, c->status, c->want, label);
        free(b);
    }
    uint8_t raw[32] = "\x93NUMPX\x01\x00";
    expect_error(raw, 32, LOFP_FORMAT_NPY, LOFP_ERR_FORMAT, "bad magic", "magic");
    expect_error(raw, 5, LOFP_FORMAT_NPY, LOFP_ERR_FORMAT, "shorter than the 10-byte", "short");
    memcpy(raw, "\x93NUMPY\x01\x00\xff\xff", 10);
    expect_error(raw, 32, LOFP_FORMAT_NPY, LOFP_ERR_FORMAT, "header length 65535 runs past", "hlen");
    memcpy(raw, "\x93NUMPY\x02\x00\xff\xff\xff\xff", 12);
    expect_error(raw, 32, LOFP_FORMAT_NPY, LOFP_ERR_FORMAT, "runs past", "hlen v2");
    expect_error(raw, 11, LOFP_FORMAT_NPY, LOFP_ERR_FORMAT, "12 bytes", "v2 short");
    /* AUTO picks .npy by the magic; a ".npy" name with other content is reported as .npy */
    size_t len;
    uint8_t *b = npy_build(1, 0, D("<f4", "False", "(2,)"), 8, &len);
    lofp_file *f = NULL;
    lofp_io_error err;
    CHECK(lofp_file_open_memory(b, len, LOFP_FORMAT_AUTO, "dir.v2/weights.x.npy", &f, &err) == LOFP_OK);
    CHECK(f && lofp_file_format_of(f) == LOFP_FORMAT_NPY && !strcmp(lofp_file_tensor(f, 0)->name, "weights.x"));
    lofp_file_close(f);
    free(b);
    CHECK(lofp_file_open_memory("{}", 2, LOFP_FORMAT_AUTO, "x.npy", &f, &err) == LOFP_ERR_FORMAT);
    CHECK(strstr(err.message, "not an .npy file") != NULL);
    CHECK(lofp_file_open_memory("{}", 2, (lofp_file_format)7, "x", &f, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_file_open_memory(NULL, 2, LOFP_FORMAT_AUTO, "x", &f, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_file_open_memory("{}", 2, LOFP_FORMAT_AUTO, "x", NULL, &err) == LOFP_ERR_INVALID_ARG);
}

/* ---- atomic write ------------------------------------------------------------------------- */

static void test_atomic_write(void)
{
    char dir[600], path[700], sub[700];
    snprintf(dir, sizeof dir, "%s/atomic", tmp_root);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    size_t sh1[1] = {4};
    float v1[4] = {1, 2, 3, 4};
    lofp_tensor_desc d1 = {"x", LOFP_DTYPE_F32, 1, sh1, v1, 16};
    lofp_io_error err;
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &d1, 1, NULL, 0, &err) == LOFP_OK);
    size_t alen = 0, blen = 0;
    uint8_t *a = read_all(path, &alen);
    CHECK(a && alen > 16);
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    mode_t um = umask(022);
    umask(um);
    CHECKF((sb.st_mode & 0777) == (0666 & ~um), "mode %o", (unsigned)(sb.st_mode & 0777));

    /* 1. the disk "fills up" half-way (RLIMIT_FSIZE): IO error, old file intact, no temp left */
    size_t nbig = 1 << 20;
    uint8_t *big = calloc(nbig, 1);
    size_t shb[1] = {nbig};
    lofp_tensor_desc db = {"big", LOFP_DTYPE_U8, 1, shb, big, nbig};
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 65536;
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        lofp_status st = lofp_file_write(path, LOFP_FORMAT_AUTO, &db, 1, NULL, 0, &err);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECKF(st == LOFP_ERR_IO, "fsize-limited write: %s (%s)", sname(st), err.message);
        CHECK(err.status == LOFP_ERR_IO && strstr(err.message, path) == err.message);
        CHECKF(strstr(err.message, "writing") != NULL, "%s", err.message);
        uint8_t *b = read_all(path, &blen);
        CHECK(b && blen == alen && memcmp(a, b, alen) == 0);
        free(b);
        CHECKF(count_entries(dir) == 1, "%d entries after a failed write", count_entries(dir));
    } else {
        fprintf(stderr, "note: setrlimit(RLIMIT_FSIZE) failed, skipping the disk-full case\n");
    }
    signal(SIGXFSZ, prev);

    /* 2. the destination is a directory */
    snprintf(sub, sizeof sub, "%s/isdir.safetensors", dir);
    CHECK(mkdir(sub, 0700) == 0);
    CHECK(lofp_file_write(sub, LOFP_FORMAT_AUTO, &d1, 1, NULL, 0, &err) == LOFP_ERR_IO);
    CHECK(strstr(err.message, "directory") != NULL);
    CHECK(count_entries(dir) == 2);
    rmdir(sub);

    /* 3. the destination directory does not exist */
    snprintf(sub, sizeof sub, "%s/missing/out.safetensors", dir);
    CHECK(lofp_file_write(sub, LOFP_FORMAT_AUTO, &d1, 1, NULL, 0, &err) == LOFP_ERR_IO);
    CHECK(strstr(err.message, "temporary file") != NULL);

    /* 4. the directory is not writable (permissions do not bind root: skipped there) */
    if (geteuid() != 0) {
        CHECK(chmod(dir, 0500) == 0);
        lofp_status st = lofp_file_write(path, LOFP_FORMAT_AUTO, &db, 1, NULL, 0, &err);
        CHECK(chmod(dir, 0700) == 0);
        CHECKF(st == LOFP_ERR_IO, "read-only dir: %s", sname(st));
        uint8_t *b = read_all(path, &blen);
        CHECK(b && blen == alen && memcmp(a, b, alen) == 0);
        free(b);
        CHECK(count_entries(dir) == 1);
    }

    /* 5. invalid requests touch nothing */
    lofp_tensor_desc bad = d1;
    bad.nbytes = 12;
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &bad, 1, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "needs 16 bytes but 12 were given") != NULL);
    lofp_tensor_desc dup[2] = {d1, d1};
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, dup, 2, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "duplicate") != NULL);
    lofp_metadata_entry m2[2] = {{"k", "a"}, {"k", "b"}};
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &d1, 1, m2, 2, &err) == LOFP_ERR_INVALID_ARG);
    lofp_tensor_desc reserved = d1;
    reserved.name = "__metadata__";
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &reserved, 1, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    lofp_tensor_desc badutf = d1;
    badutf.name = "\xff";
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &badutf, 1, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    size_t odd[2] = {4, 3};
    uint8_t six[6] = {0};
    lofp_tensor_desc f4odd = {"q", LOFP_DTYPE_F4, 2, odd, six, 6};
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &f4odd, 1, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "even last") != NULL);
    size_t huge[2] = {SIZE_MAX / 2, 4};
    lofp_tensor_desc hd = {"h", LOFP_DTYPE_U8, 2, huge, v1, 16};
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &hd, 1, NULL, 0, &err) == LOFP_ERR_SIZE_OVERFLOW);
    lofp_tensor_desc nodata = {"n", LOFP_DTYPE_F32, 1, sh1, NULL, 16};
    CHECK(lofp_file_write(path, LOFP_FORMAT_AUTO, &nodata, 1, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    snprintf(sub, sizeof sub, "%s/out.bin", dir);
    CHECK(lofp_file_write(sub, LOFP_FORMAT_AUTO, &d1, 1, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_file_write(NULL, LOFP_FORMAT_AUTO, &d1, 1, NULL, 0, &err) == LOFP_ERR_INVALID_ARG);
    {
        uint8_t *b = read_all(path, &blen);
        CHECK(b && blen == alen && memcmp(a, b, alen) == 0);
        free(b);
    }
    CHECK(count_entries(dir) == 1);

    /* 6. a successful overwrite replaces the file, and a reader holding the old mapping keeps
     *    seeing the old bytes (rename never modifies the old inode) */
    lofp_file *old_f = NULL;
    CHECK(lofp_file_open(path, LOFP_FORMAT_AUTO, &old_f, &err) == LOFP_OK);
    float v2[4] = {5, 6, 7, 8};
    lofp_tensor_desc d2 = {"y", LOFP_DTYPE_F32, 1, sh1, v2, 16};
    lofp_metadata_entry m1 = {"note", "second"};
    CHECK(lofp_file_write(path, LOFP_FORMAT_SAFETENSORS, &d2, 1, &m1, 1, &err) == LOFP_OK);
    CHECK(count_entries(dir) == 1);
    lofp_file *f = NULL;
    CHECK(lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err) == LOFP_OK);
    CHECK(f && lofp_file_find(f, "y") && !lofp_file_find(f, "x") &&
          !strcmp(lofp_file_metadata_get(f, "note"), "second") &&
          memcmp(lofp_file_find(f, "y")->data, v2, 16) == 0);
    lofp_file_close(f);
    CHECK(old_f && lofp_file_find(old_f, "x") && memcmp(lofp_file_find(old_f, "x")->data, v1, 16) == 0);
    lofp_file_close(old_f);

    /* 7. reading: missing file, a directory, an empty file */
    snprintf(sub, sizeof sub, "%s/nope.safetensors", dir);
    CHECK(lofp_file_open(sub, LOFP_FORMAT_AUTO, &f, &err) == LOFP_ERR_IO && f == NULL);
    CHECK(strstr(err.message, "cannot open") != NULL && strstr(err.message, sub) == err.message);
    CHECK(lofp_file_open(dir, LOFP_FORMAT_AUTO, &f, &err) == LOFP_ERR_IO);
    CHECK(strstr(err.message, "not a regular file") != NULL);
    snprintf(sub, sizeof sub, "%s/fifo.safetensors", dir);
    if (mkfifo(sub, 0600) == 0) {          /* must not block waiting for a writer */
        CHECK(lofp_file_open(sub, LOFP_FORMAT_AUTO, &f, &err) == LOFP_ERR_IO);
        CHECK(strstr(err.message, "not a regular file") != NULL);
        unlink(sub);
    }
    snprintf(sub, sizeof sub, "%s/empty.npy", dir);
    CHECK(write_raw(sub, "", 0) == 0);
    CHECK(lofp_file_open(sub, LOFP_FORMAT_AUTO, &f, &err) == LOFP_ERR_FORMAT);
    CHECK(strstr(err.message, "not an .npy file") != NULL);
    /* a relative path without a directory part works too */
    char cwd[600];
    if (getcwd(cwd, sizeof cwd) && chdir(dir) == 0) {
        CHECK(lofp_file_write("rel.npy", LOFP_FORMAT_AUTO, &d1, 1, NULL, 0, &err) == LOFP_OK);
        CHECK(lofp_file_open("rel.npy", LOFP_FORMAT_AUTO, &f, &err) == LOFP_OK);
        CHECK(f && !strcmp(lofp_file_tensor(f, 0)->name, "rel"));
        lofp_file_close(f);
        CHECK(chdir(cwd) == 0);
    }
    free(big);
    free(a);
}

/* ---- the JSON parser directly ------------------------------------------------------------- */

static void test_json(void)
{
    lofp_json_doc d;
    char msg[256];
    const char *t = " {\"a\":[1,-2,true,false,null,\"x\\u00e9\"],\"b\":{},\"c\":18446744073709551615} ";
    CHECK(lofp_json_parse(t, strlen(t), &d, msg, sizeof msg) == LOFP_OK);
    if (d.nodes) {
        CHECK(d.nodes[0].type == LOFP_JSON_OBJECT && d.nodes[0].count == 3);
        uint32_t a = lofp_json_get(&d, 0, "a"), b = lofp_json_get(&d, 0, "b"), c = lofp_json_get(&d, 0, "c");
        CHECK(a && d.nodes[a].type == LOFP_JSON_ARRAY && d.nodes[a].count == 6);
        CHECK(b && d.nodes[b].type == LOFP_JSON_OBJECT && d.nodes[b].count == 0);
        CHECK(c && d.nodes[c].type == LOFP_JSON_INT && d.nodes[c].num == UINT64_MAX);
        CHECK(lofp_json_get(&d, 0, "z") == 0);
        uint32_t e = d.nodes[a].first;
        CHECK(d.nodes[e].num == 1 && !d.nodes[e].negative);
        e = d.nodes[e].next;
        CHECK(d.nodes[e].num == 2 && d.nodes[e].negative);
        e = d.nodes[e].next;
        CHECK(d.nodes[e].type == LOFP_JSON_TRUE);
        e = d.nodes[d.nodes[e].next].next;
        CHECK(d.nodes[e].type == LOFP_JSON_NULL);
        e = d.nodes[e].next;
        CHECK(d.nodes[e].type == LOFP_JSON_STRING && d.nodes[e].count == 3 &&
              !memcmp(d.strings + d.nodes[e].first, "x\xc3\xa9", 4));
        lofp_json_free(&d);
    }
    const char *bad[] = {"18446744073709551616", "-18446744073709551616", "1.5", "[", "\"abc",
                         "{\"a\":1,\"a\":2}", "{\"b\":{\"a\":1,\"a\":2}}", "nul", "[1] [2]", "\"\\u",
                         "\"\\uD83D\\uDE0\"", "{\"a\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lofp_status st = lofp_json_parse(bad[i], strlen(bad[i]), &d, msg, sizeof msg);
        CHECKF(st == LOFP_ERR_FORMAT && strstr(msg, "JSON error at byte"), "'%s' -> %d %s", bad[i], st, msg);
        CHECK(d.nodes == NULL && d.strings == NULL);
    }
    /* many keys: the duplicate check sorts */
    lofp_sbuf s = {0};
    lofp_sbuf_puts(&s, "{");
    for (int i = 0; i < 5000; i++) lofp_sbuf_printf(&s, "%s\"k%d\":%d", i ? "," : "", (i * 7919) % 5000, i);
    lofp_sbuf_puts(&s, "}");
    CHECK(lofp_json_parse(s.p, s.len, &d, msg, sizeof msg) == LOFP_OK);
    lofp_json_free(&d);
    s.len -= 1;
    lofp_sbuf_puts(&s, ",\"k4999\":0}");
    CHECK(lofp_json_parse(s.p, s.len, &d, msg, sizeof msg) == LOFP_ERR_FORMAT && strstr(msg, "'k4999'"));
    lofp_sbuf_free(&s);
    /* the serde_json escaping of the writer, parsed back */
    lofp_sbuf w = {0};
    const char raw[] = "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f\xc3\xa9";
    lofp_sbuf_json_string(&w, raw, sizeof raw - 1);
    CHECK(!strcmp(w.p, "\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xc3\xa9\""));
    CHECK(lofp_json_parse(w.p, w.len, &d, msg, sizeof msg) == LOFP_OK);
    CHECK(d.nodes && d.nodes[0].count == sizeof raw - 1 && !memcmp(d.strings, raw, sizeof raw - 1));
    lofp_json_free(&d);
    lofp_sbuf_free(&w);
}

/* ---- interop with numpy and safetensors (tests/io/script_io_interop.sh) ---------------------- */

/* Writes the files tests/io/io_interop.py checks: DIR/manifest.txt has one line per tensor,
 * "<file> <tensor> <DTYPE> <seed> <ndim> <dims...>", the data being fill_pattern(seed). */
static void interop_write(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *man = fopen(path, "w");
    CHECK(man != NULL);
    if (!man) return;
    /* dtypes the installed safetensors (0.6) knows; FNUZ and C64 are newer */
    lofp_tensor_desc all[NCASES], ident[NCASES], np_only[NCASES];
    uint8_t *bufs[NCASES];
    size_t n_all = 0, n_ident = 0, n_np = 0;
    for (size_t i = 0; i < NCASES; i++) {
        const tcase *c = &cases[i];
        size_t nb = case_bytes(c);
        bufs[i] = malloc(nb + 1);
        fill_pattern(bufs[i], nb, (unsigned)i, c->dt);
        lofp_tensor_desc d = {lofp_dtype_name(c->dt), c->dt, c->ndim, c->shape, bufs[i], nb};
        int known = c->dt != LOFP_DTYPE_F8_E4M3FNUZ && c->dt != LOFP_DTYPE_F8_E5M2FNUZ && c->dt != LOFP_DTYPE_C64;
        int serializable = known && c->dt != LOFP_DTYPE_F6_E2M3 && c->dt != LOFP_DTYPE_F6_E3M2;
        int numpy = lofp_io_npy_descr(c->dt) && c->dt != LOFP_DTYPE_C64;
        if (known) all[n_all++] = d;
        if (serializable) ident[n_ident++] = d;
        if (numpy) np_only[n_np++] = d;
        const char *files[4] = {known ? "lofp_all.safetensors" : NULL,
                                serializable ? "lofp_ident.safetensors" : NULL,
                                numpy ? "lofp_np.safetensors" : NULL, NULL};
        char npy[64];
        if (lofp_io_npy_descr(c->dt)) {
            snprintf(npy, sizeof npy, "lofp_%s.npy", lofp_dtype_name(c->dt));
            files[3] = npy;
            snprintf(path, sizeof path, "%s/%s", dir, npy);
            lofp_io_error err;
            CHECKF(lofp_file_write(path, LOFP_FORMAT_AUTO, &d, 1, NULL, 0, &err) == LOFP_OK, "%s", err.message);
        }
        for (int k = 0; k < 4; k++) {
            if (!files[k]) continue;
            fprintf(man, "%s %s %s %zu %zu", files[k], k == 3 ? "-" : d.name, d.name, i, c->ndim);
            for (size_t j = 0; j < c->ndim; j++) fprintf(man, " %zu", c->shape[j]);
            fputc('\n', man);
        }
    }
    lofp_metadata_entry meta2[2] = {{"scheme", "nvfp4"}, {"note", "a \"b\" \\c\nd \xc3\xa9"}};
    lofp_metadata_entry meta1[1] = {{"format", "pt"}};
    lofp_io_error err;
    snprintf(path, sizeof path, "%s/lofp_all.safetensors", dir);
    CHECKF(lofp_file_write(path, LOFP_FORMAT_AUTO, all, n_all, meta2, 2, &err) == LOFP_OK, "%s", err.message);
    snprintf(path, sizeof path, "%s/lofp_ident.safetensors", dir);
    CHECKF(lofp_file_write(path, LOFP_FORMAT_AUTO, ident, n_ident, meta1, 1, &err) == LOFP_OK, "%s", err.message);
    snprintf(path, sizeof path, "%s/lofp_np.safetensors", dir);
    CHECKF(lofp_file_write(path, LOFP_FORMAT_AUTO, np_only, n_np, NULL, 0, &err) == LOFP_OK, "%s", err.message);
    fclose(man);
    for (size_t i = 0; i < NCASES; i++) free(bufs[i]);
}

static double dec_half(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

/* Element i of a tensor as a double, from first principles (an oracle independent of lofp). */
static double dec_elem(lofp_dtype dt, const uint8_t *p, size_t i)
{
    uint8_t b;
    uint16_t h;
    uint32_t u;
    uint64_t q;
    float f;
    double d;
    switch (dt) {
    case LOFP_DTYPE_BOOL: case LOFP_DTYPE_U8: return p[i];
    case LOFP_DTYPE_I8: return (int8_t)p[i];
    case LOFP_DTYPE_U16: memcpy(&h, p + 2 * i, 2); return h;
    case LOFP_DTYPE_I16: memcpy(&h, p + 2 * i, 2); return (int16_t)h;
    case LOFP_DTYPE_U32: memcpy(&u, p + 4 * i, 4); return u;
    case LOFP_DTYPE_I32: memcpy(&u, p + 4 * i, 4); return (int32_t)u;
    case LOFP_DTYPE_U64: memcpy(&q, p + 8 * i, 8); return (double)q;
    case LOFP_DTYPE_I64: memcpy(&q, p + 8 * i, 8); return (double)(int64_t)q;
    case LOFP_DTYPE_F16: memcpy(&h, p + 2 * i, 2); return dec_half(h);
    case LOFP_DTYPE_BF16: memcpy(&h, p + 2 * i, 2); u = (uint32_t)h << 16; memcpy(&f, &u, 4); return f;
    case LOFP_DTYPE_F32: memcpy(&f, p + 4 * i, 4); return f;
    case LOFP_DTYPE_F64: memcpy(&d, p + 8 * i, 8); return d;
    case LOFP_DTYPE_F8_E4M3: {
        b = p[i];
        int e = (b >> 3) & 15, m = b & 7;
        double v = (e == 15 && m == 7) ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
        return b & 0x80 ? -v : v;
    }
    case LOFP_DTYPE_F8_E5M2: {
        b = p[i];
        int e = (b >> 2) & 31, m = b & 3;
        double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -16) : ldexp(4 + m, e - 17);
        return b & 0x80 ? -v : v;
    }
    case LOFP_DTYPE_F8_E8M0: return p[i] == 0xFF ? NAN : ldexp(1.0, p[i] - 127);
    case LOFP_DTYPE_F4: {
        static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
        b = (uint8_t)(i % 2 ? p[i / 2] >> 4 : p[i / 2] & 15);
        return b & 8 ? -mag[b & 7] : mag[b & 7];
    }
    default: return NAN;
    }
}

static int same_double(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* Reads DIR/manifest.txt written by tests/io/io_interop.py:
 *   OK <file> <tensor|-> <DTYPE> <ndim> <dims...>   values in <file>.<tensor>.f64 (float64)
 *   ERR <file> <status>
 *   META <file> <key> <value> */
static void interop_read(const char *dir)
{
    char path[1024], kind[16], file[256], name[256], dtn[32];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *man = fopen(path, "r");
    CHECKF(man != NULL, "cannot open %s", path);
    if (!man) return;
    int checked = 0;
    while (fscanf(man, "%15s %255s", kind, file) == 2) {
        snprintf(path, sizeof path, "%s/%s", dir, file);
        lofp_file *f = NULL;
        lofp_io_error err;
        lofp_status st = lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err);
        if (!strcmp(kind, "ERR")) {
            int want;
            CHECK(fscanf(man, "%d", &want) == 1);
            CHECKF(st == (lofp_status)want, "%s: status %s, want %s (%s)", file, sname(st),
                   sname((lofp_status)want), st ? err.message : "opened");
            if (st) printf("  %-28s -> %s: %s\n", file, sname(st), err.message);
        } else if (!strcmp(kind, "META")) {
            char key[256], val[256];
            CHECK(fscanf(man, "%255s %255s", key, val) == 2);
            CHECKF(st == LOFP_OK, "%s: %s", file, err.message);
            const char *got = f ? lofp_file_metadata_get(f, key) : NULL;
            CHECKF(got && !strcmp(got, val), "%s: metadata %s = %s, want %s", file, key, got ? got : "(none)", val);
        } else {
            size_t ndim, dims[16];
            CHECK(fscanf(man, "%255s %31s %zu", name, dtn, &ndim) == 3 && ndim <= 16);
            for (size_t k = 0; k < ndim && k < 16; k++) CHECK(fscanf(man, "%zu", &dims[k]) == 1);
            CHECKF(st == LOFP_OK, "%s: %s", file, err.message);
            if (!f) continue;
            const lofp_tensor_info *t = strcmp(name, "-") ? lofp_file_find(f, name) : lofp_file_tensor(f, 0);
            CHECKF(t != NULL, "%s: no tensor %s", file, name);
            if (t) {
                lofp_dtype want;
                CHECK(lofp_dtype_from_name(dtn, &want) == LOFP_OK);
                CHECKF(t->dtype == want, "%s/%s: dtype %s, want %s", file, name, lofp_dtype_name(t->dtype), dtn);
                CHECKF(t->ndim == ndim, "%s/%s: ndim %zu, want %zu", file, name, t->ndim, ndim);
                for (size_t k = 0; k < ndim && k < t->ndim; k++) CHECK_EQ_U(t->shape[k], dims[k]);
                char vpath[1100];
                snprintf(vpath, sizeof vpath, "%s/%s.%s.f64", dir, file, name);
                size_t vlen = 0;
                uint8_t *vals = read_all(vpath, &vlen);
                CHECKF(vals && vlen == t->numel * 8, "%s: %zu bytes for %zu values", vpath, vlen, t->numel);
                size_t bad = 0;
                for (size_t i = 0; vals && i < t->numel && vlen == t->numel * 8; i++) {
                    double want_v;
                    memcpy(&want_v, vals + 8 * i, 8);
                    double got = dec_elem(t->dtype, t->data, i);
                    if (!same_double(got, want_v)) {
                        if (bad++ < 5) fprintf(stderr, "%s/%s[%zu]: %.17g, want %.17g\n", file, name, i, got, want_v);
                    }
                }
                CHECKF(bad == 0, "%s/%s: %zu values differ", file, name, bad);
                free(vals);
                printf("  %-28s %-12s %-8s %zu values ok\n", file, name, dtn, t->numel);
                checked++;
            }
        }
        lofp_file_close(f);
    }
    fclose(man);
    CHECKF(checked > 10, "only %d tensors checked", checked);
}

int main(void)
{
    const char *w = getenv("LOFP_IO_INTEROP_WRITE"), *r = getenv("LOFP_IO_INTEROP_READ");
    if (w) { interop_write(w); return tu_finish("test_io (interop write)"); }
    if (r) { interop_read(r); return tu_finish("test_io (interop read)"); }
    make_tmp_root();
    test_dtypes();
    test_to_f32();
    test_error_stats();
    test_json();
    test_roundtrip_safetensors();
    test_roundtrip_npy();
    test_malformed_safetensors();
    test_malformed_npy();
    test_torture();
    test_atomic_write();
    rm_rf(tmp_root);
    return tu_finish("test_io");
}

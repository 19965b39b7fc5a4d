/* test_calib.c -- the calibration-file reader (lofp/calib.h) on files built here with io's
 * safetensors encoder: the means it hands out against sums this test computes in double from its
 * own activations; the refusals (a file of another model, a missing layer, NaN, a negative
 * diagonal, a zero token count, a truncated file, wrong metadata), each with its status and a
 * message naming the file, the tensor and the index; then the fuzzer's corpus (fuzz/corpus/calib)
 * through the harness's property (fuzz/fuzz_calib.c). tests/python/test_calibrate.py covers
 * imatrix files written by gguf-py and files written by lofp calibrate. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "lofp/io.h"
#include "../../fuzz/fuzz_calib.c"

#define CORPUS LOFP_GOLDEN_DIR "/../../fuzz/corpus/calib"
#define K 6
#define T 10

static uint8_t file_buf[1 << 16];
static size_t file_len;

/* A calibration file of one weight "w.weight": X^T X (or its diagonal) of x, `tokens` stored. */
static void build(int hessian, const float *stat, size_t k, int64_t tokens, const char *fmt, const char *ver)
{
    size_t sh2[2] = {k, k}, sh1[1] = {k}, one[1] = {1};
    lofp_tensor_desc t[2] = {
        {hessian ? "w.weight.xtx" : "w.weight.x2", LOFP_DTYPE_F32, hessian ? 2u : 1u, hessian ? sh2 : sh1, stat,
         (hessian ? k * k : k) * 4},
        {"w.weight.tokens", LOFP_DTYPE_I64, 1, one, &tokens, 8},
    };
    lofp_metadata_entry m[3] = {{"format", fmt}, {"version", ver}, {"statistic", hessian ? "hessian" : "diag"}};
    lofp_io_error err;
    lofp_status st = lofp_file_encode(LOFP_FORMAT_SAFETENSORS, t, 2, m, 3, file_buf, sizeof file_buf, &file_len, &err);
    CHECKF(st == LOFP_OK, "encode: %s", err.message);
}

static lofp_status open_find(size_t k, float *diag, float *hess, uint64_t *tokens, const char *weight,
                             lofp_io_error *err)
{
    lofp_calib *c = NULL;
    lofp_status st = lofp_calib_open_memory(file_buf, file_len, "t.calib", &c, err);
    if (st != LOFP_OK) return st;
    st = lofp_calib_find(c, weight, k, diag, hess, tokens, err);
    lofp_calib_close(c);
    return st;
}

static void expect(lofp_status got, lofp_status want, const lofp_io_error *err, const char *needle)
{
    CHECKF(got == want, "status %d, expected %d (%s)", (int)got, (int)want, err->message);
    CHECKF(strstr(err->message, "t.calib") != NULL, "message does not name the file: %s", err->message);
    CHECKF(strstr(err->message, needle) != NULL, "message lacks '%s': %s", needle, err->message);
}

static void test_means_and_refusals(void)
{
    /* activations and their sums in double, by the definition */
    tu_rng r = {12345};
    double x[T][K], h[K][K];
    for (int t = 0; t < T; t++)
        for (int i = 0; i < K; i++) x[t][i] = tu_normal(&r);
    float hs[K * K], ds[K];
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++) {
            double s = 0;
            for (int t = 0; t < T; t++) s += x[t][i] * x[t][j];
            h[i][j] = s;
            hs[i * K + j] = (float)s;
        }
    for (int i = 0; i < K; i++) ds[i] = hs[i * K + i];

    float diag[K], hess[K * K];
    uint64_t tokens = 0;
    lofp_io_error err;
    build(1, hs, K, T, "lofp-calibration", "1");
    CHECK_OK(open_find(K, diag, hess, &tokens, "w.weight", &err));
    CHECK_EQ_U(tokens, T);
    for (int i = 0; i < K; i++) {
        CHECKF(fabs(diag[i] - h[i][i] / T) <= 1e-6 * fabs(h[i][i] / T), "diag[%d] %g vs %g", i, diag[i], h[i][i] / T);
        CHECKF(memcmp(&diag[i], &hess[i * K + i], 4) == 0, "diag[%d] is not the Hessian's", i);
        for (int j = 0; j < K; j++)
            CHECKF(fabs(hess[i * K + j] - h[i][j] / T) <= 1e-6 * (fabs(h[i][j] / T) + 1e-30), "hess[%d][%d]", i, j);
    }
    /* a file of another model: k differs; both shapes named */
    expect(open_find(K + 2, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_MISMATCH, &err, "[6, 6]");
    CHECKF(strstr(err.message, "k = 8") != NULL, "%s", err.message);
    /* a missing layer */
    expect(open_find(K, diag, NULL, NULL, "v.weight", &err), LOFP_ERR_NOT_FOUND, &err, "'v.weight'");
    /* NaN off the diagonal: refused with the Hessian, the diagonal alone is fine */
    float bad[K * K];
    memcpy(bad, hs, sizeof bad);
    bad[2 * K + 4] = NAN;
    build(1, bad, K, T, "lofp-calibration", "1");
    expect(open_find(K, diag, hess, NULL, "w.weight", &err), LOFP_ERR_FORMAT, &err, "'w.weight.xtx' [16]");
    CHECK_OK(open_find(K, diag, NULL, NULL, "w.weight", &err));
    memcpy(bad, hs, sizeof bad);
    bad[3 * K + 3] = -1.0f;
    build(1, bad, K, T, "lofp-calibration", "1");
    expect(open_find(K, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_FORMAT, &err, "[21]: negative");
    /* diagonal files */
    build(0, ds, K, T, "lofp-calibration", "1");
    CHECK_OK(open_find(K, diag, NULL, &tokens, "w.weight", &err));
    for (int i = 0; i < K; i++) CHECK(diag[i] == (float)((double)ds[i] / T));
    expect(open_find(K, diag, hess, NULL, "w.weight", &err), LOFP_ERR_UNSUPPORTED, &err, "only the diagonal");
    float inf[K];
    memcpy(inf, ds, sizeof inf);
    inf[5] = INFINITY;
    build(0, inf, K, T, "lofp-calibration", "1");
    expect(open_find(K, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_FORMAT, &err, "'w.weight.x2' [5]");
    build(0, ds, K, 0, "lofp-calibration", "1");
    expect(open_find(K, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_FORMAT, &err, "token count 0");
    build(0, ds, K, -3, "lofp-calibration", "1");
    expect(open_find(K, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_FORMAT, &err, "token count -3");
    /* container and metadata */
    build(0, ds, K, T, "something-else", "1");
    expect(open_find(K, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_FORMAT, &err, "not a calibration file");
    build(0, ds, K, T, "lofp-calibration", "9");
    expect(open_find(K, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_UNSUPPORTED, &err, "version '9'");
    build(0, ds, K, T, "lofp-calibration", "1");
    file_len -= 3; /* truncated */
    expect(open_find(K, diag, NULL, NULL, "w.weight", &err), LOFP_ERR_FORMAT, &err, "t.calib");
    CHECK(lofp_calib_find(NULL, "w", 1, diag, NULL, NULL, &err) == LOFP_ERR_INVALID_ARG);
}

static void replay_corpus(void)
{
    DIR *d = opendir(CORPUS);
    CHECKF(d != NULL, "cannot open %s", CORPUS);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", CORPUS, e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        size_t got = fread(file_buf, 1, sizeof file_buf, f);
        fclose(f);
        const char *bad = lofp_fuzz_calib_check(file_buf, got);
        CHECKF(bad == NULL, "%s: %s", p, bad ? bad : "");
        n++;
    }
    closedir(d);
    CHECKF(n >= 10, "only %d corpus files", n);
    printf("test_calib: %d corpus files replayed\n", n);
}

int main(void)
{
    test_means_and_refusals();
    replay_corpus();
    return tu_finish("test_calib");
}

/* test_profiles.c -- every producer profile against the golden fixtures its producer's own code
 * wrote (tests/quant/fixtures/, scripts/fixtures/make_fixtures.py): 100 % of codes, scale bytes
 * and per-tensor scales must be equal. Also: the profile's dequantization, names, validation,
 * and that the default profile is untouched (the other golden tests pin its bytes). */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/io.h"
#include "test_util.h"

#define FIXDIR LOFP_GOLDEN_DIR "/../quant/fixtures"

static size_t total_cases, total_bytes;

static void check_file(const char *fname, const lofp_file *in)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", FIXDIR, fname);
    lofp_file *f = NULL;
    lofp_io_error err;
    if (lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err) != LOFP_OK) {
        CHECKF(0, "%s: %s", path, err.message);
        return;
    }
    const char *prof = lofp_file_metadata_get(f, "profile"), *scheme = lofp_file_metadata_get(f, "scheme");
    const char *rule = lofp_file_metadata_get(f, "scale_rule"), *two = lofp_file_metadata_get(f, "two_level");
    const char *input = lofp_file_metadata_get(f, "input"), *prop = lofp_file_metadata_get(f, "propagate_nonfinite");
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset(scheme, &s));
    CHECK_OK(lofp_profile_from_name(prof, &s.profile));
    if (rule) CHECK_OK(lofp_scale_rule_from_name(rule, &s.scale_rule));
    if (two) s.two_level = atoi(two);
    if (prop) s.propagate_nonfinite = atoi(prop);
    CHECK_OK(lofp_scheme_validate(&s));
    const int bf16 = input && strcmp(input, "bf16") == 0;
    size_t cases = 0, bad_cases = 0;
    for (size_t i = 0; i < lofp_file_count(f); i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        size_t nl = strlen(t->name);
        if (nl < 6 || strcmp(t->name + nl - 6, ".codes") != 0) continue;
        char cname[256], key[300];
        snprintf(cname, sizeof cname, "%.*s", (int)(nl - 6), t->name);
        snprintf(key, sizeof key, "%s%s", bf16 ? "bf16/" : "", cname);
        const lofp_tensor_info *x = lofp_file_find(in, key);
        snprintf(key, sizeof key, "%s.scales", cname);
        const lofp_tensor_info *sc = lofp_file_find(f, key);
        snprintf(key, sizeof key, "%s.global", cname);
        const lofp_tensor_info *gl = lofp_file_find(f, key);
        if (!x || !sc) { CHECKF(0, "%s: %s: missing input or scales", fname, cname); continue; }
        size_t rows = x->shape[0], k = bf16 ? x->shape[1] / 2 : x->shape[1];
        size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
        CHECKF(cb == t->nbytes && sb == sc->nbytes, "%s %s: sizes %zu/%zu vs %zu/%zu", fname, cname,
               cb, sb, (size_t)t->nbytes, (size_t)sc->nbytes);
        if (cb != t->nbytes || sb != sc->nbytes) continue;
        uint8_t *codes = malloc(cb), *scales = malloc(sb);
        float g = -1.0f;
        lofp_quant_report rep;
        lofp_status st = lofp_quantize(&s, bf16 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F32, x->data, rows, k,
                                       codes, scales, &g, &rep);
        CHECKF(st == LOFP_OK, "%s %s: %s", fname, cname, lofp_status_name(st));
        size_t dc = 0, ds = 0, first_c = (size_t)-1, first_s = (size_t)-1;
        const uint8_t *ec = t->data, *es = sc->data;
        for (size_t j = 0; j < cb; j++) if (codes[j] != ec[j]) { if (!dc++) first_c = j; }
        for (size_t j = 0; j < sb; j++) if (scales[j] != es[j]) { if (!ds++) first_s = j; }
        int gbad = 0;
        if (gl) {
            float eg;
            memcpy(&eg, gl->data, 4);
            gbad = memcmp(&eg, &g, 4) != 0;
            CHECKF(!gbad, "%s %s: per-tensor scale %a, producer %a", fname, cname, g, eg);
        }
        CHECKF(dc == 0, "%s %s: %zu code bytes differ (first %zu: %02x vs producer %02x)", fname,
               cname, dc, first_c, dc ? codes[first_c] : 0, dc ? ec[first_c] : 0);
        CHECKF(ds == 0, "%s %s: %zu scale bytes differ (first %zu: %02x vs producer %02x)", fname,
               cname, ds, first_s, ds ? scales[first_s] : 0, ds ? es[first_s] : 0);
        bad_cases += dc || ds || gbad;
        /* quantize_with_global with the producer's per-tensor scale gives the same bytes */
        if (gl && st == LOFP_OK) {
            uint8_t *c2 = malloc(cb), *s2 = malloc(sb);
            CHECK_OK(lofp_quantize_with_global(&s, bf16 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F32, x->data,
                                               rows, k, g, c2, s2, NULL));
            CHECK(memcmp(c2, codes, cb) == 0 && memcmp(s2, scales, sb) == 0);
            free(c2);
            free(s2);
        }
        total_bytes += cb + sb;
        free(codes);
        free(scales);
        cases++;
    }
    total_cases += cases;
    printf("  %-40s %2zu cases, %zu differ\n", fname, cases, bad_cases);
    lofp_file_close(f);
}

static void test_fixtures(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/inputs.safetensors", FIXDIR);
    lofp_file *in = NULL;
    lofp_io_error err;
    if (lofp_file_open(path, LOFP_FORMAT_AUTO, &in, &err) != LOFP_OK) {
        CHECKF(0, "%s: %s", path, err.message);
        return;
    }
    DIR *d = opendir(FIXDIR);
    CHECK(d != NULL);
    if (!d) return;
    char *names[256];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256)
        if (strstr(e->d_name, "__") && strstr(e->d_name, ".safetensors")) names[nn++] = strdup(e->d_name);
    closedir(d);
    for (int i = 0; i < nn; i++)
        for (int j = i + 1; j < nn; j++)
            if (strcmp(names[i], names[j]) > 0) { char *t = names[i]; names[i] = names[j]; names[j] = t; }
    for (int i = 0; i < nn; i++) { check_file(names[i], in); free(names[i]); }
    CHECK(nn >= 30);
    printf("fixtures: %d files, %zu cases, %zu code and scale bytes compared\n", nn, total_cases, total_bytes);
    lofp_file_close(in);
}

/* The catalogue's minimal inputs, each profile's answer next to lofp's (docs/CHECKPOINTS.md). */
static void test_catalogue(void)
{
    lofp_scheme s;
    float x[32] = { 0 };
    uint8_t c[16], sc[2];
    float g;
    /* D: torchao one-level NVFP4 clamps the block scale to 2^-6 */
    CHECK_OK(lofp_scheme_preset("nvfp4", &s));
    s.two_level = 0;
    x[0] = 0.03f; x[1] = 0.01f;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 16, c, sc, &g, NULL));
    CHECK_EQ_U(sc[0], 0x03);
    s.profile = LOFP_PROFILE_TORCHAO;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 16, c, sc, &g, NULL));
    CHECK_EQ_U(sc[0], 0x08);
    /* torchao two-level NVFP4 of an all-zero tensor: per-tensor scale 0, every block scale 0/0
     * (byte 0xFF), every element x * NaN with the bits of torch's fp8 -> fp32 cast of 0xFF
     * (0xFFF00000), which torchao's FP4 cast turns into code 0xC. torchao 0.18.0 with torch 2.14
     * writes exactly these bytes (python -m lofp.vectors check --impl torchao, docs/CONFORMANCE.md);
     * with the NaN taken as 0xFFC00000 the code would be 0xB. */
    memset(x, 0, sizeof x);
    s.two_level = 1;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 16, c, sc, &g, NULL));
    CHECK(g == 0.0f);
    CHECK_EQ_U(sc[0], 0xFF);
    for (int i = 0; i < 8; i++) CHECK_EQ_U(c[i], 0xCC);
    /* L: ggml's fp32 log2 puts 7.9999995 in the next binade */
    memset(x, 0, sizeof x);
    x[0] = 7.9999995f; x[1] = 1.0f;
    CHECK_OK(lofp_scheme_preset("mxfp4", &s));
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 32, c, sc, &g, NULL));
    CHECK_EQ_U(sc[0], 0x7F);
    s.profile = LOFP_PROFILE_GGML;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 32, c, sc, &g, NULL));
    CHECK_EQ_U(sc[0], 0x80);
    /* ModelOpt MXFP4 writes exact zeros as 0x8 */
    s.profile = LOFP_PROFILE_MODELOPT;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 32, c, sc, &g, NULL));
    CHECK_EQ_U(c[1] & 0x0F, 0x8);
    /* names and support */
    lofp_profile p;
    CHECK_OK(lofp_profile_from_name("ct", &p));
    CHECK(p == LOFP_PROFILE_COMPRESSED_TENSORS);
    CHECK_OK(lofp_profile_from_name("gguf", &p));
    CHECK(p == LOFP_PROFILE_GGML);
    CHECK(lofp_profile_from_name("nope", &p) == LOFP_ERR_NOT_FOUND);
    CHECK(strcmp(lofp_profile_name(LOFP_PROFILE_TORCHAO), "torchao") == 0);
    CHECK(lofp_profile_decode_direction(LOFP_PROFILE_MODELOPT) && !lofp_profile_decode_direction(LOFP_PROFILE_COMPRESSED_TENSORS));
    CHECK_OK(lofp_scheme_preset("mxint8", &s));
    s.profile = LOFP_PROFILE_TORCHAO;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    CHECK_OK(lofp_scheme_preset("nvfp4", &s));
    s.profile = LOFP_PROFILE_GGML;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
    s.profile = LOFP_PROFILE_COUNT_;
    CHECK(lofp_scheme_validate(&s) == LOFP_ERR_INVALID_ARG);
}

/* Dequantization per producer: ModelOpt code * (s * s2), compressed-tensors code * (s / G). */
static void test_dequant(void)
{
    lofp_scheme s;
    CHECK_OK(lofp_scheme_preset("nvfp4", &s));
    s.profile = LOFP_PROFILE_MODELOPT;
    float x[16], y[16], g;
    for (int i = 0; i < 16; i++) x[i] = (float)(i - 7) * 0.37f;
    uint8_t c[8], sc[1];
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 16, c, sc, &g, NULL));
    CHECK_OK(lofp_dequantize(&s, c, sc, g, 1, 16, LOFP_DTYPE_F32, y));
    float base = lofp_decode(LOFP_ELEM_E4M3, sc[0]) * g;
    for (int i = 0; i < 16; i++) {
        float want = lofp_decode(LOFP_ELEM_E2M1, (c[i / 2] >> (4 * (i & 1))) & 15) * base;
        CHECK(memcmp(&want, &y[i], 4) == 0);
    }
    s.profile = LOFP_PROFILE_COMPRESSED_TENSORS;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 16, c, sc, &g, NULL));
    CHECK_OK(lofp_dequantize(&s, c, sc, g, 1, 16, LOFP_DTYPE_F32, y));
    base = lofp_decode(LOFP_ELEM_E4M3, sc[0]) / g;
    for (int i = 0; i < 16; i++) {
        float want = lofp_decode(LOFP_ELEM_E2M1, (c[i / 2] >> (4 * (i & 1))) & 15) * base;
        CHECK(memcmp(&want, &y[i], 4) == 0);
    }
}

int main(void)
{
    test_fixtures();
    test_catalogue();
    test_dequant();
    return tu_finish("test_profiles");
}

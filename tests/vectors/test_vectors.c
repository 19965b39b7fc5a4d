/* test_vectors.c -- the suite generator (src/vectors): SHA-256 against the FIPS 180-4 examples,
 * the files against the manifest (line counts, checksums recomputed here, byte sizes), ids unique
 * within each file, two runs byte-identical, and the enumeration's coverage: every element type
 * has every class of input the suite promises, every scheme and profile pair appears. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "vectors/vec_internal.h"

static void sha_hex(const void *p, size_t n, char out[65])
{
    uint8_t d[32];
    lofp_vec_sha256(p, n, d);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_sha256(void)
{
    char h[65];
    sha_hex("", 0, h);
    CHECK(strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    sha_hex("abc", 3, h);
    CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes: two blocks */
    sha_hex(two, strlen(two), h);
    CHECK(strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
    char *m = malloc(1000000);
    memset(m, 'a', 1000000);
    sha_hex(m, 1000000, h);
    CHECK(strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
    free(m);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    size_t got = fread(b, 1, (size_t)len, f);
    fclose(f);
    b[got] = 0;
    *n = got;
    return b;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Lines of buf, the ids unique, the count and the checksum the manifest gives. */
static void check_file(const char *dir, const char *name, size_t want_cases, const char *manifest)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n = 0;
    char *b = slurp(path, &n);
    CHECKF(b != NULL, "%s", path);
    if (!b) return;
    size_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += b[i] == '\n';
    CHECK_EQ_U(lines, want_cases);
    char h[65], entry[256];
    sha_hex(b, n, h);
    snprintf(entry, sizeof entry, "\"name\": \"%s\", \"cases\": %zu, \"bytes\": %zu, \"sha256\": \"%s\"",
             name, want_cases, n, h);
    CHECKF(strstr(manifest, entry) != NULL, "manifest lacks %s", entry);
    char **ids = malloc(lines * sizeof *ids);
    size_t k = 0;
    for (char *p = b; *p && k < lines; k++) {
        CHECK(strncmp(p, "{\"id\":\"", 7) == 0);
        char *q = strchr(p + 7, '"');
        *q = 0;
        ids[k] = p + 7;
        p = strchr(q + 1, '\n') + 1;
    }
    qsort(ids, k, sizeof *ids, cmp_str);
    size_t dups = 0;
    for (size_t i = 1; i < k; i++) dups += strcmp(ids[i - 1], ids[i]) == 0;
    CHECKF(dups == 0, "%s: %zu duplicate ids", name, dups);
    free(ids);
    free(b);
}

static size_t count_substr(const char *hay, const char *needle)
{
    size_t c = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) c++;
    return c;
}

int main(void)
{
    test_sha256();
    char d1[] = "/tmp/lofp_vectors_a_XXXXXX", d2[] = "/tmp/lofp_vectors_b_XXXXXX";
    CHECK(mkdtemp(d1) && mkdtemp(d2));
    lofp_vectors_summary s1, s2;
    lofp_io_error err;
    CHECK_OK(lofp_vectors_write(d1, &s1, &err));
    char sub[600];
    snprintf(sub, sizeof sub, "%s/new/deeper", d2);
    CHECK_OK(lofp_vectors_write(sub, &s2, &err)); /* missing parents are created */
    CHECK(lofp_vectors_write(NULL, NULL, &err) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_vectors_write("/proc/lofp-no-such/x", NULL, &err) == LOFP_ERR_IO);
    CHECK(strstr(err.message, "/proc/lofp-no-such") != NULL);
    CHECK(memcmp(&s1, &s2, sizeof s1) == 0);
    CHECK(s1.element_cases > 5000 && s1.block_cases > 1000 && s1.layout_cases >= 100);
    CHECKF(s1.bytes < 8u << 20, "suite is %zu bytes; keep it a few MB", s1.bytes);

    char path[700];
    size_t mn = 0, m2n = 0;
    snprintf(path, sizeof path, "%s/manifest.json", d1);
    char *man = slurp(path, &mn);
    snprintf(path, sizeof path, "%s/manifest.json", sub);
    char *man2 = slurp(path, &m2n);
    CHECK(man && man2 && mn == m2n && memcmp(man, man2, mn) == 0); /* same bytes twice */
    if (man) {
        char ver[64];
        snprintf(ver, sizeof ver, "\"lofp_version\": \"%s\"", lofp_version());
        CHECK(strstr(man, ver) != NULL);
        check_file(d1, "element.jsonl", s1.element_cases, man);
        check_file(d1, "block.jsonl", s1.block_cases, man);
        check_file(d1, "layout.jsonl", s1.layout_cases, man);
    }

    /* Coverage of the enumeration. */
    size_t en = 0, bn = 0;
    snprintf(path, sizeof path, "%s/element.jsonl", d1);
    char *el = slurp(path, &en);
    snprintf(path, sizeof path, "%s/block.jsonl", d1);
    char *bl = slurp(path, &bn);
    static const char *const elems[] = { "e2m1", "e2m3", "e3m2", "e4m3", "e5m2", "e8m0", "ue4m3", "mxint8" };
    static const char *const classes[] = { "value", "midpoint", "below-midpoint", "above-midpoint",
        "zero", "above-max", "overflow-midpoint", "half-min-subnormal", "nan", "inf", "fp32-subnormal" };
    for (size_t e = 0; e < 8 && el; e++)
        for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++)
            for (int o = 0; o < 2; o++) {
                /* The x field varies between them: the prefix and the class on one line. */
                char pre[64], cls[64];
                snprintf(pre, sizeof pre, "\"elem\":\"%s\",\"overflow\":\"%s\"", elems[e], o ? "ieee" : "saturate");
                snprintf(cls, sizeof cls, "\"class\":\"%s\"", classes[c]);
                int found = 0;
                for (char *p = el; !found && (p = strstr(p, pre)) != NULL; p++) {
                    char *eol = strchr(p, '\n'); /* search this line only */
                    if (eol) *eol = 0;
                    found = strstr(p, cls) != NULL;
                    if (eol) *eol = '\n';
                }
                CHECKF(found, "no %s input for %s", classes[c], pre);
            }
    /* E4M3 alone has 254 values, 252 midpoints with 504 neighbours and the edges. */
    CHECK(el && count_substr(el, "\"elem\":\"e4m3\",\"overflow\":\"saturate\"") > 700);
    static const char *const pairs[] = {
        "\"scheme\":\"nvfp4\",\"two_level\":true", "\"scheme\":\"nvfp4\",\"two_level\":false",
        "\"scheme\":\"mxfp4\"", "\"scheme\":\"mxfp6-e2m3\"", "\"scheme\":\"mxfp6-e3m2\"",
        "\"scheme\":\"mxfp8-e4m3\"", "\"scheme\":\"mxfp8-e5m2\"", "\"scheme\":\"mxint8\"",
        "\"modelopt\":{", "\"compressed-tensors\":{", "\"torchao\":{", "\"ggml\":{",
        "\"scale_rule\":\"floor\"", "\"scale_rule\":\"ceil\"", "\"scale_rule\":\"even\"",
        "\"scale_rule\":\"rceil\"", "\"case\":\"zero-block\"", "\"case\":\"lone-nan\"",
        "\"case\":\"k-not-multiple-padded\"", "\"case\":\"amax-above-2^127\"",
        "\"case\":\"amax-below-2^-126\"", "\"status\":\"nonfinite\"", "\":false", };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0] && bl; i++)
        CHECKF(strstr(bl, pairs[i]) != NULL, "block.jsonl lacks %s", pairs[i]);
    free(el);
    free(bl);
    free(man);
    free(man2);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", d1, d2);
    CHECK(system(cmd) == 0);
    return tu_finish("test_vectors");
}

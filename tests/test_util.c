#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tu_failures = 0;

int tu_finish(const char *name)
{
    if (tu_failures) {
        fprintf(stderr, "%s: %d check(s) FAILED\n", name, tu_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

uint64_t tu_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tu_uniform(tu_rng *r) { return (double)(tu_next(r) >> 11) * 0x1.0p-53; }

double tu_normal(tu_rng *r)
{
    double u1 = tu_uniform(r), u2 = tu_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int tu_threads(void)
{
    const char *e = getenv("LOFP_TEST_THREADS");
    int n = e ? atoi(e) : 2;
    return n < 1 ? 1 : n;
}

uint32_t tu_exhaustive_stride(void)
{
    const char *e = getenv("LOFP_EXHAUSTIVE_STRIDE");
    long v = e ? atol(e) : 1;
    return v < 1 ? 1u : (uint32_t)v;
}

/* Minimal .npy v1/v2 reader for the golden vectors: C order, little-endian, no pickles. */
tu_npy tu_load_golden(const char *rel)
{
    tu_npy a;
    memset(&a, 0, sizeof a);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", LOFP_GOLDEN_DIR, rel);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open golden file %s\n", path); exit(2); }
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "%s: not an .npy file\n", path); exit(2);
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else {
        unsigned char more[2];
        if (fread(more, 1, 2, f) != 2) { fprintf(stderr, "%s: short\n", path); exit(2); }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)more[0] << 16 | (size_t)more[1] << 24;
    }
    char *hdr = calloc(1, hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, f) != hlen) { fprintf(stderr, "%s: short header\n", path); exit(2); }
    char *d = strstr(hdr, "'descr': '");
    char *s = strstr(hdr, "'shape': (");
    if (!d || !s || strstr(hdr, "'fortran_order': True")) {
        fprintf(stderr, "%s: unsupported header %s\n", path, hdr); exit(2);
    }
    d += 10;
    size_t i = 0;
    while (d[i] && d[i] != '\'' && i < sizeof a.descr - 1) { a.descr[i] = d[i]; i++; }
    a.itemsize = (size_t)atoi(a.descr + 2);
    s += 10;
    a.count = 1;
    while (*s && *s != ')') {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        char *end;
        size_t v = strtoull(s, &end, 10);
        if (end == s) break;
        a.shape[a.ndim++] = v;
        a.count *= v;
        s = end;
    }
    free(hdr);
    a.data = malloc(a.count * a.itemsize + 1);
    if (!a.data || fread(a.data, a.itemsize, a.count, f) != a.count) {
        fprintf(stderr, "%s: short data\n", path); exit(2);
    }
    fclose(f);
    return a;
}

void tu_npy_free(tu_npy *a)
{
    free(a->data);
    a->data = NULL;
}

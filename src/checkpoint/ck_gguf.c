/* ck_gguf.c -- the GGUF container (ggml docs/gguf.md): a validating reader over a buffer or a
 * read-only mapping, decoders of the ggml block types lofp requantizes from, and a streaming
 * writer. It lives in the checkpoint component rather than io because a GGUF tensor's element
 * type is a ggml block type (Q4_1, MXFP4, ...), not one of io's dtypes, and every use of it is a
 * checkpoint conversion; the container parser itself needs nothing but libc, which keeps its
 * libFuzzer harness (fuzz/fuzz_gguf.c) small. */
#include "ck_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { uint32_t type; const char *name; uint32_t blck, bytes; } gg_types[] = {
    { 0, "F32", 1, 4 },       { 1, "F16", 1, 2 },       { 2, "Q4_0", 32, 18 },   { 3, "Q4_1", 32, 20 },
    { 6, "Q5_0", 32, 22 },    { 7, "Q5_1", 32, 24 },    { 8, "Q8_0", 32, 34 },   { 9, "Q8_1", 32, 40 },
    { 10, "Q2_K", 256, 84 },  { 11, "Q3_K", 256, 110 }, { 12, "Q4_K", 256, 144 }, { 13, "Q5_K", 256, 176 },
    { 14, "Q6_K", 256, 210 }, { 15, "Q8_K", 256, 292 }, { 16, "IQ2_XXS", 256, 66 }, { 17, "IQ2_XS", 256, 74 },
    { 18, "IQ3_XXS", 256, 98 }, { 19, "IQ1_S", 256, 50 }, { 20, "IQ4_NL", 32, 18 }, { 21, "IQ3_S", 256, 110 },
    { 22, "IQ2_S", 256, 82 }, { 23, "IQ4_XS", 256, 136 }, { 24, "I8", 1, 1 },     { 25, "I16", 1, 2 },
    { 26, "I32", 1, 4 },      { 27, "I64", 1, 8 },      { 28, "F64", 1, 8 },     { 29, "IQ1_M", 256, 56 },
    { 30, "BF16", 1, 2 },     { 34, "TQ1_0", 256, 54 }, { 35, "TQ2_0", 256, 66 }, { 39, "MXFP4", 32, 17 },
    { 40, "NVFP4", 64, 36 },  { 41, "Q1_0", 128, 18 },
};

int lofp_gg_type_info(uint32_t type, uint32_t *blck, uint32_t *bytes)
{
    for (size_t i = 0; i < sizeof gg_types / sizeof gg_types[0]; i++)
        if (gg_types[i].type == type) {
            if (blck) *blck = gg_types[i].blck;
            if (bytes) *bytes = gg_types[i].bytes;
            return 1;
        }
    return 0;
}

const char *lofp_gg_type_name(uint32_t type)
{
    for (size_t i = 0; i < sizeof gg_types / sizeof gg_types[0]; i++)
        if (gg_types[i].type == type) return gg_types[i].name;
    return NULL;
}

static const size_t kv_scalar_size[GGV_COUNT_] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

typedef struct {
    const uint8_t *b;
    size_t len, pos;
    const char *name;
    lofp_io_error *err;
    lofp_status st;
} rd;

static int rfail(rd *r, lofp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rfail(rd *r, lofp_status st, const char *fmt, ...)
{
    if (r->st) return 0;
    r->st = st;
    if (r->err) {
        char m[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        lofp_ck_fail(r->err, st, "%s: %s", r->name, m);
    }
    return 0;
}

static int rd_u32(rd *r, uint32_t *v, const char *what)
{
    if (r->len - r->pos < 4) return rfail(r, LOFP_ERR_FORMAT, "truncated at byte %zu reading %s", r->pos, what);
    *v = 0;
    for (int i = 0; i < 4; i++) *v |= (uint32_t)r->b[r->pos + i] << (8 * i);
    r->pos += 4;
    return 1;
}

static int rd_u64(rd *r, uint64_t *v, const char *what)
{
    if (r->len - r->pos < 8) return rfail(r, LOFP_ERR_FORMAT, "truncated at byte %zu reading %s", r->pos, what);
    *v = 0;
    for (int i = 0; i < 8; i++) *v |= (uint64_t)r->b[r->pos + i] << (8 * i);
    r->pos += 8;
    return 1;
}

static int rd_str(rd *r, const char **s, size_t *n, const char *what)
{
    uint64_t l = 0;
    if (!rd_u64(r, &l, what)) return 0;
    if (l > r->len - r->pos) return rfail(r, LOFP_ERR_FORMAT, "%s: string length %llu past the end of the file", what,
                                          (unsigned long long)l);
    *s = (const char *)r->b + r->pos;
    *n = (size_t)l;
    r->pos += (size_t)l;
    return 1;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) { memcpy(d, s, n); d[n] = 0; }
    return d;
}

/* Skips one value of type `type`; arrays of arrays are refused (ggml does not read them). */
static int skip_value(rd *r, uint32_t type, const char *key, uint32_t *arr_type, uint64_t *arr_n)
{
    if (type >= GGV_COUNT_) return rfail(r, LOFP_ERR_FORMAT, "key '%s': unknown value type %u", key, type);
    if (type == GGV_STRING) {
        const char *s = NULL;
        size_t n = 0;
        return rd_str(r, &s, &n, key);
    }
    if (type == GGV_ARRAY) {
        uint32_t et = 0;
        uint64_t n = 0;
        if (!rd_u32(r, &et, key) || !rd_u64(r, &n, key)) return 0;
        if (et >= GGV_COUNT_) return rfail(r, LOFP_ERR_FORMAT, "key '%s': unknown array element type %u", key, et);
        if (et == GGV_ARRAY) return rfail(r, LOFP_ERR_UNSUPPORTED, "key '%s': arrays of arrays are not supported", key);
        if (arr_type) *arr_type = et;
        if (arr_n) *arr_n = n;
        if (et == GGV_STRING) {
            if (n > (r->len - r->pos) / 8) return rfail(r, LOFP_ERR_FORMAT, "key '%s': %llu strings cannot fit", key, (unsigned long long)n);
            for (uint64_t i = 0; i < n; i++) {
                const char *s = NULL;
                size_t l = 0;
                if (!rd_str(r, &s, &l, key)) return 0;
            }
            return 1;
        }
        size_t es = kv_scalar_size[et];
        if (n > (r->len - r->pos) / es) return rfail(r, LOFP_ERR_FORMAT, "key '%s': array of %llu values past the end", key, (unsigned long long)n);
        r->pos += (size_t)n * es;
        return 1;
    }
    size_t es = kv_scalar_size[type];
    if (r->len - r->pos < es) return rfail(r, LOFP_ERR_FORMAT, "key '%s': value past the end", key);
    r->pos += es;
    return 1;
}

static int cmp_off(const void *a, const void *b)
{
    const gg_tensor *x = *(const gg_tensor *const *)a, *y = *(const gg_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const gg_tensor *const *)a)->name, (*(const gg_tensor *const *)b)->name);
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp((*(const gg_kv *const *)a)->key, (*(const gg_kv *const *)b)->key);
}

lofp_status lofp_gg_parse(const uint8_t *buf, size_t len, const char *name, gg_file *g, lofp_io_error *err)
{
    memset(g, 0, sizeof *g);
    rd r = { buf, len, 0, name ? name : "gguf", err, LOFP_OK };
    g->display = lofp_ck_strdup(r.name);
    g->base = buf;
    g->size = len;
    if (!g->display) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    uint32_t magic = 0, version = 0;
    uint64_t n_t = 0, n_kv = 0;
    if (!rd_u32(&r, &magic, "magic")) goto fail;
    if (magic != 0x46554747u) { rfail(&r, LOFP_ERR_FORMAT, "not a GGUF file (bad magic)"); goto fail; }
    if (!rd_u32(&r, &version, "version")) goto fail;
    if (version != 2 && version != 3) { rfail(&r, LOFP_ERR_UNSUPPORTED, "GGUF version %u (lofp reads 2 and 3)", version); goto fail; }
    g->version = version;
    if (!rd_u64(&r, &n_t, "tensor count") || !rd_u64(&r, &n_kv, "key-value count")) goto fail;
    /* each KV needs at least 12 bytes, each tensor info at least 28 */
    if (n_kv > (len - r.pos) / 12 || n_t > (len - r.pos) / 28) {
        rfail(&r, LOFP_ERR_FORMAT, "%llu key-value pairs and %llu tensors cannot fit in %zu bytes",
              (unsigned long long)n_kv, (unsigned long long)n_t, len);
        goto fail;
    }
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->t = calloc(n_t ? (size_t)n_t : 1, sizeof *g->t);
    if (!g->kv || !g->t) { rfail(&r, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
    g->alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *k;
        size_t kl;
        gg_kv *kv = &g->kv[g->n_kv];
        if (!rd_str(&r, &k, &kl, "key")) goto fail;
        kv->key = dupn(k, kl);
        if (!kv->key) { rfail(&r, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
        g->n_kv++;
        if (strlen(kv->key) != kl) { rfail(&r, LOFP_ERR_FORMAT, "key %llu contains a NUL byte", (unsigned long long)i); goto fail; }
        if (!rd_u32(&r, &kv->type, kv->key)) goto fail;
        size_t start = r.pos;
        if (!skip_value(&r, kv->type, kv->key, &kv->arr_type, &kv->arr_n)) goto fail;
        kv->raw = buf + start;
        kv->raw_len = r.pos - start;
        if (strcmp(kv->key, "general.alignment") == 0) {
            if (kv->type != GGV_U32) { rfail(&r, LOFP_ERR_FORMAT, "general.alignment is not a uint32"); goto fail; }
            uint32_t a = (uint32_t)kv->raw[0] | (uint32_t)kv->raw[1] << 8 | (uint32_t)kv->raw[2] << 16 | (uint32_t)kv->raw[3] << 24;
            if (a == 0 || (a & (a - 1)) || a > (1u << 20)) { rfail(&r, LOFP_ERR_FORMAT, "general.alignment %u is not a power of two", a); goto fail; }
            g->alignment = a;
        }
    }
    for (uint64_t i = 0; i < n_t; i++) {
        gg_tensor *t = &g->t[g->n_t];
        const char *nm;
        size_t nl;
        if (!rd_str(&r, &nm, &nl, "tensor name")) goto fail;
        t->name = dupn(nm, nl);
        if (!t->name) { rfail(&r, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
        g->n_t++;
        if (nl == 0 || nl >= 64 || strlen(t->name) != nl) {
            rfail(&r, LOFP_ERR_FORMAT, "tensor %llu: name of %zu bytes (1 to 63, no NUL, allowed)", (unsigned long long)i, nl);
            goto fail;
        }
        if (!rd_u32(&r, &t->n_dims, t->name)) goto fail;
        if (t->n_dims < 1 || t->n_dims > 4) { rfail(&r, LOFP_ERR_FORMAT, "tensor '%s': %u dimensions (1 to 4 allowed)", t->name, t->n_dims); goto fail; }
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if (!rd_u64(&r, &t->ne[d], t->name)) goto fail;
        if (!rd_u32(&r, &t->type, t->name) || !rd_u64(&r, &t->offset, t->name)) goto fail;
        uint32_t blck, bytes;
        if (!lofp_gg_type_info(t->type, &blck, &bytes)) {
            rfail(&r, LOFP_ERR_UNSUPPORTED, "tensor '%s': unknown ggml tensor type %u", t->name, t->type);
            goto fail;
        }
        if (t->ne[0] % blck) {
            rfail(&r, LOFP_ERR_FORMAT, "tensor '%s': ne[0] = %llu is not a multiple of the %s block (%u)", t->name,
                  (unsigned long long)t->ne[0], lofp_gg_type_name(t->type), blck);
            goto fail;
        }
        if (t->ne[0] == 0 && blck > 1) {
            /* a row of a block type holds at least one block; ne[0] = 0 would make every row
             * and block count a division by zero downstream */
            rfail(&r, LOFP_ERR_FORMAT, "tensor '%s': ne[0] = 0 (rows of %s hold whole blocks of %u, at least one)", t->name,
                  lofp_gg_type_name(t->type), blck);
            goto fail;
        }
        /* every dimension and the element count (of the non-zero dimensions, so that no order of
         * multiplying them overflows) fit in int64, as ggml requires */
        uint64_t numel = 1;
        int novf = 0;
        for (int d = 0; d < 4; d++) {
            if (t->ne[d] > (uint64_t)INT64_MAX) novf = 1;
            else if (t->ne[d]) novf |= __builtin_mul_overflow(numel, t->ne[d], &numel);
        }
        if (novf || numel > (uint64_t)INT64_MAX) {
            rfail(&r, LOFP_ERR_FORMAT, "tensor '%s': shape [%llu, %llu, %llu, %llu] has more elements than int64 holds", t->name,
                  (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                  (unsigned long long)t->ne[3]);
            goto fail;
        }
        uint64_t nb = t->ne[0] / blck;
        int ovf = __builtin_mul_overflow(nb, (uint64_t)bytes, &nb);
        for (int d = 1; d < 4; d++) ovf |= __builtin_mul_overflow(nb, t->ne[d], &nb);
        if (ovf || nb > len) {
            rfail(&r, LOFP_ERR_FORMAT, "tensor '%s': its size does not fit in the file", t->name);
            goto fail;
        }
        t->nbytes = (size_t)nb;
        if (t->offset % g->alignment) {
            rfail(&r, LOFP_ERR_FORMAT, "tensor '%s': offset %llu is not a multiple of the alignment %u", t->name,
                  (unsigned long long)t->offset, g->alignment);
            goto fail;
        }
    }
    size_t ds = r.pos + (g->alignment - r.pos % g->alignment) % g->alignment;
    if (n_t && ds > len) { rfail(&r, LOFP_ERR_FORMAT, "tensor data section starts past the end"); goto fail; }
    g->data_start = ds;
    if (g->n_t) {
        gg_tensor **ord = malloc(g->n_t * sizeof *ord);
        if (!ord) { rfail(&r, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
        for (size_t i = 0; i < g->n_t; i++) ord[i] = &g->t[i];
        qsort(ord, g->n_t, sizeof *ord, cmp_name);
        for (size_t i = 1; i < g->n_t; i++)
            if (strcmp(ord[i - 1]->name, ord[i]->name) == 0) {
                rfail(&r, LOFP_ERR_FORMAT, "tensor '%s' appears twice", ord[i]->name);
                free(ord);
                goto fail;
            }
        /* the name order is kept for lofp_gg_find_tensor's binary search: a file of many tensors
         * looked up by name once each (every .scale's weight) stays O(n log n) */
        g->t_by_name = malloc(g->n_t * sizeof *g->t_by_name);
        if (!g->t_by_name) { rfail(&r, LOFP_ERR_NOMEM, "out of memory"); free(ord); goto fail; }
        memcpy(g->t_by_name, ord, g->n_t * sizeof *ord);
        qsort(ord, g->n_t, sizeof *ord, cmp_off);
        for (size_t i = 0; i < g->n_t; i++) {
            gg_tensor *t = ord[i];
            if (t->offset > len - ds || t->nbytes > len - ds - t->offset) {
                rfail(&r, LOFP_ERR_FORMAT, "tensor '%s': data [%llu, +%zu) past the end of the file", t->name,
                      (unsigned long long)t->offset, t->nbytes);
                free(ord);
                goto fail;
            }
            if (i + 1 < g->n_t && t->offset + t->nbytes > ord[i + 1]->offset) {
                rfail(&r, LOFP_ERR_FORMAT, "tensors '%s' and '%s' overlap", t->name, ord[i + 1]->name);
                free(ord);
                goto fail;
            }
            t->data = buf + ds + t->offset;
        }
        free(ord);
    }
    if (g->n_kv > 1) {
        gg_kv **o = malloc(g->n_kv * sizeof *o);
        if (!o) { rfail(&r, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
        for (size_t i = 0; i < g->n_kv; i++) o[i] = &g->kv[i];
        qsort(o, g->n_kv, sizeof *o, cmp_kv);
        for (size_t i = 1; i < g->n_kv; i++)
            if (strcmp(o[i - 1]->key, o[i]->key) == 0) {
                rfail(&r, LOFP_ERR_FORMAT, "key '%s' appears twice", o[i]->key);
                free(o);
                goto fail;
            }
        g->kv_by_key = o;
    }
    lofp_ck_ok(err);
    return LOFP_OK;
fail:;
    lofp_status st = r.st ? r.st : LOFP_ERR_FORMAT;
    lofp_gg_close(g);
    return st;
}

lofp_status lofp_gg_open(const char *path, gg_file *g, lofp_io_error *err)
{
    memset(g, 0, sizeof *g);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lofp_ck_fail(err, errno == ENOENT ? LOFP_ERR_NOT_FOUND : LOFP_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); return lofp_ck_fail(err, LOFP_ERR_IO, "%s: not a regular file", path); }
    size_t n = (size_t)st.st_size;
    void *m = NULL;
    if (n) {
        m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) { close(fd); return lofp_ck_fail(err, LOFP_ERR_IO, "%s: mmap: %s", path, strerror(errno)); }
    }
    close(fd);
    lofp_status s = lofp_gg_parse(m ? m : (const void *)"", n, path, g, err);
    if (s) { if (m) munmap(m, n); return s; }
    g->map = m;
    g->map_len = n;
    return LOFP_OK;
}

void lofp_gg_close(gg_file *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].key);
    for (size_t i = 0; i < g->n_t; i++) free(g->t[i].name);
    free(g->kv);
    free(g->t);
    free(g->t_by_name);
    free(g->kv_by_key);
    free(g->display);
    if (g->map) munmap(g->map, g->map_len);
    memset(g, 0, sizeof *g);
}

const gg_kv *lofp_gg_find_kv(const gg_file *g, const char *key)
{
    if (!g->kv_by_key) return g->n_kv == 1 && strcmp(g->kv[0].key, key) == 0 ? &g->kv[0] : NULL;
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->kv_by_key[mid]->key, key);
        if (c == 0) return g->kv_by_key[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const gg_tensor *lofp_gg_find_tensor(const gg_file *g, const char *name)
{
    size_t lo = 0, hi = g->t_by_name ? g->n_t : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->t_by_name[mid]->name, name);
        if (c == 0) return g->t_by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int lofp_gg_kv_num(const gg_kv *kv, double *out)
{
    if (!kv) return 0;
    const uint8_t *p = kv->raw;
    switch (kv->type) {
    case GGV_U8: case GGV_BOOL: *out = p[0]; return 1;
    case GGV_I8: *out = (int8_t)p[0]; return 1;
    case GGV_U16: *out = (double)le(p, 2); return 1;
    case GGV_I16: *out = (int16_t)le(p, 2); return 1;
    case GGV_U32: *out = (double)le(p, 4); return 1;
    case GGV_I32: *out = (int32_t)le(p, 4); return 1;
    case GGV_U64: *out = (double)le(p, 8); return 1;
    case GGV_I64: *out = (double)(int64_t)le(p, 8); return 1;
    case GGV_F32: { float f; uint32_t u = (uint32_t)le(p, 4); memcpy(&f, &u, 4); *out = f; return 1; }
    case GGV_F64: { double d; uint64_t u = le(p, 8); memcpy(&d, &u, 8); *out = d; return 1; }
    default: return 0;
    }
}

int lofp_gg_kv_str(const gg_kv *kv, const char **s, size_t *len)
{
    if (!kv || kv->type != GGV_STRING) return 0;
    *len = (size_t)le(kv->raw, 8);
    *s = (const char *)kv->raw + 8;
    return 1;
}

/* ---- decoders --------------------------------------------------------------------------- */

static const float kvalues_fp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

static float f16(const uint8_t *p) { return lofp_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8)); }

/* ggml's E8M0 "half" value 2^(e-128), with the subnormal patterns for e < 2. */
static float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ggml's UE4M3 value times one half; 0x00 and 0x7F decode to 0. */
static float ue4m3_half(uint8_t d)
{
    if (d == 0 || d == 0x7F) return 0.0f;
    return lofp_decode(LOFP_ELEM_E4M3, d & 0x7F) * 0.5f;
}

int lofp_gg_can_decode(uint32_t type)
{
    switch (type) {
    case GG_F32: case GG_F16: case GG_BF16: case GG_Q4_0: case GG_Q4_1: case GG_Q5_0: case GG_Q5_1:
    case GG_Q8_0: case GG_MXFP4: case GG_NVFP4: case 28: return 1;
    default: return 0;
    }
}

lofp_status lofp_gg_decode(const gg_tensor *t, float *out)
{
    uint32_t blck, bytes;
    if (!lofp_gg_can_decode(t->type) || !lofp_gg_type_info(t->type, &blck, &bytes)) return LOFP_ERR_UNSUPPORTED;
    size_t nblocks = t->nbytes / bytes;
    /* the plain element types (blocks of one) are arrays the library's one fp32 conversion reads
     * (GGUF is little-endian, as every host lofp reads safetensors on) */
    lofp_dtype et = t->type == GG_F32 ? LOFP_DTYPE_F32 : t->type == GG_F16 ? LOFP_DTYPE_F16
                  : t->type == GG_BF16 ? LOFP_DTYPE_BF16 : t->type == 28 ? LOFP_DTYPE_F64 : LOFP_DTYPE_COUNT_;
    if (et != LOFP_DTYPE_COUNT_) return lofp_dtype_to_f32(et, t->data, nblocks, out);
    const uint8_t *p = t->data;
    for (size_t b = 0; b < nblocks; b++, p += bytes) {
        float *y = out + b * blck;
        switch (t->type) {
        case GG_Q4_0: {
            float d = f16(p);
            for (int j = 0; j < 16; j++) {
                y[j] = (float)((p[2 + j] & 0x0F) - 8) * d;
                y[j + 16] = (float)((p[2 + j] >> 4) - 8) * d;
            }
            break;
        }
        case GG_Q4_1: {
            float d = f16(p), m = f16(p + 2);
            for (int j = 0; j < 16; j++) {
                y[j] = (float)(p[4 + j] & 0x0F) * d + m;
                y[j + 16] = (float)(p[4 + j] >> 4) * d + m;
            }
            break;
        }
        case GG_Q5_0: case GG_Q5_1: {
            int one = t->type == GG_Q5_1;
            float d = f16(p), m = one ? f16(p + 2) : 0.0f;
            const uint8_t *qhp = p + (one ? 4 : 2), *qs = qhp + 4;
            uint32_t qh = (uint32_t)le(qhp, 4);
            for (int j = 0; j < 16; j++) {
                int xh0 = (int)(((qh >> j) << 4) & 0x10), xh1 = (int)((qh >> (j + 12)) & 0x10);
                int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
                if (one) { y[j] = (float)x0 * d + m; y[j + 16] = (float)x1 * d + m; }
                else { y[j] = (float)(x0 - 16) * d; y[j + 16] = (float)(x1 - 16) * d; }
            }
            break;
        }
        case GG_Q8_0: {
            float d = f16(p);
            for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)p[2 + j] * d;
            break;
        }
        case GG_MXFP4: {
            float d = e8m0_half(p[0]);
            for (int j = 0; j < 16; j++) {
                y[j] = kvalues_fp4[p[1 + j] & 0x0F] * d;
                y[j + 16] = kvalues_fp4[p[1 + j] >> 4] * d;
            }
            break;
        }
        case GG_NVFP4: {
            for (int s = 0; s < 4; s++) {
                float d = ue4m3_half(p[s]);
                for (int j = 0; j < 8; j++) {
                    uint8_t q = p[4 + s * 8 + j];
                    y[16 * s + j] = kvalues_fp4[q & 0x0F] * d;
                    y[16 * s + j + 8] = kvalues_fp4[q >> 4] * d;
                }
            }
            break;
        }
        }
    }
    return LOFP_OK;
}

/* ---- writer ----------------------------------------------------------------------------- */

struct gg_writer {
    char *path;
    lofp_atomic_file at;  /* the temporary file beside path (io/atomic.h) */
    uint32_t alignment;
    size_t pos;      /* bytes written so far */
    uint8_t *buf;    /* write-behind buffer */
    size_t blen;
};

static const size_t GGW_BUF = 1 << 22;

static int gw_flush(gg_writer *w)
{
    if (w->blen && lofp_atomic_write(&w->at, w->buf, w->blen, NULL)) return 0;
    w->blen = 0;
    return 1;
}

static int gw_put(gg_writer *w, const void *d, size_t n)
{
    const uint8_t *p = d;
    w->pos += n;
    while (n) {
        if (w->blen == GGW_BUF && !gw_flush(w)) return 0;
        size_t c = GGW_BUF - w->blen < n ? GGW_BUF - w->blen : n;
        memcpy(w->buf + w->blen, p, c);
        w->blen += c;
        p += c;
        n -= c;
    }
    return 1;
}

static int gw_pad(gg_writer *w)
{
    static const uint8_t zeros[64] = { 0 };
    size_t pad = (w->alignment - w->pos % w->alignment) % w->alignment;
    while (pad) {
        size_t c = pad < 64 ? pad : 64;
        if (!gw_put(w, zeros, c)) return 0;
        pad -= c;
    }
    return 1;
}

void lofp_gg_put_string(lofp_sbuf *b, const char *s, size_t n)
{
    uint8_t l[8];
    for (int i = 0; i < 8; i++) l[i] = (uint8_t)((uint64_t)n >> (8 * i));
    lofp_sbuf_put(b, l, 8);
    lofp_sbuf_put(b, s, n);
}

static void put_u32(lofp_sbuf *b, uint32_t v)
{
    uint8_t l[4];
    for (int i = 0; i < 4; i++) l[i] = (uint8_t)(v >> (8 * i));
    lofp_sbuf_put(b, l, 4);
}

void lofp_gg_put_kv_raw(lofp_sbuf *b, const gg_kv *kv)
{
    lofp_gg_put_string(b, kv->key, strlen(kv->key));
    put_u32(b, kv->type);
    lofp_sbuf_put(b, kv->raw, kv->raw_len);
}

void lofp_gg_put_kv_u32(lofp_sbuf *b, const char *key, uint32_t v)
{
    lofp_gg_put_string(b, key, strlen(key));
    put_u32(b, GGV_U32);
    put_u32(b, v);
}

void lofp_gg_put_kv_bool(lofp_sbuf *b, const char *key, int v)
{
    uint8_t u = v ? 1 : 0;
    lofp_gg_put_string(b, key, strlen(key));
    put_u32(b, GGV_BOOL);
    lofp_sbuf_put(b, &u, 1);
}

void lofp_gg_put_kv_f32(lofp_sbuf *b, const char *key, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    lofp_gg_put_string(b, key, strlen(key));
    put_u32(b, GGV_F32);
    put_u32(b, u);
}

void lofp_gg_put_kv_str(lofp_sbuf *b, const char *key, const char *s)
{
    lofp_gg_put_string(b, key, strlen(key));
    put_u32(b, GGV_STRING);
    lofp_gg_put_string(b, s, strlen(s));
}

lofp_status lofp_gg_writer_open(const char *path, uint32_t alignment, const void *kv_blob, size_t kv_len,
                           uint64_t n_kv, const gg_out_tensor *t, size_t n_t, gg_writer **out,
                           lofp_io_error *err)
{
    *out = NULL;
    gg_writer *w = calloc(1, sizeof *w);
    if (!w) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    w->at.fd = w->at.dirfd = -1;
    w->alignment = alignment ? alignment : 32;
    w->path = lofp_ck_strdup(path);
    w->buf = malloc(GGW_BUF);
    if (!w->path || !w->buf) { lofp_gg_writer_abort(w); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    lofp_status ost = lofp_ck_atomic_open(&w->at, path, err);
    if (ost) {
        lofp_gg_writer_abort(w);
        return ost;
    }
    lofp_sbuf h = { 0 };
    lofp_sbuf_put(&h, "GGUF", 4);
    put_u32(&h, 3);
    uint8_t l[8];
    for (int i = 0; i < 8; i++) l[i] = (uint8_t)((uint64_t)n_t >> (8 * i));
    lofp_sbuf_put(&h, l, 8);
    for (int i = 0; i < 8; i++) l[i] = (uint8_t)(n_kv >> (8 * i));
    lofp_sbuf_put(&h, l, 8);
    lofp_sbuf_put(&h, kv_blob, kv_len);
    uint64_t off = 0;
    for (size_t i = 0; i < n_t; i++) {
        lofp_gg_put_string(&h, t[i].name, strlen(t[i].name));
        put_u32(&h, t[i].n_dims);
        for (uint32_t d = 0; d < t[i].n_dims; d++) {
            for (int k = 0; k < 8; k++) l[k] = (uint8_t)(t[i].ne[d] >> (8 * k));
            lofp_sbuf_put(&h, l, 8);
        }
        put_u32(&h, t[i].type);
        for (int k = 0; k < 8; k++) l[k] = (uint8_t)(off >> (8 * k));
        lofp_sbuf_put(&h, l, 8);
        off += t[i].nbytes;
        off += (w->alignment - off % w->alignment) % w->alignment;
    }
    int ok = !h.failed && gw_put(w, h.p, h.len) && gw_pad(w);
    lofp_sbuf_free(&h);
    if (!ok) {
        lofp_status s = lofp_ck_fail(err, LOFP_ERR_IO, "%s: write failed", path);
        lofp_gg_writer_abort(w);
        return s;
    }
    *out = w;
    return LOFP_OK;
}

lofp_status lofp_gg_writer_put(gg_writer *w, const void *data, size_t n, lofp_io_error *err)
{
    if (!gw_put(w, data, n)) return lofp_ck_fail(err, LOFP_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    return LOFP_OK;
}

lofp_status lofp_gg_writer_end_tensor(gg_writer *w, lofp_io_error *err)
{
    if (!gw_pad(w)) return lofp_ck_fail(err, LOFP_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    return LOFP_OK;
}

lofp_status lofp_gg_writer_finish(gg_writer *w, lofp_io_error *err)
{
    if (!gw_flush(w)) {
        lofp_status s = lofp_ck_fail(err, LOFP_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
        lofp_gg_writer_abort(w);
        return s;
    }
    lofp_status s = lofp_ck_atomic_commit(&w->at, err);
    lofp_gg_writer_abort(w);
    return s;
}

void lofp_gg_writer_abort(gg_writer *w)
{
    if (!w) return;
    lofp_ck_atomic_abort(&w->at);
    free(w->path);
    free(w->buf);
    free(w);
}

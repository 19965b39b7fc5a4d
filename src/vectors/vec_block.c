/* vec_block.c -- block cases: for every block scheme, scale rule and producer profile that
 * supports it, small tensors at the edges of the block quantizers (zero and signed-zero blocks,
 * a lone NaN or Inf, exact element ties, the block amax at power-of-two edges and one fp32 ulp
 * either side, tiny blocks beside large ones, K not a multiple of the block, ordinary data),
 * with the codes, linear scales and per-tensor scale each profile writes, one line per input.
 * Each line also says, for every profile, whether its codes and scales equal lofp's: where
 * producers differ is visible without running anything. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vec_internal.h"

typedef struct tensor {
    char name[48];
    size_t rows, k;
    int pad, propagate;
    float x[256];
} tensor;

typedef struct result {
    lofp_status st;
    uint8_t codes[256], scales[32];
    size_t ncodes, nscales;
    float global;
} result;

/* The power-of-two exponents whose edges the block amax is put on: the E8M0 and fp32 subnormal
 * range, the element types' ranges around 1, and the top of fp32. */
static const int kEdges[] = { -149, -133, -130, -127, -126, -125, -64, -8, -1, 0, 1, 8, 64,
                              126, 127 };

/* A fixed fraction in (-1, 1) for element i != 0 of a ramp (element 0 carries the amax). */
static double frac(size_t i) { return (double)((long)((i * 37) % 31) - 15) / 16.0; }

static void ramp(float *x, size_t n, double amax)
{
    x[0] = (float)amax;
    for (size_t i = 1; i < n; i++) x[i] = (float)(amax * frac(i));
}

/* Deterministic roughly normal values (sum of four uniforms) from splitmix64. */
static void noise(float *x, size_t n, uint64_t seed, double mag)
{
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        double u = 0;
        for (int j = 0; j < 4; j++) u += (double)(lofp_splitmix64(&st) >> 11) / 9007199254740992.0;
        x[i] = (float)((u - 2.0) * mag);
    }
}

static tensor *next(tensor *t, size_t *n, const char *name, size_t rows, size_t k)
{
    tensor *c = &t[(*n)++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rows = rows;
    c->k = k;
    return c;
}

/* The inputs of one scheme (block B, element type el); returns how many. */
static size_t build_tensors(tensor *t, uint32_t B, lofp_elem el)
{
    size_t n = 0;
    const lofp_elem_info *info = lofp_elem_info_get(el);
    tensor *c = next(t, &n, "zero-block", 1, B);
    c = next(t, &n, "signed-zero", 1, B);
    c->x[0] = 1.0f;
    for (size_t i = 1; i < B; i++) c->x[i] = (i & 1) ? -ldexpf(1.0f, -40) : -0.0f;
    static const struct { const char *name; uint32_t bits; int prop; } bad[] = {
        { "lone-nan", 0x7fc00000u, 1 }, { "lone-inf", 0x7f800000u, 1 },
        { "lone-neg-inf", 0xff800000u, 1 }, { "nan-refused", 0x7fc00000u, 0 } };
    for (size_t j = 0; j < 4; j++) {
        c = next(t, &n, bad[j].name, 1, 2 * (size_t)B);
        ramp(c->x, 2 * (size_t)B, 3.0);
        c->x[B + 3] = lofp_bits_f32(bad[j].bits);
        c->propagate = bad[j].prop;
    }
    /* Exact element ties: the amax is the element's max (so FLOOR and RCEIL give scale 1) and
     * the others are midpoints between neighbouring values, spread over the range. */
    float vals[256];
    size_t nv = 0;
    for (uint32_t code = 0; code <= info->max_code && nv < 256; code++) {
        float v = lofp_decode(el, code);
        if (!isnan(v)) vals[nv++] = v;
    }
    c = next(t, &n, "element-ties", 1, B);
    c->x[0] = (float)info->max;
    for (size_t i = 1; i < B; i++) {
        size_t j = (i - 1) * (nv - 1) / (B - 1);
        float m = (float)(((double)vals[j] + (double)vals[j + 1]) / 2.0);
        c->x[i] = (i & 1) ? -m : m;
    }
    for (size_t e = 0; e < sizeof kEdges / sizeof kEdges[0]; e++) {
        static const char *const side[] = { "below", "at", "above" };
        float p = ldexpf(1.0f, kEdges[e]);
        float a[3] = { nextafterf(p, 0.0f), p, nextafterf(p, INFINITY) };
        for (int s = 0; s < 3; s++) {
            char nm[48];
            snprintf(nm, sizeof nm, "amax-%s-2^%d", side[s], kEdges[e]);
            c = next(t, &n, nm, 1, B);
            ramp(c->x, B, a[s]);
        }
    }
    /* Blocks far smaller than the tensor's largest: NVFP4's subnormal UE4M3 scales. */
    c = next(t, &n, "tiny-blocks", 1, 4 * (size_t)B);
    for (size_t j = 0; j < 4; j++) {
        static const int shift[] = { 0, -8, -14, -24 };
        ramp(c->x + j * B, B, ldexp(5.0, shift[j]));
    }
    c = next(t, &n, "k-not-multiple-padded", 2, (size_t)B + 5);
    c->pad = 1;
    noise(c->x, 2 * ((size_t)B + 5), 0x5eed0001u, 1.0);
    static const struct { const char *name; int e; } mags[] = {
        { "noise-2^0", 0 }, { "noise-2^-20", -20 }, { "noise-2^20", 20 } };
    for (size_t j = 0; j < 3; j++) {
        c = next(t, &n, mags[j].name, 2, 2 * (size_t)B);
        noise(c->x, 4 * (size_t)B, 0x5eed0100u + j, ldexp(1.0, mags[j].e));
    }
    return n;
}

static void run(const lofp_scheme *s, const tensor *t, result *r)
{
    lofp_scheme q = *s;
    q.pad = t->pad;
    q.propagate_nonfinite = t->propagate;
    r->ncodes = lofp_codes_bytes(&q, t->rows, t->k);
    r->nscales = lofp_scales_bytes(&q, t->rows, t->k);
    r->global = 1.0f;
    r->st = lofp_quantize(&q, LOFP_DTYPE_F32, t->x, t->rows, t->k, r->codes, r->scales, &r->global,
                          NULL);
}

static int same(const result *a, const result *b)
{
    if (a->st != b->st) return 0;
    if (a->st != LOFP_OK) return 1;
    return a->ncodes == b->ncodes && a->nscales == b->nscales &&
           memcmp(a->codes, b->codes, a->ncodes) == 0 && memcmp(a->scales, b->scales, a->nscales) == 0;
}

/* The status as a short token: "ok", "nonfinite" (the one refusal the cases provoke) or the
 * library's name for anything else. */
static const char *status_token(lofp_status st)
{
    return st == LOFP_OK ? "ok" : st == LOFP_ERR_NONFINITE ? "nonfinite" : lofp_status_name(st);
}

static void result_json(lofp_sbuf *b, const result *r)
{
    lofp_vec_printf(b, "{\"status\":\"%s\"", status_token(r->st));
    if (r->st == LOFP_OK) {
        lofp_sbuf_puts(b, ",\"codes\":\"");
        lofp_vec_hex(b, r->codes, r->ncodes);
        lofp_sbuf_puts(b, "\",\"scales\":\"");
        lofp_vec_hex(b, r->scales, r->nscales);
        lofp_vec_printf(b, "\",\"global\":\"0x%08x\"", lofp_f32_bits(r->global));
    }
    lofp_sbuf_putc(b, '}');
}

/* One line: the input once, each profile's result and whether it equals lofp's. */
static void emit(lofp_sbuf *b, const lofp_scheme *s, const tensor *t, const result *res,
                 const lofp_profile *group, size_t ng)
{
    size_t n = t->rows * t->k;
    uint8_t in[4 * 256 + 16];
    /* The digest covers the shape, the flags and the input bits: two cases with the same name
     * but different data never share an id. */
    snprintf((char *)in, 16, "%zu,%zu,%d,%d", t->rows, t->k, t->pad, t->propagate);
    size_t hl = strlen((char *)in);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = lofp_f32_bits(t->x[i]);
        for (int j = 0; j < 4; j++) in[hl + 4 * i + (size_t)j] = (uint8_t)(u >> (24 - 8 * j));
    }
    char dg[13];
    lofp_vec_digest12(in, hl + 4 * n, dg);
    const char *scheme = lofp_scheme_name(s->id);
    const char *lvl = s->id == LOFP_SCHEME_NVFP4 ? (s->two_level ? "-2l" : "-1l") : "";
    lofp_vec_printf(b, "{\"id\":\"%s%s/%s/%s/%s\",\"scheme\":\"%s\",\"two_level\":%s,"
                       "\"scale_rule\":\"%s\",\"case\":\"%s\",\"rows\":%zu,\"k\":%zu,"
                       "\"pad\":%s,\"propagate_nonfinite\":%s,\"x\":\"",
                    scheme, lvl, lofp_scale_rule_name(s->scale_rule), t->name, dg, scheme,
                    s->two_level ? "true" : "false", lofp_scale_rule_name(s->scale_rule), t->name,
                    t->rows, t->k, t->pad ? "true" : "false", t->propagate ? "true" : "false");
    lofp_vec_hex(b, in + hl, 4 * n);
    lofp_sbuf_puts(b, "\",\"expected\":{");
    for (size_t g = 0; g < ng; g++) {
        lofp_vec_printf(b, "%s\"%s\":", g ? "," : "", lofp_profile_name(group[g]));
        result_json(b, &res[g]);
    }
    lofp_sbuf_puts(b, "},\"agree\":{");
    for (size_t g = 0; g < ng; g++)
        lofp_vec_printf(b, "%s\"%s\":%s", g ? "," : "", lofp_profile_name(group[g]),
                        same(&res[g], &res[0]) ? "true" : "false");
    lofp_sbuf_puts(b, "}}\n");
}

/* One (scheme, two_level) and its scale rules. */
typedef struct config {
    lofp_scheme_id id;
    int two_level;
} config;

static const config kConfigs[] = {
    { LOFP_SCHEME_NVFP4, 1 }, { LOFP_SCHEME_NVFP4, 0 }, { LOFP_SCHEME_MXFP4, 0 },
    { LOFP_SCHEME_MXFP6_E2M3, 0 }, { LOFP_SCHEME_MXFP6_E3M2, 0 }, { LOFP_SCHEME_MXFP8_E4M3, 0 },
    { LOFP_SCHEME_MXFP8_E5M2, 0 }, { LOFP_SCHEME_MXINT8, 0 },
};

lofp_status lofp_vec_block(lofp_sbuf *b, size_t *count)
{
    tensor *t = malloc(128 * sizeof *t);
    result *res = malloc(LOFP_PROFILE_COUNT_ * sizeof *res);
    if (!t || !res) { free(t); free(res); return LOFP_ERR_NOMEM; }
    for (size_t ci = 0; ci < sizeof kConfigs / sizeof kConfigs[0]; ci++) {
        lofp_scheme base;
        lofp_scheme_init(&base, kConfigs[ci].id);
        base.two_level = kConfigs[ci].two_level;
        size_t nt = build_tensors(t, base.block, base.elem);
        int is_mx = base.scale_elem == LOFP_ELEM_E8M0;
        lofp_scale_rule rules[4] = { base.scale_rule };
        size_t nr = 1;
        if (is_mx) { rules[0] = LOFP_SCALE_FLOOR; rules[1] = LOFP_SCALE_CEIL; rules[2] = LOFP_SCALE_EVEN; rules[3] = LOFP_SCALE_RCEIL; nr = 4; }
        for (size_t ri = 0; ri < nr; ri++) {
            lofp_scheme s = base;
            s.scale_rule = rules[ri];
            /* The profiles of this group. Only torchao reads an MX scale rule; the others fix
             * their own, so they appear once, beside lofp's default rule. */
            lofp_profile group[LOFP_PROFILE_COUNT_];
            size_t ng = 0;
            for (int p = 0; p < LOFP_PROFILE_COUNT_; p++) {
                lofp_scheme q = s;
                q.profile = (lofp_profile)p;
                if (lofp_scheme_validate(&q) != LOFP_OK) continue;
                int reads_rule = p == LOFP_PROFILE_LOFP || p == LOFP_PROFILE_TORCHAO;
                if (!reads_rule && s.scale_rule != base.scale_rule) continue;
                group[ng++] = (lofp_profile)p;
            }
            for (size_t ti = 0; ti < nt; ti++) {
                for (size_t g = 0; g < ng; g++) {
                    lofp_scheme q = s;
                    q.profile = group[g];
                    run(&q, &t[ti], &res[g]);
                }
                emit(b, &s, &t[ti], res, group, ng);
                (*count)++;
            }
        }
    }
    free(t);
    free(res);
    return b->failed ? LOFP_ERR_NOMEM : LOFP_OK;
}

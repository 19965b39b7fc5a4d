/* test_attention.c -- decode and prefill attention over the paged KV cache (lofp/kvcache.h):
 * the reference path against vLLM's reference_ultraquant_attention output (golden) and against an
 * fp64 oracle written here from gathered K/V; the scalar and AVX2 paths against the reference
 * within SPEC §5's 1e-4 of max|out| over random shapes; GQA mapping, sinks, paging, skipped
 * slots, prefill causality, thread independence and bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "lofp/kvcache.h"
#include "runtime/cpu_features.h"
#include "kv/attention_internal.h"

static const char *GOLD = "ultraquant_attention/B2_Hq8_Hk2_D128_N150_sinks";

/* A cache holding B sequences of lengths n[b] stored from k, v [B, Nmax, Hk, D] (fp32), with
 * shuffled block tables and, optionally, spare blocks. */
typedef struct {
    lofp_kv_cache_desc d;
    uint8_t *cache;
    int32_t *bt;
    size_t stride; /* blocks per table row */
} tcache;

static void shuffle(int32_t *a, size_t n, tu_rng *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = tu_next(r) % i;
        int32_t t = a[i - 1]; a[i - 1] = a[j]; a[j] = t;
    }
}

static void tcache_build(tcache *c, lofp_kv_format dt, uint32_t D, uint32_t Hk, uint32_t bs,
                         size_t B, size_t nmax, const int32_t *n, const float *k, const float *v,
                         lofp_hadamard_kind had, tu_rng *rng)
{
    c->stride = (nmax + bs - 1) / bs;
    size_t nblocks = B * c->stride + 3;
    CHECK_OK(lofp_kv_desc_init(&c->d, dt, D, Hk, bs, nblocks));
    c->d.hadamard = had;
    c->cache = malloc(lofp_kv_cache_bytes(&c->d));
    memset(c->cache, 0xA5, lofp_kv_cache_bytes(&c->d)); /* garbage outside the stored slots */
    int32_t *perm = malloc(nblocks * sizeof(int32_t));
    for (size_t i = 0; i < nblocks; i++) perm[i] = (int32_t)i;
    shuffle(perm, nblocks, rng);
    c->bt = malloc(B * c->stride * sizeof(int32_t));
    for (size_t i = 0; i < B * c->stride; i++) c->bt[i] = perm[i];
    int64_t *slots = malloc(nmax * sizeof(int64_t));
    for (size_t b = 0; b < B; b++) {
        for (size_t t = 0; t < nmax; t++)
            slots[t] = t < (size_t)n[b] ? (int64_t)c->bt[b * c->stride + t / bs] * bs + (int64_t)(t % bs) : -1;
        lofp_kv_store_report rep;
        CHECK_OK(lofp_kv_store(&c->d, c->cache, LOFP_DTYPE_F32, k + b * nmax * Hk * D,
                               v + b * nmax * Hk * D, nmax, slots, 0, &rep));
        CHECK_EQ_U(rep.tokens_stored, (size_t)n[b]);
    }
    free(slots);
    free(perm);
}

static void tcache_free(tcache *c) { free(c->cache); free(c->bt); }

/* max |a-b| / max |b| */
static double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= num)) num = e; /* NaN propagates */
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return den > 0 ? num / den : num;
}

static lofp_status run(const tcache *c, lofp_attn_path path, uint32_t Hq, float scale,
                       const float *sinks, unsigned threads, uint32_t split, size_t B,
                       const float *q, const int32_t *n, float *out)
{
    lofp_attn_params p;
    lofp_attn_params_init(&p, Hq, scale, c->stride);
    p.path = path;
    p.sinks = sinks;
    p.threads = threads;
    p.split_tokens = split;
    lofp_attn_report rep;
    lofp_status st = lofp_attention_decode(&c->d, &p, c->cache, B, LOFP_DTYPE_F32, q, c->bt, n, out, &rep);
    if (st == LOFP_OK && path != LOFP_ATTN_AUTO) CHECK(rep.path == path);
    return st;
}

/* fp64 oracle from gathered K/V: the semantics of kvcache.h written out independently. */
static void oracle(const tcache *c, uint32_t Hq, float scale, const float *sinks, size_t B,
                   const float *q, const int32_t *n, const size_t *qlen, float *out)
{
    const uint32_t D = c->d.head_dim, Hk = c->d.num_kv_heads, g = Hq / Hk;
    size_t row = 0;
    for (size_t b = 0; b < B; b++) {
        size_t N = (size_t)n[b], ql = qlen ? qlen[b] : 1;
        float *K = malloc(N * Hk * D * sizeof(float)), *V = malloc(N * Hk * D * sizeof(float));
        CHECK_OK(lofp_kv_gather(&c->d, c->cache, c->bt + b * c->stride, N, K, V));
        double *s = malloc(N * sizeof(double));
        for (size_t i = 0; i < ql; i++, row++) {
            size_t vis = N - ql + i + 1;
            for (uint32_t h = 0; h < Hq; h++) {
                const float *qr = q + (row * Hq + h) * D;
                float qq[512], rot[512];
                memcpy(qq, qr, D * sizeof(float));
                if (c->d.format == LOFP_KV_ULTRAQUANT) {
                    if (c->d.rotate_k) lofp_hadamard_dense(qr, rot, D);
                    else memcpy(rot, qr, D * sizeof(float));
                    for (uint32_t j = 0; j < D; j++)
                        qq[j] = lofp_decode(LOFP_ELEM_E4M3, lofp_encode(LOFP_ELEM_E4M3, rot[j], LOFP_RNE, LOFP_SATURATE, 0));
                }
                uint32_t hk = h / g;
                double m = -INFINITY;
                for (size_t t = 0; t < vis; t++) {
                    double acc = 0;
                    for (uint32_t j = 0; j < D; j++) acc += (double)qq[j] * K[(t * Hk + hk) * D + j];
                    s[t] = acc * scale;
                    if (s[t] > m) m = s[t];
                }
                double sink = sinks ? sinks[h] : -INFINITY;
                if (sink > m) m = sink;
                double z = sinks ? exp(sink - m) : 0;
                for (size_t t = 0; t < vis; t++) z += exp(s[t] - m);
                for (uint32_t j = 0; j < D; j++) {
                    double o = 0;
                    for (size_t t = 0; t < vis; t++) o += exp(s[t] - m) * V[(t * Hk + hk) * D + j];
                    out[(row * Hq + h) * D + j] = (float)(o / z);
                }
            }
        }
        free(K); free(V); free(s);
    }
}

static int have_avx2(void)
{
    uint32_t f = lofp_cpu_features();
    return (f & LOFP_CPU_AVX2) && (f & LOFP_CPU_FMA);
}

static int have_avx512(void)
{
    uint32_t f = lofp_cpu_features(), w = LOFP_CPU_AVX512F | LOFP_CPU_AVX512BW | LOFP_CPU_AVX512VL;
    return have_avx2() && (f & w) == w;
}

/* Whether a fast path can run here for head dim D (the tests skip the others). */
static int have(lofp_attn_path p, uint32_t D)
{
    if (p == LOFP_ATTN_AVX2) return have_avx2();
    if (p == LOFP_ATTN_AVX512) return have_avx512() && D >= 64;
    return 1;
}

static const lofp_attn_path FAST[3] = { LOFP_ATTN_SCALAR, LOFP_ATTN_AVX2, LOFP_ATTN_AVX512 };

/* ---- golden: vLLM's reference_ultraquant_attention ----------------------------------------- */

static void golden(void)
{
    char p[512];
#define LOAD(var, name) snprintf(p, sizeof p, "%s/%s.npy", GOLD, name); tu_npy var = tu_load_golden(p)
    LOAD(q, "q"); LOAD(k, "k"); LOAD(v, "v"); LOAD(sk, "sinks"); LOAD(sc, "scale"); LOAD(want, "out_fp32");
#undef LOAD
    const size_t B = q.shape[0], Hq = q.shape[1], D = q.shape[2], N = k.shape[1], Hk = k.shape[2];
    CHECK(B == 2 && Hq == 8 && D == 128 && N == 150 && Hk == 2);
    const float scale = ((float *)sc.data)[0];
    int32_t n[2] = { (int32_t)N, (int32_t)N };
    float *out = malloc(B * Hq * D * sizeof(float)), *ora = malloc(B * Hq * D * sizeof(float));
    for (int had = 0; had < 2; had++) {
        tu_rng rng = { 11 };
        tcache c;
        /* the reference rotates K with a dense fp32 matmul; block size 16 does not divide 150 */
        tcache_build(&c, LOFP_KV_ULTRAQUANT, (uint32_t)D, (uint32_t)Hk, 16, B, N, n, k.data, v.data,
                     had ? LOFP_HADAMARD_BUTTERFLY : LOFP_HADAMARD_DENSE, &rng);
        CHECK_OK(run(&c, LOFP_ATTN_REFERENCE, (uint32_t)Hq, scale, sk.data, 1, 0, B, q.data, n, out));
        double e_ref = rel_err(out, want.data, B * Hq * D);
        oracle(&c, (uint32_t)Hq, scale, sk.data, B, q.data, n, NULL, ora);
        double e_ora = rel_err(out, ora, B * Hq * D);
        /* Not 0: torch sums q.k, the softmax denominator and p.v in its own (blocked) order; ours
         * is sequential. fp32 rounding differences of a few ulp of the largest terms. */
        CHECKF(e_ref < 2e-6, "reference vs vLLM golden (%s K rotation): %.3g", had ? "butterfly" : "dense", e_ref);
        CHECKF(e_ora < 2e-6, "reference vs fp64 oracle: %.3g", e_ora);
        printf("golden B2 Hq8 Hk2 D128 N150 sinks, K rotation %-9s: reference vs vLLM %.2e, vs fp64 oracle %.2e\n",
               had ? "butterfly" : "dense", e_ref, e_ora);
        for (int f = 0; f < 3; f++) {
            if (!have(FAST[f], (uint32_t)D)) continue;
            for (uint32_t split = 0; split <= 64; split += 64) {
                CHECK_OK(run(&c, FAST[f], (uint32_t)Hq, scale, sk.data, 2, split, B, q.data, n, out));
                double e = rel_err(out, want.data, B * Hq * D);
                CHECKF(e < 1e-5, "%s split %u vs vLLM golden: %.3g", lofp_attn_path_name(FAST[f]), split, e);
                printf("  %-6s split %-4u vs vLLM golden: %.2e\n", lofp_attn_path_name(FAST[f]), split, e);
            }
        }
        /* without sinks the result must change (sinks are really used) */
        CHECK_OK(run(&c, LOFP_ATTN_REFERENCE, (uint32_t)Hq, scale, NULL, 1, 0, B, q.data, n, out));
        double e_ns = rel_err(out, want.data, B * Hq * D);
        CHECKF(e_ns > 1e-4, "dropping the sinks changed the output by only %.3g", e_ns);
        tcache_free(&c);
    }
    free(out); free(ora);
    tu_npy_free(&q); tu_npy_free(&k); tu_npy_free(&v); tu_npy_free(&sk); tu_npy_free(&sc); tu_npy_free(&want);
}

/* ---- random shapes: fast paths vs reference -------------------------------------------------- */

typedef struct { size_t B; uint32_t Hq, Hk, D, bs; size_t nmax; int sinks; uint32_t split; lofp_kv_format dt; } shape;

static void fill(float *x, size_t n, double sd, tu_rng *r)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(sd * tu_normal(r));
}

static void random_case(const shape *s, tu_rng *rng, int check_oracle)
{
    const size_t B = s->B, D = s->D, Hk = s->Hk, Hq = s->Hq;
    int32_t *n = malloc(B * sizeof(int32_t));
    for (size_t b = 0; b < B; b++) n[b] = b == 0 ? (int32_t)s->nmax : 1 + (int32_t)(tu_next(rng) % s->nmax);
    if (B > 1) n[B - 1] = 1; /* N = 1 always in the mix */
    float *k = malloc(B * s->nmax * Hk * D * sizeof(float)), *v = malloc(B * s->nmax * Hk * D * sizeof(float));
    float *q = malloc(B * Hq * D * sizeof(float)), *sinks = malloc(Hq * sizeof(float));
    fill(k, B * s->nmax * Hk * D, 1.0, rng);
    fill(v, B * s->nmax * Hk * D, 1.0, rng);
    /* large-ish logits so the softmax is peaked and rounding differences matter */
    fill(q, B * Hq * D, 2.0, rng);
    fill(sinks, Hq, 3.0, rng);
    tcache c;
    tcache_build(&c, s->dt, s->D, s->Hk, s->bs, B, s->nmax, n, k, v, LOFP_HADAMARD_BUTTERFLY, rng);
    float scale = 1.0f / sqrtf((float)D);
    const float *sk = s->sinks ? sinks : NULL;
    size_t on = B * Hq * D;
    float *ref = malloc(on * sizeof(float)), *out = malloc(on * sizeof(float)), *out1 = malloc(on * sizeof(float));
    CHECK_OK(run(&c, LOFP_ATTN_REFERENCE, s->Hq, scale, sk, 2, 0, B, q, n, ref));
    if (check_oracle) {
        float *ora = malloc(on * sizeof(float));
        oracle(&c, s->Hq, scale, sk, B, q, n, NULL, ora);
        double e = rel_err(ref, ora, on);
        CHECKF(e < 1e-5, "reference vs fp64 oracle %.3g (B%zu Hq%u Hk%u D%u N%zu)", e, B, s->Hq, s->Hk, s->D, s->nmax);
        free(ora);
    }
    for (int f = 0; f < 3; f++) {
        const lofp_attn_path *fast = FAST;
        if (!have(fast[f], s->D)) continue;
        CHECK_OK(run(&c, fast[f], s->Hq, scale, sk, 3, s->split, B, q, n, out));
        double e = rel_err(out, ref, on);
        CHECKF(e <= 1e-4, "%s vs reference %.3g (dt %d B%zu Hq%u Hk%u D%u N%zu bs%u split %u sinks %d)",
               lofp_attn_path_name(fast[f]), e, (int)s->dt, B, s->Hq, s->Hk, s->D, s->nmax, s->bs, s->split, s->sinks);
        printf("  %-6s dt%d B%-2zu Hq%-3u Hk%-2u D%-3u N<=%-6zu bs%-3u split%-5u sinks%d: %.2e\n",
               lofp_attn_path_name(fast[f]), (int)s->dt, B, s->Hq, s->Hk, s->D, s->nmax, s->bs, s->split, s->sinks, e);
        /* thread count does not change a bit */
        CHECK_OK(run(&c, fast[f], s->Hq, scale, sk, 1, s->split, B, q, n, out1));
        CHECKF(memcmp(out, out1, on * sizeof(float)) == 0, "%s: threads 3 vs 1 differ", lofp_attn_path_name(fast[f]));
    }
    tcache_free(&c);
    free(n); free(k); free(v); free(q); free(sinks); free(ref); free(out); free(out1);
}

static void random_shapes(void)
{
    tu_rng rng = { 2024 };
    const shape cases[] = {
        { 3, 8, 2, 128, 16, 150, 1, 0, LOFP_KV_ULTRAQUANT },
        { 2, 4, 4, 64, 32, 77, 0, 0, LOFP_KV_ULTRAQUANT },     /* MHA, g = 1 */
        { 2, 6, 2, 256, 64, 300, 1, 64, LOFP_KV_ULTRAQUANT },  /* g = 3, odd rows, D 256 */
        { 1, 16, 1, 128, 64, 1, 1, 0, LOFP_KV_ULTRAQUANT },    /* N = 1, MQA */
        { 4, 32, 8, 128, 16, 1000, 1, 128, LOFP_KV_ULTRAQUANT },
        { 2, 2, 1, 32, 8, 203, 0, 32, LOFP_KV_ULTRAQUANT },    /* D = 32 */
        { 2, 8, 1, 512, 16, 61, 1, 0, LOFP_KV_ULTRAQUANT },    /* D = 512, g = 8 */
        { 1, 5, 5, 64, 128, 20000, 1, 0, LOFP_KV_ULTRAQUANT }, /* long N, many splits, g = 1 */
        { 2, 8, 2, 128, 16, 150, 1, 64, LOFP_KV_F32 },
        { 2, 8, 2, 128, 16, 150, 1, 0, LOFP_KV_BF16 },
        { 2, 12, 4, 64, 32, 999, 0, 96, LOFP_KV_BF16 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) random_case(&cases[i], &rng, cases[i].nmax <= 1000);
}

/* ---- GQA mapping: every KV head gets its own V (and K), so head h must read head h/(Hq/Hk) --- */

static void gqa_mapping(void)
{
    const uint32_t Hq = 8, Hk = 2, D = 64, N = 40;
    tu_rng rng = { 5 };
    float *k = malloc(N * Hk * D * sizeof(float)), *v = malloc(N * Hk * D * sizeof(float));
    fill(k, N * Hk * D, 1.0, &rng);
    for (uint32_t t = 0; t < N; t++)
        for (uint32_t h = 0; h < Hk; h++)
            for (uint32_t j = 0; j < D; j++) v[(t * Hk + h) * D + j] = h == 0 ? 1.0f : -4.0f;
    float q[8 * 64];
    fill(q, Hq * D, 1.0, &rng);
    int32_t n[1] = { (int32_t)N };
    lofp_attn_path paths[4] = { LOFP_ATTN_REFERENCE, LOFP_ATTN_SCALAR, LOFP_ATTN_AVX2, LOFP_ATTN_AVX512 };
    for (int dt = 0; dt < 2; dt++) {
        tcache c;
        tcache_build(&c, dt ? LOFP_KV_F32 : LOFP_KV_ULTRAQUANT, D, Hk, 16, 1, N, n, k, v, LOFP_HADAMARD_BUTTERFLY, &rng);
        /* V is constant per KV head, so out = that head's stored V (UltraQuant clips 1 -> 0.75 and
         * -4 -> -3: take the values from the cache) */
        float vhat[2 * 64];
        CHECK_OK(lofp_kv_gather(&c.d, c.cache, c.bt, 1, NULL, vhat));
        CHECK(vhat[0] != vhat[D]);
        for (int pi = 0; pi < 4; pi++) {
            if (!have(paths[pi], D)) continue;
            float out[8 * 64];
            CHECK_OK(run(&c, paths[pi], Hq, 0.125f, NULL, 1, 0, 1, q, n, out));
            for (uint32_t h = 0; h < Hq; h++) {
                float want = vhat[(h / (Hq / Hk)) * D];
                for (uint32_t j = 0; j < D; j++)
                    CHECKF(fabsf(out[h * D + j] - want) < 1e-5f, "%s dt%d head %u reads the wrong KV head (%g)",
                           lofp_attn_path_name(paths[pi]), dt, h, out[h * D + j]);
            }
        }
        tcache_free(&c);
    }
    free(k); free(v);
}

/* ---- a slot mapping with skipped entries --------------------------------------------------- */

static void skipped_slots(void)
{
    const uint32_t Hq = 4, Hk = 2, D = 128, bs = 16;
    const size_t T = 50; /* tokens offered; every third is skipped */
    tu_rng rng = { 77 };
    float *k = malloc(T * Hk * D * sizeof(float)), *v = malloc(T * Hk * D * sizeof(float));
    fill(k, T * Hk * D, 1.0, &rng);
    fill(v, T * Hk * D, 1.0, &rng);
    k[(3 * Hk) * D + 5] = NAN; /* token 3 is skipped: its NaN must not matter */
    lofp_kv_cache_desc d;
    CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, D, Hk, bs, 8));
    size_t cb = lofp_kv_cache_bytes(&d);
    uint8_t *cache = malloc(cb);
    memset(cache, 0, cb);
    int32_t bt[8] = { 5, 2, 7, 0, 1, 3, 4, 6 };
    int64_t *slots = malloc(T * sizeof(int64_t));
    size_t pos = 0;
    float *ks = malloc(T * Hk * D * sizeof(float)), *vs = malloc(T * Hk * D * sizeof(float));
    for (size_t t = 0; t < T; t++) {
        if (t % 3 == 0) { slots[t] = -1; continue; }
        slots[t] = (int64_t)bt[pos / bs] * bs + (int64_t)(pos % bs);
        memcpy(ks + pos * Hk * D, k + t * Hk * D, Hk * D * sizeof(float));
        memcpy(vs + pos * Hk * D, v + t * Hk * D, Hk * D * sizeof(float));
        pos++;
    }
    lofp_kv_store_report rep;
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, 0, &rep));
    CHECK_EQ_U(rep.tokens_skipped, 17);
    CHECK_EQ_U(rep.tokens_stored, pos);
    /* the same tokens stored densely into a second cache give the same attention */
    uint8_t *cache2 = malloc(cb);
    memset(cache2, 0, cb);
    int64_t *slots2 = malloc(pos * sizeof(int64_t));
    for (size_t t = 0; t < pos; t++) slots2[t] = (int64_t)bt[t / bs] * bs + (int64_t)(t % bs);
    CHECK_OK(lofp_kv_store(&d, cache2, LOFP_DTYPE_F32, ks, vs, pos, slots2, 0, NULL));
    CHECK(memcmp(cache, cache2, cb) == 0);
    float q[4 * 128], o1[4 * 128], o2[4 * 128];
    fill(q, Hq * D, 1.0, &rng);
    int32_t n[1] = { (int32_t)pos };
    lofp_attn_params p;
    lofp_attn_params_init(&p, Hq, 0.1f, 8);
    CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, o1, NULL));
    CHECK_OK(lofp_attention_decode(&d, &p, cache2, 1, LOFP_DTYPE_F32, q, bt, n, o2, NULL));
    CHECK(memcmp(o1, o2, sizeof o1) == 0);
    free(k); free(v); free(ks); free(vs); free(slots); free(slots2); free(cache); free(cache2);
}

/* ---- prefill / continuation: causal rows == decodes of the prefixes ------------------------- */

static void prefill(void)
{
    const size_t B = 3;
    const uint32_t Hq = 8, Hk = 2, D = 128;
    const int32_t n[3] = { 70, 5, 300 };
    const int32_t qsl[4] = { 0, 17, 17 + 5, 17 + 5 + 40 }; /* 17, 5 (whole sequence), 40 rows */
    const size_t T = 62, nmax = 300;
    tu_rng rng = { 99 };
    float *k = malloc(B * nmax * Hk * D * sizeof(float)), *v = malloc(B * nmax * Hk * D * sizeof(float));
    float *q = malloc(T * Hq * D * sizeof(float)), sinks[8];
    fill(k, B * nmax * Hk * D, 1.0, &rng);
    fill(v, B * nmax * Hk * D, 1.0, &rng);
    fill(q, T * Hq * D, 2.0, &rng);
    fill(sinks, Hq, 1.0, &rng);
    tcache c;
    tcache_build(&c, LOFP_KV_ULTRAQUANT, D, Hk, 32, B, nmax, n, k, v, LOFP_HADAMARD_BUTTERFLY, &rng);
    size_t on = T * Hq * D;
    float *ref = malloc(on * sizeof(float)), *out = malloc(on * sizeof(float)), *ora = malloc(on * sizeof(float));
    lofp_attn_params p;
    lofp_attn_params_init(&p, Hq, 0.09f, c.stride);
    p.sinks = sinks;
    p.path = LOFP_ATTN_REFERENCE;
    CHECK_OK(lofp_attention_prefill(&c.d, &p, c.cache, B, qsl, LOFP_DTYPE_F32, q, c.bt, n, ref, NULL));
    size_t qlen[3] = { 17, 5, 40 };
    oracle(&c, Hq, 0.09f, sinks, B, q, n, qlen, ora);
    CHECKF(rel_err(ref, ora, on) < 1e-5, "prefill reference vs oracle %.3g", rel_err(ref, ora, on));
    /* row i of sequence b == a decode of the first N_b - q_len_b + i + 1 positions */
    float *dec = malloc(Hq * D * sizeof(float));
    size_t bad = 0;
    for (size_t b = 0; b < B; b++)
        for (int32_t i = qsl[b]; i < qsl[b + 1]; i++) {
            int32_t len = n[b] - (qsl[b + 1] - qsl[b]) + (i - qsl[b]) + 1;
            CHECK_OK(lofp_attention_decode(&c.d, &p, c.cache, 1, LOFP_DTYPE_F32, q + (size_t)i * Hq * D,
                                           c.bt + b * c.stride, &len, dec, NULL));
            bad += memcmp(dec, ref + (size_t)i * Hq * D, Hq * D * sizeof(float)) != 0;
        }
    CHECKF(bad == 0, "%zu prefill rows differ from the decode of their prefix", bad);
    for (int f = 0; f < 3; f++) {
        const lofp_attn_path *fast = FAST;
        if (!have(fast[f], D)) continue;
        for (uint32_t split = 0; split <= 64; split += 64) {
            p.path = fast[f];
            p.threads = 2;
            p.split_tokens = split;
            CHECK_OK(lofp_attention_prefill(&c.d, &p, c.cache, B, qsl, LOFP_DTYPE_F32, q, c.bt, n, out, NULL));
            double e = rel_err(out, ref, on);
            CHECKF(e <= 1e-4, "prefill %s split %u vs reference %.3g", lofp_attn_path_name(fast[f]), split, e);
            printf("  prefill %-6s split %-3u vs reference: %.2e\n", lofp_attn_path_name(fast[f]), split, e);
        }
    }
    /* a future token must not leak: change K/V of the last position of sequence 2 in a copy of the
     * cache and check that all rows but the last are unchanged */
    {
        size_t cb = lofp_kv_cache_bytes(&c.d);
        uint8_t *save = malloc(cb);
        memcpy(save, c.cache, cb);
        int64_t slot = (int64_t)c.bt[2 * c.stride + 299 / 32] * 32 + 299 % 32;
        float *kk = malloc(Hk * D * sizeof(float));
        fill(kk, Hk * D, 5.0, &rng);
        CHECK_OK(lofp_kv_store(&c.d, c.cache, LOFP_DTYPE_F32, kk, kk, 1, &slot, 0, NULL));
        p.path = LOFP_ATTN_AUTO;
        p.split_tokens = 0;
        float *out2 = malloc(on * sizeof(float));
        CHECK_OK(lofp_attention_prefill(&c.d, &p, c.cache, B, qsl, LOFP_DTYPE_F32, q, c.bt, n, out2, NULL));
        memcpy(c.cache, save, cb);
        CHECK_OK(lofp_attention_prefill(&c.d, &p, c.cache, B, qsl, LOFP_DTYPE_F32, q, c.bt, n, out, NULL));
        CHECK(memcmp(out, out2, (on - Hq * D) * sizeof(float)) == 0);
        CHECK(memcmp(out + on - Hq * D, out2 + on - Hq * D, Hq * D * sizeof(float)) != 0);
        free(save); free(kk); free(out2);
    }
    tcache_free(&c);
    free(k); free(v); free(q); free(ref); free(out); free(ora); free(dec);
}

/* ---- Q: E4M3 saturation, bf16 input, rotation off ----------------------------------------- */

static void q_handling(void)
{
    const uint32_t Hq = 2, Hk = 1, D = 64, N = 20;
    tu_rng rng = { 3 };
    float *k = malloc(N * D * sizeof(float)), *v = malloc(N * D * sizeof(float));
    fill(k, N * D, 1.0, &rng);
    fill(v, N * D, 1.0, &rng);
    int32_t n[1] = { (int32_t)N };
    tcache c;
    tcache_build(&c, LOFP_KV_ULTRAQUANT, D, Hk, 16, 1, N, n, k, v, LOFP_HADAMARD_BUTTERFLY, &rng);
    float q[2 * 64], out[2 * 64], out2[2 * 64];
    for (uint32_t j = 0; j < Hq * D; j++) q[j] = j < D ? 8000.0f * (j == 3) : 0.01f * (float)j;
    lofp_attn_params p;
    lofp_attn_params_init(&p, Hq, 0.125f, c.stride);
    lofp_attn_report rep;
    CHECK_OK(lofp_attention_decode(&c.d, &p, c.cache, 1, LOFP_DTYPE_F32, q, c.bt, n, out, &rep));
    /* head 0: q = 8000 e_3 rotates to +-1000 everywhere: 64 values past 464, saturated to 448 */
    CHECK_EQ_U(rep.saturated_q, 64);
    for (uint32_t j = 0; j < Hq * D; j++) CHECK(isfinite(out[j]));
    /* saturating is the same as having asked for q = 448*8 e_3 (rotates to exactly +-448) */
    q[3] = 3584.0f;
    CHECK_OK(lofp_attention_decode(&c.d, &p, c.cache, 1, LOFP_DTYPE_F32, q, c.bt, n, out2, &rep));
    CHECK_EQ_U(rep.saturated_q, 0);
    CHECK(memcmp(out, out2, sizeof out) == 0);
    /* bf16 queries are widened exactly: the same as the fp32 values */
    uint16_t qb[2 * 64];
    for (uint32_t j = 0; j < Hq * D; j++) { qb[j] = lofp_fp32_to_bf16(q[j]); q[j] = lofp_bf16_to_fp32(qb[j]); }
    CHECK_OK(lofp_attention_decode(&c.d, &p, c.cache, 1, LOFP_DTYPE_F32, q, c.bt, n, out, NULL));
    CHECK_OK(lofp_attention_decode(&c.d, &p, c.cache, 1, LOFP_DTYPE_BF16, qb, c.bt, n, out2, NULL));
    CHECK(memcmp(out, out2, sizeof out) == 0);
    tcache_free(&c);
    /* rotation off: K stored unrotated and Q not rotated; oracle agrees */
    tcache_build(&c, LOFP_KV_ULTRAQUANT, D, Hk, 16, 1, N, n, k, v, LOFP_HADAMARD_BUTTERFLY, &rng);
    c.d.rotate_k = 0;
    int64_t slots[20];
    for (uint32_t t = 0; t < N; t++) slots[t] = (int64_t)c.bt[t / 16] * 16 + t % 16;
    CHECK_OK(lofp_kv_store(&c.d, c.cache, LOFP_DTYPE_F32, k, v, N, slots, 0, NULL));
    float ora[2 * 64];
    p.path = LOFP_ATTN_REFERENCE;
    CHECK_OK(lofp_attention_decode(&c.d, &p, c.cache, 1, LOFP_DTYPE_F32, q, c.bt, n, out, NULL));
    oracle(&c, Hq, 0.125f, NULL, 1, q, n, NULL, ora);
    CHECK(rel_err(out, ora, Hq * D) < 1e-5);
    c.d.rotate_k = 1; /* reading it as rotated gives something else */
    CHECK_OK(lofp_attention_decode(&c.d, &p, c.cache, 1, LOFP_DTYPE_F32, q, c.bt, n, out2, NULL));
    CHECK(rel_err(out2, ora, Hq * D) > 1e-3);
    tcache_free(&c);
    free(k); free(v);
}

/* ---- the query preparation against lofp's own codec and Hadamard, bit for bit ---------------- */

static void q_prep_exact(void)
{
    /* E4M3 cast: a strided sweep over all fp32 patterns (finite ones), plus every E4M3 midpoint */
    uint32_t stride = 4099u * tu_exhaustive_stride();
    size_t bad = 0, n = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += stride) {
        float x;
        uint32_t b = (uint32_t)u;
        memcpy(&x, &b, 4);
        if (!isfinite(x)) continue;
        float want = lofp_decode(LOFP_ELEM_E4M3, lofp_encode(LOFP_ELEM_E4M3, x, LOFP_RNE, LOFP_SATURATE, 0));
        float got = lofp_e4m3_saturate(x);
        bad += memcmp(&want, &got, 4) != 0;
        n++;
    }
    for (uint32_t c = 0; c < 0x7E; c++) { /* midpoints between neighbouring codes, and a hair around */
        float lo = lofp_decode(LOFP_ELEM_E4M3, c), hi = lofp_decode(LOFP_ELEM_E4M3, c + 1);
        float m = (lo + hi) * 0.5f, probes[3] = { m, nextafterf(m, 0.0f), nextafterf(m, 1e9f) };
        for (int i = 0; i < 3; i++)
            for (int sgn = 0; sgn < 2; sgn++) {
                float x = sgn ? -probes[i] : probes[i];
                float want = lofp_decode(LOFP_ELEM_E4M3, lofp_encode(LOFP_ELEM_E4M3, x, LOFP_RNE, LOFP_SATURATE, 0));
                float got = lofp_e4m3_saturate(x);
                bad += memcmp(&want, &got, 4) != 0;
                n++;
            }
    }
    float big[6] = { 448.0f, 463.9f, 464.0f, 464.1f, 1e30f, -5000.0f };
    for (int i = 0; i < 6; i++) bad += fabsf(lofp_e4m3_saturate(big[i])) != 448.0f;
    CHECKF(bad == 0, "E4M3 cast: %zu of %zu values differ from lofp_encode/lofp_decode", bad, n);
    /* rotation: 13 rows (a partial block of 8) at every head dim */
    tu_rng rng = { 61 };
    for (uint32_t D = 32; D <= 512; D *= 2) {
        float *x = malloc(13 * D * sizeof(float)), *got = malloc(13 * D * sizeof(float)), *rot = malloc(D * sizeof(float));
        fill(x, 13 * D, 3.0, &rng);
        x[5 * D + 1] = 600.0f * sqrtf((float)D); /* rotates to about +-600: saturates */
        float *hs = malloc((size_t)D * D * sizeof(float));
        lofp_attn_hadamard_table(D, hs);
        size_t sat = lofp_attn_prep_q(x, 13, D, hs, got), want_sat = 0;
        free(hs);
        size_t badr = 0;
        for (size_t r = 0; r < 13; r++) {
            lofp_hadamard_dense(x + r * D, rot, D);
            for (uint32_t j = 0; j < D; j++) {
                want_sat += fabsf(rot[j]) > 464.0f;
                float w = lofp_decode(LOFP_ELEM_E4M3, lofp_encode(LOFP_ELEM_E4M3, rot[j], LOFP_RNE, LOFP_SATURATE, 0));
                badr += memcmp(&w, &got[r * D + j], 4) != 0;
            }
        }
        CHECKF(badr == 0, "D=%u: %zu prepared q values differ from E4M3(lofp_hadamard_dense)", D, badr);
        CHECK_EQ_U(sat, want_sat);
        CHECK(sat > 0);
        free(x); free(got); free(rot);
    }
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void bad_input(void)
{
    lofp_kv_cache_desc d;
    CHECK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 48, 2, 16, 4) == LOFP_ERR_SHAPE);  /* not 2^k */
    CHECK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 16, 2, 16, 4) == LOFP_ERR_SHAPE);  /* < 32 */
    CHECK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 96, 2, 16, 4) == LOFP_ERR_SHAPE);  /* 32k, not 2^k */
    CHECK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 1024, 2, 16, 4) == LOFP_ERR_SHAPE);
    CHECK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 64, 0, 16, 4) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_kv_desc_init(&d, (lofp_kv_format)9, 64, 2, 16, 4) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_kv_slot_bytes(LOFP_KV_ULTRAQUANT, 100) == 0);

    const uint32_t D = 64, Hk = 2, Hq = 4, N = 20;
    CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, D, Hk, 16, 4));
    uint8_t *cache = calloc(1, lofp_kv_cache_bytes(&d));
    tu_rng rng = { 8 };
    float k[20 * 2 * 64], v[20 * 2 * 64], q[4 * 64], out[4 * 64];
    fill(k, N * Hk * D, 1.0, &rng);
    fill(v, N * Hk * D, 1.0, &rng);
    fill(q, Hq * D, 1.0, &rng);
    int64_t slots[20];
    int32_t bt[2] = { 3, 1 }, n[1] = { (int32_t)N };
    for (uint32_t t = 0; t < N; t++) slots[t] = (int64_t)bt[t / 16] * 16 + t % 16;
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, N, slots, 0, NULL));
    lofp_attn_params p;
    lofp_attn_params_init(&p, Hq, 0.125f, 2);
    lofp_attn_report rep;
    CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep));
    /* Hq % Hk */
    p.num_q_heads = 3;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_SHAPE);
    p.num_q_heads = 0;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_SHAPE);
    p.num_q_heads = Hq;
    /* N = 0, negative N, no sequences */
    int32_t n0[1] = { 0 }, nneg[1] = { -3 };
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n0, out, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, nneg, out, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_attention_decode(&d, &p, cache, 0, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    /* N beyond the block table */
    int32_t nbig[1] = { 33 };
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, nbig, out, &rep) == LOFP_ERR_SHAPE);
    /* block index out of range */
    int32_t btbad[2] = { 3, 4 };
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, btbad, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    btbad[1] = -1;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, btbad, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    /* non-finite q, with its index */
    q[2 * D + 7] = INFINITY;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_NONFINITE);
    CHECK_EQ_U(rep.first_bad_index, 2 * D + 7);
    q[2 * D + 7] = NAN;
    p.path = LOFP_ATTN_REFERENCE;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_NONFINITE);
    q[2 * D + 7] = 0.5f;
    p.path = LOFP_ATTN_AUTO;
    /* sinks: NaN and +Inf refused, -Inf means none */
    float sinks[4] = { 0, 0, NAN, 0 };
    p.sinks = sinks;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    sinks[2] = INFINITY;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    for (int i = 0; i < 4; i++) sinks[i] = -INFINITY;
    float o2[4 * 64];
    CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep));
    p.sinks = NULL;
    CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, o2, &rep));
    CHECK(memcmp(out, o2, sizeof out) == 0);
    /* scale */
    p.scale = NAN;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    p.scale = 0.125f;
    /* NULLs, dtype, path */
    CHECK(lofp_attention_decode(&d, &p, NULL, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_attention_decode(&d, &p, cache, 1, (lofp_dtype)7, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    p.path = (lofp_attn_path)5;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    p.path = LOFP_ATTN_AUTO;
    /* prefill: malformed query_start_loc, q_len > N */
    int32_t qsl_bad[2] = { 1, 2 }, qsl_long[2] = { 0, 21 };
    CHECK(lofp_attention_prefill(&d, &p, cache, 1, qsl_bad, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_attention_prefill(&d, &p, cache, 1, NULL, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_attention_prefill(&d, &p, cache, 1, qsl_long, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_SHAPE);
    /* a workspace: exact size works and gives the same bits, one byte less is refused */
    CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep));
    size_t wb = lofp_attention_workspace_bytes(&d, &p, 1, 1, N);
    CHECK(wb > 0);
    void *w = malloc(wb);
    p.workspace = w;
    p.workspace_bytes = wb;
    CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, o2, &rep));
    CHECK(memcmp(out, o2, sizeof out) == 0);
    p.workspace_bytes = wb - 1;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, o2, &rep) == LOFP_ERR_BUFFER_TOO_SMALL);
    p.workspace = NULL;
    p.workspace_bytes = 0;
    free(w);

    if (have_avx512()) {
        CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep));
        CHECK(rep.path == LOFP_ATTN_AVX512);
        setenv("LOFP_DISABLE_CPU_FEATURES", "avx512bw", 1);
        lofp_cpu_features_reset();
        CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep));
        CHECK(rep.path == LOFP_ATTN_AVX2);
        p.path = LOFP_ATTN_AVX512;
        CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_UNSUPPORTED);
        p.path = LOFP_ATTN_AUTO;
        unsetenv("LOFP_DISABLE_CPU_FEATURES");
        lofp_cpu_features_reset();
    }
    {
        /* D = 32: AUTO does not pick AVX512, asking for it is refused */
        lofp_kv_cache_desc d32;
        CHECK_OK(lofp_kv_desc_init(&d32, LOFP_KV_ULTRAQUANT, 32, 1, 16, 1));
        uint8_t *c32 = calloc(1, lofp_kv_cache_bytes(&d32));
        int32_t bt32[1] = { 0 }, n32[1] = { 3 };
        lofp_attn_params p32;
        lofp_attn_params_init(&p32, 1, 0.1f, 1);
        CHECK_OK(lofp_attention_decode(&d32, &p32, c32, 1, LOFP_DTYPE_F32, q, bt32, n32, out, &rep));
        CHECK(rep.path != LOFP_ATTN_AVX512);
        p32.path = LOFP_ATTN_AVX512;
        CHECK(lofp_attention_decode(&d32, &p32, c32, 1, LOFP_DTYPE_F32, q, bt32, n32, out, &rep) == LOFP_ERR_UNSUPPORTED);
        free(c32);
    }
    /* LOFP_DISABLE_CPU_FEATURES=all: AUTO runs the scalar path, AVX2 is refused */
    setenv("LOFP_DISABLE_CPU_FEATURES", "all", 1);
    lofp_cpu_features_reset();
    CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep));
    CHECK(rep.path == LOFP_ATTN_SCALAR);
    p.path = LOFP_ATTN_AVX2;
    CHECK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep) == LOFP_ERR_UNSUPPORTED);
    p.path = LOFP_ATTN_AUTO;
    unsetenv("LOFP_DISABLE_CPU_FEATURES");
    lofp_cpu_features_reset();
    if (have_avx2()) {
        CHECK_OK(lofp_attention_decode(&d, &p, cache, 1, LOFP_DTYPE_F32, q, bt, n, out, &rep));
        CHECK(rep.path == (have_avx512() ? LOFP_ATTN_AVX512 : LOFP_ATTN_AVX2));
    }
    free(cache);
}

int main(void)
{
    golden();
    random_shapes();
    gqa_mapping();
    skipped_slots();
    prefill();
    q_handling();
    q_prep_exact();
    bad_input();
    return tu_finish("test_attention");
}

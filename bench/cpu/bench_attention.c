/* bench_attention.c -- `lofp bench attention`: one decode step (one query token per sequence) at
 * B=8, Hq=32, Hk=8, D=128 over N=32768 and N=4096 cached tokens, for lofp's attention over the
 * UltraQuant cache, over an fp32 and over a bf16 cache (same driver, same threading, same paging),
 * against the bytes-moved floor from the read bandwidth measured in the same run
 * (o->read_bw). --quick: B=2, Hq=8, Hk=2, N=2048 and 256. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "lofp/kvcache.h"

#define BLOCK 64u

typedef struct {
    const lofp_kv_cache_desc *d;
    lofp_attn_params p;
    const uint8_t *cache;
    size_t B;
    const float *q;
    const int32_t *bt;
    const int32_t *n;
    float *out;
    lofp_status st;
} step_arg;

static void step(void *a)
{
    step_arg *s = a;
    s->st = lofp_attention_decode(s->d, &s->p, s->cache, s->B, LOFP_DTYPE_F32, s->q, s->bt, s->n, s->out, NULL);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* roughly normal: sum of 4 uniforms, centred, unit variance */
static float rnd(uint64_t *s)
{
    uint64_t r = rng_next(s);
    float a = 0;
    for (int i = 0; i < 4; i++) a += (float)((r >> (16 * i)) & 0xFFFF) * (1.0f / 65536.0f);
    return (a - 2.0f) * 1.7320508f;
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= num)) num = e;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return den > 0 ? num / den : num;
}

int bench_group_attention(const bench_opts *o)
{
    const size_t B = o->quick ? 2 : 8;
    const uint32_t Hq = o->quick ? 8 : 32, Hk = o->quick ? 2 : 8, D = 128;
    const size_t Ns[2] = { o->quick ? 2048 : 32768, o->quick ? 256 : 4096 };
    const size_t nmax = Ns[0], per_seq = nmax / BLOCK, nblocks = B * per_seq;
    const int threads = o->threads_max;
    const lofp_kv_format kinds[3] = { LOFP_KV_ULTRAQUANT, LOFP_KV_BF16, LOFP_KV_F32 };
    const char *names[3] = { "ultraquant", "bf16", "fp32" };
    lofp_kv_cache_desc d[3];
    uint8_t *cache[3] = { NULL, NULL, NULL };
    int rc = 0;

    printf("attention: decode step, B=%zu Hq=%u Hk=%u D=%u, block %u (block tables shuffled), %d thread%s\n",
           B, Hq, Hk, D, BLOCK, threads, threads > 1 ? "s" : "");
    for (int k = 0; k < 3; k++) {
        if (lofp_kv_desc_init(&d[k], kinds[k], D, Hk, BLOCK, nblocks) != LOFP_OK) return 1;
        cache[k] = malloc(lofp_kv_cache_bytes(&d[k]));
        if (!cache[k]) { fprintf(stderr, "attention: cannot allocate the %s cache\n", names[k]); rc = 1; goto done; }
    }
    /* block tables: a shuffled permutation of all blocks */
    int32_t *bt = malloc(nblocks * sizeof(int32_t)), n[8];
    uint64_t seed = 12345;
    for (size_t i = 0; i < nblocks; i++) bt[i] = (int32_t)i;
    for (size_t i = nblocks; i > 1; i--) {
        size_t j = rng_next(&seed) % i;
        int32_t t = bt[i - 1]; bt[i - 1] = bt[j]; bt[j] = t;
    }
    /* fill: chunks of tokens of every sequence, stored into all three caches */
    const size_t chunk = 256;
    float *k = malloc(chunk * Hk * D * sizeof(float)), *v = malloc(chunk * Hk * D * sizeof(float));
    int64_t *slots = malloc(chunk * sizeof(int64_t));
    double t0 = cli_now(), t_uq = 0;
    for (size_t b = 0; b < B && !rc; b++)
        for (size_t p0 = 0; p0 < nmax; p0 += chunk) {
            for (size_t i = 0; i < chunk * Hk * D; i++) { k[i] = rnd(&seed); v[i] = rnd(&seed); }
            for (size_t t = 0; t < chunk; t++) {
                size_t pos = p0 + t;
                slots[t] = (int64_t)bt[b * per_seq + pos / BLOCK] * BLOCK + (int64_t)(pos % BLOCK);
            }
            for (int kk = 0; kk < 3; kk++) {
                double ts = cli_now();
                if (lofp_kv_store(&d[kk], cache[kk], LOFP_DTYPE_F32, k, v, chunk, slots, 0, NULL) != LOFP_OK) rc = 1;
                if (kk == 0) t_uq += cli_now() - ts;
            }
        }
    free(k); free(v); free(slots);
    printf("  (filled %zu tokens x %zu sequences in %.1f s, of which the UltraQuant store %.1f s = %.2f us per token-head)\n",
           nmax, B, cli_now() - t0, t_uq, t_uq * 1e6 / ((double)B * (double)nmax * Hk));
    if (rc) { fprintf(stderr, "attention: store failed\n"); goto done_bt; }

    float *q = malloc(B * Hq * D * sizeof(float)), *out = malloc(B * Hq * D * sizeof(float));
    float *ref = malloc(B * Hq * D * sizeof(float));
    for (size_t i = 0; i < B * Hq * D; i++) q[i] = rnd(&seed);
    const double bw = o->read_bw[threads > 0 && threads <= 8 ? threads : 1];

    printf("  %-7s %-11s %-9s %7s %9s %9s %10s %9s %10s\n", "N", "cache", "path", "threads", "ms/step",
           "GB/s", "floor ms", "x floor", "vs bf16");
    for (int ni = 0; ni < 2 && !rc; ni++) {
        const size_t N = Ns[ni];
        for (size_t b = 0; b < B; b++) n[b] = (int32_t)N;
        double ms_bf16 = 0, ms_row[8];
        struct { int kind; lofp_attn_path path; int thr; } rows[] = {
            { 1, LOFP_ATTN_AUTO, threads }, { 2, LOFP_ATTN_AUTO, threads }, { 0, LOFP_ATTN_AUTO, threads },
            { 0, LOFP_ATTN_AUTO, 1 }, { 1, LOFP_ATTN_AVX2, threads }, { 0, LOFP_ATTN_AVX2, threads },
            { 0, LOFP_ATTN_SCALAR, threads },
        };
        const int nrows = sizeof rows / sizeof rows[0];
        for (int r = 0; r < nrows; r++) {
            int kk = rows[r].kind;
            step_arg a;
            memset(&a, 0, sizeof a);
            a.d = &d[kk];
            lofp_attn_params_init(&a.p, Hq, 1.0f / sqrtf((float)D), per_seq);
            a.p.path = rows[r].path;
            a.p.threads = (unsigned)rows[r].thr;
            a.cache = cache[kk];
            a.B = B;
            a.q = q;
            a.bt = bt;
            a.n = n;
            a.out = out;
            /* a server keeps its scratch between steps: allocate the workspace once */
            a.p.workspace_bytes = lofp_attention_workspace_bytes(a.d, &a.p, B, B, N);
            a.p.workspace = malloc(a.p.workspace_bytes);
            if (a.p.workspace) memset(a.p.workspace, 0, a.p.workspace_bytes);
            double sec = bench_time(o, step, &a);
            free(a.p.workspace);
            a.p.workspace = NULL;
            a.p.workspace_bytes = 0;
            if (a.st == LOFP_ERR_UNSUPPORTED) continue; /* e.g. no AVX2 here */
            if (a.st != LOFP_OK) { fprintf(stderr, "attention: %s\n", lofp_status_name(a.st)); rc = 1; break; }
            double bytes = (double)B * (double)N * Hk * (double)lofp_kv_slot_bytes(kinds[kk], D);
            double bw_t = o->read_bw[rows[r].thr];
            double floor_ms = bw_t > 0 ? bytes / (bw_t * 1e9) * 1e3 : 0;
            ms_row[r] = sec * 1e3;
            if (kk == 1 && r == 0) ms_bf16 = ms_row[r];
            lofp_attn_report rep;
            lofp_attention_decode(a.d, &a.p, a.cache, B, LOFP_DTYPE_F32, q, bt, n, out, &rep);
            char vs[32] = "";
            if (ms_bf16 > 0) snprintf(vs, sizeof vs, "%.2fx", ms_bf16 / ms_row[r]);
            printf("  %-7zu %-11s %-9s %7d %9.2f %9.2f %10.2f %9.2f %10s\n", N, names[kk],
                   lofp_attn_path_name(rep.path), rows[r].thr, ms_row[r], bytes / sec / 1e9, floor_ms,
                   floor_ms > 0 ? ms_row[r] / floor_ms : 0.0, vs);
            /* self-check against the reference path (at the smaller N: the reference is slow) */
            if (ni == 1 && rows[r].path == LOFP_ATTN_AUTO && rows[r].thr == threads) {
                lofp_attn_params pr = a.p;
                pr.path = LOFP_ATTN_REFERENCE;
                if (lofp_attention_decode(a.d, &pr, a.cache, B, LOFP_DTYPE_F32, q, bt, n, ref, NULL) != LOFP_OK) rc = 1;
                double e = rel_err(out, ref, B * Hq * D);
                if (!(e <= 1e-4)) {
                    fprintf(stderr, "attention: %s vs reference %.3g > 1e-4\n", names[kk], e);
                    rc = 1;
                }
            }
        }
        (void)bw;
    }
    free(q); free(out); free(ref);
done_bt:
    free(bt);
done:
    for (int kk = 0; kk < 3; kk++) free(cache[kk]);
    printf("\n");
    return rc;
}

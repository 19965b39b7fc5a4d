/* attention.c -- decode and prefill attention over a paged KV cache (SPEC §5).
 *
 * The driver validates, prepares Q (dense Hadamard rotation in fp32 and the E4M3 cast for
 * UltraQuant), then either runs the reference (per query row and head, full softmax, sequential
 * fp32 sums: vLLM's reference_ultraquant_attention step by step) or cuts the work into tasks
 * (sequence, query chunk, split of the context, group of KV heads) that the library's thread pool
 * runs with the scalar, AVX2 or AVX-512 tile kernel, and merges the split partials with a log-sum-exp
 * merge that also adds the sink. Results never depend on the thread count: the split boundaries
 * depend only on the sequence lengths and params.split_tokens, and the merge order is fixed. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "attention_internal.h"
#include "runtime/cpu_features.h"
#include "runtime/threadpool.h"

#define DEFAULT_SPLIT_TOKENS 1024u
#define MAX_THREADS LOFP_MAX_THREADS
#define PREFILL_ROWS 64u /* query rows (tokens x heads of one KV head) per prefill task */
#define ALIGN 64u

const char *lofp_attn_path_name(lofp_attn_path p)
{
    switch (p) {
    case LOFP_ATTN_AUTO: return "auto";
    case LOFP_ATTN_REFERENCE: return "reference";
    case LOFP_ATTN_SCALAR: return "scalar";
    case LOFP_ATTN_AVX2: return "avx2";
    case LOFP_ATTN_AVX512: return "avx512";
    }
    return NULL;
}

lofp_status lofp_attn_params_init(lofp_attn_params *p, uint32_t num_q_heads, float scale,
                                  size_t block_table_stride)
{
    if (!p) return LOFP_ERR_INVALID_ARG;
    memset(p, 0, sizeof *p);
    p->num_q_heads = num_q_heads;
    p->scale = scale;
    p->block_table_stride = block_table_stride;
    p->path = LOFP_ATTN_AUTO;
    p->threads = 1;
    return LOFP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Parallel loops on the library's thread pool                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef void (*par_fn)(void *ctx, size_t item, uint8_t *scratch);

typedef struct {
    par_fn fn;
    void *ctx;
    size_t n;
    atomic_size_t next;
    uint8_t *scratch;
    size_t scratch_bytes;
} par_job;

/* Pool task `slot`: pulls items until none is left, with scratch slot `slot` (each task index
 * runs exactly once, so the scratch slots are never shared). */
static void par_task(void *arg, size_t slot)
{
    par_job *j = arg;
    uint8_t *s = j->scratch ? j->scratch + slot * j->scratch_bytes : NULL;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->n) break;
        j->fn(j->ctx, i, s);
    }
}

/* Runs fn(ctx, i, scratch) for i in [0, n) on up to nthreads threads (the caller included). */
static void par_run(par_fn fn, void *ctx, size_t n, unsigned nthreads, uint8_t *scratch,
                    size_t scratch_bytes)
{
    par_job j;
    j.fn = fn;
    j.ctx = ctx;
    j.n = n;
    atomic_init(&j.next, 0);
    j.scratch = scratch;
    j.scratch_bytes = scratch_bytes;
    size_t nt = nthreads < 1 ? 1 : nthreads;
    if (nt > n) nt = n ? n : 1;
    lofp_parallel_run(nt, par_task, &j);
}

/* ------------------------------------------------------------------------------------------ */
/* Planning and workspace                                                                      */
/* ------------------------------------------------------------------------------------------ */

static size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

static unsigned thread_count(const lofp_attn_params *p)
{
    unsigned n = p->threads ? p->threads : 1;
    return n > MAX_THREADS ? MAX_THREADS : n;
}

static size_t split_tokens(const lofp_attn_geom *G, const lofp_attn_params *p)
{
    size_t s = p->split_tokens ? p->split_tokens : DEFAULT_SPLIT_TOKENS;
    return lofp_ceil_div(s, G->tile) * G->tile;
}

static uint32_t prefill_chunk(const lofp_attn_geom *G)
{
    uint32_t c = PREFILL_ROWS / G->g;
    return c ? c : 1;
}

typedef struct {
    size_t qprep, limit, seq, hs, records, scratch_per_thread, scratch, total;
} ws_layout;

/* Upper-bound layout for B sequences, T query rows, sequences of at most max_n tokens. Returns 0
 * on overflow. */
static int ws_plan(const lofp_attn_geom *G, const lofp_attn_params *p, lofp_attn_path path,
                   size_t B, size_t T, size_t max_n, ws_layout *w)
{
    const size_t D = G->D, Hq = G->Hq;
    size_t a, b, c;
    memset(w, 0, sizeof *w);
    if (!lofp_mul_size(T, Hq, &a) || !lofp_mul_size(a, D * sizeof(float), &a)) return 0;
    w->qprep = align_up(a);
    if (!lofp_mul_size(T, sizeof(size_t), &a)) return 0;
    w->limit = align_up(a);
    if (!lofp_add_size(B, 1, &a) || !lofp_mul_size(a, 3 * sizeof(size_t), &a)) return 0;
    w->seq = align_up(a);
    w->hs = G->format == LOFP_KV_ULTRAQUANT ? align_up((size_t)D * D * sizeof(float)) : 0;
    unsigned nt = thread_count(p);
    if (path == LOFP_ATTN_REFERENCE) {
        w->records = 0;
        if (!lofp_add_size(max_n, 2 * (size_t)D, &a) || !lofp_mul_size(a, sizeof(float), &a)) return 0;
        w->scratch_per_thread = align_up(a);
    } else {
        size_t S = lofp_ceil_div(max_n, split_tokens(G, p));
        if (!lofp_mul_size(T, Hq, &a) || !lofp_mul_size(a, S, &a) ||
            !lofp_mul_size(a, (D + 2) * sizeof(float), &a))
            return 0;
        w->records = align_up(a);
        /* rows of a task: the query chunk (at most T rows) times the GQA group */
        size_t chunk = prefill_chunk(G) < T ? prefill_chunk(G) : (T ? T : 1);
        w->scratch_per_thread = align_up(lofp_attn_task_scratch_bytes(G, chunk * G->g));
    }
    if (!lofp_mul_size(w->scratch_per_thread, nt, &b)) return 0;
    w->scratch = b;
    c = 0;
    if (!lofp_add_size(c, w->qprep, &c) || !lofp_add_size(c, w->limit, &c) ||
        !lofp_add_size(c, w->seq, &c) || !lofp_add_size(c, w->hs, &c) || !lofp_add_size(c, w->records, &c) ||
        !lofp_add_size(c, w->scratch, &c) || !lofp_add_size(c, ALIGN, &c))
        return 0;
    w->total = c;
    return 1;
}

static int have_path(lofp_attn_path p, uint32_t D)
{
    uint32_t f = lofp_cpu_features();
    int avx2 = lofp_attn_avx2_built() && (f & LOFP_CPU_AVX2) && (f & LOFP_CPU_FMA);
    const uint32_t f512 = LOFP_CPU_AVX512F | LOFP_CPU_AVX512BW | LOFP_CPU_AVX512VL;
    if (p == LOFP_ATTN_AVX2) return avx2;
    if (p == LOFP_ATTN_AVX512) return avx2 && (f & f512) == f512 && D >= 64;
    return 1;
}

static lofp_attn_path resolve_path(lofp_attn_path p, uint32_t D)
{
    if (p != LOFP_ATTN_AUTO) return p;
    if (have_path(LOFP_ATTN_AVX512, D)) return LOFP_ATTN_AVX512;
    if (have_path(LOFP_ATTN_AVX2, D)) return LOFP_ATTN_AVX2;
    return LOFP_ATTN_SCALAR;
}

static lofp_status check_params(const lofp_kv_cache_desc *d, const lofp_attn_params *p)
{
    lofp_status st = lofp_kv_desc_validate(d);
    if (st != LOFP_OK) return st;
    if (!p) return LOFP_ERR_INVALID_ARG;
    if (p->num_q_heads == 0 || p->num_q_heads % d->num_kv_heads != 0) return LOFP_ERR_SHAPE;
    if (!isfinite(p->scale)) return LOFP_ERR_INVALID_ARG;
    if ((unsigned)p->path > (unsigned)LOFP_ATTN_AVX512) return LOFP_ERR_INVALID_ARG;
    if (p->block_table_stride == 0) return LOFP_ERR_INVALID_ARG;
    if (p->sinks)
        for (uint32_t h = 0; h < p->num_q_heads; h++)
            if (isnan(p->sinks[h]) || p->sinks[h] == INFINITY) return LOFP_ERR_INVALID_ARG;
    return LOFP_OK;
}

size_t lofp_attention_workspace_bytes(const lofp_kv_cache_desc *d, const lofp_attn_params *p,
                                      size_t num_seqs, size_t num_query_tokens, size_t max_seq_len)
{
    if (check_params(d, p) != LOFP_OK || num_seqs == 0 || max_seq_len == 0) return 0;
    lofp_attn_geom G;
    lofp_attn_geom_init(&G, d, p->num_q_heads);
    ws_layout w;
    if (!ws_plan(&G, p, resolve_path(p->path, G.D), num_seqs, num_query_tokens, max_seq_len, &w)) return 0;
    return w.total;
}

/* ------------------------------------------------------------------------------------------ */
/* The run                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    lofp_attn_geom G;
    const lofp_attn_params *p;
    size_t B, T;
    const int32_t *bt;
    size_t bt_stride;
    const int32_t *seq_lens;
    const float *qprep;     /* [T][Hq][D] */
    size_t *limit;          /* [T] keys visible to each query row */
    size_t *qs;             /* [B+1] first query row of each sequence */
    size_t *rec_off;        /* [B+1] first record of each sequence */
    size_t *task_off;       /* [B+1] first task of each sequence */
    float *records;
    size_t split;
    uint32_t chunk;         /* query tokens per task */
    uint32_t hg, hparts;    /* KV heads per task, head groups */
    lofp_attn_path path;
    float *out;
    const float *hs;        /* dense Hadamard [D][D] for the Q rotation (UltraQuant) */
    const void *q_in;       /* the caller's q and its dtype */
    lofp_dtype q_dt;
    int rotate_q;
    atomic_size_t saturated;
} run_ctx;

static size_t seq_of(const size_t *off, size_t B, size_t i)
{
    /* the last b with off[b] <= i and off[b+1] > i (off non-decreasing, off[B] > i) */
    size_t lo = 0, hi = B; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (off[mid] <= i) lo = mid;
        else hi = mid;
    }
    while (lo + 1 < B && off[lo + 1] <= i) lo++;
    return lo;
}

static size_t nsplits(const run_ctx *c, size_t b)
{
    return lofp_ceil_div((size_t)c->seq_lens[b], c->split);
}

/* Sequence, KV heads and key range of work item `item`. */
static void item_span(const run_ctx *c, size_t item, size_t *b_out, size_t *local_out, lofp_attn_task *t)
{
    size_t b = seq_of(c->task_off, c->B, item);
    size_t S = nsplits(c, b), local = item - c->task_off[b];
    size_t hp = local % c->hparts, s = (local / c->hparts) % S;
    t->block_table = c->bt + b * c->bt_stride;
    t->h0 = (uint32_t)(hp * c->hg);
    t->h1 = t->h0 + c->hg > c->G.Hk ? c->G.Hk : t->h0 + c->hg;
    t->start = s * c->split;
    t->end = t->start + c->split;
    if (t->end > (size_t)c->seq_lens[b]) t->end = (size_t)c->seq_lens[b];
    *b_out = b;
    *local_out = local;
}

static void task_item(void *ctxv, size_t item, uint8_t *scratch)
{
    run_ctx *c = ctxv;
    const lofp_attn_geom *G = &c->G;
    size_t b, local;
    lofp_attn_task t;
    item_span(c, item, &b, &local, &t);
    size_t S = nsplits(c, b), s = (local / c->hparts) % S, ch = local / c->hparts / S;
    size_t qlen = c->qs[b + 1] - c->qs[b];
    size_t i0 = ch * c->chunk;
    t.next_bt = NULL;
    t.next_start = t.next_end = 0;
    t.next_h0 = t.next_h1 = 0;
    if (item + 1 < c->task_off[c->B]) {
        lofp_attn_task n;
        size_t nb, nl;
        item_span(c, item + 1, &nb, &nl, &n);
        t.next_bt = n.block_table;
        t.next_start = n.start;
        t.next_end = n.end;
        t.next_h0 = n.h0;
        t.next_h1 = n.h1;
    }
    t.qn = (uint32_t)(qlen - i0 < c->chunk ? qlen - i0 : c->chunk);
    t.limit = c->limit + c->qs[b] + i0;
    t.q = c->qprep + (c->qs[b] + i0) * G->Hq * G->D;
    t.q_tok_stride = (size_t)G->Hq * G->D;
    t.part_stride = S * (G->D + 2);
    t.part = c->records + (c->rec_off[b] + i0 * G->Hq * S + s) * (G->D + 2);
    if (c->path == LOFP_ATTN_AVX512) lofp_attn_task_avx512(G, &t, scratch);
    else if (c->path == LOFP_ATTN_AVX2) lofp_attn_task_avx2(G, &t, scratch);
    else lofp_attn_task_scalar(G, &t, scratch);
}

/* Log-sum-exp merge of a query row's split partials, plus the sink. */
static void merge_item(void *ctxv, size_t qi, uint8_t *scratch)
{
    (void)scratch;
    run_ctx *c = ctxv;
    const size_t D = c->G.D, Hq = c->G.Hq;
    size_t b = seq_of(c->qs, c->B, qi);
    size_t S = nsplits(c, b), li = qi - c->qs[b];
    for (size_t h = 0; h < Hq; h++) {
        const float *rec = c->records + (c->rec_off[b] + (li * Hq + h) * S) * (D + 2);
        float *o = c->out + (qi * Hq + h) * D;
        float M = -INFINITY;
        for (size_t s = 0; s < S; s++) M = fmaxf(M, rec[s * (D + 2) + D]);
        float sink = c->p->sinks ? c->p->sinks[h] : -INFINITY;
        M = fmaxf(M, sink);
        if (M == -INFINITY) { memset(o, 0, D * sizeof(float)); continue; }
        float L = sink == -INFINITY ? 0.0f : expf(sink - M);
        for (size_t d = 0; d < D; d++) o[d] = 0.0f;
        for (size_t s = 0; s < S; s++) {
            const float *r = rec + s * (D + 2);
            if (r[D] == -INFINITY) continue;
            float w = expf(r[D] - M);
            L += r[D + 1] * w;
            for (size_t d = 0; d < D; d++) o[d] += w * r[d];
        }
        float inv = 1.0f / L;
        for (size_t d = 0; d < D; d++) o[d] *= inv;
    }
}

/* The reference: vLLM's reference_ultraquant_attention for one query row and head, in fp32 with
 * sequential sums. K and V are dequantized token by token exactly as lofp_kv_gather() does. */
static void reference_item(void *ctxv, size_t item, uint8_t *scratch)
{
    run_ctx *c = ctxv;
    const lofp_attn_geom *G = &c->G;
    const size_t D = G->D, Hq = G->Hq;
    size_t qi = item / Hq, h = item % Hq, hk = h / G->g;
    size_t b = seq_of(c->qs, c->B, qi), n_vis = c->limit[qi];
    const int32_t *bt = c->bt + b * c->bt_stride;
    const float *q = c->qprep + (qi * Hq + h) * D;
    float *qk = (float *)scratch, *kv = qk + n_vis, *o = c->out + (qi * Hq + h) * D;
    float M = -INFINITY;
    for (size_t n = 0; n < n_vis; n++) {
        const uint8_t *s = lofp_attn_token(G, bt, n) + hk * G->slot;
        lofp_kv_dequant_region(G->format, G->D, s + G->k_off, s + G->ks_off, kv);
        float acc = 0.0f;
        for (size_t d = 0; d < D; d++) acc = acc + q[d] * kv[d];
        qk[n] = acc * G->scale;
        M = fmaxf(M, qk[n]);
    }
    float sink = c->p->sinks ? c->p->sinks[h] : -INFINITY;
    M = fmaxf(M, sink);
    float Z = 0.0f;
    for (size_t n = 0; n < n_vis; n++) {
        qk[n] = expf(qk[n] - M);
        Z = Z + qk[n];
    }
    if (sink != -INFINITY) Z = Z + expf(sink - M);
    for (size_t d = 0; d < D; d++) o[d] = 0.0f;
    for (size_t n = 0; n < n_vis; n++) {
        float pn = qk[n] / Z;
        const uint8_t *s = lofp_attn_token(G, bt, n) + hk * G->slot;
        lofp_kv_dequant_region(G->format, G->D, s + G->v_off, s + G->vs_off, kv);
        for (size_t d = 0; d < D; d++) o[d] = o[d] + pn * kv[d];
    }
}

/* fp32 -> E4M3 (RNE, saturating at +-448) -> fp32 for finite x: what lofp_encode(E4M3, RNE,
 * SATURATE) followed by lofp_decode gives (tested against it), without the call. */
float lofp_e4m3_saturate(float x)
{
    float a = fabsf(x), y;
    if (a < 0x1p-6f) {
        y = nearbyintf(a * 512.0f) * (1.0f / 512.0f); /* subnormal grid 2^-9, exact */
    } else {
        uint32_t u = lofp_f32_bits(a);
        u += 0x7FFFFu + ((u >> 20) & 1u); /* round the mantissa to 3 bits, ties to even */
        u &= ~0xFFFFFu;
        y = lofp_bits_f32(u);
        if (y > 448.0f) y = 448.0f;
    }
    return copysignf(y, x);
}

static int parity(size_t x)
{
    x ^= x >> 16;
    x ^= x >> 8;
    x ^= x >> 4;
    return (0x6996 >> (x & 15)) & 1;
}

#define QBLK 8 /* query rows rotated together (one per SIMD lane; each lane sums sequentially) */

void lofp_attn_hadamard_table(uint32_t D, float *hs)
{
    const float h = (float)(1.0 / sqrt((double)D));
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < D; j++) hs[i * D + j] = parity(i & j) ? -h : h;
}

size_t lofp_attn_prep_q(const float *x, size_t nr, uint32_t D, const float *hs, float *dst)
{
    if (hs && have_path(LOFP_ATTN_AVX512, D)) return lofp_attn_prep_q_avx512(x, nr, D, hs, dst);
    size_t sat = 0;
    float xt[LOFP_KV_MAX_D * QBLK];
    for (size_t r0 = 0; r0 < nr; r0 += QBLK) {
        const size_t n = nr - r0 < QBLK ? nr - r0 : QBLK;
        for (size_t r = 0; r < QBLK; r++)
            for (size_t j = 0; j < D; j++) xt[j * QBLK + r] = r < n ? x[(r0 + r) * D + j] : 0.0f;
        for (size_t i = 0; i < D; i += 4) {
            float acc[4][QBLK];
            if (hs) {
                /* four outputs at a time: independent sums for the vector units; each one is
                 * still acc = acc + x[j] * H[i][j] over j in order */
                for (size_t ii = 0; ii < 4; ii++)
                    for (size_t r = 0; r < QBLK; r++) acc[ii][r] = 0.0f;
                const float *h0 = hs + i * D, *h1 = h0 + D, *h2 = h1 + D, *h3 = h2 + D;
                for (size_t j = 0; j < D; j++) {
                    const float *xj = xt + j * QBLK;
                    for (size_t r = 0; r < QBLK; r++) {
                        acc[0][r] = acc[0][r] + xj[r] * h0[j];
                        acc[1][r] = acc[1][r] + xj[r] * h1[j];
                        acc[2][r] = acc[2][r] + xj[r] * h2[j];
                        acc[3][r] = acc[3][r] + xj[r] * h3[j];
                    }
                }
            } else {
                for (size_t ii = 0; ii < 4; ii++)
                    for (size_t r = 0; r < QBLK; r++) acc[ii][r] = xt[(i + ii) * QBLK + r];
            }
            for (size_t ii = 0; ii < 4; ii++)
                for (size_t r = 0; r < n; r++) {
                    sat += fabsf(acc[ii][r]) > 464.0f;
                    dst[(r0 + r) * D + i + ii] = lofp_e4m3_saturate(acc[ii][r]);
                }
        }
    }
    return sat;
}

/* Prepares QBLK query rows: widened to fp32, and for UltraQuant rotated and cast through E4M3. */
static void qprep_item(void *ctxv, size_t blk, uint8_t *scratch)
{
    (void)scratch;
    run_ctx *c = ctxv;
    const size_t D = c->G.D, rows = c->T * c->G.Hq, r0 = blk * QBLK;
    const size_t nr = rows - r0 < QBLK ? rows - r0 : QBLK;
    float x[LOFP_KV_MAX_D * QBLK], *dst = (float *)c->qprep + r0 * D;
    for (size_t i = 0; i < nr * D; i++) x[i] = lofp_load_f32(c->q_dt, c->q_in, r0 * D + i);
    if (c->G.format != LOFP_KV_ULTRAQUANT) {
        memcpy(dst, x, nr * D * sizeof(float));
        return;
    }
    size_t sat = lofp_attn_prep_q(x, nr, c->G.D, c->rotate_q ? c->hs : NULL, dst);
    if (sat) atomic_fetch_add(&c->saturated, sat);
}

static lofp_status attention_run(const lofp_kv_cache_desc *d, const lofp_attn_params *p,
                                 const uint8_t *cache, size_t B, const int32_t *qsl, lofp_dtype q_dt,
                                 const void *q, const int32_t *bt, const int32_t *seq_lens,
                                 float *out, lofp_attn_report *rep)
{
    if (rep) memset(rep, 0, sizeof *rep);
    lofp_status st = check_params(d, p);
    if (st != LOFP_OK) return st;
    if (!cache || !q || !bt || !seq_lens || !out || B == 0) return LOFP_ERR_INVALID_ARG;
    if (q_dt != LOFP_DTYPE_F32 && q_dt != LOFP_DTYPE_BF16 && q_dt != LOFP_DTYPE_F16)
        return LOFP_ERR_INVALID_ARG;
    if (qsl && qsl[0] != 0) return LOFP_ERR_INVALID_ARG;

    lofp_attn_geom G;
    lofp_attn_geom_init(&G, d, p->num_q_heads);
    G.cache = cache;
    G.scale = p->scale;
    const size_t D = G.D, Hq = G.Hq;

    /* Sequences: lengths, query counts, block tables. */
    size_t T = 0, max_n = 0, cap;
    if (!lofp_mul_size(p->block_table_stride, d->block_size, &cap)) cap = SIZE_MAX;
    for (size_t b = 0; b < B; b++) {
        if (seq_lens[b] <= 0) return LOFP_ERR_INVALID_ARG;
        size_t n = (size_t)seq_lens[b], ql = 1;
        if (qsl) {
            if (qsl[b + 1] < qsl[b]) return LOFP_ERR_INVALID_ARG;
            ql = (size_t)qsl[b + 1] - (size_t)qsl[b];
        }
        if (n > cap || ql > n) return LOFP_ERR_SHAPE;
        const int32_t *row = bt + b * p->block_table_stride;
        for (size_t j = 0, nb = lofp_ceil_div(n, d->block_size); j < nb; j++)
            if (row[j] < 0 || (size_t)row[j] >= d->num_blocks) return LOFP_ERR_INVALID_ARG;
        T += ql;
        if (n > max_n) max_n = n;
    }
    size_t nq;
    if (!lofp_mul_size(T, Hq * D, &nq)) return LOFP_ERR_SIZE_OVERFLOW;
    for (size_t i = 0; i < nq; i++)
        if (!isfinite(lofp_load_f32(q_dt, q, i))) {
            if (rep) rep->first_bad_index = i;
            return LOFP_ERR_NONFINITE;
        }

    lofp_attn_path path = resolve_path(p->path, G.D);
    if (!have_path(path, G.D)) return LOFP_ERR_UNSUPPORTED;
    if (rep) rep->path = path;

    ws_layout w;
    if (!ws_plan(&G, p, path, B, T, max_n, &w)) return LOFP_ERR_SIZE_OVERFLOW;
    uint8_t *ws = p->workspace, *own = NULL;
    if (ws) {
        if (p->workspace_bytes < w.total) return LOFP_ERR_BUFFER_TOO_SMALL;
    } else {
        ws = own = malloc(w.total);
        if (!ws) return LOFP_ERR_NOMEM;
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)ws + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.G = G;
    c.p = p;
    c.B = B;
    c.T = T;
    c.bt = bt;
    c.bt_stride = p->block_table_stride;
    c.seq_lens = seq_lens;
    float *qprep = (float *)base;
    c.qprep = qprep;
    c.limit = (size_t *)(base + w.qprep);
    c.qs = (size_t *)(base + w.qprep + w.limit);
    c.rec_off = c.qs + (B + 1);
    c.task_off = c.rec_off + (B + 1);
    float *hs = (float *)(base + w.qprep + w.limit + w.seq);
    c.records = (float *)(base + w.qprep + w.limit + w.seq + w.hs);
    uint8_t *scratch = base + w.qprep + w.limit + w.seq + w.hs + w.records;
    c.split = split_tokens(&G, p);
    c.chunk = qsl ? prefill_chunk(&G) : 1;
    c.path = path;
    c.out = out;

    /* Query rows and their causal limits. */
    c.qs[0] = 0;
    for (size_t b = 0; b < B; b++) {
        size_t ql = qsl ? (size_t)(qsl[b + 1] - qsl[b]) : 1, n = (size_t)seq_lens[b];
        c.qs[b + 1] = c.qs[b] + ql;
        for (size_t i = 0; i < ql; i++) c.limit[c.qs[b] + i] = n - ql + i + 1;
    }

    /* Q: rotated with the dense fp32 Hadamard and cast through E4M3 (UltraQuant), else as is. */
    unsigned nt = thread_count(p);
    c.q_in = q;
    c.q_dt = q_dt;
    c.rotate_q = G.format == LOFP_KV_ULTRAQUANT && d->rotate_k;
    if (c.rotate_q) lofp_attn_hadamard_table(G.D, hs);
    c.hs = hs;
    atomic_init(&c.saturated, 0);
    par_run(qprep_item, &c, lofp_ceil_div(T * Hq, QBLK), nt, NULL, 0);
    if (rep) rep->saturated_q = atomic_load(&c.saturated);

    if (path == LOFP_ATTN_REFERENCE) {
        if (rep) { rep->partitions = T; rep->work_items = T * Hq; }
        par_run(reference_item, &c, T * Hq, nt, scratch, w.scratch_per_thread);
    } else {
        /* Tasks: per sequence, query chunks x splits x head groups. */
        size_t base_tasks = 0, parts = 0;
        c.rec_off[0] = 0;
        for (size_t b = 0; b < B; b++) {
            size_t ql = c.qs[b + 1] - c.qs[b], S = nsplits(&c, b);
            base_tasks += lofp_ceil_div(ql, c.chunk) * S;
            c.rec_off[b + 1] = c.rec_off[b] + ql * Hq * S;
            parts += ql * S;
        }
        size_t want = 4 * (size_t)nt;
        size_t hparts = base_tasks >= want ? 1 : lofp_ceil_div(want, base_tasks ? base_tasks : 1);
        if (nt == 1) hparts = 1;
        if (hparts > G.Hk) hparts = G.Hk;
        c.hg = (uint32_t)lofp_ceil_div(G.Hk, hparts);
        if (c.hg > LOFP_ATTN_TASK_HEADS) c.hg = LOFP_ATTN_TASK_HEADS;
        c.hparts = (uint32_t)lofp_ceil_div(G.Hk, c.hg);
        c.task_off[0] = 0;
        for (size_t b = 0; b < B; b++) {
            size_t ql = c.qs[b + 1] - c.qs[b];
            c.task_off[b + 1] = c.task_off[b] + lofp_ceil_div(ql, c.chunk) * nsplits(&c, b) * c.hparts;
        }
        if (rep) { rep->partitions = parts; rep->work_items = c.task_off[B]; }
        par_run(task_item, &c, c.task_off[B], nt, scratch, w.scratch_per_thread);
        par_run(merge_item, &c, T, nt, NULL, 0);
    }
    free(own);
    return LOFP_OK;
}

lofp_status lofp_attention_decode(const lofp_kv_cache_desc *d, const lofp_attn_params *p,
                                  const uint8_t *cache, size_t num_seqs, lofp_dtype q_dt,
                                  const void *q, const int32_t *block_tables,
                                  const int32_t *seq_lens, float *out, lofp_attn_report *report)
{
    return attention_run(d, p, cache, num_seqs, NULL, q_dt, q, block_tables, seq_lens, out, report);
}

lofp_status lofp_attention_prefill(const lofp_kv_cache_desc *d, const lofp_attn_params *p,
                                   const uint8_t *cache, size_t num_seqs,
                                   const int32_t *query_start_loc, lofp_dtype q_dt, const void *q,
                                   const int32_t *block_tables, const int32_t *seq_lens,
                                   float *out, lofp_attn_report *report)
{
    if (!query_start_loc) {
        if (report) memset(report, 0, sizeof *report);
        return LOFP_ERR_INVALID_ARG;
    }
    return attention_run(d, p, cache, num_seqs, query_start_loc, q_dt, q, block_tables, seq_lens,
                         out, report);
}

/* ------------------------------------------------------------------------------------------ */
/* Scalar tile kernel                                                                          */
/* ------------------------------------------------------------------------------------------ */

size_t lofp_attn_task_scratch_bytes(const lofp_attn_geom *G, size_t max_rows)
{
    size_t T = G->tile, D = G->D;
    const size_t H = LOFP_ATTN_TASK_HEADS;
    size_t floats = 2 * H * T * D  /* K and V tiles of every head of a task (fp32/bf16 caches) */
                  + (max_rows + 3) * 64  /* scores / probabilities (rows padded to 4, tiles <= 64) */
                  + (max_rows + 3) * H * D /* q rows of every head of a task (AVX2, AVX-512) */
                  + 256 + D        /* scale table, unpermute buffer */
                  + 16 * 4;        /* alignment slack */
    return floats * sizeof(float) + (2 * 64 + max_rows) * sizeof(void *) + 64;
}

static void init_records(const lofp_attn_geom *G, const lofp_attn_task *t)
{
    for (uint32_t i = 0; i < t->qn; i++)
        for (uint32_t h = t->h0 * G->g; h < t->h1 * G->g; h++) {
            float *rec = t->part + ((size_t)i * G->Hq + h) * t->part_stride;
            memset(rec, 0, G->D * sizeof(float));
            rec[G->D] = -INFINITY;
            rec[G->D + 1] = 0.0f;
        }
}

static float dot8(const float *a, const float *b, size_t n)
{
    float s[8] = { 0 };
    for (size_t d = 0; d < n; d += 8)
        for (int j = 0; j < 8; j++) s[j] += a[d + j] * b[d + j];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void lofp_attn_task_scalar(const lofp_attn_geom *G, const lofp_attn_task *t, void *scratch)
{
    const size_t D = G->D, T = G->tile, g = G->g;
    float *Kf = (float *)scratch, *Vf = Kf + T * D, *P = Vf + T * D;
    init_records(G, t);
    size_t maxlim = t->start;
    for (uint32_t i = 0; i < t->qn; i++) {
        size_t l = t->limit[i] < t->end ? t->limit[i] : t->end;
        if (l > maxlim) maxlim = l;
    }
    for (size_t ts = t->start; ts < maxlim; ts += T) {
        size_t tn = maxlim - ts < T ? maxlim - ts : T;
        for (uint32_t hk = t->h0; hk < t->h1; hk++) {
            for (size_t j = 0; j < tn; j++) {
                const uint8_t *s = lofp_attn_token(G, t->block_table, ts + j) + hk * G->slot;
                lofp_kv_dequant_region(G->format, G->D, s + G->k_off, s + G->ks_off, Kf + j * D);
                lofp_kv_dequant_region(G->format, G->D, s + G->v_off, s + G->vs_off, Vf + j * D);
            }
            for (uint32_t i = 0; i < t->qn; i++) {
                size_t vis = t->limit[i] <= ts ? 0 : t->limit[i] - ts;
                if (vis > tn) vis = tn;
                if (vis == 0) continue;
                for (size_t r = 0; r < g; r++) {
                    size_t h = hk * g + r;
                    const float *q = t->q + i * t->q_tok_stride + h * D;
                    float *rec = t->part + ((size_t)i * G->Hq + h) * t->part_stride;
                    float mt = -INFINITY;
                    for (size_t j = 0; j < vis; j++) {
                        P[j] = dot8(q, Kf + j * D, D) * G->scale;
                        mt = fmaxf(mt, P[j]);
                    }
                    float m_old = rec[D], m_new = fmaxf(m_old, mt);
                    if (m_new == -INFINITY) continue;
                    float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
                    float l = rec[D + 1] * alpha;
                    for (size_t j = 0; j < vis; j++) {
                        P[j] = expf(P[j] - m_new);
                        l += P[j];
                    }
                    if (alpha != 1.0f)
                        for (size_t d = 0; d < D; d++) rec[d] *= alpha;
                    for (size_t j = 0; j < vis; j++) {
                        const float pj = P[j], *v = Vf + j * D;
                        for (size_t d = 0; d < D; d++) rec[d] += pj * v[d];
                    }
                    rec[D] = m_new;
                    rec[D + 1] = l;
                }
            }
        }
    }
}

/* quantize.c -- the shape/padding/non-finite driver shared by every scheme. The arithmetic lives
 * in the kernel table (dispatch.h): the row kernels of each family and the fused tensor scan.
 * Nothing here knows a scheme by name beyond its family.
 *
 * Order of work (the reference's semantics, fewer passes over the input):
 *   - two-level NVFP4: one fused pass finds amax and the first NaN/Inf (split across threads);
 *   - every scheme: one quantize pass split over rows; each row kernel counts its non-finite
 *     blocks, and only a row that has some is scanned again for the index of its first bad
 *     value, so finite input is read once (the reference read it once more to look for NaN).
 * Rows are independent and stochastic bits depend on the flat index only, so the outputs do not
 * depend on the number of threads; reports combine per-thread results by sum and minimum. */
#include <math.h>
#include <stdlib.h>

#include "dispatch.h"
#include "profile.h"
#include "runtime/threadpool.h"

static size_t dtype_size(lofp_dtype dt) { return dt == LOFP_DTYPE_F32 ? 4 : 2; }

static float global_from_amax(float amax)
{
    if (amax < 1e-12f) amax = 1e-12f;
    /* PyTorch evaluates 448 * 6 / amax as amax.reciprocal() * 2688: two roundings. */
    volatile float r = 1.0f / amax;
    return r * 2688.0f;
}

float lofp_nvfp4_decode_scale(lofp_dtype dt, const void *x, size_t n)
{
    float amax = 0.0f;
    size_t first;
    if (!lofp_dtype_is_dense(dt) || (n && !x)) return NAN;
    if (n && lofp_kernels()->scan(dt, x, n, &amax, &first)) return NAN;
    if (amax < 1e-12f) amax = 1e-12f;
    return amax / 2688.0f;
}

float lofp_nvfp4_global_scale(lofp_dtype dt, const void *x, size_t n)
{
    float amax = 0.0f;
    size_t first;
    if (!lofp_dtype_is_dense(dt) || (n && !x)) return NAN;
    if (n && lofp_kernels()->scan(dt, x, n, &amax, &first)) return NAN;
    return global_from_amax(amax);
}

float lofp_nvfp4_encode_from_decode(float decode_scale) { return 1.0f / decode_scale; }
float lofp_nvfp4_decode_from_encode(float encode_scale) { return 1.0f / encode_scale; }

static lofp_status check_common(const lofp_scheme *s, lofp_dtype dt, const void *p, size_t rows,
                                size_t k, const uint8_t *codes, const uint8_t *scales,
                                size_t *kp_out, size_t *n_out)
{
    if (lofp_scheme_validate(s) != LOFP_OK || !lofp_dtype_is_dense(dt)) return LOFP_ERR_INVALID_ARG;
    if (rows == 0 || k == 0) return LOFP_ERR_INVALID_ARG;
    if (!p || !codes || !scales) return LOFP_ERR_INVALID_ARG;
    if (k % s->block != 0 && !s->pad) return LOFP_ERR_SHAPE;
    size_t kp = lofp_padded_k(s, k), n, np;
    /* the padded tensor, and 3 fp32 copies of a row as scratch, must be addressable */
    if (!kp || !lofp_mul_size(rows, k, &n) || !lofp_mul_size(rows, kp, &np) ||
        !lofp_mul_size(np, 2 * sizeof(float), &np) || !lofp_mul_size(kp, 3 * sizeof(float), &np))
        return LOFP_ERR_SIZE_OVERFLOW;
    if (s->id == LOFP_SCHEME_ULTRAQUANT && s->rotate && (kp & (kp - 1)) != 0)
        return LOFP_ERR_SHAPE; /* the Hadamard needs a power-of-two head dim */
    *kp_out = kp;
    *n_out = n;
    return LOFP_OK;
}

/* Scratch for one thread: a staged row (dtype conversion, padding) and the kernel's 2 * kp. */
static float *alloc_rows(size_t kp, size_t copies)
{
    size_t bytes = kp * copies * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* ---- the fused amax + non-finite pass (two-level NVFP4) ---- */

typedef struct {
    const lofp_kernel_table *kt;
    lofp_dtype dt;
    const uint8_t *x;
    size_t n, nt;
    float amax[LOFP_MAX_TASKS];
    size_t first[LOFP_MAX_TASKS];
    int bad[LOFP_MAX_TASKS];
} scan_job;

static void scan_task(void *arg, size_t t)
{
    scan_job *j = arg;
    size_t i0 = j->n * t / j->nt, i1 = j->n * (t + 1) / j->nt;
    j->amax[t] = 0.0f;
    j->bad[t] = 0;
    if (i1 > i0)
        j->bad[t] = j->kt->scan(j->dt, j->x + i0 * dtype_size(j->dt), i1 - i0, &j->amax[t], &j->first[t]);
    if (j->bad[t]) j->first[t] += i0;
}

/* Returns 1 with *first_bad (the smallest index over all chunks) when a NaN/Inf exists. */
static int parallel_scan(const lofp_kernel_table *kt, unsigned threads, lofp_dtype dt,
                         const void *x, size_t n, float *amax, size_t *first_bad)
{
    scan_job j;
    j.kt = kt;
    j.dt = dt;
    j.x = x;
    j.n = n;
    size_t th = lofp_parallel_threads(threads, n, n);
    j.nt = lofp_parallel_tasks(th, n); /* a few chunks per thread: a late worker takes fewer */
    lofp_parallel_run_tasks(j.nt, th, scan_task, &j);
    int bad = 0;
    float m = 0.0f;
    for (size_t t = 0; t < j.nt; t++) {
        if (j.bad[t] && (!bad || j.first[t] < *first_bad)) *first_bad = j.first[t];
        bad |= j.bad[t];
        if (!j.bad[t] && j.amax[t] > m) m = j.amax[t]; /* max is exact: order does not matter */
    }
    *amax = m;
    return bad;
}

/* ---- the quantize pass ---- */

typedef struct {
    size_t bad_blocks;  /* non-finite blocks counted by the row kernels */
    size_t first_bad;   /* flat input index of the first NaN/Inf in this chunk's rows */
    int found;
    size_t first_overflow; /* finite input whose rotation overflowed: the first such row's
                              largest magnitude (reported only when no NaN/Inf exists) */
    int overflow;
    int nomem;
} chunk_result;

typedef struct {
    const lofp_kernel_table *kt;
    const lofp_scheme *s;
    lofp_kquant_row_fn quant_row;
    lofp_dtype dt;
    const uint8_t *x;
    size_t row0;        /* the chunk's first row within the whole tensor (lofp_quantize_rows) */
    size_t rows, k, kp, nt, code_row_bytes, nb;
    float global;
    uint8_t *codes, *scales;
    chunk_result res[LOFP_MAX_TASKS];
} quant_job;

static void quant_task(void *arg, size_t t)
{
    quant_job *j = arg;
    chunk_result *res = &j->res[t];
    memset(res, 0, sizeof *res);
    size_t r0 = j->rows * t / j->nt, r1 = j->rows * (t + 1) / j->nt;
    if (r1 == r0) return;
    const size_t k = j->k, kp = j->kp, es = dtype_size(j->dt);
    float *buf = alloc_rows(kp, 3);
    if (!buf) { res->nomem = 1; return; }
    const int direct = j->dt == LOFP_DTYPE_F32 && k == kp;
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *xr = j->x + r * k * es;
        const float *row = (const float *)(const void *)xr;
        if (!direct) {
            j->kt->load_row(j->dt, xr, k, buf);
            memset(buf + k, 0, (kp - k) * sizeof(float));
            row = buf;
        }
        size_t bad = j->quant_row(j->s, row, kp, j->global, (uint64_t)(j->row0 + r) * kp,
                                  j->codes + r * j->code_row_bytes, j->scales + r * j->nb, buf + kp);
        if (LOFP_UNLIKELY(bad)) {
            res->bad_blocks += bad;
            /* a rotation can overflow finite input into Inf: only the input says what is bad;
             * finite input that overflowed is reported at its largest magnitude */
            float amax;
            size_t first;
            if (!res->found) {
                if (j->kt->scan(j->dt, xr, k, &amax, &first)) {
                    res->found = 1;
                    res->first_bad = (j->row0 + r) * k + first;
                } else if (!res->overflow) {
                    for (first = 0; first + 1 < k && fabsf(lofp_load_f32(j->dt, xr, first)) != amax; first++) {}
                    res->overflow = 1;
                    res->first_overflow = (j->row0 + r) * k + first;
                }
            }
        }
    }
    free(buf);
}

static void report_init(lofp_quant_report *rep, size_t k, size_t kp)
{
    if (!rep) return;
    memset(rep, 0, sizeof *rep);
    rep->logical_k = k;
    rep->padded_k = kp;
}

static lofp_status quantize_impl(const lofp_kernel_table *kt, const lofp_scheme *s, lofp_dtype dt,
                                 const void *x, size_t row0, size_t rows, size_t k,
                                 int compute_global, float global_in, uint8_t *codes,
                                 uint8_t *scales, float *global_out, lofp_quant_report *rep);

lofp_status lofp_quantize_table(const lofp_kernel_table *kt, const lofp_scheme *s, lofp_dtype dt,
                                const void *x, size_t rows, size_t k, int compute_global,
                                float global_in, uint8_t *codes, uint8_t *scales,
                                float *global_out, lofp_quant_report *rep)
{
    return quantize_impl(kt, s, dt, x, 0, rows, k, compute_global, global_in, codes, scales,
                         global_out, rep);
}

static lofp_status quantize_impl(const lofp_kernel_table *kt, const lofp_scheme *s, lofp_dtype dt,
                                 const void *x, size_t row0, size_t rows, size_t k,
                                 int compute_global, float global_in, uint8_t *codes,
                                 uint8_t *scales, float *global_out, lofp_quant_report *rep)
{
    size_t kp = 0, n = 0;
    lofp_status st = check_common(s, dt, x, rows, k, codes, scales, &kp, &n);
    report_init(rep, k, kp);
    if (st != LOFP_OK) return st;
    if (s->profile != LOFP_PROFILE_LOFP) /* a producer's numerics: reference code only */
        return lofp_profile_quantize(s, dt, x, rows, k, kp, compute_global, global_in, codes,
                                     scales, global_out, rep);
    const int nvfp4 = s->id == LOFP_SCHEME_NVFP4;
    float global = global_in;
    if (compute_global) {
        global = 1.0f;
        if (nvfp4 && s->two_level) {
            float amax = 0.0f;
            size_t first = 0;
            if (parallel_scan(kt, s->threads, dt, x, n, &amax, &first)) {
                if (rep) rep->first_bad_index = first;
                return LOFP_ERR_NONFINITE;
            }
            global = global_from_amax(amax);
        }
        if (global_out) *global_out = global;
    }
    if (nvfp4 && !(isfinite(global) && global > 0.0f)) return LOFP_ERR_INVALID_ARG;

    quant_job *j = malloc(sizeof *j);
    if (!j) return LOFP_ERR_NOMEM;
    j->kt = kt;
    j->s = s;
    j->quant_row = kt->quant[lofp_kfamily_of(s->id)].quant_row;
    j->dt = dt;
    j->x = x;
    j->row0 = row0;
    j->rows = rows;
    j->k = k;
    j->kp = kp;
    j->code_row_bytes = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    j->nb = kp / s->block;
    j->global = global;
    j->codes = codes;
    j->scales = scales;
    size_t th = lofp_parallel_threads(s->threads, rows, rows * kp);
    j->nt = lofp_parallel_tasks(th, rows);
    lofp_parallel_run_tasks(j->nt, th, quant_task, j);

    size_t bad_blocks = 0, first = 0, first_ovf = 0;
    int found = 0, nomem = 0, ovf = 0;
    for (size_t t = 0; t < j->nt; t++) {
        const chunk_result *c = &j->res[t];
        nomem |= c->nomem;
        bad_blocks += c->bad_blocks;
        if (c->found && !found) { found = 1; first = c->first_bad; } /* chunks are in row order */
        if (c->overflow && !ovf) { ovf = 1; first_ovf = c->first_overflow; }
    }
    if (!found && ovf) { found = 1; first = first_ovf; }
    free(j);
    if (nomem) return LOFP_ERR_NOMEM;
    if (found) {
        if (rep) rep->first_bad_index = first;
        if (!s->propagate_nonfinite || nvfp4) return LOFP_ERR_NONFINITE;
    }
    if (rep) rep->nonfinite_blocks = bad_blocks;
    return LOFP_OK;
}

lofp_status lofp_quantize_with_global(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                      size_t rows, size_t k, float global_scale, uint8_t *codes,
                                      uint8_t *scales, lofp_quant_report *rep)
{
    return lofp_quantize_table(lofp_kernels(), s, dt, x, rows, k, 0, global_scale, codes, scales,
                               NULL, rep);
}

lofp_status lofp_quantize_rows(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t row0,
                               size_t rows, size_t k, float global_scale, uint8_t *codes,
                               uint8_t *scales, lofp_quant_report *rep)
{
    /* a producer profile defines its numerics over whole tensors only */
    if (s && s->profile != LOFP_PROFILE_LOFP) return LOFP_ERR_UNSUPPORTED;
    return quantize_impl(lofp_kernels(), s, dt, x, row0, rows, k, 0, global_scale, codes, scales,
                         NULL, rep);
}

lofp_status lofp_quantize(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows,
                          size_t k, uint8_t *codes, uint8_t *scales, float *global_scale,
                          lofp_quant_report *rep)
{
    return lofp_quantize_table(lofp_kernels(), s, dt, x, rows, k, 1, 1.0f, codes, scales,
                               global_scale, rep);
}

/* ---- dequantize ---- */

size_t lofp_dequant_stream_bytes = (size_t)16 << 20;

typedef struct {
    const lofp_kernel_table *kt;
    const lofp_scheme *s;
    lofp_kdequant_row_fn dequant_row;
    const uint8_t *codes, *scales;
    float global;
    size_t rows, k, kp, nt, code_row_bytes, nb;
    lofp_dtype dt;
    uint8_t *out;
    unsigned flags;
    int nomem[LOFP_MAX_TASKS];
} dequant_job;

static void dequant_task(void *arg, size_t t)
{
    dequant_job *j = arg;
    size_t r0 = j->rows * t / j->nt, r1 = j->rows * (t + 1) / j->nt;
    const size_t k = j->k, kp = j->kp, es = dtype_size(j->dt);
    const int direct = j->dt == LOFP_DTYPE_F32 && k == kp;
    float *buf = NULL;
    j->nomem[t] = 0;
    if (r1 == r0) return;
    if (!direct && !(buf = alloc_rows(kp, 1))) { j->nomem[t] = 1; return; }
    for (size_t r = r0; r < r1; r++) {
        uint8_t *o = j->out + r * k * es;
        float *row = direct ? (float *)(void *)o : buf;
        j->dequant_row(j->s, j->codes + r * j->code_row_bytes, j->scales + r * j->nb, j->global,
                       kp, row, direct ? j->flags : 0);
        if (!direct) j->kt->store_row(j->dt, buf, k, o);
    }
    free(buf);
}

lofp_status lofp_dequantize_table(const lofp_kernel_table *kt, const lofp_scheme *s,
                                  const uint8_t *codes, const uint8_t *scales, float global,
                                  size_t rows, size_t k, lofp_dtype out_dt, void *out)
{
    size_t kp = 0, n = 0;
    lofp_status st = check_common(s, out_dt, out, rows, k, codes, scales, &kp, &n);
    if (st != LOFP_OK) return st;
    if (s->id == LOFP_SCHEME_NVFP4 && !(isfinite(global) && global > 0.0f)) return LOFP_ERR_INVALID_ARG;
    if (s->profile != LOFP_PROFILE_LOFP)
        return lofp_profile_dequantize(s, codes, scales, global, rows, k, kp, out_dt, out);
    dequant_job *j = malloc(sizeof *j);
    if (!j) return LOFP_ERR_NOMEM;
    j->kt = kt;
    j->s = s;
    j->dequant_row = kt->quant[lofp_kfamily_of(s->id)].dequant_row;
    j->codes = codes;
    j->scales = scales;
    j->global = global;
    j->rows = rows;
    j->k = k;
    j->kp = kp;
    j->code_row_bytes = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp;
    j->nb = kp / s->block;
    j->dt = out_dt;
    j->out = out;
    /* an fp32 output larger than this is written with streaming stores where the kernel has them
     * (BENCHMARKS.md: the write-allocate read of every output line is what bounds a cold
     * dequantize) */
    j->flags = rows * k * sizeof(float) > lofp_dequant_stream_bytes ? LOFP_KFLAG_STREAM : 0;
    size_t th = lofp_parallel_threads(s->threads, rows, rows * kp);
    j->nt = lofp_parallel_tasks(th, rows);
    lofp_parallel_run_tasks(j->nt, th, dequant_task, j);
    int nomem = 0;
    for (size_t t = 0; t < j->nt; t++) nomem |= j->nomem[t];
    free(j);
    return nomem ? LOFP_ERR_NOMEM : LOFP_OK;
}

lofp_status lofp_dequantize(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                            float global_scale, size_t rows, size_t k, lofp_dtype out_dt, void *out)
{
    return lofp_dequantize_table(lofp_kernels(), s, codes, scales, global_scale, rows, k, out_dt,
                                 out);
}

/* test_kernels.c -- every quantize/dequantize kernel variant against the reference.
 *
 * The oracle is the original driver (element by element through lofp_load_f32, a non-finite scan
 * first, then the reference row kernels of src/quant/quant_*.c). Each variant this machine can run --
 * the reference table behind the new driver, the generic table, and the AVX2 table when the CPU
 * (and LOFP_DISABLE_CPU_FEATURES) allows it -- must reproduce its status, report, global scale,
 * codes, scales and dequantized outputs byte for byte, with 1, 2 and 3 threads, on:
 * every preset x rounding mode (x scale rule and granularity for MX, one/two-level NVFP4,
 * UltraQuant rotation off/butterfly/dense), fp32/bf16/fp16 input and output, odd shapes, padding,
 * exact ties, zero/tiny/huge blocks, non-finite values (error index and propagation),
 * misaligned pointers and guard-page buffers that fault on any access past the data. */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/cpu_features.h"
#include "quant/dispatch.h"
#include "test_util.h"
#include "runtime/threadpool.h"
#include "quant/reference.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static size_t dsize(lofp_dtype dt) { return dt == LOFP_DTYPE_F32 ? 4 : 2; }

/* ------------------------------------------------------------------------------------------ */
/* The oracle: the driver as it was before the kernel table, over the reference row kernels    */
/* ------------------------------------------------------------------------------------------ */

static int oracle_find_nonfinite(lofp_dtype dt, const void *x, size_t n, size_t *first)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(lofp_load_f32(dt, x, i))) { *first = i; return 1; }
    return 0;
}

static lofp_status oracle_quantize(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows,
                                   size_t k, int compute, float gin, uint8_t *codes,
                                   uint8_t *scales, float *gout, lofp_quant_report *rep)
{
    size_t kp = lofp_padded_k(s, k), n = rows * k, first = 0;
    memset(rep, 0, sizeof *rep);
    rep->logical_k = k;
    rep->padded_k = kp;
    if (!kp) return LOFP_ERR_SHAPE;
    if (s->id == LOFP_SCHEME_ULTRAQUANT && s->rotate && (kp & (kp - 1)) != 0) return LOFP_ERR_SHAPE;
    float global = gin;
    if (compute) {
        global = 1.0f;
        if (s->id == LOFP_SCHEME_NVFP4 && s->two_level) {
            if (oracle_find_nonfinite(dt, x, n, &first)) {
                rep->first_bad_index = first;
                return LOFP_ERR_NONFINITE;
            }
            global = lofp_nvfp4_global_scale(dt, x, n);
        }
        *gout = global;
    }
    if (s->id == LOFP_SCHEME_NVFP4 && !(isfinite(global) && global > 0.0f)) return LOFP_ERR_INVALID_ARG;
    if (oracle_find_nonfinite(dt, x, n, &first)) {
        rep->first_bad_index = first;
        if (!s->propagate_nonfinite || s->id == LOFP_SCHEME_NVFP4) return LOFP_ERR_NONFINITE;
    }
    int had_nonfinite = oracle_find_nonfinite(dt, x, n, &first);
    const lofp_family_t *fam = lofp_reference_families[lofp_scheme_traits[s->id].family];
    float *row = malloc(2 * kp * sizeof(float));
    size_t crb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp, nb = kp / s->block, bad = 0;
    int overflow = 0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t j = 0; j < k; j++) row[j] = lofp_load_f32(dt, x, r * k + j);
        for (size_t j = k; j < kp; j++) row[j] = 0.0f;
        size_t b = fam->quant_row(s, row, kp, global, (uint64_t)r * kp, codes + r * crb, scales + r * nb);
        bad += b;
        /* finite input that still made non-finite blocks (a rotation overflowed): reported at the
         * first such row's largest magnitude, when the input has no NaN/Inf, so the caller learns where the overflow is */
        if (b && !had_nonfinite && !overflow) {
            size_t arg = 0;
            float m = -1.0f;
            for (size_t j = 0; j < k; j++)
                if (fabsf(lofp_load_f32(dt, x, r * k + j)) > m) { m = fabsf(lofp_load_f32(dt, x, r * k + j)); arg = j; }
            overflow = 1;
            rep->first_bad_index = r * k + arg;
        }
    }
    free(row);
    if (overflow && (!s->propagate_nonfinite || s->id == LOFP_SCHEME_NVFP4)) return LOFP_ERR_NONFINITE;
    rep->nonfinite_blocks = bad;
    return LOFP_OK;
}

static void oracle_dequantize(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                              float global, size_t rows, size_t k, lofp_dtype dt, void *out)
{
    size_t kp = lofp_padded_k(s, k);
    const lofp_family_t *fam = lofp_reference_families[lofp_scheme_traits[s->id].family];
    float *row = malloc(kp * sizeof(float));
    size_t crb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp, nb = kp / s->block;
    for (size_t r = 0; r < rows; r++) {
        fam->dequant_row(s, codes + r * crb, scales + r * nb, global, kp, row);
        for (size_t j = 0; j < k; j++) lofp_store_f32(dt, out, r * k + j, row[j]);
    }
    free(row);
}

/* ------------------------------------------------------------------------------------------ */
/* Buffers: plain (with an offset) or flush against a PROT_NONE page                           */
/* ------------------------------------------------------------------------------------------ */

enum { BUF_PLAIN = 0, BUF_GUARD_AFTER = 1, BUF_GUARD_BEFORE = 2 };

typedef struct {
    void *map;
    size_t map_len;
    void *heap;
    uint8_t *p;
} tbuf;

/* n bytes: BUF_PLAIN at `offset` bytes past a 64-byte boundary; BUF_GUARD_AFTER ending exactly
 * at an inaccessible page; BUF_GUARD_BEFORE starting exactly after one. */
static uint8_t *tbuf_alloc(tbuf *b, size_t n, int mode, size_t offset)
{
    memset(b, 0, sizeof *b);
    if (mode == BUF_PLAIN) {
        b->heap = aligned_alloc(64, ((n + offset + 64) + 63) & ~(size_t)63);
        b->p = (uint8_t *)b->heap + offset;
        return b->p;
    }
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t data_pages = (n + ps - 1) / ps + (n == 0);
    b->map_len = (data_pages + 2) * ps;
    b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->map == MAP_FAILED) { perror("mmap"); exit(2); }
    uint8_t *base = b->map;
    mprotect(base, ps, PROT_NONE);
    mprotect(base + (data_pages + 1) * ps, ps, PROT_NONE);
    b->p = mode == BUF_GUARD_AFTER ? base + (data_pages + 1) * ps - n : base + ps;
    return b->p;
}

static void tbuf_free(tbuf *b)
{
    if (b->map) munmap(b->map, b->map_len);
    free(b->heap);
}

/* ------------------------------------------------------------------------------------------ */
/* Data                                                                                        */
/* ------------------------------------------------------------------------------------------ */

static const float e2m1_mag[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };

/* One block of `len` values of a random kind: normal at a random magnitude, exact E2M1 ties on a
 * power-of-two or UE4M3 grid, ties at 2..4 mantissa bits, all zero (signed), tiny (subnormal),
 * huge (up to FLT_MAX), scale-extreme, or a mix of huge and tiny. */
static void fill_block(tu_rng *g, float *v, size_t len, int allow_huge)
{
    int kind = (int)(tu_next(g) % (allow_huge ? 10 : 9));
    if (kind == 8 && allow_huge) kind = 9;
    else if (kind == 9) kind = 8;
    int t = (int)(tu_next(g) % 40) - 20;
    switch (kind) {
    case 0: case 1: { /* normal */
        double sc = ldexp(1.0, (int)(tu_next(g) % 33) - 16);
        for (size_t i = 0; i < len; i++) v[i] = (float)(tu_normal(g) * sc);
        break;
    }
    case 2: { /* E2M1 midpoints and values times 2^t, block max 6 * 2^t, or on a UE4M3 grid */
        float unit = ldexpf(1.0f, t);
        if (tu_next(g) & 1) unit *= 1.0f + (float)(tu_next(g) % 8) / 8.0f; /* bq of NVFP4 */
        for (size_t i = 0; i < len; i++) {
            float m = (float)(tu_next(g) % 25) * 0.25f;
            v[i] = (tu_next(g) & 1 ? -m : m) * unit;
        }
        v[tu_next(g) % len] = (tu_next(g) & 1 ? -6.0f : 6.0f) * unit;
        break;
    }
    case 3: { /* ties at a random mantissa width (FP6/FP8/MXINT8 and bf16/fp16 rounding) */
        for (size_t i = 0; i < len; i++) {
            uint32_t u = fbits((float)tu_normal(g)) & 0xFFFFF000u;
            int m = 1 + (int)(tu_next(g) % 10);
            u &= ~((1u << (23 - m)) - 1u);
            u |= 1u << (22 - m);
            v[i] = bitsf(u) * ldexpf(1.0f, t / 2);
        }
        break;
    }
    case 4: /* zero block with signed zeros */
        for (size_t i = 0; i < len; i++) v[i] = tu_next(g) & 1 ? -0.0f : 0.0f;
        break;
    case 5: /* tiny: fp32 subnormals and the smallest normals */
        for (size_t i = 0; i < len; i++) {
            uint32_t u = (uint32_t)(tu_next(g) % 0x01000000u);
            v[i] = bitsf(u | (tu_next(g) & 1 ? 0x80000000u : 0));
        }
        break;
    case 6: { /* a block whose scale hits an end of the E8M0 range, or exactly zero amax */
        int e = tu_next(g) & 1 ? -140 + (int)(tu_next(g) % 20) : 100 + (int)(tu_next(g) % 28);
        for (size_t i = 0; i < len; i++) {
            double d = tu_normal(g) * ldexp(1.0, e);
            v[i] = fabs(d) > 3.4028234e38 ? (d < 0 ? -3.4028235e38f : 3.4028235e38f) : (float)d;
        }
        break;
    }
    case 7: /* mixed: a few large values, the rest underflowing to zero codes */
        for (size_t i = 0; i < len; i++)
            v[i] = (float)(tu_normal(g) * ldexp(1.0, (tu_next(g) % 4 == 0) ? 10 : -30));
        break;
    case 8: { /* amax = an element type's max * 2^t (+-1 ulp): the scale rules' boundaries, down
               * to RCEIL's ratio 2^-127 (byte 0x00) and its neighbours */
        static const float maxes[6] = { 6.0f, 7.5f, 28.0f, 448.0f, 57344.0f, 127.0f / 64.0f };
        int tt = tu_next(g) % 3 == 0 ? -127 - (int)(tu_next(g) % 3) : (int)(tu_next(g) % 240) - 120;
        float m = ldexpf(maxes[tu_next(g) % 6], tt);
        uint32_t mu = fbits(m) + (uint32_t)(int)(tu_next(g) % 3) - 1u;
        for (size_t i = 0; i < len; i++) v[i] = (float)(tu_uniform(g) - 0.5) * m;
        v[tu_next(g) % len] = bitsf(mu | (tu_next(g) & 1 ? 0x80000000u : 0));
        break;
    }
    case 9: /* huge, up to FLT_MAX (overflows two-level products and the rotation) */
        for (size_t i = 0; i < len; i++) {
            float m = tu_next(g) % 4 == 0 ? 3.4028235e38f : (float)(tu_uniform(g) * 3.0e38);
            v[i] = tu_next(g) & 1 ? -m : m;
        }
        break;
    }
    (void)e2m1_mag;
}

/* A [rows, k] fp32 tensor of mixed blocks (block length blk). */
static void fill_tensor(tu_rng *g, float *x, size_t rows, size_t k, size_t blk, int allow_huge)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < k; j += blk) fill_block(g, x + r * k + j, k - j < blk ? k - j : blk, allow_huge);
}

/* The same values in dtype dt (narrowed with lofp's RNE conversions). */
static void to_dtype(lofp_dtype dt, const float *x, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++) lofp_store_f32(dt, out, i, x[i]);
}

/* ------------------------------------------------------------------------------------------ */
/* Variants                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static lofp_kernel_table generic_tab, avx2_tab, avx512_tab;
static int mx_scale_seen[256]; /* E8M0 bytes the oracle produced in MX cases (coverage check) */
static const lofp_kernel_table *variants[4];
static int nvariants;
static size_t n_runs;

static void setup_variants(void)
{
    variants[nvariants++] = lofp_kernels_reference();
    lofp_kernels_build(0, &generic_tab);
    variants[nvariants++] = &generic_tab;
    const uint32_t need = LOFP_CPU_AVX2 | LOFP_CPU_FMA | LOFP_CPU_F16C;
    const uint32_t f512 = LOFP_CPU_AVX512F | LOFP_CPU_AVX512BW | LOFP_CPU_AVX512VL | LOFP_CPU_AVX512VNNI |
                          LOFP_CPU_AVX512BF16 | LOFP_CPU_AVX512VBMI;
    if ((lofp_cpu_features() & need) == need) {
        lofp_kernels_build(lofp_cpu_features() & ~f512, &avx2_tab);
        variants[nvariants++] = &avx2_tab;
        lofp_kernels_build(lofp_cpu_features(), &avx512_tab);
        if (strcmp(avx512_tab.isa, "avx512") == 0) variants[nvariants++] = &avx512_tab;
    }
    printf("variants:");
    for (int i = 0; i < nvariants; i++) printf(" %s", variants[i]->isa);
    printf("\n");
}

static const char *dt_name(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_F32 ? "f32" : dt == LOFP_DTYPE_BF16 ? "bf16" : "f16";
}

static void describe(char *buf, size_t n, const lofp_scheme *s, lofp_dtype dt, size_t rows, size_t k)
{
    snprintf(buf, n, "%s block=%u rnd=%s rule=%s two_level=%d rot=%d had=%d prop=%d pad=%d %s %zux%zu",
             lofp_scheme_name(s->id), s->block, lofp_rounding_name(s->rounding),
             lofp_scale_rule_name(s->scale_rule), s->two_level, s->rotate, (int)s->hadamard,
             s->propagate_nonfinite, s->pad, dt_name(dt), rows, k);
}

static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return n;
}

typedef struct {
    int mode;        /* BUF_* for every buffer of the call */
    size_t in_off;   /* byte offsets for BUF_PLAIN */
    size_t code_off, scale_off, out_off;
} layout_opts;

/* Quantizes x (fp32 values `xf`, given to the library as dtype dt) with the oracle and every
 * variant x threads 1..3, compares everything, then dequantizes the oracle's codes with every
 * variant into every output dtype and compares. */
static void run_case(const lofp_scheme *s0, lofp_dtype dt, const float *xf, size_t rows, size_t k,
                     int compute, float gin, const layout_opts *lo)
{
    char what[256];
    describe(what, sizeof what, s0, dt, rows, k);
    lofp_scheme s = *s0;
    size_t n = rows * k, cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
    if (!cb || !sb) { CHECKF(0, "%s: bad shape in test", what); return; }
    tbuf bx, bc, bs, ox;
    uint8_t *x = tbuf_alloc(&bx, n * dsize(dt), lo->mode, lo->in_off);
    to_dtype(dt, xf, n, x);
    uint8_t *rc = malloc(cb), *rs = malloc(sb);
    float rg = -1.0f;
    lofp_quant_report rrep;
    lofp_status rst = oracle_quantize(&s, dt, x, rows, k, compute, gin, rc, rs, &rg, &rrep);

    if (rst == LOFP_OK && lofp_scheme_traits[s.id].is_mx)
        for (size_t i = 0; i < sb; i++) mx_scale_seen[rs[i]] = 1;
    uint8_t *qc = tbuf_alloc(&bc, cb, lo->mode, lo->code_off);
    uint8_t *qs = tbuf_alloc(&bs, sb, lo->mode, lo->scale_off);
    for (int v = 0; v < nvariants; v++) {
        for (unsigned th = 1; th <= 3; th++) {
            s.threads = th;
            memset(qc, 0xA5, cb);
            memset(qs, 0x5A, sb);
            float qg = -1.0f; /* as the oracle's: written only where lofp_quantize writes it */
            lofp_quant_report rep;
            lofp_status st = lofp_quantize_table(variants[v], &s, dt, x, rows, k, compute, gin, qc, qs,
                                                 &qg, &rep);
            n_runs++;
            const char *isa = variants[v]->isa;
            CHECKF(st == rst, "%s [%s t%u]: status %s, oracle %s", what, isa, th, lofp_status_name(st),
                   lofp_status_name(rst));
            CHECKF(rep.first_bad_index == rrep.first_bad_index && rep.nonfinite_blocks == rrep.nonfinite_blocks &&
                   rep.logical_k == rrep.logical_k && rep.padded_k == rrep.padded_k,
                   "%s [%s t%u]: report first %zu/%zu blocks %zu/%zu k %zu/%zu kp %zu/%zu", what, isa, th,
                   rep.first_bad_index, rrep.first_bad_index, rep.nonfinite_blocks, rrep.nonfinite_blocks,
                   rep.logical_k, rrep.logical_k, rep.padded_k, rrep.padded_k);
            if (compute) CHECKF(fbits(qg) == fbits(rg), "%s [%s t%u]: global %a, oracle %a", what, isa, th, qg, rg);
            if (st != LOFP_OK || rst != LOFP_OK) continue; /* outputs are unspecified on error */
            size_t dc = first_diff(qc, rc, cb), ds = first_diff(qs, rs, sb);
            CHECKF(dc == cb, "%s [%s t%u]: code byte %zu is %02x, oracle %02x", what, isa, th, dc,
                   dc < cb ? qc[dc] : 0, dc < cb ? rc[dc] : 0);
            CHECKF(ds == sb, "%s [%s t%u]: scale byte %zu is %02x, oracle %02x", what, isa, th, ds,
                   ds < sb ? qs[ds] : 0, ds < sb ? rs[ds] : 0);
        }
    }
    if (rst == LOFP_OK) {
        /* dequantize the oracle's bytes with every variant, into every dtype */
        memcpy(qc, rc, cb);
        memcpy(qs, rs, sb);
        float g = compute ? rg : gin;
        for (int odt = LOFP_DTYPE_F32; odt <= LOFP_DTYPE_F16; odt++) {
            size_t ob = n * dsize((lofp_dtype)odt);
            uint8_t *want = malloc(ob);
            oracle_dequantize(&s, rc, rs, g, rows, k, (lofp_dtype)odt, want);
            uint8_t *out = tbuf_alloc(&ox, ob, lo->mode, lo->out_off);
            for (int v = 0; v < nvariants; v++) {
                for (unsigned th = 1; th <= 3; th += 2) {
                    s.threads = th;
                    /* thread counts 1 and 3 also switch the streaming-store path off and on */
                    lofp_dequant_stream_bytes = th == 1 ? SIZE_MAX : 0;
                    memset(out, 0xEE, ob);
                    CHECK_OK(lofp_dequantize_table(variants[v], &s, qc, qs, g, rows, k, (lofp_dtype)odt, out));
                    size_t d = first_diff(out, want, ob);
                    CHECKF(d == ob, "%s [%s t%u]: dequant to %s differs at byte %zu", what, variants[v]->isa,
                           th, dt_name((lofp_dtype)odt), d);
                }
            }
            lofp_dequant_stream_bytes = (size_t)16 << 20;
            tbuf_free(&ox);
            free(want);
        }
    }
    tbuf_free(&bx);
    tbuf_free(&bc);
    tbuf_free(&bs);
    free(rc);
    free(rs);
}

static const layout_opts plain = { BUF_PLAIN, 0, 0, 0, 0 };

/* ------------------------------------------------------------------------------------------ */
/* Scheme configurations                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    lofp_scheme s[256];
    int n;
} cfg_list;

static void add(cfg_list *L, const lofp_scheme *s) { if (L->n < 256) L->s[L->n++] = *s; }

/* Every preset x rounding; MX also x scale rule and a larger granularity; NVFP4 x levels;
 * UltraQuant x rotation. */
static void all_configs(cfg_list *L)
{
    L->n = 0;
    for (int id = 1; id < LOFP_SCHEME_COUNT_; id++) {
        lofp_scheme s;
        lofp_scheme_init(&s, (lofp_scheme_id)id);
        s.pad = 1;
        if (id == LOFP_SCHEME_ULTRAQUANT) {
            s.rotate = 0; add(L, &s);
            s.rotate = 1; s.hadamard = LOFP_HADAMARD_BUTTERFLY; add(L, &s);
            s.hadamard = LOFP_HADAMARD_DENSE; add(L, &s);
            continue;
        }
        for (int r = 0; r <= LOFP_STOCHASTIC; r++) {
            s.rounding = (lofp_rounding)r;
            s.seed = 0x1234u + (uint64_t)r;
            if (id == LOFP_SCHEME_NVFP4) {
                s.two_level = 1; add(L, &s);
                s.two_level = 0; add(L, &s);
            } else if (id == LOFP_SCHEME_TILELANG_MXFP8) {
                add(L, &s);
            } else {
                for (int rule = 0; rule <= LOFP_SCALE_RCEIL; rule++) {
                    s.scale_rule = (lofp_scale_rule)rule;
                    s.block = 32;
                    add(L, &s);
                }
                s.scale_rule = LOFP_SCALE_FLOOR;
                s.block = 64; add(L, &s);
                s.block = 32;
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Tests                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Every configuration on mixed data, every input dtype, padded and unpadded K. */
static void test_all_configs(void)
{
    cfg_list *L = malloc(sizeof *L);
    all_configs(L);
    tu_rng g = { 42 };
    size_t rows = 17;
    float *x = malloc(rows * 1024 * sizeof(float));
    for (int c = 0; c < L->n; c++) {
        const lofp_scheme *s = &L->s[c];
        int rot = s->id == LOFP_SCHEME_ULTRAQUANT && s->rotate;
        size_t ks[2] = { 512, rot ? 240 : 1000 }; /* 240 pads to 256 for the Hadamard */
        for (int ki = 0; ki < 2; ki++) {
            for (int dt = LOFP_DTYPE_F32; dt <= LOFP_DTYPE_F16; dt++) {
                fill_tensor(&g, x, rows, ks[ki], s->id == LOFP_SCHEME_NVFP4 ? 16 : 32,
                            dt == LOFP_DTYPE_F32);
                run_case(s, (lofp_dtype)dt, x, rows, ks[ki], 1, 1.0f, &plain);
            }
        }
        if (s->id == LOFP_SCHEME_NVFP4) { /* a given multiplier, including one that overflows g */
            fill_tensor(&g, x, rows, 512, 16, 1);
            run_case(s, LOFP_DTYPE_F32, x, rows, 512, 0, 3.0e30f, &plain);
            run_case(s, LOFP_DTYPE_F32, x, rows, 512, 0, 0.37f, &plain);
        }
    }
    free(x);
    free(L);
}

/* Odd shapes for one representative configuration of each family (and MXFP8 / MXINT8, and
 * tilelang-mxfp8, whose 128-value blocks fill a 16-block batch only from K = 2048 on). */
static void test_shapes(void)
{
    static const char *presets[] = { "nvfp4", "mxfp4", "mxfp8-e4m3", "mxint8", "mxfp6-e3m2", "ultraquant",
                                     "tilelang-mxfp8" };
    static const size_t rowsv[] = { 1, 3, 17, 129 };
    static const size_t ksv[] = { 16, 32, 48, 100, 288, 1000, 4160 };
    tu_rng g = { 7 };
    float *x = malloc(129 * 4160 * sizeof(float));
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        lofp_scheme s;
        lofp_scheme_preset(presets[p], &s);
        s.pad = 1;
        for (size_t ri = 0; ri < 4; ri++) {
            for (size_t ki = 0; ki < sizeof ksv / sizeof ksv[0]; ki++) {
                size_t rows = rowsv[ri], k = ksv[ki];
                if (rows * k > 200000 && ri != 3) continue;
                if (s.id == LOFP_SCHEME_ULTRAQUANT) s.rotate = (k & (k - 1)) == 0 || k == 100 || k == 48; /* 64, 128 */
                fill_tensor(&g, x, rows, k, 32, 1);
                run_case(&s, LOFP_DTYPE_F32, x, rows, k, 1, 1.0f, &plain);
            }
        }
    }
    free(x);
}

/* Misaligned pointers (16-bit and fp32 data at every naturally aligned offset, bytes at every
 * offset 1..63) and guard pages after and before every buffer. */
static void test_alignment_and_guards(void)
{
    static const char *presets[] = { "nvfp4", "mxfp4", "mxfp8-e5m2", "mxint8", "mxfp6-e2m3",
                                     "tilelang-mxfp8", "ultraquant" };
    tu_rng g = { 99 };
    size_t rows = 3, k = 160;
    float x[3 * 160];
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        lofp_scheme s;
        lofp_scheme_preset(presets[p], &s);
        s.pad = 1;
        size_t kk = s.id == LOFP_SCHEME_ULTRAQUANT ? 128 : k;
        for (size_t off = 1; off < 64; off += (p % 2) ? 3 : 2) {
            lofp_dtype dt = off % 3 == 0 ? LOFP_DTYPE_F32 : off % 3 == 1 ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F16;
            layout_opts lo = { BUF_PLAIN, (off * dsize(dt)) % 64, off, (off * 7) % 64, (off * 4) % 64 };
            if (lo.in_off == 0) lo.in_off = dsize(dt);
            fill_tensor(&g, x, rows, kk, 32, 0);
            run_case(&s, dt, x, rows, kk, 1, 1.0f, &lo);
        }
        for (int mode = BUF_GUARD_AFTER; mode <= BUF_GUARD_BEFORE; mode++) {
            for (int dt = LOFP_DTYPE_F32; dt <= LOFP_DTYPE_F16; dt++) {
                layout_opts lo = { mode, 0, 0, 0, 0 };
                size_t ks[3] = { kk, kk - 4, 32 }; /* whole blocks, a padded tail, one block */
                for (int ki = 0; ki < 3; ki++) {
                    for (size_t r = 1; r <= rows; r += 2) {
                        fill_tensor(&g, x, r, ks[ki], 32, dt == LOFP_DTYPE_F32);
                        run_case(&s, (lofp_dtype)dt, x, r, ks[ki], 1, 1.0f, &lo);
                    }
                }
            }
        }
    }
}

/* NaN / Inf at random places: the error and its index, or propagation, identical everywhere. */
static void test_nonfinite(void)
{
    cfg_list *L = malloc(sizeof *L);
    all_configs(L);
    tu_rng g = { 1234 };
    size_t rows = 9, k = 320;
    float *x = malloc(rows * k * sizeof(float));
    const float bad[4] = { NAN, INFINITY, -INFINITY, -NAN };
    for (int c = 0; c < L->n; c++) {
        lofp_scheme s = L->s[c];
        if (s.rounding == LOFP_STOCHASTIC || (s.id != LOFP_SCHEME_ULTRAQUANT && s.rounding != LOFP_RNE)) continue;
        size_t kk = s.id == LOFP_SCHEME_ULTRAQUANT && s.rotate ? 256 : k;
        for (int prop = 0; prop <= 1; prop++) {
            s.propagate_nonfinite = prop;
            for (int trial = 0; trial < 4; trial++) {
                lofp_dtype dt = (lofp_dtype)(1 + trial % 3);
                fill_tensor(&g, x, rows, kk, 32, 0);
                int nbad = 1 + (int)(tu_next(&g) % 3);
                for (int b = 0; b < nbad; b++) x[tu_next(&g) % (rows * kk)] = bad[tu_next(&g) % 4];
                run_case(&s, dt, x, rows, kk, 1, 1.0f, &plain);
                if (s.id == LOFP_SCHEME_NVFP4) run_case(&s, dt, x, rows, kk, 0, 0.5f, &plain);
            }
        }
    }
    free(x);
    free(L);
}

/* Random code and scale bytes (every value, NaN scales and NaN codes included) dequantized by
 * every variant against the reference dequantizers. */
static void test_dequant_random_bytes(void)
{
    static const char *presets[] = { "nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3",
                                     "mxfp8-e5m2", "mxint8", "tilelang-mxfp8", "ultraquant" };
    tu_rng g = { 5 };
    size_t rows = 5, k = 2048; /* >= 256 blocks: the cyclic trials give every scale byte */
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        lofp_scheme s;
        lofp_scheme_preset(presets[p], &s);
        size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
        uint8_t *c = malloc(cb), *sc = malloc(sb);
        float *want = malloc(rows * k * 4), *got = aligned_alloc(64, rows * k * 4); /* aligned: streams */
        const float globals[3] = { 1.0f, 0.3f, 7.5e-30f };
        for (int trial = 0; trial < 6; trial++) {
            /* random bytes, then cyclic ones: every scale byte (0xFF = NaN for MX, 0x7F/0xFF for
             * NVFP4) meets NaN/Inf element codes (E4M3 0x7F/0xFF, E5M2 0x7C-0x7F/0xFC-0xFF), where
             * the operand order of the reference's v * scale decides which NaN comes out */
            for (size_t i = 0; i < cb; i++) c[i] = (uint8_t)(trial <= 3 ? tu_next(&g) : i * (size_t)(trial - 3));
            for (size_t i = 0; i < sb; i++)
                sc[i] = (uint8_t)(trial < 3 ? tu_next(&g) : trial == 3 ? i : trial == 4 ? 0xFF : (i & 1) ? 0x7F : 0xFF);
            float gl = globals[trial % 3];
            oracle_dequantize(&s, c, sc, gl, rows, k, LOFP_DTYPE_F32, want);
            for (int v = 0; v < nvariants; v++) {
                lofp_dequant_stream_bytes = trial & 1 ? 0 : SIZE_MAX;
                CHECK_OK(lofp_dequantize_table(variants[v], &s, c, sc, gl, rows, k, LOFP_DTYPE_F32, got));
                size_t d = first_diff((uint8_t *)got, (uint8_t *)want, rows * k * 4);
                CHECKF(d == rows * k * 4, "%s random bytes [%s]: float %zu is %08x, reference %08x",
                       presets[p], variants[v]->isa, d / 4, d < rows * k * 4 ? fbits(got[d / 4]) : 0,
                       d < rows * k * 4 ? fbits(want[d / 4]) : 0);
            }
        }
        free(c); free(sc); free(want); free(got);
    }
}

/* The row conversions and the scan on every 16-bit pattern and on special fp32 values. */
static void test_rows_exhaustive(void)
{
    uint16_t *h = malloc(65536 * 2), *h2 = malloc(65536 * 2);
    float *f = malloc(65536 * 4), *want = malloc(65536 * 4);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int dt = LOFP_DTYPE_BF16; dt <= LOFP_DTYPE_F16; dt++) {
        for (uint32_t i = 0; i < 65536; i++) want[i] = lofp_load_f32((lofp_dtype)dt, h, i);
        for (int v = 0; v < nvariants; v++) {
            variants[v]->load_row((lofp_dtype)dt, h, 65536, f);
            CHECKF(memcmp(f, want, 65536 * 4) == 0, "load_row %s [%s]", dt_name((lofp_dtype)dt), variants[v]->isa);
        }
        /* stores: every fp32 with a random low half, every exponent, plus rounding boundaries */
        tu_rng g = { 77 };
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t u = (i << 16) | (uint32_t)(tu_next(&g) & 0xFFFF);
            if (i % 5 == 0) u = (i << 16) | 0x8000u;                 /* bf16 ties */
            if (i % 7 == 0) u = (i << 16) | (0x1000u * (i % 3));     /* fp16 ties / exact */
            f[i] = bitsf(u);
        }
        uint16_t *wh = malloc(65536 * 2);
        for (uint32_t i = 0; i < 65536; i++) lofp_store_f32((lofp_dtype)dt, wh, i, f[i]);
        for (int v = 0; v < nvariants; v++) {
            variants[v]->store_row((lofp_dtype)dt, f, 65536, h2);
            size_t d = first_diff((uint8_t *)h2, (uint8_t *)wh, 65536 * 2);
            CHECKF(d == 65536 * 2, "store_row %s [%s]: element %zu (%08x) -> %04x, want %04x",
                   dt_name((lofp_dtype)dt), variants[v]->isa, d / 2, d < 131072 ? fbits(f[d / 2]) : 0,
                   d < 131072 ? h2[d / 2] : 0, d < 131072 ? wh[d / 2] : 0);
        }
        free(wh);
    }
    /* scans: amax and first non-finite at every position of a few lengths */
    tu_rng g = { 3 };
    float *x = malloc(1100 * 4);
    uint16_t *x16 = malloc(1100 * 2);
    for (size_t n = 1; n <= 1100; n += (n < 40 ? 1 : 97)) {
        for (size_t i = 0; i < n; i++) x[i] = (float)(tu_normal(&g) * 100.0);
        for (int bad = -1; bad < (int)n; bad += (n < 40 ? 1 : 61)) {
            if (bad >= 0) x[bad] = bad % 2 ? INFINITY : NAN;
            for (int dt = LOFP_DTYPE_F32; dt <= LOFP_DTYPE_F16; dt++) {
                const void *p = x;
                if (dt != LOFP_DTYPE_F32) { to_dtype((lofp_dtype)dt, x, n, x16); p = x16; }
                float ra = 0, a = 0;
                size_t rf = 0, fi = 0;
                int rb = variants[0]->scan((lofp_dtype)dt, p, n, &ra, &rf);
                for (int v = 1; v < nvariants; v++) {
                    int b = variants[v]->scan((lofp_dtype)dt, p, n, &a, &fi);
                    CHECKF(b == rb && (b ? fi == rf : fbits(a) == fbits(ra)), "scan %s n=%zu bad=%d [%s]",
                           dt_name((lofp_dtype)dt), n, bad, variants[v]->isa);
                }
            }
            if (bad >= 0) x[bad] = 1.0f;
        }
    }
    free(x); free(x16); free(h); free(h2); free(f); free(want);
}

/* Public entry points: the resolved table, lofp_kernel_name, the global-scale helpers. */
static void test_public(void)
{
    const char *env = getenv("LOFP_DISABLE_CPU_FEATURES");
    const uint32_t need = LOFP_CPU_AVX2 | LOFP_CPU_FMA | LOFP_CPU_F16C;
    const char *expect = (lofp_cpu_features() & need) == need ? "avx2" : "generic";
    const uint32_t need512 = need | LOFP_CPU_AVX512F | LOFP_CPU_AVX512BW | LOFP_CPU_AVX512VL | LOFP_CPU_AVX512VBMI;
    const int have512 = (lofp_cpu_features() & need512) == need512;
    for (int id = 1; id < LOFP_SCHEME_COUNT_; id++) {
        const char *q = lofp_kernel_name((lofp_scheme_id)id, LOFP_KERNEL_QUANTIZE);
        const char *d = lofp_kernel_name((lofp_scheme_id)id, LOFP_KERNEL_DEQUANTIZE);
        /* the 512-bit kernels serve every preset (x86/{nvfp4,mx,uq}_avx512.c) */
        const char *want = have512 ? "avx512" : expect;
        CHECKF(q && d && strcmp(q, want) == 0 && strcmp(d, want) == 0, "kernel name %s/%s of %s, want %s",
               q ? q : "NULL", d ? d : "NULL", lofp_scheme_traits[id].name, want);
    }
    if (have512) expect = "avx512";
    if (env && strstr(env, "all")) CHECKF(strcmp(expect, "generic") == 0, "LOFP_DISABLE_CPU_FEATURES=all");
    CHECK(lofp_kernel_name((lofp_scheme_id)0, LOFP_KERNEL_QUANTIZE) == NULL);
    CHECK(lofp_kernel_name(LOFP_SCHEME_MXFP4, (lofp_kernel_op)7) == NULL);
    printf("kernel variant in use: %s\n", expect);

    /* lofp_quantize (default table, threads 2) against the oracle, and the global helpers */
    tu_rng g = { 11 };
    size_t rows = 33, k = 256;
    float *x = malloc(rows * k * 4);
    fill_tensor(&g, x, rows, k, 16, 0);
    lofp_scheme s;
    lofp_scheme_preset("nvfp4", &s);
    s.threads = 2;
    size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
    uint8_t *c1 = malloc(cb), *s1 = malloc(sb), *c2 = malloc(cb), *s2 = malloc(sb);
    float g1 = 0, g2 = 0;
    lofp_quant_report r1, r2;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, rows, k, c1, s1, &g1, &r1));
    CHECK_OK(oracle_quantize(&s, LOFP_DTYPE_F32, x, rows, k, 1, 1.0f, c2, s2, &g2, &r2));
    CHECK(fbits(g1) == fbits(g2) && memcmp(c1, c2, cb) == 0 && memcmp(s1, s2, sb) == 0);
    /* the reference helper: amax by the old two loops */
    float amax = 0;
    for (size_t i = 0; i < rows * k; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    CHECK(fbits(lofp_nvfp4_decode_scale(LOFP_DTYPE_F32, x, rows * k)) == fbits((amax < 1e-12f ? 1e-12f : amax) / 2688.0f));
    x[100] = NAN;
    CHECK(isnan(lofp_nvfp4_global_scale(LOFP_DTYPE_F32, x, rows * k)));
    CHECK(isnan(lofp_nvfp4_decode_scale(LOFP_DTYPE_F32, x, rows * k)));
    free(x); free(c1); free(s1); free(c2); free(s2);
}

/* Two application threads quantizing at once (the pool is busy for one of them: it falls back
 * to its own threads), and the fork/join mode: the same bytes. */
typedef struct {
    const float *x;
    size_t rows, k;
    uint8_t *codes, *scales;
    lofp_status st;
} conc_arg;

static void *conc_main(void *v)
{
    conc_arg *a = v;
    lofp_scheme s;
    lofp_scheme_preset("mxfp4", &s);
    s.threads = 2;
    for (int i = 0; i < 20 && a->st == LOFP_OK; i++)
        a->st = lofp_quantize(&s, LOFP_DTYPE_F32, a->x, a->rows, a->k, a->codes, a->scales, NULL, NULL);
    return NULL;
}

static void test_concurrency(void)
{
    tu_rng g = { 8 };
    size_t rows = 64, k = 1024;
    float *x = malloc(rows * k * 4);
    fill_tensor(&g, x, rows, k, 32, 0);
    lofp_scheme s;
    lofp_scheme_preset("mxfp4", &s);
    size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
    uint8_t *wc = malloc(cb), *ws = malloc(sb);
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, rows, k, wc, ws, NULL, NULL));
    conc_arg a[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        a[i] = (conc_arg){ x, rows, k, malloc(cb), malloc(sb), LOFP_OK };
        pthread_create(&th[i], NULL, conc_main, &a[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK_OK(a[i].st);
        CHECK(memcmp(a[i].codes, wc, cb) == 0 && memcmp(a[i].scales, ws, sb) == 0);
    }
    lofp_parallel_fork_join = 1;
    s.threads = 3;
    CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, rows, k, a[0].codes, a[0].scales, NULL, NULL));
    CHECK(memcmp(a[0].codes, wc, cb) == 0 && memcmp(a[0].scales, ws, sb) == 0);
    lofp_parallel_fork_join = 0;
    for (int i = 0; i < 2; i++) { free(a[i].codes); free(a[i].scales); }
    free(wc); free(ws); free(x);
}

int main(void)
{
    lofp_parallel_min_elems = 1; /* split even the smallest shapes across threads */
    setup_variants();
    test_public();
    test_rows_exhaustive();
    test_dequant_random_bytes();
    test_all_configs();
    test_shapes();
    test_alignment_and_guards();
    test_nonfinite();
    test_concurrency();
    /* the data reached both ends of the E8M0 range (the reciprocal-scale argument's edges) */
    CHECKF(mx_scale_seen[0] && mx_scale_seen[1] && mx_scale_seen[253] && mx_scale_seen[254],
           "MX scale bytes 0/1/253/254 seen: %d %d %d %d", mx_scale_seen[0], mx_scale_seen[1],
           mx_scale_seen[253], mx_scale_seen[254]);
    printf("test_kernels: %zu quantize runs compared\n", n_runs);
    return tu_finish("test_kernels");
}

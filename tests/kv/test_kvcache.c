/* test_kvcache.c -- the paged KV cache (lofp/kvcache.h): slot layout, the store against vLLM's own
 * bytes (tests/golden/ultraquant) and against an UltraQuant encoder written here from SPEC §2
 * (butterfly rotation included, bit for bit), the dense-matmul rotation's code mismatch rate,
 * skipped and duplicate slots, non-finite input, fp32/bf16 caches and the gather. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "lofp/kvcache.h"

/* ---- an independent UltraQuant encoder (SPEC §2, vLLM ultraquant_encode) ---------------------- */

static void ref_butterfly(float *x, size_t d)
{
    float r;
    uint32_t rb = 0x3F3504F3u;
    memcpy(&r, &rb, 4);
    for (size_t h = 1; h < d; h *= 2)
        for (size_t i = 0; i < d; i++)
            if (!(i & h)) {
                volatile float a = x[i], b = x[i + h];
                volatile float s = a + b, t = a - b;
                x[i] = s * r;
                x[i + h] = t * r;
            }
}

/* x @ H^T with H = Sylvester / sqrt(d) rounded to fp32, summed sequentially in fp32 */
static void ref_dense(const float *x, float *y, size_t d)
{
    float h = (float)(1.0 / sqrt((double)d));
    for (size_t i = 0; i < d; i++) {
        float acc = 0.0f;
        for (size_t j = 0; j < d; j++) {
            volatile float p = x[j] * ((__builtin_popcountll(i & j) & 1) ? -h : h);
            acc = acc + p;
        }
        y[i] = acc;
    }
}

static void ref_encode(const float *in, size_t D, int rotate, int dense, uint8_t *codes, uint8_t *scales)
{
    static const float mid[14] = { -5.0f, -3.5f, -2.5f, -1.75f, -1.25f, -0.75f, -0.25f,
                                   0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f };
    float x[512], y[512];
    memcpy(x, in, D * sizeof(float));
    if (rotate && dense) { ref_dense(x, y, D); memcpy(x, y, D * sizeof(float)); }
    else if (rotate) ref_butterfly(x, D);
    memset(codes, 0, D / 2);
    for (size_t g = 0; g < D / 32; g++) {
        float amax = 0.0f;
        int finite = 1;
        for (size_t i = 0; i < 32; i++) {
            if (!isfinite(x[g * 32 + i])) finite = 0;
            else if (fabsf(x[g * 32 + i]) > amax) amax = fabsf(x[g * 32 + i]);
        }
        volatile float s_raw = amax * 0.156f;
        if (!finite || !(s_raw > 0.0f)) { scales[g] = 0; continue; }
        int e = (int)floorf(log2f(s_raw) + 0.5f);
        if (e < -126) e = -126;
        if (e > 127) e = 127;
        scales[g] = (uint8_t)(e + 127);
        float sc = ldexpf(1.0f, e);
        for (size_t i = 0; i < 32; i++) {
            float q = x[g * 32 + i] / sc;
            int idx = 0;
            for (int j = 0; j < 14; j++) idx += q > mid[j];
            unsigned code = idx < 7 ? 15u - (unsigned)idx : (unsigned)idx - 7u;
            size_t k = g * 32 + i;
            codes[k / 2] |= (uint8_t)(code << (4 * (k & 1)));
        }
    }
}

static void fill(float *x, size_t n, double sd, tu_rng *r)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(sd * tu_normal(r));
}

/* bf16-valued inputs, as vLLM's K and V are */
static void fill_bf16(float *x, size_t n, double sd, tu_rng *r)
{
    for (size_t i = 0; i < n; i++) x[i] = lofp_bf16_to_fp32(lofp_fp32_to_bf16((float)(sd * tu_normal(r))));
}

static const uint8_t *slot_of(const lofp_kv_cache_desc *d, const uint8_t *cache, int64_t slot, uint32_t h)
{
    return cache + ((size_t)slot * d->num_kv_heads + h) * lofp_kv_slot_bytes(d->format, d->head_dim);
}

/* ---- layout ----------------------------------------------------------------------------------- */

static void layout(void)
{
    lofp_kv_slot_layout l;
    CHECK_OK(lofp_kv_slot_layout_get(LOFP_KV_ULTRAQUANT, 128, &l));
    CHECK(l.k_codes_offset == 0 && l.k_scales_offset == 64 && l.v_codes_offset == 68 &&
          l.v_scales_offset == 132 && l.slot_bytes == 136);
    CHECK_OK(lofp_kv_slot_layout_get(LOFP_KV_ULTRAQUANT, 256, &l));
    CHECK(l.k_codes_offset == 0 && l.k_scales_offset == 128 && l.v_codes_offset == 136 &&
          l.v_scales_offset == 264 && l.slot_bytes == 272);
    CHECK_EQ_U(lofp_kv_slot_bytes(LOFP_KV_ULTRAQUANT, 64), 68);
    CHECK_EQ_U(lofp_kv_slot_bytes(LOFP_KV_ULTRAQUANT, 32), 34);
    CHECK_EQ_U(lofp_kv_slot_bytes(LOFP_KV_ULTRAQUANT, 512), 544);
    CHECK_EQ_U(lofp_kv_slot_bytes(LOFP_KV_F32, 128), 1024);
    CHECK_EQ_U(lofp_kv_slot_bytes(LOFP_KV_BF16, 128), 512);
    CHECK_OK(lofp_kv_slot_layout_get(LOFP_KV_BF16, 64, &l));
    CHECK(l.k_codes_offset == 0 && l.v_codes_offset == 128 && l.slot_bytes == 256);
    CHECK(lofp_kv_slot_layout_get(LOFP_KV_ULTRAQUANT, 48, &l) == LOFP_ERR_SHAPE);
    CHECK(lofp_kv_slot_layout_get((lofp_kv_format)0, 64, &l) == LOFP_ERR_INVALID_ARG);
    lofp_kv_cache_desc d;
    CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 128, 8, 64, 10));
    CHECK_EQ_U(lofp_kv_cache_bytes(&d), 10u * 64 * 8 * 136);
    CHECK(d.c == 0.156f && d.hadamard == LOFP_HADAMARD_BUTTERFLY && d.rotate_k == 1);
    CHECK(d.format == LOFP_KV_ULTRAQUANT);
    /* format names: the CLI's --kv values and Python's format= (docs/KV.md), both ways */
    static const struct { const char *name; lofp_kv_format f; } names[] = {
        {"ultraquant", LOFP_KV_ULTRAQUANT}, {"fp32", LOFP_KV_F32}, {"bf16", LOFP_KV_BF16},
        {"float32", LOFP_KV_F32}, {"bfloat16", LOFP_KV_BF16}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        lofp_kv_format f = (lofp_kv_format)0;
        CHECK_OK(lofp_kv_format_from_name(names[i].name, &f));
        CHECK(f == names[i].f);
        if (i < 3) CHECK(strcmp(lofp_kv_format_name(names[i].f), names[i].name) == 0);
    }
    lofp_kv_format f0 = LOFP_KV_F32;
    CHECK(lofp_kv_format_from_name("fp16", &f0) == LOFP_ERR_NOT_FOUND && f0 == LOFP_KV_F32);
    CHECK(lofp_kv_format_from_name("UltraQuant", &f0) == LOFP_ERR_NOT_FOUND);
    CHECK(lofp_kv_format_from_name(NULL, &f0) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_kv_format_name((lofp_kv_format)0) == NULL);
    d.c = 0.0f;
    CHECK(lofp_kv_desc_validate(&d) == LOFP_ERR_INVALID_ARG);
    CHECK_EQ_U(lofp_kv_cache_bytes(&d), 0);
    d.c = NAN;
    CHECK(lofp_kv_desc_validate(&d) == LOFP_ERR_INVALID_ARG);
    d.c = 0.156f;
    d.hadamard = (lofp_hadamard_kind)5;
    CHECK(lofp_kv_desc_validate(&d) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 128, 8, 64, SIZE_MAX / 1000) == LOFP_ERR_SIZE_OVERFLOW);
    CHECK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, 128, 8, 0, 10) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_kv_desc_init(NULL, LOFP_KV_ULTRAQUANT, 128, 8, 64, 10) == LOFP_ERR_INVALID_ARG);
}

/* ---- vLLM's own bytes ------------------------------------------------------------------------- */

static void golden_case(const char *c, const char *variant)
{
    char p[512];
#define LOAD(var, name) snprintf(p, sizeof p, "ultraquant/%s/%s/%s.npy", c, variant, name); \
    tu_npy var = tu_load_golden(p)
    LOAD(x, "x"); LOAD(codes, "codes"); LOAD(scales, "scales"); LOAD(deq, "dequant");
#undef LOAD
    int rotated = strcmp(variant, "unrotated") != 0;
    const uint32_t D = (uint32_t)x.shape[x.ndim - 1];
    const size_t T = x.count / D; /* one token per row, one KV head */
    for (int kind = 0; kind < (rotated ? 2 : 1); kind++) {
        lofp_kv_cache_desc d;
        CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, D, 1, 4, (T + 3) / 4 + 1));
        d.rotate_k = rotated;
        d.hadamard = kind ? LOFP_HADAMARD_BUTTERFLY : LOFP_HADAMARD_DENSE;
        uint8_t *cache = calloc(1, lofp_kv_cache_bytes(&d));
        int64_t *slots = malloc(T * sizeof(int64_t));
        int32_t bt[16];
        for (size_t t = 0; t < T; t++) slots[t] = (int64_t)(t + 4); /* blocks 1.. */
        for (int j = 0; j < 16; j++) bt[j] = j + 1;
        lofp_kv_store_report rep;
        CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, x.data, x.data, T, slots, 0, &rep));
        size_t bad_kc = 0, bad_ks = 0, bad_vc = 0, bad_vs = 0;
        for (size_t t = 0; t < T; t++) {
            const uint8_t *s = slot_of(&d, cache, slots[t], 0);
            const uint8_t *gc = (const uint8_t *)codes.data + t * D / 2, *gs = (const uint8_t *)scales.data + t * D / 32;
            for (uint32_t i = 0; i < D; i++) {
                unsigned a = (s[i / 2] >> (4 * (i & 1))) & 15, b = (gc[i / 2] >> (4 * (i & 1))) & 15;
                unsigned v = (s[D / 2 + D / 32 + i / 2] >> (4 * (i & 1))) & 15;
                bad_kc += a != b;
                bad_vc += !rotated && v != b;
            }
            for (uint32_t g = 0; g < D / 32; g++) {
                bad_ks += s[D / 2 + g] != gs[g];
                bad_vs += !rotated && s[D + D / 32 + g] != gs[g];
            }
        }
        CHECKF(bad_ks == 0 && bad_vs == 0, "%s/%s: %zu K, %zu V scale bytes differ from vLLM", c, variant, bad_ks, bad_vs);
        if (!rotated) {
            CHECKF(bad_kc == 0 && bad_vc == 0, "%s: %zu K, %zu V codes differ from vLLM", c, bad_kc, bad_vc);
            float *k = malloc(T * D * sizeof(float)), *v = malloc(T * D * sizeof(float));
            CHECK_OK(lofp_kv_gather(&d, cache, bt, T, k, v));
            CHECK(memcmp(k, deq.data, T * D * sizeof(float)) == 0);
            CHECK(memcmp(v, deq.data, T * D * sizeof(float)) == 0);
            free(k); free(v);
        } else {
            /* the reference rotates with a BLAS matmul in its own summation order */
            CHECKF(bad_kc * 1000 <= T * D, "%s/%s (%s): %zu of %zu K codes differ", c, variant,
                   kind ? "butterfly" : "dense", bad_kc, T * D);
        }
        printf("golden %-14s %-22s %-9s: store bytes vs vLLM: %zu/%zu codes differ, scales exact\n", c, variant,
               rotated ? (kind ? "butterfly" : "dense") : "-", bad_kc, T * D);
        free(cache); free(slots);
    }
    tu_npy_free(&x); tu_npy_free(&codes); tu_npy_free(&scales); tu_npy_free(&deq);
}

/* ---- store against the independent encoder, every dtype and head dim ---------------------------- */

static void store_vs_reference(void)
{
    tu_rng rng = { 31 };
    const uint32_t dims[5] = { 32, 64, 128, 256, 512 };
    const lofp_dtype dts[3] = { LOFP_DTYPE_F32, LOFP_DTYPE_BF16, LOFP_DTYPE_F16 };
    for (int di = 0; di < 5; di++)
        for (int ti = 0; ti < 3; ti++) {
            const uint32_t D = dims[di], Hk = 3, bs = 16;
            const size_t T = 37;
            lofp_kv_cache_desc d;
            CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, D, Hk, bs, 5));
            size_t cb = lofp_kv_cache_bytes(&d);
            uint8_t *cache = malloc(cb);
            memset(cache, 0x5A, cb);
            float *k = malloc(T * Hk * D * sizeof(float)), *v = malloc(T * Hk * D * sizeof(float));
            fill(k, T * Hk * D, 3.0, &rng);
            fill(v, T * Hk * D, 0.1, &rng);
            /* a zero vector, a tiny group, exact ties for V */
            memset(k, 0, D * sizeof(float));
            for (uint32_t j = 0; j < 32; j++) v[Hk * D + j] = 1e-30f * (float)(j + 1);
            for (uint32_t j = 0; j < 32; j++) v[2 * Hk * D + j] = (float)((int)j % 13 - 6) * 0.25f;
            /* inputs in dt, and their exact fp32 values */
            void *kin = malloc(T * Hk * D * 4), *vin = malloc(T * Hk * D * 4);
            for (size_t i = 0; i < T * Hk * D; i++) {
                if (dts[ti] == LOFP_DTYPE_F32) { ((float *)kin)[i] = k[i]; ((float *)vin)[i] = v[i]; continue; }
                uint16_t a, b;
                if (dts[ti] == LOFP_DTYPE_BF16) {
                    a = lofp_fp32_to_bf16(k[i]); b = lofp_fp32_to_bf16(v[i]);
                    k[i] = lofp_bf16_to_fp32(a); v[i] = lofp_bf16_to_fp32(b);
                } else {
                    a = lofp_fp32_to_fp16(k[i]); b = lofp_fp32_to_fp16(v[i]);
                    k[i] = lofp_fp16_to_fp32(a); v[i] = lofp_fp16_to_fp32(b);
                }
                ((uint16_t *)kin)[i] = a;
                ((uint16_t *)vin)[i] = b;
            }
            int64_t slots[37];
            for (size_t t = 0; t < T; t++) slots[t] = (int64_t)((t * 7 + 3) % (5 * bs)); /* scattered, distinct */
            CHECK_OK(lofp_kv_store(&d, cache, dts[ti], kin, vin, T, slots, 0, NULL));
            size_t bad = 0;
            uint8_t rc[256], rs[16];
            for (size_t t = 0; t < T; t++)
                for (uint32_t h = 0; h < Hk; h++) {
                    const uint8_t *s = slot_of(&d, cache, slots[t], h);
                    ref_encode(k + (t * Hk + h) * D, D, 1, 0, rc, rs);
                    bad += memcmp(s, rc, D / 2) != 0 || memcmp(s + D / 2, rs, D / 32) != 0;
                    ref_encode(v + (t * Hk + h) * D, D, 0, 0, rc, rs);
                    bad += memcmp(s + D / 2 + D / 32, rc, D / 2) != 0 || memcmp(s + D + D / 32, rs, D / 32) != 0;
                }
            CHECKF(bad == 0, "D=%u dtype %d: %zu K/V vectors differ from the reference encoder", D, (int)dts[ti], bad);
            /* and from lofp_quantize, the library's own encoder */
            lofp_scheme sch;
            lofp_scheme_preset("ultraquant", &sch);
            uint8_t *qc = malloc(T * Hk * D / 2), *qs = malloc(T * Hk * D / 32);
            CHECK_OK(lofp_quantize(&sch, dts[ti], kin, T * Hk, D, qc, qs, NULL, NULL));
            size_t badq = 0;
            for (size_t t = 0; t < T; t++)
                for (uint32_t h = 0; h < Hk; h++) {
                    const uint8_t *s = slot_of(&d, cache, slots[t], h);
                    badq += memcmp(s, qc + (t * Hk + h) * D / 2, D / 2) != 0 ||
                            memcmp(s + D / 2, qs + (t * Hk + h) * D / 32, D / 32) != 0;
                }
            CHECK_EQ_U(badq, 0);
            /* gather returns code * 2^(byte-127) in the rotated basis */
            float *kg = malloc(T * Hk * D * sizeof(float)), *vg = malloc(T * Hk * D * sizeof(float));
            int32_t bt[5];
            for (int j = 0; j < 5; j++) bt[j] = j;
            CHECK_OK(lofp_kv_gather(&d, cache, bt, 5 * bs, NULL, NULL)); /* nothing wanted: fine */
            size_t npos = 5 * bs;
            float *all = malloc(npos * Hk * D * sizeof(float));
            CHECK_OK(lofp_kv_gather(&d, cache, bt, npos, all, NULL));
            float *deq = malloc(Hk * D * sizeof(float));
            size_t badg = 0;
            for (size_t t = 0; t < T; t++) {
                CHECK_OK(lofp_dequantize(&sch, qc + t * Hk * D / 2, qs + t * Hk * D / 32, 1.0f, Hk, D,
                                         LOFP_DTYPE_F32, deq));
                badg += memcmp(all + (size_t)slots[t] * Hk * D, deq, Hk * D * sizeof(float)) != 0;
            }
            CHECK_EQ_U(badg, 0);
            free(cache); free(k); free(v); free(kin); free(vin); free(qc); free(qs); free(kg); free(vg);
            free(all); free(deq);
        }
}

/* ---- dense-matmul rotation: how often its codes differ from the butterfly's ---------------------- */

static void dense_mismatch_rate(void)
{
    tu_rng rng = { 4242 };
    const uint32_t dims[2] = { 128, 256 };
    const size_t vecs[2] = { 16384, 4096 };
    for (int di = 0; di < 2; di++) {
        const uint32_t D = dims[di], Hk = 8;
        const size_t T = vecs[di] / Hk;
        lofp_kv_cache_desc d;
        CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, D, Hk, 64, (T + 63) / 64));
        uint8_t *cache = calloc(1, lofp_kv_cache_bytes(&d));
        float *k = malloc(T * Hk * D * sizeof(float));
        fill_bf16(k, T * Hk * D, 1.0, &rng);
        int64_t *slots = malloc(T * sizeof(int64_t));
        for (size_t t = 0; t < T; t++) slots[t] = (int64_t)t;
        CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, k, T, slots, 0, NULL));
        size_t bad_c = 0, bad_s = 0, bad_b = 0;
        uint8_t rc[128], rs[8];
        for (size_t t = 0; t < T; t++)
            for (uint32_t h = 0; h < Hk; h++) {
                const uint8_t *s = slot_of(&d, cache, (int64_t)t, h);
                ref_encode(k + (t * Hk + h) * D, D, 1, 1, rc, rs); /* dense */
                for (uint32_t i = 0; i < D; i++) bad_c += ((s[i / 2] ^ rc[i / 2]) >> (4 * (i & 1)) & 15) != 0;
                for (uint32_t g = 0; g < D / 32; g++) bad_s += s[D / 2 + g] != rs[g];
                ref_encode(k + (t * Hk + h) * D, D, 1, 0, rc, rs); /* butterfly: exact */
                bad_b += memcmp(s, rc, D / 2) != 0 || memcmp(s + D / 2, rs, D / 32) != 0;
            }
        double rate = (double)bad_c / ((double)T * Hk * D);
        CHECKF(rate < 1e-5, "D=%u: butterfly vs dense matmul codes differ in %.3g of codes", D, rate);
        CHECKF(bad_b == 0, "D=%u: %zu vectors differ from the reference butterfly", D, bad_b);
        printf("D=%u: butterfly store vs dense-matmul rotation: %zu of %zu codes differ (%.2g), %zu of %zu scale bytes\n",
               D, bad_c, T * Hk * D, rate, bad_s, T * Hk * D / 32);
        free(cache); free(k); free(slots);
    }
}

/* ---- skipped, duplicate and out-of-range slots; non-finite input ------------------------------ */

static void slots_and_nonfinite(void)
{
    const uint32_t D = 64, Hk = 2, bs = 8;
    const size_t T = 10;
    tu_rng rng = { 17 };
    lofp_kv_cache_desc d;
    CHECK_OK(lofp_kv_desc_init(&d, LOFP_KV_ULTRAQUANT, D, Hk, bs, 4));
    const size_t cb = lofp_kv_cache_bytes(&d), sb = lofp_kv_slot_bytes(d.format, D);
    uint8_t *cache = malloc(cb), *before = malloc(cb);
    memset(cache, 0xEE, cb);
    float k[10 * 2 * 64], v[10 * 2 * 64];
    fill(k, T * Hk * D, 1.0, &rng);
    fill(v, T * Hk * D, 1.0, &rng);
    int64_t slots[10] = { 0, -1, 5, 31, -7, 9, 12, -1, 20, 3 };
    lofp_kv_store_report rep;
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, 0, &rep));
    CHECK_EQ_U(rep.tokens_stored, 7);
    CHECK_EQ_U(rep.tokens_skipped, 3);
    CHECK_EQ_U(rep.zeroed_groups, 0);
    /* untouched: every slot not in the mapping still holds 0xEE */
    size_t touched = 0;
    for (size_t s = 0; s < 4 * bs; s++) {
        int mapped = 0;
        for (size_t t = 0; t < T; t++) mapped |= slots[t] == (int64_t)s;
        size_t diff = 0;
        for (size_t j = 0; j < Hk * sb; j++) diff += cache[s * Hk * sb + j] != 0xEE;
        if (!mapped) CHECKF(diff == 0, "slot %zu was written", s);
        touched += mapped && diff > 0;
    }
    CHECK_EQ_U(touched, 7);
    /* out of range: refused, nothing written */
    memcpy(before, cache, cb);
    int64_t bad_slots[2] = { 2, 32 };
    CHECK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, 2, bad_slots, 0, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(memcmp(before, cache, cb) == 0);
    /* duplicates: the later token wins */
    int64_t dup[2] = { 6, 6 };
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, 2, dup, 0, &rep));
    int64_t one[1] = { 7 };
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k + Hk * D, v + Hk * D, 1, one, 0, &rep));
    CHECK(memcmp(cache + 6 * Hk * sb, cache + 7 * Hk * sb, Hk * sb) == 0);

    /* NaN in K: refused with its index, nothing written */
    memcpy(before, cache, cb);
    k[(2 * Hk + 1) * D + 40] = NAN; /* token 2 (slot 5), head 1 */
    CHECK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, 0, &rep) == LOFP_ERR_NONFINITE);
    CHECK_EQ_U(rep.first_bad_index, (2 * Hk + 1) * D + 40);
    CHECK(rep.first_bad_in_v == 0 && rep.has_nonfinite == 1);
    CHECK(memcmp(before, cache, cb) == 0);
    /* Inf in V of a later token: index into v */
    k[(2 * Hk + 1) * D + 40] = 0.5f;
    v[(8 * Hk + 0) * D + 3] = -INFINITY; /* token 8 (slot 20), head 0 */
    CHECK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, 0, &rep) == LOFP_ERR_NONFINITE);
    CHECK_EQ_U(rep.first_bad_index, (8 * Hk + 0) * D + 3);
    CHECK(rep.first_bad_in_v == 1);
    /* a NaN in a skipped token is not read */
    v[(8 * Hk + 0) * D + 3] = 1.0f;
    k[(1 * Hk + 0) * D + 0] = NAN; /* token 1 is skipped */
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, 0, &rep));
    /* propagation: K NaN zeroes the whole rotated head vector (D/32 groups), V Inf one group */
    k[(2 * Hk + 1) * D + 40] = NAN;
    v[(8 * Hk + 0) * D + 3] = INFINITY;
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, LOFP_KV_STORE_PROPAGATE_NONFINITE, &rep));
    CHECK_EQ_U(rep.zeroed_groups, D / 32 + 1);
    CHECK(rep.has_nonfinite == 1);
    const uint8_t *s = slot_of(&d, cache, 5, 1);
    for (uint32_t j = 0; j < D / 2 + D / 32; j++) CHECK(s[j] == 0);
    CHECK(s[D + D / 32] != 0); /* its V is fine */
    s = slot_of(&d, cache, 20, 0);
    for (uint32_t j = 0; j < 16; j++) CHECK(s[D / 2 + D / 32 + j] == 0); /* V group 0 codes */
    CHECK(s[D + D / 32] == 0 && s[D + D / 32 + 1] != 0);
    s = slot_of(&d, cache, 5, 0); /* the other head of that token is intact */
    CHECK(s[D / 2] != 0);
    /* bad flags, dtype, NULLs */
    CHECK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, 4u, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_kv_store(&d, cache, (lofp_dtype)0, k, v, T, slots, 0, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, NULL, T, slots, 0, &rep) == LOFP_ERR_INVALID_ARG);
    CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, NULL, NULL, 0, NULL, 0, &rep));
    /* gather: block index out of range */
    int32_t bt[2] = { 0, 4 };
    float out[16 * 2 * 64];
    CHECK(lofp_kv_gather(&d, cache, bt, 16, out, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK_OK(lofp_kv_gather(&d, cache, bt, 8, out, NULL));
    free(cache); free(before);
}

/* ---- fp32 and bf16 caches ----------------------------------------------------------------------- */

static void plain_caches(void)
{
    const uint32_t D = 64, Hk = 2, bs = 4;
    const size_t T = 9;
    tu_rng rng = { 23 };
    float k[9 * 2 * 64], v[9 * 2 * 64], kg[12 * 2 * 64], vg[12 * 2 * 64];
    fill(k, T * Hk * D, 1.0, &rng);
    fill(v, T * Hk * D, 1.0, &rng);
    int64_t slots[9];
    int32_t bt[3] = { 2, 0, 1 };
    for (size_t t = 0; t < T; t++) slots[t] = (int64_t)bt[t / bs] * bs + (int64_t)(t % bs);
    for (int kind = 0; kind < 2; kind++) {
        lofp_kv_cache_desc d;
        CHECK_OK(lofp_kv_desc_init(&d, kind ? LOFP_KV_BF16 : LOFP_KV_F32, D, Hk, bs, 3));
        uint8_t *cache = calloc(1, lofp_kv_cache_bytes(&d));
        lofp_kv_store_report rep;
        CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, k, v, T, slots, 0, &rep));
        CHECK_OK(lofp_kv_gather(&d, cache, bt, T, kg, vg));
        size_t bad = 0;
        for (size_t i = 0; i < T * Hk * D; i++) {
            float wk = kind ? lofp_bf16_to_fp32(lofp_fp32_to_bf16(k[i])) : k[i];
            float wv = kind ? lofp_bf16_to_fp32(lofp_fp32_to_bf16(v[i])) : v[i];
            bad += memcmp(&wk, &kg[i], 4) != 0 || memcmp(&wv, &vg[i], 4) != 0;
        }
        CHECKF(bad == 0, "%s cache: %zu values differ", kind ? "bf16" : "fp32", bad);
        /* propagation zeroes the group of 32 that holds the NaN, nothing else */
        float kk[9 * 2 * 64];
        memcpy(kk, k, sizeof kk);
        kk[(4 * Hk + 1) * D + 33] = NAN;
        CHECK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, kk, v, T, slots, 0, &rep) == LOFP_ERR_NONFINITE);
        CHECK_OK(lofp_kv_store(&d, cache, LOFP_DTYPE_F32, kk, v, T, slots, LOFP_KV_STORE_PROPAGATE_NONFINITE, &rep));
        CHECK_EQ_U(rep.zeroed_groups, 1);
        CHECK_OK(lofp_kv_gather(&d, cache, bt, T, kg, NULL));
        for (uint32_t j = 0; j < D; j++) {
            float got = kg[(4 * Hk + 1) * D + j];
            if (j >= 32) CHECK(got == 0.0f);
            else CHECK(got != 0.0f);
        }
        free(cache);
    }
}

int main(void)
{
    layout();
    golden_case("normal_5x128", "unrotated");
    golden_case("normal_5x128", "rotated_dense_matmul");
    golden_case("ties_1x32", "unrotated");
    golden_case("zeros_2x64", "unrotated");
    store_vs_reference();
    dense_mismatch_rate();
    slots_and_nonfinite();
    plain_caches();
    return tu_finish("test_kvcache");
}

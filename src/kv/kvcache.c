/* kvcache.c -- the paged KV cache: description, slot layout, store (K rotated and encoded with the
 * library's own UltraQuant quantizer, V encoded) and gather (dequantized read-back). The slot
 * layout is vLLM's ultraquant format.py: [K codes D/2][K scales D/32][V codes D/2][V scales D/32]. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"

const char *lofp_kv_format_name(lofp_kv_format format)
{
    switch (format) {
    case LOFP_KV_ULTRAQUANT: return "ultraquant";
    case LOFP_KV_F32: return "fp32";
    case LOFP_KV_BF16: return "bf16";
    }
    return NULL;
}

lofp_status lofp_kv_format_from_name(const char *name, lofp_kv_format *out)
{
    if (!name || !out) return LOFP_ERR_INVALID_ARG;
    if (!strcmp(name, "ultraquant")) *out = LOFP_KV_ULTRAQUANT;
    else if (!strcmp(name, "fp32") || !strcmp(name, "float32")) *out = LOFP_KV_F32;
    else if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16")) *out = LOFP_KV_BF16;
    else return LOFP_ERR_NOT_FOUND;
    return LOFP_OK;
}

static int head_dim_ok(uint32_t D)
{
    return D >= LOFP_KV_MIN_D && D <= LOFP_KV_MAX_D && (D & (D - 1)) == 0;
}

static int format_ok(lofp_kv_format t)
{
    return t == LOFP_KV_ULTRAQUANT || t == LOFP_KV_F32 || t == LOFP_KV_BF16;
}

lofp_status lofp_kv_slot_layout_get(lofp_kv_format format, uint32_t head_dim, lofp_kv_slot_layout *out)
{
    if (!out || !format_ok(format)) return LOFP_ERR_INVALID_ARG;
    if (!head_dim_ok(head_dim)) return LOFP_ERR_SHAPE;
    size_t D = head_dim;
    if (format == LOFP_KV_ULTRAQUANT) {
        out->k_codes_offset = 0;
        out->k_scales_offset = D / 2;
        out->v_codes_offset = D / 2 + D / 32;
        out->v_scales_offset = D + D / 32;
        out->slot_bytes = D + 2 * (D / 32);
    } else {
        size_t e = format == LOFP_KV_F32 ? 4 : 2;
        out->k_codes_offset = 0;
        out->k_scales_offset = D * e;
        out->v_codes_offset = D * e;
        out->v_scales_offset = 2 * D * e;
        out->slot_bytes = 2 * D * e;
    }
    return LOFP_OK;
}

size_t lofp_kv_slot_bytes(lofp_kv_format format, uint32_t head_dim)
{
    lofp_kv_slot_layout l;
    return lofp_kv_slot_layout_get(format, head_dim, &l) == LOFP_OK ? l.slot_bytes : 0;
}

lofp_status lofp_kv_desc_validate(const lofp_kv_cache_desc *d)
{
    if (!d || !format_ok(d->format)) return LOFP_ERR_INVALID_ARG;
    if (!head_dim_ok(d->head_dim)) return LOFP_ERR_SHAPE;
    if (d->num_kv_heads == 0 || d->block_size == 0 || d->num_blocks == 0) return LOFP_ERR_INVALID_ARG;
    if (d->format == LOFP_KV_ULTRAQUANT) {
        if (!(d->c > 0.0f) || !isfinite(d->c)) return LOFP_ERR_INVALID_ARG;
        if (d->hadamard != LOFP_HADAMARD_BUTTERFLY && d->hadamard != LOFP_HADAMARD_DENSE)
            return LOFP_ERR_INVALID_ARG;
    }
    size_t n;
    if (!lofp_mul_size(d->num_blocks, d->block_size, &n) || !lofp_mul_size(n, d->num_kv_heads, &n) ||
        !lofp_mul_size(n, lofp_kv_slot_bytes(d->format, d->head_dim), &n))
        return LOFP_ERR_SIZE_OVERFLOW;
    /* positions are addressed with int64 slot numbers and int32 block indices */
    if (d->num_blocks > (size_t)INT32_MAX) return LOFP_ERR_SIZE_OVERFLOW;
    return LOFP_OK;
}

lofp_status lofp_kv_desc_init(lofp_kv_cache_desc *d, lofp_kv_format format, uint32_t head_dim,
                              uint32_t num_kv_heads, uint32_t block_size, size_t num_blocks)
{
    if (!d) return LOFP_ERR_INVALID_ARG;
    memset(d, 0, sizeof *d);
    d->format = format;
    d->head_dim = head_dim;
    d->num_kv_heads = num_kv_heads;
    d->block_size = block_size;
    d->num_blocks = num_blocks;
    d->c = 0.156f;
    d->hadamard = LOFP_HADAMARD_BUTTERFLY;
    d->rotate_k = 1;
    return lofp_kv_desc_validate(d);
}

size_t lofp_kv_cache_bytes(const lofp_kv_cache_desc *d)
{
    if (lofp_kv_desc_validate(d) != LOFP_OK) return 0;
    return d->num_blocks * d->block_size * d->num_kv_heads * lofp_kv_slot_bytes(d->format, d->head_dim);
}

void lofp_attn_geom_init(lofp_attn_geom *G, const lofp_kv_cache_desc *d, uint32_t num_q_heads)
{
    lofp_kv_slot_layout l;
    lofp_kv_slot_layout_get(d->format, d->head_dim, &l);
    memset(G, 0, sizeof *G);
    G->format = d->format;
    G->D = d->head_dim;
    G->Hk = d->num_kv_heads;
    G->Hq = num_q_heads;
    G->g = num_q_heads / d->num_kv_heads;
    G->bs = d->block_size;
    G->tile = 4096 / G->D > 64 ? 64 : 4096 / G->D;
    G->slot = l.slot_bytes;
    G->token_bytes = G->slot * G->Hk;
    G->block_bytes = G->token_bytes * G->bs;
    G->k_off = l.k_codes_offset;
    G->ks_off = l.k_scales_offset;
    G->v_off = l.v_codes_offset;
    G->vs_off = l.v_scales_offset;
}

/* ------------------------------------------------------------------------------------------ */
/* Store                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static size_t dtype_size(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_F32 ? 4 : (dt == LOFP_DTYPE_BF16 || dt == LOFP_DTYPE_F16) ? 2 : 0;
}

static int find_bad(lofp_dtype dt, const void *x, size_t base, size_t n, size_t *first)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(lofp_load_f32(dt, x, base + i))) { *first = base + i; return 1; }
    return 0;
}

static uint8_t *slot_ptr(const lofp_kv_cache_desc *d, uint8_t *cache, int64_t slot, uint32_t h,
                         size_t slot_bytes)
{
    size_t s = (size_t)slot;
    size_t blk = s / d->block_size, row = s % d->block_size;
    return cache + ((blk * d->block_size + row) * d->num_kv_heads + h) * slot_bytes;
}

#define UQ_CHUNK_TOKENS 256

/* 1 when the UltraQuant K rotation of head vector x[base, base + D) overflows fp32 although the
 * values are finite (|x| near FLT_MAX): then *first is the index of its largest magnitude. Only
 * vectors with a value above FLT_MAX / (2 D) can overflow (each butterfly stage at most doubles a
 * magnitude before its 1/sqrt(2)); those are encoded once, as the store would, to find out. */
static int uq_k_overflows(const lofp_kv_cache_desc *d, lofp_dtype dt, const void *x, size_t base,
                          size_t *first)
{
    const size_t D = d->head_dim;
    float amax = 0.0f;
    size_t arg = 0;
    for (size_t i = 0; i < D; i++) {
        float v = fabsf(lofp_load_f32(dt, x, base + i));
        if (v > amax) { amax = v; arg = i; }
    }
    if (amax <= FLT_MAX / (float)(2 * D)) return 0;
    lofp_scheme s;
    if (lofp_scheme_preset("ultraquant", &s) != LOFP_OK) return 0;
    s.c = d->c;
    s.rotate = 1;
    s.hadamard = d->hadamard;
    s.propagate_nonfinite = 1;
    uint8_t codes[512 / 2], scales[512 / 32];
    lofp_quant_report rep;
    const uint8_t *p = (const uint8_t *)x + base * (dt == LOFP_DTYPE_F32 ? 4 : 2);
    if (D > 512 || lofp_quantize(&s, dt, p, 1, D, codes, scales, NULL, &rep) != LOFP_OK) return 0;
    if (!rep.nonfinite_blocks) return 0;
    *first = base + arg;
    return 1;
}

/* Encodes tokens [t0, t0+n) (all stored) of K or V with lofp_quantize and scatters them. */
static lofp_status uq_store_run(const lofp_kv_cache_desc *d, uint8_t *cache, lofp_dtype dt,
                                const void *x, size_t t0, size_t n, const int64_t *slots,
                                int is_v, uint8_t *codes, uint8_t *scales, size_t *zeroed)
{
    lofp_scheme s;
    lofp_status st = lofp_scheme_preset("ultraquant", &s);
    if (st != LOFP_OK) return st;
    s.c = d->c;
    s.rotate = is_v ? 0 : (d->rotate_k != 0);
    s.hadamard = d->hadamard;
    s.propagate_nonfinite = 1;
    s.threads = 0;
    const size_t D = d->head_dim, Hk = d->num_kv_heads, es = dtype_size(dt);
    const size_t slot_bytes = lofp_kv_slot_bytes(d->format, d->head_dim);
    const size_t co = is_v ? D / 2 + D / 32 : 0, so = is_v ? D + D / 32 : D / 2;
    lofp_quant_report rep;
    st = lofp_quantize(&s, dt, (const uint8_t *)x + t0 * Hk * D * es, n * Hk, D, codes, scales,
                       NULL, &rep);
    if (st != LOFP_OK) return st;
    *zeroed += rep.nonfinite_blocks;
    for (size_t t = 0; t < n; t++)
        for (uint32_t h = 0; h < Hk; h++) {
            uint8_t *p = slot_ptr(d, cache, slots[t0 + t], h, slot_bytes);
            size_t r = t * Hk + h;
            memcpy(p + co, codes + r * (D / 2), D / 2);
            memcpy(p + so, scales + r * (D / 32), D / 32);
        }
    return LOFP_OK;
}

/* fp32 / bf16 cache: copy (or round) one head vector, zeroing groups of 32 with NaN/Inf. */
static size_t plain_store_vec(lofp_kv_format kd, lofp_dtype dt, const void *x, size_t base, size_t D,
                              uint8_t *dst)
{
    size_t zeroed = 0;
    for (size_t g = 0; g < D / 32; g++) {
        int bad = 0;
        for (size_t j = 0; j < 32; j++) bad |= !isfinite(lofp_load_f32(dt, x, base + g * 32 + j));
        zeroed += (size_t)bad;
        for (size_t j = 0; j < 32; j++) {
            size_t i = g * 32 + j;
            float v = bad ? 0.0f : lofp_load_f32(dt, x, base + i);
            if (kd == LOFP_KV_F32) {
                memcpy(dst + 4 * i, &v, 4);
            } else {
                uint16_t h = lofp_fp32_to_bf16(v);
                memcpy(dst + 2 * i, &h, 2);
            }
        }
    }
    return zeroed;
}

lofp_status lofp_kv_store(const lofp_kv_cache_desc *d, uint8_t *cache, lofp_dtype dt, const void *k,
                          const void *v, size_t num_tokens, const int64_t *slot_mapping,
                          unsigned flags, lofp_kv_store_report *report)
{
    if (report) memset(report, 0, sizeof *report);
    lofp_status st = lofp_kv_desc_validate(d);
    if (st != LOFP_OK) return st;
    if (dtype_size(dt) == 0 || (flags & ~LOFP_KV_STORE_PROPAGATE_NONFINITE)) return LOFP_ERR_INVALID_ARG;
    if (num_tokens == 0) return LOFP_OK;
    if (!cache || !k || !v || !slot_mapping) return LOFP_ERR_INVALID_ARG;
    const size_t D = d->head_dim, Hk = d->num_kv_heads, vec = D * Hk;
    size_t tmp;
    if (!lofp_mul_size(num_tokens, vec, &tmp)) return LOFP_ERR_SIZE_OVERFLOW;
    const size_t capacity = d->num_blocks * d->block_size;
    size_t stored = 0, skipped = 0;
    for (size_t t = 0; t < num_tokens; t++) {
        if (slot_mapping[t] < 0) { skipped++; continue; }
        if ((uint64_t)slot_mapping[t] >= (uint64_t)capacity) return LOFP_ERR_INVALID_ARG;
        stored++;
    }
    /* Non-finite input of stored tokens: K first, then V, in flat order. */
    size_t first = 0;
    int bad = 0, bad_v = 0;
    for (size_t t = 0; t < num_tokens && !bad; t++)
        if (slot_mapping[t] >= 0) bad = find_bad(dt, k, t * vec, vec, &first);
    for (size_t t = 0; t < num_tokens && !bad; t++)
        if (slot_mapping[t] >= 0) bad = bad_v = find_bad(dt, v, t * vec, vec, &first);
    /* finite K whose rotation overflows is as bad as a NaN (it would become zero groups) */
    if (!bad && d->format == LOFP_KV_ULTRAQUANT && d->rotate_k)
        for (size_t t = 0; t < num_tokens && !bad; t++)
            for (size_t h = 0; h < Hk && !bad && slot_mapping[t] >= 0; h++)
                bad = uq_k_overflows(d, dt, k, t * vec + h * D, &first);
    if (report) {
        report->tokens_stored = stored;
        report->tokens_skipped = skipped;
        report->has_nonfinite = bad;
        report->first_bad_index = first;
        report->first_bad_in_v = bad_v;
    }
    if (bad && !(flags & LOFP_KV_STORE_PROPAGATE_NONFINITE)) return LOFP_ERR_NONFINITE;

    size_t zeroed = 0;
    if (d->format == LOFP_KV_ULTRAQUANT) {
        uint8_t *codes = malloc(UQ_CHUNK_TOKENS * Hk * (D / 2 + D / 32));
        if (!codes) return LOFP_ERR_NOMEM;
        uint8_t *scales = codes + UQ_CHUNK_TOKENS * Hk * (D / 2);
        size_t t = 0;
        while (t < num_tokens && st == LOFP_OK) {
            if (slot_mapping[t] < 0) { t++; continue; }
            size_t n = 1; /* a run of stored tokens, at most one chunk */
            while (t + n < num_tokens && n < UQ_CHUNK_TOKENS && slot_mapping[t + n] >= 0) n++;
            st = uq_store_run(d, cache, dt, k, t, n, slot_mapping, 0, codes, scales, &zeroed);
            if (st == LOFP_OK)
                st = uq_store_run(d, cache, dt, v, t, n, slot_mapping, 1, codes, scales, &zeroed);
            t += n;
        }
        free(codes);
        if (st != LOFP_OK) return st;
    } else {
        const size_t slot_bytes = lofp_kv_slot_bytes(d->format, d->head_dim);
        const size_t voff = slot_bytes / 2;
        for (size_t t = 0; t < num_tokens; t++) {
            if (slot_mapping[t] < 0) continue;
            for (uint32_t h = 0; h < Hk; h++) {
                uint8_t *p = slot_ptr(d, cache, slot_mapping[t], h, slot_bytes);
                zeroed += plain_store_vec(d->format, dt, k, t * vec + h * D, D, p);
                zeroed += plain_store_vec(d->format, dt, v, t * vec + h * D, D, p + voff);
            }
        }
    }
    if (report) report->zeroed_groups = zeroed;
    return LOFP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Gather                                                                                      */
/* ------------------------------------------------------------------------------------------ */

lofp_status lofp_kv_gather(const lofp_kv_cache_desc *d, const uint8_t *cache,
                           const int32_t *block_table, size_t num_tokens, float *k_out, float *v_out)
{
    lofp_status st = lofp_kv_desc_validate(d);
    if (st != LOFP_OK) return st;
    if (num_tokens == 0) return LOFP_OK;
    if (!cache || !block_table) return LOFP_ERR_INVALID_ARG;
    size_t nb = lofp_ceil_div(num_tokens, d->block_size);
    for (size_t j = 0; j < nb; j++)
        if (block_table[j] < 0 || (size_t)block_table[j] >= d->num_blocks) return LOFP_ERR_INVALID_ARG;
    lofp_attn_geom G;
    lofp_attn_geom_init(&G, d, d->num_kv_heads);
    G.cache = cache;
    const size_t D = d->head_dim, Hk = d->num_kv_heads;
    for (size_t n = 0; n < num_tokens; n++) {
        const uint8_t *tok = lofp_attn_token(&G, block_table, n);
        for (size_t h = 0; h < Hk; h++) {
            const uint8_t *s = tok + h * G.slot;
            if (k_out) lofp_kv_dequant_region(G.format, G.D, s + G.k_off, s + G.ks_off, k_out + (n * Hk + h) * D);
            if (v_out) lofp_kv_dequant_region(G.format, G.D, s + G.v_off, s + G.vs_off, v_out + (n * Hk + h) * D);
        }
    }
    return LOFP_OK;
}

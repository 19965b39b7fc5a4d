/* attention_internal.h -- what src/kv/kvcache.c, src/kv/attention.c and src/kv/x86/attention_avx2.c share:
 * the resolved cache geometry, one split-K work unit ("task") and the kernels that run one. */
#ifndef LOFP_ATTENTION_INTERNAL_H
#define LOFP_ATTENTION_INTERNAL_H

#include "core/core.h"
#include "lofp/kvcache.h"

#define LOFP_ATTN_TASK_HEADS 8u /* at most this many KV heads per task (tile buffers per head) */
#define LOFP_KV_MIN_D 32u
#define LOFP_KV_MAX_D 512u

/* The cache as the kernels see it. */
typedef struct lofp_attn_geom {
    lofp_kv_format format;
    uint32_t D, Hk, Hq, g;        /* g = Hq / Hk query heads per KV head */
    uint32_t bs;                  /* block size */
    uint32_t tile;                /* tokens per tile: min(64, 4096 / D), a multiple of 8 */
    size_t slot;                  /* bytes per (token, KV head) */
    size_t token_bytes;           /* Hk * slot: one token row of a block */
    size_t block_bytes;           /* bs * token_bytes */
    size_t k_off, ks_off, v_off, vs_off; /* region offsets inside a slot */
    const uint8_t *cache;
    float scale;
} lofp_attn_geom;

/* One unit of split-K work: KV heads [h0, h1) of one sequence, key positions [start, end), for
 * qn consecutive query tokens of that sequence. Query token i (0 <= i < qn) sees the keys
 * [0, limit[i]). For every query token i and query head h of the KV heads, the task writes the
 * record part + (i * Hq + h) * part_stride = [acc 0..D) [m] [l]: the running max m of the scaled
 * scores over the task's visible keys (-Inf if none), l = sum exp(s - m), acc = sum exp(s - m) v,
 * all in the natural element order. */
typedef struct lofp_attn_task {
    const int32_t *block_table;   /* of this sequence */
    uint32_t h0, h1;
    size_t start, end;
    uint32_t qn;
    const size_t *limit;          /* [qn] */
    const float *q;               /* prepared q: token i, q head h at q + i*q_tok_stride + h*D */
    size_t q_tok_stride;
    float *part;
    size_t part_stride;           /* floats */
    /* The next work item's first key positions [next_start, next_end) and KV heads
     * [next_h0, next_h1) of the sequence with block table next_bt (NULL: none), for a kernel that
     * prefetches them during its last tile: whichever thread takes that item finds them nearer
     * (its own cache, or the shared last level). */
    const int32_t *next_bt;
    size_t next_start, next_end;
    uint32_t next_h0, next_h1;
} lofp_attn_task;

/* Bytes of per-thread scratch a task kernel needs for tasks of at most max_rows = qn * g rows. */
LOFP_INTERNAL size_t lofp_attn_task_scratch_bytes(const lofp_attn_geom *G, size_t max_rows);

/* Run one task (scratch: lofp_attn_task_scratch_bytes() bytes, any alignment). */
LOFP_INTERNAL void lofp_attn_task_scalar(const lofp_attn_geom *G, const lofp_attn_task *t,
                                         void *scratch);
/* The AVX2+FMA kernel; only call it when lofp_cpu_features() has AVX2 and FMA. Returns 0 when this
 * build has no AVX2 kernel (non-x86). */
LOFP_INTERNAL int lofp_attn_avx2_built(void);
LOFP_INTERNAL void lofp_attn_task_avx2(const lofp_attn_geom *G, const lofp_attn_task *t,
                                       void *scratch);
/* The same driver with 512-bit helpers; only call it when lofp_cpu_features() has AVX2, FMA,
 * AVX512F, AVX512BW and AVX512VL. Head dims below 64 run the AVX2 helpers. */
LOFP_INTERNAL void lofp_attn_task_avx512(const lofp_attn_geom *G, const lofp_attn_task *t,
                                         void *scratch);

/* Address of token position `pos` (all its KV heads) of a sequence with block table bt. */
static inline const uint8_t *lofp_attn_token(const lofp_attn_geom *G, const int32_t *bt, size_t pos)
{
    return G->cache + (size_t)bt[pos / G->bs] * G->block_bytes + (pos % G->bs) * G->token_bytes;
}

/* E2M1 code -> value (the OCP table vLLM's FP4_BITS_TO_VALUE holds). */
static const float lofp_e2m1_values[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

/* UltraQuant scale byte -> multiplier: 0 -> 0 (zero group), else 2^(b-127) (255 reads as +Inf:
 * never written by the store). */
static inline float lofp_uq_scale(uint8_t b)
{
    return b ? lofp_bits_f32((uint32_t)b << 23) : 0.0f;
}

/* Dequantizes one K or V region of a slot to D floats: UltraQuant code * scale (exact), fp32
 * copy, or bf16 widening. `data` points at the region's codes/values, `scales` at its scales
 * (UltraQuant only). */
static inline void lofp_kv_dequant_region(lofp_kv_format dt, uint32_t D, const uint8_t *data,
                                          const uint8_t *scales, float *out)
{
    if (dt == LOFP_KV_ULTRAQUANT) {
        for (uint32_t g = 0; g < D / 32; g++) {
            float sc = lofp_uq_scale(scales[g]);
            const uint8_t *c = data + 16 * g;
            float *o = out + 32 * g;
            for (int j = 0; j < 16; j++) {
                o[2 * j] = lofp_e2m1_values[c[j] & 15] * sc;
                o[2 * j + 1] = lofp_e2m1_values[c[j] >> 4] * sc;
            }
        }
    } else if (dt == LOFP_KV_F32) {
        memcpy(out, data, (size_t)D * sizeof(float));
    } else {
        for (uint32_t i = 0; i < D; i++) {
            uint16_t h;
            memcpy(&h, data + 2 * i, 2);
            out[i] = lofp_bits_f32((uint32_t)h << 16);
        }
    }
}

/* fp32 -> E4M3 (round to nearest even, saturating to +-448) -> fp32, x finite: equal to
 * lofp_decode(E4M3, lofp_encode(E4M3, x, LOFP_RNE, LOFP_SATURATE, 0)). */
LOFP_INTERNAL float lofp_e4m3_saturate(float x);

/* Fills hs[D][D] with the dense Sylvester Hadamard, entries +-fl(1/sqrt D). */
LOFP_INTERNAL void lofp_attn_hadamard_table(uint32_t D, float *hs);

/* UltraQuant query preparation of nr rows x[nr][D] into dst: rotated (when hs, the table above,
 * is given) by x @ H^T summed over j sequentially in fp32 without FMA (lofp_hadamard_dense() bit
 * for bit), then lofp_e4m3_saturate(). Returns how many rotated values had |x| > 464 (where
 * torch's cast gives NaN). */
LOFP_INTERNAL size_t lofp_attn_prep_q(const float *x, size_t nr, uint32_t D, const float *hs, float *dst);

/* lofp_attn_prep_q at 512 bits, bit for bit the same (hs required); only call it when
 * lofp_cpu_features() has AVX2, FMA, AVX512F, AVX512BW and AVX512VL. lofp_attn_prep_q calls it
 * itself when the CPU has them. */
LOFP_INTERNAL size_t lofp_attn_prep_q_avx512(const float *x, size_t nr, uint32_t D, const float *hs,
                                             float *dst);

/* Resolves the geometry of a validated description (cache and scale are left to the caller). */
LOFP_INTERNAL void lofp_attn_geom_init(lofp_attn_geom *G, const lofp_kv_cache_desc *d,
                                       uint32_t num_q_heads);

#endif

/*
 * kvcache.h -- the UltraQuant FP4 paged KV cache (vLLM's `ultraquant` module, SPEC §2 and §5) and
 * the decode / prefill attention that reads it; fp32 and bf16 caches with the same paging and the
 * same attention driver serve as baselines.
 *
 * The conventions of lofp.h hold here: caller-owned buffers sized by helpers, lofp_status results,
 * re-entrant functions, inputs never modified. The cache is a plain caller-owned byte array; no
 * function keeps a pointer to it past its return. Attention needs scratch (partial results of the
 * split-K partitions, per-thread tile buffers): the caller may pass a workspace sized by
 * lofp_attention_workspace_bytes(), otherwise the call allocates and frees it itself.
 *
 * Layout (docs/KV.md has the diagram). One slot per (token, KV head):
 *     UltraQuant  [K codes D/2][K scales D/32][V codes D/2][V scales D/32]   (136 B at D = 128)
 *     fp32        [K D x f32][V D x f32]                                     (1024 B at D = 128)
 *     bf16        [K D x bf16][V D x bf16]                                   (512 B at D = 128)
 * no padding; the cache is uint8 [num_blocks, block_size, Hk, slot]. Token position p of a
 * sequence lives in block block_table[p / block_size], row p % block_size. UltraQuant codes are
 * E2M1 nibbles (element 2i in the low nibble), scales E8M0 bytes with 0 meaning a zero group; K is
 * Hadamard-rotated before encoding, V is not (docs/FORMATS.md "UltraQuant").
 *
 * Attention semantics, per query row and query head h (KV head h / (Hq/Hk)):
 *     UltraQuant: q_rot = q @ H^T (dense fp32 Sylvester matrix, sequential sum), q8 = E4M3(q_rot)
 *                 (RNE, saturating at 448 where torch gives NaN past 464), s_n = (q8 . k_n) * scale
 *                 with k_n the dequantized rotated K;
 *     fp32, bf16: s_n = (q . k_n) * scale with the stored K (no rotation, no E4M3);
 *     p = softmax([s_0 .. s_{N-1}, sink_h])[0..N) (the sink only enlarges the denominator),
 *     out = sum_n p_n v_n, in fp32.
 */
#ifndef LOFP_KVCACHE_H
#define LOFP_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Cache description                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* What a slot holds (pinned, append-only): a KV cache storage format, not a tensor element type
 * (lofp_dtype), since ULTRAQUANT is a whole slot layout (codes + scales + rotation). */
typedef enum lofp_kv_format {
    LOFP_KV_ULTRAQUANT = 1, /* E2M1 codes + E8M0 scale per 32, K rotated: 4.25 bits per value */
    LOFP_KV_F32 = 2,        /* K and V as fp32 (baseline) */
    LOFP_KV_BF16 = 3        /* K and V as bf16, rounded to nearest even (baseline) */
} lofp_kv_format;

/* The name of a format: "ultraquant", "fp32" or "bf16"; NULL for a value outside the enum. The
 * string is static (never freed by the caller). Pure, thread-safe. */
LOFP_API const char *lofp_kv_format_name(lofp_kv_format format);

/* Parses a format name: the names lofp_kv_format_name() returns, plus "float32" and "bfloat16".
 * Returns LOFP_OK and sets *out; LOFP_ERR_NOT_FOUND for another name (*out unchanged);
 * LOFP_ERR_INVALID_ARG for a NULL argument. Pure, thread-safe. */
LOFP_API lofp_status lofp_kv_format_from_name(const char *name, lofp_kv_format *out);

/* A paged cache: fill with lofp_kv_desc_init() and adjust the optional fields. Functions only
 * read it. head_dim must be a power of two in [32, 512] (so a multiple of 32). */
typedef struct lofp_kv_cache_desc {
    lofp_kv_format format;        /* what a slot holds */
    uint32_t head_dim;            /* D */
    uint32_t num_kv_heads;        /* Hk */
    uint32_t block_size;          /* tokens per block (vLLM's UltraQuant backend uses 64) */
    size_t num_blocks;
    /* UltraQuant only: */
    float c;                      /* scale constant, default 0.156f (vLLM's DEFAULT_CONSTANT_C) */
    lofp_hadamard_kind hadamard;  /* K rotation at store: BUTTERFLY (default, the bytes vLLM's
                                     store kernel writes) or DENSE (the reference's matmul) */
    int rotate_k;                 /* default 1. 0 stores K unrotated and attention then does not
                                     rotate Q either (the E4M3 cast of Q stays): for tests */
} lofp_kv_cache_desc;

/* Fills *d with the given geometry and the defaults above, then validates it. Returns LOFP_OK;
 * LOFP_ERR_SHAPE when head_dim is not a power of two in [32, 512]; LOFP_ERR_INVALID_ARG for a
 * NULL d, an unknown format or a zero count. Pure function. */
LOFP_API lofp_status lofp_kv_desc_init(lofp_kv_cache_desc *d, lofp_kv_format format,
                                       uint32_t head_dim, uint32_t num_kv_heads,
                                       uint32_t block_size, size_t num_blocks);

/* Checks a description: the rules of lofp_kv_desc_init() plus c > 0 and finite, a known hadamard
 * kind, and that the cache size does not overflow size_t (LOFP_ERR_SIZE_OVERFLOW). Pure. */
LOFP_API lofp_status lofp_kv_desc_validate(const lofp_kv_cache_desc *d);

/* Byte offsets of the four regions of a slot and the slot size. For fp32 / bf16 caches
 * k_scales_offset and v_scales_offset equal the end of their data regions (no scales). */
typedef struct lofp_kv_slot_layout {
    size_t k_codes_offset;        /* K data: codes (UltraQuant) or values */
    size_t k_scales_offset;
    size_t v_codes_offset;        /* V data */
    size_t v_scales_offset;
    size_t slot_bytes;            /* 136 at D=128 UltraQuant, 272 at D=256 */
} lofp_kv_slot_layout;

/* Fills *out for format and head_dim. Returns LOFP_OK, LOFP_ERR_SHAPE (head_dim) or
 * LOFP_ERR_INVALID_ARG (format, NULL). Pure. */
LOFP_API lofp_status lofp_kv_slot_layout_get(lofp_kv_format format, uint32_t head_dim,
                                             lofp_kv_slot_layout *out);

/* Bytes of one slot (token, KV head): D + 2*D/32 for UltraQuant, 8*D fp32, 4*D bf16. Returns 0
 * for an invalid format or head_dim. Pure. */
LOFP_API size_t lofp_kv_slot_bytes(lofp_kv_format format, uint32_t head_dim);

/* Bytes of the whole cache, num_blocks * block_size * num_kv_heads * slot. Returns 0 for an
 * invalid description or on overflow. Pure. */
LOFP_API size_t lofp_kv_cache_bytes(const lofp_kv_cache_desc *d);

/* ------------------------------------------------------------------------------------------ */
/* Store and gather                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* lofp_kv_store() flags. */
#define LOFP_KV_STORE_PROPAGATE_NONFINITE 1u /* zero the affected groups instead of failing */

/* What a store did. */
typedef struct lofp_kv_store_report {
    size_t tokens_stored;         /* tokens whose slot mapping was >= 0 */
    size_t tokens_skipped;        /* slot mapping < 0 */
    size_t zeroed_groups;         /* groups of 32 values (K and V together) written as zero
                                     groups because of NaN/Inf input (propagation mode). For
                                     UltraQuant K the rotation spreads one NaN over the whole
                                     head vector, so that is D/32 groups. */
    size_t first_bad_index;       /* first non-finite value of a stored token, as a flat index
                                     into k (or v when first_bad_in_v) [num_tokens, Hk, D] */
    int first_bad_in_v;
    int has_nonfinite;            /* 1 when some stored token held NaN/Inf */
} lofp_kv_store_report;

/* Writes K and V of num_tokens tokens into the cache. k and v are row-major
 * [num_tokens, Hk, D] of dtype dt (F32, BF16 or F16). Token t goes to slot slot_mapping[t]
 * (block = slot / block_size, row = slot % block_size); an entry < 0 skips the token (its values
 * are not even read for validity). UltraQuant: K is rotated (desc.hadamard) and encoded, V is
 * encoded, both exactly as lofp_quantize() with the "ultraquant" preset (bit for bit); fp32
 * copies; bf16 rounds to nearest even. Duplicate slots: the later token wins.
 * Non-finite K or V in a stored token (or finite UltraQuant K whose rotation overflows fp32, reported
 * at the head vector's largest magnitude): LOFP_ERR_NONFINITE and nothing is written, unless flags
 * has LOFP_KV_STORE_PROPAGATE_NONFINITE: then every group of 32 that holds a non-finite value
 * (after rotation for UltraQuant K) is written as a zero group (UltraQuant: scale byte 0, codes
 * 0; fp32/bf16: zeros) and counted in report->zeroed_groups.
 * Errors (nothing written): LOFP_ERR_INVALID_ARG (NULL pointers with num_tokens > 0, unknown
 * dt, flags, a slot >= num_blocks * block_size), the errors of lofp_kv_desc_validate(),
 * LOFP_ERR_NONFINITE, LOFP_ERR_NOMEM (encode scratch). `report` may be NULL.
 * Thread-safety: re-entrant; concurrent stores into one cache must use disjoint slots. */
LOFP_API lofp_status lofp_kv_store(const lofp_kv_cache_desc *d, uint8_t *cache, lofp_dtype dt,
                                   const void *k, const void *v, size_t num_tokens,
                                   const int64_t *slot_mapping, unsigned flags,
                                   lofp_kv_store_report *report);

/* Reads back positions [0, num_tokens) of one sequence as fp32 [num_tokens, Hk, D]: K in the
 * rotated basis for UltraQuant (no inverse rotation, as vLLM's ultraquant_dequant), V as stored.
 * UltraQuant dequant is code * 2^(byte-127), byte 0 giving 0. k_out or v_out may be NULL (not
 * wanted). block_table holds ceil(num_tokens / block_size) block indices. Returns LOFP_OK,
 * LOFP_ERR_INVALID_ARG (NULL cache/table, a block index outside [0, num_blocks)) or the errors of
 * lofp_kv_desc_validate(). Re-entrant; reads the cache only. */
LOFP_API lofp_status lofp_kv_gather(const lofp_kv_cache_desc *d, const uint8_t *cache,
                                    const int32_t *block_table, size_t num_tokens, float *k_out,
                                    float *v_out);

/* ------------------------------------------------------------------------------------------ */
/* Attention                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Which implementation runs (pinned, append-only). */
typedef enum lofp_attn_path {
    LOFP_ATTN_AUTO = 0,      /* the fastest the CPU has (LOFP_DISABLE_CPU_FEATURES can hide
                                features): AVX512 (D >= 64), else AVX2, else SCALAR */
    LOFP_ATTN_REFERENCE = 1, /* the oracle: vLLM's reference_ultraquant_attention step by step in
                                fp32 (full softmax, sequential sums), no split-K */
    LOFP_ATTN_SCALAR = 2,    /* tiled, split-K, online softmax; portable C */
    LOFP_ATTN_AVX2 = 3,      /* the same with AVX2+FMA kernels: nibble decode by pshufb */
    LOFP_ATTN_AVX512 = 4     /* the same with 512-bit kernels (AVX512F+BW+VL); head dims >= 64 */
} lofp_attn_path;

/* Returns a static name ("auto", "reference", "scalar", "avx2", "avx512"), or NULL for an
 * unknown path. */
LOFP_API const char *lofp_attn_path_name(lofp_attn_path p);

/* Attention parameters. Fill with lofp_attn_params_init() and adjust. */
typedef struct lofp_attn_params {
    uint32_t num_q_heads;        /* Hq, a multiple of Hk; query head h reads KV head h/(Hq/Hk) */
    float scale;                 /* multiplies q . k (typically 1/sqrt(D)); finite */
    const float *sinks;          /* [Hq] raw logits (not scaled) added to the softmax denominator
                                    only, or NULL. -Inf means "no sink"; NaN/+Inf are refused. */
    size_t block_table_stride;   /* int32 entries from one sequence's block table to the next */
    lofp_attn_path path;
    unsigned threads;            /* 0 or 1: the caller's thread only; else that many threads of
                                    the library's pool (at most 64), the caller's included.
                                    Results never depend on it. */
    uint32_t split_tokens;       /* split-K partition length in tokens; 0 = automatic (1024).
                                    Rounded up to a multiple of the tile (4096/D tokens, <= 64).
                                    Results depend on it (fp32 summation order), not on threads. */
    void *workspace;             /* optional scratch of workspace_bytes (any alignment); NULL =
                                    allocate internally. Pass one for repeated decode steps: a
                                    fresh multi-MiB allocation page-faults on every call. A
                                    workspace must not be shared by concurrent calls. */
    size_t workspace_bytes;
} lofp_attn_params;

/* Fills *p: num_q_heads, scale, block_table_stride as given; no sinks; AUTO path; 1 thread;
 * automatic split; no workspace. Returns LOFP_ERR_INVALID_ARG for a NULL p. */
LOFP_API lofp_status lofp_attn_params_init(lofp_attn_params *p, uint32_t num_q_heads, float scale,
                                           size_t block_table_stride);

/* What an attention call did. */
typedef struct lofp_attn_report {
    lofp_attn_path path;         /* the path that ran (AUTO resolved) */
    size_t partitions;           /* (query row, split) partitions computed, summed over sequences */
    size_t work_items;           /* units handed to threads */
    size_t saturated_q;          /* UltraQuant: rotated Q elements with |x| > 464, which E4M3
                                    saturates to +-448 where the reference (torch) gives NaN */
    size_t first_bad_index;      /* LOFP_ERR_NONFINITE: flat index of the first NaN/Inf in q */
} lofp_attn_report;

/* Bytes of workspace a call needs: num_seqs sequences, num_query_tokens query rows in all
 * (num_seqs for decode), the longest sequence max_seq_len, and p's heads, threads, split and
 * path. Returns 0 for invalid arguments or on overflow. Pure. */
LOFP_API size_t lofp_attention_workspace_bytes(const lofp_kv_cache_desc *d,
                                               const lofp_attn_params *p, size_t num_seqs,
                                               size_t num_query_tokens, size_t max_seq_len);

/* Decode attention: one query token per sequence.
 *   q            [num_seqs, Hq, D] of dtype q_dt (F32, BF16, F16), the raw (unrotated) query
 *   block_tables int32 [num_seqs, p->block_table_stride]; entry j of row b is the cache block of
 *                positions [j*block_size, (j+1)*block_size) of sequence b
 *   seq_lens     int32 [num_seqs], N_b >= 1: sequence b attends to its positions [0, N_b)
 *   out          fp32 [num_seqs, Hq, D]
 * Returns LOFP_OK or, with nothing meaningful in out:
 *   LOFP_ERR_SHAPE        Hq not a multiple of Hk (or 0); N_b > block_table_stride * block_size;
 *                         and the head_dim rule of lofp_kv_desc_validate()
 *   LOFP_ERR_INVALID_ARG  NULL pointers, num_seqs = 0, some N_b <= 0 (N = 0), a block index
 *                         outside [0, num_blocks), non-finite scale, NaN or +Inf sink, unknown
 *                         q_dt or path
 *   LOFP_ERR_NONFINITE    NaN/Inf in q (report->first_bad_index says where)
 *   LOFP_ERR_UNSUPPORTED  path AVX2 on a CPU without AVX2+FMA; AVX512 without AVX512F/BW/VL
 *                         (and AVX2+FMA) or with D < 64
 *   LOFP_ERR_BUFFER_TOO_SMALL  a workspace smaller than lofp_attention_workspace_bytes()
 *   LOFP_ERR_NOMEM, LOFP_ERR_SIZE_OVERFLOW
 * Faster paths agree with LOFP_ATTN_REFERENCE to 1e-4 of max|out| (SPEC §5; tested). `report`
 * may be NULL. Thread-safety: re-entrant; reads the cache, which nobody may write meanwhile. */
LOFP_API lofp_status lofp_attention_decode(const lofp_kv_cache_desc *d, const lofp_attn_params *p,
                                           const uint8_t *cache, size_t num_seqs,
                                           lofp_dtype q_dt, const void *q,
                                           const int32_t *block_tables, const int32_t *seq_lens,
                                           float *out, lofp_attn_report *report);

/* Prefill / continuation attention: several query tokens per sequence, causal. Sequence b owns
 * query rows [query_start_loc[b], query_start_loc[b+1]) of q [T, Hq, D] (T =
 * query_start_loc[num_seqs], query_start_loc[0] = 0, non-decreasing); its q_len_b =
 * difference rows are its LAST q_len_b positions, whose K and V must already be in the cache, so
 * row i (0-based) attends to positions [0, N_b - q_len_b + i + 1): the decode semantics applied
 * per query row, as vLLM's unified kernel does for continuation chunks. A sequence with q_len 0
 * contributes nothing. out is fp32 [T, Hq, D]. Errors as lofp_attention_decode(), plus
 * LOFP_ERR_SHAPE when some q_len_b > N_b and LOFP_ERR_INVALID_ARG for a malformed
 * query_start_loc. Re-entrant. */
LOFP_API lofp_status lofp_attention_prefill(const lofp_kv_cache_desc *d,
                                            const lofp_attn_params *p, const uint8_t *cache,
                                            size_t num_seqs, const int32_t *query_start_loc,
                                            lofp_dtype q_dt, const void *q,
                                            const int32_t *block_tables, const int32_t *seq_lens,
                                            float *out, lofp_attn_report *report);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_KVCACHE_H */

/*
 * cast.h -- exact format-to-format casts of already-quantized tensors, and the check of a
 * quantized tensor against its original (what `lofp verify-checkpoint` reports). docs/CHECKPOINTS.md
 * ("Exact casts", "verify-checkpoint") describes the rules; lofp.h's conventions hold (caller-owned
 * buffers, statuses, re-entrancy).
 *
 * Tensors are row-major [rows, k] with codes in lofp's layout: FP4 two per byte, element 2i in the
 * low nibble; scales linear [rows, k / block]. Checkpoint formats store exactly that (ModelOpt,
 * compressed-tensors, gpt-oss's blocks [.., k/32, 16] are the same bytes), except GGUF's blocks.
 */
#ifndef LOFP_CAST_H
#define LOFP_CAST_H

#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a cast carried over exactly and what it could not. */
typedef struct lofp_cast_report {
    size_t blocks;           /* source blocks (scales) seen */
    size_t unfit_blocks;     /* blocks that could not be carried over without changing values */
    size_t first_unfit[8];   /* flat indices (row * blocks_per_row + b) of the first of them */
    size_t n_first;          /* how many of first_unfit are set */
    size_t mismatched_scales;/* lofp_cast_nvfp4_global: block scales whose decoded values differ */
} lofp_cast_report;

/* MXFP4 -> NVFP4 without requantization. A 32-block with E8M0 scale 2^x becomes two 16-blocks
 * with the same codes and UE4M3 scale 2^(x + g), with one per-tensor encode multiplier
 * G = 2^g (lofp's direction; lofp_nvfp4_decode_from_encode gives ModelOpt's) chosen so that the
 * largest block exponent maps to UE4M3's largest power of two, 2^8. Every block whose exponent
 * lies within 17 binades of the largest (UE4M3 holds the powers of two 2^-9 .. 2^8), and every
 * block whose codes are all zero, is carried over exactly: lofp_dequantize of the result equals
 * lofp_dequantize of the input bit for bit. Other blocks (exponent too small, or scale 0xFF) are
 * requantized from their decoded values by lofp's nvfp4 rules under G (a NaN block becomes zeros)
 * and reported. `nv_codes` holds rows * k / 2 bytes (it may be `codes` itself: the codes are
 * copied unchanged), `ue4m3` rows * k / 16. Returns LOFP_OK (check rep->unfit_blocks),
 * LOFP_ERR_INVALID_ARG or LOFP_ERR_SHAPE (k not a multiple of 32). */
LOFP_API lofp_status lofp_cast_mxfp4_to_nvfp4(const uint8_t *codes, const uint8_t *e8m0,
                                              size_t rows, size_t k, uint8_t *nv_codes,
                                              uint8_t *ue4m3, float *global_scale,
                                              lofp_cast_report *rep);

/* The largest exponent x (scale 2^x) of the blocks of an MXFP4 tensor that hold a non-zero code
 * and a finite scale, INT_MIN when there is none: what lofp_cast_mxfp4_to_nvfp4 derives its
 * per-tensor scale from. Fused tensors that must share one NVFP4 per-tensor scale take the largest
 * x over all of them and cast each with lofp_cast_mxfp4_to_nvfp4_with_global(2^(8 - x)); a tensor
 * too large for memory may be scanned in row chunks (the maximum of the chunks' results). Returns
 * LOFP_OK, LOFP_ERR_INVALID_ARG or LOFP_ERR_SHAPE (k not a multiple of 32). */
LOFP_API lofp_status lofp_cast_mxfp4_max_exponent(const uint8_t *codes, const uint8_t *e8m0, size_t rows,
                                                  size_t k, int *xmax);

/* lofp_cast_mxfp4_to_nvfp4 under a given per-tensor encode multiplier `global_scale` (a power of
 * two 2^g, 2^-126 <= G <= 2^127): a block with scale 2^x fits when all its codes are zero or
 * -9 <= x + g <= 8, and is then carried over exactly; the others are requantized from their
 * decoded values under G and reported, as there. Lets a caller share one G across fused tensors
 * and convert a tensor in chunks of rows (report indices are relative to the chunk). Returns
 * LOFP_OK, LOFP_ERR_INVALID_ARG (G not such a power of two) or LOFP_ERR_SHAPE. */
LOFP_API lofp_status lofp_cast_mxfp4_to_nvfp4_with_global(const uint8_t *codes, const uint8_t *e8m0,
                                                          size_t rows, size_t k, float global_scale,
                                                          uint8_t *nv_codes, uint8_t *ue4m3,
                                                          lofp_cast_report *rep);

/* NVFP4 per-tensor scale from one producer's convention to another's (ModelOpt's decode
 * weight_scale_2 <-> compressed-tensors' encode weight_global_scale, and lofp's / torchao's), for
 * a tensor whose block scales are `scales[0..n)`: the codes and block scales are carried over
 * unchanged, and the result `*out` is the scale, nearest to the reciprocal fl(1/in) (or to `in`
 * when both use one direction), for which every block scale present dequantizes to the same fp32
 * values under `to`'s formula as under `from`'s (ModelOpt and torchao code * (s * P),
 * compressed-tensors code * (s / G), lofp (code * s) / G). The formulas round differently, so
 * such a value need not exist: then *out is the plain conversion and rep->mismatched_scales counts
 * the block-scale values whose decoded values differ, each by one rounding (0 means lossless;
 * a lossless cast and its way back give identical decoded values). Returns LOFP_OK or
 * LOFP_ERR_INVALID_ARG (in not positive and finite). */
LOFP_API lofp_status lofp_cast_nvfp4_global(lofp_profile from, float in, lofp_profile to,
                                            const uint8_t *scales, size_t n, float *out,
                                            lofp_cast_report *rep);

/* MXFP4 codes + E8M0 scales (gpt-oss `*_blocks` / `*_scales`, compressed-tensors, lofp) <-> GGUF
 * block_mxfp4 rows: per 32 values one byte e then 16 bytes with element j in the low nibble and
 * j + 16 in the high one. `gguf` holds rows * k / 32 * 17 bytes. The two functions are inverse
 * byte for byte. Return LOFP_ERR_INVALID_ARG or LOFP_ERR_SHAPE (k not a multiple of 32). */
LOFP_API lofp_status lofp_mxfp4_to_gguf(const uint8_t *codes, const uint8_t *e8m0, size_t rows,
                                        size_t k, uint8_t *gguf);
LOFP_API lofp_status lofp_gguf_to_mxfp4(const uint8_t *gguf, size_t rows, size_t k,
                                        uint8_t *codes, uint8_t *e8m0);

/* ------------------------------------------------------------------------------------------ */
/* Checking a quantized tensor against its original                                            */
/* ------------------------------------------------------------------------------------------ */

/* How a stored quantized tensor relates to what a producer computes from the original. */
typedef enum lofp_verify_nibbles {
    LOFP_VERIFY_NIBBLES_STANDARD = 0, /* element 2i low (every safetensors checkpoint format) */
    LOFP_VERIFY_NIBBLES_SWAPPED = 1,  /* element 2i high: the two nibbles of each byte swapped */
    LOFP_VERIFY_NIBBLES_GGUF = 2      /* GGUF's split order inside each block */
} lofp_verify_nibbles;

typedef struct lofp_verify_result {
    int matched;               /* 1 when some hypothesis reproduces codes, scales and global */
    lofp_profile profile;      /* the best hypothesis: producer, */
    lofp_scale_rule rule;      /* its MX scale rule (torchao), */
    lofp_verify_nibbles nibbles;
    lofp_layout scale_layout;  /* LINEAR or SWIZZLE_128X4 (scales stored swizzled) */
    int global_inverted;       /* the per-tensor scale is stored in the other direction */
    long row_shift;            /* stored row r holds the original's row r + row_shift */
    size_t code_diff, scale_diff; /* bytes that differ under the best hypothesis */
    int global_diff;           /* 1 when the per-tensor scale differs under it */
    int global_as_stored;      /* reproduced with the stored per-tensor scale rather than the one
                                  this tensor's amax gives (a fused group shares one) */
    char producers[160];       /* every producer (MX: with its rule) whose bytes equal the file
                                  as stored, computed from this tensor's own amax ("" when only the
                                  stored per-tensor scale reproduces it) */
    char summary[512];         /* one line naming the producer or the mistake, and the evidence */
} lofp_verify_result;

/* Re-quantizes the original x ([rows, k], dtype dt) under every profile that supports scheme
 * `id` (and, for torchao's MX schemes, every scale rule; NVFP4 two-level when `global` is given,
 * one-level otherwise) and compares the stored `codes` / `scales` (linear size, as
 * lofp_codes_bytes / lofp_scales_bytes give for block `block`) and `*global` (NULL when the
 * format has none; `global_decode` says whether the format stores the decode scale, as ModelOpt,
 * torchao and GGUF do, or the encode multiplier, as compressed-tensors and lofp do) under the
 * hypotheses above: the nibble order, the scale layout, the direction
 * of the per-tensor scale and a shift of whole rows. Fills *res with the best hypothesis (the
 * fewest differing bytes) and returns LOFP_OK when it reproduces everything bit for bit,
 * LOFP_ERR_MISMATCH when none does (res says where and how the best one differs),
 * LOFP_ERR_NONFINITE / LOFP_ERR_INVALID_ARG / LOFP_ERR_NOMEM. */
LOFP_API lofp_status lofp_verify_tensor(lofp_scheme_id id, uint32_t block, lofp_dtype dt,
                                        const void *x, size_t rows, size_t k,
                                        const uint8_t *codes, const uint8_t *scales,
                                        const float *global, int global_decode,
                                        lofp_verify_result *res);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_CAST_H */

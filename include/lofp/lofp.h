/*
 * lofp.h -- the public API of liblofp: block-scaled low-precision numbers.
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *   - Buffers are owned by the caller. No function allocates memory that it hands back, and no
 *     function keeps a pointer past its return. Sizing helpers (lofp_*_bytes) say how much to
 *     allocate.
 *   - Functions that can fail return an lofp_status; LOFP_OK is 0. Values are pinned and
 *     append-only (see lofp_status_name()).
 *   - Every function is thread-safe in the sense of being re-entrant: there is no hidden mutable
 *     global state except the CPU-feature cache, which is filled once and idempotently.
 *     Two threads may call any function concurrently as long as they do not write the same buffer.
 *   - Inputs are never modified unless a function is documented as "in place".
 *
 * docs/FORMATS.md fixes every bit-level choice (nibble order, rounding, saturation, NaN, zero
 * blocks, op order) and names the reference each scheme reproduces.
 */
#ifndef LOFP_LOFP_H
#define LOFP_LOFP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(LOFP_SHARED_BUILD)
#define LOFP_API __declspec(dllexport)
#elif defined(__GNUC__)
#define LOFP_API __attribute__((visibility("default")))
#else
#define LOFP_API
#endif

/* LOFP_VERSION_MAJOR/MINOR/PATCH and LOFP_VERSION_STRING, generated from the VERSION file. */
#include "lofp/version.h"

/* Returns the library's version string ("MAJOR.MINOR.PATCH"), a static string. */
LOFP_API const char *lofp_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Status codes (pinned, append-only)                                                          */
/* ------------------------------------------------------------------------------------------ */

typedef enum lofp_status {
    LOFP_OK = 0,
    LOFP_ERR_INVALID_ARG = 1,      /* NULL pointer, unknown enum, zero where nonzero needed */
    LOFP_ERR_SHAPE = 2,            /* last dimension not a multiple of the block (and no padding) */
    LOFP_ERR_NONFINITE = 3,        /* NaN or Inf in the input (and no propagation requested) */
    LOFP_ERR_SIZE_OVERFLOW = 4,    /* a size computation would overflow size_t */
    LOFP_ERR_UNSUPPORTED = 5,      /* valid request this build or scheme cannot do */
    LOFP_ERR_BUFFER_TOO_SMALL = 6, /* caller buffer smaller than the sizing helper says */
    LOFP_ERR_NOMEM = 7,            /* an internal scratch allocation failed */
    LOFP_ERR_IO = 8,               /* a file could not be opened, read, written or renamed */
    LOFP_ERR_FORMAT = 9,           /* a file or buffer is malformed */
    LOFP_ERR_NOT_FOUND = 10,       /* a named tensor, preset or option does not exist */
    LOFP_ERR_MISMATCH = 11,        /* data do not match what was claimed (diagnosis, verify) */
    LOFP_ERR_DEVICE = 12           /* an accelerator runtime call failed (lofp_cuda.h) */
} lofp_status;

/* Returns a static, human-readable name for a status ("ok", "shape", ...); never NULL. */
LOFP_API const char *lofp_status_name(lofp_status s);

/* ------------------------------------------------------------------------------------------ */
/* Element types and their codecs (SPEC §1)                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef enum lofp_elem {
    LOFP_ELEM_E2M1 = 1,   /* FP4, 4-bit code, sign in bit 3 */
    LOFP_ELEM_E2M3 = 2,   /* FP6, 6-bit code, sign in bit 5 */
    LOFP_ELEM_E3M2 = 3,   /* FP6, 6-bit code, sign in bit 5 */
    LOFP_ELEM_E4M3 = 4,   /* FP8 "fn": S.1111.111 is NaN, no Inf */
    LOFP_ELEM_E5M2 = 5,   /* FP8, IEEE-like Inf and NaN */
    LOFP_ELEM_E8M0 = 6,   /* unsigned power-of-two scale, 0xFF = NaN, 0x00 = 2^-127 */
    LOFP_ELEM_UE4M3 = 7,  /* E4M3 with the sign bit always 0 (NVFP4 block scale) */
    LOFP_ELEM_MXINT8 = 8, /* two's-complement int8 x 2^-6, clamped to +-127 */
    LOFP_ELEM_BF16 = 9,
    LOFP_ELEM_FP16 = 10,
    LOFP_ELEM_FP32 = 11,  /* identity; present so dtypes can be described uniformly */
    LOFP_ELEM_COUNT_ = 12
} lofp_elem;

typedef enum lofp_rounding {
    LOFP_RNE = 0,          /* nearest, ties to even (default; cvt.rn, torchao, ml_dtypes) */
    LOFP_TIES_TO_ZERO = 1, /* nearest, ties toward the smaller magnitude (seeds 000 and 004) */
    LOFP_TIES_AWAY = 2,    /* nearest, ties away from zero (OCP emulator "nearest") */
    LOFP_STOCHASTIC = 3    /* up with probability frac, from caller random bits (FORMATS.md) */
} lofp_rounding;

typedef enum lofp_overflow {
    LOFP_SATURATE = 0, /* clamp to +-max (.satfinite); Inf saturates too */
    LOFP_IEEE = 1      /* what ml_dtypes does: E4M3 -> NaN, E5M2/bf16/fp16 -> Inf, FP4/FP6 saturate */
} lofp_overflow;

/* Static description of an element type. Returned by lofp_elem_info(); never modified. */
typedef struct lofp_elem_info {
    const char *name;    /* "e2m1", "e4m3", ... */
    unsigned bits;       /* storage width of one code: 4, 6, 8 or 16 */
    unsigned ebits;      /* exponent bits (0 for MXINT8) */
    unsigned mbits;      /* mantissa bits */
    int bias;            /* exponent bias */
    int is_signed;       /* 0 for E8M0 and UE4M3 */
    int emax;            /* exponent of the largest power of two <= max (OCP emax_elem) */
    double max;          /* largest finite magnitude */
    double min_subnormal;/* smallest positive value */
    uint32_t max_code;   /* code of +max */
    int has_inf;         /* E5M2, bf16, fp16 */
    int has_nan;         /* E4M3, UE4M3, E5M2, E8M0, bf16, fp16 */
} lofp_elem_info;

/* Returns the traits of type t, or NULL for an unknown t. The pointer is to static storage. */
LOFP_API const lofp_elem_info *lofp_elem_info_get(lofp_elem t);

/* Looks a type up by name ("e2m1", "fp4", "e4m3", "ue4m3", "e8m0", "mxint8", "bf16", ...).
 * Returns LOFP_OK and sets *out, or LOFP_ERR_NOT_FOUND. */
LOFP_API lofp_status lofp_elem_from_name(const char *name, lofp_elem *out);

/* Encodes one fp32 value as a code of type t (low bits of the return value; 16 bits for bf16 and
 * fp16, the raw fp32 bits for FP32). `rbits` is only read for LOFP_STOCHASTIC: the value rounds
 * away from its lower-magnitude neighbour iff rbits < frac * 2^32, frac being the exact fractional
 * position between the two neighbours. Unknown t or mode returns 0. NaN and Inf handling per type
 * is listed in docs/FORMATS.md. Pure function. */
LOFP_API uint32_t lofp_encode(lofp_elem t, float x, lofp_rounding mode, lofp_overflow ovf,
                              uint32_t rbits);

/* Decodes one code of type t to fp32 (exact: every value of every type is an fp32). Bits above
 * the type's width are ignored. E8M0 0x00 decodes to 2^-127 (an fp32 subnormal). Pure function. */
LOFP_API float lofp_decode(lofp_elem t, uint32_t code);

/* Array forms: encode n floats into codes (one code per uint8_t for types of <= 8 bits; callers
 * wanting packed FP4 use the scheme API). `rbits` may be NULL unless mode is STOCHASTIC, where it
 * must hold n words. Return LOFP_ERR_INVALID_ARG for a 16-bit type or NULL buffers. */
LOFP_API lofp_status lofp_encode_u8(lofp_elem t, const float *x, size_t n, lofp_rounding mode,
                                    lofp_overflow ovf, const uint32_t *rbits, uint8_t *codes);
LOFP_API lofp_status lofp_decode_u8(lofp_elem t, const uint8_t *codes, size_t n, float *out);

/* bf16 / fp16 helpers (RNE, IEEE overflow, the conversions every framework does). */
LOFP_API uint16_t lofp_fp32_to_bf16(float x);
LOFP_API float lofp_bf16_to_fp32(uint16_t h);
LOFP_API uint16_t lofp_fp32_to_fp16(float x);
LOFP_API float lofp_fp16_to_fp32(uint16_t h);

/* ------------------------------------------------------------------------------------------ */
/* Block schemes (SPEC §2)                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum lofp_scheme_id {
    LOFP_SCHEME_NVFP4 = 1,
    LOFP_SCHEME_MXFP4 = 2,
    LOFP_SCHEME_MXFP6_E2M3 = 3,
    LOFP_SCHEME_MXFP6_E3M2 = 4,
    LOFP_SCHEME_MXFP8_E4M3 = 5,
    LOFP_SCHEME_MXFP8_E5M2 = 6,
    LOFP_SCHEME_MXINT8 = 7,
    LOFP_SCHEME_TILELANG_MXFP8 = 8,
    LOFP_SCHEME_ULTRAQUANT = 9,
    LOFP_SCHEME_COUNT_ = 10
} lofp_scheme_id;

/* How an MX block's E8M0 scale is chosen from the block's amax (SPEC §2, FORMATS.md). */
typedef enum lofp_scale_rule {
    LOFP_SCALE_FLOOR = 0, /* 2^(floor(log2 amax) - emax_elem): OCP default */
    LOFP_SCALE_CEIL = 1,  /* 2^(ceil(log2 amax) - emax_elem) */
    LOFP_SCALE_EVEN = 2,  /* amax rounded to the element's mantissa width first, then FLOOR */
    LOFP_SCALE_RCEIL = 3, /* ceil_to_ue8m0(amax / max_elem): cuBLAS, TE, DeepGEMM */
    LOFP_SCALE_UE4M3 = 4, /* NVFP4: UE4M3(bmax / 6) after the per-tensor multiplier */
    LOFP_SCALE_UQ_ROUND = 5 /* UltraQuant: 2^floor(fl(log2(c*amax)) + 0.5), byte 0 = zero */
} lofp_scale_rule;

/* Which Hadamard the UltraQuant K rotation uses (FORMATS.md). */
typedef enum lofp_hadamard_kind {
    LOFP_HADAMARD_BUTTERFLY = 0, /* vLLM store kernel: per-stage (a+-b)*fl(1/sqrt2), default */
    LOFP_HADAMARD_DENSE = 1      /* the reference's x @ H.T in fp32, sequential sum over j */
} lofp_hadamard_kind;

/* Producer profiles (docs/CHECKPOINTS.md "Profiles"). A profile makes lofp_quantize() and
 * lofp_dequantize() compute what another producer of checkpoints computes, bit for bit: its op
 * order, the direction and rounding of its per-tensor scale, its zero-block value, its tie rule,
 * its sign of zero, its scale-exponent rule and what it does with tiny and non-finite blocks.
 * LOFP_PROFILE_LOFP (0, the default) is lofp's own documented rule set (docs/SCHEMES.md); every
 * other profile runs through scalar reference code only (exactness first) and supports the
 * schemes its producer writes:
 *   - MODELOPT: nvfp4 (two-level), mxfp4, mxfp8-e4m3 (block 32): NVIDIA ModelOpt's quantize
 *     expressions as PyTorch runs them on a CUDA device (a division of a tensor by a constant is
 *     a multiply by the constant's fp32 reciprocal there).
 *   - COMPRESSED_TENSORS: nvfp4 (two-level): compressed-tensors 0.20 on the CPU.
 *   - TORCHAO: nvfp4 (one- and two-level), mxfp4, mxfp6-*, mxfp8-* with every scale rule
 *     (FLOOR/CEIL/EVEN/RCEIL = torchao's ScaleCalculationMode): torchao 0.18's eager CPU code.
 *   - GGML: mxfp4 (block 32): ggml / gguf-py 0.19; nvfp4 one-level: ggml's
 *     quantize_row_nvfp4_ref (what llama.cpp's quantizer writes; no per-tensor scale).
 * Under a profile the scheme's `rounding`, `amax_floor`, `ceil_clamp` and `seed` are not used (the
 * producer fixes them), nor `scale_rule` except for TORCHAO's MX schemes. The per-tensor scale
 * (the `global_scale` argument and result of the quantize and dequantize functions) is in the
 * producer's own direction, lofp_profile_decode_direction() says which. Non-finite input is
 * LOFP_ERR_NONFINITE unless `propagate_nonfinite` is set and the producer has a rule for it
 * (TORCHAO's MX schemes and GGML: their bytes are reproduced; the others always refuse). */
typedef enum lofp_profile {
    LOFP_PROFILE_LOFP = 0,
    LOFP_PROFILE_MODELOPT = 1,
    LOFP_PROFILE_COMPRESSED_TENSORS = 2,
    LOFP_PROFILE_TORCHAO = 3,
    LOFP_PROFILE_GGML = 4,
    LOFP_PROFILE_COUNT_ = 5
} lofp_profile;

/* A scheme: element type, block, scale type and rule, rounding and options. Fill one with
 * lofp_scheme_init() or lofp_scheme_preset() and then adjust fields; other functions read it
 * and never write it. */
typedef struct lofp_scheme {
    lofp_scheme_id id;
    lofp_elem elem;             /* element type of the codes */
    lofp_elem scale_elem;       /* LOFP_ELEM_UE4M3 or LOFP_ELEM_E8M0 */
    uint32_t block;             /* elements per scale; for MX any multiple of 32 ("granularity") */
    lofp_scale_rule scale_rule;
    lofp_rounding rounding;     /* element rounding */
    int two_level;              /* NVFP4 per-tensor fp32 level (default 1) */
    int pad;                    /* zero-pad K up to a whole block instead of LOFP_ERR_SHAPE */
    int propagate_nonfinite;    /* MX: block scale 0xFF; UltraQuant: zero group; else error */
    float amax_floor;           /* amax is floored at this (nvfp4 1e-12 tensor-wide, tilelang 1e-4 per block, else 0) */
    int ceil_clamp;             /* RCEIL clamps the biased exponent to [1,254] (DeepGEMM/TileLang) */
    float c;                    /* UltraQuant constant, default 0.156f */
    int rotate;                 /* UltraQuant: Hadamard-rotate before encoding (K: 1, V: 0) */
    lofp_hadamard_kind hadamard;
    uint64_t seed;              /* STOCHASTIC rounding: random bits come from this seed (FORMATS.md) */
    unsigned threads;           /* worker threads for quantize/dequantize; 0 or 1 = the caller's
                                   thread only. Results never depend on it. */
    lofp_profile profile;       /* whose numerics (default LOFP_PROFILE_LOFP, see above) */
} lofp_scheme;

/* Fills *s with the defaults of scheme `id` (RNE rounding, FLOOR scale rule for MX, two-level
 * NVFP4, UltraQuant c = 0.156 with butterfly rotation on). Returns LOFP_ERR_INVALID_ARG for an
 * unknown id. */
LOFP_API lofp_status lofp_scheme_init(lofp_scheme *s, lofp_scheme_id id);

/* Fills *s from a preset name: "nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3",
 * "mxfp8-e5m2", "mxint8", "tilelang-mxfp8", "ultraquant". Returns LOFP_ERR_NOT_FOUND for other
 * names. */
LOFP_API lofp_status lofp_scheme_preset(const char *name, lofp_scheme *s);

/* Returns the preset name of a scheme id ("nvfp4", ...), or NULL for an unknown id. */
LOFP_API const char *lofp_scheme_name(lofp_scheme_id id);

/* Name <-> enum helpers for rounding modes ("rne", "ties-to-zero", "ties-away", "stochastic")
 * and scale rules ("floor", "ceil", "even", "rceil", "ue4m3", "uq-round"). The name functions
 * return static strings or NULL; the parse functions return LOFP_OK or LOFP_ERR_NOT_FOUND. */
LOFP_API const char *lofp_rounding_name(lofp_rounding r);
LOFP_API lofp_status lofp_rounding_from_name(const char *name, lofp_rounding *out);
LOFP_API const char *lofp_scale_rule_name(lofp_scale_rule r);
LOFP_API lofp_status lofp_scale_rule_from_name(const char *name, lofp_scale_rule *out);

/* Name <-> enum for profiles: "lofp", "modelopt", "compressed-tensors" (also "ct"), "torchao",
 * "ggml" (also "gguf"). The name function returns a static string or NULL. */
LOFP_API const char *lofp_profile_name(lofp_profile p);
LOFP_API lofp_status lofp_profile_from_name(const char *name, lofp_profile *out);

/* 1 when profile p stores the NVFP4 per-tensor scale in the decode direction (the scale a
 * dequantizer multiplies by: ModelOpt's weight_scale_2, torchao's per_tensor_scale, about
 * amax / 2688), 0 when it stores the encode multiplier (lofp and compressed-tensors, about
 * 2688 / amax). */
LOFP_API int lofp_profile_decode_direction(lofp_profile p);

/* Checks that a scheme is self-consistent (block a positive multiple of the native block for MX,
 * 16 for NVFP4, 32 for UltraQuant; known enums; c > 0) and that its profile supports it (see
 * lofp_profile). Returns LOFP_OK or LOFP_ERR_INVALID_ARG. */
LOFP_API lofp_status lofp_scheme_validate(const lofp_scheme *s);

/* lofp's one dtype enum: the element type of a tensor in memory or in a file (the safetensors
 * names are in comments; .npy holds the ones with a numpy descr). F32, BF16 and F16 are the dense
 * types the quantizers take and return (lofp_dtype_is_dense); the others are what files and
 * checkpoints hold (quantized codes and scales, integers). The number formats the codecs encode
 * are a separate enum, lofp_elem, because an element format (E2M1, E8M0, ...) is not a storage
 * type: F4 storage holds E2M1 codes two per byte, U8 storage holds E8M0 or UE4M3 scales. */
typedef enum lofp_dtype {
    LOFP_DTYPE_F32 = 1,          /* "F32"         .npy '<f4' */
    LOFP_DTYPE_BF16 = 2,         /* "BF16"        safetensors only */
    LOFP_DTYPE_F16 = 3,          /* "F16"         .npy '<f2' */
    LOFP_DTYPE_BOOL = 4,         /* "BOOL"        .npy '|b1'  one byte, 0 or 1 */
    LOFP_DTYPE_U8 = 5,           /* "U8"          .npy '|u1' */
    LOFP_DTYPE_I8 = 6,           /* "I8"          .npy '|i1' */
    LOFP_DTYPE_U16 = 7,          /* "U16"         .npy '<u2' */
    LOFP_DTYPE_I16 = 8,          /* "I16"         .npy '<i2' */
    LOFP_DTYPE_U32 = 9,          /* "U32"         .npy '<u4' (packed-u32 scale words) */
    LOFP_DTYPE_I32 = 10,         /* "I32"         .npy '<i4' */
    LOFP_DTYPE_U64 = 11,         /* "U64"         .npy '<u8' */
    LOFP_DTYPE_I64 = 12,         /* "I64"         .npy '<i8' */
    LOFP_DTYPE_F64 = 13,         /* "F64"         .npy '<f8' */
    LOFP_DTYPE_F8_E4M3 = 14,     /* "F8_E4M3"     torch float8_e4m3fn, ml_dtypes float8_e4m3fn */
    LOFP_DTYPE_F8_E5M2 = 15,     /* "F8_E5M2" */
    LOFP_DTYPE_F8_E8M0 = 16,     /* "F8_E8M0"     torch float8_e8m0fnu */
    LOFP_DTYPE_F4 = 17,          /* "F4"          E2M1, two per byte, LOGICAL shape (lofp/io.h) */
    LOFP_DTYPE_F6_E2M3 = 18,     /* "F6_E2M3"     6 bits, packed; shape is the logical count */
    LOFP_DTYPE_F6_E3M2 = 19,     /* "F6_E3M2" */
    LOFP_DTYPE_F8_E4M3FNUZ = 20, /* "F8_E4M3FNUZ" */
    LOFP_DTYPE_F8_E5M2FNUZ = 21, /* "F8_E5M2FNUZ" */
    LOFP_DTYPE_C64 = 22,         /* "C64"         .npy '<c8' */
    LOFP_DTYPE_COUNT_ = 23
} lofp_dtype;

/* Returns 1 when dt is one of the dense types the quantizers take and dequantize returns (F32,
 * BF16, F16), else 0 (every other dtype, and values outside the enum). Pure; thread-safe. */
LOFP_API int lofp_dtype_is_dense(lofp_dtype dt);

/* Returns 1 when dt is a floating type lofp reads as fp32 (F32, BF16, F16, F64), else 0. The
 * tensors `lofp quantize` and the checkpoint converter quantize are these. Pure; thread-safe. */
LOFP_API int lofp_dtype_is_float(lofp_dtype dt);

/* Converts n elements of dtype dt at src (host byte order, any alignment) to fp32 into dst
 * (caller-owned, n floats; must not overlap src): F32 copied, BF16 and F16 exactly, F64 rounded to
 * nearest (finite values beyond the fp32 range become +-Inf; a caller that must refuse them checks
 * the F64 values itself). Returns LOFP_OK, or LOFP_ERR_INVALID_ARG when dt is not a floating type
 * (lofp_dtype_is_float) or src/dst is NULL with n > 0 (dst untouched). Pure; thread-safe. */
LOFP_API lofp_status lofp_dtype_to_f32(lofp_dtype dt, const void *src, size_t n, float *dst);

/* Element i of an array of dtype dt at src, as fp32 (the conversion of lofp_dtype_to_f32, for
 * strided and single reads). Returns 0 when dt is not a floating type. Pure; thread-safe. */
LOFP_API float lofp_dtype_load_f32(lofp_dtype dt, const void *src, size_t i);

/* How far an approximation y is from x (n values each), accumulated in double precision: what
 * `lofp inspect --against` prints per tensor and `lofp attention --expect` checks. Plain data. */
typedef struct lofp_error_stats {
    double max_abs;       /* max |y[i] - x[i]|; NaN when any difference is NaN */
    double rmse;          /* sqrt(sum (y - x)^2 / n); 0 when n is 0 */
    double snr_db;        /* 10 log10(sum x^2 / sum (y - x)^2); +Inf when y equals x */
    double rel_frobenius; /* sqrt(sum (y - x)^2 / sum x^2); 0 when sum x^2 is 0 */
    double x_max_abs;     /* max |x[i]|: what a relative max error divides by; NaN when an x is NaN */
} lofp_error_stats;

/* Fills *out with the error statistics of y against x (n floats each, caller-owned, only read).
 * Returns LOFP_OK, or LOFP_ERR_INVALID_ARG for a NULL out, or NULL x / y with n > 0. Pure;
 * thread-safe. */
LOFP_API lofp_status lofp_error_stats_compute(const float *x, const float *y, size_t n,
                                              lofp_error_stats *out);

/* The padded K the codes hold: K itself when it is a multiple of the block, else (with pad)
 * round_up(K, block). Returns 0 if K is 0, the scheme is invalid (lofp_scheme_validate), K is not
 * a multiple and the scheme does not pad, or on overflow. */
LOFP_API size_t lofp_padded_k(const lofp_scheme *s, size_t k);

/* Bytes of the codes for a [rows, K] tensor: rows * padded_k / 2 for FP4, rows * padded_k for
 * 6/8-bit elements (FP6 is stored one code per byte, like torchao). Scales: rows * padded_k /
 * block bytes, linear layout. Both return 0 on an invalid shape or overflow (check with
 * lofp_padded_k). */
LOFP_API size_t lofp_codes_bytes(const lofp_scheme *s, size_t rows, size_t k);
LOFP_API size_t lofp_scales_bytes(const lofp_scheme *s, size_t rows, size_t k);

/* What a quantize call did besides writing its outputs. */
typedef struct lofp_quant_report {
    size_t first_bad_index;   /* flat index of the first non-finite input (when one was seen) */
    size_t nonfinite_blocks;  /* blocks/groups affected by non-finite input (propagation mode) */
    size_t logical_k;         /* K as given */
    size_t padded_k;          /* K as stored */
} lofp_quant_report;

/* NVFP4 per-tensor scale of a whole tensor: returns the *encode* multiplier
 * global = fl(fl(1/amax) * 2688) with amax = max|x| floored at 1e-12 (seed 000 under PyTorch).
 * lofp_nvfp4_decode_scale() returns the *decode* scale ModelOpt stores as weight_scale_2,
 * fl(amax / 2688). Non-finite input makes both return NaN. */
LOFP_API float lofp_nvfp4_global_scale(lofp_dtype dt, const void *x, size_t n);
LOFP_API float lofp_nvfp4_decode_scale(lofp_dtype dt, const void *x, size_t n);
/* Conversions between the two directions: encode = fl(1/decode) and decode = fl(1/encode). */
LOFP_API float lofp_nvfp4_encode_from_decode(float decode_scale);
LOFP_API float lofp_nvfp4_decode_from_encode(float encode_scale);

/* The NVFP4 per-tensor scale that scheme s's profile computes for a tensor of dtype dt whose
 * largest magnitude is amax, in the profile's direction (lofp_profile_decode_direction): lofp
 * fl(fl(1/max(amax, 1e-12))·2688), ModelOpt amax·fl(1/2688), compressed-tensors its own (in bf16
 * for bf16 input), torchao fl(amax/2688); 1 for ggml (one level). For quantizing a tensor in row
 * chunks (lofp_quantize_with_global) or a group of tensors that share one scale. Returns NaN for
 * a negative, NaN or infinite amax or a NULL scheme. Pure, thread-safe. */
LOFP_API float lofp_profile_nvfp4_global(const lofp_scheme *s, lofp_dtype dt, float amax);

/* Quantizes a row-major [rows, k] tensor (any leading dims flattened into rows) of dtype `dt`.
 * Writes lofp_codes_bytes() bytes of codes (FP4: element 2i in the low nibble), lofp_scales_bytes()
 * bytes of linear scales [rows, padded_k/block], and *global_scale (the NVFP4 encode multiplier;
 * 1.0 for every other scheme; may be NULL when not two-level NVFP4). `report` may be NULL.
 * Errors: LOFP_ERR_SHAPE (k not a multiple of the block and !s->pad), LOFP_ERR_NONFINITE (with
 * report->first_bad_index set, unless s->propagate_nonfinite; also for finite input whose
 * UltraQuant rotation overflows fp32, reported at the row's largest magnitude), LOFP_ERR_SIZE_OVERFLOW,
 * LOFP_ERR_INVALID_ARG, LOFP_ERR_NOMEM (UltraQuant rotation scratch). On error the output
 * buffers may have been partly written. Re-entrant. */
LOFP_API lofp_status lofp_quantize(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows,
                                   size_t k, uint8_t *codes, uint8_t *scales, float *global_scale,
                                   lofp_quant_report *report);

/* Same, with the NVFP4 per-tensor multiplier given instead of computed (for activations that
 * use a calibrated scale, or for quantizing a tensor in row chunks). Ignored by other schemes. */
LOFP_API lofp_status lofp_quantize_with_global(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                               size_t rows, size_t k, float global_scale,
                                               uint8_t *codes, uint8_t *scales,
                                               lofp_quant_report *report);

/* Quantizes one chunk of rows of a larger tensor: x holds rows [row0, row0 + rows) of a [*, k]
 * tensor (x points at row row0). Writes the codes and linear scales of those rows, byte for byte
 * what lofp_quantize_with_global() writes for them when given the whole tensor: stochastic bits
 * depend on the index in the whole tensor, and report->first_bad_index counts from its row 0.
 * For two-level NVFP4 pass the whole tensor's multiplier (the minimum of
 * lofp_nvfp4_global_scale() over the chunks equals the whole tensor's). Errors as
 * lofp_quantize_with_global(), and LOFP_ERR_UNSUPPORTED under a producer profile (s->profile other
 * than LOFP_PROFILE_LOFP: those are defined on whole tensors). Re-entrant. */
LOFP_API lofp_status lofp_quantize_rows(const lofp_scheme *s, lofp_dtype dt, const void *x,
                                        size_t row0, size_t rows, size_t k, float global_scale,
                                        uint8_t *codes, uint8_t *scales,
                                        lofp_quant_report *report);

/* Dequantizes codes and linear scales back to a [rows, k] tensor of dtype `out_dt` (k is the
 * logical K; padded columns are dropped). NVFP4: code * float(scale) / global (fp32, in that
 * order). MX: code * 2^(e-127); scale 0xFF gives NaN for the whole block. UltraQuant: byte 0
 * gives zeros; the result is in the rotated basis. Returns LOFP_ERR_INVALID_ARG (also for an
 * NVFP4 global_scale that is 0, negative or not finite) or LOFP_ERR_SHAPE. Re-entrant. */
LOFP_API lofp_status lofp_dequantize(const lofp_scheme *s, const uint8_t *codes,
                                     const uint8_t *scales, float global_scale, size_t rows,
                                     size_t k, lofp_dtype out_dt, void *out);

/* The operations whose CPU kernel lofp_kernel_name() can name (append-only). */
typedef enum lofp_kernel_op {
    LOFP_KERNEL_QUANTIZE = 0,  /* lofp_quantize / lofp_quantize_with_global rows */
    LOFP_KERNEL_DEQUANTIZE = 1 /* lofp_dequantize rows */
} lofp_kernel_op;

/* Names the kernel variant this process runs for operation `op` of scheme `id`: "avx2" or
 * "generic" (portable C), chosen once from the CPU's features (LOFP_DISABLE_CPU_FEATURES=all
 * forces "generic"; docs/QUANT.md). Every variant gives bit-identical results. Returns a static
 * string, or NULL for an unknown id or op. Thread-safe. */
LOFP_API const char *lofp_kernel_name(lofp_scheme_id id, lofp_kernel_op op);

/* ------------------------------------------------------------------------------------------ */
/* Walsh-Hadamard transform                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* In-place fast Walsh-Hadamard transform of x[0..d) for d a power of two (>= 1), normalised so
 * that H H^T = I, computed as vLLM's store kernel does: stages of ascending stride, each pair
 * (a, b) -> ((a+b)*r, (a-b)*r) with r = fl(1/sqrt(2)), rounding after each add and multiply.
 * If `signs` is non-NULL, x[i] is first multiplied by signs[i] (+-1): a randomised Hadamard
 * H*diag(signs). Returns LOFP_ERR_INVALID_ARG if d is not a power of two. Re-entrant. */
LOFP_API lofp_status lofp_hadamard_inplace(float *x, size_t d, const float *signs);

/* Dense reference: y = x @ H^T with H the Sylvester matrix built exactly and rounded to fp32
 * (entries +-fl(1/sqrt(d))), summing j = 0..d-1 sequentially in fp32 without FMA. x and y must
 * not overlap. Returns LOFP_ERR_INVALID_ARG if d is not a power of two. */
LOFP_API lofp_status lofp_hadamard_dense(const float *x, float *y, size_t d);

/* Fills signs[0..d) with a reproducible +-1 vector from `seed` (splitmix64 bits, FORMATS.md). */
LOFP_API void lofp_hadamard_signs(float *signs, size_t d, uint64_t seed);

/* ------------------------------------------------------------------------------------------ */
/* Packing and scale layouts (SPEC §3)                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef enum lofp_nibble_order {
    LOFP_NIBBLE_STANDARD = 0, /* element 2i low nibble, 2i+1 high (PyTorch float4_e2m1fn_x2) */
    LOFP_NIBBLE_GGUF = 1      /* llama.cpp: low = j, high = j + block/2 within each block */
} lofp_nibble_order;

/* Re-packs FP4 codes of `rows` rows of `k` elements (k even, a multiple of `block` for GGUF;
 * block is 32 for MXFP4 and 16 for NVFP4) from one nibble order to the other. `in` and `out`
 * must not overlap. Returns LOFP_ERR_INVALID_ARG / LOFP_ERR_SHAPE. */
LOFP_API lofp_status lofp_fp4_repack(const uint8_t *in, uint8_t *out, size_t rows, size_t k,
                                     uint32_t block, lofp_nibble_order from, lofp_nibble_order to);

typedef enum lofp_layout {
    LOFP_LAYOUT_LINEAR = 0,         /* row-major [rows, cols] bytes */
    LOFP_LAYOUT_SWIZZLE_128X4 = 1,  /* cuBLAS/CUTLASS SWIZZLE_32_4_4, zero padding */
    LOFP_LAYOUT_PACKED_U32 = 2,     /* TileLang group-major words, Ma = rows, pad byte 127 */
    LOFP_LAYOUT_PACKED_U32_DG = 3,  /* DeepGEMM group-major words, Ma = round_up(rows,4), pad 0 */
    LOFP_LAYOUT_COUNT_ = 4
} lofp_layout;

/* Name <-> enum: "linear", "swizzle-128x4", "packed-u32", "packed-u32:deepgemm". */
LOFP_API const char *lofp_layout_name(lofp_layout l);
LOFP_API lofp_status lofp_layout_from_name(const char *name, lofp_layout *out);

/* Bytes a scale buffer of layout l needs for a [rows, K] tensor with one scale per `block`
 * elements (cols = ceil(K/block)): linear rows*cols; swizzle round_up(rows,128)*round_up(cols,4);
 * packed-u32 4*ceil(cols/4)*Ma. Returns 0 on invalid arguments or overflow. Equals PyTorch's
 * numel check for swizzle-128x4. */
LOFP_API size_t lofp_layout_required_bytes(size_t rows, size_t k, uint32_t block, lofp_layout l);

/* Byte offset of scale (r, c) in the swizzle-128x4 layout of a matrix with `cols` scale columns. */
LOFP_API size_t lofp_swizzle128x4_offset(size_t r, size_t c, size_t cols);

/* Converts linear scales [rows, cols] to layout l. `pad_byte` fills padding of packed-u32 layouts
 * (pass -1 for the layout's default: 127 TileLang, 0 DeepGEMM; values outside -1..254, 0xFF
 * included, are refused for every layout); swizzle padding is always zero whatever pad_byte says. out must hold lofp_layout_required_bytes(rows, cols, 1, l) bytes; packed-u32 words are
 * written little-endian (byte i of a word = K-group 4g+i). in and out must not overlap. */
LOFP_API lofp_status lofp_layout_from_linear(const uint8_t *in, size_t rows, size_t cols,
                                             lofp_layout l, int pad_byte, uint8_t *out);

/* Inverse of lofp_layout_from_linear: reads layout l and writes linear [rows, cols]. */
LOFP_API lofp_status lofp_layout_to_linear(const uint8_t *in, size_t rows, size_t cols,
                                           lofp_layout l, uint8_t *out);

/* The result of a layout diagnosis. */
typedef struct lofp_layout_diagnosis {
    lofp_layout layout;        /* best-matching layout */
    int reversed_bytes;        /* packed-u32 words written MSB-first */
    int row_major_words;       /* packed-u32 words indexed m*G+g instead of g*M+m */
    uint32_t block;            /* granularity the buffer was written with */
    int matches;               /* 1 if some candidate reproduces the buffer exactly */
    size_t mismatched_bytes;   /* for the best candidate, bytes that differ */
    char evidence[512];        /* one or more lines of human-readable reasoning */
} lofp_layout_diagnosis;

/* Names the layout, byte order and granularity a scale buffer was written in. `expected` holds
 * the linear scales [rows, ceil(k/block)] computed from the tensor it belongs to (the caller
 * quantizes the tensor with the intended scheme at each candidate granularity it wants tried, or
 * passes the linear scales at `block`). The diagnosis tries `block`, `alt_block`, and 32 and 128
 * where they are coarser multiples of a granularity it has scales for (a coarser scale is the
 * max of the finer ones, exact for every scale rule). A buffer written at a *finer* granularity
 * can only be recognised through `expected_alt`: the linear scales at `alt_block` (0 = none), so
 * that "written at 32, read at 128" is found. Prefix matches and non-default pad bytes are
 * reported in the evidence text (matches = 1 with mismatched_bytes > 0; docs/LAYOUT.md). Writes *d and returns LOFP_OK when a candidate matches,
 * LOFP_ERR_MISMATCH when none does (d still describes the closest). */
LOFP_API lofp_status lofp_layout_diagnose(const uint8_t *buf, size_t buf_bytes, size_t rows,
                                          size_t k, uint32_t block, const uint8_t *expected,
                                          uint32_t alt_block, const uint8_t *expected_alt,
                                          lofp_layout_diagnosis *d);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_LOFP_H */

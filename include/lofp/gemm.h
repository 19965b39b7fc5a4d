/*
 * gemm.h -- block-scaled GEMV/GEMM on the CPU: C[m, n] = A[m, k] · B[n, k]^T (SPEC §4).
 *
 * B (the weights) is block-quantized: NVFP4, MXFP4 (any MX E2M1 granularity) or MXFP8-E4M3 for
 * the fast kernels, any lofp scheme for the reference. A (the activations) is either dense
 * (fp32 / bf16 / fp16), dense and quantized on the fly (W4A8: "mxint8" or "mxfp8-e4m3" blocks of
 * 32; W4A4: "nvfp4"), or given already quantized. Both operands are K-major. NVFP4 per-tensor
 * globals are applied once, in the epilogue: the result is divided by every NVFP4 encode global
 * involved (seed 000's nvfp4_mm rides 1/global in the same place).
 *
 * docs/GEMM.md says which kernel runs for which operand pair, how each accumulates, when the fp32
 * result is exact and when it is not, and what the packed weight layout "x8" looks like.
 *
 * Conventions of lofp.h hold: caller-owned buffers, no hidden mutable state except the CPU-feature
 * and kernel-table caches (filled once, idempotently), every function re-entrant. Byte buffers
 * (codes, scales, packed weights, workspace) may have any alignment; dense A and C need only the
 * natural alignment of their element type.
 */
#ifndef LOFP_GEMM_H
#define LOFP_GEMM_H

#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the codes and scales of a quantized matrix are laid out in memory. */
typedef enum lofp_weight_layout {
    /* What lofp_quantize writes: codes row-major [rows, padded_k] (FP4 two per byte, element 2i
     * in the low nibble), scales linear [rows, padded_k / block]. */
    LOFP_WEIGHT_ROWS = 0,
    /* "x8": 8 rows interleaved per 32-element superblock for SIMD GEMV/GEMM (E2M1 schemes only;
     * docs/GEMM.md gives every byte). One buffer holds codes, scales and per-group flags; make it
     * with lofp_weight_pack(). */
    LOFP_WEIGHT_X8 = 1,
    LOFP_WEIGHT_LAYOUT_COUNT_ = 2
} lofp_weight_layout;

/* Name <-> enum: "rows", "x8". The name function returns a static string (never to be freed)
 * or NULL for an unknown layout; the parse function writes *out and returns LOFP_OK, or returns
 * LOFP_ERR_NOT_FOUND / LOFP_ERR_INVALID_ARG (NULL pointer). Both are pure and thread-safe. */
LOFP_API const char *lofp_weight_layout_name(lofp_weight_layout l);
LOFP_API lofp_status lofp_weight_layout_from_name(const char *name, lofp_weight_layout *out);

/* A block-quantized [rows, k] matrix as lofp_quantize (or lofp_weight_pack) produced it. The
 * struct only points at caller memory. */
typedef struct lofp_qmatrix {
    const lofp_scheme *scheme;  /* element and scale types, block, pad (K may be padded) */
    lofp_weight_layout layout;  /* LOFP_WEIGHT_ROWS, or LOFP_WEIGHT_X8 (B only) */
    const uint8_t *codes;       /* rows: the codes; x8: the whole packed buffer */
    const uint8_t *scales;      /* rows: linear scales; x8: ignored (inside the packed buffer) */
    float global;               /* NVFP4 two-level encode multiplier (lofp_quantize's
                                   *global_scale); read only for NVFP4, where it must be finite
                                   and > 0 (1 for a one-level NVFP4 tensor) */
} lofp_qmatrix;

/* Everything one GEMM call needs. Initialise with lofp_gemm_args_init() and fill the fields. */
typedef struct lofp_gemm_args {
    size_t m, n, k;             /* C is [m, n]; k is the logical K of both operands */

    /* A, dense: a != NULL. Row r starts at element r * lda (lda 0 means k). */
    const void *a;
    lofp_dtype a_dtype;         /* LOFP_DTYPE_F32, _BF16 or _F16 */
    size_t lda;
    /* NULL: A is used as it is, fp32 accumulation (W4A16). Otherwise A is first quantized with
     * this scheme exactly as lofp_quantize would (same codes, same NVFP4 global), then
     * multiplied: "mxint8" block 32 takes the integer W4A8 kernels, "nvfp4" the integer W4A4
     * ones, "mxfp8-e4m3" (and any other scheme) the fp32 kernels on the dequantized values. */
    const lofp_scheme *a_quant;

    /* A, pre-quantized (used when a == NULL): rows layout, [m, k] codes of aq.scheme. */
    lofp_qmatrix aq;

    /* B, the weights [n, k]: rows layout, or x8 from lofp_weight_pack(). */
    lofp_qmatrix b;

    float *c;                   /* fp32 output; row r starts at c + r * ldc (ldc 0 means n) */
    size_t ldc;

    unsigned threads;           /* worker threads (0 or 1 = the calling thread only); the result
                                   is bit-identical for every thread count */

    /* Optional scratch of lofp_gemm_workspace_bytes() bytes (any alignment). NULL: lofp_gemm
     * allocates what it needs and frees it before returning. */
    void *workspace;
    size_t workspace_bytes;
} lofp_gemm_args;

/* Zeroes *args and sets a_dtype = LOFP_DTYPE_F32, b.layout = LOFP_WEIGHT_ROWS, aq.global =
 * b.global = 1, threads = 1. Returns nothing and never fails; args (caller-owned) must not be
 * NULL. Thread-safe (touches only *args). */
LOFP_API void lofp_gemm_args_init(lofp_gemm_args *args);

/* Computes C = A · B^T (fp32 output), choosing the fastest kernel this CPU supports for the
 * operand pair (chosen once per process from lofp_cpu_features(); LOFP_DISABLE_CPU_FEATURES
 * forces the portable kernels). Writes only C[0..m)[0..n) (never C's row padding). Errors:
 * LOFP_ERR_INVALID_ARG (NULL pointers, zero sizes, bad dtype, bad or non-finite NVFP4 global,
 * x8 given for A, lda < k, ldc < n), LOFP_ERR_SHAPE (k not a multiple of a scheme's block that
 * does not pad), LOFP_ERR_NONFINITE (NaN/Inf in dense A that is quantized on the fly and the
 * scheme does not propagate), LOFP_ERR_BUFFER_TOO_SMALL (workspace given but smaller than
 * lofp_gemm_workspace_bytes()), LOFP_ERR_SIZE_OVERFLOW, LOFP_ERR_NOMEM. On error C may have been
 * partly written. Re-entrant; the buffers are only read, except C and the workspace. */
LOFP_API lofp_status lofp_gemm(const lofp_gemm_args *args);

/* Returns the bytes of workspace lofp_gemm needs for these arguments (pointers are not
 * dereferenced, only sizes, schemes, dtypes and layouts are read); 0 when none is needed or the
 * arguments are invalid. The value covers every kernel table, so it does not change with the
 * CPU. Pure and thread-safe. */
LOFP_API size_t lofp_gemm_workspace_bytes(const lofp_gemm_args *args);

/* The fp64 reference of the same product: C[i][j] = sum_k deq(A)[i][k] * deq(B)[j][k] in double,
 * where deq is code * scale (exact in double) for quantized operands and the value itself for
 * dense ones, then divided by each NVFP4 encode global (A's and B's) once. Dense A with a_quant
 * set is quantized first with lofp_quantize (the same codes lofp_gemm uses). Writes c[i * ldc +
 * j] for i < m, j < n (ldc 0 means n); args->c, threads and workspace are ignored. Allocates
 * scratch (LOFP_ERR_NOMEM). Slow and obvious on purpose; accepts every scheme lofp_quantize
 * accepts (UltraQuant scale byte 0 is a zero group, values in the rotated basis). Re-entrant. */
LOFP_API lofp_status lofp_gemm_ref(const lofp_gemm_args *args, double *c, size_t ldc);

/* Returns a static string (never to be freed) naming the kernel lofp_gemm would run for these
 * arguments on this CPU, e.g. "avx2 x8 int8-dot" or "generic rows fp32-dot"; "invalid" for
 * arguments lofp_gemm would refuse. Reads no buffer. Thread-safe. */
LOFP_API const char *lofp_gemm_kernel_name(const lofp_gemm_args *args);

/* ------------------------------------------------------------------------------------------ */
/* Weight pre-packing                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* Returns the bytes of a [n, k] weight matrix of scheme s in layout l (rows: the codes bytes;
 * its scales live in their own buffer of lofp_scales_bytes; x8: one buffer, scales included).
 * Returns 0 when the scheme cannot use the layout (x8 needs E2M1 elements: NVFP4 or MXFP4 of any
 * granularity), k is not valid for the scheme, or on overflow. Pure and thread-safe. */
LOFP_API size_t lofp_weight_packed_bytes(const lofp_scheme *s, size_t n, size_t k,
                                         lofp_weight_layout l);

/* Converts rows-layout codes and linear scales of an [n, k] matrix of scheme s into layout l
 * (out holds lofp_weight_packed_bytes(s, n, k, l) bytes; every byte is written, padding
 * included, so equal inputs give equal buffers). For LOFP_WEIGHT_ROWS this copies the codes.
 * Returns LOFP_ERR_INVALID_ARG / LOFP_ERR_UNSUPPORTED / LOFP_ERR_SHAPE / LOFP_ERR_SIZE_OVERFLOW.
 * in and out must not overlap. Re-entrant. */
LOFP_API lofp_status lofp_weight_pack(const lofp_scheme *s, const uint8_t *codes,
                                      const uint8_t *scales, size_t n, size_t k,
                                      lofp_weight_layout l, uint8_t *out);

/* The inverse: reads a buffer of layout l and writes rows-layout codes (lofp_codes_bytes) and
 * linear scales (lofp_scales_bytes; may be NULL for LOFP_WEIGHT_ROWS, which only copies codes)
 * into caller buffers. unpack(pack(x)) == x byte for byte. Returns LOFP_OK or the errors of
 * lofp_weight_pack. packed and the outputs must not overlap. Re-entrant. */
LOFP_API lofp_status lofp_weight_unpack(const lofp_scheme *s, const uint8_t *packed, size_t n,
                                        size_t k, lofp_weight_layout l, uint8_t *codes,
                                        uint8_t *scales);

/* ------------------------------------------------------------------------------------------ */
/* Checking a GEMM result that another program computed                                        */
/* ------------------------------------------------------------------------------------------ */

/* One quantized operand [rows, k] of the product being checked, with its scales exactly as they
 * are stored (any scale layout), because the check re-reads them the ways a consumer could have
 * got wrong. The struct only points at caller memory. */
typedef struct lofp_gemm_operand {
    const lofp_scheme *scheme;  /* the operand's scheme (block, element and scale types, pad) */
    size_t rows, k;             /* logical shape; K is padded to lofp_padded_k(scheme, k) */
    const uint8_t *codes;       /* lofp_codes_bytes(scheme, rows, k) bytes, rows layout */
    const uint8_t *scales;      /* the stored scale bytes, in `layout` */
    size_t scales_bytes;        /* how many bytes `scales` holds (at least what `layout` needs) */
    lofp_layout layout;         /* the layout the scales were written in */
    float global;               /* NVFP4 encode multiplier (1 for every other scheme) */
} lofp_gemm_operand;

/* Most candidate explanations one check can try (both operands together). */
#define LOFP_GEMM_VERIFY_MAX_CANDIDATES 64
/* Bytes of one candidate's description, terminating NUL included. */
#define LOFP_GEMM_VERIFY_DESC_BYTES 128

typedef struct lofp_gemm_verify_options {
    double tol;                 /* largest relative Frobenius error that passes (default 1e-2) */
    unsigned threads;           /* worker threads for the fp64 products (0 or 1: the calling
                                   thread); the report is identical for every thread count */
} lofp_gemm_verify_options;

/* Sets tol = 1e-2 and threads = 1. Never fails; o must not be NULL. Thread-safe. */
LOFP_API void lofp_gemm_verify_options_init(lofp_gemm_verify_options *o);

/* One mistake tried: a description such as "A scales (written swizzle-128x4) read as linear"
 * and the relative error of C against the product recomputed under that mistake. */
typedef struct lofp_gemm_verify_candidate {
    char desc[LOFP_GEMM_VERIFY_DESC_BYTES];
    double error;
} lofp_gemm_verify_candidate;

/* What lofp_gemm_verify found; a plain caller-owned struct (nothing in it needs freeing). */
typedef struct lofp_gemm_verify_report {
    double error;               /* relative Frobenius error of C against the fp64 reference
                                   (infinity when C holds NaN) */
    double tol;                 /* the tolerance it was judged with */
    int ok;                     /* 1 when error <= tol; then no candidate is tried */
    size_t ncandidates;         /* candidates[0..ncandidates) in the order they were tried */
    lofp_gemm_verify_candidate candidates[LOFP_GEMM_VERIFY_MAX_CANDIDATES];
    int closest;                /* index of the first candidate with the smallest error, -1 when
                                   none was tried */
    int explained;              /* 1 when candidates[closest].error <= tol: that mistake
                                   reproduces C */
} lofp_gemm_verify_report;

/* Checks C [a->rows, b->rows] (fp32, row-major, contiguous), a GEMM result C = A · B^T computed by
 * any program from the quantized operands A [M, K] and B [N, K], against the fp64 product of the
 * dequantized operands with each NVFP4 global applied once (`lofp verify` and lofp.verify_gemm
 * are this function with argument parsing and printing around it). When the relative Frobenius
 * error exceeds opt->tol, recomputes the product under each usual mistake — either operand's
 * scales read in another layout, packed words byte-reversed or row-major, MX scales written at
 * granularity 32 and read at 128, FP4 codes in GGUF split order or with swapped nibbles, the
 * per-tensor scale not applied or applied in the wrong direction — and reports each error and the
 * closest one. opt may be NULL (the defaults).
 *
 * Returns LOFP_OK whether or not C passes (read report->ok), LOFP_ERR_INVALID_ARG (NULL pointer,
 * zero size, bad layout, non-finite or non-positive NVFP4 global), LOFP_ERR_SHAPE (A and B differ
 * in K, or K is not valid for a scheme), LOFP_ERR_BUFFER_TOO_SMALL (scales_bytes smaller than the
 * layout needs), LOFP_ERR_SIZE_OVERFLOW or LOFP_ERR_NOMEM (it allocates O((M + N) K + M N) doubles
 * of scratch and frees them before returning). On error *report is zeroed. Costs one fp64 GEMM
 * per candidate (about 30 at most). Re-entrant; the inputs are only read, only *report is
 * written. */
LOFP_API lofp_status lofp_gemm_verify(const lofp_gemm_operand *a, const lofp_gemm_operand *b,
                                      const float *c, const lofp_gemm_verify_options *opt,
                                      lofp_gemm_verify_report *report);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_GEMM_H */

/*
 * lofp_cuda.h -- the CUDA backend of lofp (liblofp_cuda): block quantize / dequantize kernels,
 * W4A16 (NVFP4 / MXFP4 weights, bf16 activations) GEMV and GEMM, and the UltraQuant FP4 KV-cache
 * store and decode attention, for NVIDIA Hopper (sm_90a; a PTX fallback runs on newer GPUs).
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *   - Pointers named d_* (and every tensor argument) are *device* pointers (cudaMalloc'ed or
 *     otherwise device-accessible). Host-side pointers are lofp_scheme, report structs and
 *     lofp_cuda_w4 / lofp_cuda_uq_attention_args descriptors, which are read during the call
 *     only.
 *   - Every function that takes a stream only *enqueues* work on it and returns without waiting,
 *     except where the comment says "synchronises". The caller must keep inputs alive and
 *     outputs untouched until that stream's work is done. A NULL stream is the legacy default
 *     stream. Results are written only by work on the given stream.
 *   - Memory is owned by the caller, except lofp_cuda_w4 (allocated by lofp_cuda_w4_prepare,
 *     released by lofp_cuda_w4_free). Nothing is cached between calls and there is no global
 *     mutable state except the one-time UltraQuant exponent table, a thread-local error text and,
 *     for the large-m routes of W4A16 and W4A8, the per-device cuBLASLt handle, memory pool and
 *     algorithm cache.
 *     Functions are thread-safe: two host threads may call any of them concurrently on different
 *     streams as long as they do not write the same buffers or share a workspace.
 *   - Semantics are the CPU library's (lofp.h, docs/FORMATS.md): quantize and the UltraQuant store
 *     are bit-identical to lofp_quantize on the same input; see docs/CUDA.md for the kernels, the
 *     layouts they write and the accuracy of the GEMM and attention paths.
 *   - Return values are lofp_status codes. Argument errors are found on the host before anything is
 *     enqueued. Failures of the CUDA runtime (no device, launch failure, out of device memory)
 *     return LOFP_CUDA_ERR_RUNTIME; lofp_cuda_last_error() then describes the failure.
 */
#ifndef LOFP_LOFP_CUDA_H
#define LOFP_LOFP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA runtime's stream handle (identical to cudaStream_t), so that this header needs no
 * CUDA include. */
typedef struct CUstream_st *lofp_cuda_stream;

/* Status returned when the CUDA runtime itself fails: lofp_status LOFP_ERR_DEVICE. */
#define LOFP_CUDA_ERR_RUNTIME LOFP_ERR_DEVICE /* kept as the CUDA backend's name for it */

/* Returns the number of CUDA devices this process can use, 0 when there is no driver, no device
 * or the runtime fails (never an error). Thread-safe. */
LOFP_API int lofp_cuda_device_count(void);

/* Returns a static, human-readable name for a status, including LOFP_CUDA_ERR_RUNTIME; never
 * NULL. */
LOFP_API const char *lofp_cuda_status_name(lofp_status s);

/* Returns the text of the last CUDA runtime failure seen by a lofp_cuda_* call on this host
 * thread ("" if none). The pointer stays valid until the next lofp_cuda_* call on this thread. */
LOFP_API const char *lofp_cuda_last_error(void);

/* ------------------------------------------------------------------------------------------ */
/* Quantize / dequantize (SPEC §2, §3)                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Bytes of device workspace one quantize call needs (a few words: the tensor amax, the first
 * non-finite index and the count of non-finite blocks). One workspace serves one call at a time. */
LOFP_API size_t lofp_cuda_workspace_bytes(void);

/* Quantizes the row-major [rows, k] tensor d_x of dtype `dt` on the device, exactly as
 * lofp_quantize() does on the CPU: the same codes (d_codes, lofp_codes_bytes() bytes) and the same
 * scales, written directly in `scale_layout` (lofp_layout_required_bytes(rows, padded_k, block,
 * layout) bytes; padding as lofp_layout_from_linear with its default pad byte). Two-level NVFP4
 * first runs a tensor-wide amax pass on the device (no host round trip) and writes the encode
 * multiplier to *d_global_out (a device float; may be NULL). For other schemes *d_global_out, when
 * given, receives 1.0. Every scheme of lofp_scheme is supported, including padding, stochastic
 * rounding, the MX scale rules, the UltraQuant butterfly or dense rotation (power-of-two padded K
 * up to 16384) and non-finite propagation; MX blocks must be at most 1024 elements.
 * Non-finite input is detected on the device: the call still returns LOFP_OK (it does not wait),
 * and lofp_cuda_quant_report() returns LOFP_ERR_NONFINITE afterwards, as lofp_quantize would.
 * d_ws is lofp_cuda_workspace_bytes() bytes of device memory, reset by this call.
 * Returns LOFP_ERR_INVALID_ARG, LOFP_ERR_SHAPE, LOFP_ERR_SIZE_OVERFLOW, LOFP_ERR_UNSUPPORTED or
 * LOFP_CUDA_ERR_RUNTIME without enqueueing anything, else LOFP_OK. Asynchronous on `stream`. */
LOFP_API lofp_status lofp_cuda_quantize(const lofp_scheme *s, lofp_dtype dt, const void *d_x,
                                        size_t rows, size_t k, lofp_layout scale_layout,
                                        uint8_t *d_codes, uint8_t *d_scales, float *d_global_out,
                                        void *d_ws, lofp_cuda_stream stream);

/* Same with the NVFP4 per-tensor encode multiplier given by the caller (a host float, finite and
 * > 0; lofp_quantize_with_global). Ignored by other schemes. Asynchronous on `stream`. */
LOFP_API lofp_status lofp_cuda_quantize_with_global(const lofp_scheme *s, lofp_dtype dt,
                                                    const void *d_x, size_t rows, size_t k,
                                                    float global_scale, lofp_layout scale_layout,
                                                    uint8_t *d_codes, uint8_t *d_scales,
                                                    void *d_ws, lofp_cuda_stream stream);

/* Synchronises `stream`, then reads the workspace of the last quantize call that used d_ws and
 * fills *rep (may be NULL): first_bad_index, nonfinite_blocks (propagation mode), logical_k and
 * padded_k. Returns LOFP_ERR_NONFINITE when the input held NaN/Inf and the scheme does not
 * propagate (NVFP4 never does), LOFP_CUDA_ERR_RUNTIME if the stream failed, else LOFP_OK. */
LOFP_API lofp_status lofp_cuda_quant_report(const void *d_ws, lofp_cuda_stream stream,
                                            lofp_quant_report *rep);

/* Dequantizes codes and scales (in `scale_layout`) to a [rows, k] tensor of dtype out_dt, as
 * lofp_dequantize(): NVFP4 (code * scale) / global with global read from *d_global (a device
 * float; NULL means 1.0), MX code * 2^(e-127) (scale 0xFF gives NaN 0x7FC00000), UltraQuant
 * byte 0 = zero, in the rotated basis. Bit-identical to the CPU for every output dtype.
 * Asynchronous on `stream`; argument errors as lofp_cuda_quantize. */
LOFP_API lofp_status lofp_cuda_dequantize(const lofp_scheme *s, const uint8_t *d_codes,
                                          const uint8_t *d_scales, lofp_layout scale_layout,
                                          const float *d_global, size_t rows, size_t k,
                                          lofp_dtype out_dt, void *d_out, lofp_cuda_stream stream);

/* ------------------------------------------------------------------------------------------ */
/* W4A16 GEMV / GEMM (SPEC §4): C[m, n] = A[m, k] . W[n, k]^T                                  */
/* ------------------------------------------------------------------------------------------ */

/* FP4 weights pre-arranged for the W4A16 kernels (docs/CUDA.md "W4A16 weight layout"): codes and
 * scales reordered tile by tile (16 rows x 128 elements of K contiguous) with the nibbles of each
 * 32-bit code word de-interleaved, and a device word holding the epilogue factor. The layout of
 * the buffers is private to lofp and may change between versions. Filled by lofp_cuda_w4_prepare,
 * owned by the caller, released with lofp_cuda_w4_free. Treat the fields as read-only. */
typedef struct lofp_cuda_w4 {
    lofp_scheme_id id;    /* LOFP_SCHEME_NVFP4 or LOFP_SCHEME_MXFP4 */
    size_t n, k;          /* weight shape [n, k]; k a multiple of 128 */
    uint8_t *d_codes;     /* n * k / 2 bytes, device */
    uint8_t *d_scales;    /* n * k / block bytes, device */
    float *d_params;      /* device: [0] = epilogue factor alpha, [1] = scale exponent bias */
    /* For the large-M route of lofp_cuda_w4a8_gemm (MXFP4 only; NULL and 0 for NVFP4): */
    uint8_t *d_row_exp;   /* n bytes, device: per row, the largest E8M0 scale byte among its
                             blocks holding a nonzero code (0 for a row of zeros) */
    int w4a8_rowwise;     /* 1 when every row casts exactly to E4M3 times one fp32 scale per row
                             (docs/CUDA.md section 2b: no 0xFF scale, every nonzero block within
                             14 binades of its row's largest, row maxima >= 7); 0 keeps every
                             lofp_cuda_w4a8_gemm call on the kernel */
} lofp_cuda_w4;

/* Pre-arranges quantized weights for lofp_cuda_w4a16_gemm: d_codes / d_scales are the output of
 * lofp_quantize / lofp_cuda_quantize for a [n, k] tensor with scheme `s` (nvfp4 with block 16 or
 * mxfp4 with block 32; linear scales), d_global the NVFP4 encode multiplier (device float; NULL
 * means 1.0; ignored for MXFP4). Allocates the device buffers of *w (cudaMalloc) and enqueues the
 * conversion on `stream`; the inputs may be freed once the stream has run it. Codes of NVFP4
 * blocks whose scale byte is 0 are zeroed (they dequantize to 0 on the CPU too). For MXFP4 it also
 * fills d_row_exp and w4a8_rowwise (the large-m route of lofp_cuda_w4a8_gemm) and, to read that
 * flag, synchronises `stream` once before returning. Needs k % 128 == 0 and n % 16 == 0 (else
 * LOFP_ERR_SHAPE). Returns LOFP_ERR_NOMEM-like failures as LOFP_CUDA_ERR_RUNTIME (*w then holds
 * nothing). */
LOFP_API lofp_status lofp_cuda_w4_prepare(const lofp_scheme *s, const uint8_t *d_codes,
                                          const uint8_t *d_scales, const float *d_global,
                                          size_t n, size_t k, lofp_cuda_w4 *w,
                                          lofp_cuda_stream stream);

/* Frees what lofp_cuda_w4_prepare allocated (synchronises the device first, since cudaFree
 * does) and zeroes *w. NULL or an already freed descriptor is a no-op. */
LOFP_API void lofp_cuda_w4_free(lofp_cuda_w4 *w);

/* C[m, n] = A[m, k] . W^T with A bf16 row-major [m, k] (d_a, 16-byte aligned), fp32 accumulation
 * and the weights dequantized exactly to bf16 (in registers, or for m > 2048 into a transient
 * stream-ordered buffer multiplied by cuBLASLt where the process can dlopen it), C row-major
 * [m, n] in fp32 or bf16 (out_dt LOFP_DTYPE_F32 / LOFP_DTYPE_BF16, RNE). m >= 1; small m takes the
 * split-K GEMV kernel, larger m the tiled GEMM (docs/CUDA.md, shape classes). The result equals
 * the fp64 product of the dequantized operands up to fp32 summation-order error. Asynchronous on
 * `stream`; deterministic for a given device (and cuBLASLt version). */
LOFP_API lofp_status lofp_cuda_w4a16_gemm(const lofp_cuda_w4 *w, const void *d_a, size_t m,
                                          lofp_dtype out_dt, void *d_c, lofp_cuda_stream stream);

/* ---- W4A8 (opt-in; docs/CUDA.md section 2b): MXFP4 weights x E4M3 activations on the FP8
 * tensor cores (compute capability 9.0 only). lofp_cuda_w4a16_gemm never routes here: W4A8 rounds
 * the activations, so it is less accurate (relative Frobenius error about 2-3 % against the fp64
 * product of the bf16 activations and the dequantized weights, where W4A16 is at about 1e-7).
 *
 * Activations are quantized per token ("rowwise"): scale_t = amax_t / 448 (fp32, RN; 1 for an
 * all-zero row, NaN for a row holding Inf or NaN, whose outputs are then NaN) and
 * code = E4M3(x / scale_t) with fp32 division RN and E4M3 round-to-nearest-even, saturating
 * (torch's (a.float() / scale).to(float8_e4m3fn), bit for bit, for finite input). Every product
 * of an activation code and a weight is exact; the routes differ only in how the sums are formed:
 *
 *   - the kernel (m below the large-m threshold, 384 at present (docs/CUDA.md section 2b),
 *     lofp_cuda_w4a8_gemm_quantized at every m, and the fallback): folds each row's 4 block
 *     scales of a 128-element K chunk into the E4M3 weights relative to the chunk's largest
 *     (exact while they span at most 11 binades), sums
 *     the chunk's 128 products in the tensor core (FP8 MMA accumulation: about 13-14 mantissa
 *     bits, truncating), multiplies that partial by the chunk scale in fp32 and accumulates in
 *     fp32; chunks where a row spans more than 11 binades take one tensor-core partial per
 *     32-element block instead. The epilogue multiplies by scale_t.
 *   - the large-m route (lofp_cuda_w4a8_gemm from the threshold on, where the weights are
 *     rowwise-exact and the process can dlopen a cuBLASLt with FP8 outer-vector scales, cuBLAS
 *     12.9 or newer): the
 *     weights are cast to E4M3 [n, k] relative to each row's largest block scale (exact while a
 *     row's nonzero blocks span at most 14 binades: lofp_cuda_w4.w4a8_rowwise) with one fp32
 *     scale per row, and one cuBLASLt FP8 GEMM sums the products (fp32 compute, its own
 *     promotion of the tensor-core partials) and applies the row and token scales in its
 *     epilogue. Where cuBLASLt is absent, refuses the GEMM, the transient memory cannot be had or
 *     the stream is being captured into a CUDA graph, the kernel runs instead.
 *
 * Workspace (caller-owned, device, 256-byte aligned, lofp_cuda_w4a8_workspace_bytes(m, k) bytes;
 * one workspace serves one call at a time): m fp32 token scales (padded to a multiple of 256
 * bytes), then the E4M3 codes [m, k] row-major. lofp_cuda_w4a8_quantize_act stores each
 * 32-element block of K permuted: byte s = 16 h + 4 c + b of a block (h 0..1, c 0..3, b 0..3)
 * holds element 8 c + 2 b + h (the order of the kernel's weight fragments in registers). After
 * lofp_cuda_w4a8_gemm the workspace holds the codes in whichever order its route used (plain K
 * order on the large-m route): reuse it through lofp_cuda_w4a8_gemm_quantized only after
 * lofp_cuda_w4a8_quantize_act. The large-m route also takes, per call, one stream-ordered
 * allocation from a per-device pool (kept reserved between calls): the E4M3 weights (n * k bytes,
 * in chunks of at most 256 MiB of rows), 4 n bytes of row scales and a 32 MiB cuBLASLt workspace.
 *
 * Returns LOFP_ERR_INVALID_ARG (NULL pointers, d_a not 16-byte aligned, d_ws not 256-byte aligned
 * or ws_bytes too small, out_dt not F32/BF16), LOFP_ERR_SHAPE (m = 0, k % 128), LOFP_ERR_UNSUPPORTED
 * (NVFP4 weights: an e2m1 x ue4m3 product needs up to 6 significant bits, e.g. 1.5 x 1.875 =
 * 101101b x 2^-4, and E4M3 has 4, so the block scale cannot be folded into an E4M3 weight exactly;
 * kept apart, two 16-element scales per row in every k32 step would halve the tensor rate; or a
 * device that is not compute capability 9.0) or LOFP_CUDA_ERR_RUNTIME
 * without enqueueing anything, else LOFP_OK. Asynchronous on `stream`; deterministic for a given
 * device, route (fixed by m, the weights and the process's cuBLASLt) and cuBLASLt version;
 * thread-safe as the rest of this header (one workspace per concurrent call). */

/* Bytes of W4A8 workspace for m tokens of k activations (0 when m or k is 0 or too large). */
LOFP_API size_t lofp_cuda_w4a8_workspace_bytes(size_t m, size_t k);

/* C[m, n] = A[m, k] . W^T: quantizes d_a (bf16 row-major [m, k], 16-byte aligned) into d_ws,
 * then runs the FP8 GEMM on `stream` -- the large-m route or the kernel (the two calls below)
 * as described above; C row-major [m, n] in fp32 or bf16 (RNE). w must be MXFP4
 * (lofp_cuda_w4_prepare). */
LOFP_API lofp_status lofp_cuda_w4a8_gemm(const lofp_cuda_w4 *w, const void *d_a, size_t m,
                                         lofp_dtype out_dt, void *d_c, void *d_ws, size_t ws_bytes,
                                         lofp_cuda_stream stream);

/* What a W4A8 workspace holds for lofp_cuda_w4a8_gemm_reuse: nothing reusable, the codes of d_a
 * in the kernel's permuted order (lofp_cuda_w4a8_quantize_act, or a call that ran the kernel),
 * or in plain K order (a call that ran the large-m route). */
#define LOFP_W4A8_WS_EMPTY 0
#define LOFP_W4A8_WS_KERNEL 1
#define LOFP_W4A8_WS_PLAIN 2

/* lofp_cuda_w4a8_gemm for several weights applied to one activation (a transformer's q / k / v
 * or gate / up projections): the same arguments and results, bit for bit, and *ws_state says
 * what d_ws holds for d_a. On entry LOFP_W4A8_WS_EMPTY, or the state a previous call returned for
 * the same d_a, m and k on the same stream, with d_a and d_ws unchanged since (the caller
 * vouches for this; the library cannot check it). Where the route this call takes reads the
 * order d_ws holds, the activation quantize is skipped. On LOFP_OK *ws_state is what d_ws holds
 * now; on any other return after the arguments were checked it is LOFP_W4A8_WS_EMPTY (the
 * workspace may be partly rewritten). LOFP_ERR_INVALID_ARG also for a NULL ws_state or an
 * unknown state. Thread-safety as lofp_cuda_w4a8_gemm (one workspace per concurrent call). */
LOFP_API lofp_status lofp_cuda_w4a8_gemm_reuse(const lofp_cuda_w4 *w, const void *d_a, size_t m,
                                               lofp_dtype out_dt, void *d_c, void *d_ws,
                                               size_t ws_bytes, int *ws_state,
                                               lofp_cuda_stream stream);

/* The first half: bf16 [m, k] -> token scales and E4M3 codes in d_ws (layout above). */
LOFP_API lofp_status lofp_cuda_w4a8_quantize_act(const void *d_a, size_t m, size_t k, void *d_ws,
                                                 size_t ws_bytes, lofp_cuda_stream stream);

/* The second half: the kernel's GEMM on activations already quantized into d_ws by
 * lofp_cuda_w4a8_quantize_act (k = w->k), e.g. to reuse one quantization for several weight
 * matrices. Always the kernel, at every m. */
LOFP_API lofp_status lofp_cuda_w4a8_gemm_quantized(const lofp_cuda_w4 *w, size_t m,
                                                   lofp_dtype out_dt, void *d_c, const void *d_ws,
                                                   size_t ws_bytes, lofp_cuda_stream stream);

/* ------------------------------------------------------------------------------------------ */
/* UltraQuant FP4 KV cache (SPEC §5)                                                           */
/* ------------------------------------------------------------------------------------------ */

/* Bytes of one (token, KV head) slot: [K codes D/2][K scales D/32][V codes D/2][V scales D/32]. */
LOFP_API size_t lofp_cuda_uq_slot_bytes(size_t head_dim);

/* Writes K and V of `tokens` tokens into the paged cache d_cache (uint8 [num_blocks, block_size,
 * hk, slot_bytes], contiguous): token t goes to slot d_slot_mapping[t] (int64, device; block =
 * slot / block_size, position = slot % block_size; entries < 0 are skipped and their slots left
 * untouched). d_k and d_v are [tokens, hk, head_dim] of dtype dt (f32, bf16 or f16). K is rotated
 * with the butterfly Hadamard and encoded, V encoded unrotated, with the UltraQuant constant s->c
 * (s must be an "ultraquant" scheme; s->rotate and s->hadamard are ignored: K always uses the
 * butterfly, as vLLM's store kernel does). Bit-identical to lofp_quantize on each K row (rotate
 * on) and V row (rotate off). head_dim a power of two, 32..1024. Asynchronous on `stream`. */
LOFP_API lofp_status lofp_cuda_uq_store(const lofp_scheme *s, lofp_dtype dt, const void *d_k,
                                        const void *d_v, size_t tokens, size_t hk,
                                        size_t head_dim, const int64_t *d_slot_mapping,
                                        uint8_t *d_cache, size_t block_size,
                                        lofp_cuda_stream stream);

/* Arguments of lofp_cuda_uq_decode_attention (one query token per sequence). */
typedef struct lofp_cuda_uq_attention_args {
    const void *d_q;            /* [batch, hq, head_dim] query, dtype q_dtype (f32 or bf16) */
    lofp_dtype q_dtype;
    const uint8_t *d_cache;     /* the store's paged cache [num_blocks, block_size, hk, slot],
                                   16-byte aligned (else LOFP_ERR_INVALID_ARG) */
    const int32_t *d_block_tables; /* [batch, max_blocks_per_seq] physical block numbers */
    size_t max_blocks_per_seq;
    const int32_t *d_seq_lens;  /* [batch] context length of each sequence (>= 0) */
    size_t max_seq_len;         /* host-side upper bound of d_seq_lens (sizes the split) */
    size_t batch, hq, hk, head_dim, block_size;
    float scale;                /* softmax scale applied to q.k (e.g. head_dim^-0.5) */
    const float *d_sinks;       /* [hq] per-head sink logits (denominator only), or NULL */
    int num_splits;             /* split-K partitions of the context; 0 = chosen from the shape */
    float *d_out;               /* [batch, hq, head_dim] fp32 output */
    void *d_workspace;          /* lofp_cuda_uq_attention_workspace_bytes() bytes, device */
} lofp_cuda_uq_attention_args;

/* Device workspace bytes the decode attention needs for these arguments (the split-K partials);
 * reads the shape fields and num_splits only. */
LOFP_API size_t lofp_cuda_uq_attention_workspace_bytes(const lofp_cuda_uq_attention_args *a);

/* Decode attention over the UltraQuant cache, per query head h (KV head h / (hq / hk)):
 * q_rot = q @ H^T (dense Sylvester matrix, sequential fp32 sum, as lofp_hadamard_dense), cast to
 * E4M3 (RNE, saturating at 448 -- the reference gives NaN past 464), s_n = (q_rot . k_n) * scale
 * over the dequantized rotated keys, softmax with the optional sink logit in the denominator only,
 * out = sum_n p_n v_n. Split-K over the context with a merge pass; GQA; paged block tables;
 * sequences of length 0 give zeros. Agrees with an fp32 CPU reference to about 1e-6 relative
 * (max |diff| / max |out|; SPEC §5 allows 1e-4). head_dim 64, 128 or 256; hq a multiple of hk
 * with hq / hk <= 8. Asynchronous on `stream`. */
LOFP_API lofp_status lofp_cuda_uq_decode_attention(const lofp_cuda_uq_attention_args *a,
                                                   lofp_cuda_stream stream);

/* ---- Checkpoint layouts (docs/CUDA.md, "Checkpoint layouts") ----
 * The weight layouts ModelOpt, compressed-tensors and gpt-oss store are lofp's own: codes [N, K/2]
 * with element 2i in the low nibble (gpt-oss `*_blocks` [E, N, K/32, 16] are the same bytes as
 * [E*N, K/2]), linear UE4M3 or E8M0 scales [N, K/block]. They differ only in the direction of the
 * NVFP4 per-tensor scale: compressed-tensors' `weight_global_scale` is lofp's encode multiplier,
 * ModelOpt's `weight_scale_2` (and torchao's per_tensor_scale, GGUF's `.scale`) the decode
 * multiplier amax / 2688. The two functions below take either, so a loader passes a checkpoint's
 * tensors straight through. */

/* Direction of the NVFP4 per-tensor scale given in d_global. */
typedef enum lofp_global_dir {
    LOFP_GLOBAL_ENCODE = 0, /* lofp / compressed-tensors: value = code * scale / global */
    LOFP_GLOBAL_DECODE = 1  /* ModelOpt weight_scale_2: value = code * fl(scale * global) */
} lofp_global_dir;

/* lofp_cuda_dequantize with the direction of *d_global stated. ENCODE is lofp_cuda_dequantize.
 * DECODE gives ModelOpt's dequantization bit for bit: bf16/f16/f32 of fl(e2m1 * fl(s * d)) with
 * s the UE4M3 scale and d = *d_global (NULL means 1.0). Ignored for schemes other than NVFP4. */
LOFP_API lofp_status lofp_cuda_dequantize_dir(const lofp_scheme *s, const uint8_t *d_codes,
                                              const uint8_t *d_scales, lofp_layout scale_layout,
                                              const float *d_global, lofp_global_dir dir,
                                              size_t rows, size_t k, lofp_dtype out_dt, void *d_out,
                                              lofp_cuda_stream stream);

/* lofp_cuda_w4_prepare with the direction of *d_global stated. With DECODE the epilogue factor is
 * 2^7 * d (exact) instead of 2^7 / global, so the product is code * scale * d accumulated in fp32. */
LOFP_API lofp_status lofp_cuda_w4_prepare_dir(const lofp_scheme *s, const uint8_t *d_codes,
                                              const uint8_t *d_scales, const float *d_global,
                                              lofp_global_dir dir, size_t n, size_t k,
                                              lofp_cuda_w4 *w, lofp_cuda_stream stream);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_LOFP_CUDA_H */

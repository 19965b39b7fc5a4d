/*
 * checkpoint.h -- whole models in and out: convert a Hugging Face model directory (config.json,
 * one safetensors file or shards + model.safetensors.index.json, tokenizer files) or a GGUF file
 * into the checkpoint formats inference engines load, read those formats back, and import them to
 * a dense safetensors model directory. docs/CHECKPOINTS.md describes every format, the default
 * exclusions and the fused groups; ../shared facts are cited there.
 *
 * Conventions of lofp.h and io.h hold: errors come back as a status plus a one-line message in a
 * caller-owned lofp_io_error naming the file, the tensor and what is wrong; outputs are written
 * to temporary names and renamed, so a failed call leaves nothing (or the old contents) behind;
 * inputs are only ever mapped read-only.
 *
 * Thread-safety: different calls on different outputs are independent. An open lofp_ckpt may be
 * queried from several threads once opened, except that lofp_ckpt_get() results own buffers the
 * caller releases with lofp_ckpt_tensor_release().
 */
#ifndef LOFP_CHECKPOINT_H
#define LOFP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "lofp/io.h"
#include "lofp/lofp.h"
#include "lofp/method.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checkpoint formats (pinned, append-only). */
typedef enum lofp_ckpt_format {
    LOFP_CKPT_UNKNOWN = 0,
    LOFP_CKPT_DENSE = 1,              /* unquantized safetensors (a model directory or one file) */
    LOFP_CKPT_LOFP = 2,               /* files written by `lofp quantize` (T.codes / T.scales) */
    LOFP_CKPT_MODELOPT = 3,           /* NVIDIA ModelOpt: NVFP4, W4A16_NVFP4, MXFP8 */
    LOFP_CKPT_COMPRESSED_TENSORS = 4, /* nvfp4-pack-quantized, mxfp4-pack-quantized */
    LOFP_CKPT_GPT_OSS = 5,            /* gpt-oss MXFP4 experts, Hugging Face names */
    LOFP_CKPT_GGUF = 6                /* ggml / llama.cpp GGUF (MXFP4 type 39, NVFP4 type 40) */
} lofp_ckpt_format;

/* "dense", "lofp", "modelopt", "compressed-tensors", "gpt-oss", "gguf"; NULL if unknown. */
LOFP_API const char *lofp_ckpt_format_name(lofp_ckpt_format f);
/* Parses those names (and "ct" for compressed-tensors). LOFP_OK or LOFP_ERR_NOT_FOUND. */
LOFP_API lofp_status lofp_ckpt_format_from_name(const char *name, lofp_ckpt_format *out);

/* Direction of a per-tensor (global) scale as stored by a format. */
typedef enum lofp_ckpt_direction {
    LOFP_CKPT_SCALE_NONE = 0,   /* the format has none (MX, one-level) */
    LOFP_CKPT_SCALE_ENCODE = 1, /* multiplier applied before encoding: 2688/amax (compressed-tensors
                                   weight_global_scale, lofp's T.global_scale) */
    LOFP_CKPT_SCALE_DECODE = 2  /* factor applied after decoding: amax/2688 (ModelOpt
                                   weight_scale_2, GGUF <name>.scale) */
} lofp_ckpt_direction;

/* Progress of one shard (or the single file): called from the converting thread with the input
 * bytes done so far and the shard's total; done == total once at the end. */
typedef void (*lofp_ckpt_progress_fn)(void *ctx, const char *shard, size_t shard_index,
                                      size_t n_shards, size_t done, size_t total);
/* One line of information (what was left unquantized, notes); no trailing newline. */
typedef void (*lofp_ckpt_note_fn)(void *ctx, const char *line);

typedef struct lofp_ckpt_options {
    lofp_ckpt_format to;          /* convert: MODELOPT, COMPRESSED_TENSORS, GPT_OSS, GGUF, or LOFP
                                     (already-quantized inputs only) */
    const char *scheme;           /* NULL = the format's default ("nvfp4"; gpt-oss and gguf
                                     "mxfp4"); modelopt: "nvfp4", "mxfp8"; compressed-tensors:
                                     "nvfp4", "mxfp4"; gpt-oss: "mxfp4"; gguf: "mxfp4", "nvfp4" */
    lofp_profile profile;         /* whose numerics a quantizing convert uses (0 = lofp's own):
                                     MODELOPT with to = MODELOPT, COMPRESSED_TENSORS with
                                     COMPRESSED_TENSORS (nvfp4), GGML with GGUF (mxfp4; nvfp4
                                     one-level, no .scale); other pairs are refused. Fused groups
                                     share one per-tensor scale as the producer computes it.
                                     Already-quantized inputs are cast exactly whatever it is. */
    const char *const *include;   /* fnmatch globs over tensor names: quantize these even when a
                                     default leaves them out */
    size_t n_include;
    const char *const *exclude;   /* never quantize these (wins over include) */
    size_t n_exclude;
    int no_fuse_scales;           /* NVFP4: one per-tensor scale per tensor, not per fused group */
    int pad;                      /* zero-pad K to the block instead of refusing the tensor */
    const char *input_scales;     /* NVFP4: JSON file {"<module>": activation amax, ...}; with it
                                     ModelOpt writes quant_algo NVFP4 + input_scale and
                                     compressed-tensors input_global_scale; NULL = weight-only */
    unsigned jobs;                /* shards converted at once (0 or 1: one at a time) */
    unsigned threads;             /* quantize threads inside a shard (0 or 1: one) */
    unsigned shard_index;         /* with shard_count > 0: convert only slice shard_index
                                     (0-based) of shard_count of the shard list, shard files only */
    unsigned shard_count;
    int merge_index;              /* write only what follows the slices: config files, copied
                                     files, the index (every shard must be in OUT already) */
    lofp_dtype import_dtype;   /* import: BF16 (0 = BF16), F16 or F32 */
    lofp_method method;           /* how a quantizing convert picks codes and scales (lofp/method.h,
                                     docs/QUALITY.md): RTN (0, the default), MSE or GPTQ; methods
                                     other than RTN need the lofp profile */
    const char *calibration;      /* statistics file (lofp/calib.h): lofp calibrate's file or
                                     llama.cpp's imatrix.gguf, its names the input's tensor names.
                                     GPTQ needs lofp's Hessian file; MSE weighs each block's error
                                     by the file's diagonal (NULL: unweighted) */
    double damp;                  /* GPTQ damping relative to mean(diag H) (0: 0.01) */
    int act_order;                /* GPTQ: visit columns by descending diag H */
    int mse_scales;               /* GPTQ: each block's scale by the MSE search (weighted by diag H)
                                     when the sweep fixes it, instead of the scale rule */
    int requantize_unfit;         /* convert of an MXFP4 checkpoint to NVFP4: requantize the blocks
                                     that do not fit the exact cast (from their decoded values, under
                                     the tensor's per-tensor scale) instead of refusing the input */
    lofp_ckpt_progress_fn progress;
    lofp_ckpt_note_fn note;
    void *ctx;                    /* passed to progress and note */
} lofp_ckpt_options;

/* Bounds of jobs and threads (lofp_ckpt_convert refuses more; 0 means one). */
#define LOFP_CKPT_MAX_JOBS 256
#define LOFP_CKPT_MAX_THREADS 256

/* Defaults: everything zero, import_dtype BF16. */
LOFP_API void lofp_ckpt_options_init(lofp_ckpt_options *o);

/* Converts the model at `in` (a directory, one .safetensors file, or a .gguf file for
 * o->to == GGUF) into `out`. A dense `in` is quantized; an already-quantized one (ModelOpt,
 * compressed-tensors, gpt-oss, lofp files; a GGUF for o->to == GGUF) is cast exactly, never
 * requantized (docs/CHECKPOINTS.md "Exact casts in lofp convert"): codes and block scales copied,
 * the NVFP4 per-tensor scale converted, MXFP4 -> NVFP4 by the closed form (blocks that do not
 * fit: LOFP_ERR_UNSUPPORTED unless o->requantize_unfit), pairs with no exact path
 * LOFP_ERR_UNSUPPORTED naming the pair and the import-then-convert alternative. Safetensors formats: `out` is a directory that must not exist or be
 * empty (with shard_count > 0 it may hold the other slices' shards, and the temporaries that a
 * killed earlier run of this slice left there are removed; merge_index removes every leftover
 * temporary of the slices, which must all be done); the result is staged in a
 * hidden sibling directory and renamed at the end. GGUF: `out` is the .gguf file, written
 * atomically. Returns LOFP_OK; LOFP_ERR_SHAPE (K not a multiple of the block, without pad: the
 * message names the tensor and what --pad would do), LOFP_ERR_FORMAT (broken index, shard,
 * config, GGUF), LOFP_ERR_NOT_FOUND (a shard or a tensor the index names is missing),
 * LOFP_ERR_UNSUPPORTED (format/scheme pair, GGUF type, architecture), LOFP_ERR_NONFINITE,
 * LOFP_ERR_IO, LOFP_ERR_NOMEM, LOFP_ERR_INVALID_ARG. */
LOFP_API lofp_status lofp_ckpt_convert(const char *in, const char *out,
                                       const lofp_ckpt_options *o, lofp_io_error *err);

/* Removes this process's temporaries of lofp_ckpt_convert / lofp_ckpt_import: the hidden
 * staging directories (.OUT.lofp-tmp-PID) and temporary files beside every OUT this process has
 * converted or imported to, and the temporary shard files of the writers in flight. Meant for a
 * program stopped by SIGINT, SIGTERM or SIGHUP: call it from an ordinary thread (one that
 * sigwait()s for the signals, which every other thread keeps blocked), not from a signal handler
 * (it takes a lock and lists directories), then end the process. From then on conversions still
 * running in this process fail (their shard writers refuse to finish). Thread-safe. */
LOFP_API void lofp_ckpt_remove_temps(void);

/* Imports any readable checkpoint (lofp_ckpt_open) at `in` to a dense safetensors model
 * directory `out` (same rules for `out` as convert): quantized tensors dequantized as their
 * format defines (the per-tensor scale in the format's direction), in o->import_dtype; other
 * tensors copied; shards keep their names; config.json loses quantization_config;
 * hf_quant_config.json is dropped; other files are copied. gpt-oss experts come back in the
 * transformers layout ([E, in, out]). A GGUF gives one model.safetensors with the GGUF tensor
 * names (row-major shapes) and no config. o may be NULL. Errors as lofp_ckpt_open, plus
 * LOFP_ERR_MISMATCH for a missing or implausible (inverted) per-tensor scale. */
LOFP_API lofp_status lofp_ckpt_import(const char *in, const char *out,
                                      const lofp_ckpt_options *o, lofp_io_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Reading any supported checkpoint                                                           */
/* ------------------------------------------------------------------------------------------ */

typedef struct lofp_ckpt lofp_ckpt;

/* One logical tensor of a checkpoint. Quantized tensors are presented in lofp's convention
 * whatever the file's: codes [rows, kp] packed two per byte element 2i in the low nibble (FP4)
 * or one per byte, linear scales [rows, kp/block], and `global_scale` the encode multiplier that
 * lofp_dequantize() takes. The fields named stored_* say what the file holds. */
typedef struct lofp_ckpt_tensor {
    const char *name;             /* the dense model's name (e.g. model.layers.0.mlp.up_proj.weight;
                                     gpt-oss: ...experts.gate_up_proj; GGUF: blk.0.ffn_up.weight) */
    const char *file;             /* the file holding its data */
    int quantized;
    size_t ndim;
    size_t shape[LOFP_MAX_NDIM];  /* logical shape, K last (gpt-oss: [E, N, K]) */
    /* dense tensors (quantized == 0): the data as stored, or decoded to F32 for GGUF types */
    lofp_dtype dtype;
    const void *data;
    size_t nbytes;
    /* quantized tensors */
    lofp_scheme scheme;           /* nvfp4, mxfp4 or mxfp8-e4m3 (lofp's for lofp files) */
    size_t rows, k, kp;           /* kp: K as stored (padded) */
    const uint8_t *codes;
    size_t codes_bytes;
    const uint8_t *scales;
    size_t scales_bytes;
    float global_scale;           /* encode multiplier (1 without a per-tensor scale) */
    float stored_scale;           /* the per-tensor value as stored (1 when none) */
    lofp_ckpt_direction direction;/* how stored_scale is to be read */
    int gguf_split_nibbles;       /* the file stores GGUF's split nibble order / blocks */
    int transposed;               /* gpt-oss: the dense tensor is the transpose of the last two
                                     dims ([E, K, N]) */
    const char *stored_codes;     /* names in the file (NULL when not applicable) */
    const char *stored_scales;
    const char *stored_global;
    const char *stored_type;      /* GGUF: the tensor's ggml type as stored ("Q8_0", "MXFP4"), also
                                     for the types decoded to F32; NULL for other formats */
    void *owned_;                 /* buffers lofp_ckpt_tensor_release() frees */
} lofp_ckpt_tensor;

/* Opens a checkpoint directory, safetensors file or GGUF file and recognises its format (from
 * hf_quant_config.json / config.json's quantization_config, lofp metadata, the GGUF magic, else
 * dense). Validates the index (every shard present, every tensor where the index says) and every
 * file. The caller closes it with lofp_ckpt_close(). */
LOFP_API lofp_status lofp_ckpt_open(const char *path, lofp_ckpt **out, lofp_io_error *err);

/* 1 when path is a regular file (symlinks followed) whose first four bytes are the GGUF magic,
 * else 0: how lofp_ckpt_open, lofp_ckpt_convert and the command line tell a GGUF file from the
 * other formats before parsing it. A FIFO or device is never opened (reading its magic could
 * block). Thread-safe. */
LOFP_API int lofp_ckpt_is_gguf(const char *path);
LOFP_API void lofp_ckpt_close(lofp_ckpt *c);
LOFP_API lofp_ckpt_format lofp_ckpt_format_of(const lofp_ckpt *c);
/* A one-line description, e.g. "modelopt W4A16_NVFP4 (group 16), 2 shards". Owned by c. */
LOFP_API const char *lofp_ckpt_describe(const lofp_ckpt *c);
/* Number of logical tensors (a quantized tensor with its scales counts once). */
LOFP_API size_t lofp_ckpt_count(const lofp_ckpt *c);
/* Fills *t for logical tensor i (in name order): checks that the scales exist with the right
 * shape and that the per-tensor scale is present, finite, positive and plausible in the format's
 * direction (LOFP_ERR_MISMATCH naming the file and tensor otherwise). GGUF blocks are unpacked
 * into buffers owned by *t. Release with lofp_ckpt_tensor_release(). */
LOFP_API lofp_status lofp_ckpt_get(lofp_ckpt *c, size_t i, lofp_ckpt_tensor *t, lofp_io_error *err);
/* The index of the logical tensor named `name` (its dense model's name, as lofp_ckpt_get reports
 * it) in *index: LOFP_OK, or LOFP_ERR_NOT_FOUND. O(log n), decodes nothing; safe to call from
 * several threads on one open checkpoint. */
LOFP_API lofp_status lofp_ckpt_find(const lofp_ckpt *c, const char *name, size_t *index);
LOFP_API void lofp_ckpt_tensor_release(lofp_ckpt_tensor *t);
/* Dequantizes (or converts) t to `out_dt` (F32, BF16 or F16) in its logical shape (padding
 * dropped; gpt-oss left in [E, N, K] order), as the format's consumers decode it: ModelOpt
 * code * fl(scale * weight_scale_2); compressed-tensors code * fl(scale / weight_global_scale);
 * GGUF NVFP4 fl(code * scale) * <name>.scale; lofp files and MX formats lofp_dequantize(). `out`
 * holds numel * element size bytes. */
LOFP_API lofp_status lofp_ckpt_dequantize(const lofp_ckpt_tensor *t, lofp_dtype out_dt, void *out,
                                          lofp_io_error *err);

/* What `lofp verify-checkpoint ORIGINAL QUANTIZED` finds, filled by lofp_ckpt_verify and owned by
 * the caller (release with lofp_ckpt_verify_report_release). lines are the per-tensor lines as the
 * command prints them (without its indentation): "ok   NAME (SCHEME): SUMMARY" for a tensor the
 * file stores exactly as lofp's requantization gives it (left out when quiet), "FAIL ..." for one
 * that is not, cannot be read, or has no dense original of the same name. */
typedef struct lofp_ckpt_verify_report {
    char *description;   /* lofp_ckpt_describe of QUANTIZED */
    size_t n_quantized;  /* quantized tensors in QUANTIZED */
    size_t n_ok;         /* reproduced bit for bit, stored the format's standard way */
    size_t n_bad;        /* every FAIL line, unreadable tensors included */
    size_t n_lines;
    char **lines;
} lofp_ckpt_verify_report;

/* Re-quantizes every quantized tensor of `quantized` from the dense tensor of the same name in
 * `original` under every producer profile and storage variant (lofp_verify_tensor) and fills *r.
 * A tensor that does not match is a FAIL line, not an error: the return is LOFP_OK whenever both
 * checkpoints open (the command exits 1 when r->n_bad > 0). Errors: lofp_ckpt_open's for either
 * path, LOFP_ERR_NOMEM; *r is then empty. */
LOFP_API lofp_status lofp_ckpt_verify(const char *original, const char *quantized, int quiet,
                                      lofp_ckpt_verify_report *r, lofp_io_error *err);
LOFP_API void lofp_ckpt_verify_report_release(lofp_ckpt_verify_report *r);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_CHECKPOINT_H */

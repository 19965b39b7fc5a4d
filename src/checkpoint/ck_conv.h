/* ck_conv.h -- what the files of lofp_ckpt_convert (the safetensors formats) share: the plan of
 * every output tensor (ck_item) and the conversion's state (ck_conv). Internal to src/checkpoint.
 *
 * The files, in the order a conversion runs them (none calls a file above it back:
 * tests/arch/layering.py checks that no two checkpoint files call each other in a loop):
 *   ck_convert.c      the entry point: options, the input's format, the target's scheme, staging
 *   ck_conv_plan.c    what happens to every tensor of a dense input (quantize, copy, fuse, MoE)
 *   ck_conv_cast.c    an already-quantized input: the exact casts, planned and written
 *   ck_conv_write.c   the shards: per-tensor scales, quantizing, the shard writer, the threads
 *   ck_conv_config.c  config.json / hf_quant_config.json, the copied files and the index
 *   ck_stage.c        the hidden staging directory renamed over OUT (shared with import) */
#ifndef LOFP_CK_CONV_H
#define LOFP_CK_CONV_H

#include <pthread.h>

#include "ck_internal.h"
#include "ck_method.h"

enum { A_COPY, A_QUANT, A_MOE_SPLIT, A_MOE_FUSED, A_SKIP,
       A_CAST_COPY,   /* already quantized, same scheme: codes and scales copied, renamed */
       A_CAST_MX2NV   /* MXFP4 -> NVFP4 by the closed form of lofp_cast_mxfp4_to_nvfp4 */ };

typedef struct ck_item {
    int action;
    const ck_tref *src;
    size_t shard;              /* output shard */
    char *module;              /* name without ".weight" */
    long group;                /* fused group id or -1 */
    float G;                   /* NVFP4 encode multiplier (group's when fused) */
    int have_G;
    float in_amax;             /* activation amax (0: none) */
    /* MoE (gpt-oss) */
    const ck_tref **members;   /* A_MOE_SPLIT: per expert [gate, up] or [down] */
    size_t n_members, E, N, K, per_expert;
    size_t rows, k, kp;
    size_t n_out;
    char *out_name[4];
    lofp_tensor_desc out[4];
    size_t out_shape[4][LOFP_MAX_NDIM];
    size_t in_bytes;
    /* already-quantized inputs (A_CAST_*): the logical tensor of the reader and its files' tensors */
    size_t ri;
    const ck_tref *src_scales, *src_act;
    size_t c_ratio, s_ratio;   /* rows of the codes / scales tensors per logical row (gpt-oss: K/32, 1) */
    lofp_profile from_p;       /* NVFP4: whose per-tensor convention the input stores */
    float in_val;              /* NVFP4: the per-tensor value as stored (1 for one-level) */
    float act_val;             /* the activation scale to write (have_act) */
    int have_act;
    int xmax, gx;              /* A_CAST_MX2NV: largest block exponent (own, and its fused group's) */
    size_t unfit, first_unfit[8], n_first;
    size_t mismatched;         /* NV per-tensor cast: block-scale values that decode differently */
    char *lofp_key, *lofp_meta;/* --to lofp: the "lofp:<name>" metadata entry */
    char *lname;               /* the reader's (dense model's) name of a cast tensor */
} ck_item;

typedef struct ck_conv {
    const lofp_ckpt_options *o;
    ck_model m;
    lofp_ckpt_format to;
    lofp_scheme s;
    ck_method meth;            /* --method and its statistics file (ck_method.h) */
    const char *scheme_name;
    int nvfp4, mxfp8;
    ck_item *it;
    size_t n_it;
    ckj *act;                  /* activation amax per module */
    lofp_ckpt *rd;             /* already-quantized input: its reader */
    lofp_ckpt_format from;
    int have_act;              /* cast: activation scales carried over from the input */
    char *out_dir;             /* where shards go (staging or out) */
    /* parallel state */
    pthread_mutex_t mu;
    size_t next;
    lofp_status st;
    lofp_io_error err;
    size_t *shard_list;
    size_t n_shard_list;
} ck_conv;

/* ---- ck_conv_plan.c -------------------------------------------------------------------- */

/* Decides what happens to every input tensor of a dense model and plans its outputs. */
LOFP_INTERNAL lofp_status lofp_conv_plan(ck_conv *c, lofp_io_error *err);
/* Sets output j of t: a copy of name, dtype, shape[0..ndim). */
LOFP_INTERNAL void lofp_conv_set_out(ck_item *t, size_t j, const char *name, lofp_dtype dt, const size_t *shape,
                                     size_t ndim);
/* a followed by b, malloc'ed (NULL when out of memory). */
LOFP_INTERNAL char *lofp_conv_strcat2(const char *a, const char *b);
/* The component after the last dot of a module name. */
LOFP_INTERNAL const char *lofp_conv_leaf_of(const char *module);
/* The fused group (q/k/v, gate/up, ...) a leaf belongs to, or -1. */
LOFP_INTERNAL int lofp_conv_fused_group_id(const char *leaf);
/* 1 when input shard s belongs to this run's --shard slice. */
LOFP_INTERNAL int lofp_conv_shard_in_slice(const ck_conv *c, size_t s);

/* ---- ck_conv_cast.c -------------------------------------------------------------------- */

/* Whose NVFP4 per-tensor convention a format stores. */
LOFP_INTERNAL lofp_profile lofp_conv_profile_of(lofp_ckpt_format f);
/* 1 when format f holds scheme id. */
LOFP_INTERNAL int lofp_conv_format_holds(lofp_ckpt_format f, lofp_scheme_id id);
/* Plans the exact casts of an already-quantized input (c->rd open). */
LOFP_INTERNAL lofp_status lofp_conv_plan_cast(ck_conv *c, const char *in, lofp_io_error *err);
/* Before anything is written: per-tensor scales of the cast outputs and the MX -> NV blocks that
 * do not fit. */
LOFP_INTERNAL lofp_status lofp_conv_cast_scales(ck_conv *c, const char *in, lofp_io_error *err);
/* Writes one cast item's outputs (indices base.. of the shard writer). */
/* Copies input tensor r unchanged into output tensor idx of w, in row chunks (ck_conv_cast.c). */
LOFP_INTERNAL lofp_status lofp_conv_copy_tensor(ck_conv *c, const ck_tref *r, st_writer *w, size_t idx, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_conv_cast_item(ck_conv *c, ck_item *t, st_writer *w, size_t base, lofp_io_error *err);

/* ---- ck_conv_write.c ------------------------------------------------------------------- */

/* The NVFP4 per-tensor scale of every fused group a converted shard needs (first pass). */
LOFP_INTERNAL lofp_status lofp_conv_group_scales(ck_conv *c, lofp_io_error *err);
/* Converts the shards of this run's slice into c->out_dir, o->jobs at a time. */
LOFP_INTERNAL lofp_status lofp_conv_run_shards(ck_conv *c, lofp_io_error *err);

/* ---- ck_conv_config.c ------------------------------------------------------------------ */

/* Writes the config files, copies the other files and writes the index into dir. */
LOFP_INTERNAL lofp_status lofp_conv_finalize(ck_conv *c, const char *dir, lofp_io_error *err);
/* --shard: records in dir what this slice is (OUT/.lofp-slice-I-of-N.json). */
LOFP_INTERNAL lofp_status lofp_conv_record_slice(ck_conv *c, const char *dir, lofp_io_error *err);
/* --merge-index, before anything is written: every shard is in dir, listed by a slice record made
 * with this merge's --to, --scheme and options, all records of one N. */
LOFP_INTERNAL lofp_status lofp_conv_check_slices(ck_conv *c, const char *dir, lofp_io_error *err);
/* Removes the slice records of dir (after a merge). */
LOFP_INTERNAL void lofp_conv_drop_slice_records(const char *dir);
/* Removes from dir the temporaries a killed earlier run left of the files this run writes: a
 * slice's shards and record, or for --merge-index (every slice done) every lofp temporary. */
LOFP_INTERNAL void lofp_conv_drop_stale_temps(ck_conv *c, const char *dir);

#endif

/* ck_internal.h -- declarations shared by the src/checkpoint/ files. Not installed. */
#ifndef LOFP_CK_INTERNAL_H
#define LOFP_CK_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "io/atomic.h"
#include "io/sbuf.h"
#include "lofp/checkpoint.h"
#include "lofp/io.h"
#include "lofp/lofp.h"

/* ---- errors and small utilities (ck_util.c) ------------------------------------------------ */

/* Fills err (may be NULL) with status and the formatted message; returns status. */
LOFP_INTERNAL lofp_status lofp_ck_fail(lofp_io_error *err, lofp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
LOFP_INTERNAL void lofp_ck_ok(lofp_io_error *err);


LOFP_INTERNAL char *lofp_ck_strdup(const char *s);
LOFP_INTERNAL char *lofp_ck_path(const char *dir, const char *name); /* dir/name, malloc'ed */
LOFP_INTERNAL int lofp_ck_ends_with(const char *s, const char *suffix);
LOFP_INTERNAL int lofp_ck_is_dir(const char *path);
LOFP_INTERNAL int lofp_ck_exists(const char *path);
/* Reads a whole file into a malloc'ed, NUL-terminated buffer. */
LOFP_INTERNAL lofp_status lofp_ck_read_file(const char *path, char **out, size_t *len, lofp_io_error *err);
/* Atomic writes are io's (io/atomic.h: lofp_write_bytes_atomic, lofp_atomic_open/commit). */
/* mkdir -p */
LOFP_INTERNAL lofp_status lofp_ck_mkdirs(const char *path, lofp_io_error *err);
/* rm -rf of a directory lofp created */
LOFP_INTERNAL void lofp_ck_rmtree(const char *path);
LOFP_INTERNAL int lofp_ck_glob_match(const char *pattern, const char *name);
LOFP_INTERNAL int lofp_ck_globs_match(const char *const *globs, size_t n, const char *name);
/* Floating elements are read as fp32 with lofp_dtype_load_f32 / lofp_dtype_to_f32 (lofp.h). */

/* ---- JSON tree (ck_json.c) -------------------------------------------------------------- */

enum { CKJ_NULL, CKJ_BOOL, CKJ_NUM, CKJ_STR, CKJ_ARR, CKJ_OBJ };
typedef struct ckj {
    int type;
    int b;
    char *s;      /* STR: the decoded string; NUM: the source text */
    size_t slen;
    double d;     /* NUM: the value */
    char *key;    /* member of an object: its key */
    struct ckj **items;
    size_t n, cap;
} ckj;

/* Parses text with io's lenient JSON mode (io/json.h: duplicate keys refused) into a new tree;
 * NULL with a message "JSON error at byte N: ..." in msg. */
LOFP_INTERNAL ckj *lofp_ckj_parse(const char *text, size_t len, char *msg, size_t msg_cap);
LOFP_INTERNAL void lofp_ckj_free(ckj *j);
LOFP_INTERNAL ckj *lofp_ckj_get(const ckj *obj, const char *key);
LOFP_INTERNAL const char *lofp_ckj_str(const ckj *j);
LOFP_INTERNAL int lofp_ckj_num(const ckj *j, double *out);
LOFP_INTERNAL int lofp_ckj_int(const ckj *j, long long *out);
LOFP_INTERNAL ckj *lofp_ckj_new_obj(void);
LOFP_INTERNAL ckj *lofp_ckj_new_arr(void);
LOFP_INTERNAL ckj *lofp_ckj_new_null(void);
LOFP_INTERNAL ckj *lofp_ckj_new_bool(int b);
LOFP_INTERNAL ckj *lofp_ckj_new_str(const char *s);
LOFP_INTERNAL ckj *lofp_ckj_new_int(long long v);
LOFP_INTERNAL ckj *lofp_ckj_new_f32(float v);
LOFP_INTERNAL ckj *lofp_ckj_new_raw_num(const char *text);
LOFP_INTERNAL ckj *lofp_ckj_str_array(const char *const *s, size_t n);
LOFP_INTERNAL int lofp_ckj_push(ckj *arr, ckj *v);           /* takes v (freed on failure) */
LOFP_INTERNAL int lofp_ckj_set(ckj *obj, const char *key, ckj *v); /* replaces or appends; takes v */
LOFP_INTERNAL void lofp_ckj_del(ckj *obj, const char *key);
LOFP_INTERNAL int lofp_ckj_append(ckj *obj, const char *key, ckj *v); /* no duplicate check */
LOFP_INTERNAL int lofp_ckj_dump(lofp_sbuf *b, const ckj *j, int indent); /* indent < 0: one line */
LOFP_INTERNAL ckj *lofp_ckj_read(const char *path, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_ckj_write(const char *path, const ckj *j, lofp_io_error *err);

/* ---- GGUF (ck_gguf.c) ------------------------------------------------------------------- */

enum {
    GG_F32 = 0, GG_F16 = 1, GG_Q4_0 = 2, GG_Q4_1 = 3, GG_Q5_0 = 6, GG_Q5_1 = 7, GG_Q8_0 = 8,
    GG_BF16 = 30, GG_MXFP4 = 39, GG_NVFP4 = 40
};
enum { GGV_U8 = 0, GGV_I8, GGV_U16, GGV_I16, GGV_U32, GGV_I32, GGV_F32, GGV_BOOL, GGV_STRING,
       GGV_ARRAY, GGV_U64, GGV_I64, GGV_F64, GGV_COUNT_ };

typedef struct gg_kv {
    char *key;
    uint32_t type;
    const uint8_t *raw;   /* the value's bytes in the file (after the type word) */
    size_t raw_len;
    uint32_t arr_type;    /* ARRAY: element type */
    uint64_t arr_n;       /* ARRAY: element count */
} gg_kv;

typedef struct gg_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[4];       /* ggml order: ne[0] is the innermost (K) */
    uint32_t type;
    uint64_t offset;      /* relative to the data section */
    size_t nbytes;
    const uint8_t *data;
} gg_tensor;

typedef struct gg_file {
    uint32_t version;
    uint32_t alignment;
    gg_kv *kv;
    size_t n_kv;
    gg_tensor *t;
    size_t n_t;
    const uint8_t *base;
    size_t size;
    size_t data_start;
    void *map;
    size_t map_len;
    char *display;
    gg_tensor **t_by_name; /* the tensors in name order (lofp_gg_find_tensor) */
    gg_kv **kv_by_key;     /* the pairs in key order (lofp_gg_find_kv); NULL with fewer than two */
} gg_file;

/* Block size and bytes per block of a ggml type; 0 when unknown. Name ("Q4_1") or NULL. */
LOFP_INTERNAL int lofp_gg_type_info(uint32_t type, uint32_t *blck, uint32_t *bytes);
LOFP_INTERNAL const char *lofp_gg_type_name(uint32_t type);
/* Parses a GGUF held in memory (no copy; names are copied). `name` is used in messages. */
LOFP_INTERNAL lofp_status lofp_gg_parse(const uint8_t *buf, size_t len, const char *name, gg_file *g,
                                   lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_gg_open(const char *path, gg_file *g, lofp_io_error *err);

/* The target of `convert --to gguf` from the options (ck_gguf_llama.c): the scheme (mxfp4, the
 * default, or nvfp4; the options' profile applied, their thread count set), whether it is NVFP4,
 * whether that NVFP4 is two-level (a per-tensor .scale beside the weight; --profile ggml is
 * one-level, as llama.cpp's quantizer), and the GGUF type, elements and bytes of one GGUF block.
 * Returns LOFP_OK, or LOFP_ERR_UNSUPPORTED (another scheme) / the profile's error with *err set. */
typedef struct gg_target {
    lofp_scheme s;
    int nv, two;
    uint32_t blk, type, bytes;
} gg_target;
LOFP_INTERNAL lofp_status lofp_gg_target(const lofp_ckpt_options *o, gg_target *t, lofp_io_error *err);
LOFP_INTERNAL void lofp_gg_close(gg_file *g);
/* Lookups by exact name, O(log n) (binary search over the orders lofp_gg_parse keeps); NULL when absent. */
LOFP_INTERNAL const gg_kv *lofp_gg_find_kv(const gg_file *g, const char *key);
LOFP_INTERNAL const gg_tensor *lofp_gg_find_tensor(const gg_file *g, const char *name);
/* Scalar KV as a number (integer and float types); 0 when not a scalar number. */
LOFP_INTERNAL int lofp_gg_kv_num(const gg_kv *kv, double *out);
/* String KV: pointer/len into the file; 0 when not a string. */
LOFP_INTERNAL int lofp_gg_kv_str(const gg_kv *kv, const char **s, size_t *len);
/* Rows of `ne[0]` values each: decodes a tensor of a type lofp reads (F32, F16, BF16, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, NVFP4 without its .scale) to fp32. LOFP_ERR_UNSUPPORTED for
 * other types. */
LOFP_INTERNAL lofp_status lofp_gg_decode(const gg_tensor *t, float *out);
LOFP_INTERNAL int lofp_gg_can_decode(uint32_t type);

/* A GGUF writer: KV pairs as raw records, tensor infos, then the data streamed in order. */
typedef struct gg_out_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    size_t nbytes;
} gg_out_tensor;
typedef struct gg_writer gg_writer;
/* kv_blob holds the KV records (key, type, value) back to back, n_kv of them. */
LOFP_INTERNAL lofp_status lofp_gg_writer_open(const char *path, uint32_t alignment, const void *kv_blob,
                                         size_t kv_len, uint64_t n_kv, const gg_out_tensor *t,
                                         size_t n_t, gg_writer **out, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_gg_writer_put(gg_writer *w, const void *data, size_t n, lofp_io_error *err);
/* Pads after a tensor's data (call after each tensor's bytes are all put). */
LOFP_INTERNAL lofp_status lofp_gg_writer_end_tensor(gg_writer *w, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_gg_writer_finish(gg_writer *w, lofp_io_error *err);
LOFP_INTERNAL void lofp_gg_writer_abort(gg_writer *w);
/* KV record builders appended to a buffer */
LOFP_INTERNAL void lofp_gg_put_kv_raw(lofp_sbuf *b, const gg_kv *kv);
LOFP_INTERNAL void lofp_gg_put_kv_u32(lofp_sbuf *b, const char *key, uint32_t v);
LOFP_INTERNAL void lofp_gg_put_kv_f32(lofp_sbuf *b, const char *key, float v);
LOFP_INTERNAL void lofp_gg_put_kv_bool(lofp_sbuf *b, const char *key, int v);
LOFP_INTERNAL void lofp_gg_put_kv_str(lofp_sbuf *b, const char *key, const char *s);
LOFP_INTERNAL void lofp_gg_put_string(lofp_sbuf *b, const char *s, size_t n);

/* ---- streaming safetensors writer (ck_writer.c) -------------------------------------------- */

/* The shard writer: the header is written from the descriptions first (their data pointers are
 * ignored), then each tensor's bytes in the same order with lofp_st_writer_put_at(), then
 * lofp_st_writer_finish() syncs and renames. Any failure removes the temporary file. */
typedef struct st_writer st_writer;
LOFP_INTERNAL lofp_status lofp_st_writer_open(const char *path, const lofp_tensor_desc *t, size_t n,
                                         const lofp_metadata_entry *meta, size_t n_meta,
                                         st_writer **out, lofp_io_error *err);
/* Appends n bytes to tensor i's data (its bytes must be put in order, in one or more calls). */
LOFP_INTERNAL lofp_status lofp_st_writer_put_at(st_writer *w, size_t i, const void *data, size_t n,
                                           lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_st_writer_finish(st_writer *w, lofp_io_error *err);
LOFP_INTERNAL void lofp_st_writer_abort(st_writer *w);

/* ---- model directories (ck_model.c) -------------------------------------------------------- */

typedef struct ck_shard {
    char *name;            /* file name inside the directory */
    char *path;
    lofp_file *f;
    size_t bytes;          /* file size */
} ck_shard;

typedef struct ck_tref {
    const char *name;
    size_t shard;
    const lofp_tensor_info *ti;
} ck_tref;

typedef struct ck_model {
    char *path;            /* as given */
    char *dir;             /* the directory (the file's for a single file) */
    int is_dir;
    ckj *config;           /* config.json or NULL */
    ckj *hf_quant;         /* hf_quant_config.json or NULL */
    char *index_name;      /* "model.safetensors.index.json" or NULL */
    ckj *index;
    ck_shard *shards;
    size_t n_shards;
    ck_tref *t;            /* sorted by name */
    size_t n_t;
    char **others;         /* other entries of the directory to copy (files and folders) */
    size_t n_others;
    char **unlisted;       /* .safetensors files the index does not name (also in others) */
    size_t n_unlisted;
} ck_model;

LOFP_INTERNAL lofp_status lofp_ck_model_open(const char *path, ck_model *m, lofp_io_error *err);
LOFP_INTERNAL void lofp_ck_model_close(ck_model *m);
LOFP_INTERNAL const ck_tref *lofp_ck_model_find(const ck_model *m, const char *name);
/* Writes OUT/<index_name> from the shards' tensors (name -> shard) with metadata.total_size. */
LOFP_INTERNAL lofp_status lofp_ck_write_index(const char *path, const char *const *shard_names,
                                         const char *const *shard_paths, size_t n,
                                         lofp_io_error *err);

/* Staging of a model directory: `out` must not exist or be empty; the work goes to a hidden
 * sibling directory that lofp_ck_stage_commit renames over `out` (ck_stage.c). */
LOFP_INTERNAL lofp_status lofp_ck_stage_dir(const char *out, char **stage, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_ck_stage_commit(char *stage, const char *out, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_ck_convert_gguf(const char *in, const char *out, const lofp_ckpt_options *o,
                                          lofp_io_error *err);

/* ---- profiles on convert (ck_profile.c) ---------------------------------------------------- */

/* Applies o->profile to the scheme a quantizing convert to format `to` uses: refuses a profile
 * that does not go with `to` (each profile is the numerics of the tool writing one format) or has
 * no such scheme, with a message that says what to use; for ggml NVFP4 makes it one-level. Does
 * nothing for LOFP_PROFILE_LOFP. */
LOFP_INTERNAL lofp_status lofp_ck_profile_scheme(const lofp_ckpt_options *o, lofp_ckpt_format to,
                                                 lofp_scheme *s, lofp_io_error *err);
/* max |x| over n values of dtype dt; NaN (and *first_bad set, when not NULL) at the first
 * non-finite value. */
LOFP_INTERNAL float lofp_ck_amax(lofp_dtype dt, const void *x, size_t n, size_t *first_bad);

/* ---- what a conversion reads and writes, temporaries on signals (ck_paths.c) --------------- */

/* Opens `path` for reading if it is a regular file (directly or through links): FIFOs, devices
 * and sockets are refused without blocking. Returns the fd, or -1 with err set (ck_util.c). */
LOFP_INTERNAL int lofp_ck_open_regular(const char *path, lofp_io_error *err);
/* "a FIFO", "a character device", ... for a st_mode that is not a regular file (messages). */
LOFP_INTERNAL const char *lofp_ck_kind_of(unsigned mode);
/* The input of a conversion, import or open: an existing directory or regular file, never a
 * FIFO, device or socket (checked before anything opens it). */
LOFP_INTERNAL lofp_status lofp_ck_check_input(const char *path, lofp_io_error *err);
/* Copies one entry of a model directory that a conversion carries over (a file, a link to a
 * regular file anywhere, a real sub-folder); special files and links to directories refused. */
LOFP_INTERNAL lofp_status lofp_ck_copy_other(const char *src, const char *dst, lofp_io_error *err);
/* Before a convert (import = 0) or an import (import = 1) reads anything: OUT non-empty, not a
 * symbolic link, not the input nor inside it nor containing it; option bounds; remembers OUT's
 * directories for lofp_ckpt_remove_temps(). */
LOFP_INTERNAL lofp_status lofp_ck_preflight(const char *in, const char *out, const lofp_ckpt_options *o, int import,
                                            lofp_io_error *err);
/* After the model is open: --shard's N against the shard count, and a warning note for each
 * .safetensors file the index does not list. */
LOFP_INTERNAL lofp_status lofp_ck_model_checks(const ck_model *m, const lofp_ckpt_options *o, int import,
                                               lofp_io_error *err);
/* The safetensors writers in flight, whose temporaries lofp_ckpt_remove_temps() unlinks: open,
 * finish and abort them through these (lofp_writer_open / _finish / _abort, remembered and
 * forgotten so that the removal never races them). After a signal's removal began, opening and
 * finishing fail and leave nothing. */
LOFP_INTERNAL lofp_status lofp_ck_open_writer(const char *path, const lofp_tensor_desc *t, size_t n,
                                              const lofp_metadata_entry *meta, size_t n_meta, lofp_writer **out,
                                              lofp_io_error *err);
/* Creates a temporary (dir = 0: open O_EXCL for writing, returns the fd; dir = 1: mkdir, returns
 * 0) so that lofp_ckpt_remove_temps() sees it or it removes itself; -1 with errno on failure. */
LOFP_INTERNAL int lofp_ck_create_tmp(const char *path, int dir);
LOFP_INTERNAL lofp_status lofp_ck_finish_writer(lofp_writer *w, lofp_io_error *err);
LOFP_INTERNAL void lofp_ck_abort_writer(lofp_writer *w);
/* io's atomic file replacement (io/atomic.h) registered so that lofp_ckpt_remove_temps() unlinks
 * its temporary: open, commit and abort it through these. After a signal's removal began,
 * opening and committing fail and leave nothing. */
struct lofp_atomic_file;
LOFP_INTERNAL lofp_status lofp_ck_atomic_open(struct lofp_atomic_file *a, const char *path, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_ck_atomic_commit(struct lofp_atomic_file *a, lofp_io_error *err);
LOFP_INTERNAL void lofp_ck_atomic_abort(struct lofp_atomic_file *a);

/* ---- the reader of quantized formats (ck_read.c) ------------------------------------------ */

LOFP_INTERNAL lofp_ckpt_format lofp_ck_detect(const ck_model *m, char *why, size_t cap);

#endif

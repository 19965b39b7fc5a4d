/* ck_convert.c -- lofp_ckpt_convert for the safetensors formats (ModelOpt, compressed-tensors,
 * gpt-oss): plan every output tensor from the input headers (nothing is read yet, so a tensor
 * that cannot be converted is refused before anything is written), compute one NVFP4 per-tensor
 * scale per fused group in a first pass over the groups' tensors wherever they are, then convert
 * shard by shard (jobs in parallel), each output shard streamed tensor by tensor, and finally the
 * config files, the copied files and the index. An input that is already quantized takes the exact
 * casts of lofp/cast.h instead (plan_cast / cast_scales): codes and block scales copied under the
 * target's names, the NVFP4 per-tensor scale converted, MXFP4 -> NVFP4 by the closed form, written
 * through the same shard writer, configs and index. docs/CHECKPOINTS.md describes the result. */
#include "ck_internal.h"
#include "lofp/cast.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    size_t out_shape[4][6];
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

static const char *const default_exclude[] = {
    "*embed*", "*lm_head*", "*norm*", "*router*", "*.mlp.gate.*", "*block_sparse_moe.gate.*",
    "*shared_expert_gate*", "*vision_tower*", "*visual*", "*vision_model*", "*embed_vision*",
    "*multi_modal_projector*", "*output_layer*", "output.*", "*proj_out.*", "mtp.*", "*conv1d*",
    "*linear_attn.in_proj_a*", "*linear_attn.in_proj_b*",
};

static int default_excluded(const char *name)
{
    return ck_globs_match(default_exclude, sizeof default_exclude / sizeof default_exclude[0], name);
}

/* leaf of a module name: the component after the last dot */
static const char *leaf_of(const char *module)
{
    const char *d = strrchr(module, '.');
    return d ? d + 1 : module;
}

static int fused_group_id(const char *leaf)
{
    static const char *const g[][3] = { { "q_proj", "k_proj", "v_proj" }, { "query", "key", "value" },
                                        { "gate_proj", "up_proj", NULL }, { "w1", "w3", NULL } };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            if (g[i][j] && strcmp(g[i][j], leaf) == 0) return i;
    return -1;
}

static lofp_dtype to_lofp_dtype(lofp_io_dtype dt)
{
    return dt == LOFP_IO_BF16 ? LOFP_DTYPE_BF16 : dt == LOFP_IO_F16 ? LOFP_DTYPE_F16 : LOFP_DTYPE_F32;
}

/* The tensor's data as something lofp_quantize reads: the mapping itself when its dtype and
 * alignment allow, else an fp32 copy (*owned set). */
static const void *quant_input(const lofp_tensor_info *ti, lofp_dtype *dt, float **owned)
{
    *owned = NULL;
    size_t w = lofp_io_dtype_bits(ti->dtype) / 8;
    if (ti->dtype != LOFP_IO_F64 && ((uintptr_t)ti->data % w) == 0) {
        *dt = to_lofp_dtype(ti->dtype);
        return ti->data;
    }
    float *f = malloc((ti->numel ? ti->numel : 1) * sizeof *f);
    if (!f) return NULL;
    for (size_t i = 0; i < ti->numel; i++) f[i] = ck_load(ti->dtype, ti->data, i);
    *owned = f;
    *dt = LOFP_DTYPE_F32;
    return f;
}

/* A chunk of rows as lofp_quantize input: in place for F32/BF16/F16 (the row reader aligns it),
 * widened to fp32 for F64 (into *tmp, grown as needed). */
static const void *chunk_input(lofp_io_dtype dt, const lofp_row_chunk *ch, size_t k, lofp_dtype *ldt, float **tmp,
                               size_t *tmp_cap)
{
    if (dt != LOFP_IO_F64) {
        *ldt = to_lofp_dtype(dt);
        return ch->data;
    }
    size_t n = ch->rows * k;
    if (n > *tmp_cap) {
        float *nb = realloc(*tmp, n * sizeof *nb);
        if (!nb) return NULL;
        *tmp = nb;
        *tmp_cap = n;
    }
    for (size_t i = 0; i < n; i++) (*tmp)[i] = ck_load(dt, ch->data, i);
    *ldt = LOFP_DTYPE_F32;
    return *tmp;
}

/* NVFP4 per-tensor multiplier of a whole tensor, streamed in row chunks: G falls as amax grows,
 * so the tensor's G is the smallest chunk's G (exactly: G depends on amax alone). */
static lofp_status tensor_global(ck_conv *c, const ck_tref *r, float *G, lofp_io_error *err)
{
    lofp_row_reader *rr = NULL;
    lofp_status st = lofp_row_reader_open(c->m.shards[r->shard].f, r->ti, 0, &rr, err);
    if (st) return st;
    size_t k = r->ti->shape[r->ti->ndim - 1], cap = 0;
    float *tmp = NULL, g = INFINITY;
    lofp_row_chunk ch;
    while (!st && !(st = lofp_row_reader_next(rr, &ch, err)) && ch.rows) {
        lofp_dtype ldt;
        const void *x = chunk_input(r->ti->dtype, &ch, k, &ldt, &tmp, &cap);
        if (!x) { st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
        float cg = lofp_nvfp4_global_scale(ldt, x, ch.rows * k);
        if (!(cg == cg)) {
            st = ck_fail(err, LOFP_ERR_NONFINITE, "%s: tensor '%s' holds NaN or Inf (rows %zu..%zu)", c->m.shards[r->shard].name,
                         r->name, ch.row0, ch.row0 + ch.rows - 1);
            break;
        }
        if (cg < g) g = cg;
    }
    lofp_row_reader_close(rr);
    free(tmp);
    *G = g;
    return st;
}

static void set_out(ck_item *t, size_t j, const char *name, lofp_io_dtype dt, const size_t *shape, size_t ndim)
{
    t->out_name[j] = ck_strdup(name);
    memcpy(t->out_shape[j], shape, ndim * sizeof *shape);
    t->out[j].name = t->out_name[j];
    t->out[j].dtype = dt;
    t->out[j].ndim = ndim;
    t->out[j].shape = t->out_shape[j];
    if (j + 1 > t->n_out) t->n_out = j + 1;
}

static char *strcat2(const char *a, const char *b)
{
    size_t x = strlen(a), y = strlen(b);
    char *r = malloc(x + y + 1);
    if (r) { memcpy(r, a, x); memcpy(r + x, b, y + 1); }
    return r;
}

/* Output tensors of a quantized 2-D+ weight for the target format. */
static void plan_quant_outputs(ck_conv *c, ck_item *t)
{
    const lofp_tensor_info *ti = t->src->ti;
    size_t sh[6], nd = ti->ndim;
    memcpy(sh, ti->shape, nd * sizeof *sh);
    const char *m = t->module;
    char *n0 = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL;
    size_t blk = c->s.block;
    if (c->to == LOFP_CKPT_MODELOPT) {
        n0 = strcat2(m, ".weight");
        n1 = strcat2(m, ".weight_scale");
        n2 = strcat2(m, ".weight_scale_2");
        n3 = strcat2(m, ".input_scale");
    } else {
        n0 = strcat2(m, ".weight_packed");
        n1 = strcat2(m, ".weight_scale");
        n2 = strcat2(m, ".weight_global_scale");
        n3 = strcat2(m, ".input_global_scale");
    }
    if (c->mxfp8) {
        sh[nd - 1] = t->kp;
        set_out(t, 0, n0, LOFP_IO_F8_E4M3, sh, nd);
    } else {
        sh[nd - 1] = t->kp / 2;
        set_out(t, 0, n0, LOFP_IO_U8, sh, nd);
    }
    sh[nd - 1] = t->kp / blk;
    set_out(t, 1, n1, c->nvfp4 ? LOFP_IO_F8_E4M3 : LOFP_IO_U8, sh, nd);
    if (c->nvfp4) {
        size_t one = 1;
        int zero_d = c->to == LOFP_CKPT_MODELOPT;
        set_out(t, 2, n2, LOFP_IO_F32, &one, zero_d ? 0 : 1);
        if (c->act) set_out(t, 3, n3, LOFP_IO_F32, &one, zero_d ? 0 : 1);
    }
    free(n0); free(n1); free(n2); free(n3);
}

static int is_expert_leaf(const char *leaf, int *role)
{
    if (!strcmp(leaf, "gate_proj") || !strcmp(leaf, "w1")) { *role = 0; return 1; }
    if (!strcmp(leaf, "up_proj") || !strcmp(leaf, "w3")) { *role = 1; return 1; }
    if (!strcmp(leaf, "down_proj") || !strcmp(leaf, "w2")) { *role = 2; return 1; }
    return 0;
}

static lofp_status pad_message(ck_conv *c, const ck_tref *r, size_t K, lofp_io_error *err)
{
    const lofp_tensor_info *ti = r->ti;
    size_t blk = c->s.block, kp = (K + blk - 1) / blk * blk;
    char shape[128];
    size_t o = 0;
    for (size_t d = 0; d < ti->ndim && o < 100; d++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%zu", d ? ", " : "", ti->shape[d]);
    return ck_fail(err, LOFP_ERR_SHAPE,
                   "%s: tensor '%s' [%s]: K = %zu is not a multiple of the %s block (%zu). --pad would store it "
                   "zero-padded to K = %zu, which changes the model: an engine that expects %zu inputs will refuse "
                   "the tensor (lofp import drops the padding again); or keep it unquantized with --exclude '%s'",
                   c->m.shards[r->shard].name, ti->name, shape, K, c->scheme_name, blk, kp, K, ti->name);
}

/* Decides what happens to every input tensor. */
static lofp_status plan(ck_conv *c, lofp_io_error *err)
{
    const lofp_ckpt_options *o = c->o;
    c->it = calloc(c->m.n_t ? c->m.n_t : 1, sizeof *c->it);
    if (!c->it) return ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    c->n_it = c->m.n_t;
    for (size_t i = 0; i < c->m.n_t; i++) {
        ck_item *t = &c->it[i];
        const ck_tref *r = &c->m.t[i];
        const lofp_tensor_info *ti = r->ti;
        t->src = r;
        t->shard = r->shard;
        t->group = -1;
        t->in_bytes = ti->nbytes;
        t->action = A_COPY;
        int eligible = ck_is_float(ti->dtype) && ti->ndim >= 2 && ck_ends_with(ti->name, ".weight");
        int want = 0;
        if (eligible) {
            if (c->to == LOFP_CKPT_GPT_OSS) want = strstr(ti->name, ".experts.") != NULL && !default_excluded(ti->name);
            else want = !default_excluded(ti->name);
            if (ck_globs_match(o->include, o->n_include, ti->name)) want = 1;
            if (ck_globs_match(o->exclude, o->n_exclude, ti->name)) want = 0;
        }
        /* gpt-oss: the transformers bf16 layout, experts fused in 3-D tensors */
        if (c->to == LOFP_CKPT_GPT_OSS && ck_is_float(ti->dtype) && ti->ndim == 3 &&
            (ck_ends_with(ti->name, ".experts.gate_up_proj") || ck_ends_with(ti->name, ".experts.down_proj")) &&
            !ck_globs_match(o->exclude, o->n_exclude, ti->name)) {
            t->action = A_MOE_FUSED;
            t->E = ti->shape[0];
            t->K = ti->shape[1];
            t->N = ti->shape[2]; /* stored [E, in, out]: quantized along `in` after a transpose */
            t->module = ck_strdup(ti->name);
            continue;
        }
        if (!want) continue;
        t->module = ck_strdup(ti->name);
        t->module[strlen(t->module) - 7] = 0;
        if (c->to == LOFP_CKPT_GPT_OSS) {
            int role;
            if (!is_expert_leaf(leaf_of(t->module), &role)) { t->action = A_COPY; continue; }
            t->action = A_MOE_SPLIT; /* grouped below */
            continue;
        }
        size_t K = ti->shape[ti->ndim - 1];
        t->k = K;
        t->rows = ti->numel / (K ? K : 1);
        t->kp = lofp_padded_k(&c->s, K);
        if (t->kp == 0) return pad_message(c, r, K, err);
        t->action = A_QUANT;
        plan_quant_outputs(c, t);
    }
    /* gpt-oss: group per-expert tensors into stacked gate_up / down */
    if (c->to == LOFP_CKPT_GPT_OSS) {
        for (size_t i = 0; i < c->n_it; i++) {
            ck_item *t = &c->it[i];
            if (t->action != A_MOE_SPLIT || t->members) continue;
            const char *ex = strstr(t->module, ".experts.");
            size_t plen = (size_t)(ex - t->module);
            int role;
            is_expert_leaf(leaf_of(t->module), &role);
            /* collect experts 0..E-1 of this prefix and role family */
            size_t E = 0;
            for (;; E++) {
                char nm[1024];
                const char *g = role == 2 ? (strstr(t->module, ".w2") ? "w2" : "down_proj") : (strstr(t->module, ".w1") || strstr(t->module, ".w3") ? "w1" : "gate_proj");
                snprintf(nm, sizeof nm, "%.*s.experts.%zu.%s.weight", (int)plen, t->module, E, g);
                if (!ck_model_find(&c->m, nm)) break;
            }
            if (E == 0) return ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': experts are not numbered from 0", c->m.dir, t->src->name);
            size_t per = role == 2 ? 1 : 2;
            const ck_tref **mem = calloc(E * per, sizeof *mem);
            if (!mem) return ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            int w_style = strstr(t->module, ".w1") || strstr(t->module, ".w2") || strstr(t->module, ".w3");
            ck_item *owner = NULL;
            for (size_t e = 0; e < E; e++)
                for (size_t p = 0; p < per; p++) {
                    const char *leaf = role == 2 ? (w_style ? "w2" : "down_proj")
                                                 : p == 0 ? (w_style ? "w1" : "gate_proj") : (w_style ? "w3" : "up_proj");
                    char nm[1024];
                    snprintf(nm, sizeof nm, "%.*s.experts.%zu.%s.weight", (int)plen, t->module, e, leaf);
                    const ck_tref *r = ck_model_find(&c->m, nm);
                    if (!r) { free(mem); return ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: tensor '%s' is missing (its siblings are there)", c->m.dir, nm); }
                    ck_item *mi = &c->it[r - c->m.t];
                    if (mi->action != A_MOE_SPLIT) { free(mem); return ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor '%s' is excluded but its fused siblings are not", c->m.dir, nm); }
                    if (r->ti->ndim != 2 || (e + p > 0 && (r->ti->shape[0] != mem[0]->ti->shape[0] ||
                                                           r->ti->shape[1] != mem[0]->ti->shape[1]))) {
                        free(mem);
                        return ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' is not 2-D with expert 0's shape", c->m.dir, nm);
                    }
                    mem[e * per + p] = r;
                    if (!owner) owner = mi;
                    else { mi->action = A_SKIP; mi->members = (const ck_tref **)1; }
                }
            owner->members = mem;
            owner->n_members = E * per;
            owner->per_expert = per;
            owner->E = E;
            owner->N = mem[0]->ti->shape[0] * per;
            owner->K = mem[0]->ti->shape[1];
            size_t in = 0;
            for (size_t j = 0; j < E * per; j++) in += mem[j]->ti->nbytes;
            owner->in_bytes = in;
            owner->shard = mem[0]->shard;
            char base[1024];
            snprintf(base, sizeof base, "%.*s.experts.%s", (int)plen, t->module, role == 2 ? "down_proj" : "gate_up_proj");
            free(owner->module);
            owner->module = ck_strdup(base);
        }
    }
    /* gpt-oss outputs (both layouts) and block checks */
    for (size_t i = 0; i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_MOE_SPLIT && t->action != A_MOE_FUSED) continue;
        if (t->K % 32) {
            const ck_tref *r = t->action == A_MOE_SPLIT ? t->members[0] : t->src;
            return ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s': K = %zu is not a multiple of the mxfp4 block (32); gpt-oss "
                           "checkpoints cannot be padded (the engines read K from the config); exclude it with --exclude '%s'",
                           c->m.shards[r->shard].name, r->name, t->K, r->name);
        }
        t->k = t->kp = t->K;
        t->rows = t->E * t->N;
        size_t sh[4] = { t->E, t->N, t->K / 32, 16 };
        char *b = strcat2(t->module, "_blocks"), *s = strcat2(t->module, "_scales");
        set_out(t, 0, b, LOFP_IO_U8, sh, 4);
        set_out(t, 1, s, LOFP_IO_U8, sh, 3);
        free(b);
        free(s);
    }
    for (size_t i = 0; i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action == A_COPY) {
            const lofp_tensor_info *ti = t->src->ti;
            set_out(t, 0, ti->name, ti->dtype, ti->shape, ti->ndim);
        }
    }
    /* fused groups (NVFP4 only) */
    if (c->nvfp4 && !o->no_fuse_scales) {
        long next = 0;
        for (size_t i = 0; i < c->n_it; i++) {
            ck_item *t = &c->it[i];
            if (t->action != A_QUANT || t->group >= 0) continue;
            int gid = fused_group_id(leaf_of(t->module));
            if (gid < 0) continue;
            size_t plen = (size_t)(leaf_of(t->module) - t->module);
            int members = 0;
            for (size_t j = i; j < c->n_it; j++) {
                ck_item *u = &c->it[j];
                if (u->action != A_QUANT || u->group >= 0) continue;
                if (strncmp(u->module, t->module, plen) != 0 || strchr(u->module + plen, '.')) continue;
                if (fused_group_id(leaf_of(u->module)) != gid) continue;
                u->group = next;
                members++;
            }
            next++;
        }
    }
    /* activation amax */
    if (c->act)
        for (size_t i = 0; i < c->n_it; i++) {
            ck_item *t = &c->it[i];
            if (t->action != A_QUANT) continue;
            double a;
            if (!ckj_num(ckj_get(c->act, t->module), &a) || !(a > 0) || !isfinite(a))
                return ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no positive activation amax for module '%s'", o->input_scales, t->module);
            t->in_amax = (float)a;
        }
    if (c->act)
        for (size_t i = 0; i < c->n_it; i++) {
            ck_item *t = &c->it[i];
            if (t->action != A_QUANT || t->group < 0) continue;
            float mx = 0;
            for (size_t j = 0; j < c->n_it; j++)
                if (c->it[j].group == t->group && c->it[j].action == A_QUANT && c->it[j].in_amax > mx) mx = c->it[j].in_amax;
            t->in_amax = mx;
        }
    return LOFP_OK;
}

static int shard_in_slice(const ck_conv *c, size_t s)
{
    if (!c->o->shard_count) return 1;
    size_t n = c->m.n_shards, k = c->o->shard_count, i = c->o->shard_index;
    /* contiguous slices: shards [i*n/k, (i+1)*n/k) */
    return s >= i * n / k && s < (i + 1) * n / k;
}

/* ---- already-quantized inputs: exact casts (lofp/cast.h, docs/CHECKPOINTS.md "Exact casts") ---- */

static lofp_profile profile_of(lofp_ckpt_format f)
{
    return f == LOFP_CKPT_MODELOPT ? LOFP_PROFILE_MODELOPT
         : f == LOFP_CKPT_COMPRESSED_TENSORS ? LOFP_PROFILE_COMPRESSED_TENSORS : LOFP_PROFILE_LOFP;
}

/* Schemes each target holds (the first is the default when the input's own is not among them). */
static int format_holds(lofp_ckpt_format f, lofp_scheme_id id)
{
    switch (f) {
    case LOFP_CKPT_MODELOPT: return id == LOFP_SCHEME_NVFP4 || id == LOFP_SCHEME_MXFP8_E4M3;
    case LOFP_CKPT_COMPRESSED_TENSORS: return id == LOFP_SCHEME_NVFP4 || id == LOFP_SCHEME_MXFP4;
    case LOFP_CKPT_GPT_OSS: return id == LOFP_SCHEME_MXFP4;
    case LOFP_CKPT_LOFP: return id == LOFP_SCHEME_NVFP4 || id == LOFP_SCHEME_MXFP4 || id == LOFP_SCHEME_MXFP8_E4M3;
    default: return 0;
    }
}

/* The way back for a pair with no exact path. */
static lofp_status no_exact_path(ck_conv *c, const char *in, const char *tensor, const char *from_s, const char *to_s,
                                 const char *why, lofp_io_error *err)
{
    return ck_fail(err, LOFP_ERR_UNSUPPORTED,
                   "%s: tensor '%s': %s %s -> %s %s has no exact path (%s). lofp convert never requantizes a "
                   "quantized checkpoint silently; to requantize, dequantize first: lofp import %s DENSE_DIR, then "
                   "lofp convert --to %s DENSE_DIR OUT",
                   in, tensor, lofp_ckpt_format_name(c->from), from_s, lofp_ckpt_format_name(c->to), to_s, why, in,
                   lofp_ckpt_format_name(c->to));
}

/* The "lofp:<name>" metadata value of a lofp file (the fields `lofp quantize` writes; cli/qtensor.c
 * parses them), for a cast tensor of logical shape shape[0..nd) stored with kp columns. */
static char *lofp_meta_value(const lofp_scheme *s, const size_t *shape, size_t nd, size_t kp, int two_level)
{
    lofp_sbuf b = { 0 };
    lofp_sbuf_printf(&b, "scheme=%s;rounding=%s;scale_rule=%s;block=%u;layout=linear;pad_byte=0;shape=[", lofp_scheme_name(s->id),
                  lofp_rounding_name(s->rounding), lofp_scale_rule_name(s->scale_rule), s->block);
    for (size_t d = 0; d < nd; d++) lofp_sbuf_printf(&b, "%s%zu", d ? "," : "", shape[d]);
    lofp_sbuf_printf(&b, "];padded_k=%zu;two_level=%d;c=%.9g;rotate=0;hadamard=butterfly;seed=0;source_dtype=BF16;lofp_version=%s",
                  kp, two_level, (double)s->c, lofp_version());
    if (b.failed) { lofp_sbuf_free(&b); return NULL; }
    return b.p;
}

/* Output tensors of a cast item (t->k, t->kp, t->module and the logical shape known). */
static lofp_status plan_cast_outputs(ck_conv *c, ck_item *t, const char *name, const size_t *shape, size_t nd,
                                     lofp_scheme_id tid, lofp_io_error *err)
{
    size_t sh[8];
    memcpy(sh, shape, nd * sizeof *sh);
    const int nv = tid == LOFP_SCHEME_NVFP4, mx8 = tid == LOFP_SCHEME_MXFP8_E4M3;
    const size_t blk = nv ? 16 : 32;
    size_t one = 1;
    char *n0 = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL;
    if (c->to == LOFP_CKPT_GPT_OSS) {
        size_t b4[4] = { shape[0], shape[1], t->kp / 32, 16 };
        n0 = strcat2(name, "_blocks");
        n1 = strcat2(name, "_scales");
        set_out(t, 0, n0, LOFP_IO_U8, b4, 4);
        set_out(t, 1, n1, LOFP_IO_U8, b4, 3);
    } else if (c->to == LOFP_CKPT_LOFP) {
        n0 = strcat2(name, ".codes");
        n1 = strcat2(name, ".scales");
        n2 = strcat2(name, ".global_scale");
        sh[nd - 1] = mx8 ? t->kp : t->kp / 2;
        set_out(t, 0, n0, mx8 ? LOFP_IO_F8_E4M3 : LOFP_IO_U8, sh, nd);
        sh[nd - 1] = t->kp / blk;
        set_out(t, 1, n1, nv ? LOFP_IO_F8_E4M3 : LOFP_IO_F8_E8M0, sh, nd);
        if (nv) set_out(t, 2, n2, LOFP_IO_F32, &one, 0);
        lofp_scheme ls;
        lofp_scheme_preset(lofp_scheme_name(tid), &ls);
        t->lofp_key = strcat2("lofp:", name);
        t->lofp_meta = lofp_meta_value(&ls, shape, nd, t->kp, nv);
        if (!t->lofp_key || !t->lofp_meta) { free(n0); free(n1); free(n2); return ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    } else {
        const int mo = c->to == LOFP_CKPT_MODELOPT;
        n0 = strcat2(t->module, mo ? ".weight" : ".weight_packed");
        n1 = strcat2(t->module, ".weight_scale");
        n2 = strcat2(t->module, mo ? ".weight_scale_2" : ".weight_global_scale");
        n3 = strcat2(t->module, mo ? ".input_scale" : ".input_global_scale");
        sh[nd - 1] = mx8 ? t->kp : t->kp / 2;
        set_out(t, 0, n0, mx8 ? LOFP_IO_F8_E4M3 : LOFP_IO_U8, sh, nd);
        sh[nd - 1] = t->kp / blk;
        set_out(t, 1, n1, nv ? LOFP_IO_F8_E4M3 : LOFP_IO_U8, sh, nd);
        if (nv) {
            set_out(t, 2, n2, LOFP_IO_F32, &one, mo ? 0 : 1);
            if (t->have_act) set_out(t, 3, n3, LOFP_IO_F32, &one, mo ? 0 : 1);
        }
    }
    free(n0); free(n1); free(n2); free(n3);
    return LOFP_OK;
}

/* A pass over the rows of a cast item's codes and scales, `rows` logical rows at a time, through
 * row readers (memory bounded by the chunk; the readers release the pages they handed out). */
static void note_line(ck_conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_line(ck_conv *c, const char *fmt, ...)
{
    if (!c->o->note) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->o->note(c->o->ctx, line);
}

typedef lofp_status (*cast_chunk_fn)(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                                     const uint8_t *scales, void *ctx, lofp_io_error *err);

static lofp_status cast_pass(ck_conv *c, ck_item *t, cast_chunk_fn fn, void *ctx, lofp_io_error *err)
{
    size_t cbr = t->kp / 2;
    size_t R = LOFP_IO_CHUNK_BYTES / (cbr ? cbr : 1);
    if (R == 0) R = 1;
    lofp_row_reader *rc = NULL, *rs = NULL;
    lofp_status st = lofp_row_reader_open(c->m.shards[t->src->shard].f, t->src->ti, R * t->c_ratio, &rc, err);
    if (!st) st = lofp_row_reader_open(c->m.shards[t->src_scales->shard].f, t->src_scales->ti, R * t->s_ratio, &rs, err);
    lofp_row_chunk a, b;
    while (!st && !(st = lofp_row_reader_next(rc, &a, err)) && a.rows) {
        st = lofp_row_reader_next(rs, &b, err);
        if (st) break;
        size_t rows = a.rows / t->c_ratio;
        if (b.rows != rows * t->s_ratio || a.rows % t->c_ratio) {
            st = ck_fail(err, LOFP_ERR_FORMAT, "%s: tensors '%s' and '%s' disagree in rows", c->m.shards[t->src->shard].name,
                         t->src->name, t->src_scales->name);
            break;
        }
        st = fn(c, t, a.row0 / t->c_ratio, rows, a.data, b.data, ctx, err);
    }
    lofp_row_reader_close(rc);
    lofp_row_reader_close(rs);
    return st;
}

static lofp_status xmax_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                              const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)row0; (void)ctx;
    int x;
    lofp_status st = lofp_cast_mxfp4_max_exponent(codes, scales, rows, t->kp, &x);
    if (st) return ck_fail(err, st, "%s: tensor '%s': %s", c->m.shards[t->src->shard].name, t->src->name, lofp_status_name(st));
    if (x > t->xmax) t->xmax = x;
    return LOFP_OK;
}

/* The blocks the cast under t->G will not carry over exactly, by lofp_cast_mxfp4_to_nvfp4_with_global's
 * rule (non-zero codes and a NaN scale or an exponent outside UE4M3's 2^-9 .. 2^8 after the shift),
 * counted without casting. */
static lofp_status unfit_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                               const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)c; (void)ctx; (void)err;
    const size_t nb = t->kp / 32, cb = t->kp / 2;
    const int g = ilogbf(t->G);
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            uint8_t e = scales[r * nb + b];
            int x = (int)e - 127 + g;
            if (e != 0xFF && x >= -9 && x <= 8) continue;
            const uint8_t *q = codes + r * cb + b * 16;
            int nz = 0;
            for (int i = 0; i < 16; i++) nz |= (q[i] & 0x77) != 0;
            if (!nz) continue;
            if (t->n_first < 8) t->first_unfit[t->n_first++] = (row0 + r) * nb + b;
            t->unfit++;
        }
    return LOFP_OK;
}

static lofp_status used_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                              const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)c; (void)row0; (void)codes; (void)err;
    uint8_t *used = ctx;
    for (size_t i = 0; i < rows * (t->kp / 16); i++) used[scales[i] & 0x7F] = 1;
    return LOFP_OK;
}

/* Why a block of an MX -> NV cast does not fit, from its scale byte and the tensor's largest
 * exponent. */
static const char *unfit_why(uint8_t e, int xmax, char *buf, size_t cap)
{
    if (e == 0xFF) snprintf(buf, cap, "its scale is 0xFF (NaN)");
    else snprintf(buf, cap, "its scale 2^%d is %d binades below the tensor's largest 2^%d (UE4M3 spans 17)", (int)e - 127,
                  xmax - ((int)e - 127), xmax);
    return buf;
}

static lofp_status plan_cast(ck_conv *c, const char *in, lofp_io_error *err)
{
    const lofp_ckpt_options *o = c->o;
    size_t n = lofp_ckpt_count(c->rd);
    c->it = calloc(n ? n : 1, sizeof *c->it);
    if (!c->it) return ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    c->n_it = n;
    const lofp_scheme_id tid = c->s.id;
    for (size_t i = 0; i < n; i++) {
        ck_item *t = &c->it[i];
        lofp_ckpt_tensor q;
        lofp_status st = lofp_ckpt_get(c->rd, i, &q, err);
        if (st) return st;
        t->ri = i;
        t->group = -1;
        const ck_tref *r = ck_model_find(&c->m, q.quantized ? q.stored_codes : q.name);
        if (!r) { lofp_ckpt_tensor_release(&q); return ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: tensor '%s' not found", in, q.name); }
        t->src = r;
        t->shard = r->shard;
        t->in_bytes = r->ti->nbytes;
        if (!q.quantized) {
            /* norms, embeddings, lm_head, routers, biases: unchanged */
            t->action = A_COPY;
            set_out(t, 0, r->ti->name, r->ti->dtype, r->ti->shape, r->ti->ndim);
            lofp_ckpt_tensor_release(&q);
            continue;
        }
        char sname[64];
        snprintf(sname, sizeof sname, "%s", lofp_scheme_name(q.scheme.id));
        const lofp_scheme_id sid = q.scheme.id;
        const unsigned sblock = q.scheme.block;
        t->src_scales = ck_model_find(&c->m, q.stored_scales);
        t->k = q.k;
        t->kp = q.kp;
        t->rows = q.rows;
        const size_t nd = q.ndim;
        size_t shape[8];
        memcpy(shape, q.shape, nd * sizeof *shape);
        const int transposed = q.transposed;
        const float stored = q.stored_scale;
        const lofp_ckpt_direction dir = q.direction;
        const int two = q.scheme.two_level && dir != LOFP_CKPT_SCALE_NONE;
        char *name = ck_strdup(q.name);
        lofp_ckpt_tensor_release(&q);
        if (!name || !t->src_scales) { free(name); return ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: the scales of '%s' are missing", in, t->src->name); }
        /* rows of the stored tensors per logical row */
        size_t cr = t->src->ti->numel / (t->src->ti->shape[t->src->ti->ndim - 1] ? t->src->ti->shape[t->src->ti->ndim - 1] : 1);
        size_t sr = t->src_scales->ti->numel / (t->src_scales->ti->shape[t->src_scales->ti->ndim - 1] ? t->src_scales->ti->shape[t->src_scales->ti->ndim - 1] : 1);
        t->c_ratio = t->rows ? cr / t->rows : 1;
        t->s_ratio = t->rows ? sr / t->rows : 1;
        if (!t->c_ratio || !t->s_ratio || t->c_ratio * t->rows != cr || t->s_ratio * t->rows != sr) {
            lofp_status e2 = ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': codes and scales do not have whole rows", in, name);
            free(name);
            return e2;
        }
        lofp_status st2 = LOFP_OK;
        if (nd < 2 || nd > 5)
            st2 = ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions (a quantized checkpoint tensor has 2 to 5)", in, name, nd);
        else if (sblock != (sid == LOFP_SCHEME_NVFP4 ? 16u : 32u))
            st2 = no_exact_path(c, in, name, sname, c->scheme_name, "its block is not the format's (16 for NVFP4, 32 for MX)", err);
        else if (sid == tid) t->action = A_CAST_COPY;
        else if (sid == LOFP_SCHEME_MXFP4 && tid == LOFP_SCHEME_NVFP4) t->action = A_CAST_MX2NV;
        else
            st2 = no_exact_path(c, in, name, sname, c->scheme_name,
                                sid == LOFP_SCHEME_NVFP4 && tid == LOFP_SCHEME_MXFP4
                                    ? "NVFP4 block scales are not powers of two: every block would be requantized"
                                    : "the element types differ",
                                err);
        /* the target's layout of the tensor */
        if (!st2 && c->to == LOFP_CKPT_GPT_OSS &&
            (nd != 3 || t->k != t->kp || !(ck_ends_with(name, ".experts.gate_up_proj") || ck_ends_with(name, ".experts.down_proj"))))
            st2 = ck_fail(err, LOFP_ERR_UNSUPPORTED,
                          "%s: tensor '%s': gpt-oss holds MXFP4 only as the fused MoE experts <p>.experts.gate_up_proj / "
                          "down_proj [E, N, K] (unpadded); this %zu-D tensor has no place there (convert to lofp or "
                          "compressed-tensors instead)", in, name, nd);
        if (!st2 && (c->to == LOFP_CKPT_MODELOPT || c->to == LOFP_CKPT_COMPRESSED_TENSORS) &&
            (transposed || !ck_ends_with(name, ".weight")))
            st2 = ck_fail(err, LOFP_ERR_UNSUPPORTED,
                          "%s: tensor '%s': %s names quantized linears <m>.weight; %s (convert to lofp, which keeps "
                          "the tensor as it is, or import to dense and convert from there)",
                          in, name, lofp_ckpt_format_name(c->to),
                          transposed ? "gpt-oss's fused expert tensors have no layout pinned in that format"
                                     : "this tensor is not one");
        if (st2) { free(name); return st2; }
        t->module = ck_strdup(name);
        t->lname = ck_strdup(name);
        if (ck_ends_with(t->module, ".weight")) t->module[strlen(t->module) - 7] = 0;
        if (ck_globs_match(o->exclude, o->n_exclude, name))
            note_line(c, "%s: --exclude does not apply to a tensor that is already quantized (it is carried over)", name);
        if (sid == LOFP_SCHEME_NVFP4) {
            t->from_p = profile_of(c->from);
            /* one-level NVFP4 (a lofp file without a per-tensor scale) is G = 1 under lofp's formula */
            t->in_val = two ? stored : 1.0f;
            if (!two) t->from_p = LOFP_PROFILE_LOFP;
        }
        /* activation scales: ModelOpt input_scale (decode) <-> compressed-tensors input_global_scale (encode) */
        if (tid == LOFP_SCHEME_NVFP4 && (c->from == LOFP_CKPT_MODELOPT || c->from == LOFP_CKPT_COMPRESSED_TENSORS)) {
            char *an = strcat2(t->module, c->from == LOFP_CKPT_MODELOPT ? ".input_scale" : ".input_global_scale");
            t->src_act = an ? ck_model_find(&c->m, an) : NULL;
            free(an);
            if (t->src_act && (t->src_act->ti->numel != 1 || !ck_is_float(t->src_act->ti->dtype))) {
                lofp_status e2 = ck_fail(err, LOFP_ERR_FORMAT, "%s: '%s' is not one floating value", in, t->src_act->name);
                free(name);
                return e2;
            }
            if (t->src_act && c->to == LOFP_CKPT_LOFP)
                note_line(c, "%s: activation scale '%s' dropped (lofp files hold weights only)", name, t->src_act->name);
            else if (t->src_act) {
                float v = ck_load(t->src_act->ti->dtype, t->src_act->ti->data, 0);
                volatile float one = 1.0f;
                int flip = c->from != c->to;
                if (!(v > 0.0f) || !isfinite(v)) {
                    lofp_status e2 = ck_fail(err, LOFP_ERR_MISMATCH, "%s: activation scale '%s' = %g is not a finite positive number", in,
                                             t->src_act->name, (double)v);
                    free(name);
                    return e2;
                }
                t->act_val = flip ? one / v : v;
                t->have_act = 1;
                c->have_act = 1;
            }
        }
        st2 = plan_cast_outputs(c, t, name, shape, nd, tid, err);
        free(name);
        if (st2) return st2;
    }
    /* fused groups share one per-tensor scale in NVFP4 outputs (vLLM reads one weight_scale_2 per fused
     * linear): for MX -> NV the fused siblings' largest exponent */
    if (tid == LOFP_SCHEME_NVFP4 && !o->no_fuse_scales) {
        long next = 0;
        for (size_t i = 0; i < c->n_it; i++) {
            ck_item *t = &c->it[i];
            if (t->action != A_CAST_MX2NV || t->group >= 0) continue;
            int gid = fused_group_id(leaf_of(t->module));
            if (gid < 0) continue;
            size_t plen = (size_t)(leaf_of(t->module) - t->module);
            for (size_t j = i; j < c->n_it; j++) {
                ck_item *u = &c->it[j];
                if (u->action != A_CAST_MX2NV || u->group >= 0) continue;
                if (strncmp(u->module, t->module, plen) != 0 || strchr(u->module + plen, '.')) continue;
                if (fused_group_id(leaf_of(u->module)) != gid) continue;
                u->group = next;
            }
            next++;
        }
    }
    return LOFP_OK;
}

/* Before anything is written: the per-tensor scale of every NVFP4 output and, for MX -> NV, the
 * blocks that do not fit (a refusal unless --requantize-unfit). */
static lofp_status cast_scales(ck_conv *c, const char *in, lofp_io_error *err)
{
    lofp_status st = LOFP_OK;
    /* MX -> NV: largest exponent per tensor, then per fused group */
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_MX2NV) continue;
        t->xmax = INT32_MIN;
        st = cast_pass(c, t, xmax_chunk, NULL, err);
    }
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_MX2NV) continue;
        int x = t->xmax;
        if (t->group >= 0)
            for (size_t j = 0; j < c->n_it; j++) {
                ck_item *u = &c->it[j];
                if (u->action == A_CAST_MX2NV && u->group == t->group && u->xmax > x) x = u->xmax;
            }
        int g = x == INT32_MIN ? 0 : 8 - x;
        if (g > 127) g = 127;
        if (g < -126) g = -126;
        t->G = ldexpf(1.0f, g);
        t->have_G = 1;
        t->gx = x; /* kept apart: a later sibling still needs its own xmax */
    }
    /* MX -> NV: the blocks that do not fit under that scale */
    size_t total_unfit = 0, tensors_unfit = 0;
    ck_item *first = NULL;
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_MX2NV || !shard_in_slice(c, t->shard)) continue;
        st = cast_pass(c, t, unfit_chunk, NULL, err);
        if (st || !t->unfit) continue;
        total_unfit += t->unfit;
        tensors_unfit++;
        if (!first) first = t;
        /* the report: tensor, block indices and why (the scale bytes say) */
        lofp_sbuf b = { 0 };
        lofp_ckpt_tensor q;
        if (lofp_ckpt_get(c->rd, t->ri, &q, NULL) == LOFP_OK) {
            lofp_sbuf_printf(&b, "%s: %zu of %zu blocks do not fit NVFP4 under per-tensor scale 2^%d:", q.name, t->unfit,
                          t->rows * (t->kp / 32), ilogbf(t->G));
            for (size_t j = 0; j < t->n_first; j++) {
                char why[128];
                size_t bi = t->first_unfit[j], nb = t->kp / 32;
                lofp_sbuf_printf(&b, "%s block %zu (row %zu, columns %zu..%zu): %s", j ? ";" : "", bi, bi / nb, bi % nb * 32,
                              bi % nb * 32 + 31, unfit_why(q.scales[bi], t->gx, why, sizeof why));
            }
            if (t->unfit > t->n_first) lofp_sbuf_printf(&b, "; and %zu more", t->unfit - t->n_first);
            lofp_ckpt_tensor_release(&q);
        }
        if (b.p) note_line(c, "%s", b.p);
        lofp_sbuf_free(&b);
    }
    if (!st && total_unfit && !c->o->requantize_unfit) {
        lofp_ckpt_tensor q;
        char why[128] = "";
        const char *nm = "?";
        size_t bi = first->first_unfit[0];
        if (lofp_ckpt_get(c->rd, first->ri, &q, NULL) == LOFP_OK) {
            nm = q.name;
            unfit_why(q.scales[bi], first->gx, why, sizeof why);
        }
        st = ck_fail(err, LOFP_ERR_UNSUPPORTED,
                     "%s: %zu MXFP4 block(s) in %zu tensor(s) do not fit NVFP4 exactly; the first: tensor '%s' block %zu "
                     "(row %zu): %s. Nothing written. --requantize-unfit requantizes those blocks alone from their "
                     "decoded values (every other block stays exact; the notes list them)",
                     in, total_unfit, tensors_unfit, nm, bi, bi / (first->kp / 32), why);
        if (nm[0] != '?') lofp_ckpt_tensor_release(&q);
    }
    /* NV -> NV: one output value per distinct input value (fused siblings share theirs), chosen over
     * every block scale the tensors holding it use, so equal scales stay equal */
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_CAST_COPY || c->s.id != LOFP_SCHEME_NVFP4 || t->have_G) continue;
        uint8_t used[128] = { 0 };
        for (size_t j = i; !st && j < c->n_it; j++) {
            ck_item *u = &c->it[j];
            if (u->action == A_CAST_COPY && !u->have_G && lofp_f32_bits(u->in_val) == lofp_f32_bits(t->in_val) && u->from_p == t->from_p)
                st = cast_pass(c, u, used_chunk, used, err);
        }
        if (st) break;
        uint8_t vals[128];
        size_t nv = 0;
        for (int v = 0; v < 128; v++) if (used[v]) vals[nv++] = (uint8_t)v;
        float out = 0;
        lofp_cast_report rep;
        lofp_profile to_p = profile_of(c->to);
        lofp_status cs = lofp_cast_nvfp4_global(t->from_p, t->in_val, to_p, vals, nv, &out, &rep);
        if (cs) { st = ck_fail(err, cs, "%s: tensor '%s': per-tensor scale %g cannot be cast", in, t->src->name, (double)t->in_val); break; }
        float ov = t->in_val;
        lofp_profile fp = t->from_p;
        for (size_t j = i; j < c->n_it; j++) {
            ck_item *u = &c->it[j];
            if (u->action == A_CAST_COPY && !u->have_G && lofp_f32_bits(u->in_val) == lofp_f32_bits(ov) && u->from_p == fp) {
                u->G = out;
                u->have_G = 1;
                u->mismatched = rep.mismatched_scales;
                if (rep.mismatched_scales)
                    note_line(c, "%s: per-tensor scale %.9g -> %.9g: %zu block-scale value(s) decode differently (scale products "
                              "one rounding apart; no value within 16 ulps of the plain conversion keeps them all)", u->lname, (double)ov, (double)out,
                              rep.mismatched_scales);
            }
        }
    }
    return st;
}

/* ---- writing cast items ---- */

static lofp_status copy_tensor(ck_conv *c, const ck_tref *r, st_writer *w, size_t idx, lofp_io_error *err)
{
    if (r->ti->nbytes == 0) return LOFP_OK;
    if (r->ti->ndim == 0) return st_writer_put_at(w, idx, r->ti->data, r->ti->nbytes, err);
    lofp_row_reader *rr = NULL;
    lofp_status st = lofp_row_reader_open(c->m.shards[r->shard].f, r->ti, 0, &rr, err);
    lofp_row_chunk ch;
    while (!st && !(st = lofp_row_reader_next(rr, &ch, err)) && ch.rows) st = st_writer_put_at(w, idx, ch.data, ch.rows * ch.row_bytes, err);
    lofp_row_reader_close(rr);
    return st;
}

typedef struct { st_writer *w; size_t base; uint8_t *nc, *ns; } mx2nv_ctx;

static lofp_status mx2nv_chunk(ck_conv *c, ck_item *t, size_t row0, size_t rows, const uint8_t *codes,
                               const uint8_t *scales, void *ctx, lofp_io_error *err)
{
    (void)row0;
    mx2nv_ctx *m = ctx;
    lofp_status st = lofp_cast_mxfp4_to_nvfp4_with_global(codes, scales, rows, t->kp, t->G, m->nc, m->ns, NULL);
    if (st) return ck_fail(err, st, "%s: tensor '%s': cast failed (%s)", c->m.shards[t->src->shard].name, t->src->name, lofp_status_name(st));
    st = st_writer_put_at(m->w, m->base, m->nc, rows * t->kp / 2, err);
    if (!st) st = st_writer_put_at(m->w, m->base + 1, m->ns, rows * t->kp / 16, err);
    return st;
}

static lofp_status convert_cast_item(ck_conv *c, ck_item *t, st_writer *w, size_t base, lofp_io_error *err)
{
    lofp_status st = LOFP_OK;
    if (t->action == A_CAST_COPY) {
        st = copy_tensor(c, t->src, w, base, err);
        if (!st) st = copy_tensor(c, t->src_scales, w, base + 1, err);
    } else {
        size_t R = LOFP_IO_CHUNK_BYTES / (t->kp / 2 ? t->kp / 2 : 1);
        if (R == 0) R = 1;
        if (R > t->rows) R = t->rows;
        mx2nv_ctx m = { w, base, malloc(R * t->kp / 2 + 1), malloc(R * t->kp / 16 + 1) };
        if (!m.nc || !m.ns) st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        if (!st) st = cast_pass(c, t, mx2nv_chunk, &m, err);
        free(m.nc);
        free(m.ns);
    }
    if (!st && c->s.id == LOFP_SCHEME_NVFP4) {
        /* the cast's value is already in the target's convention; the MX -> NV G is lofp's encode
         * multiplier, a power of two whose reciprocal (ModelOpt's decode scale) is exact */
        volatile float one = 1.0f;
        float v = t->action == A_CAST_MX2NV && c->to == LOFP_CKPT_MODELOPT ? one / t->G : t->G;
        st = st_writer_put_at(w, base + 2, &v, 4, err);
        if (!st && t->have_act && c->to != LOFP_CKPT_LOFP) st = st_writer_put_at(w, base + 3, &t->act_val, 4, err);
    }
    return st;
}

/* First pass: the per-tensor scale of every NVFP4 tensor of a fused group that a converted
 * shard needs, wherever the group's tensors are. */
static lofp_status group_scales(ck_conv *c, lofp_io_error *err)
{
    if (!c->nvfp4) return LOFP_OK;
    long ng = -1;
    for (size_t i = 0; i < c->n_it; i++) if (c->it[i].group > ng) ng = c->it[i].group;
    if (ng < 0) return LOFP_OK;
    int *need = calloc((size_t)ng + 1, sizeof *need);
    float *gmin = malloc(((size_t)ng + 1) * sizeof *gmin);
    if (!need || !gmin) { free(need); free(gmin); return ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    for (size_t i = 0; i < c->n_it; i++)
        if (c->it[i].group >= 0 && shard_in_slice(c, c->it[i].shard)) need[c->it[i].group] = 1;
    for (long g = 0; g <= ng; g++) gmin[g] = INFINITY;
    lofp_status st = LOFP_OK;
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->group < 0 || !need[t->group]) continue;
        float G;
        st = tensor_global(c, t->src, &G, err);
        if (st) break;
        if (G < gmin[t->group]) gmin[t->group] = G; /* G = fl(fl(1/amax)*2688) falls as amax grows */
    }
    for (size_t i = 0; !st && i < c->n_it; i++)
        if (c->it[i].group >= 0 && need[c->it[i].group]) {
            c->it[i].G = gmin[c->it[i].group];
            c->it[i].have_G = 1;
        }
    free(need);
    free(gmin);
    return st;
}

/* ---- converting one shard ---------------------------------------------------------------- */

static lofp_status quantize_rows(ck_conv *c, const ck_tref *r, lofp_dtype dt, const void *x, size_t rows, size_t k,
                                 int have_G, float G, uint8_t *codes, uint8_t *scales, float *g_out, lofp_io_error *err)
{
    lofp_quant_report rep;
    memset(&rep, 0, sizeof rep);
    lofp_status st = have_G ? lofp_quantize_with_global(&c->s, dt, x, rows, k, G, codes, scales, &rep)
                            : lofp_quantize(&c->s, dt, x, rows, k, codes, scales, g_out, &rep);
    if (have_G && g_out) *g_out = G;
    if (st == LOFP_ERR_NONFINITE)
        return ck_fail(err, st, "%s: tensor '%s': NaN or Inf at flat index %zu", c->m.shards[r->shard].name, r->name,
                       rep.first_bad_index);
    if (st) return ck_fail(err, st, "%s: tensor '%s': quantize failed (%s)", c->m.shards[r->shard].name, r->name,
                           lofp_status_name(st));
    return LOFP_OK;
}

static lofp_status put(st_writer *w, size_t idx, const void *d, size_t n, lofp_io_error *err)
{
    return st_writer_put_at(w, idx, d, n, err);
}

static lofp_status convert_item(ck_conv *c, ck_item *t, st_writer *w, size_t base, lofp_io_error *err)
{
    lofp_status st = LOFP_OK;
    if (t->action == A_CAST_COPY || t->action == A_CAST_MX2NV) return convert_cast_item(c, t, w, base, err);
    if (t->action == A_COPY || t->action == A_QUANT) {
        /* one chunk of rows at a time: the row reader releases the pages it has handed out */
        const ck_tref *r = t->src;
        if (r->ti->nbytes == 0) return LOFP_OK;
        if (t->action == A_COPY && r->ti->ndim == 0) return put(w, base, r->ti->data, r->ti->nbytes, err);
        float G = 1.0f;
        lofp_status st2 = LOFP_OK;
        if (t->action == A_QUANT && c->nvfp4) {
            if (t->have_G) G = t->G;
            else st2 = tensor_global(c, r, &G, err);
            if (st2) return st2;
        }
        lofp_row_reader *rr = NULL;
        st2 = lofp_row_reader_open(c->m.shards[r->shard].f, r->ti, 0, &rr, err);
        if (st2) return st2;
        size_t k = t->action == A_QUANT ? t->k : 0, cap = 0;
        size_t crow = lofp_row_reader_chunk_rows(rr);
        uint8_t *codes = NULL, *scales = NULL;
        float *tmp = NULL;
        size_t cb = 0, sb = 0;
        if (t->action == A_QUANT) {
            cb = lofp_codes_bytes(&c->s, crow, t->k);
            sb = lofp_scales_bytes(&c->s, crow, t->k);
            codes = malloc(cb ? cb : 1);
            scales = malloc(sb ? sb : 1);
            if (!codes || !scales) st2 = ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        }
        lofp_row_chunk ch;
        while (!st2 && !(st2 = lofp_row_reader_next(rr, &ch, err)) && ch.rows) {
            if (t->action == A_COPY) { st2 = put(w, base, ch.data, ch.rows * ch.row_bytes, err); continue; }
            lofp_dtype ldt;
            const void *x = chunk_input(r->ti->dtype, &ch, k, &ldt, &tmp, &cap);
            if (!x) { st2 = ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
            lofp_quant_report rep;
            memset(&rep, 0, sizeof rep);
            lofp_status qs = c->nvfp4 ? lofp_quantize_with_global(&c->s, ldt, x, ch.rows, k, G, codes, scales, &rep)
                                      : lofp_quantize(&c->s, ldt, x, ch.rows, k, codes, scales, NULL, &rep);
            if (qs == LOFP_ERR_NONFINITE)
                st2 = ck_fail(err, qs, "%s: tensor '%s': NaN or Inf at flat index %zu", c->m.shards[r->shard].name, r->name,
                              ch.row0 * k + rep.first_bad_index);
            else if (qs)
                st2 = ck_fail(err, qs, "%s: tensor '%s': quantize failed (%s)", c->m.shards[r->shard].name, r->name, lofp_status_name(qs));
            if (!st2) st2 = put(w, base + 0, codes, lofp_codes_bytes(&c->s, ch.rows, k), err);
            if (!st2) st2 = put(w, base + 1, scales, lofp_scales_bytes(&c->s, ch.rows, k), err);
        }
        lofp_row_reader_close(rr);
        free(codes);
        free(scales);
        free(tmp);
        if (!st2 && t->action == A_QUANT && c->nvfp4) {
            float v = c->to == LOFP_CKPT_MODELOPT ? lofp_nvfp4_decode_from_encode(G) : G;
            st2 = put(w, base + 2, &v, 4, err);
            if (!st2 && c->act) {
                float a = t->in_amax;
                float iv = c->to == LOFP_CKPT_MODELOPT ? lofp_nvfp4_decode_scale(LOFP_DTYPE_F32, &a, 1)
                                                       : lofp_nvfp4_global_scale(LOFP_DTYPE_F32, &a, 1);
                st2 = put(w, base + 3, &iv, 4, err);
            }
        }
        return st2;
    }
    /* gpt-oss MXFP4 experts: per expert, rows of codes [N, K/2] and scales [N, K/32] */
    size_t N = t->N, K = t->K, rb = K / 2, rs = K / 32;
    uint8_t *codes = malloc(N * rb), *scales = malloc(N * rs);
    size_t sub_rows = t->action == A_MOE_SPLIT ? N / t->per_expert : N;
    uint8_t *sc = malloc(sub_rows * rb), *ss = malloc(sub_rows * rs);
    float *tr = t->action == A_MOE_FUSED ? malloc(N * K * sizeof *tr) : NULL;
    if (!codes || !scales || !sc || !ss || (t->action == A_MOE_FUSED && !tr)) {
        st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        goto moe_done;
    }
    for (size_t e = 0; !st && e < t->E; e++) {
        if (t->action == A_MOE_SPLIT) {
            for (size_t p = 0; !st && p < t->per_expert; p++) {
                const ck_tref *r = t->members[e * t->per_expert + p];
                lofp_dtype dt;
                float *owned;
                const void *x = quant_input(r->ti, &dt, &owned);
                if (!x) { st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
                st = quantize_rows(c, r, dt, x, sub_rows, K, 0, 0, sc, ss, NULL, err);
                free(owned);
                /* interleave: gate row i -> 2i, up row i -> 2i+1 (gpt-oss swiglu reads x[..., ::2]) */
                for (size_t i = 0; !st && i < sub_rows; i++) {
                    size_t orow = i * t->per_expert + p;
                    memcpy(codes + orow * rb, sc + i * rb, rb);
                    memcpy(scales + orow * rs, ss + i * rs, rs);
                }
            }
        } else {
            const lofp_tensor_info *ti = t->src->ti;
            /* stored [E, K, N]: transpose expert e to [N, K] */
            for (size_t kk = 0; kk < K; kk++)
                for (size_t n = 0; n < N; n++) tr[n * K + kk] = ck_load(ti->dtype, ti->data, (e * K + kk) * N + n);
            st = quantize_rows(c, t->src, LOFP_DTYPE_F32, tr, N, K, 0, 0, codes, scales, NULL, err);
        }
        if (!st) st = put(w, base + 0, codes, N * rb, err);
        if (!st) st = put(w, base + 1, scales, N * rs, err);
    }
moe_done:
    free(codes);
    free(scales);
    free(sc);
    free(ss);
    free(tr);
    return st;
}

static lofp_status convert_shard(ck_conv *c, size_t s, lofp_io_error *err)
{
    size_t n = 0, total_in = 0;
    for (size_t i = 0; i < c->n_it; i++)
        if (c->it[i].shard == s && c->it[i].action != A_SKIP) { n += c->it[i].n_out; total_in += c->it[i].in_bytes; }
    lofp_tensor_desc *d = calloc(n ? n : 1, sizeof *d);
    size_t *base = calloc(c->n_it, sizeof *base);
    if (!d || !base) { free(d); free(base); return ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    size_t k = 0;
    lofp_sbuf padded = { 0 };
    for (size_t i = 0; i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->shard != s || t->action == A_SKIP) continue;
        base[i] = k;
        for (size_t j = 0; j < t->n_out; j++) d[k++] = t->out[j];
        if ((t->action == A_QUANT || t->action == A_CAST_COPY || t->action == A_CAST_MX2NV) && t->kp != t->k &&
            c->to != LOFP_CKPT_LOFP)
            lofp_sbuf_printf(&padded, "%s\"%s\": %zu", padded.len ? ", " : "{", t->module, t->k);
    }
    if (padded.len) lofp_sbuf_putc(&padded, '}');
    /* --to lofp: one "lofp:<name>" entry per quantized tensor, as `lofp quantize` writes them */
    size_t nmeta = 0;
    for (size_t i = 0; i < c->n_it; i++) nmeta += c->it[i].shard == s && c->it[i].lofp_key != NULL;
    lofp_metadata_entry *meta = calloc(nmeta + 2, sizeof *meta);
    size_t nm = 0;
    if (meta) {
        meta[nm++] = (lofp_metadata_entry){ "format", "pt" };
        if (padded.len) meta[nm++] = (lofp_metadata_entry){ "lofp.logical_k", padded.p };
        for (size_t i = 0; i < c->n_it; i++)
            if (c->it[i].shard == s && c->it[i].lofp_key) meta[nm++] = (lofp_metadata_entry){ c->it[i].lofp_key, c->it[i].lofp_meta };
    }
    char *path = ck_path(c->out_dir, c->m.shards[s].name);
    st_writer *w = NULL;
    lofp_status st = path && meta ? st_writer_open(path, d, n, meta, nm, &w, err)
                                  : ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    size_t done = 0;
    const lofp_ckpt_options *o = c->o;
    if (!st && o->progress) o->progress(o->ctx, c->m.shards[s].name, s, c->m.n_shards, 0, total_in);
    for (size_t i = 0; !st && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->shard != s || t->action == A_SKIP) continue;
        pthread_mutex_lock(&c->mu);
        int stop = c->st != LOFP_OK;
        pthread_mutex_unlock(&c->mu);
        if (stop) { st = LOFP_ERR_IO; ck_fail(err, st, "stopped"); break; }
        st = convert_item(c, t, w, base[i], err);
        done += t->in_bytes;
        if (!st && o->progress) o->progress(o->ctx, c->m.shards[s].name, s, c->m.n_shards, done, total_in);
    }
    if (!st) st = st_writer_finish(w, err);
    else st_writer_abort(w);
    lofp_sbuf_free(&padded);
    free(meta);
    free(path);
    free(d);
    free(base);
    return st;
}

static void *worker(void *arg)
{
    ck_conv *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        size_t j = c->next++;
        int stop = c->st != LOFP_OK || j >= c->n_shard_list;
        pthread_mutex_unlock(&c->mu);
        if (stop) break;
        lofp_io_error e;
        ck_ok(&e);
        lofp_status st = convert_shard(c, c->shard_list[j], &e);
        if (st) {
            pthread_mutex_lock(&c->mu);
            if (!c->st) { c->st = st; c->err = e; }
            pthread_mutex_unlock(&c->mu);
        }
    }
    return NULL;
}

static lofp_status run_shards(ck_conv *c, lofp_io_error *err)
{
    c->shard_list = malloc((c->m.n_shards + 1) * sizeof *c->shard_list);
    if (!c->shard_list) return ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < c->m.n_shards; s++)
        if (shard_in_slice(c, s)) c->shard_list[c->n_shard_list++] = s;
    unsigned jobs = c->o->jobs > 1 ? c->o->jobs : 1;
    if (jobs > c->n_shard_list) jobs = (unsigned)(c->n_shard_list ? c->n_shard_list : 1);
    pthread_mutex_init(&c->mu, NULL);
    pthread_t *th = calloc(jobs, sizeof *th);
    unsigned started = 0;
    for (unsigned j = 1; th && j < jobs; j++)
        if (pthread_create(&th[j], NULL, worker, c) == 0) started++;
        else break;
    worker(c);
    for (unsigned j = 1; j <= started; j++) pthread_join(th[j], NULL);
    free(th);
    pthread_mutex_destroy(&c->mu);
    if (c->st) {
        if (err) *err = c->err;
        return c->st;
    }
    return LOFP_OK;
}

/* ---- config files ------------------------------------------------------------------------ */

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Modules (weight names without ".weight") of 2-D+ floating weights left unquantized, with layer
 * numbers replaced by '*' where every layer's module is excluded. */
static ckj *exclusion_list(ck_conv *c)
{
    char **ex = calloc(c->n_it + 1, sizeof *ex);
    size_t n = 0;
    for (size_t i = 0; ex && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        const lofp_tensor_info *ti = t->src->ti;
        if (t->action != A_COPY || !ck_is_float(ti->dtype) || ti->ndim < 2 || !ck_ends_with(ti->name, ".weight")) continue;
        char *m = ck_strdup(ti->name);
        m[strlen(m) - 7] = 0;
        /* generalise numbers */
        char pat[1024];
        size_t k = 0;
        for (const char *p = m; *p && k + 2 < sizeof pat;) {
            if ((p == m || p[-1] == '.') && *p >= '0' && *p <= '9') {
                const char *q = p;
                while (*q >= '0' && *q <= '9') q++;
                if (*q == '.' || *q == 0) { pat[k++] = '*'; p = q; continue; }
            }
            pat[k++] = *p++;
        }
        pat[k] = 0;
        int ok = strcmp(pat, m) != 0;
        for (size_t j = 0; ok && j < c->n_it; j++) {
            ck_item *u = &c->it[j];
            if (u->action == A_COPY || u->action == A_SKIP || !u->module) continue;
            if (ck_glob_match(pat, u->module)) ok = 0;
            for (size_t q = 0; ok && q < u->n_members; q++) {
                char mm[1024];
                snprintf(mm, sizeof mm, "%s", u->members[q]->name);
                mm[strlen(mm) - 7] = 0;
                if (ck_glob_match(pat, mm)) ok = 0;
            }
        }
        ex[n++] = ok ? ck_strdup(pat) : ck_strdup(m);
        free(m);
    }
    qsort(ex, n, sizeof *ex, cmp_cstr);
    ckj *a = ckj_new_arr();
    for (size_t i = 0; i < n; i++)
        if ((i == 0 || strcmp(ex[i], ex[i - 1]) != 0) && a) ckj_push(a, ckj_new_str(ex[i]));
    for (size_t i = 0; i < n; i++) free(ex[i]);
    free(ex);
    return a;
}

static ckj *ct_args(int nvfp4, int activations)
{
    ckj *w = ckj_new_obj();
    ckj_set(w, "num_bits", ckj_new_int(4));
    ckj_set(w, "type", ckj_new_str("float"));
    ckj_set(w, "symmetric", ckj_new_bool(1));
    ckj_set(w, "group_size", ckj_new_int(nvfp4 ? 16 : 32));
    ckj_set(w, "strategy", ckj_new_str(nvfp4 ? "tensor_group" : "group"));
    ckj_set(w, "block_structure", ckj_new_null());
    if (activations) ckj_set(w, "dynamic", ckj_new_str("local"));
    else ckj_set(w, "dynamic", ckj_new_bool(0));
    ckj_set(w, "actorder", ckj_new_null());
    ckj_set(w, "scale_dtype", ckj_new_str(nvfp4 ? "torch.float8_e4m3fn" : "torch.uint8"));
    ckj_set(w, "zp_dtype", ckj_new_null());
    ckj_set(w, "observer", ckj_new_str(activations ? "static_minmax" : "minmax"));
    ckj_set(w, "observer_kwargs", ckj_new_obj());
    return w;
}

static lofp_status write_configs(ck_conv *c, const char *dir, lofp_io_error *err)
{
    if (c->to == LOFP_CKPT_LOFP) {
        /* lofp files say what they hold in their own metadata: config.json without a
         * quantization_config (another format's would make readers take the files for that format) */
        if (!c->m.config) return LOFP_OK;
        ckj *qc = ckj_get(c->m.config, "quantization_config");
        lofp_sbuf tmp = { 0 };
        if (qc) ckj_dump(&tmp, qc, -1);
        ckj_del(c->m.config, "quantization_config");
        char *p = ck_path(dir, "config.json");
        lofp_status st = ckj_write(p, c->m.config, err);
        free(p);
        if (tmp.p) {
            char msg[64];
            ckj_set(c->m.config, "quantization_config", ckj_parse(tmp.p, tmp.len, msg, sizeof msg));
        }
        lofp_sbuf_free(&tmp);
        return st;
    }
    const int act = c->act != NULL || c->have_act;
    ckj *cfg = c->m.config ? NULL : ckj_new_obj();
    ckj *base = c->m.config ? c->m.config : cfg;
    ckj *qc = ckj_new_obj();
    ckj *excl = exclusion_list(c);
    lofp_status st = LOFP_OK;
    char ver[64];
    snprintf(ver, sizeof ver, "lofp %s", lofp_version());
    if (c->to == LOFP_CKPT_MODELOPT) {
        const char *algo = c->mxfp8 ? "MXFP8" : act ? "NVFP4" : "W4A16_NVFP4";
        int gs = c->mxfp8 ? 32 : 16;
        ckj *hq = ckj_new_obj(), *prod = ckj_new_obj(), *q = ckj_new_obj();
        ckj_set(prod, "name", ckj_new_str("modelopt"));
        ckj_set(prod, "version", ckj_new_str(ver));
        ckj_set(hq, "producer", prod);
        ckj_set(q, "quant_algo", ckj_new_str(algo));
        ckj_set(q, "kv_cache_quant_algo", ckj_new_null());
        ckj_set(q, "group_size", ckj_new_int(gs));
        lofp_sbuf tmp = { 0 };
        ckj_dump(&tmp, excl, -1);
        char msg[64];
        ckj_set(q, "exclude_modules", ckj_parse(tmp.p, tmp.len, msg, sizeof msg));
        lofp_sbuf_free(&tmp);
        ckj_set(hq, "quantization", q);
        char *p = ck_path(dir, "hf_quant_config.json");
        st = ckj_write(p, hq, err);
        free(p);
        ckj_free(hq);
        /* config.json: the compressed-tensors-like form ModelOpt embeds */
        ckj *groups = ckj_new_obj(), *g0 = ckj_new_obj(), *wa = ckj_new_obj();
        ckj_set(wa, "dynamic", ckj_new_bool(0));
        ckj_set(wa, "num_bits", ckj_new_int(c->mxfp8 ? 8 : 4));
        ckj_set(wa, "type", ckj_new_str("float"));
        ckj_set(wa, "group_size", ckj_new_int(gs));
        if (act) {
            ckj *ia = ckj_new_obj();
            ckj_set(ia, "dynamic", ckj_new_bool(0));
            ckj_set(ia, "num_bits", ckj_new_int(4));
            ckj_set(ia, "type", ckj_new_str("float"));
            ckj_set(ia, "group_size", ckj_new_int(16));
            ckj_set(g0, "input_activations", ia);
        }
        ckj_set(g0, "weights", wa);
        const char *lin[] = { "Linear" };
        ckj_set(g0, "targets", ckj_str_array(lin, 1));
        ckj_set(groups, "group_0", g0);
        ckj_set(qc, "config_groups", groups);
        ckj_set(qc, "ignore", excl);
        excl = NULL;
        ckj_set(qc, "quant_algo", ckj_new_str(algo));
        ckj_set(qc, "kv_cache_scheme", ckj_new_null());
        ckj *prod2 = ckj_new_obj();
        ckj_set(prod2, "name", ckj_new_str("modelopt"));
        ckj_set(prod2, "version", ckj_new_str(ver));
        ckj_set(qc, "producer", prod2);
        ckj_set(qc, "quant_method", ckj_new_str("modelopt"));
    } else if (c->to == LOFP_CKPT_COMPRESSED_TENSORS) {
        const char *fmt = c->nvfp4 ? "nvfp4-pack-quantized" : "mxfp4-pack-quantized";
        ckj *groups = ckj_new_obj(), *g0 = ckj_new_obj();
        const char *lin[] = { "Linear" };
        ckj_set(g0, "targets", ckj_str_array(lin, 1));
        ckj_set(g0, "weights", ct_args(c->nvfp4, 0));
        ckj_set(g0, "input_activations", act ? ct_args(1, 1) : ckj_new_null());
        ckj_set(g0, "output_activations", ckj_new_null());
        ckj_set(g0, "format", ckj_new_str(fmt));
        ckj_set(groups, "config_group_0", g0);
        ckj_set(qc, "config_groups", groups);
        ckj_set(qc, "quant_method", ckj_new_str("compressed-tensors"));
        ckj_set(qc, "kv_cache_scheme", ckj_new_null());
        ckj_set(qc, "format", ckj_new_str(fmt));
        ckj_set(qc, "quantization_status", ckj_new_str("compressed"));
        ckj_set(qc, "global_compression_ratio", ckj_new_null());
        ckj_set(qc, "ignore", excl);
        excl = NULL;
    } else {
        ckj_set(qc, "quant_method", ckj_new_str("mxfp4"));
        ckj_set(qc, "modules_to_not_convert", excl);
        excl = NULL;
    }
    ckj_set(base, "quantization_config", qc);
    if (!st) {
        char *p = ck_path(dir, "config.json");
        st = ckj_write(p, base, err);
        free(p);
    }
    ckj_del(base, "quantization_config");
    ckj_free(cfg);
    ckj_free(excl);
    return st;
}

static lofp_status finalize(ck_conv *c, const char *dir, lofp_io_error *err)
{
    lofp_status st = write_configs(c, dir, err);
    for (size_t i = 0; !st && i < c->m.n_others; i++) {
        char *a = ck_path(c->m.dir, c->m.others[i]), *b = ck_path(dir, c->m.others[i]);
        st = lofp_ck_copy_other(a, b, err);
        free(a);
        free(b);
    }
    if (!st && c->m.index_name) {
        const char **names = calloc(c->m.n_shards, sizeof *names);
        char **paths = calloc(c->m.n_shards, sizeof *paths);
        for (size_t s = 0; names && paths && s < c->m.n_shards; s++) {
            names[s] = c->m.shards[s].name;
            paths[s] = ck_path(dir, c->m.shards[s].name);
            if (!ck_exists(paths[s]) && !st)
                st = ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: shard '%s' has not been converted yet (run its --shard slice first)", dir,
                             c->m.shards[s].name);
        }
        char *ip = ck_path(dir, c->m.index_name);
        if (!st) st = ck_write_index(ip, names, (const char *const *)paths, c->m.n_shards, err);
        free(ip);
        for (size_t s = 0; paths && s < c->m.n_shards; s++) free(paths[s]);
        free(names);
        free(paths);
    } else if (!st && c->o->merge_index) {
        char *p = ck_path(dir, c->m.shards[0].name);
        if (!ck_exists(p)) st = ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: '%s' has not been converted yet", dir, c->m.shards[0].name);
        free(p);
    }
    return st;
}

/* out must not exist or be an empty directory; returns the staging directory beside it. */
lofp_status ck_stage_dir(const char *out, char **stage, lofp_io_error *err)
{
    if (ck_exists(out)) {
        if (!ck_is_dir(out)) return ck_fail(err, LOFP_ERR_INVALID_ARG, "%s exists and is not a directory", out);
        char *d = NULL;
        /* empty? */
        int empty = rmdir(out) == 0;
        if (empty) mkdir(out, 0777);
        free(d);
        if (!empty) return ck_fail(err, LOFP_ERR_INVALID_ARG, "%s exists and is not empty (lofp never overwrites a model directory)", out);
    }
    size_t n = strlen(out) + 64;
    char *s = malloc(n);
    if (!s) return ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    char *o = ck_strdup(out);
    while (strlen(o) > 1 && o[strlen(o) - 1] == '/') o[strlen(o) - 1] = 0;
    const char *slash = strrchr(o, '/');
    snprintf(s, n, "%.*s.%.200s.lofp-tmp-%ld", slash ? (int)(slash - o + 1) : 0, o, slash ? slash + 1 : o, (long)getpid()); /* 200: NAME_MAX */
    free(o);
    ck_rmtree(s);
    if (lofp_ck_create_tmp(s, 1) != 0) {
        lofp_status st = ck_fail(err, LOFP_ERR_IO, "%s: cannot create: %s", s, strerror(errno));
        free(s);
        return st;
    }
    *stage = s;
    return LOFP_OK;
}

lofp_status ck_stage_commit(char *stage, const char *out, lofp_io_error *err)
{
    if (ck_is_dir(out)) rmdir(out);
    if (rename(stage, out) != 0) {
        lofp_status st = ck_fail(err, LOFP_ERR_IO, "%s: cannot rename %s: %s", out, stage, strerror(errno));
        ck_rmtree(stage);
        return st;
    }
    return LOFP_OK;
}

LOFP_INTERNAL lofp_status ck_convert_gguf(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err);

void lofp_ckpt_options_init(lofp_ckpt_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->import_dtype = LOFP_IO_BF16;
}

static int is_gguf_file(const char *path)
{
    if (ck_is_dir(path)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char m[4] = { 0 };
    size_t n = fread(m, 1, 4, f);
    fclose(f);
    return n == 4 && memcmp(m, "GGUF", 4) == 0;
}

lofp_status lofp_ckpt_convert(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err)
{
    if (!in || !out || !o) return ck_fail(err, LOFP_ERR_INVALID_ARG, "convert: NULL argument");
    { lofp_status pf = lofp_ck_preflight(in, out, o, 0, err); if (pf) return pf; }
    if (o->shard_count && o->shard_index >= o->shard_count)
        return ck_fail(err, LOFP_ERR_INVALID_ARG, "--shard %u/%u: the slice must be 1..%u", o->shard_index + 1, o->shard_count, o->shard_count);
    const int in_gguf = is_gguf_file(in);
    if (o->to == LOFP_CKPT_GGUF && in_gguf) return ck_convert_gguf(in, out, o, err);
    if (in_gguf)
        return ck_fail(err, LOFP_ERR_UNSUPPORTED,
                       "%s is a GGUF: lofp convert writes %s from safetensors model directories; GGUF -> %s has no exact "
                       "path here (GGUF names and keys do not map back to a Hugging Face directory). Dequantize first: "
                       "lofp import %s DENSE_DIR, then lofp convert --to %s DENSE_DIR OUT",
                       in, lofp_ckpt_format_name(o->to) ? lofp_ckpt_format_name(o->to) : "?", lofp_ckpt_format_name(o->to) ? lofp_ckpt_format_name(o->to) : "?",
                       in, lofp_ckpt_format_name(o->to) ? lofp_ckpt_format_name(o->to) : "?");
    ck_conv c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.to = o->to;
    if (o->to != LOFP_CKPT_MODELOPT && o->to != LOFP_CKPT_COMPRESSED_TENSORS && o->to != LOFP_CKPT_GPT_OSS &&
        o->to != LOFP_CKPT_LOFP && o->to != LOFP_CKPT_GGUF)
        return ck_fail(err, LOFP_ERR_INVALID_ARG, "convert: the target must be modelopt, compressed-tensors, gpt-oss, lofp or gguf");
    lofp_status st = ck_model_open(in, &c.m, err);
    if (st) return st;
    if ((st = lofp_ck_model_checks(&c.m, o, 0, err)) != LOFP_OK) goto done;
    char why[256];
    c.from = ck_detect(&c.m, why, sizeof why);
    const char *sch = o->scheme;
    if (c.from == LOFP_CKPT_DENSE && o->to == LOFP_CKPT_GGUF) {
        ck_model_close(&c.m);
        return ck_convert_gguf(in, out, o, err);
    }
    if (c.from != LOFP_CKPT_DENSE) {
        /* an already-quantized input: exact casts only (docs/CHECKPOINTS.md "Exact casts") */
        if (o->to == LOFP_CKPT_GGUF) {
            st = ck_fail(err, LOFP_ERR_UNSUPPORTED,
                         "%s is already a %s checkpoint (%s): %s -> gguf has no exact path in lofp (lofp writes GGUF from a "
                         "dense llama directory or by requantizing a GGUF). Dequantize first: lofp import %s DENSE_DIR, then "
                         "lofp convert --to gguf DENSE_DIR OUT.gguf",
                         in, lofp_ckpt_format_name(c.from), why, lofp_ckpt_format_name(c.from), in);
            goto done;
        }
        if (o->input_scales || o->pad || o->n_include) {
            st = ck_fail(err, LOFP_ERR_INVALID_ARG, "%s is already a %s checkpoint: %s applies to quantizing a dense model, not to a cast",
                         in, lofp_ckpt_format_name(c.from), o->input_scales ? "--input-scales" : o->pad ? "--pad" : "--include");
            goto done;
        }
        st = lofp_ckpt_open(in, &c.rd, err);
        if (st) goto done;
        lofp_scheme_id in_id = LOFP_SCHEME_NVFP4;
        int found = 0;
        for (size_t i = 0; !st && !found && i < lofp_ckpt_count(c.rd); i++) {
            lofp_ckpt_tensor q;
            st = lofp_ckpt_get(c.rd, i, &q, err);
            if (!st && q.quantized) { in_id = q.scheme.id; found = 1; }
            lofp_ckpt_tensor_release(&q);
        }
        if (st) goto done;
        if (!sch) {
            if (format_holds(o->to, in_id)) sch = lofp_scheme_name(in_id);
            else if (in_id == LOFP_SCHEME_MXFP4 && format_holds(o->to, LOFP_SCHEME_NVFP4)) sch = "nvfp4";
            else {
                st = ck_fail(err, LOFP_ERR_UNSUPPORTED,
                             "%s is a %s %s checkpoint; %s holds no %s and %s -> %s has no exact path. Dequantize first: "
                             "lofp import %s DENSE_DIR, then lofp convert --to %s DENSE_DIR OUT",
                             in, lofp_ckpt_format_name(c.from), lofp_scheme_name(in_id), lofp_ckpt_format_name(o->to),
                             lofp_scheme_name(in_id), lofp_scheme_name(in_id),
                             o->to == LOFP_CKPT_GPT_OSS ? "mxfp4" : "nvfp4", in, lofp_ckpt_format_name(o->to));
                goto done;
            }
        }
    } else if (o->to == LOFP_CKPT_LOFP) {
        st = ck_fail(err, LOFP_ERR_UNSUPPORTED, "convert --to lofp takes an already-quantized checkpoint; %s is dense (%s): "
                     "lofp quantize writes lofp files from dense tensors", in, why);
        goto done;
    }
    switch (o->to) {
    case LOFP_CKPT_MODELOPT: if (!sch) sch = "nvfp4"; if (strcmp(sch, "nvfp4") && strcmp(sch, "mxfp8") && strcmp(sch, "mxfp8-e4m3")) goto bad_scheme; break;
    case LOFP_CKPT_COMPRESSED_TENSORS: if (!sch) sch = "nvfp4"; if (strcmp(sch, "nvfp4") && strcmp(sch, "mxfp4")) goto bad_scheme; break;
    case LOFP_CKPT_GPT_OSS: if (!sch) sch = "mxfp4"; if (strcmp(sch, "mxfp4")) goto bad_scheme; break;
    default: if (strcmp(sch, "nvfp4") && strcmp(sch, "mxfp4") && strcmp(sch, "mxfp8") && strcmp(sch, "mxfp8-e4m3")) goto bad_scheme; break;
    }
    if (!strcmp(sch, "mxfp8")) sch = "mxfp8-e4m3";
    c.scheme_name = sch;
    lofp_scheme_preset(sch, &c.s);
    c.s.pad = o->pad;
    c.s.threads = o->threads;
    c.nvfp4 = c.s.id == LOFP_SCHEME_NVFP4;
    c.mxfp8 = c.s.id == LOFP_SCHEME_MXFP8_E4M3;
    if (o->input_scales && !c.nvfp4) {
        st = ck_fail(err, LOFP_ERR_INVALID_ARG, "--input-scales: activation scales belong to NVFP4 only");
        goto done;
    }
    if (o->input_scales) {
        c.act = ckj_read(o->input_scales, err);
        if (!c.act) { st = err ? err->status : LOFP_ERR_FORMAT; goto done; }
        if (c.act->type != CKJ_OBJ) { st = ck_fail(err, LOFP_ERR_FORMAT, "%s: not a JSON object {module: amax}", o->input_scales); goto done; }
    }
    st = c.rd ? plan_cast(&c, in, err) : plan(&c, err);
    size_t nq = 0, n_exact = 0, n_mx2nv = 0, n_mismatch = 0;
    for (size_t i = 0; i < c.n_it; i++) {
        nq += c.it[i].action != A_COPY && c.it[i].action != A_SKIP;
        n_exact += c.it[i].action == A_CAST_COPY;
        n_mx2nv += c.it[i].action == A_CAST_MX2NV;
    }
    if (!st && nq == 0)
        st = ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no tensor to quantize for %s (the defaults leave embeddings, norms, lm_head, routers and 1-D tensors; gpt-oss takes MoE experts only)",
                     in, lofp_ckpt_format_name(o->to));
    if (st) goto done;
    char *stage = NULL;
    if (o->merge_index) {
        st = ck_mkdirs(out, err);
        if (!st) st = finalize(&c, out, err);
        goto done;
    }
    if (o->shard_count) {
        st = ck_mkdirs(out, err);
        if (st) goto done;
        c.out_dir = ck_strdup(out);
    } else {
        st = ck_stage_dir(out, &stage, err);
        if (st) goto done;
        c.out_dir = stage;
    }
    st = c.rd ? LOFP_OK : group_scales(&c, err);
    if (!st && c.rd) st = cast_scales(&c, in, err);
    if (!st) st = run_shards(&c, err);
    if (!st && !o->shard_count) st = finalize(&c, c.out_dir, err);
    if (!o->shard_count) {
        if (!st) st = ck_stage_commit(stage, out, err);
        else ck_rmtree(stage);
        c.out_dir = NULL;
        free(stage);
    }
    if (!st && o->note) {
        char line[512];
        if (c.rd)
        {
            for (size_t i = 0; i < c.n_it; i++) n_mismatch += c.it[i].mismatched != 0;
            snprintf(line, sizeof line, "%s -> %s (%s): %zu tensors carried over with codes and block scales unchanged (%zu of them "
                     "with block-scale values decoding one rounding apart, named above), %zu cast MXFP4 -> NVFP4 by the closed "
                     "form, %zu shard(s)", lofp_ckpt_format_name(c.from), lofp_ckpt_format_name(o->to), sch,
                     n_exact, n_mismatch, n_mx2nv, o->shard_count ? c.n_shard_list : c.m.n_shards);
        }
        else
            snprintf(line, sizeof line, "%zu tensors quantized to %s (%s), %zu shard(s)", nq, lofp_ckpt_format_name(o->to), sch,
                     o->shard_count ? c.n_shard_list : c.m.n_shards);
        o->note(o->ctx, line);
    }
done:
    for (size_t i = 0; i < c.n_it; i++) {
        ck_item *t = &c.it[i];
        free(t->module);
        for (size_t j = 0; j < 4; j++) free(t->out_name[j]);
        if (t->action != A_SKIP) free(t->members);
        free(t->lofp_key);
        free(t->lofp_meta);
        free(t->lname);
    }
    free(c.it);
    free(c.out_dir);
    free(c.shard_list);
    ckj_free(c.act);
    ck_model_close(&c.m);
    lofp_ckpt_close(c.rd);
    if (!st) ck_ok(err);
    return st;
bad_scheme:
    ck_model_close(&c.m);
    lofp_ckpt_close(c.rd);
    return ck_fail(err, LOFP_ERR_UNSUPPORTED, "convert --to %s: scheme '%s' is not one this format holds (%s)",
                   lofp_ckpt_format_name(o->to), sch,
                   o->to == LOFP_CKPT_MODELOPT ? "nvfp4, mxfp8" : o->to == LOFP_CKPT_COMPRESSED_TENSORS ? "nvfp4, mxfp4"
                   : o->to == LOFP_CKPT_LOFP ? "nvfp4, mxfp4, mxfp8" : "mxfp4");
}

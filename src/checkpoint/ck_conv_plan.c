/* ck_conv_plan.c -- the plan of a dense model's conversion, from the input headers alone
 * (nothing is read yet, so a tensor that cannot be converted is refused before anything is
 * written): which tensors are quantized (the default exclusions, --include/--exclude), their
 * output names and shapes, the fused groups that share one NVFP4 per-tensor scale, gpt-oss's
 * stacked experts, and the activation amax of --input-scales. */
#include "ck_conv.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const default_exclude[] = {
    "*embed*", "*lm_head*", "*norm*", "*router*", "*.mlp.gate.*", "*block_sparse_moe.gate.*",
    "*shared_expert_gate*", "*vision_tower*", "*visual*", "*vision_model*", "*embed_vision*",
    "*multi_modal_projector*", "*output_layer*", "output.*", "*proj_out.*", "mtp.*", "*conv1d*",
    "*linear_attn.in_proj_a*", "*linear_attn.in_proj_b*",
};

static int default_excluded(const char *name)
{
    return lofp_ck_globs_match(default_exclude, sizeof default_exclude / sizeof default_exclude[0], name);
}

/* leaf of a module name: the component after the last dot */
const char *lofp_conv_leaf_of(const char *module)
{
    const char *d = strrchr(module, '.');
    return d ? d + 1 : module;
}

int lofp_conv_fused_group_id(const char *leaf)
{
    static const char *const g[][3] = { { "q_proj", "k_proj", "v_proj" }, { "query", "key", "value" },
                                        { "gate_proj", "up_proj", NULL }, { "w1", "w3", NULL } };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            if (g[i][j] && strcmp(g[i][j], leaf) == 0) return i;
    return -1;
}

void lofp_conv_set_out(ck_item *t, size_t j, const char *name, lofp_dtype dt, const size_t *shape, size_t ndim)
{
    /* io refuses tensors of more dimensions when it reads them; every shape planned derives from one */
    if (ndim > LOFP_MAX_NDIM) ndim = LOFP_MAX_NDIM;
    t->out_name[j] = lofp_ck_strdup(name);
    memcpy(t->out_shape[j], shape, ndim * sizeof *shape);
    t->out[j].name = t->out_name[j];
    t->out[j].dtype = dt;
    t->out[j].ndim = ndim;
    t->out[j].shape = t->out_shape[j];
    if (j + 1 > t->n_out) t->n_out = j + 1;
}

char *lofp_conv_strcat2(const char *a, const char *b)
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
    size_t sh[LOFP_MAX_NDIM], nd = ti->ndim;
    memcpy(sh, ti->shape, nd * sizeof *sh);
    const char *m = t->module;
    char *n0 = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL;
    size_t blk = c->s.block;
    if (c->to == LOFP_CKPT_MODELOPT) {
        n0 = lofp_conv_strcat2(m, ".weight");
        n1 = lofp_conv_strcat2(m, ".weight_scale");
        n2 = lofp_conv_strcat2(m, ".weight_scale_2");
        n3 = lofp_conv_strcat2(m, ".input_scale");
    } else {
        n0 = lofp_conv_strcat2(m, ".weight_packed");
        n1 = lofp_conv_strcat2(m, ".weight_scale");
        n2 = lofp_conv_strcat2(m, ".weight_global_scale");
        n3 = lofp_conv_strcat2(m, ".input_global_scale");
    }
    if (c->mxfp8) {
        sh[nd - 1] = t->kp;
        lofp_conv_set_out(t, 0, n0, LOFP_DTYPE_F8_E4M3, sh, nd);
    } else {
        sh[nd - 1] = t->kp / 2;
        lofp_conv_set_out(t, 0, n0, LOFP_DTYPE_U8, sh, nd);
    }
    sh[nd - 1] = t->kp / blk;
    lofp_conv_set_out(t, 1, n1, c->nvfp4 ? LOFP_DTYPE_F8_E4M3 : LOFP_DTYPE_U8, sh, nd);
    if (c->nvfp4) {
        size_t one = 1;
        int zero_d = c->to == LOFP_CKPT_MODELOPT;
        lofp_conv_set_out(t, 2, n2, LOFP_DTYPE_F32, &one, zero_d ? 0 : 1);
        if (c->act) lofp_conv_set_out(t, 3, n3, LOFP_DTYPE_F32, &one, zero_d ? 0 : 1);
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
    return lofp_ck_fail(err, LOFP_ERR_SHAPE,
                   "%s: tensor '%s' [%s]: K = %zu is not a multiple of the %s block (%zu). --pad would store it "
                   "zero-padded to K = %zu, which changes the model: an engine that expects %zu inputs will refuse "
                   "the tensor (lofp import drops the padding again); or keep it unquantized with --exclude '%s'",
                   c->m.shards[r->shard].name, ti->name, shape, K, c->scheme_name, blk, kp, K, ti->name);
}

/* Decides what happens to every input tensor. */
lofp_status lofp_conv_plan(ck_conv *c, lofp_io_error *err)
{
    const lofp_ckpt_options *o = c->o;
    c->it = calloc(c->m.n_t ? c->m.n_t : 1, sizeof *c->it);
    if (!c->it) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
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
        int eligible = lofp_dtype_is_float(ti->dtype) && ti->ndim >= 2 && lofp_ck_ends_with(ti->name, ".weight");
        int want = 0;
        /* the safetensors formats name a quantized linear's tensors after its "<m>.weight"; a tensor
         * named otherwise has no names to be written under (an --include would be ignored) */
        if (!eligible && lofp_dtype_is_float(ti->dtype) && ti->ndim >= 2 && c->to != LOFP_CKPT_GPT_OSS &&
            lofp_ck_globs_match(o->include, o->n_include, ti->name) && !lofp_ck_globs_match(o->exclude, o->n_exclude, ti->name))
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                           "%s: tensor '%s': --include names a tensor that is not '<module>.weight'; %s writes a quantized "
                           "linear as <module>.weight and its scales beside it, so this one has no names to go under "
                           "(narrow the --include, or --exclude it)",
                           c->m.shards[r->shard].name, ti->name, lofp_ckpt_format_name(c->to));
        if (eligible) {
            if (c->to == LOFP_CKPT_GPT_OSS) want = strstr(ti->name, ".experts.") != NULL && !default_excluded(ti->name);
            else want = !default_excluded(ti->name);
            if (lofp_ck_globs_match(o->include, o->n_include, ti->name)) want = 1;
            if (lofp_ck_globs_match(o->exclude, o->n_exclude, ti->name)) want = 0;
        }
        /* gpt-oss: the transformers bf16 layout, experts fused in 3-D tensors */
        if (c->to == LOFP_CKPT_GPT_OSS && lofp_dtype_is_float(ti->dtype) && ti->ndim == 3 &&
            (lofp_ck_ends_with(ti->name, ".experts.gate_up_proj") || lofp_ck_ends_with(ti->name, ".experts.down_proj")) &&
            !lofp_ck_globs_match(o->exclude, o->n_exclude, ti->name)) {
            t->action = A_MOE_FUSED;
            t->E = ti->shape[0];
            t->K = ti->shape[1];
            t->N = ti->shape[2]; /* stored [E, in, out]: quantized along `in` after a transpose */
            t->module = lofp_ck_strdup(ti->name);
            continue;
        }
        if (!want) continue;
        t->module = lofp_ck_strdup(ti->name);
        t->module[strlen(t->module) - 7] = 0;
        if (c->to == LOFP_CKPT_GPT_OSS) {
            int role;
            if (!is_expert_leaf(lofp_conv_leaf_of(t->module), &role)) { t->action = A_COPY; continue; }
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
            is_expert_leaf(lofp_conv_leaf_of(t->module), &role);
            /* collect experts 0..E-1 of this prefix and role family */
            size_t E = 0;
            for (;; E++) {
                char nm[1024];
                const char *g = role == 2 ? (strstr(t->module, ".w2") ? "w2" : "down_proj") : (strstr(t->module, ".w1") || strstr(t->module, ".w3") ? "w1" : "gate_proj");
                snprintf(nm, sizeof nm, "%.*s.experts.%zu.%s.weight", (int)plen, t->module, E, g);
                if (!lofp_ck_model_find(&c->m, nm)) break;
            }
            if (E == 0) return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': experts are not numbered from 0", c->m.dir, t->src->name);
            size_t per = role == 2 ? 1 : 2;
            const ck_tref **mem = calloc(E * per, sizeof *mem);
            if (!mem) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            int w_style = strstr(t->module, ".w1") || strstr(t->module, ".w2") || strstr(t->module, ".w3");
            ck_item *owner = NULL;
            for (size_t e = 0; e < E; e++)
                for (size_t p = 0; p < per; p++) {
                    const char *leaf = role == 2 ? (w_style ? "w2" : "down_proj")
                                                 : p == 0 ? (w_style ? "w1" : "gate_proj") : (w_style ? "w3" : "up_proj");
                    char nm[1024];
                    snprintf(nm, sizeof nm, "%.*s.experts.%zu.%s.weight", (int)plen, t->module, e, leaf);
                    const ck_tref *r = lofp_ck_model_find(&c->m, nm);
                    if (!r) { free(mem); return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: tensor '%s' is missing (its siblings are there)", c->m.dir, nm); }
                    ck_item *mi = &c->it[r - c->m.t];
                    if (mi->action != A_MOE_SPLIT) { free(mem); return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor '%s' is excluded but its fused siblings are not", c->m.dir, nm); }
                    if (r->ti->ndim != 2 || (e + p > 0 && (r->ti->shape[0] != mem[0]->ti->shape[0] ||
                                                           r->ti->shape[1] != mem[0]->ti->shape[1]))) {
                        free(mem);
                        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' is not 2-D with expert 0's shape", c->m.dir, nm);
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
            owner->module = lofp_ck_strdup(base);
        }
    }
    /* gpt-oss outputs (both layouts) and block checks */
    for (size_t i = 0; i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action != A_MOE_SPLIT && t->action != A_MOE_FUSED) continue;
        if (t->K % 32) {
            const ck_tref *r = t->action == A_MOE_SPLIT ? t->members[0] : t->src;
            return lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s': K = %zu is not a multiple of the mxfp4 block (32); gpt-oss "
                           "checkpoints cannot be padded (the engines read K from the config); exclude it with --exclude '%s'",
                           c->m.shards[r->shard].name, r->name, t->K, r->name);
        }
        t->k = t->kp = t->K;
        t->rows = t->E * t->N;
        size_t sh[4] = { t->E, t->N, t->K / 32, 16 };
        char *b = lofp_conv_strcat2(t->module, "_blocks"), *s = lofp_conv_strcat2(t->module, "_scales");
        lofp_conv_set_out(t, 0, b, LOFP_DTYPE_U8, sh, 4);
        lofp_conv_set_out(t, 1, s, LOFP_DTYPE_U8, sh, 3);
        free(b);
        free(s);
    }
    for (size_t i = 0; i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        if (t->action == A_COPY) {
            const lofp_tensor_info *ti = t->src->ti;
            lofp_conv_set_out(t, 0, ti->name, ti->dtype, ti->shape, ti->ndim);
        }
    }
    /* fused groups (NVFP4 only) */
    if (c->nvfp4 && !o->no_fuse_scales) {
        long next = 0;
        for (size_t i = 0; i < c->n_it; i++) {
            ck_item *t = &c->it[i];
            if (t->action != A_QUANT || t->group >= 0) continue;
            int gid = lofp_conv_fused_group_id(lofp_conv_leaf_of(t->module));
            if (gid < 0) continue;
            size_t plen = (size_t)(lofp_conv_leaf_of(t->module) - t->module);
            int members = 0;
            for (size_t j = i; j < c->n_it; j++) {
                ck_item *u = &c->it[j];
                if (u->action != A_QUANT || u->group >= 0) continue;
                if (strncmp(u->module, t->module, plen) != 0 || strchr(u->module + plen, '.')) continue;
                if (lofp_conv_fused_group_id(lofp_conv_leaf_of(u->module)) != gid) continue;
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
            const ckj *v = lofp_ckj_get(c->act, t->module);
            if (!lofp_ckj_num(v, &a))
                return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no activation amax (a JSON number) for module '%s'",
                               o->input_scales, t->module);
            /* the amax is stored as a float32 and both scales derived from it (ModelOpt's
             * amax / 2688, compressed-tensors' 2688 / amax) must be finite positive float32s */
            float af = (float)a, dec = af / 2688.0f, enc = 2688.0f / af;
            if (!(a > 0) || !isfinite(af) || !(dec > 0) || !isfinite(enc))
                return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                               "%s: module '%s': activation amax %s is out of range: it must be a number above "
                               "%g and at most %g (FLT_MAX), so that its float32 scales amax/2688 and 2688/amax are "
                               "finite and non-zero",
                               o->input_scales, t->module, v->s, 2688.0 / (double)FLT_MAX, (double)FLT_MAX);
            t->in_amax = af;
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

int lofp_conv_shard_in_slice(const ck_conv *c, size_t s)
{
    if (!c->o->shard_count) return 1;
    size_t n = c->m.n_shards, k = c->o->shard_count, i = c->o->shard_index;
    /* contiguous slices: shards [i*n/k, (i+1)*n/k) */
    return s >= i * n / k && s < (i + 1) * n / k;
}

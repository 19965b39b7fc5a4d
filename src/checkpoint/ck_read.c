/* ck_read.c -- reading every supported checkpoint format as logical tensors in lofp's convention
 * (lofp_ckpt_open / lofp_ckpt_get / lofp_ckpt_dequantize), and lofp_ckpt_import on top of it. */
#include "ck_internal.h"
#include "lofp/qfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { Q_DENSE, Q_NVFP4, Q_MXFP4, Q_MXFP8, Q_LOFP, Q_GG_DENSE } qkind;

typedef struct lt {
    char *name;
    qkind kind;
    size_t shard;
    const lofp_tensor_info *w, *s, *g;   /* codes, scales, per-tensor */
    const gg_tensor *gw, *gs;            /* GGUF tensor and its .scale */
    size_t logical_k;                    /* 0: as stored */
} lt;

struct lofp_ckpt {
    lofp_ckpt_format fmt;
    int is_gguf;
    ck_model m;
    gg_file gg;
    char *path;
    char desc[256];
    lt *t;
    size_t n;
    size_t *by_name;   /* indices of t in name order (lofp_ckpt_find) */
};

const char *lofp_ckpt_format_name(lofp_ckpt_format f)
{
    switch (f) {
    case LOFP_CKPT_DENSE: return "dense";
    case LOFP_CKPT_LOFP: return "lofp";
    case LOFP_CKPT_MODELOPT: return "modelopt";
    case LOFP_CKPT_COMPRESSED_TENSORS: return "compressed-tensors";
    case LOFP_CKPT_GPT_OSS: return "gpt-oss";
    case LOFP_CKPT_GGUF: return "gguf";
    default: return NULL;
    }
}

lofp_status lofp_ckpt_format_from_name(const char *name, lofp_ckpt_format *out)
{
    if (!name || !out) return LOFP_ERR_INVALID_ARG;
    for (int f = 1; f <= 6; f++)
        if (strcmp(name, lofp_ckpt_format_name((lofp_ckpt_format)f)) == 0) { *out = (lofp_ckpt_format)f; return LOFP_OK; }
    if (!strcmp(name, "ct")) { *out = LOFP_CKPT_COMPRESSED_TENSORS; return LOFP_OK; }
    return LOFP_ERR_NOT_FOUND;
}

static int any_suffix(const ck_model *m, const char *suf)
{
    for (size_t i = 0; i < m->n_t; i++) if (lofp_ck_ends_with(m->t[i].name, suf)) return 1;
    return 0;
}

/* Recognises the format from the config files, then lofp metadata, then tensor names. */
lofp_ckpt_format lofp_ck_detect(const ck_model *m, char *why, size_t cap)
{
    const ckj *qc = lofp_ckj_get(m->config, "quantization_config");
    const char *qm = lofp_ckj_str(lofp_ckj_get(qc, "quant_method"));
    const ckj *hq = lofp_ckj_get(m->hf_quant, "quantization");
    if (hq || (qm && strncmp(qm, "modelopt", 8) == 0)) {
        snprintf(why, cap, "%s", hq ? "hf_quant_config.json" : "quant_method modelopt");
        return LOFP_CKPT_MODELOPT;
    }
    if (qm && !strcmp(qm, "compressed-tensors")) { snprintf(why, cap, "quant_method compressed-tensors"); return LOFP_CKPT_COMPRESSED_TENSORS; }
    if (qm && !strcmp(qm, "mxfp4")) { snprintf(why, cap, "quant_method mxfp4"); return LOFP_CKPT_GPT_OSS; }
    for (size_t s = 0; s < m->n_shards; s++)
        for (size_t i = 0; i < lofp_file_metadata_count(m->shards[s].f); i++)
            if (!strncmp(lofp_file_metadata(m->shards[s].f, i)->key, LOFP_QFILE_KEY_PREFIX, sizeof LOFP_QFILE_KEY_PREFIX - 1)) {
                snprintf(why, cap, "lofp metadata");
                return LOFP_CKPT_LOFP;
            }
    if (any_suffix(m, ".weight_packed")) { snprintf(why, cap, "weight_packed tensors"); return LOFP_CKPT_COMPRESSED_TENSORS; }
    if (any_suffix(m, "_blocks") && any_suffix(m, "_scales")) { snprintf(why, cap, "_blocks/_scales tensors"); return LOFP_CKPT_GPT_OSS; }
    if (any_suffix(m, ".weight_scale")) { snprintf(why, cap, "weight_scale tensors"); return LOFP_CKPT_MODELOPT; }
    if (qm) snprintf(why, cap, "quant_method '%s' in config.json is not a format lofp reads; no quantized tensors", qm);
    else snprintf(why, cap, "no quantization config or quantized tensors");
    return LOFP_CKPT_DENSE;
}

static char *cat(const char *a, const char *b)
{
    size_t x = strlen(a), y = strlen(b);
    char *r = malloc(x + y + 1);
    if (r) { memcpy(r, a, x); memcpy(r + x, b, y + 1); }
    return r;
}

static const lofp_tensor_info *find_ti(const ck_model *m, const char *base, const char *suffix)
{
    char *n = cat(base, suffix);
    const ck_tref *r = n ? lofp_ck_model_find(m, n) : NULL;
    free(n);
    return r ? r->ti : NULL;
}

static int push_lt(lofp_ckpt *c, lt *x)
{
    lt *n = realloc(c->t, (c->n + 1) * sizeof *n);
    if (!n) return 0;
    c->t = n;
    c->t[c->n++] = *x;
    return 1;
}

static int is_consumed(const char *name, const ck_model *m, lofp_ckpt_format f)
{
    static const char *const mo[] = { ".weight_scale", ".weight_scale_2", ".input_scale" };
    static const char *const ct[] = { ".weight_packed", ".weight_scale", ".weight_global_scale", ".input_global_scale" };
    if (f == LOFP_CKPT_MODELOPT) {
        for (int i = 0; i < 3; i++) if (lofp_ck_ends_with(name, mo[i])) return 1;
        /* k_scale / v_scale of KV caches are not weights */
    }
    if (f == LOFP_CKPT_COMPRESSED_TENSORS)
        for (int i = 0; i < 4; i++) if (lofp_ck_ends_with(name, ct[i])) return 1;
    if (f == LOFP_CKPT_GPT_OSS) return lofp_ck_ends_with(name, "_blocks") || lofp_ck_ends_with(name, "_scales");
    (void)m;
    return 0;
}

static size_t padded_k_of(const ck_model *m, size_t shard, const char *module)
{
    const char *v = lofp_file_metadata_get(m->shards[shard].f, "lofp.logical_k");
    if (!v) return 0;
    char msg[64];
    ckj *j = lofp_ckj_parse(v, strlen(v), msg, sizeof msg);
    long long k = 0;
    if (j && lofp_ckj_int(lofp_ckj_get(j, module), &k) && k > 0) { lofp_ckj_free(j); return (size_t)k; }
    lofp_ckj_free(j);
    return 0;
}

/* The dtype a format stores a quantized tensor's codes or block scales in: anything else is
 * refused, naming the tensor and both dtypes, never read as bytes of the expected one (an F32
 * weight_scale read as E4M3 bytes decodes to garbage). No conversion is attempted: an F32 or BF16
 * scale need not be a value E4M3 or E8M0 holds, and a rounded one would decode differently from
 * what the producer meant. */
static lofp_status check_dtype(const char *file, const lofp_tensor_info *ti, const char *role, lofp_dtype want,
                               lofp_dtype also, const char *fmt, lofp_io_error *err)
{
    if (ti->dtype == want || (also && ti->dtype == also)) return LOFP_OK;
    return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' (%s) is %s; %s stores it as %s%s%s (lofp reads no other dtype "
                   "there and does not convert it)", file, ti->name, role, lofp_dtype_name(ti->dtype), fmt,
                   lofp_dtype_name(want), also ? " or " : "", also ? lofp_dtype_name(also) : "");
}

/* ---- what the configs say, against each other and against the tensors ---------------------- */

/* A JSON value for a message: a number as written, a string quoted, anything else by its type. */
static void json_shown(const ckj *j, char *buf, size_t cap)
{
    static const char *const n[] = { "null", "a boolean", "a number", "a string", "an array", "an object" };
    if (j && j->type == CKJ_NUM) snprintf(buf, cap, "%.40s", j->s ? j->s : "?");
    else if (j && j->type == CKJ_STR) snprintf(buf, cap, "'%.60s'", j->s ? j->s : "");
    else snprintf(buf, cap, "%s", j && j->type >= CKJ_NULL && j->type <= CKJ_OBJ ? n[j->type] : "?");
}

/* obj.key when it is stated (present and not null) must be a string: a number or an object in
 * its place would read as "not stated" and let lofp guess what the file says. *out: the string
 * or NULL. */
static lofp_status config_str(const char *dir, const char *file, const ckj *obj, const char *section, const char *key,
                              const char **out, lofp_io_error *err)
{
    const ckj *v = lofp_ckj_get(obj, key);
    *out = v && v->type == CKJ_STR ? v->s : NULL;
    if (!v || v->type == CKJ_NULL || v->type == CKJ_STR) return LOFP_OK;
    char b[80];
    json_shown(v, b, sizeof b);
    return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s: %s.%s is %s, not a string", dir, file, section, key, b);
}

/* obj.key when stated must be the integer `want` (what the tensors of the format hold): a config
 * whose group size or bit width contradicts the weights is refused, naming the file, the key and
 * the value, rather than read one way by lofp and the other way by an engine. */
static lofp_status config_int(const char *dir, const char *file, const ckj *obj, const char *keypath, const char *key,
                              long long want, const char *what, lofp_io_error *err)
{
    const ckj *v = lofp_ckj_get(obj, key);
    long long x;
    if (!v || v->type == CKJ_NULL || (lofp_ckj_int(v, &x) && x == want)) return LOFP_OK;
    char b[80];
    json_shown(v, b, sizeof b);
    return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s/%s: %s is %s, but %s: the config and the weights disagree "
                   "(lofp reads no other value there)", dir, file, keypath, b, what);
}

/* The format the tensor names alone point to (the same evidence lofp_ck_detect falls back on). */
static lofp_ckpt_format tensor_family(const ck_model *m, const char **example)
{
    static const char *const suf[] = { ".weight_packed", "_blocks", ".weight_scale" };
    static const lofp_ckpt_format fam[] = { LOFP_CKPT_COMPRESSED_TENSORS, LOFP_CKPT_GPT_OSS, LOFP_CKPT_MODELOPT };
    for (size_t s = 0; s < m->n_shards; s++)
        for (size_t i = 0; i < lofp_file_metadata_count(m->shards[s].f); i++)
            if (!strncmp(lofp_file_metadata(m->shards[s].f, i)->key, "lofp:", 5)) {
                *example = lofp_file_metadata(m->shards[s].f, i)->key;
                return LOFP_CKPT_LOFP;
            }
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < m->n_t; i++)
            if (lofp_ck_ends_with(m->t[i].name, suf[k])) { *example = m->t[i].name; return fam[k]; }
    *example = NULL;
    return LOFP_CKPT_DENSE;
}

/* The keys that say which format the model is in: present ones must be strings, and
 * hf_quant_config.json and config.json must not name different formats or algorithms. */
static lofp_status check_config_keys(const ck_model *m, lofp_io_error *err)
{
    const ckj *qc = lofp_ckj_get(m->config, "quantization_config");
    const ckj *hq = lofp_ckj_get(m->hf_quant, "quantization");
    const char *qm, *qalgo, *qfmt, *halgo;
    lofp_status st;
    if ((st = config_str(m->dir, "config.json", qc, "quantization_config", "quant_method", &qm, err)) ||
        (st = config_str(m->dir, "config.json", qc, "quantization_config", "quant_algo", &qalgo, err)) ||
        (st = config_str(m->dir, "config.json", qc, "quantization_config", "format", &qfmt, err)) ||
        (st = config_str(m->dir, "hf_quant_config.json", hq, "quantization", "quant_algo", &halgo, err)))
        return st;
    if (!hq || !qc) return LOFP_OK;
    if (qm && strncmp(qm, "modelopt", 8))
        return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s/hf_quant_config.json says the model is ModelOpt (quant_algo '%s') but "
                       "%s/config.json's quantization_config says quant_method '%s': the two configs disagree on the "
                       "format (remove the stale one)", m->dir, halgo ? halgo : "(none)", m->dir, qm);
    if (halgo && qalgo && strcmp(halgo, qalgo))
        return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s/hf_quant_config.json says quant_algo '%s' but %s/config.json's "
                       "quantization_config says quant_algo '%s': the two configs disagree on the algorithm (remove "
                       "the stale one)", m->dir, halgo, m->dir, qalgo);
    return LOFP_OK;
}

/* A format named by a config must be the one the tensors are in: the other format's tensors (or
 * dense ones) would otherwise be copied as "dense" weights and written out under a config that
 * contradicts them. */
static lofp_status check_config_family(const ck_model *m, lofp_ckpt_format fmt, lofp_io_error *err)
{
    if (fmt != LOFP_CKPT_MODELOPT && fmt != LOFP_CKPT_COMPRESSED_TENSORS && fmt != LOFP_CKPT_GPT_OSS) return LOFP_OK;
    const ckj *hq = lofp_ckj_get(m->hf_quant, "quantization");
    const char *qm = lofp_ckj_str(lofp_ckj_get(lofp_ckj_get(m->config, "quantization_config"), "quant_method"));
    if (!hq && !qm) return LOFP_OK; /* the format came from the tensor names */
    const char *file = hq ? "hf_quant_config.json" : "config.json";
    char claim[128];
    if (hq) snprintf(claim, sizeof claim, "ModelOpt (a \"quantization\" section)");
    else snprintf(claim, sizeof claim, "%s (quantization_config.quant_method '%.60s')", lofp_ckpt_format_name(fmt), qm);
    const char *ex = NULL;
    lofp_ckpt_format fam = tensor_family(m, &ex);
    if (fam == fmt) return LOFP_OK;
    if (fam == LOFP_CKPT_DENSE)
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s says the model is %s but no shard holds a quantized tensor (no "
                       "*.weight_packed, *.weight_scale or *_blocks): the config and the weights disagree. If the "
                       "weights are dense, remove quantization_config from config.json%s", m->dir, file, claim,
                       m->hf_quant ? " and hf_quant_config.json" : "");
    return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s/%s says the model is %s but the shards hold %s tensors (%s '%s'): the "
                   "config and the weights disagree", m->dir, file, claim, lofp_ckpt_format_name(fam),
                   fam == LOFP_CKPT_LOFP ? "metadata" : "e.g.", ex);
}

/* Group size, bit width and element type where the config states them, against the format the
 * tensors are read as (NVFP4: 4-bit, one scale per 16; MXFP4: 4-bit, per 32; MXFP8: 8-bit, per
 * 32). Keys: hf_quant_config.json quantization.group_size; config.json quantization_config
 * group_size (ModelOpt's flat form) and config_groups.<group>.weights {num_bits, group_size, type}
 * (ModelOpt and compressed-tensors). */
static lofp_status check_config_blocks(const ck_model *m, lofp_ckpt_format fmt, int nvfp4, lofp_io_error *err)
{
    if (fmt != LOFP_CKPT_MODELOPT && fmt != LOFP_CKPT_COMPRESSED_TENSORS) return LOFP_OK;
    long long g = nvfp4 ? 16 : 32, bits = fmt == LOFP_CKPT_MODELOPT && !nvfp4 ? 8 : 4;
    char name[96], bname[96];
    snprintf(name, sizeof name, "the %s %s tensors hold one scale per %lld values", fmt == LOFP_CKPT_MODELOPT ? "ModelOpt" : "compressed-tensors",
             nvfp4 ? "NVFP4" : bits == 8 ? "MXFP8" : "MXFP4", g);
    snprintf(bname, sizeof bname, "the tensors hold %lld-bit codes (%s)", bits, bits == 8 ? "E4M3" : "E2M1");
    lofp_status st;
    const ckj *hq = lofp_ckj_get(m->hf_quant, "quantization");
    if ((st = config_int(m->dir, "hf_quant_config.json", hq, "quantization.group_size", "group_size", g, name, err))) return st;
    const ckj *qc = lofp_ckj_get(m->config, "quantization_config");
    if (!qc) return LOFP_OK;
    if ((st = config_int(m->dir, "config.json", qc, "quantization_config.group_size", "group_size", g, name, err))) return st;
    const ckj *cg = lofp_ckj_get(qc, "config_groups");
    if (!cg || cg->type == CKJ_NULL) return LOFP_OK;
    if (cg->type != CKJ_OBJ) {
        char b[80];
        json_shown(cg, b, sizeof b);
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: quantization_config.config_groups is %s, not an object", m->dir, b);
    }
    for (size_t i = 0; i < cg->n; i++) {
        const ckj *grp = cg->items[i];
        const ckj *w = grp->type == CKJ_OBJ ? lofp_ckj_get(grp, "weights") : NULL;
        char kp[200];
        if (grp->type != CKJ_OBJ || (w && w->type != CKJ_OBJ && w->type != CKJ_NULL)) {
            char b[80];
            json_shown(grp->type != CKJ_OBJ ? grp : w, b, sizeof b);
            return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: quantization_config.config_groups.%.60s%s is %s, not an object",
                           m->dir, grp->key ? grp->key : "?", grp->type != CKJ_OBJ ? "" : ".weights", b);
        }
        if (!w || w->type != CKJ_OBJ) continue;
        snprintf(kp, sizeof kp, "quantization_config.config_groups.%.60s.weights.num_bits", grp->key ? grp->key : "?");
        if ((st = config_int(m->dir, "config.json", w, kp, "num_bits", bits, bname, err))) return st;
        snprintf(kp, sizeof kp, "quantization_config.config_groups.%.60s.weights.group_size", grp->key ? grp->key : "?");
        if ((st = config_int(m->dir, "config.json", w, kp, "group_size", g, name, err))) return st;
        const ckj *ty = lofp_ckj_get(w, "type");
        if (ty && ty->type != CKJ_NULL && !(ty->type == CKJ_STR && !strcmp(ty->s, "float"))) {
            char b[80];
            json_shown(ty, b, sizeof b);
            return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s/config.json: quantization_config.config_groups.%.60s.weights.type is %s, "
                           "but the tensors hold float codes ('float'): the config and the weights disagree",
                           m->dir, grp->key ? grp->key : "?", b);
        }
    }
    return LOFP_OK;
}

static lofp_status open_st(lofp_ckpt *c, lofp_io_error *err)
{
    ck_model *m = &c->m;
    char why[128];
    lofp_status cst = check_config_keys(m, err);
    if (cst) return cst;
    c->fmt = lofp_ck_detect(m, why, sizeof why);
    const char *algo = NULL;
    int nvfp4 = 1;
    if (c->fmt == LOFP_CKPT_MODELOPT) {
        const ckj *hq = lofp_ckj_get(m->hf_quant, "quantization");
        algo = lofp_ckj_str(lofp_ckj_get(hq, "quant_algo"));
        if (!algo) algo = lofp_ckj_str(lofp_ckj_get(lofp_ckj_get(m->config, "quantization_config"), "quant_algo"));
        if (!algo) algo = "NVFP4";
        if (!strcmp(algo, "MXFP8")) nvfp4 = 0;
        else if (strcmp(algo, "NVFP4") && strcmp(algo, "W4A16_NVFP4"))
            return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: ModelOpt quant_algo '%s' (lofp reads NVFP4, W4A16_NVFP4, MXFP8)", m->path, algo);
    } else if (c->fmt == LOFP_CKPT_COMPRESSED_TENSORS) {
        const ckj *qc = lofp_ckj_get(m->config, "quantization_config");
        const char *f = lofp_ckj_str(lofp_ckj_get(qc, "format"));
        if (!f) {
            const ckj *g = lofp_ckj_get(qc, "config_groups");
            if (g && g->n) f = lofp_ckj_str(lofp_ckj_get(g->items[0], "format"));
        }
        if (!f) f = any_suffix(m, ".weight_global_scale") ? "nvfp4-pack-quantized" : "mxfp4-pack-quantized";
        if (!strcmp(f, "mxfp4-pack-quantized")) nvfp4 = 0;
        else if (strcmp(f, "nvfp4-pack-quantized"))
            return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: compressed-tensors format '%s' (lofp reads nvfp4-pack-quantized, mxfp4-pack-quantized)", m->path, f);
        algo = f;
    }
    if ((cst = check_config_family(m, c->fmt, err)) || (cst = check_config_blocks(m, c->fmt, nvfp4, err))) return cst;
    size_t nq = 0;
    /* every tensor a shard's metadata describes must be there: the loop below finds them by
       their codes, and one without codes would otherwise vanish from the import */
    for (size_t s = 0; c->fmt == LOFP_CKPT_LOFP && s < m->n_shards; s++)
        for (size_t i = 0; i < lofp_file_metadata_count(m->shards[s].f); i++) {
            const char *qn = lofp_qfile_name_at(m->shards[s].f, i);
            if (!qn) continue;
            char *kc = cat(qn, ".codes");
            int have = kc && lofp_file_find(m->shards[s].f, kc) != NULL;
            free(kc);
            if (!have)
                return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s': its metadata 'lofp:%s' describes codes '%s.codes', which are missing",
                               m->shards[s].name, qn, qn, qn);
        }
    for (size_t i = 0; i < m->n_t; i++) {
        const ck_tref *r = &m->t[i];
        const char *nm = r->name;
        lt x;
        memset(&x, 0, sizeof x);
        x.shard = r->shard;
        if (c->fmt == LOFP_CKPT_LOFP) {
            if (lofp_ck_ends_with(nm, ".codes")) {
                char *base = lofp_ck_strdup(nm);
                base[strlen(base) - 6] = 0;
                char *key = cat(LOFP_QFILE_KEY_PREFIX, base);
                const char *meta = lofp_file_metadata_get(m->shards[r->shard].f, key);
                free(key);
                if (meta) {
                    x.name = base;
                    x.kind = Q_LOFP;
                    x.w = r->ti;
                    x.s = find_ti(m, base, ".scales");
                    x.g = find_ti(m, base, ".global_scale");
                    if (!x.s) {
                        lofp_status st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s': its scales '%s.scales' are missing", m->shards[r->shard].name, nm, base);
                        free(base);
                        return st;
                    }
                    if (!push_lt(c, &x)) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                    nq++;
                    continue;
                }
                /* codes and scales of a lofp tensor in a shard that does not describe them (another
                   shard does: the format is lofp): not dense tensors to copy as U8 / E8M0 */
                const lofp_tensor_info *sc = find_ti(m, base, ".scales");
                if (sc) {
                    lofp_status st = lofp_ck_fail(err, LOFP_ERR_FORMAT,
                                             "%s: tensors '%s' and '%s' are a lofp quantized tensor's codes and scales, but "
                                             "this shard holds no '%s%s' metadata describing them (other shards of the "
                                             "model do); lofp reads no quantized tensor without its description",
                                             m->shards[r->shard].name, nm, sc->name, LOFP_QFILE_KEY_PREFIX, base);
                    free(base);
                    return st;
                }
                free(base);
            }
            if (lofp_ck_ends_with(nm, ".scales") || lofp_ck_ends_with(nm, ".global_scale")) {
                char *base = lofp_ck_strdup(nm);
                *strrchr(base, '.') = 0;
                char *key = cat(LOFP_QFILE_KEY_PREFIX, base);
                int q = lofp_file_metadata_get(m->shards[r->shard].f, key) != NULL;
                free(key);
                free(base);
                if (q) continue;
            }
        } else if (c->fmt == LOFP_CKPT_MODELOPT && lofp_ck_ends_with(nm, ".weight") &&
                   (r->ti->dtype == LOFP_DTYPE_U8 || (r->ti->dtype == LOFP_DTYPE_F8_E4M3 && !nvfp4))) {
            char *base = lofp_ck_strdup(nm);
            base[strlen(base) - 7] = 0;
            x.w = r->ti;
            x.s = find_ti(m, base, ".weight_scale");
            x.g = find_ti(m, base, ".weight_scale_2");
            if (!x.s) {
                lofp_status st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s' is %s (quantized) but its block scales '%s.weight_scale' are missing",
                                         m->shards[r->shard].name, nm, lofp_dtype_name(r->ti->dtype), base);
                free(base);
                return st;
            }
            lofp_status dst = nvfp4 ? check_dtype(m->shards[r->shard].name, x.s, "ModelOpt NVFP4 block scales", LOFP_DTYPE_F8_E4M3, 0,
                                                  "ModelOpt NVFP4", err)
                                    : check_dtype(m->shards[r->shard].name, x.s, "ModelOpt MXFP8 block scales", LOFP_DTYPE_U8,
                                                  LOFP_DTYPE_F8_E8M0, "ModelOpt MXFP8", err);
            if (dst) { free(base); return dst; }
            x.kind = nvfp4 ? Q_NVFP4 : Q_MXFP8;
            x.name = cat(base, ".weight");
            x.logical_k = padded_k_of(m, r->shard, base);
            free(base);
            if (!push_lt(c, &x)) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            nq++;
            continue;
        } else if (c->fmt == LOFP_CKPT_COMPRESSED_TENSORS && lofp_ck_ends_with(nm, ".weight_packed")) {
            char *base = lofp_ck_strdup(nm);
            base[strlen(base) - 14] = 0;
            x.w = r->ti;
            x.s = find_ti(m, base, ".weight_scale");
            x.g = find_ti(m, base, ".weight_global_scale");
            if (!x.s) {
                lofp_status st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s': its block scales '%s.weight_scale' are missing",
                                         m->shards[r->shard].name, nm, base);
                free(base);
                return st;
            }
            const char *f = m->shards[r->shard].name;
            lofp_status dst = check_dtype(f, r->ti, "compressed-tensors packed codes", LOFP_DTYPE_U8, 0, "compressed-tensors", err);
            if (!dst) dst = nvfp4 ? check_dtype(f, x.s, "NVFP4 block scales", LOFP_DTYPE_F8_E4M3, 0, "compressed-tensors NVFP4", err)
                                  : check_dtype(f, x.s, "MXFP4 block scales", LOFP_DTYPE_U8, LOFP_DTYPE_F8_E8M0, "compressed-tensors MXFP4", err);
            if (dst) { free(base); return dst; }
            /* a compressed-tensors linear's packed weight is [N, K/2]: anything else is not one */
            if (!dst && r->ti->ndim != 2)
                dst = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' has %zu dimensions; a compressed-tensors weight_packed is "
                              "[N, K/2]", f, nm, r->ti->ndim);
            if (dst) { free(base); return dst; }
            x.kind = nvfp4 ? Q_NVFP4 : Q_MXFP4;
            x.name = cat(base, ".weight");
            x.logical_k = padded_k_of(m, r->shard, base);
            free(base);
            if (!push_lt(c, &x)) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            nq++;
            continue;
        } else if (c->fmt == LOFP_CKPT_GPT_OSS && lofp_ck_ends_with(nm, "_blocks")) {
            char *base = lofp_ck_strdup(nm);
            base[strlen(base) - 7] = 0;
            x.w = r->ti;
            x.s = find_ti(m, base, "_scales");
            if (!x.s) {
                lofp_status st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s': its scales '%s_scales' are missing", m->shards[r->shard].name, nm, base);
                free(base);
                return st;
            }
            const char *f = m->shards[r->shard].name;
            lofp_status dst = check_dtype(f, r->ti, "gpt-oss MXFP4 blocks", LOFP_DTYPE_U8, 0, "gpt-oss", err);
            if (!dst) dst = check_dtype(f, x.s, "gpt-oss E8M0 block scales", LOFP_DTYPE_U8, LOFP_DTYPE_F8_E8M0, "gpt-oss", err);
            if (dst) { free(base); return dst; }
            x.kind = Q_MXFP4;
            x.name = base;
            if (!push_lt(c, &x)) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            nq++;
            continue;
        }
        if (c->fmt == LOFP_CKPT_MODELOPT && lofp_ck_ends_with(nm, ".weight")) {
            /* a weight beside block scales that is not in the codes dtype: not a dense weight whose
             * scale may be dropped */
            char *base = lofp_ck_strdup(nm);
            if (!base) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            base[strlen(base) - 7] = 0;
            const lofp_tensor_info *sc = find_ti(m, base, ".weight_scale");
            lofp_status st = LOFP_OK;
            if (sc)
                st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                             "%s: tensor '%s' is %s beside block scales '%s': ModelOpt %s stores its codes as %s, and lofp "
                             "reads no other quantized weight (it is not a dense weight whose scales could be dropped)",
                             m->shards[r->shard].name, nm, lofp_dtype_name(r->ti->dtype), sc->name, nvfp4 ? "NVFP4" : "MXFP8",
                             nvfp4 ? "U8 (two E2M1 codes per byte)" : "F8_E4M3");
            free(base);
            if (st) return st;
        }
        if (is_consumed(nm, m, c->fmt)) {
            /* a scale whose codes tensor is missing */
            if (c->fmt == LOFP_CKPT_MODELOPT && lofp_ck_ends_with(nm, ".weight_scale")) {
                char *base = lofp_ck_strdup(nm);
                base[strlen(base) - 13] = 0;
                const lofp_tensor_info *w = find_ti(m, base, ".weight");
                lofp_status st = LOFP_OK;
                if (!w) st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: '%s' has no '%s.weight' to scale", m->shards[r->shard].name, nm, base);
                free(base);
                if (st) return st;
            }
            if (c->fmt == LOFP_CKPT_GPT_OSS && lofp_ck_ends_with(nm, "_scales")) {
                char *base = lofp_ck_strdup(nm);
                if (!base) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                base[strlen(base) - 7] = 0;
                const lofp_tensor_info *w = find_ti(m, base, "_blocks");
                lofp_status st = LOFP_OK;
                if (!w) st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: '%s' has no '%s_blocks' to scale", m->shards[r->shard].name, nm, base);
                free(base);
                if (st) return st;
            }
            continue;
        }
        x.kind = Q_DENSE;
        x.name = lofp_ck_strdup(nm);
        x.w = r->ti;
        if (!push_lt(c, &x)) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    }
    snprintf(c->desc, sizeof c->desc, "%s%s%s: %zu quantized of %zu tensors, %zu shard(s) (%s)", lofp_ckpt_format_name(c->fmt),
             algo ? " " : "", algo ? algo : "", nq, c->n, m->n_shards, why);
    return LOFP_OK;
}

static lofp_status open_gguf(lofp_ckpt *c, const char *path, lofp_io_error *err)
{
    lofp_status st = lofp_gg_open(path, &c->gg, err);
    if (st) return st;
    c->is_gguf = 1;
    c->fmt = LOFP_CKPT_GGUF;
    size_t nq = 0;
    /* one allocation for all (growing by one per tensor would copy quadratically) */
    c->t = malloc((c->gg.n_t ? c->gg.n_t : 1) * sizeof *c->t);
    if (!c->t) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < c->gg.n_t; i++) {
        const gg_tensor *t = &c->gg.t[i];
        lt x;
        memset(&x, 0, sizeof x);
        x.gw = t;
        if (lofp_ck_ends_with(t->name, ".scale") || lofp_ck_ends_with(t->name, ".input_scale")) {
            /* the per-tensor scale of an NVFP4 weight */
            char base[128];
            snprintf(base, sizeof base, "%.*s.weight", (int)(strrchr(t->name, '.') - t->name), t->name);
            const gg_tensor *w = lofp_gg_find_tensor(&c->gg, base);
            if (w && w->type == GG_NVFP4) continue;
            /* the .scale of an NVFP4 tensor not named *.weight: "<name>.scale" */
            snprintf(base, sizeof base, "%.*s", (int)(strrchr(t->name, '.') - t->name), t->name);
            w = lofp_ck_ends_with(t->name, ".scale") ? lofp_gg_find_tensor(&c->gg, base) : NULL;
            if (w && w->type == GG_NVFP4 && !lofp_ck_ends_with(w->name, ".weight")) continue;
        }
        x.name = lofp_ck_strdup(t->name);
        if (t->type == GG_NVFP4 || t->type == GG_MXFP4) {
            x.kind = t->type == GG_NVFP4 ? Q_NVFP4 : Q_MXFP4;
            if (t->type == GG_NVFP4) {
                char sn[128];
                snprintf(sn, sizeof sn, "%.*s.scale", (int)(lofp_ck_ends_with(t->name, ".weight") ? strlen(t->name) - 7 : strlen(t->name)), t->name);
                x.gs = lofp_gg_find_tensor(&c->gg, sn);
            }
            nq++;
        } else {
            x.kind = Q_GG_DENSE;
            if (!lofp_gg_can_decode(t->type)) {
                free(x.name);
                return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' has ggml type %s, which lofp does not decode (it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, NVFP4)",
                               path, t->name, lofp_gg_type_name(t->type));
            }
        }
        if (!x.name) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        c->t[c->n++] = x;
    }
    snprintf(c->desc, sizeof c->desc, "gguf v%u: %zu MXFP4/NVFP4 of %zu tensors, %zu key-value pairs", c->gg.version, nq, c->n, c->gg.n_kv);
    return LOFP_OK;
}

/* The name order of the logical tensors, for lofp_ckpt_find (built once at open). */
static lofp_status build_name_index(lofp_ckpt *c, lofp_io_error *err)
{
    c->by_name = malloc((c->n ? c->n : 1) * sizeof *c->by_name);
    if (!c->by_name) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    int sorted = 1;
    for (size_t i = 0; i < c->n; i++) {
        c->by_name[i] = i;
        if (i && strcmp(c->t[i - 1].name, c->t[i].name) > 0) sorted = 0;
    }
    if (!sorted) {
        /* qsort has no context argument in C11: a bottom-up merge sort of the indices by name */
        size_t n = c->n;
        size_t *tmp = malloc(n * sizeof *tmp);
        if (!tmp) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        for (size_t w = 1; w < n; w *= 2) {
            for (size_t lo = 0; lo < n; lo += 2 * w) {
                size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, k = lo;
                while (a < mid && b < hi)
                    tmp[k++] = strcmp(c->t[c->by_name[a]].name, c->t[c->by_name[b]].name) <= 0 ? c->by_name[a++] : c->by_name[b++];
                while (a < mid) tmp[k++] = c->by_name[a++];
                while (b < hi) tmp[k++] = c->by_name[b++];
            }
            memcpy(c->by_name, tmp, n * sizeof *tmp);
        }
        free(tmp);
    }
    return LOFP_OK;
}

lofp_status lofp_ckpt_open(const char *path, lofp_ckpt **out, lofp_io_error *err)
{
    if (!path || !out) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_ckpt_open: NULL argument");
    *out = NULL;
    lofp_ckpt *c = calloc(1, sizeof *c);
    if (!c) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    c->path = lofp_ck_strdup(path);
    lofp_status st = lofp_ck_check_input(path, err);
    if (st) { lofp_ckpt_close(c); return st; }
    if (lofp_ckpt_is_gguf(path)) st = open_gguf(c, path, err);
    else {
        st = lofp_ck_model_open(path, &c->m, err);
        if (!st) st = open_st(c, err);
    }
    if (!st) st = build_name_index(c, err);
    if (st) { lofp_ckpt_close(c); return st; }
    lofp_ck_ok(err);
    *out = c;
    return LOFP_OK;
}

lofp_status lofp_ckpt_find(const lofp_ckpt *c, const char *name, size_t *index)
{
    if (!c || !name || !index) return LOFP_ERR_INVALID_ARG;
    size_t lo = 0, hi = c->by_name ? c->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(c->t[c->by_name[mid]].name, name);
        if (d == 0) { *index = c->by_name[mid]; return LOFP_OK; }
        if (d < 0) lo = mid + 1;
        else hi = mid;
    }
    return LOFP_ERR_NOT_FOUND;
}

void lofp_ckpt_close(lofp_ckpt *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->t[i].name);
    free(c->t);
    free(c->by_name);
    lofp_ck_model_close(&c->m);
    lofp_gg_close(&c->gg);
    free(c->path);
    free(c);
}

lofp_ckpt_format lofp_ckpt_format_of(const lofp_ckpt *c) { return c ? c->fmt : LOFP_CKPT_UNKNOWN; }
const char *lofp_ckpt_describe(const lofp_ckpt *c) { return c ? c->desc : ""; }
size_t lofp_ckpt_count(const lofp_ckpt *c) { return c ? c->n : 0; }

static float read_scalar(const lofp_tensor_info *ti)
{
    return lofp_dtype_load_f32(ti->dtype, ti->data, 0);
}

/* The per-tensor scale check: present, one finite positive value, and an implied tensor amax
 * (2688 x the decode scale) no larger than 4096. An inverted scale implies amax = 2688^2 / amax:
 * more than 4096 for every tensor whose real amax is below 1764. */
static lofp_status check_global(const char *file, const char *tname, const char *sname, float v, lofp_ckpt_direction dir,
                                lofp_io_error *err)
{
    if (!(v > 0) || !isfinite(v))
        return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s': per-tensor scale '%s' = %g is not a finite positive number", file, tname, sname, (double)v);
    double implied = dir == LOFP_CKPT_SCALE_DECODE ? 2688.0 * v : 2688.0 / v;
    if (implied > 4096.0)
        return lofp_ck_fail(err, LOFP_ERR_MISMATCH,
                       "%s: tensor '%s': per-tensor scale '%s' = %g looks inverted: read in this format's %s direction it "
                       "implies a weight amax of %g; stored the other way it would be %g (the format stores %s)",
                       file, tname, sname, (double)v, dir == LOFP_CKPT_SCALE_DECODE ? "decode" : "encode", implied,
                       dir == LOFP_CKPT_SCALE_DECODE ? 2688.0 / v : 2688.0 * v,
                       dir == LOFP_CKPT_SCALE_DECODE ? "the decode scale amax/2688" : "the encode multiplier 2688/amax");
    return LOFP_OK;
}

lofp_status lofp_ckpt_get(lofp_ckpt *c, size_t i, lofp_ckpt_tensor *t, lofp_io_error *err)
{
    if (!c || !t || i >= c->n) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_ckpt_get: bad argument");
    memset(t, 0, sizeof *t);
    lt *x = &c->t[i];
    t->name = x->name;
    t->global_scale = 1.0f;
    t->stored_scale = 1.0f;
    const char *file = c->is_gguf ? c->path : c->m.shards[x->shard].name;
    t->file = c->is_gguf ? c->path : c->m.shards[x->shard].path;
    if (x->kind == Q_DENSE) {
        t->dtype = x->w->dtype;
        t->data = x->w->data;
        t->nbytes = x->w->nbytes;
        t->ndim = x->w->ndim;
        memcpy(t->shape, x->w->shape, x->w->ndim * sizeof(size_t));
        return LOFP_OK;
    }
    if (c->is_gguf) {
        const gg_tensor *g = x->gw;
        t->stored_type = lofp_gg_type_name(g->type);
        t->ndim = g->n_dims;
        for (uint32_t d = 0; d < g->n_dims; d++) t->shape[d] = (size_t)g->ne[g->n_dims - 1 - d];
        size_t numel = 1;
        for (uint32_t d = 0; d < g->n_dims; d++) numel *= (size_t)g->ne[d];
        if (x->kind == Q_GG_DENSE) {
            float *f = malloc((numel ? numel : 1) * sizeof *f);
            if (!f) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
            lofp_gg_decode(g, f);
            t->dtype = LOFP_DTYPE_F32;
            t->data = f;
            t->nbytes = numel * 4;
            t->owned_ = f;
            return LOFP_OK;
        }
        if (g->ne[0] == 0) /* lofp_gg_parse refuses it; kept so that no division below can trap */
            return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': ne[0] = 0", file, g->name);
        t->quantized = 1;
        t->gguf_split_nibbles = 1;
        t->k = t->kp = (size_t)g->ne[0];
        t->rows = numel / t->k;
        lofp_scheme_preset(x->kind == Q_NVFP4 ? "nvfp4" : "mxfp4", &t->scheme);
        uint32_t blk = t->scheme.block; /* 16 or 32 */
        size_t nb = numel / blk;
        uint8_t *buf = malloc(numel / 2 + nb + numel / 2 + 1); /* + 1: a tensor of 0 rows */
        if (!buf) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        uint8_t *codes = buf, *scales = buf + numel / 2, *split = scales + nb;
        const uint8_t *p = g->data;
        if (x->kind == Q_MXFP4) {
            for (size_t b = 0; b < nb; b++, p += 17) { scales[b] = p[0]; memcpy(split + 16 * b, p + 1, 16); }
            lofp_fp4_repack(split, codes, t->rows, t->k, 32, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD);
        } else {
            for (size_t b = 0; b < nb / 4; b++, p += 36) {
                memcpy(scales + 4 * b, p, 4);
                memcpy(split + 32 * b, p + 4, 32);
            }
            lofp_fp4_repack(split, codes, t->rows, t->k, 16, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD);
            t->direction = LOFP_CKPT_SCALE_DECODE;
            if (x->gs) {
                if (x->gs->type != GG_F32 || x->gs->nbytes != 4)
                    { free(buf); return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: '%s' is not one F32 value", file, x->gs->name); }
                memcpy(&t->stored_scale, x->gs->data, 4);
                t->stored_global = x->gs->name;
                lofp_status st = check_global(file, t->name, x->gs->name, t->stored_scale, LOFP_CKPT_SCALE_DECODE, err);
                if (st) { free(buf); return st; }
            }
            t->global_scale = lofp_nvfp4_encode_from_decode(t->stored_scale);
        }
        t->codes = codes;
        t->codes_bytes = numel / 2;
        t->scales = scales;
        t->scales_bytes = nb;
        t->owned_ = buf;
        t->stored_codes = g->name;
        return LOFP_OK;
    }
    /* safetensors formats */
    const lofp_tensor_info *w = x->w, *s = x->s;
    t->quantized = 1;
    t->stored_codes = w->name;
    t->stored_scales = s->name;
    t->codes = w->data;
    t->codes_bytes = w->nbytes;
    t->scales = s->data;
    t->scales_bytes = s->nbytes;
    if (x->kind == Q_LOFP) {
        /* lofp/qfile.h parses the metadata and checks every stored tensor's dtype, shape and size
           against it, so nothing below reads past the codes or scales */
        lofp_qtensor q;
        lofp_status st = lofp_qtensor_load(c->m.shards[x->shard].f, file, x->name, &q, err);
        if (st) return st;
        if (q.layout != LOFP_LAYOUT_LINEAR)
            return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s': scales in layout '%s' (convert them with `lofp layout convert --to linear` first)",
                           file, x->name, lofp_layout_name(q.layout));
        if (q.ndim > sizeof t->shape / sizeof t->shape[0])
            return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions; checkpoints hold at most %zu", file, x->name,
                           q.ndim, sizeof t->shape / sizeof t->shape[0]);
        t->scheme = q.scheme;
        t->ndim = q.ndim;
        memcpy(t->shape, q.shape, q.ndim * sizeof(size_t));
        t->k = q.k;
        t->kp = q.kp;
        t->rows = q.rows;
        t->codes = q.codes;
        t->codes_bytes = q.codes_bytes;
        t->scales = q.scales;
        t->scales_bytes = q.scales_bytes;
        if (q.global_t) {
            t->stored_scale = t->global_scale = q.global;
            t->direction = LOFP_CKPT_SCALE_ENCODE;
            t->stored_global = q.global_t->name;
            st = check_global(file, x->name, q.global_t->name, t->stored_scale, LOFP_CKPT_SCALE_ENCODE, err);
            if (st) return st;
        }
    } else {
        const char *preset = x->kind == Q_NVFP4 ? "nvfp4" : x->kind == Q_MXFP4 ? "mxfp4" : "mxfp8-e4m3";
        lofp_scheme_preset(preset, &t->scheme);
        int packed = x->kind != Q_MXFP8;
        size_t nd = w->ndim;
        /* a block-quantized tensor has a last dimension to hold its blocks */
        if (nd == 0)
            return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' (quantized codes) has 0 dimensions: no row of blocks to decode",
                           file, w->name);
        if (c->fmt == LOFP_CKPT_GPT_OSS) {
            /* blocks [E, N, G, 16], scales [E, N, G]: stacked experts, whose [N, K] import transposes */
            if (nd != 4 || w->shape[nd - 1] != 16 || s->ndim != nd - 1)
                return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' has shape %s: gpt-oss stores experts' blocks as "
                               "[E, N, G, 16] and scales as [E, N, G]", file, w->name, nd == 2 ? "[N, 16]" : "of another rank");
            for (size_t d = 0; d + 1 < nd; d++)
                if (s->shape[d] != w->shape[d])
                    return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensors '%s' and '%s' disagree in shape", file, w->name, s->name);
            t->ndim = nd - 1;
            for (size_t d = 0; d + 2 < nd; d++) t->shape[d] = w->shape[d];
            t->shape[nd - 2] = w->shape[nd - 2] * 32;
            t->transposed = 1;
        } else {
            t->ndim = nd;
            memcpy(t->shape, w->shape, nd * sizeof(size_t));
            if (packed) t->shape[nd - 1] *= 2;
            size_t blk = t->scheme.block;
            int ok = s->ndim == nd && s->shape[nd - 1] * blk == t->shape[nd - 1];
            for (size_t d = 0; ok && d + 1 < nd; d++) ok = s->shape[d] == w->shape[d];
            if (!ok) return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: scales '%s' do not have the shape of '%s' with one scale per %zu values", file, s->name, w->name, blk);
        }
        t->kp = t->shape[t->ndim - 1];
        t->k = x->logical_k && x->logical_k <= t->kp ? x->logical_k : t->kp;
        t->shape[t->ndim - 1] = t->k;
        t->scheme.pad = t->k != t->kp;
        t->rows = 1;
        for (size_t d = 0; d + 1 < t->ndim; d++) t->rows *= t->shape[d];
        if (x->kind == Q_NVFP4) {
            int enc = c->fmt == LOFP_CKPT_COMPRESSED_TENSORS;
            t->direction = enc ? LOFP_CKPT_SCALE_ENCODE : LOFP_CKPT_SCALE_DECODE;
            char want[300];
            snprintf(want, sizeof want, "%.*s%s", (int)(strlen(x->name) - 7), x->name, enc ? ".weight_global_scale" : ".weight_scale_2");
            if (!x->g)
                return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s': its per-tensor scale '%s' is missing (decoding without it would be off by the whole tensor's scale)", file, w->name, want);
            if (x->g->numel != 1 || !lofp_dtype_is_float(x->g->dtype))
                return lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: '%s' is not one floating value", file, x->g->name);
            t->stored_scale = read_scalar(x->g);
            t->stored_global = x->g->name;
            lofp_status st = check_global(file, w->name, x->g->name, t->stored_scale, t->direction, err);
            if (st) return st;
            t->global_scale = enc ? t->stored_scale : lofp_nvfp4_encode_from_decode(t->stored_scale);
        }
    }
    return LOFP_OK;
}

void lofp_ckpt_tensor_release(lofp_ckpt_tensor *t)
{
    if (!t) return;
    free(t->owned_);
    t->owned_ = NULL;
}

static void store(lofp_dtype dt, void *out, size_t i, float v)
{
    if (dt == LOFP_DTYPE_F32) memcpy((char *)out + 4 * i, &v, 4);
    else {
        uint16_t h = dt == LOFP_DTYPE_BF16 ? lofp_fp32_to_bf16(v) : lofp_fp32_to_fp16(v);
        memcpy((char *)out + 2 * i, &h, 2);
    }
}

lofp_status lofp_ckpt_dequantize(const lofp_ckpt_tensor *t, lofp_dtype out_dt, void *out, lofp_io_error *err)
{
    if (!t || !out || !lofp_dtype_is_dense(out_dt))
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "lofp_ckpt_dequantize: bad argument");
    if (!t->quantized) {
        size_t n = 1;
        for (size_t d = 0; d < t->ndim; d++) n *= t->shape[d];
        if (!lofp_dtype_is_float(t->dtype)) return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' is %s, not floating", t->file, t->name, lofp_dtype_name(t->dtype));
        for (size_t i = 0; i < n; i++) store(out_dt, out, i, lofp_dtype_load_f32(t->dtype, t->data, i));
        return LOFP_OK;
    }
    lofp_scheme s = t->scheme;
    int nv_two = s.id == LOFP_SCHEME_NVFP4 && t->direction != LOFP_CKPT_SCALE_NONE;
    if (!nv_two || (t->direction == LOFP_CKPT_SCALE_ENCODE && t->stored_codes && lofp_ck_ends_with(t->stored_codes, ".codes"))) {
        /* lofp files and every MX format: lofp's own dequantization */
        if (s.id == LOFP_SCHEME_NVFP4 && !nv_two) s.two_level = 0;
        lofp_status st = lofp_dequantize(&s, t->codes, t->scales, t->global_scale, t->rows, t->k, out_dt, out);
        if (st) return lofp_ck_fail(err, st, "%s: tensor '%s': dequantize failed (%s)", t->file, t->name, lofp_status_name(st));
        if (t->gguf_split_nibbles) {
            /* ggml's value table has +0 for code 8 (E2M1 -0) */
            size_t n = t->rows * t->k;
            for (size_t i = 0; i < n; i++) {
                if (out_dt == LOFP_DTYPE_F32) { uint32_t *u = (uint32_t *)out + i; if (*u == 0x80000000u) *u = 0; }
                else { uint16_t *u = (uint16_t *)out + i; if (*u == 0x8000u) *u = 0; }
            }
        }
        return LOFP_OK;
    }
    /* NVFP4 as the formats' consumers decode it: one scale product per block of 16 */
    float e2m1[16], e4m3[256];
    for (int q = 0; q < 16; q++) e2m1[q] = lofp_decode(LOFP_ELEM_E2M1, (uint32_t)q);
    if (t->gguf_split_nibbles) e2m1[8] = 0.0f; /* ggml's table: code 8 is +0 */
    for (int q = 0; q < 256; q++) e4m3[q] = lofp_decode(LOFP_ELEM_E4M3, (uint32_t)q);
    size_t kp = t->kp, nbk = kp / 16;
    float blk[16];
    for (size_t r = 0; r < t->rows; r++) {
        const uint8_t *cr = t->codes + r * kp / 2;
        for (size_t b = 0; b < nbk; b++) {
            float sc = e4m3[t->scales[r * nbk + b]];
            if (t->gguf_split_nibbles) {
                /* ggml: block value, then ggml_mul by .scale */
                for (int j = 0; j < 16; j++) {
                    uint8_t byte = cr[(b * 16 + (size_t)j) / 2];
                    blk[j] = (e2m1[(j & 1) ? byte >> 4 : byte & 15] * sc) * t->stored_scale;
                }
            } else {
                float f = t->direction == LOFP_CKPT_SCALE_DECODE ? sc * t->stored_scale  /* ModelOpt */
                                                                 : sc / t->stored_scale; /* compressed-tensors */
                for (int j = 0; j < 16; j++) {
                    uint8_t byte = cr[(b * 16 + (size_t)j) / 2];
                    blk[j] = e2m1[(j & 1) ? byte >> 4 : byte & 15] * f;
                }
            }
            size_t j0 = b * 16, jn = j0 + 16 <= t->k ? 16 : (j0 < t->k ? t->k - j0 : 0);
            size_t base = r * t->k + j0;
            if (out_dt == LOFP_DTYPE_F32) memcpy((float *)out + base, blk, jn * sizeof(float));
            else
                for (size_t j = 0; j < jn; j++) {
                    uint16_t h = out_dt == LOFP_DTYPE_BF16 ? lofp_fp32_to_bf16(blk[j]) : lofp_fp32_to_fp16(blk[j]);
                    memcpy((uint16_t *)out + base + j, &h, 2);
                }
        }
    }
    return LOFP_OK;
}

/* ---- import ----------------------------------------------------------------------------- */

/* Writes quantized tensor t (already checked) to writer index j in chunks of rows (gpt-oss: one
 * expert at a time, transposed to transformers' [E, K, N]), so import holds about 4 MiB of dense
 * output at a time instead of the whole tensor. */
static lofp_status import_quantized_chunked(const lofp_ckpt_tensor *t, lofp_dtype odt, st_writer *w, size_t j,
                                            lofp_io_error *err)
{
    size_t es = odt == LOFP_DTYPE_F32 ? 4 : 2;
    size_t cbr = t->scheme.elem == LOFP_ELEM_E2M1 ? t->kp / 2 : t->kp; /* codes bytes per row */
    size_t sbr = t->kp / t->scheme.block;                                 /* scale bytes per row */
    size_t R;
    if (t->transposed) R = t->shape[t->ndim - 2];
    else {
        R = ((size_t)4 << 20) / (t->k > 0 ? t->k * es : 1);
        if (R == 0) R = 1;
    }
    size_t K = t->k;
    /* no column: nothing to decode or write, however many rows the shape claims */
    if (K == 0 || t->rows == 0) return LOFP_OK;
    void *buf = malloc(R * K * es > 0 ? R * K * es : 1);
    void *tr = t->transposed ? malloc(R * K * es > 0 ? R * K * es : 1) : NULL;
    if (!buf || (t->transposed && !tr)) { free(buf); free(tr); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    lofp_status st = LOFP_OK;
    for (size_t r0 = 0; !st && r0 < t->rows; r0 += R) {
        lofp_ckpt_tensor sub = *t;
        sub.rows = t->rows - r0 < R ? t->rows - r0 : R;
        sub.codes = t->codes + r0 * cbr;
        sub.scales = t->scales + r0 * sbr;
        st = lofp_ckpt_dequantize(&sub, odt, buf, err);
        if (st) break;
        if (t->transposed) {
            size_t N = sub.rows;
            for (size_t a = 0; a < N; a++)
                for (size_t b = 0; b < K; b++)
                    memcpy((char *)tr + (b * N + a) * es, (char *)buf + (a * K + b) * es, es);
            st = lofp_st_writer_put_at(w, j, tr, N * K * es, err);
        } else
            st = lofp_st_writer_put_at(w, j, buf, sub.rows * K * es, err);
    }
    free(buf);
    free(tr);
    return st;
}

static lofp_status import_tensor(lofp_ckpt *c, size_t i, lofp_dtype odt, void **buf, lofp_tensor_desc *d,
                                 size_t *shape, lofp_io_error *err)
{
    lofp_ckpt_tensor t;
    lofp_status st = lofp_ckpt_get(c, i, &t, err);
    if (st) return st;
    d->name = c->t[i].name;
    if (!t.quantized && (c->is_gguf ? 0 : 1)) {
        d->dtype = t.dtype;
        d->ndim = t.ndim;
        memcpy(shape, t.shape, t.ndim * sizeof *shape);
        d->shape = shape;
        d->data = t.data;
        d->nbytes = t.nbytes;
        *buf = NULL;
        return LOFP_OK;
    }
    size_t n = 1;
    for (size_t k = 0; k < t.ndim; k++) n *= t.shape[k];
    size_t es = odt == LOFP_DTYPE_F32 ? 4 : 2;
    if (!t.quantized) {
        /* GGUF dense types: F32 stays F32 (norms), the rest in the import dtype */
        lofp_dtype dt = c->t[i].gw->type == GG_F32 ? LOFP_DTYPE_F32 : odt;
        es = dt == LOFP_DTYPE_F32 ? 4 : 2;
        void *o = malloc(n * es > 0 ? n * es : 1);
        if (!o) { lofp_ckpt_tensor_release(&t); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
        lofp_ckpt_dequantize(&t, dt, o, err);
        lofp_ckpt_tensor_release(&t);
        d->dtype = dt;
        d->ndim = t.ndim;
        memcpy(shape, t.shape, t.ndim * sizeof *shape);
        d->shape = shape;
        d->data = o;
        d->nbytes = n * es;
        *buf = o;
        return LOFP_OK;
    }
    void *o = malloc(n * es > 0 ? n * es : 1);
    if (!o) { lofp_ckpt_tensor_release(&t); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    st = lofp_ckpt_dequantize(&t, odt, o, err);
    if (!st && t.transposed) {
        /* gpt-oss: [E, N, K] -> transformers' [E, K, N] */
        size_t N = t.shape[t.ndim - 2], K = t.shape[t.ndim - 1], E = n / (N * K);
        void *tr = malloc(n * es);
        if (!tr) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        for (size_t e = 0; !st && e < E; e++)
            for (size_t a = 0; a < N; a++)
                for (size_t b = 0; b < K; b++)
                    memcpy((char *)tr + ((e * K + b) * N + a) * es, (char *)o + ((e * N + a) * K + b) * es, es);
        free(o);
        o = tr;
        size_t tmp = t.shape[t.ndim - 1];
        t.shape[t.ndim - 1] = t.shape[t.ndim - 2];
        t.shape[t.ndim - 2] = tmp;
    }
    lofp_ckpt_tensor_release(&t);
    if (st) { free(o); return st; }
    d->dtype = odt;
    d->ndim = t.ndim;
    memcpy(shape, t.shape, t.ndim * sizeof *shape);
    d->shape = shape;
    d->data = o;
    d->nbytes = n * es;
    *buf = o;
    return LOFP_OK;
}


lofp_status lofp_ckpt_import(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err)
{
    lofp_ckpt_options def;
    if (!o) { lofp_ckpt_options_init(&def); o = &def; }
    { lofp_status pf = lofp_ck_preflight(in, out, o, 1, err); if (pf) return pf; }
    lofp_dtype odt = o->import_dtype ? o->import_dtype : LOFP_DTYPE_BF16;
    if (odt != LOFP_DTYPE_BF16 && odt != LOFP_DTYPE_F16 && odt != LOFP_DTYPE_F32)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "import: --dtype must be bf16, f16 or f32");
    lofp_ckpt *c;
    lofp_status st = lofp_ckpt_open(in, &c, err);
    if (st) return st;
    if (c->fmt == LOFP_CKPT_DENSE) {
        lofp_ckpt_close(c);
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s holds no quantized tensors (nothing to import)", in);
    }
    if (!c->is_gguf && (st = lofp_ck_model_checks(&c->m, o, 1, err)) != LOFP_OK) { lofp_ckpt_close(c); return st; }
    /* check every tensor before writing anything */
    for (size_t i = 0; !st && i < c->n; i++) {
        lofp_ckpt_tensor t;
        st = lofp_ckpt_get(c, i, &t, err);
        lofp_ckpt_tensor_release(&t);
    }
    char *stage = NULL;
    if (!st) st = lofp_ck_stage_dir(out, &stage, err);
    if (st) { lofp_ckpt_close(c); return st; }
    size_t n_sh = c->is_gguf ? 1 : c->m.n_shards;
    for (size_t s = 0; !st && s < n_sh; s++) {
        /* one shard at a time: headers from shapes, then each tensor decoded and written */
        size_t cnt = 0;
        for (size_t i = 0; i < c->n; i++) cnt += c->is_gguf || c->t[i].shard == s;
        lofp_tensor_desc *d = calloc(cnt ? cnt : 1, sizeof *d);
        size_t (*shapes)[LOFP_MAX_NDIM] = calloc(cnt ? cnt : 1, sizeof *shapes);
        size_t *idx = calloc(cnt ? cnt : 1, sizeof *idx);
        if (!d || !shapes || !idx) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        size_t k = 0;
        for (size_t i = 0; !st && i < c->n; i++) {
            if (!(c->is_gguf || c->t[i].shard == s)) continue;
            lofp_ckpt_tensor t;
            st = lofp_ckpt_get(c, i, &t, err);
            if (st) break;
            d[k].name = c->t[i].name;
            d[k].ndim = t.ndim;
            memcpy(shapes[k], t.shape, t.ndim * sizeof(size_t));
            if (t.transposed) { shapes[k][t.ndim - 1] = t.shape[t.ndim - 2]; shapes[k][t.ndim - 2] = t.shape[t.ndim - 1]; }
            d[k].shape = shapes[k];
            d[k].dtype = t.quantized ? odt : c->is_gguf ? (c->t[i].gw->type == GG_F32 ? LOFP_DTYPE_F32 : odt) : t.dtype;
            lofp_ckpt_tensor_release(&t);
            idx[k++] = i;
        }
        const char *sname = c->is_gguf ? "model.safetensors" : c->m.shards[s].name;
        char *path = lofp_ck_path(stage, sname);
        lofp_metadata_entry meta[1] = { { "format", "pt" } };
        st_writer *w = NULL;
        if (!st) st = lofp_st_writer_open(path, d, k, meta, 1, &w, err);
        for (size_t j = 0; !st && j < k; j++) {
            void *buf = NULL;
            lofp_tensor_desc dd;
            memset(&dd, 0, sizeof dd);
            size_t sh[LOFP_MAX_NDIM];
            lofp_ckpt_tensor qt;
            st = lofp_ckpt_get(c, idx[j], &qt, err);
            if (!st && qt.quantized && !qt.gguf_split_nibbles) {
                st = import_quantized_chunked(&qt, odt, w, j, err);
                lofp_ckpt_tensor_release(&qt);
            } else {
                if (!st) lofp_ckpt_tensor_release(&qt);
                if (!st) st = import_tensor(c, idx[j], odt, &buf, &dd, sh, err);
                if (!st) st = lofp_st_writer_put_at(w, j, dd.data, dd.nbytes, err);
            }
            free(buf);
            if (!st && o->progress) o->progress(o->ctx, sname, s, n_sh, j + 1, k);
        }
        if (w) { if (!st) st = lofp_st_writer_finish(w, err); else lofp_st_writer_abort(w); }
        free(path);
        free(d);
        free(shapes);
        free(idx);
    }
    if (!st && !c->is_gguf) {
        ck_model *m = &c->m;
        if (m->config) {
            lofp_ckj_del(m->config, "quantization_config");
            char *p = lofp_ck_path(stage, "config.json");
            st = lofp_ckj_write(p, m->config, err);
            free(p);
        }
        for (size_t i = 0; !st && i < m->n_others; i++) {
            char *a = lofp_ck_path(m->dir, m->others[i]), *b = lofp_ck_path(stage, m->others[i]);
            st = lofp_ck_copy_other(a, b, err);
            free(a);
            free(b);
        }
        if (!st && m->index_name) {
            const char **names = calloc(m->n_shards, sizeof *names);
            char **paths = calloc(m->n_shards, sizeof *paths);
            for (size_t s = 0; s < m->n_shards; s++) { names[s] = m->shards[s].name; paths[s] = lofp_ck_path(stage, names[s]); }
            char *ip = lofp_ck_path(stage, m->index_name);
            st = lofp_ck_write_index(ip, names, (const char *const *)paths, m->n_shards, err);
            free(ip);
            for (size_t s = 0; s < m->n_shards; s++) free(paths[s]);
            free(names);
            free(paths);
        }
    }
    if (!st) st = lofp_ck_stage_commit(stage, out, err);
    else lofp_ck_rmtree(stage);
    free(stage);
    lofp_ckpt_close(c);
    if (!st) lofp_ck_ok(err);
    return st;
}

/* ck_gguf_llama.c -- `lofp convert --to gguf MODEL_DIR OUT.gguf` for the llama architecture: the
 * llama.* hyperparameters from config.json, a gpt2-style BPE tokenizer from tokenizer.json, the
 * tensors under llama.cpp's names (q/k rows permuted from Hugging Face's half-split RoPE layout to
 * ggml's interleaved pairs, as llama.cpp's converter does), linear weights quantized to MXFP4 or
 * NVFP4 (+ .scale), norms in F32, embeddings and output as they are. Every tensor's shape is
 * checked against config.json (and config.json against the embedding and the tokenizer) before
 * anything is written; RoPE base and scaling (linear, llama3's rope_freqs.weight) and the
 * pre-tokenizer are carried as llama.cpp's converter writes them, or refused with a message.
 * Other architectures get a message pointing at llama.cpp's converter. */
#include "ck_internal.h"
#include "ck_method.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const ck_tref *src;
    char name[80];
    int kind;          /* 0 copy, 1 quantize, 2 F32, 3 .scale of the previous, 4 rope_freqs */
    int permute_heads; /* q: n_head, k: n_head_kv, 0: none */
    float G;
    float *freqs;      /* kind 4: rope_freqs.weight (Llama 3 RoPE factors) */
} lplan;

static int map_name(const char *hf, char *out, size_t cap, int *perm_q, int *perm_k)
{
    static const char *const m[][2] = {
        { "self_attn.q_proj.weight", "attn_q.weight" }, { "self_attn.k_proj.weight", "attn_k.weight" },
        { "self_attn.v_proj.weight", "attn_v.weight" }, { "self_attn.o_proj.weight", "attn_output.weight" },
        { "input_layernorm.weight", "attn_norm.weight" }, { "post_attention_layernorm.weight", "ffn_norm.weight" },
        { "mlp.gate_proj.weight", "ffn_gate.weight" }, { "mlp.up_proj.weight", "ffn_up.weight" },
        { "mlp.down_proj.weight", "ffn_down.weight" },
    };
    *perm_q = *perm_k = 0;
    if (!strcmp(hf, "model.embed_tokens.weight")) { snprintf(out, cap, "token_embd.weight"); return 1; }
    if (!strcmp(hf, "model.norm.weight")) { snprintf(out, cap, "output_norm.weight"); return 1; }
    if (!strcmp(hf, "lm_head.weight")) { snprintf(out, cap, "output.weight"); return 1; }
    unsigned layer;
    int n = 0;
    if (sscanf(hf, "model.layers.%u.%n", &layer, &n) == 1 && n > 0)
        for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
            if (!strcmp(hf + n, m[i][0])) {
                snprintf(out, cap, "blk.%u.%s", layer, m[i][1]);
                *perm_q = i == 0;
                *perm_k = i == 1;
                return 1;
            }
    return 0;
}

/* A config value that must be an integer in [lo, hi] when present: LOFP_OK and *out set (def
 * when absent), else LOFP_ERR_FORMAT with err filled (the key and the value named). */
static lofp_status cfg_uint(const ck_model *m, const char *k, long long def, long long lo, long long hi, long long *out,
                    lofp_io_error *err)
{
    const ckj *j = lofp_ckj_get(m->config, k);
    *out = def;
    if (!j || j->type == CKJ_NULL) return LOFP_OK;
    long long v;
    if (!lofp_ckj_int(j, &v) || v < lo || v > hi)
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: %s = %s is not an integer in [%lld, %lld]", m->dir, k,
                       j->type == CKJ_NUM ? j->s : "(not a number)", lo, hi);
    *out = v;
    return LOFP_OK;
}

/* A floating config value that must be finite and positive when present (as cfg_uint). */
static lofp_status cfg_pos(const ck_model *m, const ckj *obj, const char *where, const char *k, double def, double *out,
                   lofp_io_error *err)
{
    const ckj *j = lofp_ckj_get(obj, k);
    *out = def;
    if (!j || j->type == CKJ_NULL) return LOFP_OK;
    double v;
    if (!lofp_ckj_num(j, &v) || !(v > 0) || v > 3.4e38)
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: %s%s = %s is not a finite positive number", m->dir, where, k,
                       j->type == CKJ_NUM ? j->s : "(not a number)");
    *out = v;
    return LOFP_OK;
}

static int str_is(const ckj *j, const char *s) { const char *v = lofp_ckj_str(j); return v && !strcmp(v, s); }
static int bool_is(const ckj *j, int b, int absent) { return !j ? absent : j->type == CKJ_BOOL && j->b == b; }

/* Llama 3's split pattern, as its tokenizer.json states it (the Split pre-tokenizer's Regex). */
static const char llama3_split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* llama.cpp's name of the pre-tokenizer tokenizer.json configures (tokenizer.ggml.pre): llama.cpp's
 * converter hashes the token ids the Hugging Face tokenizer gives for a check text; without that
 * tokenizer lofp recognises the configurations of the families whose splitting llama.cpp
 * implements, and names anything else in *what (NULL returned):
 *   ByteLevel(add_prefix_space false, use_regex true)                      -> "gpt-2"
 *   Sequence[Digits(individual_digits true), ByteLevel(same)]              -> "smollm" (SmolLM,
 *     SmolLM2, StarCoder: each digit apart, then GPT-2's pattern)
 *   Sequence[Split(Llama 3's regex, Isolated), ByteLevel(use_regex false)] -> "llama-bpe"
 * and no normalizer in each case. */
static const char *pre_tokenizer_name(const ckj *tj, char *what, size_t cap)
{
    const ckj *norm = lofp_ckj_get(tj, "normalizer"), *pre = lofp_ckj_get(tj, "pre_tokenizer");
    if (norm && norm->type != CKJ_NULL) {
        const char *nt = lofp_ckj_str(lofp_ckj_get(norm, "type"));
        snprintf(what, cap, "a %s normalizer", nt ? nt : "(untyped)");
        return NULL;
    }
    if (!pre || pre->type == CKJ_NULL) { snprintf(what, cap, "no pre_tokenizer"); return NULL; }
    const char *pt = lofp_ckj_str(lofp_ckj_get(pre, "type"));
    if (pt && !strcmp(pt, "ByteLevel") && bool_is(lofp_ckj_get(pre, "add_prefix_space"), 0, 1) && bool_is(lofp_ckj_get(pre, "use_regex"), 1, 1))
        return "gpt-2";
    const ckj *seq = pt && !strcmp(pt, "Sequence") ? lofp_ckj_get(pre, "pretokenizers") : NULL;
    if (seq && seq->type == CKJ_ARR && seq->n == 2) {
        const ckj *a = seq->items[0], *b = seq->items[1];
        const char *at = lofp_ckj_str(lofp_ckj_get(a, "type")), *bt = lofp_ckj_str(lofp_ckj_get(b, "type"));
        int b_bl = bt && !strcmp(bt, "ByteLevel") && bool_is(lofp_ckj_get(b, "add_prefix_space"), 0, 1);
        if (at && !strcmp(at, "Digits") && bool_is(lofp_ckj_get(a, "individual_digits"), 1, 0) && b_bl &&
            bool_is(lofp_ckj_get(b, "use_regex"), 1, 1))
            return "smollm";
        const ckj *pat = lofp_ckj_get(lofp_ckj_get(a, "pattern"), "Regex");
        if (at && !strcmp(at, "Split") && str_is(pat, llama3_split) && str_is(lofp_ckj_get(a, "behavior"), "Isolated") &&
            bool_is(lofp_ckj_get(a, "invert"), 0, 1) && b_bl && bool_is(lofp_ckj_get(b, "use_regex"), 0, 0))
            return "llama-bpe";
        if (at && !strcmp(at, "Split") && lofp_ckj_str(pat)) {
            snprintf(what, cap, "a Split pre-tokenizer with the pattern '%.120s'", lofp_ckj_str(pat));
            return NULL;
        }
    }
    lofp_sbuf b = { 0 };
    lofp_ckj_dump(&b, pre, -1);
    snprintf(what, cap, "the pre_tokenizer %.200s", b.p && !b.failed ? b.p : "(unreadable)");
    lofp_sbuf_free(&b);
    return NULL;
}

/* Tokenizer KVs for a vocabulary of exactly n_vocab tokens (the embedding's rows): ids the
 * tokenizer leaves unused become [PAD<id>] tokens of type UNUSED, as llama.cpp's converter pads
 * them; an id at or past n_vocab is refused. */
static lofp_status tokenizer_kvs(const ck_model *m, size_t n_vocab, lofp_sbuf *kv, uint64_t *nkv, char *pre_used,
                                 size_t pre_cap, lofp_io_error *err)
{
    char *p = lofp_ck_path(m->dir, "tokenizer.json");
    ckj *tj = p ? lofp_ckj_read(p, err) : NULL;
    free(p);
    if (!tj) {
        /* the reader's message is copied out first: err->message cannot be an argument of the
         * lofp_ck_fail that rewrites it */
        char why[sizeof err->message];
        memcpy(why, err ? err->message : "", err ? sizeof why : 1);
        return lofp_ck_fail(err, err ? err->status : LOFP_ERR_NOT_FOUND, "%s: a GGUF model needs tokenizer.json (%s)", m->dir, why);
    }
    const ckj *model = lofp_ckj_get(tj, "model");
    const char *type = lofp_ckj_str(lofp_ckj_get(model, "type"));
    const ckj *vocab = lofp_ckj_get(model, "vocab"), *merges = lofp_ckj_get(model, "merges");
    const ckj *bf = lofp_ckj_get(model, "byte_fallback");
    lofp_status st = LOFP_OK;
    if (!type || strcmp(type, "BPE") || !vocab || vocab->type != CKJ_OBJ || (bf && bf->type == CKJ_BOOL && bf->b)) {
        st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                     "%s/tokenizer.json: lofp writes GGUF tokenizers of the byte-level BPE kind (gpt2) only; this one is %s%s. "
                     "Convert with llama.cpp's convert_hf_to_gguf.py, then requantize: lofp convert --to gguf MODEL.gguf OUT.gguf",
                     m->dir, type ? type : "of no type", bf && bf->b ? " with byte_fallback (SentencePiece style)" : "");
        lofp_ckj_free(tj);
        return st;
    }
    /* tokens by id: the vocab plus added tokens, every id below the embedding's rows */
    const ckj *added = lofp_ckj_get(tj, "added_tokens");
    for (size_t i = 0; i < vocab->n + (added && added->type == CKJ_ARR ? added->n : 0); i++) {
        const ckj *e = i < vocab->n ? vocab->items[i] : lofp_ckj_get(added->items[i - vocab->n], "id");
        const char *tn = i < vocab->n ? vocab->items[i]->key : lofp_ckj_str(lofp_ckj_get(added->items[i - vocab->n], "content"));
        long long id;
        if (!lofp_ckj_int(e, &id) || id < 0 || (unsigned long long)id >= n_vocab) {
            st = lofp_ck_fail(err, LOFP_ERR_MISMATCH,
                         "%s/tokenizer.json: token '%.60s' has id %s, outside the %zu rows of model.embed_tokens.weight "
                         "(the vocabulary GGUF holds)", m->dir, tn ? tn : "?", e && e->type == CKJ_NUM ? e->s : "(not an integer)", n_vocab);
            lofp_ckj_free(tj);
            return st;
        }
    }
    char what[300];
    const char *pre = pre_tokenizer_name(tj, what, sizeof what);
    if (!pre) {
        st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                     "%s/tokenizer.json: %s: lofp does not know which llama.cpp pre-tokenizer (tokenizer.ggml.pre) splits text "
                     "the way it does (it recognises GPT-2's ByteLevel, SmolLM's Digits + ByteLevel and Llama 3's Split + "
                     "ByteLevel); convert with llama.cpp's convert_hf_to_gguf.py, then requantize: lofp convert --to gguf "
                     "MODEL.gguf OUT.gguf", m->dir, what);
        lofp_ckj_free(tj);
        return st;
    }
    snprintf(pre_used, pre_cap, "%s", pre);
    size_t n = n_vocab;
    const char **tok = calloc(n, sizeof *tok);
    int32_t *tt = calloc(n, sizeof *tt);
    if (!tok || !tt) { free(tok); free(tt); lofp_ckj_free(tj); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    for (size_t i = 0; i < vocab->n; i++) {
        long long id;
        if (lofp_ckj_int(vocab->items[i], &id) && id >= 0 && (size_t)id < n) { tok[id] = vocab->items[i]->key; tt[id] = 1; }
    }
    for (size_t i = 0; added && i < added->n; i++) {
        long long id;
        const char *c = lofp_ckj_str(lofp_ckj_get(added->items[i], "content"));
        const ckj *sp = lofp_ckj_get(added->items[i], "special");
        if (c && lofp_ckj_int(lofp_ckj_get(added->items[i], "id"), &id) && id >= 0 && (size_t)id < n) {
            tok[id] = c;
            tt[id] = sp && sp->b ? 3 : 4; /* control / user-defined */
        }
    }
    char pad[32];
    lofp_gg_put_kv_str(kv, "tokenizer.ggml.model", "gpt2");
    lofp_gg_put_kv_str(kv, "tokenizer.ggml.pre", pre);
    *nkv += 2;
    /* tokens */
    lofp_gg_put_string(kv, "tokenizer.ggml.tokens", strlen("tokenizer.ggml.tokens"));
    uint32_t t9 = GGV_ARRAY, t8 = GGV_STRING, t5 = GGV_I32;
    lofp_sbuf_put(kv, &t9, 4);
    lofp_sbuf_put(kv, &t8, 4);
    uint64_t nn = n;
    lofp_sbuf_put(kv, &nn, 8);
    for (size_t i = 0; i < n; i++) {
        if (!tok[i]) { snprintf(pad, sizeof pad, "[PAD%zu]", i); lofp_gg_put_string(kv, pad, strlen(pad)); tt[i] = 5; }
        else lofp_gg_put_string(kv, tok[i], strlen(tok[i]));
    }
    lofp_gg_put_string(kv, "tokenizer.ggml.token_type", strlen("tokenizer.ggml.token_type"));
    lofp_sbuf_put(kv, &t9, 4);
    lofp_sbuf_put(kv, &t5, 4);
    lofp_sbuf_put(kv, &nn, 8);
    lofp_sbuf_put(kv, tt, 4 * n);
    *nkv += 2;
    if (merges && merges->type == CKJ_ARR) {
        lofp_gg_put_string(kv, "tokenizer.ggml.merges", strlen("tokenizer.ggml.merges"));
        lofp_sbuf_put(kv, &t9, 4);
        lofp_sbuf_put(kv, &t8, 4);
        uint64_t nm = merges->n;
        lofp_sbuf_put(kv, &nm, 8);
        for (size_t i = 0; i < merges->n; i++) {
            const ckj *e = merges->items[i];
            if (e->type == CKJ_STR) lofp_gg_put_string(kv, e->s, e->slen);
            else if (e->type == CKJ_ARR && e->n == 2 && lofp_ckj_str(e->items[0]) && lofp_ckj_str(e->items[1])) {
                /* put, not printf: merges of long tokens (runs of spaces) pass any fixed buffer */
                lofp_sbuf b = { 0 };
                lofp_sbuf_put(&b, e->items[0]->s, e->items[0]->slen);
                lofp_sbuf_put(&b, " ", 1);
                lofp_sbuf_put(&b, e->items[1]->s, e->items[1]->slen);
                if (b.failed) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                else lofp_gg_put_string(kv, b.p, b.len);
                lofp_sbuf_free(&b);
                if (st) break;
            } else {
                st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/tokenizer.json: merge %zu is neither \"a b\" nor [a, b]", m->dir, i);
                break;
            }
        }
        *nkv += 1;
    }
    /* special ids: integers below the vocabulary when present (a list of eos ids gives its first) */
    static const char *const sk[2] = { "bos_token_id", "eos_token_id" };
    for (int q = 0; q < 2 && !st; q++) {
        const ckj *j = lofp_ckj_get(m->config, sk[q]);
        if (j && j->type == CKJ_ARR) j = j->n ? j->items[0] : NULL;
        if (!j || j->type == CKJ_NULL) continue;
        long long id;
        if (!lofp_ckj_int(j, &id) || id < 0 || (unsigned long long)id >= n) {
            st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s/config.json: %s = %s is not a token id below the vocabulary's %zu", m->dir, sk[q],
                         j->type == CKJ_NUM ? j->s : "(not an integer)", n);
            break;
        }
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s", sk[q]);
        lofp_gg_put_kv_u32(kv, key, (uint32_t)id);
        (*nkv)++;
    }
    /* whether the tokenizer adds BOS / EOS, where the directory says so (llama.cpp's default
     * differs by pre-tokenizer): tokenizer_config.json's add_bos_token / add_eos_token, else the
     * TemplateProcessing post-processor of tokenizer.json (a special token first / last in its
     * "single" template), else none (a ByteLevel or absent post-processor adds nothing) */
    char *cp = lofp_ck_path(m->dir, "tokenizer_config.json");
    ckj *tc = NULL;
    if (!st && cp && lofp_ck_exists(cp)) {
        lofp_io_error e2;
        tc = lofp_ckj_read(cp, &e2);
        if (!tc) st = lofp_ck_fail(err, e2.status, "%s", e2.message);
    }
    free(cp);
    const ckj *pp = lofp_ckj_get(tj, "post_processor");
    const ckj *tp = str_is(lofp_ckj_get(pp, "type"), "TemplateProcessing") ? pp : NULL;
    const ckj *procs = str_is(lofp_ckj_get(pp, "type"), "Sequence") ? lofp_ckj_get(pp, "processors") : NULL;
    for (size_t i = 0; !tp && procs && procs->type == CKJ_ARR && i < procs->n; i++)
        if (str_is(lofp_ckj_get(procs->items[i], "type"), "TemplateProcessing")) tp = procs->items[i];
    const ckj *single = lofp_ckj_get(tp, "single");
    static const char *const ak[2] = { "add_bos_token", "add_eos_token" };
    for (int q = 0; q < 2 && !st; q++) {
        const ckj *j = lofp_ckj_get(tc, ak[q]);
        int v;
        if (j && j->type == CKJ_BOOL) v = j->b;
        else if (single && single->type == CKJ_ARR && single->n) v = lofp_ckj_get(single->items[q ? single->n - 1 : 0], "SpecialToken") != NULL;
        else if (!pp || pp->type == CKJ_NULL || str_is(lofp_ckj_get(pp, "type"), "ByteLevel")) v = 0;
        else continue;
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s", ak[q]);
        lofp_gg_put_kv_bool(kv, key, v);
        (*nkv)++;
    }
    lofp_ckj_free(tc);
    free(tok);
    free(tt);
    lofp_ckj_free(tj);
    return st;
}

/* The target of convert --to gguf (ck_internal.h). It lives here, beside the directory path, so
 * that ck_gguf_conv.c, which calls into this file, is the only one of the two to depend on the
 * other (the layering test refuses a loop). */
lofp_status lofp_gg_target(const lofp_ckpt_options *o, gg_target *t, lofp_io_error *err)
{
    const char *sch = o->scheme ? o->scheme : "mxfp4";
    if ((strcmp(sch, "mxfp4") && strcmp(sch, "nvfp4")) || lofp_scheme_preset(sch, &t->s))
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "convert --to gguf: scheme '%s' (GGUF holds mxfp4 = type 39 and nvfp4 = type 40)", sch);
    t->nv = t->s.id == LOFP_SCHEME_NVFP4;
    t->s.threads = o->threads;
    t->blk = t->nv ? 64 : 32;
    t->type = t->nv ? GG_NVFP4 : GG_MXFP4;
    t->bytes = t->nv ? 36 : 17;
    const lofp_status st = lofp_ck_profile_scheme(o, LOFP_CKPT_GGUF, &t->s, err);
    if (st) return st;
    t->two = t->nv && t->s.two_level;
    return LOFP_OK;
}

lofp_status lofp_ck_convert_llama_dir(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err);
lofp_status lofp_ck_convert_llama_dir(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err)
{
    gg_target tg;
    lofp_status st = lofp_gg_target(o, &tg, err);
    if (st) return st;
    lofp_scheme s = tg.s;
    const int nv = tg.nv, two = tg.two;
    const uint32_t gblk = tg.blk, gtype = tg.type, gbytes = tg.bytes;
    const char *const sch = nv ? "nvfp4" : "mxfp4";
    ck_method cm;
    st = lofp_ck_method_open(&cm, o->method, o->calibration, o->damp, o->act_order, o->mse_scales, s.profile, o->threads, err);
    if (st) return st;
    ck_model m;
    st = lofp_ck_model_open(in, &m, err);
    if (st) { lofp_ck_method_close(&cm); return st; }
    const char *mt = lofp_ckj_str(lofp_ckj_get(m.config, "model_type"));
    lplan *p = NULL;
    gg_out_tensor *ot = NULL;
    lofp_sbuf kv = { 0 };
    if (!m.config || !mt || strcmp(mt, "llama")) {
        st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                     "%s: model_type '%s': lofp writes GGUF from a model directory for the llama architecture only; convert "
                     "this one with llama.cpp's convert_hf_to_gguf.py (e.g. --outtype bf16), then requantize that file: "
                     "lofp convert --to gguf MODEL.gguf OUT.gguf", in, mt ? mt : "(none)");
        goto done;
    }
    /* hyperparameters: integers where present, the head counts dividing the dimensions */
    long long H, nh, nkvh, L, hd, I, V, ctx;
    const long long U32 = 0xFFFFFFFFll;
    if ((st = cfg_uint(&m, "hidden_size", 0, 1, U32, &H, err)) || (st = cfg_uint(&m, "num_attention_heads", 0, 1, U32, &nh, err)) ||
        (st = cfg_uint(&m, "num_hidden_layers", 0, 1, 1 << 20, &L, err))) goto done;
    if (!H || !nh || !L) {
        st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: hidden_size, num_attention_heads and num_hidden_layers are needed", in);
        goto done;
    }
    if ((st = cfg_uint(&m, "num_key_value_heads", nh, 1, nh, &nkvh, err)) || (st = cfg_uint(&m, "head_dim", H / nh, 2, U32, &hd, err)) ||
        (st = cfg_uint(&m, "intermediate_size", 0, 1, U32, &I, err)) || (st = cfg_uint(&m, "vocab_size", 0, 1, U32, &V, err)) ||
        (st = cfg_uint(&m, "max_position_embeddings", 2048, 1, U32, &ctx, err))) goto done;
    if (!lofp_ckj_get(m.config, "head_dim") && H % nh) {
        st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: hidden_size %lld is not a multiple of num_attention_heads %lld (and no head_dim)", in, H, nh);
        goto done;
    }
    if (nh % nkvh || hd % 2 || (unsigned long long)nh * (unsigned long long)hd > (unsigned long long)U32) {
        st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: num_attention_heads %lld, num_key_value_heads %lld, head_dim %lld: the KV heads "
                     "must divide the heads and head_dim must be even", in, nh, nkvh, hd);
        goto done;
    }
    double eps, theta = 10000.0;
    if ((st = cfg_pos(&m, m.config, "", "rms_norm_eps", 1e-5, &eps, err))) goto done;
    /* RoPE: transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; older configs
     * rope_theta and rope_scaling {rope_type or type, ...} */
    const ckj *rp = lofp_ckj_get(m.config, "rope_parameters");
    if (rp && rp->type != CKJ_OBJ && rp->type != CKJ_NULL) { st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: rope_parameters is not an object", in); goto done; }
    if (rp && rp->type == CKJ_NULL) rp = NULL;
    if (lofp_ckj_get(rp, "full_attention") || lofp_ckj_get(rp, "sliding_attention")) {
        /* per-layer-type RoPE (transformers 5's nested form): not a llama model's */
        st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s/config.json: rope_parameters per layer type (full_attention / sliding_attention): "
                     "lofp writes one RoPE for every llama layer; convert with llama.cpp's convert_hf_to_gguf.py, then requantize", in);
        goto done;
    }
    if (lofp_ckj_get(rp, "rope_theta")) st = cfg_pos(&m, rp, "rope_parameters.", "rope_theta", 10000.0, &theta, err);
    else st = cfg_pos(&m, m.config, "", "rope_theta", 10000.0, &theta, err);
    if (st) goto done;
    const ckj *rs = rp ? rp : lofp_ckj_get(m.config, "rope_scaling");
    const char *rope_type = lofp_ckj_str(lofp_ckj_get(rs, "rope_type"));
    if (!rope_type) rope_type = lofp_ckj_str(lofp_ckj_get(rs, "type"));
    if (rs && rs->type == CKJ_OBJ && !rope_type && !rp) { st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: rope_scaling has no rope_type", in); goto done; }
    double rope_factor = 1.0, lf = 1.0, hf = 4.0;
    long long orig_ctx = 8192;
    int rope_kind = 0; /* 0 none, 1 linear, 2 llama3 */
    if (rope_type && strcmp(rope_type, "default")) {
        const char *where = rp ? "rope_parameters." : "rope_scaling.";
        if (!strcmp(rope_type, "linear")) rope_kind = 1;
        else if (!strcmp(rope_type, "llama3")) rope_kind = 2;
        else {
            st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s/config.json: %srope_type '%s': lofp writes GGUF RoPE for the types default, "
                         "linear and llama3 only; convert with llama.cpp's convert_hf_to_gguf.py, then requantize", in, where, rope_type);
            goto done;
        }
        if ((st = cfg_pos(&m, rs, where, "factor", rope_kind == 2 ? 8.0 : 1.0, &rope_factor, err)) ||
            (st = cfg_pos(&m, rs, where, "low_freq_factor", 1.0, &lf, err)) || (st = cfg_pos(&m, rs, where, "high_freq_factor", 4.0, &hf, err)))
            goto done;
        if (rope_kind == 2) {
            const ckj *oc = lofp_ckj_get(rs, "original_max_position_embeddings");
            if (!oc) oc = lofp_ckj_get(m.config, "original_max_position_embeddings");
            if (oc && (!lofp_ckj_int(oc, &orig_ctx) || orig_ctx < 1 || orig_ctx > U32)) {
                st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: original_max_position_embeddings is not a positive integer", in);
                goto done;
            }
            if (!(hf > lf)) {
                st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: %shigh_freq_factor %g is not above low_freq_factor %g", in, where, hf, lf);
                goto done;
            }
        }
    }
    p = calloc(2 * m.n_t + 2, sizeof *p);
    ot = calloc(2 * m.n_t + 2, sizeof *ot);
    unsigned char *seen = calloc((size_t)L * 9 + 1, 1);
    if (!p || !ot || !seen) { free(seen); st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
    /* the embedding's rows are the vocabulary GGUF holds; config.json's vocab_size must agree */
    const ck_tref *emb = lofp_ck_model_find(&m, "model.embed_tokens.weight");
    if (!emb || emb->ti->ndim != 2 || emb->ti->shape[1] != (size_t)H) {
        st = lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: model.embed_tokens.weight %s; a llama model needs it as [vocab, hidden_size = %lld]", in,
                     emb ? "has the wrong shape" : "is missing", H);
        free(seen);
        goto done;
    }
    size_t n_vocab = emb->ti->shape[0];
    if (V && (size_t)V != n_vocab) {
        st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s/config.json: vocab_size %lld, but model.embed_tokens.weight has %zu rows", in, V, n_vocab);
        free(seen);
        goto done;
    }
    size_t np = 0, nq = 0;
    for (size_t i = 0; i < m.n_t; i++) {
        const ck_tref *r = &m.t[i];
        const lofp_tensor_info *ti = r->ti;
        const char *shard = m.shards[r->shard].name;
        if (lofp_ck_ends_with(r->name, "rotary_emb.inv_freq")) continue;
        int pq, pk;
        lplan *q = &p[np];
        if (!map_name(r->name, q->name, sizeof q->name, &pq, &pk)) {
            st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' has no name in llama.cpp's llama architecture (lofp maps embed, "
                         "norms, q/k/v/o and gate/up/down); convert with llama.cpp's convert_hf_to_gguf.py, then requantize", shard, r->name);
            break;
        }
        if (!lofp_dtype_is_float(ti->dtype)) { st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' is %s", shard, r->name, lofp_dtype_name(ti->dtype)); break; }
        /* the shape llama.cpp's llama architecture expects for this tensor, from config.json */
        size_t want_shape[2] = { 0, 0 }, want_nd = 2;
        unsigned layer = 0;
        int slot = -1;
        const char *gn = q->name;
        if (sscanf(gn, "blk.%u.", &layer) == 1) {
            static const char *const slots[9] = { "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "attn_norm.weight",
                                                  "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight" };
            const char *rest = strchr(gn + 4, '.') + 1;
            for (int k = 0; k < 9; k++) if (!strcmp(rest, slots[k])) slot = k;
            if (layer >= (unsigned long long)L) {
                st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s' is in layer %u, but config.json's num_hidden_layers is %lld", shard, r->name, layer, L);
                break;
            }
            if (seen[(size_t)layer * 9 + (size_t)slot]) {
                st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: tensor '%s' is a second %s (its layer number is written two ways)", shard, r->name, gn);
                break;
            }
            seen[(size_t)layer * 9 + (size_t)slot] = 1;
            size_t qd = (size_t)(nh * hd), kd = (size_t)(nkvh * hd);
            switch (slot) {
            case 0: want_shape[0] = qd; want_shape[1] = (size_t)H; break;
            case 1: case 2: want_shape[0] = kd; want_shape[1] = (size_t)H; break;
            case 3: want_shape[0] = (size_t)H; want_shape[1] = qd; break;
            case 4: case 5: want_nd = 1; want_shape[0] = (size_t)H; break;
            case 6: case 7: case 8:
                if (!I && ti->ndim == 2) I = (long long)ti->shape[slot == 8 ? 1 : 0]; /* no intermediate_size: the first FFN tensor's */
                want_shape[0] = slot == 8 ? (size_t)H : (size_t)I;
                want_shape[1] = slot == 8 ? (size_t)I : (size_t)H;
                break;
            }
        } else if (!strcmp(gn, "output_norm.weight")) { want_nd = 1; want_shape[0] = (size_t)H; }
        else { want_shape[0] = n_vocab; want_shape[1] = (size_t)H; } /* token_embd, output */
        if (ti->ndim != want_nd || ti->shape[0] != want_shape[0] || (want_nd == 2 && ti->shape[1] != want_shape[1])) {
            char got[160] = "[";
            size_t o2 = 1;
            for (size_t d = 0; d < ti->ndim && o2 < sizeof got - 24; d++) o2 += (size_t)snprintf(got + o2, sizeof got - o2, "%s%zu", d ? ", " : "", ti->shape[d]);
            snprintf(got + o2, sizeof got - o2, "%s", o2 < sizeof got - 24 ? "]" : ", ...]");
            if (want_nd == 1)
                st = lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s' has shape %s; llama.cpp's llama architecture expects [%zu] (hidden_size)", shard,
                             r->name, got, want_shape[0]);
            else
                st = lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s' has shape %s; llama.cpp's llama architecture expects [%zu, %zu] from config.json "
                             "(hidden_size %lld, heads %lld x head_dim %lld, KV heads %lld, intermediate_size %lld, vocab %zu)", shard, r->name, got,
                             want_shape[0], want_shape[1], H, nh, hd, nkvh, I, n_vocab);
            break;
        }
        q->src = r;
        q->permute_heads = pq ? (int)nh : pk ? (int)nkvh : 0;
        int want = ti->ndim == 2 && !lofp_ck_globs_match((const char *const[]){ "token_embd*", "output.weight", "*norm*" }, 3, q->name);
        if (lofp_ck_globs_match(o->include, o->n_include, r->name) && ti->ndim == 2) want = 1;
        if (lofp_ck_globs_match(o->exclude, o->n_exclude, r->name)) want = 0;
        if (want && ti->shape[1] % gblk) {
            st = lofp_ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s' [%zu, %zu]: rows of %zu values are not whole GGUF %s blocks of %u; GGUF "
                         "cannot pad; keep it unquantized with --exclude '%s'", shard, r->name, ti->shape[0], ti->shape[1],
                         ti->shape[1], sch, gblk, r->name);
            break;
        }
        gg_out_tensor *u = &ot[np];
        u->name = q->name;
        u->n_dims = (uint32_t)ti->ndim;
        for (size_t d = 0; d < 4; d++) u->ne[d] = d < ti->ndim ? ti->shape[ti->ndim - 1 - d] : 1;
        size_t numel = ti->numel;
        if (want) {
            q->kind = 1;
            u->type = gtype;
            u->nbytes = numel / gblk * gbytes;
            nq++;
        } else if (ti->ndim == 1 || ti->dtype == LOFP_DTYPE_F64 || q->permute_heads) {
            q->kind = 2;
            u->type = GG_F32;
            u->nbytes = numel * 4;
        } else {
            q->kind = 0;
            u->type = ti->dtype == LOFP_DTYPE_F32 ? GG_F32 : ti->dtype == LOFP_DTYPE_F16 ? GG_F16 : GG_BF16;
            u->nbytes = ti->nbytes;
        }
        np++;
        if (want && two) {
            lplan *sc = &p[np];
            sc->kind = 3;
            char base[80];
            memcpy(base, q->name, sizeof base);
            snprintf(sc->name, sizeof sc->name, "%.*s.scale", (int)(strlen(base) - 7), base);
            gg_out_tensor *v = &ot[np];
            v->name = sc->name;
            v->n_dims = 1;
            v->ne[0] = v->ne[1] = v->ne[2] = v->ne[3] = 1;
            v->type = GG_F32;
            v->nbytes = 4;
            np++;
        }
    }
    /* every layer complete: llama.cpp refuses a model with a tensor missing */
    for (size_t k = 0; !st && k < (size_t)L * 9; k++)
        if (!seen[k]) {
            static const char *const hfn[9] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "input_layernorm",
                                                "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };
            st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: model.layers.%zu.%s.weight is missing (config.json's num_hidden_layers is %lld)", in, k / 9,
                         hfn[k % 9], L);
        }
    free(seen);
    if (!st && !lofp_ck_model_find(&m, "model.norm.weight"))
        st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: model.norm.weight is missing", in);
    if (st) goto done;
    /* Llama 3.1's RoPE: per-frequency factors in rope_freqs.weight, computed from the
     * rope_parameters as llama.cpp's converter computes them (fp32 inverse frequencies, the
     * wavelength bands in double); llama.cpp divides each frequency by its factor */
    if (rope_kind == 2) {
        lplan *q = &p[np];
        q->kind = 4;
        snprintf(q->name, sizeof q->name, "rope_freqs.weight");
        size_t nf = (size_t)hd / 2;
        q->freqs = malloc(nf * sizeof *q->freqs);
        if (!q->freqs) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
        double low_wl = (double)orig_ctx / lf, high_wl = (double)orig_ctx / hf;
        for (size_t i = 0; i < nf; i++) {
            float fr = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd);
            double wl = 2.0 * 3.14159265358979323846 / (double)fr, f;
            if (wl < high_wl) f = 1.0;
            else if (wl > low_wl) f = rope_factor;
            else {
                double smooth = ((double)orig_ctx / wl - lf) / (hf - lf);
                f = 1.0 / ((1.0 - smooth) / rope_factor + smooth);
            }
            q->freqs[i] = (float)f;
        }
        gg_out_tensor *u = &ot[np];
        u->name = q->name;
        u->n_dims = 1;
        u->ne[0] = nf;
        u->ne[1] = u->ne[2] = u->ne[3] = 1;
        u->type = GG_F32;
        u->nbytes = nf * 4;
        np++;
    }
    uint64_t nkv = 0;
    const char *slash = strrchr(m.dir, '/');
    lofp_gg_put_kv_str(&kv, "general.architecture", "llama");
    lofp_gg_put_kv_str(&kv, "general.name", slash && slash[1] ? slash + 1 : m.dir);
    lofp_gg_put_kv_u32(&kv, "general.file_type", nv ? 39u : 38u);
    lofp_gg_put_kv_u32(&kv, "general.quantization_version", 2);
    nkv += 4;
    lofp_gg_put_kv_u32(&kv, "llama.block_count", (uint32_t)L);
    lofp_gg_put_kv_u32(&kv, "llama.context_length", (uint32_t)ctx);
    lofp_gg_put_kv_u32(&kv, "llama.embedding_length", (uint32_t)H);
    lofp_gg_put_kv_u32(&kv, "llama.feed_forward_length", (uint32_t)I);
    lofp_gg_put_kv_u32(&kv, "llama.attention.head_count", (uint32_t)nh);
    lofp_gg_put_kv_u32(&kv, "llama.attention.head_count_kv", (uint32_t)nkvh);
    lofp_gg_put_kv_f32(&kv, "llama.rope.freq_base", (float)theta);
    lofp_gg_put_kv_f32(&kv, "llama.attention.layer_norm_rms_epsilon", (float)eps);
    lofp_gg_put_kv_u32(&kv, "llama.rope.dimension_count", (uint32_t)hd);
    lofp_gg_put_kv_u32(&kv, "llama.vocab_size", (uint32_t)n_vocab);
    nkv += 10;
    if (rope_kind == 1) {
        /* linear position interpolation: what llama.cpp's converter writes for it */
        lofp_gg_put_kv_str(&kv, "llama.rope.scaling.type", "linear");
        lofp_gg_put_kv_f32(&kv, "llama.rope.scaling.factor", (float)rope_factor);
        nkv += 2;
    }
    char pre[32] = "";
    st = tokenizer_kvs(&m, n_vocab, &kv, &nkv, pre, sizeof pre, err);
    if (st) goto done;
    if (kv.failed) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
    gg_writer *w = NULL;
    st = lofp_gg_writer_open(out, 32, kv.p, kv.len, nkv, ot, np, &w, err);
    float G = 1.0f;
    for (size_t i = 0; !st && i < np; i++) {
        lplan *q = &p[i];
        if (q->kind == 3) {
            float d = lofp_nvfp4_decode_from_encode(G);
            st = lofp_gg_writer_put(w, &d, 4, err);
        } else if (q->kind == 4) st = lofp_gg_writer_put(w, q->freqs, (size_t)hd / 2 * 4, err);
        else if (q->kind == 0) st = lofp_gg_writer_put(w, q->src->ti->data, q->src->ti->nbytes, err);
        else {
            const lofp_tensor_info *ti = q->src->ti;
            size_t n = ti->numel, K = ti->shape[ti->ndim - 1], rows = n / K;
            float *x = malloc(n * sizeof *x);
            if (!x) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
            if (q->permute_heads) {
                /* HF rows h*hd + t*hd/2 + j  ->  GGUF rows h*hd + 2j + t */
                size_t half = (size_t)hd / 2;
                for (size_t h = 0; h < (size_t)q->permute_heads; h++)
                    for (size_t t = 0; t < 2; t++)
                        for (size_t j = 0; j < half; j++) {
                            size_t src = h * (size_t)hd + t * half + j, dst = h * (size_t)hd + 2 * j + t;
                            for (size_t c = 0; c < K; c++) x[dst * K + c] = lofp_dtype_load_f32(ti->dtype, ti->data, src * K + c);
                        }
            } else
                for (size_t j = 0; j < n; j++) x[j] = lofp_dtype_load_f32(ti->dtype, ti->data, j);
            if (q->kind == 2) st = lofp_gg_writer_put(w, x, n * 4, err);
            else {
                size_t cb = n / 2, sb = n / s.block;
                uint8_t *codes = malloc(cb), *split = malloc(cb), *scales = malloc(sb), *blk = malloc(n / gblk * gbytes);
                lofp_quant_report rep;
                ck_plan plan;
                memset(&plan, 0, sizeof plan);
                if (!codes || !split || !scales || !blk) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                else if (!(st = lofp_ck_method_plan(&cm, q->src->name, K, &plan, err))) {
                    lofp_status qs = lofp_ck_quantize_whole(&s, &plan.p, x, rows, K, codes, scales, &G, &rep);
                    if (qs == LOFP_ERR_NONFINITE) {
                        /* report the element as the input stores it: undo the q/k head permutation */
                        size_t row = rep.first_bad_index / K, col = rep.first_bad_index % K;
                        if (q->permute_heads) {
                            size_t half = (size_t)hd / 2, r = row % (size_t)hd;
                            row = row - r + (r % 2) * half + r / 2;
                        }
                        float v = lofp_dtype_load_f32(ti->dtype, ti->data, row * K + col);
                        st = lofp_ck_fail(err, qs, "%s: tensor '%s' holds %s at flat index %zu (row %zu, column %zu)",
                                     m.shards[q->src->shard].name, q->src->name, v != v ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                                     row * K + col, row, col);
                    } else if (qs)
                        st = lofp_ck_fail(err, qs, "%s: tensor '%s': quantize failed (%s)", m.shards[q->src->shard].name,
                                     q->src->name, lofp_status_name(qs));
                }
                if (!st) lofp_fp4_repack(codes, split, rows, K, nv ? 16 : 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF);
                for (size_t b = 0; !st && b < n / gblk; b++) {
                    uint8_t *o2 = blk + b * gbytes;
                    if (nv) { memcpy(o2, scales + 4 * b, 4); memcpy(o2 + 4, split + 32 * b, 32); }
                    else { o2[0] = scales[b]; memcpy(o2 + 1, split + 16 * b, 16); }
                }
                if (!st) st = lofp_gg_writer_put(w, blk, n / gblk * gbytes, err);
                lofp_ck_plan_release(&plan);
                free(codes); free(split); free(scales); free(blk);
            }
            free(x);
        }
        if (!st) st = lofp_gg_writer_end_tensor(w, err);
        if (!st && o->progress) o->progress(o->ctx, out, 0, 1, i + 1, np);
    }
    if (w) { if (!st) st = lofp_gg_writer_finish(w, err); else lofp_gg_writer_abort(w); }
    if (!st && o->note) {
        char line[200];
        snprintf(line, sizeof line, "llama: %zu tensors quantized to %s (GGUF type %u), %zu tensors, %llu key-value pairs; rope "
                 "freq_base %g%s; pre-tokenizer %s", nq, sch, gtype, np, (unsigned long long)nkv, theta,
                 rope_kind == 2 ? ", llama3 factors in rope_freqs.weight" : rope_kind == 1 ? ", linear scaling" : "", pre);
        o->note(o->ctx, line);
    }
done:
    lofp_sbuf_free(&kv);
    for (size_t i = 0; p && i < 2 * m.n_t + 2; i++) free(p[i].freqs);
    free(p);
    free(ot);
    lofp_ck_model_close(&m);
    lofp_ck_method_close(&cm);
    if (!st) lofp_ck_ok(err);
    return st;
}
